//! Fleets of pools as the capacity searches count them: in whole units of
//! the pools as written ([`FleetUnit`]), and what one unit costs in GPUs.

use crate::Scenario;
use serde::{Deserialize, Serialize};

/// A fleet of `[[fleet.pools]]` as the capacity searches scale it: the pools
/// as written are one unit, and n units are every pool's `replicas` times n,
/// so the prefill:decode ratio (or the mix of colocated pools) stays as
/// stated. DistServe's placement search sizes disaggregated fleets the same
/// way: it finds the best prefill and decode configuration of one instance
/// pair and replicates it until the rate is met (Zhong et al., OSDI 2024,
/// §4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetUnit {
    /// "1 prefill + 2 decode".
    pub shape: String,
    pub pools: Vec<UnitPool>,
    /// Replicas in one unit.
    pub replicas: u32,
    /// GPUs in one unit.
    pub gpus: u32,
}

/// One pool's share of a [`FleetUnit`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnitPool {
    pub name: String,
    /// `colocated`, `prefill` or `decode`.
    pub role: String,
    pub replicas: u32,
    /// Its hardware's datasheet name.
    pub hardware: String,
    pub gpus: u32,
}

impl FleetUnit {
    /// The unit of a scenario with pools; `None` without.
    pub fn of(s: &Scenario) -> Option<FleetUnit> {
        if !s.declares_pools() {
            return None;
        }
        // In file order: `fleet.pools.<i>` is the i-th pool as written.
        let pools: Vec<UnitPool> = s
            .pools_as_written()
            .into_iter()
            .map(|(cfg, p)| UnitPool {
                name: cfg.name.clone(),
                role: format!("{:?}", cfg.role).to_lowercase(),
                replicas: cfg.replicas,
                hardware: p.hardware().name.clone(),
                gpus: cfg.replicas * p.parallel().gpus(),
            })
            .collect();
        let shape = pools
            .iter()
            .map(|p| match p.role.as_str() {
                "colocated" => format!("{} {}", p.replicas, p.name),
                role => format!("{} {role}", p.replicas),
            })
            .collect::<Vec<_>>()
            .join(" + ");
        Some(FleetUnit {
            shape,
            replicas: pools.iter().map(|p| p.replicas).sum(),
            gpus: pools.iter().map(|p| p.gpus).sum(),
            pools,
        })
    }

    /// The pools of `n` units: "3 prefill + 6 decode".
    pub fn pools_at(&self, n: u32) -> String {
        self.pools
            .iter()
            .map(|p| match p.role.as_str() {
                "colocated" => format!("{} {}", p.replicas * n, p.name),
                role => format!("{} {role}", p.replicas * n),
            })
            .collect::<Vec<_>>()
            .join(" + ")
    }

    /// "3 units (3 prefill + 6 decode)".
    pub fn count(&self, n: u32) -> String {
        let s = if n == 1 { "" } else { "s" };
        format!("{n} unit{s} ({})", self.pools_at(n))
    }
}

/// "4 replicas", or with pools "2 units (2 prefill + 4 decode)".
pub fn fleet_count(unit: Option<&FleetUnit>, n: u32) -> String {
    match unit {
        Some(u) => u.count(n),
        None => format!("{n} replica{}", if n == 1 { "" } else { "s" }),
    }
}

/// GPUs of one replica (tensor × pipeline × expert parallelism), or with
/// pools of one [`FleetUnit`]: what each count of a capacity search costs.
pub fn gpus_per_unit(s: &Scenario) -> u32 {
    match FleetUnit::of(s) {
        Some(u) => u.gpus,
        None => s.gpus() / s.replicas().max(1),
    }
}
