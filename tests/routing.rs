//! Routing end to end: the hot-prefix example with and without the load
//! bound, herding under stale load reports, and the routers on the public
//! Mooncake conversation trace (in `../shared/data`, skipped when absent).

mod common;
use common::*;

#[test]
fn the_load_bound_keeps_a_hot_prefix_from_exploding_ttft() {
    let on = summary_of("hot-prefix", &[]);
    let off = summary_of("hot-prefix", &[("load_bound = true", "load_bound = false")]);
    let (p99_on, p99_off) = (
        f(&on, "latency.ttft_ms.p99"),
        f(&off, "latency.ttft_ms.p99"),
    );
    assert!(
        p99_off > 10.0 * p99_on,
        "TTFT p99 {p99_on:.0} ms bounded vs {p99_off:.0} ms unbounded"
    );
    // Herding on one replica still reuses the prefix best; the bound gives
    // up a little of that for latency.
    let hit = |s: &serde_json::Value| f(s, "engine.prefix_cache.token_hit_rate");
    assert!(hit(&on) > 0.5, "{}", hit(&on));
    assert_eq!(f(&on, "counts.completed"), 3000.0);
}

/// Least-outstanding herds onto the replica that looked idlest at the last
/// report; power of two choices does not.
#[test]
fn stale_load_reports_make_least_outstanding_herd() {
    let run = |router: &str, interval: &str| {
        summary_of(
            "hot-prefix",
            &[(
                "router = \"prefix-affinity\"",
                &format!("router = \"{router}\"\nreport_interval_s = {interval}"),
            )],
        )
    };
    let p99 = |s: &serde_json::Value| f(s, "latency.ttft_ms.p99");
    let fresh = run("least-outstanding", "0");
    let stale = run("least-outstanding", "2.0");
    let p2_stale = run("power-of-two", "2.0");
    assert!(
        p99(&stale) > 3.0 * p99(&fresh),
        "stale {} vs fresh {}",
        p99(&stale),
        p99(&fresh)
    );
    assert!(
        p99(&p2_stale) < 0.5 * p99(&stale),
        "power-of-two {} vs least-outstanding {} on stale reports",
        p99(&p2_stale),
        p99(&stale)
    );
}

/// On the real Mooncake conversation trace, prefix-affinity reuses far more
/// of the conversations' history than round-robin (docs/routing.md has the
/// 4000-request table; this is the first 1500 requests, for speed).
#[test]
fn prefix_affinity_beats_round_robin_on_the_mooncake_trace() {
    let Some(data) = shared_data("mooncake/conversation_trace.jsonl") else {
        return;
    };
    let trace = data.join("mooncake/conversation_trace.jsonl");
    let base = read(&repo().join("scenarios/shared/mooncake-routing.toml"))
        .replace(
            "../../../shared/data/mooncake/conversation_trace.jsonl",
            trace.to_str().unwrap(),
        )
        .replace("# The whole trace;", "requests = 1500 #");
    let run = |router: &str| {
        let text = base.replace(
            "router = \"prefix-affinity\"",
            &format!("router = \"{router}\""),
        );
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.toml");
        std::fs::write(&path, text).unwrap();
        simulate(&path, &tmp.path().join("out"), &[]);
        let s: serde_json::Value =
            serde_json::from_str(&read(&tmp.path().join("out/summary.json"))).unwrap();
        assert_eq!(f(&s, "counts.arrived"), 1500.0);
        f(&s, "engine.prefix_cache.token_hit_rate")
    };
    let (rr, pa) = (run("round-robin"), run("prefix-affinity"));
    assert!(
        pa > 2.0 * rr,
        "prefix-affinity {pa:.3} vs round-robin {rr:.3}"
    );
}

/// `[metrics] routing_trace`: herding between stale reports shows up as
/// regret on the replica it herded onto, `explain` says so, and a run
/// without the trace writes no `routing.csv` (and leaves none behind).
#[test]
fn the_routing_trace_shows_what_herding_costs() {
    let tmp = tempfile::tempdir().unwrap();
    let text = read(&repo().join("scenarios/hot-prefix.toml")).replace(
        "router = \"prefix-affinity\"",
        "router = \"least-outstanding\"\nreport_interval_s = 2.0",
    );
    let traced = tmp.path().join("traced.toml");
    std::fs::write(
        &traced,
        format!("{text}\n[metrics]\nrouting_trace = true\n"),
    )
    .unwrap();
    let out = tmp.path().join("out");
    simulate(&traced, &out, &[]);
    let s: serde_json::Value = serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    assert_eq!(f(&s, "routing.decisions"), 3000.0);
    assert!(f(&s, "routing.regret_ms_total") > 0.0);
    let csv = read(&out.join("routing.csv"));
    assert!(
        csv.starts_with("request,time_s,replica,score,outstanding,est_ttft_ms,picked,regret_ms\n")
    );
    // 4 candidates per decision.
    assert_eq!(csv.lines().count(), 1 + 4 * 3000);
    let o = bin()
        .args(["explain", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text_out = stdout(&o);
    let line = text_out
        .lines()
        .find(|l| l.contains("lost an estimated"))
        .unwrap_or_else(|| panic!("no routing finding:\n{text_out}"));
    assert!(
        line.contains("least-outstanding") && line.contains("on replica"),
        "{line}"
    );
    // The same folder rewritten without the trace: no routing.csv.
    let plain = tmp.path().join("plain.toml");
    std::fs::write(&plain, &text).unwrap();
    simulate(&plain, &out, &[]);
    assert!(!out.join("routing.csv").exists());
    let s: serde_json::Value = serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    assert!(s.get("routing").is_none());
}
