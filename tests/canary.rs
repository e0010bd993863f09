//! Canary rollouts through the binary: the slower canary is rolled back and
//! the faster one promoted, with the decisions in summary.json, the printed
//! summary and timeseries.csv; requests are conserved per version; a run
//! repeats byte for byte; bad `[canary]` values are refused with their key
//! path; a scenario without `[canary]` has no trace of it.

mod common;
use common::*;
use std::path::Path;

fn summary(out: &Path) -> serde_json::Value {
    serde_json::from_str(&read(&out.join("summary.json"))).unwrap()
}

/// The `canary_weight` column of timeseries.csv as (time, weight) rows.
fn weights(out: &Path) -> Vec<(f64, u32)> {
    let ts = read(&out.join("timeseries.csv"));
    let mut lines = ts.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header.last(), Some(&"canary_weight"), "{header:?}");
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].parse().unwrap(), f.last().unwrap().parse().unwrap())
        })
        .collect()
}

/// Requests per version add up to the run's counts.
fn assert_conserved(s: &serde_json::Value) {
    let c = &s["canary"];
    let versions = c["versions"].as_array().unwrap();
    let sum = |k: &str| -> f64 { versions.iter().map(|v| f(v, k)).sum() };
    assert_eq!(sum("requests"), f(s, "counts.arrived"));
    assert_eq!(sum("completed"), f(s, "counts.completed"));
    assert_eq!(sum("rejected"), f(s, "counts.rejected"));
    assert_eq!(sum("in_flight"), f(s, "counts.in_flight"));
}

#[test]
fn a_slower_canary_is_rolled_back_on_the_gates_evidence() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = simulate(&repo().join("scenarios/canary-rollback.toml"), &out, &[]);
    let s = summary(&out);
    let c = &s["canary"];
    assert_eq!(c["outcome"], "rolled_back", "{c}");
    assert_eq!(c["final_weight"], 0);
    let decisions = c["decisions"].as_array().unwrap();
    let last = decisions.last().unwrap();
    assert_eq!(last["action"], "roll_back");
    assert_eq!(last["verdict"], "fail");
    assert_eq!(f(c, "outcome_at_s"), f(last, "time_s"));
    // The evidence: TPOT (the eager runtime's host time per step) is past
    // its limit, and both versions had enough requests to judge.
    let tpot = last["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["metric"] == "tpot_ms_p99")
        .unwrap();
    assert_eq!(tpot["verdict"], "fail", "{tpot}");
    assert!(f(tpot, "canary") > f(tpot, "limit"));
    assert!(f(tpot, "limit") > f(tpot, "baseline"));
    assert!(f(tpot, "canary_samples") >= 50.0 && f(tpot, "baseline_samples") >= 50.0);
    assert_conserved(&s);
    // After the rollback the canary's weight is 0 and it takes no more
    // requests: every one it was sent has ended.
    let w = weights(&out);
    let at = f(c, "outcome_at_s");
    assert!(w.iter().filter(|(t, _)| *t >= at).all(|(_, x)| *x == 0));
    assert!(w.iter().any(|(_, x)| *x > 0));
    assert_eq!(f(&c["versions"][1], "in_flight"), 0.0);
    let text = stdout(&o);
    assert!(
        text.contains("canary       eager vs baseline stable: rolled back at"),
        "{text}"
    );
    assert!(text.contains("→ roll back (0 %)"), "{text}");
}

#[test]
fn a_faster_canary_is_promoted_after_every_step_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = simulate(&repo().join("scenarios/canary-promote.toml"), &out, &[]);
    let s = summary(&out);
    let c = &s["canary"];
    assert_eq!(c["outcome"], "promoted", "{c}");
    assert_eq!(c["final_weight"], 100);
    let decisions = c["decisions"].as_array().unwrap();
    assert!(decisions.iter().all(|d| d["verdict"] == "pass"), "{c}");
    let actions: Vec<&str> = decisions
        .iter()
        .map(|d| d["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["advance", "advance", "promote"]);
    let steps: Vec<u64> = decisions
        .iter()
        .map(|d| d["weight"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [10, 25, 50]);
    assert_conserved(&s);
    let w = weights(&out);
    let at = f(c, "outcome_at_s");
    assert!(w.iter().filter(|(t, _)| *t >= at).all(|(_, x)| *x == 100));
    assert!(w.iter().filter(|(t, _)| *t < 30.0).all(|(_, x)| *x == 0));
    let text = stdout(&o);
    assert!(text.contains("promoted at 210.0 s"), "{text}");
    assert!(text.contains("version h200:"), "{text}");
}

#[test]
fn a_control_of_the_canarys_size_catches_the_slower_canary_a_step_earlier() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = simulate(&repo().join("scenarios/canary-control.toml"), &out, &[]);
    let s = summary(&out);
    let c = &s["canary"];
    assert_eq!(c["control"], "control");
    assert_eq!(c["outcome"], "rolled_back", "{c}");
    // canary-rollback.toml, judged against the busier baseline, rolls back
    // at 50 % (210 s); against the control it does at 25 %.
    assert_eq!(f(c, "outcome_at_s"), 150.0, "{c}");
    let last = c["decisions"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["weight"], 25);
    assert_conserved(&s);
    // While the rollout ran the control took as many requests as the canary
    // (the same hash range), within sampling noise.
    let v = c["versions"].as_array().unwrap();
    assert_eq!(v[2]["pool"], "control");
    let (can, ctl) = (f(&v[1], "requests"), f(&v[2], "requests"));
    assert!((can - ctl).abs() < 0.15 * can, "{can} vs {ctl}");
    let text = stdout(&o);
    assert!(text.contains("judged against control control"), "{text}");
    assert!(text.contains("canary vs control over 60 s"), "{text}");
}

#[test]
fn a_canary_run_repeats_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let f = repo().join("scenarios/canary-promote.toml");
    simulate(&f, &a, &[]);
    simulate(&f, &b, &[]);
    for name in [
        "summary.json",
        "requests.csv",
        "timeseries.csv",
        "pools.csv",
    ] {
        assert!(
            read(&a.join(name)) == read(&b.join(name)),
            "{name} differs between two runs"
        );
    }
}

#[test]
fn bad_canary_values_are_refused_with_their_key_path() {
    let tmp = tempfile::tempdir().unwrap();
    let text = read(&repo().join("scenarios/canary-promote.toml"));
    let cases = [
        ("canary = \"h200\"", "canary = \"b200\"", "canary.canary"),
        (
            "baseline = \"h100\"",
            "baseline = \"a100\"",
            "canary.baseline",
        ),
        (
            "{ weight = 25,",
            "{ weight = 125,",
            "canary.steps[1].weight",
        ),
        ("{ weight = 25,", "{ weight = 5,", "canary.steps[1].weight"),
        (
            "weight = 50, hold_s = 60",
            "weight = 50, hold_s = -60",
            "canary.steps[2].hold_s",
        ),
        ("ttft = 0.2,", "ttft = -0.2,", "canary.tolerance.ttft"),
        ("min_samples = 50", "min_samples = 0", "canary.min_samples"),
        ("percentile = 99", "percentile = 199", "canary.percentile"),
    ];
    for (from, to, key) in cases {
        assert!(text.contains(from), "{from}");
        let p = tmp.path().join("bad.toml");
        std::fs::write(&p, text.replacen(from, to, 1)).unwrap();
        let o = run(&["check", p.to_str().unwrap()]);
        assert!(!o.status.success(), "{to} accepted");
        let e = stderr(&o);
        assert!(
            e.starts_with("error: ") && e.contains("bad.toml") && e.contains(&format!("{key}:")),
            "{to}: {e}"
        );
        assert_eq!(e.trim().lines().count(), 1, "{e}");
    }
}

#[test]
fn a_scenario_without_canary_has_no_trace_of_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    simulate(&repo().join("scenarios/heterogeneous.toml"), &out, &[]);
    assert!(summary(&out).get("canary").is_none());
    let ts = read(&out.join("timeseries.csv"));
    assert!(!ts.lines().next().unwrap().contains("canary"));
}
