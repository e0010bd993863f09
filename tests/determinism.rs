//! Same scenario and seed ⇒ byte-identical outputs; another seed ⇒ other arrivals.

mod common;
use common::*;

#[test]
fn same_seed_gives_byte_identical_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("qs.toml");
    std::fs::write(&scenario, small_quickstart(4000)).unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    simulate(&scenario, &a, &[]);
    simulate(&scenario, &b, &[]);
    for f in ["summary.json", "requests.csv", "timeseries.csv"] {
        assert_eq!(
            read(&a.join(f)),
            read(&b.join(f)),
            "{f} differs between runs"
        );
    }
}

#[test]
fn another_seed_gives_other_arrivals() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("qs.toml");
    std::fs::write(&scenario, small_quickstart(500)).unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    simulate(&scenario, &a, &[]);
    simulate(&scenario, &b, &["--seed", "43"]);
    let arrivals = |d: &std::path::Path| -> Vec<String> {
        read(&d.join("requests.csv"))
            .lines()
            .skip(1)
            .map(|l| l.split(',').nth(1).unwrap().to_string())
            .collect()
    };
    assert_ne!(arrivals(&a), arrivals(&b));
    let s: serde_json::Value = serde_json::from_str(&read(&b.join("summary.json"))).unwrap();
    assert_eq!(s["seed"], 43);
}

/// Command-line overrides are the file's own keys: `--seed 7 --step-by-step`
/// on a scenario with pools writes what the same file with `seed = 7` and
/// `decode_runs = false` writes, and an override that the file could not say
/// is refused by key.
#[test]
fn command_line_overrides_equal_the_same_keys_in_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let pooled = read(&repo().join("scenarios/heterogeneous.toml"))
        .replace("requests = 6000", "requests = 600")
        .replace(
            "max_model_len = 8192",
            "max_model_len = 8192\nspeculative = { num_draft_tokens = 4, acceptance_rate = 0.7, draft_cost_fraction = 0.05 }",
        );
    let (given, written) = (
        tmp.path().join("given.toml"),
        tmp.path().join("written.toml"),
    );
    std::fs::write(&given, &pooled).unwrap();
    std::fs::write(
        &written,
        pooled.replace("seed = 11", "seed = 7").replace(
            "max_model_len = 8192",
            "max_model_len = 8192\ndecode_runs = false",
        ),
    )
    .unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    simulate(&given, &a, &["--seed", "7", "--step-by-step"]);
    simulate(&written, &b, &[]);
    for f in ["requests.csv", "timeseries.csv"] {
        assert_eq!(read(&a.join(f)), read(&b.join(f)), "{f} differs");
    }
    let o = run(&[
        "simulate",
        given.to_str().unwrap(),
        "--seed",
        "18446744073709551615",
        "--out",
        tmp.path().join("c").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("seed") && e.contains("at most"), "{e}");
}

#[test]
fn json_flag_prints_the_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("qs.toml");
    std::fs::write(&scenario, small_quickstart(300)).unwrap();
    let o = simulate(&scenario, &tmp.path().join("o"), &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("stdout is JSON");
    assert_eq!(v["counts"]["arrived"], 300);
    assert_eq!(
        stdout(&o).trim(),
        read(&tmp.path().join("o/summary.json")).trim()
    );
}

#[test]
fn every_example_scenario_is_deterministic() {
    let tmp = tempfile::tempdir().unwrap();
    let mut files: Vec<_> = std::fs::read_dir(repo().join("scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    for f in files {
        let name = f.file_stem().unwrap().to_str().unwrap().to_string();
        let (a, b) = (
            tmp.path().join(format!("{name}-a")),
            tmp.path().join(format!("{name}-b")),
        );
        simulate(&f, &a, &[]);
        simulate(&f, &b, &[]);
        for out in ["summary.json", "requests.csv", "timeseries.csv"] {
            assert!(
                read(&a.join(out)) == read(&b.join(out)),
                "{name}: {out} differs between runs"
            );
        }
    }
}

#[test]
fn one_cpu_writes_the_same_files_as_several() {
    // On one CPU the records, the inter-token gaps and the trace are folded
    // and read on the simulation's thread instead of threads of their own
    // (`simulation::records`): the files must not tell the two apart.
    if std::process::Command::new("taskset")
        .args(["-c", "0", "true"])
        .status()
        .map_or(true, |s| !s.success())
    {
        eprintln!("skipped: no taskset to run servesim on one CPU");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let quick = tmp.path().join("qs.toml");
    std::fs::write(&quick, small_quickstart(3000)).unwrap();
    for scenario in [quick, repo().join("scenarios/prefix-caching.toml")] {
        let name = scenario.file_stem().unwrap().to_str().unwrap().to_string();
        let (many, one) = (
            tmp.path().join(format!("{name}-many")),
            tmp.path().join(format!("{name}-one")),
        );
        simulate(&scenario, &many, &[]);
        let o = std::process::Command::new("taskset")
            .args(["-c", "0", env!("CARGO_BIN_EXE_servesim"), "simulate"])
            .arg(&scenario)
            .arg("--out")
            .arg(&one)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        for f in ["summary.json", "requests.csv", "timeseries.csv"] {
            assert_eq!(
                read(&many.join(f)),
                read(&one.join(f)),
                "{name}: {f} differs on one CPU"
            );
        }
    }
}
