//! One run: the workload feeds arrivals, the router places them, replicas run
//! iterations priced by the cost model, and the run ends with its records,
//! summary and a conservation check.
//!
//! This module holds the run's types and its construction; the loop
//! (`run`) pops each event from the `agenda` and hands it
//! to the handlers of the model that owns it, each in a module of its own:
//! `admission` (arrivals, tenancy, routing), `replicas` (iterations),
//! `pools` (KV transfers between pools), `life` (life cycle and
//! autoscaling), `canary_run`, `regions`, `front_end`, `sampling` (load reports, time
//! series), `request_ends` and `slab` (a request's way out, its slot).
//! [`Simulation::run`] (`result`) gathers what the run produced into its
//! [`Summary`] and [`RunResult`].

use crate::cluster::fleet::{Actions, Fleet};
use crate::cost::CostModel;
use crate::memory::MemoryPlan;
use crate::records::timeseries::TimeseriesRow;
use crate::replica::report::EngineReport;
use crate::replica::{Replica, TokenGaps};
use crate::request::{RejectReason, Request, RequestId};
use crate::scenario::{Scenario, ServeLimits};
use crate::store::SpillLog;
use crate::tenancy::Tenancy;
use crate::time::{secs_to_nanos, Nanos, SimTime};
use crate::workload::{self, RequestSource, RequestSpec, WorkloadError};

/// Fleets of at least this many replicas keep their near events in the
/// event queue's timing wheel (`engine`; measured on a 1,000-replica
/// fleet). A smaller fleet's heap holds a few events, and it keeps the heap
/// alone, as its runs were measured with.
const WHEEL_FROM: usize = 16;
/// The wheel's buckets, `2^WHEEL_SHIFT` ns (4.1 µs) each: in a busy fleet
/// an event or so per bucket ...
const WHEEL_SHIFT: u32 = 12;
/// ... over a horizon of 33.5 ms, a few decode steps of most models.
const WHEEL_SLOTS: usize = 1 << 13;

/// Events of the fleet model.
#[derive(Clone, Copy, Debug)]
enum Event {
    /// The next request of the workload arrives (its spec is held aside).
    Arrival,
    /// A follow-up request from a closed-loop source arrives (index into
    /// the deferred slab).
    FollowUp(u32),
    /// Replica `r` finishes its iteration in progress.
    IterationEnd(u32),
    /// A rejected request retries after its back-off (slot in the tenancy).
    Retry(u32),
    /// Time-series sampling tick.
    Sample,
    /// The replicas report their load to the router (`fleet.report_interval_s`).
    LoadReport,
    /// Replica life cycle and autoscaling (`fleet`).
    Fleet(crate::lifecycle::FleetEvent),
    /// A KV transfer reaches its decode replica (slot in the fleet's wire).
    TransferDone(u32),
    /// A canary rollout starts or its gate is due (`[canary]`).
    Canary,
    /// An overflowed request reaches its serving region (`region`).
    Overflow,
    /// A request (slot) leaves the serving front end (`front_end`); the
    /// second field is its canary pool + 1 (0: none).
    FrontEnd(u32, u32),
}

impl Event {
    /// Whether the event extends the run: a run ends with its last arrival
    /// or iteration, not with a tick (samples, load reports, life-cycle and
    /// canary events) that may come after.
    #[inline]
    fn extends_run(&self) -> bool {
        !matches!(
            self,
            Event::Sample | Event::LoadReport | Event::Fleet(_) | Event::Canary
        )
    }
}

/// A broken conservation law: a simulator bug, reported as an error.
#[derive(Debug, thiserror::Error)]
#[error("invariant violated at the end of the run: {0}")]
pub struct InvariantViolation(pub String);

/// Why a run produced no results: its workload failed (a trace line that
/// does not parse, a file that cannot be read), or a conservation law broke.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    Invariant(#[from] InvariantViolation),
    /// A guard stopped the run (see `guard`): it would exhaust memory or
    /// cannot progress. The message names the file and the key to change.
    #[error("{0}")]
    Guard(String),
    /// `requests.csv` could not be written while the run streamed it.
    #[error("cannot write requests.csv: {0}")]
    Output(std::io::Error),
}

/// Progress of a run, for progress bars.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Fraction done, 0..=1 (by requests or by simulated time).
    pub fraction: f64,
    pub now: SimTime,
    pub events: u64,
}

/// What a run produces: each subsystem's report and the run's records,
/// before [`Simulation::run`] gathers the reports into the run's summary
/// (`result`).
pub struct RunParts {
    /// When the run ended: its last arrival or iteration, or the duration
    /// horizon.
    pub end: SimTime,
    /// Where the (first pool's) costs come from.
    pub cost_source: String,
    /// Events handled, those stepped through without the queue included.
    pub events: u64,
    pub workload: Option<crate::workload::WorkloadReport>,
    pub engine: EngineReport,
    /// Counts, latency percentiles, throughput and SLO attainment.
    pub request_stats: crate::request::summary::RequestStats,
    pub load: crate::steady_state::LoadReport,
    pub tenancy: Option<crate::tenancy::TenancyReport>,
    pub lifecycle: Option<crate::lifecycle::LifecycleReport>,
    pub pools: Vec<crate::cluster::fleet::PoolReport>,
    pub kv_transfer: Option<crate::cluster::disagg::TransferReport>,
    pub canary: Option<crate::canary::report::CanaryReport>,
    pub regions: Vec<crate::region::RegionReport>,
    pub requests: Vec<Request>,
    /// The ids of `requests` in the order they ended, the order of
    /// `requests.csv`'s rows (empty for a streamed run).
    pub ended: Vec<u64>,
    /// The time series, in the order sampled: past 65,536 rows it is on
    /// disk (`store`), so a long run's memory does not grow with
    /// it (1,000 replicas sampled every 10 s add 24 MiB over 100 M
    /// requests).
    pub timeseries: SpillLog<TimeseriesRow>,
    /// Whether the requests carry latency components (`[metrics]
    /// attribution`); without them `requests.csv` has no `attr_*` columns.
    pub attribution: bool,
    /// Replicas by life-cycle phase per sampling tick (empty without a
    /// life cycle): extra columns of `timeseries.csv`.
    pub fleet_series: Vec<crate::lifecycle::FleetSample>,
    /// `pools.csv` rows (fleets with `[[fleet.pools]]` only).
    pub pool_series: Vec<crate::cluster::pool_series::PoolSample>,
    /// `requests.csv`, already written while the run went
    /// ([`Simulation::stream_records`]); `requests` is then empty.
    pub streamed_requests: Option<crate::output::RequestsCsv>,
    /// A digest of the scenario the run resolved ([`crate::output::scenario_hash`]),
    /// part of the run's identity in `summary.json`.
    pub scenario_hash: u64,
    /// The routing trace (`[metrics] routing_trace`).
    pub routing_trace: Option<crate::cluster::routing_trace::RoutingTrace>,
}

/// A configured run.
pub struct Simulation<'a> {
    scenario: &'a Scenario,
    /// What the handlers read of the scenario, resolved once.
    plan: crate::scenario::RunPlan,
    /// One cost model per pool (one in all without pools).
    costs: Vec<Box<dyn CostModel + 'a>>,
    replicas: Vec<Replica>,
    /// Pools, routers and the disaggregated KV data path.
    fleet: Fleet,
    actions: Actions,
    requests: Vec<Request>,
    /// The event queue, the horizon and the run's guard (`agenda`).
    queue: agenda::Agenda,
    source: Box<dyn RequestSource>,
    /// The workload could not be built; `run` reports it.
    init_error: Option<WorkloadError>,
    pending: Option<RequestSpec>,
    /// Follow-up requests waiting for their arrival event, and free slots.
    deferred: Vec<Option<RequestSpec>>,
    deferred_free: Vec<u32>,
    /// Scratch buffers of an iteration's completions and token gaps.
    completed_buf: Vec<RequestId>,
    gaps: TokenGaps,
    max_requests: u64,
    /// End of the run when the horizon has a duration.
    deadline: Option<SimTime>,
    sample_every: Nanos,
    /// Inter-token latencies, as (gap, tokens) pairs into an exact
    /// histogram.
    itl: crate::records::ItlHistogram,
    timeseries: SpillLog<TimeseriesRow>,
    /// Tenants: admission control, retries, fairness, per-tenant report.
    tenancy: Tenancy,
    /// Replica life cycle and autoscaler (`[lifecycle]`, `[autoscale]`,
    /// `[failures]`); `None`: every replica serves the whole run.
    life: Option<life::FleetRun>,
    /// Slot bookkeeping of `requests` (`records`).
    slab: slab::Slab,
    /// The reports' folds of ended requests, as they end.
    stream: crate::records::RecordStream,
    /// The canary rollout (`[canary]`); `None`: no split.
    canary: Option<crate::canary::Canary>,
    /// Regions and the global router (`[[fleet.regions]]`).
    regions: Option<crate::region::Regions>,
    /// Whether a replica's steady steps may end without the event queue
    /// when they come first (`replicas`): no life cycle, no disaggregation.
    ends_inline: bool,
    /// The cost model's terms kept from each replica's last step.
    step_terms: Vec<crate::cost::StepTerms>,
    /// `[metrics] routing_trace`: each routing decision and its regret.
    routing_trace: Option<crate::cluster::routing_trace::RoutingTrace>,
    /// Requests in the serving front end (`[engine] front_end`).
    front_end: front_end::FrontEndHop,
}

/// Why a request of `prompt` + `output` tokens can never be served by one of
/// the scenario's replicas, if so (`splits_prefills`: the batch policy chunks
/// prefills). The simulation rejects such requests at arrival; the HTTP
/// server answers them with 400, as vLLM does.
pub fn unservable(
    limits: &ServeLimits,
    memory: &MemoryPlan,
    prompt: u32,
    output: u32,
    splits_prefills: bool,
) -> Option<RejectReason> {
    let p = prompt as u64;
    let o = output as u64;
    if p + o > limits.max_model_len as u64 {
        return Some(RejectReason::ExceedsMaxModelLen);
    }
    if p > limits.max_batched_tokens as u64 && !splits_prefills {
        return Some(RejectReason::PromptExceedsTokenBudget);
    }
    // The last output token is never written to the cache. A request
    // must fit alone (an empty replica admits without the watermark)
    // beside whatever pinned prefixes may hold.
    if memory.sequence_blocks((p + o).saturating_sub(1)) > limits.kv_blocks {
        return Some(RejectReason::ExceedsKvCapacity);
    }
    None
}

impl<'a> Simulation<'a> {
    /// A run of `scenario`, each pool priced by its own cost model (the
    /// catalog roofline, or the calibration profile it names).
    pub fn new(scenario: &'a Scenario) -> Simulation<'a> {
        let costs = scenario.pools.iter().map(|p| p.cost_model()).collect();
        Self::with_cost_models(scenario, costs)
    }

    /// A run with other cost models, one per pool in `scenario.pools`' order.
    pub fn with_cost_models(
        scenario: &'a Scenario,
        costs: Vec<Box<dyn CostModel + 'a>>,
    ) -> Simulation<'a> {
        assert_eq!(costs.len(), scenario.pools.len(), "a cost model per pool");
        let plan = scenario.run_plan();
        let life = scenario.lifecycle_plan().as_ref().map(life::FleetRun::new);
        let mut replicas = Fleet::replicas(&scenario.pools, plan.seed);
        if !plan.attribution {
            replicas.iter_mut().for_each(Replica::disable_attribution);
        }
        let cost = &costs[0];
        let mut tenancy = Tenancy::new(&scenario.tenants_plan());
        tenancy.install(&mut replicas);
        tenancy.set_prefill_speed(crate::tenancy::prefill_ns_per_token(
            scenario,
            cost.as_ref(),
        ));
        let deadline = plan.duration_s.map(SimTime::from_secs_f64);
        let max_requests = plan.max_requests.unwrap_or(u64::MAX);
        let ctx = workload::Context::new(&scenario.origin, &scenario.base_dir, plan.seed);
        let regions_plan = scenario.regions_plan();
        let built = match &regions_plan {
            None => crate::tenancy::build_source(&scenario.demand_plan(), &ctx),
            Some(rp) => crate::region::source::build_source(rp, &ctx),
        };
        let (mut source, init_error) = match built {
            Ok(s) => (s, None),
            Err(e) => (
                Box::new(workload::NoRequests) as Box<dyn RequestSource>,
                Some(e),
            ),
        };
        let first = source.next_request();
        let mut queue = agenda::Agenda::new(
            (replicas.len() >= WHEEL_FROM).then_some((WHEEL_SHIFT, WHEEL_SLOTS)),
            deadline,
        );
        let mut pending = None;
        if let Some(spec) = first {
            if max_requests > 0 && deadline.is_none_or(|d| spec.arrival <= d) {
                queue.schedule(spec.arrival, Event::Arrival);
                pending = Some(spec);
            }
        }
        if plan.timeseries != crate::scenario::TimeseriesMode::Off {
            queue.schedule(SimTime::ZERO, Event::Sample);
        }
        let fleet = Fleet::new(&scenario.fleet_plan(), &scenario.pools, &replicas);
        if let Some(t) = fleet.first_report() {
            queue.schedule(t, Event::LoadReport);
        }
        // A capacity hint; traces and closed loops have no rate to go by.
        let expected = max_requests.min(
            deadline
                .and_then(|d| {
                    plan.workload_rps
                        .map(|r| (d.as_secs_f64() * r * 1.1) as u64 + 16)
                })
                .unwrap_or(u64::MAX),
        );
        // A closed loop holds one request per user in flight: its slots are
        // taken at once rather than doubled into (which would allocate up to
        // twice what the guard counts).
        let users = plan.closed_loop_users;
        let expected = if expected == u64::MAX { 4096 } else { expected }.max(users + 16);
        let step_terms = vec![Default::default(); replicas.len()];
        let routing_trace = plan.routing_trace.then(|| {
            crate::cluster::routing_trace::RoutingTrace::new(replicas.len(), fleet.score_meaning())
        });
        let slo = plan.slo;
        let sample_every = secs_to_nanos(plan.sample_interval_s).max(1);
        let mut sim = Simulation {
            scenario,
            plan,
            costs,
            replicas,
            fleet,
            actions: Actions::default(),
            // Within the memory budget: the guard refuses runs beyond it.
            requests: Vec::with_capacity(
                expected
                    .min(10_000_000.max(users + 16))
                    .min(crate::guard::memory_budget() / crate::guard::bytes_per_request())
                    as usize,
            ),
            queue,
            source,
            init_error,
            pending,
            deferred: Vec::new(),
            deferred_free: Vec::new(),
            completed_buf: Vec::new(),
            gaps: TokenGaps::default(),
            max_requests,
            deadline,
            sample_every,
            itl: Default::default(),
            timeseries: SpillLog::default(),
            stream: crate::records::RecordStream::new(
                slo,
                tenancy.records(),
                slo.filter(|_| life.is_some()),
            ),
            tenancy,
            life,
            slab: slab::Slab::default(),
            canary: scenario
                .canary_plan()
                .as_ref()
                .map(crate::canary::Canary::new),
            regions: regions_plan.as_ref().map(crate::region::Regions::new),
            ends_inline: false,
            step_terms,
            routing_trace,
            front_end: Default::default(),
        };
        sim.fleet_init();
        sim.canary_init();
        sim.region_init();
        // A replica's steady steps end at once where nothing but its next
        // iteration is scheduled after them (`replicas`), and go ahead of
        // other replicas' events where only the workload's arrivals, ticks
        // and load reports reach a replica from outside.
        sim.ends_inline = sim.life.is_none() && !sim.fleet.disaggregated();
        let isolated =
            sim.source.open_loop() && sim.plan.workload_arrivals_only && !sim.front_end_on();
        sim.queue.watch_outside(sim.ends_inline && isolated);
        sim
    }

    /// The scenario this run simulates.
    pub fn scenario(&self) -> &'a Scenario {
        self.scenario
    }
}

mod admission;
mod agenda;
mod canary_run;
pub mod estimate;
mod front_end;
mod invariants;
mod life;
mod pools;
mod regions;
mod replicas;
mod request_ends;
mod result;
mod run;
mod sampling;
mod slab;
mod summary;

pub use result::RunResult;
pub use summary::{summarize_requests, ObservedLoad, Summary};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod prefix_tests;

#[cfg(test)]
mod fleet_tests;

#[cfg(test)]
mod pool_life_tests;

#[cfg(test)]
mod region_tests;

#[cfg(test)]
mod decode_run_props;
