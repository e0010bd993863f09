//! One model server (a replica of one or more GPUs) with iteration-level
//! continuous batching, after Orca (Yu et al., OSDI'22) and vLLM (Kwon et al.,
//! SOSP'23): every iteration, running sequences each decode one token, and
//! waiting requests are admitted first-come-first-served while KV blocks, the
//! sequence limit and the token budget allow; their prompts are prefilled
//! whole in the same iteration (the first prefill of an iteration may use the
//! whole budget, as vLLM's prefill iterations do). When a decode cannot get a KV block, the most recently
//! admitted sequence is preempted: its blocks are freed and it returns to the
//! head of the queue to be recomputed later (vLLM's default preemption mode).
//!
//! Batch formation is a pure state machine over the queues and the allocator
//! (DESIGN.md, "One scheduler, two clocks"): [`Replica::form_batch`] decides an
//! iteration, [`Replica::finish_iteration`] applies its outcome. Who prices the
//! iteration — a cost model or a real forward pass — is the caller's business.

use crate::cost::BatchShape;
use crate::kv::BlockAllocator;
use crate::request::{Request, RequestId, Status};
use crate::scenario::EngineCfg;
use crate::time::{Nanos, SimTime};
use std::collections::VecDeque;

/// vLLM's block-manager watermark: admission leaves 1 % of KV blocks free so
/// that newly admitted sequences do not force immediate preemptions.
pub const WATERMARK_FRACTION: f64 = 0.01;

/// The waiting queue of a replica: FCFS, with preempted sequences returning
/// to the front. Fairness policies replace the ordering here.
#[derive(Debug, Default)]
pub struct WaitingQueue {
    queue: VecDeque<RequestId>,
}

impl WaitingQueue {
    pub fn push_back(&mut self, id: RequestId) {
        self.queue.push_back(id);
    }
    /// A preempted sequence goes back ahead of everything that arrived later.
    pub fn push_front(&mut self, id: RequestId) {
        self.queue.push_front(id);
    }
    pub fn front(&self) -> Option<RequestId> {
        self.queue.front().copied()
    }
    pub fn pop_front(&mut self) -> Option<RequestId> {
        self.queue.pop_front()
    }
    pub fn len(&self) -> usize {
        self.queue.len()
    }
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.queue.iter().copied()
    }
}

/// A sequence in the running batch: its hot state kept inline for the
/// per-iteration loops.
#[derive(Clone, Copy, Debug)]
struct RunningSeq {
    id: RequestId,
    output_tokens: u32,
    generated: u32,
    /// Tokens whose K/V are in the cache.
    kv_tokens: u32,
    blocks: u32,
    /// Tokens prefilled this iteration (0 when it decodes).
    prefill: u32,
}

/// What one finished iteration produced, for the metrics collector.
#[derive(Clone, Copy, Debug, Default)]
pub struct IterationOutcome {
    /// How long the iteration ran.
    pub duration: Nanos,
    /// Sequences that decoded one token (each with inter-token gap = iteration time).
    pub decode_tokens: u32,
    pub completed: u32,
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
    pub preemptions: u64,
    /// ∫ KV blocks used dt, in block·ns.
    pub kv_block_ns: u128,
}

/// One replica's scheduler state.
pub struct Replica {
    pub id: u32,
    waiting: WaitingQueue,
    running: Vec<RunningSeq>,
    kv: BlockAllocator,
    block_size: u32,
    max_num_seqs: usize,
    max_batched_tokens: u64,
    watermark_blocks: u64,
    /// Start of the iteration in progress, if any.
    iteration_start: Option<SimTime>,
    last_kv_change: SimTime,
    pub stats: ReplicaStats,
}

impl Replica {
    pub fn new(id: u32, engine: &EngineCfg, kv_blocks: u64) -> Replica {
        Replica {
            id,
            waiting: WaitingQueue::default(),
            running: Vec::with_capacity(engine.max_num_seqs.min(4096) as usize),
            kv: BlockAllocator::new(kv_blocks),
            block_size: engine.block_size,
            max_num_seqs: engine.max_num_seqs as usize,
            max_batched_tokens: engine.max_batched_tokens as u64,
            watermark_blocks: (kv_blocks as f64 * WATERMARK_FRACTION) as u64,
            iteration_start: None,
            last_kv_change: SimTime::ZERO,
            stats: ReplicaStats::default(),
        }
    }

    /// Blocks admission must leave free (exposed so arrival checks agree).
    pub fn watermark_blocks(&self) -> u64 {
        self.watermark_blocks
    }

    pub fn enqueue(&mut self, id: RequestId) {
        self.waiting.push_back(id);
    }

    pub fn is_busy(&self) -> bool {
        self.iteration_start.is_some()
    }

    pub fn has_work(&self) -> bool {
        !self.running.is_empty() || !self.waiting.is_empty()
    }

    /// Requests routed here and not finished: waiting + running.
    pub fn outstanding(&self) -> usize {
        self.waiting.len() + self.running.len()
    }

    pub fn waiting_len(&self) -> usize {
        self.waiting.len()
    }

    pub fn running_len(&self) -> usize {
        self.running.len()
    }

    pub fn kv(&self) -> &BlockAllocator {
        &self.kv
    }

    /// Requests still queued or running (for the in-flight count at the horizon).
    pub fn unfinished(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.waiting.iter().chain(self.running.iter().map(|s| s.id))
    }

    /// Blocks held by running sequences (for the conservation check).
    pub fn blocks_held(&self) -> u64 {
        self.running.iter().map(|s| s.blocks as u64).sum()
    }

    fn account_kv(&mut self, now: SimTime) {
        let dt = now.since(self.last_kv_change) as u128;
        self.stats.kv_block_ns += dt * self.kv.used() as u128;
        self.last_kv_change = now;
    }

    /// Decides the next iteration at `now`: secures a KV slot for every running
    /// sequence's next token (preempting from the back when blocks run out),
    /// then admits waiting requests FCFS. Returns the batch shape, or `None`
    /// when there is nothing to run.
    pub fn form_batch(&mut self, now: SimTime, reqs: &mut [Request]) -> Option<BatchShape> {
        debug_assert!(self.iteration_start.is_none());
        self.account_kv(now);
        let bs = self.block_size;

        // 1. Decodes: one more KV slot each, in admission order.
        let mut i = 0;
        while i < self.running.len() {
            let s = self.running[i];
            if s.kv_tokens + 1 > s.blocks * bs {
                loop {
                    if self.kv.allocate(1) {
                        self.running[i].blocks += 1;
                        break;
                    }
                    let victim_is_self = self.running.len() - 1 == i;
                    self.preempt_last(now, reqs);
                    if victim_is_self {
                        break;
                    }
                }
            }
            i += 1;
        }
        let mut shape = BatchShape::default();
        for s in &mut self.running {
            s.prefill = 0;
            shape.add_decode(s.kv_tokens as u64 + 1);
        }

        // 2. Admission, FCFS, while memory, sequence slots and token budget allow.
        let mut budget = self
            .max_batched_tokens
            .saturating_sub(self.running.len() as u64);
        while let Some(id) = self.waiting.front() {
            if self.running.len() >= self.max_num_seqs {
                break;
            }
            let r = &reqs[id as usize];
            // A preempted sequence recomputes its prompt and what it generated.
            let n = (r.prompt_tokens + r.generated) as u64;
            // The first prefill of an iteration is never held back by the
            // decodes' share of the budget: without chunking, vLLM gives a
            // prefill its own iteration with the whole budget, and a prompt
            // that waited for the decodes to drain would stall the queue.
            // (It can only exceed the budget as a recompute after preemption.)
            if n > budget && shape.prefill_seqs > 0 {
                break;
            }
            let blocks = BlockAllocator::blocks_for(n, bs as u64);
            // The watermark guards running sequences; an empty replica has none.
            let reserve = if self.running.is_empty() {
                0
            } else {
                self.watermark_blocks
            };
            if self.kv.free() < blocks + reserve || !self.kv.allocate(blocks) {
                break;
            }
            self.waiting.pop_front();
            let r = &mut reqs[id as usize];
            if r.first_scheduled.is_none() {
                r.first_scheduled = Some(now);
            }
            self.running.push(RunningSeq {
                id,
                output_tokens: r.output_tokens,
                generated: r.generated,
                kv_tokens: 0,
                blocks: blocks as u32,
                prefill: n as u32,
            });
            shape.add_prefill(n, 0);
            budget = budget.saturating_sub(n);
        }

        if shape.is_empty() {
            return None;
        }
        self.iteration_start = Some(now);
        self.stats.iterations += 1;
        self.stats.batch_seqs += shape.seqs() as u64;
        self.stats.batch_tokens += shape.tokens();
        Some(shape)
    }

    /// Preempts the most recently admitted running sequence by recomputation.
    fn preempt_last(&mut self, now: SimTime, reqs: &mut [Request]) {
        let s = self.running.pop().expect("preemption with an empty batch");
        self.kv.release(s.blocks as u64);
        let r = &mut reqs[s.id as usize];
        r.generated = s.generated;
        r.preemptions += 1;
        r.last_token = now;
        self.stats.preemptions += 1;
        self.waiting.push_front(s.id);
    }

    /// Applies the outcome of the iteration that started at the last
    /// `form_batch` and ends at `now`: every sequence in the batch gains one
    /// token; finished ones release their blocks and are appended to
    /// `completed`. Gaps between tokens of
    /// sequences resumed after preemption go to `resumed_gap`.
    pub fn finish_iteration(
        &mut self,
        now: SimTime,
        reqs: &mut [Request],
        completed: &mut Vec<RequestId>,
        mut resumed_gap: impl FnMut(Nanos),
    ) -> IterationOutcome {
        let start = self
            .iteration_start
            .take()
            .expect("no iteration in progress");
        self.stats.busy_ns += now.since(start);
        self.account_kv(now);
        let mut out = IterationOutcome {
            duration: now.since(start),
            ..IterationOutcome::default()
        };
        let kv = &mut self.kv;
        self.running.retain_mut(|s| {
            if s.prefill > 0 {
                s.kv_tokens = s.prefill;
                let r = &mut reqs[s.id as usize];
                if s.generated == 0 {
                    r.first_token = Some(now);
                } else {
                    resumed_gap(now.since(r.last_token));
                }
            } else {
                s.kv_tokens += 1;
                out.decode_tokens += 1;
            }
            s.generated += 1;
            if s.generated >= s.output_tokens {
                kv.release(s.blocks as u64);
                let r = &mut reqs[s.id as usize];
                r.generated = s.generated;
                r.finished = Some(now);
                r.last_token = now;
                r.status = Status::Completed;
                out.completed += 1;
                completed.push(s.id);
                false
            } else {
                true
            }
        });
        out
    }

    /// Brings the KV-use integral up to `now` (at the end of a run).
    pub fn close(&mut self, now: SimTime) {
        self.account_kv(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(max_num_seqs: u32, max_batched_tokens: u32, block_size: u32) -> EngineCfg {
        EngineCfg {
            max_num_seqs,
            max_batched_tokens,
            block_size,
            gpu_memory_utilization: 0.9,
            max_model_len: None,
        }
    }

    fn run_to_end(rep: &mut Replica, reqs: &mut [Request]) -> (u64, Vec<BatchShape>) {
        let mut t = SimTime(0);
        let mut shapes = vec![];
        while let Some(shape) = rep.form_batch(t, reqs) {
            shapes.push(shape);
            t = t.plus(1000);
            rep.finish_iteration(t, reqs, &mut vec![], |_| {});
        }
        (t.0, shapes)
    }

    #[test]
    fn admits_fcfs_within_token_budget_and_completes_exact_tokens() {
        let mut reqs: Vec<Request> = (0..3).map(|_| Request::new(SimTime(0), 100, 3)).collect();
        let mut rep = Replica::new(0, &engine(8, 250, 16), 1000);
        for i in 0..3 {
            rep.enqueue(i);
        }
        let (_, shapes) = run_to_end(&mut rep, &mut reqs);
        // Budget 250: two 100-token prompts fit in the first iteration, the third next.
        assert_eq!(shapes[0].prefill_seqs, 2);
        assert_eq!(shapes[1].prefill_seqs, 1);
        assert_eq!(shapes[1].decode_seqs, 2);
        for r in &reqs {
            assert_eq!(r.status, Status::Completed);
            assert_eq!(r.generated, 3);
        }
        assert_eq!(rep.kv().used(), 0);
        assert_eq!(rep.kv().granted(), rep.kv().freed());
    }

    #[test]
    fn decode_out_of_blocks_preempts_most_recent_and_recomputes() {
        // 4 blocks of 4 tokens. Two requests of prompt 4 and output 6 each
        // need up to 3 blocks each: they cannot both finish without preemption.
        let mut reqs: Vec<Request> = (0..2).map(|_| Request::new(SimTime(0), 4, 6)).collect();
        let mut rep = Replica::new(0, &engine(8, 100, 4), 4);
        rep.enqueue(0);
        rep.enqueue(1);
        let (_, shapes) = run_to_end(&mut rep, &mut reqs);
        assert!(reqs[1].preemptions >= 1, "the later request is the victim");
        assert_eq!(reqs[0].preemptions, 0);
        // The recompute prefill covers prompt + generated tokens.
        assert!(shapes.iter().any(|s| s.prefill_tokens > 4));
        for r in &reqs {
            assert_eq!(r.status, Status::Completed);
            assert_eq!(r.generated, 6);
        }
        assert_eq!(rep.kv().granted(), rep.kv().freed());
        assert_eq!(
            rep.stats.preemptions,
            reqs.iter().map(|r| r.preemptions as u64).sum::<u64>()
        );
    }

    #[test]
    fn max_num_seqs_caps_the_batch() {
        let mut reqs: Vec<Request> = (0..5).map(|_| Request::new(SimTime(0), 10, 2)).collect();
        let mut rep = Replica::new(0, &engine(2, 1000, 16), 100);
        for i in 0..5 {
            rep.enqueue(i);
        }
        let (_, shapes) = run_to_end(&mut rep, &mut reqs);
        assert!(shapes.iter().all(|s| s.seqs() <= 2));
        assert!(reqs.iter().all(|r| r.status == Status::Completed));
    }
}
