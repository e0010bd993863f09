//! The mean of a length distribution as the workload draws it: each sample
//! rounded to the nearest integer and clamped to [min, max] (min at least
//! 1), the rule of `workload::LengthSampler`. The offered load of a
//! conversation workload is its opening rate times the mean turns, so the
//! mean must be that of the clamped integers, not of the raw model.

use super::LengthDist;
use statrs::function::erf::erfc;

/// Survival probabilities below this no longer move a mean of lengths.
const TAIL: f64 = 1e-13;

impl LengthDist {
    /// The mean of the lengths drawn (rounded, clamped), or `None` for an
    /// empirical distribution held in a file or a trace, which the
    /// configuration does not read.
    pub fn mean(&self) -> Option<f64> {
        let lo_of = |min: Option<u32>| min.unwrap_or(1).max(1);
        let hi_of = |max: Option<u32>| max.unwrap_or(u32::MAX);
        let clamp = |v: f64, lo: u32, hi: u32| v.clamp(lo as f64, hi.max(lo) as f64);
        match self {
            LengthDist::Fixed { value } => Some((*value).max(1) as f64),
            LengthDist::Uniform { min, max } => {
                // Integers min..=max, equally likely, each clamped to ≥ 1.
                let (a, b) = (*min as f64, (*max).max(*min) as f64);
                let n = b - a + 1.0;
                let zeros = if *min == 0 { 1.0 } else { 0.0 };
                Some(((a + b) / 2.0 * n + zeros) / n)
            }
            LengthDist::Normal { mean, sd, min, max } => {
                let (lo, hi) = (lo_of(*min), hi_of(*max));
                if *sd <= 0.0 {
                    return Some(clamp(mean.round(), lo, hi));
                }
                let (m, s) = (*mean, *sd);
                Some(survival_mean(lo, hi, |x| {
                    0.5 * erfc((x - m) / (s * std::f64::consts::SQRT_2))
                }))
            }
            LengthDist::Lognormal { mean, cv, min, max } => {
                let (lo, hi) = (lo_of(*min), hi_of(*max));
                if *cv <= 0.0 {
                    return Some(clamp(mean.round(), lo, hi));
                }
                // rand_distr's `LogNormal::from_mean_cv`.
                let s2 = (1.0 + cv * cv).ln();
                let (mu, s) = (mean.ln() - s2 / 2.0, s2.sqrt());
                Some(survival_mean(lo, hi, |x| {
                    0.5 * erfc((x.ln() - mu) / (s * std::f64::consts::SQRT_2))
                }))
            }
            LengthDist::Zipf {
                exponent,
                n,
                min,
                max,
            } => {
                let (lo, hi) = (lo_of(*min), hi_of(*max));
                let (mut w, mut wv) = (0.0, 0.0);
                for k in 1..=*n {
                    let p = (k as f64).powf(-exponent);
                    w += p;
                    wv += p * clamp(k as f64, lo, hi);
                }
                Some(wv / w)
            }
            LengthDist::Empirical {
                values: Some(values),
                weights,
                min,
                max,
                ..
            } => {
                let (lo, hi) = (lo_of(*min), hi_of(*max));
                let weight = |i: usize| weights.as_ref().map_or(1.0, |w| w[i]);
                let total: f64 = (0..values.len()).map(weight).sum();
                let sum: f64 = values
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| weight(i) * clamp(v as f64, lo, hi))
                    .sum();
                (total > 0.0).then(|| sum / total)
            }
            LengthDist::Empirical { .. } => None,
        }
    }
}

/// E[clamp(round(X), lo, hi)] = lo + Σ_{k=lo}^{hi−1} P(X ≥ k + ½) for a
/// continuous X with survival function `survival`, summed until the tail
/// no longer counts.
fn survival_mean(lo: u32, hi: u32, survival: impl Fn(f64) -> f64) -> f64 {
    let mut sum = lo as f64;
    let mut k = lo;
    while k < hi {
        let p = survival(k as f64 + 0.5);
        if p < TAIL && k as f64 > 1.0 {
            break;
        }
        sum += p;
        k += 1;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discrete_means_are_exact() {
        assert_eq!(LengthDist::Uniform { min: 1, max: 6 }.mean(), Some(3.5));
        // 0 is clamped to 1: (1 + 1 + 2) / 3.
        assert_eq!(
            LengthDist::Uniform { min: 0, max: 2 }.mean(),
            Some(4.0 / 3.0)
        );
        assert_eq!(LengthDist::Fixed { value: 4 }.mean(), Some(4.0));
        let e = LengthDist::Empirical {
            file: None,
            values: Some(vec![1, 2, 8]),
            weights: Some(vec![0.5, 0.25, 0.25]),
            trace: None,
            column: None,
            min: None,
            max: Some(6),
        };
        assert_eq!(e.mean(), Some(0.5 + 0.5 + 1.5));
        let from_file = LengthDist::Empirical {
            file: Some("pmf.csv".into()),
            values: None,
            weights: None,
            trace: None,
            column: None,
            min: None,
            max: None,
        };
        assert_eq!(from_file.mean(), None);
    }
}
