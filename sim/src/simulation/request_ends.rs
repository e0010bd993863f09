//! A request's way out: its tenant and its source are told, a closed
//! loop's follow-up is scheduled, and its slot is freed.

use super::{Event, Simulation};
use crate::request::RequestId;
use crate::time::SimTime;

impl Simulation<'_> {
    /// Tells the tenancy and the source a request ended (`admitted`: it had
    /// passed admission, so its tenant counted it in flight); schedules its
    /// follow-up, if any. An unserved request's slot is free at once; a
    /// completed one's once its replica lets go (`on_iteration_end`).
    pub(super) fn request_ended(
        &mut self,
        id: RequestId,
        now: SimTime,
        completed: bool,
        admitted: bool,
    ) {
        self.notify_end(id, now, completed, admitted);
        if !completed {
            self.release(id, now);
        }
    }

    pub(super) fn notify_end(
        &mut self,
        id: RequestId,
        now: SimTime,
        completed: bool,
        admitted: bool,
    ) {
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
}
