//! Regions and the global router. A fleet may span regions (`[[fleet.regions]]`),
//! each serving its own demand (`source`) with its own pools — their
//! capacity limit (`replicas`, `autoscale.max_replicas`), cold-start figures
//! (`[fleet.pools.lifecycle]`) and GPU price. A global router serves each
//! request in its home region unless the home region is *saturated*; then
//! it sends the request to the least-loaded unsaturated region, where it
//! arrives one inter-region round trip later (counted in its TTFT).
//!
//! Saturation follows the Gateway API Inference Extension's saturation
//! detector (the endpoint picker llm-d builds on): a ready replica is
//! saturated when its waiting queue reaches `queue_threshold` (default 5)
//! or its KV-cache use reaches `kv_threshold` (default 0.8); with
//! `queue_threshold = 0`, as soon as a new request would wait (its running
//! batch holds `max_num_seqs` or others wait: for a TTFT target shorter
//! than one queue slot's wait); a region is
//! saturated when every ready replica in it is (or none is ready). This
//! is the "spill over when local capacity is exhausted" rule of
//! multi-region serving systems (SkyServe, EuroSys'25, places replicas
//! across regions and falls back across them; NVIDIA Dynamo's and llm-d's
//! routers score load per worker). The round trip defaults to 100 ms, a
//! mid value of public inter-region medians (see `OverflowCfg::rtt_ms`).

pub mod records;
pub mod source;

use crate::replica::Replica;
use crate::request::{Request, RequestId, Status};
use crate::scenario::{RegionPlan, RegionsPlan};
use crate::time::Nanos;
use records::RegionRecords;
use serde::Serialize;
use std::collections::VecDeque;

/// The global router's state over one run.
pub struct Regions {
    names: Vec<String>,
    /// Each region's name, demand shift and GPU price (for its report).
    regions: Vec<RegionPlan>,
    /// Pool names, by pool index (for the report).
    pool_names: Vec<String>,
    /// Replica range of each region (its pools are contiguous).
    ranges: Vec<(usize, usize)>,
    /// Pool indices of each region.
    pools: Vec<Vec<usize>>,
    pub rtt: Nanos,
    enabled: bool,
    queue_threshold: u32,
    kv_threshold: f64,
    /// `max_num_seqs` of each replica (its pool's engine).
    max_seqs: Vec<usize>,
    /// Overflowed requests on their way to their serving region, in
    /// arrival order there (every trip takes the same round trip).
    pub in_transit: VecDeque<(RequestId, u16)>,
    overflow_out: Vec<u64>,
    overflow_in: Vec<u64>,
}

impl Regions {
    /// The global router of `plan`'s regions.
    pub fn new(plan: &RegionsPlan) -> Regions {
        let n = plan.regions.len();
        let o = &plan.overflow;
        Regions {
            names: plan.regions.iter().map(|r| r.name.clone()).collect(),
            regions: plan.regions.clone(),
            pool_names: plan.pool_names.clone(),
            ranges: plan.ranges.clone(),
            pools: plan.pools.clone(),
            rtt: o.rtt,
            enabled: o.enabled,
            queue_threshold: o.queue_threshold,
            kv_threshold: o.kv_threshold,
            max_seqs: plan.max_seqs.clone(),
            in_transit: VecDeque::new(),
            overflow_out: vec![0; n],
            overflow_in: vec![0; n],
        }
    }

    /// Replica range of region `g`.
    pub fn range(&self, g: usize) -> std::ops::Range<usize> {
        self.ranges[g].0..self.ranges[g].1
    }

    /// Region of replica `r`.
    pub fn region_of(&self, r: usize) -> Option<usize> {
        self.ranges.iter().position(|&(a, b)| (a..b).contains(&r))
    }

    /// Region `g`'s ready replicas: (count, saturated count, outstanding
    /// requests).
    fn load(
        &self,
        g: usize,
        replicas: &[Replica],
        ready: &impl Fn(usize) -> bool,
    ) -> (u32, u32, u64) {
        let (mut n, mut sat, mut out) = (0u32, 0u32, 0u64);
        for r in self.range(g) {
            if !ready(r) {
                continue;
            }
            let rep = &replicas[r];
            n += 1;
            let kv = rep.active_kv_blocks() as f64 / rep.kv().total().max(1) as f64;
            // Threshold 0: saturated as soon as a new request would wait
            // (its batch is full or others already wait).
            let queue = match self.queue_threshold {
                0 => rep.waiting_len() > 0 || rep.running_len() >= self.max_seqs[r],
                q => rep.waiting_len() as u32 >= q,
            };
            if queue || kv >= self.kv_threshold {
                sat += 1;
            }
            out += (rep.waiting_len() + rep.running_len()) as u64;
        }
        (n, sat, out)
    }

    /// Where a request from region `home` is served: `None` at home, or
    /// another region when home is saturated (all its ready replicas over a
    /// threshold, or none ready) and another is not — the one with the
    /// fewest outstanding requests per ready replica, the lowest index on
    /// ties. A home region with no ready replica sends its requests to any
    /// region with one, even a saturated one. `ready(r)` says whether
    /// replica `r` takes requests.
    pub fn choose(
        &mut self,
        home: usize,
        replicas: &[Replica],
        ready: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let (n, sat, _) = self.load(home, replicas, &ready);
        let home_saturated = n == 0 || sat == n;
        if !home_saturated || (!self.enabled && n > 0) {
            return None;
        }
        let mut best: Option<(f64, usize)> = None;
        for g in (0..self.names.len()).filter(|&g| g != home) {
            let (m, s, out) = self.load(g, replicas, &ready);
            if m == 0 || (s == m && n > 0) {
                continue;
            }
            let per = out as f64 / m as f64;
            if best.is_none_or(|(b, _)| per < b) {
                best = Some((per, g));
            }
        }
        let (_, g) = best?;
        self.overflow_out[home] += 1;
        self.overflow_in[g] += 1;
        Some(g)
    }

    /// Conservation: requests in transit are in flight and held nowhere
    /// else.
    pub fn check(&self, reqs: &[Request], held: &mut [bool]) -> Result<(), String> {
        for &(id, _) in &self.in_transit {
            let i = id as usize;
            if held[i] {
                return Err(format!(
                    "request {id} is between regions and held by a replica"
                ));
            }
            held[i] = true;
            if reqs[i].status != Status::InFlight {
                return Err(format!(
                    "request {id} is {} but still between regions",
                    reqs[i].status.as_str()
                ));
            }
        }
        let out: u64 = self.overflow_out.iter().sum();
        let inn: u64 = self.overflow_in.iter().sum();
        if out != inn {
            return Err(format!(
                "{out} requests overflowed out of regions, {inn} into them"
            ));
        }
        Ok(())
    }

    /// Empty per-region counts for the run's ended requests to fold into
    /// (`slo`: the per-request targets).
    pub fn records(&self, slo: Option<crate::scenario::SloTargets>) -> RegionRecords {
        RegionRecords::new(self.ranges.clone(), slo)
    }

    /// The summary's `regions` rows from the requests folded into `recs`.
    /// `gpu_hours[k]` is pool `k`'s billed GPU-hours. Fails when TTFTs
    /// spilled to disk cannot be read back.
    pub fn report(
        &self,
        recs: RegionRecords,
        gpu_hours: &[f64],
    ) -> Result<Vec<RegionReport>, String> {
        let slo = recs.slo_targets();
        self.regions
            .iter()
            .zip(recs.rows)
            .enumerate()
            .map(|(g, (r, mut c))| {
                let gpu_hours: f64 = self.pools[g].iter().map(|&k| gpu_hours[k]).sum();
                Ok(RegionReport {
                    name: r.name.clone(),
                    shift_s: r.shift_s,
                    pools: self.pools[g]
                        .iter()
                        .map(|&k| self.pool_names[k].clone())
                        .collect(),
                    requests: c.requests,
                    completed: c.completed,
                    rejected: c.rejected,
                    served: c.served,
                    overflow_out: self.overflow_out[g],
                    overflow_in: self.overflow_in[g],
                    ttft_ms: c.ttft_ms()?,
                    slo_attainment: slo.map(|_| c.met as f64 / c.ended.max(1) as f64),
                    gpu_hours,
                    gpu_price_per_hour: r.gpu_price_per_hour,
                    cost: r.gpu_price_per_hour.map(|p| p * gpu_hours),
                })
            })
            .collect()
    }
}

/// One region's share of the run (summary.json `regions`).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RegionReport {
    pub name: String,
    /// Its demand's shift against the workload's, seconds.
    pub shift_s: f64,
    pub pools: Vec<String>,
    /// Requests that entered the fleet here (origin), and of them completed
    /// and rejected.
    pub requests: u64,
    pub completed: u64,
    pub rejected: u64,
    /// Requests served by this region's replicas, whatever their origin.
    pub served: u64,
    /// Requests of this origin sent to another region, and requests of
    /// other origins received.
    pub overflow_out: u64,
    pub overflow_in: u64,
    /// TTFT of this origin's completed requests (overflowed ones include
    /// the round trip), ms.
    pub ttft_ms: crate::stats::Dist,
    /// Share of this origin's ended requests that completed within
    /// `[slo]`'s TTFT and TPOT (with `[slo]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo_attainment: Option<f64>,
    /// Billed GPU-hours of the region's pools (with a life cycle: serving,
    /// idle, standby billed and starting; without: replicas × GPUs × run).
    pub gpu_hours: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_price_per_hour: Option<f64>,
    /// gpu_hours × gpu_price_per_hour.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}
