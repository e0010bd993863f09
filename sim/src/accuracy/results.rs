//! The result files of `accuracy` and `accuracy --coverage`, each written
//! whole through `output`'s atomic rename, the JSON last (a folder whose
//! JSON is present holds a complete result):
//!
//! * `points.csv`: one row per measured statistic — the point's settings,
//!   measured and predicted milliseconds and the signed error in percent;
//! * `groups.csv`: per group and metric, the count, median |error| and
//!   median signed error;
//! * `unexpressed.csv`: each point that could not be expressed or run,
//!   with its reason;
//! * `accuracy.json`: all of it;
//! * `coverage.csv` and `coverage.json` for `--coverage`.

use super::compare::{AccuracyResults, GroupError, PointOutcome};
use super::coverage::Coverage;
use super::Load;
use crate::output::write_bytes_atomic;
use std::io;
use std::path::Path;

fn csv_bytes(header: &[&str], rows: impl Iterator<Item = Vec<String>>) -> io::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(header)?;
    for r in rows {
        w.write_record(&r)?;
    }
    w.into_inner().map_err(|e| io::Error::other(e.to_string()))
}

fn opt(v: &Option<String>) -> String {
    v.clone().unwrap_or_default()
}

fn ms(v: f64) -> String {
    format!("{v:.3}")
}

fn pct(v: f64) -> String {
    format!("{:.2}", v * 100.0)
}

fn load_cells(l: Option<&Load>) -> (String, String) {
    match l {
        Some(Load::Concurrency { users }) => (users.to_string(), String::new()),
        Some(Load::Rate { rate, .. }) => (String::new(), format!("{rate}")),
        None => (String::new(), String::new()),
    }
}

fn group_rows(groups: &[GroupError]) -> impl Iterator<Item = Vec<String>> + '_ {
    groups.iter().map(|g| {
        let mut row = g.label_cells();
        row.extend([pct(g.median_abs_error), pct(g.median_error)]);
        row
    })
}

/// Writes `points.csv`, `groups.csv`, `unexpressed.csv`, then
/// `accuracy.json` into `dir` (created if missing).
pub fn write(dir: &Path, r: &AccuracyResults) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    match std::fs::remove_file(dir.join("accuracy.json")) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut points = Vec::new();
    let mut unexpressed = Vec::new();
    for p in &r.points {
        let m = &p.point;
        let (users, rate) = load_cells(m.load.as_ref());
        let settings = vec![
            p.index.to_string(),
            m.source.clone(),
            m.id.clone(),
            m.format.name().into(),
            p.group.engine.clone(),
            p.group.version.clone(),
            p.group.chip.clone(),
            p.group.model.clone(),
            p.group.precision.clone(),
            p.group.mode.clone(),
            users,
            rate,
            m.prompt
                .as_ref()
                .map(|l| format!("{:.0}", l.mean()))
                .unwrap_or_default(),
            m.output
                .as_ref()
                .map(|l| format!("{:.0}", l.mean()))
                .unwrap_or_default(),
        ];
        match &p.outcome {
            PointOutcome::Compared { comparisons, .. } => {
                for c in comparisons {
                    let mut row = settings.clone();
                    row.extend([
                        c.metric.name().to_string(),
                        c.stat.name().to_string(),
                        ms(c.measured_ms),
                        c.predicted_ms.map(ms).unwrap_or_default(),
                        c.error.map(pct).unwrap_or_default(),
                    ]);
                    points.push(row);
                }
            }
            PointOutcome::Unexpressible(u) => unexpressed.push(vec![
                p.index.to_string(),
                m.source.clone(),
                m.id.clone(),
                u.kind.name().into(),
                u.reason.clone(),
            ]),
            PointOutcome::Failed { reason } => unexpressed.push(vec![
                p.index.to_string(),
                m.source.clone(),
                m.id.clone(),
                "run-failed".into(),
                reason.clone(),
            ]),
        }
    }
    let head = [
        "point",
        "source",
        "id",
        "format",
        "engine",
        "version",
        "chip",
        "model",
        "precision",
        "mode",
        "concurrency",
        "rate",
        "prompt_tokens",
        "output_tokens",
        "metric",
        "stat",
        "measured_ms",
        "predicted_ms",
        "error_pct",
    ];
    write_bytes_atomic(
        &dir.join("points.csv"),
        &csv_bytes(&head, points.into_iter())?,
    )?;
    let ghead = [
        "engine",
        "version",
        "chip",
        "model",
        "precision",
        "mode",
        "band",
        "metric",
        "stat",
        "count",
        "median_abs_error_pct",
        "median_error_pct",
    ];
    write_bytes_atomic(
        &dir.join("groups.csv"),
        &csv_bytes(&ghead, group_rows(&r.groups))?,
    )?;
    write_bytes_atomic(
        &dir.join("unexpressed.csv"),
        &csv_bytes(
            &["point", "source", "id", "reason_kind", "reason"],
            unexpressed.into_iter(),
        )?,
    )?;
    let mut json = serde_json::to_string_pretty(r).map_err(io::Error::other)?;
    json.push('\n');
    write_bytes_atomic(&dir.join("accuracy.json"), json.as_bytes())
}

/// Writes `coverage.csv` (one row per point), then `coverage.json`.
pub fn write_coverage(dir: &Path, c: &Coverage) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    match std::fs::remove_file(dir.join("coverage.json")) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let rows = c.per_row.iter().map(|r| {
        vec![
            r.source.clone(),
            r.id.clone(),
            opt(&r.model),
            opt(&r.chip),
            opt(&r.precision),
            r.unexpressible.is_none().to_string(),
            r.unexpressible
                .as_ref()
                .map(|u| u.kind.name().to_string())
                .unwrap_or_default(),
            r.unexpressible
                .as_ref()
                .map(|u| u.group.clone())
                .unwrap_or_default(),
            r.unexpressible
                .as_ref()
                .map(|u| u.reason.clone())
                .unwrap_or_default(),
        ]
    });
    let head = [
        "source",
        "id",
        "model",
        "chip",
        "precision",
        "expressible",
        "reason_kind",
        "reason_group",
        "reason",
    ];
    write_bytes_atomic(&dir.join("coverage.csv"), &csv_bytes(&head, rows)?)?;
    let mut json = serde_json::to_string_pretty(c).map_err(io::Error::other)?;
    json.push('\n');
    write_bytes_atomic(&dir.join("coverage.json"), json.as_bytes())
}
