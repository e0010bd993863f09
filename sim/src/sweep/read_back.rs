//! Result files of the searches read back (`capacity.json`; `plan.json` in
//! `deployment::read_back`, with these helpers):
//! bounded, their format tag checked, and every figure a later command
//! trusts checked against the others it is derived from, so an edited or
//! truncated file is refused with the field named instead of printed,
//! merged or charted as if it were a result.

use super::capacity::{self, CapacityReport, Probe, HOURS_PER_MONTH};
use super::SweepError;
use crate::bounds;
use serde::de::DeserializeOwned;
use std::path::Path;

/// Reads a result file `path` of kind `what` (e.g. "plan.json") whose
/// format tag must be `format`.
pub(crate) fn read_tagged<T: DeserializeOwned>(
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
pub(crate) fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

pub(crate) fn share(field: &str, v: f64) -> Result<(), String> {
    bounds::SHARE.check_named(field, v).map(|_| ())
}

pub(crate) fn non_negative(field: &str, v: f64) -> Result<(), String> {
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
        std::fs::write(&p, "{}").unwrap();
        let e = CapacityReport::read(&p).unwrap_err();
        assert!(e.0.contains("no \"format\" tag"), "{e}");
    }
}
