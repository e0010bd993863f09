//! Does the live machine run at the speed the profile measured? `validate`
//! compares every live iteration with the profile's prediction for its shape
//! before it reads the latency table: when live iterations run
//! systematically faster or slower (a different machine, other load, a
//! changed clock), the latency errors are the machine's drift, not the
//! simulator's, and the report says so next to the table.

use serde::Serialize;

/// Median |measured / predicted − 1| above which the profile is called off.
pub const DRIFT_PCT: f64 = 5.0;
/// Share of iterations on one side of the prediction that makes an offset
/// systematic rather than noise (noise splits them about evenly).
pub const SYSTEMATIC_SHARE: f64 = 0.75;

/// The live run's speed against the profile.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Drift {
    pub iterations: usize,
    /// Median of measured / predicted − 1 over all iterations, percent.
    pub median_pct: f64,
    /// Share of iterations slower than predicted.
    pub slower_share: f64,
    /// Median offsets of the first and second half of the run, percent.
    pub first_half_pct: f64,
    pub second_half_pct: f64,
    /// A one-line verdict; `None` when the machine matches the profile.
    pub warning: Option<String>,
}

/// The median of `v` (0 when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Drift of `(measured, predicted)` iteration times, in run order; `None`
/// with fewer than 8 iterations (too few to tell drift from noise).
pub fn drift(iterations: &[(f64, f64)]) -> Option<Drift> {
    let offsets: Vec<f64> = iterations
        .iter()
        .filter(|(m, p)| *m > 0.0 && *p > 0.0)
        .map(|(m, p)| (m / p - 1.0) * 100.0)
        .collect();
    if offsets.len() < 8 {
        return None;
    }
    let n = offsets.len();
    let slower_share = offsets.iter().filter(|&&o| o > 0.0).count() as f64 / n as f64;
    let median_pct = median(offsets.clone());
    let first_half_pct = median(offsets[..n / 2].to_vec());
    let second_half_pct = median(offsets[n / 2..].to_vec());
    let one_sided = slower_share >= SYSTEMATIC_SHARE || slower_share <= 1.0 - SYSTEMATIC_SHARE;
    // A change inside the run is the more specific finding: say it first.
    let warning = if (second_half_pct - first_half_pct).abs() > DRIFT_PCT {
        Some(format!(
            "drift: the machine's speed changed during the live run (iterations {:+.1} % against the profile in the first half, {:+.1} % in the second): other load or a clock change; the latency errors include it",
            first_half_pct, second_half_pct
        ))
    } else if median_pct.abs() > DRIFT_PCT && one_sided {
        let side = if median_pct > 0.0 { "slower" } else { "faster" };
        let share = if median_pct > 0.0 {
            slower_share
        } else {
            1.0 - slower_share
        };
        Some(format!(
            "drift: live iterations run {:.1} % {side} than the profile predicts (median over {n}, {:.0} % of them {side}): a different or differently loaded machine than the one calibrated; the latency errors include it",
            median_pct.abs(),
            share * 100.0,
        ))
    } else {
        None
    };
    Some(Drift {
        iterations: n,
        median_pct,
        slower_share,
        first_half_pct,
        second_half_pct,
        warning,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic ±`noise` wiggle around `scale` × the prediction.
    fn run(n: usize, scale: f64, noise: f64) -> Vec<(f64, f64)> {
        (0..n)
            .map(|i| {
                let p = 10.0 + (i % 7) as f64;
                let w = if i % 2 == 0 { 1.0 + noise } else { 1.0 - noise };
                (p * scale * w, p)
            })
            .collect()
    }

    #[test]
    fn noise_alone_is_not_drift_but_a_slower_machine_is() {
        let quiet = drift(&run(200, 1.0, 0.08)).unwrap();
        assert_eq!(quiet.warning, None, "{quiet:?}");
        // The loaded-machine profile: every latency 2.5–3.3× off.
        let slow = drift(&run(200, 0.35, 0.05)).unwrap();
        let w = slow.warning.unwrap();
        assert!(w.contains("faster") && w.contains("different"), "{w}");
        let late = [run(100, 1.0, 0.02), run(100, 1.3, 0.02)].concat();
        let d = drift(&late).unwrap();
        let w = d.warning.clone().unwrap_or_default();
        assert!(w.contains("changed during"), "{d:?}");
        assert_eq!(drift(&run(5, 2.0, 0.0)), None);
    }
}
