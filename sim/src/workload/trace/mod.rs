//! Trace readers: every public LLM-serving trace format, streamed row by
//! row (a multi-GB file is never loaded), plus a generic column-mapped
//! CSV/JSONL reader and servesim's own `requests.csv`. Each format is one
//! file that turns its lines into [`Row`]s; [`Replay`] applies the options
//! common to all (time window, speed, first N, tenants, lenient parsing)
//! and yields requests. ServeGen, which describes clients rather than
//! requests, is a generator of its own ([`servegen`]).

mod azure;
mod bailian;
mod burstgpt;
mod csv_rows;
pub mod detect;
mod generic;
mod json_row;
mod lines;
mod mooncake;
mod ragpulse;
mod replay;
mod requests;
pub mod servegen;
pub mod stats;
pub mod synth;
mod timefmt;

pub use lines::{LineBounded, MAX_LINE_BYTES};
pub use replay::{Replay, REORDER_ROWS};

use super::{prefix, Context, WorkloadError};
use crate::scenario::{TraceCfg, TraceFormat};
use std::path::Path;

/// One trace row as a reader produces it, before the replay options apply.
/// Readers reuse one `Row`; [`Row::reset`] clears it for the next line.
#[derive(Clone, Debug, Default)]
pub struct Row {
    /// Line of the file the row starts on (1-based).
    pub line: u64,
    /// Arrival on the trace's own clock, nanoseconds (wall-clock traces:
    /// since the Unix epoch).
    pub time_ns: i64,
    pub prompt: u64,
    pub output: u64,
    /// Session or conversation (0 when the format has none).
    pub session: u64,
    /// Tenant key from `tenant_column`, when `has_tenant`.
    pub tenant: Vec<u8>,
    pub has_tenant: bool,
    /// Chained prefix-block hashes and their block size.
    pub hashes: Vec<u64>,
    pub block_tokens: u32,
    /// Parallel samples (vLLM's `n`) from a mapped `n` column; 0 when the
    /// trace does not say.
    pub samples: u32,
}

impl Row {
    pub fn reset(&mut self, line: u64) {
        self.line = line;
        self.time_ns = 0;
        self.prompt = 0;
        self.output = 0;
        self.session = 0;
        self.tenant.clear();
        self.has_tenant = false;
        self.hashes.clear();
        self.block_tokens = 0;
        self.samples = 0;
    }

    pub fn set_tenant(&mut self, key: &[u8]) {
        self.tenant.clear();
        self.tenant.extend_from_slice(key);
        self.has_tenant = true;
    }
}

/// What a reader did with the next line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowOutcome {
    /// A row was read into the `Row`.
    Row,
    /// A row was read but the format's options leave it out (reason).
    Filtered(&'static str),
    /// End of the file.
    End,
}

/// A line that does not parse (skippable under `--lenient`), or a read
/// failure (`fatal`, never skipped).
#[derive(Clone, Debug, PartialEq)]
pub struct RowError {
    pub line: u64,
    pub message: String,
    pub fatal: bool,
}

impl RowError {
    pub fn new(line: u64, message: impl Into<String>) -> RowError {
        RowError {
            line,
            message: message.into(),
            fatal: false,
        }
    }

    /// A field that does not hold what its column should.
    pub fn field(line: u64, column: &str, expected: &str, got: &[u8]) -> RowError {
        let got = String::from_utf8_lossy(got);
        let got: String = got.chars().take(60).collect();
        RowError::new(line, format!("{column}: expected {expected}, got {got:?}"))
    }
}

/// A trace format's row reader.
pub trait RowReader: Send {
    /// Reads the next row into `row`.
    fn next_row(&mut self, row: &mut Row) -> Result<RowOutcome, RowError>;

    /// The file being read (for messages).
    fn file(&self) -> &str;

    /// Format-specific statistics gathered while reading, for `trace stats`
    /// (only when opened with `stats`).
    fn extra_stats(&self) -> Vec<(String, f64)> {
        Vec::new()
    }
}

/// A stable number for a text id (sessions): FNV-1a, then mixed.
pub fn text_id(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &c in b {
        h ^= c as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    prefix::mix64(h)
}

/// Opens the row reader of a (validated) trace; `key` is its scenario key
/// for messages. `stats` asks the reader to gather its extra statistics.
pub fn open_rows(
    cfg: &TraceCfg,
    key: &str,
    ctx: &Context,
    stats: bool,
) -> Result<Box<dyn RowReader>, WorkloadError> {
    let path = ctx.resolve(&cfg.path);
    let path: &Path = &path;
    match cfg.format {
        TraceFormat::Azure => azure::open(cfg, path, key, ctx),
        TraceFormat::Burstgpt => burstgpt::open(cfg, path, key, ctx),
        TraceFormat::Mooncake => mooncake::open(cfg, path, key, ctx),
        TraceFormat::Bailian => bailian::open(cfg, path, key, ctx),
        TraceFormat::Ragpulse => ragpulse::open(cfg, path, key, ctx, stats),
        TraceFormat::Csv | TraceFormat::Jsonl => generic::open(cfg, path, key, ctx),
        TraceFormat::Requests => requests::open(cfg, path, key, ctx),
        TraceFormat::Servegen => Err(ctx.config_error(
            &format!("{key}.format"),
            "servegen describes clients, not requests: it has no rows to read",
        )),
    }
}
