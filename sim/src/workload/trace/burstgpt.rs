//! BurstGPT (Wang et al., "BurstGPT: A Real-world Workload Dataset to
//! Optimize LLM Serving Systems", 2024; HPMLL/BurstGPT): Azure OpenAI GPT
//! service logs.
//!
//! CSV `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log
//! Type`, times in seconds from the start. Rows can be kept to one `Model`
//! and one `Log Type`. A failed request is logged with 0 response tokens:
//! it is dropped with `drop_failures`, otherwise replayed with one output
//! token (its prefill still loaded the server), and counted either way. A
//! `Session ID` column, when present, gives sessions.

use super::csv_rows::{Col, CsvNames, CsvTrace};
use super::{Row, RowError, RowOutcome, RowReader};
use crate::scenario::{TimeUnit, TraceCfg};
use crate::workload::{Context, WorkloadError};
use std::path::Path;

struct BurstGpt {
    t: CsvTrace,
    model: Option<(Col, String)>,
    log_type: Option<(Col, String)>,
    drop_failures: bool,
}

pub fn open(
    cfg: &TraceCfg,
    path: &Path,
    key: &str,
    ctx: &Context,
) -> Result<Box<dyn RowReader>, WorkloadError> {
    // Sessions only when the file has them (later releases add the column).
    let probe = super::csv_rows::CsvRows::open(path, key, ctx, true)?;
    let session = probe.has_column("Session ID").then_some("Session ID");
    drop(probe);
    let names = CsvNames {
        time: "Timestamp",
        unit: TimeUnit::S,
        prompt: "Request tokens",
        output: "Response tokens",
        session,
        hashes: None,
        tenant: cfg.tenant_column.as_deref(),
    };
    let t = CsvTrace::open(path, key, ctx, &names)?;
    let col = |name: &str| -> Result<Col, WorkloadError> {
        Ok(Col {
            i: t.csv.column(name)?,
            name: name.to_string(),
        })
    };
    let model = cfg
        .model
        .as_ref()
        .map(|m| col("Model").map(|c| (c, m.clone())))
        .transpose()?;
    let log_type = cfg
        .log_type
        .as_ref()
        .map(|m| col("Log Type").map(|c| (c, m.clone())))
        .transpose()?;
    Ok(Box::new(BurstGpt {
        t,
        model,
        log_type,
        drop_failures: cfg.drop_failures,
    }))
}

impl RowReader for BurstGpt {
    fn next_row(&mut self, row: &mut Row) -> Result<RowOutcome, RowError> {
        if !self.t.read(row)? {
            return Ok(RowOutcome::End);
        }
        if let Some((c, want)) = &self.model {
            if self.t.csv.get(c.i, &c.name)?.trim_ascii() != want.as_bytes() {
                return Ok(RowOutcome::Filtered("other_model"));
            }
        }
        if let Some((c, want)) = &self.log_type {
            if self.t.csv.get(c.i, &c.name)?.trim_ascii() != want.as_bytes() {
                return Ok(RowOutcome::Filtered("other_log_type"));
            }
        }
        if self.drop_failures && row.output == 0 {
            return Ok(RowOutcome::Filtered("failed_request"));
        }
        Ok(RowOutcome::Row)
    }

    fn file(&self) -> &str {
        self.t.csv.file()
    }
}
