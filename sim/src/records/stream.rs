//! Ended requests folded into everything the run reports about them as
//! they end, and written to `requests.csv` in that order.
//!
//! Requests end out of order (a short request overtakes a long one), and
//! the fold takes them as they come: every report below is a count, an
//! integer sum, or a distribution whose samples are sorted before they are
//! summed, so the order of the fold does not change a figure. A row in
//! `requests.csv` carries its id; the rows stand in the order their requests
//! ended (completed, or let go with their static batch; rejected; still in
//! flight at the horizon, last), and those that ended at the same
//! nanosecond by id. The requests of one instant wait here until the clock
//! moves on, so the order is the simulated one whatever order the
//! simulator handled simultaneous events in.

use crate::cluster::fleet::TransferTimes;
use crate::lifecycle::SloDipRecords;
use crate::output::RequestsCsv;
use crate::region::records::RegionRecords;
use crate::request::summary::RequestsSummary;
use crate::request::{Request, Status};
use crate::steady_state::LoadRecord;
use crate::store::SpillLog;
use crate::tenancy::report::TenantRecords;
use crate::time::SimTime;

/// What the run's reports fold from each ended request (see the module
/// comment), and the streamed `requests.csv` when the run writes one.
pub struct RecordStream {
    /// Requests that ended at `instant_at`, folded once the clock passes it.
    instant: Vec<(u64, Request)>,
    instant_at: SimTime,
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
            instant: Vec::new(),
            instant_at: SimTime::ZERO,
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

    /// Streams rows to `csv` as they are folded.
    pub fn set_csv(&mut self, csv: RequestsCsv) {
        self.csv = Some(csv);
    }

    /// Request `id` ended at `now`: folded once every request that ended at
    /// `now` has come (see the module comment).
    pub fn ended(&mut self, now: SimTime, id: u64, r: Request) {
        debug_assert!(
            now >= self.instant_at,
            "ended at {now:?} after {:?}",
            self.instant_at
        );
        if now != self.instant_at {
            self.fold_instant();
            self.instant_at = now;
        }
        self.instant.push((id, r));
    }

    /// Folds the requests waiting for their instant to pass, in id order.
    pub fn fold_instant(&mut self) {
        let mut v = std::mem::take(&mut self.instant);
        v.sort_unstable_by_key(|e| e.0);
        // Folded where they lie: a request is too large to move for nothing.
        for (id, r) in &v {
            self.fold(*id, r);
        }
        v.clear();
        self.instant = v;
    }

    /// Folds request `id` into every report, and its row into the file.
    pub fn fold(&mut self, id: u64, r: &Request) {
        self.summary.add(r);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::RejectReason;

    /// Requests of mixed outcomes and lengths (completed, rejected, in
    /// flight), with latencies that are not multiples of one another.
    fn requests(n: u64) -> Vec<Request> {
        (0..n)
            .map(|id| {
                let t = id * 1_000_003;
                let mut r = Request::new(SimTime(t), 100 + (id * 37 % 500) as u32, 5);
                r.replica = (id % 3) as u32;
                match id % 9 {
                    0 => {
                        r.status = Status::Rejected(RejectReason::QueueFull);
                        r.finished = crate::time::Stamp::at(r.arrival);
                    }
                    1 => r.first_scheduled = crate::time::Stamp::at(SimTime(t + 7)),
                    _ => {
                        r.first_scheduled = crate::time::Stamp::at(SimTime(t + id % 17 * 1_013));
                        r.first_token =
                            crate::time::Stamp::at(SimTime(t + 50_000 + id % 11 * 7_919));
                        r.finished =
                            crate::time::Stamp::at(SimTime(t + 900_000 + id % 5 * 3_000_017));
                        r.generated = 5;
                        r.status = Status::Completed;
                    }
                }
                r
            })
            .collect()
    }

    /// What the reports make of `reqs` folded in `order`.
    fn folded(reqs: &[Request], order: &[usize]) -> String {
        let slo = crate::scenario::SloTargets {
            ttft_ms: Some(0.06),
            tpot_ms: Some(0.2),
            ..Default::default()
        };
        let mut s = RecordStream::new(Some(slo), None, None);
        for &i in order {
            s.fold(i as u64, &reqs[i]);
        }
        let end = SimTime(reqs.len() as u64 * 1_000_003 + 20_000_000);
        let load = crate::steady_state::load_report_of(|| s.load.iter(), end, 3, None);
        let stats = s.summary.finish(crate::stats::Dist::default(), end, 3);
        format!("{stats:?} {load:?} {:?}", s.completed_output_tokens)
    }

    #[test]
    fn the_order_of_the_fold_changes_no_figure() {
        let reqs = requests(3_000);
        let ids: Vec<usize> = (0..reqs.len()).collect();
        // End order: by finish time (in flight last), then id.
        let mut ended = ids.clone();
        ended.sort_by_key(|&i| (reqs[i].finished.map_or(u64::MAX, |f| f.0), i));
        let reversed: Vec<usize> = ids.iter().rev().copied().collect();
        let a = folded(&reqs, &ids);
        assert_eq!(a, folded(&reqs, &ended));
        assert_eq!(a, folded(&reqs, &reversed));
    }

    #[test]
    fn requests_of_one_instant_are_written_by_id() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = RecordStream::new(None, None, None);
        s.set_csv(RequestsCsv::create(dir.path(), false, false, Vec::new()).unwrap());
        let reqs = requests(6);
        // 4 and 2 end at 5 ns, then 5, 0 and 3 at 9 ns; 1 is in flight.
        for (at, id) in [(5, 4), (5, 2), (9, 5), (9, 0), (9, 3)] {
            s.ended(SimTime(at), id, reqs[id as usize].clone());
        }
        s.fold_instant();
        s.fold(1, &reqs[1]);
        s.take_csv().unwrap().unwrap().finish(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join("requests.csv")).unwrap();
        let ids: Vec<&str> = text.lines().skip(1).map(|l| &l[..1]).collect();
        assert_eq!(ids, ["2", "4", "0", "3", "5", "1"]);
    }
}
