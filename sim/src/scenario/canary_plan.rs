//! The canary's slice of the plan: what `canary::Canary` is built from,
//! resolved once from `[canary]` and the pools it names, so that the
//! rollout reads no configuration while the run goes.

use super::canary_cfg::CanaryCfg;
use super::Scenario;

/// A rollout between the pools `[canary]` names.
#[derive(Clone, Debug)]
pub struct CanaryPlan {
    /// The steps, the gate's percentile, tolerances and failure budget.
    pub cfg: CanaryCfg,
    /// The versions' pools (indices into `Scenario::pools`): the baseline,
    /// the canary and, with `control`, the control.
    pub pools: Vec<usize>,
    /// Their names, in the same order.
    pub names: Vec<String>,
    /// The salt of the per-request split, from the scenario's seed (stream
    /// `canary-split`).
    pub salt: u64,
}

impl Scenario {
    /// The canary's slice of the plan, when the scenario has `[canary]`
    /// (validated: two colocated pools with these names, three with a
    /// control).
    pub fn canary_plan(&self) -> Option<CanaryPlan> {
        let cfg = self.file.canary.clone()?;
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
        Some(CanaryPlan {
            cfg,
            pools,
            names,
            salt,
        })
    }
}
