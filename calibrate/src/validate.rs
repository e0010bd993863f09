//! `servesim validate`: the same workload served for real by the live
//! engine and simulated with the profile, compared side by side (TTFT, TPOT
//! and E2E percentiles and throughput, with the relative error of each),
//! plus the per-iteration error of the profile on the shapes the live run
//! actually executed, and the check that batching does not change a
//! sequence's greedy tokens.

use crate::device::{DeviceSpec, OpenDevice};
use crate::engine::{self, Iteration};
use crate::error::{input, Result};
use crate::loader;
use crate::repeat::RunSpread;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use sim::profile::Profile;
use sim::profiled::Profiled;
use sim::report::{self, Summary};
use sim::scenario::{BatchPolicyKind, PreemptionMode};
use sim::{Scenario, Simulation};
use std::path::{Path, PathBuf};

/// What `servesim validate` was asked.
#[derive(Clone, Debug)]
pub struct ValidateArgs {
    pub profile: PathBuf,
    pub scenario: PathBuf,
    /// Overrides the profile's device (`cpu`, `cuda:1`, …).
    pub device: Option<String>,
    /// Sequences re-run alone for the batching check.
    pub alone_checks: usize,
    /// Times the live engine serves the workload (≥ 1); with more than one
    /// the table compares the simulation with the runs' mean and shows their
    /// spread ([`crate::repeat`]).
    pub live_runs: usize,
}

/// One metric, measured and simulated.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub metric: String,
    pub measured: f64,
    pub simulated: f64,
    /// (simulated − measured) / measured, percent.
    pub error_pct: f64,
    /// With repeated live runs: each run's value and their spread
    /// (`measured` is then their mean).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_runs: Option<RunSpread>,
}

/// The profile's error on the iterations the live run executed.
#[derive(Clone, Debug, Serialize)]
pub struct IterationError {
    pub kind: String,
    pub iterations: u64,
    pub mean_measured_ms: f64,
    pub mean_predicted_ms: f64,
    /// Mean absolute percentage error per iteration.
    pub mape_pct: f64,
    /// Σ predicted / Σ measured − 1, percent (the bias a latency sum sees).
    pub bias_pct: f64,
    /// Median of predicted / measured − 1, percent: the typical iteration's
    /// offset, which a few slow outliers (the machine stalling) do not move.
    pub median_pct: f64,
}

/// Greedy tokens batched vs alone.
#[derive(Clone, Debug, Serialize)]
pub struct Correctness {
    pub checked: usize,
    pub identical: usize,
    /// Request ids whose tokens differed, with the first differing position.
    pub mismatches: Vec<(u32, usize)>,
    /// Decoded text of the first checked request (models with a tokenizer).
    pub sample_text: Option<String>,
}

/// The whole comparison (`validation.json`).
#[derive(Clone, Debug, Serialize)]
pub struct Validation {
    pub scenario: String,
    pub profile: String,
    pub device: String,
    pub model: String,
    pub requests: usize,
    pub rows: Vec<Row>,
    pub iterations: Vec<IterationError>,
    /// The live machine's speed against the profile (`drift`).
    pub drift: Option<crate::drift::Drift>,
    pub correctness: Correctness,
    /// Wall time of the live runs, summed.
    pub live_wall_s: f64,
    /// Live runs behind `measured` (each row's `live_runs` when > 1).
    pub live_runs: usize,
    /// The first live run.
    pub measured: Summary,
    pub simulated: Summary,
    /// Every live iteration, measured and predicted (`iterations.csv`).
    #[serde(skip)]
    pub iteration_records: Vec<IterationRecord>,
}

/// One live iteration: its shape, the wall time it took and what the
/// profile predicts for it.
#[derive(Clone, Debug, Serialize)]
pub struct IterationRecord {
    /// Which live run (0-based) executed it.
    pub run: u32,
    pub start_ms: f64,
    pub prefill_seqs: u32,
    pub prefill_tokens: u64,
    pub prefill_attn_pairs: f64,
    pub decode_seqs: u32,
    pub decode_context_tokens: u64,
    pub measured_ms: f64,
    pub predicted_ms: f64,
}

/// Loads the scenario with the profile as its hardware and model (the
/// profile replaces `[hardware]` and `[model]`), and refuses, naming the
/// key, what the live engine cannot run. `validate` and `serve --engine
/// live` both serve a scenario this way.
pub fn live_scenario(scenario: &Path, profile: &Path) -> Result<Scenario> {
    let origin = scenario.display().to_string();
    let text = sim::input_file::read_config(scenario, "scenario file")?;
    let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        input(format!(
            "{origin}: TOML syntax error: {}",
            e.message().trim()
        ))
    })?;
    // The model and the device come from the profile.
    let abs = std::fs::canonicalize(profile)
        .map_err(|e| input(format!("--profile {}: {e}", profile.display())))?;
    let mut hw = toml::Table::new();
    hw.insert(
        "profile".into(),
        toml::Value::String(abs.display().to_string()),
    );
    table.insert("hardware".into(), toml::Value::Table(hw));
    table.remove("model");
    let s = Scenario::from_table(table, &origin).map_err(|e| input(e.to_string()))?;
    let e = s.engine();
    let refuse = |key: &str, why: &str| Err(input(format!("{origin}: {key}: {why}")));
    if s.replicas() != 1 {
        return refuse(
            "fleet.replicas",
            "the live engine is one replica; set it to 1",
        );
    }
    if e.policy == BatchPolicyKind::Static {
        return refuse(
            "engine.policy",
            "static batching pads prompts, which the live engine does not run; use continuous, vllm, sarathi or orca",
        );
    }
    if e.prefix_caching {
        return refuse(
            "engine.prefix_caching",
            "the live engine keeps no prefix cache; set it to false",
        );
    }
    if e.speculative.is_some() {
        return refuse(
            "engine.speculative",
            "the live engine does not decode speculatively; remove it",
        );
    }
    if e.preemption == PreemptionMode::Swap {
        return refuse(
            "engine.preemption",
            "the live engine recomputes preempted sequences; use \"recompute\"",
        );
    }
    Ok(s)
}

/// [`live_scenario`], and what `validate` needs of the workload: open-loop
/// requests, a count to replay.
pub fn scenario_with_profile(scenario: &Path, profile: &Path) -> Result<Scenario> {
    let s = live_scenario(scenario, profile)?;
    let (w, h) = (s.workload(), s.horizon());
    let origin = scenario.display();
    let refuse = |key: &str, why: &str| Err(input(format!("{origin}: {key}: {why}")));
    if w.conversation.is_some() || w.shared_prefix.is_some() {
        return refuse(
            "workload",
            "validate serves open-loop requests without shared prefixes or conversations",
        );
    }
    if h.requests.is_none() || h.duration_s.is_some() {
        return refuse(
            "horizon",
            "validate needs `requests` (a count) and no `duration_s`",
        );
    }
    Ok(s)
}

/// The header of `iterations.csv`.
pub const ITERATION_COLUMNS: &str = "run,start_ms,prefill_seqs,prefill_tokens,prefill_attn_pairs,decode_seqs,decode_context_tokens,measured_ms,predicted_ms";

impl IterationRecord {
    /// One `iterations.csv` row.
    pub fn csv_row(&self) -> String {
        format!(
            "{},{:.3},{},{},{},{},{},{:.4},{:.4}",
            self.run,
            self.start_ms,
            self.prefill_seqs,
            self.prefill_tokens,
            self.prefill_attn_pairs,
            self.decode_seqs,
            self.decode_context_tokens,
            self.measured_ms,
            self.predicted_ms
        )
    }
}

/// Runs the validation. `progress(phase, done, total)` reports the live run.
pub fn validate(
    args: &ValidateArgs,
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Result<Validation> {
    let profile_origin = args.profile.display().to_string();
    let profile = Profile::load(&args.profile).map_err(|e| input(e.to_string()))?;
    let scenario = scenario_with_profile(&args.scenario, &args.profile)?;
    let spec = DeviceSpec::parse(args.device.as_deref().unwrap_or(&profile.device.spec))?;
    let threads = (profile.device.threads > 0).then_some(profile.device.threads as usize);
    let dev = OpenDevice::open(spec, threads)?;
    let mut loaded = loader::from_profile(&profile.model, &dev)?;
    // Served with the attention the profile was measured with.
    if let Some(a) = &profile.measurement.attention {
        loaded.model.attention = crate::model::Attention::parse(a).map_err(input)?;
    }
    let model = &loaded.model;

    // The workload, exactly as the simulator will generate it.
    let n = scenario.horizon().requests.expect("checked") as usize;
    let seed = scenario.seed();
    let ctx = sim::workload::Context::new(&scenario.origin, &scenario.base_dir, seed);
    let mut source =
        sim::workload::build(scenario.workload(), &ctx).map_err(|e| input(e.to_string()))?;
    let engine_cfg = scenario.engine();
    let specs: Vec<_> = (0..n).map_while(|_| source.next_request()).collect();
    let bs = engine_cfg.block_size as u64;
    let splits = engine_cfg.policy == BatchPolicyKind::Sarathi;
    for (i, r) in specs.iter().enumerate() {
        let (p, o) = (r.prompt_tokens as u64, r.output_tokens as u64);
        let why = if p + o > scenario.max_model_len as u64 {
            Some("prompt + output exceeds engine.max_model_len")
        } else if p > engine_cfg.max_batched_tokens as u64 && !splits {
            Some("the prompt exceeds engine.max_batched_tokens")
        } else if (p + o - 1).div_ceil(bs) > scenario.memory.kv_blocks {
            Some("it cannot fit the KV cache")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(input(format!(
                "{}: request {i} (prompt {p}, output {o}) would be rejected: {why}; validate needs every request served",
                args.scenario.display()
            )));
        }
    }
    // Token ids: seeded random ids (timing does not depend on them).
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x70_4B_E2);
    let vocab = model.cfg.vocab_size as u32;
    let prompts: Vec<Vec<u32>> = specs
        .iter()
        .map(|r| {
            (0..r.prompt_tokens)
                .map(|_| rng.random_range(0..vocab))
                .collect()
        })
        .collect();

    // Warm the device up (first-touch allocations, thread pools) so the
    // first requests are not charged for it.
    for _ in 0..3 {
        model.generate_alone(&prompts[0], 2)?;
    }
    if args.live_runs == 0 {
        return Err(input("--live-runs: must be at least 1".to_string()));
    }
    let slo = scenario.slo().map(sim::scenario::SloCfg::targets);
    let mut runs: Vec<(engine::LiveRun, Summary)> = Vec::with_capacity(args.live_runs);
    let mut live_wall_s = 0.0;
    for k in 0..args.live_runs {
        let phase = if args.live_runs == 1 {
            "live".to_string()
        } else {
            format!("live {}/{}", k + 1, args.live_runs)
        };
        let wall = std::time::Instant::now();
        let live = engine::serve(
            &dev,
            model,
            &scenario,
            &specs,
            prompts.clone(),
            &mut |d, t| progress(&phase, d, t),
        )?;
        live_wall_s += wall.elapsed().as_secs_f64();
        let mut measured = Summary {
            scenario: scenario.name().to_string(),
            seed,
            cost_source: format!("live engine on {} ({})", dev.name, dev.spec.label()),
            model: model.cfg.name.clone(),
            hardware: dev.name.clone(),
            replicas: 1,
            tensor_parallel: 1,
            gpus: 1,
            duration_s: live.end.as_secs_f64(),
            ..Summary::default()
        };
        report::summarize_requests(
            &live.requests,
            live.itl.clone(),
            live.end,
            1,
            slo,
            &mut measured,
        )
        .map_err(crate::Error::Io)?;
        measured.engine.iterations = live.iterations.len() as u64;
        measured.engine.preemptions = live.preemptions;
        runs.push((live, measured));
    }

    progress("simulating", 0, 1);
    let simulated = Simulation::new(&scenario)
        .run(|_| {})
        .map_err(|e| input(e.to_string()))?
        .summary;

    let summaries: Vec<&Summary> = runs.iter().map(|(_, m)| m).collect();
    let rows = compare_runs(&summaries, &simulated);
    let cost = Profiled::new(&profile, &profile_origin);
    let all_iterations: Vec<&Iteration> = runs.iter().flat_map(|(l, _)| &l.iterations).collect();
    let iterations = iteration_errors(&cost, &all_iterations);
    let drift = crate::drift::drift(
        &all_iterations
            .iter()
            .map(|it| (it.wall_ns as f64, cost.predict_ns(&it.shape)))
            .collect::<Vec<_>>(),
    );
    let iteration_records = runs
        .iter()
        .enumerate()
        .flat_map(|(k, (live, _))| live.iterations.iter().map(move |it| (k as u32, it)))
        .map(|(run, it)| IterationRecord {
            run,
            start_ms: it.start.as_millis_f64(),
            prefill_seqs: it.shape.prefill_seqs,
            prefill_tokens: it.shape.prefill_tokens,
            prefill_attn_pairs: it.shape.prefill_attn_pairs,
            decode_seqs: it.shape.decode_seqs,
            decode_context_tokens: it.shape.decode_context_tokens,
            measured_ms: it.wall_ns as f64 / 1e6,
            predicted_ms: cost.predict_ns(&it.shape) / 1e6,
        })
        .collect();
    // The batching check reads the first run's tokens (greedy decoding makes
    // every run's tokens the same).
    let (live, measured) = runs.swap_remove(0);

    progress("batched vs alone", 0, args.alone_checks);
    let picks = pick(live.requests.len(), args.alone_checks);
    let mut mismatches = vec![];
    for (k, &i) in picks.iter().enumerate() {
        let alone = model.generate_alone(&live.prompts[i], live.outputs[i].len())?;
        if alone != live.outputs[i] {
            let at = alone
                .iter()
                .zip(&live.outputs[i])
                .take_while(|(a, b)| a == b)
                .count();
            mismatches.push((i as u32, at));
        }
        progress("batched vs alone", k + 1, picks.len());
    }
    let sample_text = loaded
        .tokenizer
        .as_ref()
        .zip(picks.first())
        .map(|(t, &i)| t.decode(&live.outputs[i]));
    Ok(Validation {
        scenario: args.scenario.display().to_string(),
        profile: profile_origin,
        device: format!("{} ({})", dev.name, dev.spec.label()),
        model: model.cfg.name.clone(),
        requests: live.requests.len(),
        rows,
        iterations,
        drift,
        correctness: Correctness {
            checked: picks.len(),
            identical: picks.len() - mismatches.len(),
            mismatches,
            sample_text,
        },
        live_wall_s,
        live_runs: args.live_runs,
        measured,
        simulated,
        iteration_records,
    })
}

/// Up to `k` request indices spread over the run (first and last included).
fn pick(n: usize, k: usize) -> Vec<usize> {
    if n == 0 || k == 0 {
        return vec![];
    }
    let k = k.min(n);
    let mut v: Vec<usize> = (0..k)
        .map(|j| if k == 1 { 0 } else { j * (n - 1) / (k - 1) })
        .collect();
    v.dedup();
    v
}

/// The side-by-side table.
pub fn compare(m: &Summary, s: &Summary) -> Vec<Row> {
    let mut rows = vec![];
    let mut add = |metric: &str, a: f64, b: f64| {
        rows.push(Row {
            metric: metric.into(),
            measured: a,
            simulated: b,
            error_pct: if a != 0.0 { (b - a) / a * 100.0 } else { 0.0 },
            live_runs: None,
        });
    };
    for (name, md, sd) in [
        ("TTFT", &m.latency.ttft_ms, &s.latency.ttft_ms),
        ("TPOT", &m.latency.tpot_ms, &s.latency.tpot_ms),
        ("E2E", &m.latency.e2e_ms, &s.latency.e2e_ms),
    ] {
        add(&format!("{name} p50 (ms)"), md.p50, sd.p50);
        add(&format!("{name} p90 (ms)"), md.p90, sd.p90);
        add(&format!("{name} p99 (ms)"), md.p99, sd.p99);
    }
    add(
        "throughput (output tok/s)",
        m.throughput.output_tokens_per_s,
        s.throughput.output_tokens_per_s,
    );
    add(
        "throughput (req/s)",
        m.throughput.requests_per_s,
        s.throughput.requests_per_s,
    );
    rows
}

/// The side-by-side table against several live runs of the same requests:
/// each metric's measured value is the runs' mean, with their spread.
pub fn compare_runs(live: &[&Summary], s: &Summary) -> Vec<Row> {
    let per_run: Vec<Vec<Row>> = live.iter().map(|m| compare(m, s)).collect();
    let mut rows = per_run[0].clone();
    if live.len() < 2 {
        return rows;
    }
    for (i, row) in rows.iter_mut().enumerate() {
        let values: Vec<f64> = per_run.iter().map(|r| r[i].measured).collect();
        let spread = RunSpread::of(&values).expect("two or more runs");
        row.measured = spread.mean;
        row.error_pct = if spread.mean != 0.0 {
            (row.simulated - spread.mean) / spread.mean * 100.0
        } else {
            0.0
        };
        row.live_runs = Some(spread);
    }
    rows
}

/// The profile's error on each executed iteration, by kind of batch.
pub fn iteration_errors(cost: &Profiled, its: &[&Iteration]) -> Vec<IterationError> {
    type Keep = fn(&sim::cost::BatchShape) -> bool;
    let kinds: [(&str, Keep); 4] = [
        ("all", |_| true),
        ("decode only", |b| b.prefill_seqs == 0),
        ("prefill only", |b| b.decode_seqs == 0),
        ("mixed", |b| b.prefill_seqs > 0 && b.decode_seqs > 0),
    ];
    kinds
        .iter()
        .filter_map(|(kind, keep)| {
            let v: Vec<(f64, f64)> = its
                .iter()
                .filter(|it| keep(&it.shape))
                .map(|it| (it.wall_ns as f64, cost.predict_ns(&it.shape)))
                .collect();
            if v.is_empty() {
                return None;
            }
            let n = v.len() as f64;
            let (sm, sp): (f64, f64) = v.iter().fold((0.0, 0.0), |a, x| (a.0 + x.0, a.1 + x.1));
            Some(IterationError {
                kind: kind.to_string(),
                iterations: v.len() as u64,
                mean_measured_ms: sm / n / 1e6,
                mean_predicted_ms: sp / n / 1e6,
                mape_pct: v
                    .iter()
                    .map(|(m, p)| (p - m).abs() / m * 100.0)
                    .sum::<f64>()
                    / n,
                bias_pct: (sp / sm - 1.0) * 100.0,
                median_pct: crate::drift::median(
                    v.iter().map(|(m, p)| (p / m - 1.0) * 100.0).collect(),
                ),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_spread_over_the_run() {
        assert_eq!(pick(10, 4), vec![0, 3, 6, 9]);
        assert_eq!(pick(2, 4), vec![0, 1]);
        assert_eq!(pick(5, 1), vec![0]);
        assert!(pick(0, 3).is_empty());
    }
}
