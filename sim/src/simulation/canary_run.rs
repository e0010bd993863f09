//! The simulation's side of a canary rollout (`canary`): the split of each
//! arriving request between the baseline and the canary pool before the
//! pool's router, the rollout's events (start, gates), and the requests'
//! ends that feed the gate's windows. Only runs with `[canary]` have a
//! `Canary`; without it none of this runs.

use super::{Event, Simulation};
use crate::replica::Replica;
use crate::request::{RejectReason, RequestId, Status};
use crate::time::SimTime;
use crate::workload::RequestSpec;

impl Simulation<'_> {
    /// At construction: the rollout's start is scheduled.
    pub(super) fn canary_init(&mut self) {
        if let Some(c) = &self.canary {
            let t = c.start();
            if self.deadline.is_none_or(|d| t <= d) {
                self.queue.schedule(t, Event::Canary);
            }
        }
    }

    /// The pool request `id` (its arrival order, not its slot: slots are
    /// reused in a streamed run) goes to, when the run has a rollout: the
    /// session's side of the split (the request's own without sessions).
    pub(super) fn canary_split(&mut self, id: u64, spec: &RequestSpec) -> Option<usize> {
        let c = self.canary.as_mut()?;
        let key = if spec.session != 0 { spec.session } else { id };
        let v = c.split(key);
        Some(c.pool(v))
    }

    /// Why a request can never be served: by the pool the split chose when
    /// there is one (a canary with less KV memory turns away what the
    /// baseline serves), otherwise by every pool.
    pub(super) fn rejection_in(
        &self,
        pool: Option<usize>,
        spec: &RequestSpec,
    ) -> Option<RejectReason> {
        match pool {
            Some(p) => self.pool_rejection(p, spec),
            None => self.rejection(spec),
        }
    }

    /// A request of `pool` was rejected at admission.
    pub(super) fn canary_rejected(&mut self, pool: Option<usize>) {
        if let (Some(c), Some(p)) = (self.canary.as_mut(), pool) {
            if let Some(v) = c.version_of_pool(p) {
                c.rejected(v);
            }
        }
    }

    /// Request `id` completed: its latencies join its version's window.
    pub(super) fn canary_completed(&mut self, id: RequestId) {
        let Some(c) = self.canary.as_mut() else {
            return;
        };
        let r = &self.requests[id as usize];
        debug_assert_eq!(r.status, Status::Completed);
        let Some(v) = c.version_of_pool(self.fleet.pool_of(r.replica as usize)) else {
            return;
        };
        let (Some(ttft), Some(e2e)) = (r.ttft(), r.e2e()) else {
            return;
        };
        c.completed(v, ttft, r.tpot(), e2e);
    }

    /// The rollout's start or a gate; the next gate is scheduled while
    /// requests are still to arrive or be served, within the horizon.
    pub(super) fn on_canary(&mut self, now: SimTime) {
        let Some(next) = self.canary.as_mut().and_then(|c| c.on_event(now)) else {
            return;
        };
        let work_ahead = self.pending.is_some()
            || self.deferred.iter().any(Option::is_some)
            || self.replicas.iter().any(Replica::is_busy);
        if work_ahead && self.deadline.is_none_or(|d| next <= d) {
            self.queue.schedule(next, Event::Canary);
        }
    }
}
