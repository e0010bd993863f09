//! Per-tenant results (`summary.json` field `tenancy`): each tenant's
//! counts with rejections by reason and retries, latency percentiles,
//! throughput, SLO attainment and goodput (the run's own definitions, applied
//! to the tenant's requests), the service it received, and Jain's fairness
//! index over weight-normalised service.

use crate::request::summary::RequestsSummary;
use crate::request::Request;
use crate::scenario::SloTargets;
use crate::stats::{Counts, Dist, SloReport};
use crate::time::SimTime;
use serde::Serialize;

/// Latency distributions of one tenant, ms.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct TenantLatency {
    pub queue_wait_ms: Dist,
    pub ttft_ms: Dist,
    pub tpot_ms: Dist,
    pub e2e_ms: Dist,
}

/// What one tenant got out of the run.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct TenantSummary {
    pub name: String,
    /// Priority level (lower is more urgent).
    pub priority: i64,
    pub weight: f64,
    /// Every attempt is a request: a retried rejection counts once as
    /// rejected and again as the retry's own outcome.
    pub counts: Counts,
    /// Rejected attempts that came back after a back-off.
    pub retries: u64,
    pub latency: TenantLatency,
    /// Completed requests per second.
    pub requests_per_s: f64,
    pub input_tokens_per_s: f64,
    pub output_tokens_per_s: f64,
    /// Prompt tokens of requests whose prefill finished, and output tokens
    /// generated (completed or not).
    pub prompt_tokens_served: u64,
    pub output_tokens_served: u64,
    /// input_weight × prompt + output_weight × output tokens served, over
    /// the tenant's weight: the quantity fair policies equalise.
    pub normalized_service: f64,
    /// Against the tenant's targets (its own `slo`, else the scenario's).
    pub slo: Option<SloReport>,
}

/// Multi-tenancy results of a run.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct TenancyReport {
    /// Fairness policy of the replicas' waiting queues.
    pub fairness: String,
    /// Jain's index (Jain, Chiu & Hawe, 1984) of normalized_service over
    /// tenants: 1 when every tenant got the same weighted service, 1/n when
    /// one got everything. Tenants that asked for less than an equal share
    /// lower it without any unfairness, so compare it between policies on
    /// the same workload.
    pub jain_index: f64,
    pub tenants: Vec<TenantSummary>,
}

/// Jain's fairness index of `x`: (Σx)² / (n Σx²); 1 for an empty or all-zero set.
pub fn jain_index(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    if sq == 0.0 {
        1.0
    } else {
        sum * sum / (x.len() as f64 * sq)
    }
}

/// One tenant as configured.
pub struct TenantMeta<'a> {
    pub name: &'a str,
    pub priority: i64,
    pub weight: f64,
    pub slo: Option<SloTargets>,
    pub retries: u64,
}

/// The per-tenant parts of the report, folded one ended request at a time
/// (what a streamed run keeps instead of its requests).
#[derive(Debug, Default)]
pub struct TenantRecords {
    /// Per tenant: its summary so far, prompt tokens of requests whose
    /// prefill finished, output tokens generated.
    per: Vec<(RequestsSummary, u64, u64)>,
}

impl TenantRecords {
    /// One entry per tenant, with that tenant's SLO targets.
    pub fn new(slos: &[Option<SloTargets>]) -> TenantRecords {
        TenantRecords {
            per: slos
                .iter()
                .map(|&slo| (RequestsSummary::new(slo), 0, 0))
                .collect(),
        }
    }

    /// Counts request `r` under its tenant (one of a trace's tenants the
    /// scenario does not list is not reported).
    pub fn add(&mut self, r: &Request) {
        if let Some((s, prompt, output)) = self.per.get_mut(r.tenant as usize) {
            // A tenant's output counts one sample's tokens per request.
            s.add_as(r, 1);
            if r.first_token.is_some() {
                *prompt += r.prompt_tokens as u64;
            }
            *output += r.generated as u64;
        }
    }

    /// The first error spilling samples to disk.
    pub fn error(&self) -> Option<&str> {
        self.per.iter().find_map(|p| p.0.error())
    }
}

/// Builds the report from the folded records.
pub fn build_from(
    fairness: &str,
    tenants: &[TenantMeta],
    acc: TenantRecords,
    duration: SimTime,
    gpus: u32,
    weights: (f64, f64),
) -> Result<TenancyReport, String> {
    let mut out = Vec::with_capacity(tenants.len());
    for (meta, (acc, prompt, output)) in tenants.iter().zip(acc.per) {
        let s = acc.finish(Dist::default(), duration, gpus)?;
        out.push(TenantSummary {
            name: meta.name.to_string(),
            priority: meta.priority,
            weight: meta.weight,
            counts: s.counts,
            retries: meta.retries,
            latency: TenantLatency {
                queue_wait_ms: s.latency.queue_wait_ms,
                ttft_ms: s.latency.ttft_ms,
                tpot_ms: s.latency.tpot_ms,
                e2e_ms: s.latency.e2e_ms,
            },
            requests_per_s: s.throughput.requests_per_s,
            input_tokens_per_s: s.throughput.input_tokens_per_s,
            output_tokens_per_s: s.throughput.output_tokens_per_s,
            prompt_tokens_served: prompt,
            output_tokens_served: output,
            normalized_service: (weights.0 * prompt as f64 + weights.1 * output as f64)
                / meta.weight,
            slo: s.slo,
        });
    }
    let service: Vec<f64> = out.iter().map(|t| t.normalized_service).collect();
    Ok(TenancyReport {
        fairness: fairness.to_string(),
        jain_index: jain_index(&service),
        tenants: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_index_bounds() {
        assert_eq!(jain_index(&[5.0, 5.0, 5.0]), 1.0);
        assert!((jain_index(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        // (1+3)² / (2 · 10) = 0.8
        assert!((jain_index(&[1.0, 3.0]) - 0.8).abs() < 1e-12);
        assert_eq!(jain_index(&[]), 1.0);
    }
}
