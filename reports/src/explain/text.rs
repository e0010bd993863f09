//! `servesim explain` as text: bands, hypotheses, the slowest requests, the
//! per-replica tail, and one request's timeline.

use super::{Explanation, Metric, Timeline};
use std::fmt::Write;

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "–".into())
}

/// The whole explanation.
pub fn render(e: &Explanation) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "explain: {} requests, {} with latency components",
        e.requests, e.attributed
    );
    for mb in &e.metrics {
        let unit = if mb.metric == Metric::Tpot {
            "ms/token"
        } else {
            "ms"
        };
        let _ = writeln!(
            o,
            "\n{} — mean share of each component among the requests at or above each percentile",
            mb.metric.label()
        );
        let bands: Vec<&super::Band> = std::iter::once(&mb.all).chain(&mb.bands).collect();
        let _ = write!(o, "  {:<24}", "");
        for b in &bands {
            let label = if b.label == "all" {
                "all".to_string()
            } else {
                format!("≥{}", b.label)
            };
            let _ = write!(o, "{label:>10}");
        }
        let _ = write!(o, "\n  {:<24}", "requests");
        for b in &bands {
            let _ = write!(o, "{:>10}", b.requests);
        }
        let _ = write!(o, "\n  {:<24}", format!("percentile ({unit})"));
        for b in &bands {
            let t = if b.label == "all" {
                "–".to_string()
            } else {
                format!("{:.1}", b.threshold_ms)
            };
            let _ = write!(o, "{t:>10}");
        }
        let _ = write!(o, "\n  {:<24}", format!("mean ({unit})"));
        for b in &bands {
            let _ = write!(o, "{:>10.1}", b.mean_ms);
        }
        o.push('\n');
        for (k, c) in mb.all.components.iter().enumerate() {
            if bands.iter().all(|b| b.components[k].share < 0.005) {
                continue;
            }
            let _ = write!(o, "  {:<24}", c.component);
            for b in &bands {
                let _ = write!(o, "{:>9.0}%", b.components[k].share * 100.0);
            }
            o.push('\n');
        }
    }
    if let Some(r) = &e.routing {
        let _ = writeln!(
            o,
            "\nRouting (estimated from the routing trace)\n  {}",
            r.statement
        );
    }
    if !e.hypotheses.is_empty() {
        o.push_str("\nHypotheses the data supports (best first)\n");
        for (i, h) in e.hypotheses.iter().enumerate() {
            let _ = writeln!(o, "  {}. {}", i + 1, h.statement);
            let ev: Vec<String> = h
                .evidence
                .iter()
                .map(|(k, v)| format!("{k}={}", trim(*v)))
                .collect();
            let _ = writeln!(o, "     try: {}", h.try_change);
            let _ = writeln!(o, "     evidence: {}", ev.join(", "));
        }
    }
    for (label, list) in [("TTFT", &e.tail_ttft), ("E2E", &e.tail_e2e)] {
        if list.is_empty() {
            continue;
        }
        let _ = writeln!(
            o,
            "\nSlowest requests by {label} (their replica meanwhile: running batch, queue, KV use)"
        );
        let _ = writeln!(
            o,
            "  {:>7} {:>7} {:>10} {:>10} {:>9} {:>9} {:>9} {:>5}  {:<22} {:>12} {:>10} {:>7}",
            "id",
            "replica",
            "TTFT ms",
            "E2E ms",
            "queue",
            "prefill",
            "decode",
            "pre",
            "largest component",
            "batch mean",
            "queue max",
            "KV max"
        );
        for t in list {
            let phase = |p: &str| {
                t.phases
                    .iter()
                    .find(|x| x.phase == p)
                    .map(|x| format!("{:.1}", (x.end_s - x.start_s) * 1e3))
                    .unwrap_or_else(|| "–".into())
            };
            let top = t
                .phases
                .iter()
                .flat_map(|p| p.components.iter())
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|c| c.0)
                .unwrap_or("–");
            let _ = writeln!(
                o,
                "  {:>7} {:>7} {:>10} {:>10} {:>9} {:>9} {:>9} {:>5}  {:<22} {:>12.1} {:>10.0} {:>6.0}%",
                t.id,
                t.replica.map_or("–".into(), |r| r.to_string()),
                opt(t.ttft_ms),
                opt(t.e2e_ms),
                phase("queue"),
                phase("prefill"),
                phase("decode"),
                t.preemptions,
                top,
                t.context.running_mean,
                t.context.waiting_max,
                t.context.kv_util_max * 100.0
            );
        }
    }
    if e.replicas.len() > 1 {
        o.push_str("\nPer replica (tail = the fleet's p99 requests that ran there)\n");
        let _ = writeln!(
            o,
            "  {:>7} {:>8} {:>12} {:>12} {:>11} {:>10} {:>9} {:>11} {:>7} {:>10}  tail's largest component",
            "replica",
            "requests",
            "TTFT p50 ms",
            "TTFT p99 ms",
            "E2E p99 ms",
            "TTFT tail",
            "E2E tail",
            "preemptions",
            "KV max",
            "queue mean",
        );
        for r in &e.replicas {
            let _ = writeln!(
                o,
                "  {:>7} {:>8} {:>12.1} {:>12.1} {:>11.1} {:>10} {:>9} {:>11} {:>6.0}% {:>10.1}  {}",
                r.replica,
                r.requests,
                r.ttft_p50_ms,
                r.ttft_p99_ms,
                r.e2e_p99_ms,
                r.ttft_tail,
                r.e2e_tail,
                r.preemptions,
                r.kv_util_max * 100.0,
                r.waiting_mean,
                r.tail_top
                    .map(|(c, s)| format!("{c} ({:.0} %)", s * 100.0))
                    .unwrap_or_else(|| "–".into())
            );
        }
    }
    o
}

fn trim(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// One request's timeline.
pub fn render_request(t: &Timeline) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "request {}: {} on replica {}, prompt {} tokens, output {} tokens, preemptions {}",
        t.id,
        t.status,
        t.replica.map_or("–".into(), |r| r.to_string()),
        t.prompt_tokens,
        t.output_tokens,
        t.preemptions
    );
    let _ = writeln!(
        o,
        "arrived at {:.6} s; TTFT {} ms; E2E {} ms",
        t.arrival_s,
        opt(t.ttft_ms),
        opt(t.e2e_ms)
    );
    if t.phases.is_empty() {
        o.push_str(
            "no latency components recorded for it (rejected, or not admitted by the horizon)\n",
        );
    }
    for p in &t.phases {
        let _ = writeln!(
            o,
            "  {:<8} {:>12.6} s → {:>12.6} s  {:>10.3} ms",
            p.phase,
            p.start_s,
            p.end_s,
            (p.end_s - p.start_s) * 1e3
        );
        for (c, ms) in &p.components {
            let _ = writeln!(o, "      {c:<22} {ms:>12.3} ms  {}", super::describe(c));
        }
    }
    let c = &t.context;
    if c.samples > 0 {
        let _ = writeln!(
            o,
            "its replica meanwhile ({} samples): running batch mean {:.1} max {:.0}; queue mean {:.1} max {:.0}; KV use mean {:.0} % max {:.0} %",
            c.samples,
            c.running_mean,
            c.running_max,
            c.waiting_mean,
            c.waiting_max,
            c.kv_util_mean * 100.0,
            c.kv_util_max * 100.0
        );
    }
    o
}
