//! Result files of the searches read back (`capacity.json`, `plan.json`):
//! bounded, their format tag checked, and every figure a later command
//! trusts checked against the others it is derived from, so an edited or
//! truncated file is refused with the field named instead of printed,
//! merged or charted as if it were a result.

use super::capacity::{self, CapacityReport, Probe, HOURS_PER_MONTH};
use super::deploy::{self, DeployPlan, OptionResult, SizedFleet};
use super::SweepError;
use crate::bounds;
use serde::de::DeserializeOwned;
use std::path::Path;

/// Reads a result file `path` of kind `what` (e.g. "plan.json") whose
/// format tag must be `format`.
fn read_tagged<T: DeserializeOwned>(
    path: &Path,
    what: &str,
    format: &str,
) -> Result<T, SweepError> {
    let p = path.display();
    let text =
        crate::input_file::read_result(path, what).map_err(|e| SweepError::new(e.to_string()))?;
    // The tag first, so a file of another version says so rather than
    // failing on a field it does not have.
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
        match v.get("format").and_then(|f| f.as_str()) {
            Some(f) if f == format => {}
            Some(f) => {
                return Err(SweepError::new(format!(
                    "{p}: format {f:?} is not {format:?} (written by another servesim version, or not a {what})"
                )))
            }
            None => {
                return Err(SweepError::new(format!(
                    "{p}: no \"format\" tag: not a {what} (expected format {format:?})"
                )))
            }
        }
    }
    let r: T = serde_json::from_str(&text)
        .map_err(|e| SweepError::new(format!("{p}: not a {what}: {e}")))?;
    Ok(r)
}

/// Whether two derived figures agree (to rounding).
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn share(field: &str, v: f64) -> Result<(), String> {
    bounds::SHARE.check_named(field, v).map(|_| ())
}

fn non_negative(field: &str, v: f64) -> Result<(), String> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(format!("{field} must be a finite number ≥ 0, got {v}"))
    }
}

/// A probe as a simulation reports it.
fn check_probe(at: &str, p: &Probe) -> Result<(), String> {
    bounds::RATE_RPS
        .check_named(&format!("{at}.rate_rps"), p.rate_rps)
        .map(|_| ())?;
    share(&format!("{at}.attainment"), p.attainment)?;
    for (k, v) in [
        ("ttft_p99_ms", p.ttft_p99_ms),
        ("tpot_p99_ms", p.tpot_p99_ms),
        ("goodput_rps", p.goodput_rps),
    ] {
        // A probe that completed nothing has no percentile (NaN reads back
        // as null, which serde refuses, so it is 0 there).
        non_negative(&format!("{at}.{k}"), v)?;
    }
    if p.requests > 0 && p.completed > p.requests {
        return Err(format!(
            "{at}: completed {} of {} requests",
            p.completed, p.requests
        ));
    }
    Ok(())
}

impl CapacityReport {
    /// Reads and checks a `capacity.json`.
    pub fn read(path: &Path) -> Result<CapacityReport, SweepError> {
        let r: CapacityReport = read_tagged(path, "capacity.json", capacity::FORMAT)?;
        r.check()
            .map_err(|m| SweepError::new(format!("{}: {m}", path.display())))?;
        Ok(r)
    }

    /// Its figures against each other.
    pub fn check(&self) -> Result<(), String> {
        bounds::ATTAINMENT
            .check_named("attainment_target", self.attainment_target)
            .map(|_| ())?;
        bounds::TOLERANCE
            .check_named("tolerance", self.tolerance)
            .map(|_| ())?;
        if self.hours_per_month != HOURS_PER_MONTH {
            return Err(format!(
                "hours_per_month is {}, not {HOURS_PER_MONTH}",
                self.hours_per_month
            ));
        }
        for (i, p) in self.probes.iter().enumerate() {
            check_probe(&format!("probes[{i}]"), p)?;
        }
        check_probe("max_load.at", &self.max_load.at)?;
        if let Some(s) = &self.sizing {
            bounds::DEMAND_RPS
                .check_named("sizing.demand_rps", s.demand_rps)
                .map(|_| ())?;
            bounds::HEADROOM_PERCENT
                .check_named("sizing.headroom (percent)", s.headroom * 100.0)
                .map(|_| ())?;
            if !same(s.sized_for_rps, s.demand_rps * (1.0 + s.headroom)) {
                return Err(format!(
                    "sizing.sized_for_rps {} is not demand_rps × (1 + headroom) = {}",
                    s.sized_for_rps,
                    s.demand_rps * (1.0 + s.headroom)
                ));
            }
            if s.replicas_total != s.replicas_with_headroom.saturating_add(s.spare)
                || s.gpus_total as u64 != s.replicas_total as u64 * s.gpus_per_replica as u64
                || s.replicas_with_headroom < s.replicas_min
            {
                return Err(format!(
                    "sizing: replicas_total {} / gpus_total {} do not follow from replicas_min {}, replicas_with_headroom {}, spare {} and gpus_per_replica {}",
                    s.replicas_total, s.gpus_total, s.replicas_min, s.replicas_with_headroom, s.spare, s.gpus_per_replica
                ));
            }
            check_probe("sizing.at_min", &s.at_min)?;
            check_probe("sizing.at_headroom", &s.at_headroom)?;
            match (s.gpu_hour_usd, s.usd_per_month) {
                (None, None) => {}
                (Some(p), Some(m)) => {
                    bounds::GPU_HOUR_USD
                        .check_named("sizing.gpu_hour_usd", p)
                        .map(|_| ())?;
                    let want = s.gpus_total as f64 * p * HOURS_PER_MONTH;
                    if !same(m, want) {
                        return Err(format!(
                            "sizing.usd_per_month {m} is not gpus_total × gpu_hour_usd × {HOURS_PER_MONTH} h = {want}"
                        ));
                    }
                }
                _ => return Err("sizing: usd_per_month and gpu_hour_usd go together".to_string()),
            }
        }
        Ok(())
    }
}

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
        let want = self.gpus as f64 * self.gpu_hour_usd * HOURS_PER_MONTH;
        if !same(self.usd_per_month, want) {
            return Err(format!(
                "usd_per_month {} is not gpus × gpu_hour_usd × {HOURS_PER_MONTH} h = {want}",
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
        let p: DeployPlan = read_tagged(path, "plan.json", deploy::FORMAT)?;
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
        deploy::rank(&mut ranked);
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every result kind checks its own format tag, so a `plan.json` given
    /// where a `capacity.json` belongs, or one of another version, says so.
    #[test]
    fn format_tags_are_checked_for_every_result_kind() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.json");
        std::fs::write(&p, r#"{"format": "servesim-plan/2"}"#).unwrap();
        let e = CapacityReport::read(&p).unwrap_err();
        assert!(e.0.contains("\"servesim-capacity/1\""), "{e}");
        std::fs::write(&p, r#"{"format": "servesim-plan/1"}"#).unwrap();
        let e = DeployPlan::read(&p).unwrap_err();
        assert!(e.0.contains("is not \"servesim-plan/2\""), "{e}");
        std::fs::write(&p, "{}").unwrap();
        let e = DeployPlan::read(&p).unwrap_err();
        assert!(e.0.contains("no \"format\" tag"), "{e}");
    }
}
