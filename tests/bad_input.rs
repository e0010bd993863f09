//! Bad input gets a one-line error naming the file and the key path — never a
//! panic, never a silently ignored key.

mod common;
use common::*;

/// Writes `text` to a scenario file, runs `simulate` and `check` on it, and
/// returns the error line after asserting both fail cleanly the same way.
fn error_for(text: &str) -> (String, String) {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("bad.toml");
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap();
    let out = tmp.path().join("out");
    let sim = run(&["simulate", p, "--out", out.to_str().unwrap()]);
    let chk = run(&["check", p]);
    for o in [&sim, &chk] {
        assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(o));
        let e = stderr(o);
        assert!(!e.contains("panicked"), "{e}");
        assert_eq!(e.trim_end().lines().count(), 1, "one line: {e}");
        assert!(
            e.starts_with(&format!("error: {p}: ")),
            "names the file: {e}"
        );
    }
    assert!(!out.exists(), "no outputs written for a bad scenario");
    (stderr(&sim).trim_end().to_string(), p.to_string())
}

fn base() -> String {
    small_quickstart(100)
}

fn assert_key(text: &str, key: &str, also: &str) {
    let (e, p) = error_for(text);
    assert!(
        e.starts_with(&format!("error: {p}: {key}: ")),
        "expected key {key}: {e}"
    );
    assert!(e.contains(also), "expected {also:?} in: {e}");
}

#[test]
fn unknown_key_is_an_error_naming_it() {
    let t = base().replace("block_size = 16", "block_size = 16\nblock_sise = 32");
    assert_key(&t, "engine.block_sise", "unknown field");
    let t = base().replace("seed = 42", "seed = 42\ncolour = \"red\"");
    assert_key(&t, "colour", "expected one of");
}

#[test]
fn wrong_type_names_the_key() {
    let t = base().replace("replicas = 4", "replicas = \"four\"");
    assert_key(&t, "fleet.replicas", "invalid type");
    let t = base().replace("block_size = 16", "block_size = 1.5");
    assert_key(&t, "engine.block_size", "invalid type");
}

#[test]
fn negative_or_zero_rate_is_rejected() {
    let t = base().replace("rate = 70.0", "rate = -5.0");
    assert_key(&t, "workload.arrival.rate", "positive");
    let t = base().replace("rate = 70.0", "rate = 0.0");
    assert_key(&t, "workload.arrival.rate", "positive");
}

#[test]
fn zero_replicas_is_rejected() {
    let t = base().replace("replicas = 4", "replicas = 0");
    assert_key(&t, "fleet.replicas", "at least 1");
    let t = base().replace("replicas = 4", "replicas = -2");
    assert_key(&t, "fleet.replicas", "invalid value");
}

#[test]
fn unknown_preset_lists_the_known_ones() {
    let t = base().replace("\"llama-3.1-8b\"", "\"llama-9-1t\"");
    assert_key(&t, "model.preset", "qwen2.5-72b");
    let t = base().replace("\"h100-sxm\"", "\"tpu-v5p\"");
    assert_key(&t, "hardware.preset", "mi300x");
    let t = base().replace("\"least-outstanding\"", "\"random-walk\"");
    assert_key(&t, "fleet.router", "round-robin");
}

#[test]
fn model_that_does_not_fit_says_how_much_it_needs() {
    let t = base().replace("\"llama-3.1-8b\"", "\"llama-3.1-70b\"");
    assert_key(&t, "model", "tensor_parallel = 4");
    let (e, _) = error_for(&t);
    assert!(e.contains("GiB"), "{e}");
    let t = base()
        .replace("\"llama-3.1-8b\"", "\"llama-3.1-405b\"")
        .replace("tensor_parallel = 1", "tensor_parallel = 8");
    assert_key(&t, "model", "does not fit");
}

#[test]
fn other_invalid_values_are_caught() {
    let t = base().replace(
        "gpu_memory_utilization = 0.9",
        "gpu_memory_utilization = 1.5",
    );
    assert_key(&t, "engine.gpu_memory_utilization", "(0, 1]");
    let t = base().replace("block_size = 16", "block_size = 0");
    assert_key(&t, "engine.block_size", "at least 1");
    let t = base().replace("tensor_parallel = 1", "tensor_parallel = 3");
    assert_key(&t, "fleet.tensor_parallel", "divisor");
    let t = base().replace("max_model_len = 8192", "max_model_len = 999999");
    assert_key(&t, "engine.max_model_len", "context length");
    let t = base().replace("min = 16, max = 6144", "min = 600, max = 500");
    assert_key(&t, "workload.prompt_tokens.max", "below min");
    let t = base().replace("process = \"poisson\"", "process = \"hawkes\"");
    assert_key(&t, "workload.arrival.process", "unknown variant");
    let t = base().replace("requests = 100", "");
    assert_key(&t, "horizon", "duration_s");
    let t = base().replace("tpot_ms = 50", "tpot_ms = -1");
    assert_key(&t, "slo.tpot_ms", "positive");
}

#[test]
fn syntax_error_names_the_line() {
    let t = base().replace("[engine]", "[engine");
    let (e, _) = error_for(&t);
    assert!(e.contains("line "), "{e}");
    assert!(e.contains("TOML syntax error"), "{e}");
}

#[test]
fn missing_file_is_a_clear_error() {
    for cmd in ["simulate", "check"] {
        let o = run(&[cmd, "no/such/scenario.toml"]);
        assert_eq!(o.status.code(), Some(1));
        let e = stderr(&o);
        assert!(
            e.starts_with("error: no/such/scenario.toml: cannot read scenario file"),
            "{e}"
        );
        assert!(!e.contains("panicked"));
    }
}

#[test]
fn unknown_command_line_flags_are_usage_errors() {
    let o = run(&["simulate", "x.toml", "--sed", "3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--sed"));
}

#[test]
fn replica_technique_keys_reject_bad_values() {
    let t = base().replace("block_size = 16", "block_size = 16\npolicy = \"fifo\"");
    assert_key(&t, "engine.policy", "sarathi");
    let t = base().replace("block_size = 16", "block_size = 16\npreemption = \"kill\"");
    assert_key(&t, "engine.preemption", "swap");
    let t = base().replace("block_size = 16", "block_size = 16\nswap_space_gib = -1");
    assert_key(&t, "engine.swap_space_gib", "≥ 0");
    let t = base().replace("max_batched_tokens = 8192", "max_batched_tokens = 0");
    assert_key(&t, "engine.max_batched_tokens", "at least 1");
    let launch = |v: &str| {
        base().replace(
            "block_size = 16",
            &format!("block_size = 16\neager_launch_s_per_layer = {{ {v} }}"),
        )
    };
    let t = launch("dense = -0.001, moe = 0.003");
    assert_key(&t, "engine.eager_launch_s_per_layer.dense", "[0, 1]");
    let t = launch("dense = 0.001");
    assert_key(&t, "engine.eager_launch_s_per_layer", "missing field `moe`");
    let spec = |s: &str| {
        base().replace(
            "block_size = 16",
            &format!("block_size = 16\nspeculative = {{ {s} }}"),
        )
    };
    let t = spec("num_draft_tokens = 0, acceptance_rate = 0.5, draft_cost_fraction = 0.1");
    assert_key(&t, "engine.speculative.num_draft_tokens", "1..=16");
    let t = spec("num_draft_tokens = 4, acceptance_rate = 1.0, draft_cost_fraction = 0.1");
    assert_key(&t, "engine.speculative.acceptance_rate", "[0, 1)");
    let t = spec("num_draft_tokens = 4, acceptance_rate = -0.1, draft_cost_fraction = 0.1");
    assert_key(&t, "engine.speculative.acceptance_rate", "[0, 1)");
    let t = spec("num_draft_tokens = 4, acceptance_rate = 0.5");
    assert_key(&t, "engine.speculative", "exactly one");
    let t = spec("num_draft_tokens = 4, acceptance_rate = 0.5, draft_model = \"tiny\"");
    assert_key(&t, "engine.speculative.draft_model", "llama-3.2-1b");
    let t = spec("num_draft_tokens = 4, acceptance_rate = 0.5, draft_cost_fraction = 0");
    assert_key(&t, "engine.speculative.draft_cost_fraction", "(0, 1]");
}

#[test]
fn prefix_structure_keys_reject_bad_values() {
    let add = |s: &str| base().replace("[slo]", &format!("{s}\n[slo]"));
    let t = add("shared_prefix = { variants = 0, tokens = 512 }");
    assert_key(&t, "workload.shared_prefix.variants", "at least 1");
    let t = add("shared_prefix = { variants = 4, tokens = 512, zipf_exponent = -1 }");
    assert_key(&t, "workload.shared_prefix.zipf_exponent", "≥ 0");
    let t = add("conversation = { turns = { dist = \"fixed\", value = 3 }, think_time_s = -2, follow_up_tokens = { dist = \"fixed\", value = 9 } }");
    assert_key(&t, "workload.conversation.think_time_s", "≥ 0");
    let t = base().replace(
        "block_size = 16",
        "block_size = 16\npinned_prefix_blocks = 64",
    );
    assert_key(&t, "engine.pinned_prefix_blocks", "prefix_caching = true");
    let t = base().replace(
        "block_size = 16",
        "block_size = 16\nprefix_caching = true\npinned_prefix_blocks = 100000000",
    );
    assert_key(&t, "engine.pinned_prefix_blocks", "pin fewer");
}

#[test]
fn parallel_layouts_that_cannot_work_are_rejected() {
    let t = base().replace(
        "tensor_parallel = 1",
        "tensor_parallel = 1\npipeline_parallel = 0",
    );
    assert_key(&t, "fleet.pipeline_parallel", "at least 1");
    let t = base().replace(
        "tensor_parallel = 1",
        "tensor_parallel = 1\npipeline_parallel = 33",
    );
    assert_key(&t, "fleet.pipeline_parallel", "32 layers");
    // TP 16 leaves an 8-GPU node: over the network on H100 servers, refused
    // on L4 servers, which have none.
    let t = base()
        .replace("tensor_parallel = 1", "tensor_parallel = 16")
        .replace("preset = \"h100-sxm\"", "preset = \"l4\"");
    assert_key(&t, "fleet.tensor_parallel", "no scale-out network");
    let t = base().replace(
        "tensor_parallel = 1",
        "tensor_parallel = 2\nexpert_parallel = 2",
    );
    assert_key(&t, "fleet.expert_parallel", "dense model");
    let mixtral = base().replace("\"llama-3.1-8b\"", "\"mixtral-8x7b\"");
    let t = mixtral.replace(
        "tensor_parallel = 1",
        "tensor_parallel = 4\nexpert_parallel = 8",
    );
    assert_key(
        &t,
        "fleet.expert_parallel",
        "must divide tensor_parallel = 4",
    );
    let t = base()
        .replace("\"llama-3.1-8b\"", "\"llama-3.1-70b\"")
        .replace("\"h100-sxm\"", "\"l4\"")
        .replace(
            "tensor_parallel = 1",
            "tensor_parallel = 8\npipeline_parallel = 4",
        );
    assert_key(&t, "fleet.pipeline_parallel", "no scale-out network");
    let t = base().replace(
        "tensor_parallel = 1",
        "tensor_parallel = 1\npipline_parallel = 2",
    );
    assert_key(&t, "fleet.pipline_parallel", "pipeline_parallel");
}

#[test]
fn inline_moe_architecture_errors_name_the_key() {
    let arch = "[model.architecture]\nlayers = 4\nhidden_size = 1024\nnum_heads = 8\nnum_kv_heads = 8\nhead_dim = 128\nintermediate_size = 4096\nvocab_size = 32000\nmax_context = 8192\nnum_experts = 8\nexperts_per_token = 9\n";
    let t = base()
        .replace("preset = \"llama-3.1-8b\"\n", "")
        .replace("[hardware]", &format!("{arch}\n[hardware]"));
    assert_key(
        &t,
        "model.architecture.experts_per_token",
        "between 1 and num_experts (8)",
    );
    let t = t.replace(
        "experts_per_token = 9",
        "experts_per_token = 2\nkv_lora_rank = 512",
    );
    assert_key(&t, "model.architecture.qk_nope_head_dim", "kv_lora_rank");
}

#[test]
fn parallel_samples_must_be_bounded_by_128() {
    // Appended to the base's `[workload]` table.
    let with_n = |n: &str| {
        let b = base();
        let i = b.find("[workload]").unwrap();
        let j = b[i..].find("\n\n").map_or(b.len(), |k| i + k);
        format!("{}\nn = {n}{}", &b[..j], &b[j..])
    };
    assert_key(
        &with_n("{ dist = \"fixed\", value = 200 }"),
        "workload.n",
        "at most 128",
    );
    assert_key(
        &with_n("{ dist = \"lognormal\", mean = 4.0, cv = 1.0 }"),
        "workload.n.max",
        "bound the number of samples",
    );
    assert_key(
        &with_n("{ dist = \"fixed\", value = 0 }"),
        "workload.n.value",
        "at least 1",
    );
}
