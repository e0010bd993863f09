//! Is the machine quiet enough to calibrate on? A profile measured on a
//! loaded machine predicts every latency of an idle one 2.5–3.3× too slow,
//! and a noisy one makes a fit whose shapes disagree between runs. Three
//! signals, each reported plainly:
//!
//! - **Spread of repeated shapes.** The 95 % confidence interval of each
//!   shape's median from order statistics (distribution-free: the median lies
//!   between the order statistics of rank n/2 ± 0.98·√n with 95 %
//!   probability, Conover, *Practical Nonparametric Statistics*, §3.2).
//!   `calibrate` repeats rounds of the shapes whose interval is wider than
//!   [`CI_TARGET_PCT`] until it is tight or [`MAX_EXTRA_ROUNDS`] pass.
//! - **Other load.** The 1-minute load average (`/proc/loadavg`) against the
//!   CPUs (Linux); more runnable threads than CPUs means other work competes
//!   with the measurement.
//! - **Drift between rounds.** The median of each round against the whole
//!   run (a frequency change or a load that came and went moves whole rounds;
//!   [`round_speeds_pct`], reported past [`ROUND_SPREAD_PCT`]). A CPU's clock
//!   is not read directly — `scaling_cur_freq` is absent in most VMs and
//!   containers — but a frequency step shows here as a slow or fast round.

use serde::Serialize;

/// Widest acceptable 95 % interval of a shape's median, ± percent.
pub const CI_TARGET_PCT: f64 = 2.0;
/// Rounds of the loose shapes `calibrate` adds at most.
pub const MAX_EXTRA_ROUNDS: u32 = 12;
/// Widest acceptable spread of the rounds' speeds, percent: each base round
/// times every shape once (in a fresh order), so a round whose shapes run
/// 5 % slower than their medians, and another 5 % faster, means the machine
/// itself changed speed (a frequency step, a load that came and went).
pub const ROUND_SPREAD_PCT: f64 = 5.0;

/// Shapes needed before the rounds' speeds are judged.
pub const ROUND_MIN_SHAPES: usize = 8;

/// How fast each base round ran against the whole run: for round `r`, the
/// median over shapes of `times[r] / median`, minus 1, percent. Only the
/// rounds every shape has are compared (extra rounds repeat loose shapes
/// only, so they are no sample of the machine's speed).
pub fn round_speeds_pct(times: &[Vec<u64>]) -> Vec<f64> {
    let rounds = times.iter().map(Vec::len).min().unwrap_or(0);
    let medians: Vec<f64> = times
        .iter()
        .map(|t| {
            let mut s = t.clone();
            s.sort_unstable();
            let n = s.len();
            if n == 0 {
                0.0
            } else if n % 2 == 1 {
                s[n / 2] as f64
            } else {
                (s[n / 2 - 1] + s[n / 2]) as f64 / 2.0
            }
        })
        .collect();
    (0..rounds)
        .map(|r| {
            let mut ratios: Vec<f64> = times
                .iter()
                .zip(&medians)
                .filter(|(_, &m)| m > 0.0)
                .map(|(t, &m)| t[r] as f64 / m)
                .collect();
            ratios.sort_by(f64::total_cmp);
            let n = ratios.len();
            if n == 0 {
                return 0.0;
            }
            let med = if n % 2 == 1 {
                ratios[n / 2]
            } else {
                (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0
            };
            (med - 1.0) * 100.0
        })
        .collect()
}

/// ± half-width of the 95 % confidence interval of the median of `times`,
/// as a percent of the median; `f64::INFINITY` with fewer than 3 samples.
pub fn median_ci_pct(times: &[u64]) -> f64 {
    let n = times.len();
    if n < 3 {
        return f64::INFINITY;
    }
    let mut s = times.to_vec();
    s.sort_unstable();
    let half = 0.98 * (n as f64).sqrt();
    let lo = ((n as f64 / 2.0 - half).floor().max(0.0)) as usize;
    let hi = ((n as f64 / 2.0 + half).ceil() as usize).min(n - 1);
    let med = if n % 2 == 1 {
        s[n / 2] as f64
    } else {
        (s[n / 2 - 1] + s[n / 2]) as f64 / 2.0
    };
    if med <= 0.0 {
        return f64::INFINITY;
    }
    (s[hi] - s[lo]) as f64 / 2.0 / med * 100.0
}

/// The calibration's noise verdict.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct NoiseReport {
    pub shapes: usize,
    /// Shapes whose median's interval stayed wider than [`CI_TARGET_PCT`].
    pub loose_shapes: usize,
    /// The widest interval, ± percent.
    pub worst_ci_pct: f64,
    /// Extra rounds run to tighten the loose shapes.
    pub extra_rounds: u32,
    /// Slowest minus fastest base round against the shapes' medians, percent
    /// ([`round_speeds_pct`]).
    pub round_spread_pct: f64,
    /// 1-minute load average and CPUs, where the OS says.
    pub load_average: Option<f64>,
    pub cpus: usize,
    /// One line per finding; empty when the machine was quiet.
    pub findings: Vec<String>,
}

impl NoiseReport {
    pub fn quiet(&self) -> bool {
        self.findings.is_empty()
    }
}

/// The 1-minute load average (Linux `/proc/loadavg`).
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Judges the repeated times of every shape; `threads` is how many CPU
/// threads the measurement itself keeps busy.
pub fn judge(
    times: &[Vec<u64>],
    extra_rounds: u32,
    load: Option<f64>,
    cpus: usize,
    threads: usize,
) -> NoiseReport {
    let cis: Vec<f64> = times.iter().map(|t| median_ci_pct(t)).collect();
    let loose = cis.iter().filter(|&&c| c > CI_TARGET_PCT).count();
    let worst = cis.iter().cloned().fold(0.0, f64::max);
    let speeds = round_speeds_pct(times);
    let slowest = speeds.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let fastest = speeds.iter().cloned().fold(f64::INFINITY, f64::min);
    // A round's speed is a median over shapes: with few shapes one noisy
    // shape would be the round.
    let round_spread_pct = if speeds.len() >= 2 && times.len() >= ROUND_MIN_SHAPES {
        slowest - fastest
    } else {
        0.0
    };
    let mut findings = Vec::new();
    if loose > 0 {
        // A few shapes just past the target are a footnote, not a verdict
        // on the machine: say which it is.
        let mild = loose * 10 <= times.len() && worst <= 2.0 * CI_TARGET_PCT;
        let verdict = if mild {
            "the other shapes are within it, so the profile stands; these few medians are less certain"
        } else {
            "the machine is too noisy for a reproducible profile"
        };
        findings.push(format!(
            "{loose} of {} shapes could not be measured to ±{CI_TARGET_PCT} % (95 % interval of the median; widest ±{worst:.1} %) after {extra_rounds} extra rounds: {verdict}",
            times.len()
        ));
    }
    if round_spread_pct > ROUND_SPREAD_PCT {
        findings.push(format!(
            "speed changed between rounds: the slowest round ran {slowest:+.1} % against the shapes' medians, the fastest {fastest:+.1} % (all shapes, each round in a fresh order): a clock-frequency change or a load that came and went during the calibration"
        ));
    }
    if let Some(l) = load {
        // The measurement's own threads count toward the load.
        let others = l - threads as f64;
        if others > 0.5 * cpus as f64 {
            findings.push(format!(
                "other load: 1-minute load average {l:.1} on {cpus} CPUs while calibrating with {threads} thread(s); the profile will be slower than this machine when idle"
            ));
        }
    }
    NoiseReport {
        shapes: times.len(),
        loose_shapes: loose,
        worst_ci_pct: worst,
        extra_rounds,
        round_spread_pct,
        load_average: load,
        cpus,
        findings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tight_repeats_pass_and_noisy_ones_are_named() {
        let tight = tight_times();
        assert!(median_ci_pct(&tight) < CI_TARGET_PCT);
        // 10–30 ms: a loaded machine.
        let noisy: Vec<u64> = (0..15)
            .map(|i| 10_000_000 + (i * 7 % 15) * 1_400_000)
            .collect();
        assert!(median_ci_pct(&noisy) > 10.0);
        assert_eq!(median_ci_pct(&[1, 2]), f64::INFINITY);

        let quiet = judge(&[tight.clone(), tight.clone()], 0, Some(1.1), 8, 1);
        assert!(quiet.quiet(), "{quiet:?}");
        let loud = judge(&[tight, noisy], 12, Some(15.0), 2, 1);
        assert_eq!(loud.loose_shapes, 1);
        assert_eq!(loud.findings.len(), 2, "{loud:?}");
        assert!(loud.findings[0].contains("too noisy") && loud.findings[1].contains("other load"));

        // One shape of twenty, a little past the target: named, not condemned.
        let slightly: Vec<u64> = (0..15)
            .map(|i| 10_000_000 + (i * 7 % 15) * 60_000)
            .collect();
        let c = median_ci_pct(&slightly);
        assert!(c > CI_TARGET_PCT && c <= 2.0 * CI_TARGET_PCT, "{c}");
        let mut shapes = vec![tight_times(); 19];
        shapes.push(slightly);
        let mild = judge(&shapes, 3, Some(1.1), 8, 1);
        assert_eq!(mild.loose_shapes, 1);
        assert!(mild.findings[0].contains("profile stands"), "{mild:?}");
    }

    /// ±0.5 % around 10 ms: tight.
    fn tight_times() -> Vec<u64> {
        (0..15).map(|i| 10_000_000 + (i % 3) * 50_000).collect()
    }

    #[test]
    fn a_round_that_ran_slow_is_a_speed_change() {
        // Twenty shapes, seven rounds, ±0.5 % jitter: steady.
        let steady: Vec<Vec<u64>> = (0..20u64)
            .map(|k| {
                (0..7u64)
                    .map(|r| 1_000_000 * (k + 1) + (r * 7 + k) % 3 * 5_000 * (k + 1))
                    .collect()
            })
            .collect();
        let speeds = round_speeds_pct(&steady);
        assert_eq!(speeds.len(), 7);
        assert!(speeds.iter().all(|s| s.abs() < 1.5), "{speeds:?}");
        let j = judge(&steady, 0, None, 8, 1);
        assert!(j.quiet(), "{j:?}");
        // Round 4 ran 12 % slow on every shape (a clock step down and back).
        let mut slow = steady.clone();
        for t in &mut slow {
            t[4] = t[4] * 112 / 100;
        }
        let j = judge(&slow, 0, None, 8, 1);
        assert!(j.round_spread_pct > 10.0, "{j:?}");
        assert!(
            j.findings
                .iter()
                .any(|f| f.contains("speed changed between rounds")),
            "{j:?}"
        );
        // Extra rounds of a few shapes do not count as rounds.
        let mut extra = steady;
        extra[0].extend([9_000_000, 9_000_000]);
        assert_eq!(round_speeds_pct(&extra).len(), 7);
    }
}
