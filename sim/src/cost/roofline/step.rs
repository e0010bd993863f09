//! A replica's steps priced without recomputing what they share.
//!
//! Consecutive iterations of a replica mostly have the same shape but for
//! their decode context: a decode run (`replica::decode_run`) grows every
//! sequence by one token a step and changes nothing else. In a one-group,
//! one-stage roofline everything but the decode attention term — the
//! element-wise kernels, the matrices, the communication, the LM head, the
//! engine's host time — is a function of the sequence count in a
//! decode-only step, so [`StepTerms`] keeps those terms from the last such
//! step priced and [`Roofline::iteration_time_with`] recomputes only the
//! attention (and the swap time, one division). A decode run's step, which
//! swaps nothing, is priced by the terms themselves
//! ([`StepTerms::decode_step_time`]): they keep the few constants the
//! attention and the sums read. It adds
//! the very same `f64` values in the very same order as
//! [`Roofline::forward_secs`] and `iteration_secs`, so every price, and every
//! output, stays bit for bit the same (a test compares them over a sweep).

use super::Roofline;
use crate::cost::runtime::EngineRuntime;
use crate::cost::{BatchShape, DECODE_ATTENTION_BW_EFFICIENCY, DECODE_ATTENTION_FLOOR_S};
use crate::time::Nanos;

/// The context-independent terms of the last decode-only shape a replica
/// priced, which depend on its sequence count alone (`seqs`; 0: none kept),
/// with the model's constants that the rest of such a step's price reads:
/// enough to price a decode run's step from its context alone
/// ([`Self::decode_step_time`]), without a call into the cost model.
///
/// Only [`Roofline`] keeps terms, and a replica's terms are its own cost
/// model's: the simulation prices a run's step from them when they are the
/// step's sequence count's, so a model must not hand them to another.
#[derive(Clone, Debug, Default)]
pub struct StepTerms {
    seqs: u32,
    /// Element-wise kernels plus prefill attention (none), the first two
    /// terms of a layer's shared part.
    ew_prefill: f64,
    dense: f64,
    comm: f64,
    moe: f64,
    moe_comm: f64,
    lm_head: f64,
    host: crate::cost::runtime::HostTime,
    /// The swap time of a step that swaps nothing (`0 / pcie_bw`: zero, or
    /// NaN on a host without a link, as the plain price has it).
    no_swap: f64,
    attention: DecodeAttention,
    dense_layers: f64,
    moe_layers: f64,
    runtime: EngineRuntime,
}

impl StepTerms {
    /// The price of a decode-only step of `seqs` sequences over `context`
    /// tokens that swaps nothing — every step of a decode run — when these
    /// are the terms of that many sequences (`None` otherwise: the cost
    /// model's `decode_step_time` prices it, and keeps its terms).
    #[inline(always)]
    pub fn decode_step_time(&self, seqs: u32, context: u64) -> Option<Nanos> {
        (seqs != 0 && seqs == self.seqs).then(|| self.price(self.no_swap, context))
    }

    /// The price of a decode-only step over `context` tokens of these
    /// terms' sequence count, with swap time `fixed`: `forward_secs`'s
    /// one-group sums and `iteration_time`'s rounding, in their order.
    #[inline(always)]
    fn price(&self, fixed: f64, context: u64) -> Nanos {
        let shared = self.ew_prefill + self.attention.secs(context, self.seqs);
        let per_dense = self.dense + shared + self.comm;
        let mut layers = self.dense_layers * per_dense;
        if self.moe_layers > 0.0 {
            let per_moe = self.moe + shared + self.moe_comm;
            layers += self.moe_layers * per_moe;
        }
        let forward = fixed + layers + self.lm_head;
        crate::time::secs_to_nanos(self.runtime.wall_secs(forward, self.host)).max(1)
    }
}

/// Decode attention's constants, per layer and GPU: FLOPs per query–key
/// pair and KV bytes per token, the attention FLOP rate and the bandwidth
/// the paged KV cache streams at. A replica's `StepTerms` keeps a copy, so
/// that a decode run's step is priced from them alone.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct DecodeAttention {
    flops_per_pair: f64,
    kv_bytes_per_token: f64,
    flops: f64,
    bw: f64,
    /// Attention by layer kind, for models that are not all full attention.
    kinds: Option<super::KindMix>,
}

impl DecodeAttention {
    /// Decode attention of `seqs` sequences over `context` tokens in all,
    /// seconds per layer: the kernel's floor and its work.
    #[inline(always)]
    pub(super) fn secs(&self, context: u64, seqs: u32) -> f64 {
        DECODE_ATTENTION_FLOOR_S + self.work_secs(context, seqs)
    }

    /// [`Self::secs`] without the kernel's floor: what splits over attention
    /// groups and micro-batches, each of which launches its own kernel.
    #[inline(always)]
    pub(super) fn work_secs(&self, context: u64, seqs: u32) -> f64 {
        if let Some(mix) = &self.kinds {
            let plain = super::kinds::Plain {
                flops_per_pair: self.flops_per_pair,
                kv_bytes_per_token: self.kv_bytes_per_token,
                flops: self.flops,
                bw: self.bw,
            };
            return mix.decode_secs(&plain, context as f64, seqs as f64);
        }
        let ctx = context as f64;
        let flops = self.flops_per_pair * ctx;
        let bytes = ctx * self.kv_bytes_per_token;
        (flops / self.flops).max(bytes / self.bw)
    }
}

impl Roofline {
    /// What decode attention's time depends on besides the context.
    #[inline]
    pub(super) fn decode_attention(&self) -> DecodeAttention {
        DecodeAttention {
            flops_per_pair: self.attn_decode_flops_per_pair,
            kv_bytes_per_token: self.kv_bytes_per_token_layer,
            flops: self.attn_flops,
            bw: self.mem_bw * DECODE_ATTENTION_BW_EFFICIENCY,
            kinds: self.kinds,
        }
    }

    /// [`CostModel::iteration_time`](crate::cost::CostModel::iteration_time)
    /// reusing `terms` from the replica's last decode-only step when this
    /// one is decode-only with as many sequences. Other shapes (prefills,
    /// speculative verification, several groups or stages) are priced
    /// directly and leave `terms` as they are.
    #[inline]
    pub fn iteration_time_with(&self, b: &BatchShape, terms: &mut StepTerms) -> Nanos {
        let decode_only = b.prefill_seqs == 0
            && b.prefill_tokens == 0
            && b.prefill_kv_tokens == 0
            && b.prefill_attn_pairs == 0.0
            && b.verify_extra_tokens == 0
            && b.verify_context_tokens == 0
            && b.copy_kv_tokens == 0;
        if !self.single_group || !decode_only || b.decode_seqs == 0 {
            return crate::cost::CostModel::iteration_time(self, b);
        }
        if terms.seqs != b.decode_seqs {
            self.keep_terms(b, terms);
        }
        terms.price(b.swap_bytes / self.pcie_bw, b.decode_context_tokens)
    }

    /// Keeps the terms of decode-only shape `b` that depend on its sequence
    /// count alone. Once per sequence count: out of line, and off the steps'
    /// path.
    #[cold]
    #[inline(never)]
    fn keep_terms(&self, b: &BatchShape, terms: &mut StepTerms) {
        let tokens = b.tokens();
        let n = tokens as f64;
        let logit_rows = b.logit_rows() as f64;
        *terms = StepTerms {
            seqs: b.decode_seqs,
            ew_prefill: self.elementwise(n) + self.attn_prefill(b),
            dense: self.memo.get(super::Term::Dense, tokens, || self.dense(n)),
            comm: self.comm(n),
            moe: if self.moe_layers > 0.0 {
                self.memo.get(super::Term::Moe, tokens, || self.moe(n, n))
            } else {
                0.0
            },
            moe_comm: if self.moe_layers > 0.0 {
                self.moe_comm(n, true)
            } else {
                0.0
            },
            lm_head: self.memo.get(super::Term::LmHead, b.logit_rows(), || {
                self.lm_head(logit_rows)
            }),
            host: self.host(b),
            no_swap: 0.0 / self.pcie_bw,
            attention: self.decode_attention(),
            dense_layers: self.dense_layers,
            moe_layers: self.moe_layers,
            runtime: self.runtime,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{self, Dtype};
    use crate::cost::CostModel;
    use crate::parallel::Parallelism;

    fn roofline(model: &str, tp: u32, pipeline: u32) -> Roofline {
        let (m, _) = catalog::model(model).unwrap();
        let h = catalog::hardware("h100-sxm").unwrap();
        let par = Parallelism {
            tensor: tp,
            pipeline,
            expert: 1,
            ..Parallelism::default()
        };
        Roofline::with_parallelism(&m, &h, Dtype::Bf16, Dtype::Bf16, &par)
    }

    /// Runs of decode steps, mixed steps and swaps, priced through one
    /// `StepTerms` as a replica does, give the plain price bit for bit.
    #[test]
    fn cached_terms_give_the_plain_price() {
        for (model, tp, pp) in [
            ("llama-3.1-8b", 1, 1),
            ("llama-3.1-70b", 4, 1),
            ("mixtral-8x7b", 2, 1),
            ("llama-3.1-70b", 2, 2),
        ] {
            let r = roofline(model, tp, pp);
            let mut terms = StepTerms::default();
            let mut priced = 0;
            for seqs in [1u32, 2, 7, 64, 300] {
                for step in 0..40u64 {
                    let mut b = BatchShape::default();
                    for i in 0..seqs as u64 {
                        b.add_decode(100 + 37 * i + step);
                    }
                    if step % 9 == 4 {
                        b.add_prefill(512 + step, 64 * step);
                    }
                    if step % 13 == 7 {
                        b.swap_bytes = 3.5e6 * step as f64;
                    }
                    b.idle_ns = step % 3;
                    assert_eq!(
                        r.iteration_time_with(&b, &mut terms),
                        r.iteration_time(&b),
                        "{model} tp {tp} pp {pp}: {b:?}"
                    );
                    // A run's step: the same shape without prefill, swap
                    // or idle time, priced from its two numbers.
                    let run_step = BatchShape {
                        decode_seqs: b.decode_seqs,
                        decode_context_tokens: b.decode_context_tokens,
                        ..BatchShape::default()
                    };
                    let plain = r.iteration_time(&run_step);
                    assert_eq!(
                        r.decode_step_time(seqs, b.decode_context_tokens, &mut terms),
                        plain,
                        "{model} tp {tp} pp {pp}: {run_step:?}"
                    );
                    // The terms alone price it the same (one group and
                    // stage: the roofline kept them), or defer to the model.
                    let alone = terms.decode_step_time(seqs, b.decode_context_tokens);
                    assert_eq!(alone.is_some(), pp == 1, "{model} tp {tp} pp {pp}");
                    assert!(alone.is_none_or(|ns| ns == plain));
                    priced += 1;
                }
            }
            assert_eq!(r.iteration_time_with(&BatchShape::default(), &mut terms), 0);
            assert_eq!(r.decode_step_time(0, 0, &mut terms), 0);
            assert_eq!(priced, 200);
        }
    }
}
