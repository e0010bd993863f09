//! Zipf lengths: a few lengths very common, a long tail of rare ones.

use super::LengthModel;
use crate::rng::StreamRng;
use rand_distr::{Distribution, Zipf};

/// Zipf on 1..=n with P(k) ∝ k^(−s) (rand_distr's rejection sampler,
/// Hörmann & Derflinger, "Rejection-inversion to generate variates from
/// monotone discrete distributions", 1996).
pub struct ZipfLength(Zipf<f64>);

impl ZipfLength {
    pub fn new(n: u32, exponent: f64) -> ZipfLength {
        ZipfLength(Zipf::new(n as f64, exponent).expect("validated zipf"))
    }
}

impl LengthModel for ZipfLength {
    fn sample(&self, rng: &mut StreamRng) -> f64 {
        self.0.sample(rng)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{moments, LengthSampler};
    use super::*;

    #[test]
    fn mean_and_cv_match_the_generalized_harmonic_numbers() {
        for (n, s) in [(1000u32, 1.2), (200, 0.7)] {
            // E[K^j] = H(n, s − j) / H(n, s), H(n, a) = Σ k^−a.
            let h = |a: f64| (1..=n).map(|k| (k as f64).powf(-a)).sum::<f64>();
            let mean = h(s - 1.0) / h(s);
            let var = h(s - 2.0) / h(s) - mean * mean;
            let smp = LengthSampler::new(Box::new(ZipfLength::new(n, s)), None, None);
            let (m, cv) = moments(&smp, 6, 400_000);
            assert!((m / mean - 1.0).abs() < 0.02, "n {n} s {s}: {m} vs {mean}");
            assert!((cv / (var.sqrt() / mean) - 1.0).abs() < 0.03, "{cv}");
        }
    }
}
