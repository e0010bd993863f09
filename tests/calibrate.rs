//! `servesim calibrate` and `servesim validate` end to end on the CPU with a
//! tiny Llama-style model (seconds), plus their bad-input errors.
#![cfg(feature = "calibrate")]

mod common;
use common::*;
use sim::profile::Profile;
use sim::profiled::Profiled;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const TINY_CONFIG: &str = r#"{
  "architectures": ["LlamaForCausalLM"],
  "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
  "max_position_embeddings": 512, "rms_norm_eps": 1e-5
}"#;

/// A tiny quick calibration, run once for the tests that need a profile.
fn tiny_profile() -> &'static (tempfile::TempDir, PathBuf, String) {
    static P: OnceLock<(tempfile::TempDir, PathBuf, String)> = OnceLock::new();
    P.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("config.json");
        std::fs::write(&cfg, TINY_CONFIG).unwrap();
        let folder = dir.path().join("tiny");
        let out = folder.join("profile.toml");
        let o = run(&[
            "calibrate",
            "--device",
            "cpu",
            "--model",
            cfg.to_str().unwrap(),
            "--quick",
            "--max-context",
            "128",
            "--threads",
            "1",
            "--out",
            folder.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "calibrate failed: {}", stderr(&o));
        (dir, out, stdout(&o))
    })
}

#[test]
fn tiny_calibration_writes_a_profile_that_predicts_its_held_out_shapes() {
    let (_, path, out) = tiny_profile();
    assert!(out.contains("held out:"), "{out}");
    assert!(out.contains("random weights (seed 0"), "{out}");
    let p = Profile::load(path).unwrap();
    assert_eq!(p.model.layers, 2);
    assert_eq!(p.device.spec, "cpu");
    assert_eq!(p.device.threads, 1);
    assert!(p.samples.iter().any(|s| s.kind == "mixed"));
    assert!(p.samples.iter().filter(|s| s.kind != "wake").all(|s| {
        // Noisy shapes are measured again, up to the extra rounds recorded.
        let n = s.times_ns.len() as u32;
        let r = p.measurement.repetitions;
        n >= r && n <= r + p.measurement.extra_rounds
    }));
    assert!(p
        .samples
        .iter()
        .any(|s| s.kind == "wake" && s.idle_ms > 0.0));
    // The host part of each step is timed apart and fitted.
    assert_eq!(p.measurement.attention.as_deref(), Some("naive"));
    assert!(p
        .samples
        .iter()
        .filter(|s| s.kind != "wake")
        .all(|s| s.host_ns.is_some_and(|h| h <= s.max_ns)));
    let host = p.measurement.host.as_ref().expect("measured host terms");
    assert!(host.share_pct > 0.0 && host.share_pct < 100.0, "{host:?}");
    assert!(host.method.starts_with("cpu: the sampler"), "{host:?}");
    assert!(out.contains("host       "), "{out}");
    // The simulator's cost model, read back from the file, reproduces the
    // reported held-out error.
    let m = Profiled::new(&p, "tiny.toml");
    let held: Vec<f64> = p
        .samples
        .iter()
        .filter(|s| !s.fitted)
        .map(|s| {
            let y = s.median_ns as f64;
            (m.predict_ns(&s.shape()) - y).abs() / y * 100.0
        })
        .collect();
    assert_eq!(held.len() as u32, p.held_out.shapes);
    let mape = held.iter().sum::<f64>() / held.len() as f64;
    let max = held.iter().copied().fold(0.0, f64::max);
    assert!(
        (mape - p.held_out.mape_pct).abs() < 1e-6,
        "{mape} vs {}",
        p.held_out.mape_pct
    );
    assert!(max <= p.held_out.max_error_pct + 1e-6);
    // A tiny model's steps are sub-millisecond and noisy on a shared CI
    // box (52 % was seen here with two other builds running on its two
    // cores), but a fit whose mean error exceeds the measurement is broken.
    assert!(p.held_out.mape_pct < 100.0, "{:?}", p.held_out);
}

fn write_scenario(dir: &Path, body: &str) -> PathBuf {
    let s = dir.join("s.toml");
    std::fs::write(&s, body).unwrap();
    s
}

const TINY_SCENARIO: &str = r#"
name = "tiny-validate"
seed = 4
[horizon]
requests = 16
[engine]
policy = "sarathi"
max_num_seqs = 8
max_batched_tokens = 64
block_size = 8
[workload]
arrival = { process = "poisson", rate = 100.0 }
prompt_tokens = { dist = "uniform", min = 8, max = 90 }
output_tokens = { dist = "uniform", min = 2, max = 12 }
"#;

#[test]
fn tiny_validation_prints_the_table_and_batching_keeps_greedy_tokens() {
    let (_, profile, _) = tiny_profile();
    let dir = tempfile::tempdir().unwrap();
    let s = write_scenario(dir.path(), TINY_SCENARIO);
    let out = dir.path().join("out");
    let o = run(&[
        "validate",
        "--profile",
        profile.to_str().unwrap(),
        s.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "validate failed: {}", stderr(&o));
    let text = stdout(&o);
    for want in [
        "TTFT p50 (ms)",
        "TPOT p90 (ms)",
        "E2E p99 (ms)",
        "throughput (output tok/s)",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    assert!(
        text.contains("batched vs alone: 4 of 4 sequences produced identical greedy tokens"),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&read(&out.join("validation.json"))).unwrap();
    assert_eq!(v["requests"], 16);
    assert_eq!(v["rows"].as_array().unwrap().len(), 11);
    assert_eq!(v["measured"]["counts"]["completed"], 16);
    assert_eq!(v["simulated"]["counts"]["completed"], 16);
    assert!(v["simulated"]["cost_source"]
        .as_str()
        .unwrap()
        .starts_with("calibration profile"));
    // Both runs saw the same requests: the same prompt and output tokens.
    let tokens = |run: &str| {
        v[run]["throughput"]["output_tokens_per_s"]
            .as_f64()
            .unwrap()
            * v[run]["duration_s"].as_f64().unwrap()
    };
    assert!((tokens("measured") - tokens("simulated")).abs() < 1e-6 * tokens("measured"));
    let kinds: Vec<&str> = v["iterations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds[0], "all");
}

#[test]
fn repeated_live_runs_show_their_spread_beside_the_error() {
    let (_, profile, _) = tiny_profile();
    let dir = tempfile::tempdir().unwrap();
    let s = write_scenario(dir.path(), TINY_SCENARIO);
    let out = dir.path().join("out");
    let args = |runs: &'static str| {
        vec![
            "validate".to_string(),
            "--profile".into(),
            profile.to_str().unwrap().into(),
            s.to_str().unwrap().into(),
            "--out".into(),
            out.to_str().unwrap().into(),
            "--alone-checks".into(),
            "1".into(),
            "--live-runs".into(),
            runs.into(),
        ]
    };
    let a = args("2");
    let o = run(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "validate failed: {}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("live runs  2 × 16 requests"), "{text}");
    assert!(
        text.contains("measured (mean)") && text.contains("run-to-run: "),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&read(&out.join("validation.json"))).unwrap();
    assert_eq!(v["live_runs"], 2);
    for row in v["rows"].as_array().unwrap() {
        let runs: Vec<f64> = row["live_runs"]["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(runs.len(), 2, "{row}");
        let mean = (runs[0] + runs[1]) / 2.0;
        assert!((row["measured"].as_f64().unwrap() - mean).abs() <= 1e-9 * mean.abs().max(1.0));
        let sim = row["simulated"].as_f64().unwrap();
        let err = row["error_pct"].as_f64().unwrap();
        if mean != 0.0 {
            assert!((err - (sim - mean) / mean * 100.0).abs() < 1e-9, "{row}");
        }
    }
    // Both runs' iterations are in iterations.csv, tagged by run.
    let csv = read(&out.join("iterations.csv"));
    assert!(csv.starts_with("run,start_ms,"), "{csv}");
    let runs: std::collections::BTreeSet<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(runs.into_iter().collect::<Vec<_>>(), ["0", "1"]);
    let a = args("0");
    let o = run(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let e = stderr(&o);
    assert!(!o.status.success() && !e.contains("panicked"), "{e}");
    assert!(
        e.contains("'--live-runs <LIVE_RUNS>'") && e.contains("1..=20"),
        "{e}"
    );
}

fn error_of(args: &[&str]) -> String {
    let o = run(args);
    assert!(!o.status.success(), "{args:?} should fail");
    let e = stderr(&o);
    assert!(!e.contains("panicked"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
    e
}

#[test]
fn bad_calibrate_input_is_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p");
    let out = out.to_str().unwrap();
    // A device outside the closed set is the parser's refusal (exit 2).
    let o = run(&[
        "calibrate",
        "--device",
        "tpu",
        "--model",
        "smollm2-135m",
        "--out",
        out,
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("invalid value 'tpu' for '--device <DEVICE>': allowed: cpu, cuda"),
        "{e}"
    );
    let e = error_of(&[
        "calibrate",
        "--device",
        "cuda:0",
        "--model",
        "smollm2-135m",
        "--out",
        out,
    ]);
    assert!(
        e.contains("no CUDA support") && e.contains("--features cuda"),
        "{e}"
    );
    let cfg = dir.path().join("config.json");
    std::fs::write(&cfg, TINY_CONFIG.replace("\"hidden_size\": 64,", "")).unwrap();
    let e = error_of(&["calibrate", "--model", cfg.to_str().unwrap(), "--out", out]);
    assert!(e.contains("config.json: missing `hidden_size`"), "{e}");
    let e = error_of(&["calibrate", "--model", "mixtral-8x7b", "--out", out]);
    assert!(e.contains("mixture-of-experts"), "{e}");
    let bad = dir.path().join("w.gguf");
    std::fs::write(&bad, b"not gguf").unwrap();
    let e = error_of(&[
        "calibrate",
        "--weights",
        bad.to_str().unwrap(),
        "--out",
        out,
    ]);
    assert!(e.contains("not a readable GGUF file"), "{e}");
    let e = error_of(&[
        "calibrate",
        "--model",
        "smollm2-135m",
        "--dtype",
        "bf16",
        "--out",
        out,
    ]);
    assert!(e.contains("no bf16 matrix multiply"), "{e}");
    let e = error_of(&["calibrate", "--out", out]);
    assert!(e.contains("--model is required"), "{e}");
    let e = error_of(&[
        "calibrate",
        "--model",
        "smollm2-135m",
        "--attention",
        "flash",
        "--out",
        out,
    ]);
    assert!(
        e.contains("--attention flash: expected `naive`, `tiled` or `tiled:BLOCK`"),
        "{e}"
    );
}

#[test]
fn bad_validate_input_is_one_clear_line() {
    let (_, profile, _) = tiny_profile();
    let dir = tempfile::tempdir().unwrap();
    let p = profile.to_str().unwrap();
    let s = write_scenario(
        dir.path(),
        &TINY_SCENARIO.replace("[engine]", "[fleet]\nreplicas = 2\n[engine]"),
    );
    let e = error_of(&["validate", "--profile", p, s.to_str().unwrap()]);
    assert!(
        e.contains("fleet.replicas: the live engine is one replica"),
        "{e}"
    );
    let s = write_scenario(
        dir.path(),
        &TINY_SCENARIO.replace("policy = \"sarathi\"", "policy = \"continuous\""),
    );
    let e = error_of(&["validate", "--profile", p, s.to_str().unwrap()]);
    assert!(
        e.contains("would be rejected: the prompt exceeds engine.max_batched_tokens"),
        "{e}"
    );
    let s = write_scenario(dir.path(), TINY_SCENARIO);
    let e = error_of(&[
        "validate",
        "--profile",
        "/nonexistent.toml",
        s.to_str().unwrap(),
    ]);
    assert!(e.contains("/nonexistent.toml"), "{e}");
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, read(profile).replace("[fit]", "[fit]\nextra = 1")).unwrap();
    let e = error_of(&[
        "validate",
        "--profile",
        broken.to_str().unwrap(),
        s.to_str().unwrap(),
    ]);
    assert!(
        e.contains("fit.extra") && e.contains("unknown field"),
        "{e}"
    );
}

/// The shipped CPU validation scenario simulates with its shipped profile,
/// and the summary says the costs came from that profile.
#[test]
fn shipped_validation_scenario_simulates_with_its_profile() {
    let dir = tempfile::tempdir().unwrap();
    let path = repo().join("scenarios/validate/cpu.toml");
    simulate(&path, dir.path(), &[]);
    let s: serde_json::Value =
        serde_json::from_str(&read(&dir.path().join("summary.json"))).unwrap();
    let src = s["cost_source"].as_str().unwrap();
    assert!(
        src.starts_with("calibration profile") && src.contains("cpu-profile.toml"),
        "{src}"
    );
    assert_eq!(s["counts"]["completed"], s["counts"]["arrived"]);
}
