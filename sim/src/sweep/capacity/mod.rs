//! Saturation and capacity planning from simulated benchmarks.
//!
//! 1. **Highest sustainable load**: the largest arrival rate a fleet of a
//!    given size (one replica by default) serves within the SLOs, found by
//!    bracketing (doubling or halving the rate) and then bisection to a
//!    relative tolerance.
//! 2. **Sizing for a demand**: the fewest replicas that meet the SLOs at a
//!    peak rate — galloping from the estimate `demand / per-replica rate`,
//!    then bisection, so the answer is checked from both sides: `n` replicas
//!    meet the SLOs and `n − 1` (when `n > 1`) are simulated and do not.
//!    Headroom sizes for `demand × (1 + headroom)`; `spare` replicas are
//!    added on top for failures (N+k), and the monthly cost follows from a
//!    stated price per GPU-hour (730 hours a month, 8760 / 12).
//!
//! **Steady state.** A probe's figure is only a property of the fleet when
//! the run reached a steady state, so every probe (a) runs long enough for
//! its fleet: at least [`MIN_REQUESTS_PER_REPLICA`] requests, and twice
//! `engine.max_num_seqs`, per replica, so that batches fill and the warm-up
//! is a small part of the run (the horizon is extended, never shortened);
//! (b) meets the SLOs only when its load verdict (`load::load_report`,
//! comparing the backlog over halves of the arrival window) is stable; and
//! (c) each recommended fleet is re-simulated with a
//! [`VERIFY_HORIZON_FACTOR`]× longer horizon and grown until that run meets
//! the SLOs too (`verify` probes), so a short probe cannot pass a fleet that
//! a long run would fail.
//!
//! "Meets the SLOs" is as in a sweep (see `objective`): at least the target
//! share of requests meet the scenario's `[slo]` TTFT and TPOT targets.
//! Every probe is a full simulation of the scenario with only the offered
//! load and `fleet.replicas` changed (with pools, every pool's `replicas`
//! scaled: see [`FleetUnit`]). The load is `workload.arrival.rate`
//! for an arrival process, or `workload.trace.rate` for a trace replay (the
//! trace scaled in time to that mean rate: "a trace scaled to a target").
//! Either way the searches see the same arrivals, scaled in time (common
//! random numbers), and the outcome is deterministic. Near the boundary attainment need not be
//! perfectly monotone in the rate; the search reports the boundary it found
//! with the probes that bound it.

mod cache;
mod probe;
mod search;
mod unit;

pub use cache::ProbeCache;
use probe::Prober;
pub use probe::{probe_once, MIN_REQUESTS_PER_REPLICA, VERIFY_HORIZON_FACTOR};
use search::{guess_replicas, max_rate, min_replicas, verify};
pub use search::{is_shaky, probe_at, size_short, verify_long, Found};
pub use unit::{fleet_count, gpus_per_unit, FleetUnit, UnitPool};

use super::SweepError;
use serde::{Deserialize, Serialize};

/// Hours in an average month (8760 / 12).
pub const HOURS_PER_MONTH: f64 = 730.0;

/// Format tag of `capacity.json`.
pub const FORMAT: &str = "servesim-capacity/1";

/// What to search for.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityQuery {
    /// Share of requests that must meet the SLOs (e.g. 0.99).
    pub attainment: f64,
    /// Fleet size for the highest-load search.
    pub replicas: u32,
    /// Peak demand to size a fleet for, requests/s.
    pub demand_rps: Option<f64>,
    /// Extra load to absorb above the demand, as a fraction (0.2 = 20 %).
    pub headroom: f64,
    /// Replicas added for failures (N+k).
    pub spare: u32,
    /// Price of a GPU-hour, US dollars.
    pub gpu_hour_usd: Option<f64>,
    /// Relative precision of the rate search (0.01 = 1 %).
    pub tolerance: f64,
}

/// One simulated probe.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    /// Which search ran it: `rate`, `demand` or `demand+headroom`.
    pub search: String,
    /// Replicas, or with pools units (see [`CapacityReport::unit`]).
    pub replicas: u32,
    /// With pools: the replicas of those units, over every pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_replicas: Option<u32>,
    pub rate_rps: f64,
    pub attainment: f64,
    pub ttft_p99_ms: f64,
    pub tpot_p99_ms: f64,
    pub goodput_rps: f64,
    pub completed: u64,
    /// The run's load verdict was `stable` (its backlog did not grow).
    #[serde(default)]
    pub stable: bool,
    /// Requests the probe simulated (its horizon, extended to the fleet).
    #[serde(default)]
    pub requests: u64,
    /// Whether the scenario's percentile targets hold (with any given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentiles_met: Option<bool>,
    pub meets_slo: bool,
    /// What missed, in words ("ttft_p99_ms 812 ms > 500 ms target"), for
    /// messages; empty when the probe meets the SLOs. Not written: the
    /// fields above are the record.
    #[serde(skip)]
    pub missed: String,
    /// The run's figures a plan's frontier and energy cost read (`gpus`,
    /// `hardware`, `pools`, `lifecycle.mean_billed_gpus`, `throughput`,
    /// TTFT and TPOT latency, `energy`), as in `summary.json`. Not written.
    #[serde(skip)]
    pub figures: Option<std::sync::Arc<serde_json::Value>>,
    /// Reused from a [`ProbeCache`] rather than simulated. Not written.
    #[serde(skip)]
    pub reused: bool,
}

/// The highest load a fleet sustains within the SLOs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaxLoad {
    pub replicas: u32,
    /// The highest rate probed that meets the SLOs.
    pub rate_rps: f64,
    pub per_replica_rps: f64,
    /// The lowest rate probed that misses them.
    pub fails_at_rps: f64,
    /// The probe at `rate_rps`.
    pub at: Probe,
}

/// A fleet sized for a demand.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sizing {
    pub demand_rps: f64,
    pub headroom: f64,
    /// demand × (1 + headroom).
    pub sized_for_rps: f64,
    /// Fewest replicas meeting the SLOs at the demand.
    pub replicas_min: u32,
    pub at_min: Probe,
    /// The probe at `replicas_min − 1`, which misses the SLOs.
    pub below_min: Option<Probe>,
    /// Fewest replicas meeting the SLOs at `sized_for_rps`.
    pub replicas_with_headroom: u32,
    pub at_headroom: Probe,
    pub below_headroom: Option<Probe>,
    pub spare: u32,
    /// replicas_with_headroom + spare.
    pub replicas_total: u32,
    /// GPUs per replica (per unit with pools: see [`CapacityReport::unit`]).
    pub gpus_per_replica: u32,
    pub gpus_total: u32,
    pub gpu_hour_usd: Option<f64>,
    /// gpus_total × price × 730 h, when a price is stated.
    pub usd_per_month: Option<f64>,
}

/// The result of `servesim capacity` (`capacity.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacityReport {
    pub format: String,
    pub scenario: String,
    /// The per-request thresholds, ms (those given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_tpot_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_e2e_ms: Option<f64>,
    /// The percentile targets, ms, by `[slo]` key (with any given).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub slo_percentiles_ms: std::collections::BTreeMap<String, f64>,
    pub attainment_target: f64,
    pub tolerance: f64,
    pub hours_per_month: f64,
    pub max_load: MaxLoad,
    pub sizing: Option<Sizing>,
    /// With `[[fleet.pools]]`, the unit every count of this report counts
    /// (`replicas` fields are numbers of units); absent: plain replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<FleetUnit>,
    /// Every simulation run, per search in the order run.
    pub probes: Vec<Probe>,
}

/// Runs the capacity searches on a scenario (text and origin for messages).
/// `on_probe` sees every probe as it finishes (possibly from two threads).
pub fn plan_capacity(
    scenario_toml: &str,
    origin: &str,
    q: &CapacityQuery,
    on_probe: &(dyn Fn(&Probe) + Sync),
) -> Result<CapacityReport, SweepError> {
    plan_capacity_with(scenario_toml, origin, q, None, on_probe)
}

/// [`plan_capacity`] with its probes shared through `cache` (a plan's
/// headroom search reuses the runs its sizing made).
pub fn plan_capacity_with(
    scenario_toml: &str,
    origin: &str,
    q: &CapacityQuery,
    cache: Option<&ProbeCache>,
    on_probe: &(dyn Fn(&Probe) + Sync),
) -> Result<CapacityReport, SweepError> {
    let (mut prober, base_scenario, base_rate) =
        Prober::of(scenario_toml, origin, q.attainment, on_probe)?;
    prober.cache = cache;
    let Some(slo) = base_scenario.slo().cloned() else {
        return Err(SweepError::new(format!(
            "{origin}: slo: missing: capacity needs [slo] targets (ttft_ms, tpot_ms, e2e_ms or percentile targets such as ttft_p99_ms), which define the load a fleet sustains"
        )));
    };
    check_query(q)?;
    let unit = prober.unit.clone();
    let mut probes = Vec::new();

    // The scenario as written is one unit of pools, or its replicas.
    let written = if unit.is_some() {
        1
    } else {
        base_scenario.replicas().max(1)
    };
    let start = base_rate * q.replicas as f64 / written as f64;
    let max_load = max_rate(&prober, q.replicas, start, q.tolerance, &mut probes)?;

    let sizing = match q.demand_rps {
        None => None,
        Some(demand) => {
            let sized_for = demand * (1.0 + q.headroom);
            // The larger count is checked first: past the largest fleet,
            // neither search can start.
            let guess_h = guess_replicas(origin, sized_for, max_load.per_replica_rps)?;
            let guess = guess_replicas(origin, demand, max_load.per_replica_rps)?;
            let (at_demand, at_headroom) = if q.headroom > 0.0 {
                rayon::join(
                    || min_replicas(&prober, "demand", demand, guess),
                    || min_replicas(&prober, "demand+headroom", sized_for, guess_h),
                )
            } else {
                let r = min_replicas(&prober, "demand", demand, guess);
                (r.clone(), r)
            };
            let (n_min, at_min, below_min, p1) = at_demand?;
            probes.extend(p1);
            let (n_min, at_min, below_min) = verify(
                &prober,
                "demand",
                demand,
                (n_min, at_min, below_min),
                &mut probes,
            )?;
            let (n_h, at_h, below_h, p2) = at_headroom?;
            let (n_h, at_h, below_h) = if q.headroom > 0.0 {
                probes.extend(p2);
                verify(
                    &prober,
                    "demand+headroom",
                    sized_for,
                    (n_h, at_h, below_h),
                    &mut probes,
                )?
            } else {
                (n_min, at_min.clone(), below_min.clone())
            };
            let total = n_h + q.spare;
            let tp = gpus_per_unit(&base_scenario);
            let gpus = total * tp;
            Some(Sizing {
                demand_rps: demand,
                headroom: q.headroom,
                sized_for_rps: sized_for,
                replicas_min: n_min,
                at_min,
                below_min,
                replicas_with_headroom: n_h,
                at_headroom: at_h,
                below_headroom: below_h,
                spare: q.spare,
                replicas_total: total,
                gpus_per_replica: tp,
                gpus_total: gpus,
                gpu_hour_usd: q.gpu_hour_usd,
                usd_per_month: q.gpu_hour_usd.map(|p| gpus as f64 * p * HOURS_PER_MONTH),
            })
        }
    };
    Ok(CapacityReport {
        format: FORMAT.to_string(),
        scenario: base_scenario.name().to_string(),
        slo_ttft_ms: slo.ttft_ms,
        slo_tpot_ms: slo.tpot_ms,
        slo_e2e_ms: slo.e2e_ms,
        slo_percentiles_ms: slo.targets().percentile_map(),
        attainment_target: q.attainment,
        tolerance: q.tolerance,
        hours_per_month: HOURS_PER_MONTH,
        max_load,
        sizing,
        unit,
        probes,
    })
}

/// The largest fleet a search may try (the scenario's own limit).
pub const MAX_REPLICAS: u32 = crate::bounds::REPLICAS.hi as u32;

pub(crate) fn check_query(q: &CapacityQuery) -> Result<(), SweepError> {
    use crate::bounds;
    let checks = [
        bounds::ATTAINMENT.check_named("--attainment", q.attainment),
        bounds::TOLERANCE.check_named("--tolerance", q.tolerance),
        bounds::REPLICAS
            .check(q.replicas as u64)
            .map(|v| v as f64)
            .map_err(|m| format!("--replicas {m}")),
        bounds::SPARE_REPLICAS
            .check(q.spare as u64)
            .map(|v| v as f64)
            .map_err(|m| format!("--spare {m}")),
        q.demand_rps
            .map_or(Ok(0.0), |d| bounds::DEMAND_RPS.check_named("--demand", d)),
        // The query holds a fraction; the flag is in percent.
        bounds::HEADROOM_PERCENT.check_named("--headroom", q.headroom * 100.0),
        q.gpu_hour_usd.map_or(Ok(0.0), |p| {
            bounds::GPU_HOUR_USD.check_named("--gpu-hour-usd", p)
        }),
    ];
    match checks.into_iter().find_map(Result::err) {
        Some(m) => Err(SweepError::new(m)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCENARIO: &str = r#"
name = "cap"
seed = 3
[horizon]
requests = 400
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[engine]
max_model_len = 8192
[workload]
arrival = { process = "poisson", rate = 10.0 }
prompt_tokens = { dist = "fixed", value = 1000 }
output_tokens = { dist = "fixed", value = 100 }
[slo]
ttft_ms = 300
tpot_ms = 30
"#;

    fn query() -> CapacityQuery {
        CapacityQuery {
            attainment: 0.95,
            replicas: 1,
            demand_rps: Some(60.0),
            headroom: 0.25,
            spare: 1,
            gpu_hour_usd: Some(2.0),
            tolerance: 0.05,
        }
    }

    #[test]
    fn finds_the_boundary_and_the_minimum_fleet() {
        let r = plan_capacity(SCENARIO, "cap.toml", &query(), &|_| {}).unwrap();
        let m = &r.max_load;
        assert!(m.at.meets_slo);
        // Goodput is over the run's span: near the offered rate when it is met.
        assert!(
            m.at.goodput_rps > 0.8 * m.rate_rps * m.at.attainment,
            "{m:?}"
        );
        assert!(m.fails_at_rps > m.rate_rps);
        assert!(m.fails_at_rps - m.rate_rps <= 0.05 * m.fails_at_rps);
        assert!(r
            .probes
            .iter()
            .any(|p| p.search == "rate" && p.rate_rps == m.fails_at_rps && !p.meets_slo));

        let s = r.sizing.as_ref().unwrap();
        assert!(s.at_min.meets_slo && s.at_min.replicas == s.replicas_min);
        // One fewer replica was simulated and misses the SLOs.
        let below = s.below_min.as_ref().expect("more than one replica needed");
        assert_eq!(below.replicas, s.replicas_min - 1);
        assert!(!below.meets_slo);
        assert!(s.replicas_with_headroom >= s.replicas_min);
        assert_eq!(s.sized_for_rps, 75.0);
        assert_eq!(s.replicas_total, s.replicas_with_headroom + 1);
        assert_eq!(s.usd_per_month, Some(s.gpus_total as f64 * 2.0 * 730.0));
        // Deterministic.
        let again = plan_capacity(SCENARIO, "cap.toml", &query(), &|_| {}).unwrap();
        assert_eq!(r, again);
    }

    #[test]
    fn needs_an_slo_and_sane_flags() {
        let no_slo = SCENARIO.replace("[slo]\nttft_ms = 300\ntpot_ms = 30\n", "");
        let e = plan_capacity(&no_slo, "cap.toml", &query(), &|_| {}).unwrap_err();
        assert!(e.0.starts_with("cap.toml: slo: missing"), "{e}");
        let q = CapacityQuery {
            attainment: 1.5,
            ..query()
        };
        assert!(plan_capacity(SCENARIO, "c", &q, &|_| {})
            .unwrap_err()
            .0
            .contains("--attainment"));
        // A TTFT target below one prefill cannot be met at any load.
        let tight = SCENARIO.replace("ttft_ms = 300", "ttft_ms = 1");
        let q = CapacityQuery {
            demand_rps: None,
            ..query()
        };
        let e = plan_capacity(&tight, "cap.toml", &q, &|_| {}).unwrap_err();
        assert!(e.0.contains("even at"), "{e}");
    }
}
