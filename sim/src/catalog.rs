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
    /// Latency of one small collective over that link, microseconds (the
    /// all-reduce of two GPUs, and send/recv).
    pub interconnect_latency_us: f64,
    /// Measured start-up latency of an all-reduce over more than two GPUs of
    /// one node, microseconds (absent: a multiple of the link latency; see
    /// `cost::comm`).
    #[serde(default)]
    pub allreduce_latency_us: Option<f64>,
    /// Measured all-reduce bus bandwidth inside one node, GB/s (nccl-tests
    /// "busbw"; absent: a fraction of `interconnect_gbps`). The file key says
    /// bytes (`allreduce_busbw_gbyte_s`), as every bandwidth key does.
    #[serde(default, rename = "allreduce_busbw_gbyte_s")]
    pub allreduce_busbw_gbps: Option<f64>,
    /// Host link (PCIe) bandwidth per direction, GB/s.
    pub pcie_gbps: f64,
    /// GPUs one node joins with the `interconnect` link (the NVLink / Infinity
    /// Fabric domain). A tensor-parallel group must fit in one node; pipeline
    /// stages may span nodes.
    #[serde(default = "default_gpus_per_node")]
    pub gpus_per_node: u32,
    /// Scale-out network per GPU and direction, GB/s (the GPU's NIC), used by
    /// pipeline hops between nodes. Absent: replicas may not span nodes.
    #[serde(default)]
    pub network_gbps: Option<f64>,
    /// Latency of one small send/recv across nodes, microseconds.
    #[serde(default)]
    pub network_latency_us: Option<f64>,
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

fn default_gpus_per_node() -> u32 {
    8
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
// Nodes: every preset's reference server holds 8 GPUs (HGX/DGX boards, the
// MI300X OAM platform, 8-card PCIe servers such as AWS g6e.48xlarge with 8 L40S
// and g6.48xlarge with 8 L4). Scale-out NICs, one per GPU: DGX H100/H200/B200
// datasheets list 8 single-port ConnectX-7 at 400 Gb/s (50 GB/s per direction);
// DGX A100 lists 8 ConnectX-6 at 200 Gb/s HDR (25 GB/s); AMD's "Instinct MI300
// Series Cluster Reference Architecture Guide" (pub. 63916) pairs each GPU with
// a 400 Gb/s NIC. PCIe-card servers ship with vendor-chosen NICs, so L40S and L4
// carry none (give an inline spec to span nodes with them). Latency of a small
// NCCL send/recv across nodes is some tens of µs against ~8 within NVLink: as
// with the figures above, an order of magnitude a calibration replaces.
const GPUS_PER_NODE: u32 = 8;
// Measured all-reduce inside one 8-GPU node: NCCL through PyTorch, Vidur's
// profiles (microsoft/vidur `data/profiling/network/{a100,h100}_dgx/
// all_reduce.csv`, 4–8 GPUs, 4 KB–128 MB), least-error fit of
// latency + 2(g−1)/g · bytes / busbw. H200 shares H100's NVLink 4 and
// NVSwitch, and A100-40GB the DGX-A100's NVLink 3, so they take the same.
const DGX_A100_ALLREDUCE_LATENCY_US: f64 = 54.0;
const DGX_A100_ALLREDUCE_BUSBW_GBPS: f64 = 340.0;
const DGX_H100_ALLREDUCE_LATENCY_US: f64 = 28.0;
const DGX_H100_ALLREDUCE_BUSBW_GBPS: f64 = 700.0;
const NETWORK_LATENCY_US: f64 = 20.0;

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
        allreduce_latency_us: Some(DGX_H100_ALLREDUCE_LATENCY_US),
        allreduce_busbw_gbps: Some(DGX_H100_ALLREDUCE_BUSBW_GBPS),
        pcie_gbps: 64.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: Some(50.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
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
        allreduce_latency_us: Some(DGX_H100_ALLREDUCE_LATENCY_US),
        allreduce_busbw_gbps: Some(DGX_H100_ALLREDUCE_BUSBW_GBPS),
        pcie_gbps: 64.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: Some(50.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
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
        allreduce_latency_us: Some(DGX_A100_ALLREDUCE_LATENCY_US),
        allreduce_busbw_gbps: Some(DGX_A100_ALLREDUCE_BUSBW_GBPS),
        pcie_gbps: 32.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: Some(25.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
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
        allreduce_latency_us: Some(DGX_A100_ALLREDUCE_LATENCY_US),
        allreduce_busbw_gbps: Some(DGX_A100_ALLREDUCE_BUSBW_GBPS),
        pcie_gbps: 32.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: Some(25.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
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
        allreduce_latency_us: None,
        allreduce_busbw_gbps: None,
        pcie_gbps: 32.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: None,
        network_latency_us: None,
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
        allreduce_latency_us: None,
        allreduce_busbw_gbps: None,
        pcie_gbps: 32.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: None,
        network_latency_us: None,
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
        allreduce_latency_us: None,
        allreduce_busbw_gbps: None,
        pcie_gbps: 64.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: Some(50.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
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
        allreduce_latency_us: None,
        allreduce_busbw_gbps: None,
        pcie_gbps: 64.0,
        gpus_per_node: GPUS_PER_NODE,
        network_gbps: Some(50.0),
        network_latency_us: Some(NETWORK_LATENCY_US),
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

/// A decoder-only transformer as its `config.json` describes it: the Llama
/// family (RMSNorm, rotary embeddings, grouped-query attention, gated or plain
/// MLP), optionally with
///
/// - **Mixture-of-Experts MLPs** (Shazeer et al. 2017; Mixtral, Jiang et al.
///   2024; DeepSeekMoE, Dai et al. 2024): `num_experts` routed experts of width
///   `moe_intermediate_size`, `experts_per_token` of them active per token
///   (top-k routing), `num_shared_experts` that every token runs, and the first
///   `first_dense_layers` layers kept dense (DeepSeek's `first_k_dense_replace`);
/// - **Multi-head Latent Attention** (DeepSeek-V2, DeepSeek-AI 2024): set by
///   `kv_lora_rank`. Keys and values are cached as one compressed latent of
///   `kv_lora_rank` elements plus a shared `qk_rope_head_dim`-element rotary key
///   per token and layer, instead of per-head keys and values.
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
    /// `intermediate_size` of the dense MLP.
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
    /// Routed experts per MoE layer (`num_local_experts` in Mixtral,
    /// `n_routed_experts` in DeepSeek); 0 for a dense model.
    #[serde(default)]
    pub num_experts: u32,
    /// Experts each token is routed to (`num_experts_per_tok`).
    #[serde(default)]
    pub experts_per_token: u32,
    /// Experts every token runs besides the routed ones (`n_shared_experts`).
    #[serde(default)]
    pub num_shared_experts: u32,
    /// Width of one expert's MLP; defaults to `intermediate_size` (Mixtral).
    #[serde(default)]
    pub moe_intermediate_size: Option<u32>,
    /// Leading layers with a dense MLP (`first_k_dense_replace`).
    #[serde(default)]
    pub first_dense_layers: u32,
    /// MLA: rank of the compressed key-value latent that is cached.
    #[serde(default)]
    pub kv_lora_rank: Option<u32>,
    /// MLA: rank of the compressed query (absent: queries are not compressed).
    #[serde(default)]
    pub q_lora_rank: Option<u32>,
    /// MLA: per-head query/key dimensions without rotary embedding.
    #[serde(default)]
    pub qk_nope_head_dim: Option<u32>,
    /// MLA: per-head (and cached, shared) rotary key dimensions.
    #[serde(default)]
    pub qk_rope_head_dim: Option<u32>,
    /// MLA: per-head value dimensions.
    #[serde(default)]
    pub v_head_dim: Option<u32>,
}

fn default_true() -> bool {
    true
}

/// Multi-head Latent Attention dimensions (DeepSeek-V2 §2.1; DeepSeek-V3 keeps
/// them): what the cache stores and what each head computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mla {
    pub kv_lora_rank: u32,
    pub q_lora_rank: Option<u32>,
    pub qk_nope_head_dim: u32,
    pub qk_rope_head_dim: u32,
    pub v_head_dim: u32,
}

impl ModelArch {
    /// Checks the mixture-of-experts and latent-attention keys: consistent
    /// with each other and with the layer count. Errors name the key (relative
    /// to `[model.architecture]`) and what is allowed.
    pub fn validate_moe_and_mla(&self) -> Result<(), (String, String)> {
        let bad = |k: &str, m: String| Err((k.to_string(), m));
        if self.num_experts == 0 {
            let dense_only = [
                ("experts_per_token", self.experts_per_token > 0),
                ("num_shared_experts", self.num_shared_experts > 0),
                (
                    "moe_intermediate_size",
                    self.moe_intermediate_size.is_some(),
                ),
                ("first_dense_layers", self.first_dense_layers > 0),
            ];
            if let Some((k, _)) = dense_only.iter().find(|(_, set)| *set) {
                return bad(
                    k,
                    "describes mixture-of-experts layers; set num_experts (≥ 1) too, or remove it"
                        .into(),
                );
            }
        } else {
            if !(1..=self.num_experts).contains(&self.experts_per_token) {
                return bad(
                    "experts_per_token",
                    format!(
                        "must be between 1 and num_experts ({}), got {}",
                        self.num_experts, self.experts_per_token
                    ),
                );
            }
            if self.first_dense_layers >= self.layers {
                return bad(
                    "first_dense_layers",
                    format!(
                        "must be below layers ({}) so that some layer has experts, got {}",
                        self.layers, self.first_dense_layers
                    ),
                );
            }
            if self.moe_intermediate_size == Some(0) {
                return bad("moe_intermediate_size", "must be at least 1, got 0".into());
            }
        }
        match self.kv_lora_rank {
            None => {
                let mla_only = [
                    ("q_lora_rank", self.q_lora_rank.is_some()),
                    ("qk_nope_head_dim", self.qk_nope_head_dim.is_some()),
                    ("qk_rope_head_dim", self.qk_rope_head_dim.is_some()),
                    ("v_head_dim", self.v_head_dim.is_some()),
                ];
                if let Some((k, _)) = mla_only.iter().find(|(_, set)| *set) {
                    return bad(
                        k,
                        "describes multi-head latent attention; set kv_lora_rank too, or remove it"
                            .into(),
                    );
                }
            }
            Some(rank) => {
                let dims = [
                    ("kv_lora_rank", Some(rank)),
                    ("qk_nope_head_dim", self.qk_nope_head_dim),
                    ("qk_rope_head_dim", self.qk_rope_head_dim),
                    ("v_head_dim", self.v_head_dim),
                ];
                for (k, v) in dims {
                    match v {
                        None => {
                            return bad(
                                k,
                                "is required with kv_lora_rank (multi-head latent attention)"
                                    .into(),
                            )
                        }
                        Some(0) => return bad(k, "must be at least 1, got 0".into()),
                        Some(_) => {}
                    }
                }
                if self.q_lora_rank == Some(0) {
                    return bad(
                        "q_lora_rank",
                        "must be at least 1 (or absent), got 0".into(),
                    );
                }
            }
        }
        Ok(())
    }

    /// Whether the MLPs (past `first_dense_layers`) are mixtures of experts.
    pub fn is_moe(&self) -> bool {
        self.num_experts > 0
    }

    /// The MLA dimensions, when the model uses latent attention.
    pub fn mla(&self) -> Option<Mla> {
        self.kv_lora_rank.map(|kv_lora_rank| Mla {
            kv_lora_rank,
            q_lora_rank: self.q_lora_rank,
            qk_nope_head_dim: self.qk_nope_head_dim.unwrap_or(0),
            qk_rope_head_dim: self.qk_rope_head_dim.unwrap_or(0),
            v_head_dim: self.v_head_dim.unwrap_or(0),
        })
    }

    /// Layers with a mixture-of-experts MLP.
    pub fn moe_layers(&self) -> u32 {
        if self.is_moe() {
            self.layers.saturating_sub(self.first_dense_layers)
        } else {
            0
        }
    }

    /// Layers with a dense MLP.
    pub fn dense_layers(&self) -> u32 {
        self.layers - self.moe_layers()
    }

    /// Whether layer `i` (from 0) has a mixture-of-experts MLP.
    pub fn is_moe_layer(&self, i: u32) -> bool {
        self.is_moe() && i >= self.first_dense_layers
    }

    fn mlp_matrices(&self) -> f64 {
        if self.gated_mlp {
            3.0
        } else {
            2.0
        }
    }

    /// Attention matrices of one layer that tensor parallelism splits by head
    /// (all GPUs together). GQA: Q, K, V, O. MLA: the query up-projection (or
    /// the plain query projection), the key-value up-projection and O.
    pub fn attention_sharded_params(&self) -> f64 {
        let h = self.hidden_size as f64;
        let heads = self.num_heads as f64;
        match self.mla() {
            None => {
                let q = (self.num_heads * self.head_dim) as f64;
                let kv = (self.num_kv_heads * self.head_dim) as f64;
                h * q + 2.0 * h * kv + q * h
            }
            Some(m) => {
                let qk = heads * (m.qk_nope_head_dim + m.qk_rope_head_dim) as f64;
                let q_up = match m.q_lora_rank {
                    Some(r) => r as f64 * qk,
                    None => h * qk,
                };
                let kv_up =
                    m.kv_lora_rank as f64 * heads * (m.qk_nope_head_dim + m.v_head_dim) as f64;
                let o = heads * m.v_head_dim as f64 * h;
                q_up + kv_up + o
            }
        }
    }

    /// Attention matrices of one layer every GPU of a tensor-parallel group
    /// holds whole: MLA's query and key-value down-projections (vLLM's
    /// `ReplicatedLinear`). Zero for GQA.
    pub fn attention_replicated_params(&self) -> f64 {
        let h = self.hidden_size as f64;
        match self.mla() {
            None => 0.0,
            Some(m) => {
                let q_down = m.q_lora_rank.map_or(0.0, |r| h * r as f64);
                q_down + h * (m.kv_lora_rank + m.qk_rope_head_dim) as f64
            }
        }
    }

    /// Attention parameters one GPU of a tensor-parallel group of `tp` holds:
    /// the head-split matrices over `tp`, plus what is replicated: MLA's
    /// down-projections, and GQA's K and V projections of the one KV head each
    /// GPU keeps when there are fewer KV heads than GPUs (Megatron/vLLM
    /// replicate KV heads in that case).
    pub fn attention_params_per_gpu(&self, tp: u32) -> f64 {
        let t = tp as f64;
        if self.mla().is_none() && self.num_kv_heads % tp != 0 {
            let h = self.hidden_size as f64;
            let q = (self.num_heads * self.head_dim) as f64;
            let kv_per_gpu = (self.num_kv_heads as f64 / t).ceil() * self.head_dim as f64;
            return (h * q + q * h) / t + 2.0 * h * kv_per_gpu;
        }
        self.attention_sharded_params() / t + self.attention_replicated_params()
    }

    /// Matrix parameters of one dense layer on one GPU of a tensor-parallel
    /// group of `tp` (the usual case computes as `layer_matrix_params() / tp`).
    pub fn dense_layer_params_per_gpu(&self, tp: u32) -> f64 {
        if self.mla().is_none() && self.num_kv_heads % tp == 0 {
            return self.layer_matrix_params() / tp as f64;
        }
        self.attention_params_per_gpu(tp) + self.dense_mlp_params() / tp as f64
    }

    /// All attention matrices of one layer.    /// All attention matrices of one layer.
    pub fn attention_params(&self) -> f64 {
        self.attention_sharded_params() + self.attention_replicated_params()
    }

    /// One dense MLP.
    pub fn dense_mlp_params(&self) -> f64 {
        self.mlp_matrices() * self.hidden_size as f64 * self.intermediate_size as f64
    }

    /// One expert's MLP.
    pub fn expert_params(&self) -> f64 {
        let width = self.moe_intermediate_size.unwrap_or(self.intermediate_size);
        self.mlp_matrices() * self.hidden_size as f64 * width as f64
    }

    /// The router (gate) of one MoE layer: hidden × experts.
    pub fn router_params(&self) -> f64 {
        self.hidden_size as f64 * self.num_experts as f64
    }

    /// Parameters of one dense layer's matrices (attention + MLP), no norms.
    pub fn layer_matrix_params(&self) -> f64 {
        self.attention_params() + self.dense_mlp_params()
    }

    /// Parameters of one MoE layer's matrices: attention, every routed and
    /// shared expert, and the router.
    pub fn moe_layer_params(&self) -> f64 {
        let experts = (self.num_experts + self.num_shared_experts) as f64;
        self.attention_params() + experts * self.expert_params() + self.router_params()
    }

    /// Parameters of one MoE layer one token runs through: attention, its
    /// `experts_per_token` routed experts, the shared ones and the router.
    pub fn moe_layer_active_params(&self) -> f64 {
        let experts = (self.experts_per_token + self.num_shared_experts) as f64;
        self.attention_params() + experts * self.expert_params() + self.router_params()
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

    /// RMSNorm weights: two per layer and a final one, plus MLA's norms of the
    /// compressed query and key-value latents.
    pub fn norm_params(&self) -> f64 {
        let base = (2 * self.layers as u64 + 1) as f64 * self.hidden_size as f64;
        match self.mla() {
            None => base,
            Some(m) => {
                let lora = m.kv_lora_rank + m.q_lora_rank.unwrap_or(0);
                base + self.layers as f64 * lora as f64
            }
        }
    }

    /// All parameters (what memory holds), norms included. For MoE models
    /// every expert counts.
    pub fn total_params(&self) -> f64 {
        let mut layers = self.dense_layers() as f64 * self.layer_matrix_params();
        if self.is_moe() {
            layers += self.moe_layers() as f64 * self.moe_layer_params();
        }
        layers + self.embedding_params() + self.norm_params()
    }

    /// Parameters one token runs through (what compute scales with); embedding
    /// and LM head included, as the published "active" figures count them.
    /// Equal to [`total_params`](Self::total_params) for dense models.
    pub fn active_params(&self) -> f64 {
        let mut layers = self.dense_layers() as f64 * self.layer_matrix_params();
        if self.is_moe() {
            layers += self.moe_layers() as f64 * self.moe_layer_active_params();
        }
        layers + self.embedding_params() + self.norm_params()
    }

    /// Cached elements per token and layer on one GPU of a tensor-parallel
    /// group of `tp`. GQA: K and V of the KV heads that GPU serves (split over
    /// the group, one replicated per GPU when there are fewer heads than GPUs).
    /// MLA: the latent and the rotary key, which every head reads, so every
    /// GPU of the group holds them whole (vLLM caches MLA as one KV head).
    pub fn kv_elems_per_token_layer(&self, tp: u32) -> f64 {
        match self.mla() {
            None => {
                let kv_heads_per_gpu = (self.num_kv_heads as f64 / tp as f64).ceil();
                2.0 * kv_heads_per_gpu * self.head_dim as f64
            }
            Some(m) => (m.kv_lora_rank + m.qk_rope_head_dim) as f64,
        }
    }

    /// Bytes of the KV cache for one token across all layers, one copy
    /// (GQA-aware: only the KV heads are stored; MLA: the latent).
    pub fn kv_bytes_per_token(&self, kv_dtype: Dtype) -> f64 {
        let elems = match self.mla() {
            None => 2.0 * self.num_kv_heads as f64 * self.head_dim as f64,
            Some(_) => self.kv_elems_per_token_layer(1),
        };
        self.layers as f64 * elems * kv_dtype.bytes()
    }

    /// Attention FLOPs per query–key pair per layer, all heads (QKᵀ and PV,
    /// a multiply-add each). GQA: 4 · heads · head_dim in both phases. MLA
    /// prefill decompresses keys and values and runs per head over
    /// (nope + rope) and v dimensions; MLA decode absorbs the up-projections
    /// into the query and output (DeepSeek-V2 §2.1.2, vLLM's MLA backend) and
    /// runs every head over the cached latent: (kv_lora + rope) for QKᵀ and
    /// kv_lora for PV.
    pub fn attention_flops_per_pair(&self, decode: bool) -> f64 {
        let heads = self.num_heads as f64;
        match self.mla() {
            None => 4.0 * heads * self.head_dim as f64,
            Some(m) if decode => {
                2.0 * heads * (m.kv_lora_rank + m.qk_rope_head_dim) as f64
                    + 2.0 * heads * m.kv_lora_rank as f64
            }
            Some(m) => {
                2.0 * heads * (m.qk_nope_head_dim + m.qk_rope_head_dim) as f64
                    + 2.0 * heads * m.v_head_dim as f64
            }
        }
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
        num_experts: 0,
        experts_per_token: 0,
        num_shared_experts: 0,
        moe_intermediate_size: None,
        first_dense_layers: 0,
        kv_lora_rank: None,
        q_lora_rank: None,
        qk_nope_head_dim: None,
        qk_rope_head_dim: None,
        v_head_dim: None,
    }
}

/// mistralai/Mixtral-8x7B-v0.1 config.json: Mistral-7B's attention (32 layers,
/// hidden 4096, 32 heads, 8 KV heads) with 8 experts of width 14336 in every
/// layer, top-2 routing, vocabulary 32000, 32768 positions.
fn mixtral_8x7b() -> ModelArch {
    ModelArch {
        num_experts: 8,
        experts_per_token: 2,
        ..llama("Mixtral-8x7B", 32, 4096, 32, 8, 14336, 32000, 32768, false)
    }
}

/// deepseek-ai/DeepSeek-V3 config.json: 61 layers, hidden 7168, 128 heads with
/// MLA (q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128,
/// qk_rope_head_dim 64, v_head_dim 128), the first 3 layers dense with
/// intermediate_size 18432, then 256 routed experts (8 per token) and 1 shared
/// expert of moe_intermediate_size 2048; vocab 129280, 163840 positions. The
/// multi-token-prediction module (`num_nextn_predict_layers`) is not served
/// and not counted. `num_key_value_heads` is 128 and `head_dim` is taken as
/// qk_nope + qk_rope = 192; MLA ignores both for the cache.
fn deepseek_v3() -> ModelArch {
    ModelArch {
        head_dim: 192,
        num_experts: 256,
        experts_per_token: 8,
        num_shared_experts: 1,
        moe_intermediate_size: Some(2048),
        first_dense_layers: 3,
        kv_lora_rank: Some(512),
        q_lora_rank: Some(1536),
        qk_nope_head_dim: Some(128),
        qk_rope_head_dim: Some(64),
        v_head_dim: Some(128),
        ..llama(
            "DeepSeek-V3",
            61,
            7168,
            128,
            128,
            18432,
            129280,
            163840,
            false,
        )
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
    ModelPreset {
        key: "mixtral-8x7b",
        aliases: &[
            "mistralai/mixtral-8x7b-v0.1",
            "mistralai/mixtral-8x7b-instruct-v0.1",
        ],
        source: "mistralai/Mixtral-8x7B-v0.1 config.json",
        arch: mixtral_8x7b,
    },
    ModelPreset {
        key: "deepseek-v3",
        aliases: &["deepseek-ai/deepseek-v3", "deepseek-ai/deepseek-v3-base"],
        source: "deepseek-ai/DeepSeek-V3 config.json (MTP module excluded)",
        arch: deepseek_v3,
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
        assert_eq!(hardware_keys().len(), 8);
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
