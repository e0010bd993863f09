//! What a rollout reports: every gate decision with its evidence, the
//! outcome and when it came, the weight over time, and the requests each
//! version served (summary.json `canary`, the printed summary, and the
//! `canary_weight` column of timeseries.csv).

use super::gate::{MetricCheck, Verdict};
use crate::scenario::Tolerance;
use crate::time::SimTime;
use serde::Serialize;

/// What a gate did with its verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Passed: the next step's weight applies.
    Advance,
    /// Passed the last step: all traffic to the canary.
    Promote,
    /// Too few samples: the step runs another `hold_s`.
    Extend,
    /// Failed, with failed checks left before the threshold: the step
    /// runs another `hold_s` (Flagger keeps analysing until `threshold`).
    Hold,
    /// Failed `max_failed_checks` times: all traffic back to the baseline.
    RollBack,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Advance => "advance",
            Action::Promote => "promote",
            Action::Extend => "extend",
            Action::Hold => "hold",
            Action::RollBack => "roll back",
        }
    }
}

/// One gate: when, at which step and weight, over which window, the
/// evidence, the verdict and what followed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Decision {
    pub time_s: f64,
    /// Index into `canary.steps` (0-based).
    pub step: usize,
    /// The canary's weight during the window, percent.
    pub weight: u32,
    pub window_start_s: f64,
    pub verdict: Verdict,
    pub action: Action,
    /// The canary's weight from this decision on.
    pub next_weight: u32,
    /// Failed checks so far, this one included.
    pub failed_checks: u32,
    pub checks: Vec<MetricCheck>,
}

/// Requests one version took and how they ended.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct VersionReport {
    /// The pool's name.
    pub pool: String,
    /// Requests the split sent to this version.
    pub requests: u64,
    pub completed: u64,
    pub rejected: u64,
    /// Still queued or running at the horizon.
    pub in_flight: u64,
}

/// A change of the canary's weight.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WeightChange {
    pub time_s: f64,
    pub weight: u32,
    #[serde(skip)]
    pub at: SimTime,
}

/// summary.json `canary`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CanaryReport {
    pub baseline: String,
    pub canary: String,
    /// The pool the gate compares the canary with, when not the baseline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control: Option<String>,
    /// `promoted`, `rolled_back`, `in_progress` (the horizon came first) or
    /// `not_started` (`start_s` is past the end).
    pub outcome: String,
    /// When it was promoted or rolled back.
    pub outcome_at_s: Option<f64>,
    pub final_weight: u32,
    pub percentile: f64,
    pub min_samples: u32,
    pub max_failed_checks: u32,
    pub tolerance: Tolerance,
    pub decisions: Vec<Decision>,
    pub weights: Vec<WeightChange>,
    /// Baseline first, then the canary, then the control if any.
    pub versions: Vec<VersionReport>,
}

impl CanaryReport {
    /// The canary's weight in force at `t` (0 before the rollout starts).
    pub fn weight_at(&self, t: SimTime) -> u32 {
        self.weights
            .iter()
            .take_while(|w| w.at <= t)
            .last()
            .map_or(0, |w| w.weight)
    }

    /// The printed summary's lines.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let when = self
            .outcome_at_s
            .map(|t| format!(" at {t:.1} s"))
            .unwrap_or_default();
        let against = match &self.control {
            Some(c) => format!("baseline {}, judged against control {c}", self.baseline),
            None => format!("baseline {}", self.baseline),
        };
        out.push(format!(
            "canary       {} vs {against}: {}{when}, weight now {} %; gate on p{} within +{:.0} % TTFT, +{:.0} % TPOT, +{:.0} % E2E, +{:.1} pt errors, ≥ {} requests each",
            self.canary,
            self.outcome.replace('_', " "),
            self.final_weight,
            self.percentile,
            self.tolerance.ttft * 100.0,
            self.tolerance.tpot * 100.0,
            self.tolerance.e2e * 100.0,
            self.tolerance.error_rate * 100.0,
            self.min_samples
        ));
        for v in &self.versions {
            out.push(format!(
                "  version {}: {} requests, {} completed, {} rejected, {} in flight",
                v.pool, v.requests, v.completed, v.rejected, v.in_flight
            ));
        }
        for d in &self.decisions {
            let evidence: Vec<String> = d
                .checks
                .iter()
                .map(|c| {
                    let mark = match c.verdict {
                        Verdict::Pass => "ok",
                        Verdict::Fail => "FAIL",
                        Verdict::TooFewSamples => "n/a",
                    };
                    if c.metric == "error_rate" {
                        format!(
                            "errors {:.2} % vs {:.2} % {mark}",
                            c.canary * 100.0,
                            c.baseline * 100.0
                        )
                    } else {
                        let name = c.metric.replace("_ms_", " ");
                        format!("{name} {:.1} vs {:.1} ms {mark}", c.canary, c.baseline)
                    }
                })
                .collect();
            let n = d
                .checks
                .last()
                .map_or((0, 0), |c| (c.canary_samples, c.baseline_samples));
            out.push(format!(
                "  gate {:>8.1} s  step {} at {:>3} %: {} → {} ({} %); canary vs {} over {:.0} s, {} vs {} requests: {}",
                d.time_s,
                d.step + 1,
                d.weight,
                d.verdict.name(),
                d.action.name(),
                d.next_weight,
                if self.control.is_some() { "control" } else { "baseline" },
                d.time_s - d.window_start_s,
                n.0,
                n.1,
                evidence.join(", ")
            ));
        }
        out
    }
}
