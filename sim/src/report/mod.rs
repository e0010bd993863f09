//! The results of one run as its readers take them: the result files
//! (`write_all`: `summary.json`, `requests.csv`, `timeseries.csv`, ...)
//! and, under the summary's name, the types of the summary the run gathers
//! (`simulation::Summary`, `simulation::RunResult`) and those it is made
//! of, so that reports, the CLI and compare find them in one place.

mod write;

pub use crate::output::StreamedRows;
pub use crate::simulation::{summarize_requests, ObservedLoad, RunResult, Summary};
pub use write::write_all;

// The types the summary is made of, under the summary's name too: readers
// of a run's results (reports, the CLI, compare) find them in one place.
pub use crate::kv::prefix_cache::PrefixCacheReport;
pub use crate::records::timeseries::TimeseriesRow;
pub use crate::replica::report::EngineReport;
pub use crate::request::summary::{RequestStats, RequestsSummary};
pub use crate::stats::{Counts, Dist, Latency, PercentileVerdict, SloReport, Throughput};

pub use crate::scenario::{describe_slo, SloTargets, SLO_METRICS, SLO_PERCENTILES};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{RejectReason, Request, Status};
    use crate::time::SimTime;
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
