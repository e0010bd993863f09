//! Attention priced per layer kind (see `catalog::layers` for the kinds and
//! their sources): what a batch's attention costs in one average layer of a
//! model whose layers are not all plain full attention.
//!
//! Each kind's time is the roofline's larger of FLOPs over the attention
//! rate and bytes over the bandwidth, and a layer's attention is the mean of
//! the kinds' times weighted by their share of the layers (exact for the sum
//! over a replica's layers; a pipeline stage is charged the model's mix).
//!
//! - **Full**: as plain attention (MLA absorbed in decode).
//! - **Sparse (DSA)**: the lightning indexer scores every cached token
//!   (FP8 dot products of its small heads; reads its FP8 keys), then MLA
//!   attends to at most `top_k` tokens per query.
//! - **Sliding / chunked**: a query attends to at most `W` tokens, so the
//!   pairs and the keys read are bounded by `W` per query and sequence.
//! - **Linear**: a fixed number of FLOPs per token (the gated delta rule on
//!   each head's state) and a read and write of each sequence's state,
//!   whatever the context.
//!
//! The batch shape carries sums over sequences, not each length, so the
//! window bounds are taken on the sums: `min(Σ l_j, seqs · W)` for decode and
//! `min(pairs, tokens · W)` for prefill. Both are exact when every sequence
//! is past the window (or none is), and never below the true count.

use crate::catalog::{Dtype, HardwareSpec, LayerKind, ModelArch};
use crate::cost::{BatchShape, ATTENTION_EFFICIENCY};

/// What one average layer's attention costs besides the plain full-attention
/// constants the roofline keeps, per GPU of a group of `tp`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KindMix {
    /// Share of the layers of each kind, as [`LayerKind::ALL`].
    pub share: [f64; 4],
    /// Tokens a sliding (index 1) and chunked (index 2) layer attends to.
    pub window: [f64; 4],
    /// Sparse attention: keys per query, the indexer's FLOPs per pair and
    /// key bytes per token, and its FLOP rate (FP8 where the chip has it).
    pub top_k: Option<f64>,
    pub indexer_flops_per_pair: f64,
    pub indexer_bytes_per_token: f64,
    pub indexer_flops: f64,
    /// Linear layers: FLOPs per token, state bytes per sequence.
    pub linear_flops_per_token: f64,
    pub linear_state_bytes: f64,
}

/// The plain constants of full attention the mix refines, per layer and GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Plain {
    pub flops_per_pair: f64,
    /// KV bytes per token (MLA latent, without the indexer's key).
    pub kv_bytes_per_token: f64,
    pub flops: f64,
    pub bw: f64,
}

impl Plain {
    #[inline]
    fn secs(&self, pairs: f64, tokens: f64) -> f64 {
        (self.flops_per_pair * pairs / self.flops).max(tokens * self.kv_bytes_per_token / self.bw)
    }
}

impl KindMix {
    /// The mix of `model` on one GPU of `tp`, or `None` when every layer is
    /// plain full attention (the roofline's own terms price it).
    pub fn new(model: &ModelArch, hw: &HardwareSpec, tp: u32) -> Option<KindMix> {
        if model.uniform_attention() && model.sparse_attention.is_none() {
            return None;
        }
        let t = tp.max(1) as f64;
        let c = model.layer_kind_counts();
        let layers = model.layers.max(1) as f64;
        let mut mix = KindMix::default();
        for (i, n) in c.iter().enumerate() {
            mix.share[i] = *n as f64 / layers;
            mix.window[i] = model.window(LayerKind::ALL[i]).unwrap_or(0) as f64;
        }
        if let Some(sp) = &model.sparse_attention {
            mix.top_k = Some(sp.top_k as f64);
            // The indexer is replicated: every GPU scores its own queries'
            // pairs with all index heads (vLLM runs it whole per rank).
            mix.indexer_flops_per_pair = sp.flops_per_pair();
            mix.indexer_bytes_per_token = sp.key_bytes();
            mix.indexer_flops = hw.peak_flops(Dtype::Fp8) * ATTENTION_EFFICIENCY;
        }
        if let Some(l) = &model.linear_attention {
            mix.linear_flops_per_token = l.flops_per_token() / t;
            mix.linear_state_bytes = l.state_bytes(tp);
        }
        Some(mix)
    }

    /// Full layers' time for `pairs` query–key pairs over `kv` cached tokens
    /// read, `queries` queries: plain, or the indexer over all of them plus
    /// attention over the `top_k` per query it keeps.
    #[inline]
    fn full(&self, p: &Plain, pairs: f64, kv: f64, queries: f64) -> f64 {
        match self.top_k {
            None => p.secs(pairs, kv),
            Some(k) => {
                let indexer = (self.indexer_flops_per_pair * pairs / self.indexer_flops)
                    .max(kv * self.indexer_bytes_per_token / p.bw);
                let kept = pairs.min(queries * k);
                indexer + p.secs(kept, kv.min(kept))
            }
        }
    }

    /// Decode attention of one average layer: `seqs` sequences over `context`
    /// cached tokens in all, seconds.
    #[inline]
    pub fn decode_secs(&self, p: &Plain, context: f64, seqs: f64) -> f64 {
        let mut t = 0.0;
        if self.share[0] > 0.0 {
            t += self.share[0] * self.full(p, context, context, seqs);
        }
        for i in [1, 2] {
            if self.share[i] > 0.0 {
                let ctx = context.min(seqs * self.window[i]);
                t += self.share[i] * p.secs(ctx, ctx);
            }
        }
        if self.share[3] > 0.0 {
            t += self.share[3] * self.linear_secs(p, seqs, seqs);
        }
        t
    }

    /// Prefill attention of one average layer for the batch's chunks.
    pub fn prefill_secs(&self, p: &Plain, b: &BatchShape) -> f64 {
        let pairs = b.prefill_attn_pairs;
        let kv = b.prefill_kv_tokens as f64;
        let (tokens, seqs) = (b.prefill_tokens as f64, b.prefill_seqs as f64);
        let mut t = 0.0;
        if self.share[0] > 0.0 {
            t += self.share[0] * self.full(p, pairs, kv, tokens);
        }
        for i in [1, 2] {
            if self.share[i] > 0.0 {
                let w = self.window[i];
                t += self.share[i] * p.secs(pairs.min(tokens * w), kv.min(tokens + seqs * w));
            }
        }
        if self.share[3] > 0.0 {
            t += self.share[3] * self.linear_secs(p, tokens, seqs);
        }
        t
    }

    /// Linear layers for `tokens` tokens of `seqs` sequences: the recurrence's
    /// FLOPs, and each sequence's state read and written once.
    #[inline]
    fn linear_secs(&self, p: &Plain, tokens: f64, seqs: f64) -> f64 {
        (self.linear_flops_per_token * tokens / p.flops)
            .max(2.0 * seqs * self.linear_state_bytes / p.bw)
    }

    /// Share of the layers whose blocks hold every token (full layers).
    pub fn full_share(&self) -> f64 {
        self.share[0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;

    fn plain() -> Plain {
        Plain {
            flops_per_pair: 1000.0,
            kv_bytes_per_token: 100.0,
            flops: 1e12,
            bw: 1e12,
        }
    }

    #[test]
    fn sliding_layers_stop_at_the_window_and_linear_ones_ignore_the_context() {
        let (m, _) = catalog::model("gpt-oss-120b").unwrap();
        let h = catalog::hardware("h200").unwrap();
        let mix = KindMix::new(&m, &h, 1).unwrap();
        assert_eq!(mix.share, [0.5, 0.5, 0.0, 0.0]);
        let p = plain();
        // 4 sequences of 10 000 tokens: full layers read 40 000 tokens, the
        // sliding ones 4 × 128 = 512.
        let t = mix.decode_secs(&p, 40_000.0, 4.0);
        let full = (1000.0f64 * 40_000.0 / 1e12).max(40_000.0 * 100.0 / 1e12);
        let sliding = (1000.0f64 * 512.0 / 1e12).max(512.0 * 100.0 / 1e12);
        assert!((t - (0.5 * full + 0.5 * sliding)).abs() < 1e-18, "{t}");
        // Qwen3.5: three linear layers of four cost the same at any context.
        let (q, _) = catalog::model("qwen3.5-397b-a17b").unwrap();
        let mq = KindMix::new(&q, &h, 1).unwrap();
        assert_eq!(mq.share, [0.25, 0.0, 0.0, 0.75]);
        let lin = |ctx: f64| mq.decode_secs(&p, ctx, 8.0) - 0.25 * p.secs(ctx, ctx);
        assert!((lin(1e3) - lin(1e6)).abs() < 1e-15);
        let state = q.linear_attention.unwrap().state_bytes(1);
        let flops = q.linear_attention.unwrap().flops_per_token();
        let want = 0.75 * (flops * 8.0 / 1e12).max(2.0 * 8.0 * state / 1e12);
        assert!((lin(1e3) - want).abs() < 1e-15);
        // Plain models have no mix.
        let (l, _) = catalog::model("llama-3.1-8b").unwrap();
        assert!(KindMix::new(&l, &h, 1).is_none());
    }

    #[test]
    fn sparse_attention_keeps_top_k_after_indexing_everything() {
        let (d, _) = catalog::model("deepseek-v3.2").unwrap();
        let h = catalog::hardware("h200").unwrap();
        let mix = KindMix::new(&d, &h, 8).unwrap();
        assert_eq!(mix.top_k, Some(2048.0));
        let p = plain();
        // One sequence at 100 000 tokens: the indexer scores 100 000 pairs,
        // attention runs over 2048.
        let t = mix.decode_secs(&p, 100_000.0, 1.0);
        let indexer =
            (mix.indexer_flops_per_pair * 1e5 / mix.indexer_flops).max(1e5 * 132.0 / 1e12);
        let attn = (1000.0f64 * 2048.0 / 1e12).max(2048.0 * 100.0 / 1e12);
        assert!((t - (indexer + attn)).abs() < 1e-15, "{t}");
        // Below top-k it is dense attention plus the indexer.
        let short = mix.decode_secs(&p, 1000.0, 1.0);
        assert!(short > p.secs(1000.0, 1000.0));
    }
}
