//! RAGPulse, a RAG-serving trace of a university Q&A service (Wang et al.,
//! arXiv 2511.12979; flashserve/RAGPulse).
//!
//! `0_trace.jsonl` rows: `{"timestamp": "<seconds, as a string>",
//! "input_length", "output_length", "hash_ids": {"sys_prompt": [...],
//! "passages_ids": [...], "history": [...], "web_search": [...],
//! "user_input": [...]}, "session_id"}`. The ids name content segments of
//! at most 512 tokens whose lengths are in the side files `1_sys_prompt.jsonl`
//! … `5_web_search.jsonl` next to the trace. The prompt is laid out as a RAG
//! server builds it — system prompt, retrieved passages, web results,
//! history, user input — cut into blocks of `block_tokens` (default 16),
//! and chained per block (see `prefix::SegmentBlocks`).

use super::json_row::{JsonNames, JsonSpec, JsonTrace, Kind};
use super::lines::Lines;
use super::{Row, RowError, RowOutcome, RowReader};
use crate::scenario::{TimeUnit, TraceCfg};
use crate::workload::prefix::SegmentBlocks;
use crate::workload::{Context, WorkloadError};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Segment kinds as the trace names them.
const COMPONENTS: [&str; 5] = [
    "sys_prompt",
    "passages_ids",
    "history",
    "web_search",
    "user_input",
];
/// Each kind's side file and id key.
const SIDE_FILES: [(&str, &str); 5] = [
    ("1_sys_prompt.jsonl", "sys_prompt_id"),
    ("2_passages.jsonl", "passage_id"),
    ("3_history.jsonl", "history_id"),
    ("5_web_search.jsonl", "web_search_id"),
    ("4_user_input.jsonl", "user_input_id"),
];
/// Position of each kind in the prompt: sys prompt, passages, web search,
/// history, user input.
const PROMPT_ORDER: [u8; 5] = [0, 1, 3, 2, 4];

/// Default tokens per prefix block (vLLM's default KV block size).
pub const DEFAULT_BLOCK_TOKENS: u32 = 16;

/// Segment ids seen, and component tokens (total, repeated) by kind.
type SegmentReuse = (HashSet<u64>, [(u64, u64); 5]);

/// Token lengths of one segment kind by id: a dense table when ids are
/// small (they are in RAGPulse), a hash map otherwise.
enum SegmentLengths {
    Dense(Vec<u32>),
    Sparse(HashMap<u64, u32>),
}

impl SegmentLengths {
    const ABSENT: u32 = u32::MAX;

    fn new(map: HashMap<u64, u32>) -> SegmentLengths {
        let max = map.keys().copied().max().unwrap_or(0);
        if max < 1 << 24 {
            let mut v = vec![Self::ABSENT; max as usize + 1];
            for (id, n) in map {
                v[id as usize] = n.min(Self::ABSENT - 1);
            }
            SegmentLengths::Dense(v)
        } else {
            SegmentLengths::Sparse(map)
        }
    }

    #[inline]
    fn get(&self, id: u64) -> Option<u32> {
        match self {
            SegmentLengths::Dense(v) => v.get(id as usize).copied().filter(|&n| n != Self::ABSENT),
            SegmentLengths::Sparse(m) => m.get(&id).copied(),
        }
    }
}

struct RagPulse {
    t: JsonTrace,
    block_tokens: u32,
    lengths: [SegmentLengths; 5],
    order: Vec<(u8, u64)>,
    /// `trace stats` only: ids seen and component tokens (total, repeated).
    stats: Option<SegmentReuse>,
}

pub fn open(
    cfg: &TraceCfg,
    path: &Path,
    key: &str,
    ctx: &Context,
    stats: bool,
) -> Result<Box<dyn RowReader>, WorkloadError> {
    let names = JsonNames {
        time: "timestamp",
        unit: TimeUnit::S,
        prompt: "input_length",
        output: "output_length",
        session: Some("session_id"),
        hashes: None,
        tenant: cfg.tenant_column.as_deref(),
    };
    let (t, _) = JsonTrace::open(
        path,
        key,
        ctx,
        &names,
        &[("hash_ids", Kind::Segments(&COMPONENTS))],
    )?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tables = Vec::with_capacity(5);
    for (file, id_key) in SIDE_FILES {
        tables.push(SegmentLengths::new(read_side_file(
            &dir.join(file),
            id_key,
            key,
            ctx,
        )?));
    }
    let lengths: [SegmentLengths; 5] = tables.try_into().ok().expect("five kinds");
    Ok(Box::new(RagPulse {
        t,
        block_tokens: cfg.block_tokens.unwrap_or(DEFAULT_BLOCK_TOKENS),
        lengths,
        order: Vec::new(),
        stats: stats.then(|| (HashSet::new(), [(0, 0); 5])),
    }))
}

/// A side file: `{"<kind>_id": id, "token_length": n}` per line.
fn read_side_file(
    path: &Path,
    id_key: &str,
    key: &str,
    ctx: &Context,
) -> Result<HashMap<u64, u32>, WorkloadError> {
    let mut lines = Lines::open(path, key, ctx).map_err(|_| {
        ctx.config_error(
            &format!("{key}.path"),
            format!(
                "RAGPulse segment lengths {} are missing: they belong next to the trace",
                path.display()
            ),
        )
    })?;
    let mut spec = JsonSpec::new();
    let id = spec
        .add(id_key, Kind::Int)
        .map_err(|m| ctx.config_error(key, m))?;
    let len = spec
        .add("token_length", Kind::Count)
        .map_err(|m| ctx.config_error(key, m))?;
    let mut row = Default::default();
    let mut map = HashMap::new();
    let file = path.display().to_string();
    let bad = |line: u64, message: String| WorkloadError::Data {
        file: file.clone(),
        line: Some(line),
        message,
    };
    while let Some((line, text)) = lines.next().map_err(|e| bad(e.line, e.message))? {
        spec.parse(text, &mut row).map_err(|m| bad(line, m))?;
        let (Some(i), Some(n)) = (row.nums[id], row.nums[len]) else {
            return Err(bad(
                line,
                format!("needs keys {id_key:?} and \"token_length\""),
            ));
        };
        map.insert(i as u64, n.min(u32::MAX as i64) as u32);
    }
    Ok(map)
}

impl RowReader for RagPulse {
    fn next_row(&mut self, row: &mut Row) -> Result<RowOutcome, RowError> {
        if !self.t.read(row)? {
            return Ok(RowOutcome::End);
        }
        let line = row.line;
        let segs = &self.t.row.segs;
        if let Some((seen, per)) = &mut self.stats {
            // Reuse as the trace's own statistics count it: any earlier
            // occurrence of the id, in file order.
            for &(c, id) in segs {
                let n = self.lengths[c as usize].get(id).unwrap_or(0) as u64;
                per[c as usize].0 += n;
                if !seen.insert(id) {
                    per[c as usize].1 += n;
                }
            }
        }
        self.order.clear();
        self.order.extend_from_slice(segs);
        // Stable: ids keep their order within a kind.
        self.order.sort_by_key(|&(c, _)| PROMPT_ORDER[c as usize]);
        let b = self.block_tokens;
        let max_blocks = row.prompt / b as u64;
        row.hashes.reserve(max_blocks.min(1 << 20) as usize);
        let mut blocks = SegmentBlocks::new(b, max_blocks);
        for &(c, id) in &self.order {
            let Some(n) = self.lengths[c as usize].get(id) else {
                return Err(RowError::new(
                    line,
                    format!(
                        "segment {id} of {:?} is not in {}",
                        COMPONENTS[c as usize], SIDE_FILES[c as usize].0
                    ),
                ));
            };
            blocks.push(((c as u64) << 56) ^ id, n as u64, &mut row.hashes);
        }
        row.block_tokens = b;
        Ok(RowOutcome::Row)
    }

    fn file(&self) -> &str {
        self.t.lines.file()
    }

    fn extra_stats(&self) -> Vec<(String, f64)> {
        let Some((_, per)) = &self.stats else {
            return Vec::new();
        };
        let total: u64 = per.iter().map(|p| p.0).sum();
        let rep: u64 = per.iter().map(|p| p.1).sum();
        let mut v = vec![(
            "segment_token_reuse".to_string(),
            rep as f64 / total.max(1) as f64,
        )];
        for (i, name) in COMPONENTS.iter().enumerate() {
            let (t, r) = per[i];
            v.push((
                format!("{name}.token_share"),
                t as f64 / total.max(1) as f64,
            ));
            v.push((format!("{name}.token_reuse"), r as f64 / t.max(1) as f64));
        }
        v
    }
}
