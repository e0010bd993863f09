//! Two fresh calibrations on one machine must agree: the same shapes priced
//! by two profiles measured one after the other differ by no more than the
//! machine's own run-to-run noise allows. Uses the validation model
//! (`scenarios/validate/tiny-llama.json`: 6 layers, hidden 512) on a short
//! grid so that both calibrations take well under a minute on one thread.
//!
//! Two calibrations hold a core for minutes on a loaded machine, so this is
//! a benchmark-class check: it runs when `SERVESIM_SLOW_TESTS=1` is set
//! (`scripts/slow-tests.sh`) and otherwise says so and passes.

use calibrate::calibrate::{calibrate, CalibrateArgs};
use calibrate::device::{DeviceSpec, OpenDevice};
use sim::profile::Profile;
use sim::profiled::Profiled;
use std::path::Path;

/// Median disagreement allowed between the two profiles' prices, percent.
/// `calibrate` repeats each shape until its median's 95 % interval is
/// ±2 % (`noise::CI_TARGET_PCT`), so two medians of one shape may differ by
/// up to ~4 % when both are at their limit; fitted prices average several
/// shapes, so their typical difference is smaller. 4 % fails when the fit
/// or the measurement depends on more than the machine's noise (a change in
/// what is timed between runs, a fit that swings with one noisy sample).
const MEDIAN_PCT: f64 = 4.0;
/// Largest disagreement on any one shape, percent: one shape can meet a
/// slow spell of a busy machine in both rounds of its repeats.
const MAX_PCT: f64 = 15.0;

fn profile(dev: &OpenDevice, model: &Path) -> Profile {
    let args = CalibrateArgs {
        model: Some(model.display().to_string()),
        weights: None,
        dtype: "f32".into(),
        max_context: Some(64),
        quick: true,
        seed: 0,
        attention: calibrate::model::Attention::Naive,
    };
    calibrate(dev, &args, &mut |_, _, _| {}).unwrap()
}

#[test]
fn two_fresh_calibrations_agree_within_a_few_percent() {
    if std::env::var_os("SERVESIM_SLOW_TESTS").is_none() {
        eprintln!(
            "skipped: set SERVESIM_SLOW_TESTS=1 (scripts/slow-tests.sh) to run two calibrations"
        );
        return;
    }
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/validate/tiny-llama.json");
    // The calibrations would only report the load (and take minutes of
    // extra rounds doing so): say so now instead. Same criterion as
    // `noise::judge`: other runnable threads on over half the CPUs.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(load) = calibrate::noise::load_average() {
        if load - 1.0 > 0.5 * cpus as f64 {
            eprintln!("skipped: load average {load:.1} on {cpus} CPUs, too busy to calibrate");
            return;
        }
    }
    let dev = OpenDevice::open(DeviceSpec::Cpu, Some(1)).unwrap();
    let a = profile(&dev, &model);
    let b = profile(&dev, &model);
    let (ma, mb) = (Profiled::new(&a, "a"), Profiled::new(&b, "b"));
    // Every shape either measured, priced by both fits.
    let mut diffs: Vec<f64> = a
        .samples
        .iter()
        .chain(&b.samples)
        .filter(|s| s.kind != "wake")
        .map(|s| {
            let (pa, pb) = (ma.predict_ns(&s.shape()), mb.predict_ns(&s.shape()));
            (pa / pb - 1.0).abs() * 100.0
        })
        .collect();
    diffs.sort_by(f64::total_cmp);
    let median = diffs[diffs.len() / 2];
    let max = diffs[diffs.len() - 1];
    eprintln!(
        "two calibrations: prices differ by {median:.2} % (median), {max:.2} % (max) over {} shapes; noise: {:?} / {:?}",
        diffs.len(),
        a.measurement.noise,
        b.measurement.noise
    );
    // On a machine that says it is too noisy the bound is not the fit's to
    // meet: the profile carries the finding, which is what the issue asks.
    if !a.measurement.noise.is_empty() || !b.measurement.noise.is_empty() {
        eprintln!("machine reported noisy: agreement not asserted");
        return;
    }
    assert!(median <= MEDIAN_PCT, "median {median:.2} %");
    assert!(max <= MAX_PCT, "max {max:.2} %");
}
