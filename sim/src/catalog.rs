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

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One accelerator as its datasheet describes it. Used by the roofline cost
/// model and the memory budget; a scenario may give one inline with the same keys.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HardwareSpec {
    /// Display name ("custom" when an inline spec omits it).
    #[serde(default)]
    pub name: String,
    /// Peak dense BF16/FP16 tensor throughput, TFLOP/s.
    pub bf16_tflops: f64,
    /// Peak dense FP8 tensor throughput, TFLOP/s (absent where the chip has no FP8 units).
    #[serde(default)]
    pub fp8_tflops: Option<f64>,
    /// Peak dense INT8 tensor throughput, TOP/s.
    #[serde(default)]
    pub int8_tops: Option<f64>,
    /// Device memory, GiB.
    pub memory_gib: f64,
    /// Device memory bandwidth, TB/s (decimal).
    pub memory_bw_tbps: f64,
    /// GPU-to-GPU bandwidth per direction, GB/s (NVLink / Infinity Fabric, or PCIe
    /// when the card has no such link).
    pub interconnect_gbps: f64,
    /// Latency of one small collective over that link, microseconds.
    pub interconnect_latency_us: f64,
    /// Host link (PCIe) bandwidth per direction, GB/s.
    pub pcie_gbps: f64,
    /// Where the numbers come from.
    #[serde(default)]
    pub source: String,
}

impl HardwareSpec {
    /// Peak dense tensor throughput (FLOP/s) used for matrix products whose
    /// operands are stored in `dtype`. Weight-only formats (int4, or fp8 on a
    /// chip without FP8 units) are dequantized and multiplied at BF16 rate, as
    /// Marlin/AWQ kernels do.
    pub fn peak_flops(&self, dtype: Dtype) -> f64 {
        let tflops = match dtype {
            Dtype::Fp8 => self.fp8_tflops.unwrap_or(self.bf16_tflops),
            Dtype::Int8 => self.int8_tops.unwrap_or(self.bf16_tflops),
            // FP32 GEMMs run on TF32 tensor cores at half the BF16 rate.
            Dtype::Fp32 => self.bf16_tflops / 2.0,
            Dtype::Bf16 | Dtype::Fp16 | Dtype::Int4 => self.bf16_tflops,
        };
        tflops * 1e12
    }

    pub fn memory_bytes(&self) -> f64 {
        self.memory_gib * GIB
    }

    pub fn memory_bw_bytes_per_s(&self) -> f64 {
        self.memory_bw_tbps * 1e12
    }

    pub fn interconnect_bytes_per_s(&self) -> f64 {
        self.interconnect_gbps * 1e9
    }
}

pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// A hardware preset: the keys users type and the datasheet figures.
pub struct HardwarePreset {
    pub key: &'static str,
    pub aliases: &'static [&'static str],
    pub spec: fn() -> HardwareSpec,
}

// Link figures. NVLink 4 (H100/H200): 18 links, 900 GB/s bidirectional per GPU.
// NVLink 3 (A100): 600 GB/s bidirectional. NVLink 5 (B200): 1.8 TB/s bidirectional.
// MI300X: 7 Infinity Fabric links, 896 GB/s aggregate bidirectional.
// PCIe Gen4 x16: 32 GB/s per direction; Gen5 x16: 64 GB/s per direction.
// Collective latency: NCCL/RCCL all-reduce of a few KB inside one 8-GPU node takes
// on the order of 10 µs over NVLink and 20–30 µs over PCIe (nccl-tests small-message
// rows); these are order-of-magnitude figures that a calibration profile replaces.
const NVLINK_LATENCY_US: f64 = 8.0;
const PCIE_P2P_LATENCY_US: f64 = 25.0;

fn h100_sxm() -> HardwareSpec {
    HardwareSpec {
        name: "H100-SXM".into(),
        bf16_tflops: 989.4,
        fp8_tflops: Some(1978.9),
        int8_tops: Some(1978.9),
        memory_gib: 80.0,
        memory_bw_tbps: 3.35,
        interconnect_gbps: 450.0,
        interconnect_latency_us: NVLINK_LATENCY_US,
        pcie_gbps: 64.0,
        source: "NVIDIA H100 Tensor Core GPU datasheet (SXM5 column; sparse figures halved)".into(),
    }
}

fn h200() -> HardwareSpec {
    HardwareSpec {
        name: "H200".into(),
        bf16_tflops: 989.4,
        fp8_tflops: Some(1978.9),
        int8_tops: Some(1978.9),
        memory_gib: 141.0,
        memory_bw_tbps: 4.8,
        interconnect_gbps: 450.0,
        interconnect_latency_us: NVLINK_LATENCY_US,
        pcie_gbps: 64.0,
        source: "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column; sparse figures halved)"
            .into(),
    }
}

fn a100_80gb() -> HardwareSpec {
    HardwareSpec {
        name: "A100-80GB".into(),
        bf16_tflops: 312.0,
        fp8_tflops: None,
        int8_tops: Some(624.0),
        memory_gib: 80.0,
        memory_bw_tbps: 2.039,
        interconnect_gbps: 300.0,
        interconnect_latency_us: NVLINK_LATENCY_US,
        pcie_gbps: 32.0,
        source: "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM column; dense figures)"
            .into(),
    }
}

fn a100_40gb() -> HardwareSpec {
    HardwareSpec {
        name: "A100-40GB".into(),
        bf16_tflops: 312.0,
        fp8_tflops: None,
        int8_tops: Some(624.0),
        memory_gib: 40.0,
        memory_bw_tbps: 1.555,
        interconnect_gbps: 300.0,
        interconnect_latency_us: NVLINK_LATENCY_US,
        pcie_gbps: 32.0,
        source: "NVIDIA A100 Tensor Core GPU datasheet (A100 40GB SXM column; dense figures)"
            .into(),
    }
}

fn l40s() -> HardwareSpec {
    HardwareSpec {
        name: "L40S".into(),
        bf16_tflops: 362.05,
        fp8_tflops: Some(733.0),
        int8_tops: Some(733.0),
        memory_gib: 48.0,
        memory_bw_tbps: 0.864,
        interconnect_gbps: 32.0,
        interconnect_latency_us: PCIE_P2P_LATENCY_US,
        pcie_gbps: 32.0,
        source: "NVIDIA L40S datasheet (sparse figures halved; no NVLink, PCIe Gen4 x16)".into(),
    }
}

fn l4() -> HardwareSpec {
    HardwareSpec {
        name: "L4".into(),
        bf16_tflops: 121.0,
        fp8_tflops: Some(242.5),
        int8_tops: Some(242.5),
        memory_gib: 24.0,
        memory_bw_tbps: 0.300,
        interconnect_gbps: 32.0,
        interconnect_latency_us: PCIE_P2P_LATENCY_US,
        pcie_gbps: 32.0,
        source: "NVIDIA L4 Tensor Core GPU datasheet (sparse figures halved; PCIe Gen4 x16)".into(),
    }
}

fn b200() -> HardwareSpec {
    HardwareSpec {
        name: "B200".into(),
        bf16_tflops: 2250.0,
        fp8_tflops: Some(4500.0),
        int8_tops: Some(4500.0),
        memory_gib: 180.0,
        memory_bw_tbps: 8.0,
        interconnect_gbps: 900.0,
        interconnect_latency_us: NVLINK_LATENCY_US,
        pcie_gbps: 64.0,
        source:
            "NVIDIA HGX B200 datasheet, per-GPU share of the 8-GPU board (sparse figures halved)"
                .into(),
    }
}

fn mi300x() -> HardwareSpec {
    HardwareSpec {
        name: "MI300X".into(),
        bf16_tflops: 1307.4,
        fp8_tflops: Some(2614.9),
        int8_tops: Some(2614.9),
        memory_gib: 192.0,
        memory_bw_tbps: 5.3,
        interconnect_gbps: 448.0,
        interconnect_latency_us: NVLINK_LATENCY_US,
        pcie_gbps: 64.0,
        source: "AMD Instinct MI300X accelerator datasheet (dense figures; Infinity Fabric 896 GB/s aggregate)"
            .into(),
    }
}

pub const HARDWARE: &[HardwarePreset] = &[
    HardwarePreset {
        key: "h100-sxm",
        aliases: &["h100", "h100-sxm5"],
        spec: h100_sxm,
    },
    HardwarePreset {
        key: "h200",
        aliases: &["h200-sxm"],
        spec: h200,
    },
    HardwarePreset {
        key: "a100-80gb",
        aliases: &["a100"],
        spec: a100_80gb,
    },
    HardwarePreset {
        key: "a100-40gb",
        aliases: &[],
        spec: a100_40gb,
    },
    HardwarePreset {
        key: "l40s",
        aliases: &[],
        spec: l40s,
    },
    HardwarePreset {
        key: "l4",
        aliases: &[],
        spec: l4,
    },
    HardwarePreset {
        key: "b200",
        aliases: &[],
        spec: b200,
    },
    HardwarePreset {
        key: "mi300x",
        aliases: &[],
        spec: mi300x,
    },
];

/// Looks a hardware preset up by key or alias, case-insensitively.
pub fn hardware(name: &str) -> Option<HardwareSpec> {
    let n = name.to_ascii_lowercase();
    HARDWARE
        .iter()
        .find(|p| p.key == n || p.aliases.contains(&n.as_str()))
        .map(|p| (p.spec)())
}

pub fn hardware_keys() -> Vec<&'static str> {
    HARDWARE.iter().map(|p| p.key).collect()
}

/// A decoder-only transformer as its `config.json` describes it (Llama family:
/// RMSNorm, rotary embeddings, grouped-query attention, gated or plain MLP).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelArch {
    /// Display name.
    #[serde(default)]
    pub name: String,
    /// `num_hidden_layers`.
    pub layers: u32,
    /// `hidden_size`.
    pub hidden_size: u32,
    /// `num_attention_heads`.
    pub num_heads: u32,
    /// `num_key_value_heads` (equal to `num_heads` without GQA).
    pub num_kv_heads: u32,
    /// `head_dim` (hidden_size / num_heads when the config omits it).
    pub head_dim: u32,
    /// `intermediate_size` of the MLP.
    pub intermediate_size: u32,
    /// `vocab_size`.
    pub vocab_size: u32,
    /// SwiGLU-style gated MLP (three matrices) rather than two.
    #[serde(default = "default_true")]
    pub gated_mlp: bool,
    /// `tie_word_embeddings`: the LM head reuses the embedding matrix.
    #[serde(default)]
    pub tied_embeddings: bool,
    /// `max_position_embeddings`: the longest context the model accepts.
    pub max_context: u32,
}

fn default_true() -> bool {
    true
}

impl ModelArch {
    /// Parameters of one transformer layer's matrices (attention + MLP), no norms.
    pub fn layer_matrix_params(&self) -> f64 {
        let h = self.hidden_size as f64;
        let q = (self.num_heads * self.head_dim) as f64;
        let kv = (self.num_kv_heads * self.head_dim) as f64;
        let attn = h * q + 2.0 * h * kv + q * h;
        let mlp_mats = if self.gated_mlp { 3.0 } else { 2.0 };
        attn + mlp_mats * h * self.intermediate_size as f64
    }

    /// Embedding + LM head parameters.
    pub fn embedding_params(&self) -> f64 {
        let e = self.vocab_size as f64 * self.hidden_size as f64;
        if self.tied_embeddings {
            e
        } else {
            2.0 * e
        }
    }

    /// All parameters, norms included.
    pub fn total_params(&self) -> f64 {
        let norms = (2 * self.layers as u64 + 1) as f64 * self.hidden_size as f64;
        self.layers as f64 * self.layer_matrix_params() + self.embedding_params() + norms
    }

    /// Bytes of K and V for one token across all layers (GQA-aware: only the
    /// KV heads are stored).
    pub fn kv_bytes_per_token(&self, kv_dtype: Dtype) -> f64 {
        2.0 * self.layers as f64
            * self.num_kv_heads as f64
            * self.head_dim as f64
            * kv_dtype.bytes()
    }
}

/// A model preset.
pub struct ModelPreset {
    pub key: &'static str,
    pub aliases: &'static [&'static str],
    /// Where the architecture numbers come from.
    pub source: &'static str,
    pub arch: fn() -> ModelArch,
}

#[allow(clippy::too_many_arguments)]
fn llama(
    name: &str,
    layers: u32,
    hidden: u32,
    heads: u32,
    kv_heads: u32,
    inter: u32,
    vocab: u32,
    max_context: u32,
    tied: bool,
) -> ModelArch {
    ModelArch {
        name: name.into(),
        layers,
        hidden_size: hidden,
        num_heads: heads,
        num_kv_heads: kv_heads,
        head_dim: hidden / heads,
        intermediate_size: inter,
        vocab_size: vocab,
        gated_mlp: true,
        tied_embeddings: tied,
        max_context,
    }
}

pub const MODELS: &[ModelPreset] = &[
    ModelPreset {
        key: "llama-3.1-8b",
        aliases: &[
            "meta-llama/llama-3.1-8b",
            "meta-llama/llama-3.1-8b-instruct",
        ],
        source: "meta-llama/Llama-3.1-8B config.json",
        arch: || {
            llama(
                "Llama-3.1-8B",
                32,
                4096,
                32,
                8,
                14336,
                128256,
                131072,
                false,
            )
        },
    },
    ModelPreset {
        key: "llama-3.1-70b",
        aliases: &[
            "meta-llama/llama-3.1-70b",
            "meta-llama/llama-3.1-70b-instruct",
        ],
        source: "meta-llama/Llama-3.1-70B config.json",
        arch: || {
            llama(
                "Llama-3.1-70B",
                80,
                8192,
                64,
                8,
                28672,
                128256,
                131072,
                false,
            )
        },
    },
    ModelPreset {
        key: "llama-3.1-405b",
        aliases: &[
            "meta-llama/llama-3.1-405b",
            "meta-llama/llama-3.1-405b-instruct",
        ],
        source: "meta-llama/Llama-3.1-405B config.json",
        arch: || {
            llama(
                "Llama-3.1-405B",
                126,
                16384,
                128,
                8,
                53248,
                128256,
                131072,
                false,
            )
        },
    },
    ModelPreset {
        key: "llama-2-7b",
        aliases: &["meta-llama/llama-2-7b-hf"],
        source: "meta-llama/Llama-2-7b-hf config.json",
        arch: || llama("Llama-2-7B", 32, 4096, 32, 32, 11008, 32000, 4096, false),
    },
    ModelPreset {
        key: "llama-2-70b",
        aliases: &["meta-llama/llama-2-70b-hf"],
        source: "meta-llama/Llama-2-70b-hf config.json",
        arch: || llama("Llama-2-70B", 80, 8192, 64, 8, 28672, 32000, 4096, false),
    },
    ModelPreset {
        key: "qwen2.5-7b",
        aliases: &["qwen/qwen2.5-7b", "qwen/qwen2.5-7b-instruct"],
        source: "Qwen/Qwen2.5-7B config.json",
        arch: || llama("Qwen2.5-7B", 28, 3584, 28, 4, 18944, 152064, 32768, false),
    },
    ModelPreset {
        key: "qwen2.5-72b",
        aliases: &["qwen/qwen2.5-72b", "qwen/qwen2.5-72b-instruct"],
        source: "Qwen/Qwen2.5-72B config.json",
        arch: || llama("Qwen2.5-72B", 80, 8192, 64, 8, 29568, 152064, 32768, false),
    },
    ModelPreset {
        key: "mistral-7b",
        aliases: &["mistral-7b-v0.3", "mistralai/mistral-7b-v0.3"],
        source: "mistralai/Mistral-7B-v0.3 config.json",
        arch: || {
            llama(
                "Mistral-7B-v0.3",
                32,
                4096,
                32,
                8,
                14336,
                32768,
                32768,
                false,
            )
        },
    },
    ModelPreset {
        key: "llama-3.2-1b",
        aliases: &[
            "meta-llama/llama-3.2-1b",
            "meta-llama/llama-3.2-1b-instruct",
        ],
        source: "meta-llama/Llama-3.2-1B config.json",
        arch: || ModelArch {
            head_dim: 64,
            ..llama("Llama-3.2-1B", 16, 2048, 32, 8, 8192, 128256, 131072, true)
        },
    },
    ModelPreset {
        key: "smollm2-135m",
        aliases: &[
            "huggingfacetb/smollm2-135m",
            "huggingfacetb/smollm2-135m-instruct",
        ],
        source: "HuggingFaceTB/SmolLM2-135M config.json",
        arch: || llama("SmolLM2-135M", 30, 576, 9, 3, 1536, 49152, 8192, true),
    },
];

/// Looks a model preset up by key or alias, case-insensitively.
pub fn model(name: &str) -> Option<(ModelArch, &'static str)> {
    let n = name.to_ascii_lowercase();
    MODELS
        .iter()
        .find(|p| p.key == n || p.aliases.contains(&n.as_str()))
        .map(|p| ((p.arch)(), p.source))
}

pub fn model_keys() -> Vec<&'static str> {
    MODELS.iter().map(|p| p.key).collect()
}

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
        assert_eq!(hardware_keys().len(), 8);
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
