//! Running a sweep: every point is an independent simulation seeded from the
//! scenario (the grid may vary `seed` itself for replications), run on the
//! rayon pool one simulation per thread. Results are collected in point
//! order, so they are identical at any thread count and on any shard.

use super::checked::CheckedSweep;
use super::checkpoint::Checkpoint;
use super::results::{PointResult, SweepResults, FORMAT};
use super::sample::Point;
use super::shard::Shard;
use super::SweepError;
use crate::{RunResult, Simulation};
use rayon::prelude::*;

/// Runs the points of `shard` (all of them with [`Shard::ALL`]).
/// `on_point_done` is called from worker threads after each point, for
/// progress bars.
pub fn run(
    plan: &CheckedSweep,
    shard: Shard,
    on_point_done: &(dyn Fn() + Sync),
) -> Result<SweepResults, SweepError> {
    run_resumable(plan, shard, on_point_done, None)
}

/// As [`run`], taking finished points from `checkpoint` and saving each new
/// one there as soon as it finishes (see `checkpoint`).
pub fn run_resumable(
    plan: &CheckedSweep,
    shard: Shard,
    on_point_done: &(dyn Fn() + Sync),
    checkpoint: Option<&Checkpoint>,
) -> Result<SweepResults, SweepError> {
    let mine: Vec<&Point> = plan
        .points
        .iter()
        .filter(|p| shard.holds(p.index))
        .collect();
    let outcomes: Vec<Result<PointResult, SweepError>> = mine
        .par_iter()
        .map(|p| {
            if let Some(done) = checkpoint.and_then(|c| c.done.get(&p.index)) {
                on_point_done();
                return Ok(done.clone());
            }
            let r = run_point(plan, p);
            if let (Ok(r), Some(c)) = (&r, checkpoint) {
                c.save(r)?;
            }
            on_point_done();
            r
        })
        .collect();
    // The first failure in point order, whichever thread hit it first.
    let points = outcomes.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(SweepResults {
        format: FORMAT.to_string(),
        scenario: plan.scenario_name.clone(),
        scenario_path: plan.scenario_origin.clone(),
        scenario_toml: plan.scenario_toml.clone(),
        grid_toml: plan.grid.text.clone(),
        sample: plan.grid.sample,
        axes: plan.grid.keys(),
        points_total: plan.points.len(),
        shard: (shard.count > 1).then_some(shard),
        points,
    })
}

/// Runs one point in full (records and time series too), e.g. to write the
/// chosen operating point's result files.
pub fn run_full(plan: &CheckedSweep, p: &Point) -> Result<RunResult, SweepError> {
    let scenario = plan.scenario_for(p)?;
    Simulation::new(&scenario).run(|_| {}).map_err(|e| {
        SweepError::new(format!(
            "{}: point {} ({}): {e}",
            plan.grid.origin,
            p.index,
            plan.describe(p)
        ))
    })
}

fn run_point(plan: &CheckedSweep, p: &Point) -> Result<PointResult, SweepError> {
    let result = run_full(plan, p)?;
    let summary = serde_json::to_value(&result.summary)
        .map_err(|e| SweepError::new(format!("point {}: cannot encode summary: {e}", p.index)))?;
    let values = p
        .values
        .iter()
        .map(|v| serde_json::to_value(v).unwrap_or(serde_json::Value::Null))
        .collect();
    Ok(PointResult {
        index: p.index,
        values,
        offered_rps: plan.offered_rps(p),
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::checked::tests::plan;

    #[test]
    fn results_do_not_depend_on_threads_or_shards() {
        let p = plan("[axes]\n\"fleet.replicas\" = [1, 2, 3]\n\"workload.rate\" = [5.0, 40.0]\n")
            .unwrap();
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let two = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let a = one.install(|| run(&p, Shard::ALL, &|| {})).unwrap();
        let b = two.install(|| run(&p, Shard::ALL, &|| {})).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.points.len(), 6);
        assert!(a.points.iter().enumerate().all(|(i, q)| q.index == i));
        assert_eq!(a.points[5].summary["replicas"], 3);
        assert_eq!(a.points[5].offered_rps, Some(40.0));
        let shards: Vec<SweepResults> = (0..4)
            .map(|i| run(&p, Shard { index: i, count: 4 }, &|| {}).unwrap())
            .collect();
        assert_eq!(shards[3].points.len(), 1);
        let names: Vec<String> = (0..4).map(|i| i.to_string()).collect();
        let merged = crate::sweep::shard::merge(shards, &names).unwrap();
        assert_eq!(merged, a);
    }
}
