//! A diurnal sinusoidal rate, the shape production LLM traffic follows over
//! a day (e.g. the Azure LLM and Mooncake traces; Splitwise, ISCA'24, §3).

use super::time_change::CumulativeRate;
use std::f64::consts::TAU;

/// rate(t) = mean · (1 + a · cos(2π (t − peak) / period)), a ∈ [0, 1]; its
/// integral Λ(t) = mean · (t + a·P/2π · (sin(ω(t − peak)) + sin(ω·peak)))
/// is inverted by safeguarded Newton steps.
pub struct Diurnal {
    mean: f64,
    a: f64,
    period: f64,
    peak: f64,
    /// Last inverse, where the next search starts (τ only grows).
    t: f64,
}

impl Diurnal {
    pub fn new(mean: f64, amplitude: f64, period: f64, peak: f64) -> Diurnal {
        Diurnal {
            mean,
            a: amplitude,
            period,
            peak,
            t: 0.0,
        }
    }

    pub fn rate(&self, t: f64) -> f64 {
        self.mean * (1.0 + self.a * (TAU * (t - self.peak) / self.period).cos())
    }

    pub fn cumulative(&self, t: f64) -> f64 {
        let w = TAU / self.period;
        self.mean * (t + self.a / w * ((w * (t - self.peak)).sin() + (w * self.peak).sin()))
    }
}

impl CumulativeRate for Diurnal {
    fn inverse(&mut self, tau: f64) -> Option<f64> {
        // Bracket [lo, hi] with Λ(lo) ≤ τ ≤ Λ(hi): Λ grows without bound
        // (by mean·period over each period), so doubling the step finds hi.
        let mut lo = self.t;
        let mut step = (tau - self.cumulative(lo)).max(0.0) / self.mean + self.period / 64.0;
        let mut hi = lo + step;
        while self.cumulative(hi) < tau {
            lo = hi;
            step *= 2.0;
            hi = lo + step;
        }
        let mut t = (lo + hi) / 2.0;
        for _ in 0..100 {
            let f = self.cumulative(t) - tau;
            if f.abs() <= 1e-12 * tau.max(1.0) {
                break;
            }
            if f < 0.0 {
                lo = t;
            } else {
                hi = t;
            }
            let r = self.rate(t);
            let newton = t - f / r;
            t = if r > 0.0 && newton > lo && newton < hi {
                newton
            } else {
                (lo + hi) / 2.0
            };
            if hi - lo < 1e-12 * hi.max(1.0) {
                break;
            }
        }
        self.t = t;
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ArrivalProcess, TimeChanged};
    use super::*;
    use crate::rng;

    #[test]
    fn inverse_inverts_the_cumulative_rate() {
        let mut d = Diurnal::new(3.0, 1.0, 100.0, 30.0);
        for tau in [0.5, 10.0, 150.0, 151.0, 3000.0] {
            let t = d.inverse(tau).unwrap();
            assert!((d.cumulative(t) - tau).abs() < 1e-6, "{tau} → {t}");
        }
    }

    #[test]
    fn arrivals_follow_the_sinusoid() {
        // Mean 20/s, amplitude 0.8, period 100 s, peak at 25 s.
        let mut p = TimeChanged::new(Diurnal::new(20.0, 0.8, 100.0, 25.0), 1.0);
        let shape = Diurnal::new(20.0, 0.8, 100.0, 25.0);
        let mut r = rng::stream(5, "t");
        let mut bins = [0.0f64; 10];
        let periods = 150.0;
        while let Some(t) = p.next_arrival(&mut r) {
            if t >= 100.0 * periods {
                break;
            }
            bins[((t % 100.0) / 10.0) as usize] += 1.0;
        }
        for (k, got) in bins.iter().enumerate() {
            let lo = k as f64 * 10.0;
            let want = (shape.cumulative(lo + 10.0) - shape.cumulative(lo)) * periods;
            assert!((got / want - 1.0).abs() < 0.05, "bin {k}: {got} vs {want}");
        }
        // The busiest bin holds the peak, the quietest is half a period away.
        let max = bins.iter().cloned().fold(0.0, f64::max);
        assert_eq!(bins[2], max);
        assert!(bins[7] < 0.2 * max);
    }
}
