//! On/off bursts: a two-state Markov-modulated Poisson process (MMPP-2;
//! Fischer & Meier-Hellstern, "The Markov-modulated Poisson process (MMPP)
//! cookbook", Performance Evaluation 18, 1993).

use super::ArrivalProcess;
use crate::rng::StreamRng;
use rand::Rng;
use rand_distr::{Distribution, Exp};

/// A source that alternates between an on state (Poisson arrivals at
/// `on_rate`) and an off state (Poisson at `off_rate`, often 0), staying in
/// each for exponential periods of mean `mean_on_s` / `mean_off_s`. It
/// starts in its stationary state distribution, so the stream is stationary
/// from t = 0; its long-run rate is
/// (on_rate·mean_on_s + off_rate·mean_off_s) / (mean_on_s + mean_off_s).
pub struct OnOff {
    on_rate: f64,
    off_rate: f64,
    mean_on_s: f64,
    mean_off_s: f64,
    unit: Exp<f64>,
    on: bool,
    /// Time left in the current state, seconds; negative before the start.
    left: f64,
    t: f64,
}

impl OnOff {
    pub fn new(on_rate: f64, off_rate: f64, mean_on_s: f64, mean_off_s: f64) -> OnOff {
        OnOff {
            on_rate,
            off_rate,
            mean_on_s,
            mean_off_s,
            unit: Exp::new(1.0).expect("unit exponential"),
            on: true,
            left: -1.0,
            t: 0.0,
        }
    }

    fn sojourn(&self, rng: &mut StreamRng) -> f64 {
        let mean = if self.on {
            self.mean_on_s
        } else {
            self.mean_off_s
        };
        self.unit.sample(rng) * mean
    }
}

impl ArrivalProcess for OnOff {
    fn next_arrival(&mut self, rng: &mut StreamRng) -> Option<f64> {
        if self.left < 0.0 {
            let p_on = self.mean_on_s / (self.mean_on_s + self.mean_off_s);
            self.on = rng.random::<f64>() < p_on;
            self.left = self.sojourn(rng);
        }
        loop {
            let rate = if self.on { self.on_rate } else { self.off_rate };
            if rate > 0.0 {
                // Exponential gaps are memoryless, so a gap that outlasts the
                // state is simply discarded at the switch.
                let gap = self.unit.sample(rng) / rate;
                if gap < self.left {
                    self.left -= gap;
                    self.t += gap;
                    return Some(self.t);
                }
            }
            self.t += self.left;
            self.on = !self.on;
            self.left = self.sojourn(rng);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::gap_stats;
    use super::*;
    use crate::rng;

    /// Mean and CV of the stationary inter-arrival time of an MMPP-2, from
    /// its Markovian arrival process form (D0, D1): with φ = πD1 / πD1·1 the
    /// state seen by an arrival, E[X^k] = k! φ (−D0)^−k 1.
    fn analytic(l1: f64, l0: f64, m1: f64, m0: f64) -> (f64, f64) {
        let (r1, r0) = (1.0 / m1, 1.0 / m0);
        // −D0 = [[l1 + r1, −r1], [−r0, l0 + r0]]
        let (a, b, c, d) = (l1 + r1, -r1, -r0, l0 + r0);
        let det = a * d - b * c;
        let inv = [[d / det, -b / det], [-c / det, a / det]];
        let pi = [m1 / (m1 + m0), m0 / (m1 + m0)];
        let w = [pi[0] * l1, pi[1] * l0];
        let phi = [w[0] / (w[0] + w[1]), w[1] / (w[0] + w[1])];
        let mul = |v: [f64; 2]| {
            [
                v[0] * inv[0][0] + v[1] * inv[1][0],
                v[0] * inv[0][1] + v[1] * inv[1][1],
            ]
        };
        let v1 = mul(phi);
        let v2 = mul(v1);
        let m = v1[0] + v1[1];
        let second = 2.0 * (v2[0] + v2[1]);
        (m, (second - m * m).sqrt() / m)
    }

    #[test]
    fn gaps_match_the_markov_modulated_analysis() {
        for (l1, l0, m1, m0, seed) in [(50.0, 0.0, 2.0, 8.0, 1), (20.0, 2.0, 1.0, 3.0, 2)] {
            let (want_m, want_cv) = analytic(l1, l0, m1, m0);
            // The long-run rate agrees with the mean gap.
            let rate = (l1 * m1 + l0 * m0) / (m1 + m0);
            assert!((want_m * rate - 1.0).abs() < 1e-9);
            let (m, cv) = gap_stats(
                &mut OnOff::new(l1, l0, m1, m0),
                &mut rng::stream(seed, "t"),
                400_000,
            );
            assert!((m / want_m - 1.0).abs() < 0.03, "mean {m} vs {want_m}");
            assert!((cv / want_cv - 1.0).abs() < 0.04, "cv {cv} vs {want_cv}");
            assert!(want_cv > 1.5, "bursty: {want_cv}");
        }
    }
}
