//! Helpers for driving the `servesim` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_servesim"))
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("servesim runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `simulate` into `out` and asserts success.
pub fn simulate(scenario: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "simulate",
        scenario.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(
        o.status.success(),
        "simulate {} failed:\n{}",
        scenario.display(),
        stderr(&o)
    );
    o
}

pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The scenario text of `scenarios/quickstart.toml`, shrunk for speed.
pub fn small_quickstart(requests: u64) -> String {
    read(&repo().join("scenarios/quickstart.toml"))
        .replace("requests = 20000", &format!("requests = {requests}"))
}
