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

use super::SweepError;
use crate::config::keypath;
use crate::metrics::Summary;
use crate::{Scenario, Simulation};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// A fleet of `[[fleet.pools]]` as the capacity searches scale it: the pools
/// as written are one unit, and n units are every pool's `replicas` times n,
/// so the prefill:decode ratio (or the mix of colocated pools) stays as
/// stated. DistServe's placement search sizes disaggregated fleets the same
/// way: it finds the best prefill and decode configuration of one instance
/// pair and replicates it until the rate is met (Zhong et al., OSDI 2024,
/// §4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetUnit {
    /// "1 prefill + 2 decode".
    pub shape: String,
    pub pools: Vec<UnitPool>,
    /// Replicas in one unit.
    pub replicas: u32,
    /// GPUs in one unit.
    pub gpus: u32,
}

/// One pool's share of a [`FleetUnit`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnitPool {
    pub name: String,
    /// `colocated`, `prefill` or `decode`.
    pub role: String,
    pub replicas: u32,
    /// Its hardware's datasheet name.
    pub hardware: String,
    pub gpus: u32,
}

impl FleetUnit {
    /// The unit of a scenario with pools; `None` without.
    pub fn of(s: &Scenario) -> Option<FleetUnit> {
        if s.pools.is_empty() {
            return None;
        }
        // In file order: `fleet.pools.<i>` is the i-th pool as written.
        let pools: Vec<UnitPool> = s
            .file
            .fleet
            .pools
            .iter()
            .map(|cfg| {
                let p = s
                    .pools
                    .iter()
                    .find(|p| p.name == cfg.name)
                    .expect("every pool resolves");
                UnitPool {
                    name: cfg.name.clone(),
                    role: format!("{:?}", cfg.role).to_lowercase(),
                    replicas: cfg.replicas,
                    hardware: p.scenario.hardware.name.clone(),
                    gpus: cfg.replicas * p.scenario.parallel.gpus(),
                }
            })
            .collect();
        let shape = pools
            .iter()
            .map(|p| match p.role.as_str() {
                "colocated" => format!("{} {}", p.replicas, p.name),
                role => format!("{} {role}", p.replicas),
            })
            .collect::<Vec<_>>()
            .join(" + ");
        Some(FleetUnit {
            shape,
            replicas: pools.iter().map(|p| p.replicas).sum(),
            gpus: pools.iter().map(|p| p.gpus).sum(),
            pools,
        })
    }

    /// The pools of `n` units: "3 prefill + 6 decode".
    pub fn pools_at(&self, n: u32) -> String {
        self.pools
            .iter()
            .map(|p| match p.role.as_str() {
                "colocated" => format!("{} {}", p.replicas * n, p.name),
                role => format!("{} {role}", p.replicas * n),
            })
            .collect::<Vec<_>>()
            .join(" + ")
    }

    /// "3 units (3 prefill + 6 decode)".
    pub fn count(&self, n: u32) -> String {
        let s = if n == 1 { "" } else { "s" };
        format!("{n} unit{s} ({})", self.pools_at(n))
    }
}

/// "4 replicas", or with pools "2 units (2 prefill + 4 decode)".
pub fn fleet_count(unit: Option<&FleetUnit>, n: u32) -> String {
    match unit {
        Some(u) => u.count(n),
        None => format!("{n} replica{}", if n == 1 { "" } else { "s" }),
    }
}

/// Most time-series samples a probe takes (its series is not kept).
const PROBE_MAX_SAMPLES: f64 = 10_000.0;

/// Requests per replica a probe simulates at least.
pub const MIN_REQUESTS_PER_REPLICA: u64 = 200;

/// The recommended fleet is checked with a horizon this many times longer.
pub const VERIFY_HORIZON_FACTOR: f64 = 4.0;

/// Runs probes of one scenario with the rate and replica count replaced.
struct Prober<'a> {
    base: toml::Table,
    origin: &'a str,
    knob: Knob,
    /// The pools' unit, when the fleet has pools: a probe's count is units.
    unit: Option<FleetUnit>,
    target: f64,
    on_probe: &'a (dyn Fn(&Probe) + Sync),
}

/// Where a scenario's offered load is set.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Knob {
    /// `workload.arrival.rate` of an arrival process.
    ArrivalRate,
    /// `workload.trace.rate`: a trace replayed scaled to a mean rate.
    TraceRate,
}

impl Knob {
    fn key(self) -> &'static str {
        match self {
            Knob::ArrivalRate => "workload.arrival.rate",
            Knob::TraceRate => "workload.trace.rate",
        }
    }
}

/// The load knob of a scenario and the rate it offers as written. A trace
/// without a `rate` offers its replayed mean rate (the recorded one, sped up
/// by any `time_scale`), read from the file.
fn load_knob(base: &toml::Table, s: &Scenario) -> Result<(Knob, f64), SweepError> {
    let num = |k: &str| match keypath::get(base, k) {
        Some(toml::Value::Float(f)) => Some(*f),
        Some(toml::Value::Integer(i)) => Some(*i as f64),
        _ => None,
    };
    if let Some(r) = num(Knob::ArrivalRate.key()) {
        return Ok((Knob::ArrivalRate, r));
    }
    if let Some(trace) = &s.file.workload.trace {
        if let Some(r) = num(Knob::TraceRate.key()) {
            return Ok((Knob::TraceRate, r));
        }
        let ctx = crate::workload::Context::new(&s.origin, &s.base_dir, s.seed());
        let stats = crate::workload::trace::stats::trace_stats(trace, "workload.trace", &ctx)
            .map_err(|e| SweepError::new(e.to_string()))?;
        // The statistics are of the replay as configured (time_scale applied).
        let r = stats.rate_rps;
        if r.is_finite() && r > 0.0 {
            return Ok((Knob::TraceRate, r));
        }
    }
    Err(SweepError::new(format!(
        "{}: workload: capacity scales the offered load through `workload.arrival.rate` (an arrival process with a rate) or `workload.trace.rate` (a trace replay), and this workload has neither",
        s.origin
    )))
}

impl<'a> Prober<'a> {
    /// The prober of a scenario's text, with the scenario and the rate it
    /// offers as written. Regions are refused: each has its own demand.
    fn of(
        scenario_toml: &str,
        origin: &'a str,
        target: f64,
        on_probe: &'a (dyn Fn(&Probe) + Sync),
    ) -> Result<(Prober<'a>, Scenario, f64), SweepError> {
        let s = Scenario::from_toml_str(scenario_toml, origin)?;
        if !s.file.fleet.regions.is_empty() {
            return Err(SweepError::new(format!(
                "{origin}: fleet.regions: capacity sizes a fleet for one demand, and regions each have their own; size each region's pools on its own scenario"
            )));
        }
        let base: toml::Table = scenario_toml
            .parse()
            .map_err(|e| SweepError::new(format!("{origin}: {e}")))?;
        let (knob, rate) = load_knob(&base, &s)?;
        let p = Prober {
            base,
            origin,
            knob,
            unit: FleetUnit::of(&s),
            target,
            on_probe,
        };
        Ok((p, s, rate))
    }

    /// Extends the horizon to the fleet: enough requests per replica to
    /// reach a steady state (see the module's doc), times `factor`.
    fn size_horizon(
        &self,
        t: &mut toml::Table,
        replicas: u32,
        rate: f64,
        factor: f64,
    ) -> Result<(), SweepError> {
        let num = |t: &toml::Table, k: &str| match keypath::get(t, k) {
            Some(toml::Value::Float(f)) => Some(*f),
            Some(toml::Value::Integer(i)) => Some(*i as f64),
            _ => None,
        };
        let seqs = num(t, "engine.max_num_seqs").unwrap_or(256.0);
        let per_replica = (MIN_REQUESTS_PER_REPLICA as f64).max(2.0 * seqs);
        let need = per_replica * replicas as f64;
        let set = |t: &mut toml::Table, k: &str, v: toml::Value| {
            keypath::set(t, k, v).map_err(|m| SweepError::new(format!("{}: {m}", self.origin)))
        };
        if let Some(n) = num(t, "horizon.requests") {
            let n = (n * factor).max(need * factor).min(i64::MAX as f64 / 2.0);
            set(t, "horizon.requests", (n.ceil() as i64).into())?;
        }
        if let Some(d) = num(t, "horizon.duration_s") {
            let d = (d * factor).max(need * factor / rate);
            set(t, "horizon.duration_s", d.into())?;
        }
        Ok(())
    }

    fn probe(&self, search: &str, replicas: u32, rate: f64) -> Result<Probe, SweepError> {
        self.probe_with(search, replicas, rate, 1.0)
    }

    /// A probe whose horizon is `factor` × the one sized for its fleet.
    fn probe_with(
        &self,
        search: &str,
        replicas: u32,
        rate: f64,
        factor: f64,
    ) -> Result<Probe, SweepError> {
        let mut t = self.base.clone();
        let per_unit = self.unit.as_ref().map_or(1, |u| u.replicas);
        if self.knob == Knob::ArrivalRate {
            self.size_horizon(&mut t, replicas.saturating_mul(per_unit), rate, factor)?;
        }
        if self.knob == Knob::TraceRate {
            // `rate` replaces any `time_scale`: both set the replay speed.
            keypath::remove(&mut t, "workload.trace.time_scale");
        }
        let sized = match &self.unit {
            None => keypath::set(&mut t, "fleet.replicas", i64::from(replicas).into()),
            Some(u) => {
                // The pools' sum would no longer match a stated total.
                keypath::remove(&mut t, "fleet.replicas");
                u.pools.iter().enumerate().try_for_each(|(i, p)| {
                    let n = i64::from(p.replicas) * i64::from(replicas);
                    keypath::set(&mut t, &format!("fleet.pools.{i}.replicas"), n.into())
                })
            }
        };
        sized
            .and_then(|_| keypath::set(&mut t, self.knob.key(), rate.into()))
            .map_err(|m| SweepError::new(format!("{}: {m}", self.origin)))?;
        let at = format!(
            "{} at {} req/s",
            fleet_count(self.unit.as_ref(), replicas),
            crate::figures::rate(rate)
        );
        let mut s = Scenario::from_table(t, self.origin)
            .map_err(|e| SweepError::new(format!("{at}: {e}")))?;
        // A probe at a very low rate spans a long simulated time; sample it
        // more sparsely rather than fill memory with a series nobody reads.
        // Ordinary probes keep the scenario's interval, so a probe's summary is
        // exactly what `simulate` reports for the same settings.
        let h = &s.file.horizon;
        let span = h
            .duration_s
            .unwrap_or(f64::INFINITY)
            .min(h.requests.map_or(f64::INFINITY, |n| n as f64 / rate));
        let m = &mut s.file.metrics;
        if span.is_finite() && span / m.timeseries_interval_s > PROBE_MAX_SAMPLES {
            m.timeseries_interval_s = span / PROBE_MAX_SAMPLES;
        }
        let r = Simulation::new(&s)
            .run(|_| {})
            .map_err(|e| SweepError::new(format!("{}: {at}: {e}", self.origin)))?;
        let mut p = probe_of(search, replicas, rate, &r.summary, self.target);
        p.pool_replicas = self.unit.as_ref().map(|u| u.replicas * replicas);
        (self.on_probe)(&p);
        Ok(p)
    }
}

/// One probe as the searches run it: `scenario_toml` with `replicas` at
/// `rate`, its horizon sized for the fleet and times `factor`, judged
/// against `attainment` (exhaustive checks of the searches use it).
pub fn probe_once(
    scenario_toml: &str,
    origin: &str,
    replicas: u32,
    rate: f64,
    factor: f64,
    attainment: f64,
) -> Result<Probe, SweepError> {
    let quiet = |_: &Probe| {};
    let (p, _, _) = Prober::of(scenario_toml, origin, attainment, &quiet)?;
    p.probe_with("exhaustive", replicas, rate, factor)
}

/// A fleet count a search found: the count, its probe, and the probe of
/// the count one below (none when the count is 1).
pub type Found = (u32, Probe, Option<Probe>);

/// The short-horizon stage of sizing a fleet for `rate` (a plan's first
/// stage): the highest load one replica (or unit) sustains, bracketed and
/// bisected to `tolerance`, then the fewest replicas meeting the SLOs at
/// `rate`, galloping from the estimate it gives. Returns the find and the
/// number of probes run. The long re-check is [`verify_long`].
pub fn size_short(
    scenario_toml: &str,
    origin: &str,
    attainment: f64,
    tolerance: f64,
    rate: f64,
    on_probe: &(dyn Fn(&Probe) + Sync),
) -> Result<(Found, usize), SweepError> {
    let (p, s, base_rate) = Prober::of(scenario_toml, origin, attainment, on_probe)?;
    let written = if p.unit.is_some() {
        1
    } else {
        s.file.fleet.replicas.max(1)
    };
    let mut probes = Vec::new();
    let max_load = max_rate(&p, 1, base_rate / written as f64, tolerance, &mut probes)?;
    let guess = guess_replicas(origin, rate, max_load.per_replica_rps)?;
    let (n, at, below, more) = min_replicas(&p, "demand", rate, guess)?;
    Ok(((n, at, below), probes.len() + more.len()))
}

/// The long-horizon re-check of a short find (see [`verify`]): the
/// verified find and the number of probes it ran.
pub fn verify_long(
    scenario_toml: &str,
    origin: &str,
    attainment: f64,
    rate: f64,
    found: Found,
    on_probe: &(dyn Fn(&Probe) + Sync),
) -> Result<(Found, usize), SweepError> {
    let (p, _, _) = Prober::of(scenario_toml, origin, attainment, on_probe)?;
    let mut probes = Vec::new();
    let f = verify(&p, "demand", rate, found, &mut probes)?;
    Ok((f, probes.len()))
}

/// Whether the long re-check may find a *smaller* fleet than a short
/// find: the short probe one below met the attainment target and missed
/// only the steady-state verdict. Otherwise the re-check only keeps or
/// grows the count, so the short find is a lower bound.
pub fn is_shaky(found: &Found, attainment: f64) -> bool {
    found
        .2
        .as_ref()
        .is_some_and(|b| !b.meets_slo && b.attainment >= attainment)
}

/// The replica count a search for `rate` starts from, at `per_replica`
/// req/s each; an error when it passes the largest fleet.
fn guess_replicas(origin: &str, rate: f64, per_replica: f64) -> Result<u32, SweepError> {
    let need = rate / per_replica;
    if need.is_nan() || need > MAX_REPLICAS as f64 {
        return Err(SweepError::new(format!(
            "{origin}: {} req/s needs about {need:.3e} replicas at the {} req/s one sustains, beyond the {MAX_REPLICAS} a fleet may have",
            crate::figures::rate(rate),
            crate::figures::rate(per_replica)
        )));
    }
    let guess = need.ceil();
    Ok(if guess.is_finite() {
        guess.clamp(1.0, MAX_REPLICAS as f64) as u32
    } else {
        1
    })
}

fn probe_of(search: &str, replicas: u32, rate: f64, s: &Summary, target: f64) -> Probe {
    let slo = s.slo.clone().unwrap_or_default();
    Probe {
        search: search.to_string(),
        replicas,
        pool_replicas: None,
        rate_rps: rate,
        attainment: slo.attainment,
        ttft_p99_ms: s.latency.ttft_ms.p99,
        tpot_p99_ms: s.latency.tpot_ms.p99,
        goodput_rps: slo.goodput_rps,
        completed: s.counts.completed,
        stable: s.load.is_stable(),
        requests: s.counts.arrived,
        percentiles_met: slo.percentiles_met,
        // A steady run whose good share reaches the target and whose
        // percentile targets (if any) hold.
        meets_slo: s.counts.completed > 0
            && s.load.is_stable()
            && slo.attainment >= target
            && slo.percentiles_hold(),
    }
}

/// Runs the capacity searches on a scenario (text and origin for messages).
/// `on_probe` sees every probe as it finishes (possibly from two threads).
pub fn plan_capacity(
    scenario_toml: &str,
    origin: &str,
    q: &CapacityQuery,
    on_probe: &(dyn Fn(&Probe) + Sync),
) -> Result<CapacityReport, SweepError> {
    let (prober, base_scenario, base_rate) =
        Prober::of(scenario_toml, origin, q.attainment, on_probe)?;
    let Some(slo) = base_scenario.file.slo.clone() else {
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
        base_scenario.file.fleet.replicas.max(1)
    };
    let start = base_rate * q.replicas as f64 / written as f64;
    let max_load = max_rate(&prober, q.replicas, start, q.tolerance, &mut probes)?;

    let sizing = match q.demand_rps {
        None => None,
        Some(demand) => {
            let sized_for = demand * (1.0 + q.headroom);
            guess_replicas(origin, sized_for, max_load.per_replica_rps)?;
            let guess = guess_replicas(origin, demand, max_load.per_replica_rps)?;
            let (at_demand, at_headroom) = if q.headroom > 0.0 {
                let guess_h =
                    ((sized_for / max_load.per_replica_rps).ceil() as u32).clamp(1, MAX_REPLICAS);
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

/// GPUs of one replica (tensor × pipeline × expert parallelism), or with
/// pools of one [`FleetUnit`]: what each count of a capacity search costs.
pub fn gpus_per_unit(s: &Scenario) -> u32 {
    match FleetUnit::of(s) {
        Some(u) => u.gpus,
        None => s.gpus() / s.file.fleet.replicas.max(1),
    }
}

/// The largest fleet a search may try (the scenario's own limit).
const MAX_REPLICAS: u32 = 100_000;

pub(super) fn check_query(q: &CapacityQuery) -> Result<(), SweepError> {
    let bad = |m: String| Err(SweepError::new(m));
    if !(q.attainment > 0.0 && q.attainment <= 1.0) {
        return bad(format!(
            "--attainment must be in (0, 1], got {}",
            q.attainment
        ));
    }
    if q.replicas == 0 || q.replicas > MAX_REPLICAS {
        return bad(format!(
            "--replicas must be between 1 and {MAX_REPLICAS}, got {}",
            q.replicas
        ));
    }
    if let Some(d) = q.demand_rps {
        if !(d.is_finite() && d > 0.0) {
            return bad(format!(
                "--demand must be a positive rate (requests/s), got {d}"
            ));
        }
    }
    if !(q.headroom.is_finite() && q.headroom >= 0.0) {
        return bad(format!(
            "--headroom must be a percentage ≥ 0, got {}",
            q.headroom * 100.0
        ));
    }
    if let Some(p) = q.gpu_hour_usd {
        if !(p.is_finite() && p > 0.0) {
            return bad(format!("--gpu-hour-usd must be a positive price, got {p}"));
        }
    }
    if !(q.tolerance > 0.0 && q.tolerance < 1.0) {
        return bad(format!(
            "--tolerance must be in (0, 1), got {}",
            q.tolerance
        ));
    }
    Ok(())
}

/// Bracket the boundary by doubling or halving, then bisect.
fn max_rate(
    p: &Prober,
    replicas: u32,
    start: f64,
    tol: f64,
    probes: &mut Vec<Probe>,
) -> Result<MaxLoad, SweepError> {
    // Halving 20 times spans a factor of a million below the start.
    const STEPS: u32 = 20;
    let mut run = |rate: f64| -> Result<Probe, SweepError> {
        let r = p.probe("rate", replicas, rate)?;
        probes.push(r.clone());
        Ok(r)
    };
    let first = run(start)?;
    let (mut lo, mut hi) = if first.meets_slo {
        let mut lo = first;
        loop {
            if lo.rate_rps > 1e9 {
                return Err(SweepError::new(format!(
                    "{}: still meets the SLOs at {} req/s: the horizon may be too short to load the fleet",
                    p.origin, crate::figures::rate(lo.rate_rps)
                )));
            }
            let next = run(lo.rate_rps * 2.0)?;
            if !next.meets_slo {
                break (lo, next);
            }
            lo = next;
        }
    } else {
        let mut hi = first;
        let mut i = 0;
        loop {
            i += 1;
            if i > STEPS {
                return Err(SweepError::new(format!(
                    "{}: {} miss the SLOs even at {} req/s ({:.1} % attainment, TTFT p99 {:.1} ms, TPOT p99 {:.2} ms): the targets are below what a lone request takes",
                    p.origin, fleet_count(p.unit.as_ref(), replicas), crate::figures::rate(hi.rate_rps), hi.attainment * 100.0, hi.ttft_p99_ms, hi.tpot_p99_ms
                )));
            }
            let next = run(hi.rate_rps / 2.0)?;
            if next.meets_slo {
                break (next, hi);
            }
            hi = next;
        }
    };
    while hi.rate_rps - lo.rate_rps > tol * hi.rate_rps {
        let mid = run((lo.rate_rps + hi.rate_rps) / 2.0)?;
        if mid.meets_slo {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(MaxLoad {
        replicas,
        rate_rps: lo.rate_rps,
        per_replica_rps: lo.rate_rps / replicas as f64,
        fails_at_rps: hi.rate_rps,
        at: lo,
    })
}

/// Re-simulates the fleet a search found with a [`VERIFY_HORIZON_FACTOR`]×
/// longer horizon, adding replicas (1, 2, 4, … then bisecting back) until
/// that long run meets the SLOs — or, when it does and the short probe one
/// below missed only the steady-state verdict, removing them the same way
/// while the long run still meets them. Returns the verified size, its
/// probe, and the probe below it.
fn verify(
    p: &Prober,
    search: &str,
    rate: f64,
    found: (u32, Probe, Option<Probe>),
    probes: &mut Vec<Probe>,
) -> Result<(u32, Probe, Option<Probe>), SweepError> {
    let label = format!("verify {search}");
    let mut run = |n: u32| -> Result<Probe, SweepError> {
        let r = p.probe_with(&label, n, rate, VERIFY_HORIZON_FACTOR)?;
        probes.push(r.clone());
        Ok(r)
    };
    let (n, _, below) = found;
    let first = run(n)?;
    if first.meets_slo {
        // The short probe one below met the target but not the steady-state
        // verdict (a short run's backlog still filling with long requests
        // reads as growing): over the long horizon a smaller fleet may meet
        // the SLOs too. Gallop down with long probes, then bisect, so the
        // answer never sits above a smaller fleet the long run passes.
        let shaky = below
            .as_ref()
            .is_some_and(|b| !b.meets_slo && b.attainment >= p.target);
        if !shaky {
            return Ok((n, first, below));
        }
        let (mut hi, mut hi_probe) = (n, first);
        let mut step = 1;
        let (mut lo, mut lo_probe) = loop {
            let cand = hi.saturating_sub(step);
            if cand == 0 {
                break (0, None);
            }
            let r = run(cand)?;
            if !r.meets_slo {
                break (cand, Some(r));
            }
            (hi, hi_probe) = (cand, r);
            step *= 2;
        };
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            let r = run(mid)?;
            if r.meets_slo {
                (hi, hi_probe) = (mid, r);
            } else {
                (lo, lo_probe) = (mid, Some(r));
            }
        }
        return Ok((hi, hi_probe, lo_probe));
    }
    // The short probes passed a fleet that a long run fails: gallop up.
    let (mut lo, mut lo_probe) = (n, first);
    let mut step = 1;
    let (mut hi, mut hi_probe) = loop {
        let cand = lo.saturating_add(step);
        if cand > MAX_REPLICAS {
            return Err(SweepError::new(format!(
                "{}: {MAX_REPLICAS} replicas do not meet the SLOs at {rate} req/s over a long horizon",
                p.origin
            )));
        }
        let r = run(cand)?;
        if r.meets_slo {
            break (cand, r);
        }
        (lo, lo_probe) = (cand, r);
        step *= 2;
    };
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let r = run(mid)?;
        if r.meets_slo {
            (hi, hi_probe) = (mid, r);
        } else {
            (lo, lo_probe) = (mid, r);
        }
    }
    Ok((hi, hi_probe, Some(lo_probe)))
}

type ReplicaSearch = Result<(u32, Probe, Option<Probe>, Vec<Probe>), SweepError>;

/// Fewest replicas meeting the SLOs at `rate`: gallop from `guess` toward
/// the boundary (steps 1, 2, 4, …), then bisect until `n` meets the SLOs and
/// `n − 1` was simulated and does not (or `n` = 1).
fn min_replicas(p: &Prober, search: &str, rate: f64, guess: u32) -> ReplicaSearch {
    let mut seen: BTreeMap<u32, Probe> = BTreeMap::new();
    let mut order = Vec::new();
    let mut ok = |n: u32| -> Result<bool, SweepError> {
        if let Some(r) = seen.get(&n) {
            return Ok(r.meets_slo);
        }
        let r = p.probe(search, n, rate)?;
        let m = r.meets_slo;
        order.push(r.clone());
        seen.insert(n, r);
        Ok(m)
    };
    // Invariant once bracketed: `hi` meets the SLOs, `lo` does not (0 = none).
    let (mut lo, mut hi);
    if ok(guess)? {
        hi = guess;
        let mut step = 1;
        loop {
            let cand = hi.saturating_sub(step);
            if cand == 0 {
                lo = 0;
                break;
            }
            if ok(cand)? {
                hi = cand;
                step *= 2;
            } else {
                lo = cand;
                break;
            }
        }
    } else {
        lo = guess;
        let mut step = 1;
        loop {
            let cand = lo.saturating_add(step);
            if cand > MAX_REPLICAS {
                return Err(SweepError::new(format!(
                    "{}: {MAX_REPLICAS} replicas do not meet the SLOs at {rate} req/s",
                    p.origin
                )));
            }
            if ok(cand)? {
                hi = cand;
                break;
            }
            lo = cand;
            step *= 2;
        }
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let at = seen[&hi].clone();
    let below = (lo > 0).then(|| seen[&lo].clone());
    Ok((hi, at, below, order))
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
