//! Any CSV (with a header) or JSON-lines trace, through a column mapping:
//! `columns = { arrival, prompt, output, session?, hashes? }` and a
//! `time_unit` (s, ms, us, ns or datetime). Hash ids are chained and fed to
//! the prefix cache in blocks of `block_tokens`.

use super::csv_rows::{CsvNames, CsvTrace};
use super::json_row::{JsonNames, JsonTrace};
use super::RowReader;
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
    Ok(if cfg.format == TraceFormat::Csv {
        Box::new(CsvTrace::open(
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
        Box::new(JsonTrace::open(path, key, ctx, &names, &[])?.0)
    })
}
