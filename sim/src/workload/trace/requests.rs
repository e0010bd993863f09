//! servesim's own `requests.csv` (see `output.rs`), so a simulated run can
//! be replayed: `arrival_s`, `prompt_tokens`, `output_tokens` per request.

use super::csv_rows::{CsvNames, CsvTrace};
use super::{Row, RowError, RowOutcome, RowReader};
use crate::scenario::{TimeUnit, TraceCfg};
use crate::workload::{Context, WorkloadError};
use std::path::Path;

struct Requests(CsvTrace);

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
    Ok(Box::new(Requests(CsvTrace::open(path, key, ctx, &names)?)))
}

impl RowReader for Requests {
    fn next_row(&mut self, row: &mut Row) -> Result<RowOutcome, RowError> {
        Ok(if self.0.read(row)? {
            RowOutcome::Row
        } else {
            RowOutcome::End
        })
    }

    fn file(&self) -> &str {
        self.0.csv.file()
    }
}
