//! The embedded catalog: GPU datasheet figures and model architectures.
//!
//! Hardware numbers are the vendors' published *dense* peaks (the datasheets
//! print sparse tensor-core figures with an asterisk; we halve those), memory
//! capacity as printed (binary gigabytes: "80 GB" HBM is 80 GiB), memory
//! bandwidth in decimal TB/s, and the per-direction GPU-to-GPU link bandwidth.
//! Model numbers are copied from each model's published `config.json`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Numeric formats for weights, activations and the KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    Fp32,
    Bf16,
    Fp16,
    Fp8,
    Int8,
    Int4,
}

impl Dtype {
    pub const ALL: [Dtype; 6] = [
        Dtype::Fp32,
        Dtype::Bf16,
        Dtype::Fp16,
        Dtype::Fp8,
        Dtype::Int8,
        Dtype::Int4,
    ];

    /// Bytes per element (int4 packs two per byte).
    pub fn bytes(self) -> f64 {
        match self {
            Dtype::Fp32 => 4.0,
            Dtype::Bf16 | Dtype::Fp16 => 2.0,
            Dtype::Fp8 | Dtype::Int8 => 1.0,
            Dtype::Int4 => 0.5,
        }
    }

    /// Bytes one *weight* takes in storage, quantization metadata included.
    /// Int4 checkpoints (AWQ, Lin et al. MLSys 2024; GPTQ, Frantar et al.
    /// ICLR 2023) store one fp16 scale and one packed 4-bit zero point per
    /// group of 128 weights: 0.5 + 2.5 / 128 bytes. FP8 and INT8 checkpoints
    /// carry one scale per output channel or tensor, under 0.1 %: ignored.
    pub fn weight_bytes(self) -> f64 {
        match self {
            Dtype::Int4 => 0.5 + INT4_GROUP_META_BYTES / INT4_GROUP_SIZE,
            d => d.bytes(),
        }
    }

    /// Whether this is a quantized (8- or 4-bit) format.
    pub fn is_quantized(self) -> bool {
        matches!(self, Dtype::Fp8 | Dtype::Int8 | Dtype::Int4)
    }

    /// The dtype quantized checkpoints keep their embeddings, LM head, norms
    /// and MoE router in: llm-compressor FP8/INT8 and AWQ/GPTQ INT4
    /// checkpoints quantize only the transformer layers' linear matrices and
    /// leave the rest in bf16. Unquantized formats keep everything as is.
    pub fn unquantized_part(self) -> Dtype {
        if self.is_quantized() {
            Dtype::Bf16
        } else {
            self
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Dtype::Fp32 => "fp32",
            Dtype::Bf16 => "bf16",
            Dtype::Fp16 => "fp16",
            Dtype::Fp8 => "fp8",
            Dtype::Int8 => "int8",
            Dtype::Int4 => "int4",
        }
    }
}

/// Weights per quantization group of int4 checkpoints (AWQ/GPTQ `group_size`).
pub const INT4_GROUP_SIZE: f64 = 128.0;
/// Metadata per int4 group: an fp16 scale (2 B) and a packed 4-bit zero point (0.5 B).
pub const INT4_GROUP_META_BYTES: f64 = 2.5;

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One accelerator as its datasheet describes it. Used by the roofline cost
mod hardware;
mod models;
pub use hardware::*;
pub use models::*;

#[cfg(test)]
mod tests {
    use super::*;

    fn params_b(key: &str) -> f64 {
        model(key).unwrap().0.total_params() / 1e9
    }

    #[test]
    fn parameter_counts_match_published_sizes() {
        // Published totals: 8.03B, 70.6B, 405.9B, 6.74B, 69.0B, 7.62B, 72.7B, 7.25B, 0.135B.
        let cases = [
            ("llama-3.1-8b", 8.03),
            ("llama-3.1-70b", 70.55),
            ("llama-3.1-405b", 405.85),
            ("llama-2-7b", 6.74),
            ("llama-2-70b", 68.98),
            ("qwen2.5-7b", 7.61),
            ("qwen2.5-72b", 72.7),
            ("mistral-7b", 7.25),
            ("llama-3.2-1b", 1.236),
            ("smollm2-135m", 0.1348),
        ];
        for (k, want) in cases {
            let got = params_b(k);
            // Qwen's QKV biases and rounding in the published figure: 0.5 %.
            assert!(
                (got - want).abs() / want < 0.005,
                "{k}: {got:.3}B vs {want}B"
            );
        }
    }

    #[test]
    fn moe_parameter_counts_match_published_totals_and_active() {
        // Mixtral-8x7B: "46.7B total parameters but only uses 12.9B per token"
        // (Mistral AI model card). Our counts: 46.70B and 12.88B.
        let (m, _) = model("mixtral-8x7b").unwrap();
        let (total, active) = (m.total_params() / 1e9, m.active_params() / 1e9);
        assert!((total - 46.7).abs() / 46.7 < 0.005, "{total}");
        assert!((active - 12.9).abs() / 12.9 < 0.005, "{active}");
        // DeepSeek-V3: 671B total without the 14B MTP module, "37B activated"
        // (model card; the published 37B is rounded, hence 2.5 % on active).
        // Our counts: 671.03B and 37.55B.
        let (d, _) = model("deepseek-v3").unwrap();
        let (total, active) = (d.total_params() / 1e9, d.active_params() / 1e9);
        assert!((total - 671.0).abs() / 671.0 < 0.005, "{total}");
        assert!((active - 37.0).abs() / 37.0 < 0.025, "{active}");
        assert_eq!((d.dense_layers(), d.moe_layers()), (3, 58));
        assert!(!d.is_moe_layer(2) && d.is_moe_layer(3));
        // Dense models: active = total.
        let (l, _) = model("llama-3.1-8b").unwrap();
        assert_eq!(l.active_params(), l.total_params());
    }

    #[test]
    fn mla_caches_the_latent_not_per_head_keys_and_values() {
        let (d, _) = model("deepseek-v3").unwrap();
        // 61 layers × (512 latent + 64 rotary key) × 2 bytes = 70 272 B/token,
        // against 2 × 61 × 128 heads × 192 × 2 = 5.99 MB had it been MHA.
        assert_eq!(d.kv_bytes_per_token(Dtype::Bf16), 70_272.0);
        assert_eq!(d.kv_bytes_per_token(Dtype::Fp8), 35_136.0);
        // Every GPU of a TP group holds the whole latent.
        assert_eq!(d.kv_elems_per_token_layer(8), 576.0);
        // Decode (absorbed) reads the 576-wide latent per head: 128 × (2·576 + 2·512).
        assert_eq!(d.attention_flops_per_pair(true), 128.0 * 2176.0);
        assert_eq!(
            d.attention_flops_per_pair(false),
            128.0 * (2.0 * 192.0 + 2.0 * 128.0)
        );
        // q_a (7168×1536) and kv_a (7168×576) are replicated on every TP rank.
        assert_eq!(
            d.attention_replicated_params(),
            7168.0 * 1536.0 + 7168.0 * 576.0
        );
    }

    #[test]
    fn int4_weights_carry_their_group_scales() {
        assert_eq!(Dtype::Int4.weight_bytes(), 0.51953125);
        assert_eq!(Dtype::Fp8.weight_bytes(), 1.0);
        assert_eq!(Dtype::Int4.unquantized_part(), Dtype::Bf16);
        assert_eq!(Dtype::Fp16.unquantized_part(), Dtype::Fp16);
    }

    #[test]
    fn kv_bytes_are_gqa_aware() {
        let (m, _) = model("llama-3.1-8b").unwrap();
        // 2 (K,V) × 32 layers × 8 KV heads × 128 dims × 2 bytes = 128 KiB.
        assert_eq!(m.kv_bytes_per_token(Dtype::Bf16), 131072.0);
        let (m2, _) = model("llama-2-7b").unwrap();
        assert_eq!(m2.kv_bytes_per_token(Dtype::Bf16), 524288.0);
    }

    #[test]
    fn presets_resolve_by_alias_and_case() {
        assert_eq!(hardware("H100").unwrap().name, "H100-SXM");
        assert!(hardware("tpu-v5").is_none());
        assert!(model("Meta-Llama/Llama-3.1-8B-Instruct").is_some());
        assert_eq!(hardware_keys().len(), 15);
        assert_eq!(hardware("h100").unwrap().network_gbps, Some(50.0));
        assert_eq!(hardware("l4").unwrap().network_gbps, None);
        for p in HARDWARE {
            let s = (p.spec)();
            assert!(s.bf16_tflops > 0.0 && s.memory_gib > 0.0 && !s.source.is_empty());
        }
    }

    #[test]
    fn weight_only_formats_compute_at_bf16_rate() {
        let a100 = hardware("a100-80gb").unwrap();
        assert_eq!(a100.peak_flops(Dtype::Fp8), 312e12);
        assert_eq!(a100.peak_flops(Dtype::Int4), 312e12);
        assert_eq!(hardware("h100").unwrap().peak_flops(Dtype::Fp8), 1978.9e12);
    }
}
