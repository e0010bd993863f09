//! vLLM's `vllm bench serve --save-result` JSON (formerly
//! `benchmarks/benchmark_serving.py`; SGLang's `bench_serving` writes the
//! same keys). One file is one point: `request_rate` (a number, or `"inf"`
//! with `max_concurrency` for a closed loop), `burstiness` (gamma shape;
//! 1 is Poisson), `completed`, `input_lens` / `output_lens` per request,
//! and `<stat>_<metric>_ms` for stat in `mean`, `median`, `pNN` and metric
//! in `ttft`, `tpot` (excluding the first token), `itl`, `e2el`.

use super::json::{self, num, text};
use super::{AccuracyError, Format, Lengths, Load, MeasuredPoint, Metric, Stat};
use serde_json::Value;

/// Whether `v` looks like a vLLM result.
pub fn detect(v: &Value) -> bool {
    v.get("completed").is_some()
        && (v.get("mean_ttft_ms").is_some() || v.get("median_ttft_ms").is_some())
}

/// Reads one vLLM result.
pub fn read(v: &Value, source: &str) -> Result<Vec<MeasuredPoint>, AccuracyError> {
    let mut p = MeasuredPoint::new(Format::Vllm, source);
    p.engine = text(v, &["backend"]).map(|b| match b.as_str() {
        // The API flavours vLLM's client speaks to a vLLM server.
        "openai" | "openai-chat" | "vllm-chat" => "vllm".to_string(),
        _ => b,
    });
    p.model = text(v, &["model_id"]);
    let rate = num(v, &["request_rate"]);
    let users = num(v, &["max_concurrency"]).filter(|c| *c >= 1.0);
    p.load = match (rate, users) {
        (Some(r), Some(c)) if !r.is_finite() => Some(Load::Concurrency { users: c as u32 }),
        (None, Some(c)) => Some(Load::Concurrency { users: c as u32 }),
        // Every prompt sent at once: one closed-loop user per request,
        // each sending once.
        (Some(r), None) if r.is_infinite() => num(v, &["num_prompts"])
            .or_else(|| num(v, &["completed"]))
            .filter(|n| *n >= 1.0)
            .map(|n| Load::Concurrency { users: n as u32 }),
        (Some(r), _) if r.is_finite() && r > 0.0 => {
            // Gamma gaps of shape `burstiness`: cv = 1 / sqrt(shape).
            let shape = num(v, &["burstiness"]).filter(|b| *b > 0.0).unwrap_or(1.0);
            Some(Load::Rate {
                rate: r,
                cv: 1.0 / shape.sqrt(),
            })
        }
        _ => None,
    };
    p.requests = num(v, &["completed"]).map(|c| c as u64);
    let completed = p.requests.unwrap_or(0).max(1) as f64;
    p.prompt = v
        .get("input_lens")
        .and_then(json::u32s)
        .filter(|l| !l.is_empty())
        .map(|tokens| Lengths::Recorded { tokens })
        .or_else(|| {
            num(v, &["total_input_tokens"]).map(|t| Lengths::Mean {
                tokens: t / completed,
            })
        });
    p.output = v
        .get("output_lens")
        .and_then(json::u32s)
        .filter(|l| !l.is_empty())
        .map(|tokens| Lengths::Recorded { tokens })
        .or_else(|| {
            num(v, &["total_output_tokens"]).map(|t| Lengths::Mean {
                tokens: t / completed,
            })
        });
    for (metric, key) in [
        (Metric::Ttft, "ttft"),
        (Metric::Tpot, "tpot"),
        (Metric::Itl, "itl"),
        (Metric::E2e, "e2el"),
    ] {
        for (stat, prefix) in [
            (Stat::Mean, "mean"),
            (Stat::P50, "median"),
            (Stat::P50, "p50"),
            (Stat::P90, "p90"),
            (Stat::P95, "p95"),
            (Stat::P99, "p99"),
        ] {
            p.push(metric, stat, num(v, &[&format!("{prefix}_{key}_ms")]));
        }
    }
    if p.measured.is_empty() {
        return Err(AccuracyError::new(format!(
            "{source}: no latency statistic (mean_ttft_ms, median_tpot_ms, ...) has a value"
        )));
    }
    Ok(vec![p])
}
