//! The report of a sweep (`sweep.json`): the objective, the Pareto front of
//! cost against latency with the chosen operating point, and latency against
//! offered load per replica for each combination of the other axes; and
//! the throughput–interactivity frontier (`sim::sweep::frontier`).

use crate::chart::{
    self, Chart, Highlight, Legend, Mark, RefLine, Series, XyPlot, GREY, PALETTE, TARGET,
};
use crate::data::num;
use crate::document::Section;
use sim::config::keypath;
use sim::sweep::frontier::{frontier, Frontier, FrontierPoint};
use sim::sweep::objective::{analyze, Analysis, Objective};
use sim::sweep::results::{cell, PointResult};
use sim::sweep::{Grid, SweepResults};
use std::path::Path;

fn pct(v: Option<f64>) -> String {
    v.map(|a| format!("{:.2} %", a * 100.0))
        .unwrap_or_else(|| "–".into())
}

fn fmt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "–".into())
}

/// Builds the sweep section from `dir/sweep.json`.
pub fn section(dir: &Path, charts: &Path) -> Result<Section, String> {
    let path = dir.join("sweep.json");
    let r = SweepResults::read(&path).map_err(|e| e.to_string())?;
    let grid = Grid::from_toml_str(&r.grid_toml, &format!("{} (grid)", path.display()))
        .map_err(|e| e.to_string())?;
    let obj = grid.objective.resolve();
    let a = analyze(&r, &obj);

    let mut sec = Section::new(format!("Sweep: {}", r.scenario));
    sec.para(format!(
        "{} points of scenario {} ({} sampling) over {}.",
        r.points.len(),
        r.scenario,
        r.sample.name(),
        r.axes.join(", ")
    ));
    if let Some(s) = r.shard {
        sec.para(format!(
            "This folder holds shard {s} only ({} of {} points); merge every shard with `servesim sweep merge` for the whole sweep.",
            r.points.len(),
            r.points_total
        ));
    }
    sec.para(objective_text(&obj, &a));
    let mut header: Vec<&str> = vec!["point"];
    header.extend(r.axes.iter().map(String::as_str));
    let cost_head = obj.cost_label();
    let lat_head = obj.latency_label();
    header.extend([
        cost_head.as_str(),
        lat_head.as_str(),
        "SLO met",
        "goodput / GPU (req/s)",
    ]);
    let rows = a
        .pareto_front
        .iter()
        .map(|&i| {
            let (p, e) = (&r.points[position(&r, i)], &a.points[position(&r, i)]);
            let mut row = vec![format!("{i}{}", if a.best == Some(i) { " ★" } else { "" })];
            row.extend(p.values.iter().map(cell));
            row.extend([
                fmt(e.cost, obj.cost_digits()),
                fmt(e.latency_ms, 1),
                pct(e.attainment),
                e.goodput_rps_per_gpu
                    .map_or_else(|| "–".into(), sim::sig_figs::rate),
            ]);
            row
        })
        .collect();
    sec.para(format!(
        "The Pareto front: the {} point(s) no other point beats on both cost and {}.",
        a.pareto_front.len(),
        lat_head
    ));
    sec.table(&header, rows);
    sec.para(best_text(&r, &obj, &a));
    sec.figure(chart::render(&pareto_chart(&r, &obj, &a), charts)?);
    for (metric, label, slo) in [
        ("ttft_ms", "TTFT", a.slo_ttft_ms),
        ("tpot_ms", "TPOT", a.slo_tpot_ms),
    ] {
        if let Some(c) = load_chart(&r, metric, label, slo) {
            sec.figure(chart::render(&c, charts)?);
        }
    }
    let f = frontier(&r, obj.gpu_hour_usd.as_ref());
    if !f.points.is_empty() {
        sec.para(frontier_text(&f));
        for c in frontier_charts(&f) {
            sec.figure(chart::render(&c, charts)?);
        }
    }
    Ok(sec)
}

/// What the frontier charts show, in words.
pub(crate) fn frontier_text(f: &Frontier) -> String {
    let on = |pick: fn(&FrontierPoint) -> bool| f.points.iter().filter(|p| pick(p)).count();
    let cost = match f.usd_per_gpu_hour {
        Some(p) => format!(
            " The right-hand scale is the cost per million output tokens at ${p:.2} per GPU-hour."
        ),
        None if f.points.iter().any(|p| p.usd_per_m.is_some()) => {
            " Prices differ by hardware, so the cost per million output tokens is in each point's details and frontier.csv, not on a scale.".into()
        }
        None => String::new(),
    };
    format!(
        "Throughput against interactivity, as InferenceX draws it: output tokens per second per GPU against tokens per second per user (1000 / median TPOT) and against median TTFT, one curve per configuration{}. The frontier joins the points no other point beats on both ({} and {} of {} points); hover a point for its settings. The same figures are in frontier.csv.{cost}",
        f.load_axis
            .as_ref()
            .map(|a| format!(" over {a}"))
            .unwrap_or_default(),
        on(|p| p.on_interactivity_front),
        on(|p| p.on_ttft_front),
        f.points.len()
    )
}

/// Per-GPU throughput against per-user rate and against median TTFT.
pub(crate) fn frontier_charts(f: &Frontier) -> Vec<Chart> {
    type Axis = (
        &'static str,
        &'static str,
        fn(&FrontierPoint) -> Option<f64>,
        fn(&FrontierPoint) -> bool,
    );
    let axes: [Axis; 2] = [
        (
            "frontier-interactivity",
            "interactivity (tokens/s per user)",
            |p| p.per_user,
            |p| p.on_interactivity_front,
        ),
        (
            "frontier-ttft",
            "TTFT p50 (ms)",
            |p| p.ttft_ms_p50,
            |p| p.on_ttft_front,
        ),
    ];
    let mut out = Vec::new();
    for (name, x_label, x_of, on_front) in axes {
        let tip = |p: &FrontierPoint| {
            let mut t = format!(
                "point {}: {}; TTFT p50 {} ms, p99 {} ms",
                p.index,
                p.settings,
                fmt(p.ttft_ms_p50, 1),
                fmt(p.ttft_ms_p99, 1)
            );
            if let Some(c) = p.usd_per_m {
                t.push_str(&format!("; ${c:.3} per 1M output tokens"));
            }
            t
        };
        let x_log = chart::wants_log(f.points.iter().filter_map(x_of));
        let mut c = XyPlot::new(
            name,
            // The section names the scenario; the title names the curves'
            // keys (their last part: the legend gives the values).
            format!(
                "Throughput per GPU vs {}{}",
                if name == "frontier-ttft" {
                    "TTFT"
                } else {
                    "interactivity"
                },
                if f.curve_axes.is_empty() {
                    String::new()
                } else if f.curve_axes.len() > 3 {
                    // Past three keys the title would not fit: the legend
                    // and each point's details name the settings.
                    " — a curve per configuration".to_string()
                } else {
                    let keys: Vec<&str> = f
                        .curve_axes
                        .iter()
                        .map(|k| k.rsplit('.').next().unwrap_or(k))
                        .collect();
                    format!(" — curves by {}", keys.join(", "))
                }
            ),
            if x_log {
                format!("{x_label}, log scale")
            } else {
                x_label.to_string()
            },
            "output tokens/s per GPU",
        );
        c.x_log = x_log;
        c.y2 = f.usd_per_gpu_hour.map(|p| chart::ReciprocalScale {
            label: "$ per 1M output tokens".into(),
            // $/h over (tokens/s × 3600 / 1e6) M tokens/h.
            numerator: p * 1e6 / 3600.0,
            prefix: "$".into(),
        });
        c.legend = if name == "frontier-ttft" {
            Legend::LowerRight
        } else {
            Legend::UpperRight
        };
        let mut front: Vec<(f64, f64, String)> = f
            .points
            .iter()
            .filter(|p| on_front(p))
            .filter_map(|p| Some((x_of(p)?, p.per_gpu, tip(p))))
            .collect();
        front.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let (pts, tips): (Vec<(f64, f64)>, Vec<String>) =
            front.into_iter().map(|(x, y, t)| ((x, y), t)).unzip();
        let mut s = Series::new("Pareto frontier", pts, Mark::Line, GREY);
        s.width = 5;
        s.tips = tips;
        c.series.push(s);
        for (k, conf) in f.configurations.iter().enumerate() {
            let curve = f
                .points
                .iter()
                .find(|p| &p.configuration == conf)
                .map(|p| p.curve.clone())
                .unwrap_or_default();
            let mut pts: Vec<(f64, f64, String)> = f
                .points
                .iter()
                .filter(|p| &p.configuration == conf)
                .filter_map(|p| Some((x_of(p)?, p.per_gpu, tip(p))))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
            // Past seven curves the legend stops helping: the rest are grey.
            let (label, color) = if k < 7 {
                (curve, PALETTE[k])
            } else {
                (String::new(), GREY)
            };
            let (xy, tips): (Vec<(f64, f64)>, Vec<String>) =
                pts.into_iter().map(|(x, y, t)| ((x, y), t)).unzip();
            let mut s = Series::new(label, xy, Mark::LinePoints, color);
            s.tips = tips;
            c.series.push(s);
        }
        out.push(Chart::Xy(c));
    }
    out
}

/// Points are stored in index order, but a shard holds a subset.
fn position(r: &SweepResults, index: usize) -> usize {
    r.points
        .iter()
        .position(|p| p.index == index)
        .expect("analysis indices come from the points")
}

fn describe(r: &SweepResults, p: &PointResult) -> String {
    r.axes
        .iter()
        .zip(&p.values)
        .map(|(k, v)| format!("{k} = {}", cell(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The objective in words: what cost and latency mean, and what "meets the
/// SLOs" means — including that no price is assumed.
pub fn objective_text(obj: &Objective, a: &Analysis) -> String {
    let price = match &obj.gpu_hour_usd {
        Some(p) => format!(
            "Price: {} per GPU-hour, as stated in the grid.",
            p.describe()
        ),
        None => "No price per GPU-hour was stated, so cost is counted in GPUs.".into(),
    };
    let thresholds = [a.slo_ttft_ms, a.slo_tpot_ms, a.slo_e2e_ms];
    let targets = sim::report::describe_slo([None; 3], &a.slo_percentiles_ms, " and ");
    let judged = if thresholds.iter().any(Option::is_some) {
        format!(
            "at least {:.1} % of its requests have {} (a rejection counts as a miss)",
            obj.attainment * 100.0,
            sim::report::describe_slo(thresholds, &Default::default(), " and ")
        )
    } else {
        format!(
            "at least {:.1} % of its requests complete",
            obj.attainment * 100.0
        )
    };
    let slo = if thresholds.iter().all(Option::is_none) && targets.is_empty() {
        "The scenario has no [slo], so no operating point is chosen.".to_string()
    } else {
        let also = if targets.is_empty() {
            String::new()
        } else {
            format!(" and its run has {targets}")
        };
        format!("A point meets the SLOs when {judged}{also}; the operating point is the one meeting them with the most goodput per GPU.")
    };
    format!(
        "Cost: {}. Latency: {}. {price} {slo}",
        obj.cost_label(),
        obj.latency_label()
    )
}

fn best_text(r: &SweepResults, obj: &Objective, a: &Analysis) -> String {
    match a.best {
        Some(i) => {
            let (p, e) = (&r.points[position(r, i)], &a.points[position(r, i)]);
            format!(
                "Operating point: point {i} ({}) — {}: {}; {}: {}; SLO met by {}; goodput {} requests/s per GPU.",
                describe(r, p),
                obj.cost_label(),
                fmt(e.cost, obj.cost_digits()),
                obj.latency_label(),
                fmt(e.latency_ms, 1),
                pct(e.attainment),
                e.goodput_rps_per_gpu.map_or_else(|| "–".into(), sim::sig_figs::rate)
            )
        }
        None => format!(
            "No operating point: {}.",
            a.note.as_deref().unwrap_or("no point meets the SLOs")
        ),
    }
}

fn pareto_chart(r: &SweepResults, obj: &Objective, a: &Analysis) -> Chart {
    let xy = |i: usize| {
        let e = &a.points[position(r, i)];
        Some((e.cost?, e.latency_ms?))
    };
    let x_log = chart::wants_log(a.points.iter().filter_map(|e| e.cost));
    let y_log = chart::wants_log(a.points.iter().filter_map(|e| e.latency_ms));
    let log = |l: String, on: bool| if on { format!("{l}, log scale") } else { l };
    let mut p = XyPlot::new(
        "pareto",
        format!(
            "Cost vs {} — {} ({} points)",
            obj.latency_label(),
            r.scenario,
            r.points.len()
        ),
        log(obj.cost_label(), x_log),
        log(obj.latency_label(), y_log),
    );
    p.x_log = x_log;
    p.y_log = y_log;
    p.x_integer = obj.cost == sim::sweep::objective::CostMetric::Gpus;
    let has_slo = a.slo_ttft_ms.is_some()
        || a.slo_tpot_ms.is_some()
        || a.slo_e2e_ms.is_some()
        || !a.slo_percentiles_ms.is_empty();
    // The front is a line under the points, so each front point still shows
    // whether it meets the SLOs.
    // Each point's settings and verdict, shown on hover in report.html.
    let settings = |i: usize| {
        let (pt, e) = (&r.points[position(r, i)], &a.points[position(r, i)]);
        format!(
            "point {i}: {}; SLO met by {}; goodput {} req/s per GPU",
            describe(r, pt),
            pct(e.attainment),
            fmt(e.goodput_rps_per_gpu, 3)
        )
    };
    let on = |ids: &[usize]| -> (Vec<(f64, f64)>, Vec<String>) {
        ids.iter()
            .filter_map(|&i| xy(i).map(|at| (at, settings(i))))
            .unzip()
    };
    let with_tips = |label: &str, ids: &[usize], mark: Mark, color| {
        let (points, tips) = on(ids);
        let mut s = Series::new(label, points, mark, color);
        s.tips = tips;
        s
    };
    p.series.push(with_tips(
        "Pareto front",
        &a.pareto_front,
        Mark::Line,
        PALETTE[0],
    ));
    let (meet, miss): (Vec<usize>, Vec<usize>) = a
        .points
        .iter()
        .map(|e| e.index)
        .partition(|&i| a.points[position(r, i)].meets_slo);
    if has_slo {
        p.series
            .push(with_tips("misses the SLOs", &miss, Mark::Points, GREY));
        p.series
            .push(with_tips("meets the SLOs", &meet, Mark::Points, PALETTE[2]));
    } else {
        p.series
            .push(with_tips("sweep point", &miss, Mark::Points, PALETTE[0]));
    }
    if let Some(b) = a.best.and_then(|i| xy(i).map(|at| (i, at))) {
        p.highlights.push(Highlight {
            label: format!("operating point (point {})", b.0),
            at: b.1,
            color: PALETTE[1],
        });
    }
    Chart::Xy(p)
}

/// Latency against offered load per replica, one line per combination of
/// the axes other than rate and replicas. `None` without rates.
fn load_chart(r: &SweepResults, metric: &str, label: &str, slo: Option<f64>) -> Option<Chart> {
    let load_axes = ["workload.arrival.rate", "fleet.replicas"];
    let others: Vec<usize> = (0..r.axes.len())
        .filter(|&i| !load_axes.contains(&keypath::resolve(&r.axes[i])))
        .collect();
    let mut groups: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for p in &r.points {
        let (Some(rate), Some(reps)) = (p.offered_rps, num(&p.summary, "replicas")) else {
            continue;
        };
        let count = num(&p.summary, &format!("latency.{metric}.count")).unwrap_or(0.0);
        let Some(y) = num(&p.summary, &format!("latency.{metric}.p99")).filter(|_| count > 0.0)
        else {
            continue;
        };
        let key = if others.is_empty() {
            "all points".to_string()
        } else {
            others
                .iter()
                .map(|&i| format!("{} = {}", r.axes[i], cell(&p.values[i])))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let pt = (rate / reps.max(1.0), y);
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => g.1.push(pt),
            None => groups.push((key, vec![pt])),
        }
    }
    let xs: Vec<f64> = groups
        .iter()
        .flat_map(|g| g.1.iter().map(|p| p.0))
        .collect();
    let distinct = xs
        .iter()
        .any(|&x| xs.iter().any(|&y| (x - y).abs() > 1e-9 * x.abs().max(1.0)));
    if !distinct {
        return None;
    }
    let y_log = chart::wants_log(
        groups
            .iter()
            .flat_map(|g| g.1.iter().map(|p| p.1))
            .chain(slo),
    );
    let mut c = XyPlot::new(
        &format!("{}-vs-load", metric.trim_end_matches("_ms")),
        format!("{label} p99 vs offered load — {}", r.scenario),
        "offered load per replica (requests/s)",
        format!("{label} p99 (ms{})", if y_log { ", log scale" } else { "" }),
    );
    c.y_log = y_log;
    c.legend = Legend::UpperLeft;
    for (i, (key, mut pts)) in groups.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        // Past eight lines the legend stops helping: the rest are grey.
        let (label, color) = if i < 7 {
            (key, PALETTE[i])
        } else {
            (String::new(), GREY)
        };
        c.series
            .push(Series::new(label, pts, Mark::LinePoints, color));
    }
    if let Some(t) = slo {
        c.ref_lines.push(RefLine {
            label: format!("SLO: {label} ≤ {t} ms"),
            at: t,
            vertical: false,
            color: TARGET,
        });
    }
    Some(Chart::Xy(c))
}
