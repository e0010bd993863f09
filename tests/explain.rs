//! `servesim explain` end to end: bands, hypotheses and timelines from a
//! simulated run, JSON, one request's timeline, the CSV components adding up
//! to the recorded latencies, and clear errors on bad input.

mod common;
use common::*;
use std::path::Path;

/// Parses a "ms with up to six decimals" cell into nanoseconds.
fn ns(cell: &str) -> u64 {
    let (i, f) = cell.split_once('.').unwrap_or((cell, ""));
    let f = format!("{f:0<6}");
    i.parse::<u64>().unwrap() * 1_000_000 + f[..6].parse::<u64>().unwrap()
}

/// The attr_* columns of every completed row add up to its TTFT and E2E
/// (written with three decimals, so to within half a microsecond).
fn assert_csv_components_add_up(dir: &Path) -> usize {
    let text = read(&dir.join("requests.csv"));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let comps: Vec<usize> = (0..header.len())
        .filter(|&i| header[i].starts_with("attr_"))
        .collect();
    assert_eq!(comps.len(), 15, "{header:?}");
    assert_eq!(
        *comps.last().unwrap(),
        header.len() - 1,
        "components come last"
    );
    let ttft_parts = &comps[..11]; // up to attr_prefill_preempted_ms
    let (status, ttft, e2e) = (col("status"), col("ttft_ms"), col("e2e_ms"));
    let mut n = 0;
    for l in lines {
        let c: Vec<&str> = l.split(',').collect();
        if c[status] != "completed" {
            continue;
        }
        let sum = |cols: &[usize]| cols.iter().map(|&i| ns(c[i])).sum::<u64>();
        assert!(sum(ttft_parts).abs_diff(ns(c[ttft])) <= 500, "{l}");
        assert!(sum(&comps).abs_diff(ns(c[e2e])) <= 500, "{l}");
        n += 1;
    }
    n
}

#[test]
fn explain_overload_names_the_tail_and_its_causes() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("overload");
    simulate(&repo().join("scenarios/overload.toml"), &out, &[]);
    assert!(assert_csv_components_add_up(&out) > 0);

    let o = run(&["explain", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for want in [
        "TTFT",
        "E2E",
        "≥p99",
        "Hypotheses",
        "     try: ",
        "evidence:",
        "Slowest requests by TTFT",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }

    let o = run(&["explain", out.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let ttft = &j["metrics"][0];
    assert_eq!(ttft["metric"], "ttft");
    let p99 = &ttft["bands"][2];
    assert_eq!(p99["label"], "p99");
    let shares: f64 = p99["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["share"].as_f64().unwrap())
        .sum();
    assert!(
        (shares - 1.0).abs() < 1e-6,
        "shares of a band sum to 1: {shares}"
    );
    let h = j["hypotheses"].as_array().unwrap();
    assert!(!h.is_empty(), "an overloaded run has a tail to explain");
    assert!(h[0]["evidence"].as_object().unwrap().len() >= 3);
    // Every hypothesis names a scenario key to change and which way.
    for x in h {
        let t = x["try_change"].as_str().unwrap();
        assert!(
            [
                "engine.",
                "fleet.",
                "model.",
                "tenants.",
                "autoscale.",
                "lifecycle."
            ]
            .iter()
            .any(|k| t.contains(k))
                && ["raise", "lower", "set"].iter().any(|w| t.contains(w)),
            "{t}"
        );
    }
    let scores: Vec<f64> = h.iter().map(|x| x["score"].as_f64().unwrap()).collect();
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]),
        "ranked: {scores:?}"
    );

    // The slowest request's timeline: phases back to back from its arrival.
    let id = j["tail_ttft"][0]["id"].as_u64().unwrap();
    let o = run(&[
        "explain",
        out.to_str().unwrap(),
        "--request",
        &id.to_string(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let phases = t["phases"].as_array().unwrap();
    assert_eq!(phases[0]["phase"], "queue");
    assert_eq!(phases[0]["start_s"], t["arrival_s"]);
    for w in phases.windows(2) {
        assert_eq!(w[0]["end_s"], w[1]["start_s"]);
    }
    let o = run(&[
        "explain",
        out.to_str().unwrap(),
        "--request",
        &id.to_string(),
    ]);
    assert!(
        stdout(&o).contains(&format!("request {id}:")),
        "{}",
        stdout(&o)
    );
}

#[test]
fn explain_on_a_sweep_folder_explains_its_operating_point_or_lists_the_points() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("qs.toml");
    std::fs::write(&scenario, small_quickstart(300)).unwrap();
    let grid = tmp.path().join("grid.toml");
    std::fs::write(
        &grid,
        "[axes]\n\"engine.policy\" = [\"vllm\", \"sarathi\"]\n",
    )
    .unwrap();
    let out = tmp.path().join("sweep");
    let o = run(&[
        "sweep",
        scenario.to_str().unwrap(),
        "--grid",
        grid.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The operating point's run, said on stderr.
    let o = run(&["explain", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let note = stderr(&o);
    assert!(
        note.contains("is a sweep's folder: explaining its operating point's run")
            && note.contains("operating-point")
            && note.contains("engine.policy = "),
        "{note}"
    );
    let direct = run(&["explain", out.join("operating-point").to_str().unwrap()]);
    assert_eq!(o.stdout, direct.stdout);
    // Without an operating point the error lists the points and how to run one.
    std::fs::remove_dir_all(out.join("operating-point")).unwrap();
    let o = run(&["explain", out.to_str().unwrap()]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("keeps the run of its operating point only")
            && e.contains("servesim simulate SCENARIO --out DIR")
            && e.contains(r#"  point 0: engine.policy = "vllm""#)
            && e.contains(r#"  point 1: engine.policy = "sarathi""#),
        "{e}"
    );
}

#[test]
fn explain_takes_rows_in_id_order_whatever_the_file_order() {
    // simulate lists rows as requests ended; the analysis (its sums and its
    // ties) must come out the same with the rows reversed.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    simulate(&repo().join("scenarios/quickstart.toml"), &out, &[]);
    let a = run(&["explain", out.to_str().unwrap(), "--json"]);
    assert!(a.status.success(), "{}", stderr(&a));
    let csv = out.join("requests.csv");
    let text = read(&csv);
    let mut lines: Vec<&str> = text.lines().collect();
    lines[1..].reverse();
    std::fs::write(&csv, lines.join("\n") + "\n").unwrap();
    let b = run(&["explain", out.to_str().unwrap(), "--json"]);
    assert!(b.status.success(), "{}", stderr(&b));
    assert!(a.stdout == b.stdout, "explain depends on the rows' order");
}

#[test]
fn explain_is_deterministic_and_errors_are_clear() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("s.toml");
    std::fs::write(&path, small_quickstart(300)).unwrap();
    let out = tmp.path().join("out");
    simulate(&path, &out, &[]);
    let a = run(&["explain", out.to_str().unwrap(), "--json"]);
    let b = run(&["explain", out.to_str().unwrap(), "--json"]);
    assert!(a.status.success());
    assert_eq!(a.stdout, b.stdout);

    let o = run(&["explain", tmp.path().to_str().unwrap()]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.starts_with("error: ") && e.contains("no requests.csv"),
        "{e}"
    );

    let o = run(&["explain", out.to_str().unwrap(), "--request", "999999"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("no request with id 999999"),
        "{}",
        stderr(&o)
    );

    // Attribution switched off: the same run less the attr_* columns (the
    // summary and time series unchanged), and explain says so plainly.
    let off_path = tmp.path().join("off.toml");
    let text = small_quickstart(300);
    let text = if text.contains("[metrics]") {
        text.replace("[metrics]", "[metrics]\nattribution = false")
    } else {
        text + "\n[metrics]\nattribution = false\n"
    };
    std::fs::write(&off_path, text).unwrap();
    let off = tmp.path().join("off");
    simulate(&off_path, &off, &[]);
    let with = read(&out.join("requests.csv"));
    let without = read(&off.join("requests.csv"));
    assert!(!without.contains("attr_"), "{}", &without[..200]);
    let cut: String = with
        .lines()
        .map(|l| l.split(',').take(15).collect::<Vec<_>>().join(",") + "\n")
        .collect();
    assert_eq!(without, cut, "the base columns do not change");
    assert_eq!(
        read(&out.join("timeseries.csv")),
        read(&off.join("timeseries.csv"))
    );
    // The summaries differ only in the run identity (the scenario and
    // requests.csv's size are not the same).
    let summary = |d: &std::path::Path| {
        let mut v: serde_json::Value =
            serde_json::from_str(&read(&d.join("summary.json"))).unwrap();
        v.as_object_mut().unwrap().remove("run");
        v
    };
    assert_eq!(summary(&out), summary(&off));
    let o = run(&["explain", off.to_str().unwrap()]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.starts_with("error: ") && e.contains("this folder has no latency attribution"),
        "{e}"
    );
    assert!(e.contains("[metrics] attribution = false"), "{e}");
}
