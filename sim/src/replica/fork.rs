//! Parallel sampling: a request with `n > 1` samples (vLLM's `n`, the
//! sampling half of best-of) is one sequence group whose samples share the
//! prompt's KV blocks by reference (Kwon et al., "Efficient Memory Management
//! for Large Language Model Serving with PagedAttention", SOSP'23, §4.4
//! "Parallel sampling"; vLLM v0's `BlockSpaceManager.fork`).
//!
//! The prompt is prefilled once. The prefill samples each sample's first
//! token from the same logits, so every sample's first *write* to the cache
//! is at position `fork_tokens` (the prompt length):
//!
//! - the prompt's full blocks stay shared, one physical copy referenced by
//!   all `n` samples, for the group's whole life;
//! - the last, partially filled prompt block is copied on first write by all
//!   but one sample (copy-on-write; the last holder writes in place), so it
//!   becomes `n` private copies — the one copy-on-write path a real engine
//!   has;
//! - every later block is private to its sample.
//!
//! So a group holding `T ≥ fork_tokens` tokens per sample holds
//! `⌊F/b⌋ + n·(⌈T/b⌉ − ⌊F/b⌋)` blocks instead of `n·⌈T/b⌉` for `n`
//! independent requests (`F` = fork point, `b` = block size).
//!
//! The samples are scheduled as one group and advance in lockstep: each
//! decode step of the group is `n` decoding sequences in the batch, and the
//! request completes when all samples have their `output_tokens` (the
//! `ignore_eos` regime of vLLM's benchmarks, where every sample runs to
//! `max_tokens`). Every sample takes a `max_num_seqs` slot, as in vLLM.
//! Modelling limits, said where they apply: with speculative decoding one
//! acceptance draw serves the whole group; a recompute preemption re-prefills
//! prompt + generated as one chain (vLLM v0 never recomputes a group: it
//! swaps it out, `Scheduler._preempt`), so the other samples' suffixes are
//! re-allocated but their recompute is not priced.

use super::{RunningSeq, SchedState};
use crate::cost::BatchShape;
use crate::kv::BlockAllocator;
use crate::scenario::ReplicaPlan;

/// KV blocks (shared + private) a group of `samples` samples forked at
/// `fork_tokens` needs to hold `tokens` tokens per sample.
#[inline]
pub fn group_blocks(tokens: u32, block_size: u32, samples: u32, fork_tokens: u32) -> u32 {
    let whole = tokens.div_ceil(block_size);
    if samples <= 1 || tokens <= fork_tokens {
        return whole;
    }
    let fork = fork_tokens / block_size;
    fork + samples * (whole - fork)
}

/// Blocks `samples` independent requests of the same lengths would hold: the
/// baseline the sharing saves against.
#[inline]
pub fn independent_blocks(tokens: u32, block_size: u32, samples: u32) -> u32 {
    samples.max(1) * tokens.div_ceil(block_size)
}

/// Block copies a group's copy-on-write makes when its samples first write
/// past the fork: `n − 1` copies of a partially filled last prompt block
/// (none when the prompt ends on a block boundary: every sample starts a
/// fresh block).
#[inline]
pub fn cow_copies(block_size: u32, samples: u32, fork_tokens: u32) -> u32 {
    if samples > 1 && fork_tokens % block_size != 0 {
        samples - 1
    } else {
        0
    }
}

impl RunningSeq {
    /// Blocks (shared + private) the group needs for `tokens` tokens per
    /// sample (see [`group_blocks`]).
    #[inline]
    pub fn group_blocks(&self, tokens: u32, block_size: u32) -> u32 {
        group_blocks(tokens, block_size, self.samples, self.fork_tokens)
    }

    /// Whether the blocks it holds cover `tokens` tokens per sample.
    #[inline]
    pub fn fits(&self, tokens: u32, block_size: u32) -> bool {
        if self.samples <= 1 {
            // One chain of blocks: the decode hot path, kept to a multiply.
            return tokens <= (self.shared + self.blocks) * block_size;
        }
        self.group_fits(tokens, block_size)
    }

    #[cold]
    fn group_fits(&self, tokens: u32, block_size: u32) -> bool {
        self.group_blocks(tokens, block_size) <= self.shared + self.blocks
    }

    /// Leading blocks that hold the same tokens for every sample, the only
    /// ones the prefix cache may adopt (all of them for a single sample).
    #[inline]
    pub fn common_blocks(&self, block_size: u32) -> usize {
        if self.samples <= 1 {
            usize::MAX
        } else {
            (self.fork_tokens / block_size) as usize
        }
    }
}

impl super::Replica {
    /// Sends every decode step through the group arithmetic, as if a
    /// request with several samples had been admitted: the equivalence test
    /// of the single-sample fast path (`SchedState::schedule_decodes`).
    #[cfg(test)]
    pub fn force_group_path(&mut self) {
        self.st.forked = true;
    }
}

impl SchedState {
    /// Whether `max_num_seqs` leaves no room for a group of `samples`
    /// sequences: vLLM counts every sample of a group against the limit
    /// (`SequenceGroup.get_max_num_running_seqs`). A group larger than the
    /// limit still runs alone on an empty replica, so it cannot wait forever.
    pub(super) fn seq_slots_short(&self, samples: u32) -> bool {
        if !self.forked && samples <= 1 {
            // Only single samples so far: one slot per running sequence.
            return self.running.len() >= self.cfg.max_num_seqs;
        }
        if self.running.is_empty() {
            return false;
        }
        let running: usize = self.running.iter().map(|s| s.samples as usize).sum();
        running + samples as usize > self.cfg.max_num_seqs
    }
}

/// Adds the block copies of a group's copy-on-write to the iteration whose
/// decode step first writes past its fork (its cache then holds exactly
/// the prompt): `n − 1` copies of the partial last prompt block, each a
/// whole block of `block_size` token slots, as vLLM's `copy_blocks` kernel
/// copies them (every layer's K and V of the block) before the step's
/// forward pass.
#[inline]
pub fn add_copy_on_write(acc: &mut BatchShape, s: &RunningSeq, block_size: u32) {
    if s.samples > 1 && s.kv_tokens == s.fork_tokens {
        let copies = cow_copies(block_size, s.samples, s.fork_tokens) as u64;
        acc.copy_kv_tokens += copies * block_size as u64;
    }
}

/// Adds a group's decode step to the iteration's shape: one decoding
/// sequence per sample, each on its own context of `context` tokens (plus
/// `drafts` speculative tokens to verify when `speculative`).
#[inline]
pub fn add_decodes(
    acc: &mut BatchShape,
    samples: u32,
    context: u64,
    drafts: u64,
    speculative: bool,
) {
    for _ in 0..samples.max(1) {
        if speculative {
            acc.add_verify(drafts, context);
        } else {
            acc.add_decode(context + 1);
        }
    }
}

/// A request whose `samples` samples can never fit one replica's KV cache
/// together (checked at arrival, like `simulation::unservable` for one).
pub fn exceeds_kv(s: &ReplicaPlan, prompt: u32, output: u32, samples: u32) -> bool {
    if samples <= 1 {
        return false;
    }
    let bs = s.memory.block_size;
    let kv_total = s.limits.kv_blocks;
    let tokens = (prompt + output).saturating_sub(1);
    group_blocks(tokens, bs, samples, prompt) as u64 > kv_total
        || BlockAllocator::blocks_for(tokens as u64, bs as u64) > kv_total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_share_full_prompt_blocks_and_copy_the_partial_one() {
        // Prompt 40 tokens, blocks of 16: 2 full blocks + a partial one.
        let (bs, p) = (16, 40);
        // Before any sample writes: one copy of the prompt.
        assert_eq!(group_blocks(p, bs, 4, p), 3);
        // First decode writes position 40: the partial block is copied for
        // 3 of the 4 samples.
        assert_eq!(group_blocks(p + 1, bs, 4, p), 2 + 4);
        assert_eq!(cow_copies(bs, 4, p), 3);
        // At 100 tokens each: 2 shared + 4 × (7 − 2) private.
        assert_eq!(group_blocks(100, bs, 4, p), 22);
        assert_eq!(independent_blocks(100, bs, 4), 28);
        // A prompt ending on a block boundary copies nothing.
        assert_eq!(cow_copies(bs, 4, 32), 0);
        assert_eq!(group_blocks(33, bs, 4, 32), 2 + 4);
        // One sample is an ordinary sequence.
        assert_eq!(group_blocks(100, bs, 1, p), 7);
        assert_eq!(cow_copies(bs, 1, p), 0);
    }

    #[test]
    fn a_group_decodes_one_sequence_per_sample() {
        let mut one = BatchShape::default();
        add_decodes(&mut one, 1, 99, 0, false);
        let mut four = BatchShape::default();
        add_decodes(&mut four, 4, 99, 0, false);
        assert_eq!((one.decode_seqs, four.decode_seqs), (1, 4));
        assert_eq!(four.decode_context_tokens, 4 * one.decode_context_tokens);
    }

    use crate::replica::tests::{assert_all_completed, engine, replica, requests, run_to_end};
    use crate::replica::TokenGaps;
    use crate::time::SimTime;

    #[test]
    fn a_group_prefills_once_decodes_n_and_holds_the_shared_prompt_once() {
        // Prompt 40 tokens, 5 outputs per sample, 4 samples, blocks of 16.
        let mut reqs = requests(1, 40, 5);
        reqs[0].set_samples(4);
        let mut rep = replica(&engine(8, 1000, 16), 100);
        rep.enqueue(0);
        let mut t = SimTime(0);
        let prefill = rep.form_batch(t, &mut reqs).unwrap();
        assert_eq!(
            (
                prefill.prefill_seqs,
                prefill.prefill_tokens,
                prefill.decode_seqs
            ),
            (1, 40, 0)
        );
        // One copy of the prompt before any sample writes.
        assert_eq!(rep.kv().used(), 3);
        t = t.plus(1000);
        rep.finish_iteration(t, &mut reqs, &mut vec![], &mut TokenGaps::default());
        assert_eq!(reqs[0].first_token, Some(t));
        // First decode: 4 sequences; the partial block is copied for 3.
        let decode = rep.form_batch(t, &mut reqs).unwrap();
        assert_eq!(decode.decode_seqs, 4);
        // Those 3 copies are whole 16-slot blocks copied in this step.
        assert_eq!(decode.copy_kv_tokens, 3 * 16);
        assert_eq!(rep.kv().used(), group_blocks(41, 16, 4, 40) as u64);
        assert_eq!(rep.kv().used(), 2 + 4);
        t = t.plus(1000);
        let out = rep.finish_iteration(t, &mut reqs, &mut vec![], &mut TokenGaps::default());
        assert_eq!(out.decode_seqs, 4);
        let rest = run_to_end(&mut rep, &mut reqs);
        assert!(rest.iter().all(|s| s.decode_seqs == 4));
        // Later steps write private blocks: nothing more is copied.
        assert!(rest.iter().all(|s| s.copy_kv_tokens == 0));
        assert_eq!(reqs[0].generated, 5);
        assert_all_completed(&rep, &reqs);
    }

    #[test]
    fn copy_on_write_is_priced_as_kv_bytes_over_memory_bandwidth() {
        // Llama-3.1-8B on an H100: 128 KiB of KV per token over 32 layers;
        // 3 copied 16-slot blocks read and write 2 × 48 × 128 KiB.
        let (m, _) = crate::catalog::model("llama-3.1-8b").unwrap();
        let h = crate::catalog::hardware("h100-sxm").unwrap();
        let bf16 = crate::catalog::Dtype::Bf16;
        let r = crate::cost::Roofline::new(&m, &h, bf16, bf16, 1);
        let mut plain = BatchShape::default();
        add_decodes(&mut plain, 4, 40, 0, false);
        let mut forked = plain;
        forked.copy_kv_tokens = 48;
        let secs = |b: &BatchShape| r.forward_secs(b);
        let bytes = 2.0 * 48.0 * m.kv_bytes_per_token(bf16);
        let want = bytes / (h.memory_bw_bytes_per_s() * crate::cost::MEMORY_EFFICIENCY);
        let got = secs(&forked) - secs(&plain);
        assert!(
            (got - want).abs() < 1e-9 * want.max(1e-12) + 1e-12,
            "{got} vs {want}"
        );
        assert!(got > 0.0);
        use crate::cost::CostModel;
        assert!(r.iteration_time(&forked) >= r.iteration_time(&plain));
        // The decode-step fast path must not skip the copies.
        let mut terms = crate::cost::StepTerms::default();
        assert_eq!(
            r.iteration_time_with(&forked, &mut terms),
            r.iteration_time(&forked)
        );
    }

    #[test]
    fn every_sample_takes_a_sequence_slot() {
        // max_num_seqs 6: one group of 4 and a single fit, a second group
        // of 4 waits; a group larger than the limit still runs alone.
        let mut reqs = requests(4, 20, 3);
        reqs[0].set_samples(4);
        reqs[1].set_samples(4);
        reqs[3].set_samples(9);
        let mut rep = replica(&engine(6, 1000, 16), 200);
        for i in [0, 2, 1, 3] {
            rep.enqueue(i);
        }
        let shapes = run_to_end(&mut rep, &mut reqs);
        assert_eq!(shapes[0].prefill_seqs, 2);
        assert!(shapes.iter().all(|s| s.decode_seqs <= 9));
        assert!(shapes.iter().any(|s| s.decode_seqs == 9));
        assert!(shapes
            .iter()
            .filter(|s| s.decode_seqs != 9)
            .all(|s| s.seqs() <= 6));
        assert_all_completed(&rep, &reqs);
    }
}
