//! A plan's throughput–interactivity frontier: the chart of
//! `sweep::frontier` (output tokens per second per GPU against tokens per
//! second per user and against TTFT, one curve per configuration, the
//! Pareto frontier marked) for the options a plan ranked first.
//!
//! A plan's searches run each option at one load, the demand, so its
//! curves need load points it did not run: each of the
//! [`FRONTIER_OPTIONS`] cheapest sized options is simulated with its sized
//! fleet at [`LOAD_FRACTIONS`] of the load it was sized for, with the
//! horizon its count search gives that fleet. The load points are fixed,
//! so the same plan draws the same chart; the point at the full load is
//! the probe the count search ran, reused through the plan's
//! [`ProbeCache`] rather than simulated again. The result has the shape of
//! a sweep's (`frontier.json`), so the sweep's frontier code builds,
//! writes and charts it unchanged.

use super::{describe_value, options, DeployPlan};
use crate::sweep::capacity::{self, Probe, ProbeCache};
use crate::sweep::results::{PointResult, FORMAT};
use crate::sweep::{sample, Grid, SweepError, SweepResults};
use rayon::prelude::*;

/// Options drawn: the cheapest sized ones.
pub const FRONTIER_OPTIONS: usize = 3;

/// Loads of each option's curve, as shares of the load it was sized for
/// (the demand with its headroom): from a quarter, where batches are thin
/// and each user fast, to half again past it, where they are full.
pub const LOAD_FRACTIONS: [f64; 5] = [0.25, 0.5, 0.75, 1.0, 1.5];

/// The axes a plan's frontier adds to its space's: the sized fleet and
/// the offered load.
pub const FRONTIER_AXES: [&str; 2] = ["fleet.replicas", "workload.rate"];

/// The load points of `plan`'s cheapest sized options (none sized: no
/// points), each simulated through `cache` unless a search already ran
/// it; `on_probe` sees each with its option's index. Points are in rank
/// order, then load; runs go in parallel and are gathered in that order.
pub fn frontier_runs(
    plan: &DeployPlan,
    cache: Option<&ProbeCache>,
    on_probe: &(dyn Fn(usize, &Probe) + Sync),
) -> Result<SweepResults, SweepError> {
    let inputs = &plan.inputs;
    let origin = inputs.scenario_origin.as_str();
    let base: toml::Table = inputs
        .scenario_toml
        .parse()
        .map_err(|e| SweepError::new(format!("{origin}: {e}")))?;
    let grid = Grid::from_toml_str(&inputs.space_toml, &inputs.space_origin)?;
    let space = options(&base, &grid)?;
    let points = sample::points(&grid, 0);
    let q = plan.query();
    let mut runs = Vec::new();
    for o in plan
        .options
        .iter()
        .filter(|o| o.fleet.is_some())
        .take(FRONTIER_OPTIONS)
    {
        let f = o.fleet.as_ref().expect("sized");
        let (_, _, table) = space
            .iter()
            .find(|(i, _, _)| *i == o.index)
            .ok_or_else(|| SweepError::new(format!("option {} is not in the space", o.index)))?;
        let text = toml::to_string(table).map_err(|e| SweepError::new(e.to_string()))?;
        let point = points
            .iter()
            .find(|p| p.index == o.index)
            .expect("an option is a point of its space");
        let mut values: Vec<serde_json::Value> = grid
            .axes
            .iter()
            .zip(&point.values)
            .map(|(a, v)| describe_value(&a.path, v).into())
            .collect();
        values.push(f.replicas.into());
        for share in LOAD_FRACTIONS {
            let mut v = values.clone();
            let rate = q.sized_for_rps() * share;
            v.push(rate.into());
            runs.push((
                o.index,
                text.clone(),
                f.units.unwrap_or(f.replicas),
                rate,
                v,
            ));
        }
    }
    let done = runs
        .par_iter()
        .map(|(option, text, count, rate, _)| {
            let log = |p: &Probe| on_probe(*option, p);
            capacity::probe_at(
                text,
                origin,
                q.attainment,
                "frontier",
                *count,
                *rate,
                cache,
                &log,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut axes: Vec<String> = grid.axes.iter().map(|a| a.key.clone()).collect();
    axes.extend(FRONTIER_AXES.iter().map(|a| a.to_string()));
    let points: Vec<PointResult> = runs
        .into_iter()
        .zip(done)
        .enumerate()
        .map(|(index, ((_, _, _, rate, values), p))| PointResult {
            index,
            values,
            offered_rps: Some(rate),
            summary: p.figures.as_deref().cloned().unwrap_or_default(),
        })
        .collect();
    Ok(SweepResults {
        format: FORMAT.to_string(),
        scenario: plan.scenario.clone(),
        scenario_path: inputs.scenario_origin.clone(),
        scenario_toml: inputs.scenario_toml.clone(),
        grid_toml: inputs.space_toml.clone(),
        sample: crate::sweep::grid::SampleKind::Cartesian,
        axes,
        points_total: points.len(),
        shard: None,
        points,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::{plan_deployment, PlanQuery};
    use crate::sweep::Shard;
    use std::path::Path;

    /// A plan of the quickstart (a short horizon) over two chips, its
    /// frontier's load points, and the cache they shared.
    #[test]
    fn a_plans_frontier_draws_its_cheapest_options_and_marks_the_pareto_set() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = std::fs::read_to_string(root.join("scenarios/quickstart.toml"))
            .unwrap()
            .replace("requests = 20000", "requests = 300");
        let grid = Grid::from_toml_str(
            "[objective]\ngpu_hour_usd = { \"h100-sxm\" = 2.49, \"h200\" = 3.49 }\n[axes]\n\"hardware.preset\" = [\"h100-sxm\", \"h200\"]\n",
            "space.toml",
        )
        .unwrap();
        let q = PlanQuery {
            demand_rps: 20.0,
            headroom: 0.0,
            attainment: 0.99,
            tolerance: 0.05,
            energy_usd_per_kwh: None,
        };
        let quiet = |_: usize, _: &Probe| {};
        let cache = ProbeCache::default();
        let plan = plan_deployment(
            &text,
            "q.toml",
            &grid,
            &q,
            Shard::ALL,
            None,
            Some(&cache),
            &quiet,
        )
        .unwrap();
        let sized = plan.options.iter().filter(|o| o.fleet.is_some()).count();
        assert_eq!(sized, 2, "{plan:?}");
        let before = (cache.asked(), cache.simulated());
        let runs = frontier_runs(&plan, Some(&cache), &quiet).unwrap();
        assert_eq!(runs.points.len(), 2 * LOAD_FRACTIONS.len());
        assert_eq!(
            runs.axes,
            ["hardware.preset", "fleet.replicas", "workload.rate"]
        );
        // Each option's point at the load it was sized for is the probe
        // its count search ran: reused, not simulated again.
        let asked = cache.asked() - before.0;
        let simulated = cache.simulated() - before.1;
        assert_eq!(asked, runs.points.len());
        assert!(simulated <= asked - 2, "{simulated} of {asked}");
        // The same points without the cache: the same figures.
        let fresh = frontier_runs(&plan, None, &quiet).unwrap();
        assert_eq!(fresh, runs);
        // Ranked order, the cheapest first, its fleet at each load.
        let best = plan.options[0].fleet.as_ref().unwrap();
        assert_eq!(runs.points[0].values[1], serde_json::json!(best.replicas));
        let rates: Vec<f64> = runs.points[..LOAD_FRACTIONS.len()]
            .iter()
            .map(|p| p.offered_rps.unwrap())
            .collect();
        assert_eq!(rates, LOAD_FRACTIONS.map(|s| 20.0 * s));
        let f = crate::sweep::frontier::frontier(&runs, grid.objective.gpu_hour_usd.as_ref());
        assert_eq!(f.configurations.len(), 2);
        assert_eq!(f.curve_axes, ["hardware.preset"]);
        assert_eq!(f.points.len(), runs.points.len());
        // Brute force: a point is on a front iff no other point is at
        // least as good on both and better on one.
        let on = |xy: &[(f64, f64)]| -> Vec<bool> {
            xy.iter()
                .map(|&(a, b)| {
                    !xy.iter()
                        .any(|&(c, d)| c >= a && d >= b && (c > a || d > b))
                })
                .collect()
        };
        let inter: Vec<(f64, f64)> = f
            .points
            .iter()
            .map(|p| (p.per_user.unwrap(), p.per_gpu))
            .collect();
        let ttft: Vec<(f64, f64)> = f
            .points
            .iter()
            .map(|p| (-p.ttft_ms_p50.unwrap(), p.per_gpu))
            .collect();
        let got: Vec<bool> = f.points.iter().map(|p| p.on_interactivity_front).collect();
        assert_eq!(got, on(&inter));
        let got: Vec<bool> = f.points.iter().map(|p| p.on_ttft_front).collect();
        assert_eq!(got, on(&ttft));
        assert!(f.points.iter().any(|p| p.on_interactivity_front));
        // Per-hardware prices: a cost per point, no single second scale.
        assert!(f.points.iter().all(|p| p.usd_per_m.is_some()));
        assert_eq!(f.usd_per_gpu_hour, None);
    }
}
