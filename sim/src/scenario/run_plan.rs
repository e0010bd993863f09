//! The run's own slice of the plan: what the simulation's handlers read of
//! a scenario beside the models' slices (sampling, the records' columns,
//! arrivals' block hashes), resolved once from the file so that
//! a handler reads no configuration while the run goes.

use super::{ArrivalCfg, Scenario, SloCfg, SloTargets, TimeseriesMode, WorkloadCfg};

/// What the simulation's handlers read of a scenario.
#[derive(Clone, Debug)]
pub struct RunPlan {
    /// `[metrics] timeseries`: what each sampling tick records.
    pub timeseries: TimeseriesMode,
    /// `[metrics] attribution`: requests carry latency components, and
    /// `requests.csv` their `attr_*` columns.
    pub attribution: bool,
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
    /// `name`: the run's name in its summary.
    pub name: String,
    /// `seed`: every random stream derives from it.
    pub seed: u64,
    /// `[horizon] requests`: arrivals after which the run stops.
    pub max_requests: Option<u64>,
    /// `[horizon] duration_s`: the measurement window.
    pub duration_s: Option<f64>,
    /// The workloads' mean arrival rate (requests/s; each region draws it
    /// once); `None` for traces and closed loops.
    pub workload_rps: Option<f64>,
    /// `[metrics] timeseries_interval_s`.
    pub sample_interval_s: f64,
    /// Closed-loop users over the workloads (each keeps one request in
    /// flight, so a run holds at least this many requests at once).
    pub closed_loop_users: u64,
    /// Replica objects the run keeps: the pools' slots.
    pub replica_slots: u64,
    /// Rows per sampling tick of the series held in memory whole: one per
    /// declared pool (`pools.csv`) and, with a life cycle, one per pool.
    pub series_rows_per_tick: u64,
    /// The summary's fleet header: `fleet.replicas`, `fleet.tensor_parallel`,
    /// `fleet.router`, `[engine]`'s block size, batch policy and preemption.
    pub replicas: u32,
    pub tensor_parallel: u32,
    pub router: &'static str,
    pub policy: &'static str,
    pub preemption: String,
    /// `[engine] front_end`, or the runtime's own: the delay between a
    /// request's send and its arrival at a replica.
    pub front_end: crate::config::FrontEnd,
}

impl Scenario {
    /// The run's slice of the plan ([`RunPlan`]).
    pub fn run_plan(&self) -> RunPlan {
        let f = &self.file;
        RunPlan {
            timeseries: f.metrics.timeseries,
            attribution: f.metrics.attribution,
            prefix_caching: f.engine.prefix_caching,
            block_size: f.engine.block_size,
            slo: f.slo.as_ref().map(SloCfg::targets),
            regions: f.fleet.regions.iter().map(|g| g.name.clone()).collect(),
            workload_arrivals_only: f.tenants.is_empty()
                && f.fleet.regions.is_empty()
                && f.canary.is_none(),
            routing_trace: f.metrics.routing_trace,
            name: f.name.clone(),
            seed: f.seed,
            max_requests: f.horizon.requests,
            duration_s: f.horizon.duration_s,
            workload_rps: f.offered_rate(),
            sample_interval_s: f.metrics.timeseries_interval_s,
            closed_loop_users: closed_loop_users(f),
            replica_slots: self.pools.iter().map(|p| p.replicas as u64).sum(),
            series_rows_per_tick: self.series_rows_per_tick(),
            replicas: f.fleet.replicas,
            tensor_parallel: f.fleet.tensor_parallel,
            router: f.fleet.router.name(),
            policy: f.engine.policy.name(),
            preemption: format!("{:?}", f.engine.preemption).to_lowercase(),
            // A calibration profile measured the engine as served, so the
            // runtime's fitted front end would count twice; only a stated
            // one applies.
            front_end: f.engine.front_end.unwrap_or_else(|| {
                if self.profile.is_some() {
                    crate::config::FrontEnd::default()
                } else {
                    f.engine.runtime.front_end()
                }
            }),
        }
    }

    /// See [`RunPlan::series_rows_per_tick`].
    fn series_rows_per_tick(&self) -> u64 {
        if self.file.metrics.timeseries == TimeseriesMode::Off {
            return 0;
        }
        let lives = self.pools.iter().any(super::PoolPlan::lives);
        self.pools.len() as u64 * (self.declares_pools() as u64 + lives as u64)
    }
}

/// Closed-loop users of the scenario's workloads.
fn closed_loop_users(f: &super::ScenarioFile) -> u64 {
    let users = |w: &WorkloadCfg| match &w.arrival {
        Some(ArrivalCfg::Closed { users, .. }) => *users as u64,
        _ => 0,
    };
    users(&f.workload)
        + f.tenants
            .iter()
            .filter_map(|t| t.workload.as_ref())
            .map(users)
            .sum::<u64>()
}
