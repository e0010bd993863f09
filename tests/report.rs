//! Reports: the files exist, every chart is a valid PNG (right size) and
//! SVG, `report.html` is one self-contained page that shows every chart, and
//! `report.md` links every PNG — for a run, a sweep and a capacity search.

mod common;
use common::*;
use std::path::Path;

/// Checks the report in `dir` and returns its chart names.
fn check_report(dir: &Path) -> Vec<String> {
    let html = read(&dir.join("report.html"));
    let md = read(&dir.join("report.md"));
    assert!(html.starts_with("<!DOCTYPE html>"), "{}", &html[..80]);
    assert!(html.trim_end().ends_with("</html>"));
    // Self-contained: nothing loaded from elsewhere.
    // (Inline scripts are part of the page: the why section's hover and sort.)
    for external in ["<script src", "<link", "src=\"http", "<img"] {
        assert!(!html.contains(external), "report.html contains {external}");
    }
    let mut names: Vec<String> = std::fs::read_dir(dir.join("charts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "png"))
        .map(|p| p.file_stem().unwrap().to_str().unwrap().to_string())
        .collect();
    names.sort();
    assert!(!names.is_empty());
    for n in &names {
        let png = std::fs::read(dir.join(format!("charts/{n}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{n}.png signature");
        assert_eq!(&png[12..16], b"IHDR");
        let w = u32::from_be_bytes(png[16..20].try_into().unwrap());
        let h = u32::from_be_bytes(png[20..24].try_into().unwrap());
        assert_eq!((w, h), (960, 540), "{n}.png size");
        assert_eq!(
            png_chunks(&png),
            Some(true),
            "{n}.png chunks are whole and end with IEND"
        );
        let svg = read(&dir.join(format!("charts/{n}.svg")));
        assert!(
            svg.starts_with("<svg") && svg.contains("xmlns=\"http://www.w3.org/2000/svg\""),
            "{n}.svg"
        );
        assert!(svg.trim_end().ends_with("</svg>"), "{n}.svg is complete");
        assert_eq!(
            svg.matches("<text").count(),
            svg.matches("</text>").count(),
            "{n}.svg"
        );
        assert!(
            svg.contains("font-family=\"sans-serif\""),
            "{n}.svg has text"
        );
        // The page shows the chart inline and names its files.
        assert!(
            html.contains(&format!("<figure id=\"chart-{n}\">\n<svg")),
            "HTML lacks {n}"
        );
        assert!(html.contains(&format!("charts/{n}.png")));
        assert!(
            md.contains(&format!("(charts/{n}.png)")),
            "Markdown lacks {n}"
        );
    }
    assert_eq!(
        html.matches("<figure id=\"chart-").count(),
        names.len(),
        "one figure per chart (the why section's inline SVGs have no files)"
    );
    names
}

/// Walks the PNG chunk list (length, type, data, CRC): `Some(true)` when
/// the chunks tile the file exactly, image data is present and the last
/// chunk is IEND.
fn png_chunks(png: &[u8]) -> Option<bool> {
    let mut at = 8;
    let mut idat = false;
    loop {
        let len = u32::from_be_bytes(png.get(at..at + 4)?.try_into().ok()?) as usize;
        let kind = png.get(at + 4..at + 8)?;
        idat |= kind == b"IDAT";
        at += 12 + len;
        if kind == b"IEND" {
            return Some(idat && at == png.len());
        }
    }
}

fn has_all(names: &[String], want: &[&str]) {
    for w in want {
        assert!(
            names.iter().any(|n| n == w),
            "chart {w} missing from {names:?}"
        );
    }
}

#[test]
fn simulate_report_has_cdfs_time_series_and_bars() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("qs.toml");
    std::fs::write(&scenario, small_quickstart(300)).unwrap();
    let out = tmp.path().join("run");
    let o = simulate(&scenario, &out, &["--report"]);
    assert!(stderr(&o).contains("report.html"));
    let names = check_report(&out);
    has_all(
        &names,
        &[
            "ttft-cdf",
            "tpot-cdf",
            "e2e-cdf",
            "queue-depth",
            "running-batch",
            "kv-use",
            "requests-by-replica",
        ],
    );
    // Everything completed: no outcome bars to show; no autoscaler columns.
    assert!(
        !names.iter().any(|n| n == "outcomes" || n == "replicas"),
        "{names:?}"
    );
    let html = read(&out.join("report.html"));
    assert!(html.contains("roofline"), "says where costs came from");
    // `report` regenerates the same page from the files alone.
    let before = html;
    let o = run(&["report", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read(&out.join("report.html")), before);
}

#[test]
fn overloaded_run_shows_outcomes_and_autoscaler_columns_are_charted() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("ov.toml");
    let text = read(&repo().join("scenarios/overload.toml"))
        .replace("duration_s = 300", "duration_s = 40");
    std::fs::write(&scenario, text).unwrap();
    let out = tmp.path().join("run");
    simulate(&scenario, &out, &[]);
    // An autoscaler's columns, when a run has them, get their chart.
    let ts = read(&out.join("timeseries.csv"));
    let mut lines = ts.lines();
    let mut with = format!(
        "{},replicas_requested,replicas_ready\n",
        lines.next().unwrap()
    );
    for (i, l) in lines.enumerate() {
        with.push_str(&format!("{l},{},{}\n", 2 + i % 2, 2));
    }
    std::fs::write(out.join("timeseries.csv"), with).unwrap();
    // The edited file is no longer the run's: without the summary's run
    // identity (as in a folder of an older servesim) it is read as given.
    let mut summary: serde_json::Value =
        serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    summary.as_object_mut().unwrap().remove("run");
    std::fs::write(
        out.join("summary.json"),
        serde_json::to_string_pretty(&summary).unwrap(),
    )
    .unwrap();
    let o = run(&["report", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let names = check_report(&out);
    has_all(&names, &["outcomes", "replicas", "queue-depth"]);
}

#[test]
fn sweep_and_capacity_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("qs.toml");
    std::fs::write(&scenario, small_quickstart(200)).unwrap();
    let grid = tmp.path().join("g.toml");
    std::fs::write(
        &grid,
        "[objective]\ngpu_hour_usd = 3.0\n[axes]\n\"fleet.replicas\" = [2, 4]\n\"workload.rate\" = [40.0, 90.0]\n",
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
        "--report",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("$/hour at $3.00/GPU-hour"),
        "{}",
        stdout(&o)
    );
    let names = check_report(&out);
    has_all(
        &names,
        &[
            "pareto",
            "ttft-vs-load",
            "tpot-vs-load",
            "operating-point-ttft-cdf",
            "operating-point-kv-use",
        ],
    );
    let html = read(&out.join("report.html"));
    assert!(
        html.contains("Operating point: point"),
        "names the operating point"
    );

    let cap = tmp.path().join("cap");
    let o = run(&[
        "capacity",
        scenario.to_str().unwrap(),
        "--demand",
        "60",
        "--tolerance",
        "0.1",
        "--out",
        cap.to_str().unwrap(),
        "--report",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let names = check_report(&cap);
    has_all(
        &names,
        &["capacity-rate", "capacity-latency", "capacity-replicas"],
    );
    assert!(read(&cap.join("report.md")).contains("no price stated"));
}

#[test]
fn report_of_an_empty_folder_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let o = run(&["report", tmp.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("nothing to report"), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1);
}

#[test]
fn multi_tenant_runs_get_per_tenant_slo_bars() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    simulate(
        &repo().join("scenarios/servegen-tenants.toml"),
        &out,
        &["--report"],
    );
    let header = read(&out.join("requests.csv"))
        .lines()
        .next()
        .unwrap()
        .to_string();
    assert!(header.contains(",tenant,session,"), "{header}");
    for ext in ["png", "svg"] {
        assert!(out.join(format!("charts/tenants.{ext}")).exists());
    }
    let html = read(&out.join("report.html"));
    assert!(html.contains("SLO attainment per tenant"));
    // A single-tenant run draws no tenant chart.
    let single = tmp.path().join("single");
    simulate(
        &repo().join("scenarios/quickstart.toml"),
        &single,
        &["--report"],
    );
    assert!(!single.join("charts/tenants.png").exists());
}

#[test]
fn a_run_with_tenants_gets_per_tenant_charts_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("nn");
    simulate(
        &repo().join("scenarios/noisy-neighbor.toml"),
        &out,
        &["--report"],
    );
    let names = check_report(&out);
    has_all(
        &names,
        &[
            "tenants-slo",
            "tenants-ttft-p99",
            "tenants-throughput",
            "tenants-rejected",
        ],
    );
    // Configured tenants replace the trace-column bars.
    assert!(!names.iter().any(|n| n == "tenants"), "{names:?}");
    let svg = read(&out.join("charts/tenants-ttft-p99.svg"));
    assert!(svg.contains("interactive") && svg.contains("batch"));
}
