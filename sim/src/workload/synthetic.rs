//! Synthetic open-loop streams: an arrival process and token lengths, each
//! drawing from its own seeded stream so that, e.g., changing output lengths
//! leaves arrival times untouched.

use super::arrival::{self, ArrivalProcess};
use super::{
    Context, Lengths, RequestSource, RequestSpec, TraceReport, WorkloadError, WorkloadReport,
};
use crate::rng::{self, StreamRng};
use crate::scenario::{ArrivalCfg, WorkloadCfg};
use crate::time::{secs_to_nanos, SimTime};

/// A generated request stream: requests in arrival order, until the arrival
/// process ends (most never do; the horizon stops the run).
pub struct Generator {
    arrivals: Box<dyn ArrivalProcess>,
    lengths: Lengths,
    /// Reports of traces the lengths were drawn from.
    reports: Vec<TraceReport>,
    arrival_rng: StreamRng,
    prompt_rng: StreamRng,
    output_rng: StreamRng,
}

impl Generator {
    /// The open-loop stream of a (validated) `[workload]` with an arrival
    /// process.
    pub fn new(cfg: &WorkloadCfg, ctx: &Context) -> Result<Generator, WorkloadError> {
        let a = match &cfg.arrival {
            None => return Err(ctx.config_error("workload.arrival", "missing")),
            Some(ArrivalCfg::Closed { .. }) => {
                return Err(ctx.config_error(
                    "workload.arrival",
                    "a closed loop is not an open-loop stream (see ClosedLoop)",
                ))
            }
            Some(a) => a,
        };
        let (lengths, reports) = Lengths::build(cfg, ctx)?;
        Ok(Self::with_lengths(
            arrival::build(a),
            lengths,
            reports,
            ctx.seed,
        ))
    }

    pub fn with_lengths(
        arrivals: Box<dyn ArrivalProcess>,
        lengths: Lengths,
        reports: Vec<TraceReport>,
        seed: u64,
    ) -> Generator {
        Generator {
            arrivals,
            lengths,
            reports,
            arrival_rng: rng::stream(seed, "workload.arrivals"),
            prompt_rng: rng::stream(seed, "workload.prompt_tokens"),
            output_rng: rng::stream(seed, "workload.output_tokens"),
        }
    }
}

impl Iterator for Generator {
    type Item = RequestSpec;

    fn next(&mut self) -> Option<RequestSpec> {
        let t = self.arrivals.next_arrival(&mut self.arrival_rng)?;
        let (prompt_tokens, output_tokens) = self
            .lengths
            .sample(&mut self.prompt_rng, &mut self.output_rng);
        Some(RequestSpec {
            arrival: SimTime(secs_to_nanos(t)),
            prompt_tokens,
            output_tokens,
            ..RequestSpec::default()
        })
    }
}

impl RequestSource for Generator {
    /// Arrivals drawn from the arrival process alone.
    fn open_loop(&self) -> bool {
        true
    }

    fn next_request(&mut self) -> Option<RequestSpec> {
        self.next()
    }

    fn finish(&mut self) -> Result<Option<WorkloadReport>, WorkloadError> {
        Ok((!self.reports.is_empty()).then(|| WorkloadReport {
            traces: self.reports.clone(),
            users_left: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::LengthDist;

    fn cfg(arrival: ArrivalCfg, prompt: LengthDist) -> WorkloadCfg {
        WorkloadCfg {
            arrival: Some(arrival),
            prompt_tokens: Some(prompt),
            output_tokens: Some(LengthDist::Fixed { value: 5 }),
            trace: None,
            length_pairs: None,
            shared_prefix: None,
            conversation: None,
            n: None,
        }
    }

    fn gen(c: &WorkloadCfg, seed: u64) -> Generator {
        Generator::new(c, &Context::new("t", std::path::Path::new("."), seed)).unwrap()
    }

    #[test]
    fn same_seed_same_stream_other_seed_other_stream() {
        for a in [
            ArrivalCfg::Poisson { rate: 2.0 },
            ArrivalCfg::Weibull { rate: 2.0, cv: 3.0 },
            ArrivalCfg::OnOff {
                on_rate: 9.0,
                off_rate: 0.5,
                mean_on_s: 1.0,
                mean_off_s: 2.0,
            },
            ArrivalCfg::Diurnal {
                mean_rate: 3.0,
                amplitude: 0.5,
                period_s: 60.0,
                peak_s: 0.0,
                cv: Some(2.0),
            },
        ] {
            let c = cfg(
                a,
                LengthDist::Zipf {
                    exponent: 1.1,
                    n: 4000,
                    min: None,
                    max: None,
                },
            );
            let a: Vec<_> = gen(&c, 9).take(50).collect();
            let b: Vec<_> = gen(&c, 9).take(50).collect();
            let d: Vec<_> = gen(&c, 10).take(50).collect();
            assert_eq!(a, b);
            assert_ne!(a, d);
            assert!(a.windows(2).all(|w| w[0].arrival <= w[1].arrival));
        }
    }

    #[test]
    fn arrivals_do_not_depend_on_the_length_model() {
        let p = |d| cfg(ArrivalCfg::Gamma { rate: 5.0, cv: 2.0 }, d);
        let a: Vec<_> = gen(&p(LengthDist::Fixed { value: 3 }), 4)
            .take(100)
            .collect();
        let b: Vec<_> = gen(&p(LengthDist::Uniform { min: 1, max: 99 }), 4)
            .take(100)
            .collect();
        assert!(a.iter().zip(&b).all(|(x, y)| x.arrival == y.arrival));
        assert!(a
            .iter()
            .zip(&b)
            .any(|(x, y)| x.prompt_tokens != y.prompt_tokens));
    }
}
