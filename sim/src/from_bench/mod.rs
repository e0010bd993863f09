//! `calibrate --from-bench`: a profile's engine terms fitted to a team's own
//! measured benchmark results, without a server or a device.
//!
//! The points come from the accuracy readers (any format `servesim
//! accuracy` reads) and become scenarios the way `accuracy` makes them
//! ([`crate::accuracy::express`]), over the user's scenario. Every fourth
//! point in a stable order (by file, then id) is held back; the others are
//! simulated with candidate [`BenchTerms`] — the profile written to a
//! scratch file and named by `[hardware] profile`, exactly as `accuracy`
//! later runs it — and the terms minimise the mean ln²(predicted /
//! measured) of TTFT, TPOT and E2E over them (Nelder–Mead over log-scaled
//! times and logit-scaled efficiencies, [`nelder_mead`]). Points are
//! simulated in parallel by [`crate::accuracy::compare`], whose results do
//! not depend on the thread count, and the optimiser is deterministic, so
//! one set of files gives one profile.

pub mod nelder_mead;

use crate::accuracy::compare::{compare, PointOutcome};
use crate::accuracy::express::{express, Settings};
use crate::accuracy::{MeasuredPoint, Metric, Stat};
use crate::catalog::Dtype;
use crate::profile::{
    BenchError, BenchFile, BenchFit, BenchTerms, DeviceInfo, FitError, MeasurementInfo, Profile,
    ProfileMemory, ProfileModel, WeightsInfo, PROFILE_VERSION,
};
use crate::Scenario;
use toml::{Table, Value};

/// A from-bench error: one line saying what is wrong and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct FromBenchError(pub String);

/// The metrics a fit is judged by.
pub const METRICS: [Metric; 3] = [Metric::Ttft, Metric::Tpot, Metric::E2e];

/// Every `HOLD_BACK`-th point (in the stable order) is held back.
pub const HOLD_BACK: usize = 4;

/// Optimiser evaluations unless told otherwise: enough for five terms to
/// settle on synthetic measurements (see the tests).
pub const DEFAULT_EVALUATIONS: u32 = 1000;

/// Penalty per metric of a point whose simulation gives no value (an
/// overload that completes nothing): a tenfold error.
const MISSING: f64 = std::f64::consts::LN_10;

/// What a fit is asked to do.
pub struct FitRequest<'a> {
    /// The files the points came from.
    pub files: Vec<BenchFile>,
    pub points: Vec<MeasuredPoint>,
    /// The user's scenario: what the files do not record.
    pub base: &'a Table,
    /// Its path, for relative paths and messages.
    pub origin: &'a str,
    pub settings: Settings,
    /// Optimiser evaluations at most.
    pub max_evaluations: u32,
    /// The terms to start from ([`start_terms`] unless a test knows better).
    pub start: BenchTerms,
}

/// Where the optimiser starts: the CUDA-graph runtime's host times
/// (`cost::runtime`), a front end of 2 ms, and the efficiencies a tuned
/// serving engine typically reaches (0.6 of peak FLOP/s in prefill GEMMs,
/// 0.7 of peak bandwidth streaming weights).
pub fn start_terms() -> BenchTerms {
    BenchTerms {
        front_end_ns: 2e6,
        step_ns: crate::cost::runtime::CUDA_GRAPH_STEP_S * 1e9,
        seq_ns: crate::cost::runtime::CUDA_GRAPH_SEQ_S * 1e9,
        compute_efficiency: 0.6,
        bandwidth_efficiency: 0.7,
    }
}

fn logit(p: f64) -> f64 {
    (p / (1.0 - p)).ln()
}

fn logistic(u: f64) -> f64 {
    1.0 / (1.0 + (-u).exp())
}

/// The optimiser's coordinates: times in ln(ms) (ln(µs) per sequence),
/// efficiencies as logits, so every coordinate is unbounded and a step is
/// a ratio.
fn to_coords(t: &BenchTerms) -> Vec<f64> {
    vec![
        (t.front_end_ns / 1e6).ln(),
        (t.step_ns / 1e6).ln(),
        (t.seq_ns / 1e3).ln(),
        logit(t.compute_efficiency.clamp(1e-6, 1.0 - 1e-6)),
        logit(t.bandwidth_efficiency.clamp(1e-6, 1.0 - 1e-6)),
    ]
}

fn from_coords(x: &[f64]) -> BenchTerms {
    let c = |v: f64| v.clamp(-30.0, 12.0);
    BenchTerms {
        front_end_ns: c(x[0]).exp() * 1e6,
        step_ns: c(x[1]).exp() * 1e6,
        seq_ns: c(x[2]).exp() * 1e3,
        compute_efficiency: logistic(c(x[3])),
        bandwidth_efficiency: logistic(c(x[4])),
    }
}

/// The statistic a point is judged by for `metric` (its mean, else its
/// median) and the measured value.
fn headline(p: &MeasuredPoint, metric: Metric) -> Option<(Stat, f64)> {
    [Stat::Mean, Stat::P50].into_iter().find_map(|s| {
        p.measured
            .iter()
            .find(|m| m.metric == metric && m.stat == s && m.ms > 0.0)
            .map(|m| (s, m.ms))
    })
}

/// Per point and metric: predicted / measured of the headline statistic
/// (`None`: no prediction).
type Ratios = Vec<Vec<(Metric, Option<f64>)>>;

/// Simulates `points` over `base` and gives each point's ratios.
fn simulate(points: &[MeasuredPoint], base: &Table, origin: &str, settings: &Settings) -> Ratios {
    let r = compare(
        Vec::new(),
        points,
        Some((base, origin)),
        settings,
        &[],
        &|| {},
    );
    r.points
        .iter()
        .map(|pr| {
            METRICS
                .iter()
                .filter_map(|&metric| {
                    let (stat, measured) = headline(&pr.point, metric)?;
                    let predicted = match &pr.outcome {
                        PointOutcome::Compared { comparisons, .. } => comparisons
                            .iter()
                            .find(|c| c.metric == metric && c.stat == stat)
                            .and_then(|c| c.predicted_ms),
                        _ => None,
                    };
                    Some((metric, predicted.map(|p| p / measured)))
                })
                .collect()
        })
        .collect()
}

/// Mean ln²(predicted / measured) over every point's metrics: least
/// squares in log space, smooth at the optimum (an absolute value's kink
/// stalls the simplex in a narrow valley) and symmetric in over- and
/// under-prediction.
fn score(r: &Ratios) -> f64 {
    let (mut sum, mut n) = (0.0, 0usize);
    for point in r {
        for (_, ratio) in point {
            sum += match ratio {
                Some(q) if *q > 0.0 => q.ln().powi(2),
                _ => MISSING * MISSING,
            };
            n += 1;
        }
    }
    if n == 0 {
        f64::INFINITY
    } else {
        sum / n as f64
    }
}

/// Median |error| per metric, percent.
fn summary(r: &Ratios) -> BenchError {
    let med = |metric: Metric| {
        let mut v: Vec<f64> = r
            .iter()
            .flatten()
            .filter(|(m, _)| *m == metric)
            .map(|(_, q)| q.map_or(f64::INFINITY, |q| (q - 1.0).abs() * 100.0))
            .collect();
        if v.is_empty() {
            return 0.0;
        }
        let m = crate::accuracy::compare::median(&mut v);
        // Four significant figures: a profile is read by people.
        if m.is_finite() {
            (m * 100.0).round() / 100.0
        } else {
            m
        }
    };
    BenchError {
        points: r.len() as u32,
        ttft_pct: med(Metric::Ttft),
        tpot_pct: med(Metric::Tpot),
        e2e_pct: med(Metric::E2e),
    }
}

/// Mean and largest |error| over every point's metrics, percent.
fn mean_and_max(r: &Ratios) -> (f64, f64) {
    let errs: Vec<f64> = r
        .iter()
        .flatten()
        .map(|(_, q)| q.map_or(900.0, |q| (q - 1.0).abs() * 100.0))
        .collect();
    if errs.is_empty() {
        return (0.0, 0.0);
    }
    let mean = errs.iter().sum::<f64>() / errs.len() as f64;
    (mean, errs.iter().copied().fold(0.0, f64::max))
}

/// The profile of `s`'s model on `s`'s chip with no terms fitted yet.
fn template(s: &Scenario, model_id: &str, files: Vec<BenchFile>) -> Profile {
    let m = &s.model;
    let dtype = match s.weight_dtype {
        Dtype::Fp32 => "f32",
        Dtype::Fp16 => "f16",
        _ => "bf16",
    };
    let mem = &s.memory;
    let hw = &s.hardware;
    let model = ProfileModel {
        name: m.name.clone(),
        source: s.model_source.clone(),
        layers: m.layers,
        hidden_size: m.hidden_size,
        num_heads: m.num_heads,
        num_kv_heads: m.num_kv_heads,
        head_dim: m.head_dim,
        intermediate_size: m.intermediate_size,
        vocab_size: m.vocab_size,
        tied_embeddings: m.tied_embeddings,
        max_context: m.max_context,
        // Timing does not depend on these; the catalog's Llama values.
        rope_theta: 500_000.0,
        rms_norm_eps: 1e-5,
        attention_bias: false,
        rope_layout: "half".into(),
        dtype: dtype.into(),
        weights: WeightsInfo::Benchmarked {
            model: model_id.to_string(),
        },
    };
    Profile {
        version: PROFILE_VERSION,
        created_by: format!(
            "servesim {} calibrate --from-bench",
            env!("CARGO_PKG_VERSION")
        ),
        device: DeviceInfo {
            spec: "benchmark results".into(),
            name: hw.name.clone(),
            driver: "not recorded (fitted to measured results)".into(),
            threads: 0,
        },
        model: model.clone(),
        memory: ProfileMemory {
            device_bytes: mem.device_bytes,
            weight_bytes: mem.weight_bytes,
            kv_bytes_per_token: mem.kv_bytes_per_token,
            activation_bytes: mem.activation_bytes,
            runtime_bytes: mem.overhead_bytes,
            method: format!("the memory plan of {} on {} (catalog)", m.name, hw.name),
        },
        measurement: MeasurementInfo {
            warmup: 0,
            repetitions: 0,
            quick: false,
            max_context: m.max_context,
            wall_s: 0.0,
            host_copy_bytes_per_s: (hw.pcie_gbps * 1e9).clamp(1e6, 1e15),
            extra_rounds: 0,
            noise: Vec::new(),
            attention: None,
            host: None,
        },
        fit: start_terms().cost_terms(
            &model,
            mem.kv_bytes_per_token,
            hw.peak_flops(s.weight_dtype),
            hw.memory_bw_bytes_per_s(),
        ),
        held_out: FitError::default(),
        engine: None,
        elementwise: None,
        bench: Some(BenchFit {
            files,
            chip: hw.name.clone(),
            peak_tflops: hw.peak_flops(s.weight_dtype) / 1e12,
            peak_bandwidth_tbps: hw.memory_bw_tbps,
            terms: start_terms(),
            objective: "mean ln²(predicted / measured) of TTFT, TPOT and E2E (each point's mean, \
                        else median) over the training points"
                .into(),
            evaluations: 0,
            training: BenchError::default(),
            held_back: BenchError::default(),
            default_held_back: BenchError::default(),
            skipped: Vec::new(),
        }),
        samples: Vec::new(),
    }
}

/// `p` with `terms` fitted in.
fn with_terms(p: &Profile, terms: &BenchTerms) -> Profile {
    let mut p = p.clone();
    let b = p.bench.as_mut().expect("a from-bench template");
    b.terms = terms.clone();
    let (flops, bw) = (b.peak_tflops * 1e12, b.peak_bandwidth_tbps * 1e12);
    p.fit = terms.cost_terms(&p.model, p.memory.kv_bytes_per_token, flops, bw);
    p
}

/// Why a point's scenario cannot be priced by one profile of `reference`.
fn mismatch(s: &Scenario, reference: &Scenario) -> Option<String> {
    let l = &s.parallel;
    if l.tensor != 1 || l.pipeline != 1 || l.expert != 1 {
        return Some(format!(
            "runs on {} GPUs (TP {} × PP {} × EP {}): a profile prices one device",
            s.gpus(),
            l.tensor,
            l.pipeline,
            l.expert
        ));
    }
    if s.model.name != reference.model.name
        || s.hardware.name != reference.hardware.name
        || s.weight_dtype != reference.weight_dtype
    {
        return Some(format!(
            "is {} {} on {}, the other points {} {} on {}: a profile is one model on one chip",
            s.model.name,
            s.weight_dtype.name(),
            s.hardware.name,
            reference.model.name,
            reference.weight_dtype.name(),
            reference.hardware.name
        ));
    }
    None
}

/// The fitted profile, with the fit's own record in `bench`; `progress` is
/// told each evaluation's number and the best score so far.
pub fn fit(
    req: &FitRequest,
    progress: &(dyn Fn(u32, f64) + Sync),
) -> Result<Profile, FromBenchError> {
    let mut points = req.points.clone();
    points.sort_by(|a, b| (&a.source, &a.id).cmp(&(&b.source, &b.id)));
    let mut skipped = Vec::new();
    let mut usable: Vec<MeasuredPoint> = Vec::new();
    let mut reference: Option<Scenario> = None;
    for p in points {
        if METRICS.iter().all(|&m| headline(&p, m).is_none()) {
            skipped.push(format!(
                "{}: no mean or median TTFT, TPOT or E2E recorded",
                p.id
            ));
            continue;
        }
        match express(Some(req.base), req.origin, &req.settings, &p) {
            Err(u) => skipped.push(format!("{}: {}", p.id, u.reason)),
            Ok(e) => {
                if let Some(r) = &reference {
                    if let Some(why) = mismatch(&e.scenario, r) {
                        return Err(FromBenchError(format!(
                            "point {} {why}; fit each model and chip from its own files",
                            p.id
                        )));
                    }
                } else {
                    if let Some(why) = mismatch(&e.scenario, &e.scenario) {
                        return Err(FromBenchError(format!("point {} {why}", p.id)));
                    }
                    check_profiled(&e.scenario, &p)?;
                    reference = Some(e.scenario);
                }
                usable.push(p);
            }
        }
    }
    let Some(reference) = reference else {
        let first = skipped.first().cloned().unwrap_or_default();
        return Err(FromBenchError(format!(
            "no point of the files could be simulated ({} skipped; the first: {first})",
            skipped.len()
        )));
    };
    if usable.len() < HOLD_BACK {
        return Err(FromBenchError(format!(
            "{} usable point(s): a fit needs at least {HOLD_BACK} (every {HOLD_BACK}th is held \
             back to measure it){}",
            usable.len(),
            skipped
                .first()
                .map(|s| format!("; skipped: {s}"))
                .unwrap_or_default()
        )));
    }
    let (mut training, mut held) = (Vec::new(), Vec::new());
    for (i, p) in usable.into_iter().enumerate() {
        if i % HOLD_BACK == HOLD_BACK - 1 {
            held.push(p);
        } else {
            training.push(p);
        }
    }
    let model_id = training[0]
        .model
        .clone()
        .unwrap_or_else(|| reference.model.name.clone());
    let mut tpl = template(&reference, &model_id, req.files.clone());
    tpl.bench.as_mut().expect("template").skipped = skipped;

    let scratch = tempfile::Builder::new()
        .prefix("servesim-from-bench")
        .tempdir()
        .map_err(|e| FromBenchError(format!("cannot make a scratch folder: {e}")))?;
    let path = scratch.path().join("candidate.toml");
    let mut profiled_base = req.base.clone();
    let mut hw = Table::new();
    hw.insert("profile".into(), Value::String(path.display().to_string()));
    profiled_base.insert("hardware".into(), Value::Table(hw));
    let run = |terms: &BenchTerms, points: &[MeasuredPoint]| -> Result<Ratios, FromBenchError> {
        std::fs::write(&path, with_terms(&tpl, terms).to_toml_string())
            .map_err(|e| FromBenchError(format!("cannot write {}: {e}", path.display())))?;
        Ok(simulate(points, &profiled_base, req.origin, &req.settings))
    };

    let best = std::cell::Cell::new(f64::INFINITY);
    let count = std::cell::Cell::new(0u32);
    let failure: std::cell::RefCell<Option<FromBenchError>> = Default::default();
    let objective = |x: &[f64]| {
        let v = match run(&from_coords(x), &training) {
            Ok(r) => score(&r),
            Err(e) => {
                failure.borrow_mut().get_or_insert(e);
                f64::INFINITY
            }
        };
        count.set(count.get() + 1);
        best.set(best.get().min(v));
        progress(count.get(), best.get());
        v
    };
    // A first search with wide steps, then restarts from the best with
    // narrower ones while the budget lasts: a collapsed simplex is the
    // method's known failure, and a restart rebuilds it (Kelley, SIAM J.
    // Optim. 1999).
    let mut x = to_coords(&req.start);
    let mut fx = f64::INFINITY;
    let mut evaluations = 0;
    for (i, step) in [1.0, 0.5, 0.25, 0.1, 0.05, 0.25, 0.1]
        .into_iter()
        .enumerate()
    {
        let left = req.max_evaluations.saturating_sub(evaluations);
        if left < 12 {
            break;
        }
        let budget = if i == 0 { left / 2 } else { left };
        let m = nelder_mead::minimize(&objective, &x, &[step; 5], budget, 1e-7, 1e-4);
        evaluations += m.evaluations;
        if m.f < fx {
            (x, fx) = (m.x, m.f);
        }
    }
    if let Some(e) = failure.into_inner() {
        return Err(e);
    }
    let terms = from_coords(&x);

    let train_r = run(&terms, &training)?;
    let held_r = run(&terms, &held)?;
    let default_r = simulate(&held, req.base, req.origin, &req.settings);
    let mut profile = with_terms(&tpl, &terms);
    let (held_mean, held_max) = mean_and_max(&held_r);
    let (train_mean, _) = mean_and_max(&train_r);
    let round2 = |v: f64| (v * 100.0).round() / 100.0;
    profile.held_out = FitError {
        shapes: held.len() as u32,
        mape_pct: round2(held_mean),
        max_error_pct: round2(held_max),
        fitted_mape_pct: round2(train_mean),
    };
    let b = profile.bench.as_mut().expect("template");
    b.evaluations = evaluations;
    b.training = summary(&train_r);
    b.held_back = summary(&held_r);
    b.default_held_back = summary(&default_r);
    Ok(profile)
}

/// A point's scenario must be one a profile can describe: a dense model
/// with full attention in f32, f16 or bf16.
fn check_profiled(s: &Scenario, p: &MeasuredPoint) -> Result<(), FromBenchError> {
    let m = &s.model;
    if m.is_moe() || m.mla().is_some() || !m.uniform_attention() {
        return Err(FromBenchError(format!(
            "point {}: {} is not a dense model with full attention, which is what a profile \
             describes (mixture-of-experts, latent or windowed attention are priced by the \
             catalog roofline only)",
            p.id, m.name
        )));
    }
    if !matches!(s.weight_dtype, Dtype::Fp32 | Dtype::Fp16 | Dtype::Bf16) {
        return Err(FromBenchError(format!(
            "point {}: weights in {}; a profile holds f32, f16 or bf16 (set model.weight_dtype \
             in the scenario if the files' precision was one of those)",
            p.id,
            s.weight_dtype.name()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
