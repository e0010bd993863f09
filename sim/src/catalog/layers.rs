//! Kinds of decoder layer by how they attend, and the closed forms of what
//! each kind holds per sequence and computes per token.
//!
//! - **Full attention** (Vaswani et al. 2017), with grouped-query (Ainslie et
//!   al. 2023) or multi-query key-value heads, or DeepSeek's latent attention
//!   (MLA): the cache grows by one entry per token and layer, and a token
//!   attends to every earlier one.
//! - **Sliding-window attention** (Longformer, Beltagy et al. 2020; Mistral 7B;
//!   Gemma 3 with a 1024-token window on five layers of six; gpt-oss with a
//!   128-token window on every other layer): a token attends to the last `W`
//!   tokens only, so the cache a layer needs and the work a token does are
//!   bounded by `W`. vLLM's hybrid KV-cache manager frees the blocks that fall
//!   out of the window (`SlidingWindowManager`).
//! - **Chunked local attention** (Llama 4, `attention_chunk_size` 8192 on three
//!   layers of four): a token attends to the earlier tokens of its own chunk of
//!   `C` tokens, so at most `C`; vLLM's `ChunkedLocalAttentionManager` frees
//!   the blocks of finished chunks.
//! - **Linear attention / recurrent state** (Gated DeltaNet, Yang et al.
//!   ICLR 2025, in Qwen3-Next and Qwen3.5 on three layers of four): each value
//!   head keeps a `d_k × d_v` state matrix updated by the gated delta rule and a
//!   short causal convolution's last `kernel − 1` inputs. The state is fixed
//!   per sequence: nothing grows with the context, and a token's work does not
//!   depend on it.
//! - **Sparse attention** (DeepSeek Sparse Attention, DeepSeek-V3.2-Exp report
//!   2025, also in GLM-5): MLA whose queries attend to the `top_k` (2048) keys a
//!   *lightning indexer* picks. The indexer scores every earlier token with a
//!   few small FP8 heads and caches one `index_head_dim` FP8 key (plus an FP32
//!   scale) per token and layer beside the latent.
//! - **Attention sinks** (StreamingLLM, Xiao et al. ICLR 2024; gpt-oss): a
//!   learned logit per head added to the softmax denominator. One parameter
//!   per head and layer; one exponent per head and query (below 0.1 % of any
//!   attention kernel's work, so not priced).

use serde::{Deserialize, Serialize};

/// How a decoder layer attends. Latent (MLA) and sparse (DSA) attention are
/// properties of a model's full-attention layers (see
/// [`ModelArch`](super::ModelArch)), not kinds of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerKind {
    /// Every earlier token (GQA/MHA/MQA, or MLA).
    Full,
    /// The last `sliding_window` tokens.
    Sliding,
    /// The earlier tokens of the token's own `attention_chunk`-token chunk.
    Chunked,
    /// A fixed recurrent state (Gated DeltaNet).
    Linear,
}

impl LayerKind {
    pub const ALL: [LayerKind; 4] = [
        LayerKind::Full,
        LayerKind::Sliding,
        LayerKind::Chunked,
        LayerKind::Linear,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LayerKind::Full => "full",
            LayerKind::Sliding => "sliding",
            LayerKind::Chunked => "chunked",
            LayerKind::Linear => "linear",
        }
    }
}

/// Tokens of one sequence of `context` tokens whose keys and values one layer
/// of a windowed kind keeps, in whole blocks of `block_size`: the blocks that
/// overlap the last `window` tokens (one partial block at each end at most),
/// never more than the sequence's own blocks. `None` (full attention): all.
/// This is what vLLM's sliding-window and chunked-local managers hold after
/// freeing the blocks that fall out of the window.
pub fn kv_tokens_held(context: u64, window: Option<u32>, block_size: u32) -> u64 {
    let bs = block_size.max(1) as u64;
    let all = context.div_ceil(bs) * bs;
    match window {
        None => all,
        Some(w) => all.min((w as u64).div_ceil(bs) * bs + bs),
    }
}

/// Gated DeltaNet linear attention (Yang, Kautz, Hatamizadeh, ICLR 2025), as
/// Qwen3-Next and Qwen3.5 configure it (`linear_num_key_heads`,
/// `linear_num_value_heads`, `linear_key_head_dim`, `linear_value_head_dim`,
/// `linear_conv_kernel_dim`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinearAttention {
    pub key_heads: u32,
    pub value_heads: u32,
    pub key_head_dim: u32,
    pub value_head_dim: u32,
    /// Width of the short causal convolution over q, k and v.
    pub conv_kernel: u32,
}

/// Bytes per element of the recurrent state matrices: FP32, SGLang's default
/// `mamba_ssm_dtype` for Qwen3-Next (the delta rule's repeated decay and
/// update lose too much in BF16).
pub const LINEAR_STATE_BYTES: f64 = 4.0;
/// Bytes per element of the convolution state (the model's BF16 activations).
pub const CONV_STATE_BYTES: f64 = 2.0;

impl LinearAttention {
    pub fn key_dim(&self) -> f64 {
        (self.key_heads * self.key_head_dim) as f64
    }

    pub fn value_dim(&self) -> f64 {
        (self.value_heads * self.value_head_dim) as f64
    }

    /// Channels the causal convolution runs over: q, k and v.
    fn conv_channels(&self) -> f64 {
        2.0 * self.key_dim() + self.value_dim()
    }

    /// Matrix parameters of one layer (all split by head over tensor
    /// parallelism): the fused q/k/v/z input projection, the β and α (gate)
    /// projections, the output projection.
    pub fn matrix_params(&self, hidden: f64) -> f64 {
        let qkvz = hidden * (2.0 * self.key_dim() + 2.0 * self.value_dim());
        let ba = hidden * 2.0 * self.value_heads as f64;
        let out = self.value_dim() * hidden;
        qkvz + ba + out
    }

    /// Small parameters of one layer: the convolution's taps, the per-head
    /// decay (`A_log`) and time-step bias, and the gated output norm.
    pub fn small_params(&self) -> f64 {
        self.conv_channels() * self.conv_kernel as f64
            + 2.0 * self.value_heads as f64
            + self.value_head_dim as f64
    }

    /// State bytes one sequence keeps per layer on one GPU of `tp` (heads
    /// split over the group): every value head's `d_k × d_v` matrix and the
    /// convolution's last `kernel − 1` inputs.
    pub fn state_bytes(&self, tp: u32) -> f64 {
        let t = tp.max(1) as f64;
        let recurrent = self.value_heads as f64 * (self.key_head_dim * self.value_head_dim) as f64;
        let conv = (self.conv_kernel.saturating_sub(1)) as f64 * self.conv_channels();
        (recurrent * LINEAR_STATE_BYTES + conv * CONV_STATE_BYTES) / t
    }

    /// FLOPs of one token through one layer's recurrence, all heads: per value
    /// head the decay of the state (`d_k·d_v`), the delta rule's `S k`
    /// (2·`d_k·d_v`), its rank-one update (2·`d_k·d_v`) and the read-out
    /// `S q` (2·`d_k·d_v`), plus the convolution (2 × kernel per channel).
    /// Independent of the context.
    pub fn flops_per_token(&self) -> f64 {
        7.0 * self.value_heads as f64 * (self.key_head_dim * self.value_head_dim) as f64
            + 2.0 * self.conv_kernel as f64 * self.conv_channels()
    }
}

/// DeepSeek Sparse Attention (DeepSeek-V3.2-Exp technical report, 2025):
/// `index_n_heads`, `index_head_dim`, `index_topk` of the config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SparseAttention {
    pub index_heads: u32,
    pub index_head_dim: u32,
    /// Keys each query attends to.
    pub top_k: u32,
}

/// The indexer's cached key per token and layer is FP8 with one FP32 scale
/// per 128 elements (vLLM's `DeepseekV32IndexerCache`: `index_head_dim +
/// index_head_dim / 128 × 4` bytes), whatever the main cache's dtype.
pub const INDEXER_SCALE_BLOCK: f64 = 128.0;

impl SparseAttention {
    /// Bytes of the indexer's key per token and layer.
    pub fn key_bytes(&self) -> f64 {
        let d = self.index_head_dim as f64;
        d + (d / INDEXER_SCALE_BLOCK).ceil() * 4.0
    }

    /// Parameters of one layer's indexer (kept whole on every GPU, as vLLM's
    /// replicated indexer projections): query up-projection from the query
    /// latent (`q_rank` wide, or the hidden state), key projection, key
    /// LayerNorm (weight and bias) and the per-head weight projection.
    pub fn params(&self, hidden: f64, q_rank: f64) -> f64 {
        let (h, d) = (self.index_heads as f64, self.index_head_dim as f64);
        q_rank * h * d + hidden * d + 2.0 * d + hidden * h
    }

    /// Indexer FLOPs per query–key pair: every index head's dot product, a
    /// multiply-add per dimension, and the ReLU-weighted sum over heads.
    pub fn flops_per_pair(&self) -> f64 {
        let h = self.index_heads as f64;
        2.0 * h * self.index_head_dim as f64 + 2.0 * h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn qwen35() -> LinearAttention {
        LinearAttention {
            key_heads: 16,
            value_heads: 64,
            key_head_dim: 128,
            value_head_dim: 128,
            conv_kernel: 4,
        }
    }

    #[test]
    fn gated_deltanet_state_params_and_flops_in_closed_form() {
        let l = qwen35();
        // key_dim 2048, value_dim 8192.
        assert_eq!(
            l.matrix_params(4096.0),
            4096.0 * (2.0 * 2048.0 + 2.0 * 8192.0) + 4096.0 * 128.0 + 8192.0 * 4096.0
        );
        // 64 heads × 128 × 128 fp32 + 3 × (2·2048 + 8192) bf16 = 4 194 304 + 73 728.
        assert_eq!(l.state_bytes(1), 4_194_304.0 + 73_728.0);
        assert_eq!(l.state_bytes(4), (4_194_304.0 + 73_728.0) / 4.0);
        // 7 × 64 × 16384 + 2 × 4 × 12288.
        assert_eq!(l.flops_per_token(), 7_340_032.0 + 98_304.0);
    }

    #[test]
    fn dsa_indexer_in_closed_form() {
        let s = SparseAttention {
            index_heads: 64,
            index_head_dim: 128,
            top_k: 2048,
        };
        assert_eq!(s.key_bytes(), 132.0);
        assert_eq!(
            s.params(7168.0, 1536.0),
            1536.0 * 8192.0 + 7168.0 * 128.0 + 256.0 + 7168.0 * 64.0
        );
        assert_eq!(s.flops_per_pair(), 2.0 * 64.0 * 128.0 + 128.0);
    }

    #[test]
    fn windows_hold_whole_blocks() {
        assert_eq!(kv_tokens_held(1000, None, 16), 1008);
        // 128-token window, 16-token blocks: 8 blocks of the window + 1 partial.
        assert_eq!(kv_tokens_held(1000, Some(128), 16), 144);
        assert_eq!(kv_tokens_held(100, Some(128), 16), 112);
        assert_eq!(kv_tokens_held(0, Some(128), 16), 0);
    }

    proptest! {
        /// A windowed layer's cache never grows past the window (plus a
        /// block), however long the sequence; full attention's keeps growing.
        #[test]
        fn windowed_kv_stops_growing(ctx in 0u64..2_000_000, w in 1u32..20_000, bs in 1u32..257) {
            let held = kv_tokens_held(ctx, Some(w), bs);
            prop_assert!(held <= w as u64 + 2 * bs as u64);
            prop_assert!(held <= kv_tokens_held(ctx, None, bs));
            prop_assert!(held >= (ctx.min(w as u64)));
            let longer = kv_tokens_held(ctx + 10 * w as u64, Some(w), bs);
            prop_assert!(longer >= held && longer <= w as u64 + 2 * bs as u64);
        }

        /// A linear-attention layer's state does not depend on the context at
        /// all, and splits exactly over tensor parallelism.
        #[test]
        fn linear_state_is_fixed(heads in 1u32..128, dk in 1u32..256, dv in 1u32..256, k in 1u32..8, tp in prop::sample::select(vec![1u32, 2, 4, 8])) {
            let l = LinearAttention { key_heads: heads, value_heads: heads, key_head_dim: dk, value_head_dim: dv, conv_kernel: k };
            prop_assert!(((l.state_bytes(tp) * tp as f64) - l.state_bytes(1)).abs() < 1e-6 * l.state_bytes(1).max(1.0));
        }
    }
}
