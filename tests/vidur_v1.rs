//! The side-by-side scenario against Vidur (`scenarios/shared/vidur-v1.toml`,
//! docs/speed-vs-vidur.md) resolves to the configuration of Vidur's README
//! example on its default model (Llama-2-7B on one A100, Sarathi-Serve with
//! 512-token chunks and 512 sequences, Poisson arrivals at 6.45/s, 5,000
//! requests) and draws its lengths from Vidur's `splitwise_conv.csv`. It
//! reads `../shared/data`, so the example test does not run it; this one
//! skips when the data is absent.

mod common;
use common::*;

const TRACE: &str = "vidur/data/processed_traces/splitwise_conv.csv";
/// The scenario's `prompt_max`: with outputs of at most 1,000 tokens every
/// request fits Llama-2-7B's 4,096-token context.
const PROMPT_MAX: f64 = 3096.0;

#[test]
fn vidur_v1_mirrors_vidurs_readme_run_and_draws_from_its_trace() {
    let Some(data) = shared_data(TRACE) else {
        return;
    };
    let trace = data.join(TRACE);
    let text = read(&repo().join("scenarios/shared/vidur-v1.toml"));
    let rel = format!("../../../shared/data/{TRACE}");
    assert!(text.contains(&rel), "the scenario reads {rel}");
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("vidur-v1.toml");
    std::fs::write(&path, text.replace(&rel, trace.to_str().unwrap())).unwrap();

    let check = run(&["check", path.to_str().unwrap()]);
    assert!(check.status.success(), "check: {}", stderr(&check));
    let plan = stdout(&check);
    for want in [
        "Llama-2-7B: 6.74B params",
        "A100-80GB",
        "1 replica × TP 1 on A100-80GB = 1 GPU, router round-robin",
        "policy sarathi, max_num_seqs 512, max_batched_tokens 512, block_size 16, max_model_len 4096",
        "usable           72.00 GiB (gpu_memory_utilization 0.9)",
        "horizon    5000 requests",
        r#"arrivals { process = "poisson", rate = 6.45 }"#,
        "(prompt, output) pairs from csv",
    ] {
        assert!(plan.contains(want), "no {want:?} in\n{plan}");
    }

    simulate(&path, &tmp.path().join("out"), &[]);
    let s: serde_json::Value =
        serde_json::from_str(&read(&tmp.path().join("out/summary.json"))).unwrap();
    assert_eq!(f(&s, "counts.arrived"), 5000.0);
    assert_eq!(f(&s, "counts.completed"), 5000.0, "{}", s["counts"]);
    assert_eq!(
        f(&s, "counts.rejected"),
        0.0,
        "every request fits 4,096 tokens"
    );

    // Lengths are the trace's rows, prompts clamped: the sample's mean
    // prompt is the clamped trace's within 5 standard errors, and every
    // (prompt, output) pair is a row of the trace.
    let rows: Vec<(f64, f64)> = read(&trace)
        .lines()
        .skip(1)
        .map(|l| {
            let v: Vec<f64> = l.split(',').map(|x| x.trim().parse().unwrap()).collect();
            (v[1].min(PROMPT_MAX), v[2])
        })
        .collect();
    assert_eq!(rows.len(), 19_366);
    let n = rows.len() as f64;
    let mean = rows.iter().map(|r| r.0).sum::<f64>() / n;
    let sd = (rows.iter().map(|r| (r.0 - mean).powi(2)).sum::<f64>() / n).sqrt();
    let pairs: std::collections::BTreeSet<(u64, u64)> =
        rows.iter().map(|&(p, o)| (p as u64, o as u64)).collect();
    let csv = read(&tmp.path().join("out/requests.csv"));
    let mut got = Vec::new();
    for l in csv.lines().skip(1) {
        let v: Vec<&str> = l.split(',').collect();
        let (p, o): (u64, u64) = (v[3].parse().unwrap(), v[4].parse().unwrap());
        assert!(p + o <= 4096, "{l}");
        assert!(pairs.contains(&(p, o)), "({p}, {o}) is no row of the trace");
        got.push(p as f64);
    }
    assert_eq!(got.len(), 5000);
    let m = got.iter().sum::<f64>() / got.len() as f64;
    let se = sd / (got.len() as f64).sqrt();
    assert!(
        (m - mean).abs() < 5.0 * se,
        "mean prompt {m} vs {mean} ± {se}"
    );
}
