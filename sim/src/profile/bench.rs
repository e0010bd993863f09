//! A profile fitted to measured benchmark results (`servesim calibrate
//! --from-bench`) rather than to timed device shapes.
//!
//! A team that has `vllm bench serve` (or genai-perf, GuideLLM, …) results
//! and no free time on the box can still fit the engine-level terms a
//! datasheet roofline cannot know: the serving front end a request pays
//! before its prefill (API server, tokenizing, admission, the first event),
//! the host time of every step and of every sequence in it, and how close
//! the engine's kernels come to the chip's peak compute and bandwidth. The
//! iteration cost is the roofline of Williams et al. (CACM 2009) with those
//! efficiencies, in the [`CostTerms`] basis the `Profiled` cost model
//! prices, so a from-bench profile runs through `[hardware] profile` like
//! any other.

use super::{CostTerms, ProfileModel};
use serde::{Deserialize, Serialize};

/// What `calibrate --from-bench` fitted and from what.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchFit {
    /// The result files the points came from, with a digest of each.
    pub files: Vec<BenchFile>,
    /// The chip the points ran on (the scenario's hardware), whose peaks the
    /// efficiencies scale.
    pub chip: String,
    /// Peak dense throughput of the chip for the profile's dtype, TFLOP/s.
    pub peak_tflops: f64,
    /// Peak memory bandwidth of the chip, TB/s.
    pub peak_bandwidth_tbps: f64,
    /// The fitted terms.
    pub terms: BenchTerms,
    /// What the fit minimised, in words.
    pub objective: String,
    /// Simulations of the training points the optimiser ran.
    pub evaluations: u32,
    /// The fitted profile on the points it was fitted to.
    pub training: BenchError,
    /// The fitted profile on the points held back from the fit.
    pub held_back: BenchError,
    /// The scenario as given (no profile) on the same held-back points.
    pub default_held_back: BenchError,
    /// Points that could not be used, one line each with the reason.
    #[serde(default)]
    pub skipped: Vec<String>,
}

/// One input file of a from-bench fit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchFile {
    /// The path as given on the command line.
    pub path: String,
    /// FNV-1a 64-bit digest of the file's bytes (of a folder's files, by
    /// name), hexadecimal: tells whether a file changed since the fit.
    pub fnv1a64: String,
    /// Measured points the file holds.
    pub points: u32,
}

/// The engine-level terms a from-bench fit finds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchTerms {
    /// Serving front end per request, charged to the iteration that
    /// prefills it (the profile's per-prefill place), ns: the part of TTFT
    /// no GPU work explains.
    pub front_end_ns: f64,
    /// Host time of every step (scheduling, input preparation, sampling),
    /// ns.
    pub step_ns: f64,
    /// Host time per sequence in a step (block tables, detokenizing,
    /// output processing), ns.
    pub seq_ns: f64,
    /// Share of the chip's peak FLOP/s that compute-bound work reaches
    /// (prefill GEMMs and attention), in (0, 1].
    pub compute_efficiency: f64,
    /// Share of the chip's peak bandwidth that memory-bound work reaches
    /// (weight streaming in decode steps, KV reads), in (0, 1].
    pub bandwidth_efficiency: f64,
}

/// Error of a profile over a set of benchmark points: the median |error|
/// of each metric's headline statistic (the file's mean, else median), in
/// percent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchError {
    pub points: u32,
    pub ttft_pct: f64,
    pub tpot_pct: f64,
    pub e2e_pct: f64,
}

/// Token-table knots: powers of two up to 65,536 (the roofline's two lines
/// are exact between knots once the ridge is a knot too).
const MAX_KNOT: u32 = 1 << 16;

impl BenchTerms {
    /// The iteration cost of `model` under these terms on a chip of
    /// `peak_flops` FLOP/s and `peak_bw` bytes/s, with `kv_bytes_per_token`
    /// of KV per token over all layers:
    ///
    /// * dense layers over N tokens: `max(W / B, 2 P N / F)` (weights
    ///   streamed once a step, or the GEMMs' FLOPs), with `F` and `B` the
    ///   peaks times the efficiencies;
    /// * LM head over R logit rows the same way, plus `seq_ns` per row;
    /// * decode attention reads each context token's KV (`kv / B`); prefill
    ///   attention does `4 · layers · heads · head_dim` FLOPs per query–key
    ///   pair and reads its cache;
    /// * `front_end_ns` per prefilling sequence; `step_ns` per step.
    pub fn cost_terms(
        &self,
        model: &ProfileModel,
        kv_bytes_per_token: f64,
        peak_flops: f64,
        peak_bw: f64,
    ) -> CostTerms {
        let bytes = model.dtype().map_or(2.0, |d| d.weight_bytes());
        let flops = peak_flops * self.compute_efficiency;
        let bw = peak_bw * self.bandwidth_efficiency;
        let (h, d) = (model.hidden_size as f64, model.head_dim as f64);
        let attn = h * d * (2.0 * model.num_heads as f64 + 2.0 * model.num_kv_heads as f64);
        let layer_params = model.layers as f64 * (attn + 3.0 * h * model.intermediate_size as f64);
        let head_params = h * model.vocab_size as f64;
        let roof = |params: f64, n: f64| (params * bytes / bw).max(2.0 * params * n / flops) * 1e9;
        // The ridge: where compute time passes weight-streaming time.
        let ridge = bytes * flops / (2.0 * bw);
        let knots = knots_with(ridge);
        let layers = |n: f64| roof(layer_params, n);
        let head = |r: f64| roof(head_params, r) + self.seq_ns * r;
        let token_ns: Vec<f64> = knots
            .iter()
            .map(|&k| layers(k as f64) - layers(1.0))
            .collect();
        let row_ns: Vec<f64> = knots.iter().map(|&k| head(k as f64) - head(1.0)).collect();
        let kv_ns = kv_bytes_per_token / bw * 1e9;
        CostTerms {
            step_ns: self.step_ns + layers(1.0) + head(1.0),
            prefill_seq_ns: self.front_end_ns,
            decode_token_ns: kv_ns,
            prefill_pair_ns: 4.0 * model.layers as f64 * model.num_heads as f64 * d / flops * 1e9,
            prefill_square_ns: 0.0,
            prefill_kv_token_ns: kv_ns,
            token_knots: knots.clone(),
            token_ns,
            row_knots: knots,
            row_ns,
            idle_knots_ms: Vec::new(),
            wake_ns: Vec::new(),
            falling_token_segments: Vec::new(),
        }
    }

    /// Each term finite and in its range; the key names the term.
    pub fn check(&self) -> Result<(), (String, String)> {
        for (k, v) in [
            ("front_end_ns", self.front_end_ns),
            ("step_ns", self.step_ns),
            ("seq_ns", self.seq_ns),
        ] {
            if !(v.is_finite() && (0.0..=super::MAX_TERM_NS).contains(&v)) {
                return Err((
                    format!("bench.terms.{k}"),
                    format!(
                        "must be a number of ns in [0, {:e}], got {v}",
                        super::MAX_TERM_NS
                    ),
                ));
            }
        }
        for (k, v) in [
            ("compute_efficiency", self.compute_efficiency),
            ("bandwidth_efficiency", self.bandwidth_efficiency),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 1.0) {
                return Err((
                    format!("bench.terms.{k}"),
                    format!("must be a share of the peak in (0, 1], got {v}"),
                ));
            }
        }
        Ok(())
    }
}

impl BenchFit {
    /// The record's own checks (terms and peaks in range, at least one file).
    pub fn check(&self) -> Result<(), (String, String)> {
        if self.files.is_empty() {
            return Err((
                "bench.files".into(),
                "must name the result files the fit came from".into(),
            ));
        }
        for (k, v) in [
            ("bench.peak_tflops", self.peak_tflops),
            ("bench.peak_bandwidth_tbps", self.peak_bandwidth_tbps),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 1e6) {
                return Err((k.into(), format!("must be in (0, 1e6], got {v}")));
            }
        }
        self.terms.check()
    }

    /// Effective FLOP/s and bytes/s the fitted efficiencies give.
    pub fn effective(&self) -> (f64, f64) {
        (
            self.peak_tflops * 1e12 * self.terms.compute_efficiency,
            self.peak_bandwidth_tbps * 1e12 * self.terms.bandwidth_efficiency,
        )
    }
}

/// 1, 2, 4, … [`MAX_KNOT`] with the ridge's two neighbouring integers.
fn knots_with(ridge: f64) -> Vec<u32> {
    let mut k: Vec<u32> = (0..=16).map(|i| 1u32 << i).collect();
    if ridge.is_finite() && ridge > 1.0 && ridge < MAX_KNOT as f64 {
        k.push(ridge.floor() as u32);
        k.push(ridge.ceil() as u32);
    }
    k.sort_unstable();
    k.dedup();
    k
}

/// FNV-1a, 64 bits, of `bytes`: a stable digest that tells whether a result
/// file changed (not a cryptographic hash).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::BatchShape;
    use crate::profile::tests::example;
    use crate::profiled::Profiled;

    fn terms() -> BenchTerms {
        BenchTerms {
            front_end_ns: 20e6,
            step_ns: 1e6,
            seq_ns: 10e3,
            compute_efficiency: 0.5,
            bandwidth_efficiency: 0.8,
        }
    }

    #[test]
    fn the_cost_is_the_roofline_with_the_fitted_efficiencies() {
        let mut p = example();
        p.model.dtype = "bf16".into();
        let t = terms();
        // 100 TFLOP/s and 1 TB/s peaks: 50 TFLOP/s, 0.8 TB/s effective,
        // the ridge at 62.5 tokens.
        p.fit = t.cost_terms(&p.model, 512.0, 100e12, 1e12);
        let m = &p.model;
        let (h, d) = (m.hidden_size as f64, m.head_dim as f64);
        let lp = m.layers as f64 * (h * d * 12.0 + 3.0 * h * m.intermediate_size as f64);
        let hp = h * m.vocab_size as f64;
        let cost = Profiled::new(&p, "p");
        let price = |b: &BatchShape| cost.predict_ns(b);
        // One decode at context 100: weights streamed, 100 tokens of KV.
        let mut b = BatchShape::default();
        b.add_decode(100);
        let want = 1e6 + (lp + hp) * 2.0 / 0.8e12 * 1e9 + 10e3 + 100.0 * 512.0 / 0.8e12 * 1e9;
        assert!(
            (price(&b) - want).abs() < 1e-6 * want,
            "{} {want}",
            price(&b)
        );
        // A 4096-token prefill is compute-bound and pays the front end.
        let mut b = BatchShape::default();
        b.add_prefill(4096, 0);
        let dense = 2.0 * lp * 4096.0 / 50e12 * 1e9;
        let head = hp * 2.0 / 0.8e12 * 1e9;
        let pairs = b.prefill_attn_pairs * 4.0 * m.layers as f64 * 4.0 * d / 50e12 * 1e9;
        let kv = 4096.0 * 512.0 / 0.8e12 * 1e9;
        let want = 1e6 + 20e6 + dense + head + 10e3 + pairs + kv;
        assert!(
            (price(&b) - want).abs() < 1e-6 * want,
            "{} {want}",
            price(&b)
        );
    }

    #[test]
    fn tables_rise_and_hold_the_ridge_as_a_knot() {
        let mut p = example();
        p.fit = terms().cost_terms(&p.model, 512.0, 1e12, 1e12);
        // f32: 4 bytes × 0.5e12 / (2 × 0.8e12) = 1.25 → knots 1 and 2.
        assert_eq!(&p.fit.token_knots[..3], &[1, 2, 4]);
        let t = terms().cost_terms(&p.model, 512.0, 100e12, 1e12);
        assert!(t.token_knots.contains(&125), "{:?}", t.token_knots);
        assert!(t.token_ns.windows(2).all(|w| w[1] >= w[0]));
        assert!(t.row_ns.windows(2).all(|w| w[1] >= w[0]));
        p.fit = t;
        assert!(crate::profile::Profile::from_toml_str(&p.to_toml_string(), "p").is_ok());
    }

    #[test]
    fn terms_out_of_range_are_refused_by_key() {
        let mut t = terms();
        t.compute_efficiency = 1.5;
        assert_eq!(t.check().unwrap_err().0, "bench.terms.compute_efficiency");
        let mut t = terms();
        t.front_end_ns = -1.0;
        assert_eq!(t.check().unwrap_err().0, "bench.terms.front_end_ns");
    }

    #[test]
    fn the_digest_is_fnv_1a() {
        // The published FNV-1a 64 test vectors.
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
    }
}
