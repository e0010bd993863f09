//! Weighted fair queueing (Demers, Keshav & Shenker, SIGCOMM'89) in its
//! self-clocked form (SCFQ, Golestani, INFOCOM'94): each request gets a
//! virtual finish tag `F = max(V, F_prev(tenant)) + cost / weight` when it
//! joins, where `V` is the tag of the request admitted last; the smallest tag
//! is admitted first. The cost is known up front: prompt tokens ×
//! `input_weight` + requested output tokens (the client's `max_tokens`) ×
//! `output_weight`. A preempted request returns with tag `V`, ahead of
//! requests that joined after it was first admitted.

use super::{queue_of, FairnessPolicy, TenantShares, Waiting};
use crate::request::RequestId;
use crate::scenario::FairnessCfg;
use std::collections::BTreeMap;

/// Self-clocked weighted fair queueing.
#[derive(Debug)]
pub struct Wfq {
    shares: TenantShares,
    input_weight: f64,
    output_weight: f64,
    /// Waiting requests by (finish tag bits, sequence number): the tags are
    /// non-negative floats, whose bit patterns order like the values.
    tagged: BTreeMap<(u64, u64), Waiting>,
    last_finish: Vec<f64>,
    virtual_time: f64,
    seq: u64,
}

impl Wfq {
    pub fn new(cfg: &FairnessCfg, shares: TenantShares) -> Wfq {
        Wfq {
            shares,
            input_weight: cfg.input_weight,
            output_weight: cfg.output_weight,
            tagged: BTreeMap::new(),
            last_finish: Vec::new(),
            virtual_time: 0.0,
            seq: 0,
        }
    }

    fn insert(&mut self, tag: f64, w: Waiting) {
        self.seq += 1;
        self.tagged.insert((tag.to_bits(), self.seq), w);
    }
}

impl FairnessPolicy for Wfq {
    fn push_back(&mut self, w: Waiting) {
        let cost = self.input_weight * w.tokens as f64 + self.output_weight * w.output as f64;
        let prev = queue_of(&mut self.last_finish, w.tenant);
        let tag = self.virtual_time.max(*prev) + cost / self.shares.weight(w.tenant);
        *prev = tag;
        self.insert(tag, w);
    }
    fn push_front(&mut self, w: Waiting) {
        self.insert(self.virtual_time, w);
    }
    fn front(&self) -> Option<Waiting> {
        self.tagged.values().next().copied()
    }
    fn pop_front(&mut self) -> Option<Waiting> {
        let ((bits, _), w) = self.tagged.pop_first()?;
        self.virtual_time = self.virtual_time.max(f64::from_bits(bits));
        Some(w)
    }
    fn len(&self) -> usize {
        self.tagged.len()
    }
    fn ids(&self) -> Vec<RequestId> {
        self.tagged.values().map(|w| w.id).collect()
    }
    fn remove(&mut self, id: RequestId) -> Option<Waiting> {
        let key = *self.tagged.iter().find(|(_, w)| w.id == id)?.0;
        self.tagged.remove(&key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_interleave_by_weight_and_an_idle_tenant_banks_nothing() {
        let cfg = FairnessCfg {
            input_weight: 1.0,
            output_weight: 0.0,
            ..FairnessCfg::default()
        };
        let shares = TenantShares {
            weights: vec![3.0, 1.0],
            levels: vec![0, 0],
        };
        let mut q = Wfq::new(&cfg, shares);
        let w = |id, tenant| Waiting {
            id,
            tenant,
            tokens: 30,
            output: 5,
        };
        for i in 0..8 {
            q.push_back(w(i, i % 2));
        }
        // Tags: t0 10, 20, 30, 40; t1 30, 60, 90, 120 (t1 joined 30 first).
        let order: Vec<u32> = (0..5).map(|_| q.pop_front().unwrap().tenant).collect();
        assert_eq!(order, vec![0, 0, 1, 0, 0]);
        // V is now 40: a tenant joining late starts from there.
        q.push_back(w(100, 0));
        assert_eq!(q.last_finish[0], 50.0);
    }
}
