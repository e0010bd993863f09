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

use super::{Event, RunError, Simulation};
use crate::guard::RunGuard;
use crate::time::SimTime;

impl Simulation<'_> {
    /// Whether runs may skip the event queue in this fleet.
    pub(super) fn runs_inline(&self) -> bool {
        self.scenario.file.engine.decode_runs && self.life.is_none() && !self.fleet.disaggregated()
    }

    /// Called by `start_iteration` for replica `r`'s iteration ending at
    /// `end`: keeps it aside, instead of scheduling it, when it is a run's
    /// step formed while `r`'s own iteration end is being handled.
    pub(super) fn defer_run_step(&mut self, r: usize, end: SimTime) -> bool {
        if self.run_owner != Some(r) || !self.replicas[r].in_decode_run() {
            return false;
        }
        self.run_owner = None;
        self.run_step = Some(end);
        true
    }

    /// After replica `r`'s iteration ended at `now`: while its run's next
    /// step ends before anything queued (and within the horizon), that step
    /// ends here; otherwise it goes into the queue.
    pub(super) fn continue_run(
        &mut self,
        r: usize,
        deadline: Option<SimTime>,
        guard: &mut RunGuard,
        end: &mut SimTime,
    ) -> Result<(), RunError> {
        while let Some(t) = self.run_step.take() {
            let queued_first = self.queue.peek_time().is_some_and(|q| q <= t);
            if queued_first || deadline.is_some_and(|d| t > d) {
                self.queue.schedule(t, Event::IterationEnd(r as u32));
                break;
            }
            self.queue.skip_to(t);
            guard.on_event(t.0).map_err(|m| {
                RunError::Guard(format!("{}: simulation stopped: {m}", self.scenario.origin))
            })?;
            *end = t;
            self.run_owner = Some(r);
            self.on_iteration_end(r, t);
            self.run_owner = None;
            self.fleet_after_iteration(r, t);
        }
        Ok(())
    }
}
