//! Admission control before the queue: a request that passes the engine's
//! hard limits still has to pass its tenant's gate — concurrency cap, queue
//! caps (the tenant's and the fleet's), deadline shedding, then the token
//! buckets — or it is rejected with the reason a gateway would answer
//! (HTTP 429 `rate_limited` / `concurrency_limit`, 503 `queue_full`,
//! `deadline`). Checks that consume nothing come first, and both buckets are
//! checked before either is charged, so a rejected request costs its tenant
//! nothing.

use super::bucket::TokenBucket;
use crate::replica::Replica;
use crate::request::{RejectReason, Request};
use crate::scenario::{LimitsCfg, OutputCharge};
use crate::time::{SimTime, NANOS_PER_SEC};
use crate::workload::RequestSpec;

/// One tenant's admission state.
#[derive(Clone, Debug)]
pub struct Gate {
    requests: Option<TokenBucket>,
    tokens: Option<TokenBucket>,
    charge_actual: bool,
    max_queue: Option<u64>,
    max_concurrency: Option<u64>,
    /// TTFT target, ns, when shedding on the deadline.
    shed_after_ns: Option<f64>,
    /// Admitted and not yet ended.
    pub in_flight: u64,
}

impl Gate {
    pub fn new(l: &LimitsCfg, ttft_ms: Option<f64>) -> Gate {
        let requests = l.requests_per_s.map(|r| {
            let burst = l.request_burst.unwrap_or(r.max(1.0));
            TokenBucket::new(r, burst, NANOS_PER_SEC)
        });
        let tokens = l.tokens_per_min.map(|r| {
            let burst = l.token_burst.unwrap_or(r);
            TokenBucket::new(r, burst, 60 * NANOS_PER_SEC)
        });
        Gate {
            requests,
            tokens,
            charge_actual: l.charge_output == OutputCharge::Actual,
            max_queue: l.max_queue,
            max_concurrency: l.max_concurrency,
            shed_after_ns: l
                .shed_on_deadline
                .then(|| ttft_ms.expect("validated: shedding needs a target") * 1e6),
            in_flight: 0,
        }
    }

    /// Tokens the token bucket charges at admission.
    fn upfront_tokens(&self, spec: &RequestSpec) -> u64 {
        let output = if self.charge_actual {
            0
        } else {
            spec.output_tokens as u64
        };
        spec.prompt_tokens as u64 + output
    }

    /// Decides whether `spec` of this tenant may queue now; charges the
    /// buckets and counts it in flight when it may.
    pub fn admit(
        &mut self,
        spec: &RequestSpec,
        now: SimTime,
        fleet: &FleetAdmission,
        replicas: &[Replica],
    ) -> Result<(), RejectReason> {
        let t = spec.tenant;
        if self.max_concurrency.is_some_and(|m| self.in_flight >= m) {
            return Err(RejectReason::ConcurrencyLimit);
        }
        if let Some(m) = self.max_queue {
            let queued: u64 = replicas
                .iter()
                .map(|r| r.waiting().tenant_len(t) as u64)
                .sum();
            if queued >= m {
                return Err(RejectReason::QueueFull);
            }
        }
        if let Some(m) = fleet.max_queue {
            let queued: u64 = replicas.iter().map(|r| r.waiting().len() as u64).sum();
            if queued >= m {
                return Err(RejectReason::QueueFull);
            }
        }
        if let Some(limit) = self.shed_after_ns {
            if fleet.predicted_ttft_ns(spec, replicas) > limit {
                return Err(RejectReason::Deadline);
            }
        }
        let cost = self.upfront_tokens(spec);
        let req_ok = self.requests.as_mut().is_none_or(|b| b.has(1, now));
        let tok_ok = self.tokens.as_mut().is_none_or(|b| b.has(cost, now));
        if !(req_ok && tok_ok) {
            return Err(RejectReason::RateLimited);
        }
        if let Some(b) = &mut self.requests {
            b.take(1, now);
        }
        if let Some(b) = &mut self.tokens {
            b.take(cost, now);
        }
        self.in_flight += 1;
        Ok(())
    }

    /// A request of this tenant ended: completed, rejected at arrival
    /// (`admitted` false: never counted), or failed after admission (a
    /// replica failure with retries exhausted, no ready replica).
    pub fn on_end(&mut self, r: &Request, now: SimTime, admitted: bool) {
        if !admitted {
            return; // never admitted: nothing to release
        }
        self.in_flight -= 1;
        if self.charge_actual {
            if let Some(b) = &mut self.tokens {
                b.take(r.generated as u64, now);
            }
        }
    }
}

/// Fleet-wide admission knowledge: the global queue cap and the prefill
/// speed used to predict a request's TTFT.
#[derive(Clone, Debug, Default)]
pub struct FleetAdmission {
    pub max_queue: Option<u64>,
    /// Nanoseconds one prefill token takes in a full prefill batch.
    pub prefill_ns_per_token: f64,
}

impl FleetAdmission {
    /// A lower bound on the TTFT `spec` would see: the prefill work queued
    /// ahead of it on the least-loaded replica plus its own prompt, at the
    /// replica's full-batch prefill speed (decode interference and running
    /// prefills would only add to it, so shedding on it never sheds a
    /// request that could have made its target on this estimate's terms).
    pub fn predicted_ttft_ns(&self, spec: &RequestSpec, replicas: &[Replica]) -> f64 {
        let ahead = replicas
            .iter()
            .map(|r| r.waiting().tokens())
            .min()
            .unwrap_or(0);
        (ahead + spec.prompt_tokens as u64) as f64 * self.prefill_ns_per_token
    }
}
