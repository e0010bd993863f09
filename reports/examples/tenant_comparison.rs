//! The noisy-neighbour comparison of docs/tenants.md: reads a sweep over
//! fairness policies (and the batch tenant's token bucket), prints one
//! Markdown table row per point — the first tenant's TTFT p99 and SLO
//! attainment, the second tenant's throughput and rejections, Jain's index —
//! and draws one chart of the first tenant's TTFT p99 (the latency cost)
//! against the second tenant's throughput (the throughput cost), one line
//! per value of the first axis.
//!
//!   servesim sweep scenarios/noisy-neighbor.toml --grid scenarios/grids/noisy-neighbor.toml --out out/nn
//!   cargo run -p servesim-reports --example tenant_comparison -- out/nn docs/img

use reports::chart::{self, Chart, Legend, Mark, Series, XyPlot, PALETTE};
use serde_json::Value;
use sim::sweep::results::{cell, number_at};
use sim::sweep::SweepResults;
use std::path::Path;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, charts] = args.as_slice() else {
        return Err("usage: tenant_comparison SWEEP_DIR CHART_DIR".into());
    };
    let r = SweepResults::read(&Path::new(dir).join("sweep.json")).map_err(|e| e.to_string())?;
    let t = |s: &Value, i: usize, path: &str| {
        s.pointer(&format!("/tenancy/tenants/{i}/{}", path.replace('.', "/")))
            .and_then(Value::as_f64)
    };
    let name = |s: &Value, i: usize| {
        s.pointer(&format!("/tenancy/tenants/{i}/name"))
            .map(cell)
            .unwrap_or_default()
    };
    let first = &r.points.first().ok_or("the sweep has no points")?.summary;
    let (a, b) = (name(first, 0), name(first, 1));
    println!(
        "| {} | {a} TTFT p99 (ms) | {a} SLO met | {b} completed req/s | {b} output tok/s | {b} rejected | Jain's index |",
        r.axes.join(" | ")
    );
    println!("|{}", " --- |".repeat(r.axes.len() + 6));
    // One series per value of the first axis (the fairness policy), through
    // its points along the other axes (with and without the bucket).
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for p in &r.points {
        let s = &p.summary;
        let f = |v: Option<f64>, d: usize| v.map_or("–".into(), |x| format!("{x:.d$}"));
        let values: Vec<String> = p.values.iter().map(cell).collect();
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            values.join(" | "),
            f(t(s, 0, "latency.ttft_ms.p99"), 0),
            f(t(s, 0, "slo.attainment").map(|x| 100.0 * x), 1) + " %",
            f(t(s, 1, "requests_per_s"), 2),
            f(t(s, 1, "output_tokens_per_s"), 0),
            f(t(s, 1, "counts.rejected"), 0),
            f(number_at(s, "tenancy.jain_index"), 3),
        );
        let (Some(x), Some(y)) = (t(s, 1, "requests_per_s"), t(s, 0, "latency.ttft_ms.p99")) else {
            continue;
        };
        let label = values.first().cloned().unwrap_or_default();
        match series.iter_mut().find(|(l, _)| *l == label) {
            Some((_, pts)) => pts.push((x, y)),
            None => series.push((label, vec![(x, y)])),
        }
    }
    let mut c = XyPlot::new(
        "noisy-neighbor",
        format!("Latency cost vs throughput cost: {a} TTFT p99 against {b} throughput"),
        format!("{b} completed requests/s"),
        format!("{a} TTFT p99 (ms, log)"),
    );
    c.y_log = true;
    c.legend = Legend::UpperLeft;
    for (i, (label, pts)) in series.into_iter().enumerate() {
        c.series.push(Series::new(
            label,
            pts,
            Mark::LinePoints,
            PALETTE[i % PALETTE.len()],
        ));
    }
    std::fs::create_dir_all(charts).map_err(|e| e.to_string())?;
    chart::render(&Chart::Xy(c), Path::new(charts))?;
    Ok(())
}
