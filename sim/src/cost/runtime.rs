//! The serving engine's host-side time per step, by named runtime
//! (`[engine] runtime`): scheduling, input preparation, sampling, output
//! processing and the round trip to tensor-parallel workers, and whether it
//! overlaps the GPU's work or adds to it.

use crate::config::AllReduceKind;
pub use crate::config::{EngineRuntime, FrontEnd, LaunchPerLayer};

/// Host time of one overlapped step of the CUDA-graph runtime, seconds (the
/// order of vLLM V1's scheduler + input preparation + output processing for
/// a small batch; hidden whenever the GPU step is longer).
pub const CUDA_GRAPH_STEP_S: f64 = 0.5e-3;
/// Host time per sequence of the CUDA-graph runtime (block tables,
/// detokenization, output processing), seconds.
pub const CUDA_GRAPH_SEQ_S: f64 = 5e-6;
/// Eager runtime, least-squares fit of schedule + sampler + prepare inputs +
/// process outputs medians over Vidur's 56 rows: 1.83 ms per step ...
pub const EAGER_STEP_S: f64 = 1.833e-3;
/// ... plus 92 µs per sequence ...
pub const EAGER_SEQ_S: f64 = 0.0920e-3;
/// ... and with tensor parallelism the Ray round trip to the workers
/// (`RAY_COMM_TIME_MEDIAN`): 1.11 ms per step plus 167 µs per sequence.
pub const EAGER_TP_STEP_S: f64 = 1.113e-3;
pub const EAGER_TP_SEQ_S: f64 = 0.1667e-3;

/// The most tokens a vLLM V1 step runs as a captured CUDA graph: vLLM's
/// `CompilationConfig` captures batch sizes up to
/// `max_cudagraph_capture_size`, by default `min(2 × max_num_seqs, 512)`
/// (`vllm/config/compilation.py`, `vllm/config/vllm.py`), and a step of
/// more tokens (any prefill chunk of a long prompt) runs the compiled
/// model without a graph, launching every kernel from the host.
pub const VLLM_MAX_CAPTURE_TOKENS: u64 = 512;
/// Host time per layer of a vLLM step run without a CUDA graph, seconds:
/// the kernel launches and Python dispatch of each layer, which the GPU
/// waits on. aiconfigurator calibrates 0.8 ms per layer against its whole
/// silicon corpus for vLLM's prefill (`VLLMBackend._prefill_dispatch_overhead_ms`,
/// `aic-core/src/aiconfigurator_core/sdk/backends/vllm_backend.py`:
/// "CPU-side dispatch overhead scales with layer count and is not captured
/// in silicon benchmarks").
pub const VLLM_EAGER_LAUNCH_S_PER_LAYER: f64 = 0.8e-3;

/// Host time per dense layer of a SGLang step with prefill tokens, seconds:
/// SGLang replays CUDA graphs only for decode batches (up to
/// `--cuda-graph-max-bs`; InferenceX's recipes also pass
/// `--disable-piecewise-cuda-graph`), so a prefill ("extend") step runs
/// eagerly and the GPU waits on every kernel's launch and Python dispatch.
/// aiconfigurator's calibrated dispatch overhead of an ungraphed step
/// ([`VLLM_EAGER_LAUNCH_S_PER_LAYER`]), not fitted here: the fit on SGLang's
/// rows is flat in it (docs/accuracy.md).
pub const PREFILL_LAUNCH_S_PER_DENSE_LAYER: f64 = VLLM_EAGER_LAUNCH_S_PER_LAYER;
/// The same per mixture-of-experts layer: routing, top-k, token
/// permutation, the grouped GEMMs, the shared expert and the combine are
/// several times a dense layer's kernels. Fitted on the SGLang rows of
/// aiconfigurator's silicon set together with [`SGLANG_FRONT_END_S`], least
/// median |TTFT error| + median |TPOT error| on a grid of 0–3.2 ms by
/// 0–200 ms; `scripts/accuracy_holdout.py` gives the fit and its
/// leave-one-family-out and leave-one-chip-out errors (docs/accuracy.md).
pub const PREFILL_LAUNCH_S_PER_MOE_LAYER: f64 = 1.6e-3;

/// Host time per layer, dense or MoE, of a TensorRT-LLM step with context
/// (prefill) tokens, seconds. TensorRT-LLM's PyTorch backend replays CUDA
/// graphs only for generation-only batches (`cuda_graph_config`); a
/// context-only or a mixed context + generation step runs its layers
/// eagerly unless piecewise CUDA graphs are enabled ("Piecewise CUDA Graph …
/// reduce[s] context-phase launch overhead … handles context-only and mixed
/// context+generation iterations",
/// `docs/source/features/torch_compile_and_piecewise_cuda_graph.md`), which
/// aiconfigurator's recipes and most of InferenceX's do not. The time per
/// layer is aiconfigurator's calibrated dispatch overhead of an ungraphed
/// step ([`VLLM_EAGER_LAUNCH_S_PER_LAYER`]), not fitted here. Its executor
/// launches the kernels asynchronously, so the step is host-bound only when
/// launching takes longer than the GPU's work ([`EngineRuntime::wall_secs`]:
/// the longer of the two, where vLLM's and SGLang's launches add). A larger
/// MoE figure, as SGLang's fit has, brings TensorRT-LLM's TTFT closer but
/// stalls its decodes past what its measured TPOT shows (docs/accuracy.md).
pub const TRTLLM_CONTEXT_LAUNCH_S_PER_LAYER: f64 = VLLM_EAGER_LAUNCH_S_PER_LAYER;

/// Front-end time per request of vLLM's OpenAI server, seconds: none.
/// Measured on vLLM's rows of aiconfigurator's silicon set, any constant
/// worsens the fit (5 ms: median |TTFT error| 18.1 % → 18.5 %; 20 ms:
/// 19.7 %), and moving [`VLLM_EAGER_LAUNCH_S_PER_LAYER`] from the step to
/// the request (aiconfigurator's own form, a per-request
/// `_prefill_dispatch_overhead_ms`) leaves its decodes fast: the launches
/// of steps past the captured graphs do stall the batch (docs/accuracy.md).
pub const VLLM_FRONT_END_S: f64 = 0.0;
/// Front-end time per request of SGLang's server (`TokenizerManager` →
/// scheduler, the first streamed event), seconds. Fitted with
/// [`PREFILL_LAUNCH_S_PER_MOE_LAYER`] on SGLang's rows of aiconfigurator's
/// silicon set: with it the MoE launches per prefill step halve, and
/// SGLang's decodes are not stalled past their measured TPOT.
pub const SGLANG_FRONT_END_S: f64 = 0.1;
/// Front-end time per request of `trtllm-serve`, seconds. Fitted on
/// TensorRT-LLM's rows of aiconfigurator's silicon set (a grid of 0–200 ms,
/// [`TRTLLM_CONTEXT_LAUNCH_S_PER_LAYER`] kept): the gap between measured and
/// simulated TTFT on InferenceX's rows is a per-request 100–300 ms that
/// hardly depends on the prompt's length and that a per-step cost cannot
/// take without stalling decodes (docs/accuracy.md).
pub const TRTLLM_FRONT_END_S: f64 = 0.1;

/// Host time of one step, split into the per-step and per-sequence parts,
/// which an overlapping runtime hides behind the GPU's step, and the
/// kernel launches of a step run without a CUDA graph, which it cannot.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HostTime {
    pub step: f64,
    pub seqs: f64,
    /// Launches of a step too large for the captured graphs (0 otherwise).
    pub launch: f64,
}

impl HostTime {
    pub fn total(&self) -> f64 {
        self.step + self.seqs + self.launch
    }

    /// The part an overlapping runtime prepares while the GPU runs the
    /// previous step.
    pub fn overlappable(&self) -> f64 {
        self.step + self.seqs
    }
}

impl EngineRuntime {
    pub const ALL: [EngineRuntime; 5] = [
        EngineRuntime::CudaGraph,
        EngineRuntime::Eager2023,
        EngineRuntime::Vllm,
        EngineRuntime::Sglang,
        EngineRuntime::Trtllm,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EngineRuntime::CudaGraph => "cuda-graph",
            EngineRuntime::Eager2023 => "eager-2023",
            EngineRuntime::Vllm => "vllm",
            EngineRuntime::Sglang => "sglang",
            EngineRuntime::Trtllm => "trtllm",
        }
    }

    /// The runtime of a serving engine by the name benchmark files give
    /// it (`vllm`, `sglang`, `trtllm`, and their common spellings).
    pub fn of_engine(engine: &str) -> Option<EngineRuntime> {
        let e = engine.to_ascii_lowercase().replace(['-', '_', ' '], "");
        match e.as_str() {
            "vllm" | "openai" | "vllmv1" => Some(EngineRuntime::Vllm),
            "sglang" | "sglangoai" => Some(EngineRuntime::Sglang),
            "trtllm" | "tensorrtllm" | "trt" => Some(EngineRuntime::Trtllm),
            _ => None,
        }
    }

    /// The serving front end a request of this runtime passes before its
    /// scheduler sees it (`[engine] front_end` replaces it): the generic
    /// runtimes model none.
    pub fn front_end(self) -> FrontEnd {
        let request_s = match self {
            EngineRuntime::Vllm => VLLM_FRONT_END_S,
            EngineRuntime::Sglang => SGLANG_FRONT_END_S,
            EngineRuntime::Trtllm => TRTLLM_FRONT_END_S,
            EngineRuntime::CudaGraph | EngineRuntime::Eager2023 => 0.0,
        };
        FrontEnd {
            request_s,
            prompt_token_s: 0.0,
        }
    }

    /// Host time of a step running `seqs` sequences on a `tp`-way group
    /// within the captured graphs.
    #[inline]
    pub fn host(self, seqs: u32, tp: u32) -> HostTime {
        self.host_for(seqs, 0, false, (0.0, 0.0), self.launch_per_layer(), tp)
    }

    /// The launch time per layer of a step this runtime runs without CUDA
    /// graphs: vLLM's steps past its captured sizes, SGLang's and
    /// TensorRT-LLM's steps with prefill tokens (the other runtimes launch
    /// none: they capture every step they price).
    pub fn launch_per_layer(self) -> LaunchPerLayer {
        match self {
            EngineRuntime::Vllm => LaunchPerLayer {
                dense: VLLM_EAGER_LAUNCH_S_PER_LAYER,
                moe: VLLM_EAGER_LAUNCH_S_PER_LAYER,
            },
            EngineRuntime::Sglang => LaunchPerLayer {
                dense: PREFILL_LAUNCH_S_PER_DENSE_LAYER,
                moe: PREFILL_LAUNCH_S_PER_MOE_LAYER,
            },
            EngineRuntime::Trtllm => LaunchPerLayer {
                dense: TRTLLM_CONTEXT_LAUNCH_S_PER_LAYER,
                moe: TRTLLM_CONTEXT_LAUNCH_S_PER_LAYER,
            },
            EngineRuntime::CudaGraph | EngineRuntime::Eager2023 => LaunchPerLayer {
                dense: 0.0,
                moe: 0.0,
            },
        }
    }

    /// [`Self::host`] of a step of `step_tokens` tokens, with or without
    /// prefill tokens, through `(dense, moe)` layers, each launched in
    /// `per_layer` when the captured graphs do not cover the step.
    #[inline]
    pub fn host_for(
        self,
        seqs: u32,
        step_tokens: u64,
        prefills: bool,
        (dense, moe): (f64, f64),
        per_layer: LaunchPerLayer,
        tp: u32,
    ) -> HostTime {
        let s = seqs as f64;
        let launches = per_layer.dense * dense + per_layer.moe * moe;
        match self {
            EngineRuntime::CudaGraph => HostTime {
                step: CUDA_GRAPH_STEP_S,
                seqs: CUDA_GRAPH_SEQ_S * s,
                launch: 0.0,
            },
            EngineRuntime::Sglang | EngineRuntime::Trtllm => HostTime {
                step: CUDA_GRAPH_STEP_S,
                seqs: CUDA_GRAPH_SEQ_S * s,
                launch: if prefills { launches } else { 0.0 },
            },
            EngineRuntime::Vllm => HostTime {
                step: CUDA_GRAPH_STEP_S,
                seqs: CUDA_GRAPH_SEQ_S * s,
                launch: if step_tokens > VLLM_MAX_CAPTURE_TOKENS {
                    launches
                } else {
                    0.0
                },
            },
            EngineRuntime::Eager2023 => {
                let ray = tp > 1;
                HostTime {
                    step: EAGER_STEP_S + if ray { EAGER_TP_STEP_S } else { 0.0 },
                    seqs: s * (EAGER_SEQ_S + if ray { EAGER_TP_SEQ_S } else { 0.0 }),
                    launch: 0.0,
                }
            }
        }
    }

    /// Whether host work runs concurrently with the GPU's step.
    pub fn overlaps(self) -> bool {
        !matches!(self, EngineRuntime::Eager2023)
    }

    /// The tensor-parallel all-reduce the engine runs unless told otherwise:
    /// vLLM (`vllm/distributed/device_communicators/custom_all_reduce.py`),
    /// SGLang (`sgl_kernel` custom all-reduce) and TensorRT-LLM
    /// (`AllReduceStrategy.AUTO`, one-shot/two-shot kernels for small
    /// messages) all use their own kernels for small messages on NVLink;
    /// the generic runtimes keep NCCL.
    pub fn all_reduce(self) -> AllReduceKind {
        match self {
            EngineRuntime::Vllm | EngineRuntime::Sglang | EngineRuntime::Trtllm => {
                AllReduceKind::Custom
            }
            EngineRuntime::CudaGraph | EngineRuntime::Eager2023 => AllReduceKind::Nccl,
        }
    }

    /// The step's wall time from its GPU part and its host time `h`: the
    /// overlappable host work hidden (or added) as [`Self::step_secs`]
    /// says, the launches of an ungraphed step added (or, where
    /// [`Self::launches_overlap_gpu`], the longer of them and the GPU part).
    #[inline]
    pub fn wall_secs(self, gpu: f64, h: HostTime) -> f64 {
        if self.launches_overlap_gpu() {
            self.step_secs(gpu.max(h.launch), h.step + h.seqs)
        } else {
            self.step_secs(gpu, h.step + h.seqs) + h.launch
        }
    }

    /// Whether the GPU runs an ungraphed step's kernels while the host is
    /// still launching the rest (TensorRT-LLM's executor: the step takes the
    /// longer of the two), or waits on the host's launches and dispatch
    /// (vLLM's steps past its graphs, SGLang's prefill steps: they add).
    pub fn launches_overlap_gpu(self) -> bool {
        matches!(self, EngineRuntime::Trtllm)
    }

    /// The step's wall time from its GPU and host parts.
    #[inline]
    pub fn step_secs(self, gpu: f64, host: f64) -> f64 {
        if self.overlaps() {
            gpu.max(host)
        } else {
            gpu + host
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eager_host_time_matches_vidurs_example_and_adds_to_the_gpu() {
        // The data README's example: Llama-2-70B TP 4 batch 8 spends ≈ 5.6 ms
        // per step on the host.
        let h = EngineRuntime::Eager2023.host(8, 4).total() * 1e3;
        assert!((4.5..6.5).contains(&h), "{h}");
        assert_eq!(EngineRuntime::Eager2023.step_secs(0.01, 0.002), 0.012);
        // Overlapped: hidden unless it is the longer part.
        let r = EngineRuntime::CudaGraph;
        assert_eq!(r.step_secs(0.01, r.host(8, 1).total()), 0.01);
        assert_eq!(r.step_secs(0.0001, 0.0006), 0.0006);
    }

    #[test]
    fn vllm_pays_launches_only_on_steps_past_its_captured_graphs() {
        let r = EngineRuntime::Vllm;
        let small = r.host_for(64, 64, false, (80.0, 0.0), r.launch_per_layer(), 4);
        assert_eq!(small.launch, 0.0);
        assert_eq!(r.wall_secs(0.01, small), 0.01);
        let big = r.host_for(4, 1024, true, (80.0, 0.0), r.launch_per_layer(), 4);
        assert!((big.launch - 0.064).abs() < 1e-12, "{big:?}");
        // The launches add to the GPU's time; the rest stays hidden.
        assert!((r.wall_secs(0.03, big) - 0.094).abs() < 1e-12);
        // TensorRT-LLM's generation-only steps price like cuda-graph;
        // SGLang's decode steps too.
        let trt = EngineRuntime::Trtllm;
        assert_eq!(
            trt.host_for(4, 4, false, (40.0, 40.0), trt.launch_per_layer(), 4),
            EngineRuntime::CudaGraph.host(4, 4)
        );
        let sg = EngineRuntime::Sglang;
        assert_eq!(
            sg.host_for(64, 64, false, (40.0, 40.0), sg.launch_per_layer(), 4),
            EngineRuntime::CudaGraph.host(64, 4)
        );
        assert!(sg.overlaps() && trt.overlaps());
    }

    #[test]
    fn sglang_prefill_steps_pay_their_layers_launches_moe_layers_more() {
        let sg = EngineRuntime::Sglang;
        let dense = sg
            .host_for(1, 1024, true, (10.0, 0.0), sg.launch_per_layer(), 8)
            .launch;
        let moe = sg
            .host_for(1, 1024, true, (0.0, 10.0), sg.launch_per_layer(), 8)
            .launch;
        assert!((dense - 10.0 * PREFILL_LAUNCH_S_PER_DENSE_LAYER).abs() < 1e-15);
        assert!((moe - 10.0 * PREFILL_LAUNCH_S_PER_MOE_LAYER).abs() < 1e-15);
        assert!(moe > dense);
        // `[engine] eager_launch_s_per_layer` replaces the runtime's own.
        let own = LaunchPerLayer {
            dense: 1e-3,
            moe: 0.0,
        };
        let set = sg.host_for(1, 1024, true, (10.0, 10.0), own, 8).launch;
        assert!((set - 10e-3).abs() < 1e-15);
        // Whatever its size: a one-token prefill is still not a graph.
        assert_eq!(
            sg.host_for(1, 1, true, (10.0, 0.0), sg.launch_per_layer(), 8)
                .launch,
            dense
        );
        // The launches add to the GPU's time.
        let h = sg.host_for(1, 1024, true, (0.0, 10.0), sg.launch_per_layer(), 8);
        assert!((sg.wall_secs(0.01, h) - (0.01 + moe)).abs() < 1e-12);
    }

    #[test]
    fn trtllm_context_steps_take_the_longer_of_their_launches_and_the_gpu() {
        let trt = EngineRuntime::Trtllm;
        let per = trt.launch_per_layer();
        // DeepSeek-V3's 3 dense and 58 MoE layers.
        let h = trt.host_for(4, 1024, true, (3.0, 58.0), per, 8);
        let launch = 61.0 * TRTLLM_CONTEXT_LAUNCH_S_PER_LAYER;
        assert!((h.launch - launch).abs() < 1e-15, "{h:?}");
        assert!(trt.launches_overlap_gpu());
        // A short prefill is host-bound: the step lasts as long as its
        // launches, not the kernels plus the launches ...
        assert!((trt.wall_secs(0.03, h) - launch).abs() < 1e-12);
        // ... and a long one hides them behind the GPU's work.
        assert_eq!(trt.wall_secs(0.5, h), 0.5);
        // Generation-only steps replay graphs.
        let decode = trt.host_for(64, 64, false, (3.0, 58.0), per, 8);
        assert_eq!(decode.launch, 0.0);
        assert_eq!(trt.wall_secs(0.01, decode), 0.01);
        // vLLM's and SGLang's launches add to the GPU's time instead.
        assert!(!EngineRuntime::Sglang.launches_overlap_gpu());
        assert!(!EngineRuntime::Vllm.launches_overlap_gpu());
        // `[engine] eager_launch_s_per_layer` replaces the runtime's own.
        let own = LaunchPerLayer {
            dense: 0.0,
            moe: 1e-3,
        };
        let set = trt.host_for(4, 1024, true, (3.0, 58.0), own, 8).launch;
        assert!((set - 58e-3).abs() < 1e-15);
    }

    #[test]
    fn named_engines_front_ends_are_per_request_and_the_generic_runtimes_have_none() {
        for r in [EngineRuntime::CudaGraph, EngineRuntime::Eager2023] {
            assert!(r.front_end().is_zero(), "{r:?}");
        }
        assert_eq!(EngineRuntime::Vllm.front_end().request_s, VLLM_FRONT_END_S);
        assert_eq!(
            EngineRuntime::Sglang.front_end().request_s,
            SGLANG_FRONT_END_S
        );
        assert_eq!(
            EngineRuntime::Trtllm.front_end().request_s,
            TRTLLM_FRONT_END_S
        );
        // A constant per request: 100 ms whatever the prompt.
        let fe = EngineRuntime::Trtllm.front_end();
        assert_eq!(fe.nanos(1), fe.nanos(8192));
        assert_eq!(fe.nanos(1024), 100_000_000);
    }

    #[test]
    fn engine_runtimes_use_custom_all_reduce_and_are_found_by_engine_name() {
        assert_eq!(EngineRuntime::of_engine("vLLM"), Some(EngineRuntime::Vllm));
        assert_eq!(
            EngineRuntime::of_engine("sglang"),
            Some(EngineRuntime::Sglang)
        );
        assert_eq!(
            EngineRuntime::of_engine("TensorRT-LLM"),
            Some(EngineRuntime::Trtllm)
        );
        assert_eq!(
            EngineRuntime::of_engine("trtllm"),
            Some(EngineRuntime::Trtllm)
        );
        assert_eq!(EngineRuntime::of_engine("llama.cpp"), None);
        assert_eq!(EngineRuntime::Vllm.all_reduce(), AllReduceKind::Custom);
        assert_eq!(EngineRuntime::CudaGraph.all_reduce(), AllReduceKind::Nccl);
    }
}
