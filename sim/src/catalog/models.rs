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
    /// Every `moe_layer_step`-th layer past `first_dense_layers` has experts
    /// and the others a dense MLP (Llama 4's `interleave_moe_layer_step`:
    /// layers step−1, 2·step−1, …); 1 (the default): every one.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub moe_layer_step: u32,
    /// Attention kind of each layer, repeated over the layers from layer 0
    /// (`["sliding", "full"]` for gpt-oss, `["linear", "linear", "linear",
    /// "full"]` for Qwen3.5). Empty (the default): every layer full.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layer_pattern: Vec<LayerKind>,
    /// `sliding_window`: tokens a sliding-window layer attends to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<u32>,
    /// `attention_chunk_size`: tokens of one chunk of a chunked-local layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_chunk: Option<u32>,
    /// A learned sink logit per head in every attention layer (gpt-oss).
    #[serde(default, skip_serializing_if = "is_false")]
    pub attention_sinks: bool,
    /// `attn_output_gate`: the query projection also produces a per-head
    /// sigmoid gate on the attention output (Qwen3-Next, Qwen3.5), doubling it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub attention_output_gate: bool,
    /// The linear-attention layers' dimensions (required with `"linear"` layers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linear_attention: Option<LinearAttention>,
    /// DeepSeek Sparse Attention on the (MLA) attention layers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse_attention: Option<SparseAttention>,
    /// The checkpoint quantizes only the experts and keeps attention in the
    /// activation dtype (gpt-oss: MXFP4 experts, BF16 attention, as its
    /// `quantization_config.modules_to_not_convert` lists).
    #[serde(default, skip_serializing_if = "is_false")]
    pub attention_unquantized: bool,
}

fn default_true() -> bool {
    true
}

fn one() -> u32 {
    1
}

fn is_one(v: &u32) -> bool {
    *v == 1
}

fn is_false(v: &bool) -> bool {
    !*v
}

impl Default for ModelArch {
    /// An empty dense decoder: every count zero, a gated MLP, full attention.
    fn default() -> Self {
        ModelArch {
            name: String::new(),
            layers: 0,
            hidden_size: 0,
            num_heads: 0,
            num_kv_heads: 0,
            head_dim: 0,
            intermediate_size: 0,
            vocab_size: 0,
            gated_mlp: true,
            tied_embeddings: false,
            max_context: 0,
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
            moe_layer_step: 1,
            layer_pattern: Vec::new(),
            sliding_window: None,
            attention_chunk: None,
            attention_sinks: false,
            attention_output_gate: false,
            linear_attention: None,
            sparse_attention: None,
            attention_unquantized: false,
        }
    }
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
        if !self.is_moe() {
            0
        } else if self.moe_layer_step <= 1 {
            self.layers.saturating_sub(self.first_dense_layers)
        } else {
            (0..self.layers).filter(|&i| self.is_moe_layer(i)).count() as u32
        }
    }

    /// Layers with a dense MLP.
    pub fn dense_layers(&self) -> u32 {
        self.layers - self.moe_layers()
    }

    /// Whether layer `i` (from 0) has a mixture-of-experts MLP.
    pub fn is_moe_layer(&self, i: u32) -> bool {
        let step = self.moe_layer_step.max(1);
        self.is_moe() && i >= self.first_dense_layers && (i + 1) % step == 0
    }

    /// Whether every layer is a full-attention layer (no sliding, chunked or
    /// linear layers): the models whose arithmetic is one layer's times the
    /// layer count.
    pub fn uniform_attention(&self) -> bool {
        self.layer_pattern.iter().all(|&k| k == LayerKind::Full)
    }

    /// The attention kind of layer `i` (from 0).
    pub fn layer_kind(&self, i: u32) -> LayerKind {
        if self.layer_pattern.is_empty() {
            LayerKind::Full
        } else {
            self.layer_pattern[i as usize % self.layer_pattern.len()]
        }
    }

    /// Layers of each kind among the `n` layers from `first`, indexed as
    /// [`LayerKind::ALL`].
    pub fn kinds_in(&self, first: u32, n: u32) -> [u32; 4] {
        let mut c = [0u32; 4];
        if self.uniform_attention() {
            c[0] = n;
            return c;
        }
        for i in first..first + n {
            let k = self.layer_kind(i);
            c[LayerKind::ALL.iter().position(|&x| x == k).expect("a kind")] += 1;
        }
        c
    }

    /// Layers of each kind in the whole model, as [`Self::kinds_in`].
    pub fn layer_kind_counts(&self) -> [u32; 4] {
        self.kinds_in(0, self.layers)
    }

    /// Tokens a layer of `kind` attends to at most (`None`: every earlier one).
    pub fn window(&self, kind: LayerKind) -> Option<u32> {
        match kind {
            LayerKind::Sliding => self.sliding_window,
            LayerKind::Chunked => self.attention_chunk,
            LayerKind::Full | LayerKind::Linear => None,
        }
    }

    /// Checks the layer-kind keys: each kind used has its dimensions, and no
    /// dimensions are given for kinds the pattern does not use. Errors name the
    /// key (relative to `[model.architecture]`) and what is allowed.
    pub fn validate_layer_kinds(&self) -> Result<(), (String, String)> {
        let uses = |k: LayerKind| self.layer_pattern.contains(&k);
        let need = [
            (
                LayerKind::Sliding,
                "sliding_window",
                self.sliding_window.is_some(),
            ),
            (
                LayerKind::Chunked,
                "attention_chunk",
                self.attention_chunk.is_some(),
            ),
            (
                LayerKind::Linear,
                "linear_attention",
                self.linear_attention.is_some(),
            ),
        ];
        for (kind, key, given) in need {
            if uses(kind) && !given {
                return Err((
                    key.into(),
                    format!(
                        "is required when layer_pattern has \"{}\" layers",
                        kind.name()
                    ),
                ));
            }
            if !uses(kind) && given {
                return Err((
                    key.into(),
                    format!(
                        "describes \"{}\" layers, but layer_pattern has none; add them to \
                         layer_pattern or remove it",
                        kind.name()
                    ),
                ));
            }
        }
        if self.sliding_window == Some(0) || self.attention_chunk == Some(0) {
            let k = if self.sliding_window == Some(0) {
                "sliding_window"
            } else {
                "attention_chunk"
            };
            return Err((k.into(), "must be at least 1, got 0".into()));
        }
        if let Some(l) = &self.linear_attention {
            if l.key_heads == 0
                || l.value_heads == 0
                || l.key_head_dim == 0
                || l.value_head_dim == 0
            {
                return Err((
                    "linear_attention".into(),
                    "heads and head dimensions must be at least 1".into(),
                ));
            }
        }
        if let Some(sp) = &self.sparse_attention {
            if self.kv_lora_rank.is_none() {
                return Err((
                    "sparse_attention".into(),
                    "DeepSeek Sparse Attention runs on latent attention; set kv_lora_rank too"
                        .into(),
                ));
            }
            if sp.top_k == 0 || sp.index_heads == 0 || sp.index_head_dim == 0 {
                return Err((
                    "sparse_attention".into(),
                    "index heads, head dim and top_k must be at least 1".into(),
                ));
            }
        }
        if self.moe_layer_step == 0 {
            return Err(("moe_layer_step".into(), "must be at least 1, got 0".into()));
        }
        Ok(())
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
    /// With linear-attention layers, the mean over the layers (the linear
    /// layers' Gated DeltaNet projections, [`LinearAttention::matrix_params`]).
    pub fn attention_sharded_params(&self) -> f64 {
        if self.uniform_attention() {
            return self.softmax_attention_sharded_params();
        }
        self.mean_over_layers(|k| match (k, &self.linear_attention) {
            (LayerKind::Linear, Some(l)) => l.matrix_params(self.hidden_size as f64),
            _ => self.softmax_attention_sharded_params(),
        })
    }

    /// The mean over all layers of `f` of each layer's kind.
    fn mean_over_layers(&self, f: impl Fn(LayerKind) -> f64) -> f64 {
        let c = self.layer_kind_counts();
        let sum: f64 = LayerKind::ALL
            .iter()
            .zip(c)
            .filter(|(_, n)| *n > 0)
            .map(|(&k, n)| n as f64 * f(k))
            .sum();
        sum / self.layers.max(1) as f64
    }

    /// Layers whose attention is softmax attention over cached keys (full,
    /// sliding or chunked; not linear).
    pub fn softmax_layers(&self) -> u32 {
        self.layers - self.layer_kind_counts()[3]
    }

    /// [`Self::attention_sharded_params`] of one softmax-attention layer
    /// (full, sliding or chunked): Q (doubled with an output gate), K, V, O.
    fn softmax_attention_sharded_params(&self) -> f64 {
        let h = self.hidden_size as f64;
        let heads = self.num_heads as f64;
        match self.mla() {
            None => {
                let q = (self.num_heads * self.head_dim) as f64;
                let kv = (self.num_kv_heads * self.head_dim) as f64;
                let p = h * q + 2.0 * h * kv + q * h;
                if self.attention_output_gate {
                    p + h * q
                } else {
                    p
                }
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
    /// DeepSeek Sparse Attention's indexer is replicated too.
    pub fn attention_replicated_params(&self) -> f64 {
        let h = self.hidden_size as f64;
        match self.mla() {
            None => 0.0,
            Some(m) => {
                let q_down = m.q_lora_rank.map_or(0.0, |r| h * r as f64);
                let latent = q_down + h * (m.kv_lora_rank + m.qk_rope_head_dim) as f64;
                match &self.sparse_attention {
                    None => latent,
                    Some(sp) => latent + sp.params(h, m.q_lora_rank.map_or(h, |r| r as f64)),
                }
            }
        }
    }

    /// Attention parameters one GPU of a tensor-parallel group of `tp` holds:
    /// the head-split matrices over `tp`, plus what is replicated: MLA's
    /// down-projections, and GQA's K and V projections of the one KV head each
    /// GPU keeps when there are fewer KV heads than GPUs (Megatron/vLLM
    /// replicate KV heads in that case).
    pub fn attention_params_per_gpu(&self, tp: u32) -> f64 {
        if self.uniform_attention() {
            return self.softmax_attention_params_per_gpu(tp);
        }
        self.mean_over_layers(|k| match (k, &self.linear_attention) {
            (LayerKind::Linear, Some(l)) => l.matrix_params(self.hidden_size as f64) / tp as f64,
            _ => self.softmax_attention_params_per_gpu(tp),
        })
    }

    /// [`Self::attention_params_per_gpu`] of one softmax-attention layer.
    fn softmax_attention_params_per_gpu(&self, tp: u32) -> f64 {
        let t = tp as f64;
        if self.mla().is_none() && self.num_kv_heads % tp != 0 {
            let h = self.hidden_size as f64;
            let q = (self.num_heads * self.head_dim) as f64;
            let kv_per_gpu = (self.num_kv_heads as f64 / t).ceil() * self.head_dim as f64;
            let gate = if self.attention_output_gate {
                h * q
            } else {
                0.0
            };
            return (h * q + q * h + gate) / t + 2.0 * h * kv_per_gpu;
        }
        self.softmax_attention_sharded_params() / t + self.attention_replicated_params()
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
        let norms = match self.mla() {
            None => base,
            Some(m) => {
                let lora = m.kv_lora_rank + m.q_lora_rank.unwrap_or(0);
                base + self.layers as f64 * lora as f64
            }
        };
        if self.uniform_attention() && !self.attention_sinks {
            return norms;
        }
        // Sinks: one logit per head of each softmax layer; linear layers'
        // convolution taps, decays and output norm.
        let sinks = if self.attention_sinks {
            self.softmax_layers() as f64 * self.num_heads as f64
        } else {
            0.0
        };
        let linear = self.linear_attention.map_or(0.0, |l| {
            self.layer_kind_counts()[3] as f64 * l.small_params()
        });
        norms + sinks + linear
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
    /// (GQA-aware: only the KV heads are stored; MLA: the latent). Only the
    /// full-attention layers' caches grow with every token: sliding and
    /// chunked layers hold a window and linear layers a fixed state per
    /// sequence ([`Self::sequence_state_bytes`]).
    pub fn kv_bytes_per_token(&self, kv_dtype: Dtype) -> f64 {
        if !self.uniform_attention() || self.sparse_attention.is_some() {
            return self.layer_kind_counts()[0] as f64 * self.kv_bytes_per_token_layer(1, kv_dtype);
        }
        let elems = match self.mla() {
            None => 2.0 * self.num_kv_heads as f64 * self.head_dim as f64,
            Some(_) => self.kv_elems_per_token_layer(1),
        };
        self.layers as f64 * elems * kv_dtype.bytes()
    }

    /// Cache bytes per token of one softmax-attention layer on one GPU of
    /// `tp`: its keys and values (or latent) in `kv_dtype`, plus the sparse
    /// indexer's FP8 key where the model has one.
    pub fn kv_bytes_per_token_layer(&self, tp: u32, kv_dtype: Dtype) -> f64 {
        let kv = self.kv_elems_per_token_layer(tp) * kv_dtype.bytes();
        match &self.sparse_attention {
            None => kv,
            Some(sp) => kv + sp.key_bytes(),
        }
    }

    /// Bytes one sequence holds on one GPU of `tp` in the `n` layers from
    /// `first` whatever its length, with `block_size`-token blocks: each
    /// sliding or chunked layer's window of blocks
    /// ([`kv_tokens_held`](super::kv_tokens_held) at its cap) and each linear
    /// layer's recurrent and convolution state.
    pub fn sequence_state_bytes(
        &self,
        first: u32,
        n: u32,
        tp: u32,
        kv_dtype: Dtype,
        block_size: u32,
    ) -> f64 {
        if self.uniform_attention() {
            return 0.0;
        }
        let c = self.kinds_in(first, n);
        let per_token = self.kv_bytes_per_token_layer(tp, kv_dtype);
        let windowed = |kind: LayerKind, layers: u32| {
            let cap = kv_tokens_held(u64::MAX / 2, self.window(kind), block_size);
            layers as f64 * cap as f64 * per_token
        };
        let linear = self
            .linear_attention
            .map_or(0.0, |l| c[3] as f64 * l.state_bytes(tp));
        windowed(LayerKind::Sliding, c[1]) + windowed(LayerKind::Chunked, c[2]) + linear
    }

    /// Bytes a sequence of `context` tokens holds on one GPU of `tp` over
    /// all layers, each layer kind as engines keep it: full layers every
    /// token's block, sliding and chunked layers their window's blocks,
    /// linear layers their fixed state.
    pub fn sequence_bytes(&self, context: u64, tp: u32, kv_dtype: Dtype, block_size: u32) -> f64 {
        let c = self.layer_kind_counts();
        let per_token = self.kv_bytes_per_token_layer(tp, kv_dtype);
        let held = |kind: LayerKind| kv_tokens_held(context, self.window(kind), block_size) as f64;
        let linear = self
            .linear_attention
            .map_or(0.0, |l| c[3] as f64 * l.state_bytes(tp));
        c[0] as f64 * held(LayerKind::Full) * per_token
            + c[1] as f64 * held(LayerKind::Sliding) * per_token
            + c[2] as f64 * held(LayerKind::Chunked) * per_token
            + linear
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
