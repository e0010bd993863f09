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

fn attr(dom: &str, name: &str) -> Option<u64> {
    let at = dom.find(&format!("{name}=\""))? + name.len() + 2;
    dom[at..].split('"').next()?.parse().ok()
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
    assert!(
        !html.contains("http://") || !html.contains("<script src"),
        "no external scripts"
    );
    let md = read(&out.join("report.md"));
    assert!(md.contains("Hypotheses the data supports"), "{md}");

    if !Path::new(CHROMIUM).exists() {
        eprintln!("skipped: {CHROMIUM} not installed (apt-get install chromium) — the report was checked as text only");
        return;
    }
    let profile = tmp.path().join("profile");
    let o = chromium(&page, "", &profile, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let charts = attr(&dom, "data-charts").expect("the page's self-check ran");
    let figures = html.matches("<figure").count() as u64;
    assert_eq!(charts, figures, "every figure holds a chart");
    assert!(charts >= 6, "{charts}");
    assert_eq!(
        attr(&dom, "data-charts-broken"),
        Some(0),
        "a chart rendered empty"
    );
    assert_eq!(
        attr(&dom, "data-errors"),
        Some(0),
        "script errors: {:?}",
        dom.split("data-error-text=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
    );

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
