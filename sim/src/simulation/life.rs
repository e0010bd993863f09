//! The simulation's side of the fleet life cycle (`lifecycle`, `autoscale`):
//! which replicas routers may use, the activator buffer, metric scrapes and
//! autoscaler decisions, and requests handed back by a failed or
//! drain-timed-out replica. Only runs with `[lifecycle]`, `[autoscale]` or
//! `[failures]` have a [`FleetRun`]; without them none of this runs and
//! outputs are those of a fixed fleet.

use super::{Event, InvariantViolation, Simulation};
use crate::attribution::{Attribution, Component};
use crate::autoscale::{self, Autoscaler, Observation, Ticks};
use crate::lifecycle::{
    Action, FleetEvent, FleetSample, HandBackCause, LifecycleReport, Phase, ReplicaLifecycle,
};
use crate::request::{RejectReason, RequestId, Status};
use crate::scenario::lifecycle_cfg::ScaleMetric;
use crate::scenario::{GivenFailure, LifeUnitPlan, LifecyclePlan};
use crate::time::{secs_to_nanos, Nanos, SimTime};
use std::collections::HashMap;

/// Life cycle + autoscaler of one set of replicas with one config: the
/// fleet without pools, or one pool (each pool scales on its own, as a
/// Kubernetes Deployment per model server, each with its own HPA).
pub(super) struct Unit {
    pub fleet: ReplicaLifecycle,
    /// Global index of its first slot (`Pool::first`; 0 without pools).
    first: usize,
    scaler: Box<dyn Autoscaler>,
    metric: ScaleMetric,
    scrape_every: Nanos,
    /// The last scrape: ready replicas and the metric's sum over them.
    last: Observation,
    /// Busy time per slot and arrivals at the last scrape.
    busy_at_scrape: Vec<u64>,
    arrivals_at_scrape: u64,
    last_scrape: SimTime,
    standby_fraction: f64,
    /// GPUs of one replica.
    gpus: u32,
    /// Given failures its start schedules, in its own slots' numbers.
    given_failures: Vec<GivenFailure>,
}

/// The life cycles of one run: one [`Unit`] per pool (one without pools).
pub(super) struct FleetRun {
    pub units: Vec<Unit>,
    /// The unit whose activator holds arrivals while no replica of any unit
    /// is ready (the first with `lifecycle.activator`, else the first).
    holder: usize,
    /// Retries so far per request (looked up, never iterated).
    tries: HashMap<RequestId, u32>,
    /// Given failures in the fleet's numbering (declared pools), scheduled
    /// once after every unit's start.
    given_failures: Vec<GivenFailure>,
}

impl Unit {
    fn new(p: &LifeUnitPlan) -> Unit {
        let lc = &p.lifecycle;
        let auto = p.autoscale.as_ref();
        let fleet = ReplicaLifecycle::new(p);
        let scrape = auto.map_or(15.0, |a| a.scrape_interval_s);
        Unit {
            busy_at_scrape: vec![0; fleet.slots()],
            fleet,
            first: p.first,
            scaler: autoscale::build(auto, p.start),
            metric: auto.map_or(ScaleMetric::QueueDepth, |a| a.metric),
            scrape_every: secs_to_nanos(scrape).max(1),
            last: Observation::default(),
            arrivals_at_scrape: 0,
            last_scrape: SimTime::ZERO,
            standby_fraction: lc.standby_cost_fraction,
            gpus: p.gpus,
            given_failures: p.given_failures.clone(),
        }
    }

    /// Global slot range.
    fn range(&self) -> std::ops::Range<usize> {
        self.first..self.first + self.fleet.slots()
    }
}

/// The unit's actions, its slots renumbered as the run's replicas.
fn global(actions: Vec<Action>, first: usize) -> Vec<Action> {
    if first == 0 {
        return actions;
    }
    let g = |s: u32| s + first as u32;
    actions
        .into_iter()
        .map(|a| match a {
            Action::Schedule(at, ev) => Action::Schedule(
                at,
                match ev {
                    FleetEvent::Advance { slot, gen } => FleetEvent::Advance { slot: g(slot), gen },
                    FleetEvent::DrainTimeout { slot, gen } => {
                        FleetEvent::DrainTimeout { slot: g(slot), gen }
                    }
                    FleetEvent::Fail { slot, gen } => FleetEvent::Fail { slot: g(slot), gen },
                    FleetEvent::FailAt { slot } => FleetEvent::FailAt { slot: g(slot) },
                    other => other,
                },
            ),
            Action::Ready(s) => Action::Ready(g(s)),
            Action::Unroutable(s) => Action::Unroutable(g(s)),
            Action::Drain(s) => Action::Drain(g(s)),
            Action::HandBack(s, c) => Action::HandBack(g(s), c),
        })
        .collect()
}

impl FleetRun {
    /// The life cycles of `plan`.
    pub fn new(plan: &LifecyclePlan) -> FleetRun {
        let units: Vec<Unit> = plan.units.iter().map(Unit::new).collect();
        let holder = units.iter().position(|u| u.fleet.activator()).unwrap_or(0);
        FleetRun {
            units,
            holder,
            tries: HashMap::new(),
            given_failures: plan.given_failures.clone(),
        }
    }

    /// The unit holding global slot `r`, and the slot's index in it.
    fn unit_of(&self, r: usize) -> (usize, usize) {
        let u = if self.units.len() == 1 {
            0
        } else {
            self.units
                .iter()
                .position(|u| u.range().contains(&r))
                .expect("every slot is in a unit")
        };
        (u, r - self.units[u].first)
    }

    /// Whether any replica of any unit takes requests.
    pub fn any_ready(&self) -> bool {
        self.units.iter().any(|u| u.fleet.any_ready())
    }

    /// The activator's buffer (held by one unit).
    pub fn buffer(&self) -> &std::collections::VecDeque<u32> {
        &self.units[self.holder].fleet.buffer
    }

    fn holder(&mut self) -> &mut ReplicaLifecycle {
        &mut self.units[self.holder].fleet
    }

    /// Whether replica `r` takes requests (ready).
    pub fn routable(&self, r: usize) -> bool {
        let (u, i) = self.unit_of(r);
        self.units[u].fleet.routable(i)
    }

    fn phase(&self, r: usize) -> Phase {
        let (u, i) = self.unit_of(r);
        self.units[u].fleet.phase(i)
    }
}

impl Simulation<'_> {
    /// At construction: only ready replicas are routable; the first
    /// scrapes, decisions and failure clocks are scheduled.
    pub(super) fn fleet_init(&mut self) {
        let Some(fr) = &mut self.life else { return };
        let mut all = Vec::new();
        for (k, u) in fr.units.iter_mut().enumerate() {
            for i in 0..u.fleet.slots() {
                if !u.fleet.routable(i) {
                    self.fleet.set_routable(u.first + i, false);
                }
            }
            u.last.ready = u.fleet.count(Phase::Ready);
            u.fleet.note_ready_peak();
            let mut actions = u.fleet.start(&u.given_failures);
            match u.scaler.ticks() {
                Ticks::Periodic(every) => {
                    self.queue
                        .schedule(SimTime::ZERO, Event::Fleet(FleetEvent::Scrape(k as u16)));
                    self.queue
                        .schedule(SimTime(every), Event::Fleet(FleetEvent::Decide(k as u16)));
                }
                Ticks::At(times) => {
                    for t in times {
                        actions.push(Action::Schedule(t, FleetEvent::Decide(k as u16)));
                    }
                }
                Ticks::Never => {}
            }
            all.extend(global(actions, u.first));
        }
        // With declared pools, given failures name the fleet's replicas
        // (the pools' own plans drop them; the implicit pool's unit
        // scheduled its own above).
        for g in &fr.given_failures {
            all.push(Action::Schedule(
                g.at,
                FleetEvent::FailAt { slot: g.replica },
            ));
        }
        self.apply(all, SimTime::ZERO);
    }

    /// Whether the run still has arrivals, follow-ups, held or running work.
    fn work_ahead(&self) -> bool {
        self.pending.is_some()
            || self.deferred.iter().any(Option::is_some)
            || self.replicas.iter().any(|r| r.is_busy() || r.has_work())
            || self.life.as_ref().is_some_and(|f| !f.buffer().is_empty())
    }

    pub(super) fn on_fleet_event(&mut self, ev: FleetEvent, now: SimTime) {
        let Some(fr) = &mut self.life else { return };
        let slot_of = |fr: &FleetRun, slot: u32| {
            let (u, i) = fr.unit_of(slot as usize);
            (u, i as u32)
        };
        let (unit, actions) = match ev {
            FleetEvent::Advance { slot, gen } => {
                let (u, i) = slot_of(fr, slot);
                (u, fr.units[u].fleet.on_advance(i, gen, now))
            }
            FleetEvent::DrainTimeout { slot, gen } => {
                let (u, i) = slot_of(fr, slot);
                (u, fr.units[u].fleet.on_drain_timeout(i, gen))
            }
            FleetEvent::Fail { slot, gen } => {
                // Random failures stop with the horizon (validated: MTBF needs
                // a duration).
                let (u, i) = slot_of(fr, slot);
                (u, fr.units[u].fleet.on_fail(i, Some(gen), now))
            }
            FleetEvent::FailAt { slot } => {
                let (u, i) = slot_of(fr, slot);
                (u, fr.units[u].fleet.on_fail(i, None, now))
            }
            FleetEvent::Scrape(k) => {
                self.scrape(k as usize, now);
                let u = &self.life.as_ref().expect("fleet").units[k as usize];
                let next = now.plus(u.scrape_every);
                if self.work_ahead() && self.deadline.is_none_or(|d| next <= d) {
                    self.queue
                        .schedule(next, Event::Fleet(FleetEvent::Scrape(k)));
                }
                return;
            }
            FleetEvent::Decide(k) => {
                let u = &mut fr.units[k as usize];
                let obs = Observation {
                    now,
                    requested: u.fleet.desired(),
                    ..u.last
                };
                let n = u.scaler.decide(&obs);
                let actions = if n != u.fleet.desired() {
                    u.fleet.set_desired(n, now)
                } else {
                    Vec::new()
                };
                if let Ticks::Periodic(every) = u.scaler.ticks() {
                    let next = now.plus(every);
                    if self.work_ahead() && self.deadline.is_none_or(|d| next <= d) {
                        self.queue
                            .schedule(next, Event::Fleet(FleetEvent::Decide(k)));
                    }
                }
                (k as usize, actions)
            }
        };
        let first = self.life.as_ref().expect("fleet").units[unit].first;
        self.apply(global(actions, first), now);
    }

    /// Reads unit `k`'s scaled metric from its ready replicas.
    fn scrape(&mut self, k: usize, now: SimTime) {
        let arrivals = self.slab.arrived;
        let Some(fr) = &mut self.life else { return };
        let pooled = fr.units.len() > 1;
        let held = fr.buffer().len() as f64;
        let u = &mut fr.units[k];
        let dt = now.since(u.last_scrape).max(1) as f64;
        let mut ready = 0u32;
        let mut sum = 0.0;
        let range = u.range();
        for (i, rep) in self.replicas[range.clone()].iter().enumerate() {
            let busy = rep.stats.busy_ns.saturating_sub(u.busy_at_scrape[i]);
            u.busy_at_scrape[i] = rep.stats.busy_ns;
            if !u.fleet.routable(i) {
                continue;
            }
            ready += 1;
            sum += match u.metric {
                ScaleMetric::QueueDepth => rep.waiting_len() as f64,
                ScaleMetric::Running => rep.running_len() as f64,
                ScaleMetric::KvUse => {
                    rep.active_kv_blocks() as f64 / rep.kv().total().max(1) as f64
                }
                ScaleMetric::Utilization => (busy as f64 / dt).min(1.0),
                ScaleMetric::Rps => 0.0,
            };
        }
        match u.metric {
            // Held requests wait for every unit (none has a ready replica).
            ScaleMetric::QueueDepth => sum += held,
            ScaleMetric::Rps => {
                // A pool counts the arrivals routed to it since the last
                // scrape (requests are numbered in arrival order).
                let n = if pooled {
                    self.slab
                        .routed_since(&self.requests, u.arrivals_at_scrape, &range)
                } else {
                    arrivals - u.arrivals_at_scrape
                };
                sum = n as f64 / (dt / 1e9);
            }
            _ => {}
        }
        u.arrivals_at_scrape = arrivals;
        u.last_scrape = now;
        u.last.ready = ready;
        u.last.metric_sum = sum;
        if pooled {
            let oldest = fr.units.iter().map(|u| u.arrivals_at_scrape).min();
            self.slab.forget_arrivals_before(oldest.unwrap_or(arrivals));
        }
    }

    /// Whether the life cycle runs per pool (pooled units count the
    /// arrivals routed to them: `slab::Slab::routed_since`).
    pub(super) fn life_pooled(&self) -> bool {
        self.life.as_ref().is_some_and(|l| l.units.len() > 1)
    }

    /// Carries out what the life cycle decided (slots are the run's).
    fn apply(&mut self, actions: Vec<Action>, now: SimTime) {
        let mut work = actions;
        work.reverse();
        while let Some(a) = work.pop() {
            let mut more = Vec::new();
            match a {
                Action::Schedule(at, ev) => {
                    if self.deadline.is_none_or(|d| at <= d) {
                        self.queue.schedule(at.max(now), Event::Fleet(ev));
                    }
                }
                Action::Ready(slot) => {
                    let r = slot as usize;
                    self.fleet.set_routable(r, true);
                    self.fleet.observe(r, &self.replicas[r]);
                    let fr = self.life.as_mut().expect("fleet");
                    let (u, _) = fr.unit_of(r);
                    fr.units[u].fleet.note_ready_peak();
                    self.release_buffer(now);
                }
                Action::Unroutable(slot) => self.fleet.set_routable(slot as usize, false),
                Action::Drain(slot) => {
                    let r = slot as usize;
                    if !self.replicas[r].is_busy() && !self.replicas[r].has_work() {
                        more = self.drained(r, now);
                    }
                }
                Action::HandBack(slot, cause) => {
                    let r = slot as usize;
                    self.hand_back(r, cause, now);
                    if cause == HandBackCause::DrainTimeout {
                        more = self.drained(r, now);
                    }
                }
            }
            work.extend(more.into_iter().rev());
        }
    }

    /// Replica `r` drained: its unit's actions, renumbered.
    fn drained(&mut self, r: usize, now: SimTime) -> Vec<Action> {
        let fr = self.life.as_mut().expect("fleet");
        let (u, i) = fr.unit_of(r);
        let first = fr.units[u].first;
        global(fr.units[u].fleet.drained(i, now), first)
    }

    /// Sends the activator's requests to the ready replicas, oldest first;
    /// their wait is charged as cold start.
    fn release_buffer(&mut self, now: SimTime) {
        loop {
            let Some(fr) = &mut self.life else { return };
            if !fr.any_ready() {
                return;
            }
            let Some(id) = fr.holder().buffer.pop_front() else {
                return;
            };
            self.requests[id as usize]
                .attribution
                .charge_until(Component::ColdStart, now);
            self.place(id, now);
        }
    }

    /// Routes request `id` (already in the slab) to a ready replica, or
    /// holds it in the activator, or fails it when neither is possible.
    pub(super) fn place(&mut self, id: RequestId, now: SimTime) {
        let fr = self.life.as_mut().expect("fleet");
        if !fr.any_ready() {
            let h = fr.holder();
            if h.activator_has_room() {
                h.buffer.push_back(id);
                h.stats.activator_held += 1;
                h.stats.activator_peak = h.stats.activator_peak.max(h.buffer.len() as u64);
            } else {
                let reason = if h.activator() {
                    RejectReason::QueueFull
                } else {
                    RejectReason::NoReadyReplica
                };
                self.end_unserved(id, reason, now);
            }
            return;
        }
        let r = self
            .fleet
            .route(&mut self.requests[id as usize], &mut self.replicas);
        self.trace_route(id, r, now);
        self.queue_on(r, id, now);
    }

    /// Ends request `id` unserved (no replica, or retries exhausted).
    fn end_unserved(&mut self, id: RequestId, reason: RejectReason, now: SimTime) {
        let req = &mut self.requests[id as usize];
        req.clear_prefix_hashes();
        req.status = Status::Rejected(reason);
        req.finished = crate::time::Stamp::at(now);
        // Admitted at arrival (a failure or an empty fleet ended it since).
        self.request_ended(id, now, false, true);
    }

    /// Takes every request from replica `r` (failed, or out of drain time),
    /// replaces it by a fresh replica (empty caches: a new node) and retries
    /// them elsewhere, or fails them when retries are off or exhausted.
    fn hand_back(&mut self, r: usize, cause: HandBackCause, now: SimTime) {
        let pool = &self.scenario.pools[self.fleet.pool_of(r)];
        let ids: Vec<RequestId> = self.replicas[r].unfinished().collect();
        let mut fresh = crate::cluster::fleet::replica(pool, r as u32, self.plan.seed);
        // The replacement runs under the same run-wide switch as the
        // replicas built at the start (`Simulation::with_cost_models`).
        if !self.plan.attribution {
            fresh.disable_attribution();
        }
        self.tenancy.install(std::slice::from_mut(&mut fresh));
        let mut old = std::mem::replace(&mut self.replicas[r], fresh);
        old.close(now);
        self.replicas[r].stats = std::mem::take(&mut old.stats);
        let fr = self.life.as_mut().expect("fleet");
        let (u, i) = fr.unit_of(r);
        if old.is_busy() {
            fr.units[u].fleet.note_stale_end(i);
        }
        for id in ids {
            let generated = old.generated(id).unwrap_or(0);
            let fr = self.life.as_mut().expect("fleet");
            let max_retries = fr.units[u].fleet.max_retries;
            let st = &mut fr.units[u].fleet.stats;
            st.handed_back += 1;
            let req = &mut self.requests[id as usize];
            if req.first_token.is_some() {
                st.lost_prefill_tokens += req.prompt_tokens as u64;
            }
            st.lost_decode_tokens += generated as u64;
            if let Some(t) = req.first_scheduled.get() {
                st.lost_ms.push(now.since(t) as f64 / 1e6);
            }
            let tries = fr.tries.entry(id).or_insert(0);
            let retry = cause == HandBackCause::DrainTimeout || *tries < max_retries;
            if !retry {
                st.retry_failed += 1;
                self.end_unserved(id, RejectReason::ReplicaFailed, now);
                continue;
            }
            *tries += 1;
            st.retried += 1;
            // The request starts over (a gateway retry resends the prompt):
            // what it had done is lost, and its time so far was spent
            // waiting for a working replica, charged as `cold_start` (a
            // queue component: its queue wait now ends at its admission
            // on the next replica).
            req.replica = u32::MAX;
            req.first_scheduled = crate::time::Stamp::NONE;
            req.first_token = crate::time::Stamp::NONE;
            req.generated = 0;
            req.last_token = now;
            req.attribution = Attribution::new(req.arrival);
            req.attribution.charge_until(Component::ColdStart, now);
            self.place(id, now);
        }
        self.fleet.observe(r, &self.replicas[r]);
    }

    /// An iteration of replica `r` ended: true when it belonged to a replica
    /// that is gone (failed, handed back), so the event is dropped.
    pub(super) fn fleet_stale_end(&mut self, r: usize, now: SimTime) -> bool {
        let Some(fr) = &mut self.life else {
            return false;
        };
        let (u, i) = fr.unit_of(r);
        let first = fr.units[u].first;
        match fr.units[u].fleet.consume_stale_end(i, now) {
            Some(actions) => {
                self.apply(global(actions, first), now);
                true
            }
            None => false,
        }
    }

    /// After replica `r` ended an iteration: a draining replica with
    /// nothing left stops (or joins the standby pool).
    pub(super) fn fleet_after_iteration(&mut self, r: usize, now: SimTime) {
        let Some(fr) = &mut self.life else { return };
        if fr.phase(r) == Phase::Draining
            && !self.replicas[r].is_busy()
            && !self.replicas[r].has_work()
        {
            let actions = self.drained(r, now);
            self.apply(actions, now);
        }
    }

    /// Time-series tick of the life cycle: the fleet's counts (summed over
    /// pools) and, with pools, each pool's on its `pools.csv` row.
    pub(super) fn fleet_sample(&mut self, now: SimTime) {
        let Some(fr) = &mut self.life else { return };
        for u in &mut fr.units {
            u.fleet.sample(now);
        }
        if fr.units.len() > 1 {
            let last: Vec<FleetSample> = fr
                .units
                .iter()
                .map(|u| *u.fleet.series.last().expect("sampled"))
                .collect();
            self.fleet.set_phase_counts(&last);
        }
    }

    /// Conservation with a life cycle: the activator's requests are in
    /// flight and held nowhere else; the slot books balance.
    pub(super) fn fleet_check(&self, held: &mut [bool]) -> Result<(), InvariantViolation> {
        let Some(fr) = &self.life else { return Ok(()) };
        for &id in fr.buffer() {
            let i = id as usize;
            if held[i] {
                return Err(InvariantViolation(format!(
                    "request {id} is held by the activator and a replica"
                )));
            }
            held[i] = true;
            if self.requests[i].status != Status::InFlight {
                return Err(InvariantViolation(format!(
                    "request {id} is {} but still held by the activator",
                    self.requests[i].status.as_str()
                )));
            }
        }
        for u in &fr.units {
            u.fleet.check().map_err(InvariantViolation)?;
        }
        Ok(())
    }

    /// Rows of the life-cycle phase series held so far (every unit's).
    pub(super) fn life_series_len(&self) -> usize {
        self.life
            .as_ref()
            .map_or(0, |fr| fr.units.iter().map(|u| u.fleet.series.len()).sum())
    }

    /// The fleet's replica counts by phase per sampling tick, summed over
    /// its units (one series without pools).
    pub(super) fn fleet_series(&mut self) -> Vec<FleetSample> {
        let Some(fr) = &mut self.life else {
            return Vec::new();
        };
        let mut series = std::mem::take(&mut fr.units[0].fleet.series);
        for u in &mut fr.units[1..] {
            for (a, b) in series.iter_mut().zip(&u.fleet.series) {
                a.requested += b.requested;
                a.provisioning += b.provisioning;
                a.loading += b.loading;
                a.warming += b.warming;
                a.standby += b.standby;
                a.ready += b.ready;
                a.draining += b.draining;
                a.failed += b.failed;
            }
        }
        series
    }

    /// The summary's `lifecycle` section: the fleet's, and with pools each
    /// pool's share (`pools`), whose GPU-hours add up to the fleet's.
    /// `out[r]`: output tokens of the requests replica `r` completed; `dip`:
    /// the SLO dip (with SLOs), both folded as requests ended (`records`).
    pub(super) fn fleet_report(
        &mut self,
        end: SimTime,
        out: &[u64],
        dip: Option<crate::lifecycle::SloDip>,
    ) -> Option<LifecycleReport> {
        let fr = self.life.as_mut()?;
        let mut reports = Vec::with_capacity(fr.units.len());
        let lost: Vec<f64> = fr
            .units
            .iter()
            .flat_map(|u| u.fleet.stats.lost_ms.iter().copied())
            .collect();
        let single = fr.units.len() == 1;
        for u in fr.units.iter_mut() {
            let range = u.range();
            let reps = &self.replicas[range.clone()];
            let busy: u64 = reps.iter().map(|r| r.stats.busy_ns).sum();
            let out: u64 = match single {
                true => out.iter().sum(),
                false => range.clone().filter_map(|i| out.get(i)).sum(),
            };
            let gpus = u.gpus;
            let name = u.scaler.name();
            reports.push(
                u.fleet
                    .report(end, name, busy, gpus, u.standby_fraction, out),
            );
        }
        // The implicit pool's report is the fleet's (no per-pool rows).
        let names: Vec<String> = self
            .scenario
            .pools
            .iter()
            .filter(|p| p.declared)
            .map(|p| p.name.clone())
            .collect();
        let mut rep = crate::lifecycle::combine(reports, &names, end, lost);
        rep.slo_dip = dip;
        Some(rep)
    }

    /// Slot `id` is free: a later request there starts with no retries.
    pub(super) fn life_forget(&mut self, id: RequestId) {
        if let Some(fr) = &mut self.life {
            fr.tries.remove(&id);
        }
    }
}
