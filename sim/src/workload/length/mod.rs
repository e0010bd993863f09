//! Token-length models: how long prompts and outputs are. Each model is one
//! file; [`LengthSampler`] rounds and clamps a model's samples, and
//! [`Lengths`] draws a request's (prompt, output) pair, independently or
//! jointly from a trace's pairs.

mod empirical;
mod fixed;
mod lognormal;
mod normal;
mod pairs;
mod uniform;
mod zipf;

pub use empirical::Empirical;
pub use fixed::Fixed;
pub use lognormal::LogNormalLength;
pub use normal::NormalLength;
pub use pairs::LengthPairs;
pub use uniform::UniformLength;
pub use zipf::ZipfLength;

use super::{Context, TraceReport, WorkloadError};
use crate::rng::StreamRng;
use crate::scenario::{LengthDist, WorkloadCfg};

/// A distribution of token counts.
pub trait LengthModel: Send + Sync {
    /// One raw sample (rounded and clamped by [`LengthSampler`]).
    fn sample(&self, rng: &mut StreamRng) -> f64;
}

/// A length model with its clamps: samples are rounded to the nearest
/// integer and clamped to [min, max] (min defaults to 1).
pub struct LengthSampler {
    model: Box<dyn LengthModel>,
    min: u32,
    max: u32,
}

impl LengthSampler {
    /// Wraps a model with clamps.
    pub fn new(model: Box<dyn LengthModel>, min: Option<u32>, max: Option<u32>) -> LengthSampler {
        LengthSampler {
            model,
            min: min.unwrap_or(1).max(1),
            max: max.unwrap_or(u32::MAX),
        }
    }

    /// The sampler a (validated) scenario distribution describes; files it
    /// names are read now. `key` names it in errors. Returns the report of
    /// the trace it read, if any.
    pub fn build(
        d: &LengthDist,
        key: &str,
        ctx: &Context,
    ) -> Result<(LengthSampler, Option<TraceReport>), WorkloadError> {
        let s = |m: Box<dyn LengthModel>, min, max| LengthSampler::new(m, min, max);
        Ok(match d {
            LengthDist::Fixed { value } => (s(Box::new(Fixed(*value)), None, None), None),
            LengthDist::Uniform { min, max } => (
                s(
                    Box::new(UniformLength::new(*min, *max)),
                    Some(*min),
                    Some(*max),
                ),
                None,
            ),
            LengthDist::Normal { mean, sd, min, max } => {
                (s(Box::new(NormalLength::new(*mean, *sd)), *min, *max), None)
            }
            LengthDist::Lognormal { mean, cv, min, max } => (
                s(Box::new(LogNormalLength::new(*mean, *cv)), *min, *max),
                None,
            ),
            LengthDist::Zipf {
                exponent,
                n,
                min,
                max,
            } => (
                s(Box::new(ZipfLength::new(*n, *exponent)), *min, *max),
                None,
            ),
            LengthDist::Empirical { min, max, .. } => {
                let (e, report) = Empirical::build(d, key, ctx)?;
                (s(Box::new(e), *min, *max), report)
            }
        })
    }

    pub fn sample(&self, rng: &mut StreamRng) -> u32 {
        self.clamp(self.model.sample(rng))
    }

    fn clamp(&self, v: f64) -> u32 {
        let r = v.round();
        if r <= self.min as f64 {
            self.min
        } else if r >= self.max as f64 {
            self.max
        } else {
            r as u32
        }
    }
}

/// How a request's (prompt, output) lengths are drawn.
pub enum Lengths {
    /// From two independent models.
    Independent {
        prompt: LengthSampler,
        output: LengthSampler,
    },
    /// Jointly, from a trace's pairs.
    Paired(LengthPairs),
}

impl Lengths {
    /// The lengths of a (validated) open-loop or closed-loop `[workload]`,
    /// with the reports of the traces read for them.
    pub fn build(
        cfg: &WorkloadCfg,
        ctx: &Context,
    ) -> Result<(Lengths, Vec<TraceReport>), WorkloadError> {
        if let Some(p) = &cfg.length_pairs {
            let (pairs, report) = LengthPairs::build(p, "workload.length_pairs", ctx)?;
            return Ok((Lengths::Paired(pairs), vec![report]));
        }
        let missing = |k: &str| ctx.config_error(k, "missing");
        let p = cfg
            .prompt_tokens
            .as_ref()
            .ok_or_else(|| missing("workload.prompt_tokens"))?;
        let o = cfg
            .output_tokens
            .as_ref()
            .ok_or_else(|| missing("workload.output_tokens"))?;
        let (prompt, rp) = LengthSampler::build(p, "workload.prompt_tokens", ctx)?;
        let (output, ro) = LengthSampler::build(o, "workload.output_tokens", ctx)?;
        Ok((
            Lengths::Independent { prompt, output },
            rp.into_iter().chain(ro).collect(),
        ))
    }

    /// One request's (prompt, output) tokens. Independent lengths draw from
    /// their own streams, so changing one leaves the other untouched.
    pub fn sample(&self, prompt_rng: &mut StreamRng, output_rng: &mut StreamRng) -> (u32, u32) {
        match self {
            Lengths::Independent { prompt, output } => {
                (prompt.sample(prompt_rng), output.sample(output_rng))
            }
            Lengths::Paired(p) => p.sample(prompt_rng),
        }
    }
}

/// Sample mean and CV of a length model (test helper).
#[cfg(test)]
pub(crate) fn moments(s: &LengthSampler, seed: u64, n: usize) -> (f64, f64) {
    let mut rng = crate::rng::stream(seed, "lengths");
    let (mut a, mut b) = (0.0, 0.0);
    for _ in 0..n {
        let v = s.sample(&mut rng) as f64;
        a += v;
        b += v * v;
    }
    let m = a / n as f64;
    (m, (b / n as f64 - m * m).sqrt() / m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_distributions_stated_mean_is_what_its_sampler_draws() {
        // `LengthDist::mean` (the offered load of conversations rests on it)
        // against 400,000 draws of the sampler, clamps and rounding included.
        let ctx = Context::new("t.toml", std::path::Path::new("."), 1);
        let cases = [
            LengthDist::Uniform { min: 1, max: 6 },
            LengthDist::Normal {
                mean: 3.0,
                sd: 2.0,
                min: Some(1),
                max: Some(6),
            },
            LengthDist::Lognormal {
                mean: 4.0,
                cv: 1.0,
                min: None,
                max: Some(12),
            },
            LengthDist::Lognormal {
                mean: 400.0,
                cv: 0.5,
                min: Some(8),
                max: None,
            },
            LengthDist::Zipf {
                exponent: 1.2,
                n: 10,
                min: None,
                max: Some(5),
            },
        ];
        for d in &cases {
            let (s, _) = LengthSampler::build(d, "k", &ctx).unwrap();
            let want = moments(&s, 5, 400_000).0;
            let got = d.mean().unwrap();
            assert!(
                (got - want).abs() < 0.01 * want,
                "{d:?}: {got} vs sampled {want}"
            );
        }
    }
}
