//! The canary's slice of the plan: what `canary::Canary` is built from,
//! resolved once from `[canary]` and the pools it names, so that the
//! rollout reads no configuration while the run goes.

use super::canary_cfg::{CanaryCfg, ToleranceCfg};
use super::Scenario;
use crate::time::{secs_to_nanos, Nanos, SimTime};
use serde::Serialize;

/// A rollout between the pools `[canary]` names.
#[derive(Clone, Debug)]
pub struct CanaryPlan {
    /// The versions' pool names as `[canary]` gives them (for the report).
    pub baseline: String,
    pub canary: String,
    pub control: Option<String>,
    /// When the rollout begins (`start_s`).
    pub start: SimTime,
    /// The traffic steps, in order.
    pub steps: Vec<CanaryStep>,
    /// Failed checks before a rollback.
    pub max_failed_checks: u32,
    /// What each step's gate judges and how.
    pub gate: GatePlan,
    /// The versions' pools (indices into `Scenario::pools`): the baseline,
    /// the canary and, with `control`, the control.
    pub pools: Vec<usize>,
    /// Their names, in the same order.
    pub names: Vec<String>,
    /// The salt of the per-request split, from the scenario's seed (stream
    /// `canary-split`).
    pub salt: u64,
}

/// One rollout step: the canary's share of new requests, in percent, and
/// how long it runs before its gate (at least 1 ns).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CanaryStep {
    pub weight: u32,
    pub hold: Nanos,
}

/// A gate's settings: the latency percentile it compares, the fewest
/// requests of each version a metric needs, and the tolerances.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GatePlan {
    pub percentile: f64,
    pub min_samples: u32,
    pub tolerance: Tolerance,
}

/// How much worse than the baseline the canary may be before a check
/// fails: latencies relative (Kayenta judges against the baseline), the
/// error rate an absolute difference (see `canary_cfg::ToleranceCfg`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Tolerance {
    /// Canary TTFT percentile ≤ baseline's × (1 + ttft).
    pub ttft: f64,
    /// Canary TPOT percentile ≤ baseline's × (1 + tpot).
    pub tpot: f64,
    /// Canary end-to-end latency percentile ≤ baseline's × (1 + e2e).
    pub e2e: f64,
    /// Canary rejection rate ≤ baseline's + error_rate.
    pub error_rate: f64,
}

impl Tolerance {
    /// The tolerances `[canary.tolerance]` gives.
    pub fn resolve(t: &ToleranceCfg) -> Tolerance {
        Tolerance {
            ttft: t.ttft,
            tpot: t.tpot,
            e2e: t.e2e,
            error_rate: t.error_rate,
        }
    }
}

impl CanaryPlan {
    /// The rollout `[canary]` describes over the pools `pools` (named
    /// `names`), its split salted by `salt`.
    pub fn resolve(cfg: &CanaryCfg, pools: Vec<usize>, names: Vec<String>, salt: u64) -> Self {
        CanaryPlan {
            baseline: cfg.baseline.clone(),
            canary: cfg.canary.clone(),
            control: cfg.control.clone(),
            start: SimTime::from_secs_f64(cfg.start_s),
            steps: cfg
                .steps
                .iter()
                .map(|s| CanaryStep {
                    weight: s.weight,
                    hold: secs_to_nanos(s.hold_s).max(1),
                })
                .collect(),
            max_failed_checks: cfg.max_failed_checks,
            gate: GatePlan {
                percentile: cfg.percentile,
                min_samples: cfg.min_samples,
                tolerance: Tolerance::resolve(&cfg.tolerance),
            },
            pools,
            names,
            salt,
        }
    }
}

impl Scenario {
    /// The canary's slice of the plan, when the scenario has `[canary]`
    /// (validated: two colocated pools with these names, three with a
    /// control).
    pub fn canary_plan(&self) -> Option<CanaryPlan> {
        let cfg = self.file.canary.as_ref()?;
        let names: Vec<String> = [&cfg.baseline, &cfg.canary]
            .into_iter()
            .chain(cfg.control.as_ref())
            .cloned()
            .collect();
        let pools = names
            .iter()
            .map(|n| {
                self.pools
                    .iter()
                    .position(|p| &p.name == n)
                    .expect("validated pool name")
            })
            .collect();
        let salt = {
            use rand::Rng;
            crate::rng::stream(self.file.seed, "canary-split").random::<u64>()
        };
        Some(CanaryPlan::resolve(cfg, pools, names, salt))
    }
}
