//! `/metrics` in the Prometheus text exposition format (version 0.0.4),
//! encoded by `prometheus-client`, with the metric names vLLM's server
//! exports (vLLM `v1/metrics/loggers.py`: `vllm:num_requests_running`,
//! `vllm:kv_cache_usage_perc`, `vllm:time_to_first_token_seconds`, ...) and
//! their histogram buckets, so dashboards built for vLLM read a servesim
//! server unchanged. What vLLM has no name for (rejections, cancellations)
//! is under `servesim:`.
//!
//! The 0.0.4 text format (not OpenMetrics) is what vLLM serves and what
//! every scraper reads: no `# EOF` line, and `# HELP`/`# TYPE` name a
//! counter with its `_total` suffix. Counters are registered without the
//! suffix; the encoder adds it.

use crate::engine::Gauges;
use prometheus_client::encoding::{prometheus_text, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::borrow::Cow;

/// The `Content-Type` of `/metrics`.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// vLLM's TTFT buckets, seconds.
pub const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// vLLM's inter-token latency buckets, seconds.
pub const ITL_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
/// vLLM's end-to-end latency buckets, seconds.
pub const E2E_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// What the front end measures itself: latencies as the server's clients
/// saw them (wall clock) and the requests it refused before they reached
/// the engine. Every metric updates in place (atomics, the histograms' own
/// locks), so the handlers share it without a lock of their own.
#[derive(Debug)]
pub struct Latencies {
    pub ttft: Histogram,
    pub itl: Histogram,
    pub e2e: Histogram,
    /// Requests refused before reaching the engine, by reason.
    pub refused_auth: Counter,
    pub refused_client_limit: Counter,
    pub refused_invalid: Counter,
}

impl Default for Latencies {
    fn default() -> Latencies {
        Latencies {
            ttft: Histogram::new(TTFT_BUCKETS.iter().copied()),
            itl: Histogram::new(ITL_BUCKETS.iter().copied()),
            e2e: Histogram::new(E2E_BUCKETS.iter().copied()),
            refused_auth: Counter::default(),
            refused_client_limit: Counter::default(),
            refused_invalid: Counter::default(),
        }
    }
}

/// One counter with a `reason` label per cause, in a fixed order (a
/// `Family` would list them in hash order).
#[derive(Debug)]
struct ByReason([(&'static str, u64); 5]);

impl EncodeMetric for ByReason {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (reason, n) in &self.0 {
            encoder
                .encode_family(&[("reason", *reason)])?
                .encode_counter::<NoLabelSet, _, u64>(n, None)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

/// The whole exposition: the engine's gauges as of now and the front end's
/// own measurements, every series labelled with the served model's name.
pub fn render(model: &str, g: &Gauges, l: &Latencies) -> Result<String, std::fmt::Error> {
    let mut r = Registry::with_labels(std::iter::once((
        Cow::Borrowed("model_name"),
        Cow::Owned(model.to_string()),
    )));
    let gauges = [
        (
            "vllm:num_requests_running",
            "Requests in the running batch",
            g.running,
        ),
        (
            "vllm:num_requests_waiting",
            "Requests waiting (queued or swapped out)",
            g.waiting,
        ),
    ];
    for (name, help, v) in gauges {
        r.register(name, help, ConstGauge::new(v));
    }
    let usage = g.kv_blocks_used as f64 / g.kv_blocks_total.max(1) as f64;
    r.register(
        "vllm:kv_cache_usage_perc",
        "KV-cache use, 1 means 100 percent",
        ConstGauge::new(usage),
    );
    let gauges = [
        (
            "servesim:kv_blocks_used",
            "KV blocks allocated",
            g.kv_blocks_used,
        ),
        (
            "servesim:kv_blocks_total",
            "KV blocks in the fleet",
            g.kv_blocks_total,
        ),
    ];
    for (name, help, v) in gauges {
        r.register(name, help, ConstGauge::new(v));
    }
    let counters = [
        ("vllm:num_preemptions", "Preemptions", g.preemptions),
        (
            "vllm:prompt_tokens",
            "Prompt tokens admitted",
            g.prompt_tokens,
        ),
        (
            "vllm:generation_tokens",
            "Tokens generated",
            g.generation_tokens,
        ),
        (
            "servesim:iterations",
            "Scheduler iterations run",
            g.iterations,
        ),
        ("vllm:request_success", "Requests completed", g.completed),
        (
            "servesim:requests_cancelled",
            "Requests whose client went away",
            g.cancelled,
        ),
    ];
    for (name, help, v) in counters {
        r.register(name, help, ConstCounter::new(v));
    }
    r.register(
        "servesim:requests_rejected",
        "Requests refused, by reason",
        ByReason([
            ("queue_full", g.queue_full),
            ("unservable", g.unservable),
            ("client_limit", l.refused_client_limit.get()),
            ("unauthorized", l.refused_auth.get()),
            ("invalid", l.refused_invalid.get()),
        ]),
    );
    // A registered histogram shares its counts with the live one.
    r.register(
        "vllm:time_to_first_token_seconds",
        "Time to first token",
        l.ttft.clone(),
    );
    r.register(
        "vllm:inter_token_latency_seconds",
        "Time between tokens",
        l.itl.clone(),
    );
    r.register(
        "vllm:e2e_request_latency_seconds",
        "Request latency, end to end",
        l.e2e.clone(),
    );
    let mut out = String::new();
    prometheus_text::encode(&mut out, &r)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposition() -> String {
        let g = Gauges {
            running: 3,
            kv_blocks_used: 1,
            kv_blocks_total: 4,
            preemptions: 2,
            queue_full: 5,
            ..Gauges::default()
        };
        let l = Latencies::default();
        for v in [0.0005, 0.5, 5000.0] {
            l.ttft.observe(v);
        }
        l.refused_auth.inc();
        render("m\"1", &g, &l).unwrap()
    }

    #[test]
    fn histogram_buckets_are_cumulative_with_vllms_bounds() {
        let s = exposition();
        let m = "model_name=\"m\\\"1\"";
        for line in [
            "# TYPE vllm:time_to_first_token_seconds histogram\n".to_string(),
            format!("vllm:time_to_first_token_seconds_bucket{{{m},le=\"0.001\"}} 1\n"),
            format!("vllm:time_to_first_token_seconds_bucket{{{m},le=\"0.5\"}} 2\n"),
            format!("vllm:time_to_first_token_seconds_bucket{{{m},le=\"1\"}} 2\n"),
            format!("vllm:time_to_first_token_seconds_bucket{{{m},le=\"2560\"}} 2\n"),
            format!("vllm:time_to_first_token_seconds_bucket{{{m},le=\"+Inf\"}} 3\n"),
            format!("vllm:time_to_first_token_seconds_count{{{m}}} 3\n"),
        ] {
            assert!(s.contains(&line), "{line} not in\n{s}");
        }
        let bounds = s
            .lines()
            .filter(|l| l.starts_with("vllm:inter_token_latency_seconds_bucket"))
            .count();
        assert_eq!(bounds, ITL_BUCKETS.len() + 1);
    }

    #[test]
    fn names_keep_their_colons_and_counters_their_one_total() {
        let s = exposition();
        let m = "model_name=\"m\\\"1\"";
        for line in [
            "# HELP vllm:num_requests_running Requests in the running batch.\n".to_string(),
            "# TYPE vllm:num_requests_running gauge\n".to_string(),
            format!("vllm:num_requests_running{{{m}}} 3\n"),
            format!("vllm:kv_cache_usage_perc{{{m}}} 0.25\n"),
            "# TYPE vllm:num_preemptions_total counter\n".to_string(),
            format!("vllm:num_preemptions_total{{{m}}} 2\n"),
            "# TYPE servesim:requests_rejected_total counter\n".to_string(),
            format!("servesim:requests_rejected_total{{{m},reason=\"queue_full\"}} 5\n"),
            format!("servesim:requests_rejected_total{{{m},reason=\"unauthorized\"}} 1\n"),
        ] {
            assert!(s.contains(&line), "{line} not in\n{s}");
        }
        assert!(!s.contains("_total_total"), "{s}");
        assert!(!s.contains("# EOF"), "{s}");
        // One HELP and one TYPE line per metric, as the 0.0.4 parser needs.
        assert_eq!(
            s.matches("# TYPE servesim:requests_rejected_total").count(),
            1
        );
    }

    #[test]
    fn the_probe_reads_the_servers_gauges() {
        let s = exposition();
        assert_eq!(
            crate::probe::gauge(&s, "vllm:num_requests_running"),
            Some(3.0)
        );
        assert_eq!(
            crate::probe::gauge(&s, "servesim:kv_blocks_total"),
            Some(4.0)
        );
    }
}
