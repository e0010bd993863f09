//! Any CSV (with a header) or JSON-lines trace, through a column mapping:
//! `columns = { arrival, prompt, output, session?, hashes?, n? }` and a
//! `time_unit` (s, ms, us, ns or datetime). Hash ids are chained and fed to
//! the prefix cache in blocks of `block_tokens`.

use super::csv_rows::{CsvNames, CsvTrace};
use super::json_row::{JsonNames, JsonTrace, Kind};
use super::{Row, RowError, RowOutcome, RowReader};
use crate::scenario::MAX_SAMPLES;
use crate::scenario::{TimeUnit, TraceCfg, TraceFormat};
use crate::workload::{Context, WorkloadError};
use std::path::Path;

pub fn open(
    cfg: &TraceCfg,
    path: &Path,
    key: &str,
    ctx: &Context,
) -> Result<Box<dyn RowReader>, WorkloadError> {
    let c = cfg
        .columns
        .as_ref()
        .ok_or_else(|| ctx.config_error(&format!("{key}.columns"), "missing"))?;
    let unit = cfg.time_unit.unwrap_or(TimeUnit::S);
    let hashes = c
        .hashes
        .as_deref()
        .map(|h| (h, cfg.block_tokens.unwrap_or(1)));
    let n_key = format!("{key}.columns.n");
    Ok(if cfg.format == TraceFormat::Csv {
        let csv = CsvTrace::open(
            path,
            key,
            ctx,
            &CsvNames {
                time: &c.arrival,
                unit,
                prompt: &c.prompt,
                output: &c.output,
                session: c.session.as_deref(),
                hashes,
                tenant: cfg.tenant_column.as_deref(),
            },
        )?;
        match c.n.as_deref() {
            Some(name) => {
                let col = csv
                    .csv
                    .column(name)
                    .map_err(|e| ctx.config_error(&n_key, e.to_string()))?;
                Box::new(CsvSamples {
                    inner: csv,
                    col,
                    name: name.to_string(),
                })
            }
            None => Box::new(csv),
        }
    } else {
        let names = JsonNames {
            time: &c.arrival,
            unit,
            prompt: &c.prompt,
            output: &c.output,
            session: c.session.as_deref(),
            hashes,
            tenant: cfg.tenant_column.as_deref(),
        };
        match c.n.as_deref() {
            Some(name) => {
                let (json, slots) =
                    JsonTrace::open(path, key, ctx, &names, &[(name, Kind::Count)])?;
                Box::new(JsonSamples {
                    inner: json,
                    slot: slots[0],
                    name: name.to_string(),
                })
            }
            None => Box::new(JsonTrace::open(path, key, ctx, &names, &[])?.0),
        }
    })
}

/// A row's `n` (parallel samples), checked against the workload's limit.
fn samples(line: u64, name: &str, v: u64) -> Result<u32, RowError> {
    if (1..=MAX_SAMPLES as u64).contains(&v) {
        Ok(v as u32)
    } else {
        Err(RowError::new(
            line,
            format!("column {name:?}: parallel samples must be 1 to {MAX_SAMPLES}, got {v}"),
        ))
    }
}

/// A generic CSV trace with an `n` column.
struct CsvSamples {
    inner: CsvTrace,
    col: usize,
    name: String,
}

impl RowReader for CsvSamples {
    fn next_row(&mut self, row: &mut Row) -> Result<RowOutcome, RowError> {
        let out = self.inner.next_row(row)?;
        if let RowOutcome::Row = out {
            let v = self.inner.csv.count(self.col, &self.name)?;
            row.samples = samples(row.line, &self.name, v)?;
        }
        Ok(out)
    }

    fn file(&self) -> &str {
        self.inner.file()
    }
}

/// A generic JSON-lines trace with an `n` key (required on every line).
struct JsonSamples {
    inner: JsonTrace,
    slot: usize,
    name: String,
}

impl RowReader for JsonSamples {
    fn next_row(&mut self, row: &mut Row) -> Result<RowOutcome, RowError> {
        let out = self.inner.next_row(row)?;
        if let RowOutcome::Row = out {
            let v = self.inner.num(row.line, self.slot)?;
            row.samples = samples(row.line, &self.name, v.max(0) as u64)?;
        }
        Ok(out)
    }

    fn file(&self) -> &str {
        self.inner.file()
    }
}
