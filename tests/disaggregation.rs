//! The disaggregation and heterogeneous-pool examples of
//! docs/disaggregation.md: the numbers the page states hold.

mod common;
use common::*;

fn summary(name: &str, out: &std::path::Path) -> serde_json::Value {
    simulate(&repo().join(format!("scenarios/{name}.toml")), out, &[]);
    serde_json::from_str(&read(&out.join("summary.json"))).unwrap()
}

fn p99(s: &serde_json::Value, metric: &str) -> f64 {
    s["latency"][metric]["p99"].as_f64().unwrap()
}

#[test]
fn disaggregation_beats_colocation_on_tpot_until_the_link_is_slow() {
    let tmp = tempfile::tempdir().unwrap();
    let dis = summary("disaggregation", &tmp.path().join("d"));
    let col = summary("disaggregation-colocated", &tmp.path().join("c"));
    let slow = summary("disaggregation-slow-link", &tmp.path().join("s"));
    assert_eq!(dis["gpus"], col["gpus"]);
    let (d, c, s) = (
        p99(&dis, "tpot_ms"),
        p99(&col, "tpot_ms"),
        p99(&slow, "tpot_ms"),
    );
    assert!(d < c * 0.9, "disaggregated TPOT p99 {d} vs colocated {c}");
    // Balanced over the four links the slow link still loses: each link
    // is nearly full and every transfer queues.
    assert!(s > c * 1.5, "slow link TPOT p99 {s} vs colocated {c}");
    assert!(f(&slow, "slo.attainment") < 0.95);
    let t = &dis["kv_transfer"];
    assert_eq!(t["bytes_sent"], t["bytes_received"]);
    assert!(slow["kv_transfer"]["link_utilization"].as_f64().unwrap() > 0.9);
    assert_eq!(dis["pools"].as_array().unwrap().len(), 2);
    // requests.csv ends with the transfer columns in a disaggregated run.
    let csv = read(&tmp.path().join("d/requests.csv"));
    assert!(csv.lines().next().unwrap().ends_with(
        ",prefill_replica,kv_bytes,kv_decode_wait_ms,kv_link_ms,kv_handoff_to_decode_ms"
    ));
    let colcsv = read(&tmp.path().join("c/requests.csv"));
    assert!(!colcsv.lines().next().unwrap().contains("kv_bytes"));
}

#[test]
fn the_xpyd_sweep_picks_a_disaggregated_split() {
    let tmp = tempfile::tempdir().unwrap();
    let o = run(&[
        "sweep",
        "scenarios/disaggregation.toml",
        "--grid",
        "scenarios/grids/disaggregation.toml",
        "--out",
        tmp.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    // The last grid entry is the colocated fleet; the operating point is a
    // prefill/decode split with a lower TPOT p99.
    let line = text
        .lines()
        .find(|l| l.starts_with("operating point: point "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("role = \"prefill\""), "{line}");
    assert!(!line.contains("point 7 "), "{line}");
}

#[test]
fn check_prints_the_kv_transfer_budget_and_the_pools() {
    let o = run(&["check", "scenarios/disaggregation.toml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = stdout(&o);
    assert!(t.contains("131072 KV bytes per prompt token"), "{t}");
    assert!(t.contains("GB/s per link at p50"), "{t}");
    assert!(
        t.contains("pool       prefill (prefill): 4 replicas × TP 1 on H100-SXM = 4 GPUs, "),
        "{t}"
    );
    let o = run(&["check", "scenarios/deepseek-v3-ep8.toml"]);
    assert!(
        stdout(&o).contains("mixture of experts (EP 8)"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn heterogeneous_pools_send_more_work_to_the_faster_gpus() {
    let tmp = tempfile::tempdir().unwrap();
    let s = summary("heterogeneous", tmp.path());
    let pools = s["pools"].as_array().unwrap();
    assert_eq!(pools[0]["hardware"], "H100-SXM");
    assert_eq!(pools[1]["hardware"], "A100-80GB");
    let csv = read(&tmp.path().join("requests.csv"));
    let (mut h100, mut all) = (0, 0);
    for line in csv.lines().skip(1) {
        let replica: u32 = line.split(',').nth(2).unwrap().parse().unwrap();
        all += 1;
        h100 += (replica < 4) as u32;
    }
    assert!(h100 as f64 > 0.6 * all as f64, "{h100} of {all}");
}
