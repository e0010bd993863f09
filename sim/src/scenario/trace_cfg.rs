//! Scenario types of a trace file (`[workload] trace = {...}`, and the
//! `trace` of `length_pairs` and empirical lengths): its format, column
//! mapping and units, and the validation of those options.

use super::workload_cfg::finite_nonneg;
use super::{at_least, positive, Invalid};
use serde::{Deserialize, Serialize};

/// A trace file to replay (`[workload] trace = {...}`), or to draw lengths
/// from. Options that apply to every format come first; the rest belong to
/// one format each and are rejected with any other.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceCfg {
    pub format: TraceFormat,
    /// The file (for `servegen`, the folder of `chunk-N-*` files), relative
    /// to the scenario file's folder.
    pub path: String,
    /// Replay at k× speed: arrival times are divided by `time_scale`.
    #[serde(default)]
    pub time_scale: Option<f64>,
    /// Replay at this mean rate (requests/s) instead: times are scaled so the
    /// selected requests arrive at `rate` on average.
    #[serde(default)]
    pub rate: Option<f64>,
    /// Time window, seconds of trace time from the first row: only rows in
    /// [start_s, end_s) are replayed, the first at `t − start_s`.
    #[serde(default)]
    pub start_s: Option<f64>,
    #[serde(default)]
    pub end_s: Option<f64>,
    /// Replay only the first N requests (after the window and filters).
    #[serde(default)]
    pub max_requests: Option<u64>,
    /// Column whose values name each request's tenant (tenants are numbered
    /// in order of first appearance).
    #[serde(default)]
    pub tenant_column: Option<String>,
    /// Skip and count lines that do not parse instead of stopping with an
    /// error (`--lenient` on the command line sets it).
    #[serde(default)]
    pub lenient: bool,
    /// BurstGPT: keep only rows of this `Model` (e.g. "ChatGPT", "GPT-4").
    #[serde(default)]
    pub model: Option<String>,
    /// BurstGPT: keep only rows of this `Log Type` (e.g. "Conversation log").
    #[serde(default)]
    pub log_type: Option<String>,
    /// BurstGPT: drop failed requests (0 response tokens) instead of
    /// replaying them with one output token.
    #[serde(default)]
    pub drop_failures: bool,
    /// Generic `csv` / `jsonl`: which column holds what.
    #[serde(default)]
    pub columns: Option<ColumnMap>,
    /// Generic `csv` / `jsonl`: unit of the arrival column (default "s").
    #[serde(default)]
    pub time_unit: Option<TimeUnit>,
    /// Tokens per prefix-hash block: for `ragpulse` (default 16) and for a
    /// generic trace with a `hashes` column (required there).
    #[serde(default)]
    pub block_tokens: Option<u32>,
}

impl TraceCfg {
    /// A trace of `format` at `path` with every option at its default.
    pub fn new(format: TraceFormat, path: impl Into<String>) -> TraceCfg {
        TraceCfg {
            format,
            path: path.into(),
            time_scale: None,
            rate: None,
            start_s: None,
            end_s: None,
            max_requests: None,
            tenant_column: None,
            lenient: false,
            model: None,
            log_type: None,
            drop_failures: false,
            columns: None,
            time_unit: None,
            block_tokens: None,
        }
    }
}

/// The trace formats servesim reads (see docs/workloads.md for each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    /// Azure LLM inference trace 2023/2024 (Patel et al., Splitwise, ISCA'24).
    Azure,
    /// BurstGPT (Wang et al., 2024), Azure OpenAI GPT service logs.
    Burstgpt,
    /// Mooncake / Kimi traces (Qin et al., FAST'25).
    Mooncake,
    /// Qwen-Bailian KVCache traces (Wang et al., ATC'25).
    Bailian,
    /// RAGPulse RAG-serving trace (arXiv 2511.12979).
    Ragpulse,
    /// ServeGen per-client descriptors (Xiang et al., arXiv 2505.09999).
    Servegen,
    /// Any CSV with a header, through `columns`.
    Csv,
    /// Any JSON-lines file, through `columns`.
    Jsonl,
    /// servesim's own `requests.csv`, to replay a simulated run.
    Requests,
}

impl TraceFormat {
    pub const ALL: [TraceFormat; 9] = [
        TraceFormat::Azure,
        TraceFormat::Burstgpt,
        TraceFormat::Mooncake,
        TraceFormat::Bailian,
        TraceFormat::Ragpulse,
        TraceFormat::Servegen,
        TraceFormat::Csv,
        TraceFormat::Jsonl,
        TraceFormat::Requests,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Azure => "azure",
            TraceFormat::Burstgpt => "burstgpt",
            TraceFormat::Mooncake => "mooncake",
            TraceFormat::Bailian => "bailian",
            TraceFormat::Ragpulse => "ragpulse",
            TraceFormat::Servegen => "servegen",
            TraceFormat::Csv => "csv",
            TraceFormat::Jsonl => "jsonl",
            TraceFormat::Requests => "requests",
        }
    }

    pub fn from_name(s: &str) -> Option<TraceFormat> {
        Self::ALL.into_iter().find(|f| f.name() == s)
    }

    /// Whether the format has generic column mapping (`columns`, `time_unit`).
    pub fn is_generic(self) -> bool {
        matches!(self, TraceFormat::Csv | TraceFormat::Jsonl)
    }
}

/// Column names of a generic CSV/JSONL trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnMap {
    /// Arrival time, in `time_unit`.
    pub arrival: String,
    /// Prompt (input) tokens.
    pub prompt: String,
    /// Output (generated) tokens.
    pub output: String,
    /// Session or conversation id (integer or text).
    #[serde(default)]
    pub session: Option<String>,
    /// Prefix block hash ids: a JSON array, or integers separated by spaces
    /// or semicolons in a CSV field; chained by servesim.
    #[serde(default)]
    pub hashes: Option<String>,
    /// Parallel samples per request (vLLM's `n`, 1 to 128), when the trace
    /// records it.
    #[serde(default)]
    pub n: Option<String>,
}

/// Unit of a trace's time column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeUnit {
    S,
    Ms,
    Us,
    Ns,
    /// Wall clock `YYYY-MM-DD HH:MM:SS[.fraction]` (a `T` and a trailing `Z`
    /// are accepted), read as UTC.
    Datetime,
}

/// Which column of a trace an empirical length distribution draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LengthColumn {
    Prompt,
    Output,
}

/// Checks the options of a trace given outside a scenario (`servesim trace
/// stats`); the error names the option as `trace.<key>`.
pub fn validate_trace_options(t: &TraceCfg) -> Result<(), String> {
    validate_trace("trace", t, TraceUse::Replay).map_err(|(k, m)| format!("{k}: {m}"))
}

/// What a trace is read for: replayed as requests, or only for its lengths.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum TraceUse {
    Replay,
    Lengths,
}

pub(super) fn validate_trace(key: &str, t: &TraceCfg, usage: TraceUse) -> Result<(), Invalid> {
    let k = |f: &str| format!("{key}.{f}");
    let fmt = t.format.name();
    if t.path.trim().is_empty() {
        return Err((k("path"), "must not be empty".into()));
    }
    let only = |f: &str, with: &str| -> Invalid {
        (
            k(f),
            format!("only allowed with format = {with}, not {fmt:?}"),
        )
    };
    if usage == TraceUse::Lengths {
        if t.format == TraceFormat::Servegen {
            return Err((
                k("format"),
                "servegen describes clients, not requests: it cannot give lengths here; use it as `workload.trace`".into(),
            ));
        }
        for (f, given) in [
            ("time_scale", t.time_scale.is_some()),
            ("rate", t.rate.is_some()),
            ("tenant_column", t.tenant_column.is_some()),
        ] {
            if given {
                return Err((
                    k(f),
                    "has no effect when the trace only gives lengths".into(),
                ));
            }
        }
    }
    if t.time_scale.is_some() && t.rate.is_some() {
        return Err((
            k("rate"),
            "give `time_scale` or `rate`, not both (both set the replay speed)".into(),
        ));
    }
    if let Some(v) = t.time_scale {
        positive(&k("time_scale"), v)?;
    }
    if let Some(v) = t.rate {
        positive(&k("rate"), v)?;
    }
    if let Some(v) = t.start_s {
        finite_nonneg(&k("start_s"), v)?;
    }
    if let Some(v) = t.end_s {
        positive(&k("end_s"), v)?;
        if v <= t.start_s.unwrap_or(0.0) {
            return Err((
                k("end_s"),
                format!(
                    "must be after start_s ({}), got {v}",
                    t.start_s.unwrap_or(0.0)
                ),
            ));
        }
    }
    if let Some(n) = t.max_requests {
        at_least(&k("max_requests"), n, 1)?;
    }
    if let Some(c) = &t.tenant_column {
        if c.is_empty() {
            return Err((k("tenant_column"), "must not be empty".into()));
        }
        if t.format == TraceFormat::Servegen {
            return Err((
                k("tenant_column"),
                "servegen has one tenant per client already".into(),
            ));
        }
    }
    if t.format != TraceFormat::Burstgpt {
        if t.model.is_some() {
            return Err(only("model", "\"burstgpt\""));
        }
        if t.log_type.is_some() {
            return Err(only("log_type", "\"burstgpt\""));
        }
        if t.drop_failures {
            return Err(only("drop_failures", "\"burstgpt\""));
        }
    }
    if t.format.is_generic() {
        let Some(c) = &t.columns else {
            return Err((
                k("columns"),
                format!("missing: a {fmt} trace needs `columns = {{ arrival = ..., prompt = ..., output = ... }}`"),
            ));
        };
        for (f, v) in [
            ("arrival", &c.arrival),
            ("prompt", &c.prompt),
            ("output", &c.output),
        ] {
            if v.is_empty() {
                return Err((format!("{key}.columns.{f}"), "must not be empty".into()));
            }
        }
        match (&c.hashes, t.block_tokens) {
            (Some(_), None) => {
                return Err((
                    k("block_tokens"),
                    "missing: tokens per block of the `hashes` column".into(),
                ))
            }
            (None, Some(_)) => {
                return Err((
                    k("block_tokens"),
                    "only allowed with a `columns.hashes` column (or format = \"ragpulse\")".into(),
                ))
            }
            _ => {}
        }
    } else {
        if t.columns.is_some() {
            return Err(only("columns", "\"csv\" or \"jsonl\""));
        }
        if t.time_unit.is_some() {
            return Err(only("time_unit", "\"csv\" or \"jsonl\""));
        }
        if t.block_tokens.is_some() && t.format != TraceFormat::Ragpulse {
            return Err(only("block_tokens", "\"ragpulse\", \"csv\" or \"jsonl\""));
        }
    }
    if let Some(b) = t.block_tokens {
        at_least(&k("block_tokens"), b.into(), 1)?;
    }
    Ok(())
}
