//! `servesim plan`: the cheapest deployment that meets the SLOs at a demand,
//! over a declared space of options.
//!
//! The space is a grid file (`grid`): its axes (paired with `zip` where a
//! setting only makes sense with another, such as hardware with tensor
//! parallelism) give the options, and `[objective] gpu_hour_usd` their
//! prices (one, or one per hardware option; none is assumed). For every
//! option the replica count is not an axis but found by the steady-state
//! capacity search (`capacity`): the highest load one replica sustains
//! brackets the count, galloping and bisection find the fewest replicas
//! meeting the SLOs at the demand, and a run four times longer re-checks
//! them. An option is *pruned* with its reason when its scenario is invalid
//! (the model does not fit, a parallel layout does not divide) or when one
//! replica cannot meet the SLOs at any load. Options run in file order, one
//! after another, each deterministic, so the plan is the same at any thread
//! count.
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

use super::capacity::{self, plan_capacity, CapacityQuery, FleetUnit, Probe, HOURS_PER_MONTH};
use super::grid::{Grid, SampleKind};
use super::keypath;
use super::objective::GpuHourPrice;
use super::sample;
use super::SweepError;
use crate::Scenario;
use serde::{Deserialize, Serialize};

/// The light load of the first probe of an option: the demand over this.
const LIGHT_LOAD_DIVISOR: f64 = 1000.0;

/// Format tag of `plan.json`.
pub const FORMAT: &str = "servesim-plan/1";

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
    /// gpus × price × 730 h.
    pub usd_per_month: f64,
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

/// The result of `servesim plan` (`plan.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeployPlan {
    pub format: String,
    pub scenario: String,
    pub demand_rps: f64,
    pub headroom: f64,
    pub attainment_target: f64,
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
    if let Some(a) = grid
        .axes
        .iter()
        .find(|a| a.path == "fleet.replicas" || a.path == "workload.arrival.rate")
    {
        return Err(SweepError::new(format!(
            "{}: axes.{}: a plan finds the replica count for the demand itself; remove this axis",
            grid.origin, a.key
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
        super::plan::drop_inherited_link(&mut t, grid.axes.iter().map(|a| a.path.as_str()));
        out.push((p.index, words.join(", "), t));
    }
    Ok(out)
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

/// The sized fleet of `n` counts (replicas, or units with pools).
fn sized(s: &Scenario, n: u32, price: f64, attainment: f64, goodput_rps: f64) -> SizedFleet {
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
        usd_per_month: gpus as f64 * price * HOURS_PER_MONTH,
        attainment,
        goodput_rps_per_gpu: goodput_rps / gpus.max(1) as f64,
        headroom: None,
        max_load_rps: None,
    }
}

/// Plans the cheapest deployment of `scenario_toml` over the space `grid`
/// for `q`; `on_probe` sees every simulation as it finishes.
pub fn plan_deployment(
    scenario_toml: &str,
    origin: &str,
    grid: &Grid,
    q: &PlanQuery,
    on_probe: &(dyn Fn(&Probe) + Sync),
) -> Result<DeployPlan, SweepError> {
    let base_scenario = Scenario::from_toml_str(scenario_toml, origin)?;
    if base_scenario.file.slo.is_none() {
        return Err(SweepError::new(format!(
            "{origin}: slo: missing: a plan needs [slo] targets to judge options by"
        )));
    }
    let base: toml::Table = scenario_toml
        .parse()
        .map_err(|e| SweepError::new(format!("{origin}: {e}")))?;
    let price = price_of(grid)?;
    let mut results = Vec::new();
    let mut texts = Vec::new();
    for (index, settings, t) in options(&base, grid)? {
        let (s, p) = match resolve(&t, origin, price) {
            Ok(x) => x,
            Err((hardware, why)) => {
                results.push(OptionResult {
                    index,
                    settings,
                    hardware,
                    simulations: 0,
                    fleet: None,
                    pruned: Some(why),
                });
                continue;
            }
        };
        let text = toml::to_string(&t).map_err(|e| SweepError::new(e.to_string()))?;
        texts.push((index, text.clone()));
        let cq = CapacityQuery {
            attainment: q.attainment,
            replicas: 1,
            demand_rps: Some(q.demand_rps),
            headroom: q.headroom,
            spare: 0,
            gpu_hour_usd: Some(p),
            tolerance: q.tolerance,
        };
        let count = std::sync::atomic::AtomicUsize::new(0);
        let log = |pr: &Probe| {
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            on_probe(pr);
        };
        let hardware = Some(s.hardware.name.clone());
        // One replica at a light load first: an option that misses the SLOs
        // even then (rejections, a target below a lone request's latency)
        // misses them at any load and with any replica count.
        let light = q.demand_rps / LIGHT_LOAD_DIVISOR;
        let first = capacity::probe_once(&text, origin, 1, light, 1.0, q.attainment)?;
        on_probe(&first);
        if !first.meets_slo {
            results.push(OptionResult {
                index,
                settings,
                hardware,
                simulations: 1,
                fleet: None,
                pruned: Some(format!(
                    "one replica misses the SLOs even at {light} req/s ({:.2} % met, {} of {} requests completed): no replica count meets them",
                    first.attainment * 100.0,
                    first.completed,
                    first.requests
                )),
            });
            continue;
        }
        match plan_capacity(&text, origin, &cq, &log) {
            Ok(c) => {
                let z = c.sizing.as_ref().expect("a demand was given");
                let sims = c.probes.len() + 1;
                let at = &z.at_headroom;
                results.push(OptionResult {
                    index,
                    settings,
                    hardware,
                    simulations: sims,
                    fleet: Some(sized(
                        &s,
                        z.replicas_total,
                        p,
                        at.attainment,
                        at.goodput_rps,
                    )),
                    pruned: None,
                });
            }
            Err(e) => results.push(OptionResult {
                index,
                settings,
                hardware,
                simulations: count.load(std::sync::atomic::Ordering::Relaxed) + 1,
                fleet: None,
                pruned: Some(e.0),
            }),
        }
    }
    let mut plan = finish(base_scenario.name(), q, results);
    measure_headroom(&mut plan, &texts, origin, q, on_probe)?;
    Ok(plan)
}

/// The winner's headroom, measured: the highest load its sized fleet
/// sustains within the SLOs (the capacity rate search at that fleet size).
fn measure_headroom(
    plan: &mut DeployPlan,
    texts: &[(usize, String)],
    origin: &str,
    q: &PlanQuery,
    on_probe: &(dyn Fn(&Probe) + Sync),
) -> Result<(), SweepError> {
    let Some(best) = plan.best else {
        return Ok(());
    };
    let text = &texts.iter().find(|(i, _)| *i == best).expect("sized").1;
    let o = plan
        .options
        .iter_mut()
        .find(|o| o.index == best)
        .expect("best");
    let f = o.fleet.as_mut().expect("sized");
    let cq = CapacityQuery {
        attainment: q.attainment,
        replicas: f.units.unwrap_or(f.replicas),
        demand_rps: None,
        headroom: 0.0,
        spare: 0,
        gpu_hour_usd: None,
        tolerance: q.tolerance,
    };
    let count = std::sync::atomic::AtomicUsize::new(0);
    let log = |pr: &Probe| {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        on_probe(pr);
    };
    // A fleet whose limit cannot be bracketed keeps no headroom figure
    // rather than failing the plan it already answered.
    let Ok(c) = plan_capacity(text, origin, &cq, &log) else {
        let n = count.load(std::sync::atomic::Ordering::Relaxed);
        o.simulations += n;
        plan.simulations += n;
        plan.headroom_simulations = n;
        return Ok(());
    };
    f.max_load_rps = Some(c.max_load.rate_rps);
    f.headroom = Some(c.max_load.rate_rps / q.demand_rps - 1.0);
    o.simulations += c.probes.len();
    plan.simulations += c.probes.len();
    plan.headroom_simulations = c.probes.len();
    Ok(())
}

/// Ranks sized options cheapest first (then fewer GPUs, then space order),
/// pruned ones after in space order.
fn finish(scenario: &str, q: &PlanQuery, mut options: Vec<OptionResult>) -> DeployPlan {
    let key = |o: &OptionResult| {
        o.fleet
            .as_ref()
            .map(|f| (f.usd_per_month, f.gpus))
            .unwrap_or((f64::INFINITY, u32::MAX))
    };
    options.sort_by(|a, b| {
        let (ca, ga) = key(a);
        let (cb, gb) = key(b);
        ca.total_cmp(&cb)
            .then(ga.cmp(&gb))
            .then(a.index.cmp(&b.index))
    });
    DeployPlan {
        format: FORMAT.to_string(),
        scenario: scenario.to_string(),
        demand_rps: q.demand_rps,
        headroom: q.headroom,
        attainment_target: q.attainment,
        best: options
            .first()
            .filter(|o| o.fleet.is_some())
            .map(|o| o.index),
        simulations: options.iter().map(|o| o.simulations).sum(),
        headroom_simulations: 0,
        options,
    }
}

/// Every option at every replica count from 1 to `max_replicas`, with the
/// probes and judgement of the capacity search: an option's fleet is the
/// fewest replicas whose probe meets the SLOs at the demand (with headroom)
/// and whose four-times-longer re-check does too. For comparison with
/// [`plan_deployment`]; its `simulations` counts every run.
pub fn exhaustive(
    scenario_toml: &str,
    origin: &str,
    grid: &Grid,
    q: &PlanQuery,
    max_replicas: u32,
) -> Result<DeployPlan, SweepError> {
    let base_scenario = Scenario::from_toml_str(scenario_toml, origin)?;
    let base: toml::Table = scenario_toml
        .parse()
        .map_err(|e| SweepError::new(format!("{origin}: {e}")))?;
    let price = price_of(grid)?;
    let rate = q.demand_rps * (1.0 + q.headroom);
    let mut results = Vec::new();
    for (index, settings, t) in options(&base, grid)? {
        let (s, p) = match resolve(&t, origin, price) {
            Ok(x) => x,
            Err((hardware, why)) => {
                results.push(OptionResult {
                    index,
                    settings,
                    hardware,
                    simulations: 0,
                    fleet: None,
                    pruned: Some(why),
                });
                continue;
            }
        };
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
        results.push(OptionResult {
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
            fleet: found.map(|(n, at)| sized(&s, n, p, at.attainment, at.goodput_rps)),
        });
    }
    Ok(finish(base_scenario.name(), q, results))
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
