//! The report of one run (a `simulate` output folder, or a sweep's
//! `operating-point/`): what ran and where its costs came from, latency and
//! outcome tables, TTFT / TPOT / E2E CDFs, time series of queue depth,
//! running batch and KV use, and bars of outcomes and per-replica load.
//!
//! Per-tenant bars come from a trace's tenant column, or, with configured
//! `[[tenants]]`, from the summary (`tenant_report`). A
//! "replicas requested vs ready" chart is drawn as soon as `timeseries.csv`
//! carries `replicas_requested` and `replicas_ready` columns (an autoscaler's);
//! without them there is nothing true to draw.

use crate::chart::{
    self, BarPlot, Chart, Legend, Mark, RefLine, Rendered, Series, XyPlot, GREY, PALETTE, TARGET,
};
use crate::data::{self, num, text, Table as Csv, Tick};
use crate::document::Section;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Up to this many replicas get a line each; beyond, mean and max.
const LINES_PER_REPLICA: usize = 8;
/// Points per drawn line (longer series are thinned).
const MAX_POINTS: usize = 1500;

fn ms(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "–".into())
}

/// Builds the section of the run in `dir`, drawing charts into `charts` with
/// names starting with `prefix`.
pub fn section(dir: &Path, heading: &str, prefix: &str, charts: &Path) -> Result<Section, String> {
    let s = data::read_json(&dir.join("summary.json"))?;
    let mut sec = Section::new(heading);
    sec.para(describe(&s));
    sec.para(format!(
        "Costs: {}. Numbers from the roofline are datasheet estimates; a calibration profile's are measurements.",
        text(&s, "cost_source")
    ));
    let dists = [
        ("queue wait", "queue_wait_ms"),
        ("TTFT", "ttft_ms"),
        ("TPOT", "tpot_ms"),
        ("ITL", "itl_ms"),
        ("E2E", "e2e_ms"),
    ];
    sec.table(
        &["latency (ms)", "mean", "p50", "p90", "p99", "max"],
        dists
            .iter()
            .map(|(label, key)| {
                let mut row = vec![label.to_string()];
                for stat in ["mean", "p50", "p90", "p99", "max"] {
                    row.push(ms(num(&s, &format!("latency.{key}.{stat}"))));
                }
                row
            })
            .collect(),
    );
    sec.table(&["outcome", "value"], outcome_rows(&s));

    let slo_ttft = num(&s, "slo.ttft_ms");
    let slo_tpot = num(&s, "slo.tpot_ms");
    let requests = dir.join("requests.csv");
    if requests.exists() {
        let reqs = Csv::read_requests(&requests)?;
        let done = completed(&reqs);
        for (key, label, slo) in [
            ("ttft_ms", "TTFT", slo_ttft),
            ("tpot_ms", "TPOT", slo_tpot),
            ("e2e_ms", "E2E latency", None),
        ] {
            let v: Vec<f64> = column_where(&reqs, key, &done);
            if v.is_empty() {
                continue;
            }
            sec.figure(render(
                &cdf_chart(
                    &format!("{prefix}{}-cdf", key.trim_end_matches("_ms")),
                    label,
                    v,
                    slo,
                    &s,
                ),
                charts,
            )?);
        }
        let replicas = num(&s, "replicas").unwrap_or(1.0) as usize;
        if replicas > 1 {
            sec.figure(render(
                &per_replica_bars(prefix, &reqs, &done, replicas, &s),
                charts,
            )?);
        }
    }
    let tenant_charts = crate::tenant_report::charts(prefix, &s);
    if !tenant_charts.is_empty() {
        // Configured tenants: their own names and SLOs, from the summary.
        for c in &tenant_charts {
            sec.figure(render(c, charts)?);
        }
    } else if let Some(chart) = per_tenant_bars(prefix, &dir.join("requests.csv"), &s)? {
        sec.figure(render(&chart, charts)?);
    }
    if num(&s, "counts.rejected").unwrap_or(0.0) + num(&s, "counts.in_flight").unwrap_or(0.0) > 0.0
    {
        sec.figure(render(&outcome_bars(prefix, &s), charts)?);
    }
    let ts = dir.join("timeseries.csv");
    if ts.exists() {
        let ticks = data::ticks(&Csv::read(&ts)?)?;
        if ticks.len() > 1 {
            for c in timeseries_charts(prefix, &ticks, &s) {
                sec.figure(render(&c, charts)?);
            }
        }
    }
    Ok(sec)
}

fn render(c: &Chart, dir: &Path) -> Result<Rendered, String> {
    chart::render(c, dir)
}

/// "quickstart: Llama-3.1-8B, 4 replicas × TP 1 on H100-SXM = 4 GPUs, router …".
pub fn describe(s: &Value) -> String {
    let policy = text(s, "engine.policy");
    let policy = if policy.is_empty() {
        policy
    } else {
        format!(", batch policy {policy}")
    };
    let whole = |k: &str| num(s, k).unwrap_or(0.0).max(0.0) as u32;
    let (replicas, tp, gpus) = (whole("replicas"), whole("tensor_parallel"), whole("gpus"));
    // The summary keeps GPUs, not the pipeline depth: the stages are what
    // the GPUs hold beyond replicas × TP.
    let pp = gpus / (replicas * tp).max(1);
    format!(
        "{}: {}, {}, router {}{policy}, seed {}; {:.1} s simulated.",
        text(s, "scenario"),
        text(s, "model"),
        sim::parallel::fleet_shape(replicas, tp, pp.max(1), 1, &text(s, "hardware")),
        text(s, "router"),
        text(s, "seed"),
        num(s, "duration_s").unwrap_or(0.0)
    )
}

fn outcome_rows(s: &Value) -> Vec<Vec<String>> {
    let n = |p: &str| num(s, p).unwrap_or(0.0);
    let mut rows = vec![
        vec![
            "requests arrived".into(),
            format!("{}", n("counts.arrived")),
        ],
        vec!["completed".into(), format!("{}", n("counts.completed"))],
        vec!["rejected".into(), format!("{}", n("counts.rejected"))],
        vec![
            "in flight at the end".into(),
            format!("{}", n("counts.in_flight")),
        ],
        vec![
            "throughput (requests/s)".into(),
            sim::sig_figs::rate(n("throughput.requests_per_s")),
        ],
        vec![
            "output tokens/s (per GPU)".into(),
            format!(
                "{} ({})",
                sim::sig_figs::rate(n("throughput.output_tokens_per_s")),
                sim::sig_figs::rate(n("throughput.output_tokens_per_s_per_gpu"))
            ),
        ],
    ];
    if s.get("slo").is_some_and(|v| !v.is_null()) {
        rows.push(vec![
            format!(
                "SLO met (TTFT ≤ {} ms and TPOT ≤ {} ms)",
                n("slo.ttft_ms"),
                n("slo.tpot_ms")
            ),
            format!("{:.2} %", n("slo.attainment") * 100.0),
        ]);
        rows.push(vec![
            "goodput (requests/s, per GPU)".into(),
            format!(
                "{} ({})",
                sim::sig_figs::rate(n("slo.goodput_rps")),
                sim::sig_figs::rate(n("slo.goodput_rps_per_gpu"))
            ),
        ]);
    }
    rows.extend([
        vec![
            "mean batch (sequences / tokens)".into(),
            format!(
                "{:.1} / {:.0}",
                n("engine.mean_batch_size"),
                n("engine.mean_batch_tokens")
            ),
        ],
        vec![
            "replicas busy".into(),
            format!("{:.1} %", n("engine.busy_fraction") * 100.0),
        ],
        vec![
            "KV cache use (mean / max)".into(),
            format!(
                "{:.1} % / {:.1} %",
                n("engine.kv_util_mean") * 100.0,
                n("engine.kv_util_max") * 100.0
            ),
        ],
        vec!["preemptions".into(), format!("{}", n("engine.preemptions"))],
    ]);
    rows
}

/// Row mask of completed requests.
fn completed(reqs: &Csv) -> Vec<bool> {
    let Some(i) = reqs.col("status") else {
        return vec![true; reqs.rows.len()];
    };
    reqs.rows
        .iter()
        .map(|r| r.get(i) == Some("completed"))
        .collect()
}

fn column_where(reqs: &Csv, name: &str, mask: &[bool]) -> Vec<f64> {
    let Some(i) = reqs.col(name) else {
        return Vec::new();
    };
    reqs.rows
        .iter()
        .zip(mask)
        .filter(|(_, &m)| m)
        .filter_map(|(r, _)| r.get(i).and_then(|c| c.parse::<f64>().ok()))
        .filter(|v| v.is_finite())
        .collect()
}

/// Empirical CDF points (value, share ≤ value), at most [`MAX_POINTS`]
/// of them, always including the minimum and the maximum.
pub fn cdf_points(mut v: Vec<f64>) -> Vec<(f64, f64)> {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return Vec::new();
    }
    let k = n.min(MAX_POINTS);
    (0..k)
        .map(|j| {
            let i = if k == n { j } else { j * (n - 1) / (k - 1) };
            (v[i], (i + 1) as f64 / n as f64)
        })
        .collect()
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

fn cdf_chart(name: &str, label: &str, v: Vec<f64>, slo: Option<f64>, s: &Value) -> Chart {
    let mut sorted = v.clone();
    sorted.sort_by(f64::total_cmp);
    let p99 = quantile(&sorted, 0.99);
    let log = chart::wants_log(sorted.iter().copied());
    let mut pts = cdf_points(v);
    if log {
        pts.retain(|p| p.0 > 0.0);
    }
    let n = sorted.len();
    let mut p = XyPlot::new(
        name,
        format!(
            "{label} CDF — {} ({n} completed requests)",
            text(s, "scenario")
        ),
        format!("{label} (ms{})", if log { ", log scale" } else { "" }),
        "share of completed requests",
    );
    p.x_log = log;
    p.y_range = Some((0.0, 1.0));
    p.legend = Legend::LowerRight;
    p.series
        .push(Series::new(label, pts, Mark::Line, PALETTE[0]));
    p.ref_lines.push(RefLine {
        label: format!("p99 = {p99:.1} ms"),
        at: p99,
        vertical: true,
        color: GREY,
    });
    if let Some(t) = slo {
        p.ref_lines.push(RefLine {
            label: format!("SLO: {label} ≤ {t} ms"),
            at: t,
            vertical: true,
            color: TARGET,
        });
    }
    Chart::Xy(p)
}

fn per_replica_bars(prefix: &str, reqs: &Csv, done: &[bool], replicas: usize, s: &Value) -> Chart {
    let mut counts = vec![0.0; replicas];
    if let Some(i) = reqs.col("replica") {
        for (r, _) in reqs.rows.iter().zip(done).filter(|(_, &d)| d) {
            if let Some(k) = r.get(i).and_then(|c| c.parse::<usize>().ok()) {
                if k < replicas {
                    counts[k] += 1.0;
                }
            }
        }
    }
    Chart::Bars(BarPlot {
        name: format!("{prefix}requests-by-replica"),
        title: format!(
            "Completed requests per replica — router {}",
            text(s, "router")
        ),
        x_label: "replica".into(),
        y_label: "completed requests".into(),
        bars: counts
            .into_iter()
            .enumerate()
            .map(|(i, c)| (i.to_string(), c))
            .collect(),
        colors: vec![PALETTE[0]],
        tips: Vec::new(),
    })
}

/// Per-tenant bars when the run has more than one tenant: the share of each
/// tenant's ended requests (completed + rejected) that met both SLOs, or,
/// without SLOs, its completed requests — the fairness view.
fn per_tenant_bars(prefix: &str, path: &Path, s: &Value) -> Result<Option<Chart>, String> {
    if !path.exists() {
        return Ok(None);
    }
    let reqs = Csv::read_requests(path)?;
    let (Some(t), Some(st)) = (reqs.col("tenant"), reqs.col("status")) else {
        return Ok(None);
    };
    let (ttft, tpot) = (reqs.col("ttft_ms"), reqs.col("tpot_ms"));
    let slo = num(s, "slo.ttft_ms").zip(num(s, "slo.tpot_ms"));
    // tenant → (ended, met, completed)
    let mut per: BTreeMap<u64, (f64, f64, f64)> = BTreeMap::new();
    for r in &reqs.rows {
        let Some(tenant) = r.get(t).and_then(|c| c.parse::<u64>().ok()) else {
            continue;
        };
        let e = per.entry(tenant).or_default();
        let status = r.get(st).unwrap_or("");
        if status == "in_flight" {
            continue;
        }
        e.0 += 1.0;
        if status != "completed" {
            continue;
        }
        e.2 += 1.0;
        let val = |c: Option<usize>| c.and_then(|i| r.get(i)).and_then(|x| x.parse::<f64>().ok());
        if let Some((a, b)) = slo {
            let ok_ttft = val(ttft).is_some_and(|x| x <= a);
            let ok_tpot = val(tpot).is_none_or(|x| x <= b);
            e.1 += (ok_ttft && ok_tpot) as u8 as f64;
        }
    }
    if per.len() < 2 {
        return Ok(None);
    }
    let (title, y_label, bars): (String, &str, Vec<(String, f64)>) = match slo {
        Some((a, b)) => (
            format!("SLO attainment per tenant (TTFT ≤ {a} ms and TPOT ≤ {b} ms)"),
            "requests meeting the SLOs (%)",
            per.iter()
                .map(|(k, v)| (k.to_string(), 100.0 * v.1 / v.0.max(1.0)))
                .collect(),
        ),
        None => (
            "Completed requests per tenant".into(),
            "completed requests",
            per.iter().map(|(k, v)| (k.to_string(), v.2)).collect(),
        ),
    };
    Ok(Some(Chart::Bars(BarPlot {
        name: format!("{prefix}tenants"),
        title,
        x_label: "tenant".into(),
        y_label: y_label.into(),
        bars,
        colors: vec![PALETTE[0]],
        tips: Vec::new(),
    })))
}

fn outcome_bars(prefix: &str, s: &Value) -> Chart {
    let mut bars = vec![(
        "completed".to_string(),
        num(s, "counts.completed").unwrap_or(0.0),
    )];
    let mut colors = vec![PALETTE[2]];
    if let Some(Value::Object(m)) = s.get("counts").and_then(|c| c.get("rejected_by_reason")) {
        for (reason, v) in m {
            bars.push((
                format!("rejected: {}", reason.replace('_', " ")),
                v.as_f64().unwrap_or(0.0),
            ));
            colors.push(PALETTE[1]);
        }
    }
    bars.push((
        "in flight at the end".into(),
        num(s, "counts.in_flight").unwrap_or(0.0),
    ));
    colors.push(GREY);
    Chart::Bars(BarPlot {
        name: format!("{prefix}outcomes"),
        title: format!("Request outcomes — {}", text(s, "scenario")),
        x_label: "outcome".into(),
        y_label: "requests".into(),
        bars,
        colors,
        tips: Vec::new(),
    })
}

/// Averages consecutive points into at most [`MAX_POINTS`] (or takes their
/// maximum, for a "largest" series) so long runs stay legible.
fn thin(points: Vec<(f64, f64)>, take_max: bool) -> Vec<(f64, f64)> {
    if points.len() <= MAX_POINTS {
        return points;
    }
    let chunk = points.len().div_ceil(MAX_POINTS);
    points
        .chunks(chunk)
        .map(|c| {
            let y = if take_max {
                c.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max)
            } else {
                c.iter().map(|p| p.1).sum::<f64>() / c.len() as f64
            };
            (c[0].0, y)
        })
        .collect()
}

/// Per-replica lines (few replicas) or mean and largest (many), from one
/// column of the ticks.
fn replica_series(ticks: &[Tick], pick: fn(&Tick) -> &Vec<f64>, scale: f64) -> Vec<Series> {
    let n = ticks.first().map(|t| pick(t).len()).unwrap_or(0);
    if n <= LINES_PER_REPLICA {
        (0..n)
            .map(|r| {
                let pts = ticks
                    .iter()
                    .map(|t| (t.time_s, pick(t).get(r).copied().unwrap_or(0.0) * scale))
                    .collect();
                let mut s = Series::new(
                    format!("replica {r}"),
                    thin(pts, false),
                    Mark::Line,
                    PALETTE[r % 7],
                );
                s.width = 1;
                s
            })
            .collect()
    } else {
        let mean = ticks
            .iter()
            .map(|t| {
                let v = pick(t);
                (
                    t.time_s,
                    v.iter().sum::<f64>() / v.len().max(1) as f64 * scale,
                )
            })
            .collect();
        let max = ticks
            .iter()
            .map(|t| {
                (
                    t.time_s,
                    pick(t).iter().copied().fold(0.0, f64::max) * scale,
                )
            })
            .collect();
        vec![
            Series::new(
                format!("mean over {n} replicas"),
                thin(mean, false),
                Mark::Line,
                PALETTE[0],
            ),
            Series::new("largest replica", thin(max, true), Mark::Line, PALETTE[1]),
        ]
    }
}

fn timeseries_charts(prefix: &str, ticks: &[Tick], s: &Value) -> Vec<Chart> {
    let scenario = text(s, "scenario");
    let x = "simulated time (s)";
    let mut out = Vec::new();

    let mut q = XyPlot::new(
        &format!("{prefix}queue-depth"),
        format!("Queue depth — {scenario}"),
        x,
        "requests waiting",
    );
    let total = ticks
        .iter()
        .map(|t| (t.time_s, t.waiting.iter().sum()))
        .collect();
    let mut fleet = Series::new("whole fleet", thin(total, false), Mark::Line, PALETTE[6]);
    fleet.width = 3;
    q.series.push(fleet);
    if ticks[0].waiting.len() > 1 {
        q.series.extend(replica_series(ticks, |t| &t.waiting, 1.0));
    }
    q.legend = Legend::UpperLeft;
    out.push(Chart::Xy(q));

    let mut b = XyPlot::new(
        &format!("{prefix}running-batch"),
        format!("Running batch per replica — {scenario}"),
        x,
        "sequences in the running batch",
    );
    b.series = replica_series(ticks, |t| &t.running, 1.0);
    b.legend = Legend::UpperLeft;
    out.push(Chart::Xy(b));

    let mut k = XyPlot::new(
        &format!("{prefix}kv-use"),
        format!("KV cache use per replica — {scenario}"),
        x,
        "KV cache blocks in use (%)",
    );
    k.series = replica_series(ticks, |t| &t.kv_util, 100.0);
    k.y_range = Some((0.0, 105.0));
    k.legend = Legend::UpperLeft;
    out.push(Chart::Xy(k));

    // An autoscaler's columns, when the run has them.
    let has = |c: &str| ticks.iter().any(|t| t.extra.contains_key(c));
    if has("replicas_requested") && has("replicas_ready") {
        let mut r = XyPlot::new(
            &format!("{prefix}replicas"),
            format!("Replicas requested vs ready — {scenario}"),
            x,
            "replicas",
        );
        for (i, (col, label)) in [
            ("replicas_requested", "requested"),
            ("replicas_ready", "ready"),
        ]
        .iter()
        .enumerate()
        {
            let pts = ticks
                .iter()
                .filter_map(|t| t.extra.get(*col).map(|v| (t.time_s, *v)))
                .collect();
            r.series
                .push(Series::new(*label, thin(pts, true), Mark::Line, PALETTE[i]));
        }
        // Replicas on their way (servesim's life cycle writes the phases):
        // the gap between requested and ready, made visible.
        let starting = [
            "replicas_provisioning",
            "replicas_loading",
            "replicas_warming",
        ];
        if starting.iter().all(|c| has(c)) {
            let pts = ticks
                .iter()
                .map(|t| {
                    let n: f64 = starting.iter().filter_map(|c| t.extra.get(*c)).sum();
                    (t.time_s, n)
                })
                .collect();
            r.series.push(Series::new(
                "starting (cold)",
                thin(pts, true),
                Mark::Line,
                PALETTE[2],
            ));
        }
        r.legend = Legend::UpperLeft;
        out.push(Chart::Xy(r));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_is_monotone_bounded_and_ends_at_one() {
        let v: Vec<f64> = (0..10_000).map(|i| ((i * 7919) % 10_000) as f64).collect();
        let c = cdf_points(v);
        assert_eq!(c.len(), MAX_POINTS);
        assert_eq!(c[0], (0.0, 1.0 / 10_000.0));
        assert_eq!(*c.last().unwrap(), (9999.0, 1.0));
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
        assert_eq!(cdf_points(vec![3.0]), [(3.0, 1.0)]);
        assert!(cdf_points(vec![]).is_empty());
    }

    #[test]
    fn thinning_keeps_peaks_for_max_series() {
        let mut pts: Vec<(f64, f64)> = (0..6000).map(|i| (i as f64, 1.0)).collect();
        pts[4321].1 = 50.0;
        let t = thin(pts.clone(), true);
        assert!(t.len() <= MAX_POINTS);
        assert_eq!(t.iter().map(|p| p.1).fold(0.0, f64::max), 50.0);
        let m = thin(pts, false);
        assert!(m.iter().all(|p| p.1 < 50.0));
    }
}
