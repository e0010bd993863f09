//! `/metrics` in the Prometheus text exposition format, with the metric
//! names vLLM's server exports (vLLM `v1/metrics/loggers.py`:
//! `vllm:num_requests_running`, `vllm:kv_cache_usage_perc`,
//! `vllm:time_to_first_token_seconds`, ...) and their histogram buckets, so
//! dashboards built for vLLM read a servesim server unchanged. What vLLM has
//! no name for (rejections, cancellations) is under `servesim:`.

use crate::engine::Gauges;
use std::fmt::Write as _;

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

/// A cumulative Prometheus histogram.
#[derive(Debug, Clone)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    pub fn observe(&mut self, v: f64) {
        for (b, c) in self.bounds.iter().zip(&mut self.counts) {
            if v <= *b {
                *c += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    fn render(&self, out: &mut String, name: &str, help: &str, labels: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{b}\"}} {c}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

/// Latencies as the server's clients saw them (wall clock).
#[derive(Debug, Clone)]
pub struct Latencies {
    pub ttft: Histogram,
    pub itl: Histogram,
    pub e2e: Histogram,
    /// Requests refused before reaching the engine, by reason.
    pub refused_auth: u64,
    pub refused_client_limit: u64,
    pub refused_invalid: u64,
}

impl Default for Latencies {
    fn default() -> Latencies {
        Latencies {
            ttft: Histogram::new(TTFT_BUCKETS),
            itl: Histogram::new(ITL_BUCKETS),
            e2e: Histogram::new(E2E_BUCKETS),
            refused_auth: 0,
            refused_client_limit: 0,
            refused_invalid: 0,
        }
    }
}

fn gauge(
    out: &mut String,
    name: &str,
    help: &str,
    kind: &str,
    labels: &str,
    v: impl std::fmt::Display,
) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{{labels}}} {v}"
    );
}

/// The whole exposition.
pub fn render(model: &str, g: &Gauges, l: &Latencies) -> String {
    let labels = format!("model_name=\"{}\"", model.replace(['"', '\\', '\n'], "_"));
    let mut out = String::new();
    let lb = labels.as_str();
    gauge(
        &mut out,
        "vllm:num_requests_running",
        "Requests in the running batch.",
        "gauge",
        lb,
        g.running,
    );
    gauge(
        &mut out,
        "vllm:num_requests_waiting",
        "Requests waiting (queued or swapped out).",
        "gauge",
        lb,
        g.waiting,
    );
    let usage = g.kv_blocks_used as f64 / g.kv_blocks_total.max(1) as f64;
    gauge(
        &mut out,
        "vllm:kv_cache_usage_perc",
        "KV-cache use, 1 means 100 percent.",
        "gauge",
        lb,
        usage,
    );
    gauge(
        &mut out,
        "servesim:kv_blocks_used",
        "KV blocks allocated.",
        "gauge",
        lb,
        g.kv_blocks_used,
    );
    gauge(
        &mut out,
        "servesim:kv_blocks_total",
        "KV blocks in the fleet.",
        "gauge",
        lb,
        g.kv_blocks_total,
    );
    gauge(
        &mut out,
        "vllm:num_preemptions_total",
        "Preemptions.",
        "counter",
        lb,
        g.preemptions,
    );
    gauge(
        &mut out,
        "vllm:prompt_tokens_total",
        "Prompt tokens admitted.",
        "counter",
        lb,
        g.prompt_tokens,
    );
    gauge(
        &mut out,
        "vllm:generation_tokens_total",
        "Tokens generated.",
        "counter",
        lb,
        g.generation_tokens,
    );
    gauge(
        &mut out,
        "servesim:iterations_total",
        "Scheduler iterations run.",
        "counter",
        lb,
        g.iterations,
    );
    gauge(
        &mut out,
        "vllm:request_success_total",
        "Requests completed.",
        "counter",
        lb,
        g.completed,
    );
    gauge(
        &mut out,
        "servesim:requests_cancelled_total",
        "Requests whose client went away.",
        "counter",
        lb,
        g.cancelled,
    );
    let _ = writeln!(
        out,
        "# HELP servesim:requests_rejected_total Requests refused, by reason.\n# TYPE servesim:requests_rejected_total counter"
    );
    for (reason, n) in [
        ("queue_full", g.queue_full),
        ("unservable", g.unservable),
        ("client_limit", l.refused_client_limit),
        ("unauthorized", l.refused_auth),
        ("invalid", l.refused_invalid),
    ] {
        let _ = writeln!(
            out,
            "servesim:requests_rejected_total{{{lb},reason=\"{reason}\"}} {n}"
        );
    }
    l.ttft.render(
        &mut out,
        "vllm:time_to_first_token_seconds",
        "Time to first token.",
        lb,
    );
    l.itl.render(
        &mut out,
        "vllm:inter_token_latency_seconds",
        "Time between tokens.",
        lb,
    );
    l.e2e.render(
        &mut out,
        "vllm:e2e_request_latency_seconds",
        "Request latency, end to end.",
        lb,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let mut h = Histogram::new(&[0.1, 1.0]);
        h.observe(0.05);
        h.observe(0.5);
        h.observe(5.0);
        let mut s = String::new();
        h.render(&mut s, "x", "h", "a=\"b\"");
        assert!(s.contains("x_bucket{a=\"b\",le=\"0.1\"} 1\n"));
        assert!(s.contains("x_bucket{a=\"b\",le=\"1\"} 2\n"));
        assert!(s.contains("x_bucket{a=\"b\",le=\"+Inf\"} 3\n"));
        assert!(s.contains("x_count{a=\"b\"} 3\n"));
    }
}
