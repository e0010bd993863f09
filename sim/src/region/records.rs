//! The request-derived half of the per-region report (`RegionReport`),
//! folded one ended request at a time, so a streamed run (requests leave
//! memory as they end: `records`) reports the same regions as one that
//! kept every request. Counts are integers; each origin's TTFTs go to a
//! [`SpillSort`] (bounded memory, sorted runs on disk beyond it) and are
//! summarized in ascending order, as `Dist::of` sorts them, so the bits are
//! the same in either mode.

use crate::request::{Request, Status};
use crate::scenario::SloTargets;
use crate::store::{f64_key, f64_of_key, SpillSort};

/// One region's folded counts.
#[derive(Debug, Default)]
pub struct RegionCounts {
    pub requests: u64,
    pub completed: u64,
    pub rejected: u64,
    pub served: u64,
    /// Ended requests of this origin, and of them those within the SLO.
    pub ended: u64,
    pub met: u64,
    /// TTFT of this origin's completed requests, ms (as `f64_key`s).
    ttft: SpillSort<u64>,
}

impl RegionCounts {
    /// The TTFT distribution of this origin's completed requests, ms; an
    /// error when a spilled run of them cannot be read back.
    pub fn ttft_ms(&mut self) -> Result<crate::stats::Dist, String> {
        let n = self.ttft.len();
        let d = crate::stats::Dist::of_sorted(n, self.ttft.sorted().map(f64_of_key));
        self.ttft.error().map_or(Ok(d), |e| Err(e.to_string()))
    }
}

/// Every region's folded counts (summary.json `regions`).
#[derive(Debug)]
pub struct RegionRecords {
    /// Replica range of each region.
    ranges: Vec<(usize, usize)>,
    /// The per-request targets (`[slo]`).
    slo: Option<SloTargets>,
    pub rows: Vec<RegionCounts>,
}

impl RegionRecords {
    /// Empty counts for regions whose replicas lie in `ranges`.
    pub fn new(ranges: Vec<(usize, usize)>, slo: Option<SloTargets>) -> RegionRecords {
        let rows = ranges.iter().map(|_| RegionCounts::default()).collect();
        RegionRecords { ranges, slo, rows }
    }

    /// Counts request `r` (ended, or standing at the horizon): in its origin
    /// region's demand and outcome, and in the region that served it.
    pub fn add(&mut self, q: &Request) {
        let home = q.region as usize;
        self.rows[home].requests += 1;
        if q.replica != u32::MAX {
            let r = q.replica as usize;
            if let Some(g) = self.ranges.iter().position(|&(a, b)| (a..b).contains(&r)) {
                self.rows[g].served += 1;
            }
        }
        let row = &mut self.rows[home];
        match q.status {
            Status::Completed => {
                row.completed += 1;
                let t = q.ttft().expect("completed") as f64 / 1e6;
                row.ttft.push(f64_key(t));
                row.ended += 1;
                if let Some(slo) = &self.slo {
                    row.met += slo.meets(q) as u64;
                }
            }
            Status::Rejected(_) => {
                row.rejected += 1;
                row.ended += 1;
            }
            _ => {}
        }
    }

    /// The targets the counts were made against.
    pub fn slo_targets(&self) -> Option<SloTargets> {
        self.slo
    }

    /// The first error spilling TTFTs to disk.
    pub fn error(&self) -> Option<&str> {
        self.rows.iter().find_map(|r| r.ttft.error())
    }
}
