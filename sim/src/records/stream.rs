//! Ended requests, taken out of the run's slab and folded into everything
//! the run reports about them, in request-id (arrival) order.
//!
//! Requests end out of order (a short request overtakes a long one), but the
//! records must come out in id order: `requests.csv` lists rows by id, and
//! some reports add floating-point values request by request, so the order
//! of the additions is part of the result. A reorder buffer holds each
//! request that ended before every earlier one had, packed to about a fifth
//! of its size (`records::packed`, lossless): a ring indexed by id
//! from the next one to emit (a request is placed and taken in O(1), with
//! no search and no shifting of its neighbours), bounded by the requests
//! that arrived since the oldest one still in flight, not by the run's
//! length. Past [`HELD_BYTES`] of them the held rows go to disk, in runs
//! sorted by id (`records::held_runs`), and come back when their turn
//! comes, so the memory they take no longer grows with the longest hold.

use crate::cluster::fleet::TransferTimes;
use crate::lifecycle::SloDipRecords;
use crate::load::LoadRecord;
use crate::output::RequestsCsv;
use crate::records::held::HeldRing;
use crate::records::held_runs::HeldRuns;
use crate::records::packed::Packed;
use crate::region::records::RegionRecords;
use crate::request::summary::RequestsSummary;
use crate::request::{Request, Status};
use crate::store::SpillLog;
use crate::tenancy::report::TenantRecords;

/// Bytes of packed rows held in memory past which they all go to disk
/// (`records::held_runs`): a few tens of MiB, where the 1,000-replica
/// fleet's 10 M-request run held 1.16 M rows at once (counted on disk
/// right after a spill, with this limit).
const HELD_BYTES: usize = 24 << 20;

/// What the run's reports fold from each ended request (see the module
/// comment), and the streamed `requests.csv` when the run writes one.
pub struct RecordStream {
    /// The next id to emit.
    next: u64,
    /// Requests that ended before `next` did, packed (`records::packed`):
    /// entry `k` is request `next + k` (`None`: not ended yet).
    pending: HeldRing<Packed>,
    /// Scratch space for packing.
    scratch: Vec<u8>,
    /// Requests held in `pending`.
    held: usize,
    /// Bytes of the rows held in `pending` that may go to disk
    /// (`Packed::size`, `Packed::goes_to_disk`): what a spill would free.
    /// Rows with a KV transfer record stay in memory and are not counted,
    /// or once they alone passed the limit every held row would set off a
    /// spill that moves nothing.
    disk_bytes: usize,
    /// Held rows past `held_limit` bytes, on disk.
    disk: HeldRuns,
    /// [`HELD_BYTES`] (smaller in tests).
    held_limit: usize,
    /// Held rows stay in memory from now on: writing or reading them
    /// failed once.
    disk_failed: bool,
    /// Reading held rows back failed: rows are missing.
    held_error: Option<String>,
    csv: Option<RequestsCsv>,
    io_error: Option<std::io::Error>,
    pub summary: RequestsSummary,
    pub load: SpillLog<LoadRecord>,
    pub tenants: Option<TenantRecords>,
    /// SLO dip windows and the targets (with a life cycle and SLOs).
    pub dip: Option<(SloDipRecords, crate::scenario::SloTargets)>,
    pub transfers: TransferTimes,
    /// Output tokens of completed requests by the replica that served them
    /// (`output_tokens`, the life-cycle report's tokens per GPU-hour, per
    /// pool with pools).
    pub completed_output_tokens: Vec<u64>,
    /// Per-region counts and TTFTs (with `[[fleet.regions]]`).
    pub regions: Option<RegionRecords>,
    /// The first ended request that broke a conservation law.
    pub violation: Option<String>,
}

impl RecordStream {
    pub fn new(
        slo: Option<crate::scenario::SloTargets>,
        tenants: Option<TenantRecords>,
        dip: Option<crate::scenario::SloTargets>,
    ) -> RecordStream {
        RecordStream {
            next: 0,
            pending: HeldRing::default(),
            scratch: Vec::new(),
            held: 0,
            disk_bytes: 0,
            disk: HeldRuns::default(),
            held_limit: HELD_BYTES,
            disk_failed: false,
            held_error: None,
            csv: None,
            io_error: None,
            summary: RequestsSummary::new(slo),
            load: SpillLog::default(),
            tenants,
            dip: dip.map(|t| (SloDipRecords::default(), t)),
            transfers: TransferTimes::default(),
            completed_output_tokens: Vec::new(),
            regions: None,
            violation: None,
        }
    }

    /// Streams rows to `csv` as they are emitted.
    pub fn set_csv(&mut self, csv: RequestsCsv) {
        self.csv = Some(csv);
    }

    /// Request `id` ended (or is flushed at the horizon): counted in the
    /// summary, and emitted now if every earlier id has been, held until
    /// then otherwise (packed, its KV transfer record taken). Read in
    /// place: the caller then frees `r`.
    pub fn ended(&mut self, id: u64, r: &mut Request) {
        self.summary.add(r);
        debug_assert!(id >= self.next, "request {id} ended twice");
        let k = (id - self.next) as usize;
        if k > 0 {
            self.pending.extend_to(k + 1);
            let slot = self.pending.slot_mut(k);
            debug_assert!(slot.is_none(), "request {id} ended twice");
            let p = Packed::pack(r, &mut self.scratch);
            self.disk_bytes += disk_size(&p);
            *slot = Some(p);
            self.held += 1;
            if self.disk_bytes > self.held_limit && !self.disk_failed {
                self.spill_held();
            }
            return;
        }
        self.emit_in_order(id, r);
        self.next += 1;
        // The entry of `id` itself, when the ring reaches past it.
        self.pending.pop_front();
        loop {
            if let Some(Some(_)) = self.pending.front() {
                let p = self.pending.pop_front().flatten().expect("held");
                self.held -= 1;
                self.disk_bytes -= disk_size(&p);
                self.emit_in_order(self.next, &p.unpack());
            } else if self.disk.least() == Some(self.next) {
                match self.disk.take_least() {
                    Ok((_, p)) => {
                        self.pending.pop_front();
                        self.emit_in_order(self.next, &p.unpack());
                    }
                    // The row is lost: the run fails with this error
                    // (`spill_error`), and holds the rest in memory.
                    Err(e) => {
                        self.held_error.get_or_insert(format!(
                            "cannot read rows held for id order back from a temporary file: {e}"
                        ));
                        self.disk_failed = true;
                        return;
                    }
                }
            } else {
                break;
            }
            self.next += 1;
        }
    }

    /// Moves every held row that may go to disk there, as one run in id
    /// order (`records::held_runs`); on an error they stay in memory, and
    /// so do all held rows after.
    #[cold]
    fn spill_held(&mut self) {
        let next = self.next;
        let pending = &self.pending;
        let held = (0..pending.len()).filter_map(|k| Some((next + k as u64, pending.slot(k)?)));
        if self.disk.write_run(held).is_err() {
            self.disk_failed = true;
            return;
        }
        for k in 0..self.pending.len() {
            let slot = self.pending.slot_mut(k);
            if slot.as_ref().is_some_and(Packed::goes_to_disk) {
                let p = slot.take().expect("held");
                self.held -= 1;
                self.disk_bytes -= p.size();
            }
        }
    }

    /// Folds request `id`, the requests before it folded already, into
    /// every report (and its row into the file).
    pub fn emit(&mut self, id: u64, r: &Request) {
        self.summary.add(r);
        self.emit_in_order(id, r);
    }

    /// [`Self::emit`] but for the summary, which [`Self::ended`] folds in
    /// end order.
    fn emit_in_order(&mut self, id: u64, r: &Request) {
        if let Some(csv) = &mut self.csv {
            if let Err(e) = csv.row(id, r) {
                self.io_error.get_or_insert(e);
            }
        }
        self.load.push(LoadRecord::of(r));
        if let Some(t) = &mut self.tenants {
            t.add(r);
        }
        if let Some((d, slo)) = &mut self.dip {
            d.add(r, slo);
        }
        self.transfers.add(r);
        if r.status == Status::Completed {
            let i = r.replica as usize;
            let out = &mut self.completed_output_tokens;
            if out.len() <= i {
                out.resize(i + 1, 0);
            }
            out[i] += r.output_tokens as u64;
        }
        if let Some(g) = &mut self.regions {
            g.add(r);
        }
        if self.violation.is_none() {
            self.violation = ended_violation(id, r);
        }
    }

    /// Requests still held for order (all emitted once the run flushed).
    pub fn pending(&self) -> usize {
        self.held + self.disk.rows()
    }

    /// The first error spilling records to disk (the reports would then be
    /// incomplete).
    pub fn spill_error(&self) -> Option<String> {
        let e = self
            .held_error
            .as_deref()
            .or(self.summary.error())
            .or(self.load.error())
            .or(self.transfers.error());
        let t = self.tenants.as_ref().and_then(|t| t.error());
        let g = self.regions.as_ref().and_then(|g| g.error());
        e.or(t).or(g).map(str::to_string)
    }

    /// The streamed file and the first write error, if any.
    pub fn take_csv(&mut self) -> Result<Option<RequestsCsv>, std::io::Error> {
        match self.io_error.take() {
            Some(e) => Err(e),
            None => Ok(self.csv.take()),
        }
    }
}

/// Conservation for a request that ended: a completed request produced all
/// of its output tokens and has its token times.
pub fn ended_violation(id: u64, r: &Request) -> Option<String> {
    match r.status {
        Status::Completed if r.generated != r.output_tokens => Some(format!(
            "request {id} completed with {} of {} output tokens",
            r.generated, r.output_tokens
        )),
        Status::Completed if r.first_token.is_none() || r.finished.is_none() => {
            Some(format!("request {id} completed without token times"))
        }
        _ => None,
    }
}

/// Bytes a held row counts toward a spill: its size if it may go to disk.
#[inline]
fn disk_size(p: &Packed) -> usize {
    if p.goes_to_disk() {
        p.size()
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::SimTime;

    /// Requests ending out of order: a few short ones overtake long ones.
    fn ended_order(n: u64) -> Vec<(u64, Request)> {
        let mut v: Vec<(u64, Request)> = (0..n)
            .map(|id| {
                let mut r = Request::new(SimTime(id * 1_000), 100 + id as u32 % 7, 5);
                r.replica = (id % 3) as u32;
                r.first_scheduled = Some(SimTime(id * 1_000 + 10));
                r.first_token = Some(SimTime(id * 1_000 + 50 + id % 11));
                r.finished = Some(SimTime(id * 1_000 + 900 + (id % 5) * 3_000));
                r.generated = 5;
                r.status = Status::Completed;
                (id, r)
            })
            .collect();
        // End order: by finish time, then id.
        v.sort_by_key(|(id, r)| (r.finished, *id));
        v
    }

    /// Folds `order` with held rows on disk past `limit` bytes; also gives
    /// the runs written to disk.
    fn folded_held(
        dir: &std::path::Path,
        order: Vec<(u64, Request)>,
        limit: usize,
    ) -> ((String, Vec<u8>), usize) {
        let mut s = RecordStream::new(
            Some(crate::scenario::SloTargets {
                ttft_ms: Some(0.5),
                tpot_ms: Some(0.05),
                ..Default::default()
            }),
            None,
            None,
        );
        s.held_limit = limit;
        s.set_csv(RequestsCsv::create(dir, true, false, Vec::new()).expect("csv"));
        for (id, mut r) in order {
            s.ended(id, &mut r);
        }
        assert_eq!(s.pending(), 0);
        let csv = s.take_csv().expect("no error").expect("csv");
        csv.finish(dir).expect("written");
        let summary = format!("{:?} {:?}", s.summary, s.completed_output_tokens);
        let file = std::fs::read(dir.join("requests.csv")).expect("read");
        ((summary, file), s.disk.written())
    }

    /// Every 40th request runs for 150 to 190 arrivals, and one in 7 of
    /// the others is rejected at arrival: most rows wait behind a long one.
    fn long_holds(n: u64) -> Vec<(u64, Request)> {
        let mut v = ended_order(n);
        for (id, r) in &mut v {
            if *id % 40 == 3 {
                r.finished = Some(SimTime(*id * 1_000 + 150_000 + *id % 3 * 20_000));
            } else if *id % 7 == 0 {
                r.status = Status::Rejected(crate::request::RejectReason::QueueFull);
                r.generated = 0;
                r.first_scheduled = None;
                r.first_token = None;
                r.finished = Some(r.arrival);
            }
        }
        v.sort_by_key(|(id, r)| (r.finished, *id));
        v
    }

    #[test]
    fn rows_that_stay_in_memory_do_not_set_off_spills() {
        // Rows with a KV transfer record never go to disk: held past the
        // limit, they must not count toward a spill (which would move
        // nothing and run again at every held row).
        let mut order = long_holds(600);
        for (_, r) in &mut order {
            r.kv_transfer = Some(Box::default());
        }
        let mut s = RecordStream::new(None, None, None);
        s.held_limit = 1_500;
        let mut most = 0;
        for (id, mut r) in order {
            s.ended(id, &mut r);
            most = most.max(s.held);
            assert_eq!(s.disk_bytes, 0);
        }
        assert!(most * std::mem::size_of::<Packed>() > 1_500, "{most} held");
        assert_eq!((s.pending(), s.disk.written()), (0, 0));
    }

    #[test]
    fn rows_held_on_disk_come_back_in_the_same_order() {
        let n = 3_000;
        let dir = || tempfile::tempdir().unwrap();
        let (a, b) = (dir(), dir());
        let (all, none) = folded_held(a.path(), long_holds(n), usize::MAX);
        assert_eq!(none, 0);
        // A few dozen rows a run: many runs, each overlapping the ones
        // before in ids.
        let (spilled, spills) = folded_held(b.path(), long_holds(n), 1_500);
        assert!(spills > 50, "{spills} runs");
        assert_eq!(all, spilled);
    }
}
