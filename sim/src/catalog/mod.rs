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
    /// FP8 E4M3 with one scale per tensor or output channel.
    Fp8,
    Int8,
    Int4,
    /// FP8 E4M3 with one FP32 scale per 128 × 128 block of weights
    /// (DeepSeek-V3's `weight_block_size` [128, 128]; DeepGEMM's format).
    #[serde(rename = "fp8-block")]
    Fp8Block,
    /// NVFP4: FP4 E2M1 with one FP8 E4M3 scale per 16 elements and one FP32
    /// scale per tensor (NVIDIA Blackwell's block-scaled format).
    Nvfp4,
    /// MXFP4: FP4 E2M1 with one E8M0 (power-of-two) scale per 32 elements
    /// (OCP Microscaling Formats spec v1.0; gpt-oss's experts).
    Mxfp4,
}

impl Dtype {
    pub const ALL: [Dtype; 9] = [
        Dtype::Fp32,
        Dtype::Bf16,
        Dtype::Fp16,
        Dtype::Fp8,
        Dtype::Int8,
        Dtype::Int4,
        Dtype::Fp8Block,
        Dtype::Nvfp4,
        Dtype::Mxfp4,
    ];

    /// Bytes per element (int4 packs two per byte). The FP4 formats' block
    /// scales travel with every block, in weights and KV cache alike, so they
    /// count here: NVFP4 0.5 + 1/16, MXFP4 0.5 + 1/32.
    pub fn bytes(self) -> f64 {
        match self {
            Dtype::Fp32 => 4.0,
            Dtype::Bf16 | Dtype::Fp16 => 2.0,
            Dtype::Fp8 | Dtype::Int8 | Dtype::Fp8Block => 1.0,
            Dtype::Int4 => 0.5,
            Dtype::Nvfp4 => 0.5 + NVFP4_SCALE_BYTES / NVFP4_BLOCK,
            Dtype::Mxfp4 => 0.5 + MXFP4_SCALE_BYTES / MXFP4_BLOCK,
        }
    }

    /// Bytes one *weight* takes in storage, quantization metadata included.
    /// Int4 checkpoints (AWQ, Lin et al. MLSys 2024; GPTQ, Frantar et al.
    /// ICLR 2023) store one fp16 scale and one packed 4-bit zero point per
    /// group of 128 weights: 0.5 + 2.5 / 128 bytes. Block-scaled FP8 adds one
    /// FP32 scale per 128 × 128 weights; NVFP4 and MXFP4 their block scales
    /// (NVFP4's per-tensor FP32 scale, 4 bytes a matrix, is left out). FP8
    /// and INT8 checkpoints with one scale per output channel or tensor carry
    /// under 0.1 %: ignored.
    pub fn weight_bytes(self) -> f64 {
        match self {
            Dtype::Int4 => 0.5 + INT4_GROUP_META_BYTES / INT4_GROUP_SIZE,
            Dtype::Fp8Block => 1.0 + FP8_BLOCK_SCALE_BYTES / (FP8_BLOCK * FP8_BLOCK),
            d => d.bytes(),
        }
    }

    /// Whether this is a quantized (8- or 4-bit) format.
    pub fn is_quantized(self) -> bool {
        matches!(
            self,
            Dtype::Fp8 | Dtype::Int8 | Dtype::Int4 | Dtype::Fp8Block | Dtype::Nvfp4 | Dtype::Mxfp4
        )
    }

    /// Whether this is a 4-bit floating-point format (NVFP4, MXFP4).
    pub fn is_fp4(self) -> bool {
        matches!(self, Dtype::Nvfp4 | Dtype::Mxfp4)
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
            Dtype::Fp8Block => "fp8-block",
            Dtype::Nvfp4 => "nvfp4",
            Dtype::Mxfp4 => "mxfp4",
        }
    }
}

/// Weights per quantization group of int4 checkpoints (AWQ/GPTQ `group_size`).
pub const INT4_GROUP_SIZE: f64 = 128.0;
/// Metadata per int4 group: an fp16 scale (2 B) and a packed 4-bit zero point (0.5 B).
pub const INT4_GROUP_META_BYTES: f64 = 2.5;
/// Side of a square block sharing one FP32 scale in block-scaled FP8.
pub const FP8_BLOCK: f64 = 128.0;
/// Bytes of one block-scaled FP8 scale (FP32).
pub const FP8_BLOCK_SCALE_BYTES: f64 = 4.0;
/// Elements sharing one NVFP4 scale, and that scale's bytes (FP8 E4M3).
pub const NVFP4_BLOCK: f64 = 16.0;
pub const NVFP4_SCALE_BYTES: f64 = 1.0;
/// Elements sharing one MXFP4 scale, and that scale's bytes (E8M0).
pub const MXFP4_BLOCK: f64 = 32.0;
pub const MXFP4_SCALE_BYTES: f64 = 1.0;

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One accelerator as its datasheet describes it. Used by the roofline cost
mod hardware;
mod hf_config;
mod layers;
mod models;
mod presets;
pub use hardware::*;
pub use hf_config::{parse_config, read_config, HfModel, FAMILIES, MAX_CONFIG_BYTES};
pub use layers::*;
pub use models::*;
pub use presets::*;

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

    /// Totals (and active) against the published model cards. Where the
    /// card counts active parameters without the input embedding (gpt-oss,
    /// MiniMax), the test takes it off; vision towers and MTP layers are not
    /// in the presets, so cards that include them sit a little above.
    #[test]
    fn new_presets_match_published_totals() {
        let pct = |got: f64, want: f64| (got / 1e9 - want).abs() / want * 100.0;
        let cases: [(&str, f64, f64, f64, bool); 14] = [
            // key, total B, active B, tolerance %, active without the input embedding
            ("gpt-oss-120b", 116.8, 5.1, 1.0, true),
            ("gpt-oss-20b", 20.9, 3.6, 1.0, true),
            ("qwen3-8b", 8.19, 8.19, 0.5, false),
            ("qwen3-32b", 32.8, 32.8, 0.5, false),
            ("qwen3-235b-a22b", 235.0, 22.0, 1.0, false),
            ("qwen3.5-397b-a17b", 397.0, 17.0, 1.5, false),
            ("deepseek-r1", 671.0, 37.0, 2.5, false),
            ("kimi-k2.5", 1040.0, 32.6, 2.0, false),
            // "40B activated" is rounded; ours counts both embeddings and
            // the 78 indexers (41.8B).
            ("glm-5", 744.0, 40.0, 5.0, false),
            // "10B activated" is rounded: ours is 10.4B.
            ("minimax-m2.5", 229.0, 10.0, 5.0, true),
            ("llama-4-scout", 109.0, 17.0, 1.5, false),
            ("llama-4-maverick", 400.0, 17.0, 1.5, false),
            ("gemma-3-27b", 27.0, 27.0, 1.5, false),
            ("deepseek-v3.2", 671.9, 37.9, 2.5, false),
        ];
        for (k, total, active, tol, no_input_embedding) in cases {
            let (m, _) = model(k).unwrap();
            let a = if no_input_embedding {
                m.active_params() - m.vocab_size as f64 * m.hidden_size as f64
            } else {
                m.active_params()
            };
            assert!(
                pct(m.total_params(), total) < tol,
                "{k}: {}B total vs {total}B",
                m.total_params() / 1e9
            );
            assert!(
                pct(a, active) < tol.max(2.5),
                "{k}: {}B active vs {active}B",
                a / 1e9
            );
        }
        // gpt-oss-120b by hand: 36 layers × (attention 2880·4096·2 + 2·2880·512
        // + 128 experts × 3·2880² + router 2880·128) + 2 × 201088·2880
        // + norms (73·2880) + sinks (36·64).
        let (g, _) = model("gpt-oss-120b").unwrap();
        let attn = 2.0 * 2880.0 * 4096.0 + 2.0 * 2880.0 * 512.0;
        let layer = attn + 128.0 * 3.0 * 2880.0 * 2880.0 + 2880.0 * 128.0;
        let want = 36.0 * layer + 2.0 * 201088.0 * 2880.0 + 73.0 * 2880.0 + 36.0 * 64.0;
        assert!(
            (g.total_params() - want).abs() < 1.0,
            "{} vs {want}",
            g.total_params()
        );
        // DeepSeek-V3.2 is V3 plus 61 indexers (64 heads × 128 from the
        // 1536-wide query latent, a 128-wide key, its LayerNorm, 64 weights).
        let (v3, _) = model("deepseek-v3").unwrap();
        let (v32, _) = model("deepseek-v3.2").unwrap();
        let indexer = 1536.0 * 8192.0 + 7168.0 * 128.0 + 256.0 + 7168.0 * 64.0;
        assert!((v32.total_params() - v3.total_params() - 61.0 * indexer).abs() < 1.0);
        // Maverick: MoE on every other layer (1, 3, …, 47), dense MLPs of 16384 between.
        let (mv, _) = model("llama-4-maverick").unwrap();
        assert_eq!((mv.dense_layers(), mv.moe_layers()), (24, 24));
        assert!(!mv.is_moe_layer(0) && mv.is_moe_layer(1) && mv.is_moe_layer(47));
    }

    #[test]
    fn presets_read_their_layer_kinds_and_checkpoint_dtypes() {
        use LayerKind::*;
        let load = |k: &str| model_preset(k).unwrap().load();
        let g = load("gpt-oss-120b");
        assert_eq!((g.family, g.weight_dtype), ("gpt_oss", Some(Dtype::Mxfp4)));
        assert_eq!(g.arch.layer_pattern, vec![Sliding, Full]);
        assert_eq!(g.arch.sliding_window, Some(128));
        assert!(g.arch.attention_sinks && g.arch.attention_unquantized);
        let q = load("qwen3.5-397b-a17b");
        assert_eq!(q.arch.layer_pattern, vec![Linear, Linear, Linear, Full]);
        assert_eq!(q.arch.layer_kind_counts(), [15, 0, 0, 45]);
        assert_eq!(q.arch.num_shared_experts, 1);
        let l = load("llama-4-scout");
        assert_eq!(l.arch.layer_pattern, vec![Chunked, Chunked, Chunked, Full]);
        assert_eq!(l.arch.attention_chunk, Some(8192));
        let m = load("gemma-3-27b");
        assert_eq!(m.arch.layer_kind_counts(), [10, 52, 0, 0]);
        assert!(m.arch.tied_embeddings);
        assert_eq!(load("deepseek-r1").weight_dtype, Some(Dtype::Fp8Block));
        assert_eq!(load("deepseek-v3").weight_dtype, None);
        assert_eq!(load("kimi-k2.5").weight_dtype, Some(Dtype::Int4));
        assert_eq!(load("kimi-k2.5").family, "kimi_k2");
        assert_eq!(load("glm-5").arch.sparse_attention.unwrap().top_k, 2048);
        assert_eq!(load("minimax-m2.5").weight_dtype, Some(Dtype::Fp8Block));
        // Every preset parses, and the plain ones stay plain.
        for p in MODELS {
            let m = p.load();
            assert_eq!(m.arch.name, p.name);
            assert!(
                p.url.starts_with("https://huggingface.co/") && p.url.ends_with("/config.json")
            );
        }
        for k in [
            "llama-3.1-8b",
            "mixtral-8x7b",
            "deepseek-v3",
            "mistral-7b",
            "qwen2.5-7b",
        ] {
            assert!(load(k).arch.uniform_attention(), "{k}");
        }
    }

    #[test]
    fn fp4_and_block_fp8_carry_their_scales() {
        assert_eq!(Dtype::Nvfp4.weight_bytes(), 0.5625);
        assert_eq!(Dtype::Mxfp4.weight_bytes(), 0.53125);
        assert_eq!(Dtype::Fp8Block.weight_bytes(), 1.0 + 4.0 / 16384.0);
        assert_eq!(Dtype::Nvfp4.bytes(), 0.5625);
        assert_eq!(Dtype::Mxfp4.unquantized_part(), Dtype::Bf16);
        let b200 = hardware("b200").unwrap();
        let h200 = hardware("h200").unwrap();
        assert_eq!(b200.peak_flops(Dtype::Nvfp4), 9000e12);
        // No FP4 units on Hopper: Marlin-style weight-only kernels at BF16.
        assert_eq!(h200.peak_flops(Dtype::Mxfp4), 989.4e12);
        assert_eq!(h200.peak_flops(Dtype::Fp8Block), 1978.9e12);
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
