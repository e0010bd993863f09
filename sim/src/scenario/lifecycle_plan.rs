//! The life cycle's slice of the plan: what the run's replica life cycles
//! and autoscalers (`lifecycle`, `autoscale`) are built from, resolved once
//! from `[lifecycle]`, `[autoscale]`, `[failures]` and each pool's own
//! tables, so that they read no configuration while the run goes.

use super::lifecycle_cfg::{AutoscaleCfg, FailureAt, FailureCfg, LifecycleCfg};
use super::{PoolPlan, Scenario};
use crate::time::SimTime;

/// The life cycles of a run: one unit per pool.
#[derive(Clone, Debug)]
pub struct LifecyclePlan {
    /// One per pool, in pool order.
    pub units: Vec<LifeUnitPlan>,
    /// With declared pools, the given failures (`[[failures.at]]`), which
    /// name the fleet's replicas (pools' slots in order): scheduled once for
    /// the whole fleet, after every unit's start. Empty without declared
    /// pools, where the one unit schedules them as its own.
    pub given_failures: Vec<GivenFailure>,
}

/// A failure the scenario gives (`[[failures.at]]`): when, and which
/// replica.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GivenFailure {
    pub at: SimTime,
    pub replica: u32,
}

impl GivenFailure {
    fn all(failures: Option<&FailureCfg>) -> Vec<GivenFailure> {
        failures
            .iter()
            .flat_map(|f| &f.at)
            .map(|a: &FailureAt| GivenFailure {
                at: SimTime::from_secs_f64(a.time_s),
                replica: a.replica,
            })
            .collect()
    }
}

/// One pool's life cycle and autoscaler.
#[derive(Clone, Debug)]
pub struct LifeUnitPlan {
    /// `[lifecycle]` (its defaults when the pool has none).
    pub lifecycle: LifecycleCfg,
    pub autoscale: Option<AutoscaleCfg>,
    /// `[failures]` as the pool's replicas see it.
    pub failures: Option<FailureCfg>,
    /// The given failures its start schedules, in its own slots' numbers:
    /// the implicit pool's (a declared pool's are the fleet's, see
    /// [`LifecyclePlan::given_failures`]).
    pub given_failures: Vec<GivenFailure>,
    /// Replicas serving at t = 0.
    pub start: u32,
    /// Weight bytes of one replica over all its GPUs (what a cold start
    /// loads).
    pub weight_bytes: f64,
    /// GPUs of one replica.
    pub gpus: u32,
    /// Global index of its first slot.
    pub first: usize,
    /// The seed of its random streams ([`PoolPlan::life_seed`]).
    pub seed: u64,
}

impl PoolPlan {
    /// Whether the pool's replicas come and go (it has a life cycle, an
    /// autoscaler or failures).
    pub fn lives(&self) -> bool {
        self.lives
    }

    /// The pool's life cycle ([`LifeUnitPlan`]).
    pub fn life_plan(&self) -> LifeUnitPlan {
        let r = &self.replica;
        let gpus = r.parallel.gpus();
        LifeUnitPlan {
            lifecycle: self.lifecycle.clone().unwrap_or_default(),
            autoscale: self.autoscale.clone(),
            failures: self.failures.clone(),
            given_failures: GivenFailure::all(self.failures.as_ref()),
            start: self.start,
            weight_bytes: r.memory.weight_bytes * gpus as f64,
            gpus,
            first: self.first as usize,
            seed: self.life_seed,
        }
    }
}

impl Scenario {
    /// The life cycle's slice of the plan, when one of the pools has a
    /// life cycle (a pool without one where others have one keeps its
    /// replicas ready all run).
    pub fn lifecycle_plan(&self) -> Option<LifecyclePlan> {
        if !self.pools.iter().any(PoolPlan::lives) {
            return None;
        }
        Some(LifecyclePlan {
            units: self.pools.iter().map(PoolPlan::life_plan).collect(),
            given_failures: if self.declares_pools() {
                GivenFailure::all(self.file.failures.as_ref())
            } else {
                Vec::new()
            },
        })
    }
}
