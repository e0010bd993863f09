//! `servesim calibrate --from-bench` end to end: the committed sample
//! (`tests/data/from-bench/`, vLLM result files that servesim measured with
//! known terms) fits back to those terms, `accuracy` with the fitted profile
//! shows the gain over the scenario as given, and bad input is one clear
//! line.

mod common;
use common::*;
use std::path::{Path, PathBuf};

fn data() -> PathBuf {
    repo().join("tests/data/from-bench")
}

fn points() -> Vec<String> {
    (0..8)
        .map(|i| data().join(format!("point-{i}.json")).display().to_string())
        .collect()
}

fn calibrate(extra: &[&str]) -> std::process::Output {
    bin()
        .arg("calibrate")
        .arg("--from-bench")
        .args(points())
        .args(extra)
        .output()
        .expect("servesim runs")
}

/// Median |error| of `metric` over all points in an accuracy run's JSON.
fn overall(dir: &Path, metric: &str) -> f64 {
    let v: serde_json::Value = serde_json::from_str(&read(&dir.join("accuracy.json"))).unwrap();
    v["overall"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metric"] == metric)
        .and_then(|g| g["median_abs_error"].as_f64())
        .unwrap_or_else(|| panic!("no {metric} in {v}"))
}

fn accuracy(scenario: &Path, out: &Path) {
    let o = bin()
        .arg("accuracy")
        .args(points())
        .args(["--scenario", &scenario.display().to_string()])
        .args(["--out", &out.display().to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
}

#[test]
fn the_sample_fits_back_to_its_known_terms_and_accuracy_shows_the_gain() {
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("h100-8b");
    let profile = folder.join("profile.toml");
    let scenario = data().join("h100-llama-8b.toml");
    let o = calibrate(&[
        "--scenario",
        &scenario.display().to_string(),
        "--out",
        &folder.display().to_string(),
    ]);
    let text = stdout(&o);
    assert!(o.status.success(), "{text}\n{}", stderr(&o));
    eprintln!("{text}");
    assert!(text.contains("held back"), "{text}");
    let p = sim::profile::Profile::load(&profile).unwrap();
    let b = p.bench.as_ref().expect("a from-bench record");
    assert_eq!(b.files.len(), 8);
    assert!(b.files[0].path.ends_with("point-0.json"));
    assert_eq!(b.files[0].fnv1a64.len(), 16);
    assert_eq!((b.training.points, b.held_back.points), (6, 2));
    let rel = |got: f64, want: f64| (got / want - 1.0).abs() * 100.0;
    assert!(rel(b.terms.front_end_ns, 18e6) < 5.0, "{:?}", b.terms);
    assert!(
        rel(b.terms.compute_efficiency, 0.45) < 10.0,
        "{:?}",
        b.terms
    );
    assert!(
        b.held_back.ttft_pct < 3.0 && b.held_back.tpot_pct < 3.0,
        "{b:?}"
    );

    // The scenario with the profile in place of the preset.
    let with = tmp.path().join("with-profile.toml");
    let text = read(&scenario).replace(
        "preset = \"h100-sxm\"",
        "profile = \"h100-8b/profile.toml\"",
    );
    assert!(text.contains("profile = "));
    std::fs::write(&with, text).unwrap();
    let (before, after) = (tmp.path().join("before"), tmp.path().join("after"));
    accuracy(&scenario, &before);
    accuracy(&with, &after);
    for metric in ["ttft", "tpot", "e2e"] {
        let (b, a) = (overall(&before, metric), overall(&after, metric));
        eprintln!(
            "{metric}: median |error| {:.1} % before, {:.2} % after",
            b * 100.0,
            a * 100.0
        );
        assert!(a < 0.03, "{metric}: {a} after");
    }
    assert!(overall(&before, "ttft") > 0.2);
}

#[test]
fn bad_input_is_one_clear_line() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("p");
    let out_s = out.display().to_string();
    // `--out` is a folder, as for every verb; the file form says so.
    let scenario = data().join("h100-llama-8b.toml").display().to_string();
    let o = calibrate(&["--scenario", &scenario, "--out", "p.toml"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("a folder, not a file") && stderr(&o).contains("--out p"),
        "{}",
        stderr(&o)
    );
    // No scenario.
    let o = calibrate(&["--out", &out_s]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("needs --scenario"), "{}", stderr(&o));
    // A file no reader knows.
    let bad = tmp.path().join("notes.json");
    std::fs::write(&bad, "{\"hello\": 1}").unwrap();
    let o = bin()
        .args(["calibrate", "--from-bench", &bad.display().to_string()])
        .args(["--scenario", &scenario, "--out", &out_s])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("notes.json"), "{}", stderr(&o));
    // A scenario that does not exist.
    let o = calibrate(&["--scenario", "nowhere.toml", "--out", &out_s]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("nowhere.toml"), "{}", stderr(&o));
    // Too few points to hold any back.
    let o = bin()
        .args(["calibrate", "--from-bench"])
        .args(&points()[..3])
        .args(["--scenario", &scenario, "--out", &out_s])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("at least 4"), "{}", stderr(&o));
    assert!(!out.exists());
}
