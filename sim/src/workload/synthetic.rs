//! Synthetic open-loop streams: an arrival process and token-length
//! distributions, each drawing from its own seeded stream so that, e.g.,
//! changing output lengths leaves arrival times untouched.

use super::{RequestSource, RequestSpec};
use crate::rng::{self, StreamRng};
use crate::scenario::{ArrivalCfg, LengthDist, WorkloadCfg};
use crate::time::{secs_to_nanos, SimTime};
use rand::Rng;
use rand_distr::{Distribution, Exp, Gamma, LogNormal, Normal};

/// Inter-arrival gap sampler.
enum Gaps {
    Exp(Exp<f64>),
    Gamma(Gamma<f64>),
}

/// A token-length sampler with its clamps.
pub struct LengthSampler {
    kind: LengthKind,
    min: u32,
    max: u32,
}

enum LengthKind {
    Fixed(u32),
    Uniform(u32, u32),
    Normal(Normal<f64>),
    LogNormal(LogNormal<f64>),
}

impl LengthSampler {
    pub fn new(d: &LengthDist) -> LengthSampler {
        let clamp =
            |min: Option<u32>, max: Option<u32>| (min.unwrap_or(1).max(1), max.unwrap_or(u32::MAX));
        match *d {
            LengthDist::Fixed { value } => LengthSampler {
                kind: LengthKind::Fixed(value),
                min: 1,
                max: u32::MAX,
            },
            LengthDist::Uniform { min, max } => LengthSampler {
                kind: LengthKind::Uniform(min, max),
                min,
                max,
            },
            LengthDist::Normal { mean, sd, min, max } => {
                let (min, max) = clamp(min, max);
                LengthSampler {
                    // Validated: mean > 0, sd ≥ 0 and finite.
                    kind: LengthKind::Normal(Normal::new(mean, sd).expect("validated normal")),
                    min,
                    max,
                }
            }
            LengthDist::Lognormal { mean, cv, min, max } => {
                let (min, max) = clamp(min, max);
                LengthSampler {
                    kind: LengthKind::LogNormal(
                        LogNormal::from_mean_cv(mean, cv).expect("validated lognormal"),
                    ),
                    min,
                    max,
                }
            }
        }
    }

    pub fn sample(&self, rng: &mut StreamRng) -> u32 {
        let v = match &self.kind {
            LengthKind::Fixed(v) => return *v,
            LengthKind::Uniform(lo, hi) => return rng.random_range(*lo..=*hi),
            LengthKind::Normal(d) => d.sample(rng),
            LengthKind::LogNormal(d) => d.sample(rng),
        };
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

/// A generated request stream: an endless iterator of requests in arrival order.
pub struct Generator {
    gaps: Gaps,
    prompt: LengthSampler,
    output: LengthSampler,
    arrival_rng: StreamRng,
    prompt_rng: StreamRng,
    output_rng: StreamRng,
    /// Arrival time in exact f64 seconds, so rounding to nanoseconds does not
    /// accumulate over millions of gaps.
    t: f64,
}

impl Generator {
    pub fn new(cfg: &WorkloadCfg, seed: u64) -> Generator {
        let gaps = match cfg.arrival {
            ArrivalCfg::Poisson { rate } => Gaps::Exp(Exp::new(rate).expect("validated rate")),
            ArrivalCfg::Gamma { rate, cv } => {
                // Gamma(k, θ) has mean kθ and CV 1/√k: k = 1/cv², θ = 1/(rate·k).
                let k = 1.0 / (cv * cv);
                Gaps::Gamma(Gamma::new(k, 1.0 / (rate * k)).expect("validated gamma"))
            }
        };
        Generator {
            gaps,
            prompt: LengthSampler::new(&cfg.prompt_tokens),
            output: LengthSampler::new(&cfg.output_tokens),
            arrival_rng: rng::stream(seed, "workload.arrivals"),
            prompt_rng: rng::stream(seed, "workload.prompt_tokens"),
            output_rng: rng::stream(seed, "workload.output_tokens"),
            t: 0.0,
        }
    }
}

impl Iterator for Generator {
    type Item = RequestSpec;

    fn next(&mut self) -> Option<RequestSpec> {
        let gap = match &self.gaps {
            Gaps::Exp(d) => d.sample(&mut self.arrival_rng),
            Gaps::Gamma(d) => d.sample(&mut self.arrival_rng),
        };
        self.t += gap;
        Some(RequestSpec {
            arrival: SimTime(secs_to_nanos(self.t)),
            prompt_tokens: self.prompt.sample(&mut self.prompt_rng),
            output_tokens: self.output.sample(&mut self.output_rng),
            ..RequestSpec::default()
        })
    }
}

impl RequestSource for Generator {
    fn next_request(&mut self) -> Option<RequestSpec> {
        self.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(arrival: ArrivalCfg, prompt: LengthDist) -> WorkloadCfg {
        WorkloadCfg {
            arrival,
            prompt_tokens: prompt,
            output_tokens: LengthDist::Fixed { value: 5 },
            shared_prefix: None,
            conversation: None,
        }
    }

    fn gap_stats(g: Generator, n: usize) -> (f64, f64) {
        let times: Vec<f64> = g.take(n).map(|r| r.arrival.as_secs_f64()).collect();
        let gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        (mean, var.sqrt() / mean)
    }

    #[test]
    fn poisson_and_gamma_gaps_have_their_mean_and_cv() {
        let fixed = LengthDist::Fixed { value: 10 };
        let (m, cv) = gap_stats(
            Generator::new(&cfg(ArrivalCfg::Poisson { rate: 4.0 }, fixed.clone()), 1),
            200_000,
        );
        assert!(
            (m - 0.25).abs() < 0.0025 && (cv - 1.0).abs() < 0.02,
            "{m} {cv}"
        );
        let (m, cv) = gap_stats(
            Generator::new(
                &cfg(
                    ArrivalCfg::Gamma {
                        rate: 10.0,
                        cv: 3.0,
                    },
                    fixed,
                ),
                2,
            ),
            200_000,
        );
        assert!(
            (m - 0.1).abs() < 0.003 && (cv - 3.0).abs() < 0.1,
            "{m} {cv}"
        );
    }

    #[test]
    fn lengths_follow_their_distribution_and_clamps() {
        let d = LengthDist::Lognormal {
            mean: 500.0,
            cv: 1.0,
            min: Some(4),
            max: Some(4000),
        };
        let g = Generator::new(&cfg(ArrivalCfg::Poisson { rate: 1.0 }, d), 3);
        let v: Vec<u32> = g.take(100_000).map(|r| r.prompt_tokens).collect();
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
        assert!((mean - 500.0).abs() < 10.0, "{mean}");
        assert!(v.iter().all(|&x| (4..=4000).contains(&x)));
        let d = LengthDist::Normal {
            mean: 10.0,
            sd: 50.0,
            min: None,
            max: Some(20),
        };
        let g = Generator::new(&cfg(ArrivalCfg::Poisson { rate: 1.0 }, d), 3);
        assert!(g.take(10_000).all(|r| (1..=20).contains(&r.prompt_tokens)));
        let d = LengthDist::Uniform { min: 3, max: 5 };
        let g = Generator::new(&cfg(ArrivalCfg::Poisson { rate: 1.0 }, d), 3);
        let v: Vec<u32> = g.take(10_000).map(|r| r.prompt_tokens).collect();
        assert!(v.contains(&3) && v.contains(&5) && v.iter().all(|&x| (3..=5).contains(&x)));
    }

    #[test]
    fn same_seed_same_stream_other_seed_other_stream() {
        let c = cfg(
            ArrivalCfg::Poisson { rate: 2.0 },
            LengthDist::Fixed { value: 1 },
        );
        let a: Vec<_> = Generator::new(&c, 9).take(50).collect();
        let b: Vec<_> = Generator::new(&c, 9).take(50).collect();
        let d: Vec<_> = Generator::new(&c, 10).take(50).collect();
        assert_eq!(a, b);
        assert_ne!(a, d);
    }
}
