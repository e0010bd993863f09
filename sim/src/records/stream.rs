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
//! length.

use crate::cluster::fleet::TransferTimes;
use crate::lifecycle::SloDipRecords;
use crate::load::LoadRecord;
use crate::metrics::RequestsSummary;
use crate::output::RequestsCsv;
use crate::records::packed::Packed;
use crate::records::spill::SpillLog;
use crate::region::records::RegionRecords;
use crate::request::{Request, Status};
use crate::tenancy::report::TenantRecords;
use std::collections::VecDeque;

/// What the run's reports fold from each ended request (see the module
/// comment), and the streamed `requests.csv` when the run writes one.
pub struct RecordStream {
    /// The next id to emit.
    next: u64,
    /// Requests that ended before `next` did, packed (`records::packed`):
    /// entry `k` is request `next + k` (`None`: not ended yet).
    pending: VecDeque<Option<Packed>>,
    /// Scratch space for packing.
    scratch: Vec<u8>,
    /// Requests held in `pending`.
    held: usize,
    /// Most requests held in `pending` at once (its high-water mark).
    pub peak_pending: usize,
    csv: Option<RequestsCsv>,
    io_error: Option<std::io::Error>,
    pub summary: RequestsSummary,
    pub load: SpillLog<LoadRecord>,
    pub tenants: Option<TenantRecords>,
    /// SLO dip windows and the targets (with a life cycle and SLOs).
    pub dip: Option<(SloDipRecords, f64, f64)>,
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
        slo: Option<(f64, f64)>,
        tenants: Option<TenantRecords>,
        dip: Option<(f64, f64)>,
    ) -> RecordStream {
        RecordStream {
            next: 0,
            pending: VecDeque::new(),
            scratch: Vec::new(),
            held: 0,
            peak_pending: 0,
            csv: None,
            io_error: None,
            summary: RequestsSummary::new(slo),
            load: SpillLog::default(),
            tenants,
            dip: dip.map(|(t, p)| (SloDipRecords::default(), t, p)),
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

    /// Request `id` ended (or is flushed at the horizon): emitted now if
    /// every earlier id has been, held until then otherwise (packed, its KV
    /// transfer record taken). Read in place: the caller then frees `r`.
    pub fn ended(&mut self, id: u64, r: &mut Request) {
        debug_assert!(id >= self.next, "request {id} ended twice");
        let k = (id - self.next) as usize;
        if k > 0 {
            if self.pending.len() <= k {
                self.pending.resize_with(k + 1, || None);
            }
            debug_assert!(self.pending[k].is_none(), "request {id} ended twice");
            self.pending[k] = Some(Packed::pack(r, &mut self.scratch));
            self.held += 1;
            self.peak_pending = self.peak_pending.max(self.held);
            return;
        }
        self.emit(id, r);
        self.next += 1;
        // The entry of `id` itself, when the ring reaches past it.
        self.pending.pop_front();
        while let Some(Some(_)) = self.pending.front() {
            let r = self.pending.pop_front().flatten().expect("held").unpack();
            self.held -= 1;
            self.emit(self.next, &r);
            self.next += 1;
        }
    }

    /// Folds request `id` into every report (and its row into the file).
    pub fn emit(&mut self, id: u64, r: &Request) {
        if let Some(csv) = &mut self.csv {
            if let Err(e) = csv.row(id, r) {
                self.io_error.get_or_insert(e);
            }
        }
        self.summary.add(r);
        self.load.push(LoadRecord::of(r));
        if let Some(t) = &mut self.tenants {
            t.add(r);
        }
        if let Some((d, ttft, tpot)) = &mut self.dip {
            d.add(r, *ttft, *tpot);
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
        self.held
    }

    /// The first error spilling records to disk (the reports would then be
    /// incomplete).
    pub fn spill_error(&self) -> Option<String> {
        let e = self
            .summary
            .error()
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
