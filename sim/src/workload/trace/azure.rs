//! Azure LLM inference traces 2023 (Patel et al., "Splitwise: Efficient
//! generative LLM inference using phase splitting", ISCA'24) and 2024
//! (Stojkovic et al., "DynamoLLM", HPCA'25), from Azure/AzurePublicDataset.
//!
//! CSV `TIMESTAMP,ContextTokens,GeneratedTokens`: wall-clock times with 7
//! fractional digits (`2023-11-16 18:17:03.9799600`), CRLF line ends, no
//! newline after the last row.

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
        time: "TIMESTAMP",
        unit: TimeUnit::Datetime,
        prompt: "ContextTokens",
        output: "GeneratedTokens",
        session: None,
        hashes: None,
        tenant: cfg.tenant_column.as_deref(),
    };
    Ok(Box::new(CsvTrace::open(path, key, ctx, &names)?))
}
