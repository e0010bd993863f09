//! Empirical lengths: a measured PMF or histogram, or the lengths of a
//! trace column, sampled in O(1) by Walker's alias method (Walker, "An
//! efficient method for generating discrete random variables with general
//! distributions", ACM TOMS 3(3), 1977; rand_distr's `WeightedAliasIndex`).

use super::super::{trace::Replay, Context, RequestSource, TraceReport, WorkloadError};
use super::LengthModel;
use crate::rng::StreamRng;
use crate::scenario::{LengthColumn, LengthDist};
use rand::Rng;
use rand_distr::weighted::WeightedAliasIndex;
use rand_distr::Distribution;
use std::collections::BTreeMap;
use std::path::Path;

/// A discrete distribution over bins [lo, hi) of token counts (single
/// values have hi = lo + 1); a bin's count is uniform within it.
#[derive(Debug)]
pub struct Empirical {
    bins: Vec<(u32, u32)>,
    weights: Vec<f64>,
    alias: WeightedAliasIndex<f64>,
}

impl Empirical {
    /// From bins and their (not necessarily normalized) weights.
    pub fn from_bins(bins: Vec<(u32, u32)>, weights: Vec<f64>) -> Result<Empirical, String> {
        if bins.is_empty() {
            return Err("no values".into());
        }
        if bins.len() > u32::MAX as usize {
            return Err("too many values".into());
        }
        let alias =
            WeightedAliasIndex::new(weights.clone()).map_err(|e| format!("bad weights: {e}"))?;
        Ok(Empirical {
            bins,
            weights,
            alias,
        })
    }

    /// From values and weights (a PMF).
    pub fn from_values(values: &[u32], weights: &[f64]) -> Result<Empirical, String> {
        Self::from_bins(
            values.iter().map(|&v| (v, v.saturating_add(1))).collect(),
            weights.to_vec(),
        )
    }

    /// From counts of each value (a trace column).
    pub fn from_counts(counts: &BTreeMap<u32, u64>) -> Result<Empirical, String> {
        let (v, w): (Vec<u32>, Vec<f64>) = counts.iter().map(|(&v, &c)| (v, c as f64)).unzip();
        Self::from_values(&v, &w)
    }

    /// The mean of the distribution (before clamping).
    pub fn mean(&self) -> f64 {
        let total: f64 = self.weights.iter().sum();
        self.bins
            .iter()
            .zip(&self.weights)
            .map(|(&(lo, hi), w)| w * (lo as f64 + hi as f64 - 1.0) / 2.0)
            .sum::<f64>()
            / total
    }

    /// The distribution of a validated `dist = "empirical"`.
    pub fn build(
        d: &LengthDist,
        key: &str,
        ctx: &Context,
    ) -> Result<(Empirical, Option<TraceReport>), WorkloadError> {
        let LengthDist::Empirical {
            file,
            values,
            weights,
            trace,
            column,
            ..
        } = d
        else {
            return Err(ctx.config_error(key, "not an empirical distribution"));
        };
        if let Some(v) = values {
            let w = weights.clone().unwrap_or_else(|| vec![1.0; v.len()]);
            let e = Empirical::from_values(v, &w).map_err(|m| ctx.config_error(key, m))?;
            return Ok((e, None));
        }
        if let Some(f) = file {
            let path = ctx.resolve(f);
            return Ok((read_file(&path, &format!("{key}.file"), ctx)?, None));
        }
        let (Some(t), Some(col)) = (trace, column) else {
            return Err(ctx.config_error(key, "needs `file`, `values` or `trace` with `column`"));
        };
        let mut replay = Replay::open(t, &format!("{key}.trace"), ctx)?;
        let mut counts = BTreeMap::new();
        while let Some(r) = replay.next_request() {
            let v = match col {
                LengthColumn::Prompt => r.prompt_tokens,
                LengthColumn::Output => r.output_tokens,
            };
            *counts.entry(v).or_insert(0u64) += 1;
        }
        let report = replay.finish()?.and_then(|mut w| w.traces.pop());
        let e = Empirical::from_counts(&counts).map_err(|m| {
            ctx.config_error(
                &format!("{key}.trace"),
                format!("{m}: the trace gave no requests"),
            )
        })?;
        Ok((e, report))
    }
}

impl LengthModel for Empirical {
    fn sample(&self, rng: &mut StreamRng) -> f64 {
        let (lo, hi) = self.bins[self.alias.sample(rng)];
        if hi - lo <= 1 {
            lo as f64
        } else {
            rng.random_range(lo..hi) as f64
        }
    }
}

/// Reads a PMF (`value,weight`) or histogram (`lo,hi,weight`, bins [lo, hi))
/// CSV file; the weight column may also be called count, probability, prob
/// or frequency.
fn read_file(path: &Path, key: &str, ctx: &Context) -> Result<Empirical, WorkloadError> {
    let file = path.display().to_string();
    let bad = |line: u64, m: String| WorkloadError::Data {
        file: file.clone(),
        line: Some(line),
        message: m,
    };
    let f = std::fs::File::open(path)
        .map_err(|e| ctx.config_error(key, format!("cannot open {file}: {e}")))?;
    let mut rdr = csv::ReaderBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(std::io::BufReader::new(
            crate::workload::trace::LineBounded::new(f),
        ));
    let head: Vec<String> = rdr
        .headers()
        .map_err(|e| bad(1, e.to_string()))?
        .iter()
        .map(|h| h.to_ascii_lowercase())
        .collect();
    let weight_name =
        |h: &str| matches!(h, "weight" | "count" | "probability" | "prob" | "frequency");
    let hist = match head.as_slice() {
        [v, w] if v == "value" && weight_name(w) => false,
        [l, h, w] if l == "lo" && h == "hi" && weight_name(w) => true,
        _ => {
            return Err(bad(
                1,
                format!(
                    "header {:?}: must be `value,weight` (a PMF) or `lo,hi,weight` (a histogram of [lo, hi) bins)",
                    head.join(",")
                ),
            ))
        }
    };
    let (mut bins, mut weights) = (Vec::new(), Vec::new());
    let mut rec = csv::StringRecord::new();
    loop {
        match rdr.read_record(&mut rec) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                let line = e.position().map_or(0, |p| p.line());
                return Err(bad(line, e.to_string()));
            }
        }
        let line = rec.position().map_or(0, |p| p.line());
        if rec.len() == 1 && rec[0].is_empty() {
            continue;
        }
        let want = if hist { 3 } else { 2 };
        if rec.len() != want {
            return Err(bad(
                line,
                format!("expected {want} fields, found {}", rec.len()),
            ));
        }
        let int = |i: usize| {
            rec[i].parse::<u32>().map_err(|_| {
                bad(
                    line,
                    format!(
                        "{}: expected a whole number of tokens, got {:?}",
                        head[i], &rec[i]
                    ),
                )
            })
        };
        let w: f64 = rec[want - 1]
            .parse()
            .ok()
            .filter(|w: &f64| w.is_finite() && *w >= 0.0)
            .ok_or_else(|| {
                bad(
                    line,
                    format!(
                        "{}: expected a number ≥ 0, got {:?}",
                        head[want - 1],
                        &rec[want - 1]
                    ),
                )
            })?;
        let bin = if hist {
            let (lo, hi) = (int(0)?, int(1)?);
            if hi <= lo {
                return Err(bad(
                    line,
                    format!("bin [{lo}, {hi}) is empty: hi must exceed lo"),
                ));
            }
            (lo, hi)
        } else {
            let v = int(0)?;
            (v, v.saturating_add(1))
        };
        bins.push(bin);
        weights.push(w);
    }
    Empirical::from_bins(bins, weights).map_err(|m| WorkloadError::Data {
        file: file.clone(),
        line: None,
        message: m,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{moments, LengthSampler};
    use super::*;

    #[test]
    fn pmf_and_histogram_sample_their_mean() {
        let e = Empirical::from_values(&[10, 20, 100], &[1.0, 2.0, 1.0]).unwrap();
        assert_eq!(e.mean(), 37.5);
        let want_var: f64 = (0.25 * 100.0 + 0.5 * 400.0 + 0.25 * 10_000.0) - 37.5 * 37.5;
        let s = LengthSampler::new(Box::new(e), None, None);
        let (m, cv) = moments(&s, 7, 200_000);
        assert!((m / 37.5 - 1.0).abs() < 0.01, "{m}");
        assert!((cv / (want_var.sqrt() / 37.5) - 1.0).abs() < 0.02, "{cv}");
        // Bins [100, 200) and [1000, 1010), weights 3:1: mean 0.75·149.5 + 0.25·1004.5.
        let h = Empirical::from_bins(vec![(100, 200), (1000, 1010)], vec![3.0, 1.0]).unwrap();
        let want = 0.75 * 149.5 + 0.25 * 1004.5;
        assert!((h.mean() - want).abs() < 1e-9);
        let s = LengthSampler::new(Box::new(h), None, None);
        let (m, _) = moments(&s, 8, 200_000);
        assert!((m / want - 1.0).abs() < 0.01, "{m}");
        assert!(Empirical::from_values(&[1], &[0.0]).is_err());
    }

    #[test]
    fn files_parse_or_name_the_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Context::new("s.toml", dir.path(), 1);
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).unwrap();
            dir.path().join(name)
        };
        let p = write("pmf.csv", "value,weight\n10,1\n20,3\n");
        assert_eq!(read_file(&p, "k", &ctx).unwrap().mean(), 17.5);
        let p = write("hist.csv", "lo,hi,count\r\n0,10,1\r\n10,20,1");
        assert_eq!(read_file(&p, "k", &ctx).unwrap().mean(), 9.5);
        let p = write("bad.csv", "value,weight\n10,1\n2x,3\n");
        let e = read_file(&p, "k", &ctx).unwrap_err().to_string();
        assert!(
            e.ends_with("bad.csv: line 3: value: expected a whole number of tokens, got \"2x\""),
            "{e}"
        );
        let p = write("head.csv", "len,p\n10,1\n");
        let e = read_file(&p, "k", &ctx).unwrap_err().to_string();
        assert!(e.contains("line 1: header"), "{e}");
        let p = write("bin.csv", "lo,hi,weight\n10,10,1\n");
        assert!(read_file(&p, "k", &ctx)
            .unwrap_err()
            .to_string()
            .contains("line 2"));
        let e = read_file(&dir.path().join("none.csv"), "k.file", &ctx)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("s.toml: k.file: cannot open"), "{e}");
    }
}

#[cfg(test)]
mod trace_tests {
    use super::*;
    use crate::scenario::{TraceCfg, TraceFormat};

    #[test]
    fn a_trace_column_gives_its_exact_distribution() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/traces/mooncake_sample.jsonl");
        let d = LengthDist::Empirical {
            file: None,
            values: None,
            weights: None,
            trace: Some(Box::new(TraceCfg::new(
                TraceFormat::Mooncake,
                path.display().to_string(),
            ))),
            column: Some(LengthColumn::Output),
            min: None,
            max: None,
        };
        let ctx = Context::new("t", Path::new("."), 1);
        let (e, report) = Empirical::build(&d, "k", &ctx).unwrap();
        // The sample's output lengths average 229.5 (see tests/traces.rs).
        assert!((e.mean() - 229.5).abs() < 1e-9, "{}", e.mean());
        assert_eq!(report.unwrap().requests, 10);
    }
}
