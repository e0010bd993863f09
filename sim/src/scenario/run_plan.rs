//! The run's own slice of the plan: what the simulation's handlers read of
//! a scenario beside the models' slices (sampling, the records' columns,
//! arrivals' block hashes, decode runs), resolved once from the file so that
//! a handler reads no configuration while the run goes.

use super::{Scenario, SloCfg, SloTargets, TimeseriesMode};

/// What the simulation's handlers read of a scenario.
#[derive(Clone, Debug)]
pub struct RunPlan {
    /// `[metrics] timeseries`: what each sampling tick records.
    pub timeseries: TimeseriesMode,
    /// `[metrics] attribution`: requests carry latency components, and
    /// `requests.csv` their `attr_*` columns.
    pub attribution: bool,
    /// `[engine] decode_runs`: decode-only iterations advance in closed
    /// form (a debugging switch; the outputs are the same either way).
    pub decode_runs: bool,
    /// `[engine] prefix_caching`: arrivals' block hashes are turned into
    /// the engine's blocks of `block_size` tokens.
    pub prefix_caching: bool,
    pub block_size: u32,
    /// The `[slo]` targets, if any.
    pub slo: Option<SloTargets>,
    /// The regions' names (`[[fleet.regions]]`), in order.
    pub regions: Vec<String>,
    /// Requests reach the fleet only from the workload: no tenants (and so
    /// no retries), regions or canary split.
    pub workload_arrivals_only: bool,
    /// `[metrics] routing_trace`: each routing decision is recorded, and
    /// `routing.csv` written.
    pub routing_trace: bool,
}

impl Scenario {
    /// The run's slice of the plan ([`RunPlan`]).
    pub fn run_plan(&self) -> RunPlan {
        let f = &self.file;
        RunPlan {
            timeseries: f.metrics.timeseries,
            attribution: f.metrics.attribution,
            decode_runs: f.engine.decode_runs,
            prefix_caching: f.engine.prefix_caching,
            block_size: f.engine.block_size,
            slo: f.slo.as_ref().map(SloCfg::targets),
            regions: f.fleet.regions.iter().map(|g| g.name.clone()).collect(),
            workload_arrivals_only: f.tenants.is_empty()
                && f.fleet.regions.is_empty()
                && f.canary.is_none(),
            routing_trace: f.metrics.routing_trace,
        }
    }
}
