//! The analytical roofline cost model over catalog figures.

use super::comm::{AllReduce, CommChoice, LayerComm};
use super::elementwise;
use super::gemm::{
    activation_quant_s, compute_efficiency, tile_rows, GemmTime, GEMMS_PER_LAYER, GEMM_EFFICIENCY,
    GEMM_KERNEL_FLOOR_S, MEMORY_EFFICIENCY, MOE_EXPERT_COMPUTE_SCALE, MOE_EXPERT_MEMORY_EFFICIENCY,
};
use super::memo::{Term, TokenMemo};
use super::runtime::{EngineRuntime, HostTime, LaunchPerLayer};
use super::{BatchShape, CostModel, ATTENTION_EFFICIENCY, SEND_RECV_BW_EFFICIENCY};
use crate::catalog::{Dtype, HardwareSpec, ModelArch};
use crate::memory::ACTIVATION_BYTES;
use crate::parallel::{self, Parallelism};
use crate::time::Nanos;

mod kinds;
mod step;
pub use kinds::KindMix;
pub use step::StepTerms;

/// The analytical roofline cost model over catalog figures. Everything that
/// depends only on the model, the hardware and the layout is computed once in
/// [`Roofline::with_parallelism`]; [`Roofline::iteration_secs`] does a few
/// dozen float operations and allocates nothing.
///
/// - **Quantization.** Linear layers stream `weight_dtype` bytes (int4 with
///   its group scales) and multiply at that dtype's peak where the chip has
///   units for it (FP8 on H100/H200/B200/L40S/L4/MI300X, INT8 nearly
///   everywhere); weight-only formats dequantize to BF16 first (Marlin/AWQ
///   kernels), so int4 — and fp8 on A100 — compute at the BF16 rate. The
///   LM head stays in BF16 as in quantized checkpoints. The KV dtype sets the
///   bytes attention reads; attention itself computes in BF16.
/// - **Tensor parallelism** (Megatron-LM): weights and heads split over the
///   group; two ring all-reduces per layer of N·hidden·2 bytes, each
///   2(TP−1)/TP of it over the link plus the link latency.
/// - **Mixture of experts** (GShard; Mixtral; DeepSeekMoE): an MoE layer runs
///   attention, the router, the shared experts and each token's k routed
///   experts, so compute scales with active parameters. Its weight reads
///   scale with the experts a batch touches: with B tokens routed top-k
///   uniformly over E experts, an expert is missed by all of them with
///   probability (1 − k/E)^B, so E·(1 − (1 − k/E)^B) distinct experts are
///   read; memory-bound small batches read only those.
/// - **Latent attention** (DeepSeek-V2 MLA): attention FLOPs per query–key
///   pair and KV bytes per token come from the model
///   ([`ModelArch::attention_flops_per_pair`], [`ModelArch::kv_elems_per_token_layer`]);
///   the latent is whole on every GPU of a group.
/// - **Expert parallelism** (GShard, DeepSpeed-MoE; see `parallel`): EP groups
///   each run their share of the batch through attention, dense MLPs and
///   shared experts; routed experts see every group's tokens. Per MoE layer,
///   a dispatch and a combine all-to-all each move a GPU's tokens × k ×
///   hidden × 2 bytes, (EP−1)/EP of them to other groups, plus the latency.
/// - **Layer kinds**: sliding-window, chunked-local, linear-attention and
///   sparse (DSA) layers price their attention as `kinds` describes
///   ([`KindMix`]); models of plain full-attention layers only use the
///   terms below unchanged.
/// - **FP4 weights** (NVFP4, MXFP4) stream their block scales with them and
///   multiply at the chip's FP4 rate where it has FP4 units, at BF16 where
///   it does not (weight-only kernels). Checkpoints that keep attention
///   unquantized (gpt-oss) stream its weights at the activation dtype.
/// - **Pipeline parallelism**: see [`Roofline::iteration_secs`].
#[derive(Clone, Debug)]
pub struct Roofline {
    pub(super) hw_name: String,
    pub(super) hw_source: String,
    pub(super) hidden: f64,
    /// Pipeline stages S.
    pub(super) stages: f64,
    /// One stage and one expert-parallel group: no micro-batching to price.
    pub(super) single_group: bool,
    /// Expert-parallel (attention data-parallel) groups, and GPUs per group.
    pub(super) dp: f64,
    pub(super) tp: f64,
    /// Dense-MLP and MoE layers over all stages.
    pub(super) dense_layers: f64,
    pub(super) moe_layers: f64,
    /// Distinct stage shapes: (dense layers, MoE layers, holds the LM head).
    pub(super) stage_shapes: Vec<(f64, f64, bool)>,
    /// Matrix parameters of one dense layer on one GPU.
    pub(super) layer_params: f64,
    /// Per GPU, one MoE layer: attention + shared experts; the router; one
    /// routed expert's share.
    pub(super) moe_fixed_params: f64,
    pub(super) router_params: f64,
    pub(super) expert_params: f64,
    pub(super) experts: f64,
    pub(super) experts_per_token: f64,
    /// ln(1 − k/E): an expert is missed by B tokens with probability exp(B·this).
    pub(super) ln_expert_miss: f64,
    pub(super) weight_bytes_per_param: f64,
    pub(super) unquantized_bytes_per_param: f64,
    /// LM head parameters on one GPU.
    pub(super) lm_head_params: f64,
    /// Attention FLOPs per query–key pair per layer per GPU, by phase.
    pub(super) attn_prefill_flops_per_pair: f64,
    pub(super) attn_decode_flops_per_pair: f64,
    /// KV bytes per token per layer per GPU.
    pub(super) kv_bytes_per_token_layer: f64,
    /// Element-wise bytes per token per layer on one GPU.
    pub(super) ew_bytes_per_token: f64,
    pub(super) allreduce: AllReduce,
    /// The layer's collectives under the layout (MoE layers; see `comm`).
    pub(super) layer_comm: LayerComm,
    /// Busiest over mean EP rank's routed tokens (`parallel::eplb`).
    pub(super) expert_load: f64,
    pub(super) runtime: EngineRuntime,
    /// Launch time per layer of a step the runtime runs without graphs.
    pub(super) launch_per_layer: LaunchPerLayer,
    /// GPUs of one tensor-parallel group (the host's Ray fan-out).
    pub(super) tp_gpus: u32,
    pub(super) gemm_flops: f64,
    pub(super) lm_head_flops: f64,
    pub(super) attn_flops: f64,
    pub(super) mem_bw: f64,
    /// Host link bandwidth (KV swapping), bytes/s.
    pub(super) pcie_bw: f64,
    /// Σ over the S−1 stage hops of 1 / bandwidth, and of latency.
    pub(super) hop_secs_per_byte: f64,
    pub(super) hop_latency_s: f64,
    /// Batch-size terms by token count (one group, one stage; see `memo`).
    pub(super) memo: TokenMemo,
    /// Attention by layer kind (`None`: every layer plain full attention).
    pub(super) kinds: Option<KindMix>,
    /// Extra bytes per layer per GPU of attention weights a checkpoint keeps
    /// unquantized (0 otherwise).
    pub(super) attention_extra_bytes: f64,
    /// Activation-quantization time per low-precision GEMM (0 otherwise).
    pub(super) quant_floor_s: f64,
    /// Attention-projection parameters per GPU a checkpoint keeps
    /// unquantized (gpt-oss's `modules_to_not_convert: self_attn`; 0
    /// otherwise): they multiply at [`Self::unquantized_flops`] and their
    /// two GEMMs (QKV, output) quantize no activations.
    pub(super) unquantized_attention_params: f64,
    /// The GEMM rate of the unquantized dtype (the router, and attention
    /// kept unquantized), FLOP/s.
    pub(super) unquantized_flops: f64,
}

impl Roofline {
    /// A replica of `tensor_parallel` GPUs (one stage, no expert parallelism).
    pub fn new(
        model: &ModelArch,
        hw: &HardwareSpec,
        weight_dtype: Dtype,
        kv_dtype: Dtype,
        tensor_parallel: u32,
    ) -> Roofline {
        Self::with_parallelism(
            model,
            hw,
            weight_dtype,
            kv_dtype,
            &Parallelism::tensor(tensor_parallel),
        )
    }

    /// The same replica under another engine runtime's host overhead.
    pub fn with_runtime(mut self, runtime: EngineRuntime) -> Roofline {
        self.runtime = runtime;
        self.launch_per_layer = runtime.launch_per_layer();
        self
    }

    /// The same replica with its ungraphed steps' launch time per layer set
    /// (`[engine] eager_launch_s_per_layer`), or the runtime's own for `None`.
    pub fn with_launch_per_layer(mut self, per_layer: Option<LaunchPerLayer>) -> Roofline {
        self.launch_per_layer = per_layer.unwrap_or(self.runtime.launch_per_layer());
        self
    }

    pub fn runtime(&self) -> EngineRuntime {
        self.runtime
    }

    /// The same replica with the engine's collective implementations
    /// (custom all-reduce, DeepEP) for layout `par` on `hw` (see `comm`).
    pub fn with_collectives(
        mut self,
        hw: &HardwareSpec,
        par: &Parallelism,
        choice: CommChoice,
    ) -> Roofline {
        self.allreduce = AllReduce::new(hw, par.attention_tp()).with_kind(hw, choice.all_reduce);
        self.layer_comm = LayerComm::new(
            hw,
            par,
            self.hidden as u32,
            self.experts_per_token as u32,
            choice,
        );
        self
    }

    /// The same replica with its busiest EP rank carrying `ratio` × the
    /// mean rank's routed tokens (`parallel::eplb::load_ratio`).
    pub fn with_expert_load(mut self, ratio: f64) -> Roofline {
        self.expert_load = ratio;
        self
    }

    /// A replica laid out as `par` (validated by [`Parallelism::validate`]).
    pub fn with_parallelism(
        model: &ModelArch,
        hw: &HardwareSpec,
        weight_dtype: Dtype,
        kv_dtype: Dtype,
        par: &Parallelism,
    ) -> Roofline {
        let atp = par.attention_tp();
        let tp = atp as f64;
        let stages = parallel::stages(model, par.pipeline);
        let mut stage_shapes: Vec<(f64, f64, bool)> = Vec::new();
        for st in &stages {
            let shape = (st.dense_layers as f64, st.moe_layers as f64, st.lm_head);
            if !stage_shapes.contains(&shape) {
                stage_shapes.push(shape);
            }
        }
        let cross = par.cross_node_hops(hw.gpus_per_node) as f64;
        let intra = par.pipeline.saturating_sub(1) as f64 - cross;
        let nvlink_bw = hw.interconnect_bytes_per_s() * SEND_RECV_BW_EFFICIENCY;
        let (net_bw, net_latency) = match (hw.network_gbps, hw.network_latency_us) {
            (Some(bw), Some(lat)) => (bw * 1e9 * SEND_RECV_BW_EFFICIENCY, lat * 1e-6),
            // Validation refuses cross-node replicas without a network.
            _ => (nvlink_bw, hw.interconnect_latency_us * 1e-6),
        };
        let hop_secs_per_byte = intra / nvlink_bw + if cross > 0.0 { cross / net_bw } else { 0.0 };
        let hop_latency_s = intra * hw.interconnect_latency_us * 1e-6 + cross * net_latency;

        let (experts, k) = (model.num_experts as f64, model.experts_per_token as f64);
        // Whether the chip multiplies the weight dtype on units of its own.
        let native = match weight_dtype {
            Dtype::Fp8 | Dtype::Fp8Block => hw.fp8_tflops.is_some(),
            Dtype::Nvfp4 | Dtype::Mxfp4 => hw.fp4_tflops.is_some(),
            _ => true,
        };
        let unquantized = weight_dtype.unquantized_part();
        Roofline {
            hw_name: hw.name.clone(),
            hw_source: hw.source.clone(),
            hidden: model.hidden_size as f64,
            stages: par.pipeline as f64,
            single_group: par.pipeline == 1 && par.attention_dp() == 1,
            dp: par.attention_dp() as f64,
            tp,
            dense_layers: model.dense_layers() as f64,
            moe_layers: model.moe_layers() as f64,
            stage_shapes,
            layer_params: model.dense_layer_params_per_gpu(atp),
            moe_fixed_params: model.attention_params_per_gpu(atp)
                + model.num_shared_experts as f64 * model.expert_params() / tp,
            router_params: model.router_params(),
            expert_params: model.expert_params() / par.tensor.max(1) as f64,
            experts,
            experts_per_token: k,
            ln_expert_miss: if experts > 0.0 {
                (1.0 - k / experts).ln()
            } else {
                0.0
            },
            weight_bytes_per_param: weight_dtype.weight_bytes(),
            unquantized_bytes_per_param: unquantized.bytes(),
            lm_head_params: model.vocab_size as f64 * model.hidden_size as f64 / tp,
            attn_prefill_flops_per_pair: model.attention_flops_per_pair(false) / tp,
            attn_decode_flops_per_pair: model.attention_flops_per_pair(true) / tp,
            kv_bytes_per_token_layer: model.kv_elems_per_token_layer(atp) * kv_dtype.bytes(),
            ew_bytes_per_token: elementwise::bytes_per_token_layer(model, atp),
            allreduce: AllReduce::new(hw, atp),
            layer_comm: LayerComm::new(
                hw,
                par,
                model.hidden_size,
                model.experts_per_token,
                CommChoice::default(),
            ),
            expert_load: 1.0,
            runtime: EngineRuntime::default(),
            launch_per_layer: EngineRuntime::default().launch_per_layer(),
            tp_gpus: par.tensor.max(1),
            gemm_flops: hw.peak_flops(weight_dtype) * compute_efficiency(weight_dtype, native),
            lm_head_flops: hw.peak_flops(unquantized) * GEMM_EFFICIENCY,
            attn_flops: hw.peak_flops(Dtype::Bf16) * ATTENTION_EFFICIENCY,
            mem_bw: hw.memory_bw_bytes_per_s(),
            pcie_bw: hw.pcie_gbps * 1e9,
            hop_secs_per_byte,
            hop_latency_s,
            memo: TokenMemo::default(),
            kinds: KindMix::new(model, hw, atp),
            quant_floor_s: activation_quant_s(weight_dtype, native),
            unquantized_attention_params: if model.attention_unquantized {
                model.attention_params_per_gpu(atp)
            } else {
                0.0
            },
            unquantized_flops: hw.peak_flops(unquantized) * GEMM_EFFICIENCY,
            attention_extra_bytes: if model.attention_unquantized {
                model.attention_params_per_gpu(atp)
                    * (unquantized.bytes() - weight_dtype.weight_bytes())
            } else {
                0.0
            },
        }
    }

    /// Dense-layer matrices (attention projections + MLP) for `tokens`
    /// tokens on one GPU: compute, memory and kernel-floor parts.
    #[inline]
    pub(super) fn dense_gemm(&self, tokens: f64) -> GemmTime {
        let unq = self.unquantized_attention_params;
        GemmTime {
            compute: 2.0 * tile_rows(tokens) * (self.layer_params - unq) / self.gemm_flops
                + 2.0 * tile_rows(tokens) * unq / self.unquantized_flops,
            memory: (self.layer_params * self.weight_bytes_per_param
                + self.attention_extra_bytes
                + tokens * self.hidden * ACTIVATION_BYTES * 4.0)
                / (self.mem_bw * MEMORY_EFFICIENCY),
            floor: GEMMS_PER_LAYER * GEMM_KERNEL_FLOOR_S
                + (GEMMS_PER_LAYER - self.unquantized_attention_gemms()) * self.quant_floor_s,
        }
    }

    /// GEMMs of a layer's attention (QKV, output) that run unquantized.
    #[inline]
    fn unquantized_attention_gemms(&self) -> f64 {
        if self.unquantized_attention_params > 0.0 {
            2.0
        } else {
            0.0
        }
    }

    #[inline]
    fn dense(&self, tokens: f64) -> f64 {
        self.dense_gemm(tokens).secs()
    }

    /// One layer's element-wise kernels for `tokens` tokens, seconds.
    #[inline]
    pub(super) fn elementwise(&self, tokens: f64) -> f64 {
        elementwise::layer_secs(self.ew_bytes_per_token, self.mem_bw, tokens)
    }

    /// Expected distinct experts `tokens` top-k-routed tokens touch.
    #[inline]
    fn experts_touched(&self, tokens: f64) -> f64 {
        self.experts * (1.0 - (tokens * self.ln_expert_miss).exp())
    }

    /// MoE-layer matrices on one GPU: attention, shared experts and router for
    /// the group's `tokens`; routed experts for `routed` tokens (every group's),
    /// reading only the experts they touch. Seconds.
    pub(super) fn moe_gemm(&self, tokens: f64, routed: f64) -> GemmTime {
        let expert_copies = routed * self.experts_per_token * self.expert_load;
        // Attention, shared experts and router run as ordinary GEMMs of the
        // group's rows, padded to tiles; the routed experts' grouped GEMMs
        // spread their rows over many experts' tiles, which we leave unpadded
        // (no per-expert row counts are modelled).
        // The router (and attention a checkpoint keeps unquantized) runs
        // in the unquantized dtype; the rest at the weight dtype's rate.
        let unq = self.unquantized_attention_params;
        let flops = 2.0 * tile_rows(tokens) * (self.moe_fixed_params - unq);
        let unquantized_flops = 2.0 * tile_rows(tokens) * (unq + self.router_params);
        let expert_flops = 2.0 * expert_copies * self.expert_params;
        let bytes = self.moe_fixed_params * self.weight_bytes_per_param
            + self.router_params * self.unquantized_bytes_per_param
            + self.attention_extra_bytes
            + tokens * self.hidden * ACTIVATION_BYTES * 4.0;
        let expert_bytes =
            self.experts_touched(routed) * self.expert_params * self.weight_bytes_per_param;
        GemmTime {
            // The routed experts' grouped GEMMs (fused MoE kernels) reach
            // less of the roofs than plain GEMMs (`gemm::MOE_EXPERT_*`).
            compute: flops / self.gemm_flops
                + unquantized_flops / self.unquantized_flops
                + expert_flops / (self.gemm_flops * MOE_EXPERT_COMPUTE_SCALE),
            memory: bytes / (self.mem_bw * MEMORY_EFFICIENCY)
                + expert_bytes / (self.mem_bw * MOE_EXPERT_MEMORY_EFFICIENCY),
            // Router, attention and expert grouped GEMMs: the dense layer's
            // count and one; the router (and attention kept unquantized)
            // quantizes no activations.
            floor: (GEMMS_PER_LAYER + 1.0) * GEMM_KERNEL_FLOOR_S
                + (GEMMS_PER_LAYER - self.unquantized_attention_gemms()) * self.quant_floor_s,
        }
    }

    #[inline]
    fn moe(&self, tokens: f64, routed: f64) -> f64 {
        self.moe_gemm(tokens, routed).secs()
    }

    pub(super) fn attn_prefill(&self, b: &BatchShape) -> f64 {
        if b.prefill_kv_tokens == 0 {
            return 0.0;
        }
        if let Some(mix) = &self.kinds {
            let plain = kinds::Plain {
                flops_per_pair: self.attn_prefill_flops_per_pair,
                kv_bytes_per_token: self.kv_bytes_per_token_layer,
                flops: self.attn_flops,
                bw: self.mem_bw * MEMORY_EFFICIENCY,
            };
            return mix.prefill_secs(&plain, b);
        }
        let flops = self.attn_prefill_flops_per_pair * b.prefill_attn_pairs;
        let bytes = b.prefill_kv_tokens as f64 * self.kv_bytes_per_token_layer;
        (flops / self.attn_flops).max(bytes / (self.mem_bw * MEMORY_EFFICIENCY))
    }

    pub(super) fn attn_decode(&self, b: &BatchShape) -> f64 {
        self.attn_decode_share(b, 1.0)
    }

    /// Decode attention of one of `share` equal parts of the batch (attention
    /// groups × micro-batches), per layer: the work splits, and every part
    /// pays the kernel's floor.
    pub(super) fn attn_decode_share(&self, b: &BatchShape, share: f64) -> f64 {
        if b.decode_seqs == 0 {
            return 0.0;
        }
        let attn = self.decode_attention();
        if share == 1.0 {
            return attn.secs(b.decode_context_tokens, b.decode_seqs);
        }
        super::DECODE_ATTENTION_FLOOR_S
            + attn.work_secs(b.decode_context_tokens, b.decode_seqs) / share
    }

    /// One all-reduce of `tokens` hidden states over the group
    /// (Megatron-style tensor parallelism, Shoeybi et al. 2019; see `comm`).
    #[inline]
    fn allreduce(&self, tokens: f64) -> f64 {
        self.allreduce.secs(tokens * self.hidden * ACTIVATION_BYTES)
    }

    /// A dense layer's communication: all-reduces after attention and after the MLP.
    pub(super) fn comm(&self, tokens: f64) -> f64 {
        if self.tp <= 1.0 {
            return 0.0;
        }
        2.0 * self.allreduce(tokens)
    }

    /// An MoE layer's communication (see `comm::LayerComm::moe`); DeepEP's
    /// `auto` mode picks its kernels by `decode_only`.
    pub(super) fn moe_comm(&self, tokens: f64, decode_only: bool) -> f64 {
        self.layer_comm.moe(tokens, decode_only)
    }

    pub(super) fn lm_head_gemm(&self, sampled: f64) -> GemmTime {
        GemmTime {
            compute: 2.0 * tile_rows(sampled) * self.lm_head_params / self.lm_head_flops,
            memory: self.lm_head_params * self.unquantized_bytes_per_param
                / (self.mem_bw * MEMORY_EFFICIENCY),
            floor: GEMM_KERNEL_FLOOR_S,
        }
    }

    #[inline]
    fn lm_head(&self, sampled: f64) -> f64 {
        self.lm_head_gemm(sampled).secs()
    }

    /// Copying `tokens` token slots of KV blocks within device memory
    /// (copy-on-write, `replica::fork`): vLLM's `copy_blocks` kernel reads
    /// and writes every layer's K and V of each block, memory-bound at the
    /// rate dense weight reads reach. Each stage of a pipeline copies its
    /// own layers at the same time. Seconds.
    pub(super) fn block_copy_secs(&self, tokens: u64) -> f64 {
        let layers = (self.dense_layers + self.moe_layers) / self.stages.max(1.0);
        let layers = match &self.kinds {
            // Only the full layers' blocks are per token.
            Some(mix) => layers * mix.full_share(),
            None => layers,
        };
        let bytes = 2.0 * tokens as f64 * self.kv_bytes_per_token_layer * layers;
        bytes / (self.mem_bw * MEMORY_EFFICIENCY)
    }

    /// Micro-batches the pipeline runs the batch as: one per virtual engine
    /// with work, at most one per stage (see [`Roofline::iteration_secs`]).
    pub fn micro_batches(&self, b: &BatchShape) -> u32 {
        let seqs = (b.seqs() as f64).max(1.0);
        let per_group = seqs / self.dp.min(seqs);
        self.stages.min(per_group.ceil()) as u32
    }

    /// The iteration time in seconds (before rounding to the clock).
    ///
    /// **Pipeline parallelism.** vLLM keeps S batches in flight for S stages
    /// (`max_concurrent_batches` = pipeline_parallel_size in vLLM V1's
    /// `EngineCore` batch queue; S "virtual engines" in V0), so we run the
    /// replica's batch as m = min(S, seqs) micro-batches of 1/m of its work.
    /// A micro-batch passes every stage and S − 1 send/recv hops of
    /// N/m · hidden · 2 bytes (over NVLink within a node, the network
    /// between nodes, each with its latency); it must come back to be
    /// scheduled again, so each sequence advances one token per round trip
    ///
    /// ```text
    /// T = max( Σ_stages t_stage(N/m) + Σ_hops t_hop,   m · max_stage t_stage(N/m) )
    /// ```
    ///
    /// (the second term: the slowest stage must run all m micro-batches).
    /// GPipe's synchronous schedule, (m + S − 1) · t_stage per batch, pays the
    /// fill-and-drain bubble of S − 1 stage times on every iteration; with
    /// virtual engines the next round's micro-batch j enters stage 0 as soon
    /// as its previous round left the last stage, so the bubble appears only
    /// when fewer than S micro-batches exist (m < S: stages idle (S − m)/S of
    /// the time). At m = 1 both give S · t_stage. Decode weight reads repeat
    /// per micro-batch, so PP raises throughput per GPU, not per-token speed.
    #[inline]
    pub fn iteration_secs(&self, b: &BatchShape) -> f64 {
        self.runtime.wall_secs(self.forward_secs(b), self.host(b))
    }

    /// The engine's host time for this batch (see `runtime`).
    #[inline]
    pub fn host(&self, b: &BatchShape) -> HostTime {
        let per_stage = self.stages.max(1.0);
        let layers = (self.dense_layers / per_stage, self.moe_layers / per_stage);
        self.runtime.host_for(
            b.seqs(),
            b.tokens(),
            b.prefill_tokens > 0,
            layers,
            self.launch_per_layer,
            self.tp_gpus,
        )
    }

    /// One forward pass on the GPU without the engine's host time (a draft
    /// model's steps run inside the target's engine step), plus the PCIe
    /// time of KV swapped in or out, seconds.
    pub fn forward_secs(&self, b: &BatchShape) -> f64 {
        let mut fixed = b.swap_bytes / self.pcie_bw;
        if b.copy_kv_tokens > 0 {
            fixed += self.block_copy_secs(b.copy_kv_tokens);
        }
        let logit_rows = b.logit_rows() as f64;
        if self.single_group {
            // One stage, one group: the whole batch is one micro-batch. The
            // matrices' terms depend on the token count alone: memoized.
            let tokens = b.tokens();
            let n = tokens as f64;
            let attn_prefill = self.attn_prefill(b);
            let attn_decode = self.attn_decode(b);
            let shared = self.elementwise(n) + attn_prefill + attn_decode;
            let dense = self.memo.get(Term::Dense, tokens, || self.dense(n));
            let per_dense = dense + shared + self.comm(n);
            let mut layers = self.dense_layers * per_dense;
            if self.moe_layers > 0.0 {
                let moe = self.memo.get(Term::Moe, tokens, || self.moe(n, n));
                let per_moe = moe + shared + self.moe_comm(n, b.prefill_tokens == 0);
                layers += self.moe_layers * per_moe;
            }
            let lm_head = self
                .memo
                .get(Term::LmHead, b.logit_rows(), || self.lm_head(logit_rows));
            return fixed + layers + lm_head;
        }
        let seqs = (b.seqs() as f64).max(1.0);
        // Groups with work, micro-batches per group, and their product: the
        // batch's share one group's micro-batch carries.
        let dp = self.dp.min(seqs);
        let m = self.stages.min((seqs / dp).ceil());
        let share = dp * m;
        let n = b.tokens() as f64 / share;
        let attn_prefill = self.attn_prefill(b) / share;
        let attn_decode = self.attn_decode_share(b, share);
        let shared = self.elementwise(n) + attn_prefill + attn_decode;
        let per_dense = self.dense(n) + shared + self.comm(n);
        let per_moe = if self.moe_layers > 0.0 {
            self.moe(n, n * dp) + shared + self.moe_comm(n, b.prefill_tokens == 0)
        } else {
            0.0
        };
        let lm_head = self.lm_head(logit_rows.max(1.0) / share);
        let mut layers = self.dense_layers * per_dense;
        if self.moe_layers > 0.0 {
            layers += self.moe_layers * per_moe;
        }
        if self.stages <= 1.0 {
            return fixed + layers + lm_head;
        }
        let round_trip = layers
            + lm_head
            + n * self.hidden * ACTIVATION_BYTES * self.hop_secs_per_byte
            + self.hop_latency_s;
        let slowest = self
            .stage_shapes
            .iter()
            .map(|&(d, e, last)| d * per_dense + e * per_moe + if last { lm_head } else { 0.0 })
            .fold(0.0, f64::max);
        fixed + round_trip.max(m * slowest)
    }
}

impl CostModel for Roofline {
    fn iteration_time(&self, b: &BatchShape) -> Nanos {
        if b.is_empty() {
            return 0;
        }
        crate::time::secs_to_nanos(self.iteration_secs(b)).max(1)
    }

    fn explain(&self, b: &BatchShape) -> Option<super::Breakdown> {
        Some(self.breakdown(b))
    }

    fn iteration_time_with(&self, b: &BatchShape, terms: &mut StepTerms) -> Nanos {
        Roofline::iteration_time_with(self, b, terms)
    }

    fn source(&self) -> String {
        format!(
            "roofline over the {} spec ({} runtime): {}",
            self.hw_name,
            self.runtime.name(),
            self.hw_source
        )
    }
}

#[cfg(test)]
mod tests;
