//! Weibull renewal arrivals given by rate and CV. ServeGen (Xiang et al.,
//! 2025) fits Weibull as well as Gamma gaps to per-client arrivals; the
//! Weibull's heavier tail at low shapes gives long silences between bursts.

use super::ArrivalProcess;
use crate::rng::StreamRng;
use crate::scenario::WEIBULL_SHAPE_RANGE;
use rand_distr::{Distribution, Weibull};
use statrs::function::gamma::ln_gamma;

pub use crate::stats::weibull_cv_of_shape as cv_of_shape;

/// The shape whose CV is `cv` (the CV falls as the shape grows), by
/// bisection on log k within `WEIBULL_SHAPE_RANGE` (validated to contain it).
pub fn shape_for_cv(cv: f64) -> f64 {
    let (mut lo, mut hi) = (WEIBULL_SHAPE_RANGE.0.ln(), WEIBULL_SHAPE_RANGE.1.ln());
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if cv_of_shape(mid.exp()) > cv {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (0.5 * (lo + hi)).exp()
}

/// A renewal process with Weibull gaps of mean 1/`rate` and CV `cv`: shape k
/// from the CV, scale λ = 1 / (rate · Γ(1 + 1/k)).
pub struct WeibullRenewal {
    gaps: Weibull<f64>,
    t: f64,
}

impl WeibullRenewal {
    pub fn new(rate: f64, cv: f64) -> WeibullRenewal {
        let k = shape_for_cv(cv);
        let scale = 1.0 / (rate * ln_gamma(1.0 + 1.0 / k).exp());
        WeibullRenewal {
            gaps: Weibull::new(scale, k).expect("validated weibull"),
            t: 0.0,
        }
    }
}

impl ArrivalProcess for WeibullRenewal {
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
    fn shape_solver_inverts_the_cv() {
        // Shape 1 is the exponential (CV 1); shape 2 the Rayleigh
        // (CV √(4/π − 1) ≈ 0.5227).
        assert!((cv_of_shape(1.0) - 1.0).abs() < 1e-9);
        assert!((cv_of_shape(2.0) - (4.0 / std::f64::consts::PI - 1.0).sqrt()).abs() < 1e-9);
        for cv in [0.2, 0.5227, 1.0, 2.0, 5.0] {
            assert!(
                (cv_of_shape(shape_for_cv(cv)) / cv - 1.0).abs() < 1e-9,
                "{cv}"
            );
        }
        assert!((shape_for_cv(1.0) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn gaps_have_their_mean_and_cv() {
        for (rate, cv, seed) in [(5.0, 2.0, 4), (1.0, 0.4, 5)] {
            let (m, c) = gap_stats(
                &mut WeibullRenewal::new(rate, cv),
                &mut rng::stream(seed, "t"),
                400_000,
            );
            assert!((m * rate - 1.0).abs() < 0.02, "rate {rate}: mean {m}");
            assert!((c / cv - 1.0).abs() < 0.04, "cv {cv}: {c}");
        }
    }
}
