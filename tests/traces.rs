//! Trace replay end to end: every reader on its sample file (statistics
//! cross-checked by an independent computation), malformed lines, the
//! replay options, `--lenient`, replaying a run's own `requests.csv`, and —
//! when `../shared/data` is there — the public traces against the
//! statistics published in its README.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn sample(name: &str) -> String {
    repo()
        .join("scenarios/traces")
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

/// `trace stats --json` on `file`, asserting success.
fn stats(file: &str, args: &[&str]) -> Value {
    let mut a = vec!["trace", "stats", file];
    a.extend_from_slice(args);
    a.push("--json");
    let o = run(&a);
    assert!(o.status.success(), "{a:?}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).expect("JSON")
}

fn close(got: &Value, want: f64, what: &str) {
    let g = got.as_f64().unwrap_or_else(|| panic!("{what}: {got}"));
    assert!(
        (g - want).abs() <= 1e-6 * want.abs().max(1.0),
        "{what}: got {g}, want {want}"
    );
}

#[test]
fn every_sample_reads_with_its_known_statistics() {
    // Expected values computed independently (Python, the conventions of
    // the shared data README) from the sample files.
    let csv_cols = "arrival=ts_ms,prompt=in_tokens,output=out_tokens,hashes=blocks";
    let jsonl_cols = "arrival=arrived,prompt=prompt,output=completion";
    type Case<'a> = (
        &'a str,
        Vec<&'a str>,
        u64,
        f64,
        f64,
        f64,
        f64,
        f64,
        Option<f64>,
    );
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        // file, args, requests, span, rate, iat cv, prompt mean, output p90, prefix block hit
        ("azure_sample.csv", vec!["--format", "azure"], 12, 6.504085, 1.691245, 1.333962, 2420.416667, 440.4, None),
        ("burstgpt_sample.csv", vec!["--format", "burstgpt", "--model", "ChatGPT", "--drop-failures"], 11, 47.0, 0.212766, 0.761512, 1063.545455, 684.0, None),
        ("mooncake_sample.jsonl", vec!["--format", "mooncake"], 10, 10.0, 0.9, 1.232883, 1984.4, 453.1, Some(0.348837)),
        ("bailian_sample.jsonl", vec!["--format", "bailian"], 10, 12.412, 0.725105, 0.522039, 147.5, 179.9, Some(0.265306)),
        ("ragpulse/0_trace.jsonl", vec!["--format", "ragpulse"], 8, 2725.0, 0.00256881, 0.267247, 1810.125, 362.4, None),
        ("generic_sample.csv", vec!["--format", "csv", "--columns", csv_cols, "--time-unit", "ms", "--block-tokens", "32"], 8, 5.851, 1.196377, 0.659591, 241.625, 273.7, None),
        ("generic_sample.jsonl", vec!["--format", "jsonl", "--columns", jsonl_cols], 8, 8.017, 0.873145, 0.562248, 342.625, 244.0, None),
        ("requests_sample.csv", vec!["--format", "requests"], 6, 1.238085, 4.038495, 0.420712, 995.833333, 212.0, None),
    ];
    for (file, args, n, span, rate, cv, pmean, op90, hit) in cases {
        let s = stats(&sample(file), &args);
        assert_eq!(s["requests"], n, "{file}");
        close(&s["span_s"], span, &format!("{file} span"));
        assert!(
            (s["rate_rps"].as_f64().unwrap() / rate - 1.0).abs() < 1e-5,
            "{file}: {}",
            s["rate_rps"]
        );
        assert!(
            (s["iat_cv"].as_f64().unwrap() - cv).abs() < 1e-5,
            "{file}: {}",
            s["iat_cv"]
        );
        close(&s["prompt"]["mean"], pmean, &format!("{file} prompt mean"));
        close(&s["output"]["p90"], op90, &format!("{file} output p90"));
        if let Some(h) = hit {
            assert!(
                (s["prefix"]["block_hit"].as_f64().unwrap() - h).abs() < 1e-5,
                "{file}: {}",
                s["prefix"]
            );
        }
        assert_eq!(s["read"]["skipped_lines"], 0, "{file}");
    }
    // Hashed formats state their block size; the generic one uses the given one.
    assert_eq!(
        stats(&sample("mooncake_sample.jsonl"), &["--format", "mooncake"])["prefix"]
            ["block_tokens"],
        512
    );
    assert_eq!(
        stats(&sample("bailian_sample.jsonl"), &["--format", "bailian"])["prefix"]["block_tokens"],
        16
    );
    // Bailian turns share their first turn's session: 4 conversations.
    assert_eq!(
        stats(&sample("bailian_sample.jsonl"), &["--format", "bailian"])["sessions"],
        4
    );
    let rag = stats(&sample("ragpulse/0_trace.jsonl"), &["--format", "ragpulse"]);
    assert_eq!(rag["sessions"], 4);
    assert_eq!(rag["prefix"]["block_tokens"], 16);
    assert!(
        rag["prefix"]["block_hit"].as_f64().unwrap() > 0.2,
        "shared system prompts: {}",
        rag["prefix"]
    );
}

/// A copy of sample `name` with line `line` (1-based) replaced.
fn corrupt(dir: &Path, name: &str, line: usize, with: &str) -> PathBuf {
    let src = std::fs::read_to_string(sample(name)).unwrap();
    let eol = if src.contains("\r\n") { "\r\n" } else { "\n" };
    let mut lines: Vec<&str> = src.split(eol).collect();
    lines[line - 1] = with;
    let p = dir.join(Path::new(name).file_name().unwrap());
    std::fs::write(&p, lines.join(eol)).unwrap();
    p
}

#[test]
fn malformed_lines_name_file_and_line_or_are_skipped_and_counted() {
    let tmp = tempfile::tempdir().unwrap();
    #[rustfmt::skip]
    let cases: Vec<(&str, &str, usize, &str, &str, u64)> = vec![
        ("azure_sample.csv", "azure", 4, "2023-11-16 18:15:05.1234567,12x,5", "ContextTokens: expected a whole number", 12),
        ("azure_sample.csv", "azure", 5, "16/11/2023 18:15,12,5", "TIMESTAMP: expected a wall-clock time", 12),
        ("burstgpt_sample.csv", "burstgpt", 3, "12,ChatGPT", "no column \"Request tokens\"", 16),
        ("mooncake_sample.jsonl", "mooncake", 3, "{\"timestamp\": 9000, \"input_length\": 5", "EOF while parsing", 10),
        ("mooncake_sample.jsonl", "mooncake", 2, "{\"timestamp\": 9000, \"input_length\": 5, \"output_length\": 1}", "missing key \"hash_ids\"", 10),
        ("bailian_sample.jsonl", "bailian", 6, "{\"chat_id\": \"x\", \"parent_chat_id\": -1, \"timestamp\": 9.0, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": []}", "expected an integer", 10),
        ("generic_sample.jsonl", "jsonl", 2, "{\"arrived\": 1700000001.0, \"completion\": 3}", "missing key \"prompt\"", 8),
    ];
    for (name, fmt, line, bad, msg, n) in cases {
        let p = corrupt(tmp.path(), name, line, bad);
        let path = p.to_str().unwrap();
        let mut args = vec!["trace", "stats", path, "--format", fmt];
        if fmt == "jsonl" {
            args.extend([
                "--columns",
                "arrival=arrived,prompt=prompt,output=completion",
            ]);
        }
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{name}: {}", stdout(&o));
        let e = stderr(&o);
        assert_eq!(e.trim_end().lines().count(), 1, "one line: {e}");
        assert!(
            e.starts_with(&format!("error: {path}: line {line}: ")),
            "{name}: {e}"
        );
        assert!(e.contains(msg), "{name}: {e}");
        assert!(e.contains("--lenient"), "says how to skip: {e}");
        args.extend(["--lenient", "--json"]);
        let o = run(&args);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let s: Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(s["read"]["skipped_lines"], 1, "{name}");
        assert_eq!(s["requests"], n - 1, "{name}");
        assert!(s["read"]["first_skipped"]
            .as_str()
            .unwrap()
            .starts_with(&format!("line {line}: ")));
    }
    // A RAGPulse segment missing from its side file.
    let dir = tmp.path().join("rag");
    std::fs::create_dir_all(&dir).unwrap();
    for f in std::fs::read_dir(sample("ragpulse")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, dir.join(f.file_name().unwrap())).unwrap();
    }
    let trace = dir.join("0_trace.jsonl");
    let text = std::fs::read_to_string(&trace).unwrap().replacen(
        "\"user_input\": [26000]",
        "\"user_input\": [99999]",
        1,
    );
    std::fs::write(&trace, text).unwrap();
    let o = run(&[
        "trace",
        "stats",
        trace.to_str().unwrap(),
        "--format",
        "ragpulse",
    ]);
    assert!(
        stderr(&o).contains("line 1: segment 99999 of \"user_input\" is not in 4_user_input.jsonl"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_file(dir.join("2_passages.jsonl")).unwrap();
    let o = run(&[
        "trace",
        "stats",
        trace.to_str().unwrap(),
        "--format",
        "ragpulse",
    ]);
    assert!(
        stderr(&o).contains("2_passages.jsonl are missing"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn replay_options_select_and_rescale() {
    let az = sample("azure_sample.csv");
    let base = stats(&az, &["--format", "azure"]);
    let span = base["span_s"].as_f64().unwrap();
    let fast = stats(&az, &["--format", "azure", "--time-scale", "2"]);
    assert!((fast["span_s"].as_f64().unwrap() - span / 2.0).abs() < 1e-6);
    let at4 = stats(&az, &["--format", "azure", "--rate", "4"]);
    assert!(
        (at4["rate_rps"].as_f64().unwrap() - 4.0).abs() < 1e-6,
        "{}",
        at4["rate_rps"]
    );
    let first5 = stats(&az, &["--format", "azure", "--limit", "5"]);
    assert_eq!(first5["requests"], 5);
    // The window [2 s, 5 s) of trace time.
    let w = stats(&az, &["--format", "azure", "--start", "2", "--end", "5"]);
    let f = &w["read"]["filtered"];
    let (before, after) = (
        f["before_window"].as_u64().unwrap(),
        f["after_window"].as_u64().unwrap(),
    );
    assert!(before > 0 && after > 0, "{f}");
    assert_eq!(w["requests"].as_u64().unwrap() + before + after, 12);
    // BurstGPT: failures are replayed with one token unless dropped; model
    // and log-type filters count what they leave out.
    let bg = sample("burstgpt_sample.csv");
    let all = stats(&bg, &["--format", "burstgpt"]);
    assert_eq!(all["requests"], 16);
    assert_eq!(all["read"]["zero_output"], 2);
    let gpt4 = stats(
        &bg,
        &[
            "--format",
            "burstgpt",
            "--model",
            "GPT-4",
            "--drop-failures",
        ],
    );
    assert_eq!(gpt4["requests"], 3);
    assert_eq!(gpt4["read"]["filtered"]["other_model"], 12);
    assert_eq!(gpt4["read"]["filtered"]["failed_request"], 1);
    let api = stats(&bg, &["--format", "burstgpt", "--log-type", "API log"]);
    assert_eq!(api["requests"], 3);
    // Tenants from a column, numbered by first appearance.
    let t = stats(
        &sample("generic_sample.jsonl"),
        &[
            "--format",
            "jsonl",
            "--columns",
            "arrival=arrived,prompt=prompt,output=completion",
            "--tenant-column",
            "tenant",
        ],
    );
    let tenants = t["tenants"].as_object().unwrap();
    assert_eq!(
        tenants.values().map(|v| v.as_u64().unwrap()).sum::<u64>(),
        8
    );
    assert_eq!(
        t["read"]["tenants"].as_array().unwrap().len(),
        tenants.len()
    );
}

#[test]
fn the_format_is_detected_from_the_file_and_said_on_stderr() {
    for (file, format, because) in [
        (
            "azure_sample.csv",
            "azure",
            "columns TIMESTAMP, ContextTokens, GeneratedTokens",
        ),
        (
            "mooncake_sample.jsonl",
            "mooncake",
            "keys timestamp, input_length, output_length",
        ),
        (
            "bailian_sample.jsonl",
            "bailian",
            "keys chat_id, parent_chat_id",
        ),
        ("requests_sample.csv", "requests", "columns id, arrival_s"),
    ] {
        let path = sample(file);
        let o = run(&["trace", "stats", &path, "--json"]);
        assert!(o.status.success(), "{file}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.starts_with(&format!("{path}: format {format} (from its {because}")),
            "{file}: {e}"
        );
        // The same statistics as with the format given.
        assert_eq!(
            serde_json::from_str::<Value>(&stdout(&o)).unwrap(),
            stats(&path, &["--format", format]),
            "{file}"
        );
    }
    // --format still decides (Mooncake's keys read as generic JSON lines).
    let mc = sample("mooncake_sample.jsonl");
    let o = run(&[
        "trace",
        "stats",
        &mc,
        "--format",
        "jsonl",
        "--columns",
        "arrival=timestamp,prompt=input_length,output=output_length",
        "--time-unit",
        "ms",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    // A header of no known format: an error that lists the formats.
    let o = run(&["trace", "stats", &sample("generic_sample.csv")]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("columns ts_ms, user, in_tokens, out_tokens, blocks match no built-in format; give --format (one of: azure, burstgpt, mooncake, bailian, ragpulse, servegen, csv, jsonl, requests)"),
        "{e}"
    );
}

#[test]
fn bad_trace_options_are_clear_errors() {
    let az = sample("azure_sample.csv");
    let o = run(&["trace", "stats", &az, "--format", "parquet"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("mooncake"), "{}", stderr(&o));
    // A rate out of range is the parser's range error, as for every flag.
    let o = run(&["trace", "stats", &az, "--format", "azure", "--rate", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o)
            .contains("invalid value '0' for '--rate <RATE>': must be in [1e-6, 1e7] requests/s"),
        "{}",
        stderr(&o)
    );
    for (args, want) in [
        (
            vec!["--format", "azure", "--time-scale", "2", "--rate", "3"],
            "error: --rate: give `time_scale` or `rate`",
        ),
        (
            vec!["--format", "azure", "--model", "GPT-4"],
            "error: --model: only allowed with format = \"burstgpt\"",
        ),
        (vec!["--format", "csv"], "error: --columns: missing"),
        (
            vec!["--format", "csv", "--columns", "arrival=a,prompt=b"],
            "error: --columns: missing output=<column>",
        ),
        (
            vec!["--format", "azure", "--tenant-column", "Region"],
            "no column \"Region\" in the header (found: TIMESTAMP, ContextTokens, GeneratedTokens)",
        ),
    ] {
        let mut a = vec!["trace", "stats", az.as_str()];
        a.extend(args);
        let o = run(&a);
        assert_eq!(o.status.code(), Some(1), "{a:?}");
        let e = stderr(&o);
        assert!(e.contains(want), "{a:?}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    }
    let o = run(&["trace", "stats", "no/such.csv", "--format", "azure"]);
    assert!(
        stderr(&o).starts_with("error: <command line>: trace.path: cannot open no/such.csv"),
        "{}",
        stderr(&o)
    );
}

fn write_scenario(dir: &Path, name: &str, workload: &str) -> PathBuf {
    let text = format!(
        "name = \"{name}\"\nseed = 2\n[horizon]\n[model]\npreset = \"llama-3.1-8b\"\n[hardware]\npreset = \"h100-sxm\"\n[engine]\nmax_model_len = 16384\n[workload]\n{workload}\n"
    );
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn simulate_replays_a_trace_reports_it_and_honours_lenient() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    simulate(&repo().join("scenarios/replay-azure.toml"), &out, &[]);
    let s: Value = serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    let t = &s["workload"]["traces"][0];
    assert_eq!(t["format"], "azure");
    assert_eq!(t["requests"], 300);
    assert_eq!(t["skipped_lines"], 0);
    assert_eq!(t["time_scale"], 2.0);
    assert_eq!(s["counts"]["arrived"], 300);
    // A malformed line stops a strict run with the file and line …
    let bad = corrupt(tmp.path(), "azure_conv_sample.csv", 7, "oops,1,1");
    let scn = write_scenario(
        tmp.path(),
        "bad",
        &format!(
            "trace = {{ format = \"azure\", path = \"{}\" }}",
            bad.file_name().unwrap().to_str().unwrap()
        ),
    );
    let o = run(&[
        "simulate",
        scn.to_str().unwrap(),
        "--out",
        tmp.path().join("o2").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with(&format!("error: {}: line 7: TIMESTAMP: ", bad.display())),
        "{}",
        stderr(&o)
    );
    assert!(!tmp.path().join("o2").exists());
    // … and `check` catches it before a run.
    let o = run(&["check", scn.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("line 7"), "{}", stderr(&o));
    // With --lenient the line is skipped, counted and reported.
    let o = simulate(&scn, &tmp.path().join("o3"), &["--lenient"]);
    assert!(
        stderr(&o).contains("skipped 1 malformed line(s) (first: line 7: TIMESTAMP"),
        "{}",
        stderr(&o)
    );
    let s: Value = serde_json::from_str(&read(&tmp.path().join("o3/summary.json"))).unwrap();
    assert_eq!(s["workload"]["traces"][0]["skipped_lines"], 1);
    assert_eq!(s["counts"]["arrived"], 299);
    // A missing trace file names the scenario key.
    let scn = write_scenario(
        tmp.path(),
        "missing",
        "trace = { format = \"mooncake\", path = \"nope.jsonl\" }",
    );
    for cmd in ["check", "simulate"] {
        let o = run(&[cmd, scn.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1));
        let e = stderr(&o);
        assert!(
            e.starts_with(&format!(
                "error: {}: workload.trace.path: cannot open ",
                scn.display()
            )),
            "{e}"
        );
        assert!(!e.contains("panicked"));
    }
}

#[test]
fn a_simulated_run_replays_from_its_own_requests_csv() {
    let tmp = tempfile::tempdir().unwrap();
    let first = tmp.path().join("first");
    let qs = tmp.path().join("qs.toml");
    std::fs::write(&qs, small_quickstart(300)).unwrap();
    simulate(&qs, &first, &[]);
    let scn = write_scenario(
        tmp.path(),
        "again",
        &format!(
            "trace = {{ format = \"requests\", path = \"{}\" }}",
            first.join("requests.csv").display()
        ),
    );
    let second = tmp.path().join("second");
    simulate(&scn, &second, &[]);
    // Replay time 0 is the first arrival; requests.csv keeps microseconds.
    let cols = |d: &Path| -> Vec<(i64, String)> {
        // Rows stand in the order requests ended; ids are arrival order.
        let mut rows: Vec<Vec<String>> = read(&d.join("requests.csv"))
            .lines()
            .skip(1)
            .map(|l| l.split(',').map(str::to_string).collect())
            .collect();
        rows.sort_by_key(|f| f[0].parse::<u64>().unwrap());
        let us = |s: &str| (s.parse::<f64>().unwrap() * 1e6).round() as i64;
        let t0 = us(&rows[0][1]);
        rows.iter()
            .map(|f| (us(&f[1]) - t0, format!("{},{}", f[3], f[4])))
            .collect()
    };
    let (a, b) = (cols(&first), cols(&second));
    assert_eq!(a.len(), 300);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.1, y.1, "same lengths");
        assert!((x.0 - y.0).abs() <= 1, "same arrivals: {x:?} {y:?}");
    }
}

#[test]
fn generated_streams_are_deterministic_and_seeded() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["closed-loop", "servegen-tenants"] {
        let scn = repo().join(format!("scenarios/{name}.toml"));
        let (a, b, c) = (
            tmp.path().join(format!("{name}-a")),
            tmp.path().join(format!("{name}-b")),
            tmp.path().join(format!("{name}-c")),
        );
        simulate(&scn, &a, &[]);
        simulate(&scn, &b, &[]);
        simulate(&scn, &c, &["--seed", "99"]);
        for f in ["summary.json", "requests.csv", "timeseries.csv"] {
            assert_eq!(read(&a.join(f)), read(&b.join(f)), "{name}: {f}");
        }
        assert_ne!(
            read(&a.join("requests.csv")),
            read(&c.join("requests.csv")),
            "{name}"
        );
    }
    let s: Value =
        serde_json::from_str(&read(&tmp.path().join("servegen-tenants-a/summary.json"))).unwrap();
    assert_eq!(
        s["workload"]["traces"][0]["tenants"],
        serde_json::json!(["chunk-0", "chunk-3", "chunk-7"])
    );
    let s: Value =
        serde_json::from_str(&read(&tmp.path().join("closed-loop-a/summary.json"))).unwrap();
    assert_eq!(s["workload"]["users_left"], 0);
    assert_eq!(
        s["workload"]["traces"][0]["requests"], 300,
        "pairs from every row"
    );
}

#[test]
fn trace_bench_reports_rows_per_second() {
    let o = run(&[
        "trace", "bench", "--format", "azure", "--format", "mooncake", "--rows", "3000",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    assert!(
        s.contains("rows/s") && s.contains("azure") && s.contains("mooncake"),
        "{s}"
    );
}

/// The shared public traces, when present, give the statistics their README
/// publishes (rounded as printed there).
#[test]
fn public_traces_match_their_published_statistics() {
    let Some(data) = shared_data("README.md") else {
        return;
    };
    let p = |rel: &str| data.join(rel).to_str().unwrap().to_string();
    let near = |v: &Value, want: f64, tol: f64, what: &str| {
        let g = v.as_f64().unwrap();
        assert!((g - want).abs() <= tol, "{what}: got {g}, README {want}");
    };
    // (file, format args, rows, span, rate, cv, prompt [mean p50 p90 p99 max], output [...])
    type Case<'a> = (
        String,
        Vec<&'a str>,
        u64,
        f64,
        f64,
        Option<f64>,
        [f64; 5],
        [f64; 5],
    );
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        (p("azure-llm-2023/AzureLLMInferenceTrace_code.csv"), vec!["--format", "azure"], 8819, 3435.9, 2.567, Some(13.15), [2047.8, 1469.0, 5187.6, 7436.0, 7437.0], [27.9, 13.0, 55.0, 251.5, 1899.0]),
        (p("azure-llm-2023/AzureLLMInferenceTrace_conv.csv"), vec!["--format", "azure"], 19366, 3501.7, 5.530, Some(1.09), [1154.7, 1020.0, 2734.5, 4142.0, 14050.0], [211.1, 129.0, 424.0, 601.0, 1000.0]),
        (p("mooncake/conversation_trace.jsonl"), vec!["--format", "mooncake"], 12031, 3537.0, 3.401, None, [12035.1, 6909.0, 27367.0, 85400.0, 126195.0], [342.6, 350.0, 597.0, 1118.5, 2000.0]),
        (p("mooncake/synthetic_trace.jsonl"), vec!["--format", "mooncake"], 3993, 1022.0, 3.906, Some(1.01), [15325.5, 11587.0, 38611.0, 66456.0, 191378.0], [149.1, 69.0, 389.0, 768.0, 893.0]),
        (p("ragpulse/data/0_trace.jsonl"), vec!["--format", "ragpulse"], 7106, 604603.0, 0.01175, Some(3.06), [2943.6, 3139.5, 3958.5, 5438.3, 7712.0], [283.2, 234.0, 563.0, 891.0, 2183.0]),
        (p("vidur/data/processed_traces/splitwise_conv.csv"), vec!["--format", "csv", "--columns", "arrival=arrived_at,prompt=num_prefill_tokens,output=num_decode_tokens"], 19366, 3501.7, 5.530, Some(1.09), [1154.7, 1020.0, 2734.5, 4142.0, 14050.0], [211.1, 129.0, 424.0, 601.0, 1000.0]),
        (p("vidur/data/processed_traces/splitwise_code.csv"), vec!["--format", "csv", "--columns", "arrival=arrived_at,prompt=num_prefill_tokens,output=num_decode_tokens"], 8819, 3435.9, 2.567, Some(13.15), [2047.8, 1469.0, 5187.6, 7436.0, 7437.0], [27.9, 13.0, 55.0, 251.5, 1899.0]),
    ];
    for (file, args, n, span, rate, cv, pr, out) in cases {
        let s = stats(&file, &args);
        assert_eq!(s["requests"], n, "{file}");
        near(&s["span_s"], span, 0.1, &format!("{file} span"));
        near(
            &s["rate_rps"],
            rate,
            0.6e-3 * rate.max(1.0),
            &format!("{file} rate"),
        );
        if let Some(cv) = cv {
            near(&s["iat_cv"], cv, 0.006, &format!("{file} cv"));
        }
        for (k, want) in [("prompt", pr), ("output", out)] {
            for (i, q) in ["mean", "p50", "p90", "p99", "max"].iter().enumerate() {
                near(&s[k][q], want[i], 0.5, &format!("{file} {k} {q}"));
            }
        }
    }
    // Prefix reuse of Mooncake's hashed traces.
    for (f, blocks, unique, hit, tok) in [
        (
            "mooncake/conversation_trace.jsonl",
            288_500,
            182_790,
            0.366,
            0.374,
        ),
        (
            "mooncake/synthetic_trace.jsonl",
            121_877,
            43_924,
            0.640,
            0.651,
        ),
    ] {
        let s = stats(&p(f), &["--format", "mooncake"]);
        let x = &s["prefix"];
        assert_eq!(
            (
                x["blocks"].as_u64().unwrap(),
                x["unique_blocks"].as_u64().unwrap()
            ),
            (blocks, unique),
            "{f}"
        );
        near(&x["block_hit"], hit, 0.0005, f);
        near(&x["token_hit"], tok, 0.0005, f);
    }
    // RAGPulse sessions and segment reuse.
    let s = stats(&p("ragpulse/data/0_trace.jsonl"), &["--format", "ragpulse"]);
    assert_eq!(s["sessions"], 3990);
    for (k, v) in [
        ("segment_token_reuse", 0.720),
        ("sys_prompt.token_share", 0.469),
        ("sys_prompt.token_reuse", 0.681),
        ("passages_ids.token_reuse", 0.907),
        ("history.token_reuse", 0.141),
    ] {
        near(&s["extra"][k], v, 0.0005, k);
    }
    // ServeGen descriptors.
    type Sg<'a> = (&'a str, u64, [f64; 4], f64, [f64; 2], [f64; 2], [u64; 2]);
    #[rustfmt::skip]
    let sg: Vec<Sg> = vec![
        ("servegen/data/language/m-large", 162, [195.8, 187.1, 407.7, 583.0], 0.306, [1.17, 4.32], [0.160, 0.632], [78_842, 20_997]),
        ("servegen/data/language/m-small", 43, [1174.4, 1158.5, 2366.7, 3879.5], 0.463, [1.21, 5.52], [0.299, 0.928], [27_919, 12_176]),
        ("servegen/data/reason/deepseek-r1", 73, [16.0, 13.3, 39.2, 42.5], 0.296, [1.03, 3.95], [0.286, 0.677], [2_589, 522]),
    ];
    for (dir, clients, rate, active, cv, top, pats) in sg {
        let s = stats(&p(dir), &["--format", "servegen"]);
        assert_eq!(s["clients"], clients, "{dir}");
        for (i, q) in ["mean", "p50", "p99", "max"].iter().enumerate() {
            near(
                &s["aggregate_rate"][q],
                rate[i],
                0.05,
                &format!("{dir} rate {q}"),
            );
        }
        near(&s["active_share"], active, 0.0005, dir);
        near(&s["cv_p50"], cv[0], 0.005, dir);
        near(&s["cv_p90"], cv[1], 0.005, dir);
        near(&s["top1_share"], top[0], 0.0005, dir);
        near(&s["top10_share"], top[1], 0.0005, dir);
        assert_eq!(
            [
                s["gamma_windows"].as_u64().unwrap(),
                s["weibull_windows"].as_u64().unwrap()
            ],
            pats,
            "{dir}"
        );
    }
    let s = stats(
        &p("servegen/data/language/m-small"),
        &["--format", "servegen"],
    );
    for (k, want) in [
        ("input_tokens", [119.7, 40.0, 322.0, 1478.0, 145912.0]),
        ("output_tokens", [14.9, 3.0, 44.0, 142.0, 10912.0]),
    ] {
        for (i, q) in ["mean", "p50", "p90", "p99", "max"].iter().enumerate() {
            near(&s[k][q], want[i], 0.05, &format!("m-small {k} {q}"));
        }
    }
}

#[test]
fn trace_subcommands_have_help_with_examples() {
    for cmd in [["trace", "stats"], ["trace", "bench"]] {
        let o = run(&[cmd[0], cmd[1], "--help"]);
        assert!(o.status.success());
        assert!(stdout(&o).contains("Example"), "{cmd:?}");
    }
    assert!(stdout(&run(&["simulate", "--help"])).contains("--lenient"));
}
