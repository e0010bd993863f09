//! Result files of a run: `summary.json`, `requests.csv` (one row per
//! request) and `timeseries.csv` (one row per replica per sampling tick).
//! Columns are documented in the README; formats are fixed so that the same
//! run gives byte-identical files.

mod atomic;
mod fast_fmt;
pub use atomic::{write_atomic, write_bytes_atomic, OutputLock, LOCK_FILE};

use crate::attribution::{self, Component};
use crate::request::{Request, Status};
use crate::simulation::RunResult;
use crate::time::nanos_to_ms;
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

/// Milliseconds with three decimals (nothing for `None`).
fn push_ms(buf: &mut Vec<u8>, v: Option<u64>) {
    if let Some(x) = v {
        fast_fmt::push_fixed(buf, nanos_to_ms(x), 3);
    }
}

/// Writes the three result files into `dir` (created if missing), each
/// through a temporary file renamed into place; `summary.json` goes last, so
/// a summary is only ever beside the records it summarizes.
pub fn write_all(dir: &Path, result: &RunResult) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    // A folder whose summary.json is missing holds no complete run: remove
    // the old one first, write it back last.
    match fs::remove_file(dir.join("summary.json")) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut json = serde_json::to_string_pretty(&result.summary).map_err(std::io::Error::other)?;
    json.push('\n');
    let streamed = result
        .streamed_requests
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    match streamed {
        // Written while the run went: only its rename is left.
        Some(csv) => csv.finish(dir)?,
        None => write_atomic(&dir.join("requests.csv"), |w| {
            let disagg = result.summary.kv_transfer.is_some();
            let regions: Vec<&str> = result
                .summary
                .regions
                .iter()
                .map(|r| r.name.as_str())
                .collect();
            write_requests(w, &result.requests, result.attribution, disagg, &regions)
        })?,
    }
    write_atomic(&dir.join("timeseries.csv"), |w| write_timeseries(w, result))?;
    if !result.summary.pools.is_empty() {
        let names: Vec<String> = result
            .summary
            .pools
            .iter()
            .map(|p| p.name.clone())
            .collect();
        let roles: Vec<crate::scenario::PoolRole> =
            result.summary.pools.iter().map(|p| p.role_kind).collect();
        write_atomic(&dir.join("pools.csv"), |w| {
            crate::cluster::pool_series::write(w, &result.pool_series, &names, &roles)
        })?;
    }
    write_bytes_atomic(&dir.join("summary.json"), json.as_bytes())?;
    Ok(())
}

/// `attribution`: the rows carry latency components (`attr_*` columns).
/// `disagg`: the fleet disaggregates, so each row ends with its KV transfer
/// (`cluster::disagg::CSV_COLUMNS`); other runs keep the columns they had.
/// `regions`: the fleet's region names (`[[fleet.regions]]`), when it has
/// regions: each row ends with its origin region (`origin_region`).
fn write_requests(
    out: &mut impl Write,
    reqs: &[Request],
    attribution: bool,
    disagg: bool,
    regions: &[&str],
) -> std::io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    write_request_header(&mut w, attribution, disagg, !regions.is_empty())?;
    for (i, r) in reqs.iter().enumerate() {
        write_request_row(&mut w, i as u64, r, attribution, disagg, regions)?;
    }
    w.flush()?;
    Ok(())
}

fn write_request_header<W: Write>(
    w: &mut csv::Writer<W>,
    attribution: bool,
    disagg: bool,
    regions: bool,
) -> std::io::Result<()> {
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
    Ok(())
}

/// One row of `requests.csv`: request `id` (its arrival order).
fn write_request_row<W: Write, S: AsRef<str>>(
    w: &mut csv::Writer<W>,
    id: u64,
    r: &Request,
    attribution: bool,
    disagg: bool,
    regions: &[S],
) -> std::io::Result<()> {
    let reason = match r.status {
        Status::Rejected(x) => x.as_str(),
        _ => "",
    };
    // Each field is formatted into one reused buffer (no `String` per
    // field: `output::fast_fmt`).
    let mut buf = Vec::with_capacity(32);
    let mut field = |w: &mut csv::Writer<W>, f: &dyn Fn(&mut Vec<u8>)| {
        buf.clear();
        f(&mut buf);
        w.write_field(&buf)
    };
    use fast_fmt::{push_fixed, push_u64};
    field(w, &|b| push_u64(b, id))?;
    field(w, &|b| push_fixed(b, r.arrival.as_secs_f64(), 6))?;
    field(w, &|b| {
        if r.replica != u32::MAX {
            push_u64(b, r.replica as u64)
        }
    })?;
    field(w, &|b| push_u64(b, r.prompt_tokens as u64))?;
    field(w, &|b| push_u64(b, r.output_tokens as u64))?;
    field(w, &|b| push_u64(b, r.generated as u64 * r.samples as u64))?;
    w.write_field(r.status.as_str())?;
    w.write_field(reason)?;
    field(w, &|b| push_ms(b, r.queue_wait()))?;
    field(w, &|b| push_ms(b, r.ttft()))?;
    field(w, &|b| {
        if let Some(x) = r.tpot() {
            push_fixed(b, x / 1e6, 3)
        }
    })?;
    field(w, &|b| {
        push_ms(b, r.e2e().filter(|_| r.status == Status::Completed))
    })?;
    field(w, &|b| push_u64(b, r.preemptions as u64))?;
    field(w, &|b| push_u64(b, r.tenant as u64))?;
    field(w, &|b| push_u64(b, r.session))?;
    if attribution {
        write_components(w, r, &mut buf)?;
    }
    if disagg {
        for f in crate::cluster::disagg::csv_fields(r.kv_transfer.as_deref()) {
            w.write_field(f)?;
        }
    }
    if !regions.is_empty() {
        w.write_field(regions[r.region as usize].as_ref())?;
    }
    w.write_record(None::<&[u8]>)?;
    Ok(())
}

/// `requests.csv` written row by row while the run goes, into the temporary
/// name [`write_atomic`] uses, and renamed into place by [`write_all`] (or
/// removed when dropped unfinished): the file still appears whole or not at
/// all, but the run never holds its rows.
pub struct RequestsCsv {
    w: csv::Writer<std::io::BufWriter<fs::File>>,
    tmp: std::path::PathBuf,
    attribution: bool,
    disagg: bool,
    /// The fleet's region names (`origin_region`), when it has regions.
    regions: Vec<String>,
    done: bool,
}

impl RequestsCsv {
    /// Starts `dir/requests.csv` (its temporary) with its header.
    /// `regions`: the fleet's region names, when it has regions.
    pub fn create(
        dir: &Path,
        attribution: bool,
        disagg: bool,
        regions: Vec<String>,
    ) -> std::io::Result<RequestsCsv> {
        fs::create_dir_all(dir)?;
        let tmp = atomic::temp_name(&dir.join("requests.csv"));
        let file = fs::File::create(&tmp)?;
        let mut out = RequestsCsv {
            w: csv::Writer::from_writer(std::io::BufWriter::with_capacity(1 << 16, file)),
            tmp,
            attribution,
            disagg,
            done: false,
            regions,
        };
        write_request_header(&mut out.w, attribution, disagg, !out.regions.is_empty())?;
        Ok(out)
    }

    /// Appends request `id`'s row (rows must come in id order).
    pub fn row(&mut self, id: u64, r: &Request) -> std::io::Result<()> {
        let regions = &self.regions;
        write_request_row(&mut self.w, id, r, self.attribution, self.disagg, regions)
    }

    /// Flushes, syncs and renames the file to `dir/requests.csv`.
    fn finish(mut self, dir: &Path) -> std::io::Result<()> {
        self.w.flush()?;
        self.w.get_ref().get_ref().sync_all()?;
        fs::rename(&self.tmp, dir.join("requests.csv"))?;
        self.done = true;
        Ok(())
    }
}

impl Drop for RequestsCsv {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// The latency components of `r`: all of them once it completed, those of
/// TTFT when it has a first token but had not finished by the horizon, none
/// otherwise (rejected, or still queued).
fn write_components<W: Write>(
    w: &mut csv::Writer<W>,
    r: &Request,
    buf: &mut Vec<u8>,
) -> std::io::Result<()> {
    let done = r.status == Status::Completed;
    let first = r.first_token.is_some();
    for c in Component::ALL {
        if done || (first && c.before_first_token()) {
            buf.clear();
            fast_fmt::push_ns_as_ms(buf, r.attribution.get(c));
            w.write_field(&buf)?;
        } else {
            w.write_field("")?;
        }
    }
    Ok(())
}

fn write_timeseries(w: &mut impl Write, result: &RunResult) -> std::io::Result<()> {
    // With a life cycle, each row also carries the tick's replica counts by
    // phase (`lifecycle::FleetSample::COLUMNS`).
    let fleet = &result.fleet_series;
    if fleet.is_empty() {
        write!(w, "{}", TIMESERIES_COLUMNS.join(","))?;
    } else {
        let cols = crate::lifecycle::FleetSample::COLUMNS;
        write!(w, "{},{}", TIMESERIES_COLUMNS.join(","), cols.join(","))?;
    }
    // With `[canary]`, the canary's traffic weight (percent) at the tick.
    let canary = result.summary.canary.as_ref();
    if canary.is_some() {
        write!(w, ",canary_weight")?;
    }
    writeln!(w)?;
    let mut k = 0;
    for row in &result.timeseries {
        let util = row.kv_blocks_used as f64 / row.kv_blocks_total.max(1) as f64;
        // A fleet-wide row (`[metrics] timeseries = "fleet"`) says "all".
        let replica = if row.replica == u32::MAX {
            "all".to_string()
        } else {
            row.replica.to_string()
        };
        write!(
            w,
            "{:.3},{},{},{},{},{:.4}",
            row.time.as_secs_f64(),
            replica,
            row.waiting,
            row.running,
            row.kv_blocks_used,
            util
        )?;
        if !fleet.is_empty() {
            while k + 1 < fleet.len() && fleet[k].time < row.time {
                k += 1;
            }
            for v in fleet[k].values() {
                write!(w, ",{v}")?;
            }
        }
        if let Some(c) = canary {
            write!(w, ",{}", c.weight_at(row.time))?;
        }
        writeln!(w)?;
    }
    w.flush()
}
