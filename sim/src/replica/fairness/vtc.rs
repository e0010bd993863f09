//! The Virtual Token Counter (Sheng et al., "Fairness in Serving Large
//! Language Models", OSDI'24), with weights.
//!
//! Each tenant has a counter of the service it received: prompt tokens ×
//! `input_weight` when a request is admitted, output tokens × `output_weight`
//! as they are decoded, divided by the tenant's weight (the paper's weighted
//! VTC). The head of the queue is the earliest request of the backlogged
//! tenant with the smallest counter. When a tenant's queue goes from empty to
//! non-empty its counter is *lifted* to at least the smallest counter among
//! backlogged tenants (or, when none is backlogged, to that of the last
//! tenant whose queue emptied), so a tenant that was idle gets no back-credit
//! for the service it did not ask for, yet is not starved either.

use super::{queue_of, take_from, FairnessPolicy, TenantShares, Waiting};
use crate::request::RequestId;
use crate::scenario::FairnessCfg;
use std::collections::VecDeque;

/// Virtual Token Counter fairness.
#[derive(Debug)]
pub struct Vtc {
    shares: TenantShares,
    input_weight: f64,
    output_weight: f64,
    queues: Vec<VecDeque<Waiting>>,
    counter: Vec<f64>,
    /// Counter of the last tenant whose queue emptied (the paper's `l`).
    last_left: f64,
    len: usize,
}

impl Vtc {
    pub fn new(cfg: &FairnessCfg, shares: TenantShares) -> Vtc {
        Vtc {
            shares,
            input_weight: cfg.input_weight,
            output_weight: cfg.output_weight,
            queues: Vec::new(),
            counter: Vec::new(),
            last_left: 0.0,
            len: 0,
        }
    }

    /// The backlogged tenant with the smallest counter (lowest index on ties).
    fn next_tenant(&self) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (t, q) in self.queues.iter().enumerate() {
            if q.is_empty() {
                continue;
            }
            if best.is_none_or(|b| self.counter[t] < self.counter[b]) {
                best = Some(t);
            }
        }
        best
    }

    fn enter(&mut self, w: Waiting, front: bool) {
        let t = w.tenant as usize;
        queue_of(&mut self.counter, w.tenant);
        queue_of(&mut self.queues, w.tenant);
        if self.queues[t].is_empty() {
            // The lift rule.
            let floor = self
                .next_tenant()
                .map_or(self.last_left, |b| self.counter[b]);
            self.counter[t] = self.counter[t].max(floor);
        }
        if front {
            self.queues[t].push_front(w);
        } else {
            self.queues[t].push_back(w);
        }
        self.len += 1;
    }

    /// A tenant's counter (tests and reports).
    pub fn counter(&self, t: u32) -> f64 {
        self.counter.get(t as usize).copied().unwrap_or(0.0)
    }
}

impl FairnessPolicy for Vtc {
    fn push_back(&mut self, w: Waiting) {
        self.enter(w, false);
    }
    fn push_front(&mut self, w: Waiting) {
        self.enter(w, true);
    }
    fn front(&self) -> Option<Waiting> {
        self.next_tenant().map(|t| self.queues[t][0])
    }
    fn pop_front(&mut self) -> Option<Waiting> {
        let t = self.next_tenant()?;
        let w = self.queues[t].pop_front().expect("backlogged");
        self.len -= 1;
        self.counter[t] += self.input_weight * w.tokens as f64 / self.shares.weight(w.tenant);
        if self.queues[t].is_empty() {
            self.last_left = self.counter[t];
        }
        Some(w)
    }
    fn len(&self) -> usize {
        self.len
    }
    fn ids(&self) -> Vec<RequestId> {
        self.queues.iter().flatten().map(|w| w.id).collect()
    }
    fn remove(&mut self, id: RequestId) -> Option<Waiting> {
        let (t, w) = take_from(&mut self.queues, id)?;
        self.len -= 1;
        if self.queues[t].is_empty() {
            self.last_left = self.counter[t];
        }
        Some(w)
    }
    fn on_decode(&mut self, tenant: u32, tokens: u32) {
        let c = queue_of(&mut self.counter, tenant);
        *c += self.output_weight * tokens as f64 / self.shares.weight(tenant);
    }
    fn charges_decode(&self) -> bool {
        self.output_weight > 0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vtc(weights: Vec<f64>) -> Vtc {
        let n = weights.len();
        Vtc::new(
            &FairnessCfg::default(),
            TenantShares {
                weights,
                levels: vec![0; n],
            },
        )
    }

    fn w(id: u32, tenant: u32, tokens: u32) -> Waiting {
        Waiting {
            id,
            tenant,
            tokens,
            output: 1,
        }
    }

    #[test]
    fn smallest_counter_first_with_weights() {
        // Weights 2:1, equal 100-token prompts: tenant 0 is charged 50 per
        // request, tenant 1 100, so tenant 0 is served twice as often.
        let mut v = vtc(vec![2.0, 1.0]);
        for i in 0..30 {
            v.push_back(w(i, i % 2, 100));
        }
        let order: Vec<u32> = (0..12).map(|_| v.pop_front().unwrap().tenant).collect();
        // Counters (0, 0) → t0 (50, 0) → t1 (50, 100) → t0 (100,100) → t0
        // (tie at 100 goes to the lower index) (150, 100) → t1 …
        assert_eq!(order, vec![0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0]);
        // Decoded tokens count double (output weight 2) and by weight.
        let before = v.counter(1);
        v.on_decode(1, 10);
        assert_eq!(v.counter(1), before + 20.0);
    }

    #[test]
    fn a_late_tenant_is_lifted_no_back_credit_and_not_starved() {
        let mut v = vtc(vec![1.0, 1.0]);
        // Tenant 0 alone for a long time: its counter climbs to 100 × 100.
        for i in 0..200 {
            v.push_back(w(i, 0, 100));
        }
        for _ in 0..100 {
            assert_eq!(v.pop_front().unwrap().tenant, 0);
        }
        assert_eq!(v.counter(0), 10_000.0);
        // Tenant 1 arrives: lifted to tenant 0's counter, not left at 0
        // (which would give it 100 requests in a row of back-credit).
        for i in 0..50 {
            v.push_back(w(1000 + i, 1, 100));
        }
        assert_eq!(v.counter(1), 10_000.0);
        let next: Vec<u32> = (0..10).map(|_| v.pop_front().unwrap().tenant).collect();
        assert_eq!(next, vec![0, 1, 0, 1, 0, 1, 0, 1, 0, 1]);
    }

    #[test]
    fn returning_to_an_idle_system_lifts_to_the_last_leaver() {
        let mut v = vtc(vec![1.0, 1.0]);
        v.push_back(w(0, 0, 500));
        v.pop_front();
        assert_eq!(v.len(), 0);
        v.push_back(w(1, 1, 10));
        assert_eq!(v.counter(1), 500.0);
    }
}
