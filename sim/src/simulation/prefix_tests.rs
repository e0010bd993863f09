use super::tests::scenario;
use super::Simulation;
use crate::report::RunResult;

fn run(extra: &str) -> RunResult {
    Simulation::new(&scenario(extra)).run(|_| {}).unwrap()
}

fn one_prefix(caching: bool) -> RunResult {
    run(&format!(
        r#"
[horizon]
requests = 200
[engine]
max_model_len = 8192
prefix_caching = {caching}
[workload]
arrival = {{ process = "poisson", rate = 0.5 }}
prompt_tokens = {{ dist = "fixed", value = 100 }}
output_tokens = {{ dist = "fixed", value = 10 }}
shared_prefix = {{ variants = 1, tokens = 512 }}
"#
    ))
}

#[test]
fn one_shared_prefix_with_ample_cache_hits_the_analytical_rate() {
    let r = one_prefix(true);
    let p = r.summary.engine.prefix_cache.clone().unwrap();
    // Requests never overlap at 0.5 req/s (each takes ~0.1 s), so only
    // the first misses: every later one reuses the 512-token system
    // prompt (32 blocks) of its 612-token prompt (38 full blocks).
    let n = 200.0;
    assert_eq!(p.hit_tokens, 199 * 512);
    assert!((p.token_hit_rate - (n - 1.0) * 512.0 / (n * 612.0)).abs() < 1e-12);
    assert!((p.block_hit_rate - (n - 1.0) * 32.0 / (n * 38.0)).abs() < 1e-12);
    assert_eq!(p.evicted_blocks, 0);
    // And only uncached tokens are prefilled: TTFT falls.
    let off = one_prefix(false);
    assert!(off.summary.engine.prefix_cache.is_none());
    let (on_t, off_t) = (
        r.summary.latency.ttft_ms.p50,
        off.summary.latency.ttft_ms.p50,
    );
    assert!(
        on_t < 0.5 * off_t,
        "TTFT p50 {on_t} ms cached vs {off_t} ms"
    );
}

fn pressured(pin: bool) -> RunResult {
    // ~9 GiB of KV on one H100 at 0.3 utilization; 64 system prompts
    // of 4096 tokens (too many to keep them all) plus unique prompts.
    run(&format!(
        r#"
[horizon]
requests = 1500
[engine]
gpu_memory_utilization = 0.3
max_model_len = 16384
prefix_caching = true
pinned_prefix_blocks = {}
[workload]
arrival = {{ process = "poisson", rate = 12.0 }}
prompt_tokens = {{ dist = "lognormal", mean = 1500, cv = 1.0, max = 8000 }}
output_tokens = {{ dist = "fixed", value = 50 }}
shared_prefix = {{ variants = 64, tokens = 4096, zipf_exponent = 1.2, pin = true }}
"#,
        if pin { 2048 } else { 0 }
    ))
}

#[test]
fn memory_pressure_evicts_lru_and_pinning_keeps_hot_prefixes() {
    let plain = pressured(false);
    let p = plain.summary.engine.prefix_cache.clone().unwrap();
    assert!(p.evicted_blocks > 0, "{p:?}");
    assert!(p.token_hit_rate > 0.2 && p.token_hit_rate < 0.9, "{p:?}");
    assert_eq!(p.pinned_blocks_at_end, 0);
    let pinned = pressured(true);
    let q = pinned.summary.engine.prefix_cache.clone().unwrap();
    assert_eq!(q.pinned_blocks_at_end, 2048);
    assert!(
        q.token_hit_rate > p.token_hit_rate,
        "{} vs {}",
        q.token_hit_rate,
        p.token_hit_rate
    );
}

#[test]
fn conversations_reuse_their_history() {
    let r = run(r#"
[horizon]
requests = 600
[engine]
max_model_len = 32768
prefix_caching = true
[workload]
arrival = { process = "poisson", rate = 2.0 }
prompt_tokens = { dist = "fixed", value = 300 }
output_tokens = { dist = "fixed", value = 100 }
conversation = { turns = { dist = "fixed", value = 4 }, think_time_s = 2.0, follow_up_tokens = { dist = "fixed", value = 50 } }
"#);
    let by_session = |turn_prompt: u32| {
        r.requests
            .iter()
            .filter(|q| q.prompt_tokens == turn_prompt)
            .count()
    };
    // Turn 1: 300; turn 2: 300 + 100 + 50 = 450; turn 3: 600; turn 4: 750.
    assert!(by_session(300) > 100 && by_session(450) > 100 && by_session(750) > 50);
    let p = r.summary.engine.prefix_cache.clone().unwrap();
    // Later turns find their whole history (prompt and answer) cached:
    // hits ≈ Σ over follow-ups of 400/450, 550/600, 700/750 of the prompt.
    assert!(p.token_hit_rate > 0.5, "{p:?}");
    let sessions: std::collections::BTreeSet<u64> =
        r.requests.iter().map(|q| q.session()).collect();
    assert!(sessions.len() < 200, "follow-ups stay in their session");
}
