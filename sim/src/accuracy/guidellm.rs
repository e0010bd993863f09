//! GuideLLM's report JSON (`guidellm benchmark --output-path
//! benchmarks.json`): a `benchmarks` array, one entry per load strategy run
//! (`synchronous`, `concurrent` with `streams`, `constant` or `poisson`
//! with `rate`), each with `metrics` whose distributions are split by
//! request status; the `successful` split has `mean`, `median` and
//! `percentiles` (`p90`, `p95`, `p99`, …). Latency metrics are
//! `time_to_first_token_ms`, `time_per_output_token_ms`,
//! `inter_token_latency_ms` and `request_latency` (seconds); lengths are
//! `prompt_token_count` and `output_token_count`. Each benchmark is a point.

use super::json::{find, num, text};
use super::{AccuracyError, Format, Lengths, Load, MeasuredPoint, Metric, Stat};
use serde_json::Value;

/// Whether `v` looks like a GuideLLM report.
pub fn detect(v: &Value) -> bool {
    v.get("benchmarks")
        .and_then(Value::as_array)
        .and_then(|b| b.first())
        .and_then(|b| b.get("metrics"))
        .is_some()
}

/// The successful requests' summary of `metric` in a benchmark.
fn summary<'a>(bench: &'a Value, metric: &str) -> Option<&'a Value> {
    let m = bench.get("metrics")?.get(metric)?;
    m.get("successful").or(Some(m))
}

fn stat(s: &Value, k: &str) -> Option<f64> {
    num(s, &[k]).or_else(|| num(s, &["percentiles", k]))
}

/// Reads every benchmark of a report.
pub fn read(v: &Value, source: &str) -> Result<Vec<MeasuredPoint>, AccuracyError> {
    let benches = v["benchmarks"].as_array().expect("detected");
    let mut out = Vec::new();
    for (i, b) in benches.iter().enumerate() {
        let here = format!("{source}#benchmarks.{i}");
        let mut p = MeasuredPoint::new(Format::Guidellm, here.clone());
        p.model = find(b, "backend_model")
            .or_else(|| find(b, "model"))
            .and_then(|m| text(m, &[]));
        let strategy = find(b, "strategy").unwrap_or(&Value::Null);
        let kind = text(strategy, &["type_"])
            .or_else(|| text(strategy, &["type"]))
            .unwrap_or_default();
        p.load = match kind.as_str() {
            "synchronous" => Some(Load::Concurrency { users: 1 }),
            "concurrent" => num(strategy, &["streams"])
                .filter(|s| *s >= 1.0)
                .map(|s| Load::Concurrency { users: s as u32 }),
            "poisson" => num(strategy, &["rate"]).map(|rate| Load::Rate { rate, cv: 1.0 }),
            // Evenly spaced sends.
            "constant" => num(strategy, &["rate"]).map(|rate| Load::Rate { rate, cv: 0.0 }),
            _ => None,
        };
        p.prompt = summary(b, "prompt_token_count")
            .and_then(|s| stat(s, "mean"))
            .map(|t| Lengths::Mean { tokens: t });
        p.output = summary(b, "output_token_count")
            .and_then(|s| stat(s, "mean"))
            .map(|t| Lengths::Mean { tokens: t });
        p.requests = find(b, "request_totals")
            .and_then(|t| num(t, &["successful"]))
            .or_else(|| find(b, "requests_made").and_then(|t| num(t, &["successful"])))
            .map(|c| c as u64);
        for (metric, key, scale) in [
            (Metric::Ttft, "time_to_first_token_ms", 1.0),
            (Metric::Tpot, "time_per_output_token_ms", 1.0),
            (Metric::Itl, "inter_token_latency_ms", 1.0),
            (Metric::E2e, "request_latency_ms", 1.0),
            (Metric::E2e, "request_latency", 1e3),
        ] {
            let Some(s) = summary(b, key) else { continue };
            for k in ["mean", "median", "p50", "p90", "p95", "p99"] {
                let st = Stat::from_key(k).expect("known key");
                p.push(metric, st, stat(s, k).map(|x| x * scale));
            }
        }
        if p.measured.is_empty() {
            return Err(AccuracyError::new(format!(
                "{here}: no latency statistic (metrics.time_to_first_token_ms.successful.mean, ...) has a value"
            )));
        }
        out.push(p);
    }
    if out.is_empty() {
        return Err(AccuracyError::new(format!(
            "{source}: `benchmarks` is empty"
        )));
    }
    Ok(out)
}
