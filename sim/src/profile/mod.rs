//! Calibration profiles: what `servesim calibrate` measured of one model on
//! one device, as a versioned TOML file the simulator reads through
//! `[hardware] profile = "path"` (DESIGN.md, "Calibration and validation").
//!
//! A profile carries the device and model it was measured on, the memory the
//! real runtime took, every raw timing sample, the fitted cost terms
//! ([`CostTerms`], priced by [`crate::profiled::Profiled`]) and the fit error
//! on shapes held out of the fit. The simulator needs only the memory and the
//! fitted terms; the samples are kept so that a profile can be re-fitted and
//! audited.
//!
//! This module owns the file format and its validation; it knows nothing of
//! candle (the `calibrate` crate writes profiles, `sim` reads them).

use crate::catalog::{Dtype, HardwareSpec, ModelArch, GIB};
use crate::config::EngineCfg;
use crate::cost::BatchShape;
use crate::memory::{MemoryPlan, StageMemory};
use serde::{Deserialize, Serialize};
use std::path::Path;

mod bench;
mod elementwise;
mod validate;
pub use bench::{fnv1a64, BenchError, BenchFile, BenchFit, BenchTerms};
pub use elementwise::{ElementwiseCase, ElementwiseExperiment, TimingClock};
pub use validate::{HOST_COPY_BYTES_PER_S, MAX_DEVICE_BYTES, MAX_TERM_NS, MIN_STEP_NS};

/// The profile format this build writes and reads.
pub const PROFILE_VERSION: u32 = 1;

/// A profile error: the file, the key path and what is wrong, on one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{origin}: {key}{sep}{message}", sep = if key.is_empty() { "" } else { ": " })]
pub struct ProfileError {
    pub origin: String,
    pub key: String,
    pub message: String,
}

impl ProfileError {
    fn new(origin: &str, key: impl Into<String>, message: impl Into<String>) -> Self {
        ProfileError {
            origin: origin.to_string(),
            key: key.into(),
            message: message.into(),
        }
    }
}

/// A calibration profile as written by `servesim calibrate`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Format version ([`PROFILE_VERSION`]).
    pub version: u32,
    /// The tool and version that wrote it.
    pub created_by: String,
    pub device: DeviceInfo,
    pub model: ProfileModel,
    pub memory: ProfileMemory,
    pub measurement: MeasurementInfo,
    pub fit: CostTerms,
    pub held_out: FitError,
    /// How a served engine was probed through its API (`calibrate
    /// --engine`), with the host terms measured apart from the iteration;
    /// absent for profiles measured with candle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineProbe>,
    /// RMSNorm eager against fused on the device (`calibrate` with candle);
    /// absent for profiles of a served engine and older profiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elementwise: Option<ElementwiseExperiment>,
    /// What `calibrate --from-bench` fitted from measured benchmark
    /// results, and from which files; absent for measured profiles. Such a
    /// profile has no samples: its `fit` is the roofline with the fitted
    /// terms ([`BenchTerms::cost_terms`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bench: Option<BenchFit>,
    /// Every measured shape with all its repetitions, fitted and held out.
    #[serde(default)]
    pub samples: Vec<Sample>,
}

/// A served engine calibrated through its OpenAI-compatible API: where it
/// was, what it said it was, and what the probes found beyond the fitted
/// iteration cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineProbe {
    /// Base URL the probes went to.
    pub url: String,
    /// What the server calls itself (`/v1/models` `owned_by`, the family
    /// of its `/metrics`).
    pub server: String,
    /// The model name it serves (`/v1/models`).
    pub served_model: String,
    /// Requests the probes sent.
    pub requests: u32,
    /// The time the probes were given, seconds.
    pub budget_s: f64,
    /// Host time measured apart from the model's work.
    pub host: HostTerms,
    /// `[asked, seen]` per concurrency level probed: requests sent at once
    /// and the most the server's `/metrics` reported running (0: it
    /// exposes no running gauge).
    pub concurrency: Vec<[u32; 2]>,
    /// What the probes found, one line each (prefix caching, a concurrency
    /// cap, interference of a prefill with decodes, the KV capacity's
    /// source).
    #[serde(default)]
    pub findings: Vec<String>,
    /// How the engine forms its iterations, as it reported or was told:
    /// `simulate` batches so unless the scenario's `[engine]` says otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batching: Option<EngineBatching>,
}

/// How a served engine batches, recorded so that a simulation priced by its
/// profile forms the same iterations.
///
/// llama.cpp's server (`tools/server`, `update_slots`) puts one decode token
/// of every generating slot into each batch first, then fills it with the
/// prompt tokens of prefilling slots up to `n_batch` (`-b`, default 2048),
/// chunking a longer prompt over iterations; the batch runs as micro-batches
/// of `n_ubatch` (`-ub`, default 512) and at most `--parallel` slots hold
/// sequences. vLLM V1's scheduler does the same under
/// `max_num_batched_tokens` and `max_num_seqs` (chunked prefill, decodes
/// first). Both are Sarathi-Serve's stall-free batching (Agrawal et al.,
/// OSDI 2024), the `sarathi` policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineBatching {
    /// The batch policy the engine's scheduler is; absent when the engine's
    /// family is unknown and only its limits were given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<crate::config::BatchPolicyKind>,
    /// Tokens one iteration takes at most (llama.cpp `n_batch`, vLLM
    /// `max_num_batched_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_batched_tokens: Option<u32>,
    /// Sequences one iteration holds at most (llama.cpp's slots, vLLM
    /// `max_num_seqs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_seqs: Option<u32>,
    /// llama.cpp's micro-batch (`n_ubatch`): an iteration's tokens run in
    /// pieces of this size. Recorded, not simulated apart: the probes'
    /// prefills ran split so, and the fitted per-token cost includes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ubatch_tokens: Option<u32>,
    /// Where each figure came from (the server's `/props`, a flag, the
    /// engine's documented default).
    pub source: String,
}

/// Host terms an API measurement can tell apart from the iteration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostTerms {
    /// Median time to first token of a one-token prompt, ns.
    pub ttft_floor_ns: f64,
    /// Per request outside the server's iterations (HTTP, tokenizing,
    /// admission, the first token's detokenizing), ns: how much shorter a
    /// decode step with a joining prefill ran than the fit predicts when
    /// it charges the whole per-request term (`fit.prefill_seq_ns`, the
    /// TTFT floor less one step) to the prefill's iteration; all of that
    /// term when no mixed step was measured. The simulator still charges
    /// all of `fit.prefill_seq_ns` to the iteration, its only per-request
    /// place, so TTFTs come out right.
    pub request_ns: f64,
    /// The decode step's intercept at one sequence and no context, ns:
    /// the engine's scheduling, input preparation and sampling together
    /// with the fixed part of the forward pass (an API cannot split them).
    pub step_ns: f64,
    /// Per sequence per step beyond its context (the decode step's slope
    /// in the batch size), ns.
    pub seq_ns: f64,
}

/// The device a profile was measured on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceInfo {
    /// How it was asked for: `cpu`, `cuda:0`, `metal`.
    pub spec: String,
    /// The CPU model (from /proc/cpuinfo) or the GPU's name.
    pub name: String,
    /// CUDA driver version, or the operating system for CPUs.
    pub driver: String,
    /// Worker threads the CPU backend used (RAYON_NUM_THREADS); 0 on GPUs.
    pub threads: u32,
}

/// The model a profile measured: a Llama-style decoder's architecture, the
/// dtype it ran in, and where its weights came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileModel {
    pub name: String,
    /// Where the architecture came from (catalog preset, config.json, GGUF).
    pub source: String,
    pub layers: u32,
    pub hidden_size: u32,
    pub num_heads: u32,
    pub num_kv_heads: u32,
    pub head_dim: u32,
    pub intermediate_size: u32,
    pub vocab_size: u32,
    pub tied_embeddings: bool,
    pub max_context: u32,
    pub rope_theta: f64,
    pub rms_norm_eps: f64,
    /// Biases on the Q/K/V projections (Qwen2).
    #[serde(default)]
    pub attention_bias: bool,
    /// Rotary embedding layout: `half` (Hugging Face) or `interleaved` (GGUF).
    pub rope_layout: String,
    /// `f32`, `f16` or `bf16`.
    pub dtype: String,
    pub weights: WeightsInfo,
}

/// Where the weights came from. Timing does not depend on the values, so a
/// profile of random weights prices the real model as well.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum WeightsInfo {
    /// Random weights drawn from a seeded generator.
    Random { seed: u64 },
    /// A safetensors file (Hugging Face tensor names).
    Safetensors { path: String },
    /// A GGUF file, dequantized to the profile's dtype.
    Gguf { path: String },
    /// The weights a served engine holds (`calibrate --engine`): measured
    /// through its API, with nothing for `servesim` to load.
    Served { url: String, model: String },
    /// The weights a benchmarked deployment served (`calibrate
    /// --from-bench`): known only through its measured results.
    Benchmarked { model: String },
}

impl WeightsInfo {
    pub fn describe(&self) -> String {
        match self {
            WeightsInfo::Random { seed } => {
                format!("random weights (seed {seed}; timing does not depend on the values)")
            }
            WeightsInfo::Safetensors { path } => format!("real weights from {path}"),
            WeightsInfo::Gguf { path } => format!("real weights from {path} (dequantized)"),
            WeightsInfo::Served { url, model } => {
                format!("the weights {model} served at {url} (measured through its API)")
            }
            WeightsInfo::Benchmarked { model } => {
                format!("the weights of {model} as benchmarked (fitted to measured results)")
            }
        }
    }
}

impl ProfileModel {
    /// The architecture as the simulator's catalog describes models.
    pub fn arch(&self) -> ModelArch {
        ModelArch {
            name: self.name.clone(),
            layers: self.layers,
            hidden_size: self.hidden_size,
            num_heads: self.num_heads,
            num_kv_heads: self.num_kv_heads,
            head_dim: self.head_dim,
            intermediate_size: self.intermediate_size,
            vocab_size: self.vocab_size,
            gated_mlp: true,
            tied_embeddings: self.tied_embeddings,
            max_context: self.max_context,
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
            ..ModelArch::default()
        }
    }

    /// The profile's dtype as the catalog's.
    pub fn dtype(&self) -> Option<Dtype> {
        match self.dtype.as_str() {
            "f32" => Some(Dtype::Fp32),
            "f16" => Some(Dtype::Fp16),
            "bf16" => Some(Dtype::Bf16),
            _ => None,
        }
    }
}

/// Memory the real runtime took, measured during calibration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileMemory {
    /// Device memory in all (CUDA: the driver's total; CPU: MemTotal).
    pub device_bytes: f64,
    /// Bytes of the weight tensors as loaded.
    pub weight_bytes: f64,
    /// KV-cache bytes one token takes over all layers (from the cache tensors).
    pub kv_bytes_per_token: f64,
    /// Peak memory of the largest measured forward pass beyond weights and
    /// its KV cache (activations, workspaces).
    pub activation_bytes: f64,
    /// Memory the runtime held before the model was loaded (CUDA context, or
    /// the process's resident set on CPU).
    pub runtime_bytes: f64,
    /// How the figures were read.
    pub method: String,
}

/// How the samples were taken.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasurementInfo {
    /// Untimed runs of each shape before its timed repetitions.
    pub warmup: u32,
    /// Timed repetitions of each shape.
    pub repetitions: u32,
    /// `--quick`: the smaller grid.
    pub quick: bool,
    /// Longest context measured.
    pub max_context: u32,
    /// Wall time the calibration took, seconds.
    pub wall_s: f64,
    /// Device-to-host copy bandwidth (what swapping KV moves over), bytes/s.
    pub host_copy_bytes_per_s: f64,
    /// Rounds of the loose shapes repeated to tighten their medians.
    #[serde(default)]
    pub extra_rounds: u32,
    /// What made the machine noisy while calibrating (spread, other load),
    /// one line each; empty when it was quiet (`calibrate::noise`).
    #[serde(default)]
    pub noise: Vec<String>,
    /// How the candle model computed attention: `naive` or `tiled:BLOCK`;
    /// absent in an engine profile (the server's own kernels) and in candle
    /// profiles written before the choice existed (naive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention: Option<String>,
    /// The host work timed apart from the device's in each step, fitted
    /// over the batch's sequences; absent in profiles that predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<MeasuredHost>,
}

/// Host work in a candle step, measured apart from the device's: on CUDA
/// the step's wall time beyond the CUDA events around its forward pass
/// (kernel launches the GPU waits for, the sampler, the copy of the tokens
/// back); on CPU, where host and device are the same cores, the sampler's
/// argmax over the vocabulary and the copy of the tokens out of the logits,
/// timed apart from the forward pass. Fitted as `step_ns + seq_ns × seqs`
/// by least squares over the fitted samples' `host_ns` (the split vLLM's
/// and Sarathi-Serve's profilers make between the model's time and the
/// engine's CPU overhead per iteration).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasuredHost {
    /// Host time per step at no sequences, ns.
    pub step_ns: f64,
    /// Host time per sequence in the step, ns.
    pub seq_ns: f64,
    /// The host's share of the fitted samples' median step time, percent.
    pub share_pct: f64,
    /// What was timed, in words.
    pub method: String,
}

/// One measured batch: prefill chunks `[new tokens, cached tokens]` and
/// decoding sequences by context (their new token included, as
/// [`BatchShape::add_decode`] counts it), timed `times_ns.len()` times.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sample {
    /// `prefill`, `decode`, `mixed`, or `wake` (a step after an idle spell).
    pub kind: String,
    /// Used to fit (`true`) or held out to check the fit (`false`).
    pub fitted: bool,
    #[serde(default)]
    pub prefill: Vec<[u32; 2]>,
    #[serde(default)]
    pub decode: Vec<u32>,
    /// Idle time before each timed run, ms (wake samples).
    #[serde(default)]
    pub idle_ms: f64,
    pub median_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub times_ns: Vec<u64>,
    /// Median host time of the timed runs, ns (see [`MeasuredHost`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_ns: Option<u64>,
}

impl Sample {
    /// The batch's shape as the scheduler would build it.
    pub fn shape(&self) -> BatchShape {
        let mut b = BatchShape::default();
        for &[n, c] in &self.prefill {
            b.add_prefill(n as u64, c as u64);
        }
        for &l in &self.decode {
            b.add_decode(l as u64);
        }
        b.idle_ns = (self.idle_ms * 1e6).round() as u64;
        b
    }
}

/// The fitted iteration cost (DESIGN.md, "Cost model"), for the whole model:
///
/// ```text
/// T = step + prefill_seq·P + decode_token·Σl + prefill_pair·Σn(c+n/2)
///       + prefill_square·Σn² + prefill_kv_token·Σ(c+n) + tokens(N) + rows(R)
///       + wake(idle)
/// ```
///
/// with P prefilling sequences, Σl decode context, N tokens through the dense
/// layers and R logit rows. `tokens` and `rows` are piecewise-linear tables
/// over measured knots (the dense GEMMs and the LM head are memory-bound for
/// small batches and compute-bound for large ones, and CPU GEMM kernels
/// switch strategy with the row count, so no single line fits). `calibrate`
/// fits both non-decreasing (more tokens or rows never cost less) except on
/// the token segments listed in `falling_token_segments`, where the samples
/// measured a repeatable drop. The last segment's slope extends past the
/// last knot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostTerms {
    /// Fixed cost of an iteration with one token and one row, ns.
    pub step_ns: f64,
    /// Extra cost of each prefilling sequence (its own attention call and
    /// causal mask), ns.
    pub prefill_seq_ns: f64,
    /// Decode attention per context token, ns.
    pub decode_token_ns: f64,
    /// Prefill attention per query–key pair Σ n(c + n/2), ns.
    pub prefill_pair_ns: f64,
    /// Prefill attention per Σ n² (the masked upper triangle a dense score
    /// matrix still computes), ns.
    pub prefill_square_ns: f64,
    /// Prefill attention per cached-or-new token it reads, Σ (c + n), ns:
    /// a short chunk on a long cache is bound by reading the cache.
    #[serde(default)]
    pub prefill_kv_token_ns: f64,
    /// Knots of the token table (tokens through the dense layers).
    pub token_knots: Vec<u32>,
    /// Dense-layer cost at each token knot, relative to the first, ns.
    pub token_ns: Vec<f64>,
    /// Knots of the row table (logit rows: sequences in the batch).
    pub row_knots: Vec<u32>,
    /// LM head and per-sequence cost at each row knot, relative to the first, ns.
    pub row_ns: Vec<f64>,
    /// Idle spells before an iteration, ms (from 0), at which the wake-up
    /// penalty was measured; empty when none was.
    #[serde(default)]
    pub idle_knots_ms: Vec<f64>,
    /// Extra time of the first iteration after each idle spell, ns:
    /// interpolated between knots, constant past the last.
    #[serde(default)]
    pub wake_ns: Vec<f64>,
    /// Segments `[from, to]` of the token table the fit let fall, because
    /// every repetition of the `to`-token shapes ran faster than every
    /// repetition of the same shapes at `from` tokens (see
    /// `calibrate::fit::falling_segments`). Empty: both tables rise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub falling_token_segments: Vec<[u32; 2]>,
}

/// Fit error over a set of shapes, in percent of the measured median.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitError {
    /// Shapes in the set.
    pub shapes: u32,
    /// Mean absolute percentage error.
    pub mape_pct: f64,
    /// Largest absolute percentage error.
    pub max_error_pct: f64,
    /// The same over the fitted shapes (how well the model shape fits at all).
    pub fitted_mape_pct: f64,
}

impl Profile {
    /// Reads and validates a profile file.
    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        let origin = path.display().to_string();
        let text = crate::input_file::read_config(path, "profile")
            .map_err(|e| ProfileError::new(&origin, "", e.reason))?;
        Self::from_toml_str(&text, &origin)
    }

    /// Parses and validates profile text; `origin` names it in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Profile, ProfileError> {
        let de = toml::Deserializer::new(text);
        let p: Profile = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let key = if path == "." { String::new() } else { path };
            let msg = e.into_inner().message().trim().replace('\n', "; ");
            ProfileError::new(origin, key, msg)
        })?;
        p.validate()
            .map_err(|(k, m)| ProfileError::new(origin, k, m))?;
        Ok(p)
    }

    /// The profile as TOML text.
    pub fn to_toml_string(&self) -> String {
        toml::to_string(self).expect("profiles serialize")
    }

    /// A datasheet-shaped description of the device built only from measured
    /// figures, so scenario checks and memory plans work on a profile: the
    /// effective throughput of the largest measured prefill, the effective
    /// weight-streaming bandwidth of a one-sequence decode and the measured
    /// host copy bandwidth (for links and swapping alike).
    pub fn hardware(&self, origin: &str) -> HardwareSpec {
        let params = self.dense_params();
        let weight_bytes = self.memory.weight_bytes;
        let mut flops: f64 = 0.0;
        let mut bw: f64 = 0.0;
        for s in self.samples.iter().filter(|s| s.fitted) {
            let b = s.shape();
            let secs = s.median_ns.max(1) as f64 * 1e-9;
            if b.decode_seqs == 0 {
                flops = flops.max(2.0 * params * b.tokens() as f64 / secs);
            }
            if b.prefill_seqs == 0 && b.decode_seqs == 1 {
                bw = bw.max(weight_bytes / secs);
            }
        }
        if let Some(b) = self.bench.as_ref().filter(|_| flops == 0.0) {
            // No samples: the chip's peaks at the fitted efficiencies.
            (flops, bw) = b.effective();
        }
        let host = self.measurement.host_copy_bytes_per_s;
        // Measured figures carry about three significant digits.
        let sig = |x: f64| {
            let scale = 10f64.powi(3 - x.abs().log10().ceil() as i32);
            (x * scale).round() / scale
        };
        HardwareSpec {
            name: self.device.name.clone(),
            bf16_tflops: sig((flops / 1e12).max(1e-6)),
            fp8_tflops: None,
            int8_tops: None,
            fp4_tflops: None,
            memory_gib: sig(self.memory.device_bytes / GIB),
            memory_bw_tbps: sig((if bw > 0.0 { bw } else { host } / 1e12).max(1e-9)),
            interconnect_gbps: sig(host / 1e9),
            interconnect_latency_us: 0.0,
            allreduce_latency_us: None,
            allreduce_busbw_gbps: None,
            pcie_gbps: sig(host / 1e9),
            gpus_per_node: 1,
            network_gbps: None,
            network_latency_us: None,
            // A calibration measures time, not power.
            tdp_w: None,
            idle_w: None,
            source: match &self.bench {
                Some(b) => format!(
                    "calibration profile {origin}: {}'s peaks at the efficiencies `servesim calibrate --from-bench` fitted to measured results, not a datasheet",
                    b.chip
                ),
                None => format!(
                    "calibration profile {origin}: effective figures measured by `servesim calibrate` on {} ({}), not a datasheet",
                    self.device.spec, self.device.driver
                ),
            },
        }
    }

    /// Parameters of the matrices every token passes (layers + LM head).
    fn dense_params(&self) -> f64 {
        let m = &self.model;
        let (h, d) = (m.hidden_size as f64, m.head_dim as f64);
        let attn = h * d * (2.0 * m.num_heads as f64 + 2.0 * m.num_kv_heads as f64);
        let mlp = 3.0 * h * m.intermediate_size as f64;
        m.layers as f64 * (attn + mlp) + h * m.vocab_size as f64
    }

    /// The replica's memory as the real runtime measured it: usable memory
    /// (× `gpu_memory_utilization`) less the measured weights, activations
    /// and runtime, divided into KV blocks of the measured bytes per token.
    pub fn memory_plan(&self, engine: &EngineCfg) -> MemoryPlan {
        let m = &self.memory;
        let usable = m.device_bytes * engine.gpu_memory_utilization;
        let kv_cache_bytes = usable - m.weight_bytes - m.activation_bytes - m.runtime_bytes;
        let block_bytes = m.kv_bytes_per_token * engine.block_size as f64;
        let kv_blocks = if kv_cache_bytes > 0.0 {
            (kv_cache_bytes / block_bytes).floor() as u64
        } else {
            0
        };
        let stage = StageMemory {
            layers: self.model.layers,
            weight_bytes: m.weight_bytes,
            activation_bytes: m.activation_bytes,
            kv_cache_bytes,
            kv_bytes_per_token: m.kv_bytes_per_token,
            kv_blocks,
            sequence_bytes: 0.0,
        };
        MemoryPlan {
            tensor_parallel: 1,
            pipeline_parallel: 1,
            expert_parallel: 1,
            device_bytes: m.device_bytes,
            usable_bytes: usable,
            stage: 0,
            stages: vec![stage],
            weight_bytes: m.weight_bytes,
            activation_bytes: m.activation_bytes,
            overhead_bytes: m.runtime_bytes,
            kv_cache_bytes,
            kv_bytes_per_token: m.kv_bytes_per_token,
            block_size: engine.block_size,
            kv_blocks_per_group: kv_blocks,
            kv_blocks,
            kv_tokens: kv_blocks * engine.block_size as u64,
            sequence_reserve_bytes: 0.0,
            kv_groups: None,
            layer_kinds: Vec::new(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small, hand-made profile: 2 ms per step plus 10 µs per token.
    pub fn example() -> Profile {
        Profile {
            version: PROFILE_VERSION,
            created_by: "test".into(),
            device: DeviceInfo {
                spec: "cpu".into(),
                name: "Test CPU".into(),
                driver: "linux".into(),
                threads: 2,
            },
            model: ProfileModel {
                name: "tiny".into(),
                source: "test".into(),
                layers: 2,
                hidden_size: 64,
                num_heads: 4,
                num_kv_heads: 2,
                head_dim: 16,
                intermediate_size: 128,
                vocab_size: 256,
                tied_embeddings: false,
                max_context: 1024,
                rope_theta: 10000.0,
                rms_norm_eps: 1e-5,
                attention_bias: false,
                rope_layout: "half".into(),
                dtype: "f32".into(),
                weights: WeightsInfo::Random { seed: 1 },
            },
            memory: ProfileMemory {
                device_bytes: 8.0 * GIB,
                weight_bytes: 1e6,
                kv_bytes_per_token: 512.0,
                activation_bytes: 1e6,
                runtime_bytes: 1e8,
                method: "test".into(),
            },
            measurement: MeasurementInfo {
                warmup: 1,
                repetitions: 3,
                quick: true,
                max_context: 1024,
                wall_s: 1.0,
                host_copy_bytes_per_s: 1e10,
                extra_rounds: 0,
                noise: vec![],
                attention: None,
                host: None,
            },
            fit: CostTerms {
                step_ns: 2e6,
                prefill_seq_ns: 0.0,
                decode_token_ns: 0.0,
                prefill_pair_ns: 0.0,
                prefill_square_ns: 0.0,
                prefill_kv_token_ns: 0.0,
                token_knots: vec![1, 1001],
                token_ns: vec![0.0, 1e7],
                row_knots: vec![1, 2],
                row_ns: vec![0.0, 0.0],
                falling_token_segments: vec![],
                idle_knots_ms: vec![],
                wake_ns: vec![],
            },
            held_out: FitError::default(),
            engine: None,
            elementwise: None,
            bench: None,
            samples: vec![Sample {
                kind: "decode".into(),
                fitted: true,
                prefill: vec![],
                decode: vec![17],
                idle_ms: 0.0,
                median_ns: 2_000_000,
                min_ns: 1_900_000,
                max_ns: 2_100_000,
                times_ns: vec![1_900_000, 2_000_000, 2_100_000],
                host_ns: None,
            }],
        }
    }

    #[test]
    fn round_trips_through_toml() {
        let p = example();
        let text = p.to_toml_string();
        let back = Profile::from_toml_str(&text, "p.toml").unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn measured_host_terms_and_attention_round_trip_and_are_checked_by_key() {
        let mut p = example();
        p.measurement.attention = Some("tiled:256".into());
        p.measurement.host = Some(MeasuredHost {
            step_ns: 74_000.0,
            seq_ns: 6_500.0,
            share_pct: 0.2,
            method: "cpu: the sampler".into(),
        });
        p.samples[0].host_ns = Some(80_000);
        let text = p.to_toml_string();
        assert_eq!(Profile::from_toml_str(&text, "p.toml").unwrap(), p);
        for (from, to, key) in [
            (
                "seq_ns = 6500.0",
                "seq_ns = -1.0",
                "measurement.host.seq_ns",
            ),
            (
                "share_pct = 0.2",
                "share_pct = 150.0",
                "measurement.host.share_pct",
            ),
            (
                "attention = \"tiled:256\"",
                "attention = \"tiled:0\"",
                "measurement.attention",
            ),
            (
                "attention = \"tiled:256\"",
                "attention = \"flash\"",
                "measurement.attention",
            ),
            ("host_ns = 80000", "host_ns = 9000000", "samples[0].host_ns"),
        ] {
            assert!(text.contains(from), "{from}");
            let e = Profile::from_toml_str(&text.replace(from, to), "p.toml").unwrap_err();
            assert_eq!(e.key, key, "{to}: {e}");
        }
        // A profile written before either existed still reads.
        let old = example().to_toml_string();
        assert!(!old.contains("\nattention = ") && !old.contains("host_ns"));
        assert!(Profile::from_toml_str(&old, "p.toml").is_ok());
    }

    #[test]
    fn an_engine_profile_round_trips_with_its_probe_and_served_weights() {
        let mut p = example();
        p.model.weights = WeightsInfo::Served {
            url: "http://127.0.0.1:8000".into(),
            model: "HuggingFaceTB/SmolLM2-135M-Instruct".into(),
        };
        p.engine = Some(EngineProbe {
            url: "http://127.0.0.1:8000".into(),
            server: "vllm (vLLM-style /metrics)".into(),
            served_model: "HuggingFaceTB/SmolLM2-135M-Instruct".into(),
            requests: 85,
            budget_s: 240.0,
            host: HostTerms {
                ttft_floor_ns: 11e6,
                request_ns: 1.1e6,
                step_ns: 8e6,
                seq_ns: 3e5,
            },
            concurrency: vec![[1, 1], [8, 8]],
            findings: vec!["no prefix caching seen".into()],
            batching: Some(EngineBatching {
                policy: Some(crate::config::BatchPolicyKind::Sarathi),
                max_batched_tokens: Some(2048),
                max_num_seqs: Some(256),
                ubatch_tokens: None,
                source: "--max-num-batched-tokens and --max-num-seqs".into(),
            }),
        });
        let text = p.to_toml_string();
        assert!(text.contains("[engine.host]"), "{text}");
        let back = Profile::from_toml_str(&text, "p.toml").unwrap();
        assert_eq!(back, p);
        assert!(back
            .model
            .weights
            .describe()
            .contains("served at http://127.0.0.1:8000"));
        // A candle profile writes no engine table.
        assert!(!example().to_toml_string().contains("[engine"));
    }

    #[test]
    fn errors_name_the_key() {
        let text = example()
            .to_toml_string()
            .replace("version = 1", "version = 9");
        let e = Profile::from_toml_str(&text, "p.toml").unwrap_err();
        assert_eq!(e.key, "version");
        assert!(
            e.to_string()
                .starts_with("p.toml: version: profile format 9"),
            "{e}"
        );
        let text = example()
            .to_toml_string()
            .replace("token_ns = [0.0, 10000000.0]", "token_ns = [1.0, 2.0]");
        let e = Profile::from_toml_str(&text, "p.toml").unwrap_err();
        assert_eq!(e.key, "fit.token_ns", "{e}");
        let text = example()
            .to_toml_string()
            .replace("[fit]", "[fit]\nsurprise = 1");
        let e = Profile::from_toml_str(&text, "p.toml").unwrap_err();
        assert!(e.to_string().contains("unknown field `surprise`"), "{e}");
        assert_eq!(e.key, "fit.surprise");
    }

    #[test]
    fn memory_plan_divides_what_the_runtime_left_into_blocks() {
        let p = example();
        let e = EngineCfg {
            gpu_memory_utilization: 0.5,
            block_size: 16,
            ..EngineCfg::default()
        };
        let plan = p.memory_plan(&e);
        let left = 4.0 * GIB - 1e6 - 1e6 - 1e8;
        assert_eq!(plan.kv_blocks, (left / (512.0 * 16.0)).floor() as u64);
        assert_eq!(plan.kv_tokens, plan.kv_blocks * 16);
    }

    #[test]
    fn hardware_figures_come_from_the_samples() {
        let p = example();
        let h = p.hardware("p.toml");
        // One decode of 1 MB of weights in 2 ms: 0.5 GB/s.
        assert!(
            (h.memory_bw_tbps - 0.5e-3).abs() < 1e-12,
            "{}",
            h.memory_bw_tbps
        );
        assert_eq!(h.pcie_gbps, 10.0);
        assert!(h.source.contains("not a datasheet"));
    }
}
