//! A checked sweep: the base scenario, the grid, and every point — each one
//! checked by the scenario's own validation before anything runs, so an
//! unknown key path or a value of the wrong type fails fast with the grid
//! file and the key named.

use super::grid::{AxisValues, Grid};
use super::objective::GpuHourPrice;
use super::sample::{self, Point};
use super::SweepError;
use crate::config::keypath;
use crate::Scenario;

/// A checked sweep, ready to run.
#[derive(Clone, Debug)]
pub struct CheckedSweep {
    /// The base scenario's name.
    pub scenario_name: String,
    /// The base scenario's origin (its path), for messages.
    pub scenario_origin: String,
    /// The base scenario's text.
    pub scenario_toml: String,
    base: toml::Table,
    pub grid: Grid,
    pub points: Vec<Point>,
}

/// How a value reads in messages: TOML syntax (`4`, `"vllm"`).
fn show(v: &toml::Value) -> String {
    v.to_string()
}

impl CheckedSweep {
    /// Parses the base scenario, expands the grid and validates every point.
    pub fn new(
        scenario_toml: &str,
        scenario_origin: &str,
        grid: Grid,
    ) -> Result<CheckedSweep, SweepError> {
        let base_scenario = Scenario::from_toml_str(scenario_toml, scenario_origin)?;
        let base: toml::Table = scenario_toml
            .parse()
            .map_err(|e| SweepError::new(format!("{scenario_origin}: {e}")))?;
        let points = sample::points(&grid, base_scenario.seed());
        let plan = CheckedSweep {
            scenario_name: base_scenario.name().to_string(),
            scenario_origin: scenario_origin.to_string(),
            scenario_toml: scenario_toml.to_string(),
            base,
            grid,
            points,
        };
        plan.check_axes()?;
        for p in &plan.points {
            let s = plan.scenario_for(p)?;
            plan.check_prices(p, &s)?;
        }
        Ok(plan)
    }

    /// Each axis value alone on the base scenario (a `zip` group's values
    /// together, as they are paired): an unknown key path or a wrongly typed
    /// value is reported against the axis that carries it.
    fn check_axes(&self) -> Result<(), SweepError> {
        let axes = &self.grid.axes;
        for d in self.grid.dims() {
            let probes = |a: &super::grid::Axis| -> Vec<toml::Value> {
                match &a.values {
                    AxisValues::List(l) => l.clone(),
                    &AxisValues::Continuous { from, to, integer } if integer => {
                        vec![(from as i64).into(), (to as i64).into()]
                    }
                    &AxisValues::Continuous { from, to, .. } => vec![from.into(), to.into()],
                }
            };
            let columns: Vec<Vec<toml::Value>> = d.iter().map(|&a| probes(&axes[a])).collect();
            for i in 0..columns[0].len() {
                let mut t = self.base.clone();
                let here = d
                    .iter()
                    .zip(&columns)
                    .map(|(&a, c)| format!("axes.{} = {}", axes[a].key, show(&c[i])))
                    .collect::<Vec<_>>()
                    .join(", ");
                let here = format!("{}: {here}", self.grid.origin);
                for (&a, c) in d.iter().zip(&columns) {
                    keypath::set(&mut t, &axes[a].path, c[i].clone())
                        .map_err(|m| SweepError::new(format!("{here}: {m}")))?;
                }
                drop_inherited_link(&mut t, d.iter().map(|&a| axes[a].path.as_str()));
                Scenario::from_table(t, &self.scenario_origin)
                    .map_err(|e| SweepError::new(format!("{here}: {e}")))?;
            }
        }
        Ok(())
    }

    /// With a price per hardware option, every point's hardware (each
    /// pool's) must have one: no price is assumed.
    fn check_prices(&self, p: &Point, s: &Scenario) -> Result<(), SweepError> {
        let Some(price @ GpuHourPrice::PerHardware(_)) = &self.grid.objective.gpu_hour_usd else {
            return Ok(());
        };
        let names: Vec<&str> = s.pools.iter().map(|q| q.hardware().name.as_str()).collect();
        match names.into_iter().find(|h| price.of(h).is_none()) {
            None => Ok(()),
            Some(h) => Err(SweepError::new(format!(
                "{}: objective.gpu_hour_usd: no price for hardware {h} (point {}: {}); priced: {}. Give a price for every hardware option",
                self.grid.origin,
                p.index,
                self.describe(p),
                price.options().join(", ")
            ))),
        }
    }

    /// "fleet.replicas = 4, engine.max_batched_tokens = 2048".
    pub fn describe(&self, p: &Point) -> String {
        self.grid
            .axes
            .iter()
            .zip(&p.values)
            .map(|(a, v)| format!("{} = {}", a.key, show(v)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The scenario table of point `p`.
    pub fn table_for(&self, p: &Point) -> Result<toml::Table, SweepError> {
        let mut t = self.base.clone();
        for (a, v) in self.grid.axes.iter().zip(&p.values) {
            keypath::set(&mut t, &a.path, v.clone()).map_err(|m| {
                SweepError::new(format!("{}: axes.{}: {m}", self.grid.origin, a.key))
            })?;
        }
        drop_inherited_link(&mut t, self.grid.axes.iter().map(|a| a.path.as_str()));
        Ok(t)
    }

    /// The validated scenario of point `p`.
    pub fn scenario_for(&self, p: &Point) -> Result<Scenario, SweepError> {
        Scenario::from_table(self.table_for(p)?, &self.scenario_origin).map_err(|e| {
            SweepError::new(format!(
                "{}: point {} ({}): {e}",
                self.grid.origin,
                p.index,
                self.describe(p)
            ))
        })
    }

    /// The arrival rate point `p` offers (requests/s), if its workload states
    /// one: an arrival process's `rate`, or a trace replayed at a `rate`.
    pub fn offered_rps(&self, p: &Point) -> Option<f64> {
        let t = self.table_for(p).ok()?;
        ["workload.arrival.rate", "workload.trace.rate"]
            .iter()
            .find_map(|k| match keypath::get(&t, k)? {
                toml::Value::Float(f) => Some(*f),
                toml::Value::Integer(i) => Some(*i as f64),
                _ => None,
            })
    }
}

/// A point whose axes set `fleet.pools` to a fleet without a prefill pool
/// (the colocated option of a disaggregated-vs-colocated grid) has no link,
/// so the base scenario's `[fleet.kv_transfer]` is not inherited: it would
/// do nothing there, which a scenario file is refused for. A link key the
/// grid sets itself stays, and is refused as in a file.
pub(crate) fn drop_inherited_link<'a>(
    t: &mut toml::Table,
    axis_paths: impl Iterator<Item = &'a str>,
) {
    let paths: Vec<&str> = axis_paths.collect();
    let sets_pools = paths.contains(&"fleet.pools");
    let sets_link = paths.iter().any(|p| p.starts_with("fleet.kv_transfer"));
    if !sets_pools || sets_link {
        return;
    }
    let prefill = keypath::get(t, "fleet.pools")
        .and_then(|p| p.as_array())
        .is_some_and(|p| {
            p.iter()
                .any(|e| e.get("role").and_then(|r| r.as_str()) == Some("prefill"))
        });
    if !prefill {
        keypath::remove(t, "fleet.kv_transfer");
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::scenario::tests::MINIMAL;

    pub fn plan(grid: &str) -> Result<CheckedSweep, SweepError> {
        let g = Grid::from_toml_str(grid, "g.toml")?;
        CheckedSweep::new(MINIMAL, "s.toml", g)
    }

    #[test]
    fn points_are_validated_scenarios() {
        let p =
            plan("[axes]\n\"fleet.replicas\" = [1, 2]\n\"workload.rate\" = [3.0, 4]\n").unwrap();
        assert_eq!(p.points.len(), 4);
        let s = p.scenario_for(&p.points[3]).unwrap();
        assert_eq!(s.file.fleet.replicas, 2);
        assert_eq!(s.file.workload.arrival.as_ref().unwrap().rate(), 4.0);
        assert_eq!(p.offered_rps(&p.points[3]), Some(4.0));
        assert_eq!(
            p.describe(&p.points[1]),
            "fleet.replicas = 1, workload.rate = 4"
        );
    }

    #[test]
    fn unknown_keys_and_wrong_types_fail_before_running() {
        let e = plan("[axes]\n\"engine.polcy\" = [\"vllm\", \"sarathi\"]\n").unwrap_err();
        assert!(
            e.0.starts_with(
                "g.toml: axes.engine.polcy = \"vllm\": s.toml: engine.polcy: unknown field `polcy`"
            ),
            "{e}"
        );
        let e = plan("[axes]\n\"fleet.replicas\" = [2, \"four\"]\n").unwrap_err();
        assert!(
            e.0.starts_with(
                "g.toml: axes.fleet.replicas = \"four\": s.toml: fleet.replicas: invalid type"
            ),
            "{e}"
        );
        let e = plan("[axes]\n\"seed.x\" = [1]\n").unwrap_err();
        assert!(e.0.contains("`seed` is an integer, not a table"), "{e}");
        let e = plan("[axes]\n\"fleet.replicas\" = [0]\n").unwrap_err();
        assert!(e.0.contains("fleet.replicas: must be at least 1"), "{e}");
        // Valid alone, invalid together: named by point.
        // Qwen2.5-7B has 28 heads: TP 8 suits Llama-3.1-8B but not Qwen.
        let e = plan("[axes]\n\"fleet.tensor_parallel\" = [1, 8]\n\"model.preset\" = [\"llama-3.1-8b\", \"qwen2.5-7b\"]\n").unwrap_err();
        assert!(
            e.0.starts_with("g.toml: point 3 (fleet.tensor_parallel = 8, model.preset = \"qwen2.5-7b\"): s.toml: fleet.tensor_parallel: "),
            "{e}"
        );
    }
}
