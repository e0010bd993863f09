//! The life-cycle lines of `servesim simulate`'s summary (runs with
//! `[lifecycle]`, `[autoscale]` or `[failures]`).

use sim::lifecycle::LifecycleReport;

/// Prints the replicas' life cycle: GPU-hours by phase, scaling and
/// failure counts, retries and the SLO dip.
pub fn lifecycle(l: &LifecycleReport) {
    let g = &l.gpu_hours;
    outln!(
        "fleet        autoscaler {}: {} requested, {} ready at the end (peak {}), {} slots; {} cold starts ({} weight-cache hits), {} standby activations, {} drains ({} timed out)",
        l.autoscaler,
        l.requested_at_end,
        l.ready_at_end,
        l.peak_ready,
        l.slots,
        l.cold_starts,
        l.cache_hits,
        l.standby_activations,
        l.drains,
        l.drain_timeouts
    );
    outln!(
        "GPU-hours    {:.3} billed = {:.3} serving + {:.3} idle ready + {:.3} standby (of {:.3}) + {:.3} starting; mean {:.2} GPUs",
        g.billed,
        g.serving,
        g.idle_ready,
        g.standby_billed,
        g.standby,
        g.starting,
        l.mean_billed_gpus
    );
    for p in &l.pools {
        let g = &p.gpu_hours;
        outln!(
            "  pool {}  {}: {} requested, {} ready at the end (peak {}), {} cold starts; GPU-hours {:.3} billed ({:.3} serving, {:.3} idle ready, {:.3} standby, {:.3} starting)",
            p.pool,
            p.autoscaler,
            p.requested_at_end,
            p.ready_at_end,
            p.peak_ready,
            p.cold_starts,
            g.billed,
            g.serving,
            g.idle_ready,
            g.standby_billed,
            g.starting
        );
    }
    if l.failures > 0 || l.retries.handed_back > 0 {
        let r = &l.retries;
        outln!(
            "failures     {} failures; {} requests handed back: {} retried, {} failed; lost {} prefill + {} decode tokens, lost time p50 {:.1} ms",
            l.failures,
            r.handed_back,
            r.retried,
            r.failed,
            r.lost_prefill_tokens,
            r.lost_decode_tokens,
            r.lost_ms.p50
        );
    }
    if l.activator_held > 0 {
        outln!(
            "activator    held {} requests while no replica was ready (at most {} at once)",
            l.activator_held,
            l.activator_peak
        );
    }
    if let Some(d) = &l.slo_dip {
        match (d.first_below_s, d.last_below_s) {
            (Some(a), Some(b)) => outln!(
                "SLO dip      {:.0} s of {}-s windows below {:.0} % met, from {a:.0} s to {b:.0} s; lowest {:.1} %",
                d.seconds_below,
                d.window_s,
                d.threshold * 100.0,
                d.min_attainment * 100.0
            ),
            _ => outln!(
                "SLO dip      none: every {}-s window met the SLO for ≥ {:.0} % of its requests",
                d.window_s,
                d.threshold * 100.0
            ),
        }
    }
}

/// One line per region (`[[fleet.regions]]`): demand by origin, where it was
/// served, overflow, SLO attainment and cost.
pub fn regions(sum: &sim::report::Summary) {
    for r in &sum.regions {
        let slo = r
            .slo_attainment
            .map(|a| format!(", SLO {:.1} % met", a * 100.0))
            .unwrap_or_default();
        let cost = r.cost.map(|c| format!(", cost {c:.2}")).unwrap_or_default();
        outln!(
            "region       {}: {} requests from here ({} completed), {} served here; overflow {} out, {} in; TTFT p50 {:.0} ms, p99 {:.0} ms{slo}; {:.2} GPU-hours{cost}",
            r.name,
            r.requests,
            r.completed,
            r.served,
            r.overflow_out,
            r.overflow_in,
            r.ttft_ms.p50,
            r.ttft_ms.p99
        , r.gpu_hours);
    }
}
