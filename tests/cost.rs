//! `servesim cost`: its figures are the simulator's, its errors name the flag
//! or key, and the fidelity table runs when the shared data is present.

mod common;

use common::{run, stderr, stdout};
use std::path::Path;

fn json(args: &[&str]) -> serde_json::Value {
    let o = run(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).expect("JSON on stdout")
}

fn lone_request_scenario(dir: &Path, runtime: &str, tp: u32) -> std::path::PathBuf {
    let path = dir.join(format!("lone-{runtime}-{tp}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"
name = "lone"
[horizon]
requests = 1
[model]
preset = "llama-3.1-70b"
[hardware]
preset = "h100-sxm"
[fleet]
tensor_parallel = {tp}
[engine]
runtime = "{runtime}"
[workload]
arrival = {{ process = "poisson", rate = 1.0 }}
prompt_tokens = {{ dist = "fixed", value = 1500 }}
output_tokens = {{ dist = "fixed", value = 300 }}
"#
        ),
    )
    .unwrap();
    path
}

#[test]
fn a_lone_request_costs_exactly_what_simulate_reports() {
    let dir = tempfile::tempdir().unwrap();
    for (runtime, tp) in [("cuda-graph", 4), ("eager-2023", 8)] {
        let s = lone_request_scenario(dir.path(), runtime, tp);
        let s = s.to_str().unwrap();
        let out = dir.path().join(format!("out-{runtime}"));
        let sum = json(&["simulate", s, "--out", out.to_str().unwrap(), "--json"]);
        let cost = json(&["cost", s, "--lone-request", "1500,300", "--json"]);
        let lone = &cost["lone_request"];
        let lat = &sum["latency"];
        assert_eq!(sum["counts"]["completed"], 1);
        assert_eq!(
            lone["ttft_ms"], lat["ttft_ms"]["mean"],
            "{runtime}: {lone} vs {lat}"
        );
        assert_eq!(
            lone["tpot_ms"], lat["tpot_ms"]["mean"],
            "{runtime}: {lone} vs {lat}"
        );
        // TTFT is one prefill iteration: the same figure as the batch priced alone.
        let p = json(&["cost", s, "--prefill", "1500", "--json"]);
        assert_eq!(p["batches"][0]["total_ms"], lone["ttft_ms"]);
    }
}

#[test]
fn terms_add_up_and_the_eager_runtime_adds_its_host_time() {
    let args = |rt: &str| {
        json(&[
            "cost",
            "--model",
            "llama-2-7b",
            "--hardware",
            "a100-80gb",
            "--tp",
            "2",
            "--runtime",
            rt,
            "--decode",
            "32@1024",
            "--json",
        ])
    };
    let (graph, eager) = (args("cuda-graph"), args("eager-2023"));
    for r in [&graph, &eager] {
        let b = &r["batches"][0]["breakdown"];
        let sum: f64 = b["terms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["ms"].as_f64().unwrap())
            .sum();
        let total = r["batches"][0]["total_ms"].as_f64().unwrap();
        assert!((sum - total).abs() < 1e-5, "{sum} vs {total}");
        assert_eq!(r["gpus"], 2);
        assert!(!r["sweep"].as_array().unwrap().is_empty());
    }
    // Same GPU work; the 2023 engine adds its host time (Vidur measured 8.5 ms
    // for Llama-2-7B at batch 32, TP 2; the fit over all rows gives 11.2).
    let t = |r: &serde_json::Value| r["batches"][0]["total_ms"].as_f64().unwrap();
    let host = eager["batches"][0]["breakdown"]["host_ms"]
        .as_f64()
        .unwrap();
    assert!((8.0..13.0).contains(&host), "{host}");
    assert!(
        (t(&eager) - t(&graph) - host).abs() < 1e-3 + 0.9,
        "{} {}",
        t(&eager),
        t(&graph)
    );
}

/// A 70B model that needs four GPUs, in a scenario with no `[fleet]` table.
const NO_FLEET_TABLE: &str = r#"
name = "seventy"
[horizon]
requests = 100
[model]
preset = "llama-3.1-70b"
[hardware]
preset = "h100-sxm"
[workload]
arrival = { process = "poisson", rate = 2.0 }
prompt_tokens = { dist = "normal", mean = 8000, sd = 1500, min = 2000, max = 14000 }
output_tokens = { dist = "fixed", value = 256 }
"#;

#[test]
fn flags_override_keys_of_tables_the_scenario_does_not_have() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("seventy.toml");
    std::fs::write(&s, NO_FLEET_TABLE).unwrap();
    let s = s.to_str().unwrap();
    // Without the flag the model does not fit one GPU.
    let o = run(&["cost", s]);
    assert!(
        stderr(&o).contains("with tensor_parallel = 1"),
        "{}",
        stderr(&o)
    );
    // `servesim cost SCENARIO --tp N` prices TP N, whether or not the
    // file has the table the key lives in.
    let o = run(&["cost", s, "--tp", "4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with(
            "cost — Llama-3.1-70B, 1 replica × TP 4 on H100-SXM = 4 GPUs, bf16 weights, bf16 KV\n"
        ),
        "{}",
        stdout(&o)
    );
    let r = json(&["cost", s, "--tp", "4", "--pp", "2", "--json"]);
    assert_eq!(r["gpus"], 8);
    // A closed-loop scenario without `[fleet]`: the flag applies where the
    // file writes nothing too.
    let r = json(&["cost", "scenarios/closed-loop.toml", "--tp", "2", "--json"]);
    assert_eq!(r["gpus"], 2);
}

#[test]
fn repeated_prefills_build_one_mixed_batch_and_separate_prices_each() {
    let base = [
        "cost",
        "--model",
        "llama-3.1-8b",
        "--hardware",
        "h100-sxm",
        "--prefill",
        "2048",
        "--prefill",
        "512@1024",
        "--decode",
        "8@1000",
        "--json",
    ];
    let mixed = json(&base);
    let b = mixed["batches"].as_array().unwrap();
    assert_eq!(b.len(), 1, "{mixed}");
    assert_eq!(
        b[0]["batch"],
        "prefill 2048 tokens on 0 cached + prefill 512 tokens on 1024 cached + 8 decodes at context 1000"
    );
    assert_eq!(b[0]["breakdown"]["tokens"], 2048 + 512 + 8);
    assert_eq!(b[0]["breakdown"]["seqs"], 10);
    let mut args = base.to_vec();
    args.push("--separate");
    let separate = json(&args);
    let b = separate["batches"].as_array().unwrap();
    let labels: Vec<&str> = b.iter().map(|x| x["batch"].as_str().unwrap()).collect();
    assert_eq!(
        labels,
        [
            "prefill 2048 tokens on 0 cached",
            "prefill 512 tokens on 1024 cached",
            "8 decodes at context 1000"
        ]
    );
    // One mixed iteration costs less than the three run one after another
    // (one host step, one pass over the weights).
    let total = |v: &serde_json::Value| -> f64 {
        v["batches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["total_ms"].as_f64().unwrap())
            .sum()
    };
    assert!(
        total(&mixed) < total(&separate),
        "{} vs {}",
        total(&mixed),
        total(&separate)
    );
}

#[test]
fn bad_input_names_the_flag_or_key() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["cost", "--model", "llama-3.1-8b", "--hardware", "h900"],
            "--hardware",
        ),
        (
            &["cost", "--model", "gpt-9", "--hardware", "h100"],
            "--model",
        ),
        (&["cost", "--model", "llama-3.1-8b"], "--hardware"),
        (
            &[
                "cost",
                "--model",
                "llama-3.1-8b",
                "--hardware",
                "h100",
                "--decode",
                "64",
            ],
            "--decode",
        ),
        (
            &[
                "cost",
                "--model",
                "llama-3.1-8b",
                "--hardware",
                "h100",
                "--prefill",
                "x@3",
            ],
            "--prefill",
        ),
        (
            &[
                "cost",
                "--model",
                "llama-3.1-8b",
                "--hardware",
                "h100",
                "--lone-request",
                "5",
            ],
            "--lone-request",
        ),
        (
            &[
                "cost",
                "--model",
                "llama-3.1-8b",
                "--hardware",
                "h100",
                "--tp",
                "3",
            ],
            "tensor_parallel",
        ),
    ];
    for (args, want) in cases {
        let o = run(args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            e.starts_with("error: ") && e.contains(want),
            "{args:?}: {e}"
        );
        assert!(!e.contains("panicked"), "{e}");
    }
    // A value outside a closed set is the parser's refusal (exit 2), which
    // lists the values allowed.
    for (flag, value) in [
        ("--runtime", "turbo"),
        ("--dtype", "fp9"),
        ("--kv-dtype", "fp9"),
    ] {
        let args = [
            "cost",
            "--model",
            "llama-3.1-8b",
            "--hardware",
            "h100",
            flag,
            value,
        ];
        let o = run(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(
            e.contains(&format!("invalid value '{value}' for '{flag}"))
                && e.contains("possible values"),
            "{args:?}: {e}"
        );
    }
    // A scenario key names the file and the key path.
    let dir = tempfile::tempdir().unwrap();
    let s = lone_request_scenario(dir.path(), "warp-drive", 1);
    let o = run(&["cost", s.to_str().unwrap()]);
    let e = stderr(&o);
    assert!(
        e.contains("lone-warp-drive-1.toml")
            && e.contains("engine.runtime")
            && e.contains("eager-2023"),
        "{e}"
    );
}

#[test]
fn fidelity_table_covers_every_measured_table() {
    let Some(data) = common::shared_data("vidur/data/profiling") else {
        return;
    };
    let fits = json(&[
        "cost",
        "--fidelity",
        "--data",
        data.to_str().unwrap(),
        "--json",
    ]);
    let fits = fits.as_array().unwrap();
    // 8 MLP profiles, 4 all-reduce tables, the CPU overheads.
    assert_eq!(fits.len(), 13);
    let o = run(&["cost", "--fidelity", "--data", data.to_str().unwrap()]);
    assert!(stdout(&o).contains("eager host time"), "{}", stdout(&o));
}
