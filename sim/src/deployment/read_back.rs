//! `plan.json` read back: its format tag checked, and every figure a later
//! command trusts (a fleet's GPUs and cost, the ranking, `best`, the
//! simulations' sum) checked against the others it is derived from, so an
//! edited or truncated file is refused with the field named.

use super::{DeployPlan, OptionResult, SizedFleet, FORMAT};
use crate::bounds;
use crate::sweep::capacity::HOURS_PER_MONTH;
use crate::sweep::read_back::{non_negative, read_tagged, same, share};
use crate::sweep::SweepError;
use std::path::Path;

impl SizedFleet {
    /// Its figures against each other: GPUs from replicas (or units), the
    /// monthly cost from GPUs and the price, shares in [0, 1].
    pub fn check(&self) -> Result<(), String> {
        bounds::GPU_HOUR_USD
            .check_named("gpu_hour_usd", self.gpu_hour_usd)
            .map(|_| ())?;
        let n = self.units.unwrap_or(self.replicas) as u64;
        if n == 0 || self.gpus as u64 != n * self.gpus_per_replica as u64 {
            return Err(format!(
                "gpus {} is not {} × {} GPUs each",
                self.gpus, n, self.gpus_per_replica
            ));
        }
        if let Some(e) = self.energy_usd_per_month {
            non_negative("energy_usd_per_month", e)?;
        }
        if let Some(k) = self.energy_kwh_per_month {
            non_negative("energy_kwh_per_month", k)?;
        }
        let energy = self.energy_usd_per_month.unwrap_or(0.0);
        let want = self.gpus as f64 * self.gpu_hour_usd * HOURS_PER_MONTH + energy;
        if !same(self.usd_per_month, want) {
            return Err(format!(
                "usd_per_month {} is not gpus × gpu_hour_usd × {HOURS_PER_MONTH} h + energy_usd_per_month = {want}",
                self.usd_per_month
            ));
        }
        share("attainment", self.attainment)?;
        non_negative("goodput_rps_per_gpu", self.goodput_rps_per_gpu)?;
        if let Some(h) = self.headroom {
            if !h.is_finite() || h < -1.0 {
                return Err(format!("headroom must be a finite share above −1, got {h}"));
            }
        }
        if let Some(m) = self.max_load_rps {
            non_negative("max_load_rps", m)?;
        }
        Ok(())
    }
}

impl DeployPlan {
    /// Reads and checks a `plan.json`.
    pub fn read(path: &Path) -> Result<DeployPlan, SweepError> {
        let p: DeployPlan = read_tagged(path, "plan.json", FORMAT)?;
        p.check()
            .map_err(|m| SweepError::new(format!("{}: {m}", path.display())))?;
        Ok(p)
    }

    /// Its figures against each other: the query in range, every option
    /// once, every fleet's cost from its GPUs and price, the options ranked
    /// by cost and `best` the cheapest.
    pub fn check(&self) -> Result<(), String> {
        self.query().check().map_err(|e| e.0)?;
        let mut seen = std::collections::BTreeSet::new();
        for (k, o) in self.options.iter().enumerate() {
            if !seen.insert(o.index) {
                return Err(format!("options[{k}]: option {} appears twice", o.index));
            }
            if let Some(s) = self.shard {
                if !s.holds(o.index) {
                    return Err(format!(
                        "options[{k}]: option {} is not in shard {s}",
                        o.index
                    ));
                }
            }
            match (&o.fleet, &o.pruned) {
                (Some(f), None) => f
                    .check()
                    .map_err(|m| format!("options[{k}] (option {}): fleet.{m}", o.index))?,
                (None, Some(_)) => {}
                _ => {
                    return Err(format!(
                        "options[{k}] (option {}): an option has a fleet or a reason it was pruned, not both or neither",
                        o.index
                    ))
                }
            }
        }
        let mut ranked = self.options.clone();
        super::rank(&mut ranked);
        let order = |v: &[OptionResult]| v.iter().map(|o| o.index).collect::<Vec<_>>();
        if order(&ranked) != order(&self.options) {
            return Err(
                "options are not ranked by their monthly cost (cheapest first, then pruned ones)"
                    .to_string(),
            );
        }
        let cheapest = ranked
            .first()
            .filter(|o| o.fleet.is_some())
            .map(|o| o.index);
        if self.best != cheapest {
            let show = |o: Option<usize>| o.map_or("none".to_string(), |i| format!("option {i}"));
            return Err(format!(
                "best is {}, but the cheapest sized option is {}",
                show(self.best),
                show(cheapest)
            ));
        }
        // Checked: an edited file can hold counts whose sum overflows.
        let sims = self
            .options
            .iter()
            .try_fold(0usize, |sum, o| sum.checked_add(o.simulations));
        if sims != Some(self.simulations) {
            return Err(format!(
                "simulations {} is not the options' sum ({})",
                self.simulations,
                sims.map_or("past any count".to_string(), |n| n.to_string())
            ));
        }
        if self.simulations_reused > self.simulations {
            return Err(format!(
                "simulations_reused {} is more than the {} simulations",
                self.simulations_reused, self.simulations
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `plan.json` of another version, or a file without a format tag,
    /// says so rather than failing on a field.
    #[test]
    fn a_plan_of_another_format_is_refused_by_its_tag() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.json");
        std::fs::write(&p, r#"{"format": "servesim-plan/1"}"#).unwrap();
        let e = DeployPlan::read(&p).unwrap_err();
        assert!(e.0.contains("is not \"servesim-plan/2\""), "{e}");
        std::fs::write(&p, r#"{"format": "servesim-capacity/1"}"#).unwrap();
        let e = DeployPlan::read(&p).unwrap_err();
        assert!(e.0.contains("is not \"servesim-plan/2\""), "{e}");
        std::fs::write(&p, "{}").unwrap();
        let e = DeployPlan::read(&p).unwrap_err();
        assert!(e.0.contains("no \"format\" tag"), "{e}");
    }
}
