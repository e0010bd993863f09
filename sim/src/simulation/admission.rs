//! A request's way in: the next arrival from the source, the checks that
//! reject it at once (it can never be served, or its tenant turns it
//! away), its block hashes in the engine's block size, routing, and its
//! place in the chosen replica's waiting queue.

use super::{unservable, Event, Simulation};
use crate::kv::prefix_cache::engine_block_hashes;
use crate::request::{RejectReason, Request, RequestId, Status};
use crate::tenancy::Tenancy;
use crate::time::SimTime;
use crate::workload::RequestSpec;

impl Simulation<'_> {
    /// Why a request can never be served, if so: it must fit every pool it
    /// may meet (pools are few, and each pool's replicas are identical, so
    /// this is decided once, at arrival).
    pub(super) fn rejection(&self, spec: &RequestSpec) -> Option<RejectReason> {
        (0..self.scenario.pools.len()).find_map(|p| self.pool_rejection(p, spec))
    }

    /// Why pool `p`'s replicas can never serve a request, if so.
    pub(super) fn pool_rejection(&self, p: usize, spec: &RequestSpec) -> Option<RejectReason> {
        let p = &self.scenario.pools[p];
        let splits = self.replicas[p.first as usize].splits_prefills();
        let (prompt, output, n) = (spec.prompt_tokens, spec.output_tokens, spec.samples);
        unservable(p.limits(), p.memory(), prompt, output, splits).or_else(|| {
            crate::replica::fork::exceeds_kv(&p.replica, prompt, output, n)
                .then_some(RejectReason::ExceedsKvCapacity)
        })
    }

    pub(super) fn on_arrival(&mut self, now: SimTime) {
        let Some(spec) = self.pending.take() else {
            return;
        };
        // Follow-ups may have used up the horizon since this was scheduled.
        if self.slab.arrived >= self.max_requests {
            return;
        }
        self.admit(spec, now);
        if self.slab.arrived < self.max_requests {
            if let Some(next) = self.source.next_request() {
                if self.deadline.is_none_or(|d| next.arrival <= d) {
                    self.queue.schedule(next.arrival.max(now), Event::Arrival);
                    self.pending = Some(next);
                }
            }
        }
    }

    pub(super) fn on_follow_up(&mut self, slot: u32, now: SimTime) {
        let spec = self.deferred[slot as usize]
            .take()
            .expect("deferred request");
        self.deferred_free.push(slot);
        if self.slab.arrived < self.max_requests {
            self.admit(spec, now);
        }
    }

    /// A rejected request retries after its back-off (its slot in the
    /// tenancy).
    pub(super) fn on_retry(&mut self, slot: u32, now: SimTime) {
        let spec = self.tenancy.take_retry(slot);
        self.admit(spec, now);
    }

    /// A request enters the system: rejected at once if it can never be
    /// served, otherwise routed and queued.
    pub(super) fn admit(&mut self, spec: RequestSpec, now: SimTime) {
        let id = self.next_slot();
        let pool = self.canary_split(self.slab.arrived, &spec);
        let reason = self
            .rejection_in(pool, &spec)
            .or_else(|| self.tenancy.admit(&spec, now, &self.replicas).err());
        let retry = reason.and_then(|r| self.tenancy.retry(&spec, r, now, self.deadline));
        let mut req = Request::from_spec(spec);
        if self.plan.prefix_caching {
            // The cache works in engine blocks; the workload's hashes may use
            // another block size (Mooncake: 512 tokens). A rejected
            // request's are never looked
            // up (emptied below), so they are not derived.
            let bs = self.plan.block_size;
            if reason.is_some() {
                req.clear_prefix_hashes();
            } else {
                let covered = req.prompt_tokens + req.output_tokens;
                let from = req.hash_block_tokens;
                if let Some(hashes) = req.prefix_hashes_mut() {
                    in_engine_blocks(hashes, from, bs, covered);
                }
            }
            req.hash_block_tokens = bs;
        }
        match reason {
            Some(reason) => {
                // A rejected request's block hashes are never looked up.
                req.clear_prefix_hashes();
                req.status = Status::Rejected(reason);
                req.finished = crate::time::Stamp::at(now);
                self.put(id, req);
                self.canary_rejected(pool);
                match retry {
                    Some((at, slot)) => {
                        self.queue.schedule(at, Event::Retry(slot));
                        self.release(id, now);
                    }
                    None => self.request_ended(id, now, false, false),
                }
            }
            None if self.front_end_on() => self.enter_front_end(id, req, pool, now),
            None => {
                self.put(id, req);
                self.send_on(id, pool, now);
            }
        }
    }

    /// Sends admitted request `id` (in its slot; `pool`: the canary's pick)
    /// on its way to a replica: to another region, to the life cycle's
    /// holder while no replica is ready, or routed and queued.
    pub(super) fn send_on(&mut self, id: RequestId, pool: Option<usize>, now: SimTime) {
        let region = self.requests[id as usize].region;
        if let Some(at) = self.region_overflow(region, id, now) {
            self.queue.schedule(at, Event::Overflow);
            return;
        }
        if self.life.as_ref().is_some_and(|x| !x.any_ready()) {
            self.place(id, now);
            return;
        }
        let req = &mut self.requests[id as usize];
        let r = match pool {
            Some(p) => self.fleet.route_in(p, req),
            None => self.fleet.route(req, &mut self.replicas),
        };
        self.trace_route(id, r, now);
        self.queue_on(r, id, now);
    }

    /// With `[metrics] routing_trace`: records the decision that routed
    /// request `id` to replica `r`, before it joins that replica's queue.
    pub(super) fn trace_route(&mut self, id: RequestId, r: usize, now: SimTime) {
        let Some(trace) = &mut self.routing_trace else {
            return;
        };
        let (s, costs, fleet) = (self.scenario, &self.costs, &self.fleet);
        fleet.trace_decision(
            trace,
            now,
            self.slab.id_of(id),
            &self.requests[id as usize],
            r,
            &self.replicas,
            |c| costs[fleet.pool_of(c)].as_ref(),
            |c| s.pools[fleet.pool_of(c)].replica.limits.max_batched_tokens,
        );
    }

    /// Queues request `id` (already routed to replica `r`) there, starts the
    /// replica if it is idle and tells the router's view: every way into a
    /// replica (arrival, a life-cycle placement, an overflow from another
    /// region) ends here.
    pub(super) fn queue_on(&mut self, r: usize, id: RequestId, now: SimTime) {
        let req = &mut self.requests[id as usize];
        req.replica = r as u32;
        let waiting = Tenancy::waiting(id, req);
        self.replicas[r].enqueue_waiting(waiting);
        if !self.replicas[r].is_busy() {
            self.start_iteration(r, now);
        }
        self.fleet.observe(r, &self.replicas[r]);
    }
}

/// Turns `hashes` of `hash_block`-token blocks into hashes of the engine's
/// `bs`-token blocks covering the first `covered` tokens
/// (`engine_block_hashes`); hashes already of that size are cut to that
/// length in place, as the derivation would.
fn in_engine_blocks(hashes: &mut Vec<u64>, hash_block: u32, bs: u32, covered: u32) {
    if hash_block == bs {
        let full = (hashes.len() as u64 * bs as u64).min(covered as u64) / bs as u64;
        hashes.truncate(full as usize);
    } else {
        *hashes = engine_block_hashes(hashes, hash_block, bs, covered);
    }
}
