//! `trace stats --format servegen`: statistics of a ServeGen folder.

use super::*;

/// Statistics of a ServeGen folder, computed from its descriptors (a
/// generated stream would take billions of requests to cover two weeks).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ServeGenStats {
    pub path: String,
    pub clients: u64,
    pub windows: u64,
    pub span_s: f64,
    /// Sum of client rates per window, requests/s.
    pub aggregate_rate: RateDist,
    /// Share of (client, window) pairs with rate > 0.
    pub active_share: f64,
    /// IAT CV of active client-windows, p50 and p90.
    pub cv_p50: f64,
    pub cv_p90: f64,
    /// Share of all requests (rate × 600 s) from the busiest client, and
    /// from the ten busiest.
    pub top1_share: f64,
    pub top10_share: f64,
    pub gamma_windows: u64,
    pub weibull_windows: u64,
    /// Length PMFs mixed over clients and 6 h windows, each weighted by the
    /// client's requests in that window; absent without dataset files.
    pub input_tokens: Option<crate::workload::trace::stats::LengthStats>,
    pub output_tokens: Option<crate::workload::trace::stats::LengthStats>,
    pub skipped_lines: u64,
}

/// Percentiles of a rate over windows.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RateDist {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// Describes a ServeGen folder (`trace stats --format servegen`).
pub fn describe(cfg: &TraceCfg, key: &str, ctx: &Context) -> Result<ServeGenStats, WorkloadError> {
    let dir = ctx.resolve(&cfg.path);
    let mut report = TraceReport::default();
    let mut per_window: BTreeMap<i64, f64> = BTreeMap::new();
    let (mut rows, mut active, mut cvs) = (0u64, 0u64, Vec::new());
    let (mut gamma, mut weibull) = (0u64, 0u64);
    let mut client_reqs = Vec::new();
    let mut inp: BTreeMap<u32, f64> = BTreeMap::new();
    let mut out: BTreeMap<u32, f64> = BTreeMap::new();
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    let files = chunk_files(&dir, key, ctx)?;
    let mut windows_max = 0u64;
    for (n, trace) in &files {
        let ws = read_windows(trace, key, ctx, cfg.lenient, &mut report)?;
        windows_max = windows_max.max(ws.len() as u64);
        let mut reqs = 0.0;
        for w in &ws {
            rows += 1;
            lo = lo.min(w.start);
            hi = hi.max(w.start + WINDOW_S);
            *per_window.entry(w.start.round() as i64).or_insert(0.0) += w.rate;
            if w.rate > 0.0 {
                active += 1;
                cvs.push(w.cv);
                match w.pattern {
                    Some(Pattern::Gamma) => gamma += 1,
                    Some(Pattern::Weibull) => weibull += 1,
                    None => {}
                }
            }
            reqs += w.rate * WINDOW_S;
        }
        client_reqs.push(reqs);
        let ds_path = dir.join(format!("chunk-{n}-dataset.json"));
        if let Some(mut d) = ds_path
            .exists()
            .then(|| Dataset::read(&ds_path))
            .transpose()?
            .flatten()
        {
            for k in 0..d.windows.len() {
                if d.effective[k] != k {
                    continue; // a window without data
                }
                let start = d.windows[k].0;
                let stop = d.windows.get(k + 1).map_or(f64::INFINITY, |w| w.0);
                let weight: f64 = ws
                    .iter()
                    .filter(|w| w.start >= start && w.start < stop)
                    .map(|w| w.rate * WINDOW_S)
                    .sum();
                if weight <= 0.0 {
                    continue;
                }
                let (dp, dout) = (d.windows[k].1.clone(), d.windows[k].2.clone());
                for (text, acc, field) in [
                    (&dp, &mut inp, "input_tokens"),
                    (&dout, &mut out, "output_tokens"),
                ] {
                    let pairs = parse_pmf(text).ok_or_else(|| WorkloadError::Data {
                        file: d.file.clone(),
                        line: None,
                        message: format!(
                            "window {start}: {field}: not a PMF like {{163: 0.25, ...}}"
                        ),
                    })?;
                    let total: f64 = pairs.iter().map(|p| p.1).sum();
                    for (v, p) in pairs {
                        *acc.entry(v as u32).or_insert(0.0) += weight * p / total;
                    }
                }
            }
            d.cache = None;
        }
    }
    let rates: Vec<f64> = per_window.values().copied().collect();
    let q = |v: &[f64], p: f64| crate::workload::trace::stats::quantile_sorted(v, p);
    let mut sorted = rates.clone();
    sorted.sort_by(f64::total_cmp);
    cvs.sort_by(f64::total_cmp);
    client_reqs.sort_by(|a, b| b.total_cmp(a));
    let total: f64 = client_reqs.iter().sum();
    let lens = |m: &BTreeMap<u32, f64>| {
        (!m.is_empty()).then(|| crate::workload::trace::stats::LengthStats::of_weights(m))
    };
    Ok(ServeGenStats {
        path: dir.display().to_string(),
        clients: files.len() as u64,
        windows: windows_max,
        span_s: if hi > lo { hi - lo } else { 0.0 },
        aggregate_rate: RateDist {
            mean: rates.iter().sum::<f64>() / rates.len().max(1) as f64,
            p50: q(&sorted, 0.5),
            p99: q(&sorted, 0.99),
            max: sorted.last().copied().unwrap_or(0.0),
        },
        active_share: active as f64 / rows.max(1) as f64,
        cv_p50: q(&cvs, 0.5),
        cv_p90: q(&cvs, 0.9),
        top1_share: client_reqs.first().copied().unwrap_or(0.0) / total.max(1e-300),
        top10_share: client_reqs.iter().take(10).sum::<f64>() / total.max(1e-300),
        gamma_windows: gamma,
        weibull_windows: weibull,
        input_tokens: lens(&inp),
        output_tokens: lens(&out),
        skipped_lines: report.skipped_lines,
    })
}
