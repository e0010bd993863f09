//! Result files of a run: `summary.json`, `requests.csv` (one row per
//! request) and `timeseries.csv` (one row per replica per sampling tick).
//! Columns are documented in docs/output-files.md; formats are fixed so that the same
//! run gives byte-identical files.

mod atomic;
mod fast_fmt;
mod request_row;
mod requests_file;
mod row_writer;
mod stream_file;
pub mod timeseries;
pub use atomic::{write_atomic, write_bytes_atomic, OutputLock, LOCK_FILE};
pub use requests_file::{RequestRows, StreamedRows};

use crate::attribution;
use crate::request::Request;
use std::fs;
use std::io::Write;
use std::path::Path;

/// Columns of `requests.csv` before the latency components (all of its
/// columns when attribution is off).
pub const BASE_COLUMNS: [&str; 15] = [
    "id",
    "arrival_s",
    "replica",
    "prompt_tokens",
    "output_tokens",
    "generated_tokens",
    "status",
    "reject_reason",
    "queue_wait_ms",
    "ttft_ms",
    "tpot_ms",
    "e2e_ms",
    "preemptions",
    "tenant",
    "session",
];

/// Header of `requests.csv`: the base columns, then the latency components
/// (`attribution::COLUMNS`, milliseconds with six decimals), joined at
/// compile time so the component names live in one place.
pub const REQUEST_COLUMNS: [&str; BASE_COLUMNS.len() + attribution::N_COMPONENTS] = {
    let mut out = [""; BASE_COLUMNS.len() + attribution::N_COMPONENTS];
    let mut i = 0;
    while i < out.len() {
        out[i] = if i < BASE_COLUMNS.len() {
            BASE_COLUMNS[i]
        } else {
            attribution::COLUMNS[i - BASE_COLUMNS.len()]
        };
        i += 1;
    }
    out
};

/// Header of `timeseries.csv`.
pub const TIMESERIES_COLUMNS: [&str; 6] = [
    "time_s",
    "replica",
    "waiting",
    "running",
    "kv_blocks_used",
    "kv_util",
];

/// What identifies a run's files (`summary.json`'s `run`): the scenario it
/// resolved, its seed, and the size of the files written beside the
/// summary, so that `report` and `explain` can tell a file of another run
/// put in their place.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct RunIdentity {
    /// FNV-1a digest of the resolved scenario table, hexadecimal.
    pub scenario_hash: String,
    pub seed: u64,
    pub requests_csv_bytes: u64,
    pub timeseries_csv_bytes: u64,
    pub timeseries_rows: u64,
}

/// A stable digest of the scenario a run resolved
/// ([`crate::scenario::Scenario::digest`]): part of the run's identity in
/// `summary.json`.
pub fn scenario_hash(s: &crate::scenario::Scenario) -> u64 {
    s.digest()
}

/// `attribution`: the rows carry latency components (`attr_*` columns).
/// `disagg`: the fleet disaggregates, so each row ends with its KV transfer
/// (`cluster::disagg::CSV_COLUMNS`); other runs keep the columns they had.
/// `regions`: the fleet's region names (`[[fleet.regions]]`), when it has
/// regions: each row ends with its origin region (`origin_region`).
pub fn write_requests<'r>(
    out: &mut impl Write,
    rows: impl Iterator<Item = (u64, &'r Request)>,
    attribution: bool,
    disagg: bool,
    regions: &[&str],
) -> std::io::Result<()> {
    out.write_all(&request_header(attribution, disagg, !regions.is_empty())?)?;
    let mut row = Vec::new();
    for (id, r) in rows {
        row.clear();
        request_row::push_request_row(&mut row, id, r, attribution, disagg, regions);
        out.write_all(&row)?;
    }
    Ok(())
}

/// The header line of `requests.csv` (see [`write_requests`]).
fn request_header(attribution: bool, disagg: bool, regions: bool) -> std::io::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let base: &[&str] = if attribution {
        &REQUEST_COLUMNS
    } else {
        &BASE_COLUMNS
    };
    let extra: &[&str] = if disagg {
        &crate::cluster::disagg::CSV_COLUMNS
    } else {
        &[]
    };
    let origin: &[&str] = if regions { &["origin_region"] } else { &[] };
    w.write_record(base.iter().chain(extra.iter()).chain(origin.iter()))?;
    w.into_inner().map_err(|e| e.into_error())
}

/// `requests.csv` written row by row while the run goes, into the temporary
/// name [`write_atomic`] uses, and renamed into place by [`RequestsCsv::finish`] (or
/// removed when dropped unfinished): the file still appears whole or not at
/// all, but the run never holds its rows.
pub struct RequestsCsv {
    rows: Rows,
    tmp: std::path::PathBuf,
    done: bool,
}

/// Where rows are formatted: here, or on the writer thread (`row_writer`).
#[derive(Debug)]
enum Rows {
    Here(row_writer::RowFile),
    Writer(row_writer::RowWriter),
}

impl RequestsCsv {
    /// Starts `dir/requests.csv` (its temporary) with its header.
    /// `regions`: the fleet's region names, when it has regions. The rows
    /// are formatted on the writer thread (`row_writer`) where the process
    /// may run on more than one CPU.
    pub fn create(
        dir: &Path,
        attribution: bool,
        disagg: bool,
        regions: Vec<String>,
    ) -> std::io::Result<RequestsCsv> {
        let writer = row_writer::pays();
        RequestsCsv::create_with(dir, attribution, disagg, regions, writer)
    }

    /// [`Self::create`], on the writer thread or not (the bytes are the
    /// same either way).
    pub(crate) fn create_with(
        dir: &Path,
        attribution: bool,
        disagg: bool,
        regions: Vec<String>,
        writer: bool,
    ) -> std::io::Result<RequestsCsv> {
        fs::create_dir_all(dir)?;
        let tmp = atomic::temp_name(&dir.join("requests.csv"));
        // Written past the page cache where the file system allows it
        // (`stream_file`): nothing reads it back before the run ends.
        let mut out = stream_file::StreamFile::create(&tmp, true)?;
        let header = request_header(attribution, disagg, !regions.is_empty())?;
        out.buf().extend_from_slice(&header);
        let file = row_writer::RowFile {
            out,
            attribution,
            disagg,
            regions,
        };
        let rows = if writer {
            Rows::Writer(row_writer::RowWriter::start(file)?)
        } else {
            Rows::Here(file)
        };
        Ok(RequestsCsv {
            rows,
            tmp,
            done: false,
        })
    }

    /// Appends request `id`'s row (rows stand in the order they come).
    pub fn row(&mut self, id: u64, r: &Request) -> std::io::Result<()> {
        match &mut self.rows {
            Rows::Here(file) => file.row(id, r),
            // A write error on the writer shows at `finish`.
            Rows::Writer(w) => {
                w.row(id, r);
                Ok(())
            }
        }
    }

    /// Writes the rest, syncs and renames the file to `dir/requests.csv`.
    pub fn finish(mut self, dir: &Path) -> std::io::Result<()> {
        match &mut self.rows {
            Rows::Here(file) => file.out.finish()?,
            Rows::Writer(w) => w.finish()?,
        }
        fs::rename(&self.tmp, dir.join("requests.csv"))?;
        self.done = true;
        Ok(())
    }
}

impl Drop for RequestsCsv {
    fn drop(&mut self) {
        if !self.done {
            // The writer, if any, stops before its file is removed.
            if let Rows::Writer(w) = &mut self.rows {
                w.stop();
            }
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// The header line of `timeseries.csv`: [`TIMESERIES_COLUMNS`], then the
/// life cycle's columns (`fleet`, with a life cycle) and the canary's
/// weight (with `[canary]`).
pub fn timeseries_header(fleet: &[&str], canary: bool) -> String {
    let mut h = TIMESERIES_COLUMNS.join(",");
    for c in fleet {
        h.push(',');
        h.push_str(c);
    }
    if canary {
        h.push_str(",canary_weight");
    }
    h
}

/// Appends one `timeseries.csv` row's [`TIMESERIES_COLUMNS`] to `line`
/// (without the line end): time in seconds, the replica (`u32::MAX`, a
/// fleet-wide row of `[metrics] timeseries = "fleet"`, says "all"), its
/// queue, batch and KV blocks, and KV use. Numbers are appended by
/// `fast_fmt`: the same text as `format!`, without a `String` per field.
pub fn push_timeseries_row(line: &mut Vec<u8>, row: &timeseries::TimeseriesRow) {
    let util = row.kv_blocks_used as f64 / row.kv_blocks_total.max(1) as f64;
    fast_fmt::push_fixed(line, row.time.as_secs_f64(), 3);
    line.push(b',');
    match row.replica {
        u32::MAX => line.extend_from_slice(b"all"),
        x => fast_fmt::push_u64(line, x.into()),
    }
    for v in [row.waiting.into(), row.running.into(), row.kv_blocks_used] {
        line.push(b',');
        fast_fmt::push_u64(line, v);
    }
    line.push(b',');
    fast_fmt::push_fixed(line, util, 4);
}
