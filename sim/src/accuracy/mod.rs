//! Accuracy against measured benchmarks: reads the result files a team
//! already has (vLLM's `bench serve --save-result` JSON, genai-perf / AIPerf
//! profile exports, GuideLLM reports, inference-perf reports, NVIDIA
//! aiconfigurator's silicon CSV, servesim's own `observe` folders), turns
//! each measured point into a scenario, simulates it, and says how far the
//! prediction is from the measurement.
//!
//! * one reader per format (`vllm`, `genai_perf`, `guidellm`,
//!   `inference_perf`, `aiconfigurator`, `observe`), each producing
//!   [`MeasuredPoint`]s; [`read`] detects the format from the content;
//! * [`express`] builds a point's scenario table (what the file records,
//!   over the command's settings, over the base scenario) — whether a point
//!   can be expressed is decided by the normal scenario resolution, so it
//!   grows with the catalog;
//! * [`compare`] runs the points in parallel and computes per-point and
//!   per-group errors; [`coverage`] only resolves them;
//! * [`results`] writes the CSV and JSON files.

pub mod aiconfigurator;
pub mod compare;
pub mod coverage;
pub mod express;
pub mod genai_perf;
pub mod guidellm;
pub mod inference_perf;
mod json;
pub mod observe;
pub mod read;
pub mod results;
pub mod vllm;

pub use compare::{compare, AccuracyResults, Comparison, GroupError, PointOutcome};
pub use coverage::{coverage, Coverage};
pub use express::{Settings, Unexpressible};
pub use read::{read, read_path, Format};

use serde::Serialize;

/// An accuracy error: one line naming the file (and row or key) and what is
/// wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct AccuracyError(pub String);

impl AccuracyError {
    pub fn new(msg: impl Into<String>) -> Self {
        AccuracyError(msg.into())
    }
}

/// A latency metric as benchmark tools report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Time to first token.
    Ttft,
    /// Time per output token after the first: (E2E − TTFT) / (output − 1).
    Tpot,
    /// Inter-token latency: the gaps between streamed tokens.
    Itl,
    /// End-to-end request latency.
    E2e,
}

impl Metric {
    pub const ALL: [Metric; 4] = [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2e];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::Tpot => "tpot",
            Metric::Itl => "itl",
            Metric::E2e => "e2e",
        }
    }
}

/// A statistic of a latency distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stat {
    Mean,
    P50,
    P90,
    P95,
    P99,
}

impl Stat {
    pub fn name(self) -> &'static str {
        match self {
            Stat::Mean => "mean",
            Stat::P50 => "p50",
            Stat::P90 => "p90",
            Stat::P95 => "p95",
            Stat::P99 => "p99",
        }
    }

    /// The statistic a percentile key names (`median`, `p50`, `p99`, `avg`).
    pub fn from_key(k: &str) -> Option<Stat> {
        Some(match k {
            "mean" | "avg" => Stat::Mean,
            "median" | "p50" => Stat::P50,
            "p90" => Stat::P90,
            "p95" => Stat::P95,
            "p99" => Stat::P99,
            _ => return None,
        })
    }
}

/// One measured value: `metric`'s `stat`, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Measurement {
    pub metric: Metric,
    pub stat: Stat,
    pub ms: f64,
}

/// How the benchmark offered its load.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Load {
    /// A closed loop of `users` clients, each sending its next request when
    /// the last one ends (vLLM's `--max-concurrency` with an infinite rate,
    /// genai-perf's `--concurrency`, GuideLLM's `concurrent`).
    Concurrency { users: u32 },
    /// Open-loop arrivals at `rate` requests/s; `cv` is the coefficient of
    /// variation of the gaps (1: Poisson).
    Rate { rate: f64, cv: f64 },
}

/// Prompt or output lengths as the file records them.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Lengths {
    /// Every request the same (aiconfigurator's `isl`/`osl`).
    Fixed { tokens: u32 },
    /// The per-request lengths the benchmark sent.
    Recorded { tokens: Vec<u32> },
    /// Only a mean is recorded.
    Mean { tokens: f64 },
}

impl Lengths {
    pub fn mean(&self) -> f64 {
        match self {
            Lengths::Fixed { tokens } => *tokens as f64,
            Lengths::Recorded { tokens } if tokens.is_empty() => 0.0,
            Lengths::Recorded { tokens } => {
                tokens.iter().map(|&t| t as f64).sum::<f64>() / tokens.len() as f64
            }
            Lengths::Mean { tokens } => *tokens,
        }
    }
}

/// One worker's parallel layout as aiconfigurator records it (`tp × pp ×
/// attention_dp` GPUs; MoE layers split `moe_tp × moe_ep`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WorkerLayout {
    pub tp: u32,
    pub pp: u32,
    pub attention_dp: u32,
    pub moe_tp: u32,
    pub moe_ep: u32,
}

/// How the measured deployment was laid out, when the file says.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum Deployment {
    /// Aggregated serving: `workers` engine instances of one layout.
    Agg { workers: u32, layout: WorkerLayout },
    /// Prefill/decode disaggregation.
    Disagg {
        prefill_workers: u32,
        prefill: WorkerLayout,
        decode_workers: u32,
        decode: WorkerLayout,
    },
    /// Disaggregated, with worker counts or layouts not recorded.
    DisaggUnrecorded,
}

/// One measured operating point of a real deployment, with what its file
/// records about the setup. `None` means "not recorded": the command's
/// settings or the base scenario supply it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MeasuredPoint {
    /// The file (and row, or benchmark index) it came from.
    pub source: String,
    /// The row's own id when the file has one.
    pub id: String,
    pub format: Format,
    pub engine: Option<String>,
    pub engine_version: Option<String>,
    /// Hugging Face id or name as recorded.
    pub model: Option<String>,
    /// The accelerator as recorded (aiconfigurator's system name).
    pub chip: Option<String>,
    /// Weight precision as recorded (`fp8`, `fp4`, `bf16`).
    pub precision: Option<String>,
    /// Quantization modes (aiconfigurator's `gemm_quant_mode`), tried
    /// before `precision` when the catalog knows them.
    pub quant_mode: Option<String>,
    pub deployment: Option<Deployment>,
    pub load: Option<Load>,
    pub prompt: Option<Lengths>,
    pub output: Option<Lengths>,
    /// Requests the benchmark completed.
    pub requests: Option<u64>,
    pub measured: Vec<Measurement>,
    /// For `observe` folders: the run is the scenario's own workload.
    pub own_workload: bool,
}

impl MeasuredPoint {
    /// An empty point of `format` from `source`.
    pub fn new(format: Format, source: impl Into<String>) -> Self {
        let source = source.into();
        MeasuredPoint {
            id: source.clone(),
            source,
            format,
            engine: None,
            engine_version: None,
            model: None,
            chip: None,
            precision: None,
            quant_mode: None,
            deployment: None,
            load: None,
            prompt: None,
            output: None,
            requests: None,
            measured: Vec::new(),
            own_workload: false,
        }
    }

    /// Records `ms` for `metric`'s `stat` when it is a finite, non-negative
    /// number (a tool writes NaN or nothing for a metric it did not see).
    pub fn push(&mut self, metric: Metric, stat: Stat, ms: Option<f64>) {
        if let Some(ms) = ms.filter(|v| v.is_finite() && *v >= 0.0) {
            if !self
                .measured
                .iter()
                .any(|m| m.metric == metric && m.stat == stat)
            {
                self.measured.push(Measurement { metric, stat, ms });
            }
        }
    }

    /// The closed-loop concurrency, when the load is one.
    pub fn concurrency(&self) -> Option<u32> {
        match self.load {
            Some(Load::Concurrency { users }) => Some(users),
            _ => None,
        }
    }
}
