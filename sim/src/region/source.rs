//! Each region's demand: the scenario's `[workload]` with its diurnal
//! arrival process shifted by the region's `shift_s` (the same daily shape,
//! one time zone later), drawn from the region's own seeded streams and
//! merged in arrival order. Every request leaves tagged with its origin
//! region.

use crate::request::Request;
use crate::rng;
use crate::scenario::{ArrivalCfg, Scenario};
use crate::time::SimTime;
use crate::workload::{self, Context, RequestSource, RequestSpec, WorkloadError, WorkloadReport};
use rand::Rng;

/// The seed of region `name`'s random streams: adding or reordering
/// regions leaves every other region's requests unchanged.
fn region_seed(seed: u64, name: &str) -> u64 {
    rng::stream(seed, &format!("region/{name}/seed")).random()
}

/// The regions' sources, merged; ties go to the lower region index.
pub struct RegionSource {
    sources: Vec<Box<dyn RequestSource>>,
    heads: Vec<Option<RequestSpec>>,
    started: bool,
}

/// The request stream of a scenario with `[[fleet.regions]]`.
pub fn build_source(s: &Scenario, ctx: &Context) -> Result<Box<dyn RequestSource>, WorkloadError> {
    let f = &s.file;
    let mut sources = Vec::with_capacity(f.fleet.regions.len());
    for r in &f.fleet.regions {
        let mut w = f.workload.clone();
        if let Some(ArrivalCfg::Diurnal { peak_s, .. }) = &mut w.arrival {
            *peak_s += r.shift_s;
        }
        let rctx = Context::new(&ctx.origin, &ctx.base_dir, region_seed(ctx.seed, &r.name));
        sources.push(workload::build(&w, &rctx)?);
    }
    let n = sources.len();
    Ok(Box::new(RegionSource {
        sources,
        heads: vec![None; n],
        started: false,
    }))
}

impl RequestSource for RegionSource {
    fn next_request(&mut self) -> Option<RequestSpec> {
        if !self.started {
            self.started = true;
            for (h, s) in self.heads.iter_mut().zip(&mut self.sources) {
                *h = s.next_request();
            }
        }
        let i = (0..self.heads.len())
            .filter(|&i| self.heads[i].is_some())
            .min_by_key(|&i| (self.heads[i].as_ref().expect("some").arrival, i))?;
        let mut spec = self.heads[i].take().expect("some");
        self.heads[i] = self.sources[i].next_request();
        spec.region = i as u16;
        Some(spec)
    }

    fn on_request_end(
        &mut self,
        req: &Request,
        now: SimTime,
        completed: bool,
    ) -> Option<RequestSpec> {
        let i = req.region as usize;
        let mut next = self
            .sources
            .get_mut(i)?
            .on_request_end(req, now, completed)?;
        next.region = i as u16;
        Some(next)
    }

    fn finish(&mut self) -> Result<Option<WorkloadReport>, WorkloadError> {
        let mut merged: Option<WorkloadReport> = None;
        for s in &mut self.sources {
            if let Some(r) = s.finish()? {
                let m = merged.get_or_insert_with(WorkloadReport::default);
                m.traces.extend(r.traces);
                if let Some(u) = r.users_left {
                    *m.users_left.get_or_insert(0) += u;
                }
            }
        }
        Ok(merged)
    }
}
