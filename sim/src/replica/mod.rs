//! One model server (a replica of one or more GPUs) with iteration-level
//! scheduling, after Orca (Yu et al., OSDI'22) and vLLM (Kwon et al.,
//! SOSP'23). Each iteration a [`policy::BatchPolicy`] decides which running
//! sequences decode, which prompts (or prompt chunks) are prefilled, and which
//! waiting requests are admitted; the replica's [`SchedState`] owns the queues
//! and the paged KV allocator and offers the operations policies share
//! (securing KV slots with preemption, swapping, admission).
//!
//! Batch formation is a pure state machine over the queues and the allocator
//! (DESIGN.md, "One scheduler, two clocks"): [`Replica::form_batch`] decides an
//! iteration, [`Replica::finish_iteration`] applies its outcome. Who prices the
//! iteration — a cost model or a real forward pass — is the caller's business.

pub mod attribution;
mod cancel;
pub mod decode_run;
pub mod fairness;
pub mod fork;
pub mod handoff;
pub mod policy;
pub mod report;
mod run_join;
mod sched;
pub mod speculative;
mod waiting;

pub use sched::*;
pub use waiting::WaitingQueue;

use crate::attribution::Component;
use crate::cost::BatchShape;
use crate::kv::{BlockAllocator, PrefixCache};
use crate::request::{Request, RequestId, Status};
use crate::scenario::{EnginePlan, PreemptionMode};
use crate::time::{Nanos, SimTime};
use fairness::{FairnessPolicy, Fcfs, Waiting};
use policy::BatchPolicy;
use speculative::Speculation;
use std::collections::VecDeque;

/// vLLM's block-manager watermark: admission leaves 1 % of KV blocks free so
/// that newly admitted sequences do not force immediate preemptions.
pub const WATERMARK_FRACTION: f64 = 0.01;

/// What one finished iteration produced, for the metrics collector.
#[derive(Clone, Copy, Debug, Default)]
pub struct IterationOutcome {
    /// How long the iteration ran.
    pub duration: Nanos,
    /// Sequences that received tokens from a decode step.
    pub decode_seqs: u32,
}

/// Inter-token gaps of one iteration, grouped: decoding sequences that got
/// their previous token at the same moment share a gap, so an iteration adds
/// a handful of (gap, count) pairs rather than one sample per sequence.
#[derive(Debug, Default)]
pub struct TokenGaps {
    pub gaps: Vec<(Nanos, u32)>,
}

impl TokenGaps {
    /// `n` tokens (the samples of one group) that waited `gap`.
    #[inline]
    fn add(&mut self, gap: Nanos, n: u32) {
        if let Some(last) = self.gaps.last_mut() {
            if last.0 == gap {
                last.1 += n;
                return;
            }
        }
        match self.gaps.iter_mut().find(|(g, _)| *g == gap) {
            Some(e) => e.1 += n,
            None => self.gaps.push((gap, n)),
        }
    }
}

/// One sequence of the iteration the last [`Replica::form_batch`] decided:
/// what a live engine reads to run the same batch for real (DESIGN.md, "One
/// scheduler, two clocks").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchEntry {
    pub id: RequestId,
    /// Prompt (or recompute) tokens prefilled this iteration; 0 when decoding.
    pub chunk: u32,
    /// Tokens already in the sequence's KV cache before this iteration.
    pub kv_tokens: u32,
    /// Decodes one token this iteration.
    pub decode: bool,
}

/// Aggregates a replica keeps for the summary.
#[derive(Clone, Debug, Default)]
pub struct ReplicaStats {
    pub iterations: u64,
    pub busy_ns: u64,
    /// Σ sequences per iteration.
    pub batch_seqs: u64,
    /// Σ tokens per iteration.
    pub batch_tokens: u64,
    /// ∫ active KV blocks dt, in block·ns.
    pub kv_block_ns: u128,
    /// Most active KV blocks seen at an iteration boundary.
    pub kv_peak_blocks: u64,
    /// Speculative verification steps and the tokens they produced.
    pub spec_steps: u64,
    pub spec_tokens: u64,
}

/// One replica's scheduler.
pub struct Replica {
    pub id: u32,
    st: SchedState,
    policy: Box<dyn BatchPolicy>,
    /// `policy.keeps_finished_until_batch_ends()`, fixed for the policy's
    /// life: asked after every iteration, where the virtual call cost more
    /// than the answer.
    keeps_done: bool,
    /// `policy.admission_after_decodes()`, likewise fixed: decode runs
    /// admit waiting requests by it without ending (`run_join`).
    admission: Option<policy::Admission>,
    speculation: Option<Speculation>,
    /// Start of the iteration in progress, if any.
    iteration_start: Option<SimTime>,
    /// End of the last iteration (the run's start before the first).
    last_finish: SimTime,
    last_kv_change: SimTime,
    pub stats: ReplicaStats,
    /// Decode-only steps in closed form (`decode_run`).
    run: decode_run::DecodeRun,
}

/// Closes the record of a request whose last token came out at `now`
/// (`generated` tokens in all): it leaves the decode clock and is completed.
/// Shared by the step-by-step iteration end and decode runs, which must
/// agree byte for byte.
#[inline]
fn mark_completed(mix: &attribution::IterationMix, r: &mut Request, generated: u32, now: SimTime) {
    mix.leave_decode(r);
    r.generated = generated;
    r.finished = crate::time::Stamp::at(now);
    r.last_token = now;
    r.status = Status::Completed;
}

impl Replica {
    /// A replica of `engine` with `kv_blocks` KV blocks of `block_bytes`
    /// bytes per GPU. `seed` seeds its own random streams (speculative
    /// acceptance). A simulation builds it from its pool's
    /// [`EnginePlan`](crate::scenario::EnginePlan); a live engine may pass
    /// its `[engine]` settings, resolved on the way in (stepped: no decode
    /// runs).
    pub fn new(
        id: u32,
        engine: impl Into<EnginePlan>,
        kv_blocks: u64,
        block_bytes: f64,
        seed: u64,
    ) -> Replica {
        let engine: EnginePlan = engine.into();
        let swap_capacity_blocks = if block_bytes > 0.0 {
            (engine.swap_space_gib * crate::catalog::GIB / block_bytes) as u64
        } else {
            0
        };
        let speculation = engine
            .speculation
            .as_ref()
            .map(|sp| Speculation::new(sp, seed, id));
        let cfg = SchedConfig {
            block_size: engine.block_size,
            max_num_seqs: engine.max_num_seqs as usize,
            max_batched_tokens: engine.max_batched_tokens as u64,
            watermark_blocks: (kv_blocks as f64 * WATERMARK_FRACTION) as u64,
            preemption: engine.preemption,
            swap_capacity_blocks,
            block_bytes,
            draft_tokens: speculation.as_ref().map_or(0, |s| s.draft_tokens()),
            prefill_only: false,
            kv_groups: None,
            recv_interval: engine.recv_interval.max(1),
        };
        let policy = policy::build(engine.policy);
        Replica {
            id,
            keeps_done: policy.keeps_finished_until_batch_ends(),
            admission: policy.admission_after_decodes(),
            st: SchedState::new(
                cfg,
                kv_blocks,
                engine
                    .prefix_caching
                    .then(|| PrefixCache::new(engine.pinned_prefix_blocks)),
            ),
            policy,
            speculation,
            iteration_start: None,
            last_finish: SimTime::ZERO,
            last_kv_change: SimTime::ZERO,
            stats: ReplicaStats::default(),
            run: decode_run::DecodeRun::new(engine.decode_runs),
        }
    }

    /// Gives this replica a hybrid model's layer groups (the memory plan's
    /// `kv_groups`): its blocks are then `groups.block_size` tokens, and each
    /// sequence holds its windows' and state's blocks beside its rows. Decode
    /// runs stay off, since a windowed group's blocks do not follow a run's
    /// one-block-per-`block_size` steps.
    pub fn set_kv_groups(&mut self, groups: Option<crate::kv_groups::KvGroups>) {
        if let Some(g) = groups {
            self.st.cfg.block_size = g.block_size;
        }
        self.st.cfg.kv_groups = groups;
    }

    pub fn enqueue(&mut self, id: RequestId) {
        self.enqueue_waiting(Waiting {
            id,
            ..Waiting::default()
        });
    }

    /// Queues a request with what its tenant's fairness policy needs.
    pub fn enqueue_waiting(&mut self, w: Waiting) {
        let id = w.id;
        if self.st.cfg.recv_interval > 1 {
            self.st.inbox.push_back(w);
        } else {
            self.st.waiting.push_back(w);
        }
        self.st.attr.enqueued(id);
    }

    /// Replaces the waiting queue's order (before any request is queued).
    pub fn set_fairness(&mut self, order: Box<dyn FairnessPolicy>) {
        self.st.waiting.set_order(order);
    }

    /// The waiting queue (per-tenant counts, tokens) for admission control.
    pub fn waiting(&self) -> &WaitingQueue {
        &self.st.waiting
    }

    #[inline]
    pub fn is_busy(&self) -> bool {
        self.iteration_start.is_some()
    }

    #[inline]
    pub fn has_work(&self) -> bool {
        !self.st.running.is_empty()
            || !self.st.waiting.is_empty()
            || !self.st.swapped.is_empty()
            || !self.st.handoff.arrived.is_empty()
            || !self.st.inbox.is_empty()
    }

    /// Requests routed here and not finished: waiting + swapped + running.
    #[inline]
    pub fn outstanding(&self) -> usize {
        self.st.waiting.len() + self.st.inbox.len() + self.st.swapped.len() + self.st.running.len()
    }

    #[inline]
    pub fn waiting_len(&self) -> usize {
        self.st.waiting.len() + self.st.inbox.len() + self.st.swapped.len()
    }

    #[inline]
    pub fn running_len(&self) -> usize {
        self.st.running.len()
    }

    pub fn kv(&self) -> &BlockAllocator {
        &self.st.kv
    }

    pub fn preemptions(&self) -> u64 {
        self.st.preemptions
    }

    pub fn swap_outs(&self) -> u64 {
        self.st.swap_outs
    }

    /// Requests still queued, swapped or running (in flight at the horizon).
    pub fn unfinished(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.st
            .waiting
            .iter()
            .chain(self.st.inbox.iter().map(|w| w.id))
            .chain(self.st.swapped.iter().map(|s| s.id))
            .chain(self.st.running.iter().filter(|s| !s.done).map(|s| s.id))
            .chain(self.st.handoff.held.iter().map(|s| s.id))
            .chain(self.st.handoff.arrived.iter().map(|s| s.id))
    }

    /// Blocks held by running sequences (for the conservation check).
    /// Blocks held by running sequences and the prefix cache (for the
    /// conservation check: must equal the allocator's used blocks).
    pub fn blocks_held(&self) -> u64 {
        let private: u64 = self
            .st
            .running
            .iter()
            .map(|s| (s.blocks + s.extra) as u64)
            .sum();
        private + self.st.cache.as_ref().map_or(0, |c| c.blocks()) + self.st.handoff.blocks()
    }

    /// KV blocks in active use: the allocator's used blocks less cached
    /// prefixes no sequence references (those are free to evict, as vLLM's
    /// KV-usage gauge counts them).
    #[inline]
    pub fn active_kv_blocks(&self) -> u64 {
        self.st.kv.used()
            - self
                .st
                .cache
                .as_ref()
                .map_or(0, |c| c.unreferenced_blocks())
    }

    /// The prefix cache, when prefix caching is on.
    pub fn prefix_cache(&self) -> Option<&PrefixCache> {
        self.st.cache.as_ref()
    }

    /// Blocks held in host memory by swapped sequences.
    pub fn host_blocks_held(&self) -> (u64, u64) {
        let held = self.st.swapped.iter().map(|s| s.blocks as u64).sum();
        (held, self.st.host_blocks())
    }

    #[inline(always)]
    fn account_kv(&mut self, now: SimTime) {
        let dt = now.since(self.last_kv_change) as u128;
        let active = self.active_kv_blocks();
        self.stats.kv_block_ns += dt * active as u128;
        self.stats.kv_peak_blocks = self.stats.kv_peak_blocks.max(active);
        self.last_kv_change = now;
    }

    /// Decides the next iteration at `now`. Returns its shape, or `None` when
    /// there is nothing to run.
    pub fn form_batch(&mut self, now: SimTime, reqs: &mut [Request]) -> Option<BatchShape> {
        debug_assert!(self.iteration_start.is_none());
        if let Some(shape) = self.form_run_step(now, reqs) {
            return Some(shape);
        }
        self.form_ordinary(now, reqs)
    }

    /// [`Self::form_batch`] when the iteration is not a decode run's step:
    /// the policy decides. Out of line, so that a run's step (most of a
    /// fleet's iterations) does not pay for this path's stack frame.
    #[inline(never)]
    fn form_ordinary(&mut self, now: SimTime, reqs: &mut [Request]) -> Option<BatchShape> {
        self.account_kv(now);
        if !self.st.handoff.arrived.is_empty() {
            self.join_arrived(now, reqs);
        }
        if self.st.cfg.recv_interval > 1 {
            self.st.receive();
        }
        self.st.begin_iteration();
        self.st.attr.begin(now, reqs);
        let mut shape = self.policy.schedule(&mut self.st, now, reqs);
        let closed = self.keeps_done;
        let cause = attribution::blocker(&self.st, &shape, closed);
        self.st.attr.decided(cause, &shape, now, reqs);
        if shape.is_empty() {
            return None;
        }
        self.st.count_recv_step(shape.prefill_tokens > 0);
        shape.idle_ns = now.since(self.last_finish);
        self.iteration_start = Some(now);
        self.stats.iterations += 1;
        self.stats.batch_seqs += shape.seqs() as u64;
        self.stats.batch_tokens += shape.tokens();
        Some(shape)
    }

    /// Applies the outcome of the iteration that started at the last
    /// `form_batch` and ends at `now`: prefill chunks land in the cache (a
    /// sequence whose prefill completes samples its next token), decoding
    /// sequences gain their tokens, finished ones release their blocks and are
    /// appended to `completed`. The gap each token waited since the
    /// sequence's previous one (including pauses and recompute preemptions)
    /// goes to `gaps`.
    pub fn finish_iteration(
        &mut self,
        now: SimTime,
        reqs: &mut [Request],
        completed: &mut Vec<RequestId>,
        gaps: &mut TokenGaps,
    ) -> IterationOutcome {
        if let Some(out) = self.finish_run_step(now, reqs, completed, gaps) {
            return out;
        }
        // The walk below compiled twice: a replica that neither decodes
        // speculatively nor tells its fairness policy of decoded tokens (every
        // run without those features) gives each decoding sequence one token
        // and charges no one, so its walk skips both questions per sequence.
        if self.speculation.is_none() && !self.st.waiting.charges_decode() {
            self.finish_ordinary::<true>(now, reqs, completed, gaps)
        } else {
            self.finish_ordinary::<false>(now, reqs, completed, gaps)
        }
    }

    /// [`Self::finish_iteration`] of an iteration the policy decided (not a
    /// decode run's step); out of line for the same reason as
    /// [`Self::form_ordinary`].
    #[inline(never)]
    fn finish_ordinary<const PLAIN: bool>(
        &mut self,
        now: SimTime,
        reqs: &mut [Request],
        completed: &mut Vec<RequestId>,
        gaps: &mut TokenGaps,
    ) -> IterationOutcome {
        let start = self
            .iteration_start
            .take()
            .expect("no iteration in progress");
        self.last_finish = now;
        self.stats.busy_ns += now.since(start);
        self.account_kv(now);
        let mut out = IterationOutcome {
            duration: now.since(start),
            ..IterationOutcome::default()
        };
        let keep_done = self.keeps_done;
        self.st.attr.advance(start, now);
        let st = &mut self.st;
        let charge_decode = !PLAIN && st.waiting.charges_decode();
        // Decodes whose previous token came at this iteration's start (the
        // common, back-to-back case) share one gap: counted, not searched.
        let mut back_to_back = 0u32;
        let mut running = std::mem::take(&mut st.running);
        // The walk goes by pointer (no index or bounds check per sequence)
        // and notes the few sequences that leave; the survivors are moved
        // down after it, a block copy per gap.
        let mut left: Vec<usize> = Vec::new();
        for (read, s) in running.iter_mut().enumerate() {
            let emitted = if s.chunk > 0 {
                st.land_chunk(s, now, reqs, gaps)
            } else if s.decode {
                s.decode = false;
                // Each sample of a group is a decoding sequence with its
                // own token (`fork`).
                out.decode_seqs += s.samples;
                if s.last_token == start.0 {
                    back_to_back += s.samples;
                } else {
                    gaps.add(now.0.saturating_sub(s.last_token), s.samples);
                }
                s.last_token = now.0;
                let n = match &mut self.speculation {
                    _ if PLAIN => 1,
                    Some(sp) => {
                        let n = sp.sample_tokens().min(s.remaining());
                        self.stats.spec_steps += 1;
                        self.stats.spec_tokens += n as u64;
                        n
                    }
                    None => 1,
                };
                // The fed token and the accepted drafts stay in the cache.
                s.kv_tokens += n;
                n
            } else {
                st.attr.mix.charge_idle(s, reqs);
                0
            };
            s.generated += emitted;
            if charge_decode && emitted > 0 {
                let tenant = reqs[s.id as usize].tenant;
                st.waiting.order.on_decode(tenant, emitted * s.samples);
            }
            if emitted == 0 || s.generated < s.output_tokens {
                continue;
            }
            if st.cfg.prefill_only && st.handoff.hand_off(s, now, &st.attr.mix, reqs) {
                // A disaggregated prefill replica: the KV leaves for a
                // decode replica (`handoff`).
                left.push(read);
                continue;
            }
            mark_completed(&st.attr.mix, &mut reqs[s.id as usize], s.generated, now);
            completed.push(s.id);
            if keep_done {
                s.done = true;
            } else {
                st.retire(s, reqs);
                left.push(read);
            }
        }
        if let Some(&first) = left.first() {
            let mut write = first;
            for (k, &gone) in left.iter().enumerate() {
                let next = left.get(k + 1).copied().unwrap_or(running.len());
                running.copy_within(gone + 1..next, write);
                write += next - gone - 1;
            }
            running.truncate(write);
        }
        st.running = running;
        if back_to_back > 0 {
            gaps.gaps.push((out.duration, back_to_back));
        }
        // A static batch ends when its last member does; then all slots free.
        if keep_done && st.running.iter().all(|s| s.done) {
            let mut batch = std::mem::take(&mut st.running);
            for s in &mut batch {
                st.retire(s, reqs);
            }
            batch.clear();
            st.running = batch;
        }
        out
    }

    /// The sequences of the iteration in progress (between `form_batch` and
    /// `finish_iteration`), in running order. Static batching's padding
    /// members are not listed: they compute nothing a live engine needs.
    pub fn batch(&self) -> impl Iterator<Item = BatchEntry> + '_ {
        self.st
            .running
            .iter()
            .filter(|s| s.chunk > 0 || s.decode)
            .map(|s| BatchEntry {
                id: s.id,
                chunk: s.chunk,
                kv_tokens: s.kv_tokens,
                decode: s.decode,
            })
    }

    /// Whether finished sequences still sit in the batch (static batching
    /// keeps them until the whole batch ends): their records are still read.
    #[inline]
    pub fn holds_finished(&self) -> bool {
        self.keeps_done && self.st.running.iter().any(|s| s.done)
    }

    /// Brings the KV-use integral up to `now` (at the end of a run).
    pub fn close(&mut self, now: SimTime) {
        self.end_decode_run();
        self.account_kv(now);
    }

    /// Whether requests with prompts longer than the token budget can be
    /// served (the policy splits prefills into chunks).
    pub fn splits_prefills(&self) -> bool {
        self.policy.splits_prefills()
    }

    /// Whether the policy reserves KV for whole requests at admission.
    pub fn reserves_whole_requests(&self) -> bool {
        self.policy.reserves_whole_requests()
    }
}

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
mod hybrid_props;
#[cfg(test)]
mod ledger_props;
