//! `servesim plan`: the cheapest deployment that meets the SLOs at a demand,
//! over a declared space of options.
//!
//! The space is a grid file (`grid`): its axes (paired with `zip` where a
//! setting only makes sense with another, such as hardware with tensor
//! parallelism) give the options, and `[objective] gpu_hour_usd` their
//! prices (one, or one per hardware option; none is assumed). For every
//! option the replica count is not an axis but found by the steady-state
//! capacity search (`capacity`). The search ([`search`]) runs in two stages
//! over horizons, as successive halving does (Jamieson and Talwalkar, 2016;
//! the budget here is simulated time): every option gets the short-horizon
//! search, and only the options that can still win get the run four times
//! longer that re-checks their count. An option is *pruned* with its reason
//! when its scenario is invalid (the model does not fit, a parallel layout
//! does not divide) or when one replica cannot meet the SLOs at any load.
//! Options run in parallel, each deterministic, and results are gathered in
//! space order, so the plan is the same at any thread count. A plan resumes
//! from its checkpointed options and splits over machines by shard
//! ([`merge`] puts the shards back together).
//!
//! A disaggregated option (`[[fleet.pools]]` with a prefill and a decode
//! pool) is sized in units of its pools as the option states them
//! ([`FleetUnit`]): the space's axes give the prefill:decode split
//! (`fleet.pools.0.replicas` zipped with `fleet.pools.1.replicas`, or whole
//! pool sets on a `fleet.pools` axis, a colocated set among them) and the
//! link (`fleet.kv_transfer.*`), and the search finds how many units meet
//! the demand, as DistServe replicates its best instance pair.
//!
//! The exhaustive check ([`exhaustive`]) runs every option at every replica
//! count up to a bound with the same probes and judgement, for comparison:
//! the same answer from far fewer simulations is the point of the search.

pub mod bound;
pub mod frontier;
pub mod merge;
mod read_back;
pub mod search;

pub use merge::merge;
pub use search::{plan_deployment, StagedOption};

use crate::config::keypath;
use crate::sweep::capacity::{self, FleetUnit, Probe, HOURS_PER_MONTH};
use crate::sweep::grid::{AxisValues, Grid, SampleKind};
use crate::sweep::objective::GpuHourPrice;
use crate::sweep::{checked, sample};
use crate::sweep::{Shard, SweepError};
use crate::Scenario;
use serde::{Deserialize, Serialize};

/// The light load of the first probe of an option: the demand over this.
const LIGHT_LOAD_DIVISOR: f64 = 1000.0;

/// How the reason of an option the bounds ruled out begins: its least
/// cost is above the cheapest option's, so it was not simulated.
pub const CANNOT_WIN: &str = "cannot beat the cheapest";

/// The highest price of electricity a plan takes, US dollars per kWh.
pub const MAX_ENERGY_USD_PER_KWH: f64 = 100.0;

/// Format tag of `plan.json`.
pub const FORMAT: &str = "servesim-plan/2";

/// What to plan for.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanQuery {
    /// Peak demand, requests/s.
    pub demand_rps: f64,
    /// Extra load to absorb above the demand, as a fraction.
    pub headroom: f64,
    /// Share of requests that must meet the SLOs.
    pub attainment: f64,
    /// Relative precision of the one-replica rate search.
    pub tolerance: f64,
    /// A stated price of electricity, US dollars per kWh: an option's
    /// monthly cost is then its GPUs and their energy at the demand. None
    /// is assumed.
    pub energy_usd_per_kwh: Option<f64>,
}

impl PlanQuery {
    /// The load the fleet is sized for: the demand with its headroom.
    pub fn sized_for_rps(&self) -> f64 {
        self.demand_rps * (1.0 + self.headroom)
    }

    /// Refuses a demand, headroom, attainment or tolerance the capacity
    /// search would refuse (a tolerance of 0 would bisect forever).
    pub fn check(&self) -> Result<(), SweepError> {
        if let Some(p) = self.energy_usd_per_kwh {
            if !(p.is_finite() && p > 0.0 && p <= MAX_ENERGY_USD_PER_KWH) {
                return Err(SweepError::new(format!(
                    "--energy-price-kwh must be in (0, {MAX_ENERGY_USD_PER_KWH}] US dollars per kWh, got {p}"
                )));
            }
        }
        capacity::check_query(&capacity::CapacityQuery {
            attainment: self.attainment,
            replicas: 1,
            demand_rps: Some(self.demand_rps),
            headroom: self.headroom,
            spare: 0,
            gpu_hour_usd: None,
            tolerance: self.tolerance,
        })
    }
}

/// One option of the space and how it fared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptionResult {
    /// Position in the space (the grid's point index).
    pub index: usize,
    /// "hardware.preset = "h200", fleet.tensor_parallel = 2".
    pub settings: String,
    /// The datasheet name of the option's hardware (when it resolved).
    pub hardware: Option<String>,
    /// Simulations this option took.
    pub simulations: usize,
    /// The sized fleet; `None` when pruned.
    pub fleet: Option<SizedFleet>,
    /// Why the option was pruned.
    pub pruned: Option<String>,
    /// The fleet passed the long re-check. `false` for a sized option: its
    /// count is the short search's, a lower bound on its cost that the
    /// cheapest re-checked option already beats, so it was not re-checked.
    #[serde(default)]
    pub rechecked: bool,
}

/// A fleet sized for the demand.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SizedFleet {
    /// Replicas in all (with pools, over every pool).
    pub replicas: u32,
    /// GPUs of one replica, or with pools of one unit.
    pub gpus_per_replica: u32,
    /// With pools: the unit the search scaled ("1 prefill + 2 decode")
    /// and how many of it the fleet is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<u32>,
    pub gpus: u32,
    /// Per GPU-hour; with pools on different hardware, the mean over the
    /// unit's GPUs of each pool's price.
    pub gpu_hour_usd: f64,
    /// gpus × price × 730 h, plus `energy_usd_per_month` with an energy
    /// price.
    pub usd_per_month: f64,
    /// With an energy price: the fleet's energy a month at the demand, kWh
    /// (its mean power over the run that sized it, for 730 h), and its cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_kwh_per_month: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_usd_per_month: Option<f64>,
    /// SLO attainment of the long re-check at the demand (with headroom).
    pub attainment: f64,
    /// Good requests per second per GPU in that run.
    pub goodput_rps_per_gpu: f64,
    /// Measured for the cheapest option: the highest load its sized fleet
    /// sustains within the SLOs, over the demand, minus one (0.25: 25 % more
    /// load than the demand is still served within the SLOs).
    pub headroom: Option<f64>,
    /// That highest load, requests/s (the cheapest option only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_load_rps: Option<f64>,
}

/// What a plan was run from, kept in `plan.json` so that shards can be
/// checked to belong together and merged without the files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanInputs {
    pub scenario_toml: String,
    pub scenario_origin: String,
    pub space_toml: String,
    pub space_origin: String,
}

impl PlanInputs {
    /// The inputs of a plan of `scenario_toml` (named `origin`) over `grid`.
    pub(crate) fn of(scenario_toml: &str, origin: &str, grid: &Grid) -> PlanInputs {
        PlanInputs {
            scenario_toml: scenario_toml.to_string(),
            scenario_origin: origin.to_string(),
            space_toml: grid.text.clone(),
            space_origin: grid.origin.clone(),
        }
    }
}

/// The result of `servesim plan` (`plan.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeployPlan {
    pub format: String,
    pub scenario: String,
    pub demand_rps: f64,
    pub headroom: f64,
    pub attainment_target: f64,
    pub tolerance: f64,
    /// The shard this plan holds (options whose index is I modulo N);
    /// absent for a whole plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// Every option: sized ones cheapest first, then the pruned ones in
    /// space order.
    pub options: Vec<OptionResult>,
    /// Index (into the space) of the cheapest sized option.
    pub best: Option<usize>,
    /// Every simulation the plan ran.
    pub simulations: usize,
    /// Of them, those measuring the cheapest option's headroom (the rest
    /// sized and pruned the options).
    #[serde(default)]
    pub headroom_simulations: usize,
    /// Of `simulations`, those another search of the plan had already run
    /// with the same scenario, fleet and load (reused, not simulated again).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub simulations_reused: usize,
    /// The stated price of electricity its costs include, $ per kWh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_usd_per_kwh: Option<f64>,
    pub inputs: PlanInputs,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl DeployPlan {
    /// The query the plan answered.
    pub fn query(&self) -> PlanQuery {
        PlanQuery {
            demand_rps: self.demand_rps,
            headroom: self.headroom,
            attainment: self.attainment_target,
            tolerance: self.tolerance,
            energy_usd_per_kwh: self.energy_usd_per_kwh,
        }
    }
}

/// The most options one plan may have: every option costs a search of
/// about [`SIMULATIONS_PER_OPTION`] simulations, so past this a plan would
/// run for days on one machine.
pub const MAX_OPTIONS: usize = 20_000;

/// Simulations an option's search takes, about: the light probe, the
/// bisection of one replica's highest load, the sizing and the long
/// re-check (11 to 15 per sized option of `scenarios/spaces/quickstart-hardware.toml`
/// at 30 req/s, as `servesim plan` logs them).
pub const SIMULATIONS_PER_OPTION: usize = 15;

/// A plan's expected size, told before it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanSize {
    /// Options this run (this shard) searches.
    pub options: usize,
    /// Simulations it is expected to run.
    pub simulations: usize,
}

/// The size of a plan over `grid` on the options `shard` holds; with
/// `exhaustive`, of running every count up to it (two runs per count at
/// most).
pub fn estimate(grid: &Grid, shard: Shard, exhaustive: Option<u32>) -> PlanSize {
    let total = grid.dims().iter().fold(1usize, |acc, d| {
        let n = match &grid.axes[d[0]].values {
            AxisValues::List(v) => v.len(),
            AxisValues::Continuous { .. } => 1,
        };
        acc.saturating_mul(n)
    });
    let options = shard.share_of(total);
    let per = exhaustive.map_or(SIMULATIONS_PER_OPTION, |n| 2 * n as usize);
    PlanSize {
        options,
        simulations: options.saturating_mul(per),
    }
}

/// Checks a space on its scenario before anything runs (the axes, every
/// option's keys and values, the prices) and returns its option count.
pub fn check_space(scenario_toml: &str, origin: &str, grid: &Grid) -> Result<usize, SweepError> {
    let base: toml::Table = scenario_toml
        .parse()
        .map_err(|e| SweepError::new(format!("{origin}: {e}")))?;
    price_of(grid)?;
    Ok(options(&base, grid)?.len())
}

/// The options of `grid` on `base`: each point's settings, applied table
/// and description. The space is every combination (cartesian) and has no
/// `fleet.replicas` axis (the search finds the count).
fn options(
    base: &toml::Table,
    grid: &Grid,
) -> Result<Vec<(usize, String, toml::Table)>, SweepError> {
    if grid.sample != SampleKind::Cartesian {
        return Err(SweepError::new(format!(
            "{}: sweep.sample: a plan searches every option of its space; remove `sample` (cartesian is the default)",
            grid.origin
        )));
    }
    if let Some(a) = grid.axes.iter().find(|a| a.path == "fleet.replicas") {
        return Err(SweepError::new(format!(
            "{}: axes.{}: a plan finds the replica count for the demand itself; remove this axis",
            grid.origin, a.key
        )));
    }
    // `--demand` sets the load of every probe, so an axis of rates would
    // give options that differ only in a value the search replaces.
    if let Some(a) = grid.axes.iter().find(|a| {
        a.path == "workload.arrival.rate"
            || a.path == "workload.trace.rate"
            || a.path == "workload.trace.time_scale"
    }) {
        return Err(SweepError::new(format!(
            "{}: axes.{}: a plan offers each option the load of --demand (with --headroom), which replaces this key; remove this axis and give the load as --demand",
            grid.origin, a.key
        )));
    }
    check_objective(grid)?;
    let size = estimate(grid, Shard::ALL, None);
    if size.options > MAX_OPTIONS {
        return Err(SweepError::new(format!(
            "{}: axes: the space has {} options, more than the {MAX_OPTIONS} a plan searches (about {SIMULATIONS_PER_OPTION} simulations each); narrow its axes, or split it into several spaces",
            grid.origin, size.options
        )));
    }
    let mut out = Vec::new();
    for p in sample::points(grid, 0) {
        let mut t = base.clone();
        let mut words = Vec::new();
        for (a, v) in grid.axes.iter().zip(&p.values) {
            keypath::set(&mut t, &a.path, v.clone())
                .map_err(|m| SweepError::new(format!("{}: axes.{}: {m}", grid.origin, a.key)))?;
            words.push(format!("{} = {}", a.key, describe_value(&a.path, v)));
        }
        checked::drop_inherited_link(&mut t, grid.axes.iter().map(|a| a.path.as_str()));
        let settings = words.join(", ");
        // Keys, types, enum names and value ranges are the space's to get
        // right: refused before anything runs, as a sweep's grid is. Only
        // what resolution finds (a model that does not fit, a layout that
        // does not divide) prunes an option.
        Scenario::check_values(t.clone(), &grid.origin).map_err(|e| {
            SweepError::new(format!(
                "{}: option {} ({settings}): {}{}{}",
                grid.origin,
                p.index,
                e.key,
                if e.key.is_empty() { "" } else { ": " },
                e.message
            ))
        })?;
        out.push((p.index, settings, t));
    }
    Ok(out)
}

/// A plan ranks by its own query, so of `[objective]` only the prices
/// apply: the other keys are refused rather than ignored.
fn check_objective(grid: &Grid) -> Result<(), SweepError> {
    let o = &grid.objective;
    let refused = [
        (
            "attainment",
            o.attainment.is_some(),
            "give it as --attainment",
        ),
        (
            "cost",
            o.cost.is_some(),
            "a plan ranks by dollars per month",
        ),
        (
            "latency",
            o.latency.is_some(),
            "a plan judges options by the scenario's [slo] targets",
        ),
    ];
    match refused.iter().find(|(_, set, _)| *set) {
        Some((key, _, why)) => Err(SweepError::new(format!(
            "{}: objective.{key}: not used by a plan ({why}); remove it (a plan's [objective] takes only gpu_hour_usd)",
            grid.origin
        ))),
        None => Ok(()),
    }
}

/// How an option's value reads in the ranked table: a set of pools as its
/// shape ("1 prefill + 2 decode", "1 colocated"), anything else as TOML.
fn describe_value(path: &str, v: &toml::Value) -> String {
    let shape = (path == "fleet.pools")
        .then(|| v.as_array())
        .flatten()
        .and_then(|pools| {
            pools
                .iter()
                .map(|p| {
                    let n = p.get("replicas")?.as_integer()?;
                    let role = p
                        .get("role")
                        .and_then(|r| r.as_str())
                        .unwrap_or("colocated");
                    Some(format!("{n} {role}"))
                })
                .collect::<Option<Vec<_>>>()
        });
    match shape {
        Some(parts) => parts.join(" + "),
        None => v.to_string(),
    }
}

fn price_of(grid: &Grid) -> Result<&GpuHourPrice, SweepError> {
    grid.objective.gpu_hour_usd.as_ref().ok_or_else(|| {
        SweepError::new(format!(
            "{}: objective.gpu_hour_usd: missing: a plan ranks options by cost, so it needs a price per GPU-hour (one, or one per hardware option, e.g. {{ \"h100-sxm\" = 2.49, \"h200\" = 3.49 }}); none is assumed",
            grid.origin
        ))
    })
}

/// Why an option's energy cannot be priced under `q`, if so: a chip
/// without a board power (TDP).
fn unpriced_energy(s: &Scenario, q: &PlanQuery) -> Option<String> {
    q.energy_usd_per_kwh?;
    idle_w_per_count(s).is_none().then(|| {
        "its hardware has no board power (tdp_w), so its energy cannot be priced at --energy-price-kwh; give [hardware.spec] tdp_w".to_string()
    })
}

/// A validated option and its price per GPU-hour, or why it is pruned.
/// With pools the price is the mean over one unit's GPUs of each pool's
/// hardware price, so GPUs × price is the unit's cost.
fn resolve(
    t: &toml::Table,
    origin: &str,
    price: &GpuHourPrice,
) -> Result<(Scenario, f64), (Option<String>, String)> {
    let s = Scenario::from_table(t.clone(), origin).map_err(|e| (None, e.to_string()))?;
    let priced = |hw: &str| {
        price.of(hw).ok_or_else(|| {
            (
                Some(s.hardware.name.clone()),
                format!("no price for hardware {hw} in objective.gpu_hour_usd"),
            )
        })
    };
    let p = match FleetUnit::of(&s) {
        None => priced(&s.hardware.name)?,
        Some(u) => {
            let mut usd = 0.0;
            for pool in &u.pools {
                usd += priced(&pool.hardware)? * pool.gpus as f64;
            }
            usd / u.gpus.max(1) as f64
        }
    };
    Ok((s, p))
}

/// The sized fleet of `n` counts (replicas, or units with pools); with
/// `energy` (kWh a month, $ per kWh) its energy is part of its cost.
fn sized(
    s: &Scenario,
    n: u32,
    price: f64,
    attainment: f64,
    goodput_rps: f64,
    energy: Option<(f64, f64)>,
) -> SizedFleet {
    let unit = FleetUnit::of(s);
    let per = unit
        .as_ref()
        .map_or_else(|| capacity::gpus_per_unit(s), |u| u.gpus);
    let gpus = n * per;
    SizedFleet {
        replicas: n * unit.as_ref().map_or(1, |u| u.replicas),
        gpus_per_replica: per,
        unit: unit.as_ref().map(|u| u.shape.clone()),
        units: unit.as_ref().map(|_| n),
        gpus,
        gpu_hour_usd: price,
        usd_per_month: gpus as f64 * price * HOURS_PER_MONTH
            + energy.map_or(0.0, |(kwh, usd)| kwh * usd),
        energy_kwh_per_month: energy.map(|(kwh, _)| kwh),
        energy_usd_per_month: energy.map(|(kwh, usd)| kwh * usd),
        attainment,
        goodput_rps_per_gpu: goodput_rps / gpus.max(1) as f64,
        headroom: None,
        max_load_rps: None,
    }
}

/// A probe's fleet's energy a month, kWh: its mean power over the run
/// for 730 hours (none when its hardware has no board power).
fn monthly_kwh(p: &Probe) -> Option<f64> {
    let w = p
        .figures
        .as_ref()?
        .pointer("/energy/fleet_avg_power_w")?
        .as_f64()?;
    Some(w * HOURS_PER_MONTH / 1000.0)
}

/// The energy a fleet sized by the probe `at` is charged under `q`.
fn energy_of(at: &Probe, q: &PlanQuery) -> Option<(f64, f64)> {
    Some((monthly_kwh(at)?, q.energy_usd_per_kwh?))
}

/// The least power one count (a replica, or a unit of pools) draws, W:
/// every GPU at its idle figure, as the power model of `energy` has it
/// draw at least that whenever it is powered. Zero for fleets whose
/// replicas come and go (a life cycle or an autoscaler), which may be
/// powered less than the whole month; `None` when a chip has no board
/// power.
fn idle_w_per_count(s: &Scenario) -> Option<f64> {
    let idle = |r: &Scenario| r.hardware.power_w().map(|(_, idle)| idle);
    // Whether replicas come and go, as the scenario file states it.
    let moves = |s: &Scenario| s.lifecycle().is_some() || s.autoscale().is_some();
    let w = if s.pools.is_empty() {
        capacity::gpus_per_unit(s) as f64 * idle(s)?
    } else {
        let mut w = 0.0;
        for p in &s.pools {
            let idle = p.hardware().power_w().map(|(_, idle)| idle)?;
            w += p.replicas as f64 * p.parallel().gpus() as f64 * idle;
        }
        w
    };
    let moving = moves(s)
        || s.pools
            .iter()
            .any(|p| p.lifecycle().is_some() || p.autoscale().is_some());
    Some(if moving { 0.0 } else { w })
}

/// The least `n` counts of the option `s` can cost a month: their GPUs at
/// `price`, and with an energy price every GPU's idle power at least. A
/// fleet meeting the SLOs with `n` or more counts costs no less, whatever
/// its load keeps it busy, so the bounds stay bounds with energy in the
/// cost.
fn least_usd(s: &Scenario, n: u32, price: f64, q: &PlanQuery) -> f64 {
    let gpus = sized(s, n, price, 0.0, 0.0, None).usd_per_month;
    let energy = q.energy_usd_per_kwh.map_or(0.0, |usd| {
        idle_w_per_count(s).unwrap_or(0.0) * n as f64 * HOURS_PER_MONTH / 1000.0 * usd
    });
    gpus + energy
}

/// Ranks sized options cheapest first (then fewer GPUs, then space order),
/// pruned ones after in space order.
pub(super) fn rank(options: &mut [OptionResult]) {
    let key = |o: &OptionResult| {
        o.fleet
            .as_ref()
            .map(|f| (0, f.usd_per_month, f.gpus))
            .unwrap_or((1, 0.0, 0))
    };
    options.sort_by(|a, b| {
        let (pa, ca, ga) = key(a);
        let (pb, cb, gb) = key(b);
        pa.cmp(&pb)
            .then(ca.total_cmp(&cb))
            .then(ga.cmp(&gb))
            .then(a.index.cmp(&b.index))
    });
}

/// The plan of the ranked `options`.
fn finish(
    scenario: &str,
    q: &PlanQuery,
    inputs: PlanInputs,
    mut options: Vec<OptionResult>,
) -> DeployPlan {
    rank(&mut options);
    DeployPlan {
        format: FORMAT.to_string(),
        scenario: scenario.to_string(),
        demand_rps: q.demand_rps,
        headroom: q.headroom,
        attainment_target: q.attainment,
        tolerance: q.tolerance,
        shard: None,
        best: options
            .first()
            .filter(|o| o.fleet.is_some())
            .map(|o| o.index),
        simulations: options.iter().map(|o| o.simulations).sum(),
        headroom_simulations: 0,
        simulations_reused: 0,
        energy_usd_per_kwh: q.energy_usd_per_kwh,
        inputs,
        options,
    }
}

/// Every option at every replica count from 1 to `max_replicas`, with the
/// probes and judgement of the capacity search: an option's fleet is the
/// fewest replicas whose probe meets the SLOs at the demand (with headroom)
/// and whose four-times-longer re-check does too. For comparison with
/// [`plan_deployment`]; its `simulations` counts every run. Options run in
/// parallel and are gathered in space order.
pub fn exhaustive(
    scenario_toml: &str,
    origin: &str,
    grid: &Grid,
    q: &PlanQuery,
    max_replicas: u32,
) -> Result<DeployPlan, SweepError> {
    use rayon::prelude::*;
    q.check()?;
    let base_scenario = Scenario::from_toml_str(scenario_toml, origin)?;
    let base: toml::Table = scenario_toml
        .parse()
        .map_err(|e| SweepError::new(format!("{origin}: {e}")))?;
    let price = price_of(grid)?;
    let rate = q.sized_for_rps();
    let one = |(index, settings, t): (usize, String, toml::Table)| {
        let (s, p) = match resolve(&t, origin, price) {
            Ok(x) => x,
            Err((hardware, why)) => {
                return Ok(OptionResult::pruned(index, settings, hardware, 0, why))
            }
        };
        if let Some(why) = unpriced_energy(&s, q) {
            let hw = Some(s.hardware.name.clone());
            return Ok(OptionResult::pruned(index, settings, hw, 0, why));
        }
        let text = toml::to_string(&t).map_err(|e| SweepError::new(e.to_string()))?;
        let mut runs = 0;
        let mut found = None;
        for n in 1..=max_replicas {
            runs += 1;
            let short = capacity::probe_once(&text, origin, n, rate, 1.0, q.attainment)?;
            if !short.meets_slo {
                continue;
            }
            runs += 1;
            let long = capacity::probe_once(
                &text,
                origin,
                n,
                rate,
                capacity::VERIFY_HORIZON_FACTOR,
                q.attainment,
            )?;
            if long.meets_slo && found.is_none() {
                found = Some((n, long));
            }
        }
        Ok(OptionResult {
            index,
            settings,
            hardware: Some(s.hardware.name.clone()),
            simulations: runs,
            pruned: found.is_none().then(|| {
                format!(
                    "no fleet of up to {} meets the SLOs",
                    capacity::fleet_count(FleetUnit::of(&s).as_ref(), max_replicas)
                )
            }),
            rechecked: found.is_some(),
            fleet: found
                .map(|(n, at)| sized(&s, n, p, at.attainment, at.goodput_rps, energy_of(&at, q))),
        })
    };
    let results = options(&base, grid)?
        .into_par_iter()
        .map(one)
        .collect::<Result<Vec<_>, SweepError>>()?;
    let inputs = PlanInputs::of(scenario_toml, origin, grid);
    Ok(finish(base_scenario.name(), q, inputs, results))
}

/// An option read back (from a shard's `plan.json` or a checkpoint)
/// against the space it claims to come from: its index and settings, its
/// hardware, and its fleet's GPUs, price and monthly cost re-derived from
/// the count the simulations found and the space's prices. Only that count
/// and the measured shares are taken from the file; the option with the
/// re-derived figures, or why it cannot be trusted.
fn rederive(
    o: &OptionResult,
    space: &[(usize, String, toml::Table)],
    origin: &str,
    price: &GpuHourPrice,
    q: &PlanQuery,
) -> Result<OptionResult, String> {
    let Some((_, settings, t)) = space.iter().find(|(i, _, _)| *i == o.index) else {
        return Err(format!(
            "option {} is not in the space, which has options 0 to {}",
            o.index,
            space.len().saturating_sub(1)
        ));
    };
    if *settings != o.settings {
        return Err(format!(
            "option {} reads {:?}, but the space's option {} is {settings:?}",
            o.index, o.settings, o.index
        ));
    }
    let Some(f) = &o.fleet else {
        return Ok(o.clone());
    };
    f.check()
        .map_err(|m| format!("option {}: fleet.{m}", o.index))?;
    let (s, p) = resolve(t, origin, price).map_err(|(_, why)| {
        format!(
            "option {} is sized, but its scenario does not resolve: {why}",
            o.index
        )
    })?;
    if o.hardware.as_deref() != Some(s.hardware.name.as_str()) {
        return Err(format!(
            "option {} names hardware {:?}, but its settings give {}",
            o.index, o.hardware, s.hardware.name
        ));
    }
    if f.attainment < q.attainment {
        return Err(format!(
            "option {} is sized with {:.2} % of requests meeting the SLOs, below the {:.2} % target",
            o.index,
            f.attainment * 100.0,
            q.attainment * 100.0
        ));
    }
    let n = f.units.unwrap_or(f.replicas);
    let energy = match (q.energy_usd_per_kwh, f.energy_kwh_per_month) {
        (None, None) => None,
        (Some(usd), Some(kwh)) if kwh.is_finite() && kwh >= 0.0 => Some((kwh, usd)),
        (Some(_), _) => {
            return Err(format!(
                "option {}: fleet.energy_kwh_per_month is missing or invalid, but the plan prices energy",
                o.index
            ))
        }
        (None, Some(_)) => {
            return Err(format!(
                "option {}: fleet.energy_kwh_per_month is given, but the plan prices no energy",
                o.index
            ))
        }
    };
    let want = sized(
        &s,
        n,
        p,
        f.attainment,
        f.goodput_rps_per_gpu * f.gpus as f64,
        energy,
    );
    let differs = [
        ("replicas", want.replicas != f.replicas),
        (
            "gpus_per_replica",
            want.gpus_per_replica != f.gpus_per_replica,
        ),
        ("unit", want.unit != f.unit || want.units != f.units),
        ("gpus", want.gpus != f.gpus),
        ("gpu_hour_usd", want.gpu_hour_usd != f.gpu_hour_usd),
        (
            "energy_usd_per_month",
            match (want.energy_usd_per_month, f.energy_usd_per_month) {
                (Some(a), Some(b)) => (a - b).abs() > 1e-9 * a.max(1.0),
                (a, b) => a.is_some() != b.is_some(),
            },
        ),
        (
            "usd_per_month",
            (want.usd_per_month - f.usd_per_month).abs() > 1e-9 * want.usd_per_month.max(1.0),
        ),
    ];
    if let Some((field, _)) = differs.iter().find(|(_, d)| *d) {
        return Err(format!(
            "option {}: fleet.{field} does not follow from its {n} {} and the space's price (${:.2} per GPU-hour): {} replicas, {} GPUs, ${:.2} per month",
            o.index,
            if f.units.is_some() { "unit(s)" } else { "replica(s)" },
            p,
            want.replicas,
            want.gpus,
            want.usd_per_month
        ));
    }
    let mut out = o.clone();
    out.fleet = Some(SizedFleet {
        headroom: f.headroom,
        max_load_rps: f.max_load_rps,
        goodput_rps_per_gpu: f.goodput_rps_per_gpu,
        ..want
    });
    Ok(out)
}

impl OptionResult {
    /// An option pruned after `simulations` runs, for `why`.
    fn pruned(
        index: usize,
        settings: String,
        hardware: Option<String>,
        simulations: usize,
        why: String,
    ) -> OptionResult {
        OptionResult {
            index,
            settings,
            hardware,
            simulations,
            fleet: None,
            pruned: Some(why),
            rechecked: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Every example space in `scenarios/spaces/` parses, expands on the
    /// scenario its usage line names, and has options that resolve and are
    /// priced (the rest pruned with a reason), so none rots unrun.
    #[test]
    fn every_example_space_resolves_on_its_scenario() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut spaces: Vec<_> = std::fs::read_dir(root.join("scenarios/spaces"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        spaces.sort();
        assert!(spaces.len() >= 3, "{spaces:?}");
        for space in spaces {
            let text = std::fs::read_to_string(&space).unwrap();
            let usage = text
                .lines()
                .find_map(|l| l.split("servesim plan ").nth(1))
                .unwrap_or_else(|| panic!("{}: no `servesim plan` usage line", space.display()));
            let scenario = root.join(usage.split_whitespace().next().unwrap());
            let origin = scenario.display().to_string();
            let scenario_text = std::fs::read_to_string(&scenario).unwrap();
            Scenario::from_toml_str(&scenario_text, &origin).unwrap();
            let base: toml::Table = scenario_text.parse().unwrap();
            let grid = Grid::load(&space).unwrap();
            let price = price_of(&grid).unwrap();
            let opts = options(&base, &grid).unwrap();
            let resolved = opts
                .iter()
                .filter(|(_, _, t)| resolve(t, &origin, price).is_ok())
                .count();
            assert!(resolved > 0, "{}: no option resolves", space.display());
        }
    }
}
