//! vLLM's benchmark result (`vllm bench serve --save-result`, vLLM
//! `benchmarks/serve.py`): what `observe --format vllm` writes beside its
//! folder, and what `compare` reads as one side of its table, so a team's
//! vLLM results and servesim's observations line up in one command.
//!
//! The file's keys and units are vLLM's: the setup (`date`, `backend`,
//! `model_id`, `tokenizer_id`, `num_prompts`, `request_rate`, `burstiness`,
//! `max_concurrency`), the totals (`duration` in seconds, `completed`,
//! `failed`, token counts, throughputs per second), one entry per request
//! (`input_lens`, `output_lens`, `ttfts` in seconds, `itls` lists of
//! seconds, `generated_texts`, `errors`, empty for a success) and
//! `mean_/median_/std_/p99_` of `ttft_ms`, `tpot_ms`, `itl_ms` and
//! `e2el_ms` in milliseconds. vLLM counts a request's TPOT as its latency
//! less its TTFT over its output tokens less one, and its ITLs as every gap
//! between chunks; its statistics are numpy's (population standard
//! deviation, linearly interpolated percentiles), as [`sim::stats::Dist`]'s.

use crate::observe::{ObserveConfig, Observed, Outcome};
use crate::openai::Endpoint;
use anyhow::Context as _;
use serde_json::{json, Map, Value};
use sim::stats::Dist;
use std::path::Path;

/// Every key [`to_json`] writes, in vLLM's order.
pub const KEYS: &[&str] = &[
    "date",
    "endpoint_type",
    "backend",
    "model_id",
    "tokenizer_id",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "generated_texts",
    "errors",
];

/// The latency metrics whose mean, median, standard deviation and 99th
/// percentile the file carries (`mean_ttft_ms`, ...).
pub const METRICS: [&str; 4] = ["ttft", "tpot", "itl", "e2el"];

/// `YYYYmmdd-HHMMSS` of the system clock in UTC, vLLM's `date` format.
fn date_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Mean, median, population standard deviation and 99th percentile (ms).
fn stats(v: Vec<f64>) -> [f64; 4] {
    if v.is_empty() {
        return [0.0; 4];
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let std = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
    let d = Dist::of(v);
    [mean, d.p50, std, d.p99]
}

/// The burstiness of the arrivals sent, as vLLM's gamma shape: one over
/// the squared coefficient of variation of the gaps between scheduled
/// sends (1 for Poisson arrivals); `None` with fewer than three requests.
fn burstiness(obs: &Observed) -> Option<f64> {
    let mut t: Vec<f64> = obs
        .observations
        .iter()
        .map(|o| o.scheduled.as_secs_f64())
        .collect();
    t.sort_by(f64::total_cmp);
    let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
    if gaps.len() < 2 {
        return None;
    }
    let n = gaps.len() as f64;
    let mean = gaps.iter().sum::<f64>() / n;
    let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n;
    (mean > 0.0 && var > 0.0).then(|| mean * mean / var)
}

/// vLLM's benchmark result of an observed run. `offered_rps` is the
/// workload's rate (`request_rate`).
pub fn to_json(cfg: &ObserveConfig, obs: &Observed, offered_rps: f64) -> Value {
    let duration = obs.wall.as_secs_f64();
    let (mut ttfts, mut itls, mut tpots, mut e2els) = (vec![], vec![], vec![], vec![]);
    let (mut input_lens, mut output_lens, mut ttft_col, mut itl_col, mut errors) =
        (vec![], vec![], vec![], vec![], vec![]);
    let (mut completed, mut total_in, mut total_out) = (0u64, 0u64, 0u64);
    for (spec, o) in obs.specs.iter().zip(&obs.observations) {
        input_lens.push(spec.prompt_tokens);
        let sent = o.sent.unwrap_or(o.scheduled);
        let gaps: Vec<f64> = o
            .token_times
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64())
            .collect();
        let ttft = o
            .token_times
            .first()
            .map_or(0.0, |t| t.saturating_sub(sent).as_secs_f64());
        if o.outcome == Outcome::Completed && !o.token_times.is_empty() {
            completed += 1;
            total_in += spec.prompt_tokens as u64;
            total_out += o.tokens as u64;
            output_lens.push(o.tokens);
            let latency = o
                .end
                .or(o.token_times.last().copied())
                .map_or(0.0, |e| e.saturating_sub(sent).as_secs_f64());
            ttfts.push(ttft * 1e3);
            e2els.push(latency * 1e3);
            if o.tokens > 1 {
                tpots.push((latency - ttft) / (o.tokens - 1) as f64 * 1e3);
            }
            itls.extend(gaps.iter().map(|g| g * 1e3));
            errors.push(String::new());
        } else {
            // vLLM's record of a failed request: no output, the reason.
            output_lens.push(0);
            errors.push(match o.outcome {
                Outcome::InFlight => "in flight when the run's time ran out".to_string(),
                Outcome::Cancelled => "cancelled by the client".to_string(),
                _ if o.error.is_empty() => format!("HTTP {}", o.http_status),
                _ => o.error.clone(),
            });
        }
        ttft_col.push(ttft);
        itl_col.push(gaps);
    }
    let n = obs.specs.len();
    let per_s = |x: f64| if duration > 0.0 { x / duration } else { 0.0 };
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    let backend = match cfg.endpoint {
        Endpoint::Completions => "openai",
        Endpoint::Chat => "openai-chat",
    };
    put("date", json!(date_now()));
    put("endpoint_type", json!(backend));
    put("backend", json!(backend));
    put("model_id", json!(cfg.model));
    put("tokenizer_id", json!(cfg.model));
    put("num_prompts", json!(n));
    put(
        "request_rate",
        if offered_rps.is_finite() && offered_rps > 0.0 {
            json!(offered_rps)
        } else {
            json!("inf")
        },
    );
    put("burstiness", json!(burstiness(obs).unwrap_or(1.0)));
    put("max_concurrency", json!(cfg.max_connections));
    put("duration", json!(duration));
    put("completed", json!(completed));
    put("failed", json!(n as u64 - completed));
    put("total_input_tokens", json!(total_in));
    put("total_output_tokens", json!(total_out));
    put("request_throughput", json!(per_s(completed as f64)));
    put("request_goodput", Value::Null);
    put("output_throughput", json!(per_s(total_out as f64)));
    put(
        "total_token_throughput",
        json!(per_s((total_in + total_out) as f64)),
    );
    put("input_lens", json!(input_lens));
    put("output_lens", json!(output_lens));
    put("ttfts", json!(ttft_col));
    put("itls", json!(itl_col));
    put("generated_texts", json!(vec![""; n]));
    put("errors", json!(errors));
    for (name, v) in METRICS.iter().zip([ttfts, tpots, itls, e2els]) {
        let [mean, median, std, p99] = stats(v);
        put(&format!("mean_{name}_ms"), json!(mean));
        put(&format!("median_{name}_ms"), json!(median));
        put(&format!("std_{name}_ms"), json!(std));
        put(&format!("p99_{name}_ms"), json!(p99));
    }
    Value::Object(m)
}

/// Whether a JSON document is a vLLM benchmark result: an object with the
/// per-request `ttfts` and `itls` lists and `completed`.
pub fn is_result(v: &Value) -> bool {
    v["ttfts"].is_array() && v["itls"].is_array() && v["completed"].is_u64()
}

/// A vLLM benchmark result as the summary fields `compare` reads:
/// `latency.{ttft_ms,tpot_ms,itl_ms,e2e_ms}` percentiles from its
/// per-request lists (a request whose `errors` entry is empty completed;
/// its end-to-end latency is its TTFT plus its gaps, its TPOT those gaps
/// over its output tokens less one, as vLLM's), `throughput` from its
/// totals, `counts.completed` and its failed requests as `counts.rejected`,
/// and `model` from `model_id`.
pub fn as_summary(v: &Value, file: &Path) -> anyhow::Result<Value> {
    let list = |k: &str| -> anyhow::Result<&Vec<Value>> {
        v[k].as_array().with_context(|| {
            format!(
                "{}: a vLLM benchmark result needs the list {k} (saved by vllm bench serve --save-result)",
                file.display()
            )
        })
    };
    let (ttfts, itls, outs, errors) = (
        list("ttfts")?,
        list("itls")?,
        list("output_lens")?,
        list("errors")?,
    );
    let n = ttfts.len();
    if itls.len() != n || outs.len() != n || errors.len() != n {
        anyhow::bail!(
            "{}: ttfts, itls, output_lens and errors must list the same requests (they have {}, {}, {} and {})",
            file.display(),
            n,
            itls.len(),
            outs.len(),
            errors.len()
        );
    }
    let bad = |k: &str, i: usize| {
        anyhow::anyhow!(
            "{}: {k}[{i}] is not a non-negative number of seconds",
            file.display()
        )
    };
    let (mut ttft, mut tpot, mut itl, mut e2e) = (vec![], vec![], vec![], vec![]);
    let mut failed = 0u64;
    for i in 0..n {
        let ok = errors[i].as_str().is_none_or(str::is_empty) && !errors[i].is_array();
        if !ok {
            failed += 1;
            continue;
        }
        let t = ttfts[i]
            .as_f64()
            .filter(|t| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| bad("ttfts", i))?;
        let gaps = itls[i]
            .as_array()
            .ok_or_else(|| bad("itls", i))?
            .iter()
            .map(|g| g.as_f64().filter(|g| g.is_finite() && *g >= 0.0))
            .collect::<Option<Vec<f64>>>()
            .ok_or_else(|| bad("itls", i))?;
        let out = outs[i].as_u64().unwrap_or(0);
        let decode: f64 = gaps.iter().sum();
        ttft.push(t * 1e3);
        e2e.push((t + decode) * 1e3);
        if out > 1 {
            tpot.push(decode / (out - 1) as f64 * 1e3);
        }
        itl.extend(gaps.iter().map(|g| g * 1e3));
    }
    let dist = |v: Vec<f64>| {
        let d = Dist::of(v);
        json!({"count": d.count, "p50": d.p50, "p90": d.p90, "p99": d.p99})
    };
    let num = |k: &str| -> anyhow::Result<f64> {
        v[k].as_f64()
            .with_context(|| format!("{}: key {k} is missing or not a number", file.display()))
    };
    Ok(json!({
        "model": v["model_id"],
        "vllm_bench": true,
        "latency": {
            "ttft_ms": dist(ttft),
            "tpot_ms": dist(tpot),
            "itl_ms": dist(itl),
            "e2e_ms": dist(e2e),
        },
        "throughput": {
            "output_tokens_per_s": num("output_throughput")?,
            "requests_per_s": num("request_throughput")?,
        },
        "counts": {
            "completed": num("completed")? as u64,
            "rejected": failed,
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::Observation;
    use sim::workload::RequestSpec;
    use std::time::Duration;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    #[test]
    fn an_observed_run_reads_back_as_the_summary_it_measured() {
        let spec = |p: u32, o: u32| RequestSpec {
            prompt_tokens: p,
            output_tokens: o,
            ..RequestSpec::default()
        };
        let done = |at: u64, ttft: u64, gap: u64, n: u64| Observation {
            scheduled: ms(at),
            sent: Some(ms(at)),
            http_status: 200,
            token_times: (0..n).map(|i| ms(at + ttft + i * gap)).collect(),
            tokens: n as u32,
            end: Some(ms(at + ttft + (n - 1) * gap)),
            outcome: Outcome::Completed,
            ..Observation::default()
        };
        let refused = Observation {
            scheduled: ms(30),
            sent: Some(ms(30)),
            http_status: 503,
            outcome: Outcome::Rejected,
            error: "HTTP 503: queue full".into(),
            ..Observation::default()
        };
        let obs = Observed {
            specs: vec![spec(10, 3), spec(20, 5), spec(30, 4)],
            observations: vec![done(0, 100, 10, 3), done(10, 200, 20, 5), refused],
            wall: Duration::from_secs(2),
        };
        let cfg = ObserveConfig {
            url: "http://x".into(),
            model: "m".into(),
            endpoint: Endpoint::Completions,
            api_key: None,
            max_requests: 3,
            max_duration: Duration::from_secs(10),
            max_connections: 8,
            request_timeout: Duration::from_secs(10),
            cancel_share: 0.0,
            cancel_after: 1,
        };
        let v = to_json(&cfg, &obs, 5.0);
        for k in KEYS {
            assert!(v.get(*k).is_some(), "no {k}");
        }
        for m in METRICS {
            for s in ["mean", "median", "std", "p99"] {
                assert!(v[format!("{s}_{m}_ms")].is_f64(), "{s}_{m}_ms");
            }
        }
        assert_eq!(v["completed"], 2);
        assert_eq!(v["failed"], 1);
        assert_eq!(v["total_output_tokens"], 8);
        assert_eq!(v["output_lens"], json!([3, 5, 0]));
        assert_eq!(v["errors"][2], "HTTP 503: queue full");
        assert!((v["ttfts"][1].as_f64().unwrap() - 0.2).abs() < 1e-9);
        assert!((v["mean_ttft_ms"].as_f64().unwrap() - 150.0).abs() < 1e-9);
        // TPOTs 10 and 20 ms; E2E 120 and 280 ms; ITLs 10, 10, 20 × 4.
        assert!((v["median_tpot_ms"].as_f64().unwrap() - 15.0).abs() < 1e-9);
        assert!((v["std_e2el_ms"].as_f64().unwrap() - 80.0).abs() < 1e-9);
        assert!((v["output_throughput"].as_f64().unwrap() - 4.0).abs() < 1e-9);
        assert_eq!(v["request_rate"], 5.0);
        assert!(v["date"].as_str().unwrap().len() == 15);
        // Read back: the same latencies and counts.
        assert!(is_result(&v));
        let s = as_summary(&v, Path::new("r.json")).unwrap();
        assert_eq!(s["counts"]["completed"], 2);
        assert_eq!(s["counts"]["rejected"], 1);
        assert!((s["latency"]["ttft_ms"]["p50"].as_f64().unwrap() - 150.0).abs() < 1e-9);
        assert!((s["latency"]["e2e_ms"]["p50"].as_f64().unwrap() - 200.0).abs() < 1e-9);
        assert!((s["latency"]["tpot_ms"]["p50"].as_f64().unwrap() - 15.0).abs() < 1e-9);
        // A malformed list is named.
        let mut bad = v.clone();
        bad["itls"][0] = json!("x");
        let e = as_summary(&bad, Path::new("r.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("r.json: itls[0] is not"), "{e}");
        bad["itls"] = json!([]);
        let e = as_summary(&bad, Path::new("r.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("must list the same requests"), "{e}");
    }

    #[test]
    fn dates_are_vllms_format() {
        let d = date_now();
        assert_eq!(d.len(), 15);
        assert_eq!(&d[8..9], "-");
        assert!(d[..8].chars().all(|c| c.is_ascii_digit()));
    }
}
