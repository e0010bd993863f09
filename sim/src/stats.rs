//! Summary statistics of a run's samples: the percentile summary of one
//! latency ([`Dist`], with the interpolation numpy's default `linear`
//! method and vLLM's benchmark use), request counts by outcome, and the
//! verdict of one percentile target. Plain data, below every subsystem, so
//! each subsystem's report is built from these without the run's summary.

use crate::store::{f64_key, f64_of_key, SpillSort};
use crate::time::{nanos_to_ms, Nanos};
use serde::Serialize;
use std::collections::BTreeMap;

/// Percentile summary of one latency, in milliseconds. With no samples
/// (`count == 0`, e.g. a run where nothing completed) every statistic is
/// serialized as `null`: a latency that was never measured is not 0 ms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dist {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl Serialize for Dist {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let some = self.count > 0;
        let v = |x: f64| some.then_some(x);
        let mut st = ser.serialize_struct("Dist", 7)?;
        st.serialize_field("count", &self.count)?;
        st.serialize_field("mean", &v(self.mean))?;
        st.serialize_field("p50", &v(self.p50))?;
        st.serialize_field("p90", &v(self.p90))?;
        st.serialize_field("p95", &v(self.p95))?;
        st.serialize_field("p99", &v(self.p99))?;
        st.serialize_field("max", &v(self.max))?;
        st.end()
    }
}

impl Dist {
    /// Summarizes unweighted samples (ms).
    pub fn of(mut v: Vec<f64>) -> Dist {
        v.sort_by(f64::total_cmp);
        Dist::of_sorted(v.len(), v.into_iter())
    }

    /// [`Dist::of`] over `n` samples given in ascending order, in one pass
    /// (the samples may come from disk: `store`). The same sum in
    /// the same order and the same interpolation as a quantile over a
    /// sorted vector, so the same bits.
    pub fn of_sorted(n: usize, sorted: impl Iterator<Item = f64>) -> Dist {
        if n == 0 {
            return Dist::default();
        }
        const QS: [f64; 4] = [0.50, 0.90, 0.95, 0.99];
        // The two neighbours each quantile interpolates between.
        let at = |q: f64| {
            let pos = q * (n - 1) as f64;
            (pos, pos.floor() as usize, pos.ceil() as usize)
        };
        // The neighbours' indices, found once rather than per sample (the
        // loop runs over every request: `floor`/`ceil` there were most of
        // the pass's cost).
        let idx = QS.map(|q| {
            let (_, l, h) = at(q);
            (l, h)
        });
        let mut lo = [0f64; 4];
        let mut hi = [0f64; 4];
        let mut max = 0f64;
        // The next index any of them (or the maximum) needs: one comparison
        // a sample instead of nine.
        let next_after = |i: usize| {
            idx.iter()
                .flat_map(|&(l, h)| [l, h])
                .chain([n - 1])
                .filter(|&j| j > i)
                .min()
                .unwrap_or(usize::MAX)
        };
        let mut next = idx
            .iter()
            .flat_map(|&(l, h)| [l, h])
            .min()
            .unwrap_or(0)
            .min(n - 1);
        let sum: f64 = sorted
            .enumerate()
            .map(|(i, x)| {
                if i == next {
                    for (k, &(l, h)) in idx.iter().enumerate() {
                        if i == l {
                            lo[k] = x;
                        }
                        if i == h {
                            hi[k] = x;
                        }
                    }
                    if i == n - 1 {
                        max = x;
                    }
                    next = next_after(i);
                }
                x
            })
            .sum();
        let q = |k: usize| {
            let (pos, l, _) = at(QS[k]);
            lo[k] + (hi[k] - lo[k]) * (pos - l as f64)
        };
        Dist {
            count: n as u64,
            mean: sum / n as f64,
            p50: q(0),
            p90: q(1),
            p95: q(2),
            p99: q(3),
            max,
        }
    }

    /// Summarizes (value ns, weight) samples: inter-token latencies come one
    /// value per iteration, shared by every sequence that decoded in it.
    /// Quantiles are the smallest value whose cumulative weight reaches q.
    pub fn of_weighted(mut v: Vec<(Nanos, u32)>) -> Dist {
        v.retain(|&(_, w)| w > 0);
        if v.is_empty() {
            return Dist::default();
        }
        v.sort_unstable();
        let total: u64 = v.iter().map(|&(_, w)| w as u64).sum();
        let sum: f64 = v.iter().map(|&(x, w)| x as f64 * w as f64).sum();
        let q = |q: f64| -> f64 {
            let target = (q * total as f64).ceil().max(1.0) as u64;
            let mut acc = 0u64;
            for &(x, w) in &v {
                acc += w as u64;
                if acc >= target {
                    return nanos_to_ms(x);
                }
            }
            nanos_to_ms(v[v.len() - 1].0)
        };
        Dist {
            count: total,
            mean: sum / total as f64 / 1e6,
            p50: q(0.50),
            p90: q(0.90),
            p95: q(0.95),
            p99: q(0.99),
            max: nanos_to_ms(v[v.len() - 1].0),
        }
    }
}

/// The samples of one latency, folded one at a time in any order, for an
/// exact [`Dist`] at the end. Memory stays bounded however many there are:
/// past a buffer they go to disk in sorted runs (`store`), merged when the
/// distribution is taken.
#[derive(Debug, Default)]
pub struct Samples(SpillSort<u64>);

impl Samples {
    #[inline]
    pub fn push(&mut self, x: f64) {
        self.0.push(f64_key(x));
    }

    /// The first error writing samples to disk (the distribution would be
    /// of part of them).
    pub fn error(&self) -> Option<&str> {
        self.0.error()
    }

    /// The distribution of every sample pushed; fails when a run of them
    /// written to disk cannot be read back.
    pub fn dist(&mut self) -> Result<Dist, String> {
        let d = Dist::of_sorted(self.0.len(), self.0.sorted().map(f64_of_key));
        self.0.error().map_or(Ok(d), |e| Err(e.to_string()))
    }
}

/// Request counts by outcome.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Counts {
    pub arrived: u64,
    pub completed: u64,
    pub rejected: u64,
    pub rejected_by_reason: BTreeMap<String, u64>,
    pub in_flight: u64,
    /// Clients that went away mid-request (observed runs only).
    #[serde(skip_serializing_if = "is_zero")]
    pub cancelled: u64,
    /// Requests that failed with an error (observed runs only).
    #[serde(skip_serializing_if = "is_zero")]
    pub failed: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Latency distributions, ms.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Latency {
    pub queue_wait_ms: Dist,
    pub ttft_ms: Dist,
    pub tpot_ms: Dist,
    pub itl_ms: Dist,
    pub e2e_ms: Dist,
}

/// One percentile target against the run's value.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct PercentileVerdict {
    /// The `[slo]` key, e.g. `ttft_p99_ms`.
    pub key: String,
    pub target_ms: f64,
    /// The run's percentile; `null` when the metric has no samples (then
    /// the target is not met).
    pub value_ms: Option<f64>,
    pub met: bool,
}

/// Throughput over the run's duration (first arrival at t = 0 to the end).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Throughput {
    pub requests_per_s: f64,
    pub input_tokens_per_s: f64,
    pub output_tokens_per_s: f64,
    pub output_tokens_per_s_per_gpu: f64,
    pub requests_per_s_per_gpu: f64,
}

/// SLO attainment and goodput (DistServe, Zhong et al. OSDI'24: requests per
/// second that meet every latency target; vLLM's `bench serve --goodput`),
/// and the verdict of each percentile target.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct SloReport {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<f64>,
    /// Share of ended requests (completed + rejected) meeting every
    /// per-request threshold; a rejection counts as a miss (with no
    /// threshold given, the share completed).
    pub attainment: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_attainment: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot_attainment: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2e_attainment: Option<f64>,
    /// Good requests per second of the run.
    pub goodput_rps: f64,
    pub goodput_rps_per_gpu: f64,
    /// The percentile targets against the run's values (with any given).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub percentiles: Vec<PercentileVerdict>,
    /// Whether every percentile target holds (with any given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentiles_met: Option<bool>,
}

impl SloReport {
    /// Whether the percentile targets hold (true when none is given).
    pub fn percentiles_hold(&self) -> bool {
        self.percentiles_met.unwrap_or(true)
    }
}

/// CV of a Weibull distribution of shape `k`:
/// CV² = Γ(1 + 2/k) / Γ(1 + 1/k)² − 1.
pub fn weibull_cv_of_shape(k: f64) -> f64 {
    use statrs::function::gamma::ln_gamma;
    let r = (ln_gamma(1.0 + 2.0 / k) - 2.0 * ln_gamma(1.0 + 1.0 / k)).exp();
    (r - 1.0).max(0.0).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The one-pass summary gives the quantiles, maximum and sum of the
        /// sorted vector read by index (numpy's `linear` method), bit for
        /// bit, at every length (quantiles that share neighbours included).
        #[test]
        fn the_one_pass_summary_equals_reading_the_sorted_vector(
            v in proptest::collection::vec(-1e3f64..1e6, 1..300),
        ) {
            let mut v = v;
            v.sort_by(f64::total_cmp);
            let n = v.len();
            let q = |q: f64| {
                let pos = q * (n - 1) as f64;
                let (l, h) = (pos.floor() as usize, pos.ceil() as usize);
                v[l] + (v[h] - v[l]) * (pos - l as f64)
            };
            let d = Dist::of_sorted(n, v.iter().copied());
            let sum: f64 = v.iter().sum();
            let want = [sum / n as f64, q(0.5), q(0.9), q(0.95), q(0.99), v[n - 1]];
            let got = [d.mean, d.p50, d.p90, d.p95, d.p99, d.max];
            prop_assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits));
            prop_assert_eq!(d.count, n as u64);
        }
    }

    #[test]
    fn latency_samples_that_cannot_be_read_back_are_an_error() {
        use crate::store::CHUNK;
        // Past two spilled runs.
        let n = 2 * CHUNK + 3;
        let mut sets: [Samples; 4] = Default::default();
        for (k, set) in sets.iter_mut().enumerate() {
            for i in 0..n as u64 {
                set.push((i * 7919 % 1009 + k as u64) as f64);
            }
        }
        sets[2].0.lose_all_but_the_first_run();
        assert!(sets[0].dist().is_ok());
        let got = sets[2].dist();
        assert!(
            got.as_ref().is_err_and(|e| e.contains("cannot read")),
            "{got:?}"
        );
    }
}
