//! The side-by-side scenarios against Dynamo's DynoSim
//! (`scenarios/shared/dynosim-mooncake-*.toml`, docs/speed-vs-dynosim.md)
//! resolve to the configuration the DynoSim harness runs (vLLM v1 scheduling,
//! 256 sequences, 8,192 batched tokens, prefix caching, round-robin and
//! 16,384 KV blocks per replica) and run on the real Mooncake trace. They read
//! `../shared/data`, so the example test does not run them; this one skips
//! when the data is absent.

mod common;
use common::*;

#[test]
fn dynosim_scenarios_mirror_its_config_and_run() {
    let Some(data) = shared_data("mooncake/conversation_trace.jsonl") else {
        return;
    };
    let trace = data.join("mooncake/conversation_trace.jsonl");
    for block in [16, 512] {
        let name = format!("dynosim-mooncake-{block}");
        let text = read(&repo().join(format!("scenarios/shared/{name}.toml")));
        assert!(text.contains("# The whole trace, drained."), "{name}");
        // The first 300 requests, for speed.
        let text = text
            .replace(
                "../../../shared/data/mooncake/conversation_trace.jsonl",
                trace.to_str().unwrap(),
            )
            .replace("# The whole trace, drained.", "requests = 300");
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.toml");
        std::fs::write(&path, text).unwrap();

        let check = run(&["check", path.to_str().unwrap()]);
        assert!(check.status.success(), "check {name}: {}", stderr(&check));
        let plan = stdout(&check);
        for want in [
            format!("16384 blocks of {block} tokens per replica"),
            format!(
                "policy sarathi, max_num_seqs 256, max_batched_tokens 8192, block_size {block}"
            ),
            "fleet      8 replicas × TP 1 on H100-SXM".to_string(),
            " = 8 GPUs, router round-robin".to_string(),
        ] {
            assert!(plan.contains(&want), "{name}: no {want:?} in\n{plan}");
        }

        simulate(&path, &tmp.path().join("out"), &[]);
        let s: serde_json::Value =
            serde_json::from_str(&read(&tmp.path().join("out/summary.json"))).unwrap();
        assert_eq!(f(&s, "kv_blocks_per_replica"), 16384.0, "{name}");
        assert_eq!(f(&s, "block_size"), block as f64, "{name}");
        assert_eq!(f(&s, "counts.arrived"), 300.0, "{name}");
        assert_eq!(f(&s, "counts.completed"), 300.0, "{name}");
        // Prefix caching is on: the conversations' shared prefixes hit.
        assert!(
            f(&s, "engine.prefix_cache.hit_blocks") > 0.0,
            "{name}: {}",
            s["engine"]
        );
    }
}
