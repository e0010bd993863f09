//! Element-wise kernels of one transformer layer: the two RMSNorms, rotary
//! embedding of queries and keys, the gated activation and the residual add.
//!
//! They do no matrix work but stream every token's activations through HBM,
//! so they cost `bytes per token / (bandwidth × efficiency)` per token plus a
//! floor per kernel. Vidur's per-operator A100 profiles (microsoft/vidur,
//! `data/profiling/compute/a100/*/mlp.csv`: `input_layernorm`, `attn_rope`,
//! `post_attention_layernorm`, `mlp_act`, `add`) put them at ~166 ns per
//! token per layer for Llama-2-7B on an A100 and ~22 µs per layer at one
//! token; the same bytes on an H100's 3.35 TB/s give ~90 ns per token.

use crate::catalog::ModelArch;
use crate::memory::ACTIVATION_BYTES;

/// Fraction of peak HBM bandwidth the element-wise kernels reach; fitted on
/// Vidur's A100 profiles (grid 0.3–0.7).
pub const ELEMENTWISE_BW_EFFICIENCY: f64 = 0.5;
/// Shortest time of one element-wise kernel, seconds; fitted on Vidur's A100
/// profiles (five kernels take 20–24 µs per layer at 1–64 tokens).
pub const ELEMENTWISE_KERNEL_FLOOR_S: f64 = 3e-6;
/// Element-wise kernels per layer: two norms, rotary, activation, residual add.
pub const ELEMENTWISE_KERNELS: f64 = 5.0;

/// Bytes one token moves through the element-wise kernels of one layer on
/// one GPU of a `tp`-way group: each RMSNorm reads and writes the hidden
/// state; rotary reads and writes this GPU's query and key heads; the gated
/// activation reads gate and up and writes their product (two reads and a
/// write without a gate); the residual add reads two states and writes one.
pub fn bytes_per_token_layer(model: &ModelArch, tp: u32) -> f64 {
    let tp = tp.max(1) as f64;
    let h = model.hidden_size as f64;
    let a = ACTIVATION_BYTES;
    let norms = 2.0 * 2.0 * h * a;
    let rope = 2.0 * (model.num_heads + model.num_kv_heads) as f64 * model.head_dim as f64 * a / tp;
    let inter = if model.num_experts > 0 {
        // Each token's routed and shared experts each run their activation.
        model
            .moe_intermediate_size
            .unwrap_or(model.intermediate_size) as f64
            * (model.experts_per_token + model.num_shared_experts) as f64
    } else {
        model.intermediate_size as f64
    };
    let act = if model.gated_mlp { 3.0 } else { 2.0 } * inter * a / tp;
    let add = 3.0 * h * a;
    norms + rope + act + add
}

/// The element-wise time of one layer for `tokens` tokens, seconds.
#[inline]
pub fn layer_secs(bytes_per_token: f64, mem_bw: f64, tokens: f64) -> f64 {
    ELEMENTWISE_KERNELS * ELEMENTWISE_KERNEL_FLOOR_S
        + tokens * bytes_per_token / (mem_bw * ELEMENTWISE_BW_EFFICIENCY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;

    #[test]
    fn about_90_ns_per_token_per_layer_on_an_h100() {
        let (m, _) = catalog::model("llama-3.1-8b").unwrap();
        let h = catalog::hardware("h100-sxm").unwrap();
        let b = bytes_per_token_layer(&m, 1);
        let per_token = (layer_secs(b, h.memory_bw_bytes_per_s(), 4096.0)
            - layer_secs(b, h.memory_bw_bytes_per_s(), 0.0))
            / 4096.0;
        assert!((80e-9..110e-9).contains(&per_token), "{per_token}");
        // Tensor parallelism splits the per-head and MLP parts, not the norms.
        assert!(bytes_per_token_layer(&m, 4) < b && bytes_per_token_layer(&m, 4) > 0.3 * b);
    }
}
