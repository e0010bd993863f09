//! `servesim quality` and `servesim speculate`: flags and printed tables
//! around the `calibrate` crate's quantization quality gate (`quality`) and
//! speculative-decoding measurement (`spec_bench`).

use crate::ranges;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// `servesim quality` flags.
#[derive(Args, Debug)]
pub struct QualityCmd {
    /// Device: cpu, cuda, cuda:N, metal, metal:N.
    #[arg(long, default_value = "cpu", value_parser = crate::cli::device)]
    pub device: String,
    /// A Llama-style catalog preset or a Hugging Face config.json; optional with a GGUF.
    #[arg(long)]
    pub model: Option<String>,
    /// Weights (.safetensors with --model, or .gguf); seeded random weights without it.
    #[arg(long)]
    pub weights: Option<PathBuf>,
    /// Development text (UTF-8), tokenized by the GGUF's tokenizer, else as bytes.
    #[arg(long)]
    pub text: PathBuf,
    /// Weight format of the blocks' linear layers: int8 (per output channel,
    /// weight-only), q8_0 or q4_0 (GGML, per group of 32).
    #[arg(long, value_parser = crate::cli::LINEAR_FORMATS)]
    pub candidate: String,
    /// Dtype of the baseline (no bf16 on cpu).
    #[arg(long, default_value = "f32", value_parser = crate::cli::CANDLE_DTYPES)]
    pub baseline: String,
    /// Exit with status 1 when the perplexity increase exceeds this many percent.
    #[arg(long, value_parser = ranges::MAX_REGRESSION, allow_negative_numbers = true)]
    pub max_regression: Option<f64>,
    /// Tokens predicted per window (each window starts with an empty cache).
    #[arg(long, default_value_t = 256, value_parser = ranges::ANY_USIZE, allow_negative_numbers = true)]
    pub window: usize,
    /// Bootstrap resamples of the windows for the confidence interval.
    #[arg(long, default_value_t = 2000, value_parser = ranges::ANY_USIZE, allow_negative_numbers = true)]
    pub bootstrap: usize,
    /// Timed repetitions per step shape; 0 skips the speed measurement.
    #[arg(long, default_value_t = 5, allow_negative_numbers = true)]
    pub speed_reps: u32,
    /// CPU worker threads [default: RAYON_NUM_THREADS, else the physical cores].
    #[arg(long, value_parser = ranges::ANY_USIZE, allow_negative_numbers = true)]
    pub threads: Option<usize>,
    /// Seed of the bootstrap (and of random weights).
    #[arg(long, default_value_t = 0, value_parser = ranges::ANY_U64, allow_negative_numbers = true)]
    pub seed: u64,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `servesim speculate` flags.
#[derive(Args, Debug)]
pub struct SpeculateCmd {
    /// Device: cpu, cuda, cuda:N, metal, metal:N.
    #[arg(long, default_value = "cpu", value_parser = crate::cli::device)]
    pub device: String,
    /// The target: a catalog preset or config.json; optional with a GGUF.
    #[arg(long)]
    pub model: Option<String>,
    /// The target's weights (.safetensors with --model, or .gguf).
    #[arg(long)]
    pub weights: Option<PathBuf>,
    /// Draft = the target with its linear layers in this format.
    #[arg(long, value_parser = crate::cli::LINEAR_FORMATS)]
    pub draft_format: Option<String>,
    /// Draft = another model (preset or config.json) …
    #[arg(long)]
    pub draft_model: Option<String>,
    /// … with these weights (it must share the target's vocabulary).
    #[arg(long)]
    pub draft_weights: Option<PathBuf>,
    /// Text the prompts and the teacher-forced α come from.
    #[arg(long)]
    pub text: PathBuf,
    /// Draft tokens per verification (1–16).
    #[arg(long, default_value_t = 4, value_parser = ranges::ANY_USIZE, allow_negative_numbers = true)]
    pub k: usize,
    /// Sampling temperature (0: greedy).
    #[arg(long, default_value_t = 1.0, value_parser = ranges::SAMPLING_TEMPERATURE, allow_negative_numbers = true)]
    pub temperature: f64,
    /// Prompts taken from the text.
    #[arg(long, default_value_t = 4, value_parser = ranges::ANY_USIZE, allow_negative_numbers = true)]
    pub prompts: usize,
    /// Tokens per prompt.
    #[arg(long, default_value_t = 32, value_parser = ranges::ANY_USIZE, allow_negative_numbers = true)]
    pub prompt_tokens: usize,
    /// Tokens generated per prompt.
    #[arg(long, default_value_t = 64, value_parser = ranges::ANY_USIZE, allow_negative_numbers = true)]
    pub tokens: usize,
    /// Window of the teacher-forced α.
    #[arg(long, default_value_t = 128, value_parser = ranges::ANY_USIZE, allow_negative_numbers = true)]
    pub window: usize,
    /// Timed repetitions per step shape (draft/target cost).
    #[arg(long, default_value_t = 5, allow_negative_numbers = true)]
    pub speed_reps: u32,
    /// CPU worker threads [default: RAYON_NUM_THREADS, else the physical cores].
    #[arg(long, value_parser = ranges::ANY_USIZE, allow_negative_numbers = true)]
    pub threads: Option<usize>,
    #[arg(long, default_value_t = 0, value_parser = ranges::ANY_U64, allow_negative_numbers = true)]
    pub seed: u64,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[cfg(not(feature = "calibrate"))]
pub fn quality(_: QualityCmd) -> Result<()> {
    anyhow::bail!("this servesim was built without calibration (the default, simulator-only build); rebuild with --features calibrate")
}

#[cfg(not(feature = "calibrate"))]
pub fn speculate(_: SpeculateCmd) -> Result<()> {
    anyhow::bail!("this servesim was built without calibration (the default, simulator-only build); rebuild with --features calibrate")
}

#[cfg(feature = "calibrate")]
pub use with_calibrate::{quality, speculate};

#[cfg(feature = "calibrate")]
mod with_calibrate {
    use super::*;
    use calibrate::device::{DeviceSpec, OpenDevice};
    use calibrate::quality::{QualityArgs, QualityReport};
    use calibrate::spec_bench::{SpeculateArgs, SpeculateReport};

    pub fn quality(a: QualityCmd) -> Result<()> {
        let dev = OpenDevice::open(DeviceSpec::parse(&a.device)?, a.threads)?;
        let r = calibrate::quality::run(
            &dev,
            &QualityArgs {
                model: a.model,
                weights: a.weights,
                text: a.text,
                candidate: a.candidate,
                baseline: a.baseline,
                window: a.window,
                bootstrap: a.bootstrap,
                seed: a.seed,
                max_regression_pct: a.max_regression,
                speed_repetitions: a.speed_reps,
            },
        )?;
        if a.json {
            outln!("{}", serde_json::to_string_pretty(&r)?);
        } else {
            print_quality(&r, &dev);
        }
        if !r.passed {
            anyhow::bail!(
                "quality gate failed: perplexity +{:.3} % exceeds --max-regression {} %",
                r.regression_pct,
                r.max_regression_pct.unwrap_or(0.0)
            );
        }
        Ok(())
    }

    fn print_quality(r: &QualityReport, dev: &OpenDevice) {
        let mib = |b: usize| b as f64 / 1048576.0;
        outln!("model      {} ({})", r.model, r.weights);
        outln!(
            "text       {}: {} tokens predicted (tokenizer: {}), {} windows of up to {}",
            r.text,
            r.tokens,
            r.tokenizer,
            r.windows,
            r.window
        );
        outln!("candidate  scales {}", r.candidate_scales);
        outln!("device     {} ({} threads)", dev.name, dev.threads);
        outln!();
        let shapes = r.speed_shapes.map(|[c, b, p]| {
            (
                format!("decode 1×{c} ms"),
                format!("decode {b}×{c} ms"),
                format!("prefill {p} ms"),
            )
        });
        let (h1, h2, h3) = shapes.clone().unwrap_or_default();
        outln!(
            "{:<20} {:>10} {:>11} {:>12} {:>16} {:>16} {:>14}",
            "",
            "mean NLL",
            "perplexity",
            "weights MiB",
            h1,
            h2,
            h3
        );
        for s in [&r.baseline, &r.candidate] {
            let sp = s
                .speed
                .map_or((String::new(), String::new(), String::new()), |v| {
                    (
                        format!("{:.2}", v.decode_1_ms),
                        format!("{:.2}", v.decode_batch_ms),
                        format!("{:.2}", v.prefill_ms),
                    )
                });
            outln!(
                "{:<20} {:>10.4} {:>11.3} {:>12.1} {:>16} {:>16} {:>14}",
                s.label,
                s.nll,
                s.perplexity,
                mib(s.weight_bytes),
                sp.0,
                sp.1,
                sp.2
            );
        }
        if let (Some(b), Some(c)) = (r.baseline.speed, r.candidate.speed) {
            outln!(
                "{:<20} {:>10} {:>11} {:>+11.1}% {:>15.2}x {:>15.2}x {:>13.2}x",
                "candidate/baseline",
                "",
                "",
                100.0 * (mib(r.candidate.weight_bytes) / mib(r.baseline.weight_bytes) - 1.0),
                c.decode_1_ms / b.decode_1_ms,
                c.decode_batch_ms / b.decode_batch_ms,
                c.prefill_ms / b.prefill_ms
            );
        }
        outln!();
        outln!(
            "regression  perplexity {:+.3} % (95 % CI {:+.3} … {:+.3} %, {} bootstrap resamples of windows), NLL {:+.5} nats/token",
            r.regression_pct,
            r.regression_ci_pct[0],
            r.regression_ci_pct[1],
            r.bootstrap_samples,
            r.nll_regression
        );
        outln!(
            "agreement   top-1 next token {:.2} %, KL(baseline ‖ candidate) {:.5} nats/token",
            100.0 * r.top1_agreement,
            r.kl_mean
        );
        match r.max_regression_pct {
            Some(m) => outln!(
                "gate        {} (perplexity {:+.3} % vs --max-regression {m} %)",
                if r.passed { "PASS" } else { "FAIL" },
                r.regression_pct
            ),
            None => outln!("gate        none (set --max-regression PCT)"),
        }
    }

    pub fn speculate(a: SpeculateCmd) -> Result<()> {
        let dev = OpenDevice::open(DeviceSpec::parse(&a.device)?, a.threads)?;
        let r = calibrate::spec_bench::run(
            &dev,
            &SpeculateArgs {
                model: a.model,
                weights: a.weights,
                draft_format: a.draft_format,
                draft_model: a.draft_model,
                draft_weights: a.draft_weights,
                text: a.text,
                k: a.k,
                temperature: a.temperature,
                prompts: a.prompts,
                prompt_tokens: a.prompt_tokens,
                new_tokens: a.tokens,
                window: a.window,
                seed: a.seed,
                repetitions: a.speed_reps,
            },
        )?;
        if a.json {
            outln!("{}", serde_json::to_string_pretty(&r)?);
        } else {
            print_speculate(&r, &dev);
        }
        Ok(())
    }

    fn print_speculate(r: &SpeculateReport, dev: &OpenDevice) {
        outln!("target     {}", r.target);
        outln!("draft      {}", r.draft);
        outln!("device     {} ({} threads)", dev.name, dev.threads);
        outln!("k {}, temperature {}", r.k, r.temperature);
        outln!();
        outln!(
            "α teacher-forced  {:.4} (mean Σ min(p, q) over {} tokens of {})",
            r.alpha_expected,
            r.alpha_tokens,
            r.text
        );
        let pos: Vec<String> = r
            .alpha_per_position
            .iter()
            .enumerate()
            .map(|(i, a)| format!("{}:{:.3}", i + 1, a))
            .collect();
        outln!(
            "α live per draft position  {}  ({} rounds, {} tokens)",
            pos.join(" "),
            r.stats.rounds,
            r.generated_tokens
        );
        outln!(
            "accepted   {:.3} drafts per round, {:.3} tokens per target pass; i.i.d. α giving the same: {:.4}",
            r.mean_accepted,
            r.tokens_per_round,
            r.alpha_equivalent
        );
        outln!(
            "step cost  target decode {:.2} ms, target verify of {} tokens {:.2} ms, draft decode {:.2} ms (fraction {:.3})",
            r.target_decode_ms,
            r.k + 1,
            r.target_verify_ms,
            r.draft_decode_ms,
            r.draft_cost_fraction
        );
        outln!(
            "speed-up   measured {:.3}x ({:.2} s plain, {:.2} s speculative); simulator's model {:.3}x",
            r.speedup_measured,
            r.plain_wall_s,
            r.speculative_wall_s,
            r.speedup_predicted
        );
        if let (Some(x), Some(p), Some(s)) = (r.speedup_cpu, r.plain_cpu_s, r.speculative_cpu_s) {
            outln!("           by CPU time {x:.3}x ({p:.2} s plain, {s:.2} s speculative)");
        }
        outln!();
        outln!("for the scenario:");
        outln!("{}", r.scenario_table().trim_end());
    }
}
