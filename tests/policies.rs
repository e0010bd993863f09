//! Replica techniques end to end: batch policies, preemption modes and
//! speculative decoding compared on the example scenarios, with the numbers
//! that make the case for each.

mod common;
use common::*;

#[test]
fn sarathi_cuts_tail_tpot_against_vllm_while_ttft_pays_and_static_loses_throughput() {
    let sarathi = summary_of("batch-policies", &[]);
    let vllm = summary_of(
        "batch-policies",
        &[
            ("policy = \"sarathi\"", "policy = \"vllm\""),
            ("max_batched_tokens = 512", "max_batched_tokens = 8192"),
        ],
    );
    let stat = summary_of(
        "batch-policies",
        &[
            ("policy = \"sarathi\"", "policy = \"static\""),
            ("max_batched_tokens = 512", "max_batched_tokens = 8192"),
            ("requests = 3000", "requests = 600"),
        ],
    );
    let (s_tpot, v_tpot) = (
        f(&sarathi, "latency.tpot_ms.p99"),
        f(&vllm, "latency.tpot_ms.p99"),
    );
    assert!(
        s_tpot < 0.75 * v_tpot,
        "TPOT p99: sarathi {s_tpot} vs vllm {v_tpot}"
    );
    let (s_itl, v_itl) = (
        f(&sarathi, "latency.itl_ms.p99"),
        f(&vllm, "latency.itl_ms.p99"),
    );
    assert!(
        s_itl < 0.5 * v_itl,
        "ITL p99: sarathi {s_itl} vs vllm {v_itl}"
    );
    let (s_ttft, v_ttft) = (
        f(&sarathi, "latency.ttft_ms.p99"),
        f(&vllm, "latency.ttft_ms.p99"),
    );
    assert!(
        s_ttft > v_ttft,
        "TTFT p99: sarathi {s_ttft} vs vllm {v_ttft}"
    );
    // Both keep up with the offered load; static batching cannot.
    let v_tput = f(&vllm, "throughput.output_tokens_per_s");
    let st_tput = f(&stat, "throughput.output_tokens_per_s");
    assert!(
        st_tput < 0.3 * v_tput,
        "static {st_tput} vs vllm {v_tput} tokens/s"
    );
    assert_eq!(vllm["engine"]["policy"], "vllm");
    assert_eq!(stat["engine"]["preemptions"], 0);
}

#[test]
fn swap_preemption_moves_kv_to_host_and_recompute_does_not() {
    let swap = summary_of("swap-preemption", &[]);
    let recompute = summary_of(
        "swap-preemption",
        &[("preemption = \"swap\"", "preemption = \"recompute\"")],
    );
    assert!(f(&swap, "engine.preemptions") > 0.0);
    assert_eq!(swap["engine"]["swap_outs"], swap["engine"]["preemptions"]);
    assert!(f(&recompute, "engine.preemptions") > 0.0);
    assert_eq!(recompute["engine"]["swap_outs"], 0);
    // Without host space, swap mode falls back to recomputation.
    let no_space = summary_of(
        "swap-preemption",
        &[("swap_space_gib = 4", "swap_space_gib = 0")],
    );
    assert_eq!(no_space["engine"]["swap_outs"], 0);
    assert!(f(&no_space, "engine.preemptions") > 0.0);
}

#[test]
fn speculative_decoding_yields_the_expected_tokens_per_step_and_cuts_tpot() {
    let spec = summary_of("speculative", &[]);
    // k = 4, α = 0.7: (1 − 0.7⁵) / (1 − 0.7) = 2.7731 tokens per step.
    let per_step = f(&spec, "engine.spec_tokens_per_step");
    assert!((per_step - 2.7731).abs() < 0.06, "{per_step}");
    let plain = summary_of(
        "speculative",
        &[(
            "speculative = { num_draft_tokens = 4, acceptance_rate = 0.7, draft_model = \"llama-3.2-1b\" }",
            "",
        )],
    );
    assert!(plain["engine"]["spec_tokens_per_step"].is_null());
    let (s, p) = (
        f(&spec, "latency.tpot_ms.p50"),
        f(&plain, "latency.tpot_ms.p50"),
    );
    assert!(s < 0.6 * p, "TPOT p50 with speculation {s} vs without {p}");
    assert!(spec["cost_source"]
        .as_str()
        .unwrap()
        .contains("Llama-3.2-1B"));
}

#[test]
fn prefix_caching_serves_shared_prompts_and_history_and_cuts_ttft() {
    let on = summary_of("prefix-caching", &[("requests = 4000", "requests = 1500")]);
    let off = summary_of(
        "prefix-caching",
        &[
            ("requests = 4000", "requests = 1500"),
            ("prefix_caching = true", "prefix_caching = false"),
            ("pinned_prefix_blocks = 1024", "pinned_prefix_blocks = 0"),
        ],
    );
    let hit = f(&on, "engine.prefix_cache.token_hit_rate");
    assert!(hit > 0.5, "token hit rate {hit}");
    assert!(off["engine"]["prefix_cache"].is_null());
    let (a, b) = (
        f(&on, "latency.ttft_ms.p50"),
        f(&off, "latency.ttft_ms.p50"),
    );
    assert!(
        a < 0.5 * b,
        "TTFT p50 {a} ms with the cache vs {b} ms without"
    );
    // The horizon counts follow-up turns too, exactly.
    assert_eq!(on["counts"]["arrived"], 1500);
    assert_eq!(off["counts"]["arrived"], 1500);
    assert_eq!(f(&on, "engine.prefix_cache.pinned_blocks_at_end"), 2048.0);
}
