//! `[slo]`: the latency targets a run is judged by, as users state them.
//!
//! Two kinds of target, which may be mixed:
//! - per-request thresholds (`ttft_ms`, `tpot_ms`, `e2e_ms`): a request is
//!   *good* when it completed and meets every threshold given; attainment
//!   and goodput count good requests (vLLM's `bench serve --goodput`);
//! - percentile targets (`ttft_p99_ms`, `tpot_p90_ms`, `e2e_p50_ms`, ...:
//!   `<metric>_p<NN>_ms`): the run's distribution of the metric must have
//!   its NN-th percentile at or below the target.

use crate::scenario::ranges::MAX_SLO_MS;
use crate::stats::{Latency, PercentileVerdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Latency targets (at least one). A request meets its SLO when it
/// completed with TTFT ≤ `ttft_ms`, TPOT ≤ `tpot_ms` (requests with more
/// than one output token) and E2E ≤ `e2e_ms`, for each threshold given;
/// the percentile targets judge the run's distributions.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SloCfg {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<f64>,
    /// Every other key: `<metric>_p<NN>_ms` percentile targets, checked by
    /// [`SloCfg::check`] (which names any other key as unknown).
    #[serde(flatten)]
    pub percentiles: BTreeMap<String, toml::Value>,
}

/// `(metric index, percentile index)` of a `<metric>_p<NN>_ms` key, in the
/// order of [`SLO_METRICS`] and [`SLO_PERCENTILES`].
fn percentile_key(key: &str) -> Option<(usize, usize)> {
    let rest = key.strip_suffix("_ms")?;
    let (metric, p) = rest.rsplit_once("_p")?;
    let m = SLO_METRICS.iter().position(|&x| x == metric)?;
    let p = SLO_PERCENTILES.iter().position(|&x| x.to_string() == p)?;
    Some((m, p))
}

/// The keys `[slo]` accepts, for error messages.
fn allowed() -> String {
    format!(
        "ttft_ms, tpot_ms, e2e_ms (per-request thresholds) and <metric>_p<NN>_ms percentile targets \
         with metric one of {} and NN one of {} (e.g. ttft_p99_ms)",
        SLO_METRICS.join(", "),
        SLO_PERCENTILES.map(|p| p.to_string()).join(", ")
    )
}

fn in_range(key: &str, v: f64) -> Result<(), (String, String)> {
    if v.is_finite() && v > 0.0 && v <= MAX_SLO_MS {
        Ok(())
    } else {
        Err((
            key.into(),
            format!("must be a positive number of ms up to {MAX_SLO_MS:e}, got {v}"),
        ))
    }
}

impl SloCfg {
    /// Checks keys and values; `prefix` is the table's key path (`slo`,
    /// `tenants[2].slo`). Errors are (key path, message).
    pub fn check(&self, prefix: &str) -> Result<(), (String, String)> {
        let key = |k: &str| format!("{prefix}.{k}");
        for (k, v) in [
            ("ttft_ms", self.ttft_ms),
            ("tpot_ms", self.tpot_ms),
            ("e2e_ms", self.e2e_ms),
        ] {
            if let Some(v) = v {
                in_range(&key(k), v)?;
            }
        }
        for (k, v) in &self.percentiles {
            if percentile_key(k).is_none() {
                return Err((
                    key(k),
                    format!("unknown key `{k}`; [slo] takes {}", allowed()),
                ));
            }
            let ms = match v {
                toml::Value::Integer(i) => *i as f64,
                toml::Value::Float(f) => *f,
                other => {
                    return Err((
                        key(k),
                        format!(
                            "must be a number of milliseconds, got a {}",
                            other.type_str()
                        ),
                    ))
                }
            };
            in_range(&key(k), ms)?;
        }
        if self.ttft_ms.is_none()
            && self.tpot_ms.is_none()
            && self.e2e_ms.is_none()
            && self.percentiles.is_empty()
        {
            return Err((
                prefix.into(),
                format!("gives no target; it takes {}", allowed()),
            ));
        }
        Ok(())
    }

    /// The targets as the run judges them (after [`SloCfg::check`]).
    pub fn targets(&self) -> SloTargets {
        let mut t = SloTargets {
            ttft_ms: self.ttft_ms,
            tpot_ms: self.tpot_ms,
            e2e_ms: self.e2e_ms,
            ..SloTargets::default()
        };
        for (k, v) in &self.percentiles {
            if let (Some((m, p)), Some(ms)) = (
                percentile_key(k),
                v.as_float().or(v.as_integer().map(|i| i as f64)),
            ) {
                t.percentile_ms[m][p] = Some(ms);
            }
        }
        t
    }
}

/// The latency metrics a percentile target may name (`[slo]`
/// `<metric>_p<NN>_ms`), in the order of `SloTargets::percentile_ms`.
pub const SLO_METRICS: [&str; 4] = ["ttft", "tpot", "itl", "e2e"];
/// The percentiles a summary computes (`stats::Dist`), in the same order.
pub const SLO_PERCENTILES: [u32; 4] = [50, 90, 95, 99];

/// The latency targets of `[slo]` as a run judges them: per-request
/// thresholds, ms (a request is good when it completed and meets every one
/// given), and percentile targets, ms (`percentile_ms[metric][percentile]`
/// in the order of [`SLO_METRICS`] and [`SLO_PERCENTILES`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SloTargets {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
    pub percentile_ms: [[Option<f64>; 4]; 4],
}

impl SloTargets {
    /// Whether any percentile target is given.
    pub fn has_percentiles(&self) -> bool {
        self.percentile_ms.iter().flatten().any(Option::is_some)
    }

    /// These targets without those on `metric` (a report that has no
    /// distribution of it judges none).
    pub fn without(mut self, metric: &str) -> SloTargets {
        if let Some(m) = SLO_METRICS.iter().position(|&x| x == metric) {
            self.percentile_ms[m] = [None; 4];
        }
        self
    }

    /// The percentile targets, ms, by `[slo]` key.
    pub fn percentile_map(&self) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for (m, row) in self.percentile_ms.iter().enumerate() {
            for (p, t) in row.iter().enumerate() {
                if let Some(t) = *t {
                    out.insert(format!("{}_p{}_ms", SLO_METRICS[m], SLO_PERCENTILES[p]), t);
                }
            }
        }
        out
    }

    /// The targets as a person reads them, joined by `sep`: `TTFT ≤ 300 ms`
    /// for a threshold, `TTFT p99 ≤ 2000 ms` for a percentile target.
    pub fn describe(&self, sep: &str) -> String {
        describe_slo(
            [self.ttft_ms, self.tpot_ms, self.e2e_ms],
            &self.percentile_map(),
            sep,
        )
    }

    /// Each percentile target against `latency`, in key order.
    pub fn verdicts(&self, latency: &Latency) -> Vec<PercentileVerdict> {
        let dists = [
            &latency.ttft_ms,
            &latency.tpot_ms,
            &latency.itl_ms,
            &latency.e2e_ms,
        ];
        let mut out = Vec::new();
        for (m, row) in self.percentile_ms.iter().enumerate() {
            for (p, target) in row.iter().enumerate() {
                let Some(target_ms) = *target else { continue };
                let d = dists[m];
                let value_ms = (d.count > 0).then(|| [d.p50, d.p90, d.p95, d.p99][p]);
                out.push(PercentileVerdict {
                    key: format!("{}_p{}_ms", SLO_METRICS[m], SLO_PERCENTILES[p]),
                    target_ms,
                    value_ms,
                    met: value_ms.is_some_and(|v| v <= target_ms),
                });
            }
        }
        out
    }
}

/// SLO targets as a person reads them (see [`SloTargets::describe`]), from
/// the (TTFT, TPOT, E2E) thresholds and the percentile targets by key.
pub fn describe_slo(
    thresholds: [Option<f64>; 3],
    percentiles: &BTreeMap<String, f64>,
    sep: &str,
) -> String {
    let mut parts: Vec<String> = ["TTFT", "TPOT", "E2E"]
        .iter()
        .zip(thresholds)
        .filter_map(|(name, t)| t.map(|t| format!("{name} ≤ {t} ms")))
        .collect();
    // Keys in the order metrics and percentiles are listed, not by name.
    let order = |k: &String| {
        SLO_METRICS
            .iter()
            .position(|m| k.starts_with(&format!("{m}_")))
            .unwrap_or(usize::MAX)
    };
    let mut keys: Vec<&String> = percentiles.keys().collect();
    keys.sort_by_key(|k| (order(k), k.to_string()));
    for k in keys {
        let (metric, rest) = k.split_once("_p").unwrap_or((k, ""));
        let p = rest.trim_end_matches("_ms");
        parts.push(format!(
            "{} p{p} ≤ {} ms",
            metric.to_uppercase(),
            percentiles[k]
        ));
    }
    parts.join(sep)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> SloCfg {
        toml::from_str(text).expect("parses")
    }

    #[test]
    fn percentile_keys_name_a_metric_and_a_computed_percentile() {
        assert_eq!(percentile_key("ttft_p99_ms"), Some((0, 3)));
        assert_eq!(percentile_key("tpot_p90_ms"), Some((1, 1)));
        assert_eq!(percentile_key("itl_p95_ms"), Some((2, 2)));
        assert_eq!(percentile_key("e2e_p50_ms"), Some((3, 0)));
        for bad in [
            "ttft_p999_ms",
            "ttft_p99",
            "queue_p99_ms",
            "ttft_ms",
            "p99_ms",
        ] {
            assert_eq!(percentile_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn targets_carry_thresholds_and_percentiles() {
        let c = parse("ttft_p99_ms = 2000\ntpot_p90_ms = 50.5\ntpot_ms = 80");
        c.check("slo").expect("valid");
        let t = c.targets();
        assert_eq!((t.ttft_ms, t.tpot_ms, t.e2e_ms), (None, Some(80.0), None));
        assert_eq!(t.percentile_ms[0][3], Some(2000.0));
        assert_eq!(t.percentile_ms[1][1], Some(50.5));
        assert!(t.has_percentiles());
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        let e = parse("percentile = 0.99").check("slo").unwrap_err();
        assert_eq!(e.0, "slo.percentile");
        assert!(
            e.1.contains("unknown key") && e.1.contains("ttft_p99_ms"),
            "{e:?}"
        );
        let e = parse("ttft_p99_ms = \"2s\"").check("slo").unwrap_err();
        assert_eq!(e.0, "slo.ttft_p99_ms");
        assert!(e.1.contains("number of milliseconds"), "{e:?}");
        let e = parse("e2e_ms = -1").check("tenants[0].slo").unwrap_err();
        assert_eq!(e.0, "tenants[0].slo.e2e_ms");
        let e = parse("").check("slo").unwrap_err();
        assert_eq!(e.0, "slo");
        assert!(e.1.contains("no target"), "{e:?}");
    }
}
