//! inference-perf's lifecycle report (`summary_lifecycle_metrics.json`,
//! `stage_N_lifecycle_metrics.json`): `load_summary` (`requested_rate`,
//! `achieved_rate`, `count`) and `successes` with `count`, `latency` —
//! `time_to_first_token`, `time_per_output_token` (excluding the first
//! token), `inter_token_latency`, `request_latency`, each in seconds with
//! `mean`, `median`, `p90`, `p99`, … — and the prompt and output lengths
//! (`prompt_len` / `output_len`, renamed `prompt_tokens` /
//! `output_tokens`).

use super::json::{find, num};
use super::{AccuracyError, Format, Lengths, Load, MeasuredPoint, Metric, Stat};
use serde_json::Value;

/// Whether `v` looks like an inference-perf report.
pub fn detect(v: &Value) -> bool {
    v.get("successes").and_then(|s| s.get("latency")).is_some()
}

/// Reads one lifecycle report.
pub fn read(v: &Value, source: &str) -> Result<Vec<MeasuredPoint>, AccuracyError> {
    let mut p = MeasuredPoint::new(Format::InferencePerf, source);
    let load = v.get("load_summary").unwrap_or(&Value::Null);
    p.load = match (
        find(load, "concurrency").and_then(super::json::as_num),
        num(load, &["requested_rate"]),
    ) {
        (Some(c), _) if c >= 1.0 => Some(Load::Concurrency { users: c as u32 }),
        (_, Some(r)) if r > 0.0 && r.is_finite() => Some(Load::Rate { rate: r, cv: 1.0 }),
        _ => None,
    };
    let s = &v["successes"];
    p.requests = num(s, &["count"]).map(|c| c as u64);
    let mean_of = |keys: [&str; 2]| {
        keys.iter()
            .find_map(|k| num(s, &[k, "mean"]))
            .map(|t| Lengths::Mean { tokens: t })
    };
    p.prompt = mean_of(["prompt_len", "prompt_tokens"]);
    p.output = mean_of(["output_len", "output_tokens"]);
    for (metric, key) in [
        (Metric::Ttft, "time_to_first_token"),
        (Metric::Tpot, "time_per_output_token"),
        (Metric::Itl, "inter_token_latency"),
        (Metric::E2e, "request_latency"),
    ] {
        let Some(m) = s["latency"].get(key) else {
            continue;
        };
        for k in ["mean", "median", "p90", "p95", "p99"] {
            let st = Stat::from_key(k).expect("known key");
            p.push(metric, st, num(m, &[k]).map(|x| x * 1e3));
        }
    }
    if p.measured.is_empty() {
        return Err(AccuracyError::new(format!(
            "{source}: no latency statistic (successes.latency.time_to_first_token.mean, ...) has a value"
        )));
    }
    Ok(vec![p])
}
