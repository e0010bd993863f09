//! `servesim capacity`: the fleet it sizes is the minimum — checked from
//! outside with `simulate` over the horizon each probe ran (probes extend
//! the scenario's horizon to the fleet): that many replicas meet the SLOs in
//! a steady state, one fewer do not — and headroom, spares and cost follow
//! from the stated inputs.

mod common;
use common::*;
use serde_json::Value;
use std::path::Path;

/// A short quickstart: enough requests for queues to form at saturation.
fn scenario(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("qs.toml");
    std::fs::write(&p, small_quickstart(400)).unwrap();
    p
}

/// The summary of `simulate` with `replicas` at `rate` over `requests`.
fn summary(dir: &Path, replicas: u64, rate: f64, requests: u64) -> Value {
    let text = small_quickstart(requests)
        .replace("replicas = 4", &format!("replicas = {replicas}"))
        .replace("rate = 70.0", &format!("rate = {rate:?}"));
    let p = dir.join(format!("check-{replicas}.toml"));
    std::fs::write(&p, text).unwrap();
    let out = dir.join(format!("check-{replicas}"));
    let o = simulate(&p, &out, &["--json"]);
    serde_json::from_str(&stdout(&o)).unwrap()
}

/// Whether `simulate` says a probe's fleet meets 99 % in a steady state.
fn meets(dir: &Path, probe: &Value) -> bool {
    let s = summary(
        dir,
        probe["replicas"].as_u64().unwrap(),
        probe["rate_rps"].as_f64().unwrap(),
        probe["requests"].as_u64().unwrap(),
    );
    s["slo"]["attainment"].as_f64().unwrap() >= 0.99 && s["load"]["verdict"] == "stable"
}

#[test]
fn sizing_is_the_minimum_and_one_fewer_replica_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let s = scenario(tmp.path());
    let out = tmp.path().join("cap");
    let o = run(&[
        "capacity",
        s.to_str().unwrap(),
        "--demand",
        "90",
        "--headroom",
        "25",
        "--spare",
        "1",
        "--gpu-hour-usd",
        "2.5",
        "--tolerance",
        "0.05",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for want in [
        "highest load within the SLOs",
        "fewest replicas",
        "25 % headroom",
        "N+1",
        "cost per month",
    ] {
        assert!(text.contains(want), "{want} missing:\n{text}");
    }
    let c: Value = serde_json::from_str(&read(&out.join("capacity.json"))).unwrap();
    let sz = &c["sizing"];
    let n = sz["replicas_min"].as_u64().unwrap();
    assert!(n >= 2, "90 req/s needs several replicas, got {n}");
    // Checked from outside: n replicas meet the SLOs at the demand, n − 1 do not.
    assert!(meets(tmp.path(), &sz["at_min"]));
    assert!(!meets(tmp.path(), &sz["below_min"]));
    assert_eq!(sz["below_min"]["replicas"].as_u64(), Some(n - 1));
    // A probe is exactly the run `simulate` makes with the same settings.
    let at = &sz["at_min"];
    assert_eq!(
        at["goodput_rps"],
        summary(tmp.path(), n, 90.0, at["requests"].as_u64().unwrap())["slo"]["goodput_rps"]
    );
    // Headroom sizes for 112.5 req/s; spares and cost follow.
    assert_eq!(sz["sized_for_rps"].as_f64(), Some(112.5));
    let nh = sz["replicas_with_headroom"].as_u64().unwrap();
    assert!(nh >= n);
    assert!(meets(tmp.path(), &sz["at_headroom"]));
    assert_eq!(sz["replicas_total"].as_u64(), Some(nh + 1));
    let gpus = sz["gpus_total"].as_f64().unwrap();
    assert_eq!(sz["usd_per_month"].as_f64(), Some(gpus * 2.5 * 730.0));
    // The rate search brackets its answer with probes on both sides.
    let m = &c["max_load"];
    let (lo, hi) = (
        m["rate_rps"].as_f64().unwrap(),
        m["fails_at_rps"].as_f64().unwrap(),
    );
    assert!(lo < hi && hi - lo <= 0.05 * hi, "{lo} .. {hi}");
}

#[test]
fn capacity_needs_an_slo_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("no-slo.toml");
    let text = small_quickstart(100);
    let cut = text.find("[slo]").unwrap();
    std::fs::write(&p, &text[..cut]).unwrap();
    let o = run(&[
        "capacity",
        p.to_str().unwrap(),
        "--out",
        tmp.path().join("o").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.starts_with(&format!("error: {}: slo: missing", p.display())),
        "{e}"
    );
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
}

#[test]
fn a_trace_is_scaled_to_the_demand() {
    let tmp = tempfile::tempdir().unwrap();
    let s = repo().join("scenarios/replay-azure.toml");
    let out = tmp.path().join("cap");
    let o = run(&[
        "capacity",
        s.to_str().unwrap(),
        "--demand",
        "30",
        "--tolerance",
        "0.05",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let c: Value = serde_json::from_str(&read(&out.join("capacity.json"))).unwrap();
    // The search starts from the trace's recorded rate × its time_scale.
    let first = c["probes"][0]["rate_rps"].as_f64().unwrap();
    assert!((first - 2.0 * 300.0 / 53.785).abs() < 0.2, "{first}");
    let n = c["sizing"]["replicas_min"].as_u64().unwrap();
    // Checked from outside: the trace replayed at 30 req/s on n replicas.
    let trace = repo().join("scenarios/traces/azure_conv_sample.csv");
    let at = |replicas: u64| -> f64 {
        let text = read(&s)
            .replace(
                "path = \"traces/azure_conv_sample.csv\", time_scale = 2.0",
                &format!("path = {:?}, rate = 30.0", trace.to_str().unwrap()),
            )
            .replace(
                "[model]",
                &format!("[fleet]\nreplicas = {replicas}\n\n[model]"),
            );
        let p = tmp.path().join(format!("r{replicas}.toml"));
        std::fs::write(&p, text).unwrap();
        let o = simulate(&p, &tmp.path().join(format!("r{replicas}")), &["--json"]);
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        v["slo"]["attainment"].as_f64().unwrap()
    };
    assert!(at(n) >= 0.99);
    if n > 1 {
        assert!(at(n - 1) < 0.99);
    }
}

/// With pools the search counts units of them, and the report says so: its
/// fleet-size axis and rows name the unit, not replicas.
#[test]
fn a_pooled_capacity_report_counts_units() {
    let tmp = tempfile::tempdir().unwrap();
    let text = read(&repo().join("scenarios/disaggregation.toml"))
        .replace("requests = 3000", "requests = 400");
    let p = tmp.path().join("disagg.toml");
    std::fs::write(&p, text).unwrap();
    let out = tmp.path().join("cap");
    let o = run(&[
        "capacity",
        p.to_str().unwrap(),
        "--demand",
        "4",
        "--tolerance",
        "0.05",
        "--out",
        out.to_str().unwrap(),
        "--report",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let md = read(&out.join("report.md"));
    assert!(md.contains("fewest units at the demand"), "{md}");
    assert!(md.contains(" unit") && md.contains("prefill + "), "{md}");
    let html = read(&out.join("report.html"));
    assert!(
        html.contains("units of "),
        "the fleet-size axis names the unit"
    );
}
