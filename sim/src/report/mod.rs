//! The result of one run: its summary (`summary.json`) gathers the
//! request-derived parts (`request::summary`: counts, latency percentiles,
//! throughput, goodput and SLO attainment), batching and KV use, and each
//! subsystem's own report; [`RunResult`] holds it beside the run's records.

mod run;
mod write;

pub use crate::output::StreamedRows;
pub use run::RunResult;
pub use write::write_all;

use crate::request::Request;
use crate::time::{Nanos, SimTime};
use crate::workload::WorkloadReport;
use serde::Serialize;
use std::collections::BTreeMap;

// The types the summary is made of, under the summary's name too: readers
// of a run's results (reports, the CLI, compare) find them in one place.
pub use crate::kv::prefix_cache::PrefixCacheReport;
pub use crate::records::timeseries::TimeseriesRow;
pub use crate::replica::report::EngineReport;
pub use crate::request::summary::{RequestStats, RequestsSummary};
pub use crate::stats::{Counts, Dist, Latency, PercentileVerdict, SloReport, Throughput};

pub use crate::scenario::{describe_slo, SloTargets, SLO_METRICS, SLO_PERCENTILES};

/// The summary of one run (`summary.json`).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Summary {
    pub scenario: String,
    pub seed: u64,
    pub cost_source: String,
    pub model: String,
    pub hardware: String,
    pub replicas: u32,
    pub tensor_parallel: u32,
    pub gpus: u32,
    pub router: String,
    pub kv_blocks_per_replica: u64,
    pub block_size: u32,
    /// Simulated seconds from t = 0 to the end of the run.
    pub duration_s: f64,
    pub counts: Counts,
    pub latency: Latency,
    pub throughput: Throughput,
    pub slo: Option<SloReport>,
    pub engine: EngineReport,
    /// Offered vs achieved load and whether the run reached a steady state.
    pub load: crate::steady_state::LoadReport,
    pub events: u64,
    /// What the workload reports (trace lines read and skipped, closed-loop
    /// users that left); absent for a plain synthetic stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadReport>,
    /// Per-tenant results and fairness (only with `[[tenants]]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenancy: Option<crate::tenancy::TenancyReport>,
    /// Offered against achieved load, when the run was observed over HTTP
    /// (`servesim observe`); absent for simulations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed: Option<ObservedLoad>,
    /// Replica life cycle: GPU-hours by phase, cold starts, failures and
    /// retries (only with `[lifecycle]`, `[autoscale]` or `[failures]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<crate::lifecycle::LifecycleReport>,
    /// Per-pool GPUs, utilization and KV use (only with `[[fleet.pools]]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<crate::cluster::fleet::PoolReport>,
    /// Per-region demand, overflow, SLO attainment and cost (only with
    /// `[[fleet.regions]]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<crate::region::RegionReport>,
    /// The KV links of a disaggregated fleet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_transfer: Option<crate::cluster::disagg::TransferReport>,
    /// Only with `[canary]`: the rollout's gate decisions and outcome.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary: Option<crate::canary::report::CanaryReport>,
    /// Only with `[metrics] routing_trace`: the router's decisions against
    /// the fastest candidate of each (`cluster::routing_trace`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing: Option<crate::cluster::routing_trace::RoutingReport>,
    /// Power and energy of the fleet's GPUs (`energy`), when every pool's
    /// hardware has a TDP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy: Option<crate::energy::EnergyReport>,
}

/// What a load generator offered a real server and what it got back.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ObservedLoad {
    /// The server's base URL.
    pub url: String,
    /// Requests per second the workload's arrival times ask for.
    pub offered_rps: f64,
    /// Requests per second actually sent (the connection cap can delay them).
    pub sent_rps: f64,
    /// Mean lateness of a send behind its scheduled arrival, ms.
    pub send_lag_ms: f64,
    /// Responses by HTTP status (0: no response: a transport error).
    pub http_status: BTreeMap<String, u64>,
}

/// Fills the request-derived parts of a summary (a fold of
/// [`RequestsSummary`] over `reqs`, the one code path a streamed run uses
/// too); fails as [`RequestsSummary::finish`] does.
pub fn summarize_requests(
    reqs: &[Request],
    itl_samples: Vec<(Nanos, u32)>,
    duration: SimTime,
    gpus: u32,
    slo: Option<SloTargets>,
    s: &mut Summary,
) -> Result<(), String> {
    let mut acc = RequestsSummary::new(slo);
    for r in reqs {
        acc.add(r);
    }
    s.absorb(acc.finish(Dist::of_weighted(itl_samples), duration, gpus)?);
    Ok(())
}

impl Summary {
    /// Takes the request-derived parts of the run.
    pub fn absorb(&mut self, r: RequestStats) {
        self.counts = r.counts;
        self.latency = r.latency;
        self.throughput = r.throughput;
        self.slo = r.slo;
        self.engine.preempted_requests = r.preempted_requests;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{RejectReason, Status};
    use proptest::prelude::*;

    /// A completed request: TTFT, then `out` tokens ending at E2E, ms.
    fn done(ttft_ms: u64, e2e_ms: u64, out: u32) -> Request {
        let ms = 1_000_000;
        let mut r = Request::new(SimTime(0), 100, out);
        r.first_token = crate::time::Stamp::at(SimTime(ttft_ms * ms));
        r.finished = crate::time::Stamp::at(SimTime(e2e_ms * ms));
        r.generated = out;
        r.status = Status::Completed;
        r
    }

    #[test]
    fn a_good_request_meets_every_threshold_given_as_vllm_counts_it() {
        let t = SloTargets {
            ttft_ms: Some(200.0),
            tpot_ms: Some(10.0),
            ..SloTargets::default()
        };
        // TPOT = (E2E − TTFT) / (output − 1) = (1190 − 200) / 99 = 10 ms.
        assert_eq!(t.judge(&done(200, 1190, 100)), [true, true, true]);
        assert_eq!(t.judge(&done(201, 1190, 100)), [false, true, true]);
        assert_eq!(t.judge(&done(200, 1200, 100)), [true, false, true]);
        // One output token: no TPOT, which vLLM counts as 0 (good).
        assert!(t.meets(&done(100, 5000, 1)));
        // E2E is judged only when given.
        let e = SloTargets {
            e2e_ms: Some(1000.0),
            ..t
        };
        assert!(!e.meets(&done(200, 1190, 100)));
        let mut rejected = done(1, 2, 2);
        rejected.status = Status::Rejected(RejectReason::QueueFull);
        assert!(!SloTargets::default().meets(&rejected));
        assert!(SloTargets::default().meets(&done(1, 2, 2)));
    }

    #[test]
    fn percentile_targets_hold_when_the_percentile_is_at_most_the_target() {
        let mut t = SloTargets::default();
        t.percentile_ms[0][3] = Some(100.0); // ttft_p99_ms
        t.percentile_ms[2][0] = Some(5.0); // itl_p50_ms
        let l = Latency {
            ttft_ms: Dist::of((1..=100).map(f64::from).collect()),
            ..Latency::default()
        };
        let v = t.verdicts(&l);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].key, "ttft_p99_ms");
        assert_eq!(v[0].value_ms, Some(l.ttft_ms.p99));
        assert!(v[0].met, "{v:?}");
        // No inter-token samples: not measured, so not met.
        assert_eq!(
            (v[1].key.as_str(), v[1].value_ms, v[1].met),
            ("itl_p50_ms", None, false)
        );
        assert!(!t
            .without("itl")
            .verdicts(&l)
            .iter()
            .any(|v| v.key == "itl_p50_ms"));
        assert_eq!(t.describe(", "), "TTFT p99 ≤ 100 ms, ITL p50 ≤ 5 ms");
    }

    #[test]
    fn a_spilled_time_series_comes_back_row_for_row() {
        use crate::store::{SpillLog, CHUNK};
        let row = |i: u64| TimeseriesRow {
            time: SimTime(i * 1_000_000_007),
            replica: (i % 1_000) as u32,
            waiting: (i * 7) as u32,
            running: u32::MAX - i as u32,
            kv_blocks_used: i << 33,
            kv_blocks_total: u64::MAX - i,
        };
        // Two chunks on disk and a part in memory.
        let n = 2 * CHUNK as u64 + 77;
        let mut log = SpillLog::default();
        for i in 0..n {
            log.push(row(i));
        }
        assert_eq!(log.len() as u64, n);
        assert!(log.error().is_none());
        assert!(log.iter().eq((0..n).map(row)));
    }

    /// Linear-interpolation quantile of sorted data (NumPy's default, Hyndman &
    /// Fan type 7).
    fn quantile_sorted(v: &[f64], q: f64) -> f64 {
        if v.is_empty() {
            return 0.0;
        }
        let pos = q * (v.len() - 1) as f64;
        let lo = pos.floor() as usize;
        let hi = pos.ceil() as usize;
        v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
    }

    /// The vector version the one-pass [`Dist::of_sorted`] replaced.
    fn of_vec(mut v: Vec<f64>) -> Dist {
        if v.is_empty() {
            return Dist::default();
        }
        v.sort_by(f64::total_cmp);
        Dist {
            count: v.len() as u64,
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p50: quantile_sorted(&v, 0.50),
            p90: quantile_sorted(&v, 0.90),
            p95: quantile_sorted(&v, 0.95),
            p99: quantile_sorted(&v, 0.99),
            max: v[v.len() - 1],
        }
    }

    proptest! {
        #[test]
        fn one_pass_distribution_is_bit_identical(v in proptest::collection::vec(0f64..1e5, 0..300)) {
            let (a, b) = (Dist::of(v.clone()), of_vec(v));
            prop_assert_eq!(a.count, b.count);
            for (x, y) in [(a.mean, b.mean), (a.p50, b.p50), (a.p90, b.p90),
                           (a.p95, b.p95), (a.p99, b.p99), (a.max, b.max)] {
                prop_assert_eq!(x.to_bits(), y.to_bits());
            }
        }
    }

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let d = Dist::of(vec![4.0, 1.0, 3.0, 2.0]);
        assert_eq!(d.p50, 2.5);
        assert_eq!(d.max, 4.0);
        assert_eq!(d.mean, 2.5);
        assert!((d.p90 - 3.7).abs() < 1e-12);
        assert_eq!(Dist::of(vec![]).count, 0);
    }

    #[test]
    fn weighted_quantiles_count_each_token() {
        // 99 tokens at 10 ms and 1 token at 500 ms.
        let d = Dist::of_weighted(vec![(500_000_000, 1), (10_000_000, 99)]);
        assert_eq!(d.count, 100);
        assert_eq!(d.p50, 10.0);
        assert_eq!(d.p99, 10.0);
        assert_eq!(d.max, 500.0);
        assert!((d.mean - 14.9).abs() < 1e-9);
    }
}
