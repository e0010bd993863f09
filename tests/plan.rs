//! `servesim plan`: the cheapest option of a declared space at a demand,
//! found by the capacity search, equals the exhaustive grid's answer (every
//! option at every replica count, judged the same way) from fewer runs;
//! options that cannot work are pruned with their reason.

mod common;
use common::*;
use serde_json::Value;
use std::path::Path;

const SPACE: &str = "scenarios/spaces/quickstart-hardware.toml";

fn plan(out: &Path, extra: &[&str]) -> Value {
    let scenario = repo().join("scenarios/quickstart.toml");
    plan_of(&scenario, &repo().join(SPACE), "30", out, extra)
}

/// `servesim plan SCENARIO --space SPACE --demand DEMAND` into `out`: its plan.json.
fn plan_of(scenario: &Path, space: &Path, demand: &str, out: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "plan",
        scenario.to_str().unwrap(),
        "--space",
        space.to_str().unwrap(),
        "--demand",
        demand,
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.join("plan.csv").exists());
    serde_json::from_str(&read(&out.join("plan.json"))).unwrap()
}

/// (settings, replicas) of every sized option, and the pruned settings.
fn answer(p: &Value) -> (Vec<(String, u64)>, Vec<String>) {
    let mut sized = Vec::new();
    let mut pruned = Vec::new();
    for o in p["options"].as_array().unwrap() {
        let s = o["settings"].as_str().unwrap().to_string();
        match o["fleet"].as_object() {
            Some(f) => sized.push((s, f["replicas"].as_u64().unwrap())),
            None => pruned.push(s),
        }
    }
    (sized, pruned)
}

/// The search agrees with the exhaustive grid: the same winner and the
/// same pruned options; every option the search re-checked with a long run
/// has the grid's fleet, and one checked by a short run only has at most the
/// grid's count (a lower bound) and costs more than the winner.
fn agrees_with_exhaustive(searched: &Value, all: &Value) {
    assert_eq!(searched["best"], all["best"]);
    // Options the bounds left unsimulated (their least cost above the
    // winner's): the grid prunes them too, or sizes them dearer.
    let cannot_win = |o: &Value| {
        o["pruned"]
            .as_str()
            .is_some_and(|r| r.starts_with("cannot beat the cheapest"))
    };
    let skipped: Vec<&Value> = searched["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| cannot_win(o))
        .collect();
    let (_, pruned) = answer(searched);
    let pruned: Vec<String> = pruned
        .into_iter()
        .filter(|s| !skipped.iter().any(|o| o["settings"] == s.as_str()))
        .collect();
    let grid_pruned: Vec<String> = answer(all)
        .1
        .into_iter()
        .filter(|s| !skipped.iter().any(|o| o["settings"] == s.as_str()))
        .collect();
    assert_eq!(pruned, grid_pruned, "the same options pruned");
    let grid_fleet = |settings: &Value| {
        all["options"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| &o["settings"] == settings)
            .map(|o| o["fleet"].clone())
            .unwrap()
    };
    let best_cost = searched["options"][0]["fleet"]["usd_per_month"]
        .as_f64()
        .unwrap();
    for o in &skipped {
        let grid = grid_fleet(&o["settings"]);
        if !grid.is_null() {
            assert!(
                grid["usd_per_month"].as_f64().unwrap() > best_cost,
                "{o} against {grid}"
            );
        }
    }
    for o in searched["options"].as_array().unwrap() {
        if o["fleet"].is_null() {
            continue;
        }
        let grid = grid_fleet(&o["settings"]);
        if o["rechecked"] == true {
            assert_eq!(o["fleet"]["replicas"], grid["replicas"], "{o}");
        } else {
            assert!(
                o["fleet"]["replicas"].as_u64() <= grid["replicas"].as_u64(),
                "{o} against {grid}"
            );
            assert!(
                o["fleet"]["usd_per_month"].as_f64().unwrap() > best_cost,
                "{o}"
            );
        }
    }
}

#[test]
fn plan_equals_the_exhaustive_grid_from_fewer_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let searched = plan(&tmp.path().join("plan"), &["--report"]);
    let all = plan(&tmp.path().join("all"), &["--exhaustive", "6"]);
    agrees_with_exhaustive(&searched, &all);
    assert_eq!(searched["options"][0]["rechecked"], true);
    // The report ranks the options in a chart whose bars name their
    // settings on hover, and lists the pruned options with their reasons.
    let html = read(&tmp.path().join("plan/report.html"));
    assert!(html.contains("plan-options"), "no plan chart");
    assert!(
        html.contains("data-tip=\"#1: "),
        "no hover text on the bars"
    );
    assert!(
        html.contains("hardware.preset = &quot;h100-sxm&quot;"),
        "bars name their settings"
    );
    assert!(
        html.contains("cannot be split over 3 GPUs"),
        "pruned options listed"
    );
    let (sized, pruned) = answer(&searched);
    assert_eq!(sized.len(), 3, "{sized:?}");
    assert_eq!(pruned.len(), 5, "{pruned:?}");
    // The throughput–interactivity frontier of the three cheapest options,
    // each at five loads: as CSV, as the runs behind it, and in the report
    // as the two charts a sweep draws.
    let csv = read(&tmp.path().join("plan/frontier.csv"));
    let rows: Vec<&str> = csv.lines().collect();
    assert!(
        rows[0].starts_with("point,configuration,load,gpus,"),
        "{csv}"
    );
    assert_eq!(rows.len(), 1 + 3 * 5, "{csv}");
    assert!(
        rows[1].contains("hardware.preset = \"\"h100-sxm\"\""),
        "{csv}"
    );
    // The last column (settings) is quoted and holds commas; the two
    // before it are the frontier marks.
    let on_front = |col: usize| {
        rows[1..]
            .iter()
            .filter(|r| {
                let head = &r[..r.rfind(",\"").unwrap()];
                head.split(',').rev().nth(col) == Some("1")
            })
            .count()
    };
    assert!(
        on_front(1) >= 1,
        "no point on the interactivity frontier: {csv}"
    );
    assert!(on_front(0) >= 1, "no point on the TTFT frontier: {csv}");
    let runs: Value = serde_json::from_str(&read(&tmp.path().join("plan/frontier.json"))).unwrap();
    assert_eq!(runs["points"].as_array().unwrap().len(), 15);
    assert!(html.contains("frontier-interactivity") && html.contains("frontier-ttft"));
    assert!(html.contains("tokens/s per user"), "no interactivity axis");
    // Ranked by cost: H100 first at these prices, and each option's price
    // is its own hardware's.
    let first = &searched["options"][0];
    assert_eq!(first["hardware"], "H100-SXM");
    assert_eq!(first["fleet"]["gpu_hour_usd"], 2.49);
    // Sizing and pruning took fewer runs than the exhaustive grid (the
    // search also measures the winner's headroom, which the grid has not).
    let n = searched["simulations"].as_u64().unwrap()
        - searched["headroom_simulations"].as_u64().unwrap();
    assert!(
        searched["options"][0]["fleet"]["headroom"]
            .as_f64()
            .unwrap()
            >= 0.0
    );
    let m = all["simulations"].as_u64().unwrap();
    assert!(
        n < m,
        "the search ran {n} simulations, the exhaustive grid {m}"
    );
    // Pruned with reasons: a layout that does not divide, and a token
    // budget below the longest prompts (rejections at any load).
    let reasons: Vec<&str> = searched["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["pruned"].as_str())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("cannot be split over 3 GPUs")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("one replica misses the SLOs even at")),
        "{reasons:?}"
    );
}

#[test]
fn a_plan_needs_prices_and_finds_the_replica_count_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = repo().join("scenarios/quickstart.toml");
    for (space, want) in [
        (
            "[axes]\n\"hardware.preset\" = [\"h100-sxm\"]\n",
            "objective.gpu_hour_usd: missing",
        ),
        (
            "[objective]\ngpu_hour_usd = 2.0\n[axes]\n\"fleet.replicas\" = [1, 2]\n",
            "axes.fleet.replicas: a plan finds the replica count",
        ),
    ] {
        let p = tmp.path().join("space.toml");
        std::fs::write(&p, space).unwrap();
        let o = run(&[
            "plan",
            scenario.to_str().unwrap(),
            "--space",
            p.to_str().unwrap(),
            "--demand",
            "10",
            "--out",
            tmp.path().join("o").to_str().unwrap(),
        ]);
        assert!(!o.status.success());
        let e = stderr(&o);
        assert!(e.contains(want), "expected {want:?}: {e}");
        assert!(!e.contains("panicked"), "{e}");
    }
    // Targets the capacity search would refuse are refused before any run
    // (a tolerance of 0 would bisect forever).
    for (flag, value, want) in [
        ("--tolerance", "0", "must be in (0, 1)"),
        ("--attainment", "1.5", "must be in (0, 1]"),
        ("--headroom", "-5", "must be in [0, 1000] %"),
        ("--headroom", "1000000", "must be in [0, 1000] %"),
    ] {
        let o = run(&[
            "plan",
            scenario.to_str().unwrap(),
            "--space",
            repo().join(SPACE).to_str().unwrap(),
            "--demand",
            "10",
            flag,
            value,
            "--out",
            tmp.path().join("o").to_str().unwrap(),
        ]);
        assert!(!o.status.success(), "{flag} {value} was accepted");
        let e = stderr(&o);
        assert!(
            e.contains(want) && e.contains(flag),
            "expected {flag} {want:?}: {e}"
        );
    }
}

/// A disaggregated space: prefill:decode units and a colocated replica,
/// each sized in whole units; the search's answer is the exhaustive grid's.
#[test]
fn a_disaggregated_plan_sizes_whole_units_and_equals_the_exhaustive_grid() {
    let tmp = tempfile::tempdir().unwrap();
    // The disaggregation example with a shorter run, so that the test's
    // debug build sizes it quickly; the unit logic is the same.
    let text = read(&repo().join("scenarios/disaggregation.toml"))
        .replace("requests = 3000", "requests = 400");
    let scenario = tmp.path().join("disaggregation.toml");
    std::fs::write(&scenario, text).unwrap();
    let space = tmp.path().join("space.toml");
    std::fs::write(
        &space,
        r#"[objective]
gpu_hour_usd = { "h100-sxm" = 2.0 }
[axes]
"fleet.pools" = [
  [{ name = "prefill", role = "prefill", replicas = 1 }, { name = "decode", role = "decode", replicas = 2 }],
  [{ name = "colocated", role = "colocated", replicas = 1 }],
]
"#,
    )
    .unwrap();
    let go =
        |out: &str, extra: &[&str]| plan_of(&scenario, &space, "4", &tmp.path().join(out), extra);
    let searched = go("plan", &[]);
    let all = go("all", &["--exhaustive", "4"]);
    agrees_with_exhaustive(&searched, &all);
    // Split over two machines and merged, the plan gives the same answer.
    let shard_dirs: Vec<_> = (0..2)
        .map(|i| {
            let out = tmp.path().join(format!("shard-{i}"));
            let p = plan_of(
                &scenario,
                &space,
                "4",
                &out,
                &["--shard", &format!("{i}/2")],
            );
            assert_eq!(p["shard"]["index"], i, "{p}");
            out
        })
        .collect();
    let merged_dir = tmp.path().join("merged");
    let mut args = vec!["plan", "merge"];
    args.extend(shard_dirs.iter().map(|d| d.to_str().unwrap()));
    args.extend(["--out", merged_dir.to_str().unwrap()]);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let merged: Value = serde_json::from_str(&read(&merged_dir.join("plan.json"))).unwrap();
    assert_eq!(merged["best"], searched["best"]);
    assert_eq!(
        merged["options"][0]["fleet"],
        searched["options"][0]["fleet"]
    );
    // The checkpoint folder goes once plan.json is written.
    assert!(!tmp.path().join("plan/options").exists());
    let options = searched["options"].as_array().unwrap();
    let split = options
        .iter()
        .find(|o| o["settings"].as_str().unwrap().contains("prefill"))
        .unwrap();
    let f = &split["fleet"];
    assert_eq!(f["unit"], "1 prefill + 2 decode", "{split}");
    let units = f["units"].as_u64().unwrap();
    // Whole units: every replica and GPU count is a multiple of the unit's.
    assert_eq!(f["replicas"].as_u64().unwrap(), 3 * units);
    assert_eq!(f["gpus"].as_u64().unwrap(), 3 * units);
    assert_eq!(f["gpus_per_replica"], 3);
    // The colocated pool set is sized too: it has no link (the scenario's
    // is not inherited, or its scenario would be refused) and its unit is
    // one replica.
    let colocated = options
        .iter()
        .find(|o| o["settings"].as_str().unwrap().contains("colocated"))
        .unwrap();
    assert!(colocated["pruned"].is_null(), "{colocated}");
    let f = &colocated["fleet"];
    assert_eq!(f["unit"], "1 colocated", "{colocated}");
    assert_eq!(f["replicas"], f["units"], "{colocated}");
}

/// A space is checked whole before anything runs, as a sweep's grid is: a
/// mistyped axis key or pool role, a key of `[objective]` a plan does not
/// use, one GPU priced under two names, a price written as text or past
/// its range, and an axis `--demand` replaces each end in an error naming
/// the space and the key, not in "no option meets the SLOs".
#[test]
fn a_plan_space_is_checked_whole_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = repo().join("scenarios/quickstart.toml");
    for (space, want) in [
        (
            "[objective]\ngpu_hour_usd = 2.0\n[axes]\n\"fleet.tensor_paralel\" = [1, 2]\n",
            "fleet.tensor_paralel: unknown field",
        ),
        (
            "[objective]\ngpu_hour_usd = 2.0\n[axes]\n\"fleet.pools\" = [[{ role = \"prefil\", replicas = 1 }, { role = \"decode\", replicas = 1 }]]\n",
            "prefil",
        ),
        (
            "[objective]\ngpu_hour_usd = 2.0\nattainment = 0.9\n[axes]\n\"hardware.preset\" = [\"h100-sxm\"]\n",
            "objective.attainment: not used by a plan",
        ),
        (
            "[objective]\ngpu_hour_usd = 2.0\nlatency = \"ttft_ms.p99\"\n[axes]\n\"hardware.preset\" = [\"h100-sxm\"]\n",
            "objective.latency: not used by a plan",
        ),
        (
            "[objective]\ngpu_hour_usd = { \"h100\" = 2.0, \"h100-sxm\" = 3.0 }\n[axes]\n\"hardware.preset\" = [\"h100-sxm\"]\n",
            "name the same hardware",
        ),
        (
            "[objective]\ngpu_hour_usd = { \"h100-sxm\" = \"2.49\" }\n[axes]\n\"hardware.preset\" = [\"h100-sxm\"]\n",
            "without quotes",
        ),
        (
            "[objective]\ngpu_hour_usd = 1e306\n[axes]\n\"hardware.preset\" = [\"h100-sxm\"]\n",
            "objective.gpu_hour_usd: must be in (0, 10000]",
        ),
        (
            "[objective]\ngpu_hour_usd = 2.0\n[axes]\n\"workload.trace.rate\" = [1.0, 2.0]\n",
            "axes.workload.trace.rate: a plan offers each option the load of --demand",
        ),
        (
            "[objective]\ngpu_hour_usd = 2.0\n[axes]\n\"hardware.preset\" = [\"h100-sxn\"]\n",
            "no option of the space is a valid scenario",
        ),
    ] {
        let p = tmp.path().join("space.toml");
        std::fs::write(&p, space).unwrap();
        let out = tmp.path().join("o");
        let o = run(&[
            "plan",
            scenario.to_str().unwrap(),
            "--space",
            p.to_str().unwrap(),
            "--demand",
            "10",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(1), "{space}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(want), "expected {want:?}: {e}");
        assert!(e.contains(p.to_str().unwrap()), "names the space: {e}");
        assert!(!out.join("plan.json").exists(), "{space}: a plan was written");
    }
}

/// A large space is told before it runs: its options, the simulations it
/// is expected to take, and a warning past the threshold.
#[test]
fn a_plan_tells_its_size_before_it_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = repo().join("scenarios/quickstart.toml");
    let p = tmp.path().join("space.toml");
    // 200 valid options; the run stops at its output folder, whose lock
    // this test holds, so only what is told before the search is checked.
    let values: Vec<String> = (1..=200).map(|i| (256 * i).to_string()).collect();
    std::fs::write(
        &p,
        format!(
            "[objective]\ngpu_hour_usd = 2.0\n[axes]\n\"engine.max_batched_tokens\" = [{}]\n",
            values.join(", ")
        ),
    )
    .unwrap();
    let out = tmp.path().join("o");
    let _held = sim::output::OutputLock::acquire(&out).unwrap();
    let o = run(&[
        "plan",
        scenario.to_str().unwrap(),
        "--space",
        p.to_str().unwrap(),
        "--demand",
        "10",
        "--out",
        out.to_str().unwrap(),
    ]);
    let e = stderr(&o);
    assert!(
        e.contains("plan: 200 option(s) × about 15 simulations each ≈ 3000 simulations"),
        "{e}"
    );
    assert!(e.contains("warning: a large plan"), "{e}");
    assert!(!o.status.success(), "the output folder is held: {e}");
}

/// An option pruned because one replica misses the SLOs even at a light
/// load says which target missed, not "100.00 % met".
#[test]
fn a_pruned_option_names_the_target_it_missed() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("q.toml");
    std::fs::write(
        &scenario,
        small_quickstart(300).replace("tpot_ms = 50", "tpot_ms = 50\nttft_p99_ms = 1"),
    )
    .unwrap();
    let space = tmp.path().join("space.toml");
    std::fs::write(
        &space,
        "[objective]\ngpu_hour_usd = 2.0\n[axes]\n\"hardware.preset\" = [\"h100-sxm\"]\n",
    )
    .unwrap();
    let p = plan_of(&scenario, &space, "10", &tmp.path().join("o"), &[]);
    let why = p["options"][0]["pruned"].as_str().unwrap();
    assert!(
        why.contains("ttft_p99_ms is") && why.contains("above its 1 ms target"),
        "{why}"
    );
}
