//! The cost of speculative decoding's drafts and sampler (see
//! `replica::speculative` for the acceptance process): a cost-model wrapper
//! that adds to every iteration with verifications the draft's k steps — a
//! separate draft model from the catalog, or a fraction of a target decode
//! step per draft token (EAGLE heads, Li et al. 2024; DeepSeek-V3's
//! multi-token-prediction module) — and the passes speculative sampling
//! (Leviathan et al. 2023, Algorithm 1; Chen et al. 2023, Algorithm 2) makes
//! over V-wide rows of the vocabulary, which a plain decode's one sample does
//! not: [`TARGET_SAMPLER_PASSES`] and [`DRAFT_SAMPLER_PASSES`].

use super::{BatchShape, CostModel, Roofline};
use crate::time::{secs_to_nanos, Nanos};

/// Full passes over a V-wide row of 4-byte values the target side makes
/// per verified position, read or written, as vLLM V1's rejection sampler
/// makes them (`vllm/v1/sample/rejection_sampler.py`): `compute_probs`'
/// softmax of the target's logits reads and writes the row (2);
/// `sample_recovered_tokens` draws the exponential noise (1, written) and
/// reads it with the target's and the draft's probabilities (3).
pub const TARGET_SAMPLER_PASSES: f64 = 6.0;

/// The same per draft position: the draft's softmax over its logits, read
/// and written, kept for the rejection step (2).
pub const DRAFT_SAMPLER_PASSES: f64 = 2.0;

/// Bytes of one vocabulary entry in the sampler's rows (fp32 logits and
/// probabilities).
pub const SAMPLER_BYTES_PER_ENTRY: f64 = 4.0;

/// How a draft step is priced.
pub enum DraftCost {
    /// A separate draft model on the same GPUs, or a multi-token-prediction
    /// module / EAGLE head priced as that many layers of the target's kind
    /// plus its LM head, in the target's layout (`ReplicaPlan::mtp_roofline`):
    /// DeepSeek-V3's MTP module is one MoE transformer block sharing the
    /// embedding and output head (DeepSeek-V3 report §2.2), EAGLE one
    /// decoder layer (Li et al. 2024).
    Model(Box<Roofline>),
    /// A fraction of the target's decode step per draft token.
    Fraction(f64),
}

/// A cost model that adds the draft's k steps to every iteration with
/// speculative verifications.
pub struct SpeculativeCost<'a> {
    target: Box<dyn CostModel + 'a>,
    draft: DraftCost,
    k: u32,
    label: String,
    /// Seconds the sampler spends on one row of the vocabulary's values
    /// (0 until [`Self::with_sampling`] states the vocabulary and bandwidth).
    sampling_secs_per_row_pass: f64,
}

impl<'a> SpeculativeCost<'a> {
    pub fn new(target: Box<dyn CostModel + 'a>, draft: DraftCost, k: u32, label: String) -> Self {
        SpeculativeCost {
            target,
            draft,
            k,
            label,
            sampling_secs_per_row_pass: 0.0,
        }
    }

    /// Prices the sampler's passes over `vocab`-wide rows (see
    /// [`TARGET_SAMPLER_PASSES`]), memory-bound on a device of `memory_bw`
    /// bytes/s at the efficiency dense reads reach.
    pub fn with_sampling(mut self, vocab: u32, memory_bw: f64) -> Self {
        let row = vocab as f64 * SAMPLER_BYTES_PER_ENTRY;
        self.sampling_secs_per_row_pass =
            row / (memory_bw * crate::cost::MEMORY_EFFICIENCY).max(1.0);
        self
    }

    /// Time the sampler spends on the iteration's speculated positions:
    /// the target's k + 1 per verifying sequence and the draft's k.
    fn sampling_time(&self, b: &BatchShape) -> Nanos {
        if b.verify_extra_tokens == 0 || self.sampling_secs_per_row_pass == 0.0 {
            return 0;
        }
        let target = (b.decode_seqs as u64 + b.verify_extra_tokens) as f64;
        let draft = b.verify_extra_tokens as f64;
        let passes = target * TARGET_SAMPLER_PASSES + draft * DRAFT_SAMPLER_PASSES;
        secs_to_nanos(passes * self.sampling_secs_per_row_pass)
    }

    /// Time the draft spends proposing k tokens for every decoding sequence.
    fn draft_time(&self, b: &BatchShape) -> Nanos {
        if b.decode_seqs == 0 || b.verify_extra_tokens == 0 {
            return 0;
        }
        // Drafting runs one decode step per draft token over the decoding
        // sequences, at about their current context.
        let step = BatchShape {
            decode_seqs: b.decode_seqs,
            decode_context_tokens: b.verify_context_tokens,
            ..BatchShape::default()
        };
        let per_step = match &self.draft {
            DraftCost::Model(r) => secs_to_nanos(r.forward_secs(&step)),
            DraftCost::Fraction(f) => (self.target.iteration_time(&step) as f64 * f) as Nanos,
        };
        per_step * self.k as Nanos
    }
}

impl CostModel for SpeculativeCost<'_> {
    fn iteration_time(&self, b: &BatchShape) -> Nanos {
        self.target.iteration_time(b) + self.draft_time(b) + self.sampling_time(b)
    }

    fn source(&self) -> String {
        format!(
            "{} + speculative drafts ({})",
            self.target.source(),
            self.label
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{self, Dtype};
    use crate::replica::speculative::Speculation;

    /// Time per output token of a decode step at batch `b` and context 2048,
    /// with and without speculation (k = 4, α = 0.7, Llama-3.2-1B drafting for
    /// Llama-3.1-70B on 4 × H100).
    fn per_token(b: u32) -> (f64, f64) {
        let (target_m, _) = catalog::model("llama-3.1-70b").unwrap();
        let (draft_m, _) = catalog::model("llama-3.2-1b").unwrap();
        let h = catalog::hardware("h100").unwrap();
        let target = Roofline::new(&target_m, &h, Dtype::Bf16, Dtype::Bf16, 4);
        let draft = Roofline::new(&draft_m, &h, Dtype::Bf16, Dtype::Bf16, 4);
        let (k, alpha) = (4, 0.7);
        let spec = SpeculativeCost::new(
            Box::new(target.clone()),
            DraftCost::Model(Box::new(draft)),
            k,
            String::new(),
        );
        let mut plain = BatchShape::default();
        let mut verify = BatchShape::default();
        for _ in 0..b {
            plain.add_decode(2048);
            verify.add_verify(k as u64, 2047);
        }
        let plain_t = target.iteration_time(&plain) as f64;
        let spec_t = spec.iteration_time(&verify) as f64 / Speculation::expected_tokens(k, alpha);
        (plain_t / b as f64, spec_t / b as f64)
    }

    #[test]
    fn the_sampler_reads_and_writes_vocabulary_rows_per_speculated_position() {
        // 8 sequences verifying 4 drafts each over Llama-3.1-70B's 128,256
        // logits on an H100: 8 × 5 target rows × 6 passes + 8 × 4 draft
        // rows × 2 passes of 4-byte entries over the memory bandwidth.
        let (m, _) = catalog::model("llama-3.1-70b").unwrap();
        let h = catalog::hardware("h100").unwrap();
        let target = Roofline::new(&m, &h, Dtype::Bf16, Dtype::Bf16, 4);
        let plain = SpeculativeCost::new(
            Box::new(target.clone()),
            DraftCost::Fraction(0.1),
            4,
            String::new(),
        );
        let sampled =
            SpeculativeCost::new(Box::new(target), DraftCost::Fraction(0.1), 4, String::new())
                .with_sampling(m.vocab_size, h.memory_bw_bytes_per_s());
        let mut b = BatchShape::default();
        for _ in 0..8 {
            b.add_verify(4, 1000);
        }
        let passes = 8.0 * 5.0 * 6.0 + 8.0 * 4.0 * 2.0;
        let want =
            passes * 128_256.0 * 4.0 / (h.memory_bw_bytes_per_s() * crate::cost::MEMORY_EFFICIENCY);
        let got = (sampled.iteration_time(&b) - plain.iteration_time(&b)) as f64 / 1e9;
        assert!((got - want).abs() <= 2e-9, "{got} vs {want}");
        // A step without drafts samples as a plain decode: nothing added.
        let mut d = BatchShape::default();
        d.add_decode(1000);
        assert_eq!(sampled.iteration_time(&d), plain.iteration_time(&d));
    }

    #[test]
    fn speculation_pays_when_memory_bound_and_stops_paying_when_compute_bound() {
        let (plain, spec) = per_token(1);
        assert!(spec < 0.6 * plain, "batch 1: {spec} vs {plain} ns/token");
        let (plain, spec) = per_token(1024);
        assert!(spec > plain, "batch 1024: {spec} vs {plain} ns/token");
        for b in [1, 8, 32, 64, 128, 256, 512, 1024] {
            let (p, s) = per_token(b);
            eprintln!(
                "batch {b:>3}: {:.3} ms/token plain, {:.3} speculative",
                p / 1e6,
                s / 1e6
            );
        }
        // Somewhere in between the advantage crosses over.
        let crossover = (0..11)
            .map(|p| 1u32 << p)
            .find(|&b| {
                let (p, s) = per_token(b);
                s >= p
            })
            .expect("speculation stops paying by batch 1024");
        // The rounded roofline corner keeps large batches partly
        // memory-bound, so the crossover sits at 512–1024 rather than below.
        assert!(
            (16..=1024).contains(&crossover),
            "crossover at batch {crossover}"
        );
    }
}
