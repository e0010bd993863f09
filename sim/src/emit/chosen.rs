//! The deployment a plan chose, as a scenario: the plan's base scenario with
//! the cheapest option's settings (its point of the space) and the fleet the
//! search sized for the demand — its replica count, or with pools each
//! pool's count times the units found — offered the demand's arrival rate.

use crate::config::keypath;
use crate::deployment::DeployPlan;
use crate::sweep::{sample, Grid, SweepError};
use crate::Scenario;

/// The scenario of the plan's cheapest option at its sized fleet; `None`
/// when no option met the SLOs.
pub fn chosen_scenario(plan: &DeployPlan) -> Result<Option<Scenario>, SweepError> {
    let Some(best) = plan.best else {
        return Ok(None);
    };
    let option = plan
        .options
        .iter()
        .find(|o| o.index == best)
        .ok_or_else(|| {
            SweepError::new(format!("plan: best option {best} is not among its options"))
        })?;
    let Some(fleet) = &option.fleet else {
        return Err(SweepError::new(format!(
            "plan: best option {best} has no sized fleet"
        )));
    };
    let inputs = &plan.inputs;
    let grid = Grid::from_toml_str(&inputs.space_toml, &inputs.space_origin)?;
    let mut t: toml::Table = inputs
        .scenario_toml
        .parse()
        .map_err(|e| SweepError::new(format!("{}: {e}", inputs.scenario_origin)))?;
    let point = sample::points(&grid, 0)
        .into_iter()
        .find(|p| p.index == best)
        .ok_or_else(|| {
            SweepError::new(format!("{}: no option {best} in the space", grid.origin))
        })?;
    let at = |m: String| SweepError::new(format!("{}: option {best}: {m}", grid.origin));
    for (a, v) in grid.axes.iter().zip(&point.values) {
        keypath::set(&mut t, &a.path, v.clone()).map_err(at)?;
    }
    crate::sweep::checked::drop_inherited_link(&mut t, grid.axes.iter().map(|a| a.path.as_str()));
    match fleet.units {
        None => {
            keypath::set(&mut t, "fleet.replicas", i64::from(fleet.replicas).into()).map_err(at)?
        }
        Some(n) => {
            // The pools' sum would no longer match a stated total.
            keypath::remove(&mut t, "fleet.replicas");
            let pools = keypath::get(&t, "fleet.pools")
                .and_then(|p| p.as_array())
                .map_or(0, |p| p.len());
            for i in 0..pools {
                let key = format!("fleet.pools.{i}.replicas");
                let per = keypath::get(&t, &key)
                    .and_then(|v| v.as_integer())
                    .unwrap_or(1);
                keypath::set(&mut t, &key, (per * i64::from(n)).into()).map_err(at)?;
            }
        }
    }
    if keypath::get(&t, "workload.arrival.rate").is_some() {
        keypath::set(&mut t, "workload.arrival.rate", plan.demand_rps.into()).map_err(at)?;
    }
    Scenario::from_table(t, &inputs.scenario_origin)
        .map(Some)
        .map_err(|e| at(e.to_string()))
}
