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

/// Runs `scenarios/<name>.toml` with text replacements applied, returning
/// the parsed summary.json.
pub fn summary_of(name: &str, replace: &[(&str, &str)]) -> serde_json::Value {
    let mut text = read(&repo().join(format!("scenarios/{name}.toml")));
    for (from, to) in replace {
        assert!(text.contains(from), "{name}.toml lacks {from:?}");
        text = text.replace(from, to);
    }
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("s.toml");
    std::fs::write(&path, text).unwrap();
    simulate(&path, &tmp.path().join("out"), &[]);
    serde_json::from_str(&read(&tmp.path().join("out/summary.json"))).unwrap()
}

pub fn f(v: &serde_json::Value, path: &str) -> f64 {
    let mut x = v;
    for k in path.split('.') {
        x = &x[k];
    }
    x.as_f64()
        .unwrap_or_else(|| panic!("{path} missing in {v}"))
}

/// The public data folder (`SERVESIM_SHARED_DATA`, or `../shared/data` beside
/// the checkout) when `probe` exists inside it. Absent, a test that needs it
/// says so on stderr and is skipped, unless `SERVESIM_REQUIRE_SHARED=1` (which
/// `.ci/run` sets, because CI has the data): then the test fails, so a run that
/// should have checked the data cannot pass without checking it.
pub fn shared_data(probe: &str) -> Option<PathBuf> {
    let data = std::env::var_os("SERVESIM_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared/data"));
    if data.join(probe).exists() {
        return Some(data);
    }
    let missing = data.join(probe);
    assert!(
        std::env::var("SERVESIM_REQUIRE_SHARED").as_deref() != Ok("1"),
        "{} is absent and SERVESIM_REQUIRE_SHARED=1: this test must run",
        missing.display()
    );
    eprintln!("skipped: {} is absent", missing.display());
    None
}
