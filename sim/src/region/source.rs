//! Each region's demand: the scenario's `[workload]` with its diurnal
//! arrival process shifted by the region's `shift_s` (the same daily shape,
//! one time zone later), drawn from the region's own seeded streams and
//! merged in arrival order. Every request leaves tagged with its origin
//! region.

use crate::rng;
use crate::scenario::RegionsPlan;
use crate::workload::merge::{MergeTag, Merged};
use crate::workload::{self, Context, RequestSource, WorkloadError};
use rand::Rng;

/// The seed of region `name`'s random streams: adding or reordering
/// regions leaves every other region's requests unchanged.
fn region_seed(seed: u64, name: &str) -> u64 {
    rng::stream(seed, &format!("region/{name}/seed")).random()
}

/// The request stream of a fleet with regions: each region's demand.
pub fn build_source(
    plan: &RegionsPlan,
    ctx: &Context,
) -> Result<Box<dyn RequestSource>, WorkloadError> {
    let mut sources = Vec::with_capacity(plan.demand.len());
    for (name, w) in &plan.demand {
        let rctx = Context::new(&ctx.origin, &ctx.base_dir, region_seed(ctx.seed, name));
        sources.push(workload::build(w, &rctx)?);
    }
    Ok(Box::new(Merged::new(sources, MergeTag::Region)))
}
