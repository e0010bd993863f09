//! `accuracy.html`: the page `servesim accuracy` writes beside its CSV and
//! JSON — overall and per-group median errors, one predicted-against-
//! measured scatter plot per metric (log-log, with the diagonal and ±25 %
//! bands; hovering a point shows its settings through the SVG `<title>`),
//! and the points that could not be expressed, grouped by reason.
//! Self-contained: styles and SVG inline, no script needed for the plots.

use crate::document::{Doc, Section};
use crate::ReportError;
use sim::accuracy::compare::{AccuracyResults, GroupError, PointOutcome, PointResult};
use sim::accuracy::{Load, Metric, Stat};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn pct(v: f64) -> String {
    format!("{:+.1}%", v * 100.0)
}

fn abs_pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// What hovering a point shows.
fn describe(p: &PointResult, stat: Stat, measured: f64, predicted: f64) -> String {
    let m = &p.point;
    let load = match &m.load {
        Some(Load::Concurrency { users }) => format!("concurrency {users}"),
        Some(Load::Rate { rate, .. }) => format!("{rate} req/s"),
        None => "the scenario's load".into(),
    };
    let lengths = match (&m.prompt, &m.output) {
        (Some(i), Some(o)) => format!(", {:.0} → {:.0} tokens", i.mean(), o.mean()),
        _ => String::new(),
    };
    let g = &p.group;
    format!(
        "{}\n{} {} · {} · {} · {} · {}\n{load}{lengths}\n{}: measured {measured:.2} ms, predicted {predicted:.2} ms ({})",
        m.id,
        g.engine,
        g.version,
        g.chip,
        g.model,
        g.precision,
        g.mode,
        stat.name(),
        pct((predicted - measured) / measured)
    )
}

/// One scatter plot of `metric` (its mean, else its median, per point).
fn scatter(points: &[PointResult], metric: Metric, engines: &[String]) -> Option<String> {
    let mut dots: Vec<(f64, f64, String, usize)> = Vec::new();
    for p in points {
        let PointOutcome::Compared { comparisons, .. } = &p.outcome else {
            continue;
        };
        let c = [Stat::Mean, Stat::P50].into_iter().find_map(|s| {
            comparisons
                .iter()
                .find(|c| c.metric == metric && c.stat == s && c.predicted_ms.is_some())
        });
        let Some(c) = c else { continue };
        let pred = c.predicted_ms.expect("filtered");
        if c.measured_ms <= 0.0 || pred <= 0.0 {
            continue;
        }
        let colour = engines
            .iter()
            .position(|e| *e == p.group.engine)
            .unwrap_or(0);
        dots.push((
            c.measured_ms,
            pred,
            describe(p, c.stat, c.measured_ms, pred),
            colour,
        ));
    }
    if dots.is_empty() {
        return None;
    }
    let lo = dots
        .iter()
        .map(|d| d.0.min(d.1))
        .fold(f64::INFINITY, f64::min);
    let hi = dots.iter().map(|d| d.0.max(d.1)).fold(0.0, f64::max);
    let (l0, l1) = ((lo.log10() - 0.1).floor(), (hi.log10() + 0.1).ceil());
    let (w, h, m) = (480.0, 420.0, 56.0);
    let x = |v: f64| m + (v.log10() - l0) / (l1 - l0) * (w - 1.5 * m);
    let y = |v: f64| h - m - (v.log10() - l0) / (l1 - l0) * (h - 1.5 * m);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">"
    );
    let _ = write!(
        s,
        "<rect x=\"{m}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>",
        m / 2.0,
        w - 1.5 * m,
        h - 1.5 * m
    );
    let mut d = l0;
    while d <= l1 + 1e-9 {
        let v = 10f64.powf(d);
        let label = if v >= 1.0 {
            format!("{v:.0}")
        } else {
            format!("{v}")
        };
        let _ = write!(
            s,
            "<line x1=\"{0:.1}\" y1=\"{1:.1}\" x2=\"{0:.1}\" y2=\"{2:.1}\" stroke=\"#eee\"/><text x=\"{0:.1}\" y=\"{3:.1}\" text-anchor=\"middle\">{label}</text>",
            x(v),
            m / 2.0,
            h - m,
            h - m + 14.0
        );
        let _ = write!(
            s,
            "<line x1=\"{1:.1}\" y1=\"{0:.1}\" x2=\"{2:.1}\" y2=\"{0:.1}\" stroke=\"#eee\"/><text x=\"{3:.1}\" y=\"{4:.1}\" text-anchor=\"end\">{label}</text>",
            y(v),
            m,
            w - m / 2.0,
            m - 4.0,
            y(v) + 4.0
        );
        d += 1.0;
    }
    let (a, b) = (10f64.powf(l0), 10f64.powf(l1));
    for (k, dash) in [
        (1.0, ""),
        (1.25, " stroke-dasharray=\"4 3\""),
        (0.8, " stroke-dasharray=\"4 3\""),
    ] {
        // y = k·x, clipped to the plot's square.
        let (x0, x1) = (a.max(a / k), b.min(b / k));
        let _ = write!(
            s,
            "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#888\"{dash}/>",
            x(x0),
            y(x0 * k),
            x(x1),
            y(x1 * k)
        );
    }
    for (mx, py, title, colour) in &dots {
        let _ = write!(
            s,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{}\" fill-opacity=\"0.65\"><title>{}</title></circle>",
            x(*mx),
            y(*py),
            PALETTE[colour % PALETTE.len()],
            esc(title)
        );
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">measured {} (ms)</text>",
        m + (w - 1.5 * m) / 2.0,
        h - 12.0,
        metric.name().to_uppercase()
    );
    let _ = write!(
        s,
        "<text transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\">predicted (ms)</text>",
        m / 2.0 + (h - 1.5 * m) / 2.0
    );
    for (i, e) in engines.iter().enumerate() {
        let _ = write!(
            s,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            m + 10.0,
            m / 2.0 + 12.0 + 14.0 * i as f64,
            PALETTE[i % PALETTE.len()],
            m + 18.0,
            m / 2.0 + 16.0 + 14.0 * i as f64,
            esc(e)
        );
    }
    s.push_str("</svg>");
    Some(format!(
        "<figure>{s}<figcaption>{} predicted against measured, {} point(s); solid: equal, dashed: ±25 %. Hover a point for its settings.</figcaption></figure>",
        metric.name().to_uppercase(),
        dots.len()
    ))
}

fn group_rows(groups: &[GroupError]) -> Vec<Vec<String>> {
    groups
        .iter()
        .map(|g| {
            let mut row = g.label_cells();
            row.extend([abs_pct(g.median_abs_error), pct(g.median_error)]);
            row
        })
        .collect()
}

/// The page as a document.
pub fn document(r: &AccuracyResults) -> Doc {
    let mut intro = Section::new("What was compared");
    let compared = r
        .points
        .iter()
        .filter(|p| matches!(p.outcome, PointOutcome::Compared { .. }))
        .count();
    intro.para(format!(
        "{} measured point(s) from {}; {compared} simulated and compared, {} not expressible or failed. Errors are (predicted − measured) / measured; negative means servesim predicts faster than measured.",
        r.points.len(),
        r.inputs.join(", "),
        r.points.len() - compared
    ));
    if let Some(s) = &r.scenario {
        intro.para(format!("Base scenario: {s}."));
    }
    intro.table(
        &["metric", "stat", "count", "median |error|", "median error"],
        r.overall
            .iter()
            .map(|g| {
                vec![
                    g.metric.name().into(),
                    g.stat.name().into(),
                    g.count.to_string(),
                    abs_pct(g.median_abs_error),
                    pct(g.median_error),
                ]
            })
            .collect(),
    );
    let mut plots = Section::new("Predicted against measured");
    let mut engines: Vec<String> = r.points.iter().map(|p| p.group.engine.clone()).collect();
    engines.sort();
    engines.dedup();
    for metric in Metric::ALL {
        if let Some(svg) = scatter(&r.points, metric, &engines) {
            plots.html(
                svg,
                format!("(the {} scatter plot is in accuracy.html)", metric.name()),
            );
        }
    }
    let mut groups = Section::new("By group");
    groups.table(
        &[
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
            "median |error|",
            "median error",
        ],
        group_rows(&r.groups),
    );
    let mut missing = Section::new("Not expressed");
    let mut reasons: BTreeMap<(String, String), usize> = BTreeMap::new();
    for p in &r.points {
        match &p.outcome {
            PointOutcome::Unexpressible(u) => {
                *reasons
                    .entry((u.kind.name().into(), u.group.clone()))
                    .or_default() += 1
            }
            PointOutcome::Failed { reason } => {
                *reasons
                    .entry(("run-failed".into(), reason.clone()))
                    .or_default() += 1
            }
            PointOutcome::Compared { .. } => {}
        }
    }
    let mut rows: Vec<(usize, String, String)> =
        reasons.into_iter().map(|((k, g), n)| (n, k, g)).collect();
    rows.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    if rows.is_empty() {
        missing.para("Every point was expressed and simulated.");
    } else {
        missing.para("Each point's own reason is in unexpressed.csv.");
        missing.table(
            &["points", "kind", "reason"],
            rows.into_iter()
                .map(|(n, k, g)| vec![n.to_string(), k, g])
                .collect(),
        );
    }
    Doc {
        title: "servesim accuracy against measured benchmarks".into(),
        sections: vec![intro, plots, groups, missing],
    }
}

/// Writes `accuracy.html` into `dir` (atomically) and returns its path.
pub fn write(dir: &Path, r: &AccuracyResults) -> Result<PathBuf, ReportError> {
    let path = dir.join("accuracy.html");
    sim::output::write_bytes_atomic(&path, document(r).html().as_bytes())
        .map_err(|e| ReportError(format!("{}: {e}", path.display())))?;
    Ok(path)
}
