//! Decode runs in closed form: between two events that change a replica's
//! batch, a decode-only replica's iterations follow from the cost model step
//! by step, every sequence's context growing by one token per step
//! (DESIGN.md, "Performance").
//!
//! Step by step, each iteration walks every running sequence twice: the
//! policy marks it and secures its next KV slot (`SchedState::schedule_decodes`),
//! and the iteration's end gives it its token and its inter-token gap
//! (`Replica::finish_iteration`). When nothing but decoding happens — no
//! request waiting or swapped out, none prefilling, none finishing, no
//! allocation that could evict or preempt — everything those walks produce
//! follows from a few sums taken once at the start of the run:
//!
//! - the shape of step `j` is `n` decodes over `Σ (l_i + 1) + n (j - 1)`
//!   context tokens, so its price is the cost model's on that shape, the
//!   very call step-by-step makes (bit-identical `f64`, identical ns);
//! - every sequence received its previous token when the last step ended,
//!   so step `j` adds one inter-token gap of its own duration for `n`
//!   tokens, exactly the back-to-back sample `finish_iteration` records;
//! - sequence `i` needs a new KV block at step `j` when `j - 1 ≡ d_i`
//!   (mod block size), `d_i` being its free slots at the start: a histogram
//!   of the `d_i` gives each step's allocations, taken from the allocator in
//!   one call (the allocator counts, so one call of `c` blocks is `c` calls
//!   of one);
//! - the queue clock, decode clock and per-replica statistics advance by
//!   the same calls as step by step, once per step, in O(1).
//!
//! The sequences themselves are brought up to date only when the run ends
//! ([`Replica::end_decode_run`]): `k` steps later each has `k` more tokens
//! in its cache and the blocks that hold them.
//!
//! A sequence whose remaining output at the run's start is `j` completes at
//! step `j`, and the run carries on through it: when that step ends, a scan
//! of the members' completion steps (`leave`, a dense array beside the
//! batch) finds the sequences completing; each is brought up to date and
//! retired exactly as `finish_iteration` does (in running order; its blocks
//! freed, full ones to the prefix cache), and taken out of the run's sums
//! (`n`, the context sum, its slot in the histogram). The next step is the
//! same batch less those sequences, which is what step by step forms when
//! nothing waits to be admitted. A request that waits is admitted beside
//! the run by the policy, and joins it when its prefill lands
//! (`replica::run_join`). A step that would allocate beyond the free blocks
//! (eviction or preemption), or meet a swapped-out sequence or a KV
//! transfer, is run by the ordinary path. Runs are off for replicas that decode
//! speculatively, run parallel samples, keep static batches, or charge
//! decoded tokens to a fairness policy (VTC): their steps are not a function
//! of the shape alone.
//!
//! To the simulation a run's step is a steady step
//! ([`Replica::iteration_is_steady`], [`Replica::iteration_ends_privately`]),
//! which it may end without its event queue when the step comes before
//! every queued event (`simulation::replicas`). A step whose end only hands
//! over to the next (it completes nothing, nothing waits, the next step's
//! blocks are free) is ended and the next formed in one call,
//! [`Replica::step_through`], which writes only what differs from one step
//! of a run to the next (the context, the clocks, the counters) instead of
//! going through `finish_iteration` and `form_batch`.
//!
//! `[engine] decode_runs = false` (or `--step-by-step`) turns all of it off:
//! a debugging switch, since the results are the same; a test runs every
//! example scenario both ways and compares the files byte for byte.

use super::{attribution, IterationOutcome, Replica, RunningSeq, TokenGaps};
use crate::cost::BatchShape;
use crate::request::{Request, RequestId};
use crate::time::SimTime;

/// The closed form of one replica's run of decode-only steps.
#[derive(Debug, Default)]
pub struct DecodeRun {
    /// Closed-form steps are allowed at all (`[engine] decode_runs`).
    enabled: bool,
    /// A run is in progress: the running sequences' token counts and blocks
    /// are those of its start.
    pub(super) active: bool,
    /// Steps formed and finished so far in this run.
    pub(super) formed: u32,
    pub(super) finished: u32,
    /// `formed` modulo the block size: the slot of `hist` whose sequences
    /// need a block at the next step (kept, not divided out, each step).
    phase: u32,
    /// The step at which the next sequences complete: the least
    /// `RunningSeq::run_leave_step` among the sequences still in the run.
    pub(super) next_leave: u32,
    /// The step whose end the general path must take: the next to complete
    /// sequences (`next_leave`), or the step in progress when it admitted
    /// beside the run (`run_join`). One field, so that a step that only
    /// hands over pays one comparison for both.
    pub(super) stop: u32,
    /// Decoding sequences.
    pub(super) n: u32,
    /// Σ (context + 1) over the sequences at the first step; a sequence
    /// that joined later counts its context then less the steps before it
    /// (`RunningSeq::run_context_base`), so the sum may wrap: it is exact
    /// modulo 2^64, and the context of every step, a true count, is right.
    pub(super) ctx1: u64,
    /// When the last finished step ended (every sequence's last token).
    last_end: u64,
    /// Sequences by free KV slots at the start (`d_i`, below a block).
    pub(super) hist: Vec<u32>,
    /// The step at whose end each member gives its last token
    /// (`RunningSeq::run_leave_step`), in batch order: the members leaving
    /// a step are found, and the next to leave, by a scan of this dense
    /// array instead of a walk of the batch.
    pub(super) leave: Vec<u32>,
    /// Steps taken in closed form over the replica's life (for tests).
    steps: u64,
    /// Sequences that completed inside a run over the replica's life.
    leaves: u64,
    /// Sequences admitted into the step in progress (`run_join`): the last
    /// `joining` of the running batch, not yet in the run's sums.
    pub(super) joining: u32,
    /// Steps that admitted beside the run, over the replica's life.
    pub(super) joins: u64,
}

impl DecodeRun {
    /// No run in progress; closed-form steps allowed when `enabled`
    /// (`EnginePlan::decode_runs`).
    pub(super) fn new(enabled: bool) -> DecodeRun {
        DecodeRun {
            enabled,
            ..DecodeRun::default()
        }
    }

    /// The decode context of the run's next step, `formed + 1`: each
    /// sequence's context then, summed (`ctx1` plus a token per sequence
    /// per step already formed).
    #[inline]
    pub(super) fn next_context(&self) -> u64 {
        self.ctx1.wrapping_add(self.n as u64 * self.formed as u64)
    }

    /// The shape of the run's next step: its members' decodes. No swap and
    /// no idle time (`run_possible`: the last iteration ended at the step's
    /// start): the rest of the shape is zero.
    #[inline]
    pub(super) fn decode_shape(&self) -> BatchShape {
        BatchShape {
            decode_seqs: self.n,
            decode_context_tokens: self.next_context(),
            ..BatchShape::default()
        }
    }
}

impl Replica {
    /// Whether this replica may take decode-only steps in closed form (its
    /// engine plan's `decode_runs`).
    pub fn decode_runs(&self) -> bool {
        self.run.enabled
    }

    /// Iterations this replica took in closed form so far.
    pub fn decode_run_steps(&self) -> u64 {
        self.run.steps
    }

    /// Sequences that completed inside a run so far.
    pub fn decode_run_leaves(&self) -> u64 {
        self.run.leaves
    }

    /// Whether the iteration in progress is a steady step: a step of a
    /// decode run, whose end and the step after it follow from this replica
    /// alone, so the simulation may end it without its event queue when it
    /// comes before every queued event.
    pub fn iteration_is_steady(&self) -> bool {
        self.run.active
    }

    /// Whether the end of the iteration in progress touches nothing outside
    /// this replica but its token gaps: a steady step that completes no
    /// sequence and lands no admission. A step that completes sequences
    /// retires them, so it keeps its place among other replicas' events
    /// (records, freed slots and follow-ups go in event order).
    pub fn iteration_ends_privately(&self) -> bool {
        self.run.active && self.run.formed != self.run.stop
    }

    /// Steps that admitted requests beside a run so far (`run_join`).
    pub fn decode_run_joins(&self) -> u64 {
        self.run.joins
    }

    /// Whether nothing but the running sequences, and requests the policy
    /// admits beside them (`run_join`), can take part in the next step: a
    /// waiting request is admitted beside a run in progress by a policy
    /// that decodes first and never preempts for it, none is swapped out or
    /// arriving by KV transfer, and the replica's setup keeps steps a
    /// function of the shape alone. A run starts only with nothing waiting:
    /// the policy's iteration has just decided the batch, and a queue it
    /// left behind (prompts in chunks, a full batch) usually waits on.
    #[inline]
    fn run_possible(&self, now: SimTime) -> bool {
        let st = &self.st;
        self.run.enabled
            && (st.waiting.is_empty()
                || self.run.active && self.admission.is_some() && !st.waiting.preempts())
            && st.swapped.is_empty()
            && st.handoff.arrived.is_empty()
            && !st.running.is_empty()
            && self.last_finish == now
            && !st.forked
            && self.speculation.is_none()
            && !st.cfg.prefill_only
            && st.cfg.kv_groups.is_none()
            && st.cfg.recv_interval <= 1
            && !self.keeps_done
            && !st.waiting.charges_decode()
    }

    /// Starts a run at `now` when every running sequence decoded back to back
    /// and none finishes at the next step. O(sequences), once per run.
    fn start_decode_run(&mut self, now: SimTime) -> bool {
        let bs = self.st.cfg.block_size;
        let run = &mut self.run;
        run.hist.clear();
        run.hist.resize(bs as usize, 0);
        run.leave.clear();
        let (mut n, mut ctx1, mut min_rem) = (0u32, 0u64, u32::MAX);
        for s in &self.st.running {
            // Only plain decoding sequences, each with its previous token
            // from the step that just ended.
            if s.prefilling()
                || s.done
                || s.samples != 1
                || s.last_token != now.0
                || s.remaining() == 0
            {
                return false;
            }
            if !s.reserved {
                match s.capacity(bs).checked_sub(s.kv_tokens) {
                    Some(d) if d < bs => run.hist[d as usize] += 1,
                    _ => return false,
                }
            }
            min_rem = min_rem.min(s.remaining());
            run.leave.push(s.remaining());
            n += 1;
            ctx1 += s.kv_tokens as u64 + 1;
        }
        run.active = true;
        run.formed = 0;
        run.finished = 0;
        run.phase = 0;
        run.next_leave = min_rem;
        run.stop = min_rem;
        run.n = n;
        run.ctx1 = ctx1;
        run.last_end = now.0;
        true
    }

    /// Forms the next iteration at `now` in closed form when it is a step of
    /// a decode run (starting one if it can); `None` ends any run and leaves
    /// the iteration to the ordinary path.
    pub(super) fn form_run_step(
        &mut self,
        now: SimTime,
        reqs: &mut [Request],
    ) -> Option<BatchShape> {
        if !self.run_possible(now) {
            self.end_decode_run();
            return None;
        }
        if !self.run.active && !self.start_decode_run(now) {
            return None;
        }
        // Step `formed + 1` allocates for the sequences whose free slots
        // run out at it.
        let alloc = self.run.hist[self.run.phase as usize] as u64;
        if alloc > self.st.kv.free() {
            self.end_decode_run();
            return None;
        }
        if !self.st.waiting.is_empty() {
            return Some(self.form_joining_step(now, reqs, alloc));
        }
        Some(self.form_plain_step(now, reqs, alloc))
    }

    /// `form_batch`'s steps for run step `formed + 1`, each in O(1), once
    /// its `alloc` blocks are known to be free.
    #[inline]
    fn form_plain_step(&mut self, now: SimTime, reqs: &mut [Request], alloc: u64) -> BatchShape {
        self.account_kv(now);
        let shape = self.run.decode_shape();
        let st = &mut self.st;
        st.acc = shape;
        st.acc_valid = true;
        st.attr.begin(now, reqs);
        let cause = attribution::blocker(st, &shape, false);
        st.attr.decided(cause, &shape, now, reqs);
        self.begin_step(now, alloc);
        shape
    }

    /// What every run step's formation at `now` does once `st.acc` holds
    /// its shape: its `alloc` blocks taken (free blocks cover them, so none
    /// evicts, see `make_free`), the iteration started and counted.
    #[inline(always)]
    fn begin_step(&mut self, now: SimTime, alloc: u64) {
        self.take_step_blocks(alloc);
        // `acc` is the run's shape: `n` decodes, as many sequences and tokens.
        let n = self.run.n as u64;
        debug_assert!(self.st.acc.seqs() as u64 == n && self.st.acc.tokens() == n);
        self.count_step(now, n, n);
    }

    /// The decodes' part of a run step's formation: no swap, no preemption,
    /// its `alloc` blocks taken (free blocks cover them, so none evicts).
    #[inline]
    pub(super) fn take_step_blocks(&mut self, alloc: u64) {
        let st = &mut self.st;
        st.swap_blocks = 0;
        st.preempted_now = false;
        let granted = st.kv.allocate(alloc);
        debug_assert!(granted);
    }

    /// A run step of `seqs` sequences and `tokens` tokens starts at `now`:
    /// counted, and the run's step counters advanced.
    #[inline]
    pub(super) fn count_step(&mut self, now: SimTime, seqs: u64, tokens: u64) {
        self.iteration_start = Some(now);
        let st = &self.st;
        let run = &mut self.run;
        self.stats.iterations += 1;
        self.stats.batch_seqs += seqs;
        self.stats.batch_tokens += tokens;
        run.formed += 1;
        run.phase += 1;
        if run.phase == st.cfg.block_size {
            run.phase = 0;
        }
        run.steps += 1;
    }

    /// Finishes a closed-form step at `now`, if the iteration in progress is
    /// one: `finish_iteration`'s bookkeeping without visiting the sequences.
    pub(super) fn finish_run_step(
        &mut self,
        now: SimTime,
        reqs: &mut [Request],
        completed: &mut Vec<RequestId>,
        gaps: &mut TokenGaps,
    ) -> Option<IterationOutcome> {
        if !self.run.active || self.run.formed == self.run.finished {
            return None;
        }
        let n = self.run.n;
        let duration = self.finish_plain_step(now, gaps);
        if self.run.finished == self.run.next_leave {
            self.leave_run(now, reqs, completed);
        }
        if self.run.joining > 0 {
            self.finish_joiners(now, reqs, completed, gaps);
        }
        Some(IterationOutcome {
            duration,
            decode_seqs: n,
        })
    }

    /// `finish_iteration`'s bookkeeping for the run step in progress, ending
    /// at `now`, but for the sequences it completes; returns its duration.
    #[inline]
    fn finish_plain_step(&mut self, now: SimTime, gaps: &mut TokenGaps) -> u64 {
        let (start, duration) = self.end_step(now);
        self.st.attr.advance(start, now);
        // Every sequence got its previous token when the last step ended.
        gaps.gaps.push((duration, self.run.n));
        duration
    }

    /// What every run step's end at `now` does: the replica's clocks, KV
    /// accounting and the run's counters. Returns the step's start and
    /// duration.
    #[inline(always)]
    fn end_step(&mut self, now: SimTime) -> (SimTime, u64) {
        let start = self.iteration_start.take().expect("a step in progress");
        let duration = now.since(start);
        self.last_finish = now;
        self.stats.busy_ns += duration;
        self.account_kv(now);
        self.run.finished += 1;
        self.run.last_end = now.0;
        (start, duration)
    }

    /// Ends the run step in progress at `now` and forms the next one, when
    /// that is all the iteration's end would do: the step completes no
    /// sequence, nothing waits to join the batch (no request routed here
    /// while it ran, none swapped out or arriving by KV transfer), and the
    /// next step's allocations fit the free blocks. It leaves the replica
    /// exactly as `finish_iteration` then `form_batch` do on that path
    /// (`finish_plain_step`, `form_plain_step`), but writes only what
    /// changes from one step of a run to the next: the step's shape differs
    /// from the last one by its context alone, and the latency clock's
    /// decision is the same (`QueueClock::run_step`). Returns the ended
    /// step's inter-token gap (one for each of the new step's sequences)
    /// and the new step for the caller to price: its decoding sequences and
    /// their context (a decode-only shape without swaps); `None` leaves the
    /// replica untouched for the general path. Inlined into the
    /// simulation's loop over a run's steps (its one caller), which would
    /// otherwise pay a call's frame on every step.
    #[inline(always)]
    pub fn step_through(&mut self, now: SimTime) -> Option<(u64, u32, u64)> {
        let run = &self.run;
        if !run.active || run.formed != run.finished + 1 || run.formed == run.stop {
            return None;
        }
        // The rest of `run_possible` held when the run started and cannot
        // change without an admission (`forked`) or a reconfiguration.
        let st = &self.st;
        if !st.waiting.is_empty() || !st.swapped.is_empty() || !st.handoff.arrived.is_empty() {
            return None;
        }
        // As in `form_run_step`.
        let alloc = run.hist[run.phase as usize] as u64;
        if alloc > st.kv.free() {
            return None;
        }
        let (start, gap) = self.end_step(now);
        // `form_plain_step` at the same instant (its `account_kv` adds
        // nothing: no time passed, no block changed hands).
        let st = &mut self.st;
        st.attr.run_step(start, now);
        // The step in progress was formed as a run step (`form_plain_step`
        // or here): `acc` is its shape, which only the context changes.
        let (n, context) = (self.run.n, self.run.next_context());
        st.acc.decode_context_tokens = context;
        debug_assert!(st.acc.decode_seqs == n && st.acc.prefill_tokens == 0);
        debug_assert!(st.acc.swap_bytes == 0.0 && st.acc.verify_extra_tokens == 0);
        self.begin_step(now, alloc);
        Some((gap, n, context))
    }

    /// The step just finished at `now` completed the sequences whose
    /// remaining output at the run's start was its number: each is brought
    /// up to date and retired as `finish_iteration` would (in running
    /// order, releasing its blocks, handing full ones to the prefix cache),
    /// and leaves the run's sums, so the run goes on with the others. One
    /// pass over the batch per completing step, where ending the run cost
    /// four (bringing every sequence up to date, the ordinary step's two
    /// walks, and the next run's start).
    fn leave_run(&mut self, now: SimTime, reqs: &mut [Request], completed: &mut Vec<RequestId>) {
        let st = &mut self.st;
        let run = &mut self.run;
        let j = run.finished;
        let bs = st.cfg.block_size;
        let mut running = std::mem::take(&mut st.running);
        // The run's members (`leave` is theirs): the sequences admitted
        // beside this step (`joining`, at the end) are not in its sums yet.
        debug_assert_eq!(run.leave.len(), running.len() - run.joining as usize);
        let mut i = 0;
        while let Some(k) = run.leave[i..].iter().position(|&at| at == j) {
            i += k;
            // Usually one sequence leaves a step: shifting the tail down
            // (a `memmove`) is cheaper than compacting element by element.
            run.leave.remove(i);
            let mut s = running.remove(i);
            debug_assert_eq!(s.run_leave_step(), j);
            let steps = j - s.run_base;
            if !s.reserved {
                run.hist[s.run_block_phase(bs)] -= 1;
                let need = (s.kv_tokens + steps).div_ceil(bs) - s.shared;
                s.blocks = s.blocks.max(need);
            }
            run.n -= 1;
            run.ctx1 = run.ctx1.wrapping_sub(s.run_context_base());
            s.kv_tokens += steps;
            s.generated += steps;
            s.run_base = 0;
            s.last_token = now.0;
            super::mark_completed(&st.attr.mix, &mut reqs[s.id as usize], s.generated, now);
            completed.push(s.id);
            st.retire(&mut s, reqs);
            run.leaves += 1;
        }
        st.running = running;
        run.next_leave = run.leave.iter().copied().min().unwrap_or(u32::MAX);
        run.stop = run.next_leave;
        // The last sequence left: nothing is behind the start-of-run state.
        run.active = run.n > 0;
    }

    /// Brings the running sequences up to date with the run's steps and ends
    /// it (between steps, or with one in progress: its sequences are then
    /// marked decoding and hold its blocks, as step by step).
    pub fn end_decode_run(&mut self) {
        if !self.run.active {
            return;
        }
        let run = &mut self.run;
        run.active = false;
        let (done, formed) = (run.finished, run.formed);
        let bs = self.st.cfg.block_size;
        // Sequences admitted beside the step in progress stay as the policy
        // left them: not in the run, their prefill chunk marked.
        let members = self.st.running.len() - run.joining as usize;
        run.joining = 0;
        run.leave.clear();
        for s in &mut self.st.running[..members] {
            let (done, formed) = (done - s.run_base, formed - s.run_base);
            s.run_base = 0;
            // Only a sequence whose tokens outgrew its blocks took more (no
            // division for the others: runs are mostly shorter than a block).
            if !s.reserved && s.kv_tokens + formed > s.capacity(bs) {
                s.blocks = (s.kv_tokens + formed).div_ceil(bs) - s.shared;
            }
            s.kv_tokens += done;
            s.generated += done;
            if done > 0 {
                s.last_token = run.last_end;
            }
            s.decode = formed > done;
        }
    }

    /// Tokens running sequence `i` has generated so far, counting those the
    /// run has added since it joined (none outside a run, nor for one
    /// admitted beside the step in progress).
    pub(super) fn run_generated(&self, i: usize) -> u32 {
        let s = &self.st.running[i];
        let members = self.st.running.len() - self.run.joining as usize;
        if self.run.active && i < members {
            s.generated + self.run.finished - s.run_base
        } else {
            s.generated
        }
    }
}

/// A run member's place in the run's closed form: its `kv_tokens` and
/// `generated` are as of the step it joined after (`run_base`), and the run
/// has added one token per step since.
impl RunningSeq {
    /// The run step at whose end this member gives its last token.
    #[inline]
    pub(super) fn run_leave_step(&self) -> u32 {
        self.remaining() + self.run_base
    }

    /// Its slot in the run's histogram: it needs a block at step `j` when
    /// `(j - 1) mod block_size` is this (its free slots when it joined,
    /// shifted by the steps before).
    #[inline]
    pub(super) fn run_block_phase(&self, block_size: u32) -> usize {
        ((self.capacity(block_size) - self.kv_tokens + self.run_base) % block_size) as usize
    }

    /// Its term of the run's context sum: its context at step `j` is this
    /// plus `j - 1`. Wraps for a sequence that joined after more steps than
    /// it had tokens (the sum is right modulo 2^64, and so exact).
    #[inline]
    pub(super) fn run_context_base(&self) -> u64 {
        (self.kv_tokens as u64 + 1).wrapping_sub(self.run_base as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::engine;
    use super::*;
    use crate::request::Request;
    use crate::time::SimTime;

    /// What one replica did: every observable, its requests, the
    /// closed-form steps, the completions inside runs and the steps that
    /// admitted beside one.
    type Drive = (Vec<String>, Vec<Request>, u64, u64, u64);

    /// Drives one replica to the end with fixed 1000-ns iterations (priced by
    /// the shape, so a wrong shape shows).
    fn drive(runs: bool, block_size: u32, kv_blocks: u64) -> Drive {
        let e = engine(8, 4096, block_size);
        let mut rep = Replica::new(
            0,
            crate::scenario::EnginePlan::resolve(&e, runs),
            kv_blocks,
            1024.0,
            1,
        );
        let mut reqs: Vec<Request> = (0..6)
            .map(|i| Request::new(SimTime(0), 20 + 7 * i, 30 + 11 * i))
            .collect();
        let mut log = vec![];
        let mut t = SimTime(0);
        let mut done = vec![];
        let mut gaps = TokenGaps::default();
        let mut next = 0;
        for step in 0.. {
            // Arrivals now and then, admitted beside a run.
            if step % 17 == 0 && next < reqs.len() {
                rep.enqueue(next as u32);
                next += 1;
            }
            let Some(shape) = rep.form_batch(t, &mut reqs) else {
                if next == reqs.len() {
                    break;
                }
                t = t.plus(5);
                continue;
            };
            let dt = 1000 + shape.decode_context_tokens % 97 + 13 * shape.prefill_tokens;
            log.push(format!(
                "{t:?} {shape:?} used {} free {}",
                rep.kv().used(),
                rep.kv().free()
            ));
            t = t.plus(dt);
            gaps.gaps.clear();
            rep.finish_iteration(t, &mut reqs, &mut done, &mut gaps);
            log.push(format!("{:?} {:?} {:?}", gaps.gaps, done, rep.stats));
        }
        rep.close(t);
        log.push(format!("{} {}", rep.blocks_held(), rep.kv().used()));
        let (steps, leaves) = (rep.decode_run_steps(), rep.decode_run_leaves());
        (log, reqs, steps, leaves, rep.decode_run_joins())
    }

    #[test]
    fn a_replica_runs_the_same_with_and_without_closed_form_steps() {
        for (bs, blocks) in [(16, 1000), (4, 1000), (16, 14), (1, 200)] {
            let (a, ra, none, _, _) = drive(false, bs, blocks);
            let (b, rb, steps, leaves, joins) = drive(true, bs, blocks);
            assert_eq!(none, 0);
            assert!(joins > 0, "admissions beside a run: {joins}");
            // Completions inside runs are exercised (6 requests; the ones
            // that end while another arrival is far off).
            assert!(leaves >= 2, "completions inside runs: {leaves}");
            assert!(
                steps * 3 > b.len() as u64,
                "most steps closed-form: {steps}"
            );
            for (k, (x, y)) in a.iter().zip(&b).enumerate() {
                assert_eq!(x, y, "line {k}: block size {bs}, {blocks} blocks");
            }
            assert_eq!(a, b, "block size {bs}, {blocks} blocks");
            for (x, y) in ra.iter().zip(&rb) {
                assert_eq!(format!("{x:?}"), format!("{y:?}"));
            }
        }
    }
}
