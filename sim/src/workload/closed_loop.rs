//! Closed-loop users: N clients that each wait for their request to end,
//! think, and send the next one — the concurrency mode of load-testing
//! tools (Locust users with `wait_time`, k6 virtual users with `sleep`,
//! genai-perf's `--concurrency`). Offered load then falls as latency grows,
//! unlike an open-loop stream (Schroeder et al., "Open versus closed: a
//! cautionary tale", NSDI'06).

use super::{Lengths, RequestSource, RequestSpec, TraceReport, WorkloadError, WorkloadReport};
use crate::request::Request;
use crate::rng::{self, StreamRng};
use crate::scenario::ThinkTime;
use crate::time::{secs_to_nanos, SimTime};
use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal};

/// Think-time sampler, seconds.
enum Think {
    Fixed(f64),
    Exp(Exp<f64>),
    Uniform(f64, f64),
    LogNormal(LogNormal<f64>),
}

impl Think {
    fn new(t: Option<&ThinkTime>) -> Think {
        match t {
            None => Think::Fixed(0.0),
            Some(ThinkTime::Fixed { value_s }) => Think::Fixed(*value_s),
            Some(ThinkTime::Exponential { mean_s }) => {
                Think::Exp(Exp::new(1.0 / mean_s).expect("validated mean"))
            }
            Some(ThinkTime::Uniform { min_s, max_s }) => Think::Uniform(*min_s, *max_s),
            Some(ThinkTime::Lognormal { mean_s, cv }) => Think::LogNormal(
                LogNormal::from_mean_cv(*mean_s, *cv).expect("validated think time"),
            ),
        }
    }

    fn sample(&self, rng: &mut StreamRng) -> f64 {
        match self {
            Think::Fixed(v) => *v,
            Think::Exp(d) => d.sample(rng),
            Think::Uniform(a, b) if a < b => rng.random_range(*a..*b),
            Think::Uniform(a, _) => *a,
            Think::LogNormal(d) => d.sample(rng),
        }
    }
}

/// `users` clients (sessions 1..=users). User i sends its first request at
/// ramp_up · (i − 1) / users (an even spawn rate, as Locust's), then one a
/// think time after each of its requests ends. After a rejection the user
/// thinks as usual; if that think time is zero it leaves instead, since it
/// would otherwise retry in the same instant forever (counted in the report).
pub struct ClosedLoop {
    users: u32,
    started: u32,
    ramp_up_s: f64,
    think: Think,
    lengths: Lengths,
    reports: Vec<TraceReport>,
    think_rng: StreamRng,
    prompt_rng: StreamRng,
    output_rng: StreamRng,
    users_left: u64,
}

impl ClosedLoop {
    pub fn new(
        users: u32,
        think: Option<&ThinkTime>,
        ramp_up_s: f64,
        lengths: Lengths,
        reports: Vec<TraceReport>,
        seed: u64,
    ) -> ClosedLoop {
        ClosedLoop {
            users,
            started: 0,
            ramp_up_s,
            think: Think::new(think),
            lengths,
            reports,
            think_rng: rng::stream(seed, "workload.think_time"),
            prompt_rng: rng::stream(seed, "workload.prompt_tokens"),
            output_rng: rng::stream(seed, "workload.output_tokens"),
            users_left: 0,
        }
    }

    fn request(&mut self, at: SimTime, user: u64) -> RequestSpec {
        let (prompt_tokens, output_tokens) = self
            .lengths
            .sample(&mut self.prompt_rng, &mut self.output_rng);
        RequestSpec {
            arrival: at,
            prompt_tokens,
            output_tokens,
            session: user,
            ..RequestSpec::default()
        }
    }
}

impl RequestSource for ClosedLoop {
    fn next_request(&mut self) -> Option<RequestSpec> {
        if self.started >= self.users {
            return None;
        }
        let i = self.started;
        self.started += 1;
        let at = self.ramp_up_s * i as f64 / self.users as f64;
        Some(self.request(SimTime(secs_to_nanos(at)), i as u64 + 1))
    }

    fn on_request_end(
        &mut self,
        req: &Request,
        now: SimTime,
        completed: bool,
    ) -> Option<RequestSpec> {
        let think = self.think.sample(&mut self.think_rng);
        if !completed && think <= 0.0 {
            self.users_left += 1;
            return None;
        }
        Some(self.request(now.plus(secs_to_nanos(think)), req.session()))
    }

    fn finish(&mut self) -> Result<Option<WorkloadReport>, WorkloadError> {
        Ok(Some(WorkloadReport {
            traces: self.reports.clone(),
            users_left: Some(self.users_left),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::length::{Fixed, LengthSampler};

    fn fixed(v: u32) -> LengthSampler {
        LengthSampler::new(Box::new(Fixed(v)), None, None)
    }

    fn lengths() -> Lengths {
        Lengths::Independent {
            prompt: fixed(100),
            output: fixed(10),
        }
    }

    #[test]
    fn users_start_over_the_ramp_and_follow_up_after_thinking() {
        let think = ThinkTime::Fixed { value_s: 2.0 };
        let mut c = ClosedLoop::new(4, Some(&think), 8.0, lengths(), vec![], 1);
        let first: Vec<_> = std::iter::from_fn(|| c.next_request()).collect();
        let starts: Vec<f64> = first.iter().map(|r| r.arrival.as_secs_f64()).collect();
        assert_eq!(starts, vec![0.0, 2.0, 4.0, 6.0]);
        assert_eq!(
            first.iter().map(|r| r.session).collect::<Vec<_>>(),
            vec![1, 2, 3, 4]
        );
        let mut done = Request::from_spec(first[2].clone());
        done.status = crate::request::Status::Completed;
        let next = c
            .on_request_end(&done, SimTime::from_secs_f64(10.0), true)
            .unwrap();
        assert_eq!(next.session, 3);
        assert_eq!(next.arrival, SimTime::from_secs_f64(12.0));
        assert_eq!((next.prompt_tokens, next.output_tokens), (100, 10));
    }

    #[test]
    fn a_rejected_user_without_think_time_leaves() {
        let mut c = ClosedLoop::new(2, None, 0.0, lengths(), vec![], 1);
        let r = Request::from_spec(c.next_request().unwrap());
        assert!(c.on_request_end(&r, SimTime(5), true).is_some());
        assert!(c.on_request_end(&r, SimTime(5), false).is_none());
        let rep = c.finish().unwrap().unwrap();
        assert_eq!(rep.users_left, Some(1));
    }

    #[test]
    fn exponential_think_times_have_their_mean() {
        let think = ThinkTime::Exponential { mean_s: 3.0 };
        let mut c = ClosedLoop::new(1, Some(&think), 0.0, lengths(), vec![], 2);
        let r = Request::from_spec(c.next_request().unwrap());
        let n = 50_000;
        let total: f64 = (0..n)
            .map(|_| {
                c.on_request_end(&r, SimTime::ZERO, true)
                    .unwrap()
                    .arrival
                    .as_secs_f64()
            })
            .sum();
        assert!((total / n as f64 / 3.0 - 1.0).abs() < 0.02);
    }
}
