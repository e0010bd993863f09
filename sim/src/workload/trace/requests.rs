//! servesim's own `requests.csv` (see `output/mod.rs`), so a simulated run can
//! be replayed: `arrival_s`, `prompt_tokens`, `output_tokens` per request.
//!
//! The file lists rows in the order their requests ended; `id` is the
//! arrival order. The reader hands rows on in id order: a row read ahead of
//! an earlier id waits in a heap until that id has come, so what waits is
//! what the run had in flight, not the file's length. A file whose ids have
//! gaps (rows filtered out) still comes out in id order as long as no row
//! is more than [`HOLD_MAX`] rows from its place; past that the least
//! waiting row goes on, and the replay's own reorder buffer and its count of
//! rows out of order take it from there.

use super::csv_rows::{CsvNames, CsvTrace};
use super::{Row, RowError, RowOutcome, RowReader};
use crate::scenario::{TimeUnit, TraceCfg};
use crate::workload::{Context, WorkloadError};
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::path::Path;

/// Rows that may wait for an earlier id at once.
pub const HOLD_MAX: usize = 1 << 16;

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
    let trace = CsvTrace::open(path, key, ctx, &names)?;
    let id = trace.csv.column("id")?;
    Ok(Box::new(RequestsTrace {
        trace,
        id,
        waiting: BinaryHeap::new(),
        next: 0,
        read: Row::default(),
        ended: false,
    }))
}

/// `requests.csv` read back in id order; see the module comment.
struct RequestsTrace {
    trace: CsvTrace,
    /// The `id` column.
    id: usize,
    /// Rows read ahead of an earlier id, least id first.
    waiting: BinaryHeap<Reverse<Waiting>>,
    /// The id handed on next when it comes.
    next: u64,
    /// The row being read.
    read: Row,
    /// The file is read to its end.
    ended: bool,
}

/// A row and its id, ordered by id (then by line, for a repeated id).
struct Waiting {
    id: u64,
    row: Row,
}

impl PartialEq for Waiting {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Waiting {}
impl PartialOrd for Waiting {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Waiting {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.id, self.row.line).cmp(&(o.id, o.row.line))
    }
}

impl RequestsTrace {
    /// Hands on the least waiting row if its turn has come (its id is the
    /// next, the heap is full, or nothing more will be read).
    fn take(&mut self, row: &mut Row) -> bool {
        let due = match self.waiting.peek() {
            Some(Reverse(w)) => w.id <= self.next || self.ended || self.waiting.len() > HOLD_MAX,
            None => false,
        };
        if due {
            let Reverse(w) = self.waiting.pop().expect("peeked");
            self.next = self.next.max(w.id + 1);
            *row = w.row;
        }
        due
    }
}

impl RowReader for RequestsTrace {
    fn next_row(&mut self, row: &mut Row) -> Result<RowOutcome, RowError> {
        loop {
            if self.take(row) {
                return Ok(RowOutcome::Row);
            }
            if self.ended {
                return Ok(RowOutcome::End);
            }
            if !self.trace.read(&mut self.read)? {
                self.ended = true;
                continue;
            }
            let id = self.trace.csv.count(self.id, "id")?;
            if id == self.next && self.waiting.is_empty() {
                // In order: no heap.
                self.next += 1;
                std::mem::swap(row, &mut self.read);
                return Ok(RowOutcome::Row);
            }
            let row = std::mem::take(&mut self.read);
            self.waiting.push(Reverse(Waiting { id, row }));
        }
    }

    fn file(&self) -> &str {
        self.trace.file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ids a `requests.csv` with rows in `ids`' order comes out in (each
    /// row's prompt is 100 + its id).
    fn read_back(ids: &[u64]) -> Vec<u64> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("requests.csv");
        let mut text = String::from("id,arrival_s,prompt_tokens,output_tokens\n");
        for id in ids {
            text.push_str(&format!("{id},{}.5,{},7\n", id, 100 + id));
        }
        std::fs::write(&path, text).unwrap();
        let cfg: TraceCfg = toml::from_str("format = \"requests\"\npath = \"x\"").unwrap();
        let ctx = Context::new("test.toml", dir.path(), 1);
        let mut r = open(&cfg, &path, "workload.trace", &ctx).unwrap();
        let mut row = Row::default();
        let mut out = Vec::new();
        while r.next_row(&mut row).unwrap() == RowOutcome::Row {
            out.push(row.prompt - 100);
        }
        out
    }

    #[test]
    fn rows_in_end_order_come_back_in_id_order() {
        // Long requests end after the short ones that arrived behind them.
        let ids = [1, 2, 0, 4, 5, 6, 3, 7, 9, 8];
        assert_eq!(read_back(&ids), (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn ids_with_gaps_still_come_back_sorted() {
        // Rows 0, 3 and 6 were filtered out of the file.
        let ids = [2, 1, 5, 4, 8, 7];
        assert_eq!(read_back(&ids), vec![1, 2, 4, 5, 7, 8]);
    }

    #[test]
    fn rows_further_than_the_hold_from_their_place_go_on() {
        // Id 0 comes last, behind more rows than may wait: the rows before
        // it go on in id order, and it comes out last.
        let n = HOLD_MAX as u64 + 10;
        let ids: Vec<u64> = (1..=n).chain([0]).collect();
        let got = read_back(&ids);
        assert_eq!(got.len(), ids.len());
        assert_eq!(got.last(), Some(&0));
        assert!(got[..got.len() - 1].windows(2).all(|w| w[0] < w[1]));
    }
}
