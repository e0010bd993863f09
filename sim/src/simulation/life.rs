//! The simulation's side of the fleet life cycle (`lifecycle`, `autoscale`):
//! which replicas routers may use, the activator buffer, metric scrapes and
//! autoscaler decisions, and requests handed back by a failed or
//! drain-timed-out replica. Only runs with `[lifecycle]`, `[autoscale]` or
//! `[failures]` have a [`FleetRun`]; without them none of this runs and
//! outputs are those of a fixed fleet.

use super::{Event, InvariantViolation, Simulation};
use crate::attribution::{Attribution, Component};
use crate::autoscale::{self, Autoscaler, Observation, Ticks};
use crate::lifecycle::config::ScaleMetric;
use crate::lifecycle::{Action, Fleet, FleetEvent, HandBackCause, LifecycleReport, Phase};
use crate::replica::Replica;
use crate::request::{RejectReason, RequestId, Status};
use crate::scenario::Scenario;
use crate::tenancy::Tenancy;
use crate::time::{secs_to_nanos, Nanos, SimTime};
use std::collections::HashMap;

/// Life cycle + autoscaler of one run.
pub(super) struct FleetRun {
    pub fleet: Fleet,
    scaler: Box<dyn Autoscaler>,
    metric: ScaleMetric,
    scrape_every: Nanos,
    /// The last scrape: ready replicas and the metric's sum over them.
    last: Observation,
    /// Busy time per slot and arrivals at the last scrape.
    busy_at_scrape: Vec<u64>,
    arrivals_at_scrape: u64,
    last_scrape: SimTime,
    /// Retries so far per request (looked up, never iterated).
    tries: HashMap<RequestId, u32>,
    standby_fraction: f64,
}

impl FleetRun {
    /// The life cycle of `s`, when it has one.
    pub fn new(s: &Scenario) -> Option<FleetRun> {
        let f = &s.file;
        if f.lifecycle.is_none() && f.autoscale.is_none() && f.failures.is_none() {
            return None;
        }
        let lc = f.lifecycle.clone().unwrap_or_default();
        let auto = f.autoscale.as_ref();
        let gpus = s.parallel.gpus();
        let weight_bytes = s.memory.weight_bytes * gpus as f64;
        let fleet = Fleet::new(
            &lc,
            auto,
            f.failures.as_ref(),
            f.fleet.replicas,
            weight_bytes,
            f.seed,
        );
        let scrape = auto.map_or(15.0, |a| a.scrape_interval_s);
        Some(FleetRun {
            busy_at_scrape: vec![0; fleet.slots()],
            fleet,
            scaler: autoscale::build(auto, f.fleet.replicas),
            metric: auto.map_or(ScaleMetric::QueueDepth, |a| a.metric),
            scrape_every: secs_to_nanos(scrape).max(1),
            last: Observation::default(),
            arrivals_at_scrape: 0,
            last_scrape: SimTime::ZERO,
            tries: HashMap::new(),
            standby_fraction: lc.standby_cost_fraction,
        })
    }

    /// Slots: the number of replica objects the run keeps.
    pub fn slots(&self) -> usize {
        self.fleet.slots()
    }
}

impl Simulation<'_> {
    /// At construction: only ready replicas are routable; the first
    /// scrapes, decisions and failure clocks are scheduled.
    pub(super) fn fleet_init(&mut self) {
        let Some(fr) = &mut self.life else { return };
        for i in 0..fr.fleet.slots() {
            if !fr.fleet.routable(i) {
                self.fleet.set_routable(i, false);
            }
        }
        fr.last.ready = fr.fleet.count(Phase::Ready);
        fr.fleet.note_ready_peak();
        let mut actions = fr.fleet.start(self.scenario.file.failures.as_ref());
        match fr.scaler.ticks() {
            Ticks::Periodic(every) => {
                self.queue
                    .schedule(SimTime::ZERO, Event::Fleet(FleetEvent::Scrape));
                self.queue
                    .schedule(SimTime(every), Event::Fleet(FleetEvent::Decide));
            }
            Ticks::At(times) => {
                for t in times {
                    actions.push(Action::Schedule(t, FleetEvent::Decide));
                }
            }
            Ticks::Never => {}
        }
        self.apply(actions, SimTime::ZERO);
    }

    /// Whether the run still has arrivals, follow-ups, held or running work.
    fn work_ahead(&self) -> bool {
        self.pending.is_some()
            || self.deferred.iter().any(Option::is_some)
            || self.replicas.iter().any(|r| r.is_busy() || r.has_work())
            || self
                .life
                .as_ref()
                .is_some_and(|f| !f.fleet.buffer.is_empty())
    }

    pub(super) fn on_fleet_event(&mut self, ev: FleetEvent, now: SimTime) {
        let Some(fr) = &mut self.life else { return };
        let actions = match ev {
            FleetEvent::Advance { slot, gen } => fr.fleet.on_advance(slot, gen, now),
            FleetEvent::DrainTimeout { slot, gen } => fr.fleet.on_drain_timeout(slot, gen),
            FleetEvent::Fail { slot, gen } => {
                // Random failures stop with the horizon (validated: MTBF needs
                // a duration).
                fr.fleet.on_fail(slot, Some(gen), now)
            }
            FleetEvent::FailAt { slot } => fr.fleet.on_fail(slot, None, now),
            FleetEvent::Scrape => {
                self.scrape(now);
                let next = now.plus(self.life.as_ref().expect("fleet").scrape_every);
                if self.work_ahead() && self.deadline.is_none_or(|d| next <= d) {
                    self.queue.schedule(next, Event::Fleet(FleetEvent::Scrape));
                }
                return;
            }
            FleetEvent::Decide => {
                let obs = Observation {
                    now,
                    requested: fr.fleet.desired(),
                    ..fr.last
                };
                let n = fr.scaler.decide(&obs);
                let actions = if n != fr.fleet.desired() {
                    fr.fleet.set_desired(n, now)
                } else {
                    Vec::new()
                };
                if let Ticks::Periodic(every) = fr.scaler.ticks() {
                    let next = now.plus(every);
                    if self.work_ahead() && self.deadline.is_none_or(|d| next <= d) {
                        self.queue.schedule(next, Event::Fleet(FleetEvent::Decide));
                    }
                }
                actions
            }
        };
        self.apply(actions, now);
    }

    /// Reads the scaled metric from the ready replicas.
    fn scrape(&mut self, now: SimTime) {
        let arrivals = self.slab.arrived;
        let Some(fr) = &mut self.life else { return };
        let dt = now.since(fr.last_scrape).max(1) as f64;
        let mut ready = 0u32;
        let mut sum = 0.0;
        for (i, rep) in self.replicas.iter().enumerate() {
            let busy = rep.stats.busy_ns.saturating_sub(fr.busy_at_scrape[i]);
            fr.busy_at_scrape[i] = rep.stats.busy_ns;
            if !fr.fleet.routable(i) {
                continue;
            }
            ready += 1;
            sum += match fr.metric {
                ScaleMetric::QueueDepth => rep.waiting_len() as f64,
                ScaleMetric::Running => rep.running_len() as f64,
                ScaleMetric::KvUse => {
                    rep.active_kv_blocks() as f64 / rep.kv().total().max(1) as f64
                }
                ScaleMetric::Utilization => (busy as f64 / dt).min(1.0),
                ScaleMetric::Rps => 0.0,
            };
        }
        match fr.metric {
            ScaleMetric::QueueDepth => sum += fr.fleet.buffer.len() as f64,
            ScaleMetric::Rps => {
                sum = (arrivals - fr.arrivals_at_scrape) as f64 / (dt / 1e9);
            }
            _ => {}
        }
        fr.arrivals_at_scrape = arrivals;
        fr.last_scrape = now;
        fr.last.ready = ready;
        fr.last.metric_sum = sum;
    }

    /// Carries out what the life cycle decided.
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
                    fr.fleet.note_ready_peak();
                    self.release_buffer(now);
                }
                Action::Unroutable(slot) => self.fleet.set_routable(slot as usize, false),
                Action::Drain(slot) => {
                    let r = slot as usize;
                    if !self.replicas[r].is_busy() && !self.replicas[r].has_work() {
                        more = self.life.as_mut().expect("fleet").fleet.drained(r, now);
                    }
                }
                Action::HandBack(slot, cause) => {
                    let r = slot as usize;
                    self.hand_back(r, cause, now);
                    if cause == HandBackCause::DrainTimeout {
                        more = self.life.as_mut().expect("fleet").fleet.drained(r, now);
                    }
                }
            }
            work.extend(more.into_iter().rev());
        }
    }

    /// Sends the activator's requests to the ready replicas, oldest first;
    /// their wait is charged as cold start.
    fn release_buffer(&mut self, now: SimTime) {
        loop {
            let Some(fr) = &mut self.life else { return };
            if !fr.fleet.any_ready() {
                return;
            }
            let Some(id) = fr.fleet.buffer.pop_front() else {
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
        if !fr.fleet.any_ready() {
            if fr.fleet.activator_has_room() {
                fr.fleet.buffer.push_back(id);
                fr.fleet.stats.activator_held += 1;
                fr.fleet.stats.activator_peak = fr
                    .fleet
                    .stats
                    .activator_peak
                    .max(fr.fleet.buffer.len() as u64);
            } else {
                let reason = if fr.fleet.activator() {
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
        let req = &mut self.requests[id as usize];
        req.replica = r as u32;
        let waiting = Tenancy::waiting(id, req);
        self.replicas[r].enqueue_waiting(waiting);
        if !self.replicas[r].is_busy() {
            self.start_iteration(r, now);
        }
        self.fleet.observe(r, &self.replicas[r]);
    }

    /// Ends request `id` unserved (no replica, or retries exhausted).
    fn end_unserved(&mut self, id: RequestId, reason: RejectReason, now: SimTime) {
        let req = &mut self.requests[id as usize];
        req.prefix_hashes = Vec::new();
        req.status = Status::Rejected(reason);
        req.finished = Some(now);
        self.request_ended(id, now, false);
    }

    /// Takes every request from replica `r` (failed, or out of drain time),
    /// replaces it by a fresh replica (empty caches: a new node) and retries
    /// them elsewhere, or fails them when retries are off or exhausted.
    fn hand_back(&mut self, r: usize, cause: HandBackCause, now: SimTime) {
        let s = self.scenario;
        let f = &s.file;
        let ids: Vec<RequestId> = self.replicas[r].unfinished().collect();
        let mut fresh = Replica::new(
            r as u32,
            &f.engine,
            s.memory.kv_blocks,
            s.memory.block_bytes(),
            f.seed,
        );
        self.tenancy.install(std::slice::from_mut(&mut fresh));
        let mut old = std::mem::replace(&mut self.replicas[r], fresh);
        old.close(now);
        self.replicas[r].stats = std::mem::take(&mut old.stats);
        let fr = self.life.as_mut().expect("fleet");
        if old.is_busy() {
            fr.fleet.note_stale_end(r);
        }
        for id in ids {
            let generated = old.generated(id).unwrap_or(0);
            let fr = self.life.as_mut().expect("fleet");
            let st = &mut fr.fleet.stats;
            st.handed_back += 1;
            let req = &mut self.requests[id as usize];
            if req.first_token.is_some() {
                st.lost_prefill_tokens += req.prompt_tokens as u64;
            }
            st.lost_decode_tokens += generated as u64;
            if let Some(t) = req.first_scheduled {
                st.lost_ms.push(now.since(t) as f64 / 1e6);
            }
            let tries = fr.tries.entry(id).or_insert(0);
            let retry = cause == HandBackCause::DrainTimeout || *tries < fr.fleet.max_retries;
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
            req.first_scheduled = None;
            req.first_token = None;
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
        match fr.fleet.consume_stale_end(r, now) {
            Some(actions) => {
                self.apply(actions, now);
                true
            }
            None => false,
        }
    }

    /// After replica `r` ended an iteration: a draining replica with
    /// nothing left stops (or joins the standby pool).
    pub(super) fn fleet_after_iteration(&mut self, r: usize, now: SimTime) {
        let Some(fr) = &mut self.life else { return };
        if fr.fleet.phase(r) == Phase::Draining
            && !self.replicas[r].is_busy()
            && !self.replicas[r].has_work()
        {
            let actions = fr.fleet.drained(r, now);
            self.apply(actions, now);
        }
    }

    /// Time-series tick of the life cycle.
    pub(super) fn fleet_sample(&mut self, now: SimTime) {
        if let Some(fr) = &mut self.life {
            fr.fleet.sample(now);
        }
    }

    /// Conservation with a life cycle: the activator's requests are in
    /// flight and held nowhere else; the slot books balance.
    pub(super) fn fleet_check(&self, held: &mut [bool]) -> Result<(), InvariantViolation> {
        let Some(fr) = &self.life else { return Ok(()) };
        for &id in &fr.fleet.buffer {
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
        fr.fleet.check().map_err(InvariantViolation)
    }

    /// The summary's `lifecycle` section.
    /// `out`: output tokens of completed requests; `dip`: the SLO dip
    /// (with SLOs), both folded as requests ended (`records`).
    pub(super) fn fleet_report(
        &mut self,
        end: SimTime,
        out: u64,
        dip: Option<crate::lifecycle::SloDip>,
    ) -> Option<LifecycleReport> {
        let fr = self.life.as_mut()?;
        let busy: u64 = self.replicas.iter().map(|r| r.stats.busy_ns).sum();
        let frac = fr.standby_fraction;
        let name = fr.scaler.name();
        let mut rep = fr
            .fleet
            .report(end, name, busy, self.scenario.parallel.gpus(), frac, out);
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
