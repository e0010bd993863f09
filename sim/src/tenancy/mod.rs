//! Multi-tenancy: tenants with their own workloads, SLOs, priority classes
//! and weights; admission control before the queue (token buckets, queue and
//! concurrency caps, deadline shedding) with retries after a back-off; the
//! tenants' shares that the replica's fairness policies (`replica::fairness`)
//! order its waiting queue by; and the per-tenant report.
//!
//! The simulation calls in at three points: [`Tenancy::admit`] before a
//! request is routed, [`Tenancy::on_end`] when one ends, and
//! [`Tenancy::report`] at the end. Without `[[tenants]]` every call is a
//! no-op and runs are exactly as before.

mod admission;
pub mod bucket;
pub mod report;
mod source;

pub use report::{TenancyReport, TenantSummary};
pub use source::{build_source, probe, tenant_seed};

use crate::cost::{BatchShape, CostModel};
use crate::replica::fairness::{self, TenantShares, Waiting};
use crate::replica::Replica;
use crate::request::{RejectReason, Request, Status};
use crate::scenario::SloTargets;
use crate::scenario::{FairnessCfg, RetryCfg, Scenario, TenantsPlan};
use crate::time::{secs_to_nanos, SimTime};
use crate::workload::RequestSpec;
use admission::{FleetAdmission, Gate};

/// The tenants of a run and their admission state.
pub struct Tenancy {
    names: Vec<String>,
    slos: Vec<Option<SloTargets>>,
    shares: TenantShares,
    fairness: FairnessCfg,
    gates: Vec<Gate>,
    fleet: FleetAdmission,
    retry: Vec<Option<RetryCfg>>,
    retries: Vec<u64>,
    /// Rejected requests waiting out their back-off, with their attempt.
    slab: Vec<Option<(RequestSpec, u32)>>,
    free: Vec<u32>,
    /// Attempt number of the request being admitted (0 = first try).
    attempt: u32,
}

impl Tenancy {
    /// The tenants of a run, built from their slice of the plan.
    pub fn new(plan: &TenantsPlan) -> Tenancy {
        Tenancy {
            names: plan.names.clone(),
            shares: TenantShares {
                weights: plan.weights.clone(),
                levels: plan.levels.clone(),
            },
            fairness: plan.fairness.clone(),
            gates: plan
                .limits
                .iter()
                .zip(&plan.slos)
                .map(|(l, slo)| Gate::new(l, slo.and_then(|x| x.ttft_ms)))
                .collect(),
            slos: plan.slos.clone(),
            fleet: FleetAdmission {
                max_queue: plan.max_queue,
                prefill_ns_per_token: 0.0,
            },
            retry: plan.retry.clone(),
            retries: vec![0; plan.names.len()],
            slab: Vec::new(),
            free: Vec::new(),
            attempt: 0,
        }
    }

    /// Whether the scenario configures tenants.
    pub fn is_active(&self) -> bool {
        !self.names.is_empty()
    }

    /// Gives each replica's waiting queue the scenario's fairness policy.
    pub fn install(&self, replicas: &mut [Replica]) {
        if self.fairness.policy != crate::scenario::FairnessKind::Fcfs {
            for r in replicas {
                r.set_fairness(fairness::build(&self.fairness, &self.shares));
            }
        }
    }

    /// Tells deadline shedding how long a full prefill batch takes per token.
    pub fn set_prefill_speed(&mut self, ns_per_token: f64) {
        self.fleet.prefill_ns_per_token = ns_per_token;
    }

    /// Whether `spec` may queue now (see `admission`). Requests of tenants
    /// the scenario does not list pass.
    pub fn admit(
        &mut self,
        spec: &RequestSpec,
        now: SimTime,
        replicas: &[Replica],
    ) -> Result<(), RejectReason> {
        let verdict = match self.gates.get_mut(spec.tenant as usize) {
            Some(g) => g.admit(spec, now, &self.fleet, replicas),
            None => Ok(()),
        };
        if verdict.is_ok() {
            // The attempt is over; the next request is a first try.
            self.attempt = 0;
        }
        verdict
    }

    /// A request rejected for `reason` at `now`: when its tenant retries and
    /// attempts are left, keeps it and returns when it comes back and the
    /// slot to fetch it from ([`Self::take_retry`]). Rejections that no wait
    /// can cure (too long for the model) are final.
    pub fn retry(
        &mut self,
        spec: &RequestSpec,
        reason: RejectReason,
        now: SimTime,
        horizon: Option<SimTime>,
    ) -> Option<(SimTime, u32)> {
        let attempt = std::mem::take(&mut self.attempt);
        let retryable = matches!(
            reason,
            RejectReason::RateLimited
                | RejectReason::QueueFull
                | RejectReason::ConcurrencyLimit
                | RejectReason::Deadline
        );
        let cfg = self.retry.get(spec.tenant as usize)?.as_ref()?;
        if !retryable || attempt >= cfg.max_retries {
            return None;
        }
        let wait = cfg.backoff_s * cfg.multiplier.powi(attempt as i32);
        let at = now.plus(secs_to_nanos(wait).max(1));
        if horizon.is_some_and(|h| at > h) {
            return None;
        }
        let mut again = spec.clone();
        again.arrival = at;
        self.retries[spec.tenant as usize] += 1;
        let entry = Some((again, attempt + 1));
        let slot = match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = entry;
                i
            }
            None => {
                self.slab.push(entry);
                (self.slab.len() - 1) as u32
            }
        };
        Some((at, slot))
    }

    /// The retried request in `slot`; the next [`Self::admit`] is its attempt.
    pub fn take_retry(&mut self, slot: u32) -> RequestSpec {
        let (spec, attempt) = self.slab[slot as usize].take().expect("retry slot");
        self.free.push(slot);
        self.attempt = attempt;
        spec
    }

    /// A request ended (completed, failed after admission, or rejected at
    /// arrival and not retried: `admitted` false).
    pub fn on_end(&mut self, r: &Request, now: SimTime, admitted: bool) {
        if let Some(g) = self.gates.get_mut(r.tenant as usize) {
            g.on_end(r, now, admitted);
        }
    }

    /// How a routed request joins a waiting queue.
    pub fn waiting(id: u32, r: &Request) -> Waiting {
        Waiting {
            id,
            tenant: r.tenant,
            tokens: r.prompt_tokens,
            output: r.output_tokens,
        }
    }

    /// Per-tenant conservation: each tenant's admitted-and-unended count
    /// equals its requests still in flight.
    pub fn check(&self, reqs: &[Request]) -> Result<(), String> {
        let mut in_flight = vec![0u64; self.gates.len()];
        for r in reqs {
            if r.status == Status::InFlight {
                if let Some(n) = in_flight.get_mut(r.tenant as usize) {
                    *n += 1;
                }
            }
        }
        for (i, g) in self.gates.iter().enumerate() {
            if g.in_flight != in_flight[i] {
                return Err(format!(
                    "tenant {}: admission counts {} in flight, the records {}",
                    self.names[i], g.in_flight, in_flight[i]
                ));
            }
        }
        Ok(())
    }

    /// What the per-tenant report folds from each ended request, when the
    /// scenario has tenants (a streamed run feeds it as requests end).
    pub fn records(&self) -> Option<report::TenantRecords> {
        self.is_active()
            .then(|| report::TenantRecords::new(&self.slos))
    }

    /// The per-tenant report (when the scenario has tenants) from the
    /// records folded as requests ended; fails when samples spilled to disk
    /// cannot be read back.
    pub fn report_from(
        &self,
        acc: report::TenantRecords,
        duration: SimTime,
        gpus: u32,
    ) -> Result<Option<TenancyReport>, String> {
        if !self.is_active() {
            return Ok(None);
        }
        let meta: Vec<report::TenantMeta> = (0..self.names.len())
            .map(|i| report::TenantMeta {
                name: &self.names[i],
                priority: self.shares.levels[i],
                weight: self.shares.weights[i],
                slo: self.slos[i],
                retries: self.retries[i],
            })
            .collect();
        report::build_from(
            self.fairness.policy.name(),
            &meta,
            acc,
            duration,
            gpus,
            (self.fairness.input_weight, self.fairness.output_weight),
        )
        .map(Some)
    }
}

/// Nanoseconds per prompt token of a full-budget prefill iteration on an
/// empty replica: the speed deadline shedding predicts TTFT with.
pub fn prefill_ns_per_token(s: &Scenario, cost: &dyn CostModel) -> f64 {
    let tokens = s.limits.max_batched_tokens.clamp(1, 1 << 16) as u64;
    let mut shape = BatchShape::default();
    shape.add_prefill(tokens, 0);
    cost.iteration_time(&shape) as f64 / tokens as f64
}

#[cfg(test)]
mod tests;
