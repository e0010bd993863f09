//! The quantization quality gate behind `servesim quality`: the per-token
//! log-likelihood of a development text under a baseline model and under a
//! candidate whose blocks' linear layers are quantized (`quant`), compared
//! token by token — mean negative log-likelihood and perplexity of both, the
//! regression with a bootstrap confidence interval over text windows (Efron
//! 1979; windows, not tokens, are resampled because tokens of one window are
//! correlated), top-1 next-token agreement and the KL divergence
//! KL(baseline ‖ candidate) of the next-token distributions — next to the
//! step time of both on the device and the weight memory saved.
//!
//! This is the check llama.cpp's `perplexity --kl-divergence` and
//! vLLM/LLM Compressor's evaluation runs make before a quantized model
//! ships: perplexity alone can hide a candidate that is confidently wrong on
//! some tokens and better on others, so agreement and KL are reported too.

use crate::device::OpenDevice;
use crate::error::{input, Result};
use crate::loader;
use crate::measure::{time_shape, Shape};
use crate::model::{Model, SeqCache};
use crate::quant::LinearFormat;
use crate::tokenizer::Tokenizer;
use candle_core::{DType, Tensor, D};
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Token ids of a development text: the model's own tokenizer when its
/// weights carry one (GGUF), else the text's UTF-8 bytes as ids (random or
/// safetensors weights; the vocabulary must have 256 ids).
pub fn text_tokens(path: &Path, tok: Option<&Tokenizer>, vocab: usize) -> Result<Vec<u32>> {
    let text = sim::input_file::read_config(path, "text file")?;
    if text.trim().is_empty() {
        return Err(input(format!(
            "--text {}: the text is empty",
            path.display()
        )));
    }
    let ids = match tok {
        Some(t) => t.encode(&text)?,
        None if vocab >= 256 => text.bytes().map(u32::from).collect(),
        None => {
            return Err(input(format!(
                "--text {}: the model has no tokenizer and its vocabulary ({vocab}) is too small for byte ids (needs 256)",
                path.display()
            )))
        }
    };
    if ids.len() < 2 {
        return Err(input(format!(
            "--text {}: the text is one token long; at least two are needed",
            path.display()
        )));
    }
    Ok(ids)
}

/// Cuts `ids` into windows of `window` predicted tokens: each window is
/// `window + 1` ids, the last id of one window is the first of the next, so
/// every token after the first is predicted exactly once, with the context
/// of its own window (the standard non-overlapping evaluation).
pub fn windows(ids: &[u32], window: usize) -> Vec<&[u32]> {
    let mut out = Vec::new();
    let mut start = 0;
    while start + 1 < ids.len() {
        let end = (start + window + 1).min(ids.len());
        out.push(&ids[start..end]);
        start = end - 1;
    }
    out
}

/// Sums over one window.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct WindowScore {
    pub tokens: usize,
    pub nll_base: f64,
    pub nll_candidate: f64,
    pub agree: usize,
    pub kl: f64,
}

/// Scores every window under both models.
pub fn score(base: &Model, cand: &Model, ids: &[u32], window: usize) -> Result<Vec<WindowScore>> {
    if window == 0 {
        return Err(input("--window must be at least 1"));
    }
    let mut out = Vec::new();
    for w in windows(ids, window) {
        let (input_ids, targets) = (&w[..w.len() - 1], &w[1..]);
        let n = targets.len();
        let lp = |m: &Model| -> Result<Tensor> {
            let mut cache = SeqCache::new(m, n)?;
            let logits = m.forward_all(&mut cache, input_ids)?;
            Ok(candle_nn::ops::log_softmax(&logits, D::Minus1)?)
        };
        let (lb, lc) = (lp(base)?, lp(cand)?);
        let tgt = Tensor::from_vec(targets.to_vec(), (n, 1), lb.device())?;
        let nll = |l: &Tensor| -> Result<f64> {
            let v = l.gather(&tgt, 1)?.to_dtype(candle_core::DType::F64)?;
            Ok(-v.sum_all()?.to_scalar::<f64>()?)
        };
        let ab = lb.argmax(D::Minus1)?.to_vec1::<u32>()?;
        let ac = lc.argmax(D::Minus1)?.to_vec1::<u32>()?;
        // KL(p_b ‖ p_c) = Σ p_b (log p_b − log p_c), per row, summed.
        let kl = (lb.exp()? * (&lb - &lc)?)?
            .sum(D::Minus1)?
            .to_dtype(candle_core::DType::F64)?
            .to_vec1::<f64>()?;
        out.push(WindowScore {
            tokens: n,
            nll_base: nll(&lb)?,
            nll_candidate: nll(&lc)?,
            agree: ab.iter().zip(&ac).filter(|(a, b)| a == b).count(),
            // Rounding can make a zero divergence a hair negative.
            kl: kl.iter().map(|k| k.max(0.0)).sum(),
        });
    }
    Ok(out)
}

/// Step times of one model on the device, ms (medians).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Speed {
    /// One sequence decoding one token at the context.
    pub decode_1_ms: f64,
    /// `batch` sequences decoding one token each.
    pub decode_batch_ms: f64,
    /// A prefill of `prefill` tokens.
    pub prefill_ms: f64,
}

/// The shapes timed for [`Speed`], with `calibrate`'s own timing routine.
pub struct SpeedPlan {
    pub context: usize,
    pub batch: usize,
    pub prefill: usize,
    pub repetitions: u32,
}

impl SpeedPlan {
    pub fn for_model(m: &Model, repetitions: u32) -> SpeedPlan {
        let context = 128.min(m.cfg.max_context);
        SpeedPlan {
            context,
            batch: 8,
            prefill: context,
            repetitions,
        }
    }

    pub fn time(&self, dev: &OpenDevice, m: &Model, seed: u64) -> Result<Speed> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut t = |prefill: Vec<(usize, usize)>, decode: Vec<usize>| -> Result<f64> {
            let shape = Shape {
                kind: if prefill.is_empty() {
                    "decode"
                } else {
                    "prefill"
                },
                fitted: false,
                prefill,
                decode,
            };
            let s = dev
                .device
                .with_context(|| time_shape(dev, m, &shape, 1, self.repetitions, &mut rng))?;
            Ok(s.median_ns as f64 / 1e6)
        };
        Ok(Speed {
            decode_1_ms: t(vec![], vec![self.context])?,
            decode_batch_ms: t(vec![], vec![self.context; self.batch])?,
            prefill_ms: t(vec![(self.prefill, 0)], vec![])?,
        })
    }
}

/// One model's line of the table.
#[derive(Clone, Debug, Serialize)]
pub struct Side {
    pub label: String,
    pub nll: f64,
    pub perplexity: f64,
    pub weight_bytes: usize,
    pub speed: Option<Speed>,
}

/// The whole comparison.
#[derive(Clone, Debug, Serialize)]
pub struct QualityReport {
    pub model: String,
    pub weights: String,
    pub text: String,
    pub tokenizer: String,
    pub tokens: usize,
    pub windows: usize,
    pub window: usize,
    pub candidate_scales: String,
    pub baseline: Side,
    pub candidate: Side,
    /// Candidate minus baseline mean NLL, nats per token.
    pub nll_regression: f64,
    /// Perplexity increase, percent: 100 (exp(ΔNLL) − 1).
    pub regression_pct: f64,
    /// 95 % bootstrap interval of `regression_pct` over windows.
    pub regression_ci_pct: [f64; 2],
    pub bootstrap_samples: usize,
    pub top1_agreement: f64,
    /// Mean KL(baseline ‖ candidate) per token, nats.
    pub kl_mean: f64,
    /// Speed context: decode context, batch, prefill tokens.
    pub speed_shapes: Option<[usize; 3]>,
    pub max_regression_pct: Option<f64>,
    pub passed: bool,
}

/// Perplexity increase (%) of the pooled windows.
fn pooled_regression(ws: &[&WindowScore]) -> f64 {
    let n: usize = ws.iter().map(|w| w.tokens).sum();
    let d: f64 = ws.iter().map(|w| w.nll_candidate - w.nll_base).sum();
    100.0 * ((d / n as f64).exp() - 1.0)
}

/// The percentile bootstrap: `samples` resamples of the windows with
/// replacement from a seeded generator; the 2.5th and 97.5th percentiles of
/// the pooled regression.
pub fn bootstrap_ci(scores: &[WindowScore], samples: usize, seed: u64) -> [f64; 2] {
    let all: Vec<&WindowScore> = scores.iter().collect();
    if scores.len() < 2 || samples == 0 {
        let r = pooled_regression(&all);
        return [r, r];
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut stats: Vec<f64> = (0..samples)
        .map(|_| {
            let pick: Vec<&WindowScore> = (0..scores.len())
                .map(|_| &scores[rng.random_range(0..scores.len())])
                .collect();
            pooled_regression(&pick)
        })
        .collect();
    stats.sort_by(f64::total_cmp);
    let at = |q: f64| stats[((q * (samples - 1) as f64).round() as usize).min(samples - 1)];
    [at(0.025), at(0.975)]
}

/// Builds the report from the window scores; the gate passes when the
/// point estimate of the perplexity increase is at most `max_regression_pct`.
#[allow(clippy::too_many_arguments)]
pub fn report(
    scores: &[WindowScore],
    base: (&Model, String, Option<Speed>),
    cand: (&Model, String, Option<Speed>),
    bootstrap: usize,
    seed: u64,
    max_regression_pct: Option<f64>,
    window: usize,
) -> QualityReport {
    let all: Vec<&WindowScore> = scores.iter().collect();
    let n: usize = scores.iter().map(|w| w.tokens).sum::<usize>().max(1);
    let nb = scores.iter().map(|w| w.nll_base).sum::<f64>() / n as f64;
    let nc = scores.iter().map(|w| w.nll_candidate).sum::<f64>() / n as f64;
    let regression_pct = pooled_regression(&all);
    let side = |(m, label, speed): (&Model, String, Option<Speed>), nll: f64| Side {
        label,
        nll,
        perplexity: nll.exp(),
        weight_bytes: m.weight_bytes(),
        speed,
    };
    QualityReport {
        model: base.0.cfg.name.clone(),
        weights: String::new(),
        text: String::new(),
        tokenizer: String::new(),
        tokens: n,
        windows: scores.len(),
        window,
        candidate_scales: cand.0.linear_format.scales().to_string(),
        nll_regression: nc - nb,
        regression_pct,
        regression_ci_pct: bootstrap_ci(scores, bootstrap, seed),
        bootstrap_samples: bootstrap,
        top1_agreement: scores.iter().map(|w| w.agree).sum::<usize>() as f64 / n as f64,
        kl_mean: scores.iter().map(|w| w.kl).sum::<f64>() / n as f64,
        speed_shapes: None,
        max_regression_pct,
        passed: max_regression_pct.is_none_or(|m| regression_pct <= m),
        baseline: side(base, nb),
        candidate: side(cand, nc),
    }
}

/// What `servesim quality` was asked.
pub struct QualityArgs {
    pub model: Option<String>,
    pub weights: Option<PathBuf>,
    pub text: PathBuf,
    pub candidate: String,
    pub baseline: String,
    pub window: usize,
    pub bootstrap: usize,
    pub seed: u64,
    pub max_regression_pct: Option<f64>,
    /// Timed repetitions per shape; 0 skips the speed measurement.
    pub speed_repetitions: u32,
}

/// Loads the baseline, converts the candidate, scores the text, times both
/// and builds the report.
pub fn run(dev: &OpenDevice, a: &QualityArgs) -> Result<QualityReport> {
    let fmt = LinearFormat::parse(&a.candidate, "--candidate")?;
    let dtype = match a.baseline.as_str() {
        "f32" | "f16" | "bf16" => loader::parse_dtype(&a.baseline)?,
        b => {
            return Err(input(format!(
                "--baseline: unknown dtype {b:?}; allowed: f32, f16, bf16"
            )))
        }
    };
    if let Some(m) = a.max_regression_pct {
        if !m.is_finite() || m < 0.0 {
            return Err(input(format!(
                "--max-regression: {m} is not a percentage ≥ 0"
            )));
        }
    }
    if !a.text.exists() {
        return Err(input(format!("--text {}: no such file", a.text.display())));
    }
    let base = loader::load(a.model.as_deref(), a.weights.as_deref(), dtype, dev, a.seed)?;
    // The candidate is converted from f32 weights.
    let f32_copy = if dtype == DType::F32 {
        None
    } else {
        Some(loader::load(
            a.model.as_deref(),
            a.weights.as_deref(),
            DType::F32,
            dev,
            a.seed,
        )?)
    };
    let cand = f32_copy
        .as_ref()
        .map_or(&base.model, |l| &l.model)
        .with_linear_format(fmt)?;
    let ids = text_tokens(&a.text, base.tokenizer.as_ref(), base.model.cfg.vocab_size)?;
    let scores = dev
        .device
        .with_context(|| score(&base.model, &cand, &ids, a.window))?;
    let plan = SpeedPlan::for_model(&base.model, a.speed_repetitions);
    let (sb, sc) = if a.speed_repetitions == 0 {
        (None, None)
    } else {
        (
            Some(plan.time(dev, &base.model, a.seed)?),
            Some(plan.time(dev, &cand, a.seed)?),
        )
    };
    let mut r = report(
        &scores,
        (&base.model, loader::dtype_name(dtype).to_string(), sb),
        (&cand, format!("{} (from f32)", fmt.name()), sc),
        a.bootstrap,
        a.seed,
        a.max_regression_pct,
        a.window,
    );
    r.weights = base.weights.describe();
    r.text = a.text.display().to_string();
    r.tokenizer = if base.tokenizer.is_some() {
        "the model's (GGUF)".into()
    } else {
        "UTF-8 bytes".into()
    };
    r.speed_shapes = (a.speed_repetitions > 0).then_some([plan.context, plan.batch, plan.prefill]);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::random_weights;
    use crate::model::tests::tiny_config;
    use candle_core::Device;

    #[test]
    fn windows_predict_every_token_once() {
        let ids: Vec<u32> = (0..10).collect();
        let w = windows(&ids, 4);
        assert_eq!(w, vec![&ids[0..5], &ids[4..9], &ids[8..10]]);
        assert_eq!(w.iter().map(|w| w.len() - 1).sum::<usize>(), 9);
    }

    /// Weights that per-channel INT8 represents exactly: integers in
    /// [−127, 127] times a power of two, each row holding a ±127.
    fn representable_model() -> Model {
        let cfg = tiny_config();
        let mut w = random_weights(&cfg, 11, &Device::Cpu).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        for (name, t) in w.iter_mut() {
            if t.rank() != 2 || !name.starts_with("model.layers.") {
                continue;
            }
            let (r, c) = t.dims2().unwrap();
            let v: Vec<f32> = (0..r * c)
                .map(|i| {
                    let k = if i % c == i / c % c {
                        127
                    } else {
                        rng.random_range(-127..=127)
                    };
                    k as f32 / 1024.0
                })
                .collect();
            *t = Tensor::from_vec(v, (r, c), &Device::Cpu).unwrap();
        }
        Model::from_tensors(&cfg, w, DType::F32, &Device::Cpu, "test").unwrap()
    }

    fn text(n: usize) -> Vec<u32> {
        (0..n).map(|i| ((i * 37 + i / 5) % 211) as u32).collect()
    }

    #[test]
    fn int8_of_exactly_representable_weights_has_zero_regression() {
        let base = representable_model();
        let cand = base.with_linear_format(LinearFormat::Int8).unwrap();
        assert!(cand.weight_bytes() < base.weight_bytes());
        let s = score(&base, &cand, &text(200), 48).unwrap();
        let r = report(
            &s,
            (&base, "f32".into(), None),
            (&cand, "int8".into(), None),
            200,
            1,
            Some(0.0),
            48,
        );
        assert_eq!(r.regression_pct, 0.0);
        assert_eq!(r.regression_ci_pct, [0.0, 0.0]);
        assert_eq!(r.top1_agreement, 1.0);
        assert_eq!(r.kl_mean, 0.0);
        assert!(r.passed);
        assert_eq!(r.tokens, 199);
        assert_eq!(r.windows, 5);
    }

    #[test]
    fn the_gate_fails_a_broken_candidate_and_passes_a_good_one() {
        let base = crate::model::tests::tiny_model(5);
        // A text the baseline predicts well (its own greedy continuation):
        // on an arbitrary text a random model is no better than another.
        let ids = base.generate_alone(&[1, 2, 3], 240).unwrap();
        // Real quantization of random weights: small, positive regression.
        let q8 = base.with_linear_format(LinearFormat::Int8).unwrap();
        let s = score(&base, &q8, &ids, 60).unwrap();
        let good = report(
            &s,
            (&base, "f32".into(), None),
            (&q8, "int8".into(), None),
            500,
            1,
            Some(5.0),
            60,
        );
        assert!(good.passed, "{good:?}");
        assert!(good.top1_agreement > 0.9, "{good:?}");
        // A broken candidate: the same architecture with other weights.
        let broken = crate::model::tests::tiny_model(6);
        let s = score(&base, &broken, &ids, 60).unwrap();
        let bad = report(
            &s,
            (&base, "f32".into(), None),
            (&broken, "broken".into(), None),
            500,
            1,
            Some(5.0),
            60,
        );
        assert!(!bad.passed, "{bad:?}");
        assert!(bad.kl_mean > good.kl_mean * 10.0, "{bad:?}");
        assert!(bad.regression_ci_pct[0] <= bad.regression_pct);
        assert!(bad.regression_pct <= bad.regression_ci_pct[1]);
    }

    #[test]
    fn empty_and_missing_texts_are_named() {
        let dir = std::env::temp_dir().join(format!("servesim-q-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("empty.txt");
        std::fs::write(&p, "  \n").unwrap();
        let e = text_tokens(&p, None, 300).err().unwrap().to_string();
        assert!(e.contains("empty.txt: the text is empty"), "{e}");
        let e = text_tokens(&dir.join("nope.txt"), None, 300)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("nope.txt"), "{e}");
        std::fs::write(&p, "hello").unwrap();
        assert_eq!(
            text_tokens(&p, None, 300).unwrap(),
            b"hello".map(u32::from).to_vec()
        );
        let e = text_tokens(&p, None, 100).err().unwrap().to_string();
        assert!(e.contains("too small for byte ids"), "{e}");
    }
}
