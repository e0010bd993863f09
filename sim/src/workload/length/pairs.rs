//! Correlated prompt and output lengths: (prompt, output) pairs drawn
//! jointly from a trace. Long prompts in a trace often come with short
//! outputs (summarization) or the reverse (generation); independent
//! marginals lose that, and with it the mix of prefill- and decode-heavy
//! requests a batch sees.

use super::super::{trace::Replay, Context, RequestSource, TraceReport, WorkloadError};
use crate::rng::{self, StreamRng};
use crate::scenario::{LengthPairsCfg, DEFAULT_MAX_PAIRS};
use rand::Rng;

/// The pairs of a trace, or a uniform sample of `max_pairs` of them kept by
/// reservoir sampling (Vitter, "Random sampling with a reservoir", ACM TOMS
/// 11(1), 1985, Algorithm R) so a trace of any size needs bounded memory.
pub struct LengthPairs {
    pairs: Vec<(u32, u32)>,
    prompt_clamp: (u32, u32),
    output_clamp: (u32, u32),
}

impl LengthPairs {
    pub fn build(
        cfg: &LengthPairsCfg,
        key: &str,
        ctx: &Context,
    ) -> Result<(LengthPairs, TraceReport), WorkloadError> {
        let cap = cfg.max_pairs.unwrap_or(DEFAULT_MAX_PAIRS);
        let mut replay = Replay::open(&cfg.trace, &format!("{key}.trace"), ctx)?;
        let mut rng = rng::stream(ctx.seed, "workload.length_pairs.reservoir");
        let mut pairs = Vec::new();
        let mut seen = 0u64;
        while let Some(r) = replay.next_request() {
            let pair = (r.prompt_tokens, r.output_tokens);
            if seen < cap {
                pairs.push(pair);
            } else {
                let j = rng.random_range(0..=seen);
                if j < cap {
                    pairs[j as usize] = pair;
                }
            }
            seen += 1;
        }
        let report = replay
            .finish()?
            .and_then(|mut w| w.traces.pop())
            .unwrap_or_default();
        if pairs.is_empty() {
            return Err(ctx.config_error(
                &format!("{key}.trace"),
                "the trace gave no requests to draw lengths from",
            ));
        }
        let c = |lo: Option<u32>, hi: Option<u32>| (lo.unwrap_or(1).max(1), hi.unwrap_or(u32::MAX));
        Ok((
            LengthPairs {
                pairs,
                prompt_clamp: c(cfg.prompt_min, cfg.prompt_max),
                output_clamp: c(cfg.output_min, cfg.output_max),
            },
            report,
        ))
    }

    /// Pairs kept.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// One pair, uniformly among those kept, each length clamped.
    pub fn sample(&self, rng: &mut StreamRng) -> (u32, u32) {
        let (p, o) = self.pairs[rng.random_range(0..self.pairs.len())];
        (
            p.clamp(self.prompt_clamp.0, self.prompt_clamp.1),
            o.clamp(self.output_clamp.0, self.output_clamp.1),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{TraceCfg, TraceFormat};
    use std::collections::BTreeSet;

    fn sample_cfg(max_pairs: Option<u64>) -> LengthPairsCfg {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../scenarios/traces/azure_conv_sample.csv");
        LengthPairsCfg {
            trace: TraceCfg::new(TraceFormat::Azure, path.display().to_string()),
            max_pairs,
            prompt_min: None,
            prompt_max: Some(4000),
            output_min: None,
            output_max: None,
        }
    }

    #[test]
    fn pairs_come_from_the_trace_rows_and_keep_their_correlation() {
        let ctx = Context::new("t", std::path::Path::new("."), 1);
        let (all, report) = LengthPairs::build(&sample_cfg(None), "k", &ctx).unwrap();
        assert_eq!(all.len(), 300);
        assert_eq!(report.requests, 300);
        let rows: BTreeSet<(u32, u32)> = all.pairs.iter().copied().collect();
        let mut r = rng::stream(3, "t");
        for _ in 0..2000 {
            let (p, o) = all.sample(&mut r);
            assert!(p <= 4000, "clamped");
            assert!(
                rows.iter().any(|&(rp, ro)| rp.min(4000) == p && ro == o),
                "({p}, {o}) is a row"
            );
        }
        // A reservoir of 50 keeps 50 of the rows, the same ones for a seed.
        let (a, _) = LengthPairs::build(&sample_cfg(Some(50)), "k", &ctx).unwrap();
        let (b, _) = LengthPairs::build(&sample_cfg(Some(50)), "k", &ctx).unwrap();
        assert_eq!(a.len(), 50);
        assert_eq!(a.pairs, b.pairs);
        assert!(a.pairs.iter().all(|x| rows.contains(x)));
    }
}
