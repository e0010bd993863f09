//! The canary gate: one judgement of the canary against the baseline over
//! the same window of time. Like Kayenta (Spinnaker's automated canary
//! analysis) it compares the two versions side by side rather than the
//! canary against fixed numbers, so a load change during the window moves
//! both; like Flagger's analysis each metric has its own threshold and the
//! check needs enough data (Flagger and Argo Rollouts mark a measurement
//! "inconclusive" instead of passing it when the query returns too little).
//! A request counts in the window it ended in, as a Prometheus histogram
//! observes a request when it completes.

use crate::scenario::{GatePlan, Tolerance};
use crate::workload::trace::stats::quantile_sorted;
use serde::Serialize;

/// The requests of one version that ended in the current window.
#[derive(Clone, Debug, Default)]
pub struct Window {
    /// Milliseconds, one entry per completed request (TPOT: those with more
    /// than one output token).
    pub ttft_ms: Vec<f64>,
    pub tpot_ms: Vec<f64>,
    pub e2e_ms: Vec<f64>,
    /// Requests turned away (any reject reason) in the window.
    pub rejected: u64,
}

impl Window {
    pub fn completed(&self) -> u64 {
        self.e2e_ms.len() as u64
    }

    /// Completed + rejected: the requests the error rate is over.
    pub fn ended(&self) -> u64 {
        self.completed() + self.rejected
    }

    pub fn clear(&mut self) {
        self.ttft_ms.clear();
        self.tpot_ms.clear();
        self.e2e_ms.clear();
        self.rejected = 0;
    }
}

/// What one metric's comparison concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The canary is within the tolerance of the baseline.
    Pass,
    /// The canary is worse than the baseline by more than the tolerance.
    Fail,
    /// A version has fewer than `min_samples` requests for this metric in
    /// the window: no judgement (the step is held).
    TooFewSamples,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::TooFewSamples => "too few samples",
        }
    }
}

/// One metric of one gate: the evidence and the verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MetricCheck {
    /// `ttft_ms_p99`-style name: the metric and its percentile, or
    /// `error_rate`.
    pub metric: String,
    pub baseline: f64,
    pub canary: f64,
    /// The stated tolerance (relative for latencies, absolute for the
    /// error rate).
    pub tolerance: f64,
    /// The largest canary value that passes.
    pub limit: f64,
    pub baseline_samples: u64,
    pub canary_samples: u64,
    pub verdict: Verdict,
}

/// The gate's settings, from `[canary]`.
#[derive(Clone, Debug)]
pub struct Gate {
    pub percentile: f64,
    pub min_samples: u64,
    pub tolerance: Tolerance,
}

impl Gate {
    pub fn new(c: &GatePlan) -> Gate {
        Gate {
            percentile: c.percentile,
            min_samples: c.min_samples as u64,
            tolerance: c.tolerance,
        }
    }

    /// Judges the canary's window against the baseline's: every metric's
    /// check, and the gate's verdict — a failed metric fails the gate even
    /// when another lacks samples (the evidence against it is in); otherwise
    /// a metric without enough samples holds it; otherwise it passes.
    /// Sorts the windows' samples in place.
    pub fn judge(&self, base: &mut Window, can: &mut Window) -> (Verdict, Vec<MetricCheck>) {
        let p = self.percentile;
        let label = if p.fract() == 0.0 {
            format!("{p:.0}")
        } else {
            format!("{p}")
        };
        let t = &self.tolerance;
        let mut checks = Vec::with_capacity(4);
        for (name, tol, b, c) in [
            ("ttft_ms", t.ttft, &mut base.ttft_ms, &mut can.ttft_ms),
            ("tpot_ms", t.tpot, &mut base.tpot_ms, &mut can.tpot_ms),
            ("e2e_ms", t.e2e, &mut base.e2e_ms, &mut can.e2e_ms),
        ] {
            b.sort_unstable_by(f64::total_cmp);
            c.sort_unstable_by(f64::total_cmp);
            let (bv, cv) = (quantile_sorted(b, p / 100.0), quantile_sorted(c, p / 100.0));
            let limit = bv * (1.0 + tol);
            checks.push(self.check(
                format!("{name}_p{label}"),
                (bv, cv),
                tol,
                limit,
                (b.len() as u64, c.len() as u64),
            ));
        }
        let rate = |w: &Window| w.rejected as f64 / w.ended().max(1) as f64;
        let (bv, cv) = (rate(base), rate(can));
        checks.push(self.check(
            "error_rate".into(),
            (bv, cv),
            t.error_rate,
            bv + t.error_rate,
            (base.ended(), can.ended()),
        ));
        let verdict = if checks.iter().any(|c| c.verdict == Verdict::Fail) {
            Verdict::Fail
        } else if checks.iter().any(|c| c.verdict == Verdict::TooFewSamples) {
            Verdict::TooFewSamples
        } else {
            Verdict::Pass
        };
        (verdict, checks)
    }

    fn check(
        &self,
        metric: String,
        (baseline, canary): (f64, f64),
        tolerance: f64,
        limit: f64,
        (bn, cn): (u64, u64),
    ) -> MetricCheck {
        let verdict = if bn.min(cn) < self.min_samples {
            Verdict::TooFewSamples
        } else if canary <= limit {
            Verdict::Pass
        } else {
            Verdict::Fail
        };
        MetricCheck {
            metric,
            baseline,
            canary,
            tolerance,
            limit,
            baseline_samples: bn,
            canary_samples: cn,
            verdict,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(min: u64) -> Gate {
        Gate {
            percentile: 99.0,
            min_samples: min,
            tolerance: Tolerance::resolve(&Default::default()),
        }
    }

    /// `n` completed requests with latencies `scale` × 1..=n ms, and
    /// `rejected` rejections.
    fn window(n: usize, scale: f64, rejected: u64) -> Window {
        let v: Vec<f64> = (1..=n).rev().map(|i| i as f64 * scale).collect();
        Window {
            ttft_ms: v.clone(),
            tpot_ms: v.clone(),
            e2e_ms: v,
            rejected,
        }
    }

    #[test]
    fn a_canary_within_tolerance_passes() {
        let (v, checks) = gate(50).judge(&mut window(100, 1.0, 0), &mut window(100, 1.1, 0));
        assert_eq!(v, Verdict::Pass);
        assert_eq!(checks.len(), 4);
        let ttft = &checks[0];
        assert_eq!(ttft.metric, "ttft_ms_p99");
        // p99 of 1..=100 by linear interpolation: 99.01.
        assert!((ttft.baseline - 99.01).abs() < 1e-9, "{}", ttft.baseline);
        assert!((ttft.canary - 99.01 * 1.1).abs() < 1e-9);
        assert!((ttft.limit - 99.01 * 1.2).abs() < 1e-9);
        assert_eq!((ttft.baseline_samples, ttft.canary_samples), (100, 100));
        assert!(checks.iter().all(|c| c.verdict == Verdict::Pass));
    }

    #[test]
    fn a_slower_canary_fails_on_latency() {
        let (v, checks) = gate(50).judge(&mut window(100, 1.0, 0), &mut window(100, 1.3, 0));
        assert_eq!(v, Verdict::Fail);
        assert_eq!(checks[0].verdict, Verdict::Fail);
        assert_eq!(
            checks[3].verdict,
            Verdict::Pass,
            "no rejections either side"
        );
    }

    #[test]
    fn more_rejections_than_the_tolerance_fail_the_error_rate() {
        // 2 of 102 vs 0 of 100: 1.96 percentage points over a 1-point margin.
        let (v, checks) = gate(50).judge(&mut window(100, 1.0, 0), &mut window(100, 1.0, 2));
        assert_eq!(v, Verdict::Fail);
        let e = &checks[3];
        assert_eq!(e.metric, "error_rate");
        assert_eq!((e.baseline_samples, e.canary_samples), (100, 102));
        assert_eq!(e.verdict, Verdict::Fail);
        // One rejection in 101 is within it.
        let (v, _) = gate(50).judge(&mut window(100, 1.0, 0), &mut window(100, 1.0, 1));
        assert_eq!(v, Verdict::Pass);
    }

    #[test]
    fn too_few_samples_hold_the_gate_whatever_the_values() {
        // The canary is far slower but has 10 requests: no judgement.
        let (v, checks) = gate(50).judge(&mut window(100, 1.0, 0), &mut window(10, 5.0, 0));
        assert_eq!(v, Verdict::TooFewSamples);
        assert!(checks.iter().all(|c| c.verdict == Verdict::TooFewSamples));
        assert_eq!(checks[0].canary_samples, 10);
        // The same with the baseline short.
        let (v, _) = gate(50).judge(&mut window(10, 1.0, 0), &mut window(100, 1.0, 0));
        assert_eq!(v, Verdict::TooFewSamples);
    }

    #[test]
    fn a_failed_metric_outweighs_one_without_samples() {
        // Every canary request rejected: no latency samples, but the error
        // rate has its evidence and fails the gate instead of holding it.
        let mut can = Window {
            rejected: 60,
            ..Window::default()
        };
        let (v, checks) = gate(50).judge(&mut window(100, 1.0, 0), &mut can);
        assert_eq!(v, Verdict::Fail);
        assert_eq!(checks[0].verdict, Verdict::TooFewSamples);
        assert_eq!(checks[3].verdict, Verdict::Fail);
        assert_eq!(checks[3].canary, 1.0);
    }
}
