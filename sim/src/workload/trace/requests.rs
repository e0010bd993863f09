//! servesim's own `requests.csv` (see `output/mod.rs`), so a simulated run can
//! be replayed: `arrival_s`, `prompt_tokens`, `output_tokens` per request.

use super::csv_rows::{CsvNames, CsvTrace};
use super::RowReader;
use crate::scenario::{TimeUnit, TraceCfg};
use crate::workload::{Context, WorkloadError};
use std::path::Path;

pub fn open(
    cfg: &TraceCfg,
    path: &Path,
    key: &str,
    ctx: &Context,
) -> Result<Box<dyn RowReader>, WorkloadError> {
    let names = CsvNames {
        time: "arrival_s",
        unit: TimeUnit::S,
        prompt: "prompt_tokens",
        output: "output_tokens",
        session: None,
        hashes: None,
        tenant: cfg.tenant_column.as_deref(),
    };
    Ok(Box::new(CsvTrace::open(path, key, ctx, &names)?))
}
