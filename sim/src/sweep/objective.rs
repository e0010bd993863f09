//! The operating point of a sweep: the Pareto front of cost against a latency
//! percentile, and the best point under the SLOs.
//!
//! A point *meets the SLOs* when the share of its requests meeting every
//! per-request threshold of the scenario's `[slo]` (TTFT ≤ `ttft_ms`, TPOT ≤
//! `tpot_ms`, E2E ≤ `e2e_ms`, those given; a rejection counting as a miss)
//! is at least `attainment` — DistServe's SLO attainment (Zhong et al.,
//! OSDI '24) — and every percentile target (`ttft_p99_ms`, ...) holds.
//! Among those, the best point has the
//! highest goodput per GPU (requests per second meeting the SLOs, per GPU).
//! Goodput within [`GOODPUT_TIE`] of the highest counts as a tie — points
//! serving the same load at the same size differ only by how long their runs
//! took to drain — and ties go to the cheaper point, then the lower latency,
//! then the lower index.
//!
//! Cost is in GPUs unless a price per GPU-hour is stated — one for every
//! GPU, or one per hardware option (`{ "h100-sxm" = 2.49, "h200" = 3.49 }`);
//! no price is ever assumed.

use super::pareto::{self, Candidate};
use super::results::{number_at, SweepResults};
use crate::report::Summary;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a point costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostMetric {
    /// GPUs in the fleet (replicas × tensor parallelism).
    Gpus,
    /// GPUs × the stated price per GPU-hour.
    UsdPerHour,
    /// Dollars per million output tokens at the point's throughput.
    UsdPerMOutputTokens,
    /// GPU-hours per million output tokens (no price needed).
    GpuHoursPerMOutputTokens,
}

impl CostMetric {
    pub fn name(self) -> &'static str {
        match self {
            CostMetric::Gpus => "gpus",
            CostMetric::UsdPerHour => "usd_per_hour",
            CostMetric::UsdPerMOutputTokens => "usd_per_m_output_tokens",
            CostMetric::GpuHoursPerMOutputTokens => "gpu_hours_per_m_output_tokens",
        }
    }

    fn needs_price(self) -> bool {
        matches!(
            self,
            CostMetric::UsdPerHour | CostMetric::UsdPerMOutputTokens
        )
    }
}

/// The price of one GPU for one hour, US dollars: one for every GPU, or one
/// per hardware option, keyed by catalog preset (or alias) or by the
/// hardware's name (`[hardware.spec] name`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum GpuHourPrice {
    Flat(f64),
    PerHardware(std::collections::BTreeMap<String, f64>),
}

/// Read by hand rather than as an untagged enum, so that a price written
/// as text (`"2.49"`) or a table holding one says which and what to write,
/// not "did not match any variant".
impl<'de> Deserialize<'de> for GpuHourPrice {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{self, MapAccess, Visitor};
        struct Price;
        const WANT: &str = "a number of US dollars per GPU-hour (2.49), or one per hardware option ({ \"h100-sxm\" = 2.49, \"h200\" = 3.49 })";
        impl<'de> Visitor<'de> for Price {
            type Value = GpuHourPrice;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(WANT)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<GpuHourPrice, E> {
                Ok(GpuHourPrice::Flat(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<GpuHourPrice, E> {
                Ok(GpuHourPrice::Flat(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<GpuHourPrice, E> {
                Ok(GpuHourPrice::Flat(v as f64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<GpuHourPrice, E> {
                Err(E::custom(format!(
                    "the price {v:?} is text: write the number without quotes; expected {WANT}"
                )))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<GpuHourPrice, A::Error> {
                let mut out = std::collections::BTreeMap::new();
                while let Some(k) = m.next_key::<String>()? {
                    let v: toml::Value = m.next_value()?;
                    let p = match &v {
                        toml::Value::Float(f) => *f,
                        toml::Value::Integer(i) => *i as f64,
                        other => {
                            return Err(de::Error::custom(format!(
                                "the price of {k:?} is {other} ({}): write a number of US dollars per GPU-hour without quotes",
                                other.type_str()
                            )))
                        }
                    };
                    out.insert(k, p);
                }
                Ok(GpuHourPrice::PerHardware(out))
            }
        }
        d.deserialize_any(Price)
    }
}

impl GpuHourPrice {
    /// The price of a GPU of `hardware` (the name a summary reports).
    pub fn of(&self, hardware: &str) -> Option<f64> {
        match self {
            GpuHourPrice::Flat(p) => Some(*p),
            GpuHourPrice::PerHardware(m) => m
                .iter()
                .find(|(k, _)| same_hardware(k, hardware))
                .map(|(_, &p)| p),
        }
    }

    /// "$2.50" or "$2.49 h100-sxm, $3.49 h200".
    pub fn describe(&self) -> String {
        match self {
            GpuHourPrice::Flat(p) => format!("${p:.2}"),
            GpuHourPrice::PerHardware(m) => m
                .iter()
                .map(|(k, p)| format!("${p:.2} {k}"))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// The hardware options priced, when priced per option.
    pub fn options(&self) -> Vec<&str> {
        match self {
            GpuHourPrice::Flat(_) => Vec::new(),
            GpuHourPrice::PerHardware(m) => m.keys().map(String::as_str).collect(),
        }
    }
}

/// Whether a price key names `hardware` (a summary's hardware name): the
/// name itself, or a catalog preset or alias whose datasheet has that name.
pub fn same_hardware(key: &str, hardware: &str) -> bool {
    key.eq_ignore_ascii_case(hardware)
        || crate::catalog::hardware(key).is_some_and(|h| h.name.eq_ignore_ascii_case(hardware))
}

/// The `[objective]` table of a grid file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectiveCfg {
    /// Default: `usd_per_hour` with a price, `gpus` without.
    #[serde(default)]
    pub cost: Option<CostMetric>,
    /// A latency statistic of the summary, `<metric>.<stat>` under
    /// `latency` (e.g. `ttft_ms.p99`, `e2e_ms.p50`). Default `ttft_ms.p99`.
    #[serde(default)]
    pub latency: Option<String>,
    /// Share of requests that must meet the SLOs. Default 0.99.
    #[serde(default)]
    pub attainment: Option<f64>,
    /// Price of one GPU for one hour, in US dollars (one, or one per
    /// hardware option).
    #[serde(default)]
    pub gpu_hour_usd: Option<GpuHourPrice>,
}

/// The latency statistic used when the grid names none.
pub const DEFAULT_LATENCY: &str = "ttft_ms.p99";
/// The SLO attainment target used when the grid names none.
pub const DEFAULT_ATTAINMENT: f64 = 0.99;

/// The latency statistics a summary has (`ttft_ms.p99`, …), from its shape.
pub fn latency_stats() -> Vec<String> {
    let v = serde_json::to_value(Summary::default()).expect("summary serializes");
    let mut out = Vec::new();
    if let Some(Value::Object(m)) = v.get("latency") {
        for (metric, d) in m {
            if let Value::Object(stats) = d {
                for stat in stats.keys().filter(|s| *s != "count") {
                    out.push(format!("{metric}.{stat}"));
                }
            }
        }
    }
    out
}

impl ObjectiveCfg {
    /// Checks the values; errors are (key, message).
    pub fn check(&self) -> Result<(), (String, String)> {
        if let Some(a) = self.attainment {
            if !(a > 0.0 && a <= 1.0) {
                return Err((
                    "attainment".into(),
                    format!("must be in (0, 1] (0.99 means 99 % of requests), got {a}"),
                ));
            }
        }
        let prices: Vec<(String, f64)> = match &self.gpu_hour_usd {
            None => Vec::new(),
            Some(GpuHourPrice::Flat(p)) => vec![("gpu_hour_usd".into(), *p)],
            Some(GpuHourPrice::PerHardware(m)) if m.is_empty() => {
                return Err((
                    "gpu_hour_usd".into(),
                    "gives no price: write one price, or one per hardware option, e.g. { \"h100-sxm\" = 2.49, \"h200\" = 3.49 }".into(),
                ))
            }
            Some(GpuHourPrice::PerHardware(m)) => m
                .iter()
                .map(|(k, &p)| (format!("gpu_hour_usd.{k}"), p))
                .collect(),
        };
        for (k, p) in prices {
            crate::bounds::GPU_HOUR_USD.check(p).map_err(|m| (k, m))?;
        }
        // Two keys for one datasheet ("h100" and "h100-sxm") would price
        // the same GPU twice, one of them silently unused.
        if let Some(GpuHourPrice::PerHardware(m)) = &self.gpu_hour_usd {
            let canonical = |k: &str| {
                crate::catalog::hardware(k)
                    .map(|h| h.name.to_ascii_lowercase())
                    .unwrap_or_else(|| k.to_ascii_lowercase())
            };
            let keys: Vec<&String> = m.keys().collect();
            for (i, a) in keys.iter().enumerate() {
                if let Some(b) = keys[..i].iter().find(|b| canonical(b) == canonical(a)) {
                    return Err((
                        format!("gpu_hour_usd.{a}"),
                        format!(
                            "{b:?} and {a:?} name the same hardware ({}); give it one price",
                            crate::catalog::hardware(a).map_or_else(|| a.to_string(), |h| h.name)
                        ),
                    ));
                }
            }
        }
        if let Some(c) = self.cost {
            if c.needs_price() && self.gpu_hour_usd.is_none() {
                return Err((
                    "cost".into(),
                    format!(
                        "{} needs a price: set gpu_hour_usd (US dollars per GPU-hour), or use gpus / gpu_hours_per_m_output_tokens",
                        c.name()
                    ),
                ));
            }
        }
        if let Some(l) = &self.latency {
            let stats = latency_stats();
            let l = l.strip_prefix("latency.").unwrap_or(l);
            if !stats.iter().any(|s| s == l) {
                return Err((
                    "latency".into(),
                    format!(
                        "unknown latency statistic {l:?}; known: {}",
                        stats.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The objective with defaults filled in (call after `check`).
    pub fn resolve(&self) -> Objective {
        let latency = self.latency.as_deref().unwrap_or(DEFAULT_LATENCY);
        Objective {
            cost: self.cost.unwrap_or(if self.gpu_hour_usd.is_some() {
                CostMetric::UsdPerHour
            } else {
                CostMetric::Gpus
            }),
            latency: latency
                .strip_prefix("latency.")
                .unwrap_or(latency)
                .to_string(),
            attainment: self.attainment.unwrap_or(DEFAULT_ATTAINMENT),
            gpu_hour_usd: self.gpu_hour_usd.clone(),
        }
    }
}

/// Dollars per hour of a point's fleet: `gpus` at the price of its hardware,
/// or each pool's GPUs at its own hardware's price (a fleet of pools may mix
/// hardware); `None` when a hardware has no price.
fn dollars_per_hour(price: &GpuHourPrice, summary: &Value, gpus: f64) -> Option<f64> {
    if let GpuHourPrice::Flat(p) = price {
        return Some(gpus * p);
    }
    let pools = summary.get("pools").and_then(Value::as_array);
    match pools.filter(|p| !p.is_empty()) {
        // An autoscaled fleet bills its mean GPUs: priced at the first
        // pool's hardware only when there is one hardware.
        Some(pools) if summary.pointer("/lifecycle/mean_billed_gpus").is_none() => pools
            .iter()
            .map(|p| Some(number_at(p, "gpus")? * price.of(p.get("hardware")?.as_str()?)?))
            .sum(),
        _ => Some(gpus * price.of(summary.get("hardware")?.as_str()?)?),
    }
}

/// A resolved objective.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Objective {
    pub cost: CostMetric,
    /// `<metric>.<stat>` under the summary's `latency`.
    pub latency: String,
    pub attainment: f64,
    pub gpu_hour_usd: Option<GpuHourPrice>,
}

impl Objective {
    /// The point's cost; `None` when undefined (no throughput, no price).
    pub fn cost_of(&self, summary: &Value) -> Option<f64> {
        // An autoscaled run is billed its mean GPUs over the run (idle,
        // standby and cold starts included), not its starting fleet.
        let gpus = number_at(summary, "lifecycle.mean_billed_gpus")
            .or_else(|| number_at(summary, "gpus"))?;
        let price = self
            .gpu_hour_usd
            .as_ref()
            .and_then(|p| dollars_per_hour(p, summary, gpus));
        let mtok_per_hour = || {
            number_at(summary, "throughput.output_tokens_per_s")
                .map(|t| t * 3600.0 / 1e6)
                .filter(|&m| m > 0.0)
        };
        match self.cost {
            CostMetric::Gpus => Some(gpus),
            CostMetric::UsdPerHour => price,
            CostMetric::UsdPerMOutputTokens => Some(price? / mtok_per_hour()?),
            CostMetric::GpuHoursPerMOutputTokens => Some(gpus / mtok_per_hour()?),
        }
    }

    /// The latency statistic, ms; `None` when no request contributed to it.
    pub fn latency_of(&self, summary: &Value) -> Option<f64> {
        let (metric, _) = self.latency.split_once('.')?;
        let count = number_at(summary, &format!("latency.{metric}.count"))?;
        (count > 0.0)
            .then(|| number_at(summary, &format!("latency.{}", self.latency)))
            .flatten()
    }

    /// Decimals worth printing for a cost.
    pub fn cost_digits(&self) -> usize {
        match self.cost {
            CostMetric::Gpus => 0,
            CostMetric::UsdPerHour => 2,
            CostMetric::UsdPerMOutputTokens => 3,
            CostMetric::GpuHoursPerMOutputTokens => 4,
        }
    }

    /// Axis label of the cost, with its unit and the price it assumes.
    pub fn cost_label(&self) -> String {
        let at = |p: &Option<GpuHourPrice>| {
            p.as_ref()
                .map(|p| format!(" at {}/GPU-hour", p.describe()))
                .unwrap_or_default()
        };
        match self.cost {
            CostMetric::Gpus => "fleet size (GPUs)".into(),
            CostMetric::UsdPerHour => format!("fleet cost ($/hour{})", at(&self.gpu_hour_usd)),
            CostMetric::UsdPerMOutputTokens => {
                format!("cost ($ per 1M output tokens{})", at(&self.gpu_hour_usd))
            }
            CostMetric::GpuHoursPerMOutputTokens => "GPU-hours per 1M output tokens".into(),
        }
    }

    /// Axis label of the latency statistic ("TTFT p99 (ms)").
    pub fn latency_label(&self) -> String {
        let (metric, stat) = self.latency.split_once('.').unwrap_or((&self.latency, ""));
        let name = metric
            .trim_end_matches("_ms")
            .replace('_', " ")
            .to_uppercase();
        format!("{name} {stat} (ms)")
    }
}

/// One point as the objective sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evaluated {
    pub index: usize,
    pub cost: Option<f64>,
    pub latency_ms: Option<f64>,
    /// SLO attainment; `None` when the scenario has no `[slo]`.
    pub attainment: Option<f64>,
    pub goodput_rps_per_gpu: Option<f64>,
    /// Whether the scenario's percentile targets hold (with any given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentiles_met: Option<bool>,
    pub meets_slo: bool,
}

/// The operating-point analysis of a sweep (`operating-point.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Analysis {
    pub objective: Objective,
    /// The SLO targets the points were judged by, ms.
    pub slo_ttft_ms: Option<f64>,
    pub slo_tpot_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_e2e_ms: Option<f64>,
    /// The percentile targets the points were judged by, ms, by `[slo]` key.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub slo_percentiles_ms: std::collections::BTreeMap<String, f64>,
    pub points: Vec<Evaluated>,
    /// Indices of the Pareto-optimal points among those meeting the SLOs
    /// (all points when the scenario has none), cheapest first.
    pub pareto_front: Vec<usize>,
    /// The best point under the SLOs, if any meets them.
    pub best: Option<usize>,
    /// Why there is no best point, when there is none.
    pub note: Option<String>,
}

/// Relative goodput difference below which two points count as equally
/// productive (1 %): the run's span includes draining the last requests, so
/// equal served load shows up as goodput differing by a fraction of a percent.
pub const GOODPUT_TIE: f64 = 0.01;

/// The best point meeting the SLOs: most goodput per GPU (ties within
/// [`GOODPUT_TIE`]), then least cost, lowest latency, lowest index.
fn best_point(points: &[Evaluated]) -> Option<usize> {
    let g = |e: &Evaluated| e.goodput_rps_per_gpu.unwrap_or(0.0);
    let ok: Vec<&Evaluated> = points.iter().filter(|e| e.meets_slo).collect();
    let top = ok.iter().map(|e| g(e)).fold(f64::NEG_INFINITY, f64::max);
    let inf = |v: Option<f64>| v.unwrap_or(f64::INFINITY);
    ok.into_iter()
        .filter(|e| g(e) >= top * (1.0 - GOODPUT_TIE))
        .min_by(|a, b| {
            inf(a.cost)
                .total_cmp(&inf(b.cost))
                .then(inf(a.latency_ms).total_cmp(&inf(b.latency_ms)))
                .then(a.index.cmp(&b.index))
        })
        .map(|e| e.index)
}

/// Evaluates every point, finds the Pareto front and the best point.
pub fn analyze(results: &SweepResults, objective: &Objective) -> Analysis {
    let points: Vec<Evaluated> = results
        .points
        .iter()
        .map(|p| {
            let s = &p.summary;
            let attainment = number_at(s, "slo.attainment");
            let completed = number_at(s, "counts.completed").unwrap_or(0.0);
            let percentiles_met = s.pointer("/slo/percentiles_met").and_then(Value::as_bool);
            Evaluated {
                index: p.index,
                cost: objective.cost_of(s),
                latency_ms: objective.latency_of(s),
                attainment,
                goodput_rps_per_gpu: number_at(s, "slo.goodput_rps_per_gpu"),
                percentiles_met,
                // A run whose backlog kept growing has no steady-state figure
                // (see `steady_state`); summaries from before the verdict pass.
                meets_slo: completed > 0.0
                    && attainment.is_some_and(|a| a >= objective.attainment)
                    && percentiles_met != Some(false)
                    && s.pointer("/load/verdict").is_none_or(|v| v != "overloaded"),
            }
        })
        .collect();
    let first_slo = results
        .points
        .iter()
        .find_map(|p| p.summary.get("slo").filter(|v| !v.is_null()));
    // The front is over the points that meet the SLOs (when there are SLOs):
    // a cheap point that fails them is no trade-off to offer. The others
    // stay in `points`, marked, and are drawn apart.
    let candidates: Vec<Candidate> = points
        .iter()
        .filter(|e| first_slo.is_none() || e.meets_slo)
        .filter_map(|e| {
            Some(Candidate {
                id: e.index,
                x: e.cost?,
                y: e.latency_ms?,
            })
        })
        .collect();
    let pareto_front = pareto::front(&candidates).iter().map(|c| c.id).collect();
    let best = best_point(&points);
    let note = if best.is_some() {
        None
    } else if first_slo.is_none() {
        Some("the scenario has no [slo]: add targets (ttft_ms, tpot_ms, or percentile targets such as ttft_p99_ms) to choose an operating point".into())
    } else if let n @ 1.. = points
        .iter()
        .filter(|e| {
            e.percentiles_met == Some(false)
                && e.attainment.is_some_and(|a| a >= objective.attainment)
        })
        .count()
    {
        Some(format!(
            "no point meets the SLOs: {n} reach {:.1} % attainment but miss a percentile target: widen the grid toward more capacity",
            objective.attainment * 100.0
        ))
    } else {
        let top = points
            .iter()
            .filter_map(|e| e.attainment)
            .fold(f64::NEG_INFINITY, f64::max);
        Some(format!(
            "no point meets the SLOs at {:.1} % attainment (the best reaches {:.1} %): widen the grid toward more capacity",
            objective.attainment * 100.0,
            top.max(0.0) * 100.0
        ))
    };
    Analysis {
        objective: objective.clone(),
        slo_ttft_ms: first_slo.and_then(|s| number_at(s, "ttft_ms")),
        slo_tpot_ms: first_slo.and_then(|s| number_at(s, "tpot_ms")),
        slo_e2e_ms: first_slo.and_then(|s| number_at(s, "e2e_ms")),
        slo_percentiles_ms: first_slo
            .and_then(|s| s.get("percentiles"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| {
                Some((
                    v.get("key")?.as_str()?.to_string(),
                    v.get("target_ms")?.as_f64()?,
                ))
            })
            .collect(),
        points,
        pareto_front,
        best,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::grid::SampleKind;
    use crate::sweep::results::{PointResult, FORMAT};
    use serde_json::json;

    fn point(index: usize, gpus: u32, p99: f64, attain: f64, good: f64) -> PointResult {
        PointResult {
            index,
            values: vec![json!(gpus)],
            offered_rps: Some(10.0),
            summary: json!({
                "gpus": gpus,
                "counts": {"completed": 100},
                "throughput": {"output_tokens_per_s": 1000.0 * gpus as f64},
                "latency": {"ttft_ms": {"count": 100, "p99": p99}},
                "slo": {"attainment": attain, "goodput_rps_per_gpu": good, "ttft_ms": 500.0, "tpot_ms": 50.0},
            }),
        }
    }

    fn sweep(points: Vec<PointResult>) -> SweepResults {
        SweepResults {
            format: FORMAT.into(),
            scenario: "s".into(),
            scenario_path: "s.toml".into(),
            scenario_toml: String::new(),
            grid_toml: String::new(),
            sample: SampleKind::Cartesian,
            axes: vec!["fleet.replicas".into()],
            points_total: points.len(),
            shard: None,
            points,
        }
    }

    #[test]
    fn best_point_meets_the_slo_with_the_most_goodput_per_gpu() {
        let r = sweep(vec![
            point(0, 2, 9000.0, 0.40, 1.0),
            point(1, 4, 600.0, 0.985, 2.4),
            point(2, 6, 300.0, 0.995, 1.66),
            point(3, 8, 250.0, 0.999, 1.25),
            point(4, 8, 260.0, 0.999, 1.25),
        ]);
        let obj = ObjectiveCfg::default().resolve();
        assert_eq!(obj.cost, CostMetric::Gpus);
        let a = analyze(&r, &obj);
        // Points 0 and 1 miss the 99 % target: the front is over 2, 3, 4.
        assert_eq!(a.pareto_front, [2, 3]);
        assert_eq!(a.best, Some(2));
        assert_eq!(a.slo_ttft_ms, Some(500.0));
        assert!(!a.points[1].meets_slo && a.points[2].meets_slo);
        // A looser target admits the 4-GPU point, which has more goodput per GPU.
        let loose = ObjectiveCfg {
            attainment: Some(0.98),
            ..Default::default()
        };
        assert_eq!(analyze(&r, &loose.resolve()).best, Some(1));
        // Goodput within 1 % is a tie: the cheaper point wins, then the faster.
        let r2 = sweep(vec![
            point(0, 4, 300.0, 0.999, 5.00),
            point(1, 4, 200.0, 0.999, 4.97),
            point(2, 2, 400.0, 0.999, 4.96),
            point(3, 2, 350.0, 0.999, 4.80),
        ]);
        assert_eq!(analyze(&r2, &obj).best, Some(2));
        let r3 = sweep(vec![
            point(0, 4, 300.0, 0.999, 5.00),
            point(1, 4, 200.0, 0.999, 4.97),
        ]);
        assert_eq!(analyze(&r3, &obj).best, Some(1));
        // Nothing meets 99.99 %.
        let strict = ObjectiveCfg {
            attainment: Some(0.9999),
            ..Default::default()
        };
        let a = analyze(&r, &strict.resolve());
        assert_eq!(a.best, None);
        assert!(a.note.unwrap().contains("99.9 %"));
    }

    #[test]
    fn costs_use_the_stated_price_only() {
        let s = point(0, 4, 100.0, 1.0, 1.0).summary;
        let priced = ObjectiveCfg {
            gpu_hour_usd: Some(GpuHourPrice::Flat(2.0)),
            ..Default::default()
        }
        .resolve();
        assert_eq!(priced.cost, CostMetric::UsdPerHour);
        assert_eq!(priced.cost_of(&s), Some(8.0));
        let per_tok = Objective {
            cost: CostMetric::UsdPerMOutputTokens,
            ..priced.clone()
        };
        // 4 GPUs × $2 = $8/hour for 4000 tok/s = 14.4 M tok/hour.
        assert!((per_tok.cost_of(&s).unwrap() - 8.0 / 14.4).abs() < 1e-12);
        let gpu_h = Objective {
            cost: CostMetric::GpuHoursPerMOutputTokens,
            gpu_hour_usd: None,
            ..priced
        };
        assert!((gpu_h.cost_of(&s).unwrap() - 4.0 / 14.4).abs() < 1e-12);
        let e = ObjectiveCfg {
            cost: Some(CostMetric::UsdPerHour),
            ..Default::default()
        }
        .check()
        .unwrap_err();
        assert!(e.1.contains("needs a price"), "{e:?}");
    }

    #[test]
    fn a_price_per_hardware_option_prices_each_point_by_its_hardware() {
        let cfg: ObjectiveCfg =
            toml::from_str("gpu_hour_usd = { \"h100\" = 2.0, \"h200\" = 3.5 }").unwrap();
        cfg.check().unwrap();
        let o = cfg.resolve();
        assert_eq!(o.cost, CostMetric::UsdPerHour);
        let mut s = point(0, 4, 100.0, 1.0, 1.0).summary;
        // Summaries name the datasheet (`H100-SXM`); a key may be an alias.
        s["hardware"] = json!("H100-SXM");
        assert_eq!(o.cost_of(&s), Some(8.0));
        s["hardware"] = json!("H200");
        assert_eq!(o.cost_of(&s), Some(14.0));
        s["hardware"] = json!("MI300X");
        assert_eq!(o.cost_of(&s), None, "no price, no cost");
        // A fleet of pools: each pool's GPUs at its own hardware's price.
        s["pools"] =
            json!([{ "hardware": "H100-SXM", "gpus": 2 }, { "hardware": "H200", "gpus": 1 }]);
        assert_eq!(o.cost_of(&s), Some(2.0 * 2.0 + 3.5));
        assert!(
            o.cost_label().contains("$2.00 h100, $3.50 h200"),
            "{}",
            o.cost_label()
        );
        let bad: ObjectiveCfg = toml::from_str("gpu_hour_usd = { \"h200\" = -1 }").unwrap();
        assert_eq!(bad.check().unwrap_err().0, "gpu_hour_usd.h200");
        let empty: ObjectiveCfg = toml::from_str("gpu_hour_usd = {}").unwrap();
        assert!(empty.check().unwrap_err().1.contains("no price"));
    }

    #[test]
    fn an_autoscaled_point_costs_its_mean_billed_gpus() {
        let mut s = point(0, 4, 100.0, 1.0, 1.0).summary;
        s["lifecycle"] = json!({ "mean_billed_gpus": 2.5 });
        let o = ObjectiveCfg::default().resolve();
        assert_eq!(o.cost_of(&s), Some(2.5));
    }

    #[test]
    fn latency_statistic_is_checked_against_the_summary() {
        let ok = ObjectiveCfg {
            latency: Some("latency.e2e_ms.p50".into()),
            ..Default::default()
        };
        assert!(ok.check().is_ok());
        assert_eq!(ok.resolve().latency, "e2e_ms.p50");
        assert_eq!(ok.resolve().latency_label(), "E2E p50 (ms)");
        let bad = ObjectiveCfg {
            latency: Some("ttft_ms.p42".into()),
            ..Default::default()
        };
        let e = bad.check().unwrap_err();
        assert!(e.1.contains("ttft_ms.p99"), "lists known stats: {e:?}");
    }
}
