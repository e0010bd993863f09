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

/// The element-wise time of one layer for `tokens` tokens, seconds, in the
/// fused form ([`ElementwiseForm::Fused`]) every named runtime runs.
#[inline]
pub fn layer_secs(bytes_per_token: f64, mem_bw: f64, tokens: f64) -> f64 {
    ELEMENTWISE_KERNELS * ELEMENTWISE_KERNEL_FLOOR_S
        + tokens * bytes_per_token / (mem_bw * ELEMENTWISE_BW_EFFICIENCY)
}

/// How an engine runs a layer's element-wise work. Calibration measures the
/// two forms of RMSNorm against each other on the device
/// (`sim::profile::ElementwiseExperiment`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElementwiseForm {
    /// One kernel per operation, reading and writing the activations once:
    /// vLLM's `rms_norm` / `fused_add_rms_norm` and `silu_and_mul` CUDA
    /// kernels (`csrc/layernorm_kernels.cu`, `csrc/activation_kernels.cu`),
    /// SGLang's `sgl-kernel` equivalents, TensorRT-LLM's fused plugins, and
    /// what `torch.compile` generates.
    Fused,
    /// Composed tensor operations, as PyTorch eager mode runs Hugging Face
    /// transformers' `LlamaRMSNorm` (upcast to f32, square, reduce, add ε,
    /// reciprocal square root, scale, downcast, weight): each a kernel of its
    /// own streaming the tensor through HBM.
    Eager,
}

impl ElementwiseForm {
    pub fn name(self) -> &'static str {
        match self {
            ElementwiseForm::Fused => "fused",
            ElementwiseForm::Eager => "eager",
        }
    }

    /// Kernels one RMSNorm launches: one fused; nine composed (to f32,
    /// square, sum, ÷ width, + ε, square root, divide, to the activation
    /// dtype, × weight).
    pub fn rms_norm_kernels(self) -> f64 {
        match self {
            ElementwiseForm::Fused => 1.0,
            ElementwiseForm::Eager => 9.0,
        }
    }

    /// HBM bytes one RMSNorm moves per row of `hidden` activations of
    /// `act_bytes` each: fused, a read and a write; composed, the upcast
    /// (a + 4), square (8), sum (4), divide (8), downcast (4 + a) and
    /// weight product (2a), all per value.
    pub fn rms_norm_bytes(self, hidden: f64, act_bytes: f64) -> f64 {
        match self {
            ElementwiseForm::Fused => 2.0 * act_bytes * hidden,
            ElementwiseForm::Eager => (28.0 + 4.0 * act_bytes) * hidden,
        }
    }

    /// One RMSNorm over `tokens` rows, seconds, priced like every
    /// element-wise kernel: a floor per kernel plus the bytes at the
    /// element-wise share of bandwidth.
    pub fn rms_norm_secs(self, tokens: f64, hidden: f64, act_bytes: f64, mem_bw: f64) -> f64 {
        self.rms_norm_kernels() * ELEMENTWISE_KERNEL_FLOOR_S
            + tokens * self.rms_norm_bytes(hidden, act_bytes) / (mem_bw * ELEMENTWISE_BW_EFFICIENCY)
    }
}

impl crate::cost::runtime::EngineRuntime {
    /// The element-wise form this runtime runs. Every named runtime serves
    /// with fused kernels: vLLM has shipped its CUDA `rms_norm` since its
    /// first release (the eager-2023 runtime is vLLM 0.2 with those
    /// kernels, eager only in not capturing CUDA graphs), and SGLang and
    /// TensorRT-LLM run their own fused kernels.
    pub fn elementwise_form(self) -> ElementwiseForm {
        match self {
            crate::cost::runtime::EngineRuntime::CudaGraph
            | crate::cost::runtime::EngineRuntime::Eager2023
            | crate::cost::runtime::EngineRuntime::Vllm
            | crate::cost::runtime::EngineRuntime::Sglang
            | crate::cost::runtime::EngineRuntime::Trtllm => ElementwiseForm::Fused,
        }
    }
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

    #[test]
    fn a_composed_rms_norm_moves_nine_times_the_bytes_of_a_fused_one_in_bf16() {
        let (h, a) = (4096.0, ACTIVATION_BYTES);
        assert_eq!(a, 2.0);
        let fused = ElementwiseForm::Fused.rms_norm_bytes(h, a);
        let eager = ElementwiseForm::Eager.rms_norm_bytes(h, a);
        // 2 + 4 + 8 + 4 + 8 + 4 + 2 + 4 = 36 bytes per value against 4.
        assert_eq!(eager / fused, 9.0);
        // In bf16 the launches (9 against 1) and the bytes scale alike, so
        // the time does at every token count; in f32 (a = 4) the bytes are
        // 44/8 = 5.5 times.
        let bw = 3.35e12;
        for tokens in [1.0, 4096.0] {
            let r = ElementwiseForm::Eager.rms_norm_secs(tokens, h, a, bw)
                / ElementwiseForm::Fused.rms_norm_secs(tokens, h, a, bw);
            assert!((r - 9.0).abs() < 1e-9, "{r}");
        }
        assert_eq!(
            ElementwiseForm::Eager.rms_norm_bytes(h, 4.0)
                / ElementwiseForm::Fused.rms_norm_bytes(h, 4.0),
            5.5
        );
        for r in crate::cost::runtime::EngineRuntime::ALL {
            assert_eq!(r.elementwise_form(), ElementwiseForm::Fused);
        }
    }
}
