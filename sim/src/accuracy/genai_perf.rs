//! genai-perf's `profile_export_genai_perf.json` (and AIPerf's
//! `profile_export_aiperf.json`, which keeps its shape): one object per
//! metric — `time_to_first_token`, `inter_token_latency`,
//! `request_latency`, `input_sequence_length`, `output_sequence_length` —
//! each with `unit` and `avg`, `p50`, `p90`, `p95`, `p99`; the run's
//! settings under `input_config` (`concurrency` or `request_rate`, the
//! model names). genai-perf's inter-token latency is per request (E2E −
//! TTFT) / (output − 1), vLLM's TPOT, so it is compared as TPOT.

use super::json::{self, find, num, text};
use super::{AccuracyError, Format, Lengths, Load, MeasuredPoint, Metric, Stat};
use serde_json::Value;

/// Whether `v` looks like a genai-perf / AIPerf profile export.
pub fn detect(v: &Value) -> bool {
    v.get("time_to_first_token")
        .and_then(|m| m.get("unit"))
        .is_some()
        || v.get("request_latency")
            .and_then(|m| m.get("unit"))
            .is_some()
}

/// Reads one profile export.
pub fn read(v: &Value, source: &str) -> Result<Vec<MeasuredPoint>, AccuracyError> {
    let mut p = MeasuredPoint::new(Format::GenaiPerf, source);
    let config = v.get("input_config").unwrap_or(&Value::Null);
    p.model = text(config, &["model"])
        .or_else(|| text(config, &["model_names"]))
        .or_else(|| find(config, "model_names").and_then(|m| text(m, &[])));
    p.engine = find(config, "service_kind")
        .or_else(|| find(config, "backend"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let concurrency = find(config, "concurrency").and_then(json::as_num);
    let rate = find(config, "request_rate").and_then(json::as_num);
    p.load = match (concurrency, rate) {
        (Some(c), _) if c >= 1.0 => Some(Load::Concurrency { users: c as u32 }),
        (_, Some(r)) if r > 0.0 && r.is_finite() => Some(Load::Rate { rate: r, cv: 1.0 }),
        _ => None,
    };
    p.prompt = num(v, &["input_sequence_length", "avg"]).map(|t| Lengths::Mean { tokens: t });
    p.output = num(v, &["output_sequence_length", "avg"]).map(|t| Lengths::Mean { tokens: t });
    p.requests = num(v, &["request_count", "avg"])
        .or_else(|| num(v, &["request_count"]))
        .map(|c| c as u64);
    for (metric, key) in [
        (Metric::Ttft, "time_to_first_token"),
        (Metric::Tpot, "inter_token_latency"),
        (Metric::E2e, "request_latency"),
    ] {
        let Some(m) = v.get(key) else { continue };
        let unit = text(m, &["unit"]).unwrap_or_else(|| "ms".into());
        let scale = json::unit_ms(&unit).ok_or_else(|| {
            AccuracyError::new(format!(
                "{source}: {key}.unit: unknown unit {unit:?}; allowed: ms, s, us, ns"
            ))
        })?;
        for k in ["avg", "p50", "p90", "p95", "p99"] {
            let stat = Stat::from_key(k).expect("known key");
            p.push(metric, stat, num(m, &[k]).map(|x| x * scale));
        }
    }
    if p.measured.is_empty() {
        return Err(AccuracyError::new(format!(
            "{source}: no latency statistic (time_to_first_token.avg, ...) has a value"
        )));
    }
    Ok(vec![p])
}
