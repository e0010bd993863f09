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
use super::{finish, options, price_of, rederive, DeployPlan, OptionResult};
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
    q.check()?;
    let scenario = first.scenario.clone();
    // The options rebuilt from the recorded inputs exactly as the shards
    // built them: every option read back is checked against its own, and
    // its cost re-derived from the count its simulations found, so an
    // edited shard cannot rank an option it did not size.
    let base: toml::Table = inputs
        .scenario_toml
        .parse()
        .map_err(|e| SweepError::new(format!("{}: {e}", inputs.scenario_origin)))?;
    let grid = Grid::from_toml_str(&inputs.space_toml, &inputs.space_origin)?;
    let space = options(&base, &grid)?;
    let price = price_of(&grid)?;
    let reused: usize = parts.iter().map(|p| p.simulations_reused).sum();
    let mut all: Vec<OptionResult> = Vec::new();
    for (i, p) in parts.into_iter().enumerate() {
        let shard = p.shard.expect("checked: every part is a shard");
        let held = space.iter().filter(|(k, _, _)| shard.holds(*k)).count();
        if p.options.len() != held {
            return Err(SweepError::new(format!(
                "{}: shard {shard} holds {} options, but the space gives it {held}",
                name(i),
                p.options.len()
            )));
        }
        for o in &p.options {
            all.push(
                rederive(o, &space, &inputs.scenario_origin, price, &q)
                    .map_err(|m| SweepError::new(format!("{}: {m}", name(i))))?,
            );
        }
    }
    all.sort_by_key(|o| o.index);
    let mut plan = finish(&scenario, &q, inputs.clone(), all);
    plan.simulations_reused = reused;
    let texts = space
        .into_iter()
        .map(|(i, _, t)| {
            toml::to_string(&t)
                .map(|text| (i, text))
                .map_err(|e| SweepError::new(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    measure_headroom(
        &mut plan,
        &texts,
        &inputs.scenario_origin,
        &q,
        None,
        on_probe,
    )?;
    // The winner's fleet measured again: a count edited below what the
    // demand needs shows as a highest sustained load short of it. The
    // margin is the rate search's precision twice over plus a tenth for
    // the short and long horizons' differences.
    if let Some(o) = plan.options.iter().find(|o| Some(o.index) == plan.best) {
        let f = o.fleet.as_ref().expect("best is sized");
        if let Some(h) = f.headroom {
            if h < -(0.1 + 2.0 * q.tolerance) {
                return Err(SweepError::new(format!(
                    "plan merge: the cheapest option {} ({}) is recorded as meeting the SLOs at {} req/s with {} replicas, but that fleet sustains only {:.3} req/s ({:.0} % headroom): its shard's plan.json does not match a simulation; rerun that shard",
                    o.index,
                    o.settings,
                    q.sized_for_rps(),
                    f.replicas,
                    f.max_load_rps.unwrap_or(0.0),
                    h * 100.0
                )));
            }
        }
    }
    Ok(plan)
}
