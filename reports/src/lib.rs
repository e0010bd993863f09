//! servesim's reports: charts (plotters; PNG and SVG, drawn with a bundled
//! font so they render on a machine without a desktop) and a report in two
//! forms — `report.html`, self-contained with every chart inlined as SVG (one
//! file a person can mail), and `report.md` linking the PNGs — built from the
//! result files in an output folder:
//!
//! * a run (`summary.json`, `requests.csv`, `timeseries.csv`);
//! * a sweep (`sweep.json`, and the rerun `operating-point/` run);
//! * a capacity search (`capacity.json`);
//! * a plan (`plan.json`).
//!
//! A run's report ends with a "why" section (`why_report`) built by the
//! tail analysis that `servesim explain` prints (`explain`).
//!
//! Reports read only those files, so they can be regenerated at any time
//! with `servesim report OUT_DIR`.

pub mod accuracy_report;
mod capacity_report;
pub mod chart;
mod data;
pub mod document;
pub mod explain;
mod font;
pub mod interactive;
mod plan_report;
mod run_report;
mod sweep_report;
mod tenant_report;
mod why_report;

use document::{Doc, Section};
use std::path::{Path, PathBuf};

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReportError(pub String);

/// What `write_report` produced.
#[derive(Clone, Debug)]
pub struct Report {
    pub html: PathBuf,
    pub markdown: PathBuf,
    /// Chart names; each is `charts/<name>.png` and `charts/<name>.svg`.
    pub charts: Vec<String>,
}

/// Folder name of a sweep's rerun operating point.
pub const OPERATING_POINT_DIR: &str = "operating-point";

/// Writes `report.html`, `report.md` and `charts/` into `dir`, from the
/// result files found there.
pub fn write_report(dir: &Path) -> Result<Report, ReportError> {
    let err = |m: String| ReportError(m);
    if !dir.is_dir() {
        return Err(err(format!(
            "{}: no such folder (give the --out folder of a simulate, sweep, capacity or plan run)",
            dir.display()
        )));
    }
    let found = ["sweep.json", "capacity.json", "plan.json", "summary.json"]
        .iter()
        .any(|f| dir.join(f).exists());
    if !found {
        return Err(err(format!(
            "{}: no summary.json, sweep.json, capacity.json or plan.json here: nothing to report (run simulate, sweep, capacity or plan first)",
            dir.display()
        )));
    }
    let charts = dir.join("charts");
    std::fs::create_dir_all(&charts)
        .map_err(|e| err(format!("cannot create {}: {e}", charts.display())))?;
    clear_charts(&charts).map_err(|e| err(format!("cannot clear {}: {e}", charts.display())))?;

    let mut sections: Vec<Section> = Vec::new();
    let mut title = None;
    if dir.join("sweep.json").exists() {
        let s = sweep_report::section(dir, &charts).map_err(err)?;
        title.get_or_insert_with(|| s.heading.clone());
        sections.push(s);
        let op = dir.join(OPERATING_POINT_DIR);
        if op.join("summary.json").exists() {
            sections.push(
                run_report::section(
                    &op,
                    "The operating point, run in full",
                    "operating-point-",
                    &charts,
                )
                .map_err(err)?,
            );
        }
    }
    if dir.join("capacity.json").exists() {
        let s = capacity_report::section(dir, &charts).map_err(err)?;
        title.get_or_insert_with(|| s.heading.clone());
        sections.push(s);
    }
    if dir.join("plan.json").exists() {
        let s = plan_report::section(dir, &charts).map_err(err)?;
        title.get_or_insert_with(|| s.heading.clone());
        sections.push(s);
    }
    if dir.join("summary.json").exists() {
        for name in ["requests.csv", "timeseries.csv"] {
            data::check_belongs(dir, name).map_err(err)?;
        }
        let summary = data::read_json(&dir.join("summary.json")).map_err(err)?;
        let heading = format!("Run: {}", data::text(&summary, "scenario"));
        title.get_or_insert_with(|| heading.clone());
        sections.push(run_report::section(dir, &heading, "", &charts).map_err(err)?);
        if let Some(why) = why_report::section(dir).map_err(err)? {
            sections.push(why);
        }
    }
    let title = title.expect("one of the result files was found above");
    let doc = Doc {
        title: format!("servesim report — {title}"),
        sections,
    };
    let html = dir.join("report.html");
    let markdown = dir.join("report.md");
    let write = |p: &Path, s: String| {
        std::fs::write(p, s).map_err(|e| err(format!("cannot write {}: {e}", p.display())))
    };
    write(&html, doc.html())?;
    write(&markdown, doc.markdown())?;
    Ok(Report {
        html,
        markdown,
        charts: doc
            .sections
            .iter()
            .flat_map(|s| s.figures().map(|f| f.name.clone()))
            .collect(),
    })
}

/// Removes the PNG and SVG files a previous report left in `charts/`, so
/// every chart there belongs to the report being written.
fn clear_charts(dir: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "png" || x == "svg") {
            std::fs::remove_file(p)?;
        }
    }
    Ok(())
}
