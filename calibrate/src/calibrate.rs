//! `servesim calibrate`: load the model on the device, measure its memory
//! and the grid of batch shapes, fit the cost terms, and assemble the
//! versioned profile (`sim::profile::Profile`).

use crate::device::OpenDevice;
use crate::error::{input, Result};
use crate::loader::{self, Loaded};
use crate::measure::{self, Shape};
use crate::model::{Attention, SeqCache, Step};
use rand::SeedableRng;
use sim::profile::{
    DeviceInfo, FitError, MeasurementInfo, Profile, ProfileMemory, PROFILE_VERSION,
};
use sim::profiled::Basis;
use std::path::PathBuf;
use std::time::Instant;

/// What `servesim calibrate` was asked.
#[derive(Clone, Debug)]
pub struct CalibrateArgs {
    /// A catalog preset or a config.json (optional with GGUF weights).
    pub model: Option<String>,
    pub weights: Option<PathBuf>,
    pub dtype: String,
    pub max_context: Option<usize>,
    pub quick: bool,
    /// Seed of random weights and token ids.
    pub seed: u64,
    /// How the model computes attention over each sequence's cache.
    pub attention: Attention,
}

/// Progress of a calibration, for a progress bar: shapes done of total,
/// and what is being measured.
pub type ProgressFn<'a> = dyn FnMut(usize, usize, &str) + 'a;

/// Runs a calibration and returns the profile (not yet written).
pub fn calibrate(
    dev: &OpenDevice,
    args: &CalibrateArgs,
    progress: &mut ProgressFn<'_>,
) -> Result<Profile> {
    let started = Instant::now();
    let dtype = loader::parse_dtype(&args.dtype)?;
    let (device_bytes, before_load) = dev.memory()?;
    let Loaded {
        mut model, weights, ..
    } = loader::load(
        args.model.as_deref(),
        args.weights.as_deref(),
        dtype,
        dev,
        args.seed,
    )?;
    model.attention = args.attention;
    dev.synchronize()?;
    let cfg = model.cfg.clone();
    let max_context = args
        .max_context
        .unwrap_or(if args.quick { 1024 } else { 2048 });
    if max_context < 16 {
        return Err(input(format!(
            "--max-context {max_context}: must be at least 16"
        )));
    }
    let max_context = max_context.min(cfg.max_context);
    // Keep the largest batch's caches to a quarter of device memory.
    let grid = measure::plan(
        max_context,
        args.quick,
        model.kv_bytes_per_token(),
        device_bytes * 0.25,
        args.seed,
    );
    let runs = grid.shapes.len() * (grid.warmup + grid.repetitions) as usize;
    let wake_runs = measure::IDLE_KNOTS_MS.len() * grid.repetitions.min(3) as usize;
    let total = runs + wake_runs + 1;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed);

    // Memory: the largest prefill, measured on its own before the grid.
    progress(0, total, "memory");
    let activation_bytes = peak_activation(dev, &model, &grid.shapes)?;
    let mut samples = measure::time_shapes(
        dev,
        &model,
        &grid.shapes,
        grid.warmup,
        grid.repetitions,
        &mut rng,
        &mut |done, shape| progress(done, total, &describe(shape)),
    )?;
    // Repeat the shapes whose median is not yet pinned down, then judge the
    // machine (`noise`): a profile from a noisy machine says so.
    let mut extra_rounds = 0;
    while extra_rounds < crate::noise::MAX_EXTRA_ROUNDS {
        let loose: Vec<usize> = (0..samples.len())
            .filter(|&i| {
                crate::noise::median_ci_pct(&samples[i].times_ns) > crate::noise::CI_TARGET_PCT
            })
            .collect();
        if loose.is_empty() {
            break;
        }
        for &i in &loose {
            let t = measure::time_shape(dev, &model, &grid.shapes[i], 0, 1, &mut rng)?;
            let s = &mut samples[i];
            s.times_ns.push(t.median_ns);
            let mut sorted = s.times_ns.clone();
            sorted.sort_unstable();
            let n = sorted.len();
            s.median_ns = if n % 2 == 1 {
                sorted[n / 2]
            } else {
                (sorted[n / 2 - 1] + sorted[n / 2]) / 2
            };
            s.min_ns = sorted[0];
            s.max_ns = sorted[n - 1];
        }
        extra_rounds += 1;
    }
    let noise = crate::noise::judge(
        &samples
            .iter()
            .map(|s| s.times_ns.clone())
            .collect::<Vec<_>>(),
        extra_rounds,
        crate::noise::load_average(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        dev.threads.max(1),
    );
    let max_tokens = *grid.token_knots.last().expect("knots") as usize;
    samples.extend(measure::time_wake(
        dev,
        &model,
        max_tokens,
        grid.repetitions.min(3),
        &mut rng,
        &mut |done| progress(runs + done, total, "a step after idling"),
    )?);
    progress(total, total, "RMSNorm eager against fused");
    let elementwise =
        crate::elementwise::rms_norm_experiment(dev, cfg.hidden_size, args.quick, args.seed)?;
    progress(total, total, "fitting");
    let host = measure::host_copy_bandwidth(dev)?;
    let basis = Basis {
        token_knots: grid.token_knots.clone(),
        row_knots: grid.row_knots.clone(),
    };
    let fit = crate::fit::fit(&samples, &basis);
    let mut profile = Profile {
        version: PROFILE_VERSION,
        created_by: format!("servesim-calibrate {}", env!("CARGO_PKG_VERSION")),
        device: DeviceInfo {
            spec: dev.spec.label(),
            name: dev.name.clone(),
            driver: dev.driver.clone(),
            threads: dev.threads as u32,
        },
        model: cfg.to_profile(loader::dtype_name(dtype), weights),
        memory: ProfileMemory {
            device_bytes,
            weight_bytes: model.weight_bytes() as f64,
            kv_bytes_per_token: model.kv_bytes_per_token() as f64,
            activation_bytes,
            runtime_bytes: before_load,
            method: match dev.spec {
                crate::device::DeviceSpec::Cpu => "cpu: MemTotal; weights and KV from the tensors; runtime = resident set before loading; activations = peak resident set (VmHWM, reset first) of the largest prefill beyond its KV".into(),
                _ => "driver free/total; weights and KV from the tensors; runtime = memory in use before loading; activations = memory in use right after the largest prefill beyond weights and its KV".into(),
            },
        },
        measurement: MeasurementInfo {
            warmup: grid.warmup,
            repetitions: grid.repetitions,
            quick: args.quick,
            max_context: max_context as u32,
            wall_s: 0.0,
            host_copy_bytes_per_s: host,
            extra_rounds: noise.extra_rounds,
            noise: noise.findings,
            attention: Some(args.attention.name()),
            host: crate::fit::host_terms(&samples, host_method(dev)),
        },
        fit,
        held_out: FitError::default(),
        engine: None,
        elementwise: Some(elementwise),
        bench: None,
        samples,
    };
    profile.held_out = crate::fit::errors(&profile);
    profile.measurement.wall_s = started.elapsed().as_secs_f64();
    Ok(profile)
}

/// What [`measure::timed_step`] counts as host work on this device.
fn host_method(dev: &OpenDevice) -> &'static str {
    match dev.spec {
        crate::device::DeviceSpec::Cuda(_) => "cuda: step wall time beyond the CUDA-event span of the forward pass (launch gaps inside the span count as device time); the sampler and the copy of the tokens back included",
        _ => "cpu: the sampler (argmax over the vocabulary) and the copy of the tokens out, timed apart from the forward pass on the same cores",
    }
}

/// Re-fits a profile's samples with this build's fitter (same knots), and
/// recomputes its held-out error: a profile keeps every raw sample so that
/// improving the cost model does not need the device again.
pub fn refit(mut p: Profile) -> Profile {
    let basis = Basis {
        token_knots: p.fit.token_knots.clone(),
        row_knots: p.fit.row_knots.clone(),
    };
    p.fit = crate::fit::fit(&p.samples, &basis);
    if let Some(method) = p.measurement.host.as_ref().map(|h| h.method.clone()) {
        p.measurement.host = crate::fit::host_terms(&p.samples, &method);
    }
    p.held_out = crate::fit::errors(&p);
    p
}

fn describe(s: &Shape) -> String {
    let mut parts = vec![];
    for &(n, c) in &s.prefill {
        parts.push(format!("prefill {n} on {c}"));
    }
    if !s.decode.is_empty() {
        let mean = s.decode.iter().sum::<usize>() / s.decode.len();
        parts.push(format!("decode {} × ~{mean}", s.decode.len()));
    }
    format!(
        "{}{}",
        parts.join(" + "),
        if s.fitted { "" } else { " (held out)" }
    )
}

/// Memory the largest prefill of the grid needs beyond its KV cache.
fn peak_activation(dev: &OpenDevice, model: &crate::model::Model, shapes: &[Shape]) -> Result<f64> {
    let Some(&(n, _)) = shapes
        .iter()
        .filter(|s| s.kind == "prefill")
        .flat_map(|s| s.prefill.iter())
        .max_by_key(|p| p.0)
    else {
        return Ok(0.0);
    };
    let mut cache = SeqCache::new(model, n)?;
    let tokens: Vec<u32> = (0..n as u32)
        .map(|i| i % model.cfg.vocab_size as u32)
        .collect();
    // Resetting the peak resident set (Linux ≥ 4.0) lets VmHWM measure this pass alone.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let (_, before) = dev.memory()?;
    measure::run_step(
        dev,
        model,
        &mut [Step {
            cache: &mut cache,
            tokens: &tokens,
        }],
    )?;
    let (_, after) = dev.memory()?;
    let peak = dev.peak_resident().unwrap_or(after).max(after);
    let kv = (n * model.kv_bytes_per_token()) as f64;
    Ok((peak - before - kv).max(0.0))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::device::DeviceSpec;
    use sim::profile::{CostTerms, ProfileModel, WeightsInfo};

    /// A profile with empty measurements, for tests that set their own terms.
    pub fn blank_profile() -> Profile {
        let cfg = crate::model::tests::tiny_config();
        let model: ProfileModel = cfg.to_profile("f32", WeightsInfo::Random { seed: 1 });
        Profile {
            version: PROFILE_VERSION,
            created_by: "test".into(),
            device: DeviceInfo {
                spec: "cpu".into(),
                name: "cpu".into(),
                driver: "test".into(),
                threads: 1,
            },
            model,
            memory: ProfileMemory {
                device_bytes: 1e9,
                weight_bytes: 1e6,
                kv_bytes_per_token: 1e3,
                activation_bytes: 0.0,
                runtime_bytes: 0.0,
                method: "test".into(),
            },
            measurement: MeasurementInfo {
                warmup: 0,
                repetitions: 1,
                quick: true,
                max_context: 256,
                wall_s: 0.0,
                host_copy_bytes_per_s: 1e9,
                extra_rounds: 0,
                noise: vec![],
                attention: None,
                host: None,
            },
            fit: CostTerms {
                step_ns: 0.0,
                prefill_seq_ns: 0.0,
                decode_token_ns: 0.0,
                prefill_pair_ns: 0.0,
                prefill_square_ns: 0.0,
                prefill_kv_token_ns: 0.0,
                token_knots: vec![1, 2],
                token_ns: vec![0.0, 0.0],
                row_knots: vec![1, 2],
                row_ns: vec![0.0, 0.0],
                idle_knots_ms: vec![],
                wake_ns: vec![],
                falling_token_segments: vec![],
            },
            held_out: FitError::default(),
            engine: None,
            elementwise: None,
            bench: None,
            samples: vec![],
        }
    }

    /// A whole (tiny, quick) calibration on the CPU: the profile parses back
    /// and its cost model predicts its own held-out shapes within the error
    /// it reports.
    #[test]
    fn tiny_calibration_round_trips_and_predicts_its_held_out_shapes() {
        let dev = OpenDevice::open(DeviceSpec::Cpu, None).unwrap();
        let dir = std::env::temp_dir().join(format!("servesim-cal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let json = dir.join("config.json");
        std::fs::write(
            &json,
            r#"{"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 211,
                "max_position_embeddings": 256}"#,
        )
        .unwrap();
        let args = CalibrateArgs {
            model: Some(json.display().to_string()),
            weights: None,
            dtype: "f32".into(),
            max_context: Some(64),
            quick: true,
            seed: 3,
            attention: crate::model::Attention::Naive,
        };
        let mut seen = 0;
        let p = calibrate(&dev, &args, &mut |done, total, _| {
            assert!(done <= total);
            seen += 1;
        })
        .unwrap();
        assert!(seen > 10);
        let back = Profile::from_toml_str(&p.to_toml_string(), "p.toml").unwrap();
        assert_eq!(back, p);
        assert_eq!(p.held_out.shapes, 12);
        let again = crate::fit::errors(&back);
        assert!((again.mape_pct - p.held_out.mape_pct).abs() < 1e-9);
        assert!(p.memory.weight_bytes > 100_000.0 && p.memory.kv_bytes_per_token == 512.0);
        // Noisy shapes are measured again, up to the extra rounds recorded.
        let extra = p.measurement.extra_rounds as usize;
        assert!(p.samples.iter().all(|s| {
            let base = if s.kind == "wake" { 3 } else { 7 };
            (base..=base + extra).contains(&s.times_ns.len())
        }));
        assert_eq!(p.fit.idle_knots_ms, measure::IDLE_KNOTS_MS.to_vec());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
