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

#[test]
fn every_subcommand_has_help_with_an_example() {
    let verbs = listed_verbs();
    // The test build has the calibrate feature: every verb is listed.
    assert!(verbs.len() >= 19, "{verbs:?}");
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
