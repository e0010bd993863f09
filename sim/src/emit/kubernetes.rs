//! The deployment as Kubernetes objects running vLLM's OpenAI server
//! (`vllm/vllm-openai`): per pool a `Deployment` (apps/v1) whose pods each
//! request one replica's GPUs, or a `LeaderWorkerSet`
//! (leaderworkerset.x-k8s.io/v1, the Kubernetes SIG's API for multi-node
//! replicas, as vLLM's multi-node guide runs it over Ray) when one replica
//! spans nodes; a `Service` per pool; and with a target autoscaler an
//! `HorizontalPodAutoscaler` (autoscaling/v2) on the metric the simulation
//! scaled by. Objects are written with `serde_norway` as one multi-document
//! YAML file.

use super::engine_args::{launch, Engine, Launch};
use super::{comment_lines, disaggregated, pools, Emitted, Format, Pool};
use crate::scenario::lifecycle_cfg::{AutoscalePolicy, ScaleMetric};
use crate::scenario::Scenario;
use serde_json::{json, Value};

/// vLLM's published server image.
pub const VLLM_IMAGE: &str = "vllm/vllm-openai:latest";

/// A name Kubernetes accepts (RFC 1123 label: lowercase letters, digits
/// and '-', at most 63 characters, alphanumeric at both ends).
pub fn dns_name(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.truncate(63);
    let t = out.trim_matches('-').to_string();
    if t.is_empty() {
        "servesim".into()
    } else {
        t
    }
}

/// The device plugin's resource name for the chip's GPUs.
pub fn gpu_resource(hardware: &str) -> &'static str {
    if hardware.to_ascii_uppercase().starts_with("MI") {
        "amd.com/gpu"
    } else {
        "nvidia.com/gpu"
    }
}

/// A Kubernetes quantity for a metric target: whole numbers as they are,
/// fractions in thousandths ("800m").
fn quantity(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        format!("{}m", (v * 1000.0).round() as i64)
    }
}

/// The metric a Prometheus adapter exposes for the simulated autoscaler's
/// signal (vLLM's `/metrics` names, DCGM's for GPU duty cycle), and the
/// per-pod target value in its units.
fn hpa_metric(metric: ScaleMetric, target: f64) -> (&'static str, &'static str, f64) {
    match metric {
        ScaleMetric::QueueDepth => (
            "vllm_num_requests_waiting",
            "vllm:num_requests_waiting",
            target,
        ),
        ScaleMetric::Running => (
            "vllm_num_requests_running",
            "vllm:num_requests_running",
            target,
        ),
        ScaleMetric::KvUse => (
            "vllm_kv_cache_usage_perc",
            "vllm:kv_cache_usage_perc",
            target,
        ),
        // DCGM reports utilization in percent.
        ScaleMetric::Utilization => (
            "DCGM_FI_DEV_GPU_UTIL",
            "DCGM_FI_DEV_GPU_UTIL",
            target * 100.0,
        ),
        ScaleMetric::Rps => (
            "vllm_request_success_per_second",
            "rate(vllm:request_success_total[1m])",
            target,
        ),
    }
}

/// The container of one replica (or of a multi-node replica's leader).
fn container(l: &Launch, gpus: u32, resource: &str, command: Value, args: Value) -> Value {
    json!({
        "name": "vllm",
        "image": VLLM_IMAGE,
        "command": command,
        "args": args,
        "ports": [{ "name": "http", "containerPort": l.engine.port() }],
        "resources": {
            "limits": { resource: gpus },
            "requests": { resource: gpus },
        },
        "readinessProbe": {
            "httpGet": { "path": "/health", "port": l.engine.port() },
            "periodSeconds": 10,
        },
        "volumeMounts": [{ "name": "shm", "mountPath": "/dev/shm" }],
    })
}

/// Shared memory for NCCL between a pod's GPUs.
fn shm() -> Value {
    json!([{ "name": "shm", "emptyDir": { "medium": "Memory" } }])
}

/// The objects of one pool, and its notes.
fn pool_objects(app: &str, pool: &Pool<'_>, notes: &mut Vec<String>) -> Vec<Value> {
    let s = pool.replica;
    let l = launch(Engine::Vllm, pool);
    notes.extend(l.notes.iter().map(|n| format!("pool {}: {n}", pool.name)));
    let name = dns_name(&format!("{app}-{}", pool.name));
    let labels = json!({
        "app.kubernetes.io/name": app,
        "app.kubernetes.io/component": dns_name(pool.name),
        "app.kubernetes.io/managed-by": "servesim",
    });
    let resource = gpu_resource(&s.hardware.name);
    let per_node = s.hardware.gpus_per_node.max(1);
    let gpus = s.parallel.gpus();
    let nodes = s.parallel.nodes(per_node);
    let mut objects = Vec::new();
    let (kind, api) = if nodes <= 1 {
        let c = container(
            &l,
            gpus,
            resource,
            json!(["vllm", "serve"]),
            json!(l.argv()[2..]),
        );
        objects.push(json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": { "name": name, "labels": labels },
            "spec": {
                "replicas": pool.replicas,
                "selector": { "matchLabels": labels },
                "template": {
                    "metadata": { "labels": labels },
                    "spec": { "containers": [c], "volumes": shm() },
                },
            },
        }));
        ("Deployment", "apps/v1")
    } else {
        // One group of `nodes` pods per replica: the leader starts Ray's
        // head and the server over all of the group's GPUs, the workers
        // join it (vLLM's multi-node serving with LeaderWorkerSet).
        let per_pod = gpus.div_ceil(nodes);
        let serve = l
            .argv()
            .iter()
            .map(|w| shell_word(w))
            .collect::<Vec<_>>()
            .join(" ");
        let leader = container(
            &l,
            per_pod,
            resource,
            json!(["/bin/sh", "-c"]),
            json!([format!(
                "ray start --head --port=6379 && {serve} --distributed-executor-backend ray"
            )]),
        );
        let mut worker = container(
            &l,
            per_pod,
            resource,
            json!(["/bin/sh", "-c"]),
            json!(["ray start --address=$LWS_LEADER_ADDRESS:6379 --block"]),
        );
        if let Some(w) = worker.as_object_mut() {
            w.remove("readinessProbe");
            w.remove("ports");
        }
        objects.push(json!({
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": { "name": name, "labels": labels },
            "spec": {
                "replicas": pool.replicas,
                "leaderWorkerTemplate": {
                    "size": nodes,
                    "restartPolicy": "RecreateGroupOnPodRestart",
                    "leaderTemplate": {
                        "metadata": { "labels": labels },
                        "spec": { "containers": [leader], "volumes": shm() },
                    },
                    "workerTemplate": {
                        "spec": { "containers": [worker], "volumes": shm() },
                    },
                },
            },
        }));
        if gpus % nodes != 0 {
            notes.push(format!(
                "pool {}: {gpus} GPUs over {nodes} nodes do not divide evenly; each pod requests {per_pod}",
                pool.name
            ));
        }
        ("LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1")
    };
    let mut selector = labels.clone();
    if kind == "LeaderWorkerSet" {
        // Only leaders serve HTTP.
        selector["leaderworkerset.sigs.k8s.io/worker-index"] = json!("0");
    }
    objects.push(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": { "name": name, "labels": labels },
        "spec": {
            "selector": selector,
            "ports": [{ "name": "http", "port": l.engine.port(), "targetPort": "http" }],
        },
    }));
    if let Some(hpa) = autoscaler(&name, kind, api, pool, notes) {
        objects.push(hpa);
    }
    objects
}

/// The HPA of a pool whose scenario has a target autoscaler (`None`
/// otherwise, with a note for a schedule).
fn autoscaler(
    name: &str,
    kind: &str,
    api: &str,
    pool: &Pool<'_>,
    notes: &mut Vec<String>,
) -> Option<Value> {
    let a = pool.autoscale?;
    match a.policy {
        AutoscalePolicy::Fixed => return None,
        AutoscalePolicy::Schedule => {
            notes.push(format!(
                "pool {}: autoscale schedule: its steps are seconds from the run's start, not times of day; write them as KEDA cron triggers (keda.sh/v1alpha1 ScaledObject) at your clock times",
                pool.name
            ));
            return None;
        }
        AutoscalePolicy::Target => {}
    }
    let target = a.target_value?;
    let (metric, source, value) = hpa_metric(a.metric, target);
    let max = a
        .max_replicas
        .unwrap_or(pool.replicas)
        .max(a.min_replicas)
        .max(1);
    notes.push(format!(
        "pool {}: the HPA reads the per-pod metric {metric}; a Prometheus adapter must expose {source} under that name",
        pool.name
    ));
    if a.sync_period_s != 15.0 || a.tolerance != 0.1 {
        notes.push(format!(
            "pool {}: autoscale sync_period_s {} and tolerance {}: cluster-wide kube-controller-manager flags (--horizontal-pod-autoscaler-sync-period, --horizontal-pod-autoscaler-tolerance), not part of the HPA object",
            pool.name, a.sync_period_s, a.tolerance
        ));
    }
    if a.scale_up_cooldown_s > 0.0 || a.scale_down_cooldown_s > 0.0 {
        notes.push(format!(
            "pool {}: autoscale cooldowns ({} s up, {} s down): the HPA has no cooldown; its stabilization windows are written instead",
            pool.name, a.scale_up_cooldown_s, a.scale_down_cooldown_s
        ));
    }
    if a.min_replicas == 0 {
        notes.push(format!(
            "pool {}: min_replicas 0 (scale to zero behind an activator): the HPA keeps at least 1; KEDA or Knative scales to zero",
            pool.name
        ));
    }
    Some(json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": { "name": name },
        "spec": {
            "scaleTargetRef": { "apiVersion": api, "kind": kind, "name": name },
            "minReplicas": a.min_replicas.max(1),
            "maxReplicas": max,
            "metrics": [{
                "type": "Pods",
                "pods": {
                    "metric": { "name": metric },
                    "target": { "type": "AverageValue", "averageValue": quantity(value) },
                },
            }],
            "behavior": {
                "scaleUp": { "stabilizationWindowSeconds": a.scale_up_stabilization_s.round() as i64 },
                "scaleDown": { "stabilizationWindowSeconds": a.scale_down_stabilization_s.round() as i64 },
            },
        },
    }))
}

/// A word for `sh -c` (the leader's command line).
fn shell_word(w: &str) -> String {
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+%".contains(c));
    if plain {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// The manifest of the deployment `s` describes.
pub fn manifest(s: &Scenario) -> Emitted {
    let app = dns_name(s.name());
    let mut notes = Vec::new();
    let mut docs = Vec::new();
    for pool in pools(s) {
        docs.extend(pool_objects(&app, &pool, &mut notes));
    }
    if disaggregated(s) {
        notes.push("disaggregated pools: plain Deployments do not route a request through a prefill and then a decode server; apply dynamo.yaml (Dynamo) or an llm-d deployment for that, or put vLLM's disaggregation proxy in front".into());
    }
    if s.pools.len() > 1 || s.replicas() > 1 {
        notes.push(format!(
            "router {}: a Service spreads connections at random; the simulated router belongs to the gateway in front (Dynamo's frontend, llm-d's inference scheduler, or the Gateway API inference extension)",
            s.router().name()
        ));
    }
    notes.dedup();
    let mut text = format!(
        "# Kubernetes objects for {:?} as servesim simulated it (vLLM's OpenAI server, {VLLM_IMAGE}).\n",
        s.name()
    );
    text.push_str(&comment_lines(&notes));
    for d in &docs {
        text.push_str("---\n");
        text.push_str(&serde_norway::to_string(d).expect("a JSON value is YAML"));
    }
    Emitted {
        file: Format::Kubernetes.file().to_string(),
        text,
        notes,
    }
}
