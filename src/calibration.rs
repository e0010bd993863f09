//! `servesim calibrate` and `servesim validate`: progress bars and printing
//! around the `calibrate` crate. Without the `calibrate` feature both say how
//! to get a build that has them.

use crate::cli::{CalibrateCmd, ValidateCmd};
use anyhow::Result;

#[cfg(not(feature = "calibrate"))]
pub fn calibrate(_: CalibrateCmd) -> Result<()> {
    anyhow::bail!("this servesim was built without calibration (the default, simulator-only build); rebuild with --features calibrate")
}

#[cfg(not(feature = "calibrate"))]
pub fn validate(_: ValidateCmd) -> Result<()> {
    anyhow::bail!("this servesim was built without calibration (the default, simulator-only build); rebuild with --features calibrate")
}

#[cfg(feature = "calibrate")]
pub use with_calibrate::{calibrate, validate};

#[cfg(feature = "calibrate")]
mod with_calibrate {
    use super::*;
    use anyhow::Context;
    use calibrate::calibrate::CalibrateArgs;
    use calibrate::device::{DeviceSpec, OpenDevice};
    use calibrate::validate::{ValidateArgs, Validation};
    use indicatif::{ProgressBar, ProgressStyle};
    use sim::catalog::GIB;
    use std::path::Path;

    fn bar(len: u64) -> ProgressBar {
        let b = ProgressBar::new(len);
        b.set_style(
            ProgressStyle::with_template(
                "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}",
            )
            .expect("valid template"),
        );
        b
    }

    pub fn calibrate(a: CalibrateCmd) -> Result<()> {
        let out = crate::profile_out::profile_path(&a.out)?;
        let profile = match &a.refit {
            Some(path) => calibrate::calibrate::refit(sim::profile::Profile::load(path)?),
            None => {
                let spec = DeviceSpec::parse(&a.device)?;
                let dev = OpenDevice::open(spec, a.threads)?;
                let args = CalibrateArgs {
                    model: a.model.clone(),
                    weights: a.weights.clone(),
                    dtype: a.dtype.clone().unwrap_or_else(|| "f32".into()),
                    max_context: a.max_context,
                    quick: a.quick,
                    seed: a.seed,
                    attention: calibrate::model::Attention::parse(&a.attention).map_err(
                        |_| {
                            anyhow::anyhow!(
                                "--attention {}: expected `naive`, `tiled` or `tiled:BLOCK` (BLOCK 1 to 65536 keys)",
                                a.attention
                            )
                        },
                    )?,
                };
                let pb = bar(1);
                pb.set_prefix(format!("calibrating on {}", dev.spec.label()));
                let profile =
                    calibrate::calibrate::calibrate(&dev, &args, &mut |done, total, what| {
                        pb.set_length(total as u64);
                        pb.set_position(done as u64);
                        pb.set_message(what.to_string());
                    })?;
                pb.finish_and_clear();
                profile
            }
        };
        crate::profile_out::write_profile(&out, &profile)?;
        for finding in &profile.measurement.noise {
            outln!("noise      {finding}");
        }
        let m = &profile.model;
        let mem = &profile.memory;
        let f = &profile.fit;
        outln!(
            "device     {} ({}; {}; {} threads)",
            profile.device.name,
            profile.device.spec,
            profile.device.driver,
            profile.device.threads
        );
        outln!(
            "model      {} ({}): {} layers, hidden {}, {}/{} heads × {}, MLP {}, vocab {}, {}",
            m.name,
            m.source,
            m.layers,
            m.hidden_size,
            m.num_heads,
            m.num_kv_heads,
            m.head_dim,
            m.intermediate_size,
            m.vocab_size,
            m.dtype
        );
        outln!("           {}", m.weights.describe());
        outln!(
            "memory     weights {:.1} MiB, KV {:.1} KiB/token, activations {:.1} MiB, runtime {:.1} MiB of {:.1} GiB",
            mem.weight_bytes / 1048576.0,
            mem.kv_bytes_per_token / 1024.0,
            mem.activation_bytes / 1048576.0,
            mem.runtime_bytes / 1048576.0,
            mem.device_bytes / GIB
        );
        let fitted = profile.samples.iter().filter(|s| s.fitted).count();
        outln!(
            "measured   {} shapes ({} fitted, {} held out) × {} repetitions in {:.1} s",
            profile.samples.len(),
            fitted,
            profile.held_out.shapes,
            profile.measurement.repetitions,
            profile.measurement.wall_s
        );
        outln!(
            "fit        step {:.3} ms + {:.3} ms per prefill + {:.2} µs per decode context token + {:.2} µs per prefill KV token + {:.4} µs per prefill pair + {:.4} µs per n²",
            f.step_ns / 1e6,
            f.prefill_seq_ns / 1e6,
            f.decode_token_ns / 1e3,
            f.prefill_kv_token_ns / 1e3,
            f.prefill_pair_ns / 1e3,
            f.prefill_square_ns / 1e3
        );
        let table = |knots: &[u32], ns: &[f64]| {
            knots
                .iter()
                .zip(ns)
                .map(|(k, v)| format!("{k}:{:.2}", v / 1e6))
                .collect::<Vec<_>>()
                .join(" ")
        };
        outln!(
            "           tokens→ms {}",
            table(&f.token_knots, &f.token_ns)
        );
        outln!("           rows→ms   {}", table(&f.row_knots, &f.row_ns));
        if let Some(h) = &profile.measurement.host {
            outln!(
                "host       {:.3} ms per step + {:.2} µs per sequence, {:.1} % of the measured steps ({})",
                h.step_ns / 1e6,
                h.seq_ns / 1e3,
                h.share_pct,
                h.method
            );
        }
        if let Some(e) = &profile.elementwise {
            // The largest shape of each dtype: where fusing matters most.
            let mut widest: Vec<&sim::profile::ElementwiseCase> = vec![];
            for c in &e.cases {
                match widest.iter_mut().find(|w| w.dtype == c.dtype) {
                    Some(w) if w.tokens < c.tokens => *w = c,
                    Some(_) => {}
                    None => widest.push(c),
                }
            }
            let clock = match e.clock {
                sim::profile::TimingClock::CudaEvents => "CUDA events",
                sim::profile::TimingClock::HostWall => "host clock, device synchronized",
            };
            for c in widest {
                outln!(
                    "rms_norm   {} {}×{}: eager {:.1} µs, fused {:.1} µs ({:.2}×), max |eager − fused| {:.2e} ({clock})",
                    c.dtype,
                    c.tokens,
                    c.hidden,
                    c.eager_ns as f64 / 1e3,
                    c.fused_ns as f64 / 1e3,
                    c.speedup(),
                    c.max_abs_diff
                );
            }
        }
        outln!(
            "error      held out: {:.2} % mean, {:.2} % max over {} shapes (fitted shapes: {:.2} % mean)",
            profile.held_out.mape_pct,
            profile.held_out.max_error_pct,
            profile.held_out.shapes,
            profile.held_out.fitted_mape_pct
        );
        outln!("profile    {}", out.display());
        Ok(())
    }

    pub fn validate(a: ValidateCmd) -> Result<()> {
        let args = ValidateArgs {
            profile: a.profile.clone(),
            scenario: a.scenario.clone(),
            device: a.device.clone(),
            alone_checks: a.alone_checks,
            live_runs: a.live_runs as usize,
        };
        let pb = bar(1);
        let v = calibrate::validate::validate(&args, &mut |phase, done, total| {
            pb.set_prefix(phase.to_string());
            pb.set_length(total as u64);
            pb.set_position(done as u64);
        })?;
        pb.finish_and_clear();
        let out = a
            .out
            .clone()
            .unwrap_or_else(|| Path::new("out").join(format!("{}-validate", v.measured.scenario)));
        std::fs::create_dir_all(&out)
            .with_context(|| format!("cannot create {}", out.display()))?;
        let json = serde_json::to_string_pretty(&v)?;
        // Whole or not at all, like every result file.
        sim::output::write_bytes_atomic(&out.join("validation.json"), json.as_bytes())
            .with_context(|| format!("cannot write {}", out.join("validation.json").display()))?;
        let mut csv = String::from(calibrate::validate::ITERATION_COLUMNS);
        csv.push('\n');
        for r in &v.iteration_records {
            csv.push_str(&r.csv_row());
            csv.push('\n');
        }
        sim::output::write_bytes_atomic(&out.join("iterations.csv"), csv.as_bytes())
            .with_context(|| format!("cannot write {}", out.join("iterations.csv").display()))?;
        if a.json {
            outln!("{json}");
        } else {
            print_validation(&v);
            outln!();
            outln!(
                "results: {}/{{validation.json,iterations.csv}}",
                out.display()
            );
        }
        let c = &v.correctness;
        if c.identical != c.checked {
            anyhow::bail!(
                "batched vs alone: {} of {} sequences produced different greedy tokens (request, first differing position): {:?}",
                c.checked - c.identical,
                c.checked,
                c.mismatches
            );
        }
        Ok(())
    }

    fn print_validation(v: &Validation) {
        outln!("scenario   {}", v.scenario);
        outln!("profile    {}", v.profile);
        outln!("device     {}   model {}", v.device, v.model);
        if v.live_runs > 1 {
            outln!(
                "live runs  {} × {} requests in {:.1} s wall (first: {} iterations, {} preemptions)",
                v.live_runs,
                v.requests,
                v.live_wall_s,
                v.measured.engine.iterations,
                v.measured.engine.preemptions
            );
        } else {
            outln!(
                "live run   {} requests in {:.1} s wall, {} iterations, {} preemptions",
                v.requests,
                v.live_wall_s,
                v.measured.engine.iterations,
                v.measured.engine.preemptions
            );
        }
        outln!();
        if let Some(w) = v.drift.as_ref().and_then(|d| d.warning.as_ref()) {
            outln!("{w}");
            outln!();
        }
        let repeated = v.rows.iter().any(|r| r.live_runs.is_some());
        let measured = if repeated {
            "measured (mean)"
        } else {
            "measured"
        };
        outln!(
            "{:<28} {:>15} {:>12} {:>9}{}",
            "metric",
            measured,
            "simulated",
            "error",
            if repeated { "   live runs ±" } else { "" }
        );
        for r in &v.rows {
            let spread = r
                .live_runs
                .as_ref()
                .map(|s| format!(" {:>12.2}%", s.spread_pct))
                .unwrap_or_default();
            outln!(
                "{:<28} {:>15.3} {:>12.3} {:>+8.2}%{spread}",
                r.metric,
                r.measured,
                r.simulated,
                r.error_pct
            );
        }
        let spreads: Vec<(f64, &calibrate::repeat::RunSpread)> = v
            .rows
            .iter()
            .filter_map(|r| r.live_runs.as_ref().map(|s| (r.error_pct, s)))
            .collect();
        if !spreads.is_empty() {
            outln!("{}", calibrate::repeat::verdict(&spreads));
        }
        outln!();
        outln!(
            "{:<14} {:>10} {:>14} {:>14} {:>9} {:>9} {:>9}",
            "iterations",
            "count",
            "measured ms",
            "predicted ms",
            "MAPE",
            "bias",
            "median"
        );
        for it in &v.iterations {
            outln!(
                "{:<14} {:>10} {:>14.3} {:>14.3} {:>8.2}% {:>+8.2}% {:>+8.2}%",
                it.kind,
                it.iterations,
                it.mean_measured_ms,
                it.mean_predicted_ms,
                it.mape_pct,
                it.bias_pct,
                it.median_pct
            );
        }
        outln!();
        let c = &v.correctness;
        outln!(
            "batched vs alone: {} of {} sequences produced identical greedy tokens",
            c.identical,
            c.checked
        );
        if let Some(t) = &c.sample_text {
            outln!("sample output: {t:?}");
        }
    }
}
