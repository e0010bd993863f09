//! `servesim sweep`: the example grid runs; results are byte-identical at
//! one and two threads and when run as shards and merged; bad grids fail
//! before anything runs, with the grid file and the key named.

mod common;
use common::*;
use std::path::Path;

const GRID: &str = "scenarios/grids/quickstart-sizing.toml";

/// The files a finished sweep writes.
const OUTPUTS: [&str; 7] = [
    "sweep.csv",
    "sweep.json",
    "frontier.csv",
    "operating-point.json",
    "operating-point/summary.json",
    "operating-point/requests.csv",
    "operating-point/timeseries.csv",
];

fn sweep(
    scenario: &Path,
    grid: &Path,
    out: &Path,
    extra: &[&str],
    threads: &str,
) -> std::process::Output {
    let o = bin()
        .env("RAYON_NUM_THREADS", threads)
        .args([
            "sweep",
            scenario.to_str().unwrap(),
            "--grid",
            grid.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "sweep failed:\n{}", stderr(&o));
    o
}

fn same_files(a: &Path, b: &Path) {
    for f in OUTPUTS {
        assert_eq!(read(&a.join(f)), read(&b.join(f)), "{f} differs");
    }
}

#[test]
fn example_grid_is_identical_at_one_and_two_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("qs.toml");
    std::fs::write(&scenario, small_quickstart(300)).unwrap();
    let grid = repo().join(GRID);
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let o = sweep(&scenario, &grid, &a, &[], "1");
    sweep(&scenario, &grid, &b, &[], "2");
    same_files(&a, &b);

    let table = stdout(&o);
    assert!(table.contains("Pareto front"), "{table}");
    assert!(table.contains("operating point: point "), "{table}");
    assert!(stderr(&o).contains("points/min"), "{}", stderr(&o));
    // One row per point: the varied keys, then every summary metric.
    let csv = read(&a.join("sweep.csv"));
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert_eq!(
        header[..5],
        [
            "point",
            "engine.policy",
            "engine.max_batched_tokens",
            "fleet.replicas",
            "offered_rps"
        ]
    );
    for col in [
        "latency.ttft_ms.p99",
        "slo.attainment",
        "gpus",
        "throughput.output_tokens_per_s",
    ] {
        assert!(header.contains(&col), "{col} missing from {header:?}");
    }
    assert_eq!(csv.lines().count(), 1 + 20);
    let j: serde_json::Value = serde_json::from_str(&read(&a.join("sweep.json"))).unwrap();
    assert_eq!(j["points"].as_array().unwrap().len(), 20);
    assert_eq!(
        j["points"][19]["values"],
        serde_json::json!(["sarathi", 8192, 6])
    );
    assert_eq!(j["points"][19]["summary"]["replicas"], 6);
    // The operating point was rerun in full and is one of the points.
    let op: serde_json::Value =
        serde_json::from_str(&read(&a.join("operating-point.json"))).unwrap();
    let best = op["best"].as_u64().expect("a point meets the SLOs") as usize;
    let mut s: serde_json::Value =
        serde_json::from_str(&read(&a.join("operating-point/summary.json"))).unwrap();
    // The rerun's folder also says which run its files are from.
    let run = s.as_object_mut().unwrap().remove("run");
    assert!(run.is_some_and(|r| r["seed"].is_u64()), "{s}");
    assert_eq!(s, j["points"][best]["summary"]);
}

#[test]
fn shards_merge_into_the_unsharded_run() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("qs.toml");
    std::fs::write(&scenario, small_quickstart(200)).unwrap();
    let grid = tmp.path().join("g.toml");
    std::fs::write(
        &grid,
        "[axes]\n\"fleet.replicas\" = [2, 3, 4]\n\"workload.rate\" = [40.0, 80.0]\n",
    )
    .unwrap();
    let whole = tmp.path().join("whole");
    sweep(&scenario, &grid, &whole, &[], "2");
    let mut shards = Vec::new();
    for i in 0..4 {
        let d = tmp.path().join(format!("shard-{i}"));
        let o = sweep(&scenario, &grid, &d, &["--shard", &format!("{i}/4")], "1");
        assert!(stdout(&o).contains("sweep merge"), "{}", stdout(&o));
        assert!(!d.join("operating-point.json").exists());
        shards.push(d.to_str().unwrap().to_string());
    }
    let merged = tmp.path().join("merged");
    // Merge order does not matter.
    let mut args = vec![
        "sweep", "merge", &shards[2], &shards[0], &shards[3], &shards[1],
    ];
    args.extend(["--out", merged.to_str().unwrap()]);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    same_files(&whole, &merged);

    // An incomplete set is refused, naming what is missing.
    let o = run(&[
        "sweep",
        "merge",
        &shards[0],
        &shards[1],
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("shard 2/4 is missing"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn latin_hypercube_sample_of_a_continuous_rate() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("qs.toml");
    std::fs::write(&scenario, small_quickstart(150)).unwrap();
    let grid = tmp.path().join("g.toml");
    std::fs::write(
        &grid,
        "[sweep]\nsample = \"latin-hypercube\"\npoints = 6\n[axes]\n\"workload.rate\" = { from = 20.0, to = 80.0 }\n\"fleet.replicas\" = [2, 4]\n",
    )
    .unwrap();
    let out = tmp.path().join("o");
    sweep(&scenario, &grid, &out, &[], "2");
    let j: serde_json::Value = serde_json::from_str(&read(&out.join("sweep.json"))).unwrap();
    let pts = j["points"].as_array().unwrap();
    assert_eq!(pts.len(), 6);
    let mut strata: Vec<usize> = pts
        .iter()
        .map(|p| {
            let r = p["offered_rps"].as_f64().unwrap();
            assert!((20.0..80.0).contains(&r), "{r}");
            ((r - 20.0) / 10.0) as usize
        })
        .collect();
    strata.sort();
    assert_eq!(strata, [0, 1, 2, 3, 4, 5], "one point per stratum");
    let twos = pts.iter().filter(|p| p["values"][1] == 2).count();
    assert_eq!(twos, 3, "each replica count in half the points");
}

/// Runs a sweep that must fail before running anything; returns stderr.
fn sweep_error(grid_text: &str) -> (String, String) {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("qs.toml");
    std::fs::write(&scenario, small_quickstart(100)).unwrap();
    let grid = tmp.path().join("grid.toml");
    std::fs::write(&grid, grid_text).unwrap();
    let out = tmp.path().join("out");
    let o = run(&[
        "sweep",
        scenario.to_str().unwrap(),
        "--grid",
        grid.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(!e.contains("panicked"), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "one line: {e}");
    assert!(!out.exists(), "nothing ran, nothing was written");
    (e, grid.to_str().unwrap().to_string())
}

#[test]
fn unknown_key_paths_and_wrong_types_fail_before_running() {
    let (e, g) = sweep_error("[axes]\n\"engine.polcy\" = [\"vllm\", \"sarathi\"]\n");
    assert!(
        e.starts_with(&format!("error: {g}: axes.engine.polcy = \"vllm\": ")),
        "{e}"
    );
    assert!(e.contains("engine.polcy: unknown field `polcy`"), "{e}");
    assert!(e.contains("`policy`"), "lists the known keys: {e}");
    let (e, _) = sweep_error("[axes]\n\"engine.policy\" = [\"vllm\", \"fcfs\"]\n");
    assert!(
        e.contains("axes.engine.policy = \"fcfs\"") && e.contains("sarathi"),
        "{e}"
    );
    let (e, g) = sweep_error("[axes]\n\"fleet.replicas\" = [2, \"four\"]\n");
    assert!(
        e.starts_with(&format!("error: {g}: axes.fleet.replicas = \"four\": ")),
        "{e}"
    );
    assert!(e.contains("invalid type"), "{e}");
    let (e, _) = sweep_error("[axes]\n\"workload.rate\" = [10.0, -1.0]\n");
    assert!(
        e.contains("workload.arrival.rate: must be a positive number"),
        "{e}"
    );
    let (e, g) = sweep_error("[axes]\n\"fleet.replicas\" = [2\n");
    assert!(e.starts_with(&format!("error: {g}: line ")), "{e}");
    let (e, _) = sweep_error("[axes]\n\"fleet.replicas\" = { from = 1, to = 4 }\n");
    assert!(e.contains("add `step`"), "{e}");
    let (e, _) =
        sweep_error("[objective]\ncost = \"usd_per_hour\"\n[axes]\n\"fleet.replicas\" = [1]\n");
    assert!(
        e.contains("objective.cost") && e.contains("gpu_hour_usd"),
        "{e}"
    );
}

#[test]
fn sweep_commands_have_help_with_examples() {
    for cmd in [
        &["sweep", "--help"][..],
        &["sweep", "merge", "--help"],
        &["capacity", "--help"],
        &["report", "--help"],
    ] {
        let o = run(cmd);
        assert!(o.status.success(), "{cmd:?}");
        assert!(stdout(&o).contains("Example"), "{cmd:?} lacks an example");
    }
    let o = run(&["sweep", "s.toml"]);
    assert_eq!(o.status.code(), Some(2), "--grid is required");
    let o = run(&["sweep", "s.toml", "--grid", "g.toml", "--shard", "4/4"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("0 ≤ I < N"), "{}", stderr(&o));
}

#[test]
fn every_example_grid_runs_on_the_quickstart_or_its_own_scenario() {
    let mut grids: Vec<_> = std::fs::read_dir(repo().join("scenarios/grids"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    grids.sort();
    assert!(grids.len() >= 2, "{grids:?}");
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("qs.toml");
    std::fs::write(&scenario, small_quickstart(60)).unwrap();
    for g in grids {
        let out = tmp.path().join(g.file_stem().unwrap());
        // A grid named after an example scenario varies that scenario's own
        // keys (noisy-neighbor: its tenants); the others vary the quickstart.
        let own = repo().join("scenarios").join(g.file_name().unwrap());
        let target = if own.exists() { own } else { scenario.clone() };
        let o = sweep(&target, &g, &out, &[], "2");
        assert!(stdout(&o).contains("Pareto front"), "{}", g.display());
        let j: serde_json::Value = serde_json::from_str(&read(&out.join("sweep.json"))).unwrap();
        assert_eq!(
            j["points"].as_array().unwrap().len() as u64,
            j["points_total"].as_u64().unwrap()
        );
    }
}

#[test]
fn paired_axes_run_their_pairs_priced_per_hardware_option() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("qs.toml");
    std::fs::write(&scenario, small_quickstart(300)).unwrap();
    let grid = tmp.path().join("grid.toml");
    std::fs::write(
        &grid,
        r#"
[objective]
gpu_hour_usd = { "h100" = 2.0, "h200" = 3.0 }

[axes]
"fleet.replicas" = [1, 2]

[axes.zip]
"hardware.preset" = ["h100-sxm", "h200"]
"fleet.tensor_parallel" = [1, 2]
"#,
    )
    .unwrap();
    let out = tmp.path().join("out");
    sweep(&scenario, &grid, &out, &[], "2");
    let r: serde_json::Value = serde_json::from_str(&read(&out.join("sweep.json"))).unwrap();
    let a: serde_json::Value =
        serde_json::from_str(&read(&out.join("operating-point.json"))).unwrap();
    let points = r["points"].as_array().unwrap();
    // 2 replica counts × 2 hardware options: the pairs, not all 8 mixes.
    assert_eq!(points.len(), 4);
    let mut seen = Vec::new();
    for (p, e) in points.iter().zip(a["points"].as_array().unwrap()) {
        let s = &p["summary"];
        let (hw, tp) = (
            s["hardware"].as_str().unwrap(),
            s["tensor_parallel"].as_u64().unwrap(),
        );
        let price = match (hw, tp) {
            ("H100-SXM", 1) => 2.0,
            ("H200", 2) => 3.0,
            other => panic!("unpaired point {other:?}"),
        };
        seen.push((p["values"][0].as_u64().unwrap(), hw.to_string()));
        assert_eq!(
            e["cost"].as_f64().unwrap(),
            s["gpus"].as_f64().unwrap() * price,
            "{e}"
        );
    }
    assert_eq!(
        seen,
        [
            (1, "H100-SXM".into()),
            (1, "H200".into()),
            (2, "H100-SXM".into()),
            (2, "H200".into())
        ]
    );

    // Every hardware option needs its price: none is assumed.
    let (e, g) = sweep_error(
        "[objective]\ngpu_hour_usd = { \"h100-sxm\" = 2.0 }\n[axes.zip]\n\"hardware.preset\" = [\"h100-sxm\", \"h200\"]\n\"fleet.tensor_parallel\" = [1, 2]\n",
    );
    assert!(
        e.starts_with(&format!(
            "error: {g}: objective.gpu_hour_usd: no price for hardware H200"
        )),
        "{e}"
    );
    let (e, _) = sweep_error("[axes.zip]\n\"hardware.preset\" = [\"h100-sxm\", \"h200\"]\n\"fleet.tensor_parallel\" = [1]\n");
    assert!(
        e.contains("axes.zip.fleet.tensor_parallel: has 1 values"),
        "{e}"
    );
}
