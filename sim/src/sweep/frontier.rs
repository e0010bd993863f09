//! The throughput–interactivity frontier of a sweep, the chart serving
//! teams compare engines and chips with (SemiAnalysis's InferenceMAX /
//! InferenceX): each point's output tokens per second per GPU against the
//! tokens per second one user sees (1000 / median TPOT in ms) and against
//! the median TTFT, one curve per configuration (the grid's axes other
//! than the load: `workload.rate` or a closed loop's `users`), and the
//! points no other point beats on both — the Pareto frontier. With a price
//! per GPU-hour, each point's dollars per million output tokens comes too.
//!
//! Medians, as InferenceX plots: the interactivity a typical user gets.
//! `frontier.csv` also carries TTFT p99 for a tail view.

use super::objective::{CostMetric, GpuHourPrice, Objective};
use super::pareto::{front, Candidate};
use super::results::{cell, number_at, SweepResults};
use crate::config::keypath;
use std::io::Write;

/// Grid keys that set the offered load (after `keypath` aliases).
pub const LOAD_KEYS: [&str; 2] = ["workload.arrival.rate", "workload.arrival.users"];

/// Header of `frontier.csv`.
pub const COLUMNS: [&str; 14] = [
    "point",
    "configuration",
    "load",
    "gpus",
    "output_tokens_per_s",
    "output_tokens_per_s_per_gpu",
    "tokens_per_s_per_user",
    "tpot_ms_p50",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "usd_per_m_output_tokens",
    "interactivity_frontier",
    "ttft_frontier",
    "settings",
];

/// One sweep point on the chart.
#[derive(Clone, Debug, PartialEq)]
pub struct FrontierPoint {
    /// The sweep point's index.
    pub index: usize,
    /// The values of the axes other than the load ("all points" when the
    /// grid varies the load alone).
    pub configuration: String,
    /// The same values without their keys (a chart's legend, whose title
    /// names the keys: [`Frontier::curve_axes`]).
    pub curve: String,
    /// The load axis's value, when the grid has one.
    pub load: Option<f64>,
    pub gpus: f64,
    pub output_tokens_per_s: f64,
    pub per_gpu: f64,
    /// 1000 / median TPOT (ms): output tokens per second one user sees.
    pub per_user: Option<f64>,
    pub tpot_ms_p50: Option<f64>,
    pub ttft_ms_p50: Option<f64>,
    pub ttft_ms_p99: Option<f64>,
    /// Dollars per million output tokens, with a price.
    pub usd_per_m: Option<f64>,
    /// On the frontier of per-GPU throughput against per-user rate.
    pub on_interactivity_front: bool,
    /// On the frontier of per-GPU throughput against median TTFT.
    pub on_ttft_front: bool,
    /// Every axis and its value.
    pub settings: String,
}

/// A sweep's frontier.
#[derive(Clone, Debug, PartialEq)]
pub struct Frontier {
    /// The load axis as the grid writes it, if any.
    pub load_axis: Option<String>,
    /// Points with throughput, in sweep order.
    pub points: Vec<FrontierPoint>,
    /// Configurations, in order of first appearance.
    pub configurations: Vec<String>,
    /// The axes that tell the curves apart: all but the load, less those
    /// with one value over every point (unless none varies).
    pub curve_axes: Vec<String>,
    /// The one price per GPU-hour every point is billed at, when there is
    /// one: cost per million tokens is then `price / (per_gpu × 3600 / 1e6)`,
    /// a second scale on the per-GPU throughput axis.
    pub usd_per_gpu_hour: Option<f64>,
}

/// Builds the frontier of `results`; `price` gives the cost column.
pub fn frontier(results: &SweepResults, price: Option<&GpuHourPrice>) -> Frontier {
    let load = results
        .axes
        .iter()
        .position(|a| LOAD_KEYS.contains(&keypath::resolve(a)));
    let cost = Objective {
        cost: CostMetric::UsdPerMOutputTokens,
        latency: "ttft_ms.p50".into(),
        attainment: 0.0,
        gpu_hour_usd: price.cloned(),
    };
    // The legend names a curve by the values that tell it apart: an axis
    // with one value over every point (a plan's options sharing a layout)
    // only lengthens it. With none varying, every axis names it.
    let others: Vec<usize> = (0..results.axes.len())
        .filter(|&i| Some(i) != load)
        .collect();
    let varying: Vec<usize> = others
        .iter()
        .copied()
        .filter(|&i| {
            results
                .points
                .iter()
                .any(|p| p.values[i] != results.points[0].values[i])
        })
        .collect();
    let curve_axes = if varying.is_empty() { others } else { varying };
    let mut points = Vec::new();
    let mut configurations: Vec<String> = Vec::new();
    for p in &results.points {
        let s = &p.summary;
        let Some(gpus) = number_at(s, "lifecycle.mean_billed_gpus")
            .or_else(|| number_at(s, "gpus"))
            .filter(|&g| g > 0.0)
        else {
            continue;
        };
        let Some(tps) = number_at(s, "throughput.output_tokens_per_s").filter(|&t| t > 0.0) else {
            continue;
        };
        let stat = |metric: &str, stat: &str| {
            (number_at(s, &format!("latency.{metric}.count")).unwrap_or(0.0) > 0.0)
                .then(|| number_at(s, &format!("latency.{metric}.{stat}")))
                .flatten()
        };
        let tpot = stat("tpot_ms", "p50");
        let others = || (0..results.axes.len()).filter(|&i| Some(i) != load);
        let joined = |parts: Vec<String>| {
            if parts.is_empty() {
                "all points".to_string()
            } else {
                parts.join(", ")
            }
        };
        let configuration = joined(
            others()
                .map(|i| format!("{} = {}", results.axes[i], cell(&p.values[i])))
                .collect(),
        );
        let curve = joined(curve_axes.iter().map(|&i| cell(&p.values[i])).collect());
        if !configurations.contains(&configuration) {
            configurations.push(configuration.clone());
        }
        let settings = results
            .axes
            .iter()
            .zip(&p.values)
            .map(|(k, v)| format!("{k} = {}", cell(v)))
            .collect::<Vec<_>>()
            .join(", ");
        points.push(FrontierPoint {
            index: p.index,
            configuration,
            curve,
            load: load.and_then(|i| p.values[i].as_f64()),
            gpus,
            output_tokens_per_s: tps,
            per_gpu: tps / gpus,
            per_user: tpot.filter(|&t| t > 0.0).map(|t| 1000.0 / t),
            tpot_ms_p50: tpot,
            ttft_ms_p50: stat("ttft_ms", "p50"),
            ttft_ms_p99: stat("ttft_ms", "p99"),
            usd_per_m: price.and_then(|_| cost.cost_of(s)),
            on_interactivity_front: false,
            on_ttft_front: false,
            settings,
        });
    }
    // Both fronts maximise per-GPU throughput: minimise its negative.
    let interactive = front(
        &points
            .iter()
            .enumerate()
            .map(|(k, p)| Candidate {
                id: k,
                x: p.per_user.map_or(f64::NAN, |u| -u),
                y: -p.per_gpu,
            })
            .collect::<Vec<_>>(),
    );
    for c in interactive {
        points[c.id].on_interactivity_front = true;
    }
    let ttft = front(
        &points
            .iter()
            .enumerate()
            .map(|(k, p)| Candidate {
                id: k,
                x: p.ttft_ms_p50.unwrap_or(f64::NAN),
                y: -p.per_gpu,
            })
            .collect::<Vec<_>>(),
    );
    for c in ttft {
        points[c.id].on_ttft_front = true;
    }
    // One $/GPU-hour for all points: what cost × per-GPU throughput gives.
    let rates: Vec<f64> = points
        .iter()
        .filter_map(|p| Some(p.usd_per_m? * p.per_gpu * 3600.0 / 1e6))
        .collect();
    let usd_per_gpu_hour = (rates.len() == points.len() && !rates.is_empty())
        .then(|| rates[0])
        .filter(|&r| {
            rates
                .iter()
                .all(|&x| (x - r).abs() <= 1e-9 * r.abs().max(1.0))
        });
    Frontier {
        load_axis: load.map(|i| results.axes[i].clone()),
        points,
        configurations,
        curve_axes: curve_axes
            .iter()
            .map(|&i| results.axes[i].clone())
            .collect(),
        usd_per_gpu_hour,
    }
}

impl Frontier {
    /// Writes `frontier.csv`: one row per point, in sweep order.
    pub fn write_csv(&self, w: &mut impl Write) -> std::io::Result<()> {
        writeln!(w, "{}", COLUMNS.join(","))?;
        let opt = |v: Option<f64>| v.map(|x| format!("{x:.6}")).unwrap_or_default();
        let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        for p in &self.points {
            writeln!(
                w,
                "{},{},{},{},{:.6},{:.6},{},{},{},{},{},{},{},{}",
                p.index,
                quote(&p.configuration),
                p.load.map(|x| x.to_string()).unwrap_or_default(),
                p.gpus,
                p.output_tokens_per_s,
                p.per_gpu,
                opt(p.per_user),
                opt(p.tpot_ms_p50),
                opt(p.ttft_ms_p50),
                opt(p.ttft_ms_p99),
                opt(p.usd_per_m),
                p.on_interactivity_front as u8,
                p.on_ttft_front as u8,
                quote(&p.settings)
            )?;
        }
        w.flush()
    }

    /// Writes `dir/frontier.csv` whole (through a temporary file).
    pub fn write(&self, dir: &std::path::Path) -> std::io::Result<()> {
        crate::output::write_atomic(&dir.join("frontier.csv"), |w| self.write_csv(w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::results::PointResult;
    use proptest::prelude::*;
    use serde_json::json;

    fn summary(gpus: f64, tps: f64, tpot: f64, ttft: f64) -> serde_json::Value {
        json!({
            "gpus": gpus,
            "hardware": "h100-sxm",
            "throughput": { "output_tokens_per_s": tps },
            "latency": {
                "tpot_ms": { "count": 10, "p50": tpot },
                "ttft_ms": { "count": 10, "p50": ttft, "p99": ttft * 3.0 },
            },
        })
    }

    fn results(points: &[(u32, f64, f64, f64, f64)]) -> SweepResults {
        SweepResults {
            format: crate::sweep::results::FORMAT.into(),
            scenario: "t".into(),
            scenario_path: "t.toml".into(),
            scenario_toml: String::new(),
            grid_toml: String::new(),
            sample: crate::sweep::grid::SampleKind::Cartesian,
            axes: vec!["fleet.replicas".into(), "workload.rate".into()],
            points_total: points.len(),
            shard: None,
            points: points
                .iter()
                .enumerate()
                .map(|(i, &(reps, rate, tps, tpot, ttft))| PointResult {
                    index: i,
                    values: vec![json!(reps), json!(rate)],
                    offered_rps: Some(rate),
                    summary: summary(reps as f64, tps, tpot, ttft),
                })
                .collect(),
        }
    }

    /// Brute force: p is on a front iff no other point is at least as good
    /// on both coordinates and better on one (both maximised).
    fn brute(v: &[(f64, f64)]) -> Vec<bool> {
        v.iter()
            .map(|&(a, b)| !v.iter().any(|&(c, d)| c >= a && d >= b && (c > a || d > b)))
            .collect()
    }

    #[test]
    fn curves_per_configuration_fronts_and_cost() {
        // Two fleet sizes, three rates each.
        let r = results(&[
            (1, 10.0, 1000.0, 10.0, 50.0),
            (1, 20.0, 1800.0, 20.0, 80.0),
            (1, 30.0, 2000.0, 40.0, 400.0),
            (2, 10.0, 1000.0, 8.0, 40.0),
            (2, 20.0, 2000.0, 12.0, 60.0),
            (2, 30.0, 3000.0, 25.0, 90.0),
        ]);
        let f = frontier(&r, Some(&GpuHourPrice::Flat(2.0)));
        assert_eq!(f.load_axis.as_deref(), Some("workload.rate"));
        assert_eq!(
            f.configurations,
            ["fleet.replicas = 1", "fleet.replicas = 2"]
        );
        assert_eq!(f.curve_axes, ["fleet.replicas"]);
        assert_eq!(f.points[3].curve, "2");
        let p = &f.points[1];
        assert_eq!((p.per_gpu, p.per_user), (1800.0, Some(50.0)));
        // $2 per GPU-hour at 1,800 tokens/s per GPU: 2 / 6.48 $ per M.
        assert!((p.usd_per_m.unwrap() - 2.0 / 6.48).abs() < 1e-12);
        assert_eq!(f.usd_per_gpu_hour, Some(2.0));
        let on: Vec<usize> = f
            .points
            .iter()
            .filter(|p| p.on_interactivity_front)
            .map(|p| p.index)
            .collect();
        // (per user, per GPU): 0 (100, 1000), 1 (50, 1800), 2 (25, 2000),
        // 3 (125, 500), 4 (83, 1000) beaten by 0, 5 (40, 1500) beaten by 1.
        assert_eq!(on, [0, 1, 2, 3]);
        let mut out = Vec::new();
        f.write_csv(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 7);
        assert!(text.starts_with(&COLUMNS.join(",")));
        assert!(text.contains("\"fleet.replicas = 2\",10,2,"));
        // Without a price: no cost, no second scale.
        let f = frontier(&r, None);
        assert!(f.points.iter().all(|p| p.usd_per_m.is_none()));
        assert_eq!(f.usd_per_gpu_hour, None);
    }

    proptest! {
        #[test]
        fn fronts_match_brute_force(
            pts in proptest::collection::vec((1u32..4, 1u32..6, 1u32..6, 1u32..6), 1..24)
        ) {
            // Few distinct values: ties are common.
            let r = results(&pts.iter().map(|&(g, t, tpot, ttft)| {
                (g, 1.0, (t * 100 * g) as f64, (tpot * 5) as f64, (ttft * 10) as f64)
            }).collect::<Vec<_>>());
            let f = frontier(&r, None);
            let inter: Vec<(f64, f64)> =
                f.points.iter().map(|p| (p.per_user.unwrap(), p.per_gpu)).collect();
            let ttft: Vec<(f64, f64)> =
                f.points.iter().map(|p| (-p.ttft_ms_p50.unwrap(), p.per_gpu)).collect();
            let got_i: Vec<bool> = f.points.iter().map(|p| p.on_interactivity_front).collect();
            let got_t: Vec<bool> = f.points.iter().map(|p| p.on_ttft_front).collect();
            prop_assert_eq!(got_i, brute(&inter));
            prop_assert_eq!(got_t, brute(&ttft));
        }
    }
}
