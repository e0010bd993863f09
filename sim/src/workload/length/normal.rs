//! Normal lengths (rounded, and clamped at ≥ 1).

use super::LengthModel;
use crate::rng::StreamRng;
use rand_distr::{Distribution, Normal};

/// Normal(mean, sd) before rounding and clamping.
pub struct NormalLength(Normal<f64>);

impl NormalLength {
    pub fn new(mean: f64, sd: f64) -> NormalLength {
        // Validated: mean > 0, sd ≥ 0 and finite.
        NormalLength(Normal::new(mean, sd).expect("validated normal"))
    }
}

impl LengthModel for NormalLength {
    fn sample(&self, rng: &mut StreamRng) -> f64 {
        self.0.sample(rng)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{moments, LengthSampler};
    use super::*;

    #[test]
    fn mean_and_cv_match_and_clamps_hold() {
        // Far from the clamp, the normal's moments come through rounding.
        let s = LengthSampler::new(Box::new(NormalLength::new(1000.0, 200.0)), None, None);
        let (m, cv) = moments(&s, 2, 200_000);
        assert!(
            (m - 1000.0).abs() < 2.0 && (cv - 0.2).abs() < 0.003,
            "{m} {cv}"
        );
        let s = LengthSampler::new(Box::new(NormalLength::new(10.0, 50.0)), None, Some(20));
        let mut r = crate::rng::stream(3, "t");
        assert!((0..10_000).all(|_| (1..=20).contains(&s.sample(&mut r))));
    }
}
