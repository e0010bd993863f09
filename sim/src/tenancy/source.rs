//! Where tenants' requests come from: each tenant's own workload, merged in
//! arrival order, or one shared trace whose tenant column is mapped onto the
//! configured tenants. Either way a request leaves here with the index of its
//! `[[tenants]]` entry.
//!
//! A tenant's random streams derive from its own seed, itself drawn from the
//! stream `(seed, "tenant/<name>/seed")`, so adding, removing or reordering
//! tenants leaves every other tenant's requests byte-identical.

use crate::request::Request;
use crate::rng;
use crate::scenario::{DemandPlan, Scenario, TenantCfg};
use crate::time::SimTime;
use crate::workload::merge::{MergeTag, Merged};
use crate::workload::{self, Context, RequestSource, RequestSpec, WorkloadError, WorkloadReport};
use rand::Rng;
use std::collections::BTreeMap;

/// The seed of tenant `name`'s random streams under master seed `seed`.
pub fn tenant_seed(seed: u64, name: &str) -> u64 {
    rng::stream(seed, &format!("tenant/{name}/seed")).random()
}

/// The request stream of a demand: its `[workload]`, or its tenants'.
pub fn build_source(
    f: &DemandPlan,
    ctx: &Context,
) -> Result<Box<dyn RequestSource>, WorkloadError> {
    if f.tenants.iter().any(|t| t.workload.is_some()) {
        let mut sources = Vec::with_capacity(f.tenants.len());
        for (i, t) in f.tenants.iter().enumerate() {
            let w = t
                .workload
                .as_ref()
                .expect("validated: every tenant has one");
            let tctx = Context::new(&ctx.origin, &ctx.base_dir, tenant_seed(ctx.seed, &t.name));
            let src = workload::build(w, &tctx).map_err(|e| tenant_key(e, i))?;
            sources.push(src);
        }
        return Ok(Box::new(Merged::new(sources, MergeTag::Tenant)));
    }
    let shared = workload::build(&f.workload, ctx)?;
    let maps_column = f
        .workload
        .trace
        .as_ref()
        .is_some_and(|t| t.tenant_column.is_some());
    if maps_column && !f.tenants.is_empty() {
        return Ok(Box::new(TraceTenants::new(shared, &f.tenants, ctx)));
    }
    if f.tenants.len() == 1 {
        return Ok(Box::new(OneTenant(shared)));
    }
    Ok(shared)
}

/// Opens the workload and reads its first request (`servesim check`).
pub fn probe(s: &Scenario, ctx: &Context) -> Result<Option<RequestSpec>, WorkloadError> {
    let mut src = build_source(&s.demand_plan(), ctx)?;
    let first = src.next_request();
    src.finish()?;
    Ok(first)
}

/// A tenant's workload error names the tenant's key path.
fn tenant_key(e: WorkloadError, i: usize) -> WorkloadError {
    match e {
        WorkloadError::Config {
            origin,
            key,
            message,
        } => WorkloadError::Config {
            origin,
            key: format!("tenants.{i}.{key}"),
            message,
        },
        other => other,
    }
}

/// The single `[workload]` as the one configured tenant (index 0).
struct OneTenant(Box<dyn RequestSource>);

impl RequestSource for OneTenant {
    fn next_request(&mut self) -> Option<RequestSpec> {
        let mut s = self.0.next_request()?;
        s.tenant = 0;
        Some(s)
    }
    fn on_request_end(
        &mut self,
        req: &Request,
        now: SimTime,
        completed: bool,
    ) -> Option<RequestSpec> {
        let mut s = self.0.on_request_end(req, now, completed)?;
        s.tenant = 0;
        Some(s)
    }
    fn finish(&mut self) -> Result<Option<WorkloadReport>, WorkloadError> {
        self.0.finish()
    }
}

/// A shared trace's tenant column mapped onto `[[tenants]]` by their
/// `trace_tenants` lists; the tenant without a list takes the other values.
/// A value no tenant takes stops the run with an error naming it.
pub struct TraceTenants {
    inner: Box<dyn RequestSource>,
    by_name: BTreeMap<String, u32>,
    catch_all: Option<u32>,
    /// Trace tenant index → configured tenant index.
    map: Vec<Option<u32>>,
    origin: String,
    error: Option<WorkloadError>,
}

impl TraceTenants {
    pub fn new(
        inner: Box<dyn RequestSource>,
        tenants: &[TenantCfg],
        ctx: &Context,
    ) -> TraceTenants {
        let mut by_name = BTreeMap::new();
        let mut catch_all = None;
        for (i, t) in tenants.iter().enumerate() {
            match &t.trace_tenants {
                Some(names) => {
                    for n in names {
                        by_name.insert(n.clone(), i as u32);
                    }
                }
                None => catch_all = Some(i as u32),
            }
        }
        TraceTenants {
            inner,
            by_name,
            catch_all,
            map: Vec::new(),
            origin: ctx.origin.clone(),
            error: None,
        }
    }

    fn map(&mut self, trace_index: u32) -> Option<u32> {
        let i = trace_index as usize;
        if let Some(Some(t)) = self.map.get(i) {
            return Some(*t);
        }
        let name = self.inner.tenant_name(trace_index).unwrap_or_default();
        let t = self.by_name.get(&name).copied().or(self.catch_all);
        if t.is_none() {
            self.error = Some(WorkloadError::Config {
                origin: self.origin.clone(),
                key: "tenants".into(),
                message: format!(
                    "the trace's tenant {name:?} is in no tenant's `trace_tenants`, and every tenant names its values (leave `trace_tenants` out on one to take the rest)"
                ),
            });
        }
        if self.map.len() <= i {
            self.map.resize(i + 1, None);
        }
        self.map[i] = t;
        t
    }
}

impl RequestSource for TraceTenants {
    fn next_request(&mut self) -> Option<RequestSpec> {
        if self.error.is_some() {
            return None;
        }
        let mut s = self.inner.next_request()?;
        s.tenant = self.map(s.tenant)?;
        Some(s)
    }
    fn on_request_end(
        &mut self,
        req: &Request,
        now: SimTime,
        completed: bool,
    ) -> Option<RequestSpec> {
        let mut s = self.inner.on_request_end(req, now, completed)?;
        s.tenant = self.map(s.tenant)?;
        Some(s)
    }
    fn finish(&mut self) -> Result<Option<WorkloadReport>, WorkloadError> {
        let r = self.inner.finish()?;
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(r),
        }
    }
}
