//! The prefix cache against a real trace: replaying the public Mooncake
//! conversation trace (in `../shared/data`, skipped when absent) on a model
//! small enough that the cache never evicts must reproduce the infinite-cache
//! hit rate computed independently from the trace's `hash_ids`.

mod common;
use common::*;
use std::collections::HashSet;
use std::io::BufRead;

const LIMIT: usize = 2000;
const MAX_MODEL_LEN: u64 = 8192;

/// Prompt-token hit rate of an infinite cache over the admitted requests, in
/// trace order: a request reuses its leading 512-token blocks already seen
/// (full blocks inside the prompt, at most up to its last 16-token block
/// before the final token, which is always computed).
fn expected_hit_rate(path: &std::path::Path) -> f64 {
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let (mut seen, mut hit, mut total) = (HashSet::new(), 0u64, 0u64);
    for line in file.lines().take(LIMIT) {
        let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        let p = v["input_length"].as_u64().unwrap();
        let o = v["output_length"].as_u64().unwrap();
        if p + o > MAX_MODEL_LEN {
            continue; // rejected: exceeds_max_model_len
        }
        let hashes: Vec<u64> = v["hash_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_u64().unwrap())
            .collect();
        let matched = hashes
            .iter()
            .enumerate()
            .take_while(|&(j, h)| seen.contains(h) && (j as u64 + 1) * 512 <= p)
            .count() as u64;
        hit += (matched * 512).min((p - 1) / 16 * 16);
        total += p;
        seen.extend(hashes);
    }
    hit as f64 / total as f64
}

#[test]
fn mooncake_replay_hits_the_infinite_cache_rate() {
    let Some(data) = shared_data("mooncake/conversation_trace.jsonl") else {
        return;
    };
    let path = data.join("mooncake/conversation_trace.jsonl");
    let scenario = format!(
        r#"
name = "mooncake-prefix"
seed = 1
[horizon]
requests = {LIMIT}
[model]
preset = "smollm2-135m"
[hardware]
preset = "h200"
[engine]
policy = "sarathi"
max_batched_tokens = 2048
max_model_len = {MAX_MODEL_LEN}
prefix_caching = true
[workload]
trace = {{ format = "mooncake", path = "{}", time_scale = 0.02 }}
"#,
        path.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("s.toml");
    std::fs::write(&file, scenario).unwrap();
    simulate(&file, &tmp.path().join("out"), &[]);
    let s: serde_json::Value =
        serde_json::from_str(&read(&tmp.path().join("out/summary.json"))).unwrap();
    assert_eq!(
        f(&s, "engine.prefix_cache.evicted_blocks"),
        0.0,
        "the cache must be ample"
    );
    let got = f(&s, "engine.prefix_cache.token_hit_rate");
    let want = expected_hit_rate(&path);
    assert!(
        (got - want).abs() < 0.005,
        "simulated {got:.4} vs infinite-cache {want:.4}"
    );
}
