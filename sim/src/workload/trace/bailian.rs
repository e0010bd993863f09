//! Qwen-Bailian KVCache traces (Wang et al., "KVCache Cache in the Wild:
//! Characterizing and Optimizing KVCache Cache at a Large Cloud Provider",
//! ATC'25; alibaba-edu/qwen-bailian-usagetraces-anon).
//!
//! JSONL `{chat_id, parent_chat_id, timestamp (s), input_length,
//! output_length, type, turn, hash_ids}`. `hash_ids` are salted SipHashes
//! of each 16-token block on its own, so they are chained here to become
//! prefix hashes. A conversation's turns link through `parent_chat_id`
//! (−1 for a first turn); every turn gets its first turn's chat as session.

use super::json_row::{JsonNames, JsonTrace, Kind};
use super::{Row, RowError, RowOutcome, RowReader};
use crate::scenario::{TimeUnit, TraceCfg};
use crate::workload::{Context, WorkloadError};
use std::collections::{HashMap, VecDeque};
use std::path::Path;

/// Tokens per Bailian hash block.
pub const BLOCK_TOKENS: u32 = 16;

/// Chats remembered to find a turn's first turn; the oldest are forgotten
/// beyond this, so memory stays bounded on any trace (a turn whose parent
/// was forgotten takes its parent as session).
const REMEMBERED_CHATS: usize = 1 << 18;

struct Bailian {
    t: JsonTrace,
    chat: usize,
    parent: usize,
    roots: HashMap<i64, i64>,
    order: VecDeque<i64>,
}

pub fn open(
    cfg: &TraceCfg,
    path: &Path,
    key: &str,
    ctx: &Context,
) -> Result<Box<dyn RowReader>, WorkloadError> {
    let names = JsonNames {
        time: "timestamp",
        unit: TimeUnit::S,
        prompt: "input_length",
        output: "output_length",
        session: None,
        hashes: Some(("hash_ids", BLOCK_TOKENS)),
        tenant: cfg.tenant_column.as_deref(),
    };
    let (t, slots) = JsonTrace::open(
        path,
        key,
        ctx,
        &names,
        &[("chat_id", Kind::Int), ("parent_chat_id", Kind::Int)],
    )?;
    Ok(Box::new(Bailian {
        t,
        chat: slots[0],
        parent: slots[1],
        roots: HashMap::new(),
        order: VecDeque::new(),
    }))
}

impl RowReader for Bailian {
    fn next_row(&mut self, row: &mut Row) -> Result<RowOutcome, RowError> {
        if !self.t.read(row)? {
            return Ok(RowOutcome::End);
        }
        let chat = self.t.num(row.line, self.chat)?;
        let parent = self.t.num(row.line, self.parent)?;
        let root = if parent < 0 {
            chat
        } else {
            self.roots.get(&parent).copied().unwrap_or(parent)
        };
        if self.roots.insert(chat, root).is_none() {
            self.order.push_back(chat);
            if self.order.len() > REMEMBERED_CHATS {
                if let Some(old) = self.order.pop_front() {
                    self.roots.remove(&old);
                }
            }
        }
        // Sessions are non-zero (0 means "none").
        row.session = (root as u64).wrapping_add(1);
        Ok(RowOutcome::Row)
    }

    fn file(&self) -> &str {
        self.t.lines.file()
    }
}
