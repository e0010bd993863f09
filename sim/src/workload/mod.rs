//! Workloads: where requests come from. A [`RequestSource`] yields requests in
//! arrival order and may answer the end of a request with a follow-up (closed-
//! loop users, multi-turn conversations).
//!
//! Sources: an open-loop [`Generator`] (an arrival process from [`arrival`]
//! and token lengths from [`length`]), [`ClosedLoop`] users, a trace replayed
//! by [`trace::Replay`], and ServeGen's per-client descriptors
//! ([`trace::servegen`]).

pub mod arrival;
mod closed_loop;
mod conversation;
pub mod length;
pub mod merge;
pub mod prefix;
pub mod samples;
mod shared_prefix;
mod synthetic;
pub mod trace;

pub use closed_loop::ClosedLoop;
pub use conversation::Conversations;
pub use length::{LengthSampler, Lengths};
pub use shared_prefix::{SharedPrefix, HASH_BLOCK_TOKENS};
pub use synthetic::Generator;

use crate::request::Request;
/// The request a source yields (defined with the request it becomes).
pub use crate::request::RequestSpec;
use crate::scenario::{ArrivalCfg, TraceFormat, WorkloadCfg};
use crate::time::SimTime;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A stream of requests.
pub trait RequestSource: Send {
    /// The next request in arrival order; `None` when the source is exhausted.
    fn next_request(&mut self) -> Option<RequestSpec>;

    /// The request `req` (produced by this source) ended at `now`, completed
    /// or rejected. Closed-loop sources return a follow-up arriving at or
    /// after `now`; open-loop sources return `None`.
    fn on_request_end(
        &mut self,
        _req: &Request,
        _now: SimTime,
        _completed: bool,
    ) -> Option<RequestSpec> {
        None
    }

    /// Called once when the run ends: an error that stopped the source early
    /// (a trace line that does not parse), or what the source has to report
    /// (lines read and skipped, users that left).
    fn finish(&mut self) -> Result<Option<WorkloadReport>, WorkloadError> {
        Ok(None)
    }

    /// Whether this source never answers `on_request_end` with a follow-up
    /// (every arrival comes from `next_request`). Decode runs may then step
    /// ahead of other replicas' events (`simulation::replicas`): no
    /// request's end can create an arrival before the next one queued.
    /// `false` unless a source says so.
    fn open_loop(&self) -> bool {
        false
    }

    /// The name behind tenant index `index` of the requests produced so far
    /// (a trace's `tenant_column` value), when the source names tenants.
    fn tenant_name(&self, _index: u32) -> Option<String> {
        None
    }
}

impl RequestSource for Box<dyn RequestSource> {
    fn next_request(&mut self) -> Option<RequestSpec> {
        (**self).next_request()
    }

    fn on_request_end(
        &mut self,
        req: &Request,
        now: SimTime,
        completed: bool,
    ) -> Option<RequestSpec> {
        (**self).on_request_end(req, now, completed)
    }

    fn finish(&mut self) -> Result<Option<WorkloadReport>, WorkloadError> {
        (**self).finish()
    }

    fn open_loop(&self) -> bool {
        (**self).open_loop()
    }

    fn tenant_name(&self, index: u32) -> Option<String> {
        (**self).tenant_name(index)
    }
}

/// A source with no requests (stands in when a workload cannot be built).
pub struct NoRequests;

impl RequestSource for NoRequests {
    fn next_request(&mut self) -> Option<RequestSpec> {
        None
    }

    fn open_loop(&self) -> bool {
        true
    }
}

/// Why a workload could not be built or read. Displayed on one line.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum WorkloadError {
    /// A scenario value that only fails when used (a file that cannot be
    /// opened or read): the scenario file, the key path, what went wrong.
    #[error("{origin}: {key}: {message}")]
    Config {
        origin: String,
        key: String,
        message: String,
    },
    /// Bad data in a trace or length file: the file, the line (when the
    /// problem is on one), what is wrong.
    #[error("{file}: {}{message}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
    Data {
        file: String,
        line: Option<u64>,
        message: String,
    },
}

/// What a run's workload reports in `summary.json` (field `workload`).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct WorkloadReport {
    /// Every trace file the workload read (replayed, or drawn lengths from).
    pub traces: Vec<TraceReport>,
    /// Closed loop: users that left after a rejection with zero think time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub users_left: Option<u64>,
}

/// How the reading of one trace file went.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct TraceReport {
    pub format: String,
    pub path: String,
    /// Rows that parsed (before the time window and filters).
    pub rows: u64,
    /// Requests produced (replayed, or lengths taken). A run with a
    /// duration horizon stops pulling once a request would arrive after it,
    /// so that last one is counted here but not admitted.
    pub requests: u64,
    /// Lines that did not parse, skipped under `--lenient`.
    pub skipped_lines: u64,
    /// The first skipped line's error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_skipped: Option<String>,
    /// Rows left out on purpose, by reason (outside the time window, another
    /// model, failed requests, ...).
    pub filtered: BTreeMap<String, u64>,
    /// Rows earlier than one already replayed (beyond the reorder buffer),
    /// replayed at that earlier row's time.
    pub out_of_order: u64,
    /// Rows earlier than the row before them in the file, put back in time
    /// order by the reorder buffer (absent when the file is sorted).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reordered: u64,
    /// Rows with 0 prompt or 0 output tokens, replayed with 1.
    pub zero_prompt: u64,
    pub zero_output: u64,
    /// Arrival times were divided by this (from `time_scale` or `rate`).
    pub time_scale: f64,
    /// Tenant names in index order (from `tenant_column`, or ServeGen clients).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<String>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl TraceReport {
    /// The stderr line of a trace with rows out of time order beyond what
    /// the reorder buffer fixes, if it has any.
    pub fn out_of_order_note(&self) -> Option<String> {
        if self.out_of_order == 0 && self.reordered > 0 {
            return Some(format!(
                "{}: {} of {} rows ({:.1} %) were out of time order in the file and were \
                 replayed in time order",
                self.path,
                self.reordered,
                self.rows,
                100.0 * self.reordered as f64 / self.rows.max(1) as f64
            ));
        }
        (self.out_of_order > 0).then(|| {
            format!(
                "{}: {} of {} rows ({:.1} %) came later than the reorder buffer of {} rows \
                 can fix and were replayed at the previous row's time; sort the trace by \
                 arrival to replay it as recorded",
                self.path,
                self.out_of_order,
                self.rows,
                100.0 * self.out_of_order as f64 / self.rows.max(1) as f64,
                crate::workload::trace::REORDER_ROWS
            )
        })
    }

    /// The stderr line of a trace that gave no rows at all (an empty or
    /// header-only file, or every line skipped), if so: its run serves no
    /// request from it.
    pub fn empty_note(&self) -> Option<String> {
        (self.rows == 0).then(|| {
            format!(
                "{}: the trace has no rows ({} format){}: no request came from it",
                self.path,
                self.format,
                if self.skipped_lines > 0 {
                    " that parse"
                } else {
                    ", an empty or header-only file"
                }
            )
        })
    }

    /// The stderr line of a lenient run that skipped lines, if it did.
    pub fn skipped_note(&self) -> Option<String> {
        (self.skipped_lines > 0).then(|| {
            format!(
                "{}: skipped {} malformed line(s){}",
                self.path,
                self.skipped_lines,
                self.first_skipped
                    .as_ref()
                    .map(|m| format!(" (first: {m})"))
                    .unwrap_or_default()
            )
        })
    }
}

/// Where a workload's files are: the scenario it came from (for messages)
/// and the folder relative paths start from.
#[derive(Clone, Debug)]
pub struct Context {
    pub origin: String,
    pub base_dir: PathBuf,
    pub seed: u64,
}

impl Context {
    pub fn new(origin: &str, base_dir: &Path, seed: u64) -> Context {
        Context {
            origin: origin.to_string(),
            base_dir: base_dir.to_path_buf(),
            seed,
        }
    }

    /// A path from the scenario, resolved against its folder.
    pub fn resolve(&self, p: &str) -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() || self.base_dir == Path::new(".") {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }

    pub fn config_error(&self, key: &str, message: impl Into<String>) -> WorkloadError {
        WorkloadError::Config {
            origin: self.origin.clone(),
            key: key.to_string(),
            message: message.into(),
        }
    }
}

/// The source a scenario's `[workload]` describes. Files are opened now, so
/// a missing trace is reported before the run starts.
pub fn build(cfg: &WorkloadCfg, ctx: &Context) -> Result<Box<dyn RequestSource>, WorkloadError> {
    let base = build_base(cfg, ctx)?;
    let with_prefix: Box<dyn RequestSource> = match &cfg.shared_prefix {
        Some(p) => Box::new(SharedPrefix::new(base, p, ctx.seed)),
        None => base,
    };
    let with_turns: Box<dyn RequestSource> = match &cfg.conversation {
        Some(c) => {
            let sampler = |d, key: &str| LengthSampler::build(d, key, ctx).map(|(s, _)| s);
            let output = cfg.output_tokens.as_ref().ok_or_else(|| {
                ctx.config_error("workload.conversation", "needs workload.output_tokens")
            })?;
            Box::new(Conversations::new(
                with_prefix,
                sampler(&c.turns, "workload.conversation.turns")?,
                sampler(
                    &c.follow_up_tokens,
                    "workload.conversation.follow_up_tokens",
                )?,
                sampler(output, "workload.output_tokens")?,
                c.think_time_s,
                ctx.seed,
            ))
        }
        None => with_prefix,
    };
    Ok(match &cfg.n {
        Some(d) => Box::new(samples::Samples::new(
            with_turns,
            LengthSampler::build(d, "workload.n", ctx)?.0,
            ctx.seed,
        )),
        None => with_turns,
    })
}

/// The base stream: a trace replay, closed-loop users, or an open-loop
/// arrival process with length models.
fn build_base(cfg: &WorkloadCfg, ctx: &Context) -> Result<Box<dyn RequestSource>, WorkloadError> {
    if let Some(t) = &cfg.trace {
        if t.format == TraceFormat::Servegen {
            let fallback = match (&cfg.prompt_tokens, &cfg.output_tokens) {
                (Some(p), Some(o)) => Some((
                    LengthSampler::build(p, "workload.prompt_tokens", ctx)?.0,
                    LengthSampler::build(o, "workload.output_tokens", ctx)?.0,
                )),
                _ => None,
            };
            return Ok(Box::new(trace::servegen::ServeGen::open(
                t,
                "workload.trace",
                ctx,
                fallback,
            )?));
        }
        return Ok(Box::new(trace::Replay::open(t, "workload.trace", ctx)?));
    }
    let arrival = cfg.arrival.as_ref().ok_or_else(|| {
        ctx.config_error(
            "workload.arrival",
            "missing: give an arrival process or a trace",
        )
    })?;
    let (lengths, reports) = Lengths::build(cfg, ctx)?;
    match arrival {
        ArrivalCfg::Closed {
            users,
            think_time,
            ramp_up_s,
        } => Ok(Box::new(ClosedLoop::new(
            *users,
            think_time.as_ref(),
            ramp_up_s.unwrap_or(0.0),
            lengths,
            reports,
            ctx.seed,
        ))),
        open => Ok(Box::new(Generator::with_lengths(
            arrival::build(open),
            lengths,
            reports,
            ctx.seed,
        ))),
    }
}

/// Opens a scenario's workload and reads its first request, so `check` can
/// report a bad trace before a run.
pub fn probe(cfg: &WorkloadCfg, ctx: &Context) -> Result<Option<RequestSpec>, WorkloadError> {
    let mut src = build(cfg, ctx)?;
    let first = src.next_request();
    src.finish()?;
    Ok(first)
}
