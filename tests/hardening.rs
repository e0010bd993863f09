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
    // A folder another live run holds (this test process) is refused, with
    // the holder's process id.
    let out = d.join("o");
    std::fs::create_dir_all(&out).unwrap();
    let held = sim::output::OutputLock::acquire(&out).unwrap();
    let o = run(&[
        "simulate",
        p.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let holder = format!("another servesim run (process {})", std::process::id());
    assert!(stderr(&o).contains(&holder), "{}", stderr(&o));
    // Once released, the run writes complete files and no temporaries (and
    // no lock file).
    drop(held);
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

/// `scenarios/<name>.toml` with `from` replaced by `to`, paths made absolute.
fn scenario_with(name: &str, from: &str, to: &str) -> String {
    let s = read(&repo().join(format!("scenarios/{name}.toml")));
    assert!(s.contains(from), "{from} not in {name}");
    s.replace(from, to).replace(
        "path = \"traces/",
        &format!("path = \"{}/scenarios/traces/", repo().display()),
    )
}

#[test]
fn link_and_life_cycle_values_that_exhausted_memory_or_hung_are_refused_by_key() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // Aborted in Fleet::sample after 14-29 s (the pool series outgrew memory).
    let e = refused(
        d,
        &scenario_with(
            "disaggregation",
            "bandwidth_gbyte_s = 50.0",
            "bandwidth_gbyte_s = 1e-300",
        ),
        "fleet.kv_transfer.bandwidth_gbyte_s",
    );
    assert!(e.contains("[1e-3, 1e6] GB/s"), "{e}");
    refused(
        d,
        &scenario_with("disaggregation", "latency_us = 20.0", "latency_us = 1e300"),
        "fleet.kv_transfer.latency_us",
    );
    // No result within 90 s.
    refused(
        d,
        &scenario_with(
            "autoscale-step",
            "[autoscale]\n",
            "[autoscale]\nsync_period_s = 1e-300\n",
        ),
        "autoscale.sync_period_s",
    );
    refused(
        d,
        &quick(
            "router = \"least-outstanding\"",
            "report_interval_s = 1e-300",
        ),
        "fleet.report_interval_s",
    );
    // No result within 60 s (100,004 replicas sampled each second).
    let e = refused(
        d,
        &format!("{}\n[lifecycle]\nstandby = 100000\n", small_quickstart(200)),
        "lifecycle.standby",
    );
    assert!(e.contains("at most 99996"), "{e}");
    // The documented maximum of closed-loop users aborted in records.rs: the
    // guard now counts the requests they keep in flight.
    let closed = scenario_with("closed-loop", "users = 48", "users = 10000000");
    let p = write(d, "closed.toml", &closed);
    let o = bin()
        .args(["simulate", p.to_str().unwrap(), "--out"])
        .arg(d.join("out"))
        .env("SERVESIM_MEMORY_GIB", "1")
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.starts_with("error: ") && e.contains("workload.arrival.users") && e.contains("in flight"),
        "{e}"
    );
    assert!(!d.join("out").join("summary.json").exists());
}

#[test]
fn endless_lines_in_traces_stop_at_the_line_bound_quickly() {
    let tmp = tempfile::tempdir().unwrap();
    let sparse = tmp.path().join("sparse.csv");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    for (file, format) in [
        (Path::new("/dev/zero"), "mooncake"),
        (sparse.as_path(), "azure"),
        (sparse.as_path(), "mooncake"),
    ] {
        if !file.exists() {
            continue;
        }
        let t = Instant::now();
        let o = run(&["trace", "stats", file.to_str().unwrap(), "--format", format]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{format}: {e}");
        assert!(
            !e.contains("panicked") && !e.contains("memory allocation"),
            "{e}"
        );
        assert!(
            e.contains("line 1") && e.contains("longer than 64 MiB"),
            "{e}"
        );
        assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    }
}

#[test]
fn keys_that_did_nothing_are_errors_or_read_with_a_note() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // A link table with its default values in a fleet without pools.
    let link =
        "[fleet.kv_transfer]\nbandwidth_gbyte_s = 50.0\nlatency_us = 20.0\nmode = \"whole\"\n";
    let e = refused(
        d,
        &format!("{}\n{link}", small_quickstart(200)),
        "fleet.kv_transfer",
    );
    assert!(e.contains("prefill"), "{e}");
    refused(
        d,
        &format!("{}\n[fleet.kv_transfer]\n", small_quickstart(200)),
        "fleet.kv_transfer",
    );
    let e = refused(
        d,
        &quick(
            "router = \"least-outstanding\"",
            "router = \"least-outstanding\"\npools = []",
        ),
        "fleet.pools",
    );
    assert!(e.contains("empty"), "{e}");
    // The old link bandwidth name reads like the datasheet's old names.
    let old = scenario_with(
        "disaggregation",
        "bandwidth_gbyte_s = 50.0",
        "bandwidth_gbps = 50.0",
    );
    let p = write(d, "old.toml", &old);
    let o = run(&["check", p.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("fleet.kv_transfer.bandwidth_gbps is deprecated"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn the_result_files_size_is_stated_and_a_large_one_warned_of() {
    let tmp = tempfile::tempdir().unwrap();
    let p = write(tmp.path(), "q.toml", &small_quickstart(200));
    let o = run(&["check", p.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("GiB of result files"), "{}", stdout(&o));
    assert!(!stdout(&o).contains("warning"), "{}", stdout(&o));
    // A low-rate day sampled every 5 ms per replica: ~2 GiB of
    // timeseries.csv, in memory within the budget.
    let low = small_quickstart(200)
        .replace("requests = 200", "duration_s = 86400")
        .replace("rate = 70.0", "rate = 0.01")
        + "\n[metrics]\ntimeseries_interval_s = 0.005\n";
    let p = write(tmp.path(), "low.toml", &low);
    let o = run(&["check", p.to_str().unwrap()]);
    let out = stdout(&o);
    assert!(
        out.contains("warning")
            && out.contains("timeseries.csv")
            && out.contains("metrics.timeseries_interval_s"),
        "{out}{}",
        stderr(&o)
    );
}

#[test]
fn cost_refuses_a_context_beyond_the_model_and_an_empty_sweep() {
    let mh = ["--model", "llama-3.1-8b", "--hardware", "h100-sxm"];
    let o = run(&[&["cost"][..], &mh, &["--context", "99999999999"]].concat());
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}{}", stdout(&o));
    assert!(e.contains("--context") && e.contains("131072"), "{e}");
    let o = run(&[&["cost"][..], &mh, &["--max-batch", "0"]].concat());
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("--max-batch") && e.contains("1 to 65536"), "{e}");
}

#[test]
fn report_and_explain_refuse_another_runs_files_and_nan_cells() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let p = write(d, "q.toml", &small_quickstart(200));
    let (a, b) = (d.join("a"), d.join("b"));
    simulate(&p, &a, &[]);
    simulate(&p, &b, &["--seed", "9"]);
    let s: Value = serde_json::from_str(&read(&a.join("summary.json"))).unwrap();
    let ident = &s["run"];
    assert_eq!(ident["seed"], 42, "{ident}");
    assert_eq!(
        ident["scenario_hash"].as_str().unwrap().len(),
        16,
        "{ident}"
    );
    assert_eq!(
        ident["requests_csv_bytes"].as_u64().unwrap(),
        std::fs::metadata(a.join("requests.csv")).unwrap().len()
    );
    // b's files put into a: both readers name the file and the run.
    let mixed = d.join("mixed");
    std::fs::create_dir_all(&mixed).unwrap();
    for f in ["summary.json", "requests.csv", "timeseries.csv"] {
        std::fs::copy(a.join(f), mixed.join(f)).unwrap();
    }
    std::fs::copy(b.join("timeseries.csv"), mixed.join("timeseries.csv")).unwrap();
    let o = run(&["report", mixed.to_str().unwrap()]);
    let e = stderr(&o);
    if std::fs::metadata(a.join("timeseries.csv")).unwrap().len()
        != std::fs::metadata(b.join("timeseries.csv")).unwrap().len()
    {
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(
            e.contains("timeseries.csv") && e.contains("another run"),
            "{e}"
        );
    }
    std::fs::copy(a.join("timeseries.csv"), mixed.join("timeseries.csv")).unwrap();
    std::fs::copy(b.join("requests.csv"), mixed.join("requests.csv")).unwrap();
    let o = run(&["explain", mixed.to_str().unwrap()]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("requests.csv") && e.contains("another run"),
        "{e}"
    );
    // A NaN cell in a folder without the identity block (an older run).
    let old = d.join("old");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::copy(a.join("requests.csv"), old.join("requests.csv")).unwrap();
    let text = read(&old.join("requests.csv"));
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let cols: Vec<&str> = lines[0].split(',').collect();
    let ttft = cols.iter().position(|c| *c == "ttft_ms").unwrap();
    let mut cells: Vec<String> = lines[1].split(',').map(str::to_string).collect();
    cells[ttft] = "NaN".into();
    lines[1] = cells.join(",");
    std::fs::write(old.join("requests.csv"), lines.join("\n") + "\n").unwrap();
    let o = run(&["explain", old.to_str().unwrap()]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("line 2") && e.contains("ttft_ms") && e.contains("NaN"),
        "{e}"
    );
}

#[test]
fn negative_numbers_on_flags_name_the_flag_and_what_is_allowed() {
    let tmp = tempfile::tempdir().unwrap();
    let p = write(tmp.path(), "q.toml", &small_quickstart(200));
    let q = p.to_str().unwrap();
    for (args, flag, allowed) in [
        (vec!["capacity", q, "--demand", "-1"], "--demand", "demand"),
        (
            vec!["capacity", q, "--headroom", "-50"],
            "--headroom",
            "-50",
        ),
        (
            vec!["capacity", q, "--replicas", "-1"],
            "--replicas",
            "1..=100000",
        ),
        (
            vec!["explain", "out", "--request", "-1"],
            "--request",
            "0..=",
        ),
        (
            vec!["sweep", q, "--grid", q, "--shard", "-1/4"],
            "-1/4",
            "I/N",
        ),
        (
            vec!["serve", q, "--speed", "-2"],
            "--speed",
            "must be in [1e-6, 1000000]",
        ),
        (
            vec!["serve", q, "--max-body-bytes", "0"],
            "--max-body-bytes",
            "1..=1073741824",
        ),
    ] {
        let o = run(&args);
        let e = stderr(&o);
        assert!(!o.status.success(), "{args:?}: {e}");
        assert!(!e.contains("unexpected argument"), "{args:?}: {e}");
        assert!(e.contains(flag) && e.contains(allowed), "{args:?}: {e}");
    }
}

#[test]
fn a_draft_that_does_not_fit_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = small_quickstart(200).replace(
        "max_model_len = 8192",
        "max_model_len = 8192\nspeculative = { num_draft_tokens = 4, acceptance_rate = 0.7, draft_model = \"llama-3.1-70b\" }",
    );
    let e = refused(tmp.path(), &spec, "engine.speculative.draft_model");
    assert!(e.contains("Llama-3.1-70B") && e.contains("draft"), "{e}");
}

#[test]
fn a_far_future_azure_timestamp_is_called_out_of_range() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = write(
        tmp.path(),
        "far.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n9999-12-31 23:59:59.9999999,10,5\n",
    );
    let o = run(&[
        "trace",
        "stats",
        trace.to_str().unwrap(),
        "--format",
        "azure",
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("line 2") && e.contains("outside") && e.contains("2262"),
        "{e}"
    );
}

#[test]
fn huge_tenant_and_canary_times_and_empty_traces_are_flagged() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    for (from, to, key) in [
        (
            "backoff_s = 2.0",
            "backoff_s = 1e300",
            "tenants.1.retry.backoff_s",
        ),
        (
            "ttft_ms = 30000",
            "ttft_ms = 1e300",
            "tenants.1.slo.ttft_ms",
        ),
    ] {
        refused(d, &scenario_with("noisy-neighbor", from, to), key);
    }
    refused(
        d,
        &scenario_with("canary-promote", "start_s = 30", "start_s = 1e300"),
        "canary.start_s",
    );
    // A header-only trace runs, with a warning that it gave nothing.
    let empty = write(d, "empty.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n");
    let s = scenario_with(
        "replay-azure",
        "path = \"traces/azure_conv_sample.csv\"",
        &format!("path = \"{}\"", empty.display()),
    );
    let p = write(d, "empty.toml", &s);
    let o = run(&[
        "simulate",
        p.to_str().unwrap(),
        "--out",
        d.join("o").to_str().unwrap(),
    ]);
    let e = stderr(&o);
    assert!(e.contains("warning") && e.contains("no rows"), "{e}");
}

/// Runs the binary with `args` (and `env`), killing it past `limit`: a
/// command that blocks on an input fails the test instead of hanging it.
fn run_bounded(
    args: &[&str],
    env: &[(&str, &str)],
    limit: std::time::Duration,
) -> std::process::Output {
    let mut cmd = bin();
    cmd.args(args)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("servesim runs");
    let start = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("{args:?} still running after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// Numeric flags past their range end in the parser's error naming the
/// flag and the range: a duration past what `Duration` holds panicked, a
/// count allocated gigabytes, a leading `-` drew clap's `-- -x` tip.
#[test]
fn numeric_flags_past_their_range_are_refused_with_the_flag_named() {
    let s = repo().join("scenarios/quickstart.toml");
    let s = s.to_str().unwrap();
    let space = repo().join("scenarios/spaces/quickstart-hardware.toml");
    let space = space.to_str().unwrap();
    for (args, flag) in [
        (
            vec![
                "observe",
                "http://127.0.0.1:9",
                s,
                "--max-duration-s",
                "1e300",
            ],
            "--max-duration-s",
        ),
        (
            vec![
                "observe",
                "http://127.0.0.1:9",
                s,
                "--request-timeout-s",
                "1e20",
            ],
            "--request-timeout-s",
        ),
        (
            vec!["serve", s, "--body-timeout-s", "1e300"],
            "--body-timeout-s",
        ),
        (
            vec![
                "plan",
                s,
                "--space",
                space,
                "--demand",
                "70",
                "--exhaustive",
                "1000000",
            ],
            "--exhaustive",
        ),
        (
            vec![
                "plan",
                s,
                "--space",
                space,
                "--demand",
                "70",
                "--headroom",
                "1000000",
            ],
            "--headroom",
        ),
        (vec!["capacity", s, "--demand", "-5"], "--demand"),
    ] {
        let o = run_bounded(&args, &[], std::time::Duration::from_secs(20));
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(flag) && e.contains("must be"), "{args:?}: {e}");
        assert!(
            !e.contains("panicked") && !e.contains("-- -"),
            "{args:?}: {e}"
        );
    }
}

/// Inputs whose size cannot be bounded are refused from their file type
/// before they are opened, at once: a device read until memory ran out,
/// a FIFO with no writer blocked the open forever.
#[cfg(unix)]
#[test]
fn devices_and_fifos_given_as_inputs_are_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("fifo.toml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let fifo = fifo.to_str().unwrap();
    let profiled = write(
        tmp.path(),
        "profiled.toml",
        &small_quickstart(50).replace("preset = \"h100-sxm\"", "profile = \"fifo.toml\""),
    );
    let s = repo().join("scenarios/quickstart.toml");
    let s = s.to_str().unwrap();
    for (args, what) in [
        (vec!["simulate", "/dev/zero"], "a device"),
        (vec!["check", fifo], "FIFO"),
        (
            vec!["plan", s, "--space", "/dev/zero", "--demand", "7"],
            "a device",
        ),
        (vec!["plan", s, "--space", fifo, "--demand", "7"], "FIFO"),
        (vec!["check", profiled.to_str().unwrap()], "FIFO"),
    ] {
        let o = run_bounded(&args, &[], std::time::Duration::from_secs(20));
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
        assert!(
            e.contains(what) && e.contains("not a regular file"),
            "{args:?}: {e}"
        );
    }
}

/// A setting given through the environment is checked like a flag: a
/// memory budget of 0, −1, NaN or text was ignored without a word.
#[test]
fn environment_settings_are_checked_like_flags() {
    let s = repo().join("scenarios/quickstart.toml");
    for v in ["0", "-1", "nan", "abc"] {
        let o = run_bounded(
            &["check", s.to_str().unwrap()],
            &[("SERVESIM_MEMORY_GIB", v)],
            std::time::Duration::from_secs(20),
        );
        let e = stderr(&o);
        assert!(!o.status.success(), "{v}: {e}");
        assert!(
            e.contains("SERVESIM_MEMORY_GIB") && e.contains("(0, 1000000] GiB"),
            "{v}: {e}"
        );
    }
}

/// A result folder is checked on read: its `requests.csv` header against
/// the writer's column order (swapped `ttft_ms`/`e2e_ms` keep the file's
/// size, and `explain` showed E2E as TTFT), each row's invariants (TTFT ≤
/// E2E, no negative latency, components adding up to E2E), and the file's
/// type (a folder in its place was "another run's" file).
#[test]
fn tampered_result_folders_are_refused_on_read() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = write(tmp.path(), "q.toml", &small_quickstart(200));
    let run_dir = tmp.path().join("run");
    simulate(&scenario, &run_dir, &[]);
    let tampered = |name: &str, edit: &dyn Fn(&Path)| {
        let d = tmp.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        for f in ["summary.json", "requests.csv", "timeseries.csv"] {
            std::fs::copy(run_dir.join(f), d.join(f)).unwrap();
        }
        edit(&d);
        d
    };
    // Rows edited in place: the summary's record of the file's size is
    // dropped, as a folder of an older servesim has none.
    let rows = |edit: fn(&mut Vec<String>, &[String])| {
        move |d: &Path| {
            let p = d.join("summary.json");
            let mut s: serde_json::Value = serde_json::from_str(&read(&p)).unwrap();
            s["run"]
                .as_object_mut()
                .unwrap()
                .remove("requests_csv_bytes");
            std::fs::write(&p, s.to_string()).unwrap();
            let text = read(&d.join("requests.csv"));
            let mut lines = text.lines();
            let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
            let mut first: Vec<String> =
                lines.next().unwrap().split(',').map(String::from).collect();
            edit(&mut first, &header);
            let rest: Vec<&str> = lines.collect();
            std::fs::write(
                d.join("requests.csv"),
                format!(
                    "{}\n{}\n{}\n",
                    header.join(","),
                    first.join(","),
                    rest.join("\n")
                ),
            )
            .unwrap();
        }
    };
    let cases: Vec<(PathBuf, &str)> = vec![
        (
            tampered("swapped", &|d| {
                let text = read(&d.join("requests.csv"));
                let (h, rest) = text.split_once('\n').unwrap();
                let h = h
                    .replace("ttft_ms", "X")
                    .replace("e2e_ms", "ttft_ms")
                    .replace('X', "e2e_ms");
                std::fs::write(d.join("requests.csv"), format!("{h}\n{rest}")).unwrap();
            }),
            "header: column",
        ),
        (
            tampered(
                "late-first-token",
                &rows(|r, h| {
                    let e2e: f64 = r[h.iter().position(|x| x == "e2e_ms").unwrap()]
                        .parse()
                        .unwrap();
                    let t = h.iter().position(|x| x == "ttft_ms").unwrap();
                    r[t] = format!("{}", e2e + 5.0);
                }),
            ),
            "the first token cannot come after the last",
        ),
        (
            tampered(
                "negative",
                &rows(|r, h| {
                    r[h.iter().position(|x| x == "queue_wait_ms").unwrap()] = "-3.0".into();
                }),
            ),
            "`queue_wait_ms` is negative",
        ),
        (
            tampered(
                "zeroed-components",
                &rows(|r, h| {
                    for (i, c) in h.iter().enumerate() {
                        if c.starts_with("attr_") {
                            r[i] = "0.000000".into();
                        }
                    }
                }),
            ),
            "add up to 0.000000 ms",
        ),
        (
            tampered("folder", &|d| {
                std::fs::remove_file(d.join("requests.csv")).unwrap();
                std::fs::create_dir(d.join("requests.csv")).unwrap();
            }),
            "it is a folder, not a regular file",
        ),
    ];
    for (d, want) in cases {
        for cmd in ["explain", "report"] {
            let o = run_bounded(
                &[cmd, d.to_str().unwrap()],
                &[],
                std::time::Duration::from_secs(60),
            );
            let e = stderr(&o);
            assert!(!o.status.success(), "{cmd} {}: accepted", d.display());
            assert!(
                e.contains(want),
                "{cmd} {}: expected {want:?}: {e}",
                d.display()
            );
        }
    }
    // The untouched folder still reads.
    let o = run(&["explain", run_dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
}
