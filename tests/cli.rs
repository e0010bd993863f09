//! The command surface: help with examples, the catalog, `check` output.

mod common;
use common::*;

/// The verbs `servesim --help` lists, read from its "Commands:" block.
fn listed_verbs() -> Vec<String> {
    let o = run(&["--help"]);
    assert!(o.status.success());
    stdout(&o)
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|v| v != "help")
        .collect()
}

/// The verbs a build without the `calibrate` feature lacks (`calibrate`
/// itself stays: `--engine` and `--from-bench` run in every build).
const CALIBRATE_VERBS: [&str; 3] = ["validate", "quality", "speculate"];

#[test]
fn every_subcommand_has_help_with_an_example() {
    let mut verbs = listed_verbs();
    if cfg!(feature = "calibrate") {
        assert!(verbs.len() >= 19, "{verbs:?}");
    } else {
        // Hidden from the help of a build that cannot run them.
        assert!(verbs.len() >= 16, "{verbs:?}");
        for v in CALIBRATE_VERBS {
            assert!(!verbs.iter().any(|l| l == v), "{v} listed: {verbs:?}");
        }
        verbs.extend(CALIBRATE_VERBS.map(String::from));
    }
    for cmd in &verbs {
        let cmd = cmd.as_str();
        let o = run(&[cmd, "--help"]);
        assert!(o.status.success(), "{cmd}");
        assert!(
            stdout(&o).contains("Example:") || stdout(&o).contains("Examples:"),
            "{cmd} --help lacks an example"
        );
    }
}

#[test]
fn catalog_lists_required_presets() {
    let o = run(&["catalog", "hardware"]);
    let s = stdout(&o);
    for hw in [
        "h100-sxm",
        "h200",
        "a100-80gb",
        "a100-40gb",
        "l40s",
        "l4",
        "b200",
        "mi300x",
        "b300",
        "gb200",
        "gb300",
        "h20",
        "mi325x",
        "mi355x",
        "rtx-pro-6000",
    ] {
        assert!(s.contains(hw), "{hw} missing:\n{s}");
    }
    assert!(s.contains("datasheet"));
    let s = stdout(&run(&["catalog", "models"]));
    for m in [
        "llama-3.1-8b",
        "llama-3.1-70b",
        "llama-3.1-405b",
        "llama-2-7b",
        "llama-2-70b",
        "qwen2.5-7b",
        "qwen2.5-72b",
        "mistral-7b",
    ] {
        assert!(s.contains(m), "{m} missing:\n{s}");
    }
    assert!(s.contains("config.json"));
}

#[test]
fn check_prints_the_resolved_memory_budget() {
    let p = repo().join("scenarios/llama70b-tp4.toml");
    let o = run(&["check", p.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    for want in [
        "Llama-3.1-70B",
        "H100-SXM",
        "TP 4",
        "weights",
        "KV cache",
        "blocks of 16 tokens",
    ] {
        assert!(s.contains(want), "{want} missing:\n{s}");
    }
}

#[test]
fn check_prints_distributions_as_toml_and_warns_of_an_overloaded_fleet() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("long-prompts.toml");
    std::fs::write(
        &p,
        r#"name = "long-prompts"
[horizon]
requests = 3000
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[fleet]
replicas = 2
[workload]
arrival = { process = "poisson", rate = 20.0 }
prompt_tokens = { dist = "normal", mean = 8000, sd = 1500, min = 2000, max = 14000 }
output_tokens = { dist = "uniform", min = 100, max = 400 }
[slo]
ttft_ms = 1000
tpot_ms = 50
"#,
    )
    .unwrap();
    let o = run(&["check", p.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    for want in [
        "fleet      2 replicas × TP 1 on H100-SXM = 2 GPUs, router ",
        r#"workload   arrivals { process = "poisson", rate = 20 }"#,
        r#"           prompt   { dist = "normal", mean = 8000, sd = 1500, min = 2000, max = 14000 }"#,
        r#"           output   { dist = "uniform", min = 100, max = 400 }"#,
        "capacity   2 replicas × ",
        "           offered 20 req/s = ",
        "warning    the offered load 20 req/s is far above the ",
    ] {
        assert!(s.contains(want), "{want:?} missing:\n{s}");
    }
    assert!(!s.contains("Some(") && !s.contains("Normal {"), "{s}");
}

#[test]
fn default_output_folder_is_out_slash_name() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("s.toml");
    std::fs::write(&scenario, small_quickstart(50)).unwrap();
    let o = bin()
        .current_dir(tmp.path())
        .args(["simulate", scenario.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(tmp.path().join("out/quickstart/summary.json").exists());
    // Not a terminal: no progress bar escape codes on stderr.
    assert!(!stderr(&o).contains('\u{1b}'));
}

#[test]
fn closed_stdout_is_not_a_panic() {
    use std::process::Stdio;
    let p = repo().join("scenarios/quickstart.toml");
    for args in [vec!["catalog"], vec!["check", p.to_str().unwrap()]] {
        let mut child = bin()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader goes away, like `| head -0`
        let o = child.wait_with_output().unwrap();
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
        assert_eq!(o.status.code(), Some(0), "{args:?}");
    }
}

/// A build without the `calibrate` feature says which feature adds the
/// verbs it hides, when they are run anyway.
#[test]
#[cfg(not(feature = "calibrate"))]
fn verbs_a_build_lacks_say_which_feature_adds_them() {
    let o = run(&["calibrate", "--out", "p"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--features calibrate"),
        "{}",
        stderr(&o)
    );
}

/// docs/cli.md is `servesim help-markdown`'s output: the reference cannot
/// drift from the flags. `SERVESIM_BLESS=1` rewrites it.
#[test]
fn docs_cli_md_is_what_the_binary_generates() {
    let o = run(&["help-markdown"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let generated = stdout(&o);
    let path = repo().join("docs/cli.md");
    if std::env::var_os("SERVESIM_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let kept = read(&path);
    assert!(
        kept == generated,
        "docs/cli.md differs from `servesim help-markdown`; rerun with SERVESIM_BLESS=1 \
         (first difference at line {})",
        kept.lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map_or(kept.lines().count().min(generated.lines().count()), |i| i)
            + 1
    );
}

/// The examples of `--help` that this test only parses (the binary's
/// unit test `every_help_example_parses` does), each with why it cannot
/// run here. Every other example runs.
const PARSE_ONLY: &[(&str, &str)] = &[
    ("cargo run --release -- bench --requests 200000 --replicas 16", "a timing run"),
    ("cargo run --release -- trace bench --rows 1000000", "a timing run"),
    ("servesim cost --fidelity", "needs ../shared/data"),
    ("servesim calibrate --device cpu --model scenarios/validate/tiny-llama.json --quick --out out/cpu-profile", "minutes of measurement, with --features calibrate (tests/calibrate.rs runs a smaller one)"),
    ("servesim calibrate --device cuda:0 --model llama-3.2-1b --dtype bf16 --out out/h100-1b", "needs a GPU"),
    ("servesim calibrate --weights SmolLM2-135M-Instruct.Q4_1.gguf --quick --out out/smollm2", "needs a GGUF file"),
    ("servesim calibrate --engine http://127.0.0.1:8000 --budget 4 --out out/vllm-8b", "needs a server"),
    ("servesim calibrate --from-bench tests/data/from-bench/point-*.json --scenario tests/data/from-bench/h100-llama-8b.toml --out out/h100-8b", "a thousand simulations; tests/from_bench.rs runs it"),
    ("servesim validate scenarios/validate/cpu.toml --profile out/cpu-profile/profile.toml", "serves live, with --features calibrate (tests/calibrate.rs)"),
    ("servesim serve scenarios/quickstart.toml --engine sim --port 8000", "serves until stopped (tests/serve.rs)"),
    ("servesim observe http://127.0.0.1:8000 scenarios/quickstart.toml --max-requests 200 --out out/observed", "needs a server (tests/serve.rs)"),
    ("servesim compare out/quickstart out/observed", "needs an observe run"),
    ("servesim accuracy bench-results/*.json --hardware h100-sxm --tp 1 --out out/accuracy", "needs benchmark result files"),
    ("servesim accuracy ../shared/data/aiconfigurator/silicon/silicon_train.csv --out out/accuracy", "needs ../shared/data"),
    ("servesim accuracy --coverage ../shared/data/aiconfigurator/silicon/silicon_train.csv", "needs ../shared/data"),
    ("servesim accuracy out/observed --scenario scenarios/quickstart.toml", "needs an observe run"),
    ("servesim quality --weights SmolLM2-135M-Instruct.Q4_1.gguf --text scenarios/text/dev.txt --candidate int8 --max-regression 1", "needs a GGUF file"),
    ("servesim speculate --weights SmolLM2-135M-Instruct.Q4_1.gguf --draft-format q4_0 --text scenarios/text/dev.txt --k 4", "needs a GGUF file"),
];

/// The shell lines of every ```sh block of the generated reference: the
/// `after_help` examples of every command, in order.
fn help_examples() -> Vec<String> {
    let o = run(&["help-markdown"]);
    let text = stdout(&o);
    let mut out = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        match (in_block, line) {
            (false, "```sh") => in_block = true,
            (true, "```") => in_block = false,
            (true, l) => out.push(l.to_string()),
            _ => {}
        }
    }
    out
}

/// Every `--help` example runs as written, in order, in a folder holding the
/// repository's `scenarios/` (with `quickstart.toml` cut to 200 requests so
/// that sweeps and searches over it stay short), except the few in
/// [`PARSE_ONLY`], which need a server, a GPU or files outside the
/// repository.
#[test]
fn every_help_example_runs() {
    let examples = help_examples();
    assert!(examples.len() >= 40, "{examples:?}");
    for (line, _) in PARSE_ONLY {
        assert!(
            examples
                .iter()
                .any(|e| e.split("   (").next() == Some(*line)),
            "PARSE_ONLY names `{line}`, which no --help shows"
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let scenarios = tmp.path().join("scenarios");
    std::fs::create_dir(&scenarios).unwrap();
    for entry in std::fs::read_dir(repo().join("scenarios")).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() == "quickstart.toml" {
            continue;
        }
        std::os::unix::fs::symlink(entry.path(), scenarios.join(entry.file_name())).unwrap();
    }
    std::fs::write(scenarios.join("quickstart.toml"), small_quickstart(200)).unwrap();
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_servesim"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for example in &examples {
        let line = example.split("   (").next().unwrap();
        if PARSE_ONLY.iter().any(|(l, _)| *l == line) {
            continue;
        }
        let o = std::process::Command::new("bash")
            .args(["-c", line])
            .current_dir(tmp.path())
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "the --help example `{line}` failed:\n{}",
            stderr(&o)
        );
        ran += 1;
    }
    assert!(ran >= 25, "{ran} examples ran");
}

/// `--json` prints the command's result as one JSON document on stdout
/// (the text goes to stderr) on every verb that prints a result.
#[test]
fn json_prints_one_document_on_stdout() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("s.toml");
    std::fs::write(&s, small_quickstart(200)).unwrap();
    let s = s.to_str().unwrap();
    let out = |name: &str| tmp.path().join(name).to_str().unwrap().to_string();
    let grid = repo().join("scenarios/grids/quickstart-sizing.toml");
    let space = repo().join("scenarios/spaces/quickstart-hardware.toml");
    simulate(
        std::path::Path::new(s),
        std::path::Path::new(&out("a")),
        &[],
    );
    simulate(
        std::path::Path::new(s),
        std::path::Path::new(&out("b")),
        &["--seed", "3"],
    );
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["check".into(), s.into()], "capacity"),
        (
            vec![
                "capacity".into(),
                s.into(),
                "--demand".into(),
                "40".into(),
                "--out".into(),
                out("cap"),
            ],
            "sizing",
        ),
        (
            vec![
                "sweep".into(),
                s.into(),
                "--grid".into(),
                grid.to_str().unwrap().into(),
                "--out".into(),
                out("sweep"),
            ],
            "pareto_front",
        ),
        (
            vec![
                "plan".into(),
                s.into(),
                "--space".into(),
                space.to_str().unwrap().into(),
                "--demand".into(),
                "70".into(),
                "--out".into(),
                out("plan"),
            ],
            "options",
        ),
        (vec!["compare".into(), out("a"), out("b")], "rows"),
    ];
    for (mut args, key) in cases {
        args.push("--json".into());
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&argv);
        assert!(o.status.success(), "{argv:?}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| {
            panic!(
                "{argv:?}: stdout is not one JSON document ({e}):\n{}",
                stdout(&o)
            )
        });
        assert!(v.get(key).is_some(), "{argv:?}: no {key:?} in {v}");
    }
}
