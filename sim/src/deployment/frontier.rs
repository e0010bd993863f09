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
            runs.push((o.index, text.clone(), f.units.unwrap_or(f.replicas), rate, v));
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
