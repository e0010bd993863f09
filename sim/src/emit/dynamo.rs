//! The deployment as a Dynamo `DynamoGraphDeployment` (nvidia.com/v1alpha1,
//! the custom resource of NVIDIA Dynamo's Kubernetes operator, laid out as
//! its `examples/backends/vllm/deploy/disagg.yaml`): a `Frontend` that
//! routes requests, and one vLLM worker service per pool running
//! `python3 -m dynamo.vllm` with the pool's engine flags — prefill workers
//! (`--is-prefill-worker`) and decode workers (`--is-decode-worker`) for a
//! disaggregated fleet, aggregated workers otherwise.

use super::engine_args::{launch, Engine};
use super::{comment_lines, pools, Emitted, Format};
use crate::scenario::{PoolRole, RouterKind, Scenario};
use serde_json::{json, Map, Value};

/// Dynamo's vLLM runtime image; `VERSION` is the Dynamo release to run.
pub const RUNTIME_IMAGE: &str = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:VERSION";

/// Flags `dynamo.vllm` sets itself: the endpoint (Dynamo's runtime serves
/// it) and the KV connector (NIXL between its workers).
const OWN_FLAGS: [&str; 3] = ["--host", "--port", "--kv-transfer-config"];

/// A service name in Dynamo's style ("VllmPrefillWorker").
fn service_name(role: PoolRole, pool: &str, several: bool) -> String {
    let base = match role {
        PoolRole::Prefill => "VllmPrefillWorker",
        PoolRole::Decode => "VllmDecodeWorker",
        PoolRole::Colocated => "VllmWorker",
    };
    if !several {
        return base.to_string();
    }
    let mut suffix = String::new();
    let mut upper = true;
    for c in pool.chars() {
        if c.is_ascii_alphanumeric() {
            suffix.push(if upper { c.to_ascii_uppercase() } else { c });
            upper = false;
        } else {
            upper = true;
        }
    }
    format!("{base}{suffix}")
}

/// The frontend's router mode for the simulated router, when Dynamo has it.
fn router_mode(r: RouterKind) -> Option<&'static str> {
    match r {
        RouterKind::RoundRobin => Some("round-robin"),
        RouterKind::Random => Some("random"),
        // Dynamo's KV router scores workers by cached prefix overlap and load.
        RouterKind::PrefixAffinity => Some("kv"),
        _ => None,
    }
}

/// The graph of the deployment `s` describes.
pub fn graph(s: &Scenario) -> Emitted {
    let mut notes = Vec::new();
    let mut services = Map::new();
    let router = s.router();
    let mut frontend_args = Vec::new();
    match router_mode(router) {
        Some(m) => frontend_args.extend(["--router-mode".to_string(), m.to_string()]),
        None => notes.push(format!(
            "router {}: Dynamo's frontend routes round-robin, at random or by KV overlap (--router-mode kv); the emitted frontend uses its default",
            router.name()
        )),
    }
    services.insert(
        "Frontend".into(),
        json!({
            "componentType": "frontend",
            "replicas": 1,
            "extraPodSpec": {
                "mainContainer": {
                    "image": RUNTIME_IMAGE,
                    "command": ["python3", "-m", "dynamo.frontend"],
                    "args": frontend_args,
                },
            },
        }),
    );
    let all = pools(s);
    for pool in &all {
        let several = all.iter().filter(|p| p.role == pool.role).count() > 1;
        let l = launch(Engine::Vllm, pool);
        notes.extend(
            l.notes
                .iter()
                .filter(|n| !n.starts_with("role "))
                .map(|n| format!("pool {}: {n}", pool.name)),
        );
        let mut args = vec!["--model".to_string(), l.program[2].clone()];
        for (f, v) in &l.flags {
            if OWN_FLAGS.contains(&f.as_str()) {
                continue;
            }
            args.push(f.clone());
            args.extend(v.clone());
        }
        match pool.role {
            PoolRole::Prefill => args.push("--is-prefill-worker".into()),
            PoolRole::Decode => args.push("--is-decode-worker".into()),
            PoolRole::Colocated => {}
        }
        let ps = pool.replica;
        let gpus = ps.parallel.gpus();
        let nodes = ps.parallel.nodes(ps.hardware.gpus_per_node.max(1));
        let mut svc = json!({
            "componentType": "worker",
            "replicas": pool.replicas,
            "resources": { "limits": { "gpu": gpus.div_ceil(nodes).to_string() } },
            "extraPodSpec": {
                "mainContainer": {
                    "image": RUNTIME_IMAGE,
                    "command": ["python3", "-m", "dynamo.vllm"],
                    "args": args,
                },
            },
        });
        if pool.role != PoolRole::Colocated {
            svc["subComponentType"] = json!(pool.role.name());
        }
        if nodes > 1 {
            // The operator spreads one worker over this many nodes.
            svc["multinode"] = json!({ "nodeCount": nodes });
        }
        services.insert(service_name(pool.role, pool.name, several), svc);
    }
    if let Some(kt) = s
        .pools
        .iter()
        .find(|p| p.role == PoolRole::Prefill)
        .map(|_| s.kv_transfer())
    {
        notes.push(format!(
            "fleet.kv_transfer ({} GB/s per link): the bandwidth is the network's, not a setting; NIXL moves the KV cache over whatever links the pods get",
            kt.bandwidth_gbyte_s
        ));
    }
    notes.push("image: replace VERSION with the Dynamo release to run".into());
    notes.dedup();
    let doc = json!({
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": { "name": super::kubernetes::dns_name(s.name()) },
        "spec": { "services": Value::Object(services) },
    });
    let mut text = format!(
        "# Dynamo graph for {:?} as servesim simulated it.\n",
        s.name()
    );
    text.push_str(&comment_lines(&notes));
    text.push_str("---\n");
    text.push_str(&serde_norway::to_string(&doc).expect("a JSON value is YAML"));
    Emitted {
        file: Format::Dynamo.file().to_string(),
        text,
        notes,
    }
}
