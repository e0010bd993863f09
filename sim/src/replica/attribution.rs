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
//!
//! Decoding sequences are charged the same way, so the hot per-iteration
//! loop never touches a decoding request: every decoding sequence of a
//! replica receives the same split of each iteration (its decode compute and
//! the prefill share, or the whole iteration as a stall when no one decoded),
//! so a decode clock accumulates those splits and a sequence takes the
//! difference between entering decode (its first token, or a swap-in) and
//! leaving it (completion or preemption). Only the rare sequence that sits out
//! an iteration others decoded in is corrected individually. Prefilling
//! sequences, a few per iteration, are charged iteration by iteration.

use super::{RunningSeq, SchedState};
use crate::attribution::Component;
use crate::cost::{BatchShape, CostModel};
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
    /// Whether the iteration in progress decodes anything.
    decodes: bool,
    /// Decode clock: Σ decode compute and Σ decode stall a sequence that was
    /// in decode throughout would have received, ns.
    decode_compute: u64,
    decode_stall: u64,
    /// Sequences swapped back in while the iteration was formed.
    resumed: Vec<RequestId>,
    /// The split of the iteration that just finished.
    pub mix: IterationMix,
    /// What the iteration in progress would take without its prefill tokens,
    /// when the caller priced it (see [`decode_alone`]).
    decode_alone_ns: Option<u64>,
    /// Attribution switched off (`[metrics] attribution = false`): every
    /// method returns at once and the ledgers stay zero.
    off: bool,
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
            decodes: false,
            decode_compute: 0,
            decode_stall: 0,
            resumed: Vec::new(),
            mix: IterationMix::default(),
            decode_alone_ns: None,
            off: false,
        }
    }
}

impl QueueClock {
    /// Whether requests are charged at all.
    #[inline]
    pub fn is_on(&self) -> bool {
        !self.off
    }

    /// A request joined the waiting queue for its first admission.
    #[inline]
    pub fn enqueued(&mut self, id: RequestId) {
        if self.off {
            return;
        }
        self.fresh.push(id);
    }

    /// Called when an iteration is being formed at `now`, before the policy
    /// runs: requests that arrived since the last formation take their
    /// snapshot at their arrival, then the clock advances to `now`.
    #[inline]
    pub fn begin(&mut self, now: SimTime, reqs: &mut [Request]) {
        if self.off {
            return;
        }
        // Most iterations (every step of a decode run) find no newcomer:
        // their snapshots are taken out of line, so the common case is a few
        // stores without the loop's frame.
        if !self.fresh.is_empty() {
            self.snapshot_fresh(now, reqs);
        }
        self.tick(now);
    }

    /// Advances the queue's clock to `now`, charging the time since the
    /// last formation to the cause that blocked the queue then.
    #[inline(always)]
    fn tick(&mut self, now: SimTime) {
        let dt = now.0.saturating_sub(self.since.0);
        self.cum[self.cause as usize] += dt;
        self.since = SimTime(self.since.0.max(now.0));
        self.blocked = None;
    }

    /// The requests enqueued since the last [`Self::begin`] take their
    /// snapshot of the clock at their arrival (before it advances to `now`).
    #[inline(never)]
    fn snapshot_fresh(&mut self, now: SimTime, reqs: &mut [Request]) {
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
    }

    /// A waiting request is being admitted at `now` (the instant of the last
    /// [`Self::begin`]). On its first admission it collects the blocked time
    /// since it joined; a preempted request's wait is charged as preemption
    /// when its next iteration runs (see [`IterationMix::charge`]).
    #[inline]
    pub fn admitted(&self, r: &mut Request, now: SimTime) {
        if !self.off && r.first_scheduled.is_none() {
            let a = &mut r.attribution;
            for k in 0..QUEUE {
                a.ns[k] = a.ns[k].wrapping_add(self.cum[k]);
            }
            a.mark = now;
        }
    }

    /// A swapped-out sequence resumes decoding in the iteration being formed.
    #[inline]
    pub fn swapped_in(&mut self, id: RequestId) {
        if self.off {
            return;
        }
        self.resumed.push(id);
    }

    /// A running sequence is preempted at `now` (an iteration boundary): a
    /// decoding one leaves the decode clock; from here on its time is
    /// preemption until it is back.
    #[inline]
    pub fn preempted(&self, was_decoding: bool, r: &mut Request, now: SimTime) {
        if self.off {
            return;
        }
        if was_decoding {
            self.leave_decode(r);
        }
        r.attribution.mark = now;
    }

    /// Starts `r`'s share of the decode clock (at an iteration boundary).
    #[inline]
    fn enter_decode(&self, r: &mut Request) {
        let a = &mut r.attribution;
        a.add(Component::DecodeCompute, self.decode_compute.wrapping_neg());
        a.add(Component::DecodeStall, self.decode_stall.wrapping_neg());
    }

    /// Ends `r`'s share of the decode clock (at an iteration boundary).
    #[inline]
    fn leave_decode(&self, r: &mut Request) {
        let a = &mut r.attribution;
        a.add(Component::DecodeCompute, self.decode_compute);
        a.add(Component::DecodeStall, self.decode_stall);
    }

    /// Records what the policy decided at `now`: the cause now blocking the
    /// queue and the iteration's token mix; swapped-in sequences are charged
    /// their time out as preemption and join the decode clock.
    pub fn decided(
        &mut self,
        cause: Component,
        shape: &BatchShape,
        now: SimTime,
        reqs: &mut [Request],
    ) {
        if self.off {
            return;
        }
        self.cause = cause;
        self.prefill_tokens = shape.prefill_tokens;
        self.tokens = shape.tokens();
        self.decodes = shape.decode_seqs > 0;
        self.decode_alone_ns = None;
        for i in 0..self.resumed.len() {
            let r = &mut reqs[self.resumed[i] as usize];
            r.attribution.charge_until(Component::DecodePreempted, now);
            self.enter_decode(r);
        }
        self.resumed.clear();
    }

    /// Advances the decode clock over the iteration that ran from `start` to
    /// `now`, and returns its split for the prefilling sequences.
    #[inline(always)]
    pub fn advance(&mut self, start: SimTime, now: SimTime) -> &IterationMix {
        if self.off {
            // `mix` stays the default, whose charging methods do nothing.
            return &self.mix;
        }
        let d = now.0.saturating_sub(start.0);
        let tokens = self.tokens.max(1);
        let stall = match self.decode_alone_ns {
            // The prefills' cost: the iteration less its decode-only price.
            Some(alone) => d.saturating_sub(alone),
            // A decode-only iteration (every step of a decode run) has no
            // prefill share: the same 0 the division gives, without the
            // 128-bit division's call.
            None if self.prefill_tokens == 0 => 0,
            None => (d as u128 * self.prefill_tokens.min(tokens) as u128 / tokens as u128) as u64,
        };
        if self.decodes {
            self.decode_compute += d - stall;
            self.decode_stall += stall;
        } else {
            self.decode_stall += d;
        }
        self.mix = IterationMix {
            on: true,
            start,
            now,
            d,
            stall,
            tokens,
            decodes: self.decodes,
            decode_compute: self.decode_compute,
            decode_stall: self.decode_stall,
        };
        &self.mix
    }

    /// The decode-only step of a decode run that ran from `start` to `now`,
    /// followed at once by the next, identical but for its context
    /// (`Replica::step_through`): [`Self::advance`]`(start, now)`,
    /// [`Self::begin`]`(now)` and [`Self::decided`] with the same cause and
    /// token mix, in one. The last decision was such a step, so nothing is
    /// fresh or resumed, no prefill tokens stall the decodes and the cause
    /// stays `QueueIteration` (nothing waits): the whole step is decode
    /// compute, `advance`'s stall being 0, and `decided` would write back
    /// what its fields hold.
    ///
    /// `mix` is left as the last `advance` made it: it is read only once an
    /// iteration's end has gone through `advance` (`finish_iteration`, a
    /// run step's `finish_run_step`, and the formation after either), never
    /// between a step that ends here and the next step's end, which
    /// rewrites it whole or comes here again.
    #[inline]
    pub fn run_step(&mut self, start: SimTime, now: SimTime) {
        if self.off {
            return;
        }
        debug_assert!(self.fresh.is_empty() && self.resumed.is_empty());
        debug_assert!(self.decode_alone_ns.is_none() && self.prefill_tokens == 0);
        debug_assert!(self.decodes && self.cause == Component::QueueIteration);
        self.decode_compute += now.0.saturating_sub(start.0);
        // `tick(now)` with its cause known.
        self.cum[Component::QueueIteration as usize] += now.0.saturating_sub(self.since.0);
        self.since = SimTime(self.since.0.max(now.0));
        self.blocked = None;
    }
}

/// The iteration `shape` without its prefill chunks, when it mixes prefills
/// and decodes: the counterfactual whose price says how much of the mixed
/// iteration the decodes would have taken alone.
pub fn decode_alone(shape: &BatchShape) -> Option<BatchShape> {
    (shape.prefill_tokens > 0 && shape.decode_seqs > 0).then_some(BatchShape {
        prefill_seqs: 0,
        prefill_tokens: 0,
        prefill_attn_pairs: 0.0,
        prefill_kv_tokens: 0,
        ..*shape
    })
}

/// Prices the decode-only counterfactual of the iteration `shape` that
/// replica `rep` just formed, when it mixes prefills and decodes and the
/// replica attributes latency (see [`decode_alone`]).
#[inline]
pub fn price_decode_alone(rep: &mut super::Replica, shape: &BatchShape, cost: &dyn CostModel) {
    if !rep.attributes() {
        return;
    }
    if let Some(alone) = decode_alone(shape) {
        rep.price_decode_alone(cost.iteration_time(&alone));
    }
}

impl super::Replica {
    /// Switches latency attribution off (before the first request): the
    /// replica charges nothing, and [`Self::attributes`] says so, so the
    /// caller need not price [`decode_alone`] either.
    pub fn disable_attribution(&mut self) {
        self.st.attr = QueueClock {
            off: true,
            ..QueueClock::default()
        };
    }

    /// Whether the replica charges its requests' latency components.
    pub fn attributes(&self) -> bool {
        self.st.attr.is_on()
    }

    /// Tells the replica what the iteration just formed would take without
    /// its prefill chunks (the price of [`decode_alone`]): its decoding
    /// sequences are then charged the difference as decode stall, instead of
    /// the token-proportional share used when no cost model is at hand.
    pub fn price_decode_alone(&mut self, ns: u64) {
        self.st.attr.decode_alone_ns = Some(ns);
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
#[derive(Clone, Copy, Debug, Default)]
pub struct IterationMix {
    /// False (the default) when attribution is off: charging does nothing.
    on: bool,
    start: SimTime,
    now: SimTime,
    d: u64,
    /// Share of the iteration spent on prefill tokens.
    stall: u64,
    tokens: u64,
    decodes: bool,
    /// The decode clock after this iteration.
    decode_compute: u64,
    decode_stall: u64,
}

impl IterationMix {
    /// Charges running sequence `s` that neither prefilled nor decoded in
    /// this iteration (its state as the iteration ran). Decoding sequences
    /// are covered by the decode clock and cost nothing per iteration; one
    /// that sat out an iteration others decoded in is corrected here.
    #[inline(never)]
    pub fn charge_idle(&self, s: &RunningSeq, reqs: &mut [Request]) {
        if !self.on || s.done {
            return; // a static batch's padding: its request has ended
        }
        if s.prefilling() {
            self.charge_prefilling(s, &mut reqs[s.id as usize]);
        } else if self.decodes {
            // The clock gave it decode compute; it only waited.
            let a = &mut reqs[s.id as usize].attribution;
            let compute = self.d - self.stall;
            a.add(Component::DecodeCompute, compute.wrapping_neg());
            a.add(Component::DecodeStall, compute);
        }
    }

    /// `r` received its first token (or finished recomputing its context) at
    /// the end of this iteration: it joins the decode clock.
    #[inline(never)]
    pub fn enter_decode(&self, r: &mut Request) {
        if !self.on {
            return;
        }
        let a = &mut r.attribution;
        a.add(Component::DecodeCompute, self.decode_compute.wrapping_neg());
        a.add(Component::DecodeStall, self.decode_stall.wrapping_neg());
        a.mark = self.now;
    }

    /// `r` completed at the end of this iteration: it leaves the decode clock.
    #[inline(never)]
    pub fn leave_decode(&self, r: &mut Request) {
        if !self.on {
            return;
        }
        let a = &mut r.attribution;
        a.add(Component::DecodeCompute, self.decode_compute);
        a.add(Component::DecodeStall, self.decode_stall);
        a.mark = self.now;
    }

    /// A prefilling sequence (first prefill or a recompute; with or without
    /// a chunk this iteration), charged for everything up to the iteration's
    /// end. Called before the chunk is applied.
    #[inline(never)]
    pub fn charge_prefilling(&self, s: &RunningSeq, r: &mut Request) {
        if !self.on {
            return;
        }
        // Preempted earlier and prefilling again: recomputing lost context,
        // and everything since the preemption was lost to it.
        let recompute = r.preemptions > 0;
        let preempted = if r.first_token.is_none() {
            Component::PrefillPreempted
        } else {
            Component::DecodePreempted
        };
        let waiting = if recompute {
            preempted
        } else {
            Component::PrefillInterference
        };
        let a = &mut r.attribution;
        // Time before the iteration not yet charged: waiting for readmission
        // after a recompute preemption.
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
    fn switched_off_it_charges_nothing_and_changes_no_timing() {
        let mk = || -> Vec<Request> {
            (0..12)
                .map(|i| Request::new(SimTime(7_000 * i as u64), 5 + 5 * i, 3 + 5 * (i % 4)))
                .collect()
        };
        let (mut on, mut off) = (mk(), mk());
        let mut rep = replica(&engine(4, 64, 4), 40);
        run(&mut rep, &mut on);
        let mut rep = replica(&engine(4, 64, 4), 40);
        rep.disable_attribution();
        assert!(!rep.attributes());
        run(&mut rep, &mut off);
        assert_conserved(&on);
        for (a, b) in on.iter().zip(&off) {
            assert_eq!((a.first_token, a.finished), (b.first_token, b.finished));
            assert_eq!(b.attribution.total(), 0);
        }
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

    #[test]
    fn random_workloads_conserve_time_under_every_policy_and_mode() {
        // A deterministic LCG drives arrivals, lengths and memory sizes, so
        // preemptions (both modes), prefix sharing, paused decodes and static
        // padding all occur.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for case in 0..150 {
            let mut e = engine(4 + next(5) as u32, 64, 4);
            e.policy = [
                BatchPolicyKind::Continuous,
                BatchPolicyKind::Vllm,
                BatchPolicyKind::Sarathi,
                BatchPolicyKind::Orca,
                BatchPolicyKind::Static,
            ][case % 5];
            if next(2) == 0 {
                e.preemption = PreemptionMode::Swap;
                e.swap_space_gib = 64.0 * 1024.0 / crate::catalog::GIB;
            }
            e.prefix_caching = next(2) == 0;
            let blocks = 24 + next(24);
            let mut t = 0;
            let mut reqs: Vec<Request> = (0..20)
                .map(|i| {
                    t += next(40_000);
                    let p = 4 + next(if case % 5 == 2 { 100 } else { 56 }) as u32;
                    let o = 1 + next(30) as u32;
                    let mut r = Request::new(SimTime(t), p, o);
                    let n = ((p + o) / 4) as u64;
                    r.set_prefix_hashes((0..n).map(|j| (i % 3) * 1000 + j + 1).collect());
                    r.hash_block_tokens = 4;
                    r
                })
                .filter(|r| ((r.prompt_tokens + r.output_tokens - 1).div_ceil(4) as u64) < blocks)
                .collect();
            let mut rep = replica(&e, blocks);
            run(&mut rep, &mut reqs);
            assert_conserved(&reqs);
        }
    }
}
