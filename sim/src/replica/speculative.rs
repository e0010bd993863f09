//! Speculative decoding (Leviathan, Kalman & Matias, ICML 2023; Chen et al.
//! 2023): a cheap draft proposes k tokens, the target model scores all k + 1
//! positions in one forward pass, and drafts are accepted left to right until
//! the first rejection; the target's own token at that position comes free.
//! With a per-token acceptance rate α, the tokens produced per step are
//! 1 + min(G, k) with G geometric — mean (1 − α^(k+1)) / (1 − α).
//!
//! The draft's cost is priced by `cost::speculative::SpeculativeCost`, a
//! cost-model wrapper: a
//! separate draft model from the catalog (k sequential draft decode steps) or
//! a fraction of a target decode step per draft token (EAGLE heads, Li et al.
//! 2024; DeepSeek-V3's multi-token-prediction module). The target model
//! prices the verification pass itself (the k drafts as extra tokens through
//! its layers and LM head). Beside both, speculative sampling (Leviathan et
//! al. 2023, Algorithm 1; Chen et al. 2023, Algorithm 2) works on whole
//! distributions over the vocabulary, not on sampled tokens: the draft
//! samples each of its k positions from a softmax over V logits and keeps
//! the distribution, and the rejection step turns the target's k + 1 rows
//! of logits into probabilities, compares them with the draft's and, at a
//! rejection, samples from the normalised residual max(0, p − q). Those
//! passes over V-wide rows cost what a plain decode's one sample does not:
//! [`TARGET_SAMPLER_PASSES`] and [`DRAFT_SAMPLER_PASSES`].

use crate::rng::{self, StreamRng};
use crate::scenario::SpeculationPlan;
use rand::Rng;

/// The acceptance process of one replica, on its own seeded stream.
pub struct Speculation {
    k: u32,
    alpha: f64,
    rng: StreamRng,
}

impl Speculation {
    pub fn new(cfg: &SpeculationPlan, seed: u64, replica: u32) -> Speculation {
        Speculation {
            k: cfg.num_draft_tokens,
            alpha: cfg.acceptance_rate,
            rng: rng::stream(seed, &format!("replica.{replica}.speculative")),
        }
    }

    pub fn draft_tokens(&self) -> u32 {
        self.k
    }

    /// Tokens one verification step yields: accepted drafts plus the target's
    /// token, 1..=k+1.
    pub fn sample_tokens(&mut self) -> u32 {
        let mut accepted = 0;
        while accepted < self.k && self.rng.random::<f64>() < self.alpha {
            accepted += 1;
        }
        accepted + 1
    }

    /// The analytical mean of [`Self::sample_tokens`].
    pub fn expected_tokens(k: u32, alpha: f64) -> f64 {
        (1.0 - alpha.powi(k as i32 + 1)) / (1.0 - alpha)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_accepted_tokens_matches_the_truncated_geometric_mean() {
        for (k, alpha) in [(4, 0.7), (2, 0.5), (8, 0.9), (3, 0.0)] {
            let cfg = SpeculationPlan {
                num_draft_tokens: k,
                acceptance_rate: alpha,
            };
            let mut s = Speculation::new(&cfg, 5, 0);
            let n = 400_000;
            let mean = (0..n).map(|_| s.sample_tokens() as f64).sum::<f64>() / n as f64;
            let want = Speculation::expected_tokens(k, alpha);
            assert!(
                (mean - want).abs() / want < 0.01,
                "k={k} α={alpha}: {mean} vs {want}"
            );
        }
    }
}
