//! Device memory of one replica: weights, activation reserve, runtime overhead,
//! and what is left for the paged KV cache, following vLLM's memory profiling
//! (`gpu_memory_utilization` × device memory − weights − peak activations −
//! non-torch memory = KV cache).
//!
//! Every GPU of a replica sizes its own cache, and the replica gets the
//! smallest: vLLM takes the minimum of the block counts its workers report.
//! With pipeline parallelism the stages differ (layers per stage, embedding on
//! the first, LM head on the last), so the plan is computed per stage and the
//! stage with the fewest blocks binds. With expert parallelism each of the EP
//! groups keeps its own cache for its share of the sequences, so the replica
//! holds EP times one group's blocks.
//!
//! Layer kinds (see `catalog::layers`): a model whose layers all attend
//! fully keeps one paged cache of every layer's keys and values (or MLA
//! latents, with DeepSeek Sparse Attention's indexer keys beside them). A
//! hybrid model — sliding-window, chunked-local or linear-attention layers
//! beside full ones — shares one block pool among groups of layers as vLLM's
//! hybrid KV cache manager does ([`crate::kv_groups`]): a block spans
//! `group_size` layers' pages, full-attention groups grow a block per
//! `block_size` tokens, windowed groups free the blocks that leave the
//! window, linear groups hold one block of state per sequence. Nothing is
//! set aside per sequence: a sequence's windows and state come out of the
//! pool while it runs. A model of only windowed layers (no full layer)
//! keeps its windowed layers in the blocks as if they were full.

use crate::catalog::{Dtype, HardwareSpec, LayerKind, ModelArch, GIB};
use crate::config::EngineCfg;
use crate::kv_groups::KvGroups;
use crate::parallel::{self, Parallelism, Stage};
use serde::Serialize;

/// Memory outside PyTorch's allocator that vLLM subtracts before sizing the KV
/// cache: CUDA context, cuBLAS workspaces, NCCL buffers and captured CUDA
/// graphs. vLLM's startup log reports 0.2–1 GiB for 8B–70B models on H100;
/// we take the middle.
pub const NON_TORCH_OVERHEAD_BYTES: f64 = 0.5 * GIB;

/// Bytes per element of activations (bf16 on every GPU we model).
pub const ACTIVATION_BYTES: f64 = 2.0;

/// Sampling keeps fp32 logits for every sequence in the batch, and the sampler
/// holds about two copies (logits and probabilities).
const LOGIT_COPIES: f64 = 2.0;

/// The memory of one GPU of one pipeline stage.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StageMemory {
    /// Layers the stage holds.
    pub layers: u32,
    /// Weight shard per GPU, bytes.
    pub weight_bytes: f64,
    /// Peak activations (and, on the last stage, sampler logits) per GPU.
    pub activation_bytes: f64,
    /// What remains for the KV cache per GPU (negative: does not fit).
    pub kv_cache_bytes: f64,
    /// KV bytes one token takes on one GPU of this stage.
    pub kv_bytes_per_token: f64,
    /// KV blocks this stage's GPUs hold for one group's sequences.
    pub kv_blocks: u64,
    /// Bytes one sequence holds on one GPU whatever its length (windows of
    /// sliding and chunked layers, linear layers' state); 0 without such layers.
    #[serde(skip_serializing_if = "is_zero")]
    pub sequence_bytes: f64,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// The cache of one kind of layer in a replica's bounding stage, per GPU.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LayerKindMemory {
    /// The kind, with the window, the attention form or the state it keeps.
    pub kind: String,
    /// Layers of this kind in the stage.
    pub layers: u32,
    /// Bytes per token these layers add to the paged blocks (0: they do not grow).
    pub kv_bytes_per_token: f64,
    /// Bytes per sequence these layers hold whatever its length.
    pub bytes_per_sequence: f64,
}

/// The memory budget of one replica, per GPU of the stage that bounds the KV
/// cache (every GPU of a stage holds an equal shard).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MemoryPlan {
    pub tensor_parallel: u32,
    pub pipeline_parallel: u32,
    pub expert_parallel: u32,
    /// Device memory per GPU, bytes.
    pub device_bytes: f64,
    /// The engine's share (× gpu_memory_utilization), bytes per GPU.
    pub usable_bytes: f64,
    /// Index of the stage whose GPUs bound the KV cache; the per-GPU figures
    /// below are that stage's.
    pub stage: u32,
    /// Every stage, in order.
    pub stages: Vec<StageMemory>,
    /// Weight shard per GPU, bytes.
    pub weight_bytes: f64,
    /// Peak activation memory of a `max_batched_tokens` forward pass plus
    /// sampler logits, per GPU.
    pub activation_bytes: f64,
    pub overhead_bytes: f64,
    /// What remains for the KV cache, per GPU (may be negative: does not fit).
    pub kv_cache_bytes: f64,
    /// KV bytes one token takes on one GPU (KV heads split over the TP group,
    /// replicated when there are fewer KV heads than GPUs; MLA's latent whole
    /// on every GPU; only the stage's layers).
    pub kv_bytes_per_token: f64,
    pub block_size: u32,
    /// KV blocks one expert-parallel group holds (= `kv_blocks` without EP):
    /// the most one sequence can use.
    pub kv_blocks_per_group: u64,
    /// KV blocks per replica.
    pub kv_blocks: u64,
    /// Tokens the KV cache of one replica holds.
    pub kv_tokens: u64,
    /// Bytes per GPU set aside for the windows and states of `max_num_seqs`
    /// sequences (per group), before the blocks are counted.
    #[serde(skip_serializing_if = "is_zero")]
    pub sequence_reserve_bytes: f64,
    /// Each layer kind's cache in the bounding stage (empty for models whose
    /// every layer is plain full attention).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub layer_kinds: Vec<LayerKindMemory>,
    /// How a hybrid model's layer groups share the blocks (`None`: one group
    /// of every layer). With it a block spans `group_size` layers, and
    /// `kv_bytes_per_token` is one block's bytes per token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_groups: Option<KvGroups>,
}

impl MemoryPlan {
    pub fn new(
        model: &ModelArch,
        hw: &HardwareSpec,
        weight_dtype: Dtype,
        kv_dtype: Dtype,
        par: &Parallelism,
        engine: &EngineCfg,
    ) -> MemoryPlan {
        let device_bytes = hw.memory_bytes();
        let usable_bytes = device_bytes * engine.gpu_memory_utilization;
        let overhead_bytes = NON_TORCH_OVERHEAD_BYTES;
        let atp = par.attention_tp();
        let groups =
            KvGroups::new(model, atp, kv_dtype, engine.block_size).filter(|g| g.full_groups > 0);
        let block_size = groups.map_or(engine.block_size, |g| g.block_size);
        let stages: Vec<StageMemory> = parallel::stages(model, par.pipeline)
            .iter()
            .map(|st| {
                let weight_bytes = stage_weight_bytes(model, st, par, weight_dtype);
                let activation_bytes = activation_peak(model, st, par, engine);
                let (kv_bytes_per_token, sequence_bytes) = if let Some(g) = &groups {
                    // One block: a page of each of the stage's slots.
                    let slots = g.stage_slots(model, st.first_layer, st.layers) as f64;
                    (slots * model.kv_bytes_per_token_layer(atp, kv_dtype), 0.0)
                } else if model.uniform_attention() && model.sparse_attention.is_none() {
                    let kv =
                        st.layers as f64 * model.kv_elems_per_token_layer(atp) * kv_dtype.bytes();
                    (kv, 0.0)
                } else {
                    stage_kinds(
                        model,
                        st.first_layer,
                        st.layers,
                        atp,
                        kv_dtype,
                        engine.block_size,
                    )
                    .iter()
                    .fold((0.0, 0.0), |(k, b), m| {
                        (k + m.kv_bytes_per_token, b + m.bytes_per_sequence)
                    })
                };
                let sequences = (engine.max_num_seqs as f64 / par.attention_dp() as f64).ceil();
                let reserve = sequence_bytes * sequences;
                let kv_cache_bytes =
                    usable_bytes - weight_bytes - activation_bytes - overhead_bytes - reserve;
                let block_bytes = kv_bytes_per_token * block_size as f64;
                let kv_blocks = if kv_cache_bytes > 0.0 {
                    (kv_cache_bytes / block_bytes).floor() as u64
                } else {
                    0
                };
                StageMemory {
                    layers: st.layers,
                    weight_bytes,
                    activation_bytes,
                    kv_cache_bytes,
                    kv_bytes_per_token,
                    kv_blocks,
                    sequence_bytes,
                }
            })
            .collect();
        // The first stage with the fewest blocks binds.
        let stage = (0..stages.len())
            .min_by_key(|&i| stages[i].kv_blocks)
            .unwrap_or(0);
        let b = stages[stage].clone();
        let kv_blocks = b.kv_blocks * par.attention_dp() as u64;
        let sequences = (engine.max_num_seqs as f64 / par.attention_dp() as f64).ceil();
        let layer_kinds = if model.uniform_attention() && model.sparse_attention.is_none() {
            Vec::new()
        } else {
            let st = &parallel::stages(model, par.pipeline)[stage];
            stage_kinds(model, st.first_layer, st.layers, atp, kv_dtype, block_size)
        };
        MemoryPlan {
            tensor_parallel: par.tensor,
            pipeline_parallel: par.pipeline,
            expert_parallel: par.expert,
            device_bytes,
            usable_bytes,
            stage: stage as u32,
            stages,
            weight_bytes: b.weight_bytes,
            activation_bytes: b.activation_bytes,
            overhead_bytes,
            kv_cache_bytes: b.kv_cache_bytes,
            kv_bytes_per_token: b.kv_bytes_per_token,
            block_size,
            kv_blocks_per_group: b.kv_blocks,
            kv_blocks,
            kv_tokens: kv_blocks * block_size as u64,
            sequence_reserve_bytes: b.sequence_bytes * sequences,
            layer_kinds,
            kv_groups: groups,
        }
    }

    /// Adds a second model resident on the same GPUs (a speculative-decoding
    /// draft model): its weights shrink the KV budget, and its own KV cache
    /// grows with the same blocks as the target's (vLLM allocates both caches
    /// with one block table), so every block costs both models' bytes.
    pub fn add_resident_model(&mut self, weight_bytes: f64, kv_bytes_per_token: f64) {
        // Attention DP groups each hold the draft (an MTP layer) beside
        // their own KV cache.
        let groups = (self.kv_blocks / self.kv_blocks_per_group.max(1)).max(1);
        self.weight_bytes += weight_bytes;
        self.kv_cache_bytes -= weight_bytes;
        self.kv_bytes_per_token += kv_bytes_per_token;
        let block_bytes = self.kv_bytes_per_token * self.block_size as f64;
        self.kv_blocks_per_group = if self.kv_cache_bytes > 0.0 {
            (self.kv_cache_bytes / block_bytes).floor() as u64
        } else {
            0
        };
        self.kv_blocks = self.kv_blocks_per_group * groups;
        self.kv_tokens = self.kv_blocks * self.block_size as u64;
    }

    /// The most tokens one sequence can hold in one group's blocks: every
    /// block a row of its tokens, or, for a hybrid model, its full rows
    /// beside its windows' and state's blocks.
    pub fn longest_sequence(&self) -> u64 {
        let blocks = self.kv_blocks_per_group;
        let Some(g) = &self.kv_groups else {
            return blocks * self.block_size as u64;
        };
        // `sequence_blocks` grows with the length: the last length that fits.
        let (mut lo, mut hi) = (0u64, blocks * self.block_size as u64);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if g.sequence_blocks(mid.min(u32::MAX as u64) as u32) <= blocks {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }

    /// Blocks one sequence of `tokens` tokens holds in decode: a row per
    /// `block_size` tokens, and for a hybrid model its windows' and state's
    /// blocks beside them.
    pub fn sequence_blocks(&self, tokens: u64) -> u64 {
        match &self.kv_groups {
            Some(g) => g.sequence_blocks(tokens.min(u32::MAX as u64) as u32),
            None => tokens.div_ceil(self.block_size.max(1) as u64),
        }
    }

    /// Bytes of one KV block on one GPU.
    pub fn block_bytes(&self) -> f64 {
        self.kv_bytes_per_token * self.block_size as f64
    }

    /// Bytes per GPU the replica needs besides the KV cache.
    pub fn fixed_bytes(&self) -> f64 {
        self.weight_bytes
            + self.activation_bytes
            + self.overhead_bytes
            + self.sequence_reserve_bytes
    }

    /// Checks that weights fit and that the KV cache holds at least one
    /// sequence of `max_model_len` tokens (vLLM refuses to start otherwise);
    /// with expert parallelism one sequence lives in one group's cache.
    /// Errors carry a key path and a suggestion.
    pub fn check_fits(
        &self,
        model: &ModelArch,
        hw: &HardwareSpec,
        weight_dtype: Dtype,
        max_model_len: u32,
        max_model_len_given: bool,
    ) -> Result<(), (String, String)> {
        let gib = |b: f64| b / GIB;
        let suggestion = suggest_layout(model, hw, weight_dtype, self);
        let layout = format!(
            "tensor_parallel = {}{}",
            self.tensor_parallel,
            if self.pipeline_parallel > 1 {
                format!(
                    ", pipeline_parallel = {} (stage {})",
                    self.pipeline_parallel, self.stage
                )
            } else {
                String::new()
            }
        );
        let hint = |(tp, pp): (u32, u32)| {
            if pp > 1 {
                format!("fleet.tensor_parallel = {tp} with fleet.pipeline_parallel = {pp}")
            } else {
                format!("fleet.tensor_parallel = {tp}")
            }
        };
        let larger = |(tp, pp): (u32, u32)| tp * pp > self.tensor_parallel * self.pipeline_parallel;
        if self.kv_blocks == 0 {
            let tp_hint = match suggestion {
                Some(l) if larger(l) => format!("; try {}", hint(l)),
                _ => {
                    "; no layout of up to 64 GPUs fits: use a larger GPU or a smaller weight dtype"
                        .into()
                }
            };
            return Err((
                "model".into(),
                format!(
                    "{} does not fit on {} with {layout}: it needs {:.1} GiB per GPU \
                     (weights {:.1} + activations {:.1} + runtime {:.1}{}) plus KV cache, but only \
                     {:.1} GiB is usable (gpu_memory_utilization){tp_hint}",
                    model.name,
                    hw.name,
                    gib(self.fixed_bytes()),
                    gib(self.weight_bytes),
                    gib(self.activation_bytes),
                    gib(self.overhead_bytes),
                    if self.sequence_reserve_bytes > 0.0 {
                        format!(
                            " + windows and states of max_num_seqs sequences {:.1}",
                            gib(self.sequence_reserve_bytes)
                        )
                    } else {
                        String::new()
                    },
                    gib(self.usable_bytes),
                ),
            ));
        }
        let per_sequence = self.longest_sequence();
        if per_sequence < max_model_len as u64 {
            let key = if max_model_len_given {
                "engine.max_model_len"
            } else {
                "model"
            };
            return Err((
                key.into(),
                format!(
                    "KV cache of {per_sequence} tokens{} ({:.1} GiB per GPU) cannot hold one \
                     sequence of max_model_len = {max_model_len}; set engine.max_model_len ≤ \
                     {per_sequence}{}",
                    if self.expert_parallel > 1 {
                        " per expert-parallel group"
                    } else {
                        ""
                    },
                    gib(self.kv_cache_bytes),
                    match suggestion {
                        Some(l) if larger(l) => format!(" or try {}", hint(l)),
                        _ => String::new(),
                    }
                ),
            ));
        }
        Ok(())
    }
}

/// Weight bytes on one GPU of `stage`. Linear layers are stored in
/// `weight_dtype`; embeddings, LM head, norms and routers in its unquantized
/// counterpart ([`Dtype::unquantized_part`]). Non-expert parameters are split
/// over the attention group (the whole stage without EP); routed experts over
/// the whole stage (E / EP experts per group, each split over the group).
/// Routers are replicated. Norm weights (< 0.01 %) are counted as split.
fn stage_weight_bytes(model: &ModelArch, st: &Stage, par: &Parallelism, dtype: Dtype) -> f64 {
    let atp = par.attention_tp();
    let (a, t) = (atp as f64, par.tensor as f64);
    let mut quantized = st.dense_layers as f64 * model.dense_layer_params_per_gpu(atp);
    let mut unquantized = model.norm_params() * st.layers as f64 / model.layers as f64 / a;
    if st.moe_layers > 0 {
        let moe_layer = model.attention_params_per_gpu(atp)
            + model.num_shared_experts as f64 * model.expert_params() / a
            + par.expert_slots(model) as f64 * model.expert_params() / t;
        quantized += st.moe_layers as f64 * moe_layer;
        unquantized += st.moe_layers as f64 * model.router_params();
    }
    let table = model.vocab_size as f64 * model.hidden_size as f64 / a;
    if st.embedding {
        unquantized += table;
    }
    if st.lm_head && !(model.tied_embeddings && st.embedding) {
        unquantized += table;
    }
    if model.attention_unquantized {
        let attention = st.layers as f64 * model.attention_params_per_gpu(atp);
        quantized -= attention;
        unquantized += attention;
    }
    quantized * dtype.weight_bytes() + unquantized * dtype.unquantized_part().bytes()
}

/// Each layer kind's cache among the `n` layers from `first` on one GPU of
/// `tp`: full layers' bytes per token (in the blocks), windowed layers' window
/// of blocks and linear layers' state per sequence (set aside). Without any
/// full layer the windowed layers go in the blocks (see the module comment).
pub fn stage_kinds(
    model: &ModelArch,
    first: u32,
    n: u32,
    tp: u32,
    kv_dtype: Dtype,
    block_size: u32,
) -> Vec<LayerKindMemory> {
    let c = model.kinds_in(first, n);
    let per_layer = model.kv_bytes_per_token_layer(tp, kv_dtype);
    let windows_in_blocks = c[0] == 0;
    let sinks = if model.attention_sinks { ", sinks" } else { "" };
    let full_name = match (model.mla(), &model.sparse_attention) {
        (Some(_), Some(sp)) => format!(
            "full attention (MLA latent + DSA indexer key of {} B, top-{} sparse)",
            sp.key_bytes(),
            sp.top_k
        ),
        (Some(_), None) => "full attention (MLA latent)".to_string(),
        (None, _) => format!("full attention ({} KV heads{sinks})", model.num_kv_heads),
    };
    LayerKind::ALL
        .iter()
        .zip(c)
        .filter(|(_, layers)| *layers > 0)
        .map(|(&kind, layers)| {
            let l = layers as f64;
            let (name, per_token, per_seq) = match kind {
                LayerKind::Full => (full_name.clone(), l * per_layer, 0.0),
                LayerKind::Sliding | LayerKind::Chunked => {
                    let w = model.window(kind).unwrap_or(0);
                    let name = format!("{} attention (window {w}{sinks})", kind.name());
                    if windows_in_blocks {
                        (name, l * per_layer, 0.0)
                    } else {
                        let held =
                            crate::catalog::kv_tokens_held(u64::MAX / 2, Some(w), block_size);
                        (name, 0.0, l * held as f64 * per_layer)
                    }
                }
                LayerKind::Linear => {
                    let state = model.linear_attention.map_or(0.0, |a| a.state_bytes(tp));
                    (
                        "linear attention (Gated DeltaNet state)".to_string(),
                        0.0,
                        l * state,
                    )
                }
            };
            LayerKindMemory {
                kind: name,
                layers,
                kv_bytes_per_token: per_token,
                bytes_per_sequence: per_seq,
            }
        })
        .collect()
}

/// Peak activation memory of a profiling forward pass of `max_batched_tokens`
/// tokens on one GPU of `stage` (each EP group runs its share of them): the
/// residual stream and attention projections (≈ 4 × hidden) and the MLP's
/// gate, up and activated tensors (≈ 3 × intermediate / TP) live at once. An
/// MoE layer holds those for each of a token's `experts_per_token` routed
/// copies plus the copies themselves, as vLLM's fused-MoE intermediate caches
/// do. The last stage adds fp32 logits for `max_num_seqs` sampled rows.
fn activation_peak(model: &ModelArch, st: &Stage, par: &Parallelism, engine: &EngineCfg) -> f64 {
    let tp = par.attention_tp() as f64;
    let dp = par.attention_dp() as f64;
    let h = model.hidden_size as f64;
    let dense_mlp = if st.dense_layers > 0 {
        3.0 * model.intermediate_size as f64 / tp
    } else {
        0.0
    };
    let moe_mlp = if st.moe_layers > 0 {
        let width = model
            .moe_intermediate_size
            .unwrap_or(model.intermediate_size) as f64;
        model.experts_per_token as f64 * (3.0 * width / tp + h)
    } else {
        0.0
    };
    let per_token = (4.0 * h + dense_mlp.max(moe_mlp)) * ACTIVATION_BYTES;
    let logits = if st.lm_head {
        engine.max_num_seqs as f64 / dp * model.vocab_size as f64 / tp * 4.0 * LOGIT_COPIES
    } else {
        0.0
    };
    engine.max_batched_tokens as f64 / dp * per_token + logits
}

/// Smallest layout (fewest GPUs, then fewest stages) of power-of-two tensor
/// parallelism within a node (dividing the heads) and power-of-two pipeline
/// stages, up to 64 GPUs, whose weights and fixed memory leave room for a KV
/// cache of at least a tenth of the device.
fn suggest_layout(
    model: &ModelArch,
    hw: &HardwareSpec,
    dtype: Dtype,
    plan: &MemoryPlan,
) -> Option<(u32, u32)> {
    let util = plan.usable_bytes / plan.device_bytes;
    let weights = total_weight_bytes(model, dtype);
    let act = plan.activation_bytes; // upper bound: shrinks with TP
    let tps = (0..=6)
        .map(|p| 1u32 << p)
        .filter(|&tp| tp <= hw.gpus_per_node && model.num_heads % tp == 0);
    let mut layouts: Vec<(u32, u32)> = tps
        .flat_map(|tp| (0..=6).map(move |p| (tp, 1u32 << p)))
        .filter(|&(tp, pp)| tp * pp <= 64 && pp <= model.layers)
        .filter(|&(tp, pp)| pp == 1 || hw.network_gbps.is_some() || tp * pp <= hw.gpus_per_node)
        .collect();
    layouts.sort_by_key(|&(tp, pp)| (tp * pp, pp));
    layouts.into_iter().find(|&(tp, pp)| {
        let per_gpu = weights / (tp * pp) as f64;
        hw.memory_bytes() * util - per_gpu - act - plan.overhead_bytes > 0.1 * hw.memory_bytes()
    })
}

/// Weight bytes of the whole model in `dtype` (quantized linear layers,
/// unquantized embeddings, norms and routers).
pub fn total_weight_bytes(model: &ModelArch, dtype: Dtype) -> f64 {
    let unquantized = model.embedding_params()
        + model.norm_params()
        + model.moe_layers() as f64 * model.router_params();
    let attention = if model.attention_unquantized {
        model.layers as f64 * model.attention_params()
    } else {
        0.0
    };
    let unquantized = unquantized + attention;
    let quantized = model.total_params() - unquantized;
    quantized * dtype.weight_bytes() + unquantized * dtype.unquantized_part().bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;

    fn plan(model: &str, hw: &str, tp: u32) -> MemoryPlan {
        let (m, _) = catalog::model(model).unwrap();
        let h = catalog::hardware(hw).unwrap();
        MemoryPlan::new(
            &m,
            &h,
            Dtype::Bf16,
            Dtype::Bf16,
            &Parallelism::tensor(tp),
            &EngineCfg::default(),
        )
    }

    #[test]
    fn llama_8b_on_h100_leaves_about_55_gib_of_kv() {
        let p = plan("llama-3.1-8b", "h100-sxm", 1);
        // 8.03e9 params × 2 bytes = 16.06e9 bytes = 14.96 GiB (vLLM logs ~14.99 GiB).
        assert!(
            (p.weight_bytes / GIB - 14.96).abs() < 0.05,
            "{}",
            p.weight_bytes / GIB
        );
        // 72 GiB usable − 15 − ~1.3 − 0.5 ≈ 55 GiB → ≈ 450k tokens at 128 KiB/token.
        let kv_gib = p.kv_cache_bytes / GIB;
        assert!((54.0..57.0).contains(&kv_gib), "{kv_gib}");
        assert!((440_000..470_000).contains(&p.kv_tokens), "{}", p.kv_tokens);
        assert_eq!(p.kv_tokens % 16, 0);
    }

    #[test]
    fn tensor_parallel_splits_weights_and_kv_heads() {
        let p1 = plan("llama-3.1-70b", "h100-sxm", 1);
        assert_eq!(p1.kv_blocks, 0, "70B bf16 does not fit one H100");
        let p4 = plan("llama-3.1-70b", "h100-sxm", 4);
        assert!(p4.kv_blocks > 0);
        assert_eq!(p4.kv_bytes_per_token, 2.0 * 80.0 * 2.0 * 128.0 * 2.0);
        // 16 GPUs > 8 KV heads: heads are replicated, one per GPU.
        let p16 = plan("llama-3.1-70b", "h100-sxm", 16);
        assert_eq!(p16.kv_bytes_per_token, 2.0 * 80.0 * 1.0 * 128.0 * 2.0);
        let (m, _) = catalog::model("llama-3.1-70b").unwrap();
        let h = catalog::hardware("h100-sxm").unwrap();
        assert_eq!(suggest_layout(&m, &h, Dtype::Bf16, &p1), Some((4, 1)));
    }

    fn plan_par(model: &str, hw: &str, par: Parallelism, w: Dtype) -> MemoryPlan {
        let (m, _) = catalog::model(model).unwrap();
        let h = catalog::hardware(hw).unwrap();
        par.validate(&m, &h).unwrap();
        MemoryPlan::new(&m, &h, w, Dtype::Bf16, &par, &EngineCfg::default())
    }

    #[test]
    fn pipeline_stages_split_weights_and_kv_and_the_tightest_binds() {
        let par = Parallelism {
            tensor: 8,
            pipeline: 2,
            expert: 1,
            ..Parallelism::default()
        };
        let p = plan_par("llama-3.1-405b", "h100-sxm", par, Dtype::Bf16);
        assert_eq!(plan("llama-3.1-405b", "h100-sxm", 8).kv_blocks, 0);
        let layers: Vec<u32> = p.stages.iter().map(|s| s.layers).collect();
        assert_eq!(layers, vec![63, 63]);
        // 405.85e9 × 2 B over 16 GPUs = 47.25 GiB per GPU.
        assert!(
            (p.weight_bytes / GIB - 47.25).abs() < 0.05,
            "{}",
            p.weight_bytes / GIB
        );
        // The last stage holds the sampler's logits and binds the cache.
        assert_eq!(p.stage, 1);
        assert!(p.stages[1].activation_bytes > p.stages[0].activation_bytes);
        // 63 layers × 1 KV head × 128 × 2 (K, V) × 2 B = 32 256 B/token/GPU.
        assert_eq!(p.kv_bytes_per_token, 32_256.0);
        assert_eq!(p.kv_blocks, p.stages[1].kv_blocks);
        assert!((700_000..800_000).contains(&p.kv_tokens), "{}", p.kv_tokens);
        // Uneven: DeepSeek-V3's 61 layers over 2 stages, 3 dense ones on the first.
        let d = plan_par(
            "deepseek-v3",
            "h100-sxm",
            Parallelism {
                tensor: 8,
                pipeline: 2,
                expert: 1,
                ..Parallelism::default()
            },
            Dtype::Fp8,
        );
        assert_eq!(d.stages[0].layers, 31);
        assert_eq!(d.stages[1].kv_bytes_per_token, 30.0 * 576.0 * 2.0);
    }

    #[test]
    fn expert_parallel_groups_keep_their_own_latent_caches() {
        let par = |ep| Parallelism {
            tensor: 8,
            pipeline: 1,
            expert: ep,
            ..Parallelism::default()
        };
        let tp = plan_par("deepseek-v3", "h200", par(1), Dtype::Fp8);
        let ep = plan_par("deepseek-v3", "h200", par(8), Dtype::Fp8);
        // 671B in fp8 (embeddings, LM head, norms, routers in bf16) over 8
        // GPUs is ~79 GiB each; EP replicates the 15B non-expert parameters
        // on every GPU (attention TP 1) and adds ~15 GiB.
        assert!(
            (78.5..80.0).contains(&(tp.weight_bytes / GIB)),
            "{}",
            tp.weight_bytes / GIB
        );
        assert!(ep.weight_bytes - tp.weight_bytes > 13.0 * GIB);
        // The MLA latent is whole on every GPU: 61 × 576 × 2 B either way...
        assert_eq!(tp.kv_bytes_per_token, 70_272.0);
        assert_eq!(ep.kv_bytes_per_token, 70_272.0);
        // ... but with EP each of the 8 groups caches only its own sequences,
        // so the replica holds 8 × one GPU's blocks (5.6× TP-8's despite the
        // smaller per-GPU cache).
        assert_eq!(ep.kv_blocks, 8 * ep.kv_blocks_per_group);
        assert_eq!(tp.kv_blocks, tp.kv_blocks_per_group);
        let gain = ep.kv_tokens as f64 / tp.kv_tokens as f64;
        assert!((5.0..6.0).contains(&gain), "{gain}");
    }

    #[test]
    fn quantized_checkpoints_keep_embeddings_in_bf16() {
        let (m, _) = catalog::model("llama-3.1-8b").unwrap();
        // 2 × 128256 × 4096 embedding + LM head params stay at 2 B.
        let table = 2.0 * 128256.0 * 4096.0;
        let want = (m.total_params() - table - m.norm_params()) * 0.51953125
            + (table + m.norm_params()) * 2.0;
        assert!((total_weight_bytes(&m, Dtype::Int4) - want).abs() < 1.0);
        let p = MemoryPlan::new(
            &m,
            &catalog::hardware("l4").unwrap(),
            Dtype::Int4,
            Dtype::Fp8,
            &Parallelism::tensor(1),
            &EngineCfg::default(),
        );
        assert!((p.weight_bytes - want).abs() < 1.0);
        // 8B in int4 with fp8 KV fits a 24 GiB L4 with room for ~250k tokens.
        assert!((200_000..300_000).contains(&p.kv_tokens), "{}", p.kv_tokens);
    }

    #[test]
    fn suggestions_reach_for_pipeline_stages_beyond_a_node() {
        let (m, _) = catalog::model("llama-3.1-405b").unwrap();
        let h = catalog::hardware("h100-sxm").unwrap();
        let p = plan("llama-3.1-405b", "h100-sxm", 8);
        assert_eq!(suggest_layout(&m, &h, Dtype::Bf16, &p), Some((8, 2)));
        assert_eq!(suggest_layout(&m, &h, Dtype::Fp8, &p), Some((8, 1)));
        let e = p.check_fits(&m, &h, Dtype::Bf16, 8192, true).unwrap_err();
        assert!(e.1.contains("pipeline_parallel = 2"), "{e:?}");
    }

    /// The plan of a preset at its checkpoint's dtype (or `w`), with the
    /// default engine (block 16, `max_num_seqs` as [`EngineCfg::default`]).
    fn family_plan(key: &str, hw: &str, tp: u32, w: Option<Dtype>, kv: Dtype) -> MemoryPlan {
        let preset = catalog::model_preset(key).unwrap();
        let m = preset.load();
        let w = w.or(m.weight_dtype).unwrap_or(Dtype::Bf16);
        let h = catalog::hardware(hw).unwrap();
        MemoryPlan::new(
            &m.arch,
            &h,
            w,
            kv,
            &Parallelism::tensor(tp),
            &EngineCfg::default(),
        )
    }

    fn kinds(p: &MemoryPlan) -> Vec<(u32, f64, f64)> {
        p.layer_kinds
            .iter()
            .map(|k| (k.layers, k.kv_bytes_per_token, k.bytes_per_sequence))
            .collect()
    }

    fn close(got: f64, want: f64) {
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{got} vs {want}"
        );
    }

    /// gpt_oss: alternating 128-token sliding and full layers with sinks,
    /// MXFP4 experts, BF16 attention, on one H200.
    #[test]
    fn gpt_oss_plan_by_hand() {
        let p = family_plan("gpt-oss-120b", "h200", 1, None, Dtype::Bf16);
        // 18 full layers × K and V × 8 heads × 64 × 2 B; 18 sliding layers
        // hold ⌈128/16⌉·16 + 16 = 144 tokens each, per sequence.
        assert_eq!(p.kv_bytes_per_token, 18.0 * 2.0 * 8.0 * 64.0 * 2.0);
        let window = 18.0 * 144.0 * 2.0 * 8.0 * 64.0 * 2.0;
        assert_eq!(kinds(&p), vec![(18, 36_864.0, 0.0), (18, 0.0, window)]);
        // vLLM's groups: 18 full and 18 sliding layers, a block spans 18
        // layers' pages; the windows come out of the pool, nothing is set aside.
        let g = p.kv_groups.unwrap();
        assert_eq!((g.group_size, g.full_groups, g.block_size), (18, 1, 16));
        assert_eq!(p.sequence_reserve_bytes, 0.0);
        // A 10,000-token sequence: 625 full rows and at most ⌈128/16⌉ + 1
        // = 9 blocks of the sliding group (which frees what leaves the window).
        assert_eq!(p.sequence_blocks(10_000), 625 + 9);
        assert_eq!(p.sequence_blocks(100), 7 + 7);
        let experts = 36.0 * 128.0 * 3.0 * 2880.0 * 2880.0 * (0.5 + 1.0 / 32.0);
        let attention = 36.0 * (2.0 * 2880.0 * 4096.0 + 2.0 * 2880.0 * 512.0) * 2.0;
        let rest =
            (36.0 * 2880.0 * 128.0 + 2.0 * 201_088.0 * 2880.0 + 73.0 * 2880.0 + 36.0 * 64.0) * 2.0;
        close(p.weight_bytes, experts + attention + rest);
        // The blocks get what the weights, activations and runtime leave.
        close(
            p.kv_cache_bytes,
            p.usable_bytes - p.weight_bytes - p.activation_bytes - p.overhead_bytes,
        );
        assert_eq!(p.kv_blocks, (p.kv_cache_bytes / (36_864.0 * 16.0)) as u64);
    }

    /// qwen3_5: 45 Gated DeltaNet layers (fixed state) and 15 full layers of
    /// 2 KV heads (one per GPU at TP 4), NVFP4 weights, FP8 cache, 4 × B200.
    #[test]
    fn qwen35_plan_by_hand() {
        let p = family_plan(
            "qwen3.5-397b-a17b",
            "b200",
            4,
            Some(Dtype::Nvfp4),
            Dtype::Fp8,
        );
        assert_eq!(p.kv_bytes_per_token, 15.0 * 1.0 * 256.0 * 2.0 * 1.0);
        // Per layer and sequence: 64 heads × 128 × 128 FP32 state and 3
        // × (2·2048 + 8192) BF16 convolution inputs, a quarter per GPU.
        let state = 45.0 * (64.0 * 128.0 * 128.0 * 4.0 + 3.0 * 12_288.0 * 2.0) / 4.0;
        assert_eq!(kinds(&p), vec![(15, 7680.0, 0.0), (45, 0.0, state)]);
        // vLLM's block: 16 × ⌈(state of one layer per GPU) / (16 × 512 B)⌉
        // = 16 × ⌈1 067 008 / 8192⌉ = 2096 tokens; three linear groups of
        // 15 layers hold a block each per sequence.
        let g = p.kv_groups.unwrap();
        assert_eq!((g.group_size, g.state_groups, g.block_size), (15, 3, 2096));
        assert_eq!(p.block_size, 2096);
        assert_eq!(p.sequence_blocks(5000), 3 + 3);
        // Weights per GPU: full attention (Q with its gate and O split, the
        // one KV head replicated), linear projections split, 513 experts of
        // 3 × 4096 × 1024 split; routers whole, embeddings and norms split.
        let full = (4096.0 * 16384.0 + 8192.0 * 4096.0) / 4.0 + 2.0 * 4096.0 * 256.0;
        let linear = (4096.0 * 20480.0 + 4096.0 * 128.0 + 8192.0 * 4096.0) / 4.0;
        let experts = 513.0 * 3.0 * 4096.0 * 1024.0 / 4.0;
        let quantized = 15.0 * full + 45.0 * linear + 60.0 * experts;
        let norms = 121.0 * 4096.0 + 45.0 * (12_288.0 * 4.0 + 128.0 + 128.0);
        let bf16 = 60.0 * 4096.0 * 512.0 + (2.0 * 248_320.0 * 4096.0 + norms) / 4.0;
        close(p.weight_bytes, quantized * 0.5625 + bf16 * 2.0);
    }

    /// qwen3_next: the same hybrid read from a config.json (48 layers, a full
    /// layer every 4th, 16 KV-less key heads and 32 value heads).
    #[test]
    fn qwen3_next_plan_by_hand() {
        let cfg = r#"{"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
            "num_hidden_layers": 48, "hidden_size": 2048, "num_attention_heads": 16,
            "num_key_value_heads": 2, "head_dim": 256, "intermediate_size": 5120,
            "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 512,
            "shared_expert_intermediate_size": 512, "full_attention_interval": 4,
            "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
            "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "vocab_size": 151936,
            "max_position_embeddings": 262144, "tie_word_embeddings": false}"#;
        let m = catalog::parse_config(cfg, "qwen3-next.json").unwrap();
        assert_eq!(m.family, "qwen3_next");
        // 80B total, 3B active (Qwen's card).
        assert!(
            (m.arch.total_params() / 1e9 - 80.0).abs() < 1.0,
            "{}",
            m.arch.total_params()
        );
        // "A3B" counts neither embedding table (0.62B): 3.2B here.
        let active = (m.arch.active_params() - m.arch.embedding_params()) / 1e9;
        assert!((2.9..3.4).contains(&active), "{active}");
        let h = catalog::hardware("h100").unwrap();
        let p = MemoryPlan::new(
            &m.arch,
            &h,
            Dtype::Bf16,
            Dtype::Bf16,
            &Parallelism::tensor(2),
            &EngineCfg::default(),
        );
        assert_eq!(p.kv_bytes_per_token, 12.0 * 1.0 * 256.0 * 2.0 * 2.0);
        let state = 36.0 * (32.0 * 128.0 * 128.0 * 4.0 + 3.0 * (2.0 * 2048.0 + 4096.0) * 2.0) / 2.0;
        assert_eq!(kinds(&p), vec![(12, 12_288.0, 0.0), (36, 0.0, state)]);
        // 16 × ⌈1 073 152 / (16 × 1024)⌉ = 1056 tokens a block (the figure
        // vLLM logs for this state-to-page ratio).
        assert_eq!(p.block_size, 1056);
    }

    /// llama4: three chunked-local layers (8192) of four, MoE on every layer
    /// (Scout), on 8 H100s; weights all split but the routers.
    #[test]
    fn llama4_plan_by_hand() {
        let p = family_plan("llama-4-scout", "h100", 8, None, Dtype::Bf16);
        assert_eq!(p.kv_bytes_per_token, 12.0 * 2.0 * 1.0 * 128.0 * 2.0);
        let chunk = 36.0 * (8192.0 + 16.0) * 2.0 * 128.0 * 2.0;
        assert_eq!(kinds(&p), vec![(12, 6144.0, 0.0), (36, 0.0, chunk)]);
        // Three chunked groups of 12: a 20,000-token sequence holds 1250
        // full rows and at most 8192/16 + 1 = 513 blocks in each chunked
        // group on its way there.
        assert_eq!(p.kv_groups.unwrap().chunked.unwrap().groups, 3);
        assert_eq!(p.sequence_blocks(20_000), 1250 + 3 * 513);
        let (m, _) = catalog::model("llama-4-scout").unwrap();
        let routers = 48.0 * 5120.0 * 16.0;
        close(
            p.weight_bytes,
            (m.total_params() - routers) * 2.0 / 8.0 + routers * 2.0,
        );
        // 48 layers × (Q, O 5120² + K, V 5120·1024 + 17 experts × 3·5120·8192
        // + router) + 2 × 202048 × 5120 + 97 × 5120 norms.
        let layer = 2.0 * 5120.0 * 5120.0
            + 2.0 * 5120.0 * 1024.0
            + 17.0 * 3.0 * 5120.0 * 8192.0
            + 5120.0 * 16.0;
        close(
            m.total_params(),
            48.0 * layer + 2.0 * 202_048.0 * 5120.0 + 97.0 * 5120.0,
        );
    }

    /// gemma3: five 1024-token sliding layers per full one (62 layers: 52
    /// sliding, 10 full), tied embeddings, on 2 H100s.
    #[test]
    fn gemma3_plan_by_hand() {
        let p = family_plan("gemma-3-27b", "h100", 2, None, Dtype::Bf16);
        assert_eq!(p.kv_bytes_per_token, 10.0 * 2.0 * 8.0 * 128.0 * 2.0);
        let window = 52.0 * (1024.0 + 16.0) * 2.0 * 8.0 * 128.0 * 2.0;
        assert_eq!(kinds(&p), vec![(10, 40_960.0, 0.0), (52, 0.0, window)]);
        // Groups of 10: one full, six sliding (the last 2 layers and 8
        // padding slots); in decode each holds at most ⌈1024/16⌉ + 1 = 65.
        assert_eq!(p.kv_groups.unwrap().sliding.unwrap().groups, 6);
        assert_eq!(p.sequence_blocks(4000), 250 + 6 * 65);
        let layer = 5376.0 * 4096.0 * 2.0 + 2.0 * 5376.0 * 2048.0 + 3.0 * 5376.0 * 21504.0;
        let total = 62.0 * layer + 262_208.0 * 5376.0 + 125.0 * 5376.0;
        close(p.weight_bytes, total * 2.0 / 2.0);
    }

    /// deepseek_v32 and glm5: MLA latent plus the DSA indexer's 132-byte
    /// FP8 key per token and layer, whole on every GPU; the indexer's weights
    /// replicated.
    #[test]
    fn sparse_mla_plans_by_hand() {
        let v32 = family_plan("deepseek-v3.2", "h200", 8, None, Dtype::Bf16);
        assert_eq!(v32.kv_bytes_per_token, 61.0 * (576.0 * 2.0 + 132.0));
        assert_eq!(kinds(&v32), vec![(61, 61.0 * 1284.0, 0.0)]);
        assert_eq!(v32.sequence_reserve_bytes, 0.0);
        let v3 = family_plan("deepseek-v3", "h200", 8, Some(Dtype::Fp8Block), Dtype::Bf16);
        let indexer = 1536.0 * 8192.0 + 7168.0 * 128.0 + 256.0 + 7168.0 * 64.0;
        close(
            v32.weight_bytes - v3.weight_bytes,
            61.0 * indexer * (1.0 + 4.0 / 16384.0),
        );
        let glm = family_plan("glm-5", "b200", 8, Some(Dtype::Fp8), Dtype::Fp8);
        assert_eq!(glm.kv_bytes_per_token, 78.0 * (576.0 + 132.0));
    }

    /// kimi_k2 (MLA, INT4 experts with attention kept in BF16) and
    /// minimax_m2 (GQA, block-FP8), and a qwen3_moe / mistral pair of plain
    /// and all-sliding models.
    #[test]
    fn kimi_minimax_qwen3_mistral_plans_by_hand() {
        let k = family_plan("kimi-k2.5", "h200", 8, None, Dtype::Bf16);
        assert_eq!(k.kv_bytes_per_token, 61.0 * 576.0 * 2.0);
        let (km, _) = catalog::model("kimi-k2.5").unwrap();
        // Attention per GPU: split up-projections and O, replicated down-projections.
        let att = (1536.0 * 64.0 * 192.0 + 512.0 * 64.0 * 256.0 + 64.0 * 128.0 * 7168.0) / 8.0
            + 7168.0 * 1536.0
            + 7168.0 * 576.0;
        assert_eq!(km.attention_params_per_gpu(8), att);
        let all_int4 = MemoryPlan::new(
            &ModelArch {
                attention_unquantized: false,
                ..km.clone()
            },
            &catalog::hardware("h200").unwrap(),
            Dtype::Int4,
            Dtype::Bf16,
            &Parallelism::tensor(8),
            &EngineCfg::default(),
        );
        close(
            k.weight_bytes - all_int4.weight_bytes,
            61.0 * att * (2.0 - Dtype::Int4.weight_bytes()),
        );
        let mm = family_plan("minimax-m2.5", "h200", 4, None, Dtype::Fp8);
        assert_eq!(mm.kv_bytes_per_token, 62.0 * 2.0 * 2.0 * 128.0);
        assert!(mm.layer_kinds.is_empty());
        let q = family_plan("qwen3-235b-a22b", "h200", 8, None, Dtype::Bf16);
        assert_eq!(q.kv_bytes_per_token, 94.0 * 2.0 * 1.0 * 128.0 * 2.0);
        // Mistral-7B-v0.1: every layer a 4096-token window, no full layer:
        // the windows go in the blocks and nothing is set aside.
        let cfg = r#"{"model_type": "mistral", "num_hidden_layers": 32, "hidden_size": 4096,
            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
            "vocab_size": 32000, "max_position_embeddings": 32768, "sliding_window": 4096}"#;
        let m = catalog::parse_config(cfg, "mistral.json").unwrap().arch;
        let p = MemoryPlan::new(
            &m,
            &catalog::hardware("h100").unwrap(),
            Dtype::Bf16,
            Dtype::Bf16,
            &Parallelism::tensor(1),
            &EngineCfg::default(),
        );
        assert_eq!(p.kv_bytes_per_token, 32.0 * 2.0 * 8.0 * 128.0 * 2.0);
        assert_eq!(kinds(&p), vec![(32, 131_072.0, 0.0)]);
        assert_eq!(p.sequence_reserve_bytes, 0.0);
    }

    proptest::proptest! {
        /// Over any length, a sequence of a hybrid model holds its full layers'
        /// tokens plus at most the windows and states set aside: sliding
        /// layers stop at the window and linear layers do not grow at all.
        #[test]
        fn hybrid_sequences_grow_only_in_full_layers(ctx in 1u64..1_000_000, extra in 1u64..100_000) {
            for key in ["gpt-oss-120b", "qwen3.5-397b-a17b", "gemma-3-27b", "llama-4-scout"] {
                let (m, _) = catalog::model(key).unwrap();
                let cap = m.sequence_state_bytes(0, m.layers, 1, Dtype::Bf16, 16);
                let per_token = m.kv_bytes_per_token(Dtype::Bf16);
                let full = |c: u64| c.div_ceil(16) as f64 * 16.0 * per_token;
                let held = m.sequence_bytes(ctx, 1, Dtype::Bf16, 16);
                proptest::prop_assert!(held <= full(ctx) + cap + 1e-6);
                let more = m.sequence_bytes(ctx + extra, 1, Dtype::Bf16, 16);
                // Growth beyond the full layers' is bounded by what the
                // windows still had room for.
                proptest::prop_assert!(more - full(ctx + extra) <= cap + 1e-6);
                proptest::prop_assert!(more >= held);
            }
            // Linear layers alone: the same bytes at any length.
            let (q, _) = catalog::model("qwen3.5-397b-a17b").unwrap();
            let linear_only = ModelArch { layer_pattern: vec![LayerKind::Linear], ..q.clone() };
            proptest::prop_assert_eq!(
                linear_only.sequence_bytes(ctx, 1, Dtype::Bf16, 16),
                linear_only.sequence_bytes(ctx + extra, 1, Dtype::Bf16, 16)
            );
        }
    }
}
