//! Log-normal lengths, the usual fit of LLM prompt and output lengths
//! (e.g. ShareGPT; Kwon et al., vLLM, SOSP'23, Fig. 11).

use super::LengthModel;
use crate::rng::StreamRng;
use rand_distr::{Distribution, LogNormal};

/// A log-normal given by its mean and coefficient of variation.
pub struct LogNormalLength(LogNormal<f64>);

impl LogNormalLength {
    pub fn new(mean: f64, cv: f64) -> LogNormalLength {
        LogNormalLength(LogNormal::from_mean_cv(mean, cv).expect("validated lognormal"))
    }
}

impl LengthModel for LogNormalLength {
    fn sample(&self, rng: &mut StreamRng) -> f64 {
        self.0.sample(rng)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{moments, LengthSampler};
    use super::*;

    #[test]
    fn mean_and_cv_match() {
        let s = LengthSampler::new(Box::new(LogNormalLength::new(500.0, 0.8)), None, None);
        let (m, cv) = moments(&s, 4, 400_000);
        assert!((m / 500.0 - 1.0).abs() < 0.01, "{m}");
        assert!((cv / 0.8 - 1.0).abs() < 0.03, "{cv}");
        let s = LengthSampler::new(
            Box::new(LogNormalLength::new(500.0, 1.0)),
            Some(4),
            Some(4000),
        );
        let mut r = crate::rng::stream(5, "t");
        assert!((0..10_000).all(|_| (4..=4000).contains(&s.sample(&mut r))));
    }
}
