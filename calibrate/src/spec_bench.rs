//! `servesim speculate`: speculative sampling (`speculative`) measured on a
//! real text — α teacher-forced and per draft position in live generation,
//! the mean accepted length, the draft's step cost relative to the
//! target's, and the live speed-up next to what the simulator's model of
//! speculation (`sim::replica::speculative`) predicts for the same k, α and
//! costs — ending in the `[engine.speculative]` table a scenario takes.

use crate::device::OpenDevice;
use crate::error::{input, Result};
use crate::loader::{self, Loaded};
use crate::measure::{time_shape, Shape};
use crate::quality::{text_tokens, windows};
use crate::quant::LinearFormat;
use crate::speculative::{expected_acceptance, generate_plain, generate_speculative, AcceptStats};
use candle_core::DType;
use rand::SeedableRng;
use serde::Serialize;
use sim::replica::speculative::Speculation;
use std::path::PathBuf;
use std::time::Instant;

/// What `servesim speculate` was asked.
pub struct SpeculateArgs {
    pub model: Option<String>,
    pub weights: Option<PathBuf>,
    /// A quantized copy of the target as the draft (`q4_0`, `q8_0`, `int8`) …
    pub draft_format: Option<String>,
    /// … or another model.
    pub draft_model: Option<String>,
    pub draft_weights: Option<PathBuf>,
    pub text: PathBuf,
    pub k: usize,
    pub temperature: f64,
    pub prompts: usize,
    pub prompt_tokens: usize,
    pub new_tokens: usize,
    pub window: usize,
    pub seed: u64,
    pub repetitions: u32,
}

/// The measurements.
#[derive(Clone, Debug, Serialize)]
pub struct SpeculateReport {
    pub target: String,
    pub draft: String,
    pub text: String,
    pub k: usize,
    pub temperature: f64,
    /// Teacher-forced α = mean Σ min(p, q) over the text's tokens.
    pub alpha_expected: f64,
    pub alpha_tokens: usize,
    /// Live: α at each draft position (accepted / reached).
    pub alpha_per_position: Vec<f64>,
    pub mean_accepted: f64,
    pub tokens_per_round: f64,
    /// The i.i.d. α that gives the measured tokens per round.
    pub alpha_equivalent: f64,
    pub stats: AcceptStats,
    /// Step times (ms, medians) at the live run's mean context.
    pub target_decode_ms: f64,
    pub draft_decode_ms: f64,
    /// The target scoring k + 1 tokens at once.
    pub target_verify_ms: f64,
    pub draft_cost_fraction: f64,
    pub plain_wall_s: f64,
    pub speculative_wall_s: f64,
    pub speedup_measured: f64,
    /// CPU time of the process (all threads, from `/proc/self/stat`) over
    /// the same runs: on a machine shared with other jobs, wall time counts
    /// the time the scheduler gave to others, CPU time does not. `None`
    /// where `/proc` is absent.
    pub plain_cpu_s: Option<f64>,
    pub speculative_cpu_s: Option<f64>,
    pub speedup_cpu: Option<f64>,
    /// E(k, α) · t_decode / (t_verify + k · t_draft): the simulator's model
    /// of one verification round, with the measured α and step times.
    pub speedup_predicted: f64,
    pub generated_tokens: usize,
}

impl SpeculateReport {
    /// The scenario table that reproduces the measurement.
    pub fn scenario_table(&self) -> String {
        format!(
            "[engine.speculative]\nnum_draft_tokens = {}\nacceptance_rate = {:.4}\ndraft_cost_fraction = {:.4}\n",
            self.k,
            self.alpha_equivalent.min(0.9999),
            self.draft_cost_fraction.clamp(1e-4, 1.0)
        )
    }
}

fn load_draft(
    dev: &OpenDevice,
    a: &SpeculateArgs,
    target: &Loaded,
) -> Result<(crate::model::Model, String)> {
    match (&a.draft_format, &a.draft_weights, &a.draft_model) {
        (Some(f), None, None) => {
            let fmt = LinearFormat::parse(f, "--draft-format")?;
            Ok((target.model.with_linear_format(fmt)?, format!("the target with {} linear layers", fmt.name())))
        }
        (None, w, m) if w.is_some() || m.is_some() => {
            let d = loader::load(m.as_deref(), w.as_deref(), DType::F32, dev, a.seed.wrapping_add(1))?;
            Ok((d.model, d.weights.describe()))
        }
        (None, None, None) => Err(input(
            "a draft is needed: --draft-format q4_0|q8_0|int8 (a quantized copy of the target) or --draft-weights/--draft-model",
        )),
        _ => Err(input("--draft-format cannot be combined with --draft-weights or --draft-model")),
    }
}

/// CPU seconds the process has used (user + system, every thread), from
/// `/proc/self/stat` fields 14 and 15 in clock ticks of 1/100 s (Linux's
/// USER_HZ, fixed at 100 for `/proc`); `None` without `/proc`.
fn process_cpu_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces: count from the `)`.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3, so fields 14 and 15 are at 11 and 12.
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// Runs the whole measurement.
pub fn run(dev: &OpenDevice, a: &SpeculateArgs) -> Result<SpeculateReport> {
    if !(1..=16).contains(&a.k) {
        return Err(input(format!(
            "--k {}: allowed 1 to 16 (the scenario's range)",
            a.k
        )));
    }
    if !a.temperature.is_finite() || a.temperature < 0.0 {
        return Err(input(format!(
            "--temperature {}: must be ≥ 0",
            a.temperature
        )));
    }
    if a.prompts == 0 || a.prompt_tokens == 0 || a.new_tokens == 0 {
        return Err(input(
            "--prompts, --prompt-tokens and --tokens must be at least 1",
        ));
    }
    if !a.text.exists() {
        return Err(input(format!("--text {}: no such file", a.text.display())));
    }
    let target = loader::load(
        a.model.as_deref(),
        a.weights.as_deref(),
        DType::F32,
        dev,
        a.seed,
    )?;
    let (draft, draft_label) = load_draft(dev, a, &target)?;
    let tm = &target.model;
    if tm.cfg.vocab_size != draft.cfg.vocab_size {
        return Err(input(format!(
            "the draft's vocabulary ({}) differs from the target's ({}): they must share a tokenizer",
            draft.cfg.vocab_size, tm.cfg.vocab_size
        )));
    }
    let ids = text_tokens(&a.text, target.tokenizer.as_ref(), tm.cfg.vocab_size)?;
    let ws = windows(&ids, a.window.max(1));
    let alpha_tokens = ws.iter().map(|w| w.len() - 1).sum();
    let alpha_expected = dev
        .device
        .with_context(|| expected_acceptance(tm, &draft, &ws, a.temperature))?;

    // Prompts: the first tokens of evenly spaced stretches of the text.
    let stride = (ids.len() / a.prompts).max(1);
    let prompts: Vec<&[u32]> = (0..a.prompts)
        .map(|i| {
            let s = (i * stride).min(ids.len() - 1);
            &ids[s..(s + a.prompt_tokens).min(ids.len())]
        })
        .collect();
    let need = a.prompt_tokens + a.new_tokens + a.k + 1;
    if need > tm.cfg.max_context.min(draft.cfg.max_context) {
        return Err(input(format!(
            "--prompt-tokens + --tokens + --k + 1 = {need} exceeds the models' context"
        )));
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(a.seed);
    let mut stats = AcceptStats::new(a.k);
    // One untimed warm-up of each, then timed runs over every prompt.
    dev.device.with_context(|| -> Result<()> {
        generate_plain(tm, prompts[0], 4, a.temperature, &mut rng)?;
        generate_speculative(
            tm,
            &draft,
            prompts[0],
            4,
            a.k,
            a.temperature,
            &mut rng,
            &mut AcceptStats::new(a.k),
        )?;
        Ok(())
    })?;
    // Plain and speculative runs alternate prompt by prompt, so a change in
    // the machine's load during the measurement falls on both.
    let (mut plain_wall_s, mut speculative_wall_s) = (0.0, 0.0);
    let (mut plain_cpu, mut speculative_cpu) = (Some(0.0), Some(0.0));
    let add = |acc: &mut Option<f64>, from: Option<f64>, to: Option<f64>| {
        *acc = match (*acc, from, to) {
            (Some(a), Some(f), Some(t)) => Some(a + (t - f)),
            _ => None,
        }
    };
    for p in &prompts {
        let (t0, c0) = (Instant::now(), process_cpu_s());
        dev.device
            .with_context(|| generate_plain(tm, p, a.new_tokens, a.temperature, &mut rng))?;
        plain_wall_s += t0.elapsed().as_secs_f64();
        add(&mut plain_cpu, c0, process_cpu_s());
        let (t0, c0) = (Instant::now(), process_cpu_s());
        dev.device.with_context(|| {
            generate_speculative(
                tm,
                &draft,
                p,
                a.new_tokens,
                a.k,
                a.temperature,
                &mut rng,
                &mut stats,
            )
        })?;
        speculative_wall_s += t0.elapsed().as_secs_f64();
        add(&mut speculative_cpu, c0, process_cpu_s());
    }

    // Step costs at the runs' mean context, with calibrate's timing routine.
    let ctx = a.prompt_tokens + a.new_tokens / 2;
    let time = |m: &crate::model::Model,
                prefill: Vec<(usize, usize)>,
                decode: Vec<usize>|
     -> Result<f64> {
        let shape = Shape {
            kind: "decode",
            fitted: false,
            prefill,
            decode,
        };
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(a.seed);
        let s = dev
            .device
            .with_context(|| time_shape(dev, m, &shape, 1, a.repetitions.max(1), &mut r))?;
        Ok(s.median_ns as f64 / 1e6)
    };
    let target_decode_ms = time(tm, vec![], vec![ctx])?;
    let draft_decode_ms = time(&draft, vec![], vec![ctx])?;
    let target_verify_ms = time(tm, vec![(a.k + 1, ctx - 1)], vec![])?;
    let alpha_equivalent = stats.equivalent_alpha();
    let e = Speculation::expected_tokens(a.k as u32, alpha_equivalent.min(1.0 - 1e-12));
    let speedup_predicted =
        e * target_decode_ms / (target_verify_ms + a.k as f64 * draft_decode_ms);
    Ok(SpeculateReport {
        target: target.weights.describe(),
        draft: draft_label,
        text: a.text.display().to_string(),
        k: a.k,
        temperature: a.temperature,
        alpha_expected,
        alpha_tokens,
        alpha_per_position: stats.per_position(),
        mean_accepted: stats.mean_accepted(),
        tokens_per_round: 1.0 + stats.mean_accepted(),
        alpha_equivalent,
        target_decode_ms,
        draft_decode_ms,
        target_verify_ms,
        draft_cost_fraction: draft_decode_ms / target_decode_ms,
        plain_wall_s,
        speculative_wall_s,
        speedup_measured: plain_wall_s / speculative_wall_s,
        plain_cpu_s: plain_cpu,
        speculative_cpu_s: speculative_cpu,
        speedup_cpu: match (plain_cpu, speculative_cpu) {
            (Some(p), Some(s)) if s > 0.0 => Some(p / s),
            _ => None,
        },
        speedup_predicted,
        generated_tokens: a.new_tokens * prompts.len(),
        stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_cpu_time_advances_with_work() {
        let Some(before) = process_cpu_s() else {
            eprintln!("skipped: no /proc/self/stat");
            return;
        };
        // Spin until the tick-granular counter moves (at most a few ticks).
        let t0 = Instant::now();
        let mut x = 0u64;
        while process_cpu_s().unwrap() <= before && t0.elapsed().as_secs() < 30 {
            for i in 0..100_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
        }
        std::hint::black_box(x);
        let after = process_cpu_s().unwrap();
        assert!(
            after > before && after - before < 30.0,
            "{before} → {after}"
        );
    }
}
