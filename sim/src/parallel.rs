//! How one replica lays a model out over its GPUs: tensor parallelism inside a
//! node, pipeline stages that may span nodes, and expert parallelism for
//! mixture-of-experts models. This module owns the geometry (which GPU holds
//! which layers and heads, which groups share which tokens, which hops cross a
//! node) and its validation; `cost` prices it and `memory` sizes it.
//!
//! - **Tensor parallelism** (Megatron-LM, Shoeybi et al. 2019): every layer's
//!   matrices are split over the `tensor` GPUs of a stage, attention by head;
//!   two all-reduces per layer join the partial results. The group must sit in
//!   one node (NVLink / Infinity Fabric domain).
//! - **Pipeline parallelism** (GPipe, Huang et al. NeurIPS 2019; Megatron-LM's
//!   pipeline, Narayanan et al. SC 2021): the layers are cut into `pipeline`
//!   consecutive stages of `tensor` GPUs each, so a replica has tensor ×
//!   pipeline GPUs. Stages pass activations with point-to-point send/recv.
//!   Uneven splits follow vLLM's `get_pp_indices` (see [`stage_layer_counts`]).
//! - **Expert parallelism** (GShard, Lepikhin et al. ICLR 2021; DeepSpeed-MoE,
//!   Rajbhandari et al. ICML 2022): with `expert` = EP > 1 each stage's GPUs
//!   form EP groups of tensor / EP GPUs. The routed experts are partitioned
//!   over the groups (E / EP each, every expert split over its group's GPUs),
//!   while attention, dense MLPs, shared experts, embeddings and the LM head
//!   run data-parallel: each group holds them whole (split over its own
//!   tensor / EP GPUs) and serves its own share of the batch with its own KV
//!   cache. Tokens travel to their experts' groups and back with an
//!   all-to-all dispatch and combine per MoE layer. This is the layout DeepSeek
//!   serves V3 with (DeepSeek-V3 report §3.4) and that SGLang runs as
//!   `--enable-dp-attention` with `--dp` = EP, and vLLM as
//!   `--data-parallel-size` with `--enable-expert-parallel`. With EP = 1 the
//!   experts are tensor-sliced like a dense MLP (vLLM's default for MoE).
//! - **Attention data parallelism apart from expert parallelism**: engines
//!   size the two sides of an MoE layer separately, as aiconfigurator's
//!   columns name them — attention TP × attention DP = MoE TP × MoE EP = the
//!   stage's GPUs. `attention_data` = DP gives DP groups of tensor / DP GPUs
//!   that each hold the non-expert weights and serve their own sequences
//!   (SGLang `--enable-dp-attention --dp DP`, vLLM `--data-parallel-size`,
//!   TensorRT-LLM `enable_attention_dp`), while the routed experts are
//!   split EP ways, each expert over tensor / EP GPUs (MoE TP). So TP 8 with
//!   EP 8 and no DP attention is TensorRT-LLM's attention-TP-8 × MoE-EP-8,
//!   and DP 32 × EP 32 on an NVL72 rack is wide EP. Without the key, DP
//!   attention follows EP as above.
//! - **Wide EP across nodes**: with DP attention the stage may span nodes
//!   (each attention group and each expert's MoE-TP slice inside one node),
//!   the dispatch and combine crossing the scale-out network (DeepEP's
//!   RDMA path); see `cost::comm`.
//! - **Redundant experts** (DeepSeek's EPLB; vLLM and SGLang
//!   `num_redundant_experts`): each EP rank holds (E + R) / EP expert slots,
//!   the R extra ones replicas of the hottest experts, so the busiest rank
//!   carries less than it would with E / EP experts; see [`eplb`].

use crate::catalog::{HardwareSpec, ModelArch};
use serde::Serialize;

pub mod eplb;

/// The parallel layout of one replica: tensor × pipeline GPUs, and how many
/// expert-parallel groups each stage's GPUs form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Parallelism {
    /// GPUs per pipeline stage (`fleet.tensor_parallel`).
    pub tensor: u32,
    /// Pipeline stages (`fleet.pipeline_parallel`).
    pub pipeline: u32,
    /// Expert-parallel ranks per stage (`fleet.expert_parallel`); divides `tensor`.
    pub expert: u32,
    /// Attention data-parallel groups per stage
    /// (`fleet.attention_data_parallel`); divides `tensor`. `None`: one per
    /// expert-parallel group, the layout `expert` alone has always meant.
    pub attention_data: Option<u32>,
    /// Extra expert slots over the EP ranks for replicas of hot experts
    /// (`fleet.num_redundant_experts`, EPLB).
    pub redundant_experts: u32,
}

impl Default for Parallelism {
    fn default() -> Self {
        Parallelism::tensor(1)
    }
}

/// How every command names a fleet's shape, so "×" always multiplies the
/// same things: "2 replicas × TP 2 on H200 = 4 GPUs", with " × PP p" after
/// the tensor parallelism and " (EP e)" when those are used.
pub fn fleet_shape(
    replicas: u32,
    tensor: u32,
    pipeline: u32,
    expert: u32,
    hardware: &str,
) -> String {
    let plural = |n: u32| if n == 1 { "" } else { "s" };
    let gpus = replicas as u64 * tensor as u64 * pipeline.max(1) as u64;
    format!(
        "{replicas} replica{} × TP {tensor}{}{} on {hardware} = {gpus} GPU{}",
        plural(replicas),
        if pipeline > 1 {
            format!(" × PP {pipeline}")
        } else {
            String::new()
        },
        if expert > 1 {
            format!(" (EP {expert})")
        } else {
            String::new()
        },
        if gpus == 1 { "" } else { "s" }
    )
}

/// A layout error: the key path and what is wrong.
pub type Invalid = (String, String);

impl Parallelism {
    /// Tensor parallelism only.
    pub fn tensor(tp: u32) -> Parallelism {
        Parallelism {
            tensor: tp,
            pipeline: 1,
            expert: 1,
            attention_data: None,
            redundant_experts: 0,
        }
    }

    /// A layout of `tensor` GPUs per stage with attention split `atp` ways
    /// in `tensor / atp` DP groups and experts split `ep` ways (engines'
    /// tp_size, attention_dp_size, moe_tp_size and moe_ep_size, with
    /// tp × dp = moe_tp × ep = tensor).
    pub fn moe(tensor: u32, attention_dp: u32, expert: u32) -> Parallelism {
        Parallelism {
            tensor,
            pipeline: 1,
            expert,
            attention_data: Some(attention_dp),
            redundant_experts: 0,
        }
    }

    /// GPUs in one replica.
    pub fn gpus(&self) -> u32 {
        self.tensor * self.pipeline
    }

    /// `replicas` replicas of this layout on `hardware`, as every command
    /// names a fleet: see [`fleet_shape`].
    /// With `attention_data` given, the stage's two sides are named: "1
    /// replica × 32 GPUs (attention TP 1 × DP 32, MoE TP 1 × EP 32) on GB200
    /// = 32 GPUs".
    pub fn fleet_shape(&self, replicas: u32, hardware: &str) -> String {
        if self.attention_data.is_none() && self.redundant_experts == 0 {
            return fleet_shape(replicas, self.tensor, self.pipeline, self.expert, hardware);
        }
        let plural = |n: u64| if n == 1 { "" } else { "s" };
        let gpus = replicas as u64 * self.gpus() as u64;
        format!(
            "{replicas} replica{} × {} GPU{}{} (attention TP {} × DP {}, MoE TP {} × EP {}{}) on \
             {hardware} = {gpus} GPU{}",
            plural(replicas as u64),
            self.tensor,
            plural(self.tensor as u64),
            if self.pipeline > 1 {
                format!(" × PP {}", self.pipeline)
            } else {
                String::new()
            },
            self.attention_tp(),
            self.attention_dp(),
            self.moe_tp(),
            self.expert.max(1),
            if self.redundant_experts > 0 {
                format!(", {} redundant experts", self.redundant_experts)
            } else {
                String::new()
            },
            plural(gpus)
        )
    }

    /// GPUs that split one copy of the attention (and every other non-expert
    /// part): the stage over its attention DP groups (one EP group each
    /// without `attention_data`).
    pub fn attention_tp(&self) -> u32 {
        (self.tensor / self.attention_dp()).max(1)
    }

    /// Groups that serve disjoint shares of the batch with their own copy of
    /// the non-expert weights and their own KV cache (1 without DP attention).
    pub fn attention_dp(&self) -> u32 {
        self.attention_data.unwrap_or(self.expert).max(1)
    }

    /// GPUs one routed expert is split over (MoE TP): the stage over its EP ranks.
    pub fn moe_tp(&self) -> u32 {
        (self.tensor / self.expert.max(1)).max(1)
    }

    /// Routed-expert slots over the whole stage: the model's experts plus
    /// the redundant replicas EPLB places.
    pub fn expert_slots(&self, model: &ModelArch) -> u32 {
        model.num_experts + self.redundant_experts
    }

    /// `servesim check`'s line for a layout with `attention_data` given:
    /// both sides of an MoE layer and what joins them.
    pub fn describe_moe(&self, model: &ModelArch, gpus_per_node: u32) -> String {
        let ep = self.expert.max(1);
        let experts =
            if ep > 1 {
                let slots = self.expert_slots(model);
                format!(
                "{ep} EP ranks × MoE TP {}, {} expert slots each ({}{}); all-to-all dispatch + \
                 combine per MoE layer{}",
                self.moe_tp(),
                slots / ep,
                model.num_experts,
                if self.redundant_experts > 0 {
                    format!(" + {} redundant", self.redundant_experts)
                } else {
                    String::new()
                },
                if self.stage_spans_nodes(gpus_per_node) {
                    format!(", across {} nodes", self.tensor.div_ceil(gpus_per_node.max(1)))
                } else {
                    String::new()
                }
            )
            } else {
                format!(
                    "sliced over all {} GPUs (MoE TP {}); every group's tokens gathered before \
                 and scattered after",
                    self.tensor,
                    self.moe_tp()
                )
            };
        format!(
            "attention: {} DP group(s) of TP {}, each with its own KV cache; experts: {experts}",
            self.attention_dp(),
            self.attention_tp()
        )
    }

    /// Whether the stage's GPUs span more than one node (wide EP).
    pub fn stage_spans_nodes(&self, gpus_per_node: u32) -> bool {
        self.tensor > gpus_per_node.max(1)
    }

    /// Nodes one replica spans, with `gpus_per_node` GPUs each.
    pub fn nodes(&self, gpus_per_node: u32) -> u32 {
        self.gpus().div_ceil(gpus_per_node.max(1))
    }

    /// How many of the `pipeline − 1` stage-to-stage hops cross a node
    /// boundary. Stages occupy consecutive GPUs (stage s: GPUs s·TP ..
    /// (s+1)·TP − 1), tensor-parallel groups innermost, as vLLM and
    /// Megatron-LM place ranks.
    pub fn cross_node_hops(&self, gpus_per_node: u32) -> u32 {
        let g = gpus_per_node.max(1);
        let tp = self.tensor.max(1);
        (1..self.pipeline)
            .filter(|&s| {
                let first_next = s * tp;
                (first_next - 1) / g != first_next / g
            })
            .count() as u32
    }

    /// Checks the layout against the model and the hardware. Errors carry the
    /// `fleet.*` key they concern.
    pub fn validate(&self, model: &ModelArch, hw: &HardwareSpec) -> Result<(), Invalid> {
        let (tp, pp, ep) = (self.tensor, self.pipeline, self.expert);
        let g = hw.gpus_per_node;
        // A stage leaves its node over the scale-out network: TensorRT-LLM
        // and SGLang run tensor parallelism across nodes (TP 16 on two
        // 8-GPU nodes), its all-reduces hierarchical (`cost::comm`); with
        // DP attention only the all-to-all crosses the network.
        let wide = self.attention_data.is_some() && tp > g;
        if tp > g && hw.network_gbps.is_none() {
            return Err((
                "fleet.tensor_parallel".into(),
                format!(
                    "{tp} exceeds the {g} GPUs of one {} node (gpus_per_node), and the spec has \
                     no scale-out network for a tensor-parallel group across nodes; split the \
                     model further with fleet.pipeline_parallel, or give [hardware.spec] with \
                     network_gbps and network_latency_us",
                    hw.name
                ),
            ));
        }
        if pp > model.layers {
            return Err((
                "fleet.pipeline_parallel".into(),
                format!(
                    "{pp} stages exceed the {} layers of {}: each stage needs at least one layer",
                    model.layers, model.name
                ),
            ));
        }
        if self.gpus() > g {
            if tp <= g && g % tp != 0 {
                return Err((
                    "fleet.tensor_parallel".into(),
                    format!(
                        "a replica of {} GPUs spans nodes of {g}, so tensor_parallel must divide \
                         {g} (no tensor-parallel group may straddle two nodes); got {tp}",
                        self.gpus()
                    ),
                ));
            }
            if tp > g && tp % g != 0 {
                return Err((
                    "fleet.tensor_parallel".into(),
                    format!(
                        "a stage of {tp} GPUs spans nodes of {g}, so it must fill whole nodes: \
                         use a multiple of {g}"
                    ),
                ));
            }
            if hw.network_gbps.is_none() {
                return Err((
                    "fleet.pipeline_parallel".into(),
                    format!(
                        "a replica of {} GPUs (TP {tp} × PP {pp}) spans {} nodes of {g} {} GPUs, \
                         but the {} spec has no scale-out network; use at most {g} GPUs per \
                         replica or give [hardware.spec] with network_gbps and network_latency_us",
                        self.gpus(),
                        self.nodes(g),
                        hw.name,
                        hw.name
                    ),
                ));
            }
        }
        if let Some(dp) = self.attention_data {
            self.validate_attention_dp(dp, model, hw)?;
        }
        if self.redundant_experts > 0 && ep <= 1 {
            return Err((
                "fleet.num_redundant_experts".into(),
                format!(
                    "{} redundant experts need expert parallelism (fleet.expert_parallel > 1): \
                     EPLB replicates hot experts onto other EP ranks",
                    self.redundant_experts
                ),
            ));
        }
        if ep > 1 {
            if !model.is_moe() {
                return Err((
                    "fleet.expert_parallel".into(),
                    format!(
                        "{} is a dense model; expert parallelism needs a mixture-of-experts \
                         model (leave expert_parallel at 1)",
                        model.name
                    ),
                ));
            }
            if tp % ep != 0 {
                return Err((
                    "fleet.expert_parallel".into(),
                    format!(
                        "{ep} must divide tensor_parallel = {tp}: the expert-parallel groups \
                         partition each stage's GPUs"
                    ),
                ));
            }
            if self.redundant_experts > 0 {
                let slots = self.expert_slots(model);
                if slots % ep != 0 {
                    return Err((
                        "fleet.num_redundant_experts".into(),
                        format!(
                            "{} experts of {} plus {} redundant make {slots} slots, which do \
                             not split evenly over {ep} EP ranks; use a number that makes the \
                             sum a multiple of {ep}",
                            model.num_experts, model.name, self.redundant_experts
                        ),
                    ));
                }
            } else if model.num_experts % ep != 0 {
                return Err((
                    "fleet.expert_parallel".into(),
                    format!(
                        "the {} experts of {} cannot be split evenly over {ep} groups; use a \
                         divisor of {} that divides tensor_parallel = {tp}",
                        model.num_experts, model.name, model.num_experts
                    ),
                ));
            }
            if wide && self.moe_tp() > g {
                return Err((
                    "fleet.expert_parallel".into(),
                    format!(
                        "with {ep} EP ranks over {tp} GPUs each expert spans {} GPUs, more than \
                         one {g}-GPU node: use at least {} EP ranks",
                        self.moe_tp(),
                        tp.div_ceil(g)
                    ),
                ));
            }
            let atp = self.attention_tp();
            if self.attention_data.is_none()
                && model.mla().is_none()
                && model.num_kv_heads % atp != 0
                && atp % model.num_kv_heads != 0
            {
                return Err((
                    "fleet.expert_parallel".into(),
                    format!(
                        "with {ep} groups each group's attention spans {atp} GPUs, over which \
                         the {} KV heads of {} cannot be split or replicated",
                        model.num_kv_heads, model.name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The checks `fleet.attention_data_parallel` = `dp` adds.
    fn validate_attention_dp(
        &self,
        dp: u32,
        model: &ModelArch,
        hw: &HardwareSpec,
    ) -> Result<(), Invalid> {
        let key = "fleet.attention_data_parallel";
        let (tp, g) = (self.tensor, hw.gpus_per_node);
        if dp == 0 || tp % dp != 0 {
            return Err((
                key.into(),
                format!(
                    "{dp} must divide tensor_parallel = {tp} (the stage's GPUs): attention TP × \
                     attention DP = tensor_parallel"
                ),
            ));
        }
        if dp > 1 && !model.is_moe() {
            return Err((
                key.into(),
                format!(
                    "{} is a dense model: DP attention pays off beside expert parallelism; serve \
                     a dense model's data parallelism as more replicas (fleet.replicas)",
                    model.name
                ),
            ));
        }
        let atp = self.attention_tp();
        // An attention group across nodes all-reduces over the network
        // (`cost::comm::AcrossNodes`), which needs one.
        if atp > g && hw.network_gbps.is_none() {
            return Err((
                key.into(),
                format!(
                    "each of the {dp} attention groups spans {atp} GPUs, more than one {g}-GPU \
                     {} node: use at least {} groups",
                    hw.name,
                    tp.div_ceil(g)
                ),
            ));
        }
        if model.num_heads % atp != 0 {
            return Err((
                key.into(),
                format!(
                    "attention TP = {tp} / {dp} = {atp} does not divide the {} heads of {}",
                    model.num_heads, model.name
                ),
            ));
        }
        if model.mla().is_none() && model.num_kv_heads % atp != 0 && atp % model.num_kv_heads != 0 {
            return Err((
                key.into(),
                format!(
                    "attention TP = {atp}: the {} KV heads of {} cannot be split or replicated \
                     over it",
                    model.num_kv_heads, model.name
                ),
            ));
        }
        Ok(())
    }
}

/// Layers per pipeline stage, as vLLM's `get_pp_indices`
/// (`vllm/distributed/utils.py`) splits them: ⌊layers / stages⌋ each, and the
/// remainder one apiece to the stages just before the last (the last holds the
/// final norm and the LM head, the first the embedding), so 61 layers over 4
/// stages are 15, 15, 16, 15.
pub fn stage_layer_counts(layers: u32, stages: u32) -> Vec<u32> {
    let stages = stages.max(1);
    let mut counts = vec![layers / stages; stages as usize];
    let remainder = (layers % stages) as usize;
    let n = counts.len();
    for i in 2..remainder + 2 {
        counts[n - i] += 1;
    }
    counts
}

/// One pipeline stage: its layers and the non-layer parts it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Stage {
    /// Index of its first layer.
    pub first_layer: u32,
    pub layers: u32,
    /// Of those, layers with a dense MLP and with a mixture of experts.
    pub dense_layers: u32,
    pub moe_layers: u32,
    /// The first stage holds the token embedding.
    pub embedding: bool,
    /// The last stage holds the final norm and the LM head.
    pub lm_head: bool,
}

/// The stages of `model` over `pipeline` stages (one stage without pipelining).
pub fn stages(model: &ModelArch, pipeline: u32) -> Vec<Stage> {
    let counts = stage_layer_counts(model.layers, pipeline);
    let last = counts.len() - 1;
    let mut first = 0;
    counts
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let moe_layers = (first..first + n)
                .filter(|&l| model.is_moe_layer(l))
                .count() as u32;
            let s = Stage {
                first_layer: first,
                layers: n,
                dense_layers: n - moe_layers,
                moe_layers,
                embedding: i == 0,
                lm_head: i == last,
            };
            first += n;
            s
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;

    fn model(key: &str) -> ModelArch {
        catalog::model(key).unwrap().0
    }

    #[test]
    fn a_fleet_is_named_the_same_way_everywhere() {
        // `cost` at TP 2 (one replica) and `simulate` with 2 replicas of TP 2.
        assert_eq!(
            Parallelism::tensor(2).fleet_shape(1, "H200"),
            "1 replica × TP 2 on H200 = 2 GPUs"
        );
        assert_eq!(
            Parallelism::tensor(2).fleet_shape(2, "H200"),
            "2 replicas × TP 2 on H200 = 4 GPUs"
        );
        assert_eq!(
            fleet_shape(1, 1, 1, 1, "H100-SXM"),
            "1 replica × TP 1 on H100-SXM = 1 GPU"
        );
        assert_eq!(
            fleet_shape(3, 8, 2, 4, "H100-SXM"),
            "3 replicas × TP 8 × PP 2 (EP 4) on H100-SXM = 48 GPUs"
        );
    }

    #[test]
    fn uneven_layer_splits_follow_vllm() {
        assert_eq!(stage_layer_counts(80, 1), vec![80]);
        assert_eq!(stage_layer_counts(126, 2), vec![63, 63]);
        // vLLM logs "Hidden layers were unevenly partitioned: [31,30]" for 61 over 2.
        assert_eq!(stage_layer_counts(61, 2), vec![31, 30]);
        assert_eq!(stage_layer_counts(61, 4), vec![15, 15, 16, 15]);
        assert_eq!(stage_layer_counts(10, 4), vec![2, 3, 3, 2]);
        assert_eq!(stage_layer_counts(7, 4), vec![2, 2, 2, 1]);
        for (l, s) in [(61, 3), (126, 8), (5, 5), (80, 7)] {
            let c = stage_layer_counts(l, s);
            assert_eq!(c.iter().sum::<u32>(), l);
            assert!(c.iter().all(|&n| n >= l / s && n <= l / s + 1), "{c:?}");
        }
    }

    #[test]
    fn stages_know_their_dense_and_moe_layers() {
        let d = model("deepseek-v3");
        let st = stages(&d, 2);
        assert_eq!(st.len(), 2);
        assert_eq!(
            (st[0].layers, st[0].dense_layers, st[0].moe_layers),
            (31, 3, 28)
        );
        assert_eq!(
            (st[1].first_layer, st[1].dense_layers, st[1].moe_layers),
            (31, 0, 30)
        );
        assert!(st[0].embedding && !st[0].lm_head && st[1].lm_head);
        let one = stages(&model("llama-3.1-8b"), 1);
        assert_eq!(one.len(), 1);
        assert!(one[0].embedding && one[0].lm_head && one[0].moe_layers == 0);
    }

    #[test]
    fn hops_cross_nodes_only_at_node_boundaries() {
        let p = |tp, pp| Parallelism {
            tensor: tp,
            pipeline: pp,
            ..Parallelism::default()
        };
        assert_eq!(p(8, 2).cross_node_hops(8), 1);
        assert_eq!(p(4, 2).cross_node_hops(8), 0);
        assert_eq!(p(4, 4).cross_node_hops(8), 1);
        assert_eq!(p(2, 8).cross_node_hops(8), 1);
        assert_eq!(p(8, 4).cross_node_hops(8), 3);
        assert_eq!(p(8, 1).cross_node_hops(8), 0);
        assert_eq!(p(4, 4).nodes(8), 2);
    }

    #[test]
    fn layouts_that_cannot_work_are_refused_with_their_key() {
        let h100 = catalog::hardware("h100").unwrap();
        let l4 = catalog::hardware("l4").unwrap();
        let llama = model("llama-3.1-70b");
        let mix = model("mixtral-8x7b");
        let par = |tensor, pipeline, expert| Parallelism {
            tensor,
            pipeline,
            expert,
            ..Parallelism::default()
        };
        let key = |r: Result<(), Invalid>| r.unwrap_err().0;
        assert!(par(8, 2, 1).validate(&llama, &h100).is_ok());
        // TP 16 spans two 8-GPU nodes: over the scale-out network where
        // the spec has one (TensorRT-LLM, SGLang multi-node TP), refused
        // where it has none.
        assert!(par(16, 1, 1).validate(&llama, &h100).is_ok());
        assert_eq!(
            key(par(16, 1, 1).validate(&llama, &l4)),
            "fleet.tensor_parallel"
        );
        assert_eq!(
            key(par(1, 81, 1).validate(&llama, &h100)),
            "fleet.pipeline_parallel"
        );
        assert_eq!(
            key(par(8, 2, 1).validate(&llama, &l4)),
            "fleet.pipeline_parallel"
        );
        assert!(
            par(4, 2, 1).validate(&llama, &l4).is_ok(),
            "one node needs no network"
        );
        assert_eq!(
            key(par(8, 1, 2).validate(&llama, &h100)),
            "fleet.expert_parallel"
        );
        assert_eq!(
            key(par(4, 1, 8).validate(&mix, &h100)),
            "fleet.expert_parallel"
        );
        assert!(par(8, 1, 8).validate(&mix, &h100).is_ok());
        let e = par(6, 1, 6).validate(&mix, &h100).unwrap_err();
        assert!(e.1.contains("8 experts"), "{e:?}");
        let e = par(3, 4, 1).validate(&llama, &h100).unwrap_err();
        assert_eq!(e.0, "fleet.tensor_parallel", "{e:?}");
        let p = par(8, 1, 4);
        assert_eq!((p.attention_tp(), p.attention_dp(), p.gpus()), (2, 4, 8));
    }

    #[test]
    fn attention_dp_and_expert_parallel_are_separate_degrees() {
        let (h200, gb200) = (
            catalog::hardware("h200").unwrap(),
            catalog::hardware("gb200").unwrap(),
        );
        let ds = model("deepseek-v3");
        // aiconfigurator's columns: tp_size × attention_dp_size = moe_tp_size × moe_ep_size.
        let trt = Parallelism::moe(8, 1, 8);
        assert!(trt.validate(&ds, &h200).is_ok());
        assert_eq!(
            (
                trt.attention_tp(),
                trt.attention_dp(),
                trt.moe_tp(),
                trt.expert
            ),
            (8, 1, 1, 8)
        );
        let moe_tp = Parallelism::moe(8, 8, 1);
        assert!(moe_tp.validate(&ds, &h200).is_ok());
        assert_eq!((moe_tp.attention_tp(), moe_tp.moe_tp()), (1, 8));
        // Wide EP: DP 32 × EP 32 fits one NVL72 rack, or four H200 nodes
        // over the network; a GB200 rack takes a 72-GPU tensor-parallel group.
        let wide = Parallelism::moe(32, 32, 32);
        assert!(wide.validate(&ds, &gb200).is_ok());
        assert!(wide.validate(&ds, &h200).is_ok());
        assert!(!wide.stage_spans_nodes(72) && wide.stage_spans_nodes(8));
        assert!(Parallelism::tensor(72).validate(&ds, &gb200).is_ok());
        assert_eq!(
            wide.fleet_shape(2, "GB200"),
            "2 replicas × 32 GPUs (attention TP 1 × DP 32, MoE TP 1 × EP 32) on GB200 = 64 GPUs"
        );
        // Legacy: EP alone means DP attention over the EP groups.
        let legacy = Parallelism {
            tensor: 8,
            expert: 4,
            ..Parallelism::default()
        };
        assert_eq!((legacy.attention_tp(), legacy.attention_dp()), (2, 4));
        assert_eq!(
            legacy.fleet_shape(1, "H200"),
            "1 replica × TP 8 (EP 4) on H200 = 8 GPUs"
        );
    }

    #[test]
    fn impossible_moe_layouts_name_their_key() {
        let h200 = catalog::hardware("h200").unwrap();
        let l4 = catalog::hardware("l4").unwrap();
        let ds = model("deepseek-v3");
        let llama = model("llama-3.1-70b");
        let key = |p: Parallelism, m: &ModelArch, h: &HardwareSpec| p.validate(m, h).unwrap_err().0;
        let with_redundant = |mut p: Parallelism, r| {
            p.redundant_experts = r;
            p
        };
        let cases: [(Parallelism, &ModelArch, &HardwareSpec, &str); 9] = [
            // DP must divide the stage's GPUs.
            (
                Parallelism::moe(8, 3, 8),
                &ds,
                &h200,
                "fleet.attention_data_parallel",
            ),
            // DP attention on a dense model.
            (
                Parallelism::moe(8, 8, 1),
                &llama,
                &h200,
                "fleet.attention_data_parallel",
            ),
            // A stage of 32 GPUs leaves the node of a chip without a
            // scale-out network.
            (
                Parallelism::moe(32, 2, 32),
                &ds,
                &l4,
                "fleet.tensor_parallel",
            ),
            // Each expert sliced over 16 GPUs leaves the node.
            (
                Parallelism::moe(32, 32, 2),
                &ds,
                &h200,
                "fleet.expert_parallel",
            ),
            // A stage across nodes fills whole nodes.
            (
                Parallelism::moe(12, 12, 4),
                &ds,
                &h200,
                "fleet.tensor_parallel",
            ),
            // No scale-out network on L4 servers: neither wide EP nor TP
            // leaves the node.
            (
                Parallelism::moe(16, 16, 16),
                &ds,
                &l4,
                "fleet.tensor_parallel",
            ),
            (Parallelism::tensor(16), &ds, &l4, "fleet.tensor_parallel"),
            // Redundant experts need EP, and slots that split evenly.
            (
                with_redundant(Parallelism::moe(8, 8, 1), 8),
                &ds,
                &h200,
                "fleet.num_redundant_experts",
            ),
            (
                with_redundant(Parallelism::moe(32, 32, 32), 3),
                &ds,
                &h200,
                "fleet.num_redundant_experts",
            ),
        ];
        for (p, m, h, want) in cases {
            assert_eq!(key(p, m, h), want, "{p:?}");
        }
        // TP 16 across two H200 nodes, all-reduces over the network.
        assert!(Parallelism::tensor(16).validate(&ds, &h200).is_ok());
        let ok = with_redundant(Parallelism::moe(32, 32, 32), 32);
        assert!(ok.validate(&ds, &h200).is_ok());
        assert_eq!(ok.expert_slots(&ds), 288);
    }
}
