//! A piecewise-constant rate schedule (e.g. a load test's stages, or an
//! hourly rate profile read off a production trace).

use super::time_change::CumulativeRate;
use crate::scenario::RateStep;

/// Rate `steps[i].1` from `steps[i].0` until the next step; the last step
/// lasts forever, or until `period` when the schedule repeats.
pub struct Piecewise {
    /// (start s, rate, Λ at start) for one period (or the whole schedule).
    steps: Vec<(f64, f64, f64)>,
    period: Option<f64>,
    /// Λ over one period.
    per_period: f64,
    /// Cursor: current period index and step.
    cycle: u64,
    i: usize,
}

impl Piecewise {
    pub fn new(schedule: &[RateStep], period: Option<f64>) -> Piecewise {
        let mut steps = Vec::with_capacity(schedule.len());
        let mut acc = 0.0;
        for (i, s) in schedule.iter().enumerate() {
            steps.push((s.start_s, s.rate, acc));
            let end = schedule
                .get(i + 1)
                .map(|n| n.start_s)
                .or(period)
                .unwrap_or(f64::INFINITY);
            if end.is_finite() {
                acc += s.rate * (end - s.start_s);
            }
        }
        Piecewise {
            steps,
            period,
            per_period: acc,
            cycle: 0,
            i: 0,
        }
    }

    fn step_end(&self, i: usize) -> f64 {
        self.steps
            .get(i + 1)
            .map(|s| s.0)
            .or(self.period)
            .unwrap_or(f64::INFINITY)
    }
}

impl CumulativeRate for Piecewise {
    fn inverse(&mut self, tau: f64) -> Option<f64> {
        loop {
            let base_tau = self.cycle as f64 * self.per_period;
            let base_t = self.period.map_or(0.0, |p| self.cycle as f64 * p);
            let (start, rate, lam0) = self.steps[self.i];
            let end = self.step_end(self.i);
            let lam_end = lam0
                + if end.is_finite() {
                    rate * (end - start)
                } else {
                    f64::INFINITY
                };
            let local = tau - base_tau;
            if rate > 0.0 && local <= lam_end {
                return Some(base_t + start + (local - lam0) / rate);
            }
            // Move on to the next step (or period).
            if self.i + 1 < self.steps.len() {
                self.i += 1;
            } else if self.period.is_some() {
                self.i = 0;
                self.cycle += 1;
            } else {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ArrivalProcess, TimeChanged};
    use super::*;
    use crate::rng;

    fn steps(v: &[(f64, f64)]) -> Vec<RateStep> {
        v.iter()
            .map(|&(start_s, rate)| RateStep { start_s, rate })
            .collect()
    }

    fn counts(p: &mut dyn ArrivalProcess, until: f64, bin: f64) -> Vec<f64> {
        let mut c = vec![0.0; (until / bin) as usize];
        let mut r = rng::stream(3, "t");
        while let Some(t) = p.next_arrival(&mut r) {
            if t >= until {
                break;
            }
            c[(t / bin) as usize] += 1.0;
        }
        c
    }

    #[test]
    fn arrivals_per_step_follow_the_schedule() {
        // 10/s for 100 s, silence for 50 s, 40/s for 50 s, repeating.
        let s = steps(&[(0.0, 10.0), (100.0, 0.0), (150.0, 40.0)]);
        let mut p = TimeChanged::new(Piecewise::new(&s, Some(200.0)), 1.0);
        let c = counts(&mut p, 20_000.0, 50.0);
        // Bins of 50 s: per period [500, 500, 0, 2000] expected.
        let want = [500.0, 500.0, 0.0, 2000.0];
        for (k, w) in want.iter().enumerate() {
            let got: f64 = c.iter().skip(k).step_by(4).sum::<f64>() / 100.0;
            assert!((got - w).abs() <= 0.02 * w + 0.5, "bin {k}: {got} vs {w}");
        }
    }

    #[test]
    fn a_schedule_ending_in_silence_ends_the_stream() {
        let s = steps(&[(0.0, 5.0), (10.0, 0.0)]);
        let mut p = TimeChanged::new(Piecewise::new(&s, None), 1.0);
        let mut r = rng::stream(1, "t");
        let mut n = 0;
        while let Some(t) = p.next_arrival(&mut r) {
            assert!(t <= 10.0);
            n += 1;
        }
        assert!((30..=80).contains(&n), "{n}");
        assert_eq!(p.next_arrival(&mut r), None);
    }

    #[test]
    fn gamma_gaps_keep_their_cv_under_a_constant_schedule() {
        let s = steps(&[(0.0, 8.0)]);
        let mut p = TimeChanged::new(Piecewise::new(&s, None), 2.5);
        let (m, cv) = super::super::gap_stats(&mut p, &mut rng::stream(9, "t"), 200_000);
        assert!(
            (m * 8.0 - 1.0).abs() < 0.03 && (cv / 2.5 - 1.0).abs() < 0.04,
            "{m} {cv}"
        );
    }
}
