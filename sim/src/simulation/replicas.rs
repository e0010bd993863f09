//! The replicas' events: each iteration starts with the batch its policy
//! forms, priced by its pool's cost model, and ends with its completions,
//! its tokens' gaps and the next iteration, whose end the replica hands
//! back to be scheduled.
//!
//! **Iteration ends handled at once.** A replica tells whether its
//! iteration in progress is a steady step (`Replica::iteration_is_steady`:
//! a decode-only step whose end follows from the replica alone), whether
//! its end touches nothing outside the replica
//! (`Replica::iteration_ends_privately`: it completes and admits nothing),
//! and can end such a step and begin the next in one call
//! (`Replica::step_through`); how it takes those steps is its own
//! business (`replica::decode_run`). Here, a steady step whose end falls
//! strictly before every queued event would be the next event popped, so it
//! is handled at once, without a trip through the event queue; a replica
//! that meets nothing else advances as one event. A step that ties with or
//! follows a queued event is scheduled as usual, so events at the same
//! nanosecond keep their insertion order and the run is the same as one
//! that schedules every iteration end.
//!
//! Only fleets without a life cycle and without disaggregation handle ends
//! this way (`ends_inline`): there, handling an iteration's end schedules
//! nothing after the next iteration's start, so deferring that one schedule
//! to the end of the event changes no order.
//!
//! **Ahead of other replicas.** In a fleet of many replicas the next queued
//! event is nearly always another replica's iteration end, so the rule
//! above rarely applies. Replicas share nothing between arrivals, though:
//! another replica's iteration end touches only that replica, its router
//! view (a per-replica entry) and the inter-token histogram (a multiset),
//! and a step that completes nothing leaves no record. So where nothing but
//! the workload's next arrival, the time-series tick and the load report
//! can reach a replica from outside (`Agenda::watch_outside`: an open-loop
//! source, no tenants, regions or canary, on top of the above), a steady
//! step whose end is private is handled at once when it ends strictly
//! before every queued event of those three kinds, whatever other replicas
//! have queued before it. At each of those events every replica is then
//! exactly where the one-event-per-iteration order leaves it (each
//! mid-step, its next end queued), so every output is the same; the
//! summary's event count includes the steps taken ahead. A step that ties
//! with such an event keeps its place in the queue.

use super::{Event, RunError, Simulation};
use crate::time::SimTime;

impl Simulation<'_> {
    /// Starts replica `r`'s next iteration at `now`, if it has work to
    /// batch, and schedules its end.
    pub(super) fn start_iteration(&mut self, r: usize, now: SimTime) {
        if let Some(end) = self.begin_iteration(r, now) {
            self.queue.schedule(end, Event::IterationEnd(r as u32));
        }
    }

    /// Forms replica `r`'s next batch at `now` and prices it with its pool's
    /// cost model: when the iteration ends, if one started.
    fn begin_iteration(&mut self, r: usize, now: SimTime) -> Option<SimTime> {
        let shape = self.replicas[r].form_batch(now, &mut self.requests)?;
        let cost = &self.costs[self.fleet.pool_of(r)];
        let dt = cost
            .iteration_time_with(&shape, &mut self.step_terms[r])
            .max(1);
        crate::replica::attribution::price_decode_alone(
            &mut self.replicas[r],
            &shape,
            cost.as_ref(),
        );
        Some(now.plus(dt))
    }

    /// Replica `r`'s iteration ended at `now` (its `IterationEnd` event),
    /// and the steady steps after it that come first (see the module's
    /// documentation).
    pub(super) fn on_iteration_end(&mut self, r: usize, now: SimTime) -> Result<(), RunError> {
        if self.fleet_stale_end(r, now) {
            return Ok(());
        }
        if !self.ends_inline {
            self.end_iteration(r, now, false);
            self.fleet_after_iteration(r, now);
            return Ok(());
        }
        // A steady step that only hands over to the next: the router's view
        // is told after the last of them.
        let pool = self.fleet.pool_of(r);
        match self.step_through(r, pool, now) {
            Some(next) => self.continue_steps(r, pool, next, true),
            None => match self.end_iteration(r, now, true) {
                Some(next) => self.continue_steps(r, pool, next, false),
                // No life cycle here (`ends_inline`): nothing drains.
                None => Ok(()),
            },
        }
    }

    /// The general end of replica `r`'s iteration at `now`: its tokens and
    /// completions, the requests' ends, and its next iteration, whose end is
    /// returned instead of scheduled when it is a steady step and `hold`.
    fn end_iteration(&mut self, r: usize, now: SimTime, hold: bool) -> Option<SimTime> {
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
        let mut held = None;
        if self.replicas[r].has_work() && !self.replicas[r].is_busy() {
            if let Some(end) = self.begin_iteration(r, now) {
                if hold && self.replicas[r].iteration_is_steady() {
                    held = Some(end);
                } else {
                    self.queue.schedule(end, Event::IterationEnd(r as u32));
                }
            }
        }
        self.fleet.observe(r, &self.replicas[r]);
        held
    }

    /// Replica `r` of `pool` ends its steady step at `now` and begins the
    /// next, when that is all the iteration's end would do
    /// (`Replica::step_through`): returns the next step's end. The caller
    /// tells the router's view.
    #[inline(always)]
    fn step_through(&mut self, r: usize, pool: usize, now: SimTime) -> Option<SimTime> {
        let (gap, seqs, context) = self.replicas[r].step_through(now)?;
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

    /// Replica `r` of `pool` has a steady step ending at `next`, held back
    /// from the queue: while its steps end before anything queued that they
    /// must follow (and within the horizon), each ends here; the first that
    /// does not goes into the queue. `unobserved`: the last end was
    /// `step_through`'s, which leaves the router's view to be told here.
    ///
    /// Between two steps that only hand over nothing is scheduled or
    /// popped, so the queue's next event and the times of the events that
    /// could reach the replica are read again only after a step that took
    /// the general path.
    fn continue_steps(
        &mut self,
        r: usize,
        pool: usize,
        next: SimTime,
        mut unobserved: bool,
    ) -> Result<(), RunError> {
        let horizon = self.queue.horizon();
        let mut next = Some(next);
        let (mut queued, mut outside) = (self.queue.peek_time(), self.queue.outside_due());
        while let Some(t) = next {
            let queued_first = queued.is_some_and(|q| q <= t);
            let ahead =
                queued_first && t.0 < outside && self.replicas[r].iteration_ends_privately();
            if (queued_first && !ahead) || t > horizon {
                self.queue.schedule(t, Event::IterationEnd(r as u32));
                break;
            }
            if let Err(m) = self.queue.handle_now(t, ahead) {
                return Err(self.stopped(m));
            }
            next = self.step_through(r, pool, t);
            if next.is_some() {
                unobserved = true;
                continue;
            }
            unobserved = false;
            next = self.end_iteration(r, t, true);
            (queued, outside) = (self.queue.peek_time(), self.queue.outside_due());
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
