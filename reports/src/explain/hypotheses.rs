//! Ranked hypotheses about the tail, each built from numbers of the run and
//! carrying them as evidence: which component dominates each p99 tail and
//! where and when those requests ran, which component grows most from the
//! typical request to the tail, and which replica holds more than its share.

use super::{describe, quantile, tail, Hypothesis, Metric, MetricBands, ReplicaRow, Run};
use std::collections::BTreeMap;

/// A dominant component is reported from this mean share up.
const MIN_SHARE: f64 = 0.15;
/// At most this many hypotheses.
const MAX: usize = 8;

/// The change to the scenario a hypothesis about `component` suggests:
/// the keys that act on it and which way to move them, so the next run
/// tests it.
pub fn change_for(component: &str) -> &'static str {
    match component {
        "queue_kv" => "raise engine.gpu_memory_utilization or set model.kv_dtype = \"fp8\" (more KV blocks per replica), or raise fleet.replicas",
        "queue_token_budget" => "raise engine.max_batched_tokens (more prompt tokens per iteration), or raise fleet.replicas",
        "queue_max_seqs" => "raise engine.max_num_seqs (more sequences per batch), or raise fleet.replicas",
        "queue_policy" => "set engine.policy = \"continuous\" or \"sarathi\" (admit new requests every iteration)",
        "queue_iteration" => "lower engine.max_batched_tokens (shorter iterations to wait behind), or raise fleet.replicas",
        "queue_fairness" => "raise the waiting tenant's tenants.N.weight, or set fairness.policy to another order",
        "queue_rate_limit" => "raise tenants.N.limits.requests_per_s (or tokens_per_min) of the limited tenant",
        "cold_start" => "raise autoscale.min_replicas or lifecycle.standby (replicas ready before the load arrives)",
        "prefill_compute" => "raise fleet.tensor_parallel (faster prefill per replica), or set engine.prefix_caching = true when prompts share prefixes",
        "prefill_interference" => "lower engine.max_batched_tokens (smaller prefill chunks beside the decodes), or split prefill into its own [[fleet.pools]] role = \"prefill\"",
        "prefill_preempted" | "decode_preempted" => "raise engine.gpu_memory_utilization or lower engine.max_num_seqs (fewer preemptions), or set engine.preemption = \"swap\"",
        "kv_transfer" => "raise fleet.kv_transfer.bandwidth_gbyte_s, or raise fleet.kv_transfer.local_prefill_max_tokens (short prompts skip the link)",
        "decode_compute" => "raise fleet.tensor_parallel (faster decode steps), or lower engine.max_num_seqs where the batches are large (fewer sequences per step)",
        "decode_stall" => "lower engine.max_batched_tokens or set engine.policy = \"sarathi\" (decodes first, prefills chunked), or disaggregate prefill",
        _ => "raise fleet.replicas (less load per replica) and compare",
    }
}

fn pct(x: f64) -> String {
    format!("{:.0} %", x * 100.0)
}

/// Where and when a tail ran: its most common replica (and fraction), the
/// 10th–90th percentile of its arrivals, the peak KV use and queue on that
/// replica in that window, and its preemptions.
struct Locus {
    replica: Option<(u32, f64)>,
    from_s: f64,
    to_s: f64,
    kv_max: f64,
    waiting_max: f64,
    preemptions: u64,
}

fn locus(run: &Run, members: &[usize], replicas: usize) -> Locus {
    let mut by: BTreeMap<u32, usize> = BTreeMap::new();
    for &i in members {
        if let Some(r) = run.rows[i].replica {
            *by.entry(r).or_default() += 1;
        }
    }
    let top = by.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)));
    let n = members.len().max(1) as f64;
    let replica = top
        .map(|(&r, &c)| (r, c as f64 / n))
        .filter(|&(_, f)| replicas > 1 && f >= 1.5 / replicas as f64);
    let mut arrivals: Vec<f64> = members
        .iter()
        .map(|&i| run.rows[i].arrival_ns as f64 / 1e9)
        .collect();
    arrivals.sort_by(f64::total_cmp);
    let (from_s, to_s) = (quantile(&arrivals, 0.1), quantile(&arrivals, 0.9));
    let end_s = members
        .iter()
        .map(|&i| {
            let r = &run.rows[i];
            (r.arrival_ns + r.e2e_ns.or(r.ttft_ns).unwrap_or(0)) as f64 / 1e9
        })
        .fold(to_s, f64::max);
    let reps: Vec<usize> = match replica {
        Some((r, _)) => vec![r as usize],
        None => by.keys().map(|&r| r as usize).collect(),
    };
    let (mut kv_max, mut waiting_max) = (0.0f64, 0.0f64);
    for r in reps {
        for s in run.samples.get(r).map(Vec::as_slice).unwrap_or(&[]) {
            if s.time_s >= from_s && s.time_s <= end_s {
                kv_max = kv_max.max(s.kv_util);
                waiting_max = waiting_max.max(s.waiting);
            }
        }
    }
    Locus {
        replica,
        from_s,
        to_s,
        kv_max,
        waiting_max,
        preemptions: members.iter().map(|&i| run.rows[i].preemptions).sum(),
    }
}

/// The hypotheses, best supported first.
pub fn rank(run: &Run, metrics: &[MetricBands], replicas: &[ReplicaRow]) -> Vec<Hypothesis> {
    let mut out = Vec::new();
    for mb in metrics {
        let m = mb.metric;
        let Some(b) = mb.bands.iter().find(|b| b.label == "p99") else {
            continue;
        };
        let unit = if m == Metric::Tpot {
            " ms/token"
        } else {
            " ms"
        };
        let members = tail(run, m, 0.99);
        let at = locus(run, &members, replicas.len());
        if let Some(top) = b.top().filter(|t| t.share >= MIN_SHARE) {
            let mut s = format!(
                "p99 {} (≥ {:.1}{unit}, {} requests) is {} {} ({}; {} of all requests' {})",
                m.label(),
                b.threshold_ms,
                b.requests,
                pct(top.share),
                top.component,
                describe(top.component),
                pct(mb.all.share_of(top.component)),
                m.label()
            );
            let mut ev = BTreeMap::from([
                ("threshold_ms".to_string(), b.threshold_ms),
                ("requests".to_string(), b.requests as f64),
                ("share".to_string(), top.share),
                ("mean_ms".to_string(), top.mean_ms),
                (
                    "share_all_requests".to_string(),
                    mb.all.share_of(top.component),
                ),
                ("arrivals_from_s".to_string(), at.from_s),
                ("arrivals_to_s".to_string(), at.to_s),
                ("kv_util_max".to_string(), at.kv_max),
                ("waiting_max".to_string(), at.waiting_max),
                ("preemptions".to_string(), at.preemptions as f64),
            ]);
            if let Some((r, f)) = at.replica {
                s += &format!(" on replica {r} ({} of them)", pct(f));
                ev.insert("replica".into(), r as f64);
                ev.insert("replica_fraction".into(), f);
            }
            s += &format!(
                " arriving between {:.1} s and {:.1} s; KV use peaked at {} and the queue at {:.0} there; preemptions {}",
                at.from_s,
                at.to_s,
                pct(at.kv_max),
                at.waiting_max,
                at.preemptions
            );
            out.push(Hypothesis {
                statement: s,
                try_change: change_for(top.component).to_string(),
                score: top.share,
                evidence: ev,
            });
        }
        // What separates the tail from the typical request.
        let extra = b.mean_ms - mb.all.mean_ms;
        if extra > 0.0 && b.mean_ms > 1.5 * mb.all.mean_ms {
            let growth = b
                .components
                .iter()
                .zip(&mb.all.components)
                .map(|(t, a)| (t.component, a.mean_ms, t.mean_ms))
                .max_by(|x, y| (x.2 - x.1).total_cmp(&(y.2 - y.1)));
            if let Some((c, from, to)) = growth.filter(|g| g.2 > g.1) {
                let explained = (to - from) / extra;
                if b.top()
                    .is_none_or(|t| t.component != c || t.share < MIN_SHARE)
                {
                    out.push(Hypothesis {
                        statement: format!(
                            "p99 {} vs all requests: {c} ({}) grows from {from:.1}{unit} to {to:.1}{unit}, {} of the tail's extra {extra:.1}{unit}",
                            m.label(),
                            describe(c),
                            pct(explained),
                        ),
                        try_change: change_for(c).to_string(),
                        score: explained * 0.9,
                        evidence: BTreeMap::from([
                            ("mean_all_ms".to_string(), from),
                            ("mean_tail_ms".to_string(), to),
                            ("tail_extra_ms".to_string(), extra),
                            ("explained".to_string(), explained),
                        ]),
                    });
                }
            }
        }
    }
    // A replica holding much more than its share of the tail.
    let n = replicas.len();
    let tail_total: usize = replicas.iter().map(|r| r.e2e_tail).sum();
    if n > 1 && tail_total >= 4 {
        let fleet_wait = replicas.iter().map(|r| r.waiting_mean).sum::<f64>() / n as f64;
        if let Some(r) = replicas
            .iter()
            .max_by(|a, b| a.e2e_tail.cmp(&b.e2e_tail).then(b.replica.cmp(&a.replica)))
        {
            let f = r.e2e_tail as f64 / tail_total as f64;
            if f >= 2.0 / n as f64 {
                out.push(Hypothesis {
                    statement: format!(
                        "replica {} holds {} of the p99 E2E tail (a fair share is {}); its mean queue was {:.1} against {:.1} across the fleet, its p99 TTFT {:.1} ms",
                        r.replica,
                        pct(f),
                        pct(1.0 / n as f64),
                        r.waiting_mean,
                        fleet_wait,
                        r.ttft_p99_ms
                    ),
                    try_change: "set fleet.router = \"least-outstanding\" or \"power-of-two\" if it routes by turn or at random (route by load), or raise fleet.replicas".to_string(),
                    score: f - 1.0 / n as f64,
                    evidence: BTreeMap::from([
                        ("replica".to_string(), r.replica as f64),
                        ("tail_fraction".to_string(), f),
                        ("fair_share".to_string(), 1.0 / n as f64),
                        ("waiting_mean".to_string(), r.waiting_mean),
                        ("fleet_waiting_mean".to_string(), fleet_wait),
                    ]),
                });
            }
        }
    }
    out.sort_by(|a, b| b.score.total_cmp(&a.score));
    out.truncate(MAX);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::attribution::Component;

    #[test]
    fn every_component_names_a_scenario_key_to_change_and_which_way() {
        for c in Component::ALL {
            let t = change_for(c.name());
            assert_ne!(
                t,
                change_for("unknown"),
                "{} has no change of its own",
                c.name()
            );
            assert!(
                ["raise ", "lower ", "set "]
                    .iter()
                    .any(|w| t.starts_with(w)),
                "{}: {t}",
                c.name()
            );
            assert!(
                [
                    "engine.",
                    "fleet.",
                    "model.",
                    "tenants.",
                    "autoscale.",
                    "fairness."
                ]
                .iter()
                .any(|k| t.contains(k)),
                "{}: {t}",
                c.name()
            );
        }
    }
}
