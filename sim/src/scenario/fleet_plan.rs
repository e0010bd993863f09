//! The fleet's slice of the plan: what `cluster::fleet::Fleet` is built
//! from beside the pools ([`super::PoolPlan`]) — how its colocated pools
//! group behind routers and the prefill→decode link — resolved once from
//! `[fleet]` and `[canary]`, so that the fleet reads no configuration while
//! the run goes.

use super::{KvTransferCfg, RoutingPlan, Scenario};

/// The fleet above its pools.
#[derive(Clone, Debug)]
pub struct FleetPlan {
    /// The fleet's router (`fleet.router`), before which colocated pools
    /// stand together.
    pub routing: RoutingPlan,
    /// A canary rollout splits traffic between pools (`[canary]`): each
    /// colocated pool has its own routing group.
    pub canary: bool,
    /// Regions (`[[fleet.regions]]`): one routing group per region.
    pub regions: usize,
    /// `fleet.capacity_weighted`: colocated pools of different speeds are
    /// weighed by each replica's capacity.
    pub capacity_weighted: bool,
    /// `[fleet.kv_transfer]`: the prefill→decode link.
    pub kv_transfer: KvTransferCfg,
    /// KV bytes one prompt token occupies across the whole model, what
    /// crosses the link.
    pub kv_bytes_per_token: f64,
    /// The model's layers (the link moves the cache layer by layer).
    pub layers: u32,
}

impl Scenario {
    /// The fleet's slice of the plan ([`FleetPlan`]).
    pub fn fleet_plan(&self) -> FleetPlan {
        let f = &self.file;
        FleetPlan {
            routing: self.routing_plan(),
            canary: f.canary.is_some(),
            regions: f.fleet.regions.len(),
            capacity_weighted: f.fleet.capacity_weighted,
            kv_transfer: f.fleet.kv_transfer.clone(),
            kv_bytes_per_token: self.model.kv_bytes_per_token(self.kv_dtype),
            layers: self.model.layers,
        }
    }
}
