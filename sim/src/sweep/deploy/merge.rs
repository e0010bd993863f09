//! Putting a sharded plan back together: shard `I/N` of a plan sizes the
//! options whose index is `I` modulo `N` (as a sweep's shards split its
//! points), and [`merge`] ranks their union and measures the winner's
//! headroom, as the unsharded plan does.
//!
//! The long-stage bound each shard applies is against its own cheapest
//! re-checked option, which costs at least the global cheapest, so an
//! option a shard left un-re-checked cannot win the merged plan either:
//! the merged answer is the unsharded one.

use super::search::measure_headroom;
use super::{finish, options, DeployPlan, OptionResult};
use crate::sweep::capacity::Probe;
use crate::sweep::shard::{check_set, input_name};
use crate::sweep::{Grid, SweepError};

/// Merges the shard plans `parts` (named by `names` in messages) into the
/// whole plan; `on_probe` sees the headroom search's simulations.
pub fn merge(
    parts: Vec<DeployPlan>,
    names: &[String],
    on_probe: &(dyn Fn(usize, &Probe) + Sync),
) -> Result<DeployPlan, SweepError> {
    let name = |i: usize| input_name(names, i);
    let Some(first) = parts.first() else {
        return Err(SweepError::new(
            "plan merge: give the shard output folders to merge",
        ));
    };
    for (i, p) in parts.iter().enumerate() {
        if p.format != first.format || p.inputs != first.inputs || p.query() != first.query() {
            return Err(SweepError::new(format!(
                "{}: comes from another plan than {} (scenario, space, demand or targets differ)",
                name(i),
                name(0)
            )));
        }
    }
    let shards: Vec<_> = parts.iter().map(|p| p.shard).collect();
    check_set(&shards, names, "plan")?;
    let inputs = first.inputs.clone();
    let q = first.query();
    let scenario = first.scenario.clone();
    let mut all: Vec<OptionResult> = parts.into_iter().flat_map(|p| p.options).collect();
    all.sort_by_key(|o| o.index);
    let mut plan = finish(&scenario, &q, inputs.clone(), all);
    // The options' texts, rebuilt from the recorded inputs exactly as the
    // shards built them.
    let base: toml::Table = inputs
        .scenario_toml
        .parse()
        .map_err(|e| SweepError::new(format!("{}: {e}", inputs.scenario_origin)))?;
    let grid = Grid::from_toml_str(&inputs.space_toml, &inputs.space_origin)?;
    let texts = options(&base, &grid)?
        .into_iter()
        .map(|(i, _, t)| {
            toml::to_string(&t)
                .map(|text| (i, text))
                .map_err(|e| SweepError::new(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    measure_headroom(&mut plan, &texts, &inputs.scenario_origin, &q, on_probe)?;
    Ok(plan)
}
