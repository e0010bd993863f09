//! Replaying a trace: the options every format shares, applied to the rows
//! a format's reader produces.
//!
//! Rows pass through a reorder buffer of [`REORDER_ROWS`] rows, so a file
//! that is only nearly sorted replays in time order (RAGPulse's trace is two
//! sorted runs of 3,800 and 3,306 rows, merged here). Time 0 is the first
//! arrival; rows in the window [start_s, end_s) of that time are kept and
//! arrive at (t − start_s) / time_scale. A row later than the buffer can
//! fix is replayed at the previous arrival and counted as out of order.

use super::{open_rows, Row, RowOutcome, RowReader};
use crate::scenario::TraceCfg;
use crate::time::SimTime;
use crate::workload::{
    Context, RequestSource, RequestSpec, TraceReport, WorkloadError, WorkloadReport,
};
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

/// Rows read ahead to restore time order.
pub const REORDER_ROWS: usize = 4096;

/// Distinct tenants a `tenant_column` may have.
const MAX_TENANTS: usize = 1 << 20;

/// A row waiting in the reorder buffer.
struct Pending {
    time: i64,
    seq: u64,
    line: u64,
    prompt: u64,
    output: u64,
    session: u64,
    tenant: Option<Vec<u8>>,
    hashes: Vec<u64>,
    block_tokens: u32,
    samples: u32,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        (self.time, self.seq) == (o.time, o.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.time, self.seq).cmp(&(o.time, o.seq))
    }
}

/// A trace replayed as a request stream (a [`RequestSource`]).
pub struct Replay {
    reader: Box<dyn RowReader>,
    format: String,
    lenient: bool,
    start_ns: i64,
    end_ns: Option<i64>,
    /// Arrival times are divided by this.
    scale: f64,
    max: u64,
    origin: Option<i64>,
    row: Row,
    /// The reorder buffer: rows that came in time order (sorted, the usual
    /// case, O(1) each) and rows that came early, in a heap.
    inorder: VecDeque<Pending>,
    heap: BinaryHeap<Reverse<Pending>>,
    seq: u64,
    /// Trace time of the last row out of the buffer.
    last: Option<i64>,
    reading: bool,
    tenants: BTreeMap<Vec<u8>, u32>,
    tenant_names: Vec<String>,
    report: TraceReport,
    error: Option<WorkloadError>,
}

impl Replay {
    /// Opens a (validated) trace; `key` names it in errors.
    pub fn open(cfg: &TraceCfg, key: &str, ctx: &Context) -> Result<Replay, WorkloadError> {
        Self::open_with(cfg, key, ctx, false)
    }

    /// As [`open`](Self::open); `stats` asks the reader for its extra
    /// statistics (`trace stats`).
    pub fn open_with(
        cfg: &TraceCfg,
        key: &str,
        ctx: &Context,
        stats: bool,
    ) -> Result<Replay, WorkloadError> {
        let scale = match (cfg.time_scale, cfg.rate) {
            (Some(k), _) => k,
            (None, Some(target)) => {
                // A first pass measures the selected rows' own rate.
                let mut pass = Self::with_scale(cfg, key, ctx, 1.0, false)?;
                let (mut n, mut first, mut last) = (0u64, 0u64, 0u64);
                while let Some(r) = pass.next_request() {
                    if n == 0 {
                        first = r.arrival.0;
                    }
                    last = r.arrival.0;
                    n += 1;
                }
                pass.finish()?;
                if n < 2 || last == first {
                    return Err(ctx.config_error(
                        &format!("{key}.rate"),
                        format!("cannot replay at a rate: the selected part of the trace has {n} request(s) spanning {:.3} s", (last - first) as f64 / 1e9),
                    ));
                }
                let own = (n - 1) as f64 / ((last - first) as f64 / 1e9);
                target / own
            }
            (None, None) => 1.0,
        };
        Self::with_scale(cfg, key, ctx, scale, stats)
    }

    fn with_scale(
        cfg: &TraceCfg,
        key: &str,
        ctx: &Context,
        scale: f64,
        stats: bool,
    ) -> Result<Replay, WorkloadError> {
        let reader = open_rows(cfg, key, ctx, stats)?;
        let ns = |s: f64| (s * 1e9).round() as i64;
        Ok(Replay {
            report: TraceReport {
                format: cfg.format.name().to_string(),
                path: reader.file().to_string(),
                time_scale: scale,
                ..TraceReport::default()
            },
            reader,
            format: cfg.format.name().to_string(),
            lenient: cfg.lenient,
            start_ns: cfg.start_s.map_or(0, ns),
            end_ns: cfg.end_s.map(ns),
            scale,
            max: cfg.max_requests.unwrap_or(u64::MAX),
            origin: None,
            row: Row::default(),
            inorder: VecDeque::with_capacity(REORDER_ROWS),
            heap: BinaryHeap::new(),
            seq: 0,
            last: None,
            reading: true,
            tenants: BTreeMap::new(),
            tenant_names: Vec::new(),
            error: None,
        })
    }

    /// The format's name.
    pub fn format(&self) -> &str {
        &self.format
    }

    /// How reading went so far.
    pub fn report(&self) -> TraceReport {
        let mut r = self.report.clone();
        r.tenants = self.tenant_names.clone();
        r
    }

    /// The reader's extra statistics (see `RowReader::extra_stats`).
    pub fn extra_stats(&self) -> Vec<(String, f64)> {
        self.reader.extra_stats()
    }

    fn filtered(&mut self, why: &str) {
        *self.report.filtered.entry(why.to_string()).or_insert(0) += 1;
    }

    /// Reads one line; pushes a request when the row is kept.
    fn read_one(&mut self) {
        let outcome = self.reader.next_row(&mut self.row);
        match outcome {
            Ok(RowOutcome::End) => self.reading = false,
            Ok(RowOutcome::Filtered(why)) => {
                self.report.rows += 1;
                self.filtered(why);
            }
            Ok(RowOutcome::Row) if self.row.prompt.max(self.row.output) > u32::MAX as u64 => {
                // Checked, not clamped: no request has 2^32 tokens, so the
                // column is wrong (or the number garbled).
                let message = format!(
                    "token count {} is above the largest allowed, {} (2^32 − 1)",
                    self.row.prompt.max(self.row.output),
                    u32::MAX
                );
                let line = self.row.line;
                self.bad_line(line, message, false);
            }
            Ok(RowOutcome::Row) => {
                self.report.rows += 1;
                self.keep_row();
            }
            Err(e) => self.bad_line(e.line, e.message, e.fatal),
        }
    }

    /// A line that does not parse: skipped and counted under `lenient`
    /// (unless fatal), otherwise the replay's error.
    fn bad_line(&mut self, line: u64, message: String, fatal: bool) {
        if self.lenient && !fatal {
            self.report.skipped_lines += 1;
            if self.report.first_skipped.is_none() {
                self.report.first_skipped = Some(format!("line {line}: {message}"));
            }
            return;
        }
        let hint = if fatal {
            ""
        } else {
            " (--lenient skips and counts such lines)"
        };
        self.error = Some(WorkloadError::Data {
            file: self.reader.file().to_string(),
            line: Some(line),
            message: format!("{message}{hint}"),
        });
        self.reading = false;
    }

    fn keep_row(&mut self) {
        let row = &mut self.row;
        let p = Pending {
            time: row.time_ns,
            seq: self.seq,
            line: row.line,
            prompt: row.prompt,
            output: row.output,
            session: row.session,
            tenant: row.has_tenant.then(|| row.tenant.clone()),
            hashes: std::mem::take(&mut row.hashes),
            block_tokens: row.block_tokens,
            samples: row.samples,
        };
        self.seq += 1;
        match self.inorder.back() {
            Some(b) if p.time < b.time => {
                self.report.reordered += 1;
                self.heap.push(Reverse(p))
            }
            _ => self.inorder.push_back(p),
        }
    }

    fn buffered(&self) -> usize {
        self.inorder.len() + self.heap.len()
    }

    /// The tenant index of a key, numbered in order of first appearance.
    fn tenant(&mut self, key: Vec<u8>, line: u64) -> Option<u32> {
        if let Some(&i) = self.tenants.get(&key) {
            return Some(i);
        }
        if self.tenants.len() >= MAX_TENANTS {
            self.error = Some(WorkloadError::Data {
                file: self.reader.file().to_string(),
                line: Some(line),
                message: format!(
                    "more than {MAX_TENANTS} distinct tenants: is the tenant column right?"
                ),
            });
            return None;
        }
        let i = self.tenants.len() as u32;
        self.tenant_names
            .push(String::from_utf8_lossy(&key).into_owned());
        self.tenants.insert(key, i);
        Some(i)
    }

    /// The next row out of the reorder buffer, in time order.
    fn pop(&mut self) -> Option<Pending> {
        while self.reading && self.buffered() < REORDER_ROWS {
            self.read_one();
        }
        if self.error.is_some() {
            return None;
        }
        // The earliest of the two parts (ties go to the earlier row).
        let from_heap = match (self.inorder.front(), self.heap.peek()) {
            (Some(a), Some(Reverse(b))) => b < a,
            (None, Some(_)) => true,
            (_, None) => false,
        };
        let mut p = if from_heap {
            self.heap.pop()?.0
        } else {
            self.inorder.pop_front()?
        };
        match self.last {
            Some(l) if p.time < l => {
                self.report.out_of_order += 1;
                p.time = l;
            }
            _ => self.last = Some(p.time),
        }
        Some(p)
    }
}

impl RequestSource for Replay {
    /// A trace's requests all come from its rows.
    fn open_loop(&self) -> bool {
        true
    }

    fn next_request(&mut self) -> Option<RequestSpec> {
        loop {
            if self.error.is_some() || self.report.requests >= self.max {
                return None;
            }
            let p = self.pop()?;
            let origin = *self.origin.get_or_insert(p.time);
            let rel = p.time - origin;
            if rel < self.start_ns {
                self.filtered("before_window");
                continue;
            }
            if self.end_ns.is_some_and(|e| rel >= e) {
                // Rows come out in time order: the rest is past the window.
                let rest = 1 + self.buffered() as u64;
                *self
                    .report
                    .filtered
                    .entry("after_window".into())
                    .or_insert(0) += rest;
                self.heap.clear();
                self.inorder.clear();
                self.reading = false;
                return None;
            }
            let t = (rel - self.start_ns) as f64;
            let t = if self.scale == 1.0 {
                t
            } else {
                (t / self.scale).round()
            };
            let tenant = match p.tenant {
                Some(key) => self.tenant(key, p.line)?,
                None => 0,
            };
            self.report.zero_prompt += (p.prompt == 0) as u64;
            self.report.zero_output += (p.output == 0) as u64;
            let clamp = |v: u64| v.clamp(1, u32::MAX as u64) as u32;
            self.report.requests += 1;
            return Some(RequestSpec {
                arrival: SimTime(t as u64),
                prompt_tokens: clamp(p.prompt),
                output_tokens: clamp(p.output),
                tenant,
                session: p.session,
                prefix_hashes: p.hashes,
                hash_block_tokens: p.block_tokens,
                pinnable_tokens: 0,
                samples: p.samples,
                region: 0,
            });
        }
    }

    fn tenant_name(&self, index: u32) -> Option<String> {
        self.tenant_names.get(index as usize).cloned()
    }

    fn finish(&mut self) -> Result<Option<WorkloadReport>, WorkloadError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        Ok(Some(WorkloadReport {
            traces: vec![self.report()],
            users_left: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{ColumnMap, TraceFormat};

    fn cfg(path: &std::path::Path) -> TraceCfg {
        TraceCfg {
            format: TraceFormat::Csv,
            path: path.display().to_string(),
            time_scale: None,
            rate: None,
            start_s: None,
            end_s: None,
            max_requests: None,
            tenant_column: None,
            lenient: false,
            model: None,
            log_type: None,
            drop_failures: false,
            columns: Some(ColumnMap {
                arrival: "t".into(),
                prompt: "p".into(),
                output: "o".into(),
                session: None,
                hashes: None,
                n: None,
            }),
            time_unit: None,
            block_tokens: None,
        }
    }

    fn arrivals(c: &TraceCfg) -> (Vec<u64>, TraceReport) {
        let ctx = Context::new("t", std::path::Path::new("."), 1);
        let mut r = Replay::open(c, "trace", &ctx).unwrap();
        let v = std::iter::from_fn(|| r.next_request())
            .map(|q| q.arrival.0)
            .collect();
        (v, r.finish().unwrap().unwrap().traces.pop().unwrap())
    }

    #[test]
    fn sorted_runs_are_merged_and_late_rows_clamped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.csv");
        // Two sorted runs (10..20 s, then 0..10 s), like RAGPulse's file.
        let mut text = String::from("t,p,o\n");
        for t in (10..20).chain(0..10) {
            text.push_str(&format!("{t},5,5\n"));
        }
        std::fs::write(&p, &text).unwrap();
        let (v, rep) = arrivals(&cfg(&p));
        assert_eq!(v, (0..20).map(|s| s * 1_000_000_000).collect::<Vec<_>>());
        assert_eq!(rep.out_of_order, 0);
        // A run longer than the buffer cannot be merged: its rows replay at
        // the latest time seen and are counted.
        let n = REORDER_ROWS as u64 + 10;
        let mut text = String::from("t,p,o\n");
        for t in (0..n).map(|i| 1000 + i).chain([5, 6]) {
            text.push_str(&format!("{t},5,5\n"));
        }
        std::fs::write(&p, &text).unwrap();
        let (v, rep) = arrivals(&cfg(&p));
        assert_eq!(rep.out_of_order, 2);
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(v.len() as u64, n + 2);
        // The warning reads as one sentence: no run of spaces where the
        // source wraps its text.
        assert_eq!(
            rep.out_of_order_note().unwrap(),
            format!(
                "{}: 2 of 4108 rows (0.0 %) came later than the reorder buffer of 4096 rows can fix and were replayed at the previous row's time; sort the trace by arrival to replay it as recorded",
                p.display()
            )
        );
    }

    #[test]
    fn window_speed_and_rate_options_compose() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.csv");
        // One request per second for 100 s, starting at t = 50.
        let mut text = String::from("t,p,o\n");
        for t in 50..150 {
            text.push_str(&format!("{t},5,5\n"));
        }
        std::fs::write(&p, &text).unwrap();
        let mut c = cfg(&p);
        c.start_s = Some(10.0);
        c.end_s = Some(30.0);
        c.time_scale = Some(4.0);
        let (v, rep) = arrivals(&c);
        assert_eq!(v.len(), 20);
        assert_eq!(v[0], 0);
        assert_eq!(v[1], 250_000_000, "1 s of trace time at 4× speed");
        assert_eq!(rep.filtered["before_window"], 10);
        c.time_scale = None;
        c.rate = Some(8.0);
        c.max_requests = Some(9);
        let (v, _) = arrivals(&c);
        assert_eq!(v.len(), 9);
        assert_eq!(v[8], 1_000_000_000, "8 gaps at 8 req/s");
    }
}
