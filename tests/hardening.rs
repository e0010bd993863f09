//! The inputs of the hardening issue, each as it was reported: every one now
//! ends in a result or a one-line `error:` naming the file and key, quickly,
//! and results are never half-written or silently wrong.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The quickstart with `from` replaced by `to`.
fn quick(from: &str, to: &str) -> String {
    let s = small_quickstart(200);
    assert!(s.contains(from), "{from} not in the quickstart");
    s.replace(from, to)
}

const POISSON: &str = r#"arrival = { process = "poisson", rate = 70.0 }"#;
const PROMPT: &str =
    r#"prompt_tokens = { dist = "lognormal", mean = 800, cv = 1.0, min = 16, max = 6144 }"#;

/// Runs `check` and expects one `error:` line naming `key`, within seconds.
fn refused(dir: &Path, text: &str, key: &str) -> String {
    let p = write(dir, "s.toml", text);
    let t = Instant::now();
    let o = run(&["check", p.to_str().unwrap()]);
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t.elapsed()
    );
    assert!(!o.status.success(), "accepted:\n{}", stdout(&o));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.starts_with("error: ") && e.contains(key),
        "want {key}: {e}"
    );
    e
}

#[test]
fn extreme_distribution_parameters_and_hangs_are_refused_by_key() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // Panicked in samplers before.
    refused(
        d,
        &quick(
            PROMPT,
            r#"prompt_tokens = { dist = "lognormal", mean = 800, cv = 1e200 }"#,
        ),
        "workload.prompt_tokens.cv",
    );
    for cv in ["1e-200", "1e308"] {
        let a = format!(r#"arrival = {{ process = "gamma", rate = 70.0, cv = {cv} }}"#);
        refused(d, &quick(POISSON, &a), "workload.arrival.cv");
    }
    let a = r#"arrival = { process = "diurnal", mean_rate = 70.0, amplitude = 0.5, cv = 1e-200 }"#;
    refused(d, &quick(POISSON, a), "workload.arrival.cv");
    let a = r#"arrival = { process = "closed", users = 8, think_time = { dist = "lognormal", mean_s = 1.0, cv = 1e200 } }"#;
    refused(d, &quick(POISSON, a), "workload.arrival.think_time.cv");
    // Never returned from `check` before.
    let a = r#"arrival = { process = "on-off", on_rate = 70.0, mean_on_s = 1e-300, mean_off_s = 1e300 }"#;
    refused(d, &quick(POISSON, a), "workload.arrival.mean_on_s");
    // Saturated to 18,446,744,073.7 s before.
    refused(
        d,
        &quick("requests = 200", "duration_s = 1e300"),
        "horizon.duration_s",
    );
    // Printed "inf GiB" and a wrapped block count before.
    let spec =
        "[hardware.spec]\nbf16_tflops = 989.0\nmemory_gib = 1e308\nmemory_bw_tbyte_s = 3.35\n\
                interconnect_gbyte_s = 450.0\ninterconnect_latency_us = 3.0\npcie_gbyte_s = 64.0";
    refused(
        d,
        &quick("[hardware]\npreset = \"h100-sxm\"", spec),
        "hardware.spec.memory_gib",
    );
    // Said "invalid type: unit variant" before.
    let e = refused(
        d,
        &quick("router = \"least-outstanding\"", "router = 5"),
        "fleet.router",
    );
    assert!(e.contains("`round-robin`"), "lists the routers: {e}");
}

#[test]
fn runs_that_would_exhaust_memory_are_refused_before_they_start() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // Refused (and aborted at 8 GB before that): now `simulate` streams its
    // records, so a run's memory follows the requests in flight, and only
    // the time series can outgrow the budget.
    let p = write(
        d,
        "many.toml",
        &quick("requests = 200", "requests = 100000000"),
    );
    let o = run(&["check", p.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("100000000 requests (streamed)"),
        "{}",
        stdout(&o)
    );
    // One row per replica per second for three years (a closed loop has no
    // rate to bound its requests by).
    let closed = r#"arrival = { process = "closed", users = 1 }"#;
    let e = refused(
        d,
        &quick(POISSON, closed).replace("requests = 200", "duration_s = 1e8"),
        "metrics.timeseries_interval_s",
    );
    assert!(e.contains("\"fleet\"") && e.contains("\"off\""), "{e}");
    // The same run with the series off passes the estimate.
    let p = write(
        d,
        "off.toml",
        &(quick(POISSON, closed).replace("requests = 200", "duration_s = 1e8\nrequests = 200")
            + "\n[metrics]\ntimeseries = \"off\"\n"),
    );
    let o = run(&["check", p.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    // A Poisson rate of 0.001 req/s spans 200,000 s: sampled fleet-wide every
    // minute it is about 3,300 rows.
    let p = write(
        d,
        "slow.toml",
        &(quick(
            POISSON,
            r#"arrival = { process = "poisson", rate = 0.001 }"#,
        ) + "\n[metrics]\ntimeseries = \"fleet\"\ntimeseries_interval_s = 60.0\n"),
    );
    let out = d.join("slow");
    simulate(&p, &out, &[]);
    let rows = read(&out.join("timeseries.csv")).lines().count();
    assert!(rows > 2500 && rows < 4000, "{rows}");
    assert!(read(&out.join("timeseries.csv")).contains(",all,"));
}

#[test]
fn a_run_without_completions_reports_no_latency_rather_than_zero() {
    let tmp = tempfile::tempdir().unwrap();
    // Every prompt is longer than max_model_len: all rejected.
    let p = write(
        tmp.path(),
        "rej.toml",
        &quick(
            PROMPT,
            r#"prompt_tokens = { dist = "fixed", value = 9000 }"#,
        ),
    );
    let out = tmp.path().join("o");
    let o = simulate(&p, &out, &[]);
    let table = stdout(&o);
    let ttft = table
        .lines()
        .find(|l| l.trim_start().starts_with("TTFT"))
        .unwrap();
    assert!(ttft.contains('—') && !ttft.contains("0.00"), "{ttft}");
    let s: Value = serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    assert_eq!(s["latency"]["ttft_ms"]["count"], 0);
    assert!(s["latency"]["ttft_ms"]["p99"].is_null(), "{}", s["latency"]);
    assert!(s["latency"]["e2e_ms"]["mean"].is_null());
}

#[test]
fn summaries_state_offered_and_achieved_load_and_a_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let ok = write(tmp.path(), "ok.toml", &small_quickstart(2000));
    let o = simulate(&ok, &tmp.path().join("ok"), &["--json"]);
    let s: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(s["load"]["verdict"], "stable", "{}", s["load"]);
    assert_eq!(s["load"]["offered_rps"], 70.0);
    // Ten times the load the fleet sustains.
    let over = write(
        tmp.path(),
        "over.toml",
        &small_quickstart(2000).replace("rate = 70.0", "rate = 700.0"),
    );
    let o = simulate(&over, &tmp.path().join("over"), &[]);
    let line = stdout(&o)
        .lines()
        .find(|l| l.starts_with("load"))
        .unwrap()
        .to_string();
    assert!(
        line.contains("overloaded") && line.contains("grew from"),
        "{line}"
    );
}

#[test]
fn trace_integers_are_checked_and_disorder_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let scenario = |trace: &str| {
        format!(
            "name = \"t\"\n[horizon]\n[model]\npreset = \"llama-3.1-8b\"\n[hardware]\npreset = \"h100-sxm\"\n\
             [engine]\nmax_model_len = 8192\n[workload]\ntrace = {{ format = \"csv\", path = \"{trace}\", \
             columns = {{ arrival = \"t\", prompt = \"p\", output = \"o\" }} }}\n"
        )
    };
    // Clamped to 2^32 − 1 silently before.
    write(d, "big.csv", "t,p,o\n0,100,10\n1,5000000000,10\n");
    let p = write(d, "big.toml", &scenario("big.csv"));
    let o = run(&[
        "simulate",
        p.to_str().unwrap(),
        "--out",
        d.join("b").to_str().unwrap(),
    ]);
    let e = stderr(&o);
    assert!(!o.status.success());
    assert!(
        e.contains("big.csv") && e.contains("line 3") && e.contains("5000000000"),
        "{e}"
    );
    // 5,000 rows in order, then 100 from the start: beyond the reorder buffer.
    let mut rows = String::from("t,p,o\n");
    for i in 0..5000 {
        rows.push_str(&format!("{}.0,100,5\n", i + 100));
    }
    for i in 0..100 {
        rows.push_str(&format!("{i}.0,100,5\n"));
    }
    write(d, "late.csv", &rows);
    let p = write(d, "late.toml", &scenario("late.csv"));
    let o = simulate(&p, &d.join("l"), &[]);
    let e = stderr(&o);
    assert!(
        e.contains("warning: ") && e.contains("100 of 5100 rows"),
        "{e}"
    );
    // Rows the reorder buffer puts back in order are counted too.
    write(d, "swap.csv", "t,p,o\n0,10,2\n2,10,2\n1,10,2\n3,10,2\n");
    let p = write(d, "swap.toml", &scenario("swap.csv"));
    let e = stderr(&simulate(&p, &d.join("s"), &[]));
    assert!(
        e.contains("1 of 4 rows") && e.contains("out of time order"),
        "{e}"
    );
    // A byte-order mark broke JSONL traces (not CSV) before.
    let mut jsonl = b"\xEF\xBB\xBF".to_vec();
    jsonl.extend_from_slice(b"{\"t\": 0, \"p\": 10, \"o\": 2}\n{\"t\": 1, \"p\": 10, \"o\": 2}\n");
    std::fs::write(d.join("bom.jsonl"), jsonl).unwrap();
    let p = write(
        d,
        "bom.toml",
        &scenario("bom.jsonl").replace("format = \"csv\"", "format = \"jsonl\""),
    );
    simulate(&p, &d.join("j"), &[]);
}

#[test]
fn output_folders_are_checked_and_locked_before_running() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let p = write(d, "q.toml", &small_quickstart(100));
    // A file where the folder should be: refused before the run.
    let blocked = write(d, "blocked", "");
    let o = run(&[
        "simulate",
        p.to_str().unwrap(),
        "--out",
        blocked.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.starts_with("error: cannot write results to"), "{e}");
    assert!(!e.contains("simulated"), "refused before running: {e}");
    // A folder another live run holds (this test process) is refused.
    let out = d.join("o");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(
        out.join(".servesim.lock"),
        format!("{}\n", std::process::id()),
    )
    .unwrap();
    let o = run(&[
        "simulate",
        p.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("another servesim run"),
        "{}",
        stderr(&o)
    );
    // Once released, the run writes complete files and no temporaries.
    std::fs::remove_file(out.join(".servesim.lock")).unwrap();
    simulate(&p, &out, &[]);
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["requests.csv", "summary.json", "timeseries.csv"]);
    // `report` on a folder that is not there says so.
    let o = run(&["report", "/nonexistent"]);
    assert!(stderr(&o).contains("no such folder"), "{}", stderr(&o));
}

#[test]
fn bit_looking_bandwidth_keys_still_work_with_a_deprecation_note() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = "[hardware.spec]\nbf16_tflops = 989.0\nmemory_gib = 80.0\nmemory_bw_tbps = 3.35\n\
                interconnect_gbyte_s = 450.0\ninterconnect_latency_us = 3.0\npcie_gbyte_s = 64.0";
    let p = write(
        tmp.path(),
        "s.toml",
        &quick("[hardware]\npreset = \"h100-sxm\"", spec),
    );
    let o = run(&["check", p.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("memory_bw_tbps is deprecated")
            && stdout(&o).contains("memory_bw_tbyte_s"),
        "{}",
        stdout(&o)
    );
    let both = quick(
        "[hardware]\npreset = \"h100-sxm\"",
        &(spec.to_string() + "\nmemory_bw_tbyte_s = 3.35"),
    );
    refused(tmp.path(), &both, "hardware.spec.memory_bw_tbps");
}
