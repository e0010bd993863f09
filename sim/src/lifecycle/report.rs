//! What the life cycle reports: the per-tick replica counts by phase (the
//! extra columns of `timeseries.csv`) and the summary's `lifecycle` section:
//! GPU-hours split into serving, idle-ready, standby and starting, so the
//! cost of cold starts is visible rather than folded into "the fleet".

use super::{Phase, ReplicaLifecycle, N_PHASES};
use crate::stats::Dist;
use crate::time::SimTime;
use serde::Serialize;

/// Event counters of the life cycle.
#[derive(Clone, Debug, Default)]
pub(crate) struct Counters {
    pub cold_starts: u64,
    pub cache_hits: u64,
    pub standby_activations: u64,
    pub cancelled_starts: u64,
    pub scale_ups: u64,
    pub scale_downs: u64,
    pub drains: u64,
    pub drain_timeouts: u64,
    pub failures: u64,
    pub activator_held: u64,
    pub activator_peak: u64,
    pub handed_back: u64,
    pub retried: u64,
    pub retry_failed: u64,
    pub lost_prefill_tokens: u64,
    pub lost_decode_tokens: u64,
    /// Per retried request: service time thrown away, ms.
    pub lost_ms: Vec<f64>,
    pub peak_ready: u32,
}

/// Replica counts by phase at one sampling tick (`timeseries.csv` columns
/// `replicas_requested`, `replicas_provisioning`, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FleetSample {
    pub time: SimTime,
    pub requested: u32,
    pub provisioning: u32,
    pub loading: u32,
    pub warming: u32,
    pub standby: u32,
    pub ready: u32,
    pub draining: u32,
    pub failed: u32,
}

impl FleetSample {
    /// Column names, in the order of [`FleetSample::values`].
    pub const COLUMNS: [&'static str; 8] = [
        "replicas_requested",
        "replicas_provisioning",
        "replicas_loading",
        "replicas_warming",
        "replicas_standby",
        "replicas_ready",
        "replicas_draining",
        "replicas_failed",
    ];

    pub fn values(&self) -> [u32; 8] {
        [
            self.requested,
            self.provisioning,
            self.loading,
            self.warming,
            self.standby,
            self.ready,
            self.draining,
            self.failed,
        ]
    }
}

/// GPU-hours by what the GPUs were doing (a replica's hours × its GPUs).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct GpuHours {
    /// Ready or draining replicas running iterations.
    pub serving: f64,
    /// Ready or draining replicas with nothing to run.
    pub idle_ready: f64,
    /// Warm standby replicas (full hours; `standby_billed` applies the
    /// fraction).
    pub standby: f64,
    pub standby_billed: f64,
    /// Cold starts: provisioning, loading weights, warming; and standby
    /// replicas joining (activating).
    pub starting: f64,
    /// Failed nodes awaiting repair (not billed).
    pub failed: f64,
    /// serving + idle_ready + standby_billed + starting.
    pub billed: f64,
}

/// Requests a failed or timed-out replica gave back.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RetryReport {
    /// Requests taken from failed or drain-timed-out replicas.
    pub handed_back: u64,
    /// Of them, sent to another replica (or the activator).
    pub retried: u64,
    /// Of them, failed with `replica_failed` (retries off or exhausted).
    pub failed: u64,
    /// Prompt tokens of completed prefills thrown away.
    pub lost_prefill_tokens: u64,
    /// Output tokens generated and thrown away.
    pub lost_decode_tokens: u64,
    /// Per handed-back request, time since its first admission that was
    /// thrown away (the latency a retry adds at least), ms.
    pub lost_ms: Dist,
}

/// The summary's `lifecycle` section.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct LifecycleReport {
    pub autoscaler: String,
    /// Replica slots (max replicas + standby pool).
    pub slots: u32,
    pub gpus_per_replica: u32,
    pub requested_at_end: u32,
    pub ready_at_end: u32,
    pub peak_ready: u32,
    pub gpu_hours: GpuHours,
    /// Billed GPU-hours over the run's hours.
    pub mean_billed_gpus: f64,
    /// Output tokens of completed requests per billed GPU-hour.
    pub output_tokens_per_billed_gpu_hour: f64,
    pub cold_starts: u64,
    pub cache_hits: u64,
    pub standby_activations: u64,
    pub cancelled_starts: u64,
    pub scale_ups: u64,
    pub scale_downs: u64,
    pub drains: u64,
    pub drain_timeouts: u64,
    pub failures: u64,
    /// Requests the activator held while no replica was ready, and the most
    /// held at once.
    pub activator_held: u64,
    pub activator_peak: u64,
    pub retries: RetryReport,
    /// Windows where SLO attainment fell below 90 % (with `[slo]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo_dip: Option<SloDip>,
    /// With `[[fleet.pools]]`: each pool's life cycle (its GPU-hours add up
    /// to `gpu_hours`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<super::PoolLifecycle>,
}

impl ReplicaLifecycle {
    /// Records one sampling tick.
    pub fn sample(&mut self, now: SimTime) {
        let c = |p: Phase| self.counts[p as usize];
        self.series.push(FleetSample {
            time: now,
            requested: self.desired,
            provisioning: c(Phase::Provisioning),
            loading: c(Phase::Loading),
            warming: c(Phase::Warming),
            standby: c(Phase::Standby) + c(Phase::Activating),
            ready: c(Phase::Ready),
            draining: c(Phase::Draining),
            failed: c(Phase::Failed),
        });
    }

    pub(crate) fn note_ready_peak(&mut self) {
        let r = self.counts[Phase::Ready as usize];
        self.stats.peak_ready = self.stats.peak_ready.max(r);
    }

    /// The summary section at `end`: `busy_ns` is the replicas' summed
    /// iteration time, `output_tokens` the completed requests' output.
    pub fn report(
        &mut self,
        end: SimTime,
        autoscaler: &str,
        busy_ns: u64,
        gpus_per_replica: u32,
        standby_fraction: f64,
        output_tokens: u64,
    ) -> LifecycleReport {
        let ns: [u128; N_PHASES] = self.close(end);
        let g = gpus_per_replica as f64;
        let h = |x: u128| x as f64 / 3.6e12 * g;
        let up = ns[Phase::Ready as usize] + ns[Phase::Draining as usize];
        let busy = (busy_ns as u128).min(up);
        let standby = h(ns[Phase::Standby as usize]);
        let starting = h(ns[Phase::Provisioning as usize]
            + ns[Phase::Loading as usize]
            + ns[Phase::Warming as usize]
            + ns[Phase::Activating as usize]);
        let mut gh = GpuHours {
            serving: h(busy),
            idle_ready: h(up - busy),
            standby,
            standby_billed: standby * standby_fraction,
            starting,
            failed: h(ns[Phase::Failed as usize]),
            billed: 0.0,
        };
        gh.billed = gh.serving + gh.idle_ready + gh.standby_billed + gh.starting;
        let hours = end.as_secs_f64() / 3600.0;
        let st = &self.stats;
        LifecycleReport {
            autoscaler: autoscaler.to_string(),
            slots: self.slots.len() as u32,
            gpus_per_replica,
            requested_at_end: self.desired,
            ready_at_end: self.counts[Phase::Ready as usize],
            peak_ready: st.peak_ready,
            mean_billed_gpus: if hours > 0.0 { gh.billed / hours } else { 0.0 },
            output_tokens_per_billed_gpu_hour: if gh.billed > 0.0 {
                output_tokens as f64 / gh.billed
            } else {
                0.0
            },
            gpu_hours: gh,
            cold_starts: st.cold_starts,
            cache_hits: st.cache_hits,
            standby_activations: st.standby_activations,
            cancelled_starts: st.cancelled_starts,
            scale_ups: st.scale_ups,
            scale_downs: st.scale_downs,
            drains: st.drains,
            drain_timeouts: st.drain_timeouts,
            failures: st.failures,
            activator_held: st.activator_held,
            activator_peak: st.activator_peak,
            retries: RetryReport {
                handed_back: st.handed_back,
                retried: st.retried,
                failed: st.retry_failed,
                lost_prefill_tokens: st.lost_prefill_tokens,
                lost_decode_tokens: st.lost_decode_tokens,
                lost_ms: Dist::of(st.lost_ms.clone()),
            },
            slo_dip: None,
            pools: Vec::new(),
        }
    }
}

/// Width of the windows [`slo_dip`] measures attainment over, seconds.
pub const DIP_WINDOW_S: f64 = 10.0;
/// A window whose attainment is below this is part of a dip.
pub const DIP_THRESHOLD: f64 = 0.9;

/// Where SLO attainment fell while capacity was short: requests grouped by
/// arrival into [`DIP_WINDOW_S`] windows, each window's share of ended
/// requests (completed or rejected) that met both targets.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct SloDip {
    pub window_s: f64,
    pub threshold: f64,
    /// Seconds of windows below the threshold.
    pub seconds_below: f64,
    /// Start of the first and end of the last window below it.
    pub first_below_s: Option<f64>,
    pub last_below_s: Option<f64>,
    /// Lowest window attainment.
    pub min_attainment: f64,
}

/// The SLO dip of `reqs` against the per-request targets of `slo`.
pub fn slo_dip(reqs: &[crate::request::Request], slo: &crate::scenario::SloTargets) -> SloDip {
    let mut acc = SloDipRecords::default();
    for r in reqs {
        acc.add(r, slo);
    }
    acc.finish()
}

/// Per-window (met, ended) counts of [`slo_dip`], folded one ended request
/// at a time; memory follows the run's length in windows, not its requests.
#[derive(Clone, Debug, Default)]
pub struct SloDipRecords {
    windows: Vec<(u32, u32)>,
}

impl SloDipRecords {
    /// Counts request `r` in its arrival window against the targets.
    pub fn add(&mut self, r: &crate::request::Request, slo: &crate::scenario::SloTargets) {
        use crate::request::Status;
        let w = crate::time::secs_to_nanos(DIP_WINDOW_S);
        let windows = &mut self.windows;
        let ended = matches!(r.status, Status::Completed | Status::Rejected(_));
        if !ended {
            return;
        }
        let k = (r.arrival.0 / w) as usize;
        if windows.len() <= k {
            windows.resize(k + 1, (0, 0));
        }
        let ok = slo.meets(r);
        windows[k].0 += ok as u32;
        windows[k].1 += 1;
    }

    /// The dip of the counted windows.
    pub fn finish(self) -> SloDip {
        let windows = self.windows;
        let mut dip = SloDip {
            window_s: DIP_WINDOW_S,
            threshold: DIP_THRESHOLD,
            min_attainment: 1.0,
            ..SloDip::default()
        };
        for (k, &(ok, n)) in windows.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let a = ok as f64 / n as f64;
            dip.min_attainment = dip.min_attainment.min(a);
            if a < DIP_THRESHOLD {
                let start = k as f64 * DIP_WINDOW_S;
                dip.seconds_below += DIP_WINDOW_S;
                dip.first_below_s.get_or_insert(start);
                dip.last_below_s = Some(start + DIP_WINDOW_S);
            }
        }
        dip
    }
}
