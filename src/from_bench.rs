//! `servesim calibrate --from-bench FILES… --scenario S --out DIR` (the profile is DIR/profile.toml):
//! a profile's engine terms fitted to measured benchmark results
//! (`sim::from_bench`), with no server or device. The default build has it:
//! it simulates, and needs nothing of candle.

use crate::cli::CalibrateCmd;
use anyhow::{anyhow, bail, Context, Result};
use sim::accuracy::{self as acc, Settings};
use sim::from_bench::{self, FitRequest, DEFAULT_EVALUATIONS};
use sim::profile::{fnv1a64, BenchError, BenchFile};
use std::path::Path;

/// The file's bytes, or a folder's files' names and bytes in name order
/// (an `observe` folder), for the digest.
fn digest(path: &Path) -> Result<String> {
    let bytes = if path.is_dir() {
        let mut names: Vec<_> = std::fs::read_dir(path)
            .with_context(|| format!("cannot read {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        names.sort();
        let mut all = Vec::new();
        for n in names {
            all.extend(n.file_name().unwrap_or_default().as_encoded_bytes());
            all.extend(std::fs::read(&n).with_context(|| format!("cannot read {}", n.display()))?);
        }
        all
    } else {
        std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?
    };
    Ok(format!("{:016x}", fnv1a64(&bytes)))
}

fn errors(e: &BenchError) -> String {
    format!(
        "TTFT {:.1} %, TPOT {:.1} %, E2E {:.1} % median |error| over {} points",
        e.ttft_pct, e.tpot_pct, e.e2e_pct, e.points
    )
}

/// Runs `servesim calibrate --from-bench`.
pub fn calibrate(a: CalibrateCmd) -> Result<()> {
    let out = crate::profile_out::profile_path(&a.out)?;
    let Some(scenario) = &a.scenario else {
        bail!(
            "calibrate --from-bench needs --scenario FILE: the scenario the benchmarks ran \
             (its [model], [hardware] preset and [engine] settings), whose engine terms the \
             profile fits"
        );
    };
    let origin = scenario.display().to_string();
    let text = sim::input_file::read_config(scenario, "scenario file")?;
    sim::Scenario::from_toml_str(&text, &origin)?;
    let base: toml::Table = text.parse().map_err(|e| anyhow!("{origin}: {e}"))?;
    if sim::config::keypath::get(&base, "hardware.profile").is_some() {
        bail!(
            "{origin}: hardware.profile: give the scenario with the chip the benchmarks ran on \
             ([hardware] preset), not a profile: the fit writes the profile"
        );
    }
    let mut files = Vec::new();
    let mut points = Vec::new();
    for f in &a.from_bench {
        let read = acc::read_path(f)?;
        files.push(BenchFile {
            path: f.display().to_string(),
            fnv1a64: digest(f)?,
            points: read.len() as u32,
        });
        points.extend(read);
    }
    let req = FitRequest {
        files,
        points,
        base: &base,
        origin: &origin,
        settings: Settings {
            model: a.model.clone(),
            hardware: a.hardware.clone(),
            weight_dtype: a.dtype.clone(),
            max_requests: a.max_requests,
            ..Settings::default()
        },
        max_evaluations: a.evaluations.unwrap_or(DEFAULT_EVALUATIONS),
        start: from_bench::start_terms(),
    };
    let progress = std::sync::Mutex::new(crate::LazyProgress::new("fitting"));
    let started = std::time::Instant::now();
    let profile = from_bench::fit(&req, &|n, _| {
        if let Ok(mut p) = progress.lock() {
            p.update(f64::from(n) / f64::from(req.max_evaluations.max(1)));
        }
    })
    .map_err(|e| anyhow!("calibrate --from-bench: {e}"))?;
    if let Ok(p) = progress.into_inner() {
        p.finish();
    }
    crate::profile_out::write_profile(&out, &profile)?;
    let b = profile.bench.as_ref().expect("a from-bench profile");
    let t = &b.terms;
    outln!(
        "fitted     front end {:.2} ms, step {:.3} ms, {:.1} µs per sequence, compute {:.3} and bandwidth {:.3} of {}'s peaks",
        t.front_end_ns / 1e6,
        t.step_ns / 1e6,
        t.seq_ns / 1e3,
        t.compute_efficiency,
        t.bandwidth_efficiency,
        b.chip
    );
    outln!(
        "searched   {} simulations of the training points in {:.1} s",
        b.evaluations,
        started.elapsed().as_secs_f64()
    );
    outln!("training   {}", errors(&b.training));
    outln!("held back  {}", errors(&b.held_back));
    outln!(
        "default    {} (the scenario as given, same held-back points)",
        errors(&b.default_held_back)
    );
    if let Some(first) = b.skipped.first() {
        outln!("skipped    {} points; the first: {first}", b.skipped.len());
    }
    outln!(
        "wrote {}: use it with [hardware] profile = \"…\" in place of the scenario's preset, then `servesim accuracy` with that scenario",
        out.display()
    );
    Ok(())
}
