//! The report of a capacity search (`capacity.json`): the highest load within
//! the SLOs, the fleet a demand needs (with headroom, spares and monthly
//! cost), and the probes behind both as saturation curves.

use crate::chart::{self, Chart, Legend, Mark, RefLine, Series, XyPlot, PALETTE, TARGET};
use crate::document::Section;
use sim::sweep::capacity::{CapacityReport, Probe};
use std::path::Path;

/// Reads `dir/capacity.json`.
pub fn read(dir: &Path) -> Result<CapacityReport, String> {
    CapacityReport::read(&dir.join("capacity.json")).map_err(|e| e.0)
}

/// A probe's count as the search counted it: replicas, or with pools
/// units of them ("2 units (2 prefill + 4 decode)").
fn count(c: &CapacityReport, n: u32) -> String {
    sim::sweep::capacity::fleet_count(c.unit.as_ref(), n)
}

fn probe_text(p: &Probe) -> String {
    format!(
        "{:.2} % met, TTFT p99 {:.1} ms, TPOT p99 {:.2} ms",
        p.attainment * 100.0,
        p.ttft_p99_ms,
        p.tpot_p99_ms
    )
}

/// Builds the capacity section, drawing its charts into `charts`.
pub fn section(dir: &Path, charts: &Path) -> Result<Section, String> {
    let c = read(dir)?;
    let mut sec = Section::new(format!("Capacity: {}", c.scenario));
    sec.para(format!(
        "A load is sustained when at least {:.1} % of requests meet {}. Every figure below is a simulation of the scenario with only the arrival rate and the replica count changed ({} simulations).",
        c.attainment_target * 100.0,
        sim::report::describe_slo(
            [c.slo_ttft_ms, c.slo_tpot_ms, c.slo_e2e_ms],
            &c.slo_percentiles_ms,
            " and "
        ),
        c.probes.len()
    ));
    let m = &c.max_load;
    let mut rows = vec![
        vec![
            format!("highest rate within the SLOs, {}", count(&c, m.replicas)),
            format!(
                "{} requests/s ({} per replica)",
                sim::sig_figs::rate(m.rate_rps),
                sim::sig_figs::rate(m.per_replica_rps)
            ),
        ],
        vec!["at that rate".into(), probe_text(&m.at)],
        vec![
            "lowest rate probed that misses them".into(),
            format!("{} requests/s", sim::sig_figs::rate(m.fails_at_rps)),
        ],
    ];
    // With pools the searches count units of them.
    let what = if c.unit.is_some() {
        "units"
    } else {
        "replicas"
    };
    if let Some(s) = &c.sizing {
        rows.push(vec![
            "peak demand".into(),
            format!("{} requests/s", sim::sig_figs::rate(s.demand_rps)),
        ]);
        rows.push(vec![
            format!("fewest {what} at the demand"),
            format!("{} ({})", count(&c, s.replicas_min), probe_text(&s.at_min)),
        ]);
        if let Some(b) = &s.below_min {
            rows.push(vec![
                format!("with {}", count(&c, b.replicas)),
                probe_text(b),
            ]);
        }
        if s.headroom > 0.0 {
            rows.push(vec![
                format!(
                    "fewest {what} with {:.0} % headroom ({} requests/s)",
                    s.headroom * 100.0,
                    sim::sig_figs::rate(s.sized_for_rps)
                ),
                format!(
                    "{} ({})",
                    count(&c, s.replicas_with_headroom),
                    probe_text(&s.at_headroom)
                ),
            ]);
        }
        rows.push(vec![
            format!("fleet with {} spare {what} (N+{})", s.spare, s.spare),
            format!("{} = {} GPUs", count(&c, s.replicas_total), s.gpus_total),
        ]);
        rows.push(vec![
            "cost per month".into(),
            match (s.usd_per_month, s.gpu_hour_usd) {
                (Some(m), Some(p)) => format!(
                    "${m:.0} ({} GPUs × ${p:.2}/GPU-hour × {} h)",
                    s.gpus_total, c.hours_per_month
                ),
                _ => "no price stated (--gpu-hour-usd)".into(),
            },
        ]);
    }
    sec.table(&["capacity", "result"], rows);
    for ch in charts_of(&c) {
        sec.figure(chart::render(&ch, charts)?);
    }
    Ok(sec)
}

fn sorted(mut v: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

fn charts_of(c: &CapacityReport) -> Vec<Chart> {
    let m = &c.max_load;
    let rate: Vec<&Probe> = c.probes.iter().filter(|p| p.search == "rate").collect();
    let target = RefLine {
        label: format!("target {:.1} %", c.attainment_target * 100.0),
        at: c.attainment_target * 100.0,
        vertical: false,
        color: TARGET,
    };
    let found = RefLine {
        label: format!(
            "highest within the SLOs: {} req/s",
            sim::sig_figs::rate(m.rate_rps)
        ),
        at: m.rate_rps,
        vertical: true,
        color: PALETTE[2],
    };
    let mut out = Vec::new();

    let mut a = XyPlot::new(
        "capacity-rate",
        format!(
            "SLO attainment vs offered load — {}, {}",
            c.scenario,
            count(c, m.replicas)
        ),
        "offered load (requests/s)",
        "requests meeting the SLOs (%)",
    );
    a.series.push(Series::new(
        "simulated probe",
        sorted(
            rate.iter()
                .map(|p| (p.rate_rps, p.attainment * 100.0))
                .collect(),
        ),
        Mark::LinePoints,
        PALETTE[0],
    ));
    a.ref_lines = vec![target.clone(), found.clone()];
    a.y_range = Some((0.0, 105.0));
    // Attainment is high at low load (left) and low past the limit (right).
    a.legend = Legend::UpperRight;
    out.push(Chart::Xy(a));

    let lat: Vec<(f64, f64)> = rate.iter().map(|p| (p.rate_rps, p.ttft_p99_ms)).collect();
    // The TTFT target drawn: the p99 target (the statistic plotted) when
    // given, else the per-request threshold.
    let ttft_target = match (c.slo_percentiles_ms.get("ttft_p99_ms"), c.slo_ttft_ms) {
        (Some(&t), _) => Some((format!("SLO: TTFT p99 ≤ {t} ms"), t)),
        (None, Some(t)) => Some((format!("SLO: TTFT ≤ {t} ms"), t)),
        (None, None) => None,
    };
    let y_log = chart::wants_log(
        lat.iter()
            .map(|p| p.1)
            .chain(ttft_target.as_ref().map(|t| t.1)),
    );
    let mut l = XyPlot::new(
        "capacity-latency",
        format!(
            "TTFT p99 vs offered load — {}, {}",
            c.scenario,
            count(c, m.replicas)
        ),
        "offered load (requests/s)",
        format!("TTFT p99 (ms{})", if y_log { ", log scale" } else { "" }),
    );
    l.y_log = y_log;
    l.series.push(Series::new(
        "simulated probe",
        sorted(lat),
        Mark::LinePoints,
        PALETTE[0],
    ));
    l.ref_lines = ttft_target
        .map(|(label, at)| RefLine {
            label,
            at,
            vertical: false,
            color: TARGET,
        })
        .into_iter()
        .chain([found])
        .collect();
    l.legend = Legend::UpperLeft;
    out.push(Chart::Xy(l));

    if let Some(s) = &c.sizing {
        let mut r = XyPlot::new(
            "capacity-replicas",
            format!("SLO attainment vs fleet size — {}", c.scenario),
            match &c.unit {
                Some(u) => format!("units of {}", u.shape),
                None => "replicas".into(),
            },
            "requests meeting the SLOs (%)",
        );
        for (i, (search, label)) in [
            (
                "demand",
                format!("at the demand, {} req/s", sim::sig_figs::rate(s.demand_rps)),
            ),
            (
                "demand+headroom",
                format!(
                    "with headroom, {} req/s",
                    sim::sig_figs::rate(s.sized_for_rps)
                ),
            ),
        ]
        .into_iter()
        .enumerate()
        {
            let pts: Vec<(f64, f64)> = c
                .probes
                .iter()
                .filter(|p| p.search == search)
                .map(|p| (p.replicas as f64, p.attainment * 100.0))
                .collect();
            if !pts.is_empty() {
                r.series.push(Series::new(
                    label,
                    sorted(pts),
                    Mark::LinePoints,
                    PALETTE[[0, 3][i]],
                ));
            }
        }
        r.ref_lines = vec![target];
        r.x_integer = true;
        r.y_range = Some((0.0, 105.0));
        r.legend = Legend::LowerRight;
        out.push(Chart::Xy(r));
    }
    out
}
