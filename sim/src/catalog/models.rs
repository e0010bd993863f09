//! Model architectures: the Llama-family shape (dense, MoE, MLA), its
//! parameter, FLOP and KV arithmetic, and the model presets.

use super::*;
use serde::{Deserialize, Serialize};

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
