//! Decode runs in closed form (`replica::decode_run`) change no output:
//! every example scenario, and the shared-data scenarios when `../shared/data`
//! is present, gives byte-identical files with `--step-by-step` and without.

mod common;
use common::*;
use std::path::{Path, PathBuf};

fn tomls(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

/// Every file of `a` equals the same file of `b`, byte for byte.
fn same_files(a: &Path, b: &Path, name: &str) {
    let mut files: Vec<_> = std::fs::read_dir(a)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    files.sort();
    let mut other: Vec<_> = std::fs::read_dir(b)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    other.sort();
    assert_eq!(files, other, "{name}: the same files");
    assert!(files.len() >= 3, "{name}: {files:?}");
    for f in files {
        let (x, y) = (
            std::fs::read(a.join(&f)).unwrap(),
            std::fs::read(b.join(&f)).unwrap(),
        );
        assert!(
            x == y,
            "{name}: {} differs with --step-by-step",
            f.to_string_lossy()
        );
    }
}

fn both_ways(scenario: &Path, tmp: &Path) {
    let name = scenario.file_stem().unwrap().to_str().unwrap().to_string();
    let (runs, steps) = (
        tmp.join(format!("{name}-runs")),
        tmp.join(format!("{name}-steps")),
    );
    simulate(scenario, &runs, &[]);
    simulate(scenario, &steps, &["--step-by-step"]);
    same_files(&runs, &steps, &name);
}

#[test]
fn every_example_scenario_gives_the_same_files_step_by_step() {
    let tmp = tempfile::tempdir().unwrap();
    let files = tomls(&repo().join("scenarios"));
    assert!(files.len() >= 20, "{files:?}");
    for f in files {
        both_ways(&f, tmp.path());
    }
}

#[test]
fn shared_data_scenarios_give_the_same_files_step_by_step() {
    let Some(data) = shared_data("mooncake") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    for f in tomls(&repo().join("scenarios/shared")) {
        // The whole trace in a debug build takes minutes: its first 3000
        // requests (the data path is made absolute for the copy).
        let text = read(&f)
            .replace("[horizon]\n", "[horizon]\nrequests = 3000\n")
            .replace("../../../shared/data", data.to_str().unwrap());
        let copy = tmp.path().join(f.file_name().unwrap());
        std::fs::write(&copy, text).unwrap();
        both_ways(&copy, tmp.path());
    }
}
