//! Scenario files: the serde types of a scenario TOML, their defaults, the
//! validation of every value, and the resolution of catalog presets into a
//! [`Scenario`] the simulator runs.
//!
//! Every table denies unknown keys; every error names the file, the key path
//! and what is allowed, on one line.

use crate::catalog::{self, Dtype, HardwareSpec, ModelArch};
use crate::memory::MemoryPlan;
use crate::parallel::Parallelism;
use crate::profile::Profile;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

mod enum_hint;
mod fleet_cfg;
pub mod ranges;
mod tenants_cfg;
pub mod units;
mod workload_cfg;
pub use fleet_cfg::*;
pub use tenants_cfg::*;
pub use workload_cfg::*;

/// A scenario error: where (file and key path) and what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{origin}: {key}{sep}{message}", sep = if key.is_empty() { "" } else { ": " })]
pub struct ScenarioError {
    /// The file (or "<string>") the scenario came from.
    pub origin: String,
    /// Dotted key path, e.g. `engine.block_size`; empty for whole-file errors.
    pub key: String,
    pub message: String,
}

impl ScenarioError {
    fn new(origin: &str, key: impl Into<String>, message: impl Into<String>) -> Self {
        ScenarioError {
            origin: origin.to_string(),
            key: key.into(),
            message: message.into(),
        }
    }
}

/// The scenario file as written (before presets are resolved).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// Names the run and its default output folder `out/<name>/`.
    pub name: String,
    /// Free text shown by `check`.
    #[serde(default)]
    pub description: Option<String>,
    /// Master seed: every random stream derives from (seed, stream name).
    #[serde(default)]
    pub seed: u64,
    pub horizon: HorizonCfg,
    /// Optional with `[hardware] profile`: the profile names the model.
    #[serde(default)]
    pub model: ModelCfg,
    pub hardware: HardwareCfg,
    #[serde(default)]
    pub fleet: FleetCfg,
    #[serde(default)]
    pub engine: EngineCfg,
    /// May be left out when every `[[tenants]]` entry has its own workload.
    #[serde(default)]
    pub workload: WorkloadCfg,
    #[serde(default)]
    pub slo: Option<SloCfg>,
    #[serde(default)]
    pub metrics: MetricsCfg,
    /// Tenants sharing the fleet (empty: one anonymous tenant).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<TenantCfg>,
    /// How replicas order their waiting queues among tenants.
    #[serde(default, skip_serializing_if = "FairnessCfg::is_default")]
    pub fairness: FairnessCfg,
    /// Fleet-wide admission limits.
    #[serde(default, skip_serializing_if = "AdmissionCfg::is_default")]
    pub admission: AdmissionCfg,
}

/// When the run stops: after `requests` arrivals and/or at `duration_s`.
/// With a duration, requests still unfinished then are reported as in flight;
/// with only a request count the run drains every request.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HorizonCfg {
    #[serde(default)]
    pub requests: Option<u64>,
    #[serde(default)]
    pub duration_s: Option<f64>,
}

/// The served model: a catalog preset or an inline architecture.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelCfg {
    #[serde(default)]
    pub preset: Option<String>,
    #[serde(default)]
    pub architecture: Option<ModelArch>,
    #[serde(default = "default_weight_dtype")]
    pub weight_dtype: Dtype,
    /// Defaults to the activation dtype (bf16, or fp16 for fp16 weights), as vLLM's `auto`.
    #[serde(default)]
    pub kv_dtype: Option<Dtype>,
}

fn default_weight_dtype() -> Dtype {
    Dtype::Bf16
}

impl Default for ModelCfg {
    fn default() -> Self {
        ModelCfg {
            preset: None,
            architecture: None,
            weight_dtype: default_weight_dtype(),
            kv_dtype: None,
        }
    }
}

/// The accelerator: a catalog preset, an inline datasheet (`[hardware.spec]`),
/// or a calibration profile (`profile`, a path relative to the scenario file)
/// that prices iterations with what `servesim calibrate` measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HardwareCfg {
    #[serde(default)]
    pub preset: Option<String>,
    #[serde(default)]
    pub spec: Option<HardwareSpec>,
    #[serde(default)]
    pub profile: Option<String>,
}

/// Router policy names (see `cluster::router`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RouterKind {
    RoundRobin,
    LeastOutstanding,
    Random,
    LeastKv,
    PowerOfTwo,
    SessionAffinity,
    PrefixAffinity,
    Weighted,
}

impl RouterKind {
    pub fn name(self) -> &'static str {
        match self {
            RouterKind::RoundRobin => "round-robin",
            RouterKind::LeastOutstanding => "least-outstanding",
            RouterKind::Random => "random",
            RouterKind::LeastKv => "least-kv",
            RouterKind::PowerOfTwo => "power-of-two",
            RouterKind::SessionAffinity => "session-affinity",
            RouterKind::PrefixAffinity => "prefix-affinity",
            RouterKind::Weighted => "weighted",
        }
    }
}

/// The fleet: identical replicas, each `tensor_parallel` × `pipeline_parallel`
/// GPUs (see `parallel` for the layout and `expert_parallel`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetCfg {
    #[serde(default = "one")]
    pub replicas: u32,
    #[serde(default = "one")]
    pub tensor_parallel: u32,
    #[serde(default = "default_router")]
    pub router: RouterKind,
    /// Pipeline stages per replica (GPipe / Megatron-LM pipeline parallelism).
    #[serde(default = "one")]
    pub pipeline_parallel: u32,
    /// Expert-parallel groups per stage for MoE models (GShard / DeepSpeed-MoE).
    #[serde(default = "one")]
    pub expert_parallel: u32,
    /// Seconds between the replicas' load reports to the router; 0: the
    /// router sees every change at once (see `cluster::view`).
    #[serde(default)]
    pub report_interval_s: f64,
    #[serde(default)]
    pub prefix_affinity: PrefixAffinityCfg,
    #[serde(default)]
    pub weighted: WeightedCfg,
    #[serde(default)]
    pub session_affinity: SessionAffinityCfg,
}

fn one() -> u32 {
    1
}
fn default_router() -> RouterKind {
    RouterKind::LeastOutstanding
}

impl Default for FleetCfg {
    fn default() -> Self {
        FleetCfg {
            replicas: 1,
            tensor_parallel: 1,
            router: default_router(),
            pipeline_parallel: 1,
            expert_parallel: 1,
            report_interval_s: 0.0,
            prefix_affinity: PrefixAffinityCfg::default(),
            weighted: WeightedCfg::default(),
            session_affinity: SessionAffinityCfg::default(),
        }
    }
}

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
    pub runtime: crate::cost::EngineRuntime,
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
        }
    }
}

/// One request stream: an arrival process with token-length distributions
/// (or length pairs), or a trace. Which keys go together is checked by
/// `workload_cfg::validate_workload`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadCfg {
    /// Required unless `trace` is given.
    #[serde(default)]
    pub arrival: Option<ArrivalCfg>,
    /// Required (with `output_tokens`) unless `trace` or `length_pairs` is given.
    #[serde(default)]
    pub prompt_tokens: Option<LengthDist>,
    #[serde(default)]
    pub output_tokens: Option<LengthDist>,
    /// Replay a trace (or, for ServeGen, generate from its per-client
    /// descriptors) instead of `arrival` and length distributions.
    #[serde(default)]
    pub trace: Option<TraceCfg>,
    /// Sample (prompt, output) pairs jointly from a trace, keeping their
    /// correlation, instead of `prompt_tokens` and `output_tokens`.
    #[serde(default)]
    pub length_pairs: Option<LengthPairsCfg>,
    /// System prompts shared across requests (prefix structure).
    #[serde(default)]
    pub shared_prefix: Option<SharedPrefixCfg>,
    /// Multi-turn conversations (closed loop per conversation).
    #[serde(default)]
    pub conversation: Option<ConversationCfg>,
}

impl ScenarioFile {
    /// The long-run offered arrival rate (requests/s): the workload's, or
    /// the sum over tenants that bring their own workloads; `None` when any
    /// part has no rate (traces, closed loops).
    pub fn offered_rate(&self) -> Option<f64> {
        let own: Vec<&WorkloadCfg> = self
            .tenants
            .iter()
            .filter_map(|t| t.workload.as_ref())
            .collect();
        if own.is_empty() {
            return self.workload.mean_rate();
        }
        own.iter().map(|w| w.mean_rate()).sum()
    }
}

impl WorkloadCfg {
    /// Long-run mean arrival rate (requests/s) when the workload defines one.
    pub fn mean_rate(&self) -> Option<f64> {
        self.arrival.as_ref().and_then(ArrivalCfg::mean_rate)
    }
}

/// A set of system prompts prepended to requests: `variants` prompts of
/// `tokens` tokens, chosen with Zipf popularity of exponent `zipf_exponent`
/// (0 = uniform), as production chat fleets see a few hot system prompts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedPrefixCfg {
    pub variants: u32,
    pub tokens: u32,
    #[serde(default = "default_zipf")]
    pub zipf_exponent: f64,
    /// Mark these prefixes pinnable in the prefix cache (see
    /// `engine.pinned_prefix_blocks`).
    #[serde(default)]
    pub pin: bool,
}

fn default_zipf() -> f64 {
    1.0
}

/// Multi-turn conversations: every arrival opens a conversation of `turns`
/// turns; each later turn arrives `think_time_s` (exponential, mean) after
/// the previous answer, its prompt being the whole conversation so far plus
/// `follow_up_tokens` new tokens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationCfg {
    pub turns: LengthDist,
    pub think_time_s: f64,
    pub follow_up_tokens: LengthDist,
}

/// Inter-arrival process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "process", rename_all = "lowercase", deny_unknown_fields)]
pub enum ArrivalCfg {
    /// Exponential gaps at `rate` requests/s.
    Poisson { rate: f64 },
    /// Gamma-distributed gaps with mean 1/`rate` and coefficient of variation
    /// `cv` (cv > 1 is burstier than Poisson, cv < 1 more regular).
    Gamma { rate: f64, cv: f64 },
    /// Weibull-distributed gaps with mean 1/`rate` and coefficient of
    /// variation `cv` (the shape is solved from `cv`).
    Weibull { rate: f64, cv: f64 },
    /// On/off bursts: a two-state Markov-modulated Poisson process. The
    /// source stays on for exponential periods of mean `mean_on_s` (arrivals
    /// at `on_rate`), then off for periods of mean `mean_off_s` (arrivals at
    /// `off_rate`, default 0).
    #[serde(rename = "on-off")]
    OnOff {
        on_rate: f64,
        #[serde(default)]
        off_rate: f64,
        mean_on_s: f64,
        mean_off_s: f64,
    },
    /// Piecewise-constant rate: each step holds `rate` from its `start_s`
    /// until the next step; the last step lasts forever unless `period_s`
    /// repeats the schedule. Gaps have coefficient of variation `cv`
    /// (default 1: a non-homogeneous Poisson process).
    Piecewise {
        schedule: Vec<RateStep>,
        #[serde(default)]
        period_s: Option<f64>,
        #[serde(default)]
        cv: Option<f64>,
    },
    /// Diurnal sinusoid: rate(t) = mean_rate · (1 + amplitude · cos(2π (t −
    /// peak_s) / period_s)), period a day by default; `cv` as for `piecewise`.
    Diurnal {
        mean_rate: f64,
        amplitude: f64,
        #[serde(default = "default_diurnal_period")]
        period_s: f64,
        #[serde(default)]
        peak_s: f64,
        #[serde(default)]
        cv: Option<f64>,
    },
    /// Closed loop: `users` concurrent clients, each sending its next request
    /// a think time after the previous one ended (a load tester's
    /// concurrency mode). Users start spread uniformly over `ramp_up_s`.
    Closed {
        users: u32,
        #[serde(default)]
        think_time: Option<ThinkTime>,
        #[serde(default)]
        ramp_up_s: Option<f64>,
    },
}

impl ArrivalCfg {
    /// The long-run mean rate, or 0 for a closed loop (whose rate follows
    /// the fleet's speed); kept for callers that need a number.
    pub fn rate(&self) -> f64 {
        self.mean_rate().unwrap_or(0.0)
    }

    /// The long-run mean arrival rate, requests/s: for a piecewise schedule
    /// the mean over a period, or the last step's rate when it does not
    /// repeat; `None` for a closed loop.
    pub fn mean_rate(&self) -> Option<f64> {
        match self {
            ArrivalCfg::Poisson { rate }
            | ArrivalCfg::Gamma { rate, .. }
            | ArrivalCfg::Weibull { rate, .. } => Some(*rate),
            ArrivalCfg::OnOff {
                on_rate,
                off_rate,
                mean_on_s,
                mean_off_s,
            } => Some((on_rate * mean_on_s + off_rate * mean_off_s) / (mean_on_s + mean_off_s)),
            ArrivalCfg::Piecewise {
                schedule, period_s, ..
            } => workload_cfg::piecewise_mean_rate(schedule, *period_s),
            ArrivalCfg::Diurnal { mean_rate, .. } => Some(*mean_rate),
            ArrivalCfg::Closed { .. } => None,
        }
    }
}

fn default_diurnal_period() -> f64 {
    86_400.0
}

/// A token-length distribution; samples are rounded and clamped to [min, max]
/// (min defaults to 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields)]
pub enum LengthDist {
    Fixed {
        value: u32,
    },
    /// Uniform integers in [min, max].
    Uniform {
        min: u32,
        max: u32,
    },
    Normal {
        mean: f64,
        sd: f64,
        #[serde(default)]
        min: Option<u32>,
        #[serde(default)]
        max: Option<u32>,
    },
    /// Log-normal given by its mean and coefficient of variation.
    Lognormal {
        mean: f64,
        cv: f64,
        #[serde(default)]
        min: Option<u32>,
        #[serde(default)]
        max: Option<u32>,
    },
    /// Zipf on 1..=`n`: P(k) ∝ k^(−`exponent`).
    Zipf {
        exponent: f64,
        n: u32,
        #[serde(default)]
        min: Option<u32>,
        #[serde(default)]
        max: Option<u32>,
    },
    /// An empirical distribution: a PMF or histogram `file`, inline
    /// `values` (with optional `weights`), or the `column` of a `trace`.
    Empirical {
        #[serde(default)]
        file: Option<String>,
        #[serde(default)]
        values: Option<Vec<u32>>,
        #[serde(default)]
        weights: Option<Vec<f64>>,
        #[serde(default)]
        trace: Option<Box<TraceCfg>>,
        #[serde(default)]
        column: Option<LengthColumn>,
        #[serde(default)]
        min: Option<u32>,
        #[serde(default)]
        max: Option<u32>,
    },
}

impl LengthDist {
    /// The largest value the distribution can produce, if bounded.
    pub fn upper_bound(&self) -> Option<u32> {
        match *self {
            LengthDist::Fixed { value } => Some(value),
            LengthDist::Uniform { max, .. } => Some(max),
            LengthDist::Normal { max, .. } | LengthDist::Lognormal { max, .. } => max,
            LengthDist::Zipf { n, max, .. } => Some(max.map_or(n, |m| m.min(n))),
            LengthDist::Empirical { max, .. } => max,
        }
    }
}

/// Latency targets. A request meets its SLO when TTFT ≤ `ttft_ms` and (for
/// requests with more than one output token) TPOT ≤ `tpot_ms`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SloCfg {
    pub ttft_ms: f64,
    pub tpot_ms: f64,
}

/// What the run records.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsCfg {
    /// Sampling interval of `timeseries.csv`, seconds.
    #[serde(default = "default_ts_interval")]
    pub timeseries_interval_s: f64,
    /// What `timeseries.csv` holds: a row per replica per tick (default),
    /// one row per tick summed over the fleet, or nothing.
    #[serde(default)]
    pub timeseries: TimeseriesMode,
}

/// `[metrics] timeseries`: how the time series is kept (see `guard` for why
/// a long run may need it coarser).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeseriesMode {
    /// One row per replica per tick.
    #[default]
    PerReplica,
    /// One row per tick, summed over replicas (`replica` = "all").
    Fleet,
    /// No time series (`timeseries.csv` has its header only).
    Off,
}

fn default_ts_interval() -> f64 {
    1.0
}

impl Default for MetricsCfg {
    fn default() -> Self {
        MetricsCfg {
            timeseries_interval_s: default_ts_interval(),
            timeseries: TimeseriesMode::default(),
        }
    }
}

/// A validated scenario with presets resolved: what the simulator runs.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub file: ScenarioFile,
    /// Where it came from (a path or "<string>"), for messages.
    pub origin: String,
    pub model: ModelArch,
    /// Where the model architecture came from.
    pub model_source: String,
    pub hardware: HardwareSpec,
    pub weight_dtype: Dtype,
    pub kv_dtype: Dtype,
    pub max_model_len: u32,
    pub memory: MemoryPlan,
    /// How each replica lays the model out over its GPUs.
    pub parallel: Parallelism,
    /// Folder that relative paths in the scenario (trace files) resolve
    /// against: the scenario file's folder, or "." for in-memory text.
    pub base_dir: PathBuf,
    /// The calibration profile `[hardware] profile` names, with its resolved
    /// path: the run is priced by it (`profiled::Profiled`).
    pub profile: Option<(String, std::sync::Arc<Profile>)>,
    /// Deprecation notes (old key names still read), for `check` and stderr.
    pub notes: Vec<String>,
}

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScenarioError::new(&origin, "", format!("cannot read file: {e}")))?;
        Self::from_toml_str(&text, &origin)
    }

    /// Parses and validates scenario text; `origin` names it in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let line = e
                .span()
                .map(|s| format!("line {}: ", line_of(text, s.start)))
                .unwrap_or_default();
            ScenarioError::new(
                origin,
                "",
                format!(
                    "{line}TOML syntax error: {}",
                    e.message().trim().replace('\n', "; ")
                ),
            )
        })?;
        Self::from_table(table, origin)
    }

    /// Validates an already-parsed table (sweeps edit the table, then call this).
    pub fn from_table(mut table: toml::Table, origin: &str) -> Result<Scenario, ScenarioError> {
        let notes =
            units::normalize(&mut table).map_err(|(k, m)| ScenarioError::new(origin, k, m))?;
        let file: ScenarioFile =
            serde_path_to_error::deserialize(toml::Value::Table(table.clone())).map_err(|e| {
                let path = e.path().to_string();
                let key = if path == "." { String::new() } else { path };
                let msg = e.into_inner().message().trim().replace('\n', "; ");
                let msg = enum_hint::hint(&table, &key, &msg).unwrap_or(msg);
                ScenarioError::new(origin, key, msg)
            })?;
        let mut s = Self::from_file(file, origin)?;
        s.notes = notes;
        Ok(s)
    }

    /// Validates the values and resolves presets.
    pub fn from_file(file: ScenarioFile, origin: &str) -> Result<Scenario, ScenarioError> {
        let err = |key: &str, msg: String| ScenarioError::new(origin, key, msg);
        validate(&file).map_err(|(k, m)| err(&k, m))?;

        let profile = load_profile(&file.hardware, origin).map_err(|(k, m)| err(&k, m))?;
        let (model, model_source) = match (&file.model.preset, &file.model.architecture) {
            (None, None) if profile.is_some() => {
                let (path, p) = profile.as_ref().expect("checked");
                (
                    p.model.arch(),
                    format!("calibration profile {path} ({})", p.model.source),
                )
            }
            (Some(_), Some(_)) => {
                return Err(err(
                    "model",
                    "give either `preset` or `[model.architecture]`, not both".into(),
                ))
            }
            (None, None) => {
                return Err(err(
                    "model",
                    format!(
                        "missing `preset` (one of: {}) or an inline `[model.architecture]`",
                        catalog::model_keys().join(", ")
                    ),
                ))
            }
            (Some(p), None) => match catalog::model(p) {
                Some((m, src)) => (m, src.to_string()),
                None => {
                    return Err(err(
                        "model.preset",
                        format!(
                            "unknown model preset {p:?}; known: {}",
                            catalog::model_keys().join(", ")
                        ),
                    ))
                }
            },
            (None, Some(a)) => {
                validate_arch(a).map_err(|(k, m)| err(&format!("model.architecture.{k}"), m))?;
                let mut a = a.clone();
                if a.name.is_empty() {
                    a.name = "custom".into();
                }
                (a, "inline [model.architecture]".to_string())
            }
        };

        if let Some((path, p)) = &profile {
            check_profile_model(&model, p, path).map_err(|(k, m)| err(&k, m))?;
        }
        let hardware = match (&file.hardware.preset, &file.hardware.spec) {
            (None, None) if profile.is_some() => {
                let (path, p) = profile.as_ref().expect("checked");
                p.hardware(path)
            }
            (Some(_), Some(_)) => {
                return Err(err(
                    "hardware",
                    "give either `preset` or `[hardware.spec]`, not both".into(),
                ))
            }
            (None, None) => {
                return Err(err(
                    "hardware",
                    format!(
                        "missing `preset` (one of: {}), an inline `[hardware.spec]` or a calibration `profile`",
                        catalog::hardware_keys().join(", ")
                    ),
                ))
            }
            (Some(p), None) => catalog::hardware(p).ok_or_else(|| {
                err(
                    "hardware.preset",
                    format!(
                        "unknown hardware preset {p:?}; known: {}",
                        catalog::hardware_keys().join(", ")
                    ),
                )
            })?,
            (None, Some(s)) => {
                validate_hw(s).map_err(|(k, m)| err(&format!("hardware.spec.{k}"), m))?;
                let mut s = s.clone();
                if s.name.is_empty() {
                    s.name = "custom".into();
                }
                if s.source.is_empty() {
                    s.source = "inline [hardware.spec]".into();
                }
                s
            }
        };

        let mut weight_dtype = file.model.weight_dtype;
        if weight_dtype == Dtype::Fp32 {
            // Allowed for completeness (e.g. CPU calibration); nothing to check.
        }
        let mut kv_dtype = match file.model.kv_dtype {
            Some(d @ (Dtype::Bf16 | Dtype::Fp16 | Dtype::Fp8 | Dtype::Fp32)) => d,
            Some(d) => {
                return Err(err(
                    "model.kv_dtype",
                    format!("KV cache dtype {d} is not supported; allowed: bf16, fp16, fp8, fp32"),
                ))
            }
            None if weight_dtype == Dtype::Fp16 => Dtype::Fp16,
            None if weight_dtype == Dtype::Fp32 => Dtype::Fp32,
            None => Dtype::Bf16,
        };

        if let Some((_, p)) = &profile {
            // The profile measured one dtype for weights and cache alike.
            let d = p.model.dtype().expect("validated profile dtype");
            weight_dtype = d;
            kv_dtype = d;
            let f = &file.fleet;
            if f.tensor_parallel != 1 || f.pipeline_parallel != 1 || f.expert_parallel != 1 {
                return Err(err(
                    "fleet",
                    "a calibration profile measures one device: tensor_parallel, \
                     pipeline_parallel and expert_parallel must be 1"
                        .into(),
                ));
            }
        }
        let tp = file.fleet.tensor_parallel;
        if model.num_heads % tp != 0 {
            return Err(err(
                "fleet.tensor_parallel",
                format!(
                    "{} attention heads of {} cannot be split over {tp} GPUs; use a divisor of {}",
                    model.num_heads, model.name, model.num_heads
                ),
            ));
        }
        if model.num_kv_heads % tp != 0 && tp % model.num_kv_heads != 0 {
            return Err(err(
                "fleet.tensor_parallel",
                format!(
                    "{} KV heads of {} cannot be split or replicated over {tp} GPUs",
                    model.num_kv_heads, model.name
                ),
            ));
        }

        let max_model_len = match file.engine.max_model_len {
            Some(l) if l > model.max_context => {
                return Err(err(
                    "engine.max_model_len",
                    format!(
                        "{l} exceeds the context length of {} ({})",
                        model.name, model.max_context
                    ),
                ))
            }
            Some(l) => l,
            None => model.max_context,
        };

        let parallel = Parallelism {
            tensor: tp,
            pipeline: file.fleet.pipeline_parallel,
            expert: file.fleet.expert_parallel,
        };
        parallel
            .validate(&model, &hardware)
            .map_err(|(k, m)| err(&k, m))?;

        let mut memory = match &profile {
            Some((_, p)) => p.memory_plan(&file.engine),
            None => MemoryPlan::new(
                &model,
                &hardware,
                weight_dtype,
                kv_dtype,
                &parallel,
                &file.engine,
            ),
        };
        if let Some(sp) = &file.engine.speculative {
            if parallel.pipeline > 1 || parallel.expert > 1 {
                return Err(err(
                    "engine.speculative",
                    "speculative decoding is modelled for tensor parallelism only; \
                     set fleet.pipeline_parallel and fleet.expert_parallel to 1"
                        .into(),
                ));
            }
            if let Some((draft, _)) = sp.draft_model.as_ref().and_then(|m| catalog::model(m)) {
                if draft.num_heads % tp != 0 {
                    return Err(err(
                        "engine.speculative.draft_model",
                        format!(
                            "draft {} has {} heads, not divisible by tensor_parallel = {tp}",
                            draft.name, draft.num_heads
                        ),
                    ));
                }
                // KV heads split over the TP group, replicated below one per GPU.
                let kv_heads = (draft.num_kv_heads as f64 / tp as f64).ceil();
                let draft_kv =
                    2.0 * draft.layers as f64 * kv_heads * draft.head_dim as f64 * kv_dtype.bytes();
                let draft_weights = draft.total_params() * weight_dtype.bytes() / tp as f64;
                memory.add_resident_model(draft_weights, draft_kv);
            }
        }
        if file.engine.pinned_prefix_blocks >= memory.kv_blocks.max(1) {
            return Err(err(
                "engine.pinned_prefix_blocks",
                format!(
                    "{} pinned blocks would take the whole KV cache of {} blocks; pin fewer",
                    file.engine.pinned_prefix_blocks, memory.kv_blocks
                ),
            ));
        }
        memory
            .check_fits(
                &model,
                &hardware,
                weight_dtype,
                max_model_len,
                file.engine.max_model_len.is_some(),
            )
            .map_err(|(k, m)| err(&k, m))?;

        Ok(Scenario {
            origin: origin.to_string(),
            model,
            model_source,
            hardware,
            weight_dtype,
            kv_dtype,
            max_model_len,
            memory,
            parallel,
            base_dir: base_dir_of(origin),
            profile,
            file,
            notes: Vec::new(),
        })
    }

    pub fn name(&self) -> &str {
        &self.file.name
    }

    pub fn seed(&self) -> u64 {
        self.file.seed
    }

    /// GPUs in the fleet.
    pub fn gpus(&self) -> u32 {
        self.file.fleet.replicas * self.parallel.gpus()
    }
}

/// The folder of the scenario file named by `origin` ("." when the origin
/// is not a file, e.g. "<string>").
fn base_dir_of(origin: &str) -> PathBuf {
    if origin.starts_with('<') {
        return PathBuf::from(".");
    }
    match Path::new(origin).parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Loads the profile `[hardware] profile` names, relative to the scenario's
/// folder, and checks it is the only hardware source given.
fn load_profile(
    hw: &HardwareCfg,
    origin: &str,
) -> Result<Option<(String, std::sync::Arc<Profile>)>, Invalid> {
    let Some(rel) = &hw.profile else {
        return Ok(None);
    };
    if hw.preset.is_some() || hw.spec.is_some() {
        return Err((
            "hardware".into(),
            "give one of `preset`, `[hardware.spec]` or `profile`, not several".into(),
        ));
    }
    let dir = Path::new(origin).parent().unwrap_or(Path::new(""));
    let path = dir.join(rel);
    let p = Profile::load(&path).map_err(|e| ("hardware.profile".to_string(), e.to_string()))?;
    Ok(Some((path.display().to_string(), std::sync::Arc::new(p))))
}

/// A scenario that names a model besides its profile must name the one the
/// profile measured.
fn check_profile_model(model: &ModelArch, p: &Profile, path: &str) -> Result<(), Invalid> {
    let want = p.model.arch();
    let dims = |m: &ModelArch| {
        (
            m.layers,
            m.hidden_size,
            m.num_heads,
            m.num_kv_heads,
            m.head_dim,
            m.intermediate_size,
            m.vocab_size,
        )
    };
    if dims(model) != dims(&want) || model.is_moe() || model.mla().is_some() {
        return Err((
            "model".into(),
            format!(
                "the profile {path} measured {} ({} layers, hidden {}), not {}; drop the model \
                 preset/architecture to use the profile's model",
                want.name, want.layers, want.hidden_size, model.name
            ),
        ));
    }
    Ok(())
}

fn line_of(text: &str, byte: usize) -> usize {
    text[..byte.min(text.len())].matches('\n').count() + 1
}

type Invalid = (String, String);

fn positive(key: &str, v: f64) -> Result<(), Invalid> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err((key.into(), format!("must be a positive number, got {v}")))
    }
}

fn at_least(key: &str, v: u64, min: u64) -> Result<(), Invalid> {
    if v >= min {
        Ok(())
    } else {
        Err((key.into(), format!("must be at least {min}, got {v}")))
    }
}

fn validate(f: &ScenarioFile) -> Result<(), Invalid> {
    if f.name.trim().is_empty() {
        return Err(("name".into(), "must not be empty".into()));
    }
    if f.name.contains(['/', '\\']) || f.name.starts_with('.') {
        return Err((
            "name".into(),
            format!(
                "{:?} is used as a folder name: no slashes, no leading dot",
                f.name
            ),
        ));
    }
    match (f.horizon.requests, f.horizon.duration_s) {
        // A trace ends by itself: without a horizon the run replays it all.
        (None, None) if f.workload.trace.is_some() => {}
        (None, None) => {
            return Err((
                "horizon".into(),
                "give `requests` (a count), `duration_s` (seconds), or both".into(),
            ))
        }
        (Some(n), _) => at_least("horizon.requests", n, 1)?,
        _ => {}
    }
    if let Some(d) = f.horizon.duration_s {
        positive("horizon.duration_s", d)?;
    }
    at_least("fleet.replicas", f.fleet.replicas.into(), 1)?;
    at_least("fleet.tensor_parallel", f.fleet.tensor_parallel.into(), 1)?;
    at_least(
        "fleet.pipeline_parallel",
        f.fleet.pipeline_parallel.into(),
        1,
    )?;
    at_least("fleet.expert_parallel", f.fleet.expert_parallel.into(), 1)?;
    if f.fleet.replicas > 100_000 {
        return Err(("fleet.replicas".into(), "at most 100000".into()));
    }
    fleet_cfg::validate_routing(
        f.fleet.report_interval_s,
        &f.fleet.prefix_affinity,
        &f.fleet.weighted,
        &f.fleet.session_affinity,
    )?;
    let e = &f.engine;
    at_least("engine.max_num_seqs", e.max_num_seqs.into(), 1)?;
    at_least("engine.max_batched_tokens", e.max_batched_tokens.into(), 1)?;
    at_least("engine.block_size", e.block_size.into(), 1)?;
    if let Some(l) = e.max_model_len {
        at_least("engine.max_model_len", l.into(), 2)?;
    }
    if !(e.swap_space_gib.is_finite() && e.swap_space_gib >= 0.0) {
        return Err((
            "engine.swap_space_gib".into(),
            format!("must be ≥ 0 GiB, got {}", e.swap_space_gib),
        ));
    }
    if let Some(sp) = &e.speculative {
        validate_speculative(sp)?;
    }
    if e.pinned_prefix_blocks > 0 && !e.prefix_caching {
        return Err((
            "engine.pinned_prefix_blocks".into(),
            "pins cached prefixes: set engine.prefix_caching = true".into(),
        ));
    }
    if !(e.gpu_memory_utilization > 0.0 && e.gpu_memory_utilization <= 1.0) {
        return Err((
            "engine.gpu_memory_utilization".into(),
            format!("must be in (0, 1], got {}", e.gpu_memory_utilization),
        ));
    }
    if !tenants_cfg::per_tenant_workloads(f) {
        workload_cfg::validate_workload(&f.workload)?;
    }
    if let Some(sp) = &f.workload.shared_prefix {
        at_least("workload.shared_prefix.variants", sp.variants.into(), 1)?;
        at_least("workload.shared_prefix.tokens", sp.tokens.into(), 1)?;
        if !(sp.zipf_exponent.is_finite() && sp.zipf_exponent >= 0.0) {
            return Err((
                "workload.shared_prefix.zipf_exponent".into(),
                format!("must be ≥ 0 (0 = uniform), got {}", sp.zipf_exponent),
            ));
        }
    }
    if let Some(c) = &f.workload.conversation {
        validate_len("workload.conversation.turns", &c.turns)?;
        validate_len(
            "workload.conversation.follow_up_tokens",
            &c.follow_up_tokens,
        )?;
        if !(c.think_time_s.is_finite() && c.think_time_s >= 0.0) {
            return Err((
                "workload.conversation.think_time_s".into(),
                format!("must be ≥ 0 seconds, got {}", c.think_time_s),
            ));
        }
    }
    if f.workload.conversation.is_some() && f.workload.output_tokens.is_none() {
        return Err((
            "workload.conversation".into(),
            "follow-up turns draw their answers from workload.output_tokens: give it".into(),
        ));
    }
    if let Some(s) = &f.slo {
        positive("slo.ttft_ms", s.ttft_ms)?;
        positive("slo.tpot_ms", s.tpot_ms)?;
    }
    positive(
        "metrics.timeseries_interval_s",
        f.metrics.timeseries_interval_s,
    )?;
    if f.metrics.timeseries_interval_s < 1e-3 {
        return Err((
            "metrics.timeseries_interval_s".into(),
            "must be at least 0.001 s".into(),
        ));
    }
    ranges::check(f)?;
    tenants_cfg::validate_tenants(f)
}

fn validate_speculative(sp: &SpeculativeCfg) -> Result<(), Invalid> {
    let key = "engine.speculative";
    if sp.num_draft_tokens == 0 || sp.num_draft_tokens > 16 {
        return Err((
            format!("{key}.num_draft_tokens"),
            format!("must be in 1..=16, got {}", sp.num_draft_tokens),
        ));
    }
    if !(sp.acceptance_rate >= 0.0 && sp.acceptance_rate < 1.0) {
        return Err((
            format!("{key}.acceptance_rate"),
            format!("must be in [0, 1), got {}", sp.acceptance_rate),
        ));
    }
    match (&sp.draft_model, sp.draft_cost_fraction) {
        (Some(_), Some(_)) | (None, None) => Err((
            key.into(),
            "give exactly one of `draft_model` (a catalog preset) or `draft_cost_fraction` \
             (EAGLE/MTP head cost as a fraction of a target decode step)"
                .into(),
        )),
        (Some(m), None) => match catalog::model(m) {
            Some(_) => Ok(()),
            None => Err((
                format!("{key}.draft_model"),
                format!(
                    "unknown model preset {m:?}; known: {}",
                    catalog::model_keys().join(", ")
                ),
            )),
        },
        (None, Some(f)) if !(f > 0.0 && f <= 1.0) => Err((
            format!("{key}.draft_cost_fraction"),
            format!("must be in (0, 1], got {f}"),
        )),
        (None, Some(_)) => Ok(()),
    }
}

fn validate_len(key: &str, d: &LengthDist) -> Result<(), Invalid> {
    let clamp = |min: Option<u32>, max: Option<u32>| -> Result<(), Invalid> {
        if let Some(m) = min {
            at_least(&format!("{key}.min"), m.into(), 1)?;
        }
        if let (Some(lo), Some(hi)) = (min, max) {
            if lo > hi {
                return Err((format!("{key}.max"), format!("max {hi} is below min {lo}")));
            }
        }
        if let Some(hi) = max {
            at_least(&format!("{key}.max"), hi.into(), 1)?;
        }
        Ok(())
    };
    match *d {
        LengthDist::Fixed { value } => at_least(&format!("{key}.value"), value.into(), 1),
        LengthDist::Uniform { min, max } => {
            at_least(&format!("{key}.min"), min.into(), 1)?;
            clamp(Some(min), Some(max))
        }
        LengthDist::Normal { mean, sd, min, max } => {
            positive(&format!("{key}.mean"), mean)?;
            if !(sd.is_finite() && sd >= 0.0) {
                return Err((format!("{key}.sd"), format!("must be ≥ 0, got {sd}")));
            }
            clamp(min, max)
        }
        LengthDist::Lognormal { mean, cv, min, max } => {
            positive(&format!("{key}.mean"), mean)?;
            positive(&format!("{key}.cv"), cv)?;
            clamp(min, max)
        }
        LengthDist::Zipf {
            exponent,
            n,
            min,
            max,
        } => {
            positive(&format!("{key}.exponent"), exponent)?;
            at_least(&format!("{key}.n"), n.into(), 1)?;
            clamp(min, max)
        }
        LengthDist::Empirical { min, max, .. } => {
            workload_cfg::validate_empirical(key, d)?;
            clamp(min, max)
        }
    }
}

fn validate_arch(a: &ModelArch) -> Result<(), Invalid> {
    for (k, v) in [
        ("layers", a.layers),
        ("hidden_size", a.hidden_size),
        ("num_heads", a.num_heads),
        ("num_kv_heads", a.num_kv_heads),
        ("head_dim", a.head_dim),
        ("intermediate_size", a.intermediate_size),
        ("vocab_size", a.vocab_size),
        ("max_context", a.max_context),
    ] {
        at_least(k, v.into(), 1)?;
    }
    if a.num_heads % a.num_kv_heads != 0 {
        return Err((
            "num_kv_heads".into(),
            format!(
                "must divide num_heads ({}) for grouped-query attention, got {}",
                a.num_heads, a.num_kv_heads
            ),
        ));
    }
    a.validate_moe_and_mla()?;
    Ok(())
}

fn validate_hw(s: &HardwareSpec) -> Result<(), Invalid> {
    positive("bf16_tflops", s.bf16_tflops)?;
    if let Some(v) = s.fp8_tflops {
        positive("fp8_tflops", v)?;
    }
    if let Some(v) = s.int8_tops {
        positive("int8_tops", v)?;
    }
    positive("memory_gib", s.memory_gib)?;
    positive("memory_bw_tbyte_s", s.memory_bw_tbps)?;
    positive("interconnect_gbyte_s", s.interconnect_gbps)?;
    if !(s.interconnect_latency_us.is_finite() && s.interconnect_latency_us >= 0.0) {
        return Err((
            "interconnect_latency_us".into(),
            format!("must be ≥ 0, got {}", s.interconnect_latency_us),
        ));
    }
    if let Some(v) = s.allreduce_latency_us {
        if !(v.is_finite() && v >= 0.0) {
            return Err((
                "allreduce_latency_us".into(),
                format!("must be ≥ 0, got {v}"),
            ));
        }
    }
    if let Some(v) = s.allreduce_busbw_gbps {
        positive("allreduce_busbw_gbyte_s", v)?;
    }
    positive("pcie_gbyte_s", s.pcie_gbps)?;
    at_least("gpus_per_node", s.gpus_per_node.into(), 1)?;
    match (s.network_gbps, s.network_latency_us) {
        (Some(bw), Some(lat)) => {
            positive("network_gbyte_s", bw)?;
            if !(lat.is_finite() && lat >= 0.0) {
                return Err((
                    "network_latency_us".into(),
                    format!("must be ≥ 0, got {lat}"),
                ));
            }
        }
        (None, None) => {}
        (Some(_), None) => {
            return Err((
                "network_latency_us".into(),
                "give it together with network_gbyte_s (the scale-out network needs both)".into(),
            ))
        }
        (None, Some(_)) => {
            return Err((
                "network_gbyte_s".into(),
                "give it together with network_latency_us (the scale-out network needs both)"
                    .into(),
            ))
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub const MINIMAL: &str = r#"
name = "t"
seed = 7
[horizon]
requests = 100
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[engine]
max_model_len = 8192
[workload]
arrival = { process = "poisson", rate = 5.0 }
prompt_tokens = { dist = "fixed", value = 100 }
output_tokens = { dist = "fixed", value = 10 }
"#;

    fn err_of(text: &str) -> ScenarioError {
        Scenario::from_toml_str(text, "s.toml").unwrap_err()
    }

    #[test]
    fn minimal_scenario_resolves_with_defaults() {
        let s = Scenario::from_toml_str(MINIMAL, "s.toml").unwrap();
        assert_eq!(s.model.name, "Llama-3.1-8B");
        assert_eq!(s.file.fleet.replicas, 1);
        assert_eq!(s.file.engine.block_size, 16);
        assert_eq!(s.kv_dtype, Dtype::Bf16);
        assert!(s.memory.kv_blocks > 10_000);
    }

    #[test]
    fn unknown_key_names_its_path() {
        let e = err_of(&MINIMAL.replace("max_model_len", "max_modle_len"));
        assert_eq!(e.key, "engine.max_modle_len", "{e}");
        assert!(
            e.message.contains("expected one of"),
            "lists allowed keys: {e}"
        );
        assert!(
            e.to_string().starts_with("s.toml: engine.max_modle_len: "),
            "{e}"
        );
    }

    #[test]
    fn wrong_type_names_its_path() {
        let e = err_of(&MINIMAL.replace("rate = 5.0", "rate = \"fast\""));
        // Tagged tables (arrival, length distributions) report the table's path.
        assert_eq!(e.key, "workload.arrival", "{e}");
        assert!(e.message.contains("expected f64"), "{e}");
        let e = err_of(&MINIMAL.replace("max_model_len = 8192", "max_model_len = -3"));
        assert_eq!(e.key, "engine.max_model_len", "{e}");
    }

    #[test]
    fn bad_values_are_rejected() {
        let e = err_of(&MINIMAL.replace("rate = 5.0", "rate = -1.0"));
        assert_eq!(e.key, "workload.arrival.rate");
        let e = err_of(&MINIMAL.replace("rate = 5.0", "rate = 0.0"));
        assert_eq!(e.key, "workload.arrival.rate");
        let e = err_of(&format!("{MINIMAL}\n[fleet]\nreplicas = 0\n"));
        assert_eq!(e.key, "fleet.replicas");
        let e = err_of(&MINIMAL.replace("\"llama-3.1-8b\"", "\"gpt-5\""));
        assert_eq!(e.key, "model.preset");
        assert!(
            e.message.contains("llama-3.1-70b"),
            "lists known presets: {e}"
        );
        let e = err_of(&MINIMAL.replace("\"h100-sxm\"", "\"tpu\""));
        assert!(e.message.contains("mi300x"), "{e}");
        let e = err_of(&MINIMAL.replace("[horizon]\nrequests = 100", "[horizon]"));
        assert_eq!(e.key, "horizon");
        let e = err_of(&MINIMAL.replace("value = 100", "value = 0"));
        assert_eq!(e.key, "workload.prompt_tokens.value");
        let e = err_of(&format!("{MINIMAL}\n[fleet]\ntensor_parallel = 3\n"));
        assert_eq!(e.key, "fleet.tensor_parallel");
        let e = err_of("name = \n");
        assert!(e.message.contains("line 1"), "{e}");
    }

    #[test]
    fn model_that_does_not_fit_suggests_tensor_parallelism() {
        let e = err_of(&MINIMAL.replace("llama-3.1-8b", "llama-3.1-70b"));
        assert!(e.message.contains("tensor_parallel"), "{e}");
        assert!(e.message.contains("GiB"), "{e}");
    }

    fn with(model: &str, hw: &str, fleet: &str) -> String {
        MINIMAL
            .replace("\"llama-3.1-8b\"", &format!("\"{model}\""))
            .replace("\"h100-sxm\"", &format!("\"{hw}\""))
            + &format!("\n[fleet]\n{fleet}\n")
    }

    #[test]
    fn parallel_keys_resolve_into_the_layout_and_gpu_count() {
        let s = Scenario::from_toml_str(
            &with(
                "llama-3.1-405b",
                "h100",
                "replicas = 2\ntensor_parallel = 8\npipeline_parallel = 2",
            ),
            "s.toml",
        )
        .unwrap();
        assert_eq!(s.parallel.gpus(), 16);
        assert_eq!(s.gpus(), 32);
        assert_eq!(s.memory.pipeline_parallel, 2);
        let s = Scenario::from_toml_str(
            &with(
                "deepseek-v3",
                "h200",
                "tensor_parallel = 8\nexpert_parallel = 8",
            )
            .replace("[model]", "[model]\nweight_dtype = \"fp8\""),
            "s.toml",
        )
        .unwrap();
        assert_eq!(
            (s.parallel.attention_tp(), s.parallel.attention_dp()),
            (1, 8)
        );
        assert_eq!(s.gpus(), 8);
    }

    #[test]
    fn bad_parallel_layouts_name_their_key() {
        let cases = [
            (
                "llama-3.1-8b",
                "h100",
                "pipeline_parallel = 0",
                "fleet.pipeline_parallel",
                "at least 1",
            ),
            (
                "llama-3.1-8b",
                "h100",
                "expert_parallel = 0",
                "fleet.expert_parallel",
                "at least 1",
            ),
            (
                "llama-3.1-8b",
                "h100",
                "pipeline_parallel = 33",
                "fleet.pipeline_parallel",
                "32 layers",
            ),
            (
                "llama-3.1-8b",
                "h100",
                "tensor_parallel = 2\nexpert_parallel = 2",
                "fleet.expert_parallel",
                "dense model",
            ),
            (
                "mixtral-8x7b",
                "h100",
                "tensor_parallel = 4\nexpert_parallel = 8",
                "fleet.expert_parallel",
                "must divide tensor_parallel",
            ),
            (
                "llama-3.1-70b",
                "h100",
                "tensor_parallel = 16",
                "fleet.tensor_parallel",
                "8 GPUs of one H100-SXM node",
            ),
            (
                "llama-3.1-70b",
                "l4",
                "tensor_parallel = 8\npipeline_parallel = 2",
                "fleet.pipeline_parallel",
                "network_gbps",
            ),
            (
                "llama-3.1-405b",
                "h100",
                "tensor_parallel = 8",
                "model",
                "pipeline_parallel = 2",
            ),
        ];
        for (model, hw, fleet, key, also) in cases {
            let e = err_of(&with(model, hw, fleet));
            assert_eq!(e.key, key, "{fleet}: {e}");
            assert!(e.message.contains(also), "{fleet}: {e}");
        }
    }

    const MOE_ARCH: &str = r#"
[model.architecture]
layers = 4
hidden_size = 1024
num_heads = 8
num_kv_heads = 8
head_dim = 128
intermediate_size = 4096
vocab_size = 32000
max_context = 8192
num_experts = 16
experts_per_token = 2
"#;

    fn inline(arch: &str) -> String {
        MINIMAL
            .replace("preset = \"llama-3.1-8b\"\n", "")
            .replace("[hardware]", &format!("{arch}\n[hardware]"))
    }

    #[test]
    fn inline_moe_and_mla_architectures_are_checked() {
        let s = Scenario::from_toml_str(&inline(MOE_ARCH), "s.toml").unwrap();
        assert_eq!(s.model.moe_layers(), 4);
        let bad = [
            (
                "experts_per_token = 2",
                "experts_per_token = 17",
                "model.architecture.experts_per_token",
            ),
            (
                "num_experts = 16\n",
                "",
                "model.architecture.experts_per_token",
            ),
            (
                "experts_per_token = 2",
                "experts_per_token = 2\nfirst_dense_layers = 4",
                "model.architecture.first_dense_layers",
            ),
            (
                "experts_per_token = 2",
                "experts_per_token = 2\nkv_lora_rank = 64",
                "model.architecture.qk_nope_head_dim",
            ),
            (
                "experts_per_token = 2",
                "experts_per_token = 2\nv_head_dim = 64",
                "model.architecture.v_head_dim",
            ),
            (
                "experts_per_token = 2",
                "experts_per_token = 2\nnum_expert = 3",
                "model.architecture.num_expert",
            ),
        ];
        for (from, to, key) in bad {
            let e = err_of(&inline(&MOE_ARCH.replace(from, to)));
            assert_eq!(e.key, key, "{to}: {e}");
        }
        let mla = MOE_ARCH.replace(
            "experts_per_token = 2",
            "experts_per_token = 2\nkv_lora_rank = 64\nqk_nope_head_dim = 32\nqk_rope_head_dim = 16\nv_head_dim = 32",
        );
        let s = Scenario::from_toml_str(&inline(&mla), "s.toml").unwrap();
        // 4 layers × (64 + 16) × 2 B.
        assert_eq!(s.memory.kv_bytes_per_token, 640.0);
    }

    #[test]
    fn inline_hardware_network_keys_come_in_pairs() {
        let spec = r#"[hardware.spec]
bf16_tflops = 100.0
memory_gib = 80.0
memory_bw_tbps = 2.0
interconnect_gbps = 100.0
interconnect_latency_us = 10.0
pcie_gbps = 32.0
gpus_per_node = 4
"#;
        let text = MINIMAL.replace("[hardware]\npreset = \"h100-sxm\"\n", spec);
        let s = Scenario::from_toml_str(&text, "s.toml").unwrap();
        assert_eq!(s.hardware.gpus_per_node, 4);
        let e = err_of(&text.replace(
            "gpus_per_node = 4",
            "gpus_per_node = 4\nnetwork_gbps = 25.0",
        ));
        assert_eq!(e.key, "hardware.spec.network_latency_us", "{e}");
        let e = err_of(&text.replace("gpus_per_node = 4", "gpus_per_node = 0"));
        assert_eq!(e.key, "hardware.spec.gpus_per_node", "{e}");
        let e = err_of(&format!("{text}\n[fleet]\ntensor_parallel = 8\n"));
        assert_eq!(e.key, "fleet.tensor_parallel", "{e}");
        let e = err_of(&format!(
            "{text}\n[fleet]\ntensor_parallel = 4\npipeline_parallel = 2\n"
        ));
        assert_eq!(e.key, "fleet.pipeline_parallel", "{e}");
        let net = text.replace(
            "gpus_per_node = 4",
            "gpus_per_node = 4\nnetwork_gbps = 25.0\nnetwork_latency_us = 15.0",
        );
        let s = Scenario::from_toml_str(
            &format!("{net}\n[fleet]\ntensor_parallel = 4\npipeline_parallel = 2\n"),
            "s.toml",
        )
        .unwrap();
        assert_eq!(s.gpus(), 8);
    }

    #[test]
    fn a_profile_supplies_model_hardware_memory_and_cost() {
        let dir = std::env::temp_dir().join(format!("servesim-profile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = crate::profile::tests::example();
        std::fs::write(dir.join("p.toml"), p.to_toml_string()).unwrap();
        let text = MINIMAL
            .replace("[model]\npreset = \"llama-3.1-8b\"\n", "")
            .replace("preset = \"h100-sxm\"", "profile = \"p.toml\"")
            .replace("max_model_len = 8192", "max_model_len = 512");
        let origin = dir.join("s.toml").display().to_string();
        let s = Scenario::from_toml_str(&text, &origin).unwrap();
        assert_eq!(s.model.name, "tiny");
        assert_eq!(s.weight_dtype, Dtype::Fp32);
        assert_eq!(s.hardware.name, "Test CPU");
        assert_eq!(s.memory.kv_bytes_per_token, 512.0);
        let cost = crate::simulation::Simulation::new(&s)
            .run(|_| {})
            .unwrap()
            .summary
            .cost_source;
        assert!(cost.starts_with("calibration profile"), "{cost}");
        // A model besides the profile must be the profile's.
        let e = err_of_at(
            &MINIMAL.replace("preset = \"h100-sxm\"", "profile = \"p.toml\""),
            &origin,
        );
        assert_eq!(e.key, "model", "{e}");
        assert!(e.message.contains("measured tiny"), "{e}");
        let e = err_of_at(
            &text.replace(
                "profile = \"p.toml\"",
                "profile = \"p.toml\"\npreset = \"h100\"",
            ),
            &origin,
        );
        assert_eq!(e.key, "hardware", "{e}");
        let e = err_of_at(&text.replace("p.toml", "missing.toml"), &origin);
        assert_eq!(e.key, "hardware.profile", "{e}");
        assert!(e.message.contains("cannot read profile"), "{e}");
        let e = err_of_at(&format!("{text}\n[fleet]\ntensor_parallel = 2\n"), &origin);
        assert_eq!(e.key, "fleet", "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn err_of_at(text: &str, origin: &str) -> ScenarioError {
        Scenario::from_toml_str(text, origin).unwrap_err()
    }
}
