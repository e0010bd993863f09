//! Several request sources merged into one stream in arrival order, each
//! request tagged with the index of the source it came from: the tenants of
//! `[[tenants]]` (each with its own workload) and the regions of
//! `[[fleet.regions]]` (each with its own demand curve) are both such
//! merges. Ties go to the lower index; a follow-up (closed loop,
//! conversation) goes back to the source that made the request.

use crate::request::Request;
use crate::time::SimTime;
use crate::workload::{RequestSource, RequestSpec, WorkloadError, WorkloadReport};

/// Which field of a request carries its source's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeTag {
    /// `tenant`: the `[[tenants]]` entry.
    Tenant,
    /// `region`: the `[[fleet.regions]]` entry (its origin region).
    Region,
}

impl MergeTag {
    fn set(self, spec: &mut RequestSpec, i: usize) {
        match self {
            MergeTag::Tenant => spec.tenant = i as u32,
            MergeTag::Region => spec.region = i as u16,
        }
    }

    fn of(self, req: &Request) -> usize {
        match self {
            MergeTag::Tenant => req.tenant as usize,
            MergeTag::Region => req.region as usize,
        }
    }
}

/// Sources merged in arrival order (see the module comment).
pub struct Merged {
    sources: Vec<Box<dyn RequestSource>>,
    heads: Vec<Option<RequestSpec>>,
    started: bool,
    tag: MergeTag,
}

impl Merged {
    pub fn new(sources: Vec<Box<dyn RequestSource>>, tag: MergeTag) -> Merged {
        let n = sources.len();
        Merged {
            sources,
            heads: vec![None; n],
            started: false,
            tag,
        }
    }
}

impl RequestSource for Merged {
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
        self.tag.set(&mut spec, i);
        Some(spec)
    }

    fn on_request_end(
        &mut self,
        req: &Request,
        now: SimTime,
        completed: bool,
    ) -> Option<RequestSpec> {
        let i = self.tag.of(req);
        let mut next = self
            .sources
            .get_mut(i)?
            .on_request_end(req, now, completed)?;
        self.tag.set(&mut next, i);
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

    fn open_loop(&self) -> bool {
        self.sources.iter().all(|s| s.open_loop())
    }
}
