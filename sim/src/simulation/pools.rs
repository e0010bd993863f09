//! The disaggregated data path between pools: KV transfers scheduled on
//! the links, decode replicas started as the caches arrive.

use super::{Event, Simulation};
use crate::time::SimTime;

impl Simulation<'_> {
    /// KV transfer `slot` reached its decode replica.
    pub(super) fn on_transfer_done(&mut self, slot: u32, now: SimTime) {
        self.fleet_step(None, Some(slot), now);
    }

    /// The disaggregated data path after replica `r`'s iteration or the
    /// arrival of transfer `slot`: transfers to schedule, replicas to start.
    pub(super) fn fleet_step(&mut self, r: Option<usize>, slot: Option<u32>, now: SimTime) {
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
}
