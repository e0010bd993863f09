//! `[engine]`: one replica's serving engine settings, named after vLLM's
//! engine arguments, with their defaults.

use super::yes;
use serde::{Deserialize, Serialize};

/// Per-replica serving engine settings (names follow vLLM's engine arguments).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineCfg {
    /// vLLM `max_num_seqs`: sequences in one iteration's batch.
    #[serde(default = "default_max_num_seqs")]
    pub max_num_seqs: u32,
    /// vLLM `max_num_batched_tokens`: tokens processed in one iteration.
    #[serde(default = "default_max_batched_tokens")]
    pub max_batched_tokens: u32,
    /// Tokens per KV block (vLLM `block_size`).
    #[serde(default = "default_block_size")]
    pub block_size: u32,
    /// Fraction of device memory the engine may use (vLLM `gpu_memory_utilization`).
    #[serde(default = "default_gpu_mem_util")]
    pub gpu_memory_utilization: f64,
    /// Longest prompt + output accepted; defaults to the model's context length.
    #[serde(default)]
    pub max_model_len: Option<u32>,
    /// How each iteration's batch is formed (see `replica::policy`).
    #[serde(default)]
    pub policy: BatchPolicyKind,
    /// What happens to a sequence evicted for lack of KV blocks.
    #[serde(default)]
    pub preemption: PreemptionMode,
    /// Host memory per GPU for swapped-out KV blocks, GiB (vLLM `swap_space`, default 4).
    #[serde(default = "default_swap_space_gib")]
    pub swap_space_gib: f64,
    /// Speculative decoding, off when absent.
    #[serde(default)]
    pub speculative: Option<SpeculativeCfg>,
    /// Keep and reuse KV blocks of shared prompt prefixes (`kv::prefix_cache`).
    #[serde(default)]
    pub prefix_caching: bool,
    /// Blocks per replica that pinnable prefixes (system prompts) may keep
    /// resident against eviction.
    #[serde(default)]
    pub pinned_prefix_blocks: u64,
    /// Whose host overhead the roofline adds per step (`cost::runtime`).
    #[serde(default)]
    pub runtime: EngineRuntime,
    /// Tensor-parallel all-reduce implementation (`cost::comm`); when
    /// absent, the runtime's own (`EngineRuntime::all_reduce`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_reduce: Option<AllReduceKind>,
    /// MoE dispatch/combine implementation with expert parallelism.
    #[serde(default, skip_serializing_if = "is_default")]
    pub moe_a2a: MoeA2aKind,
    /// DeepEP's kernels when `moe_a2a = "deepep"`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub deepep_mode: DeepEpMode,
    /// Runs of decode-only iterations advance in closed form
    /// (`replica::decode_run`); `false` steps them one by one. Outputs are
    /// the same either way: a debugging switch (`--step-by-step`) to check
    /// the closed form, not a model setting.
    #[serde(default = "yes")]
    pub decode_runs: bool,
    /// SGLang's `--scheduler-recv-interval` (`SchedulerRecvSkipper`,
    /// `sglang/srt/managers/scheduler_recv_skipper.py`): the scheduler takes
    /// newly arrived requests off its socket only once this many decode
    /// steps have run since it last did; any step with a prefill (weight
    /// 1,000 there) and an idle engine let it receive at once. 1 (every
    /// engine's default) receives before every step.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub scheduler_recv_interval: u32,
    /// Host launch time per dense and per MoE layer, seconds, of a step the
    /// runtime runs without CUDA graphs (vLLM's steps past its captured
    /// sizes, SGLang's and TensorRT-LLM's steps with prefill tokens):
    /// replaces the runtime's own
    /// (`cost::runtime::EngineRuntime::launch_per_layer`), e.g. to refit it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eager_launch_s_per_layer: Option<LaunchPerLayer>,
    /// The serving front end between a client's send and the engine's
    /// scheduler (API server, tokenisation): replaces the runtime's own
    /// (`cost::runtime::EngineRuntime::front_end`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub front_end: Option<FrontEnd>,
}

/// The serving front end a request passes before the engine's scheduler
/// sees it (`[engine] front_end`): the HTTP/API server, the chat template
/// and tokenisation, and the hand-off to the engine process (vLLM's
/// `AsyncLLM` → `EngineCore` socket, SGLang's `TokenizerManager` →
/// scheduler, `trtllm-serve` → executor). It delays the request's arrival
/// at the replica, so it counts in TTFT and E2E and holds a closed-loop
/// user, but never occupies the GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrontEnd {
    /// Seconds per request, whatever its length.
    #[serde(default)]
    pub request_s: f64,
    /// Seconds per prompt token (tokenisation, the request's transfer).
    #[serde(default)]
    pub prompt_token_s: f64,
}

impl FrontEnd {
    /// The front end's time for a prompt of `prompt_tokens` tokens, ns.
    pub fn nanos(&self, prompt_tokens: u32) -> u64 {
        crate::time::secs_to_nanos(self.request_s + self.prompt_token_s * prompt_tokens as f64)
    }

    /// Whether a request passes it in no time.
    pub fn is_zero(&self) -> bool {
        self.request_s == 0.0 && self.prompt_token_s == 0.0
    }
}

/// Host launch time per (dense, MoE) layer of a step run without CUDA
/// graphs, seconds: what `[engine] eager_launch_s_per_layer` sets, or the
/// runtime's own (`cost::runtime::EngineRuntime::launch_per_layer`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchPerLayer {
    /// Seconds per dense layer.
    pub dense: f64,
    /// Seconds per mixture-of-experts layer.
    pub moe: f64,
}

fn one() -> u32 {
    1
}

fn is_one(v: &u32) -> bool {
    *v == 1
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

fn default_swap_space_gib() -> f64 {
    4.0
}

/// Batch policy names (`[engine] policy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BatchPolicyKind {
    /// Iteration-level batching mixing whole prefills with decodes.
    #[default]
    Continuous,
    /// vLLM v0 default: prefill-first iterations, prefills and decodes never mixed.
    Vllm,
    /// Sarathi-Serve chunked prefill under a token budget, decodes first.
    Sarathi,
    /// Orca: iteration-level scheduling with memory reserved for the whole request.
    Orca,
    /// Request-level (static) batching: the batch runs until its last member ends.
    Static,
}

impl BatchPolicyKind {
    pub fn name(self) -> &'static str {
        match self {
            BatchPolicyKind::Continuous => "continuous",
            BatchPolicyKind::Vllm => "vllm",
            BatchPolicyKind::Sarathi => "sarathi",
            BatchPolicyKind::Orca => "orca",
            BatchPolicyKind::Static => "static",
        }
    }
}

/// Preemption modes (`[engine] preemption`), after vLLM's `preemption_mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PreemptionMode {
    /// Free the blocks; recompute prompt + generated tokens on resumption.
    #[default]
    Recompute,
    /// Copy the blocks to host memory over PCIe and back on resumption.
    Swap,
}

/// Speculative decoding (`[engine.speculative]`): a draft proposes `num_draft_tokens`
/// tokens, the target verifies them in one pass, each accepted with probability
/// `acceptance_rate` until the first rejection (Leviathan et al., ICML 2023).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeculativeCfg {
    /// Draft length k.
    pub num_draft_tokens: u32,
    /// Per-token acceptance rate α in [0, 1).
    pub acceptance_rate: f64,
    /// A separate draft model from the catalog (classic draft-model speculation).
    #[serde(default)]
    pub draft_model: Option<String>,
    /// Or: each draft step costs this fraction of a target decode step
    /// (EAGLE heads / DeepSeek MTP modules ride on the target's hidden states).
    #[serde(default)]
    pub draft_cost_fraction: Option<f64>,
    /// Or: the draft is this many layers of the target's own kind plus its
    /// LM head, laid out as the target (DeepSeek-V3's multi-token-prediction
    /// module, `num_nextn_predict_layers = 1`; an EAGLE head is one decoder
    /// layer over the target's hidden states).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_layers: Option<u32>,
}

fn default_max_num_seqs() -> u32 {
    256
}
fn default_max_batched_tokens() -> u32 {
    8192
}
fn default_block_size() -> u32 {
    16
}
fn default_gpu_mem_util() -> f64 {
    0.9
}

impl Default for EngineCfg {
    fn default() -> Self {
        EngineCfg {
            max_num_seqs: default_max_num_seqs(),
            max_batched_tokens: default_max_batched_tokens(),
            block_size: default_block_size(),
            gpu_memory_utilization: default_gpu_mem_util(),
            max_model_len: None,
            policy: BatchPolicyKind::default(),
            preemption: PreemptionMode::default(),
            swap_space_gib: default_swap_space_gib(),
            speculative: None,
            prefix_caching: false,
            pinned_prefix_blocks: 0,
            runtime: Default::default(),
            all_reduce: Default::default(),
            moe_a2a: Default::default(),
            deepep_mode: Default::default(),
            decode_runs: true,
            scheduler_recv_interval: 1,
            eager_launch_s_per_layer: None,
            front_end: None,
        }
    }
}

/// Which engine's host overhead the roofline adds (`[engine] runtime`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineRuntime {
    /// A 2025 engine with CUDA graphs and an overlapped scheduler: SGLang's
    /// "zero-overhead batch scheduler" (SGLang v0.4, LMSYS blog 2024-12-04),
    /// vLLM V1's async scheduling (`--async-scheduling`) and TensorRT-LLM's
    /// overlap scheduler (on by default) prepare step n + 1 on the CPU while
    /// the GPU runs step n, after NanoFlow (Zhu et al. 2024). Host work of
    /// `cost::runtime::CUDA_GRAPH_STEP_S` + `CUDA_GRAPH_SEQ_S` per sequence is hidden
    /// behind the GPU's step and shows only when it is the longer of the two.
    #[default]
    CudaGraph,
    /// A 2023-era eager engine (vLLM 0.2 with Ray workers), sized from Vidur's
    /// measured CPU overheads on DGX-A100 (microsoft/vidur commit 0633efae,
    /// `data/profiling/a100/cpu_overheads.csv`: schedule, sampler, prepare
    /// inputs, process outputs and the Ray round trip by model, batch 8–64
    /// and TP 1–4). The host runs between GPU steps, so its time adds.
    #[serde(rename = "eager-2023")]
    Eager2023,
    /// vLLM V1 as served by `vllm serve`: async scheduling overlaps the
    /// host with the GPU as in `CudaGraph`; steps of more tokens than the
    /// largest captured CUDA graph run without one and pay the kernel
    /// launches of every layer on the host
    /// (`cost::runtime::VLLM_EAGER_LAUNCH_S_PER_LAYER`); tensor parallelism
    /// uses vLLM's custom all-reduce.
    Vllm,
    /// SGLang (`sglang.launch_server`): the overlapped "zero-overhead"
    /// scheduler, CUDA graphs for decode batches (prefill steps pay their
    /// kernel launches), custom all-reduce, and a serving front end per
    /// request (`cost::runtime::SGLANG_FRONT_END_S`).
    Sglang,
    /// TensorRT-LLM (`trtllm-serve`, PyTorch backend): the overlap
    /// scheduler, CUDA graphs for generation-only batches (steps with
    /// context tokens run eagerly, taking the longer of their kernel
    /// launches and the GPU's work:
    /// `cost::runtime::TRTLLM_CONTEXT_LAUNCH_S_PER_LAYER`), its custom
    /// all-reduce, and a serving front end per request
    /// (`cost::runtime::TRTLLM_FRONT_END_S`).
    Trtllm,
}

/// Which all-reduce the engine runs for tensor parallelism (`[engine]
/// all_reduce`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AllReduceKind {
    /// Every all-reduce through NCCL (`--disable-custom-all-reduce` in vLLM
    /// and SGLang).
    #[default]
    Nccl,
    /// vLLM's and SGLang's default: the custom one-shot/two-shot kernels for
    /// messages below `cost::comm::CUSTOM_ALLREDUCE_MAX_BYTES` on 2–8 GPUs joined by
    /// NVLink (or two PCIe GPUs), NCCL above.
    Custom,
}

/// How MoE layers move tokens to their experts' ranks and back (`[engine]
/// moe_a2a`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MoeA2aKind {
    /// A plain all-to-all of every token–expert pair (NCCL `alltoall`, vLLM's
    /// naive and pplx back ends), bandwidth-bound at
    /// `cost::ALL_TO_ALL_BW_EFFICIENCY` of the link, plus its latency.
    #[default]
    AllToAll,
    /// DeepEP (deepseek-ai/DeepEP; SGLang `--moe-a2a-backend deepep`, vLLM
    /// `deepep_high_throughput` / `deepep_low_latency`) in the mode
    /// `[engine] deepep_mode` names.
    Deepep,
}

/// DeepEP's kernels (`[engine] deepep_mode`, SGLang `--deepep-mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeepEpMode {
    /// Normal kernels for steps with prefill tokens, low-latency ones for
    /// decode-only steps (SGLang's `auto`).
    #[default]
    Auto,
    /// Normal (high-throughput) kernels: a token goes once to each node
    /// holding one of its experts over RDMA, then on over NVLink; a
    /// notify round (token counts per rank) precedes the payload.
    Normal,
    /// Low-latency kernels (IBGDA): every token–expert pair is sent
    /// directly, no notify round, one fixed cost per call.
    LowLatency,
}
