//! The report's "why" section, built from the run's latency attribution
//! (see `explain`): stacked attribution bars per latency band, the slowest
//! requests' timelines, the per-replica tail, and the ranked hypotheses.
//!
//! The charts are hand-written inline SVG with a few lines of plain inline
//! JavaScript (hover values, sortable tables, and a self-check that the page
//! sets on `<body>` for the headless-browser test), so the page stays one
//! self-contained file that works offline. Every value is also in a
//! `<title>` (the browser's own tooltip) and in the Markdown tables.

use crate::document::Section;
use crate::explain::{self, Band, Explanation, Metric, Run, Timeline};
use sim::attribution::Component;
use std::fmt::Write;
use std::path::Path;

/// Colour of each component: queueing warm, prefill blue, decode green,
/// preemption purple, hooks grey.
fn colour(c: &str) -> &'static str {
    match c {
        "queue_kv" => "#d62728",
        "queue_token_budget" => "#ff7f0e",
        "queue_max_seqs" => "#e6a100",
        "queue_policy" => "#bc6b2f",
        "queue_iteration" => "#f4b6a0",
        "prefill_compute" => "#1f77b4",
        "prefill_interference" => "#8fbbe0",
        "prefill_preempted" => "#9467bd",
        "decode_compute" => "#2ca02c",
        "decode_stall" => "#a5d58f",
        "decode_preempted" => "#c5a3e0",
        _ => "#9a9a9a",
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const W: f64 = 960.0;
const LEFT: f64 = 210.0;
const RIGHT: f64 = 90.0;

fn band_label(b: &Band) -> String {
    if b.label == "all" {
        "all".into()
    } else {
        format!("≥{}", b.label)
    }
}

/// 100 %-stacked bars of the mean component shares, one bar per band.
fn bands_svg(mb: &explain::MetricBands) -> String {
    let bands: Vec<&Band> = std::iter::once(&mb.all).chain(&mb.bands).collect();
    let used: Vec<usize> = (0..mb.all.components.len())
        .filter(|&k| bands.iter().any(|b| b.components[k].share > 0.0005))
        .collect();
    let (row, top) = (30.0, 24.0);
    let legend_rows = used.len().div_ceil(4) as f64;
    let h = top + row * bands.len() as f64 + 16.0 + 20.0 * legend_rows;
    let unit = if mb.metric == Metric::Tpot {
        "ms/token"
    } else {
        "ms"
    };
    let mut s = format!(
        "<svg class=\"why-chart\" id=\"why-bands-{m}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{h}\" viewBox=\"0 0 {W} {h}\" font-family=\"sans-serif\" font-size=\"12\">\
<text x=\"4\" y=\"15\" font-weight=\"bold\">{label}: mean share of each component, requests at or above each percentile</text>\
<text x=\"{rx}\" y=\"15\" text-anchor=\"end\" fill=\"#555\">mean {unit}</text>",
        m = mb.metric.label().to_lowercase(),
        label = mb.metric.label(),
        rx = W - 4.0
    );
    let span = W - LEFT - RIGHT;
    for (j, b) in bands.iter().enumerate() {
        let y = top + row * j as f64;
        let _ = write!(
            s,
            "<text x=\"{x}\" y=\"{ty}\" text-anchor=\"end\">{l} ({n} req)</text>",
            x = LEFT - 6.0,
            ty = y + 16.0,
            l = esc(&band_label(b)),
            n = b.requests
        );
        let total: f64 = b.components.iter().map(|c| c.share).sum::<f64>().max(1e-12);
        let mut x = LEFT;
        for &k in &used {
            let c = &b.components[k];
            let w = span * c.share / total;
            if w <= 0.0 {
                continue;
            }
            let tip = format!(
                "{} {}: {} {:.1} % (mean {:.3} {unit})",
                band_label(b),
                mb.metric.label(),
                c.component,
                c.share * 100.0,
                c.mean_ms
            );
            let _ = write!(
                s,
                "<rect x=\"{x:.2}\" y=\"{y}\" width=\"{w:.2}\" height=\"22\" fill=\"{f}\" data-tip=\"{t}\"><title>{t}</title></rect>",
                f = colour(c.component),
                t = esc(&tip)
            );
            x += w;
        }
        let _ = write!(
            s,
            "<text x=\"{rx}\" y=\"{ty}\" text-anchor=\"end\">{v:.1}</text>",
            rx = W - 4.0,
            ty = y + 16.0,
            v = b.mean_ms
        );
    }
    let ly = top + row * bands.len() as f64 + 12.0;
    for (i, &k) in used.iter().enumerate() {
        let name = mb.all.components[k].component;
        let (lx, yy) = (LEFT + 180.0 * (i % 4) as f64, ly + 20.0 * (i / 4) as f64);
        let _ = write!(
            s,
            "<rect x=\"{lx}\" y=\"{yy}\" width=\"12\" height=\"12\" fill=\"{f}\"/><text x=\"{tx}\" y=\"{ty}\">{name}</text>",
            f = colour(name),
            tx = lx + 16.0,
            ty = yy + 10.0
        );
    }
    s.push_str("</svg>");
    s
}

/// One row per request: its queue, prefill and decode phases, each split into
/// its components (drawn in column order within the phase).
fn timelines_svg(id: &str, title: &str, list: &[Timeline]) -> String {
    let (row, top) = (24.0, 40.0);
    let h = top + row * list.len() as f64 + 10.0;
    let max_ms = list
        .iter()
        .flat_map(|t| t.phases.last())
        .map(|p| p.end_s)
        .zip(list.iter().map(|t| t.arrival_s))
        .map(|(e, a)| (e - a) * 1e3)
        .fold(1e-9, f64::max);
    let span = W - LEFT - 20.0;
    let x_of = |ms: f64| LEFT + span * ms / max_ms;
    let mut s = format!(
        "<svg class=\"why-chart\" id=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{h}\" viewBox=\"0 0 {W} {h}\" font-family=\"sans-serif\" font-size=\"12\">\
<text x=\"4\" y=\"15\" font-weight=\"bold\">{}</text>",
        esc(title)
    );
    for k in 0..=4 {
        let ms = max_ms * k as f64 / 4.0;
        let x = x_of(ms);
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{y0}\" x2=\"{x:.1}\" y2=\"{h1}\" stroke=\"#ddd\"/><text x=\"{x:.1}\" y=\"32\" text-anchor=\"middle\" fill=\"#555\">{ms:.0} ms</text>",
            y0 = top - 4.0,
            h1 = h - 6.0
        );
    }
    for (j, t) in list.iter().enumerate() {
        let y = top + row * j as f64;
        let _ = write!(
            s,
            "<text x=\"{x}\" y=\"{ty}\" text-anchor=\"end\">#{id} replica {r}{p}</text>",
            x = LEFT - 6.0,
            ty = y + 14.0,
            id = t.id,
            r = t.replica.map_or("–".into(), |r| r.to_string()),
            p = if t.preemptions > 0 {
                format!(", {} preempt.", t.preemptions)
            } else {
                String::new()
            }
        );
        for p in &t.phases {
            let mut at = (p.start_s - t.arrival_s) * 1e3;
            for (c, ms) in &p.components {
                let (x0, x1) = (x_of(at), x_of(at + ms));
                let tip = format!("request {} ({} phase): {c} {ms:.3} ms", t.id, p.phase);
                let _ = write!(
                    s,
                    "<rect x=\"{x0:.2}\" y=\"{y}\" width=\"{w:.2}\" height=\"18\" fill=\"{f}\" data-tip=\"{tip}\"><title>{tip}</title></rect>",
                    w = (x1 - x0).max(0.5),
                    f = colour(c),
                    tip = esc(&tip)
                );
                at += ms;
            }
        }
        if let Some(ttft) = t.ttft_ms {
            let x = x_of(ttft);
            let _ = write!(
                s,
                "<line x1=\"{x:.2}\" y1=\"{y0}\" x2=\"{x:.2}\" y2=\"{y1}\" stroke=\"#000\" stroke-width=\"1.5\"><title>first token at {ttft:.1} ms</title></line>",
                y0 = y - 2.0,
                y1 = y + 20.0
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// Bars of how many of the fleet's p99 TTFT and E2E tail requests each
/// replica served.
fn replicas_svg(e: &Explanation) -> String {
    let n = e.replicas.len();
    let (top, h) = (30.0, 200.0);
    let max = e
        .replicas
        .iter()
        .map(|r| r.ttft_tail.max(r.e2e_tail))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let slot = (W - 60.0) / n.max(1) as f64;
    let mut s = format!(
        "<svg class=\"why-chart\" id=\"why-replicas\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{hh}\" viewBox=\"0 0 {W} {hh}\" font-family=\"sans-serif\" font-size=\"12\">\
<text x=\"4\" y=\"15\" font-weight=\"bold\">Where the tail ran: the fleet's p99 TTFT (dark) and E2E (light) requests per replica</text>",
        hh = top + h + 24.0
    );
    for (i, r) in e.replicas.iter().enumerate() {
        let x = 40.0 + slot * i as f64;
        let bw = (slot * 0.4).min(30.0);
        for (k, (v, f, what)) in [
            (r.ttft_tail, "#d62728", "TTFT"),
            (r.e2e_tail, "#f4a582", "E2E"),
        ]
        .into_iter()
        .enumerate()
        {
            let bh = h * v as f64 / max;
            let tip = format!(
                "replica {}: {v} of the p99 {what} tail; TTFT p99 {:.1} ms, E2E p99 {:.1} ms, KV max {:.0} %",
                r.replica,
                r.ttft_p99_ms,
                r.e2e_p99_ms,
                r.kv_util_max * 100.0
            );
            let _ = write!(
                s,
                "<rect x=\"{bx:.1}\" y=\"{by:.1}\" width=\"{bw:.1}\" height=\"{bh:.1}\" fill=\"{f}\" data-tip=\"{t}\"><title>{t}</title></rect>",
                bx = x + bw * k as f64,
                by = top + h - bh,
                bh = bh.max(0.5),
                t = esc(&tip)
            );
        }
        let _ = write!(
            s,
            "<text x=\"{tx:.1}\" y=\"{ty}\" text-anchor=\"middle\">{}</text>",
            r.replica,
            tx = x + bw,
            ty = top + h + 16.0
        );
    }
    s.push_str("</svg>");
    s
}

fn sortable(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut h = String::from("<table class=\"sortable\"><thead><tr>");
    for c in header {
        let _ = write!(h, "<th>{}</th>", esc(c));
    }
    h.push_str("</tr></thead><tbody>");
    for r in rows {
        h.push_str("<tr>");
        for c in r {
            let _ = write!(h, "<td>{}</td>", esc(c));
        }
        h.push_str("</tr>");
    }
    h.push_str("</tbody></table>");
    h
}

fn md_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut m = format!(
        "\n| {} |\n|{}\n",
        header.join(" | "),
        header
            .iter()
            .enumerate()
            .map(|(i, _)| if i == 0 { " --- |" } else { " ---: |" })
            .collect::<String>()
    );
    for r in rows {
        let _ = writeln!(
            m,
            "| {} |",
            r.iter()
                .map(|c| c.replace('|', "\\|"))
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
    m
}

fn replica_rows(e: &Explanation) -> Vec<Vec<String>> {
    e.replicas
        .iter()
        .map(|r| {
            vec![
                r.replica.to_string(),
                r.requests.to_string(),
                format!("{:.1}", r.ttft_p50_ms),
                format!("{:.1}", r.ttft_p99_ms),
                format!("{:.1}", r.e2e_p99_ms),
                r.ttft_tail.to_string(),
                r.e2e_tail.to_string(),
                r.preemptions.to_string(),
                format!("{:.0}", r.kv_util_max * 100.0),
                format!("{:.1}", r.waiting_mean),
                r.tail_top
                    .map(|(c, s)| format!("{c} ({:.0} %)", s * 100.0))
                    .unwrap_or_else(|| "–".into()),
            ]
        })
        .collect()
}

const REPLICA_HEADER: [&str; 11] = [
    "replica",
    "requests",
    "TTFT p50 ms",
    "TTFT p99 ms",
    "E2E p99 ms",
    "p99 TTFT tail",
    "p99 E2E tail",
    "preemptions",
    "KV max %",
    "queue mean",
    "tail's largest component",
];

fn band_rows(mb: &explain::MetricBands) -> (Vec<String>, Vec<Vec<String>>) {
    let bands: Vec<&Band> = std::iter::once(&mb.all).chain(&mb.bands).collect();
    let header = std::iter::once("component".to_string())
        .chain(bands.iter().map(|b| band_label(b)))
        .collect();
    let mut rows = vec![
        std::iter::once("requests".to_string())
            .chain(bands.iter().map(|b| b.requests.to_string()))
            .collect(),
        std::iter::once("mean (ms)".to_string())
            .chain(bands.iter().map(|b| format!("{:.1}", b.mean_ms)))
            .collect::<Vec<_>>(),
    ];
    for k in 0..mb.all.components.len() {
        if bands.iter().all(|b| b.components[k].share < 0.0005) {
            continue;
        }
        rows.push(
            std::iter::once(mb.all.components[k].component.to_string())
                .chain(
                    bands
                        .iter()
                        .map(|b| format!("{:.1} %", b.components[k].share * 100.0)),
                )
                .collect(),
        );
    }
    (header, rows)
}

/// The section, or `None` when the run recorded no latency components.
pub fn section(dir: &Path) -> Result<Option<Section>, String> {
    let run = Run::load(dir)?;
    let e = explain::analyze(&run);
    if e.attributed == 0 {
        return Ok(None);
    }
    let mut sec = Section::new("Why: where the latency went");
    sec.para(format!(
        "Each request's latency split into components that add up exactly to its TTFT and E2E (columns attr_*_ms of requests.csv; {} of {} requests carry them). Bars: mean share of each component among the requests at or above each percentile. Hover a bar for its value; click a table header to sort. The same analysis as text: servesim explain {}.",
        e.attributed,
        e.requests,
        dir.display()
    ));
    let mut html = "<a id=\"why\"></a>".to_string();
    let mut md = String::new();
    for mb in &e.metrics {
        html.push_str(&format!("<figure>{}</figure>", bands_svg(mb)));
        let (header, rows) = band_rows(mb);
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let _ = write!(
            md,
            "\n**{}** — mean share per band\n{}",
            mb.metric.label(),
            md_table(&header, &rows)
        );
    }
    if !e.hypotheses.is_empty() {
        html.push_str("<h3>Hypotheses the data supports</h3><ol>");
        md.push_str("\n**Hypotheses the data supports**\n\n");
        for (i, h) in e.hypotheses.iter().enumerate() {
            let ev: Vec<String> = h
                .evidence
                .iter()
                .map(|(k, v)| format!("{k}={v:.4}"))
                .collect();
            let _ = write!(
                html,
                "<li>{}<br>try: {}<br><small style=\"color:#555\">evidence: {}</small></li>",
                esc(&h.statement),
                esc(&h.try_change),
                esc(&ev.join(", "))
            );
            let _ = writeln!(
                md,
                "{}. {} Try: {} (evidence: {})",
                i + 1,
                h.statement,
                h.try_change,
                ev.join(", ")
            );
        }
        html.push_str("</ol>");
    }
    for (id, title, list) in [
        (
            "why-tail-ttft",
            "Slowest requests by TTFT: timeline from arrival (black tick: first token)",
            &e.tail_ttft,
        ),
        (
            "why-tail-e2e",
            "Slowest requests by E2E: timeline from arrival (black tick: first token)",
            &e.tail_e2e,
        ),
    ] {
        if list.is_empty() {
            continue;
        }
        html.push_str(&format!(
            "<figure>{}</figure>",
            timelines_svg(id, title, list)
        ));
        let rows: Vec<Vec<String>> = list
            .iter()
            .map(|t| {
                let phase = |p: &str| {
                    t.phases
                        .iter()
                        .find(|x| x.phase == p)
                        .map(|x| format!("{:.1}", (x.end_s - x.start_s) * 1e3))
                        .unwrap_or_else(|| "–".into())
                };
                vec![
                    t.id.to_string(),
                    t.replica.map_or("–".into(), |r| r.to_string()),
                    t.ttft_ms.map_or("–".into(), |v| format!("{v:.1}")),
                    t.e2e_ms.map_or("–".into(), |v| format!("{v:.1}")),
                    phase("queue"),
                    phase("prefill"),
                    phase("decode"),
                    t.preemptions.to_string(),
                    format!("{:.1}", t.context.running_mean),
                    format!("{:.0}", t.context.kv_util_max * 100.0),
                ]
            })
            .collect();
        let header = [
            "id",
            "replica",
            "TTFT ms",
            "E2E ms",
            "queue ms",
            "prefill ms",
            "decode ms",
            "preemptions",
            "batch mean",
            "KV max %",
        ];
        html.push_str(&sortable(&header, &rows));
        let _ = write!(md, "\n**{title}**\n{}", md_table(&header, &rows));
    }
    if e.replicas.len() > 1 {
        html.push_str(&format!("<figure>{}</figure>", replicas_svg(&e)));
        html.push_str(&sortable(&REPLICA_HEADER, &replica_rows(&e)));
        let _ = write!(
            md,
            "\n**Per replica**\n{}",
            md_table(&REPLICA_HEADER, &replica_rows(&e))
        );
    }
    let legend: Vec<String> = Component::ALL
        .iter()
        .map(|c| format!("{}: {}", c.name(), explain::describe(c.name())))
        .collect();
    sec.para(format!("Components — {}.", legend.join("; ")));
    sec.html(html, md);
    Ok(Some(sec))
}
