//! Every emitted command line parses against the engine's documented flag
//! set, and every manifest is YAML of the right kinds, for every example
//! scenario.

use super::engine_args::{launch, Engine};
use super::*;
use serde::Deserialize;
use serde_json::Value;

/// What a documented flag takes.
#[derive(Clone, Copy)]
enum Takes {
    Switch,
    Int,
    Float,
    Text,
    Json,
    OneOf(&'static [&'static str]),
}

/// `vllm serve`'s flags that servesim emits, as vLLM documents them:
/// <https://docs.vllm.ai/en/latest/cli/serve.html> (engine arguments,
/// <https://docs.vllm.ai/en/latest/configuration/engine_args.html>;
/// `--all2all-backend`'s choices from `vllm.config.parallel.All2AllBackend`).
const VLLM_FLAGS: &[(&str, Takes)] = &[
    ("--host", Takes::Text),
    ("--port", Takes::Int),
    ("--tensor-parallel-size", Takes::Int),
    ("--data-parallel-size", Takes::Int),
    ("--pipeline-parallel-size", Takes::Int),
    ("--enable-expert-parallel", Takes::Switch),
    ("--enable-eplb", Takes::Switch),
    ("--eplb-config", Takes::Json),
    ("--max-num-seqs", Takes::Int),
    ("--max-num-batched-tokens", Takes::Int),
    ("--enable-chunked-prefill", Takes::Switch),
    ("--no-enable-chunked-prefill", Takes::Switch),
    ("--enable-prefix-caching", Takes::Switch),
    ("--no-enable-prefix-caching", Takes::Switch),
    (
        "--block-size",
        Takes::OneOf(&["1", "8", "16", "32", "64", "128"]),
    ),
    ("--gpu-memory-utilization", Takes::Float),
    ("--max-model-len", Takes::Int),
    (
        "--kv-cache-dtype",
        Takes::OneOf(&["auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"]),
    ),
    (
        "--dtype",
        Takes::OneOf(&["auto", "half", "float16", "bfloat16", "float", "float32"]),
    ),
    ("--quantization", Takes::Text),
    ("--speculative-config", Takes::Json),
    ("--disable-custom-all-reduce", Takes::Switch),
    (
        "--all2all-backend",
        Takes::OneOf(&[
            "naive",
            "pplx",
            "deepep_high_throughput",
            "deepep_low_latency",
            "allgather_reducescatter",
            "flashinfer_all2allv",
        ]),
    ),
    ("--kv-transfer-config", Takes::Json),
    (
        "--distributed-executor-backend",
        Takes::OneOf(&["ray", "mp", "uni", "external_launcher"]),
    ),
];

/// `python -m sglang.launch_server`'s flags that servesim emits, as SGLang
/// documents them: <https://docs.sglang.io/advanced_features/server_arguments.html>
/// (speculative decoding's algorithms:
/// <https://docs.sglang.io/advanced_features/speculative_decoding.html>).
const SGLANG_FLAGS: &[(&str, Takes)] = &[
    ("--model-path", Takes::Text),
    ("--host", Takes::Text),
    ("--port", Takes::Int),
    ("--tp-size", Takes::Int),
    ("--dp-size", Takes::Int),
    ("--enable-dp-attention", Takes::Switch),
    ("--ep-size", Takes::Int),
    ("--pp-size", Takes::Int),
    ("--enable-eplb", Takes::Switch),
    ("--ep-num-redundant-experts", Takes::Int),
    ("--max-running-requests", Takes::Int),
    ("--max-prefill-tokens", Takes::Int),
    ("--chunked-prefill-size", Takes::Int),
    ("--disable-radix-cache", Takes::Switch),
    ("--page-size", Takes::Int),
    ("--mem-fraction-static", Takes::Float),
    ("--context-length", Takes::Int),
    (
        "--kv-cache-dtype",
        Takes::OneOf(&["auto", "fp8_e5m2", "fp8_e4m3"]),
    ),
    (
        "--dtype",
        Takes::OneOf(&["auto", "half", "float16", "bfloat16", "float", "float32"]),
    ),
    ("--quantization", Takes::Text),
    (
        "--speculative-algorithm",
        Takes::OneOf(&["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"]),
    ),
    ("--speculative-draft-model-path", Takes::Text),
    ("--speculative-num-steps", Takes::Int),
    ("--speculative-eagle-topk", Takes::Int),
    ("--speculative-num-draft-tokens", Takes::Int),
    ("--disable-custom-all-reduce", Takes::Switch),
    (
        "--moe-a2a-backend",
        Takes::OneOf(&["none", "deepep", "mooncake"]),
    ),
    (
        "--deepep-mode",
        Takes::OneOf(&["normal", "low_latency", "auto"]),
    ),
    (
        "--disaggregation-mode",
        Takes::OneOf(&["null", "prefill", "decode"]),
    ),
];

/// `python3 -m dynamo.vllm`'s own flags beside vLLM's engine arguments
/// (ai-dynamo/dynamo `examples/backends/vllm/deploy/disagg.yaml`).
const DYNAMO_VLLM_FLAGS: &[(&str, Takes)] = &[
    ("--model", Takes::Text),
    ("--is-prefill-worker", Takes::Switch),
    ("--is-decode-worker", Takes::Switch),
];

/// Parses `args` (flags only) against `table`; the error names the word.
fn parse(args: &[String], table: &[(&str, Takes)]) -> Result<(), String> {
    let mut i = 0;
    let mut seen = Vec::new();
    while i < args.len() {
        let f = &args[i];
        let Some(&(_, takes)) = table.iter().find(|(n, _)| n == f) else {
            return Err(format!("{f:?} is not a documented flag"));
        };
        if seen.contains(f) {
            return Err(format!("{f} given twice"));
        }
        seen.push(f.clone());
        i += 1;
        if let Takes::Switch = takes {
            continue;
        }
        let v = args.get(i).ok_or(format!("{f} has no value"))?;
        i += 1;
        let ok = match takes {
            Takes::Switch => true,
            Takes::Int => v.parse::<i64>().is_ok(),
            Takes::Float => v.parse::<f64>().is_ok_and(f64::is_finite),
            Takes::Text => !v.is_empty() && !v.starts_with("--"),
            Takes::Json => serde_json::from_str::<Value>(v).is_ok_and(|j| j.is_object()),
            Takes::OneOf(set) => set.contains(&v.as_str()),
        };
        if !ok {
            return Err(format!("{f} {v:?} is not a value it takes"));
        }
    }
    Ok(())
}

fn examples() -> Vec<Scenario> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() > 20, "{files:?}");
    files
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            Scenario::from_toml_str(&text, &p.display().to_string())
                .unwrap_or_else(|e| panic!("{e}"))
        })
        .collect()
}

/// A one-replica Llama-3.1-8B scenario with `extra` tables after it.
fn with(extra: &str) -> Scenario {
    let text = format!(
        r#"
name = "t"
[horizon]
requests = 100
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[workload]
arrival = {{ process = "poisson", rate = 5.0 }}
prompt_tokens = {{ dist = "fixed", value = 100 }}
output_tokens = {{ dist = "fixed", value = 10 }}
{extra}"#
    );
    Scenario::from_toml_str(&text, "<test>").unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_example_scenarios_command_lines_parse_with_the_engines_documented_flags() {
    for s in examples() {
        for pool in pools(&s) {
            let v = launch(Engine::Vllm, &pool);
            assert_eq!(v.program[..2], ["vllm", "serve"], "{}", s.origin);
            assert!(!v.program[2].starts_with("--"));
            parse(&v.args(), VLLM_FLAGS).unwrap_or_else(|e| panic!("{}: vllm: {e}", s.origin));
            let g = launch(Engine::Sglang, &pool);
            assert_eq!(g.program, ["python", "-m", "sglang.launch_server"]);
            parse(&g.args(), SGLANG_FLAGS).unwrap_or_else(|e| panic!("{}: sglang: {e}", s.origin));
            // The settings the simulation ran with are all there.
            let e = &pool.replica.engine;
            let value = |l: &Launch, f: &str| {
                l.flags
                    .iter()
                    .find(|(n, _)| n == f)
                    .and_then(|(_, v)| v.clone())
            };
            assert_eq!(
                value(&v, "--max-num-seqs"),
                Some(e.max_num_seqs.to_string())
            );
            assert_eq!(
                value(&g, "--max-running-requests"),
                Some(e.max_num_seqs.to_string())
            );
            let p = &pool.replica.parallel;
            let tp: u32 = value(&v, "--tensor-parallel-size")
                .unwrap()
                .parse()
                .unwrap();
            let dp: u32 = value(&v, "--data-parallel-size").map_or(1, |d| d.parse().unwrap());
            let pp: u32 = value(&v, "--pipeline-parallel-size").map_or(1, |d| d.parse().unwrap());
            assert_eq!(tp * dp * pp, p.gpus(), "{}: vLLM's GPUs", s.origin);
            let tp: u32 = value(&g, "--tp-size").unwrap().parse().unwrap();
            let pp: u32 = value(&g, "--pp-size").map_or(1, |d| d.parse().unwrap());
            assert_eq!(tp * pp, p.gpus(), "{}: SGLang's GPUs", s.origin);
            let chunked = e.policy == crate::config::BatchPolicyKind::Sarathi;
            assert_eq!(
                v.flags.iter().any(|(f, _)| f == "--enable-chunked-prefill"),
                chunked
            );
            assert_eq!(
                v.flags.iter().any(|(f, _)| f == "--enable-prefix-caching"),
                e.prefix_caching
            );
            assert_eq!(
                g.flags.iter().any(|(f, _)| f == "--disable-radix-cache"),
                !e.prefix_caching
            );
        }
        // The scripts carry every pool.
        let sh = engine_args::script(&s, Engine::Vllm).text;
        assert_eq!(sh.matches("vllm serve").count(), pools(&s).len(), "{sh}");
    }
}

/// The documents of a multi-document YAML file, each parsed, and the
/// round trip: re-written and re-read, each is the same value.
fn documents(text: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_norway::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{e}\n{text}")))
        .collect();
    for d in &docs {
        let again: Value = serde_norway::from_str(&serde_norway::to_string(d).unwrap()).unwrap();
        assert_eq!(&again, d);
    }
    docs
}

fn kinds(docs: &[Value]) -> Vec<&str> {
    docs.iter().map(|d| d["kind"].as_str().unwrap()).collect()
}

#[test]
fn every_example_scenarios_manifest_is_yaml_of_the_right_kinds() {
    for s in examples() {
        let m = kubernetes::manifest(&s);
        let docs = documents(&m.text);
        let mut i = 0;
        for pool in pools(&s) {
            let d = &docs[i];
            let ps = pool.replica;
            let nodes = ps.parallel.nodes(ps.hardware.gpus_per_node);
            assert!(d["metadata"]["name"].as_str().unwrap().len() <= 63);
            assert_eq!(
                d["spec"]["replicas"],
                Value::from(pool.replicas),
                "{}",
                s.origin
            );
            let gpu = kubernetes::gpu_resource(&ps.hardware.name);
            if nodes <= 1 {
                assert_eq!(d["apiVersion"], "apps/v1");
                assert_eq!(d["kind"], "Deployment");
                let c = &d["spec"]["template"]["spec"]["containers"][0];
                assert_eq!(
                    c["resources"]["limits"][gpu],
                    Value::from(ps.parallel.gpus())
                );
                assert_eq!(c["command"], serde_json::json!(["vllm", "serve"]));
                let args: Vec<String> = serde_json::from_value(c["args"].clone()).unwrap();
                parse(&args[1..], VLLM_FLAGS).unwrap_or_else(|e| panic!("{}: {e}", s.origin));
                assert_eq!(
                    d["spec"]["selector"]["matchLabels"],
                    d["spec"]["template"]["metadata"]["labels"]
                );
            } else {
                assert_eq!(d["apiVersion"], "leaderworkerset.x-k8s.io/v1");
                assert_eq!(d["kind"], "LeaderWorkerSet");
                let t = &d["spec"]["leaderWorkerTemplate"];
                assert_eq!(t["size"], Value::from(nodes));
                let c = &t["leaderTemplate"]["spec"]["containers"][0];
                let per_pod = c["resources"]["limits"][gpu].as_u64().unwrap() as u32;
                assert!(per_pod * nodes >= ps.parallel.gpus());
            }
            assert_eq!(docs[i + 1]["kind"], "Service", "{}", s.origin);
            i += 2;
            if docs
                .get(i)
                .is_some_and(|d| d["kind"] == "HorizontalPodAutoscaler")
            {
                let h = &docs[i];
                assert_eq!(h["apiVersion"], "autoscaling/v2");
                assert_eq!(h["spec"]["scaleTargetRef"]["name"], d["metadata"]["name"]);
                assert!(h["spec"]["minReplicas"].as_u64().unwrap() >= 1);
                assert!(h["spec"]["maxReplicas"].as_u64() >= h["spec"]["minReplicas"].as_u64());
                i += 1;
            }
        }
        assert_eq!(i, docs.len(), "{}: {:?}", s.origin, kinds(&docs));
    }
}

#[test]
fn a_target_autoscaler_becomes_an_hpa_on_its_metric() {
    let s = with(
        r#"
[lifecycle]
[autoscale]
policy = "target"
metric = "queue_depth"
target_value = 4.0
min_replicas = 1
max_replicas = 6
scale_down_stabilization_s = 120.0
"#,
    );
    let docs = documents(&kubernetes::manifest(&s).text);
    assert_eq!(
        kinds(&docs),
        ["Deployment", "Service", "HorizontalPodAutoscaler"]
    );
    let h = &docs[2]["spec"];
    assert_eq!(h["maxReplicas"], 6);
    assert_eq!(
        h["metrics"][0]["pods"]["metric"]["name"],
        "vllm_num_requests_waiting"
    );
    assert_eq!(h["metrics"][0]["pods"]["target"]["averageValue"], "4");
    assert_eq!(
        h["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
        120
    );
}

#[test]
fn a_replica_wider_than_a_node_is_a_leader_worker_set() {
    let s = with("[fleet]\nreplicas = 3\ntensor_parallel = 8\npipeline_parallel = 2\n");
    let docs = documents(&kubernetes::manifest(&s).text);
    assert_eq!(kinds(&docs), ["LeaderWorkerSet", "Service"]);
    let t = &docs[0]["spec"]["leaderWorkerTemplate"];
    assert_eq!(docs[0]["spec"]["replicas"], 3);
    assert_eq!(t["size"], 2);
    assert_eq!(
        t["leaderTemplate"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
        8
    );
    let leader = t["leaderTemplate"]["spec"]["containers"][0]["args"][0]
        .as_str()
        .unwrap();
    assert!(leader.contains("--pipeline-parallel-size 2"), "{leader}");
    assert!(
        leader.contains("--distributed-executor-backend ray"),
        "{leader}"
    );
}

#[test]
fn a_disaggregated_fleet_is_a_dynamo_graph_of_its_prefill_and_decode_pools() {
    let s = examples()
        .into_iter()
        .find(|s| s.origin.ends_with("scenarios/disaggregation.toml"))
        .unwrap();
    let g = dynamo::graph(&s);
    let docs = documents(&g.text);
    assert_eq!(kinds(&docs), ["DynamoGraphDeployment"]);
    assert_eq!(docs[0]["apiVersion"], "nvidia.com/v1alpha1");
    let services = docs[0]["spec"]["services"].as_object().unwrap();
    assert_eq!(services["Frontend"]["componentType"], "frontend");
    for pool in pools(&s) {
        let (name, flag) = match pool.role {
            PoolRole::Prefill => ("VllmPrefillWorker", "--is-prefill-worker"),
            PoolRole::Decode => ("VllmDecodeWorker", "--is-decode-worker"),
            PoolRole::Colocated => panic!("the example has no colocated pool"),
        };
        let w = &services[name];
        assert_eq!(w["componentType"], "worker");
        assert_eq!(w["subComponentType"], pool.role.name());
        assert_eq!(w["replicas"], Value::from(pool.replicas));
        assert_eq!(
            w["resources"]["limits"]["gpu"],
            Value::from(pool.replica.gpus().to_string())
        );
        let args: Vec<String> =
            serde_json::from_value(w["extraPodSpec"]["mainContainer"]["args"].clone()).unwrap();
        assert!(args.contains(&flag.to_string()));
        let both: Vec<(&str, Takes)> = VLLM_FLAGS
            .iter()
            .chain(DYNAMO_VLLM_FLAGS)
            .copied()
            .collect();
        parse(&args, &both).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    // The plain manifest says it cannot pair the pools itself.
    let k = kubernetes::manifest(&s);
    assert!(
        k.notes.iter().any(|n| n.contains("dynamo.yaml")),
        "{:?}",
        k.notes
    );
    // SGLang's servers carry their role.
    let sh = engine_args::script(&s, Engine::Sglang).text;
    assert!(
        sh.contains("--disaggregation-mode prefill") && sh.contains("--disaggregation-mode decode")
    );
}

#[test]
fn a_setting_an_engine_cannot_express_is_a_note_not_a_silent_drop() {
    let s = with(
        r#"
[engine]
policy = "orca"
preemption = "swap"
pinned_prefix_blocks = 64
prefix_caching = true
[engine.speculative]
num_draft_tokens = 3
acceptance_rate = 0.7
draft_cost_fraction = 0.05
"#,
    );
    let pool = pools(&s)[0];
    for engine in [Engine::Vllm, Engine::Sglang] {
        let l = launch(engine, &pool);
        for word in [
            "policy orca",
            "preemption swap",
            "pinned_prefix_blocks 64",
            "acceptance_rate 0.7",
            "EAGLE_HEAD",
        ] {
            assert!(
                l.notes.iter().any(|n| n.contains(word)),
                "{}: no note on {word}: {:?}",
                engine.name(),
                l.notes
            );
        }
    }
    let sh = engine_args::script(&s, Engine::Vllm).text;
    assert!(sh.contains("# note: policy orca"), "{sh}");
    let v = launch(Engine::Vllm, &pool);
    let cfg = &v
        .flags
        .iter()
        .find(|(f, _)| f == "--speculative-config")
        .unwrap()
        .1;
    let cfg: Value = serde_json::from_str(cfg.as_deref().unwrap()).unwrap();
    assert_eq!(cfg["num_speculative_tokens"], 3);
    assert_eq!(cfg["method"], "eagle");
}

#[test]
fn the_files_are_written_whole_into_the_folder() {
    let s = with("");
    let files = emit(&s, &Format::ALL);
    assert_eq!(
        files.iter().map(|f| f.file.as_str()).collect::<Vec<_>>(),
        ["vllm.sh", "sglang.sh", "kubernetes.yaml", "dynamo.yaml"]
    );
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &files).unwrap();
    for f in &files {
        assert_eq!(
            std::fs::read_to_string(dir.path().join(&f.file)).unwrap(),
            f.text
        );
    }
}
