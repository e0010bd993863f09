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

pub mod canary_cfg;
mod canary_plan;
pub use canary_plan::{CanaryPlan, CanaryStep, GatePlan, Tolerance};
mod engine_plan;
pub use engine_plan::{EnginePlan, SpeculationPlan};
mod replica_plan;
pub use replica_plan::ReplicaPlan;
mod demand_plan;
pub use demand_plan::DemandPlan;
mod enum_hint;
mod inline;
use crate::config::yes;
pub use crate::config::{BatchPolicyKind, EngineCfg, PreemptionMode, SpeculativeCfg};
pub use inline::inline_toml;
mod fleet_cfg;
mod fleet_plan;
pub use fleet_plan::FleetPlan;
mod length_mean;
pub mod pool_plan;
pub use pool_plan::PoolPlan;
pub mod lifecycle_cfg;
mod lifecycle_plan;
pub use lifecycle_plan::{GivenFailure, LifeUnitPlan, LifecyclePlan};
mod pools_cfg;
pub mod ranges;
mod regions_cfg;
mod regions_plan;
pub use regions_plan::{OverflowPlan, RegionPlan, RegionsPlan};
mod resolve;
pub use resolve::Overrides;
mod routing_plan;
pub use routing_plan::RoutingPlan;
mod run_plan;
pub use run_plan::RunPlan;
mod slo_cfg;
mod stated;
mod tenants_cfg;
mod tenants_plan;
pub use tenants_plan::TenantsPlan;
mod trace_cfg;
pub mod units;
mod validate;
mod views;
mod workload_cfg;
pub use fleet_cfg::*;
pub use pools_cfg::*;
pub use regions_cfg::{OverflowCfg, RegionCfg};
pub use slo_cfg::{describe_slo, SloCfg, SloTargets, SLO_METRICS, SLO_PERCENTILES};
pub use tenants_cfg::*;
pub use trace_cfg::*;
use validate::*;
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
    /// Which of `[engine]`'s batching keys the file sets itself (read from
    /// its table): the rest may come from a calibration profile's recorded
    /// batching. `None` for a file built in code, whose `[engine]` is taken
    /// as it is.
    #[serde(skip)]
    pub engine_keys_given: Option<Vec<String>>,
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
    /// Replica life cycle: cold starts, standby pool, activator
    /// (`lifecycle_cfg`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<crate::scenario::lifecycle_cfg::LifecycleCfg>,
    /// The autoscaler (`autoscale`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscale: Option<crate::scenario::lifecycle_cfg::AutoscaleCfg>,
    /// Replica failures and request retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failures: Option<crate::scenario::lifecycle_cfg::FailureCfg>,
    /// A canary rollout between two pools (`canary_cfg`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<crate::scenario::canary_cfg::CanaryCfg>,
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

/// The served model: a catalog preset, an inline architecture, or a Hugging
/// Face `config.json` (`config`, a path relative to the scenario file).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelCfg {
    #[serde(default)]
    pub preset: Option<String>,
    #[serde(default)]
    pub architecture: Option<ModelArch>,
    /// A Hugging Face `config.json`, relative to the scenario file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// The weight dtype; absent: the checkpoint's (`quantization_config` of
    /// the preset or config), else bf16. It serializes as bf16 when absent,
    /// so a scenario's digest reads as it did before checkpoints could name
    /// their dtype.
    #[serde(default, serialize_with = "weight_dtype_or_bf16")]
    pub weight_dtype: Option<Dtype>,
    /// Defaults to the activation dtype (bf16, or fp16 for fp16 weights), as vLLM's `auto`.
    #[serde(default)]
    pub kv_dtype: Option<Dtype>,
}

fn default_weight_dtype() -> Dtype {
    Dtype::Bf16
}

fn weight_dtype_or_bf16<S: serde::Serializer>(d: &Option<Dtype>, s: S) -> Result<S::Ok, S::Error> {
    d.unwrap_or(default_weight_dtype()).serialize(s)
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
    /// Attention data-parallel groups per stage (DP attention: SGLang
    /// `--enable-dp-attention`, vLLM `--data-parallel-size`, TensorRT-LLM
    /// `enable_attention_dp`); absent: one per expert-parallel group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_data_parallel: Option<u32>,
    /// DeepSeek's expert-parallel load balancer (vLLM and SGLang
    /// `--enable-eplb`): hot experts spread over the EP ranks.
    #[serde(default, skip_serializing_if = "is_false")]
    pub eplb: bool,
    /// Redundant expert slots EPLB fills with replicas of hot experts
    /// (`num_redundant_experts`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub num_redundant_experts: u32,
    /// Zipf exponent of the routed experts' popularity (0: every expert
    /// alike), which sets how much the busiest EP rank carries
    /// (`parallel::eplb`).
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub expert_popularity_skew: f64,
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
    /// `[[fleet.pools]]`: pools of replicas with their own role, hardware,
    /// parallelism, engine settings and router (empty: one colocated pool
    /// of `replicas` replicas, as before pools existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<PoolCfg>,
    /// `[fleet.kv_transfer]`: the prefill→decode link (with a prefill pool).
    #[serde(default)]
    pub kv_transfer: KvTransferCfg,
    /// With colocated pools of different speeds, least-outstanding counts
    /// outstanding requests per unit of each replica's capacity (`false`:
    /// plain counts, as if the replicas were equal).
    #[serde(default = "yes")]
    pub capacity_weighted: bool,
    /// `[[fleet.regions]]`: regions with their own demand and price, whose
    /// pools name them (`region`); empty: one region, as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<RegionCfg>,
    /// `[fleet.overflow]`: the global router's overflow rule (with regions).
    #[serde(default, skip_serializing_if = "OverflowCfg::is_default")]
    pub overflow: OverflowCfg,
}

fn one() -> u32 {
    1
}
fn is_false(b: &bool) -> bool {
    !*b
}
fn is_zero(n: &u32) -> bool {
    *n == 0
}
fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
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
            attention_data_parallel: None,
            eplb: false,
            num_redundant_experts: 0,
            expert_popularity_skew: 0.0,
            report_interval_s: 0.0,
            prefix_affinity: PrefixAffinityCfg::default(),
            weighted: WeightedCfg::default(),
            session_affinity: SessionAffinityCfg::default(),
            pools: Vec::new(),
            kv_transfer: KvTransferCfg::default(),
            capacity_weighted: true,
            regions: Vec::new(),
            overflow: OverflowCfg::default(),
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
    /// Parallel samples per request (vLLM's `n`), drawn per request; one
    /// when absent (see `replica::fork`, `workload::samples`).
    #[serde(default)]
    pub n: Option<LengthDist>,
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
    /// With conversations each arrival opens a conversation whose follow-up
    /// turns are requests too: the workload offers the opening rate times
    /// the mean turns per conversation (`None` when that mean is unknown
    /// before a file is read).
    pub fn mean_rate(&self) -> Option<f64> {
        let opening = self.arrival.as_ref().and_then(ArrivalCfg::mean_rate)?;
        match &self.conversation {
            Some(c) => Some(opening * c.turns.mean()?),
            None => Some(opening),
        }
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
    /// Per-request latency attribution (`requests.csv`'s `attr_*_ms`
    /// columns, `servesim explain`); on by default, off saves its cost.
    #[serde(default = "yes")]
    pub attribution: bool,
    /// The routing trace: `routing.csv` (every candidate's score and
    /// estimated TTFT per decision) and the summary's `routing` section
    /// (the regret against the fastest candidate); off by default.
    #[serde(default)]
    pub routing_trace: bool,
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
            attribution: true,
            routing_trace: false,
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
    /// Which batching the engine runs and where each setting came from,
    /// when the calibration profile records the engine's own batching
    /// (`check` and `simulate` print it).
    pub batching: Option<String>,
    /// What one of its replicas can ever serve, decided at resolution.
    pub limits: ServeLimits,
    /// Its replicas as resolved (in a fleet with declared pools, the
    /// parent's keys without a pool's overrides; each pool holds its own).
    pub replica: ReplicaPlan,
    /// The pools, each resolved as a scenario of its own: the
    /// `[[fleet.pools]]`, or one implicit pool of the whole fleet (empty
    /// only in a pool's own scenario).
    pub pools: Vec<PoolPlan>,
}

/// The limits that decide whether a replica can ever serve a request (the
/// simulation rejects one that exceeds them at arrival; the HTTP server
/// answers it with 400, as vLLM does).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServeLimits {
    /// Prompt plus output tokens (`engine.max_model_len`, else the model's
    /// context).
    pub max_model_len: u32,
    /// A prompt longer than this needs a batch policy that chunks prefills
    /// (`engine.max_batched_tokens`).
    pub max_batched_tokens: u32,
    /// KV blocks a request may take: the cache less its pinned prefixes.
    pub kv_blocks: u64,
}

type Invalid = (String, String);

#[cfg(test)]
pub(crate) mod tests;
