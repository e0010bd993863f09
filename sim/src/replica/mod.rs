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
pub mod policy;
pub mod speculative;

use crate::attribution::Component;
use crate::cost::BatchShape;
use crate::kv::{BlockAllocator, PrefixCache};
use crate::request::{Request, RequestId, Status};
use crate::scenario::{EngineCfg, PreemptionMode};
use crate::tenancy;
use crate::time::{Nanos, SimTime};
use policy::BatchPolicy;
use speculative::Speculation;
use std::collections::VecDeque;
use tenancy::fairness::{FairnessPolicy, Fcfs, Waiting};

/// vLLM's block-manager watermark: admission leaves 1 % of KV blocks free so
/// that newly admitted sequences do not force immediate preemptions.
pub const WATERMARK_FRACTION: f64 = 0.01;

/// The waiting queue of a replica. Its order is a fairness policy's
/// (`tenancy::fairness`; FCFS, with preempted sequences returning to the
/// front, unless the scenario names another), and it keeps per-tenant counts
/// and the prefill tokens waiting for admission control.
pub struct WaitingQueue {
    order: Box<dyn FairnessPolicy>,
    per_tenant: Vec<u32>,
    tokens: u64,
}

impl Default for WaitingQueue {
    fn default() -> Self {
        WaitingQueue {
            order: Box::new(Fcfs::default()),
            per_tenant: Vec::new(),
            tokens: 0,
        }
    }
}

impl std::fmt::Debug for WaitingQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingQueue")
            .field("len", &self.order.len())
            .finish()
    }
}

impl WaitingQueue {
    fn count(&mut self, w: &Waiting) {
        *tenancy::fairness::queue_of(&mut self.per_tenant, w.tenant) += 1;
        self.tokens += w.tokens as u64;
    }
    pub fn push_back(&mut self, w: Waiting) {
        self.count(&w);
        self.order.push_back(w);
    }
    /// A preempted sequence goes back ahead of everything that arrived later.
    pub fn push_front(&mut self, w: Waiting) {
        self.count(&w);
        self.order.push_front(w);
    }
    pub fn front(&self) -> Option<RequestId> {
        self.order.front().map(|w| w.id)
    }
    pub fn pop_front(&mut self) -> Option<RequestId> {
        let w = self.order.pop_front()?;
        self.per_tenant[w.tenant as usize] -= 1;
        self.tokens -= w.tokens as u64;
        Some(w.id)
    }
    pub fn len(&self) -> usize {
        self.order.len()
    }
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.order.ids().into_iter()
    }
    /// Requests of `tenant` waiting.
    pub fn tenant_len(&self, tenant: u32) -> u32 {
        self.per_tenant.get(tenant as usize).copied().unwrap_or(0)
    }
    /// Prefill tokens of every waiting request.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }
    /// Takes `id` out of the queue (its client went away); false if absent.
    pub fn remove(&mut self, id: RequestId) -> bool {
        match self.order.remove(id) {
            Some(w) => {
                self.per_tenant[w.tenant as usize] -= 1;
                self.tokens -= w.tokens as u64;
                true
            }
            None => false,
        }
    }
}

/// A sequence in the running batch: its hot state kept inline for the
/// per-iteration loops.
#[derive(Clone, Copy, Debug)]
pub struct RunningSeq {
    pub id: RequestId,
    pub output_tokens: u32,
    pub generated: u32,
    /// Tokens whose K/V are in the cache.
    pub kv_tokens: u32,
    /// Private KV blocks (allocated to this sequence alone).
    pub blocks: u32,
    /// Leading blocks shared through the prefix cache (referenced, not owned).
    pub shared: u32,
    /// Cached tokens needed before the next token can be sampled: prompt +
    /// generated at (re)admission. Below it the sequence is still prefilling.
    pub prefill_target: u32,
    /// Prefill tokens scheduled this iteration.
    pub chunk: u32,
    /// Decodes this iteration.
    pub decode: bool,
    /// Its blocks cover the whole request (Orca / static reservation): it never
    /// needs another block and is never preempted.
    pub reserved: bool,
    /// Finished, but kept in a static batch as padding until the batch ends.
    pub done: bool,
    /// When it last received a token (ns), for inter-token gaps.
    pub last_token: u64,
}

impl RunningSeq {
    /// Tokens its blocks (shared + private) can hold.
    #[inline]
    pub fn capacity(&self, block_size: u32) -> u32 {
        (self.shared + self.blocks) * block_size
    }

    #[inline]
    pub fn prefilling(&self) -> bool {
        self.kv_tokens < self.prefill_target
    }

    /// Output tokens still to produce.
    #[inline]
    pub fn remaining(&self) -> u32 {
        self.output_tokens.saturating_sub(self.generated)
    }
}

/// Engine limits the policies work within.
#[derive(Clone, Debug)]
pub struct SchedConfig {
    pub block_size: u32,
    pub max_num_seqs: usize,
    pub max_batched_tokens: u64,
    pub watermark_blocks: u64,
    pub preemption: PreemptionMode,
    /// Host-memory blocks available for swapped-out KV.
    pub swap_capacity_blocks: u64,
    /// Bytes of one KV block on one GPU (what a swap moves per GPU).
    pub block_bytes: f64,
    /// Speculative draft length k (0 = off).
    pub draft_tokens: u32,
}

/// Queues and memory of one replica: what batch policies manipulate.
pub struct SchedState {
    pub waiting: WaitingQueue,
    /// Sequences whose KV was swapped to host memory, resumed before any new
    /// admission (vLLM v0 order: running, swapped, waiting).
    pub swapped: VecDeque<RunningSeq>,
    pub running: Vec<RunningSeq>,
    pub kv: BlockAllocator,
    /// Cached prompt prefixes, when prefix caching is on. Its blocks are
    /// counted as used by `kv`.
    pub cache: Option<PrefixCache>,
    pub cfg: SchedConfig,
    host_blocks_used: u64,
    /// Blocks swapped out / in during the iteration being formed.
    swap_blocks: u64,
    /// Whether the iteration being formed preempted anything.
    pub preempted_now: bool,
    /// The shape being built as sequences are marked; invalidated when a
    /// marked sequence is preempted (then [`Self::shape`] rebuilds it).
    acc: BatchShape,
    acc_valid: bool,
    pub preemptions: u64,
    pub swap_outs: u64,
    /// Latency attribution: the queue clock and the iteration's token mix.
    pub attr: attribution::QueueClock,
}

impl SchedState {
    fn new(cfg: SchedConfig, kv_blocks: u64, cache: Option<PrefixCache>) -> SchedState {
        SchedState {
            waiting: WaitingQueue::default(),
            swapped: VecDeque::new(),
            running: Vec::with_capacity(cfg.max_num_seqs.min(4096)),
            kv: BlockAllocator::new(kv_blocks),
            cache,
            cfg,
            host_blocks_used: 0,
            swap_blocks: 0,
            preempted_now: false,
            acc: BatchShape::default(),
            acc_valid: true,
            preemptions: 0,
            swap_outs: 0,
            attr: attribution::QueueClock::default(),
        }
    }

    /// Clears the per-iteration counters before a policy decides. (The
    /// per-sequence marks were cleared when the last iteration finished.)
    pub fn begin_iteration(&mut self) {
        self.swap_blocks = 0;
        self.preempted_now = false;
        self.acc = BatchShape::default();
        self.acc_valid = true;
        debug_assert!(self.running.iter().all(|s| s.chunk == 0 && !s.decode));
    }

    /// KV tokens a decode step of `s` writes: its last token plus the drafts
    /// being verified, never past the request's last cached token.
    #[inline]
    fn decode_write(&self, s: &RunningSeq) -> u32 {
        (1 + self.cfg.draft_tokens).min(s.remaining()).max(1)
    }

    /// Grows running sequence `i` to hold `tokens` cached tokens, preempting
    /// the most recently admitted sequences while blocks run out. Returns
    /// false when `i` itself was preempted (it is then gone from `running`).
    pub fn grow(&mut self, i: usize, tokens: u32, now: SimTime, reqs: &mut [Request]) -> bool {
        let bs = self.cfg.block_size;
        let need = tokens.div_ceil(bs).saturating_sub(self.running[i].shared);
        while self.running[i].blocks < need {
            let more = (need - self.running[i].blocks) as u64;
            if self.allocate(more) {
                self.running[i].blocks = need;
                return true;
            }
            let victim_is_self = self.preempt_last_unreserved(now, reqs) == Some(i);
            if victim_is_self {
                return false;
            }
            if i >= self.running.len() {
                return false;
            }
        }
        true
    }

    /// Grants `n` blocks, evicting unreferenced cached prefixes (LRU) first
    /// when free blocks run short. All or nothing.
    pub fn allocate(&mut self, n: u64) -> bool {
        self.make_free(n) && self.kv.allocate(n)
    }

    /// Evicts cached prefixes until `n` blocks are free, if it can.
    fn make_free(&mut self, n: u64) -> bool {
        let free = self.kv.free();
        if free >= n {
            return true;
        }
        let Some(cache) = &mut self.cache else {
            return false;
        };
        if free + cache.evictable_blocks() < n {
            return false;
        }
        let evicted = cache.evict(n - free);
        self.kv.release(evicted);
        true
    }

    /// Ends a sequence's hold on its blocks (completion or preemption): full
    /// blocks the workload hashed go to the prefix cache, references to
    /// shared blocks are dropped, the rest is freed.
    fn retire(&mut self, s: &mut RunningSeq, reqs: &[Request]) {
        if let Some(cache) = &mut self.cache {
            let r = &reqs[s.id as usize];
            adopt_full_blocks(cache, s, r, self.cfg.block_size);
            cache.release(&r.prefix_hashes[..s.shared as usize]);
            s.shared = 0;
        }
        self.kv.release(s.blocks as u64);
        s.blocks = 0;
    }

    /// Called when a sequence's prefill completes: its full prompt blocks
    /// become shareable at once (vLLM caches blocks as they fill).
    fn publish_prefill(&mut self, s: &mut RunningSeq, reqs: &[Request]) {
        if let Some(cache) = &mut self.cache {
            adopt_full_blocks(cache, s, &reqs[s.id as usize], self.cfg.block_size);
        }
    }

    /// Adds what a marked sequence contributes to the iteration's shape.
    #[inline]
    fn contribute(&mut self, s: &RunningSeq) {
        if s.chunk > 0 {
            self.acc.add_prefill(s.chunk as u64, s.kv_tokens as u64);
        } else if s.decode {
            if self.cfg.draft_tokens > 0 {
                let drafts = self.decode_write(s) - 1;
                self.acc.add_verify(drafts as u64, s.kv_tokens as u64);
            } else {
                self.acc.add_decode(s.kv_tokens as u64 + 1);
            }
        } else if s.done {
            // Static batching keeps finished members as padding: they
            // still occupy a slot of every step until the batch ends.
            self.acc.add_decode(s.kv_tokens as u64 + 1);
        }
    }

    /// Gives running sequence `i` a prefill chunk this iteration (its blocks
    /// must already cover it, see [`Self::grow`]).
    pub fn set_chunk(&mut self, i: usize, chunk: u32) {
        self.running[i].chunk = chunk;
        let s = self.running[i];
        self.contribute(&s);
    }

    /// Marks every running, fully prefilled sequence as decoding this
    /// iteration and secures its KV slots, preempting from the back when
    /// blocks run out (vLLM: the lowest-priority, i.e. latest admitted).
    /// Returns the number of decoding sequences.
    pub fn schedule_decodes(&mut self, now: SimTime, reqs: &mut [Request]) -> u64 {
        let bs = self.cfg.block_size;
        let k = self.cfg.draft_tokens;
        let mut decodes = 0;
        let mut from = 0;
        loop {
            // Fast path: most sequences fit their next token(s) in the blocks
            // they hold, so walk with an iterator until one needs a block.
            let mut needs_block = None;
            for (j, s) in self.running[from..].iter_mut().enumerate() {
                if s.prefilling() {
                    continue;
                }
                if s.done {
                    self.acc.add_decode(s.kv_tokens as u64 + 1);
                    continue;
                }
                let write = (1 + k).min(s.remaining()).max(1);
                if s.kv_tokens + write > s.capacity(bs) && !s.reserved {
                    needs_block = Some((from + j, s.kv_tokens + write));
                    break;
                }
                s.decode = true;
                decodes += 1;
                if k == 0 {
                    self.acc.add_decode(s.kv_tokens as u64 + 1);
                } else {
                    self.acc.add_verify(write as u64 - 1, s.kv_tokens as u64);
                }
            }
            // Slow path: allocate, preempting from the back if blocks run out.
            let Some((i, tokens)) = needs_block else {
                break;
            };
            if !self.grow(i, tokens, now, reqs) {
                break; // `i` itself was preempted: it was the last one
            }
            let s = &mut self.running[i];
            s.decode = true;
            decodes += 1;
            let write = tokens - s.kv_tokens;
            if k == 0 {
                self.acc.add_decode(s.kv_tokens as u64 + 1);
            } else {
                self.acc.add_verify(write as u64 - 1, s.kv_tokens as u64);
            }
            from = i + 1;
        }
        decodes
    }

    /// Preempts the most recently admitted sequence that holds no up-front
    /// reservation. Returns its former index.
    fn preempt_last_unreserved(&mut self, now: SimTime, reqs: &mut [Request]) -> Option<usize> {
        let idx = self.running.iter().rposition(|s| !s.reserved && !s.done)?;
        self.preempt_at(idx, true, now, reqs);
        Some(idx)
    }

    /// Preempts running sequence `idx` (recompute, or swap when configured,
    /// allowed and host memory allows).
    fn preempt_at(&mut self, idx: usize, allow_swap: bool, now: SimTime, reqs: &mut [Request]) {
        let mut s = self.running.remove(idx);
        let decoding = !s.prefilling();
        if s.decode || s.chunk > 0 {
            self.acc_valid = false;
        }
        let whole = (s.blocks + s.shared) as u64;
        let swap = allow_swap
            && self.cfg.preemption == PreemptionMode::Swap
            && self.host_blocks_used + whole <= self.cfg.swap_capacity_blocks
            && !s.prefilling();
        if swap {
            // The whole KV (its shared prefix included) is copied to host
            // memory; on the device the sequence lets go of everything, so
            // swapped sequences can never pin the memory they need to return.
            self.kv.release(s.blocks as u64);
            if let Some(cache) = &mut self.cache {
                cache.release(&reqs[s.id as usize].prefix_hashes[..s.shared as usize]);
            }
            s.blocks += s.shared;
            s.shared = 0;
        } else {
            // Its full blocks stay in the prefix cache (when on), so the
            // recomputation can find much of its own context there.
            self.retire(&mut s, reqs);
            s.kv_tokens = 0;
        }
        let r = &mut reqs[s.id as usize];
        self.attr.preempted(decoding, r, now);
        r.generated = s.generated;
        r.preemptions += 1;
        r.last_token = now;
        self.preemptions += 1;
        self.preempted_now = true;
        if swap {
            // Swap: the KV moves to host memory over PCIe; the sequence keeps
            // its progress and resumes without recomputation (vLLM v0 swap mode).
            self.host_blocks_used += s.blocks as u64;
            self.swap_blocks += s.blocks as u64;
            self.swap_outs += 1;
            self.swapped.push_front(RunningSeq {
                chunk: 0,
                decode: false,
                ..s
            });
        } else {
            // Recompute (vLLM's default): blocks are dropped and the sequence
            // re-prefills prompt + generated tokens when readmitted.
            let r = &reqs[s.id as usize];
            self.waiting.push_front(Waiting {
                id: s.id,
                tenant: r.tenant,
                tokens: r.prompt_tokens + r.generated,
                output: r.output_tokens,
            });
        }
    }

    /// Under a fairness policy that lets urgent requests preempt (strict
    /// priority with `preempt`), preempts the least urgent, most recently
    /// admitted running sequence of a class less urgent than the head's.
    /// Returns whether it preempted one.
    fn preempt_for_head(&mut self, now: SimTime, reqs: &mut [Request]) -> bool {
        let Some(head) = self.waiting.front() else {
            return false;
        };
        let order = &self.waiting.order;
        let Some(level) = order.preemption_level(reqs[head as usize].tenant) else {
            return false;
        };
        let victim = self
            .running
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.reserved && !s.done)
            .filter_map(|(i, s)| {
                let l = order.preemption_level(reqs[s.id as usize].tenant)?;
                (l > level).then_some((l, i))
            })
            .max();
        match victim {
            Some((_, i)) => {
                // Recompute, never swap: swapped sequences resume before any
                // admission, so a swapped victim would block the very head
                // it made room for.
                self.preempt_at(i, false, now, reqs);
                true
            }
            None => false,
        }
    }

    /// Brings swapped-out sequences back while memory and sequence slots
    /// allow, FCFS; each resumes decoding this iteration. Returns how many.
    pub fn swap_in(&mut self) -> u64 {
        let mut resumed = 0;
        while let Some(s) = self.swapped.front().copied() {
            if self.running.len() >= self.cfg.max_num_seqs {
                break;
            }
            let write = self.decode_write(&s);
            let need = ((s.kv_tokens + write).div_ceil(self.cfg.block_size) - s.shared) as u64;
            let reserve = if self.running.is_empty() {
                0
            } else {
                self.cfg.watermark_blocks
            };
            if !self.make_free(need + reserve) || !self.kv.allocate(need) {
                break;
            }
            self.swapped.pop_front();
            self.attr.swapped_in(s.id);
            self.host_blocks_used -= s.blocks as u64;
            self.swap_blocks += s.blocks as u64;
            let s = RunningSeq {
                blocks: need as u32,
                decode: true,
                ..s
            };
            self.running.push(s);
            self.contribute(&s);
            resumed += 1;
        }
        resumed
    }

    /// Tokens the head of the waiting queue must prefill: its prompt plus,
    /// after a recompute preemption, what it had generated.
    pub fn head_prefill_tokens(&self, reqs: &[Request]) -> Option<u32> {
        let r = &reqs[self.waiting.front()? as usize];
        let target = r.prompt_tokens + r.generated;
        Some(target - self.cached_prefix_blocks(r, target) * self.cfg.block_size)
    }

    /// Leading blocks of `r` that the prefix cache can serve, leaving at
    /// least one token to compute (the last position must be run to sample
    /// from, as in vLLM).
    fn cached_prefix_blocks(&self, r: &Request, target: u32) -> u32 {
        match &self.cache {
            Some(cache) if !r.prefix_hashes.is_empty() => {
                let shareable = ((target - 1) / self.cfg.block_size) as usize;
                let n = shareable.min(r.prefix_hashes.len());
                cache.match_len(&r.prefix_hashes[..n]) as u32
            }
            _ => 0,
        }
    }

    /// Admits the head of the waiting queue with a first prefill chunk of
    /// `chunk` tokens (on top of whatever prefix the cache serves: see
    /// [`Self::head_prefill_tokens`]). With `reserve_whole`, blocks for the
    /// whole request (prompt + every output token) are taken now (Orca,
    /// static batching); otherwise just those the chunk fills. Fails,
    /// changing nothing, when sequence slots or blocks (beyond the
    /// watermark) are short.
    /// Under strict priority with preemption, a head that does not fit
    /// preempts less urgent running sequences until it does (or none is left).
    pub fn admit_head(
        &mut self,
        chunk: u32,
        reserve_whole: bool,
        now: SimTime,
        reqs: &mut [Request],
    ) -> bool {
        loop {
            if self.try_admit_head(chunk, reserve_whole, now, reqs) {
                return true;
            }
            if !self.preempt_for_head(now, reqs) {
                return false;
            }
        }
    }

    fn try_admit_head(
        &mut self,
        chunk: u32,
        reserve_whole: bool,
        now: SimTime,
        reqs: &mut [Request],
    ) -> bool {
        let Some(id) = self.waiting.front() else {
            return false;
        };
        if self.running.len() >= self.cfg.max_num_seqs {
            self.attr.blocked = Some(Component::QueueMaxSeqs);
            return false;
        }
        let bs = self.cfg.block_size;
        let r = &reqs[id as usize];
        let target = r.prompt_tokens + r.generated;
        let shared = self.cached_prefix_blocks(r, target);
        let cached = shared * bs;
        let tokens = if reserve_whole {
            // The last output token is never written to the cache.
            r.prompt_tokens + r.output_tokens - 1
        } else {
            cached + chunk
        };
        let blocks = (tokens.max(cached + chunk).div_ceil(bs) - shared) as u64;
        // The watermark guards running sequences; an empty replica has none.
        let reserve = if self.running.is_empty() {
            0
        } else {
            self.cfg.watermark_blocks
        };
        // Take the references first, so eviction cannot take our own hits.
        if let Some(cache) = &mut self.cache {
            cache.acquire(&r.prefix_hashes[..shared as usize]);
        }
        if !self.make_free(blocks + reserve) || !self.kv.allocate(blocks) {
            if let Some(cache) = &mut self.cache {
                cache.release(&reqs[id as usize].prefix_hashes[..shared as usize]);
            }
            self.attr.blocked = Some(Component::QueueKv);
            return false;
        }
        self.waiting.pop_front();
        let r = &mut reqs[id as usize];
        self.attr.admitted(r, now);
        if r.first_scheduled.is_none() {
            r.first_scheduled = Some(now);
            if let Some(cache) = &mut self.cache {
                let st = &mut cache.stats;
                let prompt_blocks = (r.prompt_tokens / bs) as u64;
                st.lookup_tokens += r.prompt_tokens as u64;
                st.hit_tokens += cached as u64;
                st.lookup_blocks += prompt_blocks.min(r.prefix_hashes.len() as u64);
                st.hit_blocks += shared as u64;
            }
        }
        let s = RunningSeq {
            id,
            output_tokens: r.output_tokens,
            generated: r.generated,
            kv_tokens: cached,
            blocks: blocks as u32,
            shared,
            prefill_target: target,
            chunk,
            decode: false,
            reserved: reserve_whole,
            done: false,
            last_token: 0,
        };
        self.running.push(s);
        self.contribute(&s);
        true
    }

    /// The shape of the iteration the marks describe; prefill chunks are
    /// padded to `pad_prefill_to` tokens when given (static batching).
    pub fn shape(&mut self, pad_prefill_to: Option<u32>) -> BatchShape {
        if pad_prefill_to.is_some() || !self.acc_valid {
            self.acc = BatchShape::default();
            for i in 0..self.running.len() {
                let mut s = self.running[i];
                if s.chunk > 0 {
                    s.chunk = pad_prefill_to.map_or(s.chunk, |p| p.max(s.chunk));
                }
                self.contribute(&s);
            }
            self.acc_valid = true;
        }
        let mut shape = self.acc;
        shape.swap_bytes = self.swap_blocks as f64 * self.cfg.block_bytes;
        shape
    }

    /// Blocks in host memory (swapped-out sequences).
    pub fn host_blocks(&self) -> u64 {
        self.host_blocks_used
    }
}

/// Hands a sequence's full private blocks that the workload hashed over to
/// the prefix cache, in order from its first unshared block, stopping at the
/// first one already cached by someone else (that copy stays private). A
/// handed-over block stays referenced by the sequence.
fn adopt_full_blocks(cache: &mut PrefixCache, s: &mut RunningSeq, r: &Request, block_size: u32) {
    let full = ((s.kv_tokens / block_size) as usize).min(r.prefix_hashes.len());
    let pinnable = (r.pinnable_tokens / block_size) as usize;
    let j = s.shared as usize;
    if j >= full {
        return;
    }
    let end = full.min(j + s.blocks as usize);
    let parent = (j > 0).then(|| r.prefix_hashes[j - 1]);
    let n = cache.insert_run(&r.prefix_hashes[j..end], parent, pinnable.saturating_sub(j));
    s.shared += n as u32;
    s.blocks -= n as u32;
}

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
    #[inline]
    fn add(&mut self, gap: Nanos) {
        if let Some(last) = self.gaps.last_mut() {
            if last.0 == gap {
                last.1 += 1;
                return;
            }
        }
        match self.gaps.iter_mut().find(|(g, _)| *g == gap) {
            Some(e) => e.1 += 1,
            None => self.gaps.push((gap, 1)),
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
    speculation: Option<Speculation>,
    /// Start of the iteration in progress, if any.
    iteration_start: Option<SimTime>,
    /// End of the last iteration (the run's start before the first).
    last_finish: SimTime,
    last_kv_change: SimTime,
    pub stats: ReplicaStats,
}

impl Replica {
    /// A replica with `kv_blocks` KV blocks of `block_bytes` bytes per GPU.
    /// `seed` seeds its own random streams (speculative acceptance).
    pub fn new(
        id: u32,
        engine: &EngineCfg,
        kv_blocks: u64,
        block_bytes: f64,
        seed: u64,
    ) -> Replica {
        let swap_capacity_blocks = if block_bytes > 0.0 {
            (engine.swap_space_gib * crate::catalog::GIB / block_bytes) as u64
        } else {
            0
        };
        let speculation = engine
            .speculative
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
        };
        Replica {
            id,
            st: SchedState::new(
                cfg,
                kv_blocks,
                engine
                    .prefix_caching
                    .then(|| PrefixCache::new(engine.pinned_prefix_blocks)),
            ),
            policy: policy::build(engine.policy),
            speculation,
            iteration_start: None,
            last_finish: SimTime::ZERO,
            last_kv_change: SimTime::ZERO,
            stats: ReplicaStats::default(),
        }
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
        self.st.waiting.push_back(w);
        self.st.attr.enqueued(id);
    }

    /// Replaces the waiting queue's order (before any request is queued).
    pub fn set_fairness(&mut self, order: Box<dyn FairnessPolicy>) {
        debug_assert!(self.st.waiting.is_empty());
        self.st.waiting.order = order;
    }

    /// The waiting queue (per-tenant counts, tokens) for admission control.
    pub fn waiting(&self) -> &WaitingQueue {
        &self.st.waiting
    }

    pub fn is_busy(&self) -> bool {
        self.iteration_start.is_some()
    }

    pub fn has_work(&self) -> bool {
        !self.st.running.is_empty() || !self.st.waiting.is_empty() || !self.st.swapped.is_empty()
    }

    /// Requests routed here and not finished: waiting + swapped + running.
    pub fn outstanding(&self) -> usize {
        self.st.waiting.len() + self.st.swapped.len() + self.st.running.len()
    }

    pub fn waiting_len(&self) -> usize {
        self.st.waiting.len() + self.st.swapped.len()
    }

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
            .chain(self.st.swapped.iter().map(|s| s.id))
            .chain(self.st.running.iter().filter(|s| !s.done).map(|s| s.id))
    }

    /// Blocks held by running sequences (for the conservation check).
    /// Blocks held by running sequences and the prefix cache (for the
    /// conservation check: must equal the allocator's used blocks).
    pub fn blocks_held(&self) -> u64 {
        let private: u64 = self.st.running.iter().map(|s| s.blocks as u64).sum();
        private + self.st.cache.as_ref().map_or(0, |c| c.blocks())
    }

    /// KV blocks in active use: the allocator's used blocks less cached
    /// prefixes no sequence references (those are free to evict, as vLLM's
    /// KV-usage gauge counts them).
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
        self.account_kv(now);
        self.st.begin_iteration();
        self.st.attr.begin(now, reqs);
        let mut shape = self.policy.schedule(&mut self.st, now, reqs);
        let closed = self.policy.keeps_finished_until_batch_ends();
        let cause = attribution::blocker(&self.st, &shape, closed);
        self.st.attr.decided(cause, &shape, now, reqs);
        if shape.is_empty() {
            return None;
        }
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
        let keep_done = self.policy.keeps_finished_until_batch_ends();
        self.st.attr.advance(start, now);
        let st = &mut self.st;
        let charge_decode = st.waiting.order.charges_decode();
        // Decodes whose previous token came at this iteration's start (the
        // common, back-to-back case) share one gap: counted, not searched.
        let mut back_to_back = 0u32;
        let mut write = 0;
        let mut running = std::mem::take(&mut st.running);
        for read in 0..running.len() {
            let s = &mut running[read];
            let emitted = if s.chunk > 0 {
                st.attr.mix.charge_prefilling(s, &mut reqs[s.id as usize]);
                s.kv_tokens += s.chunk;
                s.chunk = 0;
                if s.prefilling() {
                    0 // a middle chunk: no token yet
                } else {
                    st.publish_prefill(s, reqs);
                    let r = &mut reqs[s.id as usize];
                    st.attr.mix.enter_decode(r);
                    if s.generated == 0 {
                        r.first_token = Some(now);
                    } else {
                        // Resumed after a recompute preemption.
                        gaps.add(now.since(r.last_token));
                    }
                    s.last_token = now.0;
                    1
                }
            } else if s.decode {
                s.decode = false;
                out.decode_seqs += 1;
                if s.last_token == start.0 {
                    back_to_back += 1;
                } else {
                    gaps.add(now.0.saturating_sub(s.last_token));
                }
                s.last_token = now.0;
                let n = match &mut self.speculation {
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
                st.waiting.order.on_decode(tenant, emitted);
            }
            let mut keep = true;
            if emitted > 0 && s.generated >= s.output_tokens {
                let r = &mut reqs[s.id as usize];
                st.attr.mix.leave_decode(r);
                r.generated = s.generated;
                r.finished = Some(now);
                r.last_token = now;
                r.status = Status::Completed;
                completed.push(s.id);
                if keep_done {
                    s.done = true;
                } else {
                    st.retire(s, reqs);
                    keep = false;
                }
            }
            if keep {
                if write != read {
                    running[write] = running[read];
                }
                write += 1;
            }
        }
        running.truncate(write);
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

    /// Brings the KV-use integral up to `now` (at the end of a run).
    pub fn close(&mut self, now: SimTime) {
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
pub(crate) mod tests {
    use super::*;
    use crate::scenario::BatchPolicyKind;

    pub fn engine(max_num_seqs: u32, max_batched_tokens: u32, block_size: u32) -> EngineCfg {
        EngineCfg {
            max_num_seqs,
            max_batched_tokens,
            block_size,
            ..EngineCfg::default()
        }
    }

    pub fn replica(e: &EngineCfg, blocks: u64) -> Replica {
        Replica::new(0, e, blocks, 1024.0, 1)
    }

    /// Runs a replica to completion with 1 µs iterations; returns the shapes.
    pub fn run_to_end(rep: &mut Replica, reqs: &mut [Request]) -> Vec<BatchShape> {
        let mut t = SimTime(0);
        let mut shapes = vec![];
        while let Some(shape) = rep.form_batch(t, reqs) {
            shapes.push(shape);
            t = t.plus(1000);
            rep.finish_iteration(t, reqs, &mut vec![], &mut TokenGaps::default());
            assert!(shapes.len() < 1_000_000, "no progress");
        }
        shapes
    }

    pub fn requests(n: usize, prompt: u32, output: u32) -> Vec<Request> {
        (0..n)
            .map(|_| Request::new(SimTime(0), prompt, output))
            .collect()
    }

    pub fn assert_all_completed(rep: &Replica, reqs: &[Request]) {
        for r in reqs {
            assert_eq!(r.status, Status::Completed);
            assert_eq!(r.generated, r.output_tokens);
        }
        assert_eq!(rep.kv().used(), 0);
        assert_eq!(rep.kv().granted(), rep.kv().freed());
    }

    #[test]
    fn admits_fcfs_within_token_budget_and_completes_exact_tokens() {
        let mut reqs = requests(3, 100, 3);
        let mut rep = replica(&engine(8, 250, 16), 1000);
        for i in 0..3 {
            rep.enqueue(i);
        }
        let shapes = run_to_end(&mut rep, &mut reqs);
        // Budget 250: two 100-token prompts fit in the first iteration, the third next.
        assert_eq!(shapes[0].prefill_seqs, 2);
        assert_eq!(shapes[1].prefill_seqs, 1);
        assert_eq!(shapes[1].decode_seqs, 2);
        assert_all_completed(&rep, &reqs);
    }

    #[test]
    fn decode_out_of_blocks_preempts_most_recent_and_recomputes() {
        // 4 blocks of 4 tokens. Two requests of prompt 4 and output 6 each
        // need up to 3 blocks each: they cannot both finish without preemption.
        let mut reqs = requests(2, 4, 6);
        let mut rep = replica(&engine(8, 100, 4), 4);
        rep.enqueue(0);
        rep.enqueue(1);
        let shapes = run_to_end(&mut rep, &mut reqs);
        assert!(reqs[1].preemptions >= 1, "the later request is the victim");
        assert_eq!(reqs[0].preemptions, 0);
        // The recompute prefill covers prompt + generated tokens.
        assert!(shapes.iter().any(|s| s.prefill_tokens > 4));
        assert_all_completed(&rep, &reqs);
        let total: u64 = reqs.iter().map(|r| r.preemptions as u64).sum();
        assert_eq!(rep.preemptions(), total);
    }

    #[test]
    fn swap_preemption_keeps_progress_and_moves_bytes_over_pcie() {
        let mut reqs = requests(2, 4, 6);
        let mut e = engine(8, 100, 4);
        e.preemption = PreemptionMode::Swap;
        let mut rep = replica(&e, 4);
        rep.enqueue(0);
        rep.enqueue(1);
        let shapes = run_to_end(&mut rep, &mut reqs);
        assert!(rep.swap_outs() >= 1);
        assert_eq!(
            rep.preemptions(),
            rep.swap_outs(),
            "all preemptions swapped"
        );
        // Swapped sequences are never re-prefilled.
        assert_eq!(shapes.iter().map(|s| s.prefill_tokens).sum::<u64>(), 8);
        // Out and back in: 2 × blocks × 1024 bytes each time.
        let swapped: f64 = shapes.iter().map(|s| s.swap_bytes).sum();
        assert!(swapped > 0.0 && swapped % 2048.0 == 0.0, "{swapped}");
        assert_all_completed(&rep, &reqs);
        assert_eq!(rep.host_blocks_held(), (0, 0));
    }

    #[test]
    fn swap_falls_back_to_recompute_without_host_space() {
        let mut reqs = requests(2, 4, 6);
        let mut e = engine(8, 100, 4);
        e.preemption = PreemptionMode::Swap;
        e.swap_space_gib = 0.0;
        let mut rep = replica(&e, 4);
        rep.enqueue(0);
        rep.enqueue(1);
        run_to_end(&mut rep, &mut reqs);
        assert!(rep.preemptions() >= 1);
        assert_eq!(rep.swap_outs(), 0);
        assert_all_completed(&rep, &reqs);
    }

    #[test]
    fn batch_lists_what_the_iteration_runs() {
        let mut reqs = requests(2, 10, 3);
        let mut rep = replica(&engine(8, 100, 4), 100);
        rep.enqueue(0);
        rep.form_batch(SimTime(0), &mut reqs).unwrap();
        let b: Vec<BatchEntry> = rep.batch().collect();
        assert_eq!(
            b,
            vec![BatchEntry {
                id: 0,
                chunk: 10,
                kv_tokens: 0,
                decode: false
            }]
        );
        rep.finish_iteration(
            SimTime(5),
            &mut reqs,
            &mut vec![],
            &mut TokenGaps::default(),
        );
        rep.enqueue(1);
        rep.form_batch(SimTime(5), &mut reqs).unwrap();
        let b: Vec<BatchEntry> = rep.batch().collect();
        assert_eq!(
            b,
            vec![
                BatchEntry {
                    id: 0,
                    chunk: 0,
                    kv_tokens: 10,
                    decode: true
                },
                BatchEntry {
                    id: 1,
                    chunk: 10,
                    kv_tokens: 0,
                    decode: false
                },
            ]
        );
    }

    #[test]
    fn max_num_seqs_caps_the_batch() {
        let mut reqs = requests(5, 10, 2);
        let mut rep = replica(&engine(2, 1000, 16), 100);
        for i in 0..5 {
            rep.enqueue(i);
        }
        let shapes = run_to_end(&mut rep, &mut reqs);
        assert!(shapes.iter().all(|s| s.seqs() <= 2));
        assert_all_completed(&rep, &reqs);
    }

    #[test]
    fn every_policy_completes_everything_and_balances_blocks() {
        for policy in [
            BatchPolicyKind::Continuous,
            BatchPolicyKind::Vllm,
            BatchPolicyKind::Sarathi,
            BatchPolicyKind::Orca,
            BatchPolicyKind::Static,
        ] {
            let mut e = engine(4, 64, 4);
            e.policy = policy;
            let mut reqs: Vec<Request> = (0..9)
                .map(|i| Request::new(SimTime(0), 5 + 7 * i, 3 + 5 * (i % 4)))
                .collect();
            let mut rep = replica(&e, 40);
            for i in 0..9 {
                rep.enqueue(i);
            }
            run_to_end(&mut rep, &mut reqs);
            assert_all_completed(&rep, &reqs);
        }
    }
}

#[cfg(test)]
mod ledger_props {
    //! Property tests of the block ledgers under random workloads: the
    //! allocator and the prefix cache together, through every policy and
    //! preemption mode (allocate / share / write / free / evict / swap).
    use super::tests::*;
    use super::*;
    use crate::kv::prefix_cache::mix;
    use crate::scenario::BatchPolicyKind;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        /// A request whose first `shared` blocks come from prefix family
        /// `family` (so requests share prefixes), then its own blocks.
        Enqueue {
            family: u8,
            shared: u8,
            prompt: u16,
            output: u16,
        },
        Step,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..3, 0u8..6, 1u16..120, 1u16..40).prop_map(|(family, shared, prompt, output)| {
                Op::Enqueue {
                    family,
                    shared,
                    prompt,
                    output,
                }
            }),
            Just(Op::Step),
            Just(Op::Step),
        ]
    }

    fn check_ledgers(rep: &Replica) -> Result<(), TestCaseError> {
        let kv = rep.kv();
        prop_assert_eq!(kv.granted(), kv.freed() + kv.used());
        prop_assert_eq!(
            kv.used(),
            rep.blocks_held(),
            "free + referenced + cached = total"
        );
        prop_assert!(kv.used() <= kv.total());
        let (held, ledger) = rep.host_blocks_held();
        prop_assert_eq!(held, ledger);
        if let Some(c) = rep.prefix_cache() {
            prop_assert!(c.check().is_ok(), "{:?}", c.check());
            // Every reference on a cached block belongs to a live sequence.
            let refs: u64 = rep
                .st
                .running
                .iter()
                .chain(rep.st.swapped.iter())
                .map(|s| s.shared as u64)
                .sum();
            prop_assert_eq!(refs, c.total_refs());
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn ledgers_balance_and_nothing_leaks(
            ops in proptest::collection::vec(op(), 1..120),
            policy in 0usize..5,
            swap in any::<bool>(),
            caching in any::<bool>(),
            blocks in 12u64..48,
        ) {
            let mut e = engine(6, 64, 4);
            e.policy = [
                BatchPolicyKind::Continuous,
                BatchPolicyKind::Vllm,
                BatchPolicyKind::Sarathi,
                BatchPolicyKind::Orca,
                BatchPolicyKind::Static,
            ][policy];
            if swap {
                e.preemption = PreemptionMode::Swap;
                e.swap_space_gib = 64.0 * 1024.0 / crate::catalog::GIB; // 64 blocks of 1 KiB
            }
            e.prefix_caching = caching;
            e.pinned_prefix_blocks = if caching { 3 } else { 0 };
            let mut rep = replica(&e, blocks);
            let mut reqs: Vec<Request> = Vec::new();
            let mut t = SimTime(0);
            let step = |rep: &mut Replica, reqs: &mut Vec<Request>, t: &mut SimTime| -> bool {
                match rep.form_batch(*t, reqs) {
                    Some(_) => {
                        *t = t.plus(1000);
                        rep.finish_iteration(*t, reqs, &mut vec![], &mut TokenGaps::default());
                        true
                    }
                    None => false,
                }
            };
            for op in ops {
                match op {
                    Op::Enqueue { family, shared, prompt, output } => {
                        let (p, o) = (prompt as u32 + 4, output as u32);
                        // Only requests that fit one replica, as at arrival.
                        let pinnable = if caching { 3 } else { 0 };
                        if (p + o - 1).div_ceil(4) as u64 > blocks - pinnable || p > 64 && policy != 2 {
                            continue;
                        }
                        let id = reqs.len() as u64;
                        let mut r = Request::new(t, p, o);
                        let n = ((p + o) / 4) as u64;
                        let mut h = family as u64 + 1;
                        r.prefix_hashes = (0..n)
                            .map(|j| {
                                let salt = if j < shared as u64 { 0 } else { id + 100 };
                                h = mix(h ^ salt, j);
                                h
                            })
                            .collect();
                        r.hash_block_tokens = 4;
                        r.pinnable_tokens = 8;
                        reqs.push(r);
                        rep.enqueue(id as u32);
                    }
                    Op::Step => {
                        step(&mut rep, &mut reqs, &mut t);
                    }
                }
                check_ledgers(&rep)?;
            }
            let mut guard = 0;
            while step(&mut rep, &mut reqs, &mut t) {
                check_ledgers(&rep)?;
                guard += 1;
                prop_assert!(guard < 100_000, "no progress");
            }
            for r in &reqs {
                prop_assert_eq!(r.status, Status::Completed);
                prop_assert_eq!(r.generated, r.output_tokens);
            }
            // Only the cache may still hold blocks, none of them referenced;
            // evicting everything not pinned returns them all.
            let cached = rep.prefix_cache().map_or(0, |c| c.blocks());
            prop_assert_eq!(rep.kv().used(), cached);
            if let Some(c) = &mut rep.st.cache {
                prop_assert_eq!(c.total_refs(), 0);
                let pinned = c.pinned_blocks();
                let freed = c.evict(u64::MAX);
                rep.st.kv.release(freed);
                prop_assert_eq!(rep.kv().used(), pinned);
            }
        }
    }
}
