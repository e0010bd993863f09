//! Canary rollouts with gates (`[canary]`): a second model version — a
//! pool that differs from the baseline pool by hardware, an engine setting
//! or a calibration profile — takes a share of the traffic that steps up
//! over time; at the end of each step a gate compares the canary's latency
//! percentiles and error rate with the baseline's over the same window, and
//! the rollout advances, holds, promotes (all traffic to the canary) or
//! rolls back (all traffic to the baseline).
//!
//! The model follows the progressive-delivery controllers of Kubernetes:
//! Argo Rollouts' canary strategy (`steps: [setWeight, pause{duration}]`,
//! an analysis whose failure aborts the rollout and restores the stable
//! version), Flagger's analysis loop (`interval`, `threshold` failed checks
//! before rollback, `stepWeight`s up to promotion) and KServe's
//! `canaryTrafficPercent`. The split is made per request before the pool's
//! own router, as Istio's weighted `VirtualService` routes splits in front
//! of each version's service: a seeded hash of the request (of its session
//! when the workload has sessions, so a conversation stays on one version
//! as the weight grows — the hash is compared with the weight, so raising
//! the weight only moves requests from the baseline to the canary).
//!
//! With `control`, a third pool of the baseline's configuration and the
//! canary's size takes the canary's share out of the baseline's and the gate
//! judges the canary against it (Spinnaker's canary best practices: compare
//! with a baseline of the same size and traffic, not with production).
//!
//! `config` holds the keys, `gate` one judgement, `report` the output; the
//! simulation's side is `simulation::canary_run`.

pub mod gate;
pub mod report;

use crate::scenario::{CanaryPlan, CanaryStep};
use crate::time::SimTime;
use gate::{Gate, Verdict, Window};
use report::{Action, CanaryReport, Decision, VersionReport, WeightChange};

/// The rollout's phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Before `start_s`: the canary gets nothing.
    Waiting,
    /// At step `i` of `steps`.
    Step(usize),
    Promoted(SimTime),
    RolledBack(SimTime),
}

/// The state of one rollout during a run.
pub struct Canary {
    /// When the rollout begins.
    start: SimTime,
    steps: Vec<CanaryStep>,
    max_failed_checks: u32,
    /// The versions' names as `[canary]` gives them (for the report).
    baseline: String,
    canary: String,
    control: Option<String>,
    gate: Gate,
    /// Pool indices (into `Scenario::pools`) of the versions: the baseline,
    /// the canary and, with `control`, the control.
    pools: Vec<usize>,
    salt: u64,
    phase: Phase,
    weight: u32,
    window_start: SimTime,
    /// Requests that ended in the current window, per version.
    windows: Vec<Window>,
    failed: u32,
    decisions: Vec<Decision>,
    weights: Vec<WeightChange>,
    versions: Vec<VersionReport>,
}

/// SplitMix64's finalizer (Steele et al., 2014): a bijective mixer, stable
/// across platforms, so a request's side of the split depends only on the
/// seed and its key.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Canary {
    /// The rollout of `plan`.
    pub fn new(plan: &CanaryPlan) -> Canary {
        let n = plan.pools.len();
        Canary {
            start: plan.start,
            steps: plan.steps.clone(),
            max_failed_checks: plan.max_failed_checks,
            baseline: plan.baseline.clone(),
            canary: plan.canary.clone(),
            control: plan.control.clone(),
            gate: Gate::new(&plan.gate),
            windows: vec![Window::default(); n],
            versions: plan
                .names
                .iter()
                .map(|n| VersionReport {
                    pool: n.clone(),
                    ..Default::default()
                })
                .collect(),
            pools: plan.pools.clone(),
            salt: plan.salt,
            phase: Phase::Waiting,
            weight: 0,
            window_start: SimTime::ZERO,
            failed: 0,
            decisions: Vec::new(),
            weights: Vec::new(),
        }
    }

    /// When the rollout begins (its first event).
    pub fn start(&self) -> SimTime {
        self.start
    }

    /// The version (0 baseline, 1 canary, 2 control) a request with `key`
    /// (its session, or its id without sessions) goes to now, counted as
    /// sent there. The control takes as much as the canary, from the
    /// baseline's share, until the rollout concludes.
    pub fn split(&mut self, key: u64) -> usize {
        let u = mix(self.salt ^ mix(key)) % 100;
        let w = self.weight as u64;
        let v = if u < w {
            1
        } else if self.pools.len() == 3 && u < 2 * w && self.judging() {
            2
        } else {
            0
        };
        self.versions[v].requests += 1;
        v
    }

    /// Pool index of version `v`.
    pub fn pool(&self, v: usize) -> usize {
        self.pools[v]
    }

    /// Version of pool `p`, if it is one of the two.
    pub fn version_of_pool(&self, p: usize) -> Option<usize> {
        self.pools.iter().position(|&x| x == p)
    }

    fn judging(&self) -> bool {
        matches!(self.phase, Phase::Step(_))
    }

    /// A request of version `v` completed.
    pub fn completed(&mut self, v: usize, ttft_ns: u64, tpot_ns: Option<f64>, e2e_ns: u64) {
        self.versions[v].completed += 1;
        if self.judging() {
            let w = &mut self.windows[v];
            w.ttft_ms.push(ttft_ns as f64 / 1e6);
            if let Some(t) = tpot_ns {
                w.tpot_ms.push(t / 1e6);
            }
            w.e2e_ms.push(e2e_ns as f64 / 1e6);
        }
    }

    /// A request of version `v` was rejected.
    pub fn rejected(&mut self, v: usize) {
        self.versions[v].rejected += 1;
        if self.judging() {
            self.windows[v].rejected += 1;
        }
    }

    fn set_weight(&mut self, w: u32, now: SimTime) {
        self.weight = w;
        self.weights.push(WeightChange {
            time_s: now.as_secs_f64(),
            weight: w,
            at: now,
        });
    }

    fn hold_of(&self, step: usize) -> crate::time::Nanos {
        self.steps[step].hold
    }

    /// The rollout's event at `now`: the start, or a gate at the end of a
    /// step's window. Returns when the next one is due (`None`: concluded).
    pub fn on_event(&mut self, now: SimTime) -> Option<SimTime> {
        let step = match self.phase {
            Phase::Waiting => {
                self.phase = Phase::Step(0);
                self.set_weight(self.steps[0].weight, now);
                self.window_start = now;
                self.windows.iter_mut().for_each(Window::clear);
                return Some(now.plus(self.hold_of(0)));
            }
            Phase::Step(i) => i,
            Phase::Promoted(_) | Phase::RolledBack(_) => return None,
        };
        // The canary is judged against the control when there is one (the
        // same size and share of traffic: Spinnaker's canary best practices),
        // otherwise against the baseline.
        let (head, tail) = self.windows.split_at_mut(1);
        let (can, rest) = tail.split_at_mut(1);
        let base = rest.first_mut().unwrap_or(&mut head[0]);
        let (verdict, checks) = self.gate.judge(base, &mut can[0]);
        let last = step + 1 == self.steps.len();
        let (action, next_step) = match verdict {
            Verdict::Pass if last => (Action::Promote, None),
            Verdict::Pass => (Action::Advance, Some(step + 1)),
            Verdict::TooFewSamples => (Action::Extend, Some(step)),
            Verdict::Fail => {
                self.failed += 1;
                if self.failed >= self.max_failed_checks {
                    (Action::RollBack, None)
                } else {
                    (Action::Hold, Some(step))
                }
            }
        };
        let next_weight = match (action, next_step) {
            (Action::Promote, _) => 100,
            (Action::RollBack, _) => 0,
            (_, Some(s)) => self.steps[s].weight,
            (_, None) => unreachable!("a step follows every other action"),
        };
        self.decisions.push(Decision {
            time_s: now.as_secs_f64(),
            step,
            weight: self.weight,
            window_start_s: self.window_start.as_secs_f64(),
            verdict,
            action,
            next_weight,
            failed_checks: self.failed,
            checks,
        });
        if next_weight != self.weight {
            self.set_weight(next_weight, now);
        }
        self.window_start = now;
        self.windows.iter_mut().for_each(Window::clear);
        match (action, next_step) {
            (Action::Promote, _) => {
                self.phase = Phase::Promoted(now);
                None
            }
            (Action::RollBack, _) => {
                self.phase = Phase::RolledBack(now);
                None
            }
            (_, Some(s)) => {
                self.phase = Phase::Step(s);
                Some(now.plus(self.hold_of(s)))
            }
            (_, None) => unreachable!(),
        }
    }

    /// summary.json `canary`: the decisions, the outcome and the requests
    /// per version (in flight: sent there and not yet ended).
    pub fn report(&self) -> CanaryReport {
        let (outcome, at) = match self.phase {
            Phase::Waiting => ("not_started", None),
            Phase::Step(_) => ("in_progress", None),
            Phase::Promoted(t) => ("promoted", Some(t.as_secs_f64())),
            Phase::RolledBack(t) => ("rolled_back", Some(t.as_secs_f64())),
        };
        let mut versions = self.versions.clone();
        for v in &mut versions {
            v.in_flight = v.requests.saturating_sub(v.completed + v.rejected);
        }
        CanaryReport {
            baseline: self.baseline.clone(),
            canary: self.canary.clone(),
            control: self.control.clone(),
            outcome: outcome.to_string(),
            outcome_at_s: at,
            final_weight: self.weight,
            percentile: self.gate.percentile,
            min_samples: self.gate.min_samples as u32,
            max_failed_checks: self.max_failed_checks,
            tolerance: self.gate.tolerance,
            decisions: self.decisions.clone(),
            weights: self.weights.clone(),
            versions,
        }
    }
}

#[cfg(test)]
mod tests;
