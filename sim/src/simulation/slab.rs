//! Where a run keeps its requests: a slab whose slots are recycled when a
//! request ends (memory follows the requests in flight), or, by default,
//! every request kept to the end for callers that read them
//! (`RunResult::requests`). Either way the reports fold each request once,
//! as it ends, through a [`crate::records::RecordStream`], and the requests
//! still in flight at the horizon in id order after them: `requests.csv`
//! lists rows in that order, written as they go with recycling.
//!
//! A slot is the `RequestId` the replicas, the router and the fleet index
//! by; the request's own id (its arrival order, `requests.csv`'s `id`) is
//! kept beside it. A slot is only reused once nothing can read it: a request
//! ends (completed, or rejected), and a static batch that keeps finished
//! members until the batch ends has let go of it.

use super::Simulation;
use crate::request::{Request, RequestId, Status};
use crate::time::SimTime;
use std::path::Path;

/// The slab's bookkeeping beside `Simulation::requests`.
#[derive(Debug, Default)]
pub(super) struct Slab {
    /// Recycle slots (a streamed run); otherwise slot = id, all kept.
    pub recycle: bool,
    /// Requests that arrived (the next id).
    pub arrived: u64,
    /// Each slot's request id.
    ids: Vec<u64>,
    /// Slots free for reuse, and which slots are free.
    free: Vec<RequestId>,
    vacant: Vec<bool>,
    /// Per replica: completed requests a static batch still holds.
    held_done: Vec<Vec<RequestId>>,
    /// Without recycling: when each request ended, and its id.
    ended: Vec<(SimTime, u64)>,
    /// Most slots in use at once.
    pub peak_slots: usize,
    /// With recycling and a life cycle per pool: where each request that
    /// arrived since the oldest pool's last scrape is (`recent[k]`: request
    /// `recent_base + k`), so a pool's arrival rate can still count them.
    track_recent: bool,
    recent: std::collections::VecDeque<Recent>,
    recent_base: u64,
}

impl Slab {
    /// The id (`requests.csv`'s) of the request in `slot`.
    pub(super) fn id_of(&self, slot: RequestId) -> u64 {
        self.ids[slot as usize]
    }
}

/// Slots a streamed run reserves address space for at its start
/// (`Simulation::reserve_slots`): 2^21, 436 MB of address space at 208
/// bytes a request, none of it resident until used; a run with more
/// requests in flight at once grows past it.
const SLAB_RESERVE: u64 = 1 << 21;

/// A recent arrival: in its slot still, or ended on `replica`.
#[derive(Clone, Copy, Debug)]
enum Recent {
    Live(RequestId),
    Ended(u32),
}

/// A freed slot's placeholder: ended, so no check counts it in flight.
fn vacant() -> Request {
    let mut r = Request::new(SimTime::ZERO, 0, 0);
    r.status = Status::Completed;
    r
}

impl Slab {
    /// Requests that arrived from id `from` on and are now on a replica in
    /// `range` (a pool's arrivals since its last scrape). `requests`: the
    /// run's slots.
    pub(super) fn routed_since(
        &self,
        requests: &[Request],
        from: u64,
        range: &std::ops::Range<usize>,
    ) -> u64 {
        let on = |r: u32| range.contains(&(r as usize));
        if !self.recycle {
            return requests[from as usize..]
                .iter()
                .filter(|r| on(r.replica))
                .count() as u64;
        }
        debug_assert!(from >= self.recent_base);
        self.recent
            .iter()
            .skip((from - self.recent_base) as usize)
            .filter(|e| match **e {
                Recent::Live(slot) => on(requests[slot as usize].replica),
                Recent::Ended(r) => on(r),
            })
            .count() as u64
    }

    /// No pool will count arrivals before id `oldest` again.
    pub(super) fn forget_arrivals_before(&mut self, oldest: u64) {
        while self.recent_base < oldest && self.recent.pop_front().is_some() {
            self.recent_base += 1;
        }
    }
}

impl<'a> Simulation<'a> {
    /// Streams the run's records: requests leave memory as they end, the
    /// reports fold them as they go, and with `dir` `requests.csv` is
    /// written into its temporary there as they end ([`crate::report::write_all`]
    /// renames it into place). `RunResult::requests` is then empty. The
    /// files and the summary are byte-identical to a run that keeps every
    /// request (`tests/streamed_records.rs`).
    pub fn stream_records(mut self, dir: Option<&Path>) -> std::io::Result<Self> {
        if let Some(dir) = dir {
            let csv = crate::output::RequestsCsv::create(
                dir,
                self.plan.attribution,
                self.fleet.disaggregated(),
                self.plan.regions.clone(),
            )?;
            self.stream.set_csv(csv);
        }
        self.slab.recycle = true;
        self.slab.track_recent = self.life_pooled();
        // A streamed run holds the requests in flight only; a closed loop
        // holds one per user from the start, so those slots are taken at once.
        let users = crate::guard::closed_loop_users(self.scenario) as usize;
        self.requests = Vec::with_capacity(if users > 0 { users + 16 } else { 0 });
        self.reserve_slots();
        Ok(self)
    }

    /// Reserves address space for the slots a streamed run can need, up to
    /// [`SLAB_RESERVE`], before any is used. Growing a `Vec` copies it, and
    /// while it copies both buffers are resident (mimalloc allocates the
    /// larger block and copies; it does not remap): on the 10,000-replica
    /// fleet of docs/performance.md a growing slab doubles at 524,288
    /// slots, and that moment (2 × 130 MB) is the run's peak memory, above
    /// the 723,323 slots it holds at most. Reserved pages become resident only
    /// when a slot is first used, so memory still follows the requests in
    /// flight. Where the system refuses the reservation, the slab grows by
    /// doubling instead.
    fn reserve_slots(&mut self) {
        let want = self.max_requests.min(SLAB_RESERVE) as usize;
        let more = want.saturating_sub(self.requests.len());
        if self.requests.try_reserve_exact(more).is_ok() {
            let _ = self.slab.ids.try_reserve_exact(more);
            let _ = self.slab.vacant.try_reserve_exact(more);
        }
    }

    /// The slot the next admitted request will take.
    pub(super) fn next_slot(&self) -> RequestId {
        match self.slab.free.last() {
            Some(&s) => s,
            None => self.requests.len() as RequestId,
        }
    }

    /// Stores the request just admitted in the slot [`Self::next_slot`] gave.
    pub(super) fn put(&mut self, slot: RequestId, req: Request) {
        let id = self.slab.arrived;
        self.slab.arrived += 1;
        if self.slab.track_recent {
            self.slab.recent.push_back(Recent::Live(slot));
        }
        if self.slab.free.last() == Some(&slot) {
            self.slab.free.pop();
            self.requests[slot as usize] = req;
            self.slab.ids[slot as usize] = id;
            self.slab.vacant[slot as usize] = false;
        } else {
            debug_assert_eq!(slot as usize, self.requests.len());
            self.requests.push(req);
            self.slab.ids.push(id);
            self.slab.vacant.push(false);
            self.slab.peak_slots = self.slab.peak_slots.max(self.requests.len());
        }
    }

    /// Request `slot` ended at `now` and nothing reads it any more: its
    /// record goes to the reports (now with recycling, which frees the
    /// slot; at the end, in the same order, otherwise).
    pub(super) fn release(&mut self, slot: RequestId, now: SimTime) {
        let i = slot as usize;
        if !self.slab.recycle {
            self.slab.ended.push((now, slot as u64));
            return;
        }
        self.slab.vacant[i] = true;
        self.slab.free.push(slot);
        let id = self.slab.ids[i];
        if self.slab.track_recent && id >= self.slab.recent_base {
            let replica = self.requests[i].replica;
            self.slab.recent[(id - self.slab.recent_base) as usize] = Recent::Ended(replica);
        }
        self.life_forget(slot);
        let r = std::mem::replace(&mut self.requests[i], vacant());
        self.stream.ended(now, id, r);
    }

    /// Releases requests replica `r` completed, unless its static batch
    /// still holds them (then once the batch has ended).
    pub(super) fn release_completed(&mut self, r: usize, done: &[RequestId], now: SimTime) {
        if self.slab.held_done.len() <= r {
            self.slab
                .held_done
                .resize(self.replicas.len().max(r + 1), Vec::new());
        }
        if self.replicas[r].holds_finished() {
            self.slab.held_done[r].extend_from_slice(done);
            return;
        }
        let held = std::mem::take(&mut self.slab.held_done[r]);
        for &id in held.iter().chain(done) {
            self.release(id, now);
        }
        self.slab.held_done[r] = held;
        self.slab.held_done[r].clear();
    }

    /// The live slots and their request ids (every slot when none recycle).
    pub(super) fn live(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        (0..self.requests.len())
            .filter(|&i| !self.slab.vacant[i])
            .map(|i| (i, self.slab.ids[i]))
    }

    /// Folds every request not yet folded into the reports: without
    /// recycling, those that ended in the order they ended (simultaneous
    /// ones by id), as a streamed run did; then, in id order, those still in
    /// flight at the horizon or held by a static batch. Gives the ids of a
    /// run without recycling in the order folded (empty with recycling).
    pub(super) fn flush_records(&mut self) -> Vec<u64> {
        if !self.slab.recycle {
            let mut folded = vec![false; self.requests.len()];
            let mut ended = std::mem::take(&mut self.slab.ended);
            ended.sort_unstable();
            for &(_, id) in &ended {
                folded[id as usize] = true;
                self.stream.fold(id, &self.requests[id as usize]);
            }
            let mut order: Vec<u64> = ended.into_iter().map(|e| e.1).collect();
            for (i, r) in self.requests.iter().enumerate() {
                if !folded[i] {
                    order.push(i as u64);
                    self.stream.fold(i as u64, r);
                }
            }
            return order;
        }
        self.stream.fold_instant();
        let mut live: Vec<(u64, usize)> = self.live().map(|(i, id)| (id, i)).collect();
        live.sort_unstable();
        for (id, i) in live {
            self.stream.fold(id, &self.requests[i]);
            self.requests[i] = vacant();
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::vacant;
    use crate::request::Status;

    #[test]
    fn a_vacant_slot_is_not_in_flight() {
        assert_ne!(vacant().status, Status::InFlight);
    }
}
