//! The replica's side of latency attribution (see [`crate::attribution`]):
//! a queue clock that charges admission waits to what blocked the queue, and
//! the per-iteration charging of running sequences.
//!
//! Queue waits are charged in O(1) per request, whatever the queue length:
//! the replica keeps, per queue cause, the cumulative time that cause has
//! blocked its queue (one cause at a time, decided when each iteration is
//! formed: KV blocks, token budget, sequence slots, the policy, or nothing
//! but the iteration in progress). A request subtracts the clock when it
//! joins the queue and adds it back when admitted, so it receives exactly the
//! blocked time that elapsed while it waited, split by cause. Everyone in an
//! FCFS queue waits for the same reason as its head.

use super::{RunningSeq, SchedState};
use crate::attribution::Component;
use crate::cost::BatchShape;
use crate::request::{Request, RequestId};
use crate::time::SimTime;

/// Queue components the clock keeps (the first eight, `QueueKv` ..= `ColdStart`).
const QUEUE: usize = Component::ColdStart as usize + 1;

/// Per-replica attribution state: the queue clock and the shape of the
/// iteration in progress.
#[derive(Debug)]
pub struct QueueClock {
    /// What blocks the queue now (decided when the last iteration was formed).
    cause: Component,
    /// Instant the clock was last advanced to.
    since: SimTime,
    /// Cumulative blocked time per queue cause, ns.
    cum: [u64; QUEUE],
    /// Requests enqueued since the last iteration was formed, not yet
    /// subtracted from the clock.
    fresh: Vec<RequestId>,
    /// Set by an admission attempt that failed this iteration (or by a
    /// fairness policy holding the queue back: `QueueFairness`).
    pub blocked: Option<Component>,
    prefill_tokens: u64,
    tokens: u64,
}

impl Default for QueueClock {
    fn default() -> Self {
        QueueClock {
            cause: Component::QueueIteration,
            since: SimTime::ZERO,
            cum: [0; QUEUE],
            fresh: Vec::new(),
            blocked: None,
            prefill_tokens: 0,
            tokens: 0,
        }
    }
}

impl QueueClock {
    /// A request joined the waiting queue for its first admission.
    #[inline]
    pub fn enqueued(&mut self, id: RequestId) {
        self.fresh.push(id);
    }

    /// Called when an iteration is being formed at `now`, before the policy
    /// runs: requests that arrived since the last formation take their
    /// snapshot at their arrival, then the clock advances to `now`.
    pub fn begin(&mut self, now: SimTime, reqs: &mut [Request]) {
        for id in self.fresh.drain(..) {
            let a = &mut reqs[id as usize].attribution;
            // In the simulator a request is enqueued when it arrives, after
            // the clock's last advance; a caller that enqueues late gets the
            // gap charged as waiting for the iteration boundary.
            let t = SimTime(a.mark.0.clamp(self.since.0, now.0.max(self.since.0)));
            a.add(Component::QueueIteration, t.0.saturating_sub(a.mark.0));
            for k in 0..QUEUE {
                a.ns[k] = a.ns[k].wrapping_sub(self.cum[k]);
            }
            let c = self.cause as usize;
            a.ns[c] = a.ns[c].wrapping_sub(t.0 - self.since.0);
            a.mark = t;
        }
        let dt = now.0.saturating_sub(self.since.0);
        self.cum[self.cause as usize] += dt;
        self.since = SimTime(self.since.0.max(now.0));
        self.blocked = None;
    }

    /// A waiting request is being admitted at `now` (the instant of the last
    /// [`Self::begin`]). On its first admission it collects the blocked time
    /// since it joined; a preempted request's wait is charged as preemption
    /// when its next iteration runs (see [`IterationMix::charge`]).
    #[inline]
    pub fn admitted(&self, r: &mut Request, now: SimTime) {
        if r.first_scheduled.is_none() {
            let a = &mut r.attribution;
            for k in 0..QUEUE {
                a.ns[k] = a.ns[k].wrapping_add(self.cum[k]);
            }
            a.mark = now;
        }
    }

    /// Records what the policy decided: the cause now blocking the queue and
    /// the iteration's token mix.
    pub fn decided(&mut self, cause: Component, shape: &BatchShape) {
        self.cause = cause;
        self.prefill_tokens = shape.prefill_tokens;
        self.tokens = shape.tokens();
    }

    /// The split of the iteration that ran from `start` to `now`.
    pub fn mix(&self, start: SimTime, now: SimTime) -> IterationMix {
        let d = now.0.saturating_sub(start.0);
        let tokens = self.tokens.max(1);
        let stall = (d as u128 * self.prefill_tokens.min(tokens) as u128 / tokens as u128) as u64;
        IterationMix {
            start,
            now,
            d,
            stall,
            tokens,
        }
    }
}

/// What blocked the waiting queue after the policy formed an iteration.
/// `closed_batch`: the policy admits only into an empty batch (static).
pub fn blocker(st: &SchedState, shape: &BatchShape, closed_batch: bool) -> Component {
    if st.waiting.is_empty() {
        Component::QueueIteration
    } else if let Some(c) = st.attr.blocked {
        c
    } else if !st.swapped.is_empty() {
        // Swapped-out sequences resume before any admission (vLLM v0).
        Component::QueueKv
    } else if closed_batch && shape.prefill_seqs == 0 {
        Component::QueuePolicy
    } else {
        // Every policy stops admitting without trying the head only when the
        // iteration's token budget is spent.
        Component::QueueTokenBudget
    }
}

/// One finished iteration, ready to charge its members.
#[derive(Clone, Copy, Debug)]
pub struct IterationMix {
    start: SimTime,
    now: SimTime,
    d: u64,
    /// Share of the iteration spent on prefill tokens.
    stall: u64,
    tokens: u64,
}

impl IterationMix {
    /// Charges running sequence `s` (its state as the iteration ran) for
    /// everything up to the iteration's end.
    #[inline]
    pub fn charge(&self, s: &RunningSeq, r: &mut Request) {
        if s.done {
            return; // a static batch's padding: its request has ended
        }
        let prefilling = s.prefilling();
        let before_first = r.first_token.is_none();
        // Preempted earlier and still prefilling: recomputing lost context.
        let recompute = r.preemptions > 0 && prefilling;
        let preempted = if before_first {
            Component::PrefillPreempted
        } else {
            Component::DecodePreempted
        };
        let waiting = if r.preemptions > 0 && (prefilling || r.attribution.mark < self.start) {
            preempted
        } else if prefilling {
            Component::PrefillInterference
        } else {
            Component::DecodeStall
        };
        let a = &mut r.attribution;
        // Time before the iteration not yet charged: a recompute readmission
        // or a swap-in (waiting since the preemption).
        a.add(waiting, self.start.0.saturating_sub(a.mark.0));
        if s.chunk > 0 {
            if recompute {
                a.add(preempted, self.d);
            } else {
                let own = (self.d as u128 * s.chunk as u128 / self.tokens as u128) as u64;
                let own = own.min(self.d);
                a.add(Component::PrefillCompute, own);
                a.add(Component::PrefillInterference, self.d - own);
            }
        } else if s.decode {
            a.add(Component::DecodeCompute, self.d - self.stall);
            a.add(Component::DecodeStall, self.stall);
        } else {
            a.add(waiting, self.d);
        }
        a.mark = SimTime(a.mark.0.max(self.now.0));
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use crate::attribution::Component as C;
    use crate::replica::TokenGaps;
    use crate::request::{Request, Status};
    use crate::scenario::{BatchPolicyKind, PreemptionMode};
    use crate::time::SimTime;

    /// Completed requests' components sum to TTFT and E2E exactly.
    fn assert_conserved(reqs: &[Request]) {
        for (i, r) in reqs.iter().enumerate() {
            assert_eq!(r.status, Status::Completed, "request {i}");
            assert_eq!(r.attribution.ttft_sum(), r.ttft().unwrap(), "TTFT of {i}");
            assert_eq!(r.attribution.total(), r.e2e().unwrap(), "E2E of {i}");
        }
    }

    /// Runs with 1 µs per batched token + 10 µs per iteration, enqueueing
    /// each request at its arrival.
    fn run(rep: &mut crate::replica::Replica, reqs: &mut [Request]) {
        let mut t = SimTime(0);
        let mut next = 0;
        loop {
            while next < reqs.len() && reqs[next].arrival <= t {
                rep.enqueue(next as u32);
                next += 1;
            }
            match rep.form_batch(t, reqs) {
                Some(shape) => {
                    t = t.plus(10_000 + 1000 * shape.tokens());
                    rep.finish_iteration(t, reqs, &mut vec![], &mut TokenGaps::default());
                }
                None if next < reqs.len() => t = reqs[next].arrival,
                None => break,
            }
        }
    }

    #[test]
    fn a_lone_request_is_all_own_prefill_then_decode_compute() {
        let mut reqs = vec![Request::new(SimTime(0), 100, 3)];
        let mut rep = replica(&engine(8, 512, 16), 100);
        run(&mut rep, &mut reqs);
        assert_conserved(&reqs);
        let a = &reqs[0].attribution;
        assert_eq!(a.get(C::PrefillCompute), 110_000);
        assert_eq!(a.get(C::DecodeCompute), 2 * 11_000);
        assert_eq!(
            a.total(),
            a.get(C::PrefillCompute) + a.get(C::DecodeCompute)
        );
    }

    #[test]
    fn queue_waits_are_charged_to_what_blocked_the_head() {
        // Two slots: the third request waits for a sequence slot; a fourth
        // arriving mid-iteration behind it waits for the same reason.
        let mut reqs: Vec<Request> = (0..3).map(|_| Request::new(SimTime(0), 10, 5)).collect();
        reqs.push(Request::new(SimTime(15_000), 10, 5));
        let mut rep = replica(&engine(2, 512, 16), 100);
        run(&mut rep, &mut reqs);
        assert_conserved(&reqs);
        assert_eq!(reqs[0].attribution.get(C::QueueMaxSeqs), 0);
        assert!(reqs[2].attribution.get(C::QueueMaxSeqs) > 0);
        assert_eq!(
            reqs[2].attribution.get(C::QueueMaxSeqs),
            reqs[2].queue_wait().unwrap()
        );
        // Request 3 arrived at 15 µs, inside the iteration [0, 30 µs) whose
        // queue was already blocked by slots.
        assert!(reqs[3].attribution.get(C::QueueMaxSeqs) > 0);
    }

    #[test]
    fn kv_exhaustion_and_token_budget_are_told_apart() {
        // 8 blocks of 4 tokens: two 12-token prompts (4 blocks each with
        // growth) crowd out a third → KV. A budget of 16 tokens lets one
        // 12-token prompt per iteration in → token budget.
        let mut reqs: Vec<Request> = (0..3).map(|_| Request::new(SimTime(0), 12, 4)).collect();
        let mut rep = replica(&engine(8, 100, 4), 7);
        run(&mut rep, &mut reqs);
        assert_conserved(&reqs);
        assert!(
            reqs[2].attribution.get(C::QueueKv) > 0,
            "{:?}",
            reqs[2].attribution
        );

        let mut e = engine(8, 16, 4);
        e.policy = BatchPolicyKind::Continuous;
        let mut reqs: Vec<Request> = (0..3).map(|_| Request::new(SimTime(0), 12, 4)).collect();
        let mut rep = replica(&e, 1000);
        run(&mut rep, &mut reqs);
        assert_conserved(&reqs);
        assert!(reqs[1].attribution.get(C::QueueTokenBudget) > 0);
        assert_eq!(reqs[1].attribution.get(C::QueueKv), 0);
    }

    #[test]
    fn prefills_stall_the_decodes_batched_with_them() {
        // A decoding request, then a long prompt arrives: under continuous
        // batching the decode shares iterations with the prefill (stall);
        // the prefill shares its iteration with the decode (interference).
        let mut e = engine(8, 4096, 16);
        e.policy = BatchPolicyKind::Continuous;
        let mut reqs = vec![
            Request::new(SimTime(0), 10, 20),
            Request::new(SimTime(50_000), 1000, 2),
        ];
        let mut rep = replica(&e, 1000);
        run(&mut rep, &mut reqs);
        assert_conserved(&reqs);
        assert!(reqs[0].attribution.get(C::DecodeStall) > 900_000);
        assert!(reqs[1].attribution.get(C::PrefillInterference) > 0);
        assert!(reqs[1].attribution.get(C::PrefillCompute) > 900_000);
    }

    #[test]
    fn preemption_time_is_charged_in_both_modes() {
        for mode in [PreemptionMode::Recompute, PreemptionMode::Swap] {
            let mut e = engine(8, 100, 4);
            e.preemption = mode;
            let mut reqs: Vec<Request> = (0..2).map(|_| Request::new(SimTime(0), 4, 6)).collect();
            let mut rep = replica(&e, 4);
            run(&mut rep, &mut reqs);
            assert_conserved(&reqs);
            assert!(reqs[1].preemptions > 0);
            let a = &reqs[1].attribution;
            assert!(
                a.get(C::DecodePreempted) + a.get(C::PrefillPreempted) > 0,
                "{mode:?}: {a:?}"
            );
            assert_eq!(reqs[0].attribution.get(C::DecodePreempted), 0);
        }
    }

    #[test]
    fn every_policy_conserves_time() {
        for policy in [
            BatchPolicyKind::Continuous,
            BatchPolicyKind::Vllm,
            BatchPolicyKind::Sarathi,
            BatchPolicyKind::Orca,
            BatchPolicyKind::Static,
        ] {
            let mut e = engine(4, 64, 4);
            e.policy = policy;
            let mut reqs: Vec<Request> = (0..12)
                .map(|i| Request::new(SimTime(7_000 * i as u64), 5 + 5 * i, 3 + 5 * (i % 4)))
                .collect();
            let mut rep = replica(&e, 40);
            run(&mut rep, &mut reqs);
            assert_conserved(&reqs);
            if policy == BatchPolicyKind::Static {
                let policy_wait: u64 = reqs.iter().map(|r| r.attribution.get(C::QueuePolicy)).sum();
                assert!(policy_wait > 0, "a running static batch admits no one");
            }
        }
    }
}
