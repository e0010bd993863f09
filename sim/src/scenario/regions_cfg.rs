//! `[[fleet.regions]]` and `[fleet.overflow]`: a fleet spread over regions,
//! each with its own demand (the workload's arrival process shifted by the
//! region's time-zone offset), GPU price, and pools (`fleet.pools[].region`)
//! whose `replicas`/`autoscale.max_replicas` are the region's capacity limit
//! and whose `[fleet.pools.lifecycle]` holds its cold-start figures; and the
//! global router's overflow rule (see `region`).

use super::{ArrivalCfg, PoolRole, ScenarioFile};
use serde::{Deserialize, Serialize};

type Invalid = (String, String);

/// One region.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionCfg {
    pub name: String,
    /// The region's demand is the `[workload]` with its diurnal arrival
    /// process shifted later by this many seconds (its peak comes
    /// `shift_s` after the workload's `peak_s`; e.g. 28800 for a region
    /// eight time zones west). Each region draws its own requests from its
    /// own seeded stream.
    #[serde(default)]
    pub shift_s: f64,
    /// Price of one GPU-hour in this region, in the currency of the user's
    /// choice. No default: prices are inputs, not quotes. Without it the
    /// region's cost is not reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_price_per_hour: Option<f64>,
}

/// `[fleet.overflow]`: when and at what cost the global router serves a
/// request outside its home region.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverflowCfg {
    /// Whether saturated regions send requests to other regions (`false`:
    /// every region serves only its own demand, "each region alone").
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Network round trip between regions, ms, added to an overflowed
    /// request before its prefill can start (so it counts in TTFT). Default
    /// 100 ms: AWS inter-region medians run ~70 ms (us-east-1 ↔ eu-west-1)
    /// to ~150 ms (us-east-1 ↔ ap-northeast-1) and ~210 ms (eu-west-1 ↔
    /// ap-northeast-1) on cloudping.co's inter-region latency table.
    #[serde(default = "d_rtt_ms")]
    pub rtt_ms: f64,
    /// A ready replica is saturated with at least this many requests
    /// waiting (the Gateway API Inference Extension's saturation detector,
    /// `queueDepthThreshold`, default 5). 0: as soon as a new request would
    /// wait (its batch holds `max_num_seqs`, or requests already wait).
    #[serde(default = "d_queue")]
    pub queue_threshold: u32,
    /// … or with at least this fraction of its KV blocks in use (the same
    /// detector's `kvCacheUtilThreshold`, default 0.8).
    #[serde(default = "d_kv")]
    pub kv_threshold: f64,
}

fn yes() -> bool {
    true
}
fn d_rtt_ms() -> f64 {
    100.0
}
fn d_queue() -> u32 {
    5
}
fn d_kv() -> f64 {
    0.8
}

impl OverflowCfg {
    pub fn is_default(&self) -> bool {
        *self == OverflowCfg::default()
    }
}

impl Default for OverflowCfg {
    fn default() -> Self {
        OverflowCfg {
            enabled: true,
            rtt_ms: d_rtt_ms(),
            queue_threshold: d_queue(),
            kv_threshold: d_kv(),
        }
    }
}

/// Checks the regions, the overflow rule and the pools' `region` keys;
/// errors carry the dotted key path.
pub(super) fn validate_regions(f: &ScenarioFile) -> Result<(), Invalid> {
    let regions = &f.fleet.regions;
    let o = &f.fleet.overflow;
    let err = |k: String, m: String| Err((k, m));
    if regions.is_empty() {
        if let Some(i) = f.fleet.pools.iter().position(|p| p.region.is_some()) {
            return err(
                format!("fleet.pools[{i}].region"),
                "names a region but the fleet has no [[fleet.regions]]".into(),
            );
        }
        if *o != OverflowCfg::default() {
            return err(
                "fleet.overflow".into(),
                "applies only to a fleet with [[fleet.regions]]".into(),
            );
        }
        return Ok(());
    }
    if !(o.rtt_ms.is_finite() && (0.0..=10_000.0).contains(&o.rtt_ms)) {
        return err(
            "fleet.overflow.rtt_ms".into(),
            format!(
                "must be a round trip in ms, ≥ 0 and ≤ 10000, got {}",
                o.rtt_ms
            ),
        );
    }
    if o.queue_threshold > 1_000_000 {
        return err(
            "fleet.overflow.queue_threshold".into(),
            format!(
                "at most 1000000 waiting requests, got {}",
                o.queue_threshold
            ),
        );
    }
    if !(o.kv_threshold.is_finite() && o.kv_threshold > 0.0 && o.kv_threshold <= 1.0) {
        return err(
            "fleet.overflow.kv_threshold".into(),
            format!("must be a fraction in (0, 1], got {}", o.kv_threshold),
        );
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, r) in regions.iter().enumerate() {
        let key = |k: &str| format!("fleet.regions[{i}].{k}");
        if r.name.is_empty() || names.contains(&r.name.as_str()) {
            return err(
                key("name"),
                format!(
                    "must be a non-empty name no other region has, got {:?}",
                    r.name
                ),
            );
        }
        names.push(&r.name);
        if !(r.shift_s.is_finite() && (0.0..=1e9).contains(&r.shift_s)) {
            return err(
                key("shift_s"),
                format!("must be seconds ≥ 0, got {}", r.shift_s),
            );
        }
        if let Some(p) = r.gpu_price_per_hour {
            if !(p.is_finite() && p >= 0.0) {
                return err(
                    key("gpu_price_per_hour"),
                    format!("must be a price ≥ 0, got {p}"),
                );
            }
        }
        if r.shift_s > 0.0 && !matches!(f.workload.arrival, Some(ArrivalCfg::Diurnal { .. })) {
            return err(
                key("shift_s"),
                "shifts a diurnal demand: give [workload] arrival = { process = \"diurnal\", … }"
                    .into(),
            );
        }
    }
    if f.fleet.pools.is_empty() {
        return err(
            "fleet.regions".into(),
            "a region's replicas are pools: add [[fleet.pools]] with `region = \"<name>\"`".into(),
        );
    }
    for (i, p) in f.fleet.pools.iter().enumerate() {
        let key = format!("fleet.pools[{i}].region");
        match &p.region {
            None => return err(key, format!("missing: every pool runs in one of {names:?}")),
            Some(n) if !names.contains(&n.as_str()) => {
                return err(key, format!("unknown region {n:?}; known: {names:?}"))
            }
            _ => {}
        }
        if p.role != PoolRole::Colocated {
            return err(
                format!("fleet.pools[{i}].role"),
                "regions hold colocated pools (prefill/decode pairs across regions are not modelled)"
                    .into(),
            );
        }
    }
    for (i, r) in regions.iter().enumerate() {
        if !f
            .fleet
            .pools
            .iter()
            .any(|p| p.region.as_deref() == Some(&r.name))
        {
            return err(
                format!("fleet.regions[{i}]"),
                format!(
                    "region {:?} has no pool (set `region` on a [[fleet.pools]] entry)",
                    r.name
                ),
            );
        }
    }
    if f.tenants.iter().any(|t| t.workload.is_some()) {
        return err(
            "fleet.regions".into(),
            "tenants with their own workloads cannot be combined with regions (each region draws the [workload])"
                .into(),
        );
    }
    if f.workload.trace.is_some() {
        return err(
            "fleet.regions".into(),
            "a trace replays one demand; regions draw their own from a synthetic [workload]".into(),
        );
    }
    Ok(())
}
