//! Mooncake / Kimi traces (Qin et al., "Mooncake: Trading More Storage for
//! Less Computation", FAST'25; kvcache-ai/Mooncake `FAST25-release`).
//!
//! JSONL `{"timestamp": ms, "input_length", "output_length", "hash_ids":
//! [...]}`: `hash_ids` are the prompt's prefix block ids, one per 512
//! tokens (`len == ceil(input_length / 512)`), fed to the prefix cache.

use super::json_row::{JsonNames, JsonTrace};
use super::RowReader;
use crate::scenario::{TimeUnit, TraceCfg};
use crate::workload::{Context, WorkloadError};
use std::path::Path;

/// Tokens per Mooncake hash block.
pub const BLOCK_TOKENS: u32 = 512;

pub fn open(
    cfg: &TraceCfg,
    path: &Path,
    key: &str,
    ctx: &Context,
) -> Result<Box<dyn RowReader>, WorkloadError> {
    let names = JsonNames {
        time: "timestamp",
        unit: TimeUnit::Ms,
        prompt: "input_length",
        output: "output_length",
        session: None,
        hashes: Some(("hash_ids", BLOCK_TOKENS)),
        tenant: cfg.tenant_column.as_deref(),
    };
    Ok(Box::new(JsonTrace::open(path, key, ctx, &names, &[])?.0))
}
