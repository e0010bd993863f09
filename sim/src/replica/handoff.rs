//! A replica's side of disaggregated serving (Splitwise, ISCA'24;
//! DistServe, OSDI'24; Mooncake, FAST'25): a prefill replica keeps a
//! prefilled sequence's blocks until its KV cache has crossed the link, and a
//! decode replica reserves blocks for an incoming KV cache before the
//! transfer starts, then decodes the sequence as if it had prefilled it.
//! Held blocks are what back-pressure looks like: while decode replicas are
//! full, prefilled KV waits on the prefill side and fills its memory.

use super::attribution::IterationMix;
use super::{Replica, RunningSeq};
use crate::attribution::Component;
use crate::kv::BlockAllocator;
use crate::request::{Request, RequestId};
use crate::time::SimTime;

/// Sequences between the two sides of a KV transfer.
#[derive(Debug, Default)]
pub struct HandoffState {
    /// Prefilled here; blocks held until the transfer completes.
    pub(super) held: Vec<RunningSeq>,
    /// Σ cached tokens of `held`: the KV still to cross this replica's link.
    held_tokens: u64,
    /// Ids handed off since the caller last took them.
    handed: Vec<RequestId>,
    /// Blocks reserved here for KV on its way in (not running yet).
    inbound: Vec<RunningSeq>,
    /// KV arrived; joins the batch at the next iteration boundary.
    pub(super) arrived: Vec<RunningSeq>,
    /// Requests bound to this decode replica whose KV has not joined its
    /// batch yet (still prefilling elsewhere, queued, or on the link).
    bound: u32,
}

impl HandoffState {
    /// Blocks held on either side (for the conservation check).
    pub fn blocks(&self) -> u64 {
        self.held
            .iter()
            .chain(&self.inbound)
            .chain(&self.arrived)
            .map(|s| (s.blocks + s.extra) as u64)
            .sum()
    }

    /// A prefill replica's sequence produced its first token: unless that
    /// was the request's last, it leaves the batch and waits for the link.
    pub(super) fn hand_off(
        &mut self,
        s: &RunningSeq,
        now: SimTime,
        mix: &IterationMix,
        reqs: &mut [Request],
    ) -> bool {
        let r = &mut reqs[s.id as usize];
        if s.generated >= r.output_tokens {
            return false; // finished here: nothing to decode elsewhere
        }
        mix.leave_decode(r);
        r.generated = s.generated;
        r.last_token = now;
        self.held.push(*s);
        self.held_tokens += s.kv_tokens as u64;
        self.handed.push(s.id);
        true
    }
}

impl Replica {
    /// A request prefilling elsewhere will decode here (Splitwise's
    /// scheduler counts such pending requests in a machine's queue).
    pub fn bind_incoming(&mut self) {
        self.st.handoff.bound += 1;
    }

    /// Requests bound here whose KV has not joined the batch yet.
    pub fn bound_incoming(&self) -> u32 {
        self.st.handoff.bound
    }

    /// Makes this a disaggregated prefill replica.
    pub fn set_prefill_only(&mut self) {
        self.st.cfg.prefill_only = true;
    }

    /// Requests whose prefill ended here since the last call.
    pub fn take_handoffs(&mut self, out: &mut Vec<RequestId>) {
        out.append(&mut self.st.handoff.handed);
    }

    /// Requests prefilled here whose KV has not left yet.
    pub fn held_for_transfer(&self) -> usize {
        self.st.handoff.held.len()
    }

    /// Whether this is a disaggregated prefill replica.
    #[inline]
    pub fn is_prefill_only(&self) -> bool {
        self.st.cfg.prefill_only
    }

    /// Tokens whose KV this prefill replica holds for transfer: what its
    /// link still has to carry (queued behind the decode side's memory, on
    /// the link's FIFO, or on the wire).
    #[inline]
    pub fn held_tokens(&self) -> u64 {
        self.st.handoff.held_tokens
    }

    /// Prompt tokens this replica still has to prefill: queued requests'
    /// and the rest of the prompts in its batch.
    pub fn prefill_backlog_tokens(&self) -> u64 {
        let running: u64 = self
            .st
            .running
            .iter()
            .map(|s| s.prefill_target.saturating_sub(s.kv_tokens) as u64)
            .sum();
        self.st.waiting.tokens() + running
    }

    /// The transfer of `id`'s KV completed: its blocks go back (full prompt
    /// blocks stay in the prefix cache, as after any request).
    pub fn release_handoff(&mut self, id: RequestId, now: SimTime, reqs: &[Request]) {
        self.account_kv(now);
        let i = self
            .st
            .handoff
            .held
            .iter()
            .position(|s| s.id == id)
            .expect("handed-off sequence held");
        let mut s = self.st.handoff.held.remove(i);
        self.st.handoff.held_tokens -= s.kv_tokens as u64;
        self.st.retire(&mut s, reqs);
    }

    /// Prompt tokens of `r` already in this replica's prefix cache.
    pub fn cached_prefix_tokens(&self, r: &Request) -> u32 {
        if self.st.cache.is_none() {
            return 0;
        }
        self.st.cached_prefix_blocks(r, r.prompt_tokens) * self.st.cfg.block_size
    }

    /// Reserves blocks for `id`'s incoming KV (its prompt, or the whole
    /// request under a reserving policy) if they fit beside the running
    /// batch's watermark and a batch slot is free; false: it must wait.
    pub fn accept_transfer(&mut self, id: RequestId, now: SimTime, reqs: &[Request]) -> bool {
        let inbound = self.st.handoff.inbound.len();
        if self.st.running.len() + inbound >= self.st.cfg.max_num_seqs {
            return false;
        }
        let r = &reqs[id as usize];
        let reserve_whole = self.reserves_whole_requests();
        let tokens = if reserve_whole {
            r.prompt_tokens + r.output_tokens - 1
        } else {
            r.prompt_tokens
        };
        let blocks = BlockAllocator::blocks_for(tokens as u64, self.st.cfg.block_size as u64);
        let extra = self.st.cfg.kv_groups.map_or(0, |g| {
            g.extra_blocks(r.prompt_tokens, tokens, blocks as u32, r.samples())
        });
        let blocks_and_extra = blocks + extra as u64;
        let reserve = if self.st.running.is_empty() && inbound == 0 {
            0
        } else {
            self.st.cfg.watermark_blocks
        };
        self.account_kv(now);
        if !self.st.make_free(blocks_and_extra + reserve) || !self.st.kv.allocate(blocks_and_extra)
        {
            return false;
        }
        self.st.forked |= r.samples() > 1;
        self.st.handoff.inbound.push(RunningSeq {
            id,
            output_tokens: r.output_tokens,
            generated: r.generated,
            kv_tokens: r.prompt_tokens,
            blocks: blocks as u32,
            shared: 0,
            extra,
            prefill_target: r.prompt_tokens,
            chunk: 0,
            decode: false,
            reserved: reserve_whole,
            done: false,
            last_token: r.last_token.0,
            // Parallel samples fork after the prompt, on the decode side.
            samples: r.samples(),
            fork_tokens: r.prompt_tokens,
            run_base: 0,
        });
        true
    }

    /// `id`'s KV arrived: it joins the running batch at the next iteration
    /// boundary (an engine adds sequences between steps).
    pub fn activate_transfer(&mut self, id: RequestId) {
        let i = self
            .st
            .handoff
            .inbound
            .iter()
            .position(|s| s.id == id)
            .expect("reserved transfer");
        let s = self.st.handoff.inbound.remove(i);
        self.st.handoff.arrived.push(s);
    }

    /// At an iteration boundary: arrived KV joins the running batch. The
    /// time since its first token is charged to the KV transfer (waiting
    /// for decode memory, for the link, the copy, the next boundary).
    pub(super) fn join_arrived(&mut self, now: SimTime, reqs: &mut [Request]) {
        for s in self.st.handoff.arrived.drain(..) {
            self.st.handoff.bound -= 1;
            let r = &mut reqs[s.id as usize];
            let a = &mut r.attribution;
            a.add(Component::KvTransfer, now.since(a.mark));
            self.st.attr.mix.enter_decode(r);
            r.attribution.mark = now;
            super::sched::push_running(&mut self.st.running, s);
        }
    }
}
