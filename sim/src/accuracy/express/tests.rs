use super::*;
use crate::catalog::Dtype;

#[test]
fn reasons_group_without_the_points_numbers() {
    assert_eq!(
        without_numbers("64 heads of X cannot be split over 12 GPUs, 1.5 GiB"),
        "N heads of X cannot be split over N GPUs, N GiB"
    );
}

#[test]
fn aiconfigurator_layouts_map_onto_attention_dp_and_expert_parallel() {
    let l = |tp, attention_dp, moe_tp, moe_ep| WorkerLayout {
        tp,
        pp: 1,
        attention_dp,
        moe_tp,
        moe_ep,
    };
    let moe = |tp, ep, dp| FleetLayout {
        tensor_parallel: tp,
        pipeline_parallel: 1,
        expert_parallel: ep,
        attention_data_parallel: Some(dp),
        replicas_per_worker: 1,
    };
    let dense = |tp, replicas| FleetLayout {
        tensor_parallel: tp,
        pipeline_parallel: 1,
        expert_parallel: 1,
        attention_data_parallel: None,
        replicas_per_worker: replicas,
    };
    // DP attention over EP groups, with and without MoE TP.
    assert_eq!(fleet_layout(&l(1, 8, 1, 8)).unwrap(), moe(8, 8, 8));
    assert_eq!(fleet_layout(&l(2, 4, 2, 4)).unwrap(), moe(8, 4, 4));
    // Experts spread over a tensor-parallel attention group.
    assert_eq!(fleet_layout(&l(8, 1, 1, 8)).unwrap(), moe(8, 8, 1));
    assert_eq!(fleet_layout(&l(32, 1, 8, 4)).unwrap(), moe(32, 4, 1));
    // Attention DP with the experts tensor-parallel.
    assert_eq!(fleet_layout(&l(1, 8, 8, 1)).unwrap(), moe(8, 1, 8));
    // Plain tensor parallelism, and a dense model's attention DP.
    assert_eq!(fleet_layout(&l(4, 1, 4, 1)).unwrap(), dense(4, 1));
    assert_eq!(fleet_layout(&l(4, 1, 1, 1)).unwrap(), dense(4, 1));
    assert_eq!(fleet_layout(&l(2, 4, 1, 1)).unwrap(), dense(2, 4));
    // Experts tensor-sliced wider than attention TP, no attention DP
    // recorded: vLLM's data parallelism over tensor-sliced experts.
    assert_eq!(fleet_layout(&l(1, 1, 2, 1)).unwrap(), moe(2, 1, 2));
    assert_eq!(fleet_layout(&l(2, 1, 4, 1)).unwrap(), moe(4, 1, 2));
    // Attention and experts on different GPU counts.
    let e = fleet_layout(&l(8, 1, 2, 8)).unwrap_err();
    assert_eq!(e.kind, ReasonKind::Layout);
    assert!(e.reason.contains("MoE TP 2 × EP 8"), "{}", e.reason);
}

#[test]
fn silicon_rows_run_their_engines_runtime_and_batching_with_spread_lengths() {
    let text = include_str!("../testdata/aiconfigurator.csv");
    let points = crate::accuracy::read(text, "aiconfigurator.csv").unwrap();
    let settings = Settings {
        max_requests: 16,
        ..Settings::default()
    };
    let e = express(None, "test", &settings, &points[0]).unwrap();
    let get = |k: &str| keypath::get(&e.table, k).cloned();
    let engine = points[0].engine.as_deref().unwrap();
    let rt = EngineRuntime::of_engine(engine).unwrap();
    assert_eq!(e.scenario.file.engine.runtime, rt, "{engine}");
    assert_eq!(
        get("engine.policy").and_then(|v| v.as_str().map(str::to_string)),
        Some(engine_batching(rt).to_string())
    );
    // The recorded isl is the longest prompt; the shortest is 0.8 of it.
    let isl = match points[0].prompt {
        Some(Lengths::Fixed { tokens }) => i64::from(tokens),
        ref p => panic!("{p:?}"),
    };
    assert_eq!(
        get("workload.prompt_tokens.dist").and_then(|v| v.as_str().map(str::to_string)),
        Some("uniform".into())
    );
    let lo = get("workload.prompt_tokens.min").and_then(|v| v.as_integer());
    assert_eq!(lo, Some((isl as f64 * RANDOM_RANGE_RATIO).ceil() as i64));
    assert_eq!(
        get("workload.prompt_tokens.max").and_then(|v| v.as_integer()),
        Some(isl)
    );
    // The users start together: no ramp-up unless a base scenario sets
    // one, which survives the point's workload.
    assert_eq!(get("workload.arrival.ramp_up_s"), None);
    let mut base = default_base();
    set(&mut base, "workload.arrival.ramp_up_s", 2.5);
    let e = express(Some(&base), "test", &settings, &points[0]).unwrap();
    assert_eq!(
        keypath::get(&e.table, "workload.arrival.ramp_up_s").and_then(|v| v.as_float()),
        Some(2.5)
    );
    // A scenario's own runtime and policy win.
    let mut base = default_base();
    set(&mut base, "engine.runtime", "eager-2023");
    set(&mut base, "engine.policy", "continuous");
    let e = express(Some(&base), "test", &settings, &points[0]).unwrap();
    assert_eq!(e.scenario.file.engine.runtime, EngineRuntime::Eager2023);
    assert_eq!(engine_batching(EngineRuntime::Sglang), "vllm");
    assert_eq!(engine_batching(EngineRuntime::Vllm), "sarathi");
}

#[test]
fn sglang_rows_on_b200_and_b300_receive_as_inferencex_recipes_start_the_server() {
    let text = include_str!("../testdata/aiconfigurator.csv");
    let points = crate::accuracy::read(text, "aiconfigurator.csv").unwrap();
    let interval = |engine: &str, chip: &str, users: u32, dp: u32| {
        let mut p = points[0].clone();
        p.engine = Some(engine.into());
        p.chip = Some(chip.into());
        p.load = Some(Load::Concurrency { users });
        if let Some(Deployment::Agg { layout, .. }) = &mut p.deployment {
            layout.attention_dp = dp;
        }
        harness_recv_interval(EngineRuntime::of_engine(engine).unwrap(), &p)
    };
    assert_eq!(interval("sglang", "b200_sxm", 4, 1), Some(10));
    assert_eq!(interval("sglang", "b300_sxm", 16, 1), Some(30));
    // DP attention, other chips and other engines keep the default.
    assert_eq!(interval("sglang", "b200_sxm", 64, 8), None);
    assert_eq!(interval("sglang", "h200_sxm", 4, 1), None);
    assert_eq!(interval("vllm", "b200_sxm", 4, 1), None);
    // The setting reaches the scenario, unless the base sets it.
    let settings = Settings {
        max_requests: 16,
        ..Settings::default()
    };
    let mut p = points[0].clone();
    p.engine = Some("sglang".into());
    p.chip = Some("b200_sxm".into());
    let e = express(None, "test", &settings, &p).unwrap();
    assert_eq!(e.scenario.file.engine.scheduler_recv_interval, 10);
    let mut base = default_base();
    set(&mut base, "engine.scheduler_recv_interval", 1);
    let e = express(Some(&base), "test", &settings, &p).unwrap();
    assert_eq!(e.scenario.file.engine.scheduler_recv_interval, 1);
}

#[test]
fn inferencex_trtllm_rows_cache_kv_in_fp8_as_its_recipes_start_the_server() {
    let text = include_str!("../testdata/aiconfigurator.csv");
    let points = crate::accuracy::read(text, "aiconfigurator.csv").unwrap();
    let settings = Settings {
        max_requests: 16,
        ..Settings::default()
    };
    let kv = |engine: &str, id: &str, base: Option<&Table>| {
        let mut p = points[1].clone();
        p.engine = Some(engine.into());
        p.id = id.into();
        express(base, "test", &settings, &p)
            .unwrap()
            .scenario
            .kv_dtype
    };
    let dated = "2026_04_06_llama_3_1_70b_h200_sxm_trtllm_fp8_agg_1024x1024_c8_tp4_ep1_7";
    let cfg = "dsr1_b200_trtllm_fp8_agg_1024x1024_c32_cfg91";
    assert_eq!(kv("trtllm", dated, None), Dtype::Fp8);
    assert_eq!(kv("trtllm", cfg, None), Dtype::Fp8);
    // aiconfigurator's own sweeps, other engines and a base that names
    // the cache keep the default (the activation dtype).
    assert_eq!(
        kv("trtllm", "llama70b_h200_sxm_trtllm_fp8_agg_512x64_c8", None),
        Dtype::Bf16
    );
    assert_eq!(kv("vllm", dated, None), Dtype::Bf16);
    assert_eq!(kv("trtllm", "2026_04_0x_llama", None), Dtype::Bf16);
    assert_eq!(kv("trtllm", "llama_cfg", None), Dtype::Bf16);
    let mut base = default_base();
    set(&mut base, "model.kv_dtype", "bf16");
    assert_eq!(kv("trtllm", dated, Some(&base)), Dtype::Bf16);
}

#[test]
fn unchunked_prompts_past_the_default_budget_get_a_budget_that_holds_them() {
    let text = include_str!("../testdata/aiconfigurator.csv");
    let points = crate::accuracy::read(text, "aiconfigurator.csv").unwrap();
    let settings = Settings {
        max_requests: 16,
        ..Settings::default()
    };
    let mut p = points[0].clone();
    p.engine = Some("trtllm".into());
    let budget = |p: &MeasuredPoint| {
        let e = express(None, "test", &settings, p).unwrap();
        (
            e.scenario.file.engine.max_batched_tokens,
            e.notes.iter().any(|n| n.contains("max_batched_tokens")),
        )
    };
    p.prompt = Some(Lengths::Fixed { tokens: 15_000 });
    assert_eq!(budget(&p), (15_000, true));
    // Within the default, and under vLLM's chunked prefill, it stays.
    p.prompt = Some(Lengths::Fixed { tokens: 4_000 });
    let default = crate::config::EngineCfg::default().max_batched_tokens;
    assert_eq!(budget(&p), (default, false));
    p.engine = Some("vllm".into());
    p.prompt = Some(Lengths::Fixed { tokens: 15_000 });
    assert!(!budget(&p).1);
}

#[test]
fn recorded_names_have_catalog_spellings() {
    assert_eq!(
        chip_candidates("h100_sxm"),
        ["h100_sxm", "h100-sxm", "h100"]
    );
    assert_eq!(
        crate::catalog::checkpoint_name_candidates("Qwen/Qwen3-235B-A22B-FP8"),
        [
            "Qwen/Qwen3-235B-A22B-FP8",
            "Qwen/Qwen3-235B-A22B",
            "Qwen3-235B-A22B-FP8",
            "Qwen3-235B-A22B"
        ]
    );
    // NVIDIA's re-published checkpoints find the original's preset.
    let nv = crate::catalog::checkpoint_name_candidates("nvidia/Llama-3.1-8B-Instruct-FP8");
    assert!(nv.iter().any(|n| n == "Llama-3.1-8B"), "{nv:?}");
    assert!(crate::catalog::model("Llama-3.1-8B").is_some());
    let r1 = crate::catalog::checkpoint_name_candidates("nvidia/DeepSeek-R1-NVFP4");
    assert!(r1.iter().any(|n| n == "DeepSeek-R1"), "{r1:?}");
    assert!(crate::catalog::model("DeepSeek-R1").is_some());
    assert_eq!(
        dtype_candidates(Some("nvfp4"), Some("fp4")),
        ["nvfp4", "fp4"]
    );
    assert_eq!(dtype_candidates(None, Some("bf16")), ["bf16"]);
}
