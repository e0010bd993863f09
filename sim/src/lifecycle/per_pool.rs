//! The life cycle of a fleet with pools: each pool scales on its own (its
//! own autoscaler, cold-start figures and standby pool, as each model
//! server Deployment has its own HPA in Kubernetes/KServe), and the
//! summary's `lifecycle` section adds the pools' reports up while keeping
//! each pool's share (`lifecycle.pools`), so the GPU-hours of cold starts
//! and idle capacity are visible per pool.

use super::{GpuHours, LifecycleReport};
use crate::stats::Dist;
use crate::time::SimTime;
use serde::Serialize;

/// One pool's share of the life cycle (summary.json `lifecycle.pools`).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct PoolLifecycle {
    pub pool: String,
    pub autoscaler: String,
    pub slots: u32,
    pub gpus_per_replica: u32,
    pub requested_at_end: u32,
    pub ready_at_end: u32,
    pub peak_ready: u32,
    pub gpu_hours: GpuHours,
    pub mean_billed_gpus: f64,
    pub cold_starts: u64,
    pub standby_activations: u64,
    pub scale_ups: u64,
    pub scale_downs: u64,
    pub failures: u64,
}

impl PoolLifecycle {
    fn of(pool: &str, r: &LifecycleReport) -> PoolLifecycle {
        PoolLifecycle {
            pool: pool.to_string(),
            autoscaler: r.autoscaler.clone(),
            slots: r.slots,
            gpus_per_replica: r.gpus_per_replica,
            requested_at_end: r.requested_at_end,
            ready_at_end: r.ready_at_end,
            peak_ready: r.peak_ready,
            gpu_hours: r.gpu_hours.clone(),
            mean_billed_gpus: r.mean_billed_gpus,
            cold_starts: r.cold_starts,
            standby_activations: r.standby_activations,
            scale_ups: r.scale_ups,
            scale_downs: r.scale_downs,
            failures: r.failures,
        }
    }
}

/// The fleet's report from its units' (one without pools: returned as is).
/// Counts and GPU-hours add up; `peak_ready` is the sum of the pools'
/// peaks (an upper bound of the fleet's); the autoscaler is named when all
/// pools use the same one; `lost_ms` is every unit's lost time per
/// handed-back request.
pub fn combine(
    mut reports: Vec<LifecycleReport>,
    pools: &[String],
    end: SimTime,
    lost_ms: Vec<f64>,
) -> LifecycleReport {
    if reports.len() == 1 && pools.is_empty() {
        return reports.pop().expect("one report");
    }
    let mut t = LifecycleReport::default();
    let same = reports
        .windows(2)
        .all(|w| w[0].autoscaler == w[1].autoscaler);
    t.autoscaler = if same {
        reports[0].autoscaler.clone()
    } else {
        "per pool".to_string()
    };
    let same_gpus = reports
        .windows(2)
        .all(|w| w[0].gpus_per_replica == w[1].gpus_per_replica);
    t.gpus_per_replica = if same_gpus {
        reports[0].gpus_per_replica
    } else {
        0
    };
    let mut out_tokens = 0.0;
    for r in &reports {
        t.slots += r.slots;
        t.requested_at_end += r.requested_at_end;
        t.ready_at_end += r.ready_at_end;
        t.peak_ready += r.peak_ready;
        let (g, x) = (&mut t.gpu_hours, &r.gpu_hours);
        g.serving += x.serving;
        g.idle_ready += x.idle_ready;
        g.standby += x.standby;
        g.standby_billed += x.standby_billed;
        g.starting += x.starting;
        g.failed += x.failed;
        g.billed += x.billed;
        out_tokens += r.output_tokens_per_billed_gpu_hour * x.billed;
        t.cold_starts += r.cold_starts;
        t.cache_hits += r.cache_hits;
        t.standby_activations += r.standby_activations;
        t.cancelled_starts += r.cancelled_starts;
        t.scale_ups += r.scale_ups;
        t.scale_downs += r.scale_downs;
        t.drains += r.drains;
        t.drain_timeouts += r.drain_timeouts;
        t.failures += r.failures;
        t.activator_held += r.activator_held;
        t.activator_peak = t.activator_peak.max(r.activator_peak);
        let (a, b) = (&mut t.retries, &r.retries);
        a.handed_back += b.handed_back;
        a.retried += b.retried;
        a.failed += b.failed;
        a.lost_prefill_tokens += b.lost_prefill_tokens;
        a.lost_decode_tokens += b.lost_decode_tokens;
    }
    t.retries.lost_ms = Dist::of(lost_ms);
    let hours = end.as_secs_f64() / 3600.0;
    t.mean_billed_gpus = if hours > 0.0 {
        t.gpu_hours.billed / hours
    } else {
        0.0
    };
    t.output_tokens_per_billed_gpu_hour = if t.gpu_hours.billed > 0.0 {
        out_tokens / t.gpu_hours.billed
    } else {
        0.0
    };
    t.pools = pools
        .iter()
        .zip(&reports)
        .map(|(n, r)| PoolLifecycle::of(n, r))
        .collect();
    t
}
