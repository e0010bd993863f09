//! Gamma renewal arrivals, the bursty-arrival model of AlpaServe (Li et al.,
//! OSDI'23) and ServeGen (Xiang et al., 2025).

use super::ArrivalProcess;
use crate::rng::StreamRng;
use rand_distr::{Distribution, Gamma};

/// A renewal process with Gamma gaps of mean 1/`rate` and coefficient of
/// variation `cv`: Gamma(k, θ) has mean kθ and CV 1/√k, so k = 1/cv² and
/// θ = 1/(rate·k).
pub struct GammaRenewal {
    gaps: Gamma<f64>,
    t: f64,
}

impl GammaRenewal {
    pub fn new(rate: f64, cv: f64) -> GammaRenewal {
        let k = 1.0 / (cv * cv);
        GammaRenewal {
            gaps: Gamma::new(k, 1.0 / (rate * k)).expect("validated gamma"),
            t: 0.0,
        }
    }
}

impl ArrivalProcess for GammaRenewal {
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
    fn gaps_have_their_mean_and_cv() {
        for (rate, cv, seed) in [(10.0, 3.0, 2), (2.0, 0.5, 3)] {
            let (m, c) = gap_stats(
                &mut GammaRenewal::new(rate, cv),
                &mut rng::stream(seed, "t"),
                300_000,
            );
            assert!((m * rate - 1.0).abs() < 0.02, "rate {rate}: mean {m}");
            assert!((c / cv - 1.0).abs() < 0.03, "cv {cv}: {c}");
        }
    }
}
