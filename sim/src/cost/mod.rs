//! Iteration cost models: how long one replica iteration takes for a batch.
//!
//! The iteration formula (DESIGN.md, "Cost model"), for one pipeline stage
//! holding every layer:
//!
//! ```text
//! T = t_step + t_seq·seqs + Σ_layers ( t_mlp(N) + t_attn_prefill(Σ n_i(c_i + n_i/2))
//!                                      + t_attn_decode(Σ l_j) + t_comm(N) ) + t_lm_head(seqs)
//! ```
//!
//! [`Roofline`] prices each term from the catalog from compute time (FLOPs
//! over peak × efficiency) and memory time (bytes over bandwidth ×
//! efficiency), the roofline model of Williams et al. (CACM 2009) as applied to
//! LLM inference by LLM-Viewer (Yuan et al. 2024) and Vidur's analytical mode,
//! with the corrections public GPU measurements call for: a rounded corner
//! between the two roofs and per-kernel floors (`gemm`), the element-wise
//! kernels of each layer (`elementwise`), all-reduces sized from measured
//! collectives (`comm`) and the engine's host time by named runtime
//! (`runtime`). `fidelity` compares the result with every measured table in
//! the shared data; `breakdown` explains one iteration term by term.
//! Mixture-of-experts layers, latent attention, expert parallelism and
//! pipeline stages extend the terms as documented on [`Roofline`].

pub mod breakdown;
pub mod comm;
pub mod elementwise;
pub mod fidelity;
pub mod gemm;
mod memo;
mod roofline;
pub mod runtime;
pub mod speculative;

pub use breakdown::{decode_sweep, knee, lone_request, Breakdown, LoneRequest, SweepRow, Term};
pub use comm::ALLREDUCE_BW_EFFICIENCY;
pub use gemm::{GEMM_EFFICIENCY, MEMORY_EFFICIENCY};
pub use roofline::{Roofline, StepTerms};
pub use runtime::EngineRuntime;

use crate::time::Nanos;

/// The shape of one iteration's batch, aggregated: what every cost term needs
/// and nothing per sequence, so building it allocates nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BatchShape {
    /// Sequences with a prefill (or prefill chunk) this iteration.
    pub prefill_seqs: u32,
    /// Σ n_i: new prompt tokens processed.
    pub prefill_tokens: u64,
    /// Σ n_i (c_i + n_i / 2): query–key pairs of causal prefill attention.
    pub prefill_attn_pairs: f64,
    /// Σ (c_i + n_i): KV tokens prefill attention reads.
    pub prefill_kv_tokens: u64,
    /// Sequences decoding one token.
    pub decode_seqs: u32,
    /// Σ l_j: context tokens decode attention reads.
    pub decode_context_tokens: u64,
    /// Speculative verification: tokens beyond one per decoding sequence that
    /// pass through the dense layers and the LM head (the k drafts each).
    pub verify_extra_tokens: u64,
    /// KV bytes per GPU copied over PCIe this iteration (swap out + swap in).
    pub swap_bytes: f64,
    /// Token slots of KV blocks copied within device memory before the
    /// forward pass (copy-on-write of parallel samples, `replica::fork`):
    /// each slot's K and V in every layer is read and written once.
    pub copy_kv_tokens: u64,
    /// Σ context of speculatively verifying sequences (what their drafts read).
    pub verify_context_tokens: u64,
    /// How long the replica sat idle before this iteration, ns (0 when it
    /// follows another back to back). Measured devices run the first step
    /// after an idle spell slower; the roofline ignores it.
    pub idle_ns: u64,
}

impl BatchShape {
    /// Adds a prefill of `new_tokens` on top of `cached` tokens.
    #[inline]
    pub fn add_prefill(&mut self, new_tokens: u64, cached: u64) {
        self.prefill_seqs += 1;
        self.prefill_tokens += new_tokens;
        let n = new_tokens as f64;
        self.prefill_attn_pairs += n * (cached as f64 + n / 2.0);
        self.prefill_kv_tokens += cached + new_tokens;
    }

    /// Adds one decoding sequence whose context (including the new token) is `context`.
    #[inline]
    pub fn add_decode(&mut self, context: u64) {
        self.decode_seqs += 1;
        self.decode_context_tokens += context;
    }

    /// Adds one decoding sequence verifying `drafts` speculative tokens on a
    /// context of `context` tokens: 1 + drafts queries attend causally to the
    /// cache, like a short prefill chunk (Leviathan et al. 2023).
    #[inline]
    pub fn add_verify(&mut self, drafts: u64, context: u64) {
        let q = (1 + drafts) as f64;
        self.decode_seqs += 1;
        self.verify_extra_tokens += drafts;
        self.prefill_attn_pairs += q * (context as f64 + q / 2.0);
        self.prefill_kv_tokens += context + 1 + drafts;
        self.verify_context_tokens += context;
    }

    /// Tokens through the dense layers.
    pub fn tokens(&self) -> u64 {
        self.prefill_tokens + self.decode_seqs as u64 + self.verify_extra_tokens
    }

    /// Rows of logits computed (one per sampled position).
    pub fn logit_rows(&self) -> u64 {
        self.seqs() as u64 + self.verify_extra_tokens
    }

    pub fn seqs(&self) -> u32 {
        self.prefill_seqs + self.decode_seqs
    }

    pub fn is_empty(&self) -> bool {
        self.seqs() == 0
    }
}

/// Prices one iteration. Implementations must be pure: the same shape gives
/// the same duration, so runs are deterministic.
pub trait CostModel: Send + Sync {
    /// Wall time of one iteration running `batch`, in nanoseconds.
    fn iteration_time(&self, batch: &BatchShape) -> Nanos;
    /// The same price for one replica's next step, given the terms kept
    /// from its last (a model may reuse what only the decode context
    /// changed; see [`StepTerms`]). Must equal `iteration_time`.
    fn iteration_time_with(&self, batch: &BatchShape, _terms: &mut StepTerms) -> Nanos {
        self.iteration_time(batch)
    }
    /// [`Self::iteration_time_with`] of a decode-only step of `seqs`
    /// sequences over `context` tokens with nothing swapped (every step of
    /// a decode run), which a model may price without building the shape
    /// and checking it is one.
    fn decode_step_time(&self, seqs: u32, context: u64, terms: &mut StepTerms) -> Nanos {
        let b = BatchShape {
            decode_seqs: seqs,
            decode_context_tokens: context,
            ..BatchShape::default()
        };
        self.iteration_time_with(&b, terms)
    }
    /// Where the numbers come from, for summaries and reports.
    fn source(&self) -> String;
    /// The iteration term by term, where the model can say (`servesim cost`).
    fn explain(&self, _batch: &BatchShape) -> Option<Breakdown> {
        None
    }
}

/// FlashAttention-2 forward reaches 50–73 % of peak on A100 (Dao 2023) but
/// ~35–45 % on H100; FlashAttention-3 ~ 75 %. We take a middle value.
pub const ATTENTION_EFFICIENCY: f64 = 0.45;
/// Fraction of peak HBM bandwidth paged decode attention streams the KV
/// cache at, with [`DECODE_ATTENTION_FLOOR_S`] per layer. Fitted on
/// aiconfigurator's vLLM 0.24.0 generation-attention tables
/// (`../shared/data/aiconfigurator/kernels/data/{h100_sxm,h200_sxm,b200_sxm,gb200}/attention`,
/// `generation_attention_perf`: full attention, BF16 cache, 62 824 rows of
/// 1–2048 sequences over 2–131 072 tokens; FlashAttention-3 on Hopper,
/// FlashAttention-4 on Blackwell) with `scripts/fit_decode_attention.py`:
/// 0.86 and 11.5 µs give a median |log error| of 0.11 (0.70 and no floor:
/// 2.5, the small batches' floor missing); each chip held out in turn, the
/// other three give the same pair within 0.01 and 0 µs.
pub const DECODE_ATTENTION_BW_EFFICIENCY: f64 = 0.86;
/// Shortest time of one layer's decode-attention kernel, seconds: its launch
/// inside the captured graph, the split-KV combine and one wave over the
/// SMs, whatever the batch (11.3 µs measured for one sequence of 2 tokens on
/// H100). Charged once per layer and attention group with decodes; fitted
/// with [`DECODE_ATTENTION_BW_EFFICIENCY`].
pub const DECODE_ATTENTION_FLOOR_S: f64 = 11.5e-6;
/// Point-to-point send/recv of pipeline activations: taken equal to the
/// datasheet all-reduce figure (a single large message over one link).
pub const SEND_RECV_BW_EFFICIENCY: f64 = ALLREDUCE_BW_EFFICIENCY;
/// MoE dispatch/combine all-to-all: DeepEP (deepseek-ai/DeepEP README) moves
/// 153 GB/s (dispatch) and 158 GB/s (combine) per GPU between 8 H800s, whose
/// NVLink carries 200 GB/s per direction: ~0.77.
pub const ALL_TO_ALL_BW_EFFICIENCY: f64 = 0.75;
