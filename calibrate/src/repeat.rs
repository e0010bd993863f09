//! Repeated live runs: how much of `validate`'s error is the machine's own
//! run-to-run noise. The live engine serves the same requests (same arrival
//! times, same prompts) `k` times; each metric is compared with the mean of
//! the runs, and the spread of the runs around that mean is reported beside
//! the error. A simulator cannot be expected to agree with one live run
//! more closely than two live runs agree with each other — the same reason
//! MLPerf Inference and vLLM's benchmark guides ask for repeated runs before
//! comparing two systems.

use serde::Serialize;

/// One metric over the repeated live runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunSpread {
    /// The metric in each live run, in run order.
    pub runs: Vec<f64>,
    /// Their mean (what the simulation is compared with).
    pub mean: f64,
    /// Largest |run − mean| / mean, percent: how far one live run strays
    /// from the others' average on this machine.
    pub spread_pct: f64,
}

impl RunSpread {
    /// `None` for fewer than two runs (no spread to measure).
    pub fn of(runs: &[f64]) -> Option<RunSpread> {
        if runs.len() < 2 {
            return None;
        }
        let mean = runs.iter().sum::<f64>() / runs.len() as f64;
        let spread_pct = if mean != 0.0 {
            runs.iter()
                .map(|v| ((v - mean) / mean).abs() * 100.0)
                .fold(0.0, f64::max)
        } else {
            0.0
        };
        Some(RunSpread {
            runs: runs.to_vec(),
            mean,
            spread_pct,
        })
    }

    /// Whether an error of `error_pct` against the mean is no larger than
    /// the live runs' own spread (the simulation is as close to the mean as
    /// a live run is).
    pub fn covers(&self, error_pct: f64) -> bool {
        error_pct.abs() <= self.spread_pct
    }
}

/// The one-line verdict printed under the table: how many metrics lie within
/// the live runs' spread.
pub fn verdict(spreads: &[(f64, &RunSpread)]) -> String {
    let within = spreads.iter().filter(|(e, s)| s.covers(*e)).count();
    let widest = spreads
        .iter()
        .map(|(_, s)| s.spread_pct)
        .fold(0.0, f64::max);
    format!(
        "run-to-run: {within} of {} metrics are within the live runs' own spread (widest ±{widest:.1} %); an error inside the spread is the machine's noise, not the simulator's",
        spreads.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_the_largest_deviation_from_the_mean() {
        let s = RunSpread::of(&[98.0, 100.0, 102.0]).unwrap();
        assert_eq!(s.mean, 100.0);
        assert!((s.spread_pct - 2.0).abs() < 1e-12);
        assert!(s.covers(-2.0) && s.covers(1.5) && !s.covers(2.5));
        assert_eq!(RunSpread::of(&[5.0]), None);
        assert_eq!(RunSpread::of(&[0.0, 0.0]).unwrap().spread_pct, 0.0);
    }

    #[test]
    fn verdict_counts_the_metrics_inside_the_spread() {
        let a = RunSpread::of(&[98.0, 102.0]).unwrap();
        let b = RunSpread::of(&[99.0, 101.0]).unwrap();
        let v = verdict(&[(1.0, &a), (3.0, &b)]);
        assert!(v.starts_with("run-to-run: 1 of 2 metrics"), "{v}");
        assert!(v.contains("±2.0 %"), "{v}");
    }
}
