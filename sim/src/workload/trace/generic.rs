//! Any CSV (with a header) or JSON-lines trace, through a column mapping:
//! `columns = { arrival, prompt, output, session?, hashes? }` and a
//! `time_unit` (s, ms, us, ns or datetime). Hash ids are chained and fed to
//! the prefix cache in blocks of `block_tokens`.

use super::csv_rows::{CsvNames, CsvTrace};
use super::json_row::{JsonNames, JsonTrace};
use super::{Row, RowError, RowOutcome, RowReader};
use crate::scenario::{TimeUnit, TraceCfg, TraceFormat};
use crate::workload::{Context, WorkloadError};
use std::path::Path;

enum Generic {
    Csv(CsvTrace),
    Json(JsonTrace),
}

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
    Ok(Box::new(if cfg.format == TraceFormat::Csv {
        Generic::Csv(CsvTrace::open(
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
        )?)
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
        Generic::Json(JsonTrace::open(path, key, ctx, &names, &[])?.0)
    }))
}

impl RowReader for Generic {
    fn next_row(&mut self, row: &mut Row) -> Result<RowOutcome, RowError> {
        let more = match self {
            Generic::Csv(t) => t.read(row)?,
            Generic::Json(t) => t.read(row)?,
        };
        Ok(if more {
            RowOutcome::Row
        } else {
            RowOutcome::End
        })
    }

    fn file(&self) -> &str {
        match self {
            Generic::Csv(t) => t.csv.file(),
            Generic::Json(t) => t.lines.file(),
        }
    }
}
