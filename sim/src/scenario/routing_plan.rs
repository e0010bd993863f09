//! The routing slice of the plan: what one routing stage
//! (`cluster::routing`, a router over its view of a group of replicas) is
//! built from, resolved once from `[fleet]` (or a pool's own `router`), so
//! that a router reads no configuration while the run goes.

use super::{PrefixAffinityCfg, RouterKind, Scenario, SessionAffinityCfg, WeightedCfg};

/// One routing stage's policy, its settings and its report clock.
#[derive(Clone, Debug)]
pub struct RoutingPlan {
    /// `fleet.router` (or the pool's `router`).
    pub router: RouterKind,
    /// The settings of the policies that have any.
    pub prefix_affinity: PrefixAffinityCfg,
    pub weighted: WeightedCfg,
    pub session_affinity: SessionAffinityCfg,
    /// `fleet.report_interval_s`: seconds between the replicas' load
    /// reports (0: the router sees every change at once).
    pub report_interval_s: f64,
    /// The scenario's seed: randomized policies draw from it.
    pub seed: u64,
    /// Tokens one replica's KV cache holds (the default size of a prefix
    /// router's index).
    pub kv_tokens_per_replica: u64,
    /// `[metrics] routing_trace`: the router's scores are kept.
    pub trace: bool,
}

impl Scenario {
    /// The routing slice of the plan ([`RoutingPlan`]): the fleet's router,
    /// or in a pool's own scenario the pool's.
    pub fn routing_plan(&self) -> RoutingPlan {
        let f = &self.file;
        RoutingPlan {
            router: f.fleet.router,
            prefix_affinity: f.fleet.prefix_affinity.clone(),
            weighted: f.fleet.weighted.clone(),
            session_affinity: f.fleet.session_affinity.clone(),
            report_interval_s: f.fleet.report_interval_s,
            seed: f.seed,
            kv_tokens_per_replica: self.memory.kv_tokens,
            trace: f.metrics.routing_trace,
        }
    }
}
