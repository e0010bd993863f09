//! `serve`, `observe` and `compare` driven as a user would: the twin of a
//! scenario on a loopback port, observed, and compared with `simulate` of
//! the same scenario and seed.

mod common;

use common::{bin, run, simulate, small_quickstart, stderr, stdout};
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Kills the server when the test ends, passing or not.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const SCENARIO: &str = r#"
name = "serve-e2e"
seed = 11
[horizon]
requests = 40
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[fleet]
replicas = 2
router = "least-outstanding"
[engine]
max_num_seqs = 32
max_batched_tokens = 2048
max_model_len = 4096
[workload]
arrival = { process = "poisson", rate = 25.0 }
prompt_tokens = { dist = "uniform", min = 64, max = 400 }
output_tokens = { dist = "uniform", min = 8, max = 30 }
"#;

#[test]
fn observe_the_twin_then_compare_with_simulate() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let s = scenario.to_str().unwrap();
    let mut child = bin()
        .args(["serve", "--engine", "sim", s, "--port", "0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let server = Server(child);
    // The one line that names the address.
    let mut line = String::new();
    BufReader::new(err).read_line(&mut line).unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();

    let observed = dir.path().join("observed");
    let t0 = Instant::now();
    let o = run(&[
        "observe",
        &url,
        s,
        "--out",
        observed.to_str().unwrap(),
        "--max-duration-s",
        "60",
        "--format",
        "vllm",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(t0.elapsed() < Duration::from_secs(60));
    // The twin streams one token per chunk and an honest usage block.
    assert!(!stderr(&o).contains("warning:"), "{}", stderr(&o));
    // Under --json the text goes to stderr and stdout is summary.json.
    assert!(
        stderr(&o).contains("40 completed, 0 rejected"),
        "{}",
        stderr(&o)
    );
    let printed: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(printed["counts"]["completed"], 40, "{printed}");
    assert_eq!(
        stdout(&o).trim_end(),
        common::read(&observed.join("summary.json")).trim_end()
    );
    drop(server);

    let simulated = dir.path().join("simulated");
    let o = run(&["simulate", s, "--out", simulated.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&[
        "compare",
        simulated.to_str().unwrap(),
        observed.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    let e2e = table
        .lines()
        .find(|l| l.starts_with("E2E p50"))
        .unwrap_or_else(|| panic!("{table}"));
    let err: f64 = e2e
        .split_whitespace()
        .last()
        .unwrap()
        .trim_end_matches('%')
        .parse()
        .unwrap();
    assert!(err.abs() < 15.0, "{table}");
    assert!(table.contains("completed") && table.contains("rejected"));

    // vLLM's benchmark result beside the folder, with every key vLLM's
    // `bench serve --save-result` writes, in its units.
    let vllm = dir.path().join("observed.vllm.json");
    let v: serde_json::Value = serde_json::from_str(&common::read(&vllm)).unwrap();
    for k in serve::vllm_bench::KEYS {
        assert!(v.get(*k).is_some(), "no {k} in {v}");
    }
    for m in ["ttft", "tpot", "itl", "e2el"] {
        for stat in ["mean", "median", "std", "p99"] {
            assert!(v[format!("{stat}_{m}_ms")].is_f64(), "{stat}_{m}_ms");
        }
    }
    assert_eq!(v["completed"], 40);
    assert_eq!(v["ttfts"].as_array().unwrap().len(), 40);
    // Seconds in the lists, milliseconds in the aggregates.
    let first: f64 = v["ttfts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .sum::<f64>()
        / 40.0;
    assert!((first * 1e3 - v["mean_ttft_ms"].as_f64().unwrap()).abs() < 1e-6);
    // `compare` reads it, detected from its content, and lines it up with
    // the folder of the same run: the same requests and latencies.
    let o = run(&[
        "compare",
        observed.to_str().unwrap(),
        vllm.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    let row = |name: &str| -> Vec<String> {
        table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {table}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let completed = row("completed");
    assert_eq!(completed[1], "40", "{table}");
    assert_eq!(completed[2], "40", "{table}");
    for name in ["TTFT p50", "TPOT p50", "E2E p50"] {
        let r = row(name);
        let diff: f64 = r.last().unwrap().trim_end_matches('%').parse().unwrap();
        assert!(diff.abs() < 2.0, "{name}: {table}");
    }
    let o = run(&[
        "compare",
        simulated.to_str().unwrap(),
        vllm.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Starts `servesim serve` with `args` and returns it with its URL (only
/// the live engine's test, which needs `calibrate`, starts one).
#[cfg(feature = "calibrate")]
fn start_server(args: &[&str]) -> (Server, String) {
    let mut child = bin().args(args).stderr(Stdio::piped()).spawn().unwrap();
    let err = child.stderr.take().unwrap();
    let server = Server(child);
    let mut line = String::new();
    BufReader::new(err).read_line(&mut line).unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (server, url)
}

/// `serve --engine live` with the tiny random-weight model of
/// scenarios/validate/cpu-profile.toml, observed over loopback: real
/// forward passes answer every request with its exact token count.
#[cfg(feature = "calibrate")]
#[test]
fn observe_the_live_engine_with_a_tiny_random_model() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("live.toml");
    std::fs::write(
        &scenario,
        r#"
name = "live-e2e"
seed = 5
[horizon]
requests = 16
# observe reads the workload; serve --engine live takes the model and the
# device from the profile instead of these.
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[engine]
policy = "sarathi"
max_num_seqs = 8
max_batched_tokens = 128
block_size = 16
max_model_len = 512
[workload]
arrival = { process = "poisson", rate = 8.0 }
prompt_tokens = { dist = "uniform", min = 16, max = 96 }
output_tokens = { dist = "uniform", min = 4, max = 16 }
"#,
    )
    .unwrap();
    let s = scenario.to_str().unwrap();
    let profile = common::repo().join("scenarios/validate/cpu-profile.toml");
    let (server, url) = start_server(&[
        "serve",
        "--engine",
        "live",
        "--profile",
        profile.to_str().unwrap(),
        "--device",
        "cpu",
        s,
        "--port",
        "0",
        "--served-model-name",
        "tiny",
    ]);
    let observed = dir.path().join("observed");
    let o = run(&[
        "observe",
        &url,
        s,
        "--model",
        "tiny",
        "--out",
        observed.to_str().unwrap(),
        "--max-duration-s",
        "120",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("16 completed, 0 rejected, 0 cancelled, 0 failed"),
        "{}",
        stdout(&o)
    );
    let oc = std::fs::read_to_string(observed.join("observe.csv")).unwrap();
    for line in oc.lines().skip(1) {
        // requested_tokens == received_tokens on every row.
        let cols: Vec<&str> = line.split(',').collect();
        assert_eq!(cols[4], cols[5], "{line}");
    }
    drop(server);
}

#[test]
fn bad_flags_and_folders_are_one_line_errors() {
    let o = run(&["compare", "/nonexistent/a", "/nonexistent/b"]);
    assert!(!o.status.success());
    assert!(stderr(&o).starts_with("error: /nonexistent/a/summary.json: cannot read"));
    let o = run(&["observe", "ftp://x", "scenarios/quickstart.toml"]);
    assert!(
        stderr(&o).contains("must start with http://"),
        "{}",
        stderr(&o)
    );
    let o = run(&["serve", "scenarios/quickstart.toml", "--speed", "0"]);
    assert!(
        stderr(&o).contains("--speed") && stderr(&o).contains("must be in [1e-6, 1000000]"),
        "{}",
        stderr(&o)
    );
    // A key that is empty would serve with no key at all; a max_tokens cap
    // of 0 would refuse every request: both refused at start.
    for (flag, value, want) in [
        (
            "--api-key",
            "",
            "error: --api-key (or SERVESIM_API_KEY) is empty",
        ),
        (
            "--max-tokens",
            "0",
            "error: --max-tokens 0 would refuse every request",
        ),
    ] {
        let o = run(&[
            "serve",
            "scenarios/quickstart.toml",
            "--port",
            "0",
            flag,
            value,
        ]);
        assert!(!o.status.success());
        assert!(stderr(&o).starts_with(want), "{}", stderr(&o));
    }
    // Nothing listening: every request fails, the exit is non-zero, the
    // error names the URL and what to check, and no results are written.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("observed");
    let o = run(&[
        "observe",
        &url,
        "scenarios/quickstart.toml",
        "--max-requests",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = stderr(&o);
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.starts_with(&format!(
            "error: every one of the 3 requests sent to {url}/v1/completions failed"
        )),
        "{err}"
    );
    assert!(
        last.contains("is the server running and listening"),
        "{err}"
    );
    assert!(!out.exists());
    let o = run(&["serve", "--engine", "live", "scenarios/validate/cpu.toml"]);
    // A build without the live engine says so before reading any flag.
    let want = if cfg!(feature = "calibrate") {
        "error: --engine live needs --profile"
    } else {
        "error: this servesim was built without the live engine"
    };
    assert!(stderr(&o).starts_with(want), "{}", stderr(&o));
}

#[test]
fn compare_prints_counts_whole_and_warns_when_the_scenarios_differ() {
    let tmp = tempfile::tempdir().unwrap();
    let text = small_quickstart(200);
    let (a, b) = (tmp.path().join("a.toml"), tmp.path().join("b.toml"));
    std::fs::write(&a, &text).unwrap();
    std::fs::write(
        &b,
        text.replace("name = \"quickstart\"", "name = \"other\""),
    )
    .unwrap();
    let (oa, ob) = (tmp.path().join("a"), tmp.path().join("b"));
    simulate(&a, &oa, &[]);
    simulate(&b, &ob, &[]);
    let o = run(&["compare", oa.to_str().unwrap(), ob.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    let completed = table
        .lines()
        .find(|l| l.starts_with("completed"))
        .unwrap_or_else(|| panic!("{table}"));
    assert_eq!(
        completed.split_whitespace().collect::<Vec<_>>(),
        ["completed", "200", "200", "+0.00%"],
        "{table}"
    );
    assert!(
        stderr(&o).contains("scenario differs: A has \"quickstart\", B has \"other\""),
        "{}",
        stderr(&o)
    );
    // The same scenario twice: no warning.
    let o = run(&["compare", oa.to_str().unwrap(), oa.to_str().unwrap()]);
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
}
