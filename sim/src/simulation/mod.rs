//! One run: the workload feeds arrivals, the router places them, replicas run
//! iterations priced by the cost model, and the run ends with its records,
//! summary and a conservation check.

use crate::cluster::fleet::{Actions, Fleet};
use crate::cost::CostModel;
use crate::engine::EventQueue;
use crate::kv::prefix_cache::PrefixCacheReport;
use crate::kv::BlockAllocator;
use crate::records::timeseries::TimeseriesRow;
use crate::replica::report::EngineReport;
use crate::replica::{Replica, TokenGaps};
use crate::request::{RejectReason, Request, RequestId, Status};
use crate::scenario::Scenario;
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
/// before `report` gathers the reports into the run's summary.
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
    pub load: crate::load::LoadReport,
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
    /// One cost model per pool (one in all without pools).
    costs: Vec<Box<dyn CostModel + 'a>>,
    replicas: Vec<Replica>,
    /// Pools, routers and the disaggregated KV data path.
    fleet: Fleet,
    actions: Actions,
    requests: Vec<Request>,
    queue: EventQueue<Event>,
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
    slab: records::Slab,
    /// The reports' folds of ended requests, as they end.
    stream: crate::records::RecordStream,
    /// The canary rollout (`[canary]`); `None`: no split.
    canary: Option<crate::canary::Canary>,
    /// Regions and the global router (`[[fleet.regions]]`).
    regions: Option<crate::region::Regions>,
    /// Decode runs (`decode_runs`): the replica whose iteration end is being
    /// handled, and its run's next step, held aside while it may skip the queue.
    run_owner: Option<usize>,
    run_step: Option<SimTime>,
    /// Where runs may step ahead of other replicas' events (`decode_runs`).
    ahead: decode_runs::RunAhead,
    /// The cost model's terms kept from each replica's last step.
    step_terms: Vec<crate::cost::StepTerms>,
    /// `[metrics] routing_trace`: each routing decision and its regret.
    routing_trace: Option<crate::cluster::routing_trace::RoutingTrace>,
}

/// Why a request of `prompt` + `output` tokens can never be served by one of
/// the scenario's replicas, if so (`splits_prefills`: the batch policy chunks
/// prefills). The simulation rejects such requests at arrival; the HTTP
/// server answers them with 400, as vLLM does.
pub fn unservable(
    s: &Scenario,
    prompt: u32,
    output: u32,
    splits_prefills: bool,
) -> Option<RejectReason> {
    let p = prompt as u64;
    let o = output as u64;
    let bs = s.file.engine.block_size as u64;
    if p + o > s.max_model_len as u64 {
        return Some(RejectReason::ExceedsMaxModelLen);
    }
    if p > s.file.engine.max_batched_tokens as u64 && !splits_prefills {
        return Some(RejectReason::PromptExceedsTokenBudget);
    }
    // The last output token is never written to the cache. A request
    // must fit alone (an empty replica admits without the watermark)
    // beside whatever pinned prefixes may hold.
    let kv_total = s
        .memory
        .kv_blocks
        .saturating_sub(s.file.engine.pinned_prefix_blocks);
    if BlockAllocator::blocks_for((p + o).saturating_sub(1), bs) > kv_total {
        return Some(RejectReason::ExceedsKvCapacity);
    }
    None
}

impl<'a> Simulation<'a> {
    /// A run of `scenario` priced by the catalog roofline.
    pub fn new(scenario: &'a Scenario) -> Simulation<'a> {
        Self::with_cost_model(scenario, scenario.cost_model())
    }

    /// A run with another cost model (e.g. a calibration profile).
    pub fn with_cost_model(
        scenario: &'a Scenario,
        cost: Box<dyn CostModel + 'a>,
    ) -> Simulation<'a> {
        let f = &scenario.file;
        let life = life::FleetRun::new(scenario);
        let mut replicas = Fleet::replicas(scenario, life.as_ref().map(|x| x.slots() as u32));
        if !f.metrics.attribution {
            replicas.iter_mut().for_each(Replica::disable_attribution);
        }
        if f.engine.decode_runs {
            replicas.iter_mut().for_each(Replica::enable_decode_runs);
        }
        // Pools price their iterations by their own hardware's model.
        let costs: Vec<Box<dyn CostModel + 'a>> = if scenario.pools.is_empty() {
            vec![cost]
        } else {
            scenario
                .pools
                .iter()
                .map(|p| p.scenario.cost_model())
                .collect()
        };
        let cost = &costs[0];
        let mut tenancy = Tenancy::new(scenario);
        tenancy.install(&mut replicas);
        tenancy.set_prefill_speed(crate::tenancy::prefill_ns_per_token(
            scenario,
            cost.as_ref(),
        ));
        let deadline = f.horizon.duration_s.map(SimTime::from_secs_f64);
        let max_requests = f.horizon.requests.unwrap_or(u64::MAX);
        let ctx = workload::Context::new(&scenario.origin, &scenario.base_dir, f.seed);
        let built = if f.fleet.regions.is_empty() {
            crate::tenancy::build_source(scenario, &ctx)
        } else {
            crate::region::source::build_source(scenario, &ctx)
        };
        let (mut source, init_error) = match built {
            Ok(s) => (s, None),
            Err(e) => (
                Box::new(workload::NoRequests) as Box<dyn RequestSource>,
                Some(e),
            ),
        };
        let first = source.next_request();
        let mut queue = EventQueue::new();
        if replicas.len() >= WHEEL_FROM {
            queue.set_wheel(WHEEL_SHIFT, WHEEL_SLOTS);
        }
        let mut ahead = decode_runs::RunAhead::default();
        let mut pending = None;
        if let Some(spec) = first {
            if max_requests > 0 && deadline.is_none_or(|d| spec.arrival <= d) {
                queue.schedule(spec.arrival, Event::Arrival);
                ahead.scheduled(spec.arrival, &Event::Arrival);
                pending = Some(spec);
            }
        }
        if f.metrics.timeseries != crate::scenario::TimeseriesMode::Off {
            queue.schedule(SimTime::ZERO, Event::Sample);
            ahead.scheduled(SimTime::ZERO, &Event::Sample);
        }
        let fleet = Fleet::new(scenario, &replicas);
        if let Some(t) = fleet.first_report() {
            queue.schedule(t, Event::LoadReport);
            ahead.scheduled(t, &Event::LoadReport);
        }
        // A capacity hint; traces and closed loops have no rate to go by.
        let expected = max_requests.min(
            deadline
                .and_then(|d| {
                    f.offered_rate()
                        .map(|r| (d.as_secs_f64() * r * 1.1) as u64 + 16)
                })
                .unwrap_or(u64::MAX),
        );
        // A closed loop holds one request per user in flight: its slots are
        // taken at once rather than doubled into (which would allocate up to
        // twice what the guard counts).
        let users = crate::guard::closed_loop_users(scenario);
        let expected = if expected == u64::MAX { 4096 } else { expected }.max(users + 16);
        let step_terms = vec![Default::default(); replicas.len()];
        let routing_trace = f.metrics.routing_trace.then(|| {
            crate::cluster::routing_trace::RoutingTrace::new(replicas.len(), fleet.score_meaning())
        });
        let mut sim = Simulation {
            scenario,
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
            sample_every: secs_to_nanos(f.metrics.timeseries_interval_s).max(1),
            itl: Default::default(),
            timeseries: SpillLog::default(),
            stream: crate::records::RecordStream::new(
                f.slo.as_ref().map(crate::scenario::SloCfg::targets),
                tenancy.records(),
                f.slo
                    .as_ref()
                    .filter(|_| life.is_some())
                    .map(crate::scenario::SloCfg::targets),
            ),
            tenancy,
            life,
            slab: records::Slab::default(),
            canary: crate::canary::Canary::new(scenario),
            regions: crate::region::Regions::new(scenario),
            run_owner: None,
            run_step: None,
            ahead,
            step_terms,
            routing_trace,
        };
        sim.fleet_init();
        sim.canary_init();
        sim.region_init();
        sim.init_run_ahead();
        sim
    }

    fn start_iteration(&mut self, r: usize, now: SimTime) {
        if let Some(shape) = self.replicas[r].form_batch(now, &mut self.requests) {
            let cost = &self.costs[self.fleet.pool_of(r)];
            let dt = cost
                .iteration_time_with(&shape, &mut self.step_terms[r])
                .max(1);
            crate::replica::attribution::price_decode_alone(
                &mut self.replicas[r],
                &shape,
                cost.as_ref(),
            );
            if !self.defer_run_step(r, now.plus(dt)) {
                self.queue
                    .schedule(now.plus(dt), Event::IterationEnd(r as u32));
            }
        }
    }

    /// Tells the tenancy and the source a request ended (`admitted`: it had
    /// passed admission, so its tenant counted it in flight); schedules its
    /// follow-up, if any. An unserved request's slot is free at once; a
    /// completed one's once its replica lets go (`on_iteration_end`).
    fn request_ended(&mut self, id: RequestId, now: SimTime, completed: bool, admitted: bool) {
        self.notify_end(id, now, completed, admitted);
        if !completed {
            self.release(id, now);
        }
    }

    fn notify_end(&mut self, id: RequestId, now: SimTime, completed: bool, admitted: bool) {
        if completed {
            self.canary_completed(id);
        }
        self.tenancy
            .on_end(&self.requests[id as usize], now, admitted);
        let Some(mut next) =
            self.source
                .on_request_end(&self.requests[id as usize], now, completed)
        else {
            return;
        };
        next.arrival = next.arrival.max(now);
        if self.deadline.is_some_and(|d| next.arrival > d) {
            return;
        }
        let at = next.arrival;
        let slot = match self.deferred_free.pop() {
            Some(i) => {
                self.deferred[i as usize] = Some(next);
                i
            }
            None => {
                self.deferred.push(Some(next));
                (self.deferred.len() - 1) as u32
            }
        };
        self.queue.schedule(at, Event::FollowUp(slot));
    }

    fn on_iteration_end(&mut self, r: usize, now: SimTime) {
        let mut done = std::mem::take(&mut self.completed_buf);
        self.gaps.gaps.clear();
        self.replicas[r].finish_iteration(now, &mut self.requests, &mut done, &mut self.gaps);
        self.itl.add_all(&self.gaps.gaps);
        for &id in &done {
            self.request_ended(id, now, true, true);
        }
        self.release_completed(r, &done, now);
        done.clear();
        self.completed_buf = done;
        if self.fleet.disaggregated() {
            self.fleet_step(Some(r), None, now);
        }
        if self.replicas[r].has_work() && !self.replicas[r].is_busy() {
            self.start_iteration(r, now);
        }
        self.fleet.observe(r, &self.replicas[r]);
    }

    /// The disaggregated data path after replica `r`'s iteration or the
    /// arrival of transfer `slot`: transfers to schedule, replicas to start.
    fn fleet_step(&mut self, r: Option<usize>, slot: Option<u32>, now: SimTime) {
        let mut act = std::mem::take(&mut self.actions);
        let (reps, reqs) = (&mut self.replicas, &mut self.requests);
        if let Some(r) = r {
            self.fleet.step(r, now, reps, reqs, &mut act);
        }
        if let Some(slot) = slot {
            self.fleet.transfer_done(slot, now, reps, reqs, &mut act);
        }
        for (at, slot) in act.transfers.drain(..) {
            self.queue.schedule(at, Event::TransferDone(slot));
        }
        for k in act.kick.drain(..) {
            if self.replicas[k].has_work() && !self.replicas[k].is_busy() {
                self.start_iteration(k, now);
            }
            self.fleet.observe(k, &self.replicas[k]);
        }
        self.actions = act;
    }

    fn on_load_report(&mut self, now: SimTime) {
        let next = self.fleet.report(now, &self.replicas);
        // Reports stop when nothing is left to happen but reports and samples.
        let work_ahead = self.fleet.busy()
            || self.pending.is_some()
            || self.deferred.iter().any(Option::is_some)
            || self.replicas.iter().any(Replica::is_busy);
        if work_ahead && self.deadline.is_none_or(|d| next <= d) {
            self.queue.schedule(next, Event::LoadReport);
            self.ahead.scheduled(next, &Event::LoadReport);
        }
    }

    fn on_sample(&mut self, now: SimTime) {
        self.fleet.sample(now, &self.replicas);
        if self.scenario.file.metrics.timeseries == crate::scenario::TimeseriesMode::Fleet {
            self.timeseries
                .push(crate::guard::fleet_row(now, &self.replicas));
        }
        let per_replica =
            self.scenario.file.metrics.timeseries == crate::scenario::TimeseriesMode::PerReplica;
        for rep in self.replicas.iter().filter(|_| per_replica) {
            self.timeseries.push(TimeseriesRow {
                time: now,
                replica: rep.id,
                waiting: rep.waiting_len() as u32,
                running: rep.running_len() as u32,
                kv_blocks_used: rep.active_kv_blocks(),
                kv_blocks_total: rep.kv().total(),
            });
        }
        self.fleet_sample(now);
        // Keep sampling while anything else is still to happen.
        if !self.queue.is_empty() {
            let next = now.plus(self.sample_every);
            if self.deadline.is_none_or(|d| next <= d) {
                self.queue.schedule(next, Event::Sample);
                self.ahead.scheduled(next, &Event::Sample);
            }
        }
    }

    /// The scenario this run simulates.
    pub fn scenario(&self) -> &'a Scenario {
        self.scenario
    }

    /// Runs to the horizon and returns the run's parts (`report`'s
    /// `Simulation::run` gathers them into a summary). `progress` is called
    /// every few thousand events.
    pub fn simulate(mut self, mut progress: impl FnMut(Progress)) -> Result<RunParts, RunError> {
        if let Some(e) = self.init_error.take() {
            return Err(e.into());
        }
        crate::guard::check_estimate_with(self.scenario, self.slab.recycle)
            .map_err(RunError::Guard)?;
        let mut guard = crate::guard::RunGuard::new();
        let total_hint = self.max_requests;
        let deadline = self.deadline;
        let mut end = SimTime::ZERO;
        let limit = deadline.unwrap_or(SimTime(u64::MAX));
        while let Some((now, ev)) = self.queue.pop_through(limit) {
            guard.on_event(now.0).map_err(|m| {
                RunError::Guard(format!("{}: simulation stopped: {m}", self.scenario.origin))
            })?;
            // Sampling ticks do not extend the run: it ends with its last
            // arrival or iteration.
            if !matches!(
                ev,
                Event::Sample | Event::LoadReport | Event::Fleet(_) | Event::Canary
            ) {
                // Runs may have stepped past `now` (`decode_runs`).
                end = end.max(now);
            }
            self.ahead.popped(&ev);
            match ev {
                Event::Arrival => self.on_arrival(now),
                Event::FollowUp(slot) => self.on_follow_up(slot, now),
                Event::IterationEnd(r) => {
                    if !self.fleet_stale_end(r as usize, now) {
                        let r = r as usize;
                        let inline = self.runs_inline();
                        let through = inline && self.step_through(r, now);
                        if !through {
                            self.run_owner = inline.then_some(r);
                            self.on_iteration_end(r, now);
                            self.run_owner = None;
                            self.fleet_after_iteration(r, now);
                        }
                        self.continue_run(r, deadline, &mut guard, &mut end, through)?;
                    }
                }
                Event::Retry(slot) => {
                    let spec = self.tenancy.take_retry(slot);
                    self.admit(spec, now);
                }
                Event::Sample => self.on_sample(now),
                Event::LoadReport => self.on_load_report(now),
                Event::Fleet(e) => self.on_fleet_event(e, now),
                Event::TransferDone(slot) => self.fleet_step(None, Some(slot), now),
                Event::Canary => self.on_canary(now),
                Event::Overflow => self.on_overflow(now),
            }
            let events = self.queue.events_processed();
            if events & 0xFFF == 0 {
                guard
                    .check_memory(
                        &self.scenario.origin,
                        self.requests.len(),
                        self.timeseries.len(),
                        self.fleet.series_len() + self.life_series_len(),
                    )
                    .map_err(RunError::Guard)?;
                let by_time = deadline.map(|d| now.as_secs_f64() / d.as_secs_f64().max(1e-9));
                let by_reqs =
                    (total_hint != u64::MAX).then(|| self.slab.arrived as f64 / total_hint as f64);
                let fraction = match (by_time, by_reqs) {
                    (Some(a), Some(b)) => a.max(b),
                    (Some(a), None) | (None, Some(a)) => a,
                    (None, None) => 0.0,
                };
                progress(Progress {
                    fraction: fraction.min(1.0),
                    now,
                    events,
                });
            }
        }
        // A duration horizon is the measurement window, whether or not the
        // fleet drained before it.
        if let Some(d) = deadline {
            end = d;
        }
        self.finish(end)
    }

    fn finish(mut self, end: SimTime) -> Result<RunParts, RunError> {
        let s = self.scenario;
        let workload = self.source.finish()?;
        for rep in &mut self.replicas {
            rep.close(end);
        }
        self.check_invariants()?;

        let f = &s.file;
        let cost_source = self.costs[0].source();
        let events = self.queue.events_processed() + self.ahead.events;
        let mut eng = EngineReport::default();
        let (mut seqs, mut toks, mut busy, mut kv_ns) = (0u64, 0u64, 0u64, 0u128);
        let (mut spec_steps, mut spec_tokens) = (0u64, 0u64);
        let mut prefix: Option<PrefixCacheReport> = None;
        for rep in &self.replicas {
            let st = &rep.stats;
            eng.iterations += st.iterations;
            eng.preemptions += rep.preemptions();
            eng.swap_outs += rep.swap_outs();
            spec_steps += st.spec_steps;
            spec_tokens += st.spec_tokens;
            seqs += st.batch_seqs;
            toks += st.batch_tokens;
            busy += st.busy_ns;
            kv_ns += st.kv_block_ns;
            let total = rep.kv().total().max(1) as f64;
            eng.kv_util_max = eng.kv_util_max.max(st.kv_peak_blocks as f64 / total);
            if let Some(c) = rep.prefix_cache() {
                let p = prefix.get_or_insert_with(Default::default);
                p.lookup_tokens += c.stats.lookup_tokens;
                p.hit_tokens += c.stats.hit_tokens;
                p.lookup_blocks += c.stats.lookup_blocks;
                p.hit_blocks += c.stats.hit_blocks;
                p.inserted_blocks += c.stats.inserted_blocks;
                p.evicted_blocks += c.stats.evicted_blocks;
                p.cached_blocks_at_end += c.blocks();
                p.pinned_blocks_at_end += c.pinned_blocks();
            }
        }
        let its = eng.iterations.max(1) as f64;
        eng.mean_batch_size = seqs as f64 / its;
        eng.mean_batch_tokens = toks as f64 / its;
        let span = end.0.max(1) as f64 * self.replicas.len() as f64;
        eng.busy_fraction = busy as f64 / span;
        eng.kv_util_mean = kv_ns as f64 / (span * s.memory.kv_blocks.max(1) as f64);
        if !s.pools.is_empty() {
            // Pools may differ in KV blocks: weigh by each replica's own.
            let blocks: u64 = self.replicas.iter().map(|r| r.kv().total()).sum();
            eng.kv_util_mean = kv_ns as f64 / (end.0.max(1) as f64 * blocks.max(1) as f64);
        }
        eng.policy = f.engine.policy.name().to_string();
        eng.preemption_mode = format!("{:?}", f.engine.preemption).to_lowercase();
        eng.spec_tokens_per_step = (spec_steps > 0).then(|| spec_tokens as f64 / spec_steps as f64);
        if let Some(p) = &mut prefix {
            p.token_hit_rate = p.hit_tokens as f64 / p.lookup_tokens.max(1) as f64;
            p.block_hit_rate = p.hit_blocks as f64 / p.lookup_blocks.max(1) as f64;
        }
        eng.prefix_cache = prefix;
        let ended = self.flush_records();
        if let Some(v) = self.stream.violation.take() {
            return Err(InvariantViolation(v).into());
        }
        let itl = self.itl.dist();
        if let Some(e) = self
            .stream
            .spill_error()
            .or(self.itl.error().map(str::to_string))
            .or(self.timeseries.error().map(str::to_string))
        {
            return Err(RunError::Output(std::io::Error::other(e)));
        }
        let streamed = self.stream.take_csv().map_err(RunError::Output)?;
        let st = std::mem::replace(
            &mut self.stream,
            crate::records::RecordStream::new(None, None, None),
        );
        // Each region draws the whole `[workload]`: the fleet is offered it
        // once per region.
        let offered = f
            .offered_rate()
            .map(|r| r * f.fleet.regions.len().max(1) as f64);
        let (requests, load) = (st.summary, &st.load);
        // What was spilled to disk is read back only now, so a run whose
        // spilled records cannot be read fails here rather than reporting
        // on part of its requests.
        let read_error = |e: String| RunError::Output(std::io::Error::other(e));
        let dists = requests.finish(itl, end, s.gpus());
        let load_report =
            crate::load::load_report_of(|| load.iter(), end, f.fleet.replicas, offered);
        let request_stats = dists.map_err(read_error)?;
        if let Some(e) = load.error() {
            return Err(read_error(e.to_string()));
        }
        let tenancy = match st.tenants {
            Some(t) => self
                .tenancy
                .report_from(t, end, s.gpus())
                .map_err(read_error)?,
            None => None,
        };
        let dip = st.dip.map(|(d, _)| d.finish());
        let lifecycle = self.fleet_report(end, &st.completed_output_tokens, dip);
        let fleet_series = self.fleet_series();
        let pools = self.fleet.pool_reports(s, &self.replicas, end);
        let kv_transfer = self
            .fleet
            .transfer_report_from(st.transfers, end)
            .map_err(read_error)?;
        let canary = self.canary.as_ref().map(crate::canary::Canary::report);
        let regions = self
            .region_report(st.regions, lifecycle.as_ref(), end)
            .map_err(read_error)?;
        Ok(RunParts {
            end,
            cost_source,
            events,
            workload,
            engine: eng,
            request_stats,
            load: load_report,
            tenancy,
            lifecycle,
            pools,
            kv_transfer,
            canary,
            regions,
            // A streamed run's slab holds only vacant slots by now.
            requests: if self.slab.recycle {
                Vec::new()
            } else {
                self.requests
            },
            ended,
            timeseries: self.timeseries,
            attribution: f.metrics.attribution,
            fleet_series,
            pool_series: self.fleet.take_series(),
            streamed_requests: streamed,
            scenario_hash: crate::output::scenario_hash(s),
            routing_trace: self.routing_trace,
        })
    }
}

mod admission;
mod canary_run;
mod decode_runs;
pub mod estimate;
mod invariants;
mod life;
mod records;
mod regions;

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
