//! Poisson arrivals: independent exponential gaps.

use super::ArrivalProcess;
use crate::rng::StreamRng;
use rand_distr::{Distribution, Exp};

/// A homogeneous Poisson process at `rate` requests/s (exponential gaps of
/// mean 1/rate, CV 1).
pub struct Poisson {
    gaps: Exp<f64>,
    /// Exact f64 seconds, so rounding to nanoseconds does not accumulate.
    t: f64,
}

impl Poisson {
    pub fn new(rate: f64) -> Poisson {
        Poisson {
            gaps: Exp::new(rate).expect("validated rate"),
            t: 0.0,
        }
    }
}

impl ArrivalProcess for Poisson {
    fn next_arrival(&mut self, rng: &mut StreamRng) -> Option<f64> {
        self.t += self.gaps.sample(rng);
        Some(self.t)
    }
}

#[cfg(test)]
mod tests {
    use super::super::gap_stats;
    use super::*;
    use crate::rng;

    #[test]
    fn gaps_have_mean_one_over_rate_and_cv_one() {
        let (m, cv) = gap_stats(&mut Poisson::new(4.0), &mut rng::stream(1, "t"), 200_000);
        assert!(
            (m - 0.25).abs() < 0.0025 && (cv - 1.0).abs() < 0.02,
            "{m} {cv}"
        );
    }
}
