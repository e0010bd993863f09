//! The simulation's side of decode runs (`replica::decode_run`): a run's
//! step whose end falls strictly before every queued event would be the next
//! event popped, so it is handled at once, without a trip through the event
//! queue; a run that meets nothing else advances as one event. A step that
//! ties with or follows a queued event is scheduled as usual, so events at
//! the same nanosecond keep their insertion order and the run is the same
//! as step by step.
//!
//! Only fleets without a life cycle and without disaggregation continue runs
//! this way: there, handling an iteration's end schedules nothing after the
//! next iteration's start, so deferring that one schedule to the end of the
//! event changes no order. Elsewhere replicas still take closed-form steps,
//! one event each.
//!
//! **Stepping ahead.** In a fleet of many replicas the next queued event is
//! nearly always another replica's iteration end, so the rule above rarely
//! applies. Replicas share nothing between arrivals, though: another
//! replica's iteration end touches only that replica, its router view
//! (a per-replica entry) and the inter-token histogram (a multiset), and a
//! step that completes nothing leaves no record. So where nothing but the
//! workload's next arrival, the time-series tick and the load report can
//! reach a replica from outside ([`RunAhead`]: an open-loop source, no
//! tenants, regions or canary, on top of the above), a run's step that
//! completes no sequence is handled at once when it ends strictly before
//! every queued event of those three kinds, whatever other replicas have
//! queued before it. At each of those events every replica is then exactly
//! where the step-by-step order leaves it (each mid-step, its next end
//! queued), so every output is the same; the summary's event count includes
//! the steps taken ahead. A step that ties with such an event keeps its
//! place in the queue.

use super::{Event, RunError, Simulation};
use crate::guard::RunGuard;
use crate::time::SimTime;

/// A decode run's next step, held aside while its replica's iteration end
/// is handled (`owner`), when it may skip the queue (`step`).
#[derive(Debug, Default)]
pub(super) struct HeldStep {
    owner: Option<usize>,
    step: Option<SimTime>,
}

/// What may reach a replica from outside while it runs: the times of the
/// queued events of the kinds that can (none in the queue: `u64::MAX`), in
/// a fleet where only those kinds can (`enabled`).
#[derive(Debug)]
pub(super) struct RunAhead {
    enabled: bool,
    arrival: u64,
    sample: u64,
    report: u64,
    /// Steps taken ahead of queued events (counted as events).
    pub(super) events: u64,
}

impl Default for RunAhead {
    fn default() -> Self {
        RunAhead {
            enabled: false,
            arrival: u64::MAX,
            sample: u64::MAX,
            report: u64::MAX,
            events: 0,
        }
    }
}

impl RunAhead {
    /// `event` was scheduled at `t`.
    pub(super) fn scheduled(&mut self, t: SimTime, event: &Event) {
        match event {
            Event::Arrival => self.arrival = t.0,
            Event::Sample => self.sample = t.0,
            Event::LoadReport => self.report = t.0,
            _ => {}
        }
    }

    /// `event` left the queue.
    pub(super) fn popped(&mut self, event: &Event) {
        self.scheduled(SimTime(u64::MAX), event);
    }

    /// The instant before which a step comes strictly before every event
    /// that could reach its replica (0 when runs may not step ahead).
    fn outside(&self) -> u64 {
        if self.enabled {
            self.arrival.min(self.sample).min(self.report)
        } else {
            0
        }
    }
}

impl Simulation<'_> {
    /// Replica `r`'s iteration ended at `now` (its `IterationEnd` event):
    /// the general path, or a decode run's step handed over inline, and the
    /// run continued while its steps come first. `end`: the run's last
    /// iteration end so far, which a run stepping ahead moves past `now`.
    pub(super) fn on_iteration_event(
        &mut self,
        r: usize,
        now: SimTime,
        deadline: Option<SimTime>,
        guard: &mut RunGuard,
        end: &mut SimTime,
    ) -> Result<(), RunError> {
        if self.fleet_stale_end(r, now) {
            return Ok(());
        }
        let inline = self.runs_inline();
        let through = inline && self.step_through(r, now);
        if !through {
            self.runs.owner = inline.then_some(r);
            self.on_iteration_end(r, now);
            self.runs.owner = None;
            self.fleet_after_iteration(r, now);
        }
        self.continue_run(r, deadline, guard, end, through)
    }

    /// Whether runs may skip the event queue in this fleet.
    pub(super) fn runs_inline(&self) -> bool {
        self.plan.decode_runs && self.life.is_none() && !self.fleet.disaggregated()
    }

    /// Decides once whether runs may step ahead (see [`RunAhead`]): only
    /// arrivals from the source, ticks and load reports reach a replica
    /// from outside, and no request's end creates another event.
    pub(super) fn init_run_ahead(&mut self) {
        self.queue.ahead.enabled =
            self.runs_inline() && self.source.open_loop() && self.plan.workload_arrivals_only;
    }

    /// Called by `start_iteration` for replica `r`'s iteration ending at
    /// `end`: keeps it aside, instead of scheduling it, when it is a run's
    /// step formed while `r`'s own iteration end is being handled.
    pub(super) fn defer_run_step(&mut self, r: usize, end: SimTime) -> bool {
        if self.runs.owner != Some(r) || !self.replicas[r].in_decode_run() {
            return false;
        }
        self.runs.owner = None;
        self.runs.step = Some(end);
        true
    }

    /// Replica `r`'s run step ending at `now` only hands over to the next:
    /// ends it and forms the next in one call (`Replica::run_step_through`),
    /// keeping the next step's end aside for [`Self::continue_run`] as
    /// `defer_run_step` does. Only where runs are continued inline
    /// (`runs_inline`: no life cycle or disaggregation, whose hooks the
    /// general path runs). Returns false, having done nothing, for any
    /// other iteration end. The caller tells the router's view.
    pub(super) fn step_through(&mut self, r: usize, now: SimTime) -> bool {
        let Some(end) = self.hand_over(r, self.fleet.pool_of(r), now) else {
            return false;
        };
        self.runs.step = Some(end);
        true
    }

    /// [`Self::step_through`] of replica `r` of `pool`, returning the next
    /// step's end instead of keeping it aside (`continue_run`'s loop).
    #[inline(always)]
    fn hand_over(&mut self, r: usize, pool: usize, now: SimTime) -> Option<SimTime> {
        let (gap, seqs, context) = self.replicas[r].run_step_through(now)?;
        // Every sequence got its previous token when the last step ended.
        self.itl.add(gap, seqs);
        // Priced from the replica's kept terms when they are this sequence
        // count's (a roofline's), without the call into the cost model.
        let terms = &mut self.step_terms[r];
        let dt = match terms.decode_step_time(seqs, context) {
            Some(dt) => dt,
            None => self.costs[pool].decode_step_time(seqs, context, terms),
        };
        Some(now.plus(dt.max(1)))
    }

    /// After replica `r`'s iteration ended at `now`: while its run's next
    /// step ends before anything queued (and within the horizon), that step
    /// ends here; otherwise it goes into the queue. `unobserved`: that
    /// iteration end was `step_through`'s, which leaves the router's view
    /// to be told here.
    ///
    /// Between two steps that only hand over (`hand_over`) nothing is
    /// scheduled or popped, so the queue's next event and the times of the
    /// events that could reach the replica are read again only after a step
    /// that took the general path.
    pub(super) fn continue_run(
        &mut self,
        r: usize,
        deadline: Option<SimTime>,
        guard: &mut RunGuard,
        end: &mut SimTime,
        mut unobserved: bool,
    ) -> Result<(), RunError> {
        let pool = self.fleet.pool_of(r);
        let deadline = deadline.map_or(u64::MAX, |d| d.0);
        let mut next = self.runs.step.take();
        let (mut queued, mut outside) = (self.queue.peek_time(), self.queue.ahead.outside());
        while let Some(t) = next {
            let queued_first = queued.is_some_and(|q| q <= t);
            let ahead = queued_first && t.0 < outside && !self.replicas[r].run_step_completes();
            if (queued_first && !ahead) || t.0 > deadline {
                self.queue.schedule(t, Event::IterationEnd(r as u32));
                break;
            }
            if ahead {
                self.queue.ahead.events += 1;
            } else {
                self.queue.skip_to(t);
            }
            guard.on_event(t.0).map_err(|m| {
                RunError::Guard(format!("{}: simulation stopped: {m}", self.scenario.origin))
            })?;
            *end = (*end).max(t);
            // A step that only hands over to the next one: its end done
            // without the general path's dispatch, the router told once.
            next = self.hand_over(r, pool, t);
            if next.is_some() {
                unobserved = true;
                continue;
            }
            unobserved = false;
            self.runs.owner = Some(r);
            self.on_iteration_end(r, t);
            self.runs.owner = None;
            // No life cycle here (`runs_inline`): nothing drains, so the
            // main loop's `fleet_after_iteration` has nothing to do.
            debug_assert!(self.life.is_none());
            next = self.runs.step.take();
            (queued, outside) = (self.queue.peek_time(), self.queue.ahead.outside());
        }
        // Nothing outside the replica looked at it between its steps (they
        // ended before every event that could), so the router's view needs
        // only its state after the last one.
        if unobserved {
            self.fleet.observe(r, &self.replicas[r]);
        }
        Ok(())
    }
}
