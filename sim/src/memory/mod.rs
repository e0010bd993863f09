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

mod stage;
use stage::{activation_peak, stage_weight_bytes, suggest_layout};
pub use stage::{stage_kinds, total_weight_bytes};

#[cfg(test)]
mod tests;
