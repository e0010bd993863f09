//! Speculative sampling on the live model (Leviathan, Kalman & Matias, ICML
//! 2023; Chen et al., "Accelerating LLM decoding with speculative sampling",
//! 2023): a draft model proposes k tokens one at a time from its own
//! distribution q, the target scores the last committed token and all k
//! drafts in one forward pass (k + 1 distributions p), and drafts are
//! accepted left to right, draft x with probability min(1, p(x) / q(x)); at
//! the first rejection a token is drawn from the residual
//! norm(max(0, p − q)), and if every draft is accepted one more comes free
//! from the target's (k + 1)-th distribution. Every emitted token is then
//! distributed exactly as the target alone would sample it — the property a
//! test checks statistically.
//!
//! It also measures what the simulator's `[engine.speculative]` table takes:
//! α per draft position and the mean accepted length on a real text, and
//! the draft's step time relative to the target's.

use crate::error::{input, Result};
use crate::model::{Model, SeqCache};
use candle_core::{Tensor, D};
use rand::Rng;

/// Next-token distributions of logits rows at `temperature` (0: greedy, a
/// one-hot argmax), as f64 rows.
pub fn distributions(logits: &Tensor, temperature: f64) -> Result<Vec<Vec<f64>>> {
    if temperature <= 0.0 {
        let am = logits.argmax(D::Minus1)?.to_vec1::<u32>()?;
        let v = logits.dim(D::Minus1)?;
        return Ok(am
            .iter()
            .map(|&a| {
                let mut p = vec![0.0; v];
                p[a as usize] = 1.0;
                p
            })
            .collect());
    }
    let p = candle_nn::ops::softmax_last_dim(&(logits / temperature)?)?;
    Ok(p.to_dtype(candle_core::DType::F64)?.to_vec2::<f64>()?)
}

/// A draw from a (possibly unnormalized) distribution by its inverse CDF.
pub fn sample(p: &[f64], rng: &mut impl Rng) -> u32 {
    let total: f64 = p.iter().sum();
    let mut u = rng.random::<f64>() * total;
    let mut last = 0;
    for (i, &w) in p.iter().enumerate() {
        if w > 0.0 {
            if u < w {
                return i as u32;
            }
            u -= w;
            last = i;
        }
    }
    // Rounding left u a hair above the total: the last possible token.
    last as u32
}

/// The outcome of verifying one round of drafts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Drafts accepted, 0..=k.
    pub accepted: usize,
    /// The token the target adds: the residual draw at the first rejection,
    /// or the bonus token after k acceptances.
    pub next: u32,
}

/// The modified rejection rule: `drafts[i]` was drawn from `q[i]`; `p` holds
/// the target's k + 1 distributions at the same positions.
pub fn verify(drafts: &[u32], q: &[Vec<f64>], p: &[Vec<f64>], rng: &mut impl Rng) -> Verdict {
    debug_assert_eq!(p.len(), drafts.len() + 1);
    for (i, &x) in drafts.iter().enumerate() {
        let (px, qx) = (p[i][x as usize], q[i][x as usize]);
        if qx > 0.0 && rng.random::<f64>() * qx < px {
            continue;
        }
        let residual: Vec<f64> = p[i]
            .iter()
            .zip(&q[i])
            .map(|(a, b)| (a - b).max(0.0))
            .collect();
        // p ≤ q everywhere only when p = q, where rejection has probability 0;
        // rounding can still get here, and then p itself is the answer.
        let next = if residual.iter().sum::<f64>() > 0.0 {
            sample(&residual, rng)
        } else {
            sample(&p[i], rng)
        };
        return Verdict { accepted: i, next };
    }
    Verdict {
        accepted: drafts.len(),
        next: sample(&p[drafts.len()], rng),
    }
}

/// Acceptance counts of a speculative run.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct AcceptStats {
    /// Per draft position i: rounds that reached it, and accepted it.
    pub reached: Vec<u64>,
    pub accepted: Vec<u64>,
    /// Verification rounds (target forward passes).
    pub rounds: u64,
    /// Tokens emitted.
    pub tokens: u64,
}

impl AcceptStats {
    pub fn new(k: usize) -> AcceptStats {
        AcceptStats {
            reached: vec![0; k],
            accepted: vec![0; k],
            ..AcceptStats::default()
        }
    }

    fn record(&mut self, v: Verdict, k: usize) {
        for i in 0..k.min(v.accepted + 1) {
            self.reached[i] += 1;
            if i < v.accepted {
                self.accepted[i] += 1;
            }
        }
        self.rounds += 1;
    }

    /// α at each draft position: accepted / reached.
    pub fn per_position(&self) -> Vec<f64> {
        self.reached
            .iter()
            .zip(&self.accepted)
            .map(|(&r, &a)| if r == 0 { 0.0 } else { a as f64 / r as f64 })
            .collect()
    }

    /// Mean drafts accepted per round.
    pub fn mean_accepted(&self) -> f64 {
        self.accepted.iter().sum::<u64>() as f64 / self.rounds.max(1) as f64
    }

    /// The α of the simulator's model (i.i.d. acceptance, tokens per round
    /// (1 − α^(k+1)) / (1 − α)) that yields the measured tokens per round.
    pub fn equivalent_alpha(&self) -> f64 {
        let k = self.reached.len() as u32;
        let want = 1.0 + self.mean_accepted();
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if sim::replica::speculative::Speculation::expected_tokens(k, mid) < want {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        0.5 * (lo + hi)
    }
}

/// Feeds `committed[cache.len()..]` (at least one token) to a model and
/// returns the logits of every fed token.
fn catch_up(m: &Model, cache: &mut SeqCache, committed: &[u32]) -> Result<Tensor> {
    m.forward_all(cache, &committed[cache.len()..])
}

/// Samples `new_tokens` tokens after `prompt` from the target alone.
pub fn generate_plain(
    target: &Model,
    prompt: &[u32],
    new_tokens: usize,
    temperature: f64,
    rng: &mut impl Rng,
) -> Result<Vec<u32>> {
    if prompt.is_empty() {
        return Err(input(
            "a speculative run needs a prompt of at least one token",
        ));
    }
    let mut cache = SeqCache::new(target, prompt.len() + new_tokens)?;
    let mut seq = prompt.to_vec();
    while seq.len() < prompt.len() + new_tokens {
        let logits = catch_up(target, &mut cache, &seq)?;
        let last = logits.narrow(0, logits.dim(0)? - 1, 1)?;
        seq.push(sample(&distributions(&last, temperature)?[0], rng));
    }
    Ok(seq[prompt.len()..].to_vec())
}

/// Samples `new_tokens` tokens after `prompt` speculatively: `draft`
/// proposes `k` per round, `target` verifies them in one forward pass.
/// Each model's cache holds every committed token but the last, which the
/// next round feeds; rejected drafts are cut from the caches.
// The two models, the request and the sampling settings are all needed;
// bundling them would only move the list into a struct used once.
#[allow(clippy::too_many_arguments)]
pub fn generate_speculative(
    target: &Model,
    draft: &Model,
    prompt: &[u32],
    new_tokens: usize,
    k: usize,
    temperature: f64,
    rng: &mut impl Rng,
    stats: &mut AcceptStats,
) -> Result<Vec<u32>> {
    if prompt.is_empty() {
        return Err(input(
            "a speculative run needs a prompt of at least one token",
        ));
    }
    if k == 0 {
        return Err(input("--k must be at least 1"));
    }
    if target.cfg.vocab_size != draft.cfg.vocab_size {
        return Err(input(format!(
            "the draft's vocabulary ({}) differs from the target's ({})",
            draft.cfg.vocab_size, target.cfg.vocab_size
        )));
    }
    let cap = prompt.len() + new_tokens + k + 1;
    let mut tc = SeqCache::new(target, cap)?;
    let mut dc = SeqCache::new(draft, cap)?;
    let mut seq = prompt.to_vec();
    let end = prompt.len() + new_tokens;
    while seq.len() < end {
        let base = seq.len();
        // Draft k tokens, one step each.
        let mut drafts = Vec::with_capacity(k);
        let mut q = Vec::with_capacity(k);
        let mut logits = catch_up(draft, &mut dc, &seq)?;
        for i in 0..k {
            let last = logits.narrow(0, logits.dim(0)? - 1, 1)?;
            let qi = distributions(&last, temperature)?.remove(0);
            let x = sample(&qi, rng);
            drafts.push(x);
            q.push(qi);
            if i + 1 < k {
                logits = draft.forward_all(&mut dc, &[x])?;
            }
        }
        // Verify: the target's pending tokens plus the drafts in one pass.
        let mut fed = seq[tc.len()..].to_vec();
        fed.extend_from_slice(&drafts);
        let logits = target.forward_all(&mut tc, &fed)?;
        let p = distributions(&logits.narrow(0, fed.len() - k - 1, k + 1)?, temperature)?;
        let v = verify(&drafts, &q, &p, rng);
        stats.record(v, k);
        seq.extend_from_slice(&drafts[..v.accepted]);
        seq.push(v.next);
        // Both caches keep base + accepted tokens: valid, and not the last.
        tc.truncate(base + v.accepted);
        dc.truncate(base + v.accepted);
    }
    seq.truncate(end);
    stats.tokens += new_tokens as u64;
    Ok(seq[prompt.len()..].to_vec())
}

/// α as Leviathan et al. define it, teacher-forced on a text: at every
/// position the expected acceptance Σ min(p, q) = 1 − TV(p, q) of the
/// target's and the draft's next-token distributions, averaged over the
/// windows' tokens. Deterministic: no sampling.
pub fn expected_acceptance(
    target: &Model,
    draft: &Model,
    windows: &[&[u32]],
    temperature: f64,
) -> Result<f64> {
    let (mut sum, mut n) = (0.0, 0usize);
    for w in windows {
        let input_ids = &w[..w.len() - 1];
        let probs = |m: &Model| -> Result<Vec<Vec<f64>>> {
            let mut c = SeqCache::new(m, input_ids.len())?;
            distributions(&m.forward_all(&mut c, input_ids)?, temperature)
        };
        let (p, q) = (probs(target)?, probs(draft)?);
        for (a, b) in p.iter().zip(&q) {
            sum += a.iter().zip(b).map(|(x, y)| x.min(*y)).sum::<f64>();
            n += 1;
        }
    }
    Ok(sum / n.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn rng(seed: u64) -> rand_chacha::ChaCha8Rng {
        rand_chacha::ChaCha8Rng::seed_from_u64(seed)
    }

    fn tv(counts: &[u64], p: &[f64]) -> f64 {
        let n: u64 = counts.iter().sum();
        0.5 * counts
            .iter()
            .zip(p)
            .map(|(&c, &q)| (c as f64 / n as f64 - q).abs())
            .sum::<f64>()
    }

    /// Pearson's χ² of counts against expected probabilities (all > 0).
    fn chi2(counts: &[u64], p: &[f64]) -> f64 {
        let n: u64 = counts.iter().sum();
        counts
            .iter()
            .zip(p)
            .map(|(&c, &q)| {
                let e = q * n as f64;
                (c as f64 - e).powi(2) / e
            })
            .sum()
    }

    /// Position-dependent target and draft distributions over 5 tokens: the
    /// tokens emitted at positions 1 and 2 of a round follow the target's,
    /// whatever the draft; skipping the residual (drawing from p after a
    /// rejection) does not — so the test can fail.
    #[test]
    fn verification_leaves_the_target_distribution_unchanged() {
        let p = vec![
            vec![0.5, 0.2, 0.1, 0.1, 0.1],
            vec![0.05, 0.05, 0.3, 0.3, 0.3],
            vec![0.2; 5],
        ];
        let q = vec![vec![0.1, 0.1, 0.6, 0.1, 0.1], vec![0.6, 0.1, 0.1, 0.1, 0.1]];
        let n = 200_000;
        let mut r = rng(1);
        let (mut first, mut second, mut naive) = ([0u64; 5], [0u64; 5], [0u64; 5]);
        let mut rejected = 0;
        for _ in 0..n {
            let drafts: Vec<u32> = q.iter().map(|qi| sample(qi, &mut r)).collect();
            let v = verify(&drafts, &q, &p, &mut r);
            let out: Vec<u32> = drafts[..v.accepted]
                .iter()
                .copied()
                .chain([v.next])
                .collect();
            first[out[0] as usize] += 1;
            if out.len() > 1 {
                second[out[1] as usize] += 1;
            }
            if v.accepted == 0 {
                rejected += 1;
                naive[sample(&p[0], &mut r) as usize] += 1;
            } else {
                naive[drafts[0] as usize] += 1;
            }
        }
        // 4 degrees of freedom: χ² above 18.47 has probability 0.001.
        assert!(chi2(&first, &p[0]) < 18.47, "{first:?}");
        assert!(chi2(&second, &p[1]) < 18.47, "{second:?}");
        assert!(tv(&first, &p[0]) < 0.005);
        assert!(rejected > n / 4, "the residual path must be exercised");
        assert!(chi2(&naive, &p[0]) > 1000.0, "{naive:?}");
    }

    /// End to end on a tiny model: the first sampled token's distribution
    /// with speculation (a differently seeded draft, k = 3) matches the
    /// target's own next-token distribution, and so does plain sampling.
    #[test]
    fn speculative_sampling_on_a_tiny_model_matches_the_target() {
        let target = crate::model::tests::tiny_model(3);
        let draft = crate::model::tests::tiny_model(4);
        let prompt = [5u32, 17, 42, 99];
        let temp = 0.25;
        let mut c = SeqCache::new(&target, 8).unwrap();
        let p = distributions(&target.forward_all(&mut c, &prompt).unwrap(), temp)
            .unwrap()
            .pop()
            .unwrap();
        let n = 4000;
        let mut r = rng(2);
        let mut stats = AcceptStats::new(3);
        let (mut spec, mut plain) = (vec![0u64; p.len()], vec![0u64; p.len()]);
        for _ in 0..n {
            let s = generate_speculative(&target, &draft, &prompt, 1, 3, temp, &mut r, &mut stats)
                .unwrap();
            spec[s[0] as usize] += 1;
            let s = generate_plain(&target, &prompt, 1, temp, &mut r).unwrap();
            plain[s[0] as usize] += 1;
        }
        // Tokens the target gives ≥ 1 %, the rest pooled: χ² at p = 0.001.
        let bins = |counts: &[u64]| {
            let (mut c, mut e) = (vec![0u64], vec![0f64]);
            for (i, &pi) in p.iter().enumerate() {
                if pi >= 0.01 {
                    c.push(counts[i]);
                    e.push(pi);
                } else {
                    c[0] += counts[i];
                    e[0] += pi;
                }
            }
            (c, e)
        };
        let (cs, e) = bins(&spec);
        let (cp, _) = bins(&plain);
        assert!(
            e.len() >= 4,
            "the distribution is too peaked to test: {e:?}"
        );
        // Critical values of χ² at p = 0.001 for up to 30 degrees of freedom
        // stay below 60; the check allows that.
        let df = e.len() - 1;
        assert!(df <= 30, "{df}");
        assert!(chi2(&cs, &e) < 60.0, "speculative {cs:?} vs {e:?}");
        assert!(chi2(&cp, &e) < 60.0, "plain {cp:?} vs {e:?}");
        assert!(stats.accepted[0] < stats.reached[0], "drafts were rejected");
        assert!(stats.accepted[0] > 0, "and accepted");
    }

    #[test]
    fn greedy_speculation_reproduces_greedy_decoding() {
        let target = crate::model::tests::tiny_model(3);
        // The target drafting for itself accepts everything.
        let mut r = rng(3);
        let mut stats = AcceptStats::new(4);
        let prompt = [1u32, 2, 3];
        let want = target.generate_alone(&prompt, 20).unwrap();
        let got = generate_speculative(&target, &target, &prompt, 20, 4, 0.0, &mut r, &mut stats)
            .unwrap();
        assert_eq!(got, want);
        assert_eq!(stats.per_position(), vec![1.0; 4]);
        assert!((stats.equivalent_alpha() - 1.0).abs() < 1e-6);
        // Another draft: still the target's greedy tokens.
        let draft = crate::model::tests::tiny_model(9);
        let mut stats = AcceptStats::new(2);
        let got =
            generate_speculative(&target, &draft, &prompt, 20, 2, 0.0, &mut r, &mut stats).unwrap();
        assert_eq!(got, want);
        assert!(stats.rounds > 7, "{stats:?}");
    }

    #[test]
    fn equivalent_alpha_inverts_the_simulators_mean() {
        let mut s = AcceptStats::new(4);
        // 2 rounds accepting 1 and 3 drafts: mean 2 accepted, 3 tokens.
        s.record(
            Verdict {
                accepted: 1,
                next: 0,
            },
            4,
        );
        s.record(
            Verdict {
                accepted: 3,
                next: 0,
            },
            4,
        );
        assert_eq!(s.reached, vec![2, 2, 1, 1]);
        assert_eq!(s.accepted, vec![2, 1, 1, 0]);
        let a = s.equivalent_alpha();
        let e = sim::replica::speculative::Speculation::expected_tokens(4, a);
        assert!((e - 3.0).abs() < 1e-9, "{a} {e}");
    }
}
