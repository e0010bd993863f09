//! The summary of one run (`summary.json`): the request-derived parts
//! (`request::summary`: counts, latency percentiles, throughput, goodput
//! and SLO attainment), batching and KV use, and each subsystem's own
//! report, gathered from the run's parts (`result`).

use crate::replica::report::EngineReport;
use crate::request::summary::{RequestStats, RequestsSummary};
use crate::request::Request;
use crate::scenario::SloTargets;
use crate::stats::{Counts, Dist, Latency, SloReport, Throughput};
use crate::time::{Nanos, SimTime};
use crate::workload::WorkloadReport;
use serde::Serialize;
use std::collections::BTreeMap;

/// The summary of one run (`summary.json`).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Summary {
    pub scenario: String,
    pub seed: u64,
    pub cost_source: String,
    pub model: String,
    pub hardware: String,
    pub replicas: u32,
    pub tensor_parallel: u32,
    pub gpus: u32,
    pub router: String,
    pub kv_blocks_per_replica: u64,
    pub block_size: u32,
    /// Simulated seconds from t = 0 to the end of the run.
    pub duration_s: f64,
    pub counts: Counts,
    pub latency: Latency,
    pub throughput: Throughput,
    pub slo: Option<SloReport>,
    pub engine: EngineReport,
    /// Offered vs achieved load and whether the run reached a steady state.
    pub load: crate::steady_state::LoadReport,
    pub events: u64,
    /// What the workload reports (trace lines read and skipped, closed-loop
    /// users that left); absent for a plain synthetic stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadReport>,
    /// Per-tenant results and fairness (only with `[[tenants]]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenancy: Option<crate::tenancy::TenancyReport>,
    /// Offered against achieved load, when the run was observed over HTTP
    /// (`servesim observe`); absent for simulations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed: Option<ObservedLoad>,
    /// Replica life cycle: GPU-hours by phase, cold starts, failures and
    /// retries (only with `[lifecycle]`, `[autoscale]` or `[failures]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<crate::lifecycle::LifecycleReport>,
    /// Per-pool GPUs, utilization and KV use (only with `[[fleet.pools]]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<crate::cluster::fleet::PoolReport>,
    /// Per-region demand, overflow, SLO attainment and cost (only with
    /// `[[fleet.regions]]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<crate::region::RegionReport>,
    /// The KV links of a disaggregated fleet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_transfer: Option<crate::cluster::disagg::TransferReport>,
    /// Only with `[canary]`: the rollout's gate decisions and outcome.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary: Option<crate::canary::report::CanaryReport>,
    /// Only with `[metrics] routing_trace`: the router's decisions against
    /// the fastest candidate of each (`cluster::routing_trace`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing: Option<crate::cluster::routing_trace::RoutingReport>,
    /// Power and energy of the fleet's GPUs (`energy`), when every pool's
    /// hardware has a TDP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy: Option<crate::energy::EnergyReport>,
}

/// What a load generator offered a real server and what it got back.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ObservedLoad {
    /// The server's base URL.
    pub url: String,
    /// Requests per second the workload's arrival times ask for.
    pub offered_rps: f64,
    /// Requests per second actually sent (the connection cap can delay them).
    pub sent_rps: f64,
    /// Mean lateness of a send behind its scheduled arrival, ms.
    pub send_lag_ms: f64,
    /// Responses by HTTP status (0: no response: a transport error).
    pub http_status: BTreeMap<String, u64>,
}

/// Fills the request-derived parts of a summary (a fold of
/// [`RequestsSummary`] over `reqs`, the one code path a streamed run uses
/// too); fails as [`RequestsSummary::finish`] does.
pub fn summarize_requests(
    reqs: &[Request],
    itl_samples: Vec<(Nanos, u32)>,
    duration: SimTime,
    gpus: u32,
    slo: Option<SloTargets>,
    s: &mut Summary,
) -> Result<(), String> {
    let mut acc = RequestsSummary::new(slo);
    for r in reqs {
        acc.add(r);
    }
    s.absorb(acc.finish(Dist::of_weighted(itl_samples), duration, gpus)?);
    Ok(())
}

impl Summary {
    /// Takes the request-derived parts of the run.
    pub fn absorb(&mut self, r: RequestStats) {
        self.counts = r.counts;
        self.latency = r.latency;
        self.throughput = r.throughput;
        self.slo = r.slo;
        self.engine.preempted_requests = r.preempted_requests;
    }
}
