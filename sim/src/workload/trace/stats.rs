//! `servesim trace stats`: what a trace holds, computed while streaming it
//! through the same reader and replay options a simulation uses: request
//! count, span, mean rate, inter-arrival CV, prompt/output length
//! percentiles, and for hashed formats the prefix-hit ratio of an infinite
//! prefix cache. Conventions follow the shared data README: rate =
//! (N − 1) / span; percentiles interpolate linearly between order
//! statistics (NumPy's default); IAT CV is the population CV of the gaps.

use super::Replay;
use crate::scenario::TraceCfg;
use crate::workload::{Context, RequestSource, TraceReport, WorkloadError};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};

/// Linear-interpolation quantile of sorted data (Hyndman & Fan type 7).
pub fn quantile_sorted(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// Summary of a token-length column.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct LengthStats {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl LengthStats {
    /// From exact counts per value; quantiles interpolate linearly between
    /// the order statistics, as over the raw values.
    pub fn of_counts(c: &BTreeMap<u32, u64>) -> LengthStats {
        let n: u64 = c.values().sum();
        if n == 0 {
            return LengthStats::default();
        }
        let sum: f64 = c.iter().map(|(&v, &k)| v as f64 * k as f64).sum();
        // The value at 0-based rank r.
        let at = |r: u64| -> f64 {
            let mut acc = 0;
            for (&v, &k) in c {
                acc += k;
                if acc > r {
                    return v as f64;
                }
            }
            *c.keys().next_back().expect("non-empty") as f64
        };
        let q = |p: f64| {
            let pos = p * (n - 1) as f64;
            let (lo, hi) = (pos.floor() as u64, pos.ceil() as u64);
            let (a, b) = (at(lo), at(hi));
            a + (b - a) * (pos - lo as f64)
        };
        LengthStats {
            mean: sum / n as f64,
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: *c.keys().next_back().expect("non-empty") as f64,
        }
    }

    /// From a weighted PMF: quantile p is the smallest value whose
    /// cumulative weight reaches p.
    pub fn of_weights(w: &BTreeMap<u32, f64>) -> LengthStats {
        let total: f64 = w.values().sum();
        if total <= 0.0 {
            return LengthStats::default();
        }
        let q = |p: f64| {
            let mut acc = 0.0;
            for (&v, &x) in w {
                acc += x;
                if acc >= p * total * (1.0 - 1e-12) {
                    return v as f64;
                }
            }
            *w.keys().next_back().expect("non-empty") as f64
        };
        LengthStats {
            mean: w.iter().map(|(&v, &x)| v as f64 * x).sum::<f64>() / total,
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: w
                .iter()
                .rev()
                .find(|(_, &x)| x > 0.0)
                .map_or(0.0, |(&v, _)| v as f64),
        }
    }
}

/// Prefix reuse of a hashed trace under an infinite prefix cache replayed
/// in order: a request hits its longest prefix of blocks already seen.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct PrefixStats {
    pub block_tokens: u32,
    pub blocks: u64,
    pub unique_blocks: u64,
    /// Hit blocks / all blocks.
    pub block_hit: f64,
    /// Hit tokens (min(hit blocks × block size, prompt)) / prompt tokens.
    pub token_hit: f64,
}

/// Statistics of one trace.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct TraceStats {
    pub format: String,
    pub path: String,
    pub requests: u64,
    pub span_s: f64,
    pub rate_rps: f64,
    pub iat_mean_s: f64,
    pub iat_cv: f64,
    pub prompt: LengthStats,
    pub output: LengthStats,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<PrefixStats>,
    /// Distinct non-zero sessions (formats with sessions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<u64>,
    /// Requests per tenant, by tenant name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tenants: BTreeMap<String, u64>,
    /// Format-specific figures (RAGPulse segment reuse).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, f64>,
    /// Rows read, skipped, filtered.
    pub read: TraceReport,
}

/// Streams a (validated) trace and computes its statistics.
pub fn trace_stats(cfg: &TraceCfg, key: &str, ctx: &Context) -> Result<TraceStats, WorkloadError> {
    let mut r = Replay::open_with(cfg, key, ctx, true)?;
    let (mut n, mut first, mut prev) = (0u64, 0u64, 0u64);
    // Welford's running mean and variance of the gaps.
    let (mut gm, mut gm2) = (0.0f64, 0.0f64);
    let mut prompt = BTreeMap::new();
    let mut output = BTreeMap::new();
    let mut seen: HashSet<u64> = HashSet::new();
    let mut sessions: HashSet<u64> = HashSet::new();
    let mut tenants: Vec<u64> = Vec::new();
    let (mut blocks, mut hit_blocks, mut hit_tokens, mut hashed_tokens) = (0u64, 0u64, 0u64, 0u64);
    let mut block_tokens = 0;
    while let Some(q) = r.next_request() {
        let t = q.arrival.0;
        if n == 0 {
            first = t;
        } else {
            let g = (t - prev) as f64 / 1e9;
            let k = n as f64; // gaps so far, this one included
            let d = g - gm;
            gm += d / k;
            gm2 += d * (g - gm);
        }
        prev = t;
        n += 1;
        *prompt.entry(q.prompt_tokens).or_insert(0u64) += 1;
        *output.entry(q.output_tokens).or_insert(0u64) += 1;
        if q.session != 0 {
            sessions.insert(q.session);
        }
        let ti = q.tenant as usize;
        if tenants.len() <= ti {
            tenants.resize(ti + 1, 0);
        }
        tenants[ti] += 1;
        if q.hash_block_tokens > 0 {
            block_tokens = q.hash_block_tokens;
            let k = q
                .prefix_hashes
                .iter()
                .take_while(|h| seen.contains(h))
                .count() as u64;
            blocks += q.prefix_hashes.len() as u64;
            hit_blocks += k;
            hit_tokens += (k * q.hash_block_tokens as u64).min(q.prompt_tokens as u64);
            hashed_tokens += q.prompt_tokens as u64;
            seen.extend(q.prefix_hashes.iter().copied());
        }
    }
    let extra = r.extra_stats().into_iter().collect();
    let read = r
        .finish()?
        .and_then(|mut w| w.traces.pop())
        .unwrap_or_default();
    let gaps = n.saturating_sub(1);
    let span = (prev - first) as f64 / 1e9;
    let var = if gaps > 0 { gm2 / gaps as f64 } else { 0.0 };
    let names = &read.tenants;
    Ok(TraceStats {
        format: cfg.format.name().to_string(),
        path: read.path.clone(),
        requests: n,
        span_s: span,
        rate_rps: if span > 0.0 { gaps as f64 / span } else { 0.0 },
        iat_mean_s: gm,
        iat_cv: if gm > 0.0 { var.sqrt() / gm } else { 0.0 },
        prompt: LengthStats::of_counts(&prompt),
        output: LengthStats::of_counts(&output),
        prefix: (block_tokens > 0).then(|| PrefixStats {
            block_tokens,
            blocks,
            unique_blocks: seen.len() as u64,
            block_hit: hit_blocks as f64 / blocks.max(1) as f64,
            token_hit: hit_tokens as f64 / hashed_tokens.max(1) as f64,
        }),
        sessions: (!sessions.is_empty()).then_some(sessions.len() as u64),
        tenants: if names.is_empty() {
            BTreeMap::new()
        } else {
            names
                .iter()
                .cloned()
                .zip(tenants.iter().copied().chain(std::iter::repeat(0)))
                .collect()
        },
        extra,
        read,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_quantiles_match_raw_interpolation() {
        let raw = [1.0, 2.0, 2.0, 3.0, 10.0, 10.0, 11.0];
        let mut c = BTreeMap::new();
        for v in raw {
            *c.entry(v as u32).or_insert(0) += 1;
        }
        let s = LengthStats::of_counts(&c);
        for (p, got) in [(0.5, s.p50), (0.9, s.p90), (0.99, s.p99)] {
            assert!((got - quantile_sorted(&raw, p)).abs() < 1e-9, "{p}");
        }
        assert_eq!(s.max, 11.0);
        assert!((s.mean - raw.iter().sum::<f64>() / 7.0).abs() < 1e-12);
    }

    #[test]
    fn weighted_quantiles_take_the_first_value_reaching_p() {
        let w: BTreeMap<u32, f64> = [(1, 0.5), (5, 0.4), (9, 0.1)].into_iter().collect();
        let s = LengthStats::of_weights(&w);
        assert_eq!((s.p50, s.p90, s.p99, s.max), (1.0, 5.0, 9.0, 9.0));
        assert!((s.mean - (0.5 + 2.0 + 0.9)).abs() < 1e-12);
    }
}
