//! servesim's own result folders: `servesim observe` writes `summary.json`
//! (and `requests.csv`) in the schema of `simulate`, with the measured
//! latency distributions under `latency` (`ttft_ms`, `tpot_ms`, `itl_ms`,
//! `e2e_ms`, each with `mean`, `p50`, `p90`, `p95`, `p99`). The folder
//! was observed with a scenario's own workload, so the point is that
//! scenario as given (`--scenario`), simulated with the same seed.

use super::json::num;
use super::{AccuracyError, Format, MeasuredPoint, Metric, Stat};
use serde_json::Value;

/// Whether `v` (a `summary.json`) is a servesim run summary.
pub fn detect(v: &Value) -> bool {
    v.get("latency").and_then(|l| l.get("ttft_ms")).is_some() && v.get("counts").is_some()
}

/// Reads the summary of an observed (or simulated) run.
pub fn read(v: &Value, source: &str) -> Result<Vec<MeasuredPoint>, AccuracyError> {
    let mut p = MeasuredPoint::new(Format::Observe, source);
    p.own_workload = true;
    p.engine = Some(if v.get("observed").is_some() {
        "observed".to_string()
    } else {
        "servesim".to_string()
    });
    p.requests = num(v, &["counts", "completed"]).map(|c| c as u64);
    for (metric, key) in [
        (Metric::Ttft, "ttft_ms"),
        (Metric::Tpot, "tpot_ms"),
        (Metric::Itl, "itl_ms"),
        (Metric::E2e, "e2e_ms"),
    ] {
        for k in ["mean", "p50", "p90", "p95", "p99"] {
            let st = Stat::from_key(k).expect("known key");
            p.push(metric, st, num(v, &["latency", key, k]));
        }
    }
    if p.measured.is_empty() {
        return Err(AccuracyError::new(format!(
            "{source}: latency has no values (no request completed?)"
        )));
    }
    Ok(vec![p])
}
