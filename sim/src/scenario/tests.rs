use super::*;

pub const MINIMAL: &str = r#"
name = "t"
seed = 7
[horizon]
requests = 100
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[engine]
max_model_len = 8192
[workload]
arrival = { process = "poisson", rate = 5.0 }
prompt_tokens = { dist = "fixed", value = 100 }
output_tokens = { dist = "fixed", value = 10 }
"#;

fn err_of(text: &str) -> ScenarioError {
    Scenario::from_toml_str(text, "s.toml").unwrap_err()
}

#[test]
fn minimal_scenario_resolves_with_defaults() {
    let s = Scenario::from_toml_str(MINIMAL, "s.toml").unwrap();
    assert_eq!(s.model.name, "Llama-3.1-8B");
    assert_eq!(s.file.fleet.replicas, 1);
    assert_eq!(s.file.engine.block_size, 16);
    assert_eq!(s.kv_dtype, Dtype::Bf16);
    assert!(s.memory.kv_blocks > 10_000);
}

#[test]
fn unknown_key_names_its_path() {
    let e = err_of(&MINIMAL.replace("max_model_len", "max_modle_len"));
    assert_eq!(e.key, "engine.max_modle_len", "{e}");
    assert!(
        e.message.contains("expected one of"),
        "lists allowed keys: {e}"
    );
    assert!(
        e.to_string().starts_with("s.toml: engine.max_modle_len: "),
        "{e}"
    );
}

#[test]
fn wrong_type_names_its_path() {
    let e = err_of(&MINIMAL.replace("rate = 5.0", "rate = \"fast\""));
    // Tagged tables (arrival, length distributions) report the table's path.
    assert_eq!(e.key, "workload.arrival", "{e}");
    assert!(e.message.contains("expected f64"), "{e}");
    let e = err_of(&MINIMAL.replace("max_model_len = 8192", "max_model_len = -3"));
    assert_eq!(e.key, "engine.max_model_len", "{e}");
}

#[test]
fn bad_values_are_rejected() {
    let e = err_of(&MINIMAL.replace("rate = 5.0", "rate = -1.0"));
    assert_eq!(e.key, "workload.arrival.rate");
    let e = err_of(&MINIMAL.replace("rate = 5.0", "rate = 0.0"));
    assert_eq!(e.key, "workload.arrival.rate");
    let e = err_of(&format!("{MINIMAL}\n[fleet]\nreplicas = 0\n"));
    assert_eq!(e.key, "fleet.replicas");
    let e = err_of(&MINIMAL.replace("\"llama-3.1-8b\"", "\"gpt-5\""));
    assert_eq!(e.key, "model.preset");
    assert!(
        e.message.contains("llama-3.1-70b"),
        "lists known presets: {e}"
    );
    let e = err_of(&MINIMAL.replace("\"h100-sxm\"", "\"tpu\""));
    assert!(e.message.contains("mi300x"), "{e}");
    let e = err_of(&MINIMAL.replace("[horizon]\nrequests = 100", "[horizon]"));
    assert_eq!(e.key, "horizon");
    let e = err_of(&MINIMAL.replace("value = 100", "value = 0"));
    assert_eq!(e.key, "workload.prompt_tokens.value");
    let e = err_of(&format!("{MINIMAL}\n[fleet]\ntensor_parallel = 3\n"));
    assert_eq!(e.key, "fleet.tensor_parallel");
    let e = err_of("name = \n");
    assert!(e.message.contains("line 1"), "{e}");
}

#[test]
fn model_that_does_not_fit_suggests_tensor_parallelism() {
    let e = err_of(&MINIMAL.replace("llama-3.1-8b", "llama-3.1-70b"));
    assert!(e.message.contains("tensor_parallel"), "{e}");
    assert!(e.message.contains("GiB"), "{e}");
}

fn with(model: &str, hw: &str, fleet: &str) -> String {
    MINIMAL
        .replace("\"llama-3.1-8b\"", &format!("\"{model}\""))
        .replace("\"h100-sxm\"", &format!("\"{hw}\""))
        + &format!("\n[fleet]\n{fleet}\n")
}

#[test]
fn parallel_keys_resolve_into_the_layout_and_gpu_count() {
    let s = Scenario::from_toml_str(
        &with(
            "llama-3.1-405b",
            "h100",
            "replicas = 2\ntensor_parallel = 8\npipeline_parallel = 2",
        ),
        "s.toml",
    )
    .unwrap();
    assert_eq!(s.parallel.gpus(), 16);
    assert_eq!(s.gpus(), 32);
    assert_eq!(s.memory.pipeline_parallel, 2);
    let s = Scenario::from_toml_str(
        &with(
            "deepseek-v3",
            "h200",
            "tensor_parallel = 8\nexpert_parallel = 8",
        )
        .replace("[model]", "[model]\nweight_dtype = \"fp8\""),
        "s.toml",
    )
    .unwrap();
    assert_eq!(
        (s.parallel.attention_tp(), s.parallel.attention_dp()),
        (1, 8)
    );
    assert_eq!(s.gpus(), 8);
}

#[test]
fn bad_parallel_layouts_name_their_key() {
    let cases = [
        (
            "llama-3.1-8b",
            "h100",
            "pipeline_parallel = 0",
            "fleet.pipeline_parallel",
            "at least 1",
        ),
        (
            "llama-3.1-8b",
            "h100",
            "expert_parallel = 0",
            "fleet.expert_parallel",
            "at least 1",
        ),
        (
            "llama-3.1-8b",
            "h100",
            "pipeline_parallel = 33",
            "fleet.pipeline_parallel",
            "32 layers",
        ),
        (
            "llama-3.1-8b",
            "h100",
            "tensor_parallel = 2\nexpert_parallel = 2",
            "fleet.expert_parallel",
            "dense model",
        ),
        (
            "mixtral-8x7b",
            "h100",
            "tensor_parallel = 4\nexpert_parallel = 8",
            "fleet.expert_parallel",
            "must divide tensor_parallel",
        ),
        (
            "llama-3.1-70b",
            "l4",
            "tensor_parallel = 16",
            "fleet.tensor_parallel",
            "no scale-out network",
        ),
        (
            "llama-3.1-70b",
            "l4",
            "tensor_parallel = 8\npipeline_parallel = 2",
            "fleet.pipeline_parallel",
            "network_gbps",
        ),
        (
            "llama-3.1-405b",
            "h100",
            "tensor_parallel = 8",
            "model",
            "pipeline_parallel = 2",
        ),
    ];
    for (model, hw, fleet, key, also) in cases {
        let e = err_of(&with(model, hw, fleet));
        assert_eq!(e.key, key, "{fleet}: {e}");
        assert!(e.message.contains(also), "{fleet}: {e}");
    }
}

const MOE_ARCH: &str = r#"
[model.architecture]
layers = 4
hidden_size = 1024
num_heads = 8
num_kv_heads = 8
head_dim = 128
intermediate_size = 4096
vocab_size = 32000
max_context = 8192
num_experts = 16
experts_per_token = 2
"#;

fn inline(arch: &str) -> String {
    MINIMAL
        .replace("preset = \"llama-3.1-8b\"\n", "")
        .replace("[hardware]", &format!("{arch}\n[hardware]"))
}

#[test]
fn inline_moe_and_mla_architectures_are_checked() {
    let s = Scenario::from_toml_str(&inline(MOE_ARCH), "s.toml").unwrap();
    assert_eq!(s.model.moe_layers(), 4);
    let bad = [
        (
            "experts_per_token = 2",
            "experts_per_token = 17",
            "model.architecture.experts_per_token",
        ),
        (
            "num_experts = 16\n",
            "",
            "model.architecture.experts_per_token",
        ),
        (
            "experts_per_token = 2",
            "experts_per_token = 2\nfirst_dense_layers = 4",
            "model.architecture.first_dense_layers",
        ),
        (
            "experts_per_token = 2",
            "experts_per_token = 2\nkv_lora_rank = 64",
            "model.architecture.qk_nope_head_dim",
        ),
        (
            "experts_per_token = 2",
            "experts_per_token = 2\nv_head_dim = 64",
            "model.architecture.v_head_dim",
        ),
        (
            "experts_per_token = 2",
            "experts_per_token = 2\nnum_expert = 3",
            "model.architecture.num_expert",
        ),
    ];
    for (from, to, key) in bad {
        let e = err_of(&inline(&MOE_ARCH.replace(from, to)));
        assert_eq!(e.key, key, "{to}: {e}");
    }
    let mla = MOE_ARCH.replace(
        "experts_per_token = 2",
        "experts_per_token = 2\nkv_lora_rank = 64\nqk_nope_head_dim = 32\nqk_rope_head_dim = 16\nv_head_dim = 32",
    );
    let s = Scenario::from_toml_str(&inline(&mla), "s.toml").unwrap();
    // 4 layers × (64 + 16) × 2 B.
    assert_eq!(s.memory.kv_bytes_per_token, 640.0);
}

#[test]
fn inline_hardware_network_keys_come_in_pairs() {
    let spec = r#"[hardware.spec]
bf16_tflops = 100.0
memory_gib = 80.0
memory_bw_tbps = 2.0
interconnect_gbps = 100.0
interconnect_latency_us = 10.0
pcie_gbps = 32.0
gpus_per_node = 4
"#;
    let text = MINIMAL.replace("[hardware]\npreset = \"h100-sxm\"\n", spec);
    let s = Scenario::from_toml_str(&text, "s.toml").unwrap();
    assert_eq!(s.hardware.gpus_per_node, 4);
    let e = err_of(&text.replace(
        "gpus_per_node = 4",
        "gpus_per_node = 4\nnetwork_gbps = 25.0",
    ));
    assert_eq!(e.key, "hardware.spec.network_latency_us", "{e}");
    let e = err_of(&text.replace("gpus_per_node = 4", "gpus_per_node = 0"));
    assert_eq!(e.key, "hardware.spec.gpus_per_node", "{e}");
    let e = err_of(&format!("{text}\n[fleet]\ntensor_parallel = 8\n"));
    assert_eq!(e.key, "fleet.tensor_parallel", "{e}");
    let e = err_of(&format!(
        "{text}\n[fleet]\ntensor_parallel = 4\npipeline_parallel = 2\n"
    ));
    assert_eq!(e.key, "fleet.pipeline_parallel", "{e}");
    let net = text.replace(
        "gpus_per_node = 4",
        "gpus_per_node = 4\nnetwork_gbps = 25.0\nnetwork_latency_us = 15.0",
    );
    let s = Scenario::from_toml_str(
        &format!("{net}\n[fleet]\ntensor_parallel = 4\npipeline_parallel = 2\n"),
        "s.toml",
    )
    .unwrap();
    assert_eq!(s.gpus(), 8);
}

#[test]
fn a_profile_supplies_model_hardware_memory_and_cost() {
    let dir = std::env::temp_dir().join(format!("servesim-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = crate::profile::tests::example();
    std::fs::write(dir.join("p.toml"), p.to_toml_string()).unwrap();
    let text = MINIMAL
        .replace("[model]\npreset = \"llama-3.1-8b\"\n", "")
        .replace("preset = \"h100-sxm\"", "profile = \"p.toml\"")
        .replace("max_model_len = 8192", "max_model_len = 512");
    let origin = dir.join("s.toml").display().to_string();
    let s = Scenario::from_toml_str(&text, &origin).unwrap();
    assert_eq!(s.model.name, "tiny");
    assert_eq!(s.weight_dtype, Dtype::Fp32);
    assert_eq!(s.hardware.name, "Test CPU");
    assert_eq!(s.memory.kv_bytes_per_token, 512.0);
    let cost = crate::simulation::Simulation::new(&s)
        .run(|_| {})
        .unwrap()
        .summary
        .cost_source;
    assert!(cost.starts_with("calibration profile"), "{cost}");
    // The profile measured the engine as served: the runtime's fitted front
    // end does not apply on top of it, a stated one does.
    let trt = text.replace(
        "max_model_len = 512",
        "max_model_len = 512\nruntime = \"trtllm\"",
    );
    let s = Scenario::from_toml_str(&trt, &origin).unwrap();
    assert!(s.run_plan().front_end.is_zero());
    let stated = trt.replace(
        "runtime = \"trtllm\"",
        "runtime = \"trtllm\"\nfront_end = { request_s = 0.01 }",
    );
    let s = Scenario::from_toml_str(&stated, &origin).unwrap();
    assert_eq!(s.run_plan().front_end.request_s, 0.01);
    let s = Scenario::from_toml_str(
        MINIMAL
            .replace(
                "max_model_len = 8192",
                "max_model_len = 8192\nruntime = \"trtllm\"",
            )
            .as_str(),
        &origin,
    )
    .unwrap();
    assert!(!s.run_plan().front_end.is_zero());
    // A model besides the profile must be the profile's.
    let e = err_of_at(
        &MINIMAL.replace("preset = \"h100-sxm\"", "profile = \"p.toml\""),
        &origin,
    );
    assert_eq!(e.key, "model", "{e}");
    assert!(e.message.contains("measured tiny"), "{e}");
    let e = err_of_at(
        &text.replace(
            "profile = \"p.toml\"",
            "profile = \"p.toml\"\npreset = \"h100\"",
        ),
        &origin,
    );
    assert_eq!(e.key, "hardware", "{e}");
    let e = err_of_at(&text.replace("p.toml", "missing.toml"), &origin);
    assert_eq!(e.key, "hardware.profile", "{e}");
    assert!(e.message.contains("cannot read profile"), "{e}");
    let e = err_of_at(&format!("{text}\n[fleet]\ntensor_parallel = 2\n"), &origin);
    assert_eq!(e.key, "fleet", "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_profiles_recorded_batching_is_what_simulate_runs_unless_the_scenario_sets_it() {
    use crate::config::BatchPolicyKind;
    let dir = std::env::temp_dir().join(format!("servesim-batching-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut p = crate::profile::tests::example();
    p.engine = Some(crate::profile::EngineProbe {
        url: "http://x".into(),
        server: "llama.cpp".into(),
        served_model: "tiny".into(),
        requests: 1,
        budget_s: 60.0,
        host: Default::default(),
        concurrency: vec![],
        findings: vec![],
        batching: Some(crate::profile::EngineBatching {
            policy: Some(BatchPolicyKind::Sarathi),
            max_batched_tokens: Some(64),
            max_num_seqs: Some(2),
            ubatch_tokens: Some(32),
            source: "test".into(),
        }),
    });
    std::fs::write(dir.join("p.toml"), p.to_toml_string()).unwrap();
    let text = MINIMAL
        .replace("[model]\npreset = \"llama-3.1-8b\"\n", "")
        .replace("preset = \"h100-sxm\"", "profile = \"p.toml\"")
        .replace("max_model_len = 8192", "max_model_len = 512")
        .replace("rate = 5.0", "rate = 50.0");
    let origin = dir.join("s.toml").display().to_string();
    let run = |text: &str| {
        let s = Scenario::from_toml_str(text, &origin).unwrap();
        let summary = crate::simulation::Simulation::new(&s)
            .run(|_| {})
            .unwrap()
            .summary;
        (s, serde_json::to_string(&summary).unwrap())
    };
    let (s, recorded) = run(&text);
    let e = &s.file.engine;
    assert_eq!(
        (e.policy, e.max_batched_tokens, e.max_num_seqs),
        (BatchPolicyKind::Sarathi, 64, 2)
    );
    let line = s.batching.as_deref().unwrap();
    assert!(
        line.starts_with(
            "policy = sarathi, max_batched_tokens = 64, max_num_seqs = 2 from the profile"
        ),
        "{line}"
    );
    // The same settings written in the scenario run the same; the
    // defaults the profile replaced run otherwise.
    let explicit = text.replace(
        "max_model_len = 512",
        "max_model_len = 512\npolicy = \"sarathi\"\nmax_batched_tokens = 64\nmax_num_seqs = 2",
    );
    let (s2, same) = run(&explicit);
    assert_eq!(recorded, same);
    assert!(
        s2.batching.as_deref().unwrap().starts_with("policy = sarathi, max_batched_tokens = 64, max_num_seqs = 2 from the scenario's [engine]"),
        "{:?}",
        s2.batching
    );
    let defaults = text.replace(
        "max_model_len = 512",
        "max_model_len = 512\npolicy = \"continuous\"\nmax_batched_tokens = 8192\nmax_num_seqs = 256",
    );
    let (_, other) = run(&defaults);
    assert_ne!(recorded, other, "the recorded batching changes the run");
    // One key set in the scenario: that key is the scenario's, the rest
    // the profile's.
    let (s3, _) = run(&text.replace(
        "max_model_len = 512",
        "max_model_len = 512\nmax_num_seqs = 8",
    ));
    let e = &s3.file.engine;
    assert_eq!((e.max_batched_tokens, e.max_num_seqs), (64, 8));
    assert!(
        s3.batching
            .as_deref()
            .unwrap()
            .ends_with("max_num_seqs = 8 from the scenario's [engine] or its defaults"),
        "{:?}",
        s3.batching
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn err_of_at(text: &str, origin: &str) -> ScenarioError {
    Scenario::from_toml_str(text, origin).unwrap_err()
}

/// The fuzzed link and life-cycle keys: any number either is refused naming
/// its key, or resolves to a run whose periods and transfers stay on the
/// clock and whose slots are within the fleet's bound.
mod fuzz {
    use super::*;
    use proptest::prelude::*;

    const DISAGG: &str = r#"
name = "t"
seed = 7
[horizon]
requests = 100
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[engine]
max_model_len = 8192
[workload]
arrival = { process = "poisson", rate = 5.0 }
prompt_tokens = { dist = "fixed", value = 100 }
output_tokens = { dist = "fixed", value = 10 }
[[fleet.pools]]
name = "p"
role = "prefill"
replicas = 1
[[fleet.pools]]
name = "d"
role = "decode"
replicas = 1
"#;

    fn number() -> impl Strategy<Value = f64> {
        prop_oneof![
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(-0.0),
            Just(1e-300),
            Just(1e300),
            any::<f64>(),
            (-1e12..1e12f64),
            (0.0..10.0f64),
        ]
    }

    fn toml_num(v: f64) -> String {
        if v.is_nan() {
            "nan".into()
        } else if v.is_infinite() {
            if v > 0.0 {
                "inf".into()
            } else {
                "-inf".into()
            }
        } else {
            format!("{v:e}")
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn link_keys_are_in_range_or_refused_by_key(
            key in prop::sample::select(vec!["bandwidth_gbyte_s", "latency_us"]),
            v in number(),
        ) {
            let text = format!("{DISAGG}[fleet.kv_transfer]\n{key} = {}\n", toml_num(v));
            match Scenario::from_toml_str(&text, "s.toml") {
                Err(e) => prop_assert_eq!(e.key, format!("fleet.kv_transfer.{key}")),
                Ok(s) => {
                    let kt = &s.file.fleet.kv_transfer;
                    prop_assert!((1e-3..=1e6).contains(&kt.bandwidth_gbyte_s));
                    prop_assert!((0.0..=1e6).contains(&kt.latency_us));
                }
            }
        }

        #[test]
        fn life_cycle_periods_are_in_range_or_refused_by_key(
            key in prop::sample::select(vec![
                "autoscale.sync_period_s",
                "autoscale.scrape_interval_s",
                "lifecycle.provision_s",
                "lifecycle.warmup_s",
                "lifecycle.drain_timeout_s",
                "fleet.report_interval_s",
                "failures.mtbf_s",
            ]),
            v in number(),
        ) {
            let (table, field) = key.split_once('.').unwrap();
            let text = MINIMAL.replace("requests = 100", "duration_s = 60");
            let text = format!("{text}[fleet]\nreplicas = 1\n[lifecycle]\n[autoscale]\n[failures]\n")
                .replace(&format!("[{table}]\n"), &format!("[{table}]\n{field} = {}\n", toml_num(v)));
            match Scenario::from_toml_str(&text, "s.toml") {
                Err(e) => prop_assert_eq!(&e.key, key, "{}", e.message),
                Ok(s) => {
                    let a = s.file.autoscale.as_ref().unwrap();
                    prop_assert!(a.sync_period_s >= 1e-3 && a.scrape_interval_s >= 1e-3);
                    let r = s.file.fleet.report_interval_s;
                    prop_assert!(r == 0.0 || r >= 1e-3);
                    if let Some(m) = s.file.failures.as_ref().unwrap().mtbf_s {
                        prop_assert!(m >= 1.0);
                    }
                }
            }
        }

        #[test]
        fn standby_slots_stay_within_the_fleet_bound(standby in 0u32..=200_000, replicas in 1u32..=100_000) {
            let text = MINIMAL.replace("requests = 100", "duration_s = 60");
            let text = format!("{text}[fleet]\nreplicas = {replicas}\n[lifecycle]\nstandby = {standby}\n");
            match Scenario::from_toml_str(&text, "s.toml") {
                Err(e) => prop_assert!(e.key == "lifecycle.standby" || e.key == "model", "{}", e),
                Ok(s) => prop_assert!(crate::guard::replica_slots(&s) <= 100_000),
            }
        }
    }
}

/// DeepSeek-V3 in FP8 on GB200 with the layout `fleet` gives.
fn deepseek_on(hw: &str, fleet: &str, engine: &str) -> Result<Scenario, ScenarioError> {
    let text = format!(
        r#"
name = "moe"
[horizon]
requests = 10
[model]
preset = "deepseek-v3"
weight_dtype = "fp8"
[hardware]
preset = "{hw}"
[fleet]
{fleet}
[engine]
max_model_len = 8192
{engine}
[workload]
arrival = {{ process = "poisson", rate = 1.0 }}
prompt_tokens = {{ dist = "fixed", value = 100 }}
output_tokens = {{ dist = "fixed", value = 10 }}
"#
    );
    Scenario::from_toml_str(&text, "moe.toml")
}

#[test]
fn pools_take_their_own_moe_layouts() {
    let fleet = "tensor_parallel = 8\nattention_data_parallel = 8\nexpert_parallel = 8\n\
        [[fleet.pools]]\nname = \"p\"\nrole = \"prefill\"\nreplicas = 1\n\
        [[fleet.pools]]\nname = \"d\"\nrole = \"decode\"\nreplicas = 1\ntensor_parallel = 32\n\
        attention_data_parallel = 32\nexpert_parallel = 32\neplb = true\n\
        num_redundant_experts = 32\n";
    let s = deepseek_on("gb200", fleet, "").unwrap();
    let (p, d) = (&s.pools[0].replica.parallel, &s.pools[1].replica.parallel);
    assert_eq!((p.attention_dp(), p.expert, p.redundant_experts), (8, 8, 0));
    assert_eq!(
        (d.attention_dp(), d.expert, d.redundant_experts),
        (32, 32, 32)
    );
    assert_eq!(s.gpus(), 40);
    // EPLB with popularity skew: the decode pool's busiest rank carries less
    // than it would without the balancer.
    let s = deepseek_on(
        "gb200",
        &format!("expert_popularity_skew = 1.0\n{fleet}"),
        "",
    )
    .unwrap();
    let r = s.pools[1].replica.expert_load_ratio();
    let static_r = s.pools[0].replica.expert_load_ratio();
    assert!((1.0..1.2).contains(&r), "{r}");
    assert!(static_r > 1.3, "{static_r}");
    // A pool's bad layout names the pool's key.
    let e = deepseek_on(
        "gb200",
        &fleet.replace(
            "attention_data_parallel = 32",
            "attention_data_parallel = 5",
        ),
        "",
    )
    .unwrap_err();
    assert_eq!(e.key, "fleet.pools[1].attention_data_parallel", "{e}");
}

#[test]
fn moe_layout_keys_are_checked_with_their_paths() {
    let cases = [
        (
            "tensor_parallel = 8\nattention_data_parallel = 0",
            "fleet.attention_data_parallel",
        ),
        (
            "tensor_parallel = 8\nexpert_parallel = 8\nnum_redundant_experts = 8",
            "fleet.num_redundant_experts",
        ),
        ("tensor_parallel = 8\neplb = true", "fleet.eplb"),
        (
            "tensor_parallel = 8\nexpert_popularity_skew = 0.5",
            "fleet.expert_popularity_skew",
        ),
        (
            "tensor_parallel = 8\nexpert_parallel = 8\nexpert_popularity_skew = -1",
            "fleet.expert_popularity_skew",
        ),
        // 72 GPUs of attention TP: 128 heads do not split 72 ways.
        (
            "tensor_parallel = 72\nattention_data_parallel = 1\nexpert_parallel = 72",
            "fleet.attention_data_parallel",
        ),
    ];
    for (fleet, key) in cases {
        let e = deepseek_on("gb200", fleet, "").unwrap_err();
        assert_eq!(e.key, key, "{fleet}: {e}");
    }
    let e = deepseek_on("gb200", "tensor_parallel = 8", "all_reduce = \"fast\"").unwrap_err();
    assert_eq!(e.key, "engine.all_reduce", "{e}");
    assert!(e.message.contains("custom"), "{e}");
    let e = deepseek_on("gb200", "tensor_parallel = 8", "deepep_mode = \"fast\"").unwrap_err();
    assert_eq!(e.key, "engine.deepep_mode", "{e}");
    // DeepEP's mode without DeepEP, and DeepEP without EP, do nothing: refused.
    let e = deepseek_on(
        "gb200",
        "tensor_parallel = 8\nexpert_parallel = 8",
        "deepep_mode = \"normal\"",
    )
    .unwrap_err();
    assert_eq!(e.key, "engine.deepep_mode", "{e}");
    let e = deepseek_on("gb200", "tensor_parallel = 8", "moe_a2a = \"deepep\"").unwrap_err();
    assert_eq!(e.key, "engine.moe_a2a", "{e}");
    // MTP layers: 1 to 8, and not beside another draft kind.
    let spec =
        |s: &str| format!("speculative = {{ num_draft_tokens = 1, acceptance_rate = 0.8, {s} }}");
    let e = deepseek_on("gb200", "tensor_parallel = 8", &spec("draft_layers = 0")).unwrap_err();
    assert_eq!(e.key, "engine.speculative.draft_layers", "{e}");
    let e = deepseek_on(
        "gb200",
        "tensor_parallel = 8",
        &spec("draft_layers = 1, draft_cost_fraction = 0.1"),
    )
    .unwrap_err();
    assert_eq!(e.key, "engine.speculative", "{e}");
    // A separate draft model stays with plain tensor parallelism.
    let e = deepseek_on(
        "gb200",
        "tensor_parallel = 8\nattention_data_parallel = 8\nexpert_parallel = 8",
        &spec("draft_model = \"llama-3.2-1b\""),
    )
    .unwrap_err();
    assert_eq!(e.key, "engine.speculative.draft_model", "{e}");
    // ... while an MTP layer rides DP attention and wide EP, its weights and
    // KV resident in every group.
    let plain = deepseek_on(
        "gb200",
        "tensor_parallel = 32\nattention_data_parallel = 32\nexpert_parallel = 32",
        "",
    )
    .unwrap();
    let mtp = deepseek_on(
        "gb200",
        "tensor_parallel = 32\nattention_data_parallel = 32\nexpert_parallel = 32",
        &spec("draft_layers = 1"),
    )
    .unwrap();
    let layer = plain.memory.weight_bytes / 61.0;
    assert!((mtp.memory.weight_bytes - plain.memory.weight_bytes - layer).abs() < 1.0);
    assert_eq!(mtp.memory.kv_blocks, mtp.memory.kv_blocks_per_group * 32);
    assert!(mtp.memory.kv_blocks < plain.memory.kv_blocks);
}

#[test]
fn custom_all_reduce_speeds_small_batch_tensor_parallel_decode() {
    // Llama-3.1-70B TP 8 on H100, decode at batch 1–16: NCCL's ~28 µs floor
    // on each of 160 all-reduces a step is most of what the custom kernels
    // save. Run with --nocapture to see the table.
    let base = MINIMAL
        .replace("llama-3.1-8b", "llama-3.1-70b")
        .replace("[engine]", "[fleet]\ntensor_parallel = 8\n[engine]");
    let nccl = Scenario::from_toml_str(&base, "s.toml").unwrap().roofline();
    let custom = Scenario::from_toml_str(
        &base.replace("[engine]\n", "[engine]\nall_reduce = \"custom\"\n"),
        "s.toml",
    )
    .unwrap()
    .roofline();
    for seqs in [1u32, 4, 16] {
        let mut b = crate::cost::BatchShape::default();
        for _ in 0..seqs {
            b.add_decode(2048);
        }
        let (n, c) = (nccl.iteration_secs(&b), custom.iteration_secs(&b));
        let saved = 1.0 - c / n;
        eprintln!(
            "batch {seqs:>2}: nccl {:.2} ms, custom {:.2} ms, {:.1} % faster",
            n * 1e3,
            c * 1e3,
            saved * 100.0
        );
        assert!((0.15..0.40).contains(&saved), "batch {seqs}: {saved}");
    }
}

/// `[model] config` reads a Hugging Face config.json next to the scenario:
/// the family's layer kinds, the checkpoint's dtype unless the scenario
/// names one, and clear errors for a missing file, an unknown family, a
/// file too large, and a second model source.
#[test]
fn a_config_json_beside_the_scenario_is_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("gpt-oss-20b");
    std::fs::create_dir(&sub).unwrap();
    let preset = crate::catalog::model_preset("gpt-oss-20b").unwrap();
    std::fs::write(sub.join("config.json"), preset.config).unwrap();
    let scenario = dir.path().join("s.toml");
    let text = MINIMAL.replace(
        "preset = \"llama-3.1-8b\"",
        "config = \"gpt-oss-20b/config.json\"",
    );
    std::fs::write(&scenario, &text).unwrap();
    let s = Scenario::load(&scenario).unwrap();
    assert_eq!(s.model.name, "gpt-oss-20b");
    assert_eq!(s.weight_dtype, Dtype::Mxfp4, "quantization_config sets it");
    assert!(
        s.model_source.contains("gpt_oss family"),
        "{}",
        s.model_source
    );
    assert_eq!(s.model.layer_kind_counts(), [12, 12, 0, 0]);
    assert_eq!(s.memory.layer_kinds.len(), 2);
    // The scenario's dtype wins over the checkpoint's.
    std::fs::write(
        &scenario,
        text.replace("[model]", "[model]\nweight_dtype = \"bf16\""),
    )
    .unwrap();
    assert_eq!(Scenario::load(&scenario).unwrap().weight_dtype, Dtype::Bf16);
    // The same model as a preset gives the same plan.
    let p =
        Scenario::from_toml_str(&MINIMAL.replace("llama-3.1-8b", "gpt-oss-20b"), "p.toml").unwrap();
    assert_eq!(p.weight_dtype, Dtype::Mxfp4);
    assert_eq!(p.memory.kv_blocks, s.memory.kv_blocks);

    let load_err = |config: &str| {
        std::fs::write(
            &scenario,
            MINIMAL.replace("preset = \"llama-3.1-8b\"", config),
        )
        .unwrap();
        Scenario::load(&scenario).unwrap_err()
    };
    let e = load_err("config = \"missing.json\"");
    assert_eq!(e.key, "model.config", "{e}");
    assert!(e.message.contains("missing.json"), "{e}");
    std::fs::write(
        dir.path().join("falcon.json"),
        r#"{"model_type": "falcon"}"#,
    )
    .unwrap();
    let e = load_err("config = \"falcon.json\"");
    assert!(
        e.message.contains("unknown model family") && e.message.contains("gpt_oss"),
        "{e}"
    );
    std::fs::write(
        dir.path().join("big.json"),
        vec![b' '; crate::catalog::MAX_CONFIG_BYTES as usize + 1],
    )
    .unwrap();
    let e = load_err("config = \"big.json\"");
    assert!(e.message.contains("larger than"), "{e}");
    let e = load_err("config = \"falcon.json\"\npreset = \"llama-3.1-8b\"");
    assert_eq!(e.key, "model.config", "{e}");
    assert!(e.message.contains("not several"), "{e}");
}

/// Hybrid models with linear-attention layers refuse prefix caching; FP4 KV
/// needs a chip with FP4 units.
#[test]
fn hybrid_and_fp4_limits_are_refused_clearly() {
    let q = MINIMAL
        .replace(
            "preset = \"llama-3.1-8b\"",
            "preset = \"qwen3.5-397b-a17b\"\nweight_dtype = \"nvfp4\"",
        )
        .replace("h100-sxm", "b200")
        .replace(
            "[engine]",
            "[fleet]\ntensor_parallel = 4\n[engine]\nprefix_caching = true",
        );
    let e = err_of(&q);
    assert_eq!(e.key, "engine.prefix_caching", "{e}");
    assert!(e.message.contains("linear-attention"), "{e}");
    let ok = Scenario::from_toml_str(
        &q.replace("prefix_caching = true", "prefix_caching = false")
            .replace(
                "weight_dtype = \"nvfp4\"",
                "weight_dtype = \"nvfp4\"\nkv_dtype = \"nvfp4\"",
            ),
        "s.toml",
    )
    .unwrap();
    assert_eq!(ok.kv_dtype, Dtype::Nvfp4);
    let e = err_of(&MINIMAL.replace(
        "preset = \"llama-3.1-8b\"",
        "preset = \"llama-3.1-8b\"\nkv_dtype = \"nvfp4\"",
    ));
    assert_eq!(e.key, "model.kv_dtype", "{e}");
    assert!(e.message.contains("FP4 units"), "{e}");
}
