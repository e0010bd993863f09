//! Uniform lengths, as benchmark tools' `--random-range-ratio` style inputs.

use super::LengthModel;
use crate::rng::StreamRng;
use rand::Rng;

/// Integers uniform on [min, max]: mean (min+max)/2.
pub struct UniformLength {
    min: u32,
    max: u32,
}

impl UniformLength {
    pub fn new(min: u32, max: u32) -> UniformLength {
        UniformLength { min, max }
    }
}

impl LengthModel for UniformLength {
    fn sample(&self, rng: &mut StreamRng) -> f64 {
        rng.random_range(self.min..=self.max) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::super::{moments, LengthSampler};
    use super::*;

    #[test]
    fn mean_and_cv_match_the_discrete_uniform() {
        let s = LengthSampler::new(Box::new(UniformLength::new(3, 5)), Some(3), Some(5));
        // Discrete uniform on {3,4,5}: mean 4, variance 2/3.
        let (m, cv) = moments(&s, 1, 100_000);
        assert!((m - 4.0).abs() < 0.01, "{m}");
        assert!((cv - (2.0f64 / 3.0).sqrt() / 4.0).abs() < 0.005, "{cv}");
    }
}
