//! The KV-transfer budget `servesim check` prints before anyone splits a
//! fleet into prefill and decode pools: how many bytes a prompt token's KV
//! cache takes, the payload of a typical and a long prompt, and the link
//! bandwidth a disaggregated fleet needs to carry the offered load with the
//! transfer below a stated share of the prefill time (DistServe, OSDI'24,
//! §4: the transfer must stay a small fraction of the prefill it follows;
//! Splitwise, ISCA'24, §5 sizes its InfiniBand links the same way).

use crate::cost::BatchShape;
use crate::scenario::Scenario;
use crate::workload::{Context, WorkloadError};

/// The share of the prefill time a transfer may take.
pub const TRANSFER_SHARE: f64 = 0.1;
/// Requests of the workload sampled for the prompt quantiles.
const SAMPLE: usize = 4000;

/// The budget's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct KvBudget {
    /// KV bytes of one prompt token over the whole model (every layer and
    /// KV head, the cache dtype), what crosses the link.
    pub bytes_per_token: f64,
    pub prompt_p50: u32,
    pub prompt_p99: u32,
    /// Requests per second offered (the workload's rate, or measured over
    /// the sampled arrivals).
    pub rate: f64,
    /// Mean payload, bytes.
    pub mean_payload: f64,
    /// Prefill time of a lone p50 / p99 prompt on one replica, seconds.
    pub prefill_s: (f64, f64),
    /// Prefill replicas (links) when the fleet disaggregates.
    pub links: Option<u32>,
    pub moe_note: Option<String>,
}

impl KvBudget {
    /// Samples the scenario's workload and prices lone prefills with its
    /// cost model.
    pub fn of(s: &Scenario, ctx: &Context) -> Result<KvBudget, WorkloadError> {
        let mut src = crate::tenancy::build_source(&s.demand_plan(), ctx)?;
        let mut prompts = Vec::with_capacity(SAMPLE);
        let (mut first, mut last) = (None, None);
        while prompts.len() < SAMPLE {
            let Some(r) = src.next_request() else { break };
            first = first.or(Some(r.arrival));
            last = Some(r.arrival);
            prompts.push(r.prompt_tokens);
        }
        src.finish()?;
        prompts.sort_unstable();
        let q = |p: f64| {
            prompts
                .get(((prompts.len() as f64 * p).ceil() as usize).saturating_sub(1))
                .copied()
                .unwrap_or(0)
        };
        let rate = s.offered_rate().unwrap_or_else(|| match (first, last) {
            (Some(a), Some(b)) if b > a && prompts.len() > 1 => {
                (prompts.len() - 1) as f64 / (b.since(a) as f64 / 1e9)
            }
            _ => 0.0,
        });
        let bytes_per_token = s.model.kv_bytes_per_token(s.kv_dtype);
        let mean = prompts.iter().map(|&p| p as f64).sum::<f64>() / prompts.len().max(1) as f64;
        // Price the prefill on the pool that would prefill: the prefill pool
        // when there is one.
        let pre = s
            .pools
            .iter()
            .find(|p| p.role == crate::scenario::PoolRole::Prefill);
        let cost = pre.map_or_else(|| s.cost_model(), |p| p.cost_model());
        let prefill = |n: u32| {
            let mut b = BatchShape::default();
            b.add_prefill(n as u64, 0);
            cost.iteration_time(&b) as f64 / 1e9
        };
        let moe_note = (s.model.num_experts > 0).then(|| {
            format!(
                "{} is a mixture of experts (EP {}): the payload is attention KV only; \
                 experts hold none, so it assumes both sides keep every expert resident \
                 in the same placement and no expert weights move per request",
                s.model.name, s.parallel.expert
            )
        });
        Ok(KvBudget {
            bytes_per_token,
            prompt_p50: q(0.5),
            prompt_p99: q(0.99),
            rate,
            mean_payload: mean * bytes_per_token,
            prefill_s: (prefill(q(0.5)), prefill(q(0.99))),
            links: pre.map(|p| p.replicas),
            moe_note,
        })
    }

    /// Bandwidth (bytes/s) a p`q` prompt's transfer needs to take at most
    /// [`TRANSFER_SHARE`] of its prefill time.
    pub fn latency_bw(&self, p99: bool) -> f64 {
        let (n, t) = if p99 {
            (self.prompt_p99, self.prefill_s.1)
        } else {
            (self.prompt_p50, self.prefill_s.0)
        };
        n as f64 * self.bytes_per_token / (TRANSFER_SHARE * t).max(1e-12)
    }

    /// The lines `servesim check` prints.
    pub fn lines(&self, s: &Scenario) -> Vec<String> {
        let gb = |b: f64| b / 1e9;
        let load = self.rate * self.mean_payload;
        let links = self.links.unwrap_or(1).max(1);
        let mut out = vec![
            format!(
                "kv budget  {:.0} KV bytes per prompt token ({} layers, {} cache); payload {:.3} GB at the prompt p50 ({} tokens), {:.3} GB at p99 ({})",
                self.bytes_per_token,
                s.model.layers,
                s.kv_dtype,
                gb(self.prompt_p50 as f64 * self.bytes_per_token),
                self.prompt_p50,
                gb(self.prompt_p99 as f64 * self.bytes_per_token),
                self.prompt_p99
            ),
            format!(
                "           offered load {} req/s × {:.3} GB mean = {:.2} GB/s of KV to move{}",
                crate::sig_figs::rate(self.rate),
                gb(self.mean_payload),
                gb(load),
                if self.links.is_some() {
                    format!(" ({:.2} GB/s per prefill replica's link at {links} links)", gb(load) / links as f64)
                } else {
                    String::new()
                }
            ),
            format!(
                "           transfer ≤ {:.0} % of the prefill ({:.0} ms at p50, {:.0} ms at p99 alone): {:.1} GB/s per link at p50, {:.1} GB/s at p99",
                TRANSFER_SHARE * 100.0,
                self.prefill_s.0 * 1e3,
                self.prefill_s.1 * 1e3,
                gb(self.latency_bw(false)),
                gb(self.latency_bw(true))
            ),
        ];
        if let Some(cfg) = self.links.map(|_| s.fleet_plan().kv_transfer) {
            let have = cfg.bandwidth_gbyte_s;
            let util = gb(load) / links as f64 / have;
            out.push(format!(
                "           fleet.kv_transfer: {have} GB/s per link → {:.0} % busy at the offered load{}",
                util * 100.0,
                if util >= 1.0 {
                    ": the links cannot carry it (KV will back up on the prefill pool)"
                } else {
                    ""
                }
            ));
        }
        if let Some(n) = &self.moe_note {
            out.push(format!("           {n}"));
        }
        out
    }
}
