//! A measured point as a scenario. The table is built in three layers: the
//! base scenario (`--scenario`, or a minimal one), what the file records
//! about the point (model, chip, precision, layout, load, lengths), and the
//! command's settings (`--model`, `--hardware`, `--tp`, …), which win: they
//! are what the user says about a run the file describes poorly (a local
//! model path, no GPU name). Whether the point can be expressed is then
//! decided by the normal scenario resolution (`Scenario::from_table`), so
//! it grows with the catalog, the precisions and the layouts servesim
//! knows; a point that cannot be expressed carries the reason resolution
//! gave, never a silent drop.

use super::{Deployment, Format, Lengths, Load, MeasuredPoint, WorkerLayout};
use crate::config::{keypath, EngineRuntime};
use crate::{Scenario, ScenarioError};
use serde::Serialize;
use toml::{Table, Value};

/// What the command line says about every point (each `None` leaves the
/// file's record, or else the base scenario's value).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settings {
    /// A catalog model (preset key or Hugging Face id).
    pub model: Option<String>,
    /// A catalog hardware preset.
    pub hardware: Option<String>,
    /// Weight dtype (`model.weight_dtype`).
    pub weight_dtype: Option<String>,
    pub tensor_parallel: Option<u32>,
    pub pipeline_parallel: Option<u32>,
    pub expert_parallel: Option<u32>,
    pub replicas: Option<u32>,
    /// At most this many requests per simulated point (a closed loop of C
    /// users still gets 4 × C, so every user sends at least four).
    pub max_requests: u64,
}

/// The default bound on requests per point: enough for a closed loop to
/// reach its steady state, small enough that thousands of points run in
/// minutes.
pub const DEFAULT_MAX_REQUESTS: u64 = 2000;

/// Why a point cannot be expressed, by what is missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReasonKind {
    /// The model is not in the catalog.
    Model,
    /// The accelerator is not in the catalog.
    Chip,
    /// The weight or KV precision is not supported.
    Precision,
    /// The parallel layout has no servesim equivalent.
    Layout,
    /// The model does not fit the layout's memory.
    Memory,
    /// The file does not record something the scenario needs.
    NotRecorded,
    /// Any other scenario error.
    Other,
}

impl ReasonKind {
    pub fn name(self) -> &'static str {
        match self {
            ReasonKind::Model => "model",
            ReasonKind::Chip => "chip",
            ReasonKind::Precision => "precision",
            ReasonKind::Layout => "layout",
            ReasonKind::Memory => "memory",
            ReasonKind::NotRecorded => "not-recorded",
            ReasonKind::Other => "other",
        }
    }
}

/// A point servesim cannot express, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Unexpressible {
    pub kind: ReasonKind,
    /// The reason, as resolution (or the mapping) gave it.
    pub reason: String,
    /// The reason without the point's own numbers, for grouping rows.
    pub group: String,
}

impl Unexpressible {
    fn new(kind: ReasonKind, group: impl Into<String>, reason: impl Into<String>) -> Self {
        Unexpressible {
            kind,
            group: group.into(),
            reason: reason.into(),
        }
    }

    /// Classifies a resolution error by its key path; `value` is what the
    /// point asked for there (the model id, the chip, the precision).
    fn from_scenario(e: &ScenarioError, value: Option<&str>) -> Self {
        let key = e.key.as_str();
        let fits = e.message.contains("fit") || e.message.contains("memory");
        let kind = if fits {
            ReasonKind::Memory
        } else if key == "model"
            || key.starts_with("model.preset")
            || key.starts_with("model.architecture")
            || key.starts_with("model.config")
        {
            ReasonKind::Model
        } else if key.starts_with("hardware") {
            ReasonKind::Chip
        } else if key.starts_with("model.weight_dtype") || key.starts_with("model.kv_dtype") {
            ReasonKind::Precision
        } else if key.starts_with("fleet") {
            ReasonKind::Layout
        } else {
            ReasonKind::Other
        };
        let group = match (kind, value) {
            (ReasonKind::Model | ReasonKind::Chip | ReasonKind::Precision, Some(v)) => {
                format!("{} {v} not known", kind.name())
            }
            _ => {
                let first = e.message.split(';').next().unwrap_or_default();
                format!("{key}: {}", without_numbers(first))
            }
        };
        let reason = if key.is_empty() {
            e.message.clone()
        } else {
            format!("{key}: {}", e.message)
        };
        Unexpressible::new(kind, group, reason)
    }
}

/// `text` with every run of digits (and decimal points in them) as `N`,
/// so reasons that differ only in the point's sizes group together.
fn without_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_number = false;
    for c in text.chars() {
        if c.is_ascii_digit() || (in_number && c == '.') {
            if !in_number {
                out.push('N');
                in_number = true;
            }
        } else {
            in_number = false;
            out.push(c);
        }
    }
    out
}

/// A point's resolved scenario and what was assumed to get there.
#[derive(Debug)]
pub struct Expressed {
    pub scenario: Scenario,
    /// The table it was resolved from (its TOML is written beside results).
    pub table: Table,
    /// Assumptions made for this point (not-recorded settings filled in).
    pub notes: Vec<String>,
}

/// The base scenario's table when none is given: a minimal scenario that
/// the points fill in.
pub fn default_base() -> Table {
    let mut t = Table::new();
    t.insert("name".into(), "accuracy".into());
    t
}

fn set(t: &mut Table, key: &str, v: impl Into<Value>) {
    keypath::set(t, key, v.into()).expect("accuracy sets tables it created");
}

/// The share of a recorded length the shortest request has in a benchmark
/// that draws random lengths (`--random-range-ratio`; see `workload`).
pub const RANDOM_RANGE_RATIO: f64 = 0.8;

fn lengths(l: &Lengths) -> Value {
    let mut d = Table::new();
    match l {
        Lengths::Fixed { tokens } => {
            d.insert("dist".into(), "fixed".into());
            d.insert("value".into(), i64::from((*tokens).max(1)).into());
        }
        Lengths::Mean { tokens } => {
            d.insert("dist".into(), "fixed".into());
            d.insert("value".into(), (tokens.round().max(1.0) as i64).into());
        }
        Lengths::Recorded { tokens } => {
            d.insert("dist".into(), "empirical".into());
            let v: Vec<Value> = tokens.iter().map(|&t| i64::from(t.max(1)).into()).collect();
            d.insert("values".into(), Value::Array(v));
        }
    }
    Value::Table(d)
}

/// Candidate hardware preset names for a recorded system name
/// (aiconfigurator's `h100_sxm`, `b200_sxm`, `gb200`).
fn chip_candidates(system: &str) -> Vec<String> {
    let dashed = system.replace('_', "-");
    let mut c = vec![system.to_string(), dashed.clone()];
    if let Some(bare) = dashed.strip_suffix("-sxm") {
        c.push(bare.to_string());
    }
    c.dedup();
    c
}

/// Candidate `weight_dtype` values: the quantization mode's own name, then
/// the precision label (a catalog that knows `nvfp4` takes it; one that
/// only knows `fp4` takes that).
fn dtype_candidates(quant: Option<&str>, precision: Option<&str>) -> Vec<String> {
    let mut c: Vec<String> = Vec::new();
    let mut add = |names: &[&str]| {
        for n in names {
            if !c.iter().any(|x| x == n) {
                c.push(n.to_string());
            }
        }
    };
    match quant.map(str::to_ascii_lowercase).as_deref() {
        Some("fp8_block") => add(&["fp8_block", "fp8"]),
        Some("nvfp4") => add(&["nvfp4", "fp4"]),
        Some("mxfp4") => add(&["mxfp4", "fp4"]),
        Some("int4_wo") => add(&["int4"]),
        Some(q) => add(&[q]),
        None => {}
    }
    match precision.map(str::to_ascii_lowercase).as_deref() {
        Some("fp4") => add(&["fp4", "nvfp4"]),
        Some(p) => add(&[p]),
        None => {}
    }
    c
}

/// One aiconfigurator worker's layout in servesim's fleet keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FleetLayout {
    tensor_parallel: u32,
    pipeline_parallel: u32,
    expert_parallel: u32,
    /// `Some` for a MoE layout (`fleet.attention_data_parallel`).
    attention_data_parallel: Option<u32>,
    /// Replicas one worker is (attention DP over a dense model).
    replicas_per_worker: u32,
}

impl FleetLayout {
    /// Sets the layout's keys in `t` (a `fleet` or a pool table).
    fn write(&self, t: &mut Table) {
        t.insert(
            "tensor_parallel".into(),
            i64::from(self.tensor_parallel).into(),
        );
        t.insert(
            "pipeline_parallel".into(),
            i64::from(self.pipeline_parallel).into(),
        );
        t.insert(
            "expert_parallel".into(),
            i64::from(self.expert_parallel).into(),
        );
        match self.attention_data_parallel {
            Some(dp) => {
                t.insert("attention_data_parallel".into(), i64::from(dp).into());
            }
            None => {
                t.remove("attention_data_parallel");
            }
        }
    }
}

/// How aiconfigurator's worker layout maps onto servesim's fleet keys. In
/// aiconfigurator's convention a MoE worker has attention TP × DP = MoE
/// TP × EP GPUs per stage (`docs/cli_user_guide.md`), which is servesim's
/// `tensor_parallel` with `attention_data_parallel` = DP and
/// `expert_parallel` = EP. A worker with no MoE split (MoE TP × EP = 1)
/// is a dense model's: its attention DP is that many replicas.
fn fleet_layout(l: &WorkerLayout) -> Result<FleetLayout, Unexpressible> {
    let moe_split = l.moe_tp * l.moe_ep;
    let gpus = l.tp * l.attention_dp;
    let plain = |tp, replicas| FleetLayout {
        tensor_parallel: tp,
        pipeline_parallel: l.pp,
        expert_parallel: 1,
        attention_data_parallel: None,
        replicas_per_worker: replicas,
    };
    if moe_split == 1 {
        return Ok(plain(l.tp, l.attention_dp));
    }
    // Experts tensor-sliced over more GPUs than attention TP with no
    // attention DP recorded (vLLM rows of TP 1 or 2 with MoE TP 2 or 4):
    // vLLM's data parallelism, whose attention ranks share experts sliced
    // over DP × TP when expert parallelism is off
    // (`vllm/model_executor/layers/fused_moe/config.py`,
    // `FusedMoEParallelConfig.make`).
    if l.attention_dp == 1 && l.moe_ep == 1 && moe_split > gpus && moe_split % l.tp == 0 {
        return Ok(FleetLayout {
            tensor_parallel: moe_split,
            pipeline_parallel: l.pp,
            expert_parallel: 1,
            attention_data_parallel: Some(moe_split / l.tp),
            replicas_per_worker: 1,
        });
    }
    if moe_split != gpus {
        return Err(Unexpressible::new(
            ReasonKind::Layout,
            "MoE TP × EP other than attention TP × DP",
            format!(
                "attention TP {} × DP {} with MoE TP {} × EP {}: a worker's attention and \
                 experts split the same GPUs (attention TP × DP = MoE TP × EP)",
                l.tp, l.attention_dp, l.moe_tp, l.moe_ep
            ),
        ));
    }
    if l.attention_dp == 1 && l.moe_ep == 1 {
        return Ok(plain(l.tp, 1));
    }
    Ok(FleetLayout {
        tensor_parallel: gpus,
        pipeline_parallel: l.pp,
        expert_parallel: l.moe_ep,
        attention_data_parallel: Some(l.attention_dp),
        replicas_per_worker: 1,
    })
}

/// How an engine batches by default (`[engine] policy`):
/// - vLLM V1 always chunks prefills under `max_num_batched_tokens`,
///   running requests (decodes) first, then waiting ones in what budget is
///   left (`vllm/v1/core/sched/scheduler.py`): Sarathi-Serve;
/// - SGLang runs a waiting prefill batch before decoding and does not mix
///   the two unless `--enable-mixed-chunk` (`Scheduler.get_next_batch_to_run`
///   in `sglang/srt/managers/scheduler.py`): prefill-first, never mixed;
/// - TensorRT-LLM's in-flight batching puts context and generation
///   requests in one step under `max_num_tokens`: mixed.
fn engine_batching(rt: EngineRuntime) -> &'static str {
    match rt {
        EngineRuntime::Vllm => "sarathi",
        EngineRuntime::Sglang => "vllm",
        _ => "continuous",
    }
}

/// The `--scheduler-recv-interval` InferenceX's SGLang recipes start the
/// server with on B200 and B300 (`benchmarks/single_node/fixed_seq_len/`
/// `dsr1_fp4_b200.sh`, `dsr1_fp8_b200.sh`, `dsr1_*_b300.sh`,
/// `qwen3.5_*_b200.sh`, `qwen3.5_*_b300.sh` in SemiAnalysisAI/InferenceX):
/// 10 below 16 concurrent users, 30 from 16 on, and 1 with data-parallel
/// attention (SGLang's receive skipper does not run with it). The H100 and
/// H200 recipes leave it at SGLang's default, 1. These are the harness's
/// settings for the rows measured with it (their closed loops and length
/// spread are InferenceX's too); other points keep the engine's default.
fn harness_recv_interval(rt: EngineRuntime, point: &MeasuredPoint) -> Option<u32> {
    if rt != EngineRuntime::Sglang || point.format != Format::Aiconfigurator {
        return None;
    }
    let chip = point.chip.as_deref()?.to_ascii_lowercase();
    if !(chip.starts_with("b200") || chip.starts_with("b300")) {
        return None;
    }
    let Some(Deployment::Agg { layout, .. }) = &point.deployment else {
        return None;
    };
    if layout.attention_dp > 1 {
        return None;
    }
    match point.load {
        Some(Load::Concurrency { users }) => Some(if users >= 16 { 30 } else { 10 }),
        _ => None,
    }
}

/// Whether an aiconfigurator row was measured with InferenceX's harness:
/// the rows of its two dated `source_file` batches carry the batch's date
/// first in their id (`YYYY_MM_DD_<model>_…`), the `db-dump` rows
/// end in InferenceX's `cfg<config_id>` (see `../shared/data/README.md`
/// §6.1, column `id`). aiconfigurator's own sweeps name the model first.
fn inferencex_row(point: &MeasuredPoint) -> bool {
    if point.format != Format::Aiconfigurator {
        return false;
    }
    let id = point.id.as_str();
    let dated = id.len() > 11
        && id.as_bytes()[..11].iter().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 || i == 10 {
                *b == b'_'
            } else {
                b.is_ascii_digit()
            }
        });
    let cfg = id
        .rsplit_once("_cfg")
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    dated || cfg
}

/// The KV-cache dtype InferenceX's TensorRT-LLM recipes start the server
/// with: every one sets `kv_cache_config: dtype: fp8` in its extra LLM API
/// options (`benchmarks/70b_fp8_h200_trt_slurm.sh`,
/// `dsr1_fp8_b200_trt.sh`, `gptoss_fp4_b200_trt.sh` in
/// SemiAnalysisAI/InferenceX). The silicon file records no KV dtype, and
/// with a BF16 cache such rows read twice the KV bytes per decode step and
/// hold half the tokens. Other engines and harnesses keep the scenario's.
fn harness_kv_dtype(rt: EngineRuntime, point: &MeasuredPoint) -> Option<&'static str> {
    (rt == EngineRuntime::Trtllm && inferencex_row(point)).then_some("fp8")
}

/// Whether the table prices with a calibration profile (`[hardware]
/// profile`); a relative path is made relative to the base scenario's
/// folder here, since a point's origin (`scenario + point id`) is no path.
fn anchor_profile(t: &mut Table, origin: &str) -> bool {
    let Some(rel) = keypath::get(t, "hardware.profile").and_then(|v| v.as_str().map(String::from))
    else {
        return false;
    };
    let dir = std::path::Path::new(origin)
        .parent()
        .unwrap_or(std::path::Path::new(""));
    let path = dir.join(&rel);
    if path.is_relative() {
        if let Ok(cwd) = std::env::current_dir() {
            set(t, "hardware.profile", cwd.join(path).display().to_string());
            return true;
        }
    }
    set(t, "hardware.profile", path.display().to_string());
    true
}

/// The scenario table for `point` over `base`, before resolution.
fn table_for(
    base: Option<&Table>,
    settings: &Settings,
    point: &MeasuredPoint,
    notes: &mut Vec<String>,
) -> Result<Table, Unexpressible> {
    let mut t = base.cloned().unwrap_or_else(default_base);
    if point.own_workload {
        if base.is_none() {
            return Err(Unexpressible::new(
                ReasonKind::NotRecorded,
                "observed folder without its scenario",
                "a servesim observe folder is compared with the scenario it was observed with: \
                 give it with --scenario",
            ));
        }
    } else {
        workload(&mut t, base.is_some(), settings, point, notes)?;
        deployment(&mut t, point, notes)?;
    }
    // A layout given on the command line replaces the file's whole
    // layout, its attention DP included.
    if settings.tensor_parallel.is_some() || settings.expert_parallel.is_some() {
        if let Some(f) = t.get_mut("fleet").and_then(Value::as_table_mut) {
            f.remove("attention_data_parallel");
        }
    }
    if let Some(tp) = settings.tensor_parallel {
        set(&mut t, "fleet.tensor_parallel", i64::from(tp));
    }
    if let Some(pp) = settings.pipeline_parallel {
        set(&mut t, "fleet.pipeline_parallel", i64::from(pp));
    }
    if let Some(ep) = settings.expert_parallel {
        set(&mut t, "fleet.expert_parallel", i64::from(ep));
    }
    if let Some(r) = settings.replicas {
        set(&mut t, "fleet.replicas", i64::from(r));
    }
    // Latency statistics need neither attribution nor a time series.
    if keypath::get(&t, "metrics.attribution").is_none() {
        set(&mut t, "metrics.attribution", false);
    }
    if keypath::get(&t, "metrics.timeseries").is_none() {
        set(&mut t, "metrics.timeseries", "off");
    }
    // The engine's own runtime (`cost::runtime`) and batching, unless the
    // scenario names them.
    let rt = point.engine.as_deref().and_then(EngineRuntime::of_engine);
    if let Some(rt) = rt {
        if keypath::get(&t, "engine.runtime").is_none() {
            set(&mut t, "engine.runtime", rt.name());
            notes.push(format!(
                "engine.runtime = {} (the file's engine)",
                rt.name()
            ));
        }
        if let Some(n) = harness_recv_interval(rt, point) {
            if keypath::get(&t, "engine.scheduler_recv_interval").is_none() {
                set(&mut t, "engine.scheduler_recv_interval", i64::from(n));
                notes.push(format!(
                    "engine.scheduler_recv_interval = {n} (InferenceX's SGLang recipe at this concurrency)"
                ));
            }
        }
        if let Some(kv) = harness_kv_dtype(rt, point) {
            if keypath::get(&t, "model.kv_dtype").is_none() {
                set(&mut t, "model.kv_dtype", kv);
                notes.push(format!(
                    "model.kv_dtype = {kv} (InferenceX's TensorRT-LLM recipes)"
                ));
            }
        }
        if keypath::get(&t, "engine.policy").is_none() {
            let policy = engine_batching(rt);
            set(&mut t, "engine.policy", policy);
            notes.push(format!(
                "engine.policy = {policy} (the engine's default batching)"
            ));
            // Without chunked context a whole prompt must fit one step's
            // token budget: TensorRT-LLM's benchmark recipes raise
            // `max_num_tokens` to the prompt length when it passes the
            // default (8,192, the scenario's default budget too), or the
            // engine would refuse every request.
            let longest = point.prompt.as_ref().map(|l| match l {
                Lengths::Recorded { tokens } => tokens.iter().copied().max().unwrap_or(1) as u64,
                other => other.mean().ceil() as u64,
            });
            let default_budget = u64::from(crate::config::EngineCfg::default().max_batched_tokens);
            if let Some(longest) = longest.filter(|&p| policy == "continuous" && p > default_budget)
            {
                if keypath::get(&t, "engine.max_batched_tokens").is_none() {
                    set(
                        &mut t,
                        "engine.max_batched_tokens",
                        longest.min(1 << 24) as i64,
                    );
                    notes.push(format!(
                        "engine.max_batched_tokens = {longest} (the longest prompt: unchunked prefills need it)"
                    ));
                }
            }
        }
    }
    Ok(t)
}

fn workload(
    t: &mut Table,
    has_base: bool,
    settings: &Settings,
    point: &MeasuredPoint,
    notes: &mut Vec<String>,
) -> Result<(), Unexpressible> {
    let Some(load) = &point.load else {
        if has_base && keypath::get(t, "workload").is_some() {
            notes.push("load not recorded: the scenario's workload".into());
            return Ok(());
        }
        return Err(Unexpressible::new(
            ReasonKind::NotRecorded,
            "no load recorded",
            "the file records no load (concurrency or request rate): give a scenario whose \
             workload matches with --scenario",
        ));
    };
    let (Some(prompt), Some(output)) = (&point.prompt, &point.output) else {
        return Err(Unexpressible::new(
            ReasonKind::NotRecorded,
            "no lengths recorded",
            "the file records no prompt and output lengths",
        ));
    };
    let mut w = Table::new();
    let mut arrival = Table::new();
    let cap = settings.max_requests.max(1);
    // A base scenario's own ramp-up survives the point's workload (a 0
    // starts the users together, in lockstep; see `compare::stagger`).
    let base_ramp = keypath::get(t, "workload.arrival.ramp_up_s").cloned();
    let requests = match *load {
        Load::Concurrency { users } => {
            arrival.insert("process".into(), "closed".into());
            arrival.insert("users".into(), i64::from(users).into());
            if let Some(r) = base_ramp {
                arrival.insert("ramp_up_s".into(), r);
            }
            let wanted = point.requests.unwrap_or(10 * u64::from(users));
            wanted.min(cap.max(4 * u64::from(users)))
        }
        Load::Rate { rate, cv } => {
            if (cv - 1.0).abs() < 1e-9 {
                arrival.insert("process".into(), "poisson".into());
            } else {
                arrival.insert("process".into(), "gamma".into());
                // Evenly spaced sends: gamma gaps of a tiny spread.
                arrival.insert("cv".into(), cv.max(0.01).into());
            }
            arrival.insert("rate".into(), rate.into());
            point.requests.unwrap_or(cap).min(cap)
        }
    };
    w.insert("arrival".into(), Value::Table(arrival));
    // aiconfigurator's silicon rows were measured with random-token
    // prompts whose lengths the harness draws uniformly from
    // [ratio · isl, isl] (and the same for the output): InferenceX's
    // `benchmark_serving.py --random-range-ratio 0.8` (`RANDOM_RANGE_RATIO`
    // in SemiAnalysisAI/InferenceX `.github/workflows/benchmark-tmpl.yml`).
    let spread = point.format == super::Format::Aiconfigurator;
    let dist = |l: &Lengths| match l {
        Lengths::Fixed { tokens } if spread && *tokens > 1 => {
            let mut d = Table::new();
            d.insert("dist".into(), "uniform".into());
            let lo = (f64::from(*tokens) * RANDOM_RANGE_RATIO).ceil().max(1.0) as i64;
            d.insert("min".into(), lo.into());
            d.insert("max".into(), i64::from(*tokens).into());
            Value::Table(d)
        }
        other => lengths(other),
    };
    w.insert("prompt_tokens".into(), dist(prompt));
    w.insert("output_tokens".into(), dist(output));
    if spread {
        notes.push(format!(
            "lengths uniform in [{RANDOM_RANGE_RATIO} × recorded, recorded] (InferenceX's \
             --random-range-ratio)"
        ));
    }
    t.insert("workload".into(), Value::Table(w));
    t.remove("tenants");
    let mut h = Table::new();
    h.insert("requests".into(), (requests.max(1) as i64).into());
    t.insert("horizon".into(), Value::Table(h));
    if point.requests.is_some_and(|r| r > requests) {
        notes.push(format!(
            "{requests} of the {} measured requests simulated",
            point.requests.unwrap_or(0)
        ));
    }
    // Benchmarks start engines with a context just long enough for the
    // workload (`--max-model-len`), which sizes what must fit in memory.
    if keypath::get(t, "engine.max_model_len").is_none() {
        let longest = |l: &Lengths| match l {
            Lengths::Recorded { tokens } => tokens.iter().copied().max().unwrap_or(1) as u64,
            other => other.mean().ceil() as u64,
        };
        let len = longest(prompt) + longest(output);
        set(t, "engine.max_model_len", len.min(i64::MAX as u64) as i64);
        notes.push(format!("engine.max_model_len = {len} (prompt + output)"));
    }
    // Engines are run with room for the whole concurrency (vLLM's
    // `--max-num-seqs`, SGLang's `--max-running-requests`).
    if let Load::Concurrency { users } = *load {
        if keypath::get(t, "engine.max_num_seqs").is_none() && users > 256 {
            set(t, "engine.max_num_seqs", i64::from(users));
            notes.push(format!("engine.max_num_seqs = {users} (the concurrency)"));
        }
    }
    Ok(())
}

/// `t`'s `[fleet]` table, made if absent.
fn fleet_table(t: &mut Table) -> Result<&mut Table, Unexpressible> {
    t.entry("fleet")
        .or_insert_with(|| Value::Table(Table::new()))
        .as_table_mut()
        .ok_or_else(|| {
            Unexpressible::new(
                ReasonKind::Other,
                "fleet is not a table",
                "fleet is not a table",
            )
        })
}

fn deployment(
    t: &mut Table,
    point: &MeasuredPoint,
    notes: &mut Vec<String>,
) -> Result<(), Unexpressible> {
    match &point.deployment {
        None => {}
        Some(Deployment::DisaggUnrecorded) => {
            return Err(Unexpressible::new(
                ReasonKind::NotRecorded,
                "disaggregated without worker counts",
                "disaggregated row without prefill/decode worker counts: the xPyD split \
                 is not recorded and has no default (aiconfigurator's cli_estimate cannot \
                 run these rows either, and its scripts skip them)",
            ))
        }
        Some(Deployment::Agg { workers, layout }) => {
            let l = fleet_layout(layout)?;
            let fleet = fleet_table(t)?;
            l.write(fleet);
            fleet.insert(
                "replicas".into(),
                i64::from(workers * l.replicas_per_worker).into(),
            );
            fleet.remove("pools");
            fleet.remove("kv_transfer");
        }
        Some(Deployment::Disagg {
            prefill_workers,
            prefill,
            decode_workers,
            decode,
        }) => {
            let p = fleet_layout(prefill)?;
            let d = fleet_layout(decode)?;
            let pool = |name: &str, workers: u32, l: &FleetLayout| {
                let mut t = Table::new();
                t.insert("name".into(), name.into());
                t.insert("role".into(), name.into());
                t.insert(
                    "replicas".into(),
                    i64::from(workers * l.replicas_per_worker).into(),
                );
                l.write(&mut t);
                Value::Table(t)
            };
            let fleet = fleet_table(t)?;
            for key in [
                "replicas",
                "tensor_parallel",
                "pipeline_parallel",
                "expert_parallel",
                "attention_data_parallel",
            ] {
                fleet.remove(key);
            }
            fleet.insert(
                "pools".into(),
                Value::Array(vec![
                    pool("prefill", *prefill_workers, &p),
                    pool("decode", *decode_workers, &d),
                ]),
            );
            notes.push("disaggregated: the default KV link".into());
        }
    }
    Ok(())
}

/// Builds and resolves `point`'s scenario. `origin` names the base
/// scenario in errors.
pub fn express(
    base: Option<&Table>,
    origin: &str,
    settings: &Settings,
    point: &MeasuredPoint,
) -> Result<Expressed, Unexpressible> {
    let mut notes = Vec::new();
    let mut t = table_for(base, settings, point, &mut notes)?;
    let profiled = anchor_profile(&mut t, origin);
    let origin = format!("{origin} + {}", point.id);
    let models = match (&settings.model, &point.model) {
        (Some(m), _) => vec![Some(m.clone())],
        (None, Some(id)) if !point.own_workload => crate::catalog::checkpoint_name_candidates(id)
            .into_iter()
            .map(Some)
            .collect(),
        _ => vec![None],
    };
    let chips = match (&settings.hardware, &point.chip) {
        (Some(h), _) => vec![Some(h.clone())],
        // A calibration profile is the device: the file's chip names the
        // group, and the profile prices it.
        (None, Some(c)) if !profiled => chip_candidates(c).into_iter().map(Some).collect(),
        _ => vec![None],
    };
    let dtypes = match &settings.weight_dtype {
        Some(d) => vec![Some(d.clone())],
        None => {
            let c = dtype_candidates(point.quant_mode.as_deref(), point.precision.as_deref());
            if c.is_empty() {
                if point.format == super::Format::Aiconfigurator {
                    notes.push("precision not recorded: the scenario's weight dtype".into());
                }
                vec![None]
            } else {
                c.into_iter().map(Some).collect()
            }
        }
    };
    let (mut mi, mut ci, mut di) = (0, 0, 0);
    let mut first_error: [Option<ScenarioError>; 3] = [None, None, None];
    loop {
        let mut table = t.clone();
        if let Some(m) = &models[mi] {
            if let Some(model) = table.get_mut("model").and_then(Value::as_table_mut) {
                model.remove("architecture");
                model.remove("config");
            }
            set(&mut table, "model.preset", m.as_str());
        }
        if let Some(c) = &chips[ci] {
            table.insert("hardware".into(), Value::Table(Table::new()));
            set(&mut table, "hardware.preset", c.as_str());
        }
        if let Some(d) = &dtypes[di] {
            set(&mut table, "model.weight_dtype", d.as_str());
        }
        match Scenario::from_table(table.clone(), &origin) {
            Ok(scenario) => {
                return Ok(Expressed {
                    scenario,
                    table,
                    notes,
                })
            }
            Err(e) => {
                // Try the next spelling of the dimension the error names.
                let dim = if e.key.starts_with("model.weight_dtype") {
                    Some((2, &mut di, dtypes.len()))
                } else if e.key == "model.preset" {
                    Some((0, &mut mi, models.len()))
                } else if e.key == "hardware.preset" {
                    Some((1, &mut ci, chips.len()))
                } else {
                    None
                };
                let Some((d, idx, len)) = dim else {
                    return Err(Unexpressible::from_scenario(&e, None));
                };
                if first_error[d].is_none() {
                    first_error[d] = Some(e.clone());
                }
                *idx += 1;
                if *idx == len {
                    let e = first_error[d].take().expect("recorded");
                    let value = match d {
                        0 => models[0].clone(),
                        1 => chips[0].clone(),
                        _ => dtypes[0].clone(),
                    };
                    return Err(Unexpressible::from_scenario(&e, value.as_deref()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
