//! The regions' slice of the plan: what `region::Regions` (the global
//! router) and the regions' request sources are built from, resolved once
//! from `[[fleet.regions]]`, `[fleet.overflow]`, `[workload]` and the pools
//! that name each region, so that neither reads configuration while the
//! run goes.

use super::{ArrivalCfg, Scenario, WorkloadCfg};
use crate::time::{secs_to_nanos, Nanos};

/// The fleet's regions, their replicas and their demand.
#[derive(Clone, Debug)]
pub struct RegionsPlan {
    /// Each region's name, demand shift and GPU price, in order.
    pub regions: Vec<RegionPlan>,
    /// Replica range of each region (its pools are contiguous).
    pub ranges: Vec<(usize, usize)>,
    /// Pool indices (into `Scenario::pools`) of each region.
    pub pools: Vec<Vec<usize>>,
    /// Pool names, by pool index.
    pub pool_names: Vec<String>,
    /// `max_num_seqs` of each replica (its pool's engine).
    pub max_seqs: Vec<usize>,
    /// `[fleet.overflow]`: the global router's rule.
    pub overflow: OverflowPlan,
    /// Each region's demand: `[workload]` with a diurnal arrival process
    /// shifted by the region's `shift_s`, by region name.
    pub demand: Vec<(String, WorkloadCfg)>,
}

/// One region (`[[fleet.regions]]`), as its report names and prices it.
#[derive(Clone, Debug, PartialEq)]
pub struct RegionPlan {
    pub name: String,
    /// Seconds its demand's diurnal peak comes after the workload's.
    pub shift_s: f64,
    /// Price of one GPU-hour there, when given.
    pub gpu_price_per_hour: Option<f64>,
}

/// The global router's overflow rule (`[fleet.overflow]`), its round trip
/// on the clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OverflowPlan {
    /// Saturated regions send requests to other regions.
    pub enabled: bool,
    /// The inter-region round trip an overflowed request pays.
    pub rtt: Nanos,
    /// A ready replica is saturated at this many waiting requests (0: as
    /// soon as a new request would wait) ...
    pub queue_threshold: u32,
    /// ... or at this fraction of its KV cache in use.
    pub kv_threshold: f64,
}

impl Scenario {
    /// The regions' slice of the plan, when the scenario has
    /// `[[fleet.regions]]`.
    pub fn regions_plan(&self) -> Option<RegionsPlan> {
        let f = &self.file;
        if f.fleet.regions.is_empty() {
            return None;
        }
        let n = f.fleet.regions.len();
        let mut ranges = vec![(usize::MAX, 0); n];
        let mut pools = vec![Vec::new(); n];
        let mut max_seqs = Vec::new();
        for (k, p) in self.pools.iter().enumerate() {
            let m = p.engine().max_num_seqs as usize;
            max_seqs.extend(std::iter::repeat_n(m, p.replicas as usize));
            let g = p.region as usize;
            let (a, b) = (p.first as usize, (p.first + p.replicas) as usize);
            ranges[g] = (ranges[g].0.min(a), ranges[g].1.max(b));
            pools[g].push(k);
        }
        let demand = f
            .fleet
            .regions
            .iter()
            .map(|r| {
                let mut w = f.workload.clone();
                if let Some(ArrivalCfg::Diurnal { peak_s, .. }) = &mut w.arrival {
                    *peak_s += r.shift_s;
                }
                (r.name.clone(), w)
            })
            .collect();
        let o = &f.fleet.overflow;
        Some(RegionsPlan {
            regions: f
                .fleet
                .regions
                .iter()
                .map(|r| RegionPlan {
                    name: r.name.clone(),
                    shift_s: r.shift_s,
                    gpu_price_per_hour: r.gpu_price_per_hour,
                })
                .collect(),
            ranges,
            pools,
            pool_names: self.pools.iter().map(|p| p.name.clone()).collect(),
            max_seqs,
            overflow: OverflowPlan {
                enabled: o.enabled,
                rtt: secs_to_nanos(o.rtt_ms / 1e3),
                queue_threshold: o.queue_threshold,
                kv_threshold: o.kv_threshold,
            },
            demand,
        })
    }
}
