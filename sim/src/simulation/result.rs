//! A run's result: the run's parts ([`RunParts`](super::RunParts)) with
//! their reports gathered into the [`Summary`], which `summary.json` writes
//! and every reader of a run (reports, the CLI, sweeps) takes.

use super::summary::Summary;
use super::{Progress, RunError, Simulation};
use crate::output::timeseries::Timeseries;
use crate::request::Request;

/// Everything a run produces.
pub struct RunResult {
    pub summary: Summary,
    pub requests: Vec<Request>,
    /// The ids of `requests` in the order they ended, the order of
    /// `requests.csv`'s rows; empty: `requests`' own order.
    pub ended: Vec<u64>,
    /// The time series, in the order sampled (see
    /// [`RunParts::timeseries`](super::RunParts::timeseries)): its rows,
    /// wherever the run kept them.
    pub timeseries: Timeseries,
    /// Whether the requests carry latency components (`[metrics]
    /// attribution`); without them `requests.csv` has no `attr_*` columns.
    pub attribution: bool,
    /// Replicas by life-cycle phase per sampling tick (empty without a
    /// life cycle): extra columns of `timeseries.csv`.
    pub fleet_series: Vec<crate::lifecycle::FleetSample>,
    /// `pools.csv` rows (fleets with `[[fleet.pools]]` only).
    pub pool_series: Vec<crate::cluster::pool_series::PoolSample>,
    /// Where `requests.csv`'s rows are: in `requests`, or (a streamed run,
    /// whose `requests` is empty) in the file written while the run went.
    pub streamed_requests: crate::output::RequestRows,
    /// A digest of the scenario the run resolved ([`crate::output::scenario_hash`]),
    /// part of the run's identity in `summary.json`.
    pub scenario_hash: u64,
    /// The routing trace (`[metrics] routing_trace`): `routing.csv`.
    pub routing_trace: Option<crate::cluster::routing_trace::RoutingTrace>,
}

impl RunResult {
    /// The requests a run kept, with their ids, in `requests.csv`'s order.
    pub fn rows(&self) -> impl Iterator<Item = (u64, &Request)> + '_ {
        debug_assert!(self.ended.is_empty() || self.ended.len() == self.requests.len());
        (0..self.requests.len()).map(|k| {
            let id = self.ended.get(k).map_or(k, |&id| id as usize);
            (id as u64, &self.requests[id])
        })
    }
}

impl Simulation<'_> {
    /// Runs to the horizon and gathers the summary. `progress` is called
    /// every few thousand events.
    pub fn run(self, progress: impl FnMut(Progress)) -> Result<RunResult, RunError> {
        let s = self.scenario();
        let parts = self.simulate(progress)?;
        let plan = s.run_plan();
        let mut summary = Summary {
            scenario: plan.name,
            seed: plan.seed,
            cost_source: parts.cost_source,
            model: s.model.name.clone(),
            hardware: s.hardware.name.clone(),
            replicas: plan.replicas,
            tensor_parallel: plan.tensor_parallel,
            gpus: s.gpus(),
            router: plan.router.to_string(),
            kv_blocks_per_replica: s.memory.kv_blocks,
            block_size: plan.block_size,
            duration_s: parts.end.as_secs_f64(),
            events: parts.events,
            workload: parts.workload,
            engine: parts.engine,
            load: parts.load,
            tenancy: parts.tenancy,
            lifecycle: parts.lifecycle,
            pools: parts.pools,
            regions: parts.regions,
            kv_transfer: parts.kv_transfer,
            canary: parts.canary,
            routing: parts.routing_trace.as_ref().map(|t| t.report()),
            ..Summary::default()
        };
        summary.absorb(parts.request_stats);
        summary.energy = crate::energy::energy_of(
            s,
            summary.duration_s,
            summary.engine.busy_fraction,
            &summary.pools,
            summary.lifecycle.as_ref(),
            (summary.throughput.output_tokens_per_s * summary.duration_s).round(),
        );
        Ok(RunResult {
            summary,
            requests: parts.requests,
            ended: parts.ended,
            timeseries: parts.timeseries.into(),
            attribution: parts.attribution,
            fleet_series: parts.fleet_series,
            pool_series: parts.pool_series,
            streamed_requests: crate::output::RequestRows::new(parts.streamed_requests),
            scenario_hash: parts.scenario_hash,
            routing_trace: parts.routing_trace,
        })
    }
}
