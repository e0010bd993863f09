//! The report's "why" section in a real browser: headless Chromium (Debian's
//! `chromium` package) loads `report.html` from disk, offline, and the page's
//! own self-check says how many charts it drew, how many came out empty, and
//! how many script errors it saw. Skips with a message when Chromium is not
//! installed. `SERVESIM_SCREENSHOT=path.png` also saves a screenshot (how
//! docs/images/report-why.png was made).

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

const CHROMIUM: &str = "/usr/bin/chromium";

/// Runs Chromium headless on `page` with `extra` flags, in a fresh profile.
fn chromium(page: &Path, fragment: &str, profile: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}{fragment}", page.display()))
        .output()
        .expect("chromium runs")
}

fn text_attr<'a>(dom: &'a str, name: &str) -> Option<&'a str> {
    let at = dom.find(&format!(" {name}=\""))? + name.len() + 3;
    dom[at..].split('"').next()
}

fn attr(dom: &str, name: &str) -> Option<u64> {
    text_attr(dom, name)?.parse().ok()
}

/// The page's self-check after its scripted hover, wheel and legend click:
/// a tooltip showed the mark's value with its unit, the wheel narrowed the
/// x axis (and a reset restored it), the click hid a series and a second
/// showed it again.
fn interactions_work(dom: &str) {
    let tip = text_attr(dom, "data-tooltip").expect("the self-check hovered a mark");
    assert!(!tip.is_empty(), "no tooltip appeared on hover");
    assert!(
        tip.contains(" ms") || tip.contains(" %") || tip.contains("/s") || tip.contains("GPU"),
        "the tooltip gives a value with its unit: {tip}"
    );
    assert_eq!(
        attr(dom, "data-zoom"),
        Some(1),
        "the wheel did not zoom the x axis"
    );
    assert_eq!(
        attr(dom, "data-legend"),
        Some(1),
        "a legend click did not toggle its series"
    );
}

/// Loads `page` headless and returns the DOM after the page's scripts ran;
/// `None` (with a message) when Chromium is not installed.
fn loaded_dom(page: &Path, profile: &Path) -> Option<String> {
    if !Path::new(CHROMIUM).exists() {
        eprintln!("skipped: {CHROMIUM} not installed (apt-get install chromium) — the report was checked as text only");
        return None;
    }
    let o = chromium(page, "", profile, &["--dump-dom"]);
    assert!(
        o.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// One file, offline: no external script, style, image or font.
fn assert_self_contained(html: &str) {
    for external in [
        "<script src",
        "<link",
        "src=\"http",
        "href=\"http",
        "@import",
        "url(http",
        "url('http",
    ] {
        assert!(
            !html.contains(external),
            "report.html refers outside itself: {external}"
        );
    }
}

/// The page's self-check after load: every figure of `html` holds a chart,
/// none rendered empty, and no script failed.
fn assert_renders(dom: &str, html: &str) {
    let figures = html.matches("<figure").count() as u64;
    assert_eq!(
        attr(dom, "data-charts"),
        Some(figures),
        "every figure holds a chart"
    );
    assert_eq!(
        attr(dom, "data-charts-broken"),
        Some(0),
        "a chart rendered empty"
    );
    assert_eq!(
        attr(dom, "data-errors"),
        Some(0),
        "script errors: {:?}",
        text_attr(dom, "data-error-text")
    );
}

#[test]
fn sweep_report_is_interactive_offline_in_headless_chromium() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("qs.toml");
    std::fs::write(&scenario, small_quickstart(400)).unwrap();
    let grid = tmp.path().join("g.toml");
    std::fs::write(
        &grid,
        "[axes]\n\"fleet.replicas\" = [1, 2, 4]\n\"engine.max_batched_tokens\" = [2048, 8192]\n",
    )
    .unwrap();
    let out = tmp.path().join("out");
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
    let page = out.join("report.html");
    let html = read(&page);
    assert_self_contained(&html);
    assert!(
        html.contains("id=\"ichart-pareto\""),
        "the Pareto chart is interactive"
    );
    // Every sweep point's settings are in its mark's tooltip.
    for n in [1, 2, 4] {
        assert!(
            html.contains(&format!(
                "fleet.replicas = {n}, engine.max_batched_tokens = 2048; SLO met by"
            )),
            "no tooltip with the settings of fleet.replicas = {n}"
        );
    }
    assert!(
        html.contains("class=\"legend\""),
        "legend entries toggle series"
    );
    // The PNG/SVG exports stay for documents.
    assert!(out.join("charts/pareto.png").exists() && out.join("charts/pareto.svg").exists());

    let Some(dom) = loaded_dom(&page, &tmp.path().join("profile")) else {
        return;
    };
    assert_renders(&dom, &html);
    interactions_work(&dom);
}

#[test]
fn report_why_section_renders_in_headless_chromium() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("overload");
    simulate(&repo().join("scenarios/overload.toml"), &out, &["--report"]);
    let page = out.join("report.html");
    let html = read(&page);
    for want in [
        "Why: where the latency went",
        "id=\"why-bands-ttft\"",
        "id=\"why-tail-ttft\"",
        "class=\"sortable\"",
        "data-tip=",
    ] {
        assert!(html.contains(want), "report.html lacks {want}");
    }
    assert_self_contained(&html);
    let md = read(&out.join("report.md"));
    assert!(md.contains("Hypotheses the data supports"), "{md}");

    let Some(dom) = loaded_dom(&page, &tmp.path().join("profile")) else {
        return;
    };
    assert_renders(&dom, &html);
    assert!(
        html.matches("<figure").count() >= 6,
        "the why section's charts"
    );
    interactions_work(&dom);

    let shot = std::env::var("SERVESIM_SCREENSHOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| tmp.path().join("report.png"));
    let profile = tmp.path().join("profile-2");
    let shot_arg = format!("--screenshot={}", shot.display());
    let o = chromium(
        &page,
        "#why-only",
        &profile,
        &[&shot_arg, "--window-size=1100,1500", "--hide-scrollbars"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
}

/// A plan's page: its cost chart renders, a bar's tooltip names the
/// option's settings, and the page has no script errors.
#[test]
fn plan_report_renders_and_its_bars_name_their_options_in_headless_chromium() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("qs.toml");
    std::fs::write(&scenario, small_quickstart(300)).unwrap();
    let space = tmp.path().join("space.toml");
    std::fs::write(
        &space,
        "[objective]\ngpu_hour_usd = { \"h100-sxm\" = 2.49, \"h200\" = 3.49 }\n[axes]\n\"hardware.preset\" = [\"h100-sxm\", \"h200\"]\n",
    )
    .unwrap();
    let out = tmp.path().join("plan");
    let o = run(&[
        "plan",
        scenario.to_str().unwrap(),
        "--space",
        space.to_str().unwrap(),
        "--demand",
        "10",
        "--tolerance",
        "0.05",
        "--out",
        out.to_str().unwrap(),
        "--report",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = out.join("report.html");
    let html = read(&page);
    assert!(
        html.contains("id=\"ichart-plan-options\""),
        "the cost chart is interactive"
    );
    // The throughput–interactivity frontier of the cheapest options, both
    // charts, rendered like every other figure below.
    for id in ["ichart-frontier-interactivity", "ichart-frontier-ttft"] {
        assert!(html.contains(&format!("id=\"{id}\"")), "{id}");
    }
    assert_self_contained(&html);
    let Some(dom) = loaded_dom(&page, &tmp.path().join("profile")) else {
        return;
    };
    assert_renders(&dom, &html);
    let tip = text_attr(&dom, "data-tooltip").expect("the self-check hovered a bar");
    assert!(
        tip.starts_with("#1: ") && tip.contains("hardware.preset") && tip.contains("USD"),
        "the tooltip names the option, its cost and unit: {tip}"
    );
}
