//! `servesim accuracy` end to end: every format's sample (written from the
//! formats' documentation, in `sim/src/accuracy/testdata/`), the result
//! files and page, an observe-style folder against its own scenario,
//! coverage, thread-count independence and bad input.

mod common;
use common::*;
use std::path::PathBuf;

fn sample(name: &str) -> PathBuf {
    repo().join("sim/src/accuracy/testdata").join(name)
}

fn accuracy(args: &[&str], threads: &str) -> std::process::Output {
    bin()
        .arg("accuracy")
        .args(args)
        .env("RAYON_NUM_THREADS", threads)
        .output()
        .expect("servesim runs")
}

fn ok(o: &std::process::Output) -> String {
    assert!(o.status.success(), "failed:\n{}\n{}", stdout(o), stderr(o));
    stdout(o)
}

/// `--json` prints the result file the run wrote (`accuracy.json`, or
/// `coverage.json` with `--coverage`) as the one document on stdout.
#[test]
fn json_prints_the_result_file_on_stdout() {
    let tmp = tempfile::tempdir().unwrap();
    let file = sample("vllm-bench.json").display().to_string();
    for (mode, name) in [
        (None, "accuracy.json"),
        (Some("--coverage"), "coverage.json"),
    ] {
        let out = tmp.path().join(name);
        let mut args = vec![
            file.as_str(),
            "--hardware",
            "h100-sxm",
            "--max-requests",
            "16",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ];
        args.extend(mode);
        let o = accuracy(&args, "2");
        let printed = ok(&o);
        serde_json::from_str::<serde_json::Value>(&printed).unwrap_or_else(|e| {
            panic!("{name}: stdout is not one JSON document ({e}):\n{printed}")
        });
        assert_eq!(
            printed.trim_end(),
            read(&out.join(name)).trim_end(),
            "{name}"
        );
        assert!(stderr(&o).contains("wrote"), "{}", stderr(&o));
    }
}

#[test]
fn json_formats_are_compared_under_the_given_hardware() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("acc");
    let files: Vec<String> = [
        "vllm-bench.json",
        "genai-perf.json",
        "guidellm.json",
        "inference-perf.json",
    ]
    .iter()
    .map(|f| sample(f).display().to_string())
    .collect();
    let mut args: Vec<&str> = files.iter().map(String::as_str).collect();
    // inference-perf records no model and none records the GPU: the flags say.
    args.extend([
        "--model",
        "llama-3.1-8b",
        "--hardware",
        "h100-sxm",
        "--max-requests",
        "16",
        "--out",
        out.to_str().unwrap(),
    ]);
    let text = ok(&accuracy(&args, "2"));
    assert!(text.contains("5 point(s): 5 compared"), "{text}");
    let points = read(&out.join("points.csv"));
    for format in ["vllm-bench", "genai-perf", "guidellm", "inference-perf"] {
        assert!(points.contains(format), "{format} missing from points.csv");
    }
    // Every measured statistic has a prediction and an error.
    for line in points.lines().skip(1) {
        let cells: Vec<&str> = line.split(',').collect();
        assert!(!cells[cells.len() - 1].is_empty(), "{line}");
    }
    let groups = read(&out.join("groups.csv"));
    assert!(groups.starts_with("engine,version,chip,model"), "{groups}");
    let json: serde_json::Value = serde_json::from_str(&read(&out.join("accuracy.json"))).unwrap();
    assert_eq!(json["points"].as_array().unwrap().len(), 5);
    let html = read(&out.join("accuracy.html"));
    assert!(
        html.contains("<svg") && html.contains("<title>"),
        "scatter plots with tooltips"
    );
    assert!(
        html.contains("concurrency 4"),
        "a tooltip shows the point's settings"
    );
}

#[test]
fn silicon_rows_are_compared_or_listed_with_their_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("acc");
    let csv = sample("aiconfigurator.csv");
    let text = ok(&accuracy(
        &[
            csv.to_str().unwrap(),
            "--max-requests",
            "16",
            "--out",
            out.to_str().unwrap(),
        ],
        "2",
    ));
    assert!(text.contains("6 point(s): "), "{text}");
    let json: serde_json::Value = serde_json::from_str(&read(&out.join("accuracy.json"))).unwrap();
    let status: Vec<&str> = json["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["outcome"]["status"].as_str().unwrap())
        .collect();
    // Llama-3.1-8B bf16 on one H100, Llama-3.1-70B fp8 TP 4 on H200 and
    // its disaggregated 1 + 1 workers, and DeepSeek-V3 with its experts
    // over 8 EP ranks under attention TP 8, run;
    // the gpt-oss FP4 row runs or is listed, as the catalog allows.
    assert_eq!(status[0], "compared");
    assert_eq!(status[1], "compared");
    assert_eq!(status[4], "compared", "MoE EP 8 under attention TP 8");
    assert_eq!(
        status[5], "compared",
        "a disaggregated row with its workers"
    );
    let missing = read(&out.join("unexpressed.csv"));
    let listed = |id: &str, kind: &str| {
        missing
            .lines()
            .any(|l| l.contains(id) && l.contains(&format!(",{kind},")))
    };
    assert!(
        listed("dsr1_b200_sxm_sglang_fp8_disagg", "not-recorded"),
        "{missing}"
    );
    assert!(
        status[3] == "compared" || missing.contains("gptoss_h200"),
        "{missing}"
    );
}

#[test]
fn results_are_byte_identical_at_any_thread_count() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |threads: &str| {
        let out = tmp.path().join(format!("t{threads}"));
        ok(&accuracy(
            &[
                sample("aiconfigurator.csv").to_str().unwrap(),
                sample("guidellm.json").to_str().unwrap(),
                "--max-requests",
                "16",
                "--out",
                out.to_str().unwrap(),
            ],
            threads,
        ));
        out
    };
    let (a, b) = (run("1"), run("3"));
    for f in [
        "points.csv",
        "groups.csv",
        "unexpressed.csv",
        "accuracy.json",
        "accuracy.html",
    ] {
        assert_eq!(read(&a.join(f)), read(&b.join(f)), "{f}");
    }
}

#[test]
fn a_result_folder_against_its_own_scenario_has_no_error() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("qs.toml");
    std::fs::write(&scenario, small_quickstart(120)).unwrap();
    let run = tmp.path().join("run");
    simulate(&scenario, &run, &[]);
    let out = tmp.path().join("acc");
    let text = ok(&accuracy(
        &[
            run.to_str().unwrap(),
            "--scenario",
            scenario.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        "2",
    ));
    assert!(text.contains("1 compared"), "{text}");
    let points = read(&out.join("points.csv"));
    let rows: Vec<&str> = points.lines().skip(1).collect();
    assert!(
        rows.len() >= 16,
        "every metric and percentile of summary.json"
    );
    for r in rows {
        assert!(
            r.ends_with(",0.00"),
            "the same scenario and seed predict exactly: {r}"
        );
    }
    // Without the scenario the folder is listed, not dropped.
    let text = ok(&accuracy(
        &[run.to_str().unwrap(), "--out", out.to_str().unwrap()],
        "1",
    ));
    assert!(text.contains("0 compared, 1 not expressible"), "{text}");
    assert!(read(&out.join("unexpressed.csv")).contains("--scenario"));
}

#[test]
fn coverage_counts_rows_and_groups_reasons() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cov");
    let text = ok(&accuracy(
        &[
            "--coverage",
            sample("aiconfigurator.csv").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        "2",
    ));
    assert!(text.contains(" of 6 point(s) expressible"), "{text}");
    assert!(
        text.contains("disaggregated without worker counts"),
        "{text}"
    );
    let csv = read(&out.join("coverage.csv"));
    assert_eq!(csv.lines().count(), 7);
    assert!(
        csv.contains("llama8b_h100_sxm_vllm_bf16_agg_512x64_c4,meta-llama/Llama-3.1-8B-Instruct,h100_sxm,bf16,true"),
        "{csv}"
    );
    let json: serde_json::Value = serde_json::from_str(&read(&out.join("coverage.json"))).unwrap();
    assert_eq!(json["rows"], 6);
    let expressible = json["expressible"].as_u64().unwrap();
    assert!((4..=5).contains(&expressible), "{expressible}");
    let reasons: u64 = json["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rows"].as_u64().unwrap())
        .sum();
    assert_eq!(
        reasons + expressible,
        6,
        "each row expressible or with a reason"
    );
    // --every 2 keeps rows 1, 3 and 5.
    let text = ok(&accuracy(
        &[
            "--coverage",
            sample("aiconfigurator.csv").to_str().unwrap(),
            "--every",
            "2",
            "--out",
            out.to_str().unwrap(),
        ],
        "1",
    ));
    assert!(text.contains(" of 3 point(s) expressible"), "{text}");
}

#[test]
fn bad_input_names_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("mystery.json");
    std::fs::write(&bad, "{\"hello\": 1}").unwrap();
    let o = accuracy(
        &[
            bad.to_str().unwrap(),
            "--out",
            tmp.path().join("o").to_str().unwrap(),
        ],
        "1",
    );
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("mystery.json") && e.contains("unknown result format"),
        "{e}"
    );
    let o = accuracy(&["/nonexistent/results.json"], "1");
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("/nonexistent/results.json"),
        "{}",
        stderr(&o)
    );
}

/// A weight dtype the catalog does not know is refused before any file is
/// read, with the dtypes that are allowed.
#[test]
fn an_unknown_weight_dtype_is_refused_with_the_allowed_ones() {
    let o = accuracy(&["results.json", "--weight-dtype", "fp9"], "1");
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("--weight-dtype") && e.contains("fp9") && e.contains("fp8-block"),
        "{e}"
    );
}

/// The silicon training set in `../shared/data` (or `SERVESIM_SHARED_DATA`).
fn silicon() -> Option<PathBuf> {
    let data = std::env::var_os("SERVESIM_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared/data"));
    let f = data.join("aiconfigurator/silicon/silicon_train.csv");
    if f.is_file() {
        return Some(f);
    }
    assert!(
        std::env::var_os("SERVESIM_REQUIRE_SHARED").is_none_or(|v| v != "1"),
        "SERVESIM_REQUIRE_SHARED=1 but {} is missing",
        f.display()
    );
    eprintln!("skipped: no shared/data");
    None
}

#[test]
fn coverage_of_the_silicon_training_set_gives_every_row_a_verdict() {
    let Some(f) = silicon() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cov");
    let text = ok(&accuracy(
        &[
            "--coverage",
            f.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        "2",
    ));
    assert!(text.contains(" of 4595 point(s) expressible"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&read(&out.join("coverage.json"))).unwrap();
    let per_row = json["per_row"].as_array().unwrap();
    assert_eq!(per_row.len(), 4595);
    let unexpressible = per_row
        .iter()
        .filter(|r| !r["unexpressible"].is_null())
        .count();
    let counted: u64 = json["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rows"].as_u64().unwrap())
        .sum();
    assert_eq!(
        counted as usize, unexpressible,
        "every row that cannot be expressed has a reason"
    );
    assert!(json["expressible"].as_u64().unwrap() > 0);
}

/// Kills the server when the test ends, passing or not.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The twin of a scenario served on loopback and observed: `accuracy` on the
/// observe folder compares the observation with the twin's own cost model.
/// The twin paces the model's clock to the wall, so on a loaded machine the
/// observed latencies carry scheduling noise; the bound is the one
/// `tests/serve.rs` holds `compare` to.
#[test]
fn an_observed_twin_agrees_with_its_own_scenario() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.toml");
    std::fs::write(
        &scenario,
        r#"
name = "accuracy-twin"
seed = 5
[horizon]
requests = 40
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[engine]
max_num_seqs = 32
max_batched_tokens = 2048
max_model_len = 4096
[workload]
arrival = { process = "poisson", rate = 20.0 }
prompt_tokens = { dist = "uniform", min = 64, max = 400 }
output_tokens = { dist = "uniform", min = 16, max = 40 }
"#,
    )
    .unwrap();
    let s = scenario.to_str().unwrap();
    let mut child = bin()
        .args(["serve", "--engine", "sim", s, "--port", "0"])
        .stderr(std::process::Stdio::piped())
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
    let observed = dir.path().join("observed");
    ok(&run(&[
        "observe",
        &url,
        s,
        "--out",
        observed.to_str().unwrap(),
        "--max-duration-s",
        "60",
    ]));
    drop(server);
    let out = dir.path().join("acc");
    let text = ok(&accuracy(
        &[
            observed.to_str().unwrap(),
            "--scenario",
            s,
            "--out",
            out.to_str().unwrap(),
        ],
        "2",
    ));
    assert!(text.contains("1 compared"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&read(&out.join("accuracy.json"))).unwrap();
    let point = &json["points"][0];
    assert_eq!(point["group"]["engine"], "observed");
    let comparisons = point["outcome"]["comparisons"].as_array().unwrap();
    let error = |metric: &str| {
        comparisons
            .iter()
            .find(|c| c["metric"] == metric && c["stat"] == "p50")
            .and_then(|c| c["error"].as_f64())
            .unwrap_or_else(|| panic!("no {metric} p50 in {comparisons:?}"))
    };
    assert!(error("e2e").abs() < 0.15, "{text}");
    assert!(error("tpot").abs() < 0.15, "{text}");
}
