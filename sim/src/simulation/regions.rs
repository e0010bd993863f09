//! The simulation's side of regions (`region`): the global router's
//! decision at admission, the overflowed request's arrival in its serving
//! region one round trip later, conservation and the per-region report.
//! Runs without `[[fleet.regions]]` never enter here.

use super::{InvariantViolation, Simulation};
use crate::region::records::RegionRecords;
use crate::region::RegionReport;
use crate::request::RequestId;
use crate::time::SimTime;

impl Simulation<'_> {
    /// Whether replica `r` takes requests now.
    fn ready(&self, r: usize) -> bool {
        self.life.as_ref().is_none_or(|l| l.routable(r))
    }

    /// The global router: when request `id` (admitted, from home region
    /// `region`) is to be served outside its home region, records the trip
    /// and returns when it arrives there.
    pub(super) fn region_overflow(
        &mut self,
        region: u16,
        id: RequestId,
        now: SimTime,
    ) -> Option<SimTime> {
        self.regions.as_ref()?;
        let life = self.life.as_ref();
        let ready = |r: usize| life.is_none_or(|l| l.routable(r));
        let rg = self.regions.as_mut().expect("regions");
        let g = rg.choose(region as usize, &self.replicas, ready)?;
        rg.in_transit.push_back((id, g as u16));
        Some(now.plus(rg.rtt))
    }

    /// The oldest overflowed request reaches its serving region: its router
    /// places it on a ready replica there (or, if none is ready any more,
    /// the request is placed as at admission).
    pub(super) fn on_overflow(&mut self, now: SimTime) {
        let rg = self.regions.as_mut().expect("overflow needs regions");
        let (id, g) = rg.in_transit.pop_front().expect("a request in transit");
        let range = rg.range(g as usize);
        if !range.clone().any(|r| self.ready(r)) {
            match self.life.is_some() {
                true => self.place(id, now),
                false => unreachable!("without a life cycle every replica is ready"),
            }
            return;
        }
        let r = self.fleet.route_in(g as usize, &self.requests[id as usize]);
        self.trace_route(id, r, now);
        self.queue_on(r, id, now);
    }

    /// Conservation: requests between regions are in flight, held once.
    pub(super) fn region_check(&self, held: &mut [bool]) -> Result<(), InvariantViolation> {
        match &self.regions {
            Some(rg) => rg.check(&self.requests, held).map_err(InvariantViolation),
            None => Ok(()),
        }
    }

    /// At construction: with regions, the record stream folds each ended
    /// request into the per-region report.
    pub(super) fn region_init(&mut self) {
        if let Some(rg) = &self.regions {
            self.stream.regions = Some(rg.records(self.plan.slo));
        }
    }

    /// The summary's `regions` rows from the requests folded into `recs` as
    /// they ended, each region's GPU-hours billed as the life cycle counted
    /// them (`lifecycle`, when the run has one).
    pub(super) fn region_report(
        &self,
        recs: Option<RegionRecords>,
        lifecycle: Option<&crate::lifecycle::LifecycleReport>,
        end: SimTime,
    ) -> Result<Vec<RegionReport>, String> {
        let (Some(rg), Some(recs)) = (&self.regions, recs) else {
            return Ok(Vec::new());
        };
        let s = self.scenario;
        let hours = end.as_secs_f64() / 3600.0;
        let gpu_hours: Vec<f64> = match lifecycle {
            Some(l) if l.pools.len() == s.pools.len() => {
                l.pools.iter().map(|p| p.gpu_hours.billed).collect()
            }
            _ => s.pools.iter().map(|p| p.gpus() as f64 * hours).collect(),
        };
        rg.report(recs, &gpu_hours)
    }
}
