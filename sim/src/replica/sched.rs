//! The scheduler state one replica's batch policies act on: the running
//! batch, KV blocks and prefix cache, preemption and swap, and the
//! operations (admit, grow, schedule decodes, shape) every policy shares.

use super::*;

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
    /// Blocks of a hybrid model's other layer groups (windows, linear
    /// state) it holds privately, beside its rows (`kv_groups`); 0 otherwise.
    pub extra: u32,
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
    /// Parallel samples sharing the prompt's blocks (vLLM's `n`; 1 for an
    /// ordinary sequence). `generated` and `kv_tokens` are per sample.
    pub samples: u32,
    /// Where the samples' tokens start to differ: the prompt length
    /// (`fork`).
    pub fork_tokens: u32,
    /// In a decode run (`decode_run`): the run step after which this
    /// sequence joined it (0 for those there at the run's start). Its
    /// `kv_tokens` and `generated` are as of then; the run has since added
    /// one token per step. 0 outside a run.
    pub run_base: u32,
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
    /// A disaggregated prefill replica: requests stop after their first
    /// token and hand their KV off (`cluster::disagg`).
    pub prefill_only: bool,
    /// A hybrid model's layer groups (`memory::MemoryPlan::kv_groups`): each
    /// sequence then holds `extra` blocks beside its rows.
    pub kv_groups: Option<crate::kv_groups::KvGroups>,
    /// `[engine] scheduler_recv_interval`: decode steps between the
    /// scheduler's receives of new requests (1: before every step).
    pub recv_interval: u32,
}

/// Adds `s` to the running batch `running`, growing it by a quarter (at
/// least eight slots) when it is full instead of doubling it. A batch keeps
/// its largest size for the run, and a fleet of many replicas holds one
/// each: on 10,000 replicas of about 70 sequences a doubled batch stops at
/// 128 slots of 64 bytes, a quarter's growth near 90.
#[inline]
pub(super) fn push_running(running: &mut Vec<RunningSeq>, s: RunningSeq) {
    if running.len() == running.capacity() {
        running.reserve_exact(running.len() / 4 + 8);
    }
    running.push(s);
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
    pub(super) host_blocks_used: u64,
    /// Blocks swapped out / in during the iteration being formed.
    pub(super) swap_blocks: u64,
    /// Whether the iteration being formed preempted anything.
    pub preempted_now: bool,
    /// Set by [`Self::schedule_decodes`]: no running sequence before this
    /// index is prefilling (0 when the walk did not look). Sarathi starts
    /// its search for prefills to continue here; it holds only while the
    /// iteration preempted nothing (no sequence has moved since).
    pub(super) first_prefilling: usize,
    /// The shape being built as sequences are marked; invalidated when a
    /// marked sequence is preempted (then [`Self::shape`] rebuilds it).
    pub(super) acc: BatchShape,
    pub(super) acc_valid: bool,
    pub preemptions: u64,
    pub swap_outs: u64,
    /// Latency attribution: the queue clock and the iteration's token mix.
    pub attr: attribution::QueueClock,
    /// Whether a request with several samples was ever admitted: only then
    /// do sequence slots need counting sample by sample (`fork`).
    pub(super) forked: bool,
    /// Disaggregation (`replica::handoff`): prefilled sequences holding
    /// their blocks until their KV has left, the ids handed off since the
    /// caller last looked, and blocks reserved for KV on its way in.
    pub(super) handoff: super::handoff::HandoffState,
    /// Requests that have reached the engine but not yet its scheduler
    /// (only with `recv_interval` > 1; see [`Self::receive`]).
    pub(super) inbox: VecDeque<Waiting>,
    /// The receive skipper's counter: decode steps since the last receive,
    /// a step with a prefill counting the whole interval.
    pub(super) recv_count: u32,
}

impl SchedState {
    pub(super) fn new(cfg: SchedConfig, kv_blocks: u64, cache: Option<PrefixCache>) -> SchedState {
        SchedState {
            waiting: WaitingQueue::default(),
            swapped: VecDeque::new(),
            // Grown as the batch grows (a few doublings over a replica's
            // life), not sized for `max_num_seqs` up front: a replica's
            // batch rarely nears the limit, and 256 slots of 56 bytes per
            // replica were most of a 10,000-replica fleet's memory at start.
            running: Vec::new(),
            kv: BlockAllocator::new(kv_blocks),
            cache,
            cfg,
            host_blocks_used: 0,
            swap_blocks: 0,
            preempted_now: false,
            first_prefilling: 0,
            acc: BatchShape::default(),
            acc_valid: true,
            preemptions: 0,
            swap_outs: 0,
            attr: attribution::QueueClock::default(),
            forked: false,
            handoff: Default::default(),
            inbox: VecDeque::new(),
            recv_count: 0,
        }
    }

    /// SGLang's receive skipper (`SchedulerRecvSkipper.handle`, called at
    /// the top of every scheduler loop): the requests in the inbox join the
    /// waiting queue when `recv_interval` decode steps (or one step with a
    /// prefill, weight 1,000 against intervals of 10–60) have run since the
    /// last receive, or when nothing is running: an idle scheduler loops
    /// with no GPU work and reaches the threshold within microseconds.
    pub(super) fn receive(&mut self) {
        let due = self.recv_count >= self.cfg.recv_interval || self.running.is_empty();
        if !due {
            return;
        }
        self.recv_count = 0;
        while let Some(w) = self.inbox.pop_front() {
            self.waiting.push_back(w);
        }
    }

    /// Counts a finished step towards the next receive: a decode-only step
    /// weighs 1, a step with prefill tokens the whole interval.
    pub(super) fn count_recv_step(&mut self, prefilled: bool) {
        let w = if prefilled { self.cfg.recv_interval } else { 1 };
        self.recv_count = self.recv_count.saturating_add(w);
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
    pub(super) fn decode_write(&self, s: &RunningSeq) -> u32 {
        (1 + self.cfg.draft_tokens).min(s.remaining()).max(1)
    }

    /// Grows running sequence `i` to hold `tokens` cached tokens, preempting
    /// the most recently admitted sequences while blocks run out. Returns
    /// false when `i` itself was preempted (it is then gone from `running`).
    pub fn grow(&mut self, i: usize, tokens: u32, now: SimTime, reqs: &mut [Request]) -> bool {
        let bs = self.cfg.block_size;
        let s = &self.running[i];
        let need = s.group_blocks(tokens, bs).saturating_sub(s.shared);
        let extra = self.extra_blocks(s, s.kv_tokens, tokens, need + s.shared);
        while self.running[i].blocks < need {
            let s = &self.running[i];
            let more = (need - s.blocks + extra) as u64;
            // A windowed group may have let go of blocks since it last grew.
            let (more, back) = (
                more.saturating_sub(s.extra as u64),
                (s.extra as u64).saturating_sub(more),
            );
            if self.allocate(more) {
                self.kv.release(back);
                let s = &mut self.running[i];
                s.blocks = need;
                s.extra = extra;
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

    /// Blocks `s` holds beside its `rows` once it has slots for `tokens`
    /// tokens with `computed` of them cached (a hybrid model's windows and
    /// state, [`crate::kv_groups::KvGroups::extra_blocks`]); 0 for a plain model.
    #[inline]
    pub(super) fn extra_blocks(
        &self,
        s: &RunningSeq,
        computed: u32,
        tokens: u32,
        rows: u32,
    ) -> u32 {
        self.cfg
            .kv_groups
            .map_or(0, |g| g.extra_blocks(computed, tokens, rows, s.samples))
    }

    /// Grants `n` blocks, evicting unreferenced cached prefixes (LRU) first
    /// when free blocks run short. All or nothing.
    pub fn allocate(&mut self, n: u64) -> bool {
        self.make_free(n) && self.kv.allocate(n)
    }

    /// Evicts cached prefixes until `n` blocks are free, if it can.
    pub(super) fn make_free(&mut self, n: u64) -> bool {
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
    pub(super) fn retire(&mut self, s: &mut RunningSeq, reqs: &[Request]) {
        if let Some(cache) = &mut self.cache {
            let r = &reqs[s.id as usize];
            adopt_full_blocks(cache, s, r, self.cfg.block_size);
            cache.release(&r.prefix_hashes()[..s.shared as usize]);
            s.shared = 0;
        }
        self.kv.release((s.blocks + s.extra) as u64);
        s.blocks = 0;
        s.extra = 0;
    }

    /// Called when a sequence's prefill completes: its full prompt blocks
    /// become shareable at once (vLLM caches blocks as they fill).
    pub(super) fn publish_prefill(&mut self, s: &mut RunningSeq, reqs: &[Request]) {
        if let Some(cache) = &mut self.cache {
            adopt_full_blocks(cache, s, &reqs[s.id as usize], self.cfg.block_size);
        }
    }

    /// The iteration's tokens left for prompts once `decodes` running
    /// sequences each took one: what every policy admits against, and what
    /// decode runs hand a policy that admits beside them (`run_join`), which
    /// must agree with it.
    #[inline]
    pub fn budget_after(&self, decodes: u64) -> u64 {
        self.cfg.max_batched_tokens.saturating_sub(decodes)
    }

    /// Lands the prefill chunk sequence `s` ran in the iteration that ended
    /// at `now` (charged for it first): its tokens join the cache, and when
    /// that completes its prefill it samples its next token — the first, or
    /// the next after a recompute preemption, whose gap goes to `gaps` —
    /// its full prompt blocks become shareable and it enters the decode
    /// clock. Returns the tokens it emitted (1, or 0 for a middle chunk);
    /// the caller counts them. Shared by the iteration end and decode runs'
    /// admissions (`run_join`), which must agree byte for byte.
    #[inline]
    pub(super) fn land_chunk(
        &mut self,
        s: &mut RunningSeq,
        now: SimTime,
        reqs: &mut [Request],
        gaps: &mut TokenGaps,
    ) -> u32 {
        self.attr.mix.charge_prefilling(s, &mut reqs[s.id as usize]);
        s.kv_tokens += s.chunk;
        s.chunk = 0;
        if s.extra > 0 {
            // Windowed groups let go of the blocks the chunk pushed out of
            // the window (vLLM frees them before the sequence's next step).
            let rows = s.shared + s.blocks;
            let now_held = self.extra_blocks(s, s.kv_tokens, s.kv_tokens, rows);
            self.kv.release(s.extra.saturating_sub(now_held) as u64);
            s.extra = s.extra.min(now_held);
        }
        if s.prefilling() {
            return 0; // a middle chunk: no token yet
        }
        self.publish_prefill(s, reqs);
        let r = &mut reqs[s.id as usize];
        self.attr.mix.enter_decode(r);
        if s.generated == 0 {
            r.first_token = crate::time::Stamp::at(now);
        } else {
            // Resumed after a recompute preemption.
            gaps.add(now.since(r.last_token), s.samples);
        }
        s.last_token = now.0;
        1
    }

    /// Adds what a marked sequence contributes to the iteration's shape.
    #[inline]
    pub(super) fn contribute(&mut self, s: &RunningSeq) {
        if s.chunk > 0 {
            self.acc.add_prefill(s.chunk as u64, s.kv_tokens as u64);
        } else if s.decode {
            let drafts = self.decode_write(s) as u64 - 1;
            let spec = self.cfg.draft_tokens > 0;
            fork::add_decodes(&mut self.acc, s.samples, s.kv_tokens as u64, drafts, spec);
            fork::add_copy_on_write(&mut self.acc, s, self.cfg.block_size);
        } else if s.done {
            // Static batching keeps finished members as padding: they
            // still occupy a slot of every step until the batch ends.
            fork::add_decodes(&mut self.acc, s.samples, s.kv_tokens as u64, 0, false);
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
        // The simulator's hottest loop, compiled three ways: a replica that
        // never admitted a request with several samples (every run without
        // `workload.n`) keeps to one chain of blocks per sequence, so its
        // fit is a multiply and each sequence adds one decode. Through the
        // group arithmetic of `fork` the bench ran +33 % instructions.
        // Without speculation either, each decode also writes exactly one
        // token (`one_token_decode_loop`).
        self.first_prefilling = 0;
        match (self.forked, self.cfg.draft_tokens) {
            (true, _) => self.decode_loop::<true>(now, reqs),
            (false, 0) => self.one_token_decode_loop(now, reqs),
            (false, _) => self.decode_loop::<false>(now, reqs),
        }
    }

    /// [`Self::decode_loop`] of a replica that neither forks nor decodes
    /// speculatively (most runs): each decode writes one token and adds one
    /// sequence to the shape. The walk keeps its sums in registers and
    /// counts no decodes of its own: they are the shape's new decoding
    /// sequences less the static-batch padding among them. It also stops
    /// at the first prefilling sequence, to note where it is
    /// (`first_prefilling`).
    fn one_token_decode_loop(&mut self, now: SimTime, reqs: &mut [Request]) -> u64 {
        let bs = self.cfg.block_size;
        // Summed in a local copy and stored once: nothing the loop calls
        // (`grow`, and the preemptions it makes) reads or adds to `acc`.
        let mut acc = self.acc;
        let first_seqs = acc.decode_seqs;
        let mut padding = 0u32;
        let mut first_prefilling = None;
        let mut from = 0;
        loop {
            // Fast path: most sequences fit their next token in the blocks
            // they hold; the walk stops at the first that needs a block
            // (and at the first prefilling one).
            let stop = self.running[from..].iter_mut().position(|s| {
                if s.prefilling() {
                    return first_prefilling.is_none();
                }
                if s.done {
                    // Static-batch padding: a plain decode step.
                    acc.add_decode(s.kv_tokens as u64 + 1);
                    padding += 1;
                    return false;
                }
                let tokens = s.kv_tokens + 1;
                if tokens > s.capacity(bs) && !s.reserved {
                    return true;
                }
                s.decode = true;
                acc.add_decode(tokens as u64);
                false
            });
            // Slow path: allocate, preempting from the back if blocks run out.
            let Some(j) = stop else {
                break;
            };
            let i = from + j;
            if self.running[i].prefilling() {
                first_prefilling = Some(i);
                from = i + 1;
                continue;
            }
            let tokens = self.running[i].kv_tokens + 1;
            if !self.grow(i, tokens, now, reqs) {
                break; // `i` itself was preempted: it was the last one
            }
            self.running[i].decode = true;
            acc.add_decode(tokens as u64);
            from = i + 1;
        }
        self.acc = acc;
        self.first_prefilling = first_prefilling.unwrap_or(self.running.len());
        (acc.decode_seqs - first_seqs - padding) as u64
    }

    fn decode_loop<const GROUPS: bool>(&mut self, now: SimTime, reqs: &mut [Request]) -> u64 {
        let bs = self.cfg.block_size;
        let k = self.cfg.draft_tokens;
        // The shape is summed in a local copy, which the compiler keeps in
        // registers through the loop, and stored once at the end: nothing
        // the loop calls (`grow`, and the preemptions it makes) reads or
        // adds to `self.acc`.
        let mut acc = self.acc;
        let add = |acc: &mut BatchShape, s: &RunningSeq, write: u32| {
            let (ctx, drafts) = (s.kv_tokens as u64, write as u64 - 1);
            if GROUPS && s.samples > 1 {
                fork::add_decodes(acc, s.samples, ctx, drafts, k > 0);
                fork::add_copy_on_write(acc, s, bs);
            } else if k == 0 {
                acc.add_decode(ctx + 1);
            } else {
                acc.add_verify(drafts, ctx);
            }
        };
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
                    // Static-batch padding: a plain decode step per sample.
                    let n = if GROUPS { s.samples.max(1) } else { 1 };
                    for _ in 0..n {
                        acc.add_decode(s.kv_tokens as u64 + 1);
                    }
                    continue;
                }
                let write = (1 + k).min(s.remaining()).max(1);
                let fits = if GROUPS {
                    s.fits(s.kv_tokens + write, bs)
                } else {
                    s.kv_tokens + write <= s.capacity(bs)
                };
                if !fits && !s.reserved {
                    needs_block = Some((from + j, s.kv_tokens + write));
                    break;
                }
                s.decode = true;
                decodes += 1;
                add(&mut acc, s, write);
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
            add(&mut acc, s, write);
            from = i + 1;
        }
        self.acc = acc;
        decodes
    }

    /// Preempts the most recently admitted sequence that holds no up-front
    /// reservation. Returns its former index.
    pub(super) fn preempt_last_unreserved(
        &mut self,
        now: SimTime,
        reqs: &mut [Request],
    ) -> Option<usize> {
        let idx = self.running.iter().rposition(|s| !s.reserved && !s.done)?;
        self.preempt_at(idx, true, now, reqs);
        Some(idx)
    }

    /// Preempts running sequence `idx` (recompute, or swap when configured,
    /// allowed and host memory allows).
    pub(super) fn preempt_at(
        &mut self,
        idx: usize,
        allow_swap: bool,
        now: SimTime,
        reqs: &mut [Request],
    ) {
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
            // (Hybrid models do not swap: see `scenario::resolve`.)
            debug_assert_eq!(s.extra, 0);
            self.kv.release(s.blocks as u64);
            if let Some(cache) = &mut self.cache {
                cache.release(&reqs[s.id as usize].prefix_hashes()[..s.shared as usize]);
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
    pub(super) fn preempt_for_head(&mut self, now: SimTime, reqs: &mut [Request]) -> bool {
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
            if self.seq_slots_short(s.samples) {
                break;
            }
            let write = self.decode_write(&s);
            let need = (s.group_blocks(s.kv_tokens + write, self.cfg.block_size) - s.shared) as u64;
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
            push_running(&mut self.running, s);
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
    pub(super) fn cached_prefix_blocks(&self, r: &Request, target: u32) -> u32 {
        match &self.cache {
            Some(cache) if !r.prefix_hashes().is_empty() => {
                let shareable = ((target - 1) / self.cfg.block_size) as usize;
                let n = shareable.min(r.prefix_hashes().len());
                cache.match_len(&r.prefix_hashes()[..n]) as u32
            }
            _ => 0,
        }
    }

    /// [`Self::cached_prefix_blocks`], taking a reference on each of them
    /// in the same probe of the cache.
    fn acquire_cached_prefix(&mut self, r: &Request, target: u32) -> u32 {
        match &mut self.cache {
            Some(cache) if !r.prefix_hashes().is_empty() => {
                let shareable = ((target - 1) / self.cfg.block_size) as usize;
                let n = shareable.min(r.prefix_hashes().len());
                cache.acquire_prefix(&r.prefix_hashes()[..n]) as u32
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

    pub(super) fn try_admit_head(
        &mut self,
        chunk: u32,
        reserve_whole: bool,
        now: SimTime,
        reqs: &mut [Request],
    ) -> bool {
        let Some(id) = self.waiting.front() else {
            return false;
        };
        if self.seq_slots_short(reqs[id as usize].samples()) {
            self.attr.blocked = Some(Component::QueueMaxSeqs);
            return false;
        }
        let bs = self.cfg.block_size;
        let r = &reqs[id as usize];
        let target = r.prompt_tokens + r.generated;
        // Take the references first, so eviction cannot take our own hits.
        let shared = self.acquire_cached_prefix(r, target);
        let cached = shared * bs;
        let tokens = if reserve_whole {
            // The last output token is never written to the cache.
            r.prompt_tokens + r.output_tokens - 1
        } else {
            cached + chunk
        };
        let (samples, fork_tokens) = (r.samples(), r.prompt_tokens);
        self.forked |= samples > 1;
        let group = fork::group_blocks(tokens.max(cached + chunk), bs, samples, fork_tokens);
        let extra = self.cfg.kv_groups.map_or(0, |g| {
            g.extra_blocks(cached, tokens.max(cached + chunk), group, samples)
        });
        let blocks = (group - shared) as u64;
        // The watermark guards running sequences; an empty replica has none.
        let reserve = if self.running.is_empty() {
            0
        } else {
            self.cfg.watermark_blocks
        };
        if !self.make_free(blocks + extra as u64 + reserve)
            || !self.kv.allocate(blocks + extra as u64)
        {
            if let Some(cache) = &mut self.cache {
                cache.release(&reqs[id as usize].prefix_hashes()[..shared as usize]);
            }
            self.attr.blocked = Some(Component::QueueKv);
            return false;
        }
        self.waiting.pop_front();
        let r = &mut reqs[id as usize];
        self.attr.admitted(r, now);
        if r.first_scheduled.is_none() {
            r.first_scheduled = crate::time::Stamp::at(now);
            if let Some(cache) = &mut self.cache {
                let st = &mut cache.stats;
                let prompt_blocks = (r.prompt_tokens / bs) as u64;
                st.lookup_tokens += r.prompt_tokens as u64;
                st.hit_tokens += cached as u64;
                st.lookup_blocks += prompt_blocks.min(r.prefix_hashes().len() as u64);
                st.hit_blocks += shared as u64;
            }
        }
        let s = RunningSeq {
            id,
            // A prefill replica's sequence ends with its first token.
            output_tokens: if self.cfg.prefill_only {
                r.output_tokens.min(r.generated + 1)
            } else {
                r.output_tokens
            },
            generated: r.generated,
            kv_tokens: cached,
            blocks: blocks as u32,
            shared,
            extra,
            prefill_target: target,
            chunk,
            decode: false,
            reserved: reserve_whole,
            done: false,
            last_token: 0,
            samples,
            fork_tokens,
            run_base: 0,
        };
        push_running(&mut self.running, s);
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
pub(super) fn adopt_full_blocks(
    cache: &mut PrefixCache,
    s: &mut RunningSeq,
    r: &Request,
    block_size: u32,
) {
    let full = ((s.kv_tokens / block_size) as usize)
        .min(r.prefix_hashes().len())
        .min(s.common_blocks(block_size));
    let pinnable = (r.pinnable_tokens() / block_size) as usize;
    let j = s.shared as usize;
    if j >= full {
        return;
    }
    let end = full.min(j + s.blocks as usize);
    let n = cache.insert_run(&r.prefix_hashes()[..end], j, pinnable);
    s.shared += n as u32;
    s.blocks -= n as u32;
}
