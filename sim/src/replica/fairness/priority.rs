//! Strict priority classes: the most urgent non-empty class is always served
//! first, FCFS within a class (vLLM's `--scheduling-policy priority`, where
//! a lower `priority` value is served earlier). With `preempt`, a waiting
//! request that cannot be admitted preempts running sequences of less urgent
//! classes, as vLLM's priority scheduler does.

use super::{FairnessPolicy, TenantShares, Waiting};
use crate::request::RequestId;
use std::collections::{BTreeMap, VecDeque};

/// Strict priority over tenants' classes.
#[derive(Debug)]
pub struct Priority {
    shares: TenantShares,
    preempt: bool,
    /// Non-empty class queues, most urgent (lowest level) first.
    classes: BTreeMap<i64, VecDeque<Waiting>>,
    len: usize,
}

impl Priority {
    pub fn new(shares: TenantShares, preempt: bool) -> Priority {
        Priority {
            shares,
            preempt,
            classes: BTreeMap::new(),
            len: 0,
        }
    }
}

impl FairnessPolicy for Priority {
    fn push_back(&mut self, w: Waiting) {
        let level = self.shares.level(w.tenant);
        self.classes.entry(level).or_default().push_back(w);
        self.len += 1;
    }
    fn push_front(&mut self, w: Waiting) {
        let level = self.shares.level(w.tenant);
        self.classes.entry(level).or_default().push_front(w);
        self.len += 1;
    }
    fn front(&self) -> Option<Waiting> {
        self.classes
            .values()
            .next()
            .and_then(|q| q.front().copied())
    }
    fn pop_front(&mut self) -> Option<Waiting> {
        let mut entry = self.classes.first_entry()?;
        let w = entry.get_mut().pop_front();
        if entry.get().is_empty() {
            entry.remove();
        }
        self.len -= 1;
        w
    }
    fn len(&self) -> usize {
        self.len
    }
    fn ids(&self) -> Vec<RequestId> {
        self.classes.values().flatten().map(|w| w.id).collect()
    }
    fn remove(&mut self, id: RequestId) -> Option<Waiting> {
        let (&level, i) = self
            .classes
            .iter()
            .find_map(|(l, q)| q.iter().position(|w| w.id == id).map(|i| (l, i)))?;
        let q = self.classes.get_mut(&level).expect("found");
        let w = q.remove(i);
        if q.is_empty() {
            self.classes.remove(&level);
        }
        self.len -= 1;
        w
    }
    fn preemption_level(&self, tenant: u32) -> Option<i64> {
        self.preempt.then(|| self.shares.level(tenant))
    }
    fn preempts(&self) -> bool {
        self.preempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(id: u32, tenant: u32) -> Waiting {
        Waiting {
            id,
            tenant,
            tokens: 10,
            output: 1,
        }
    }

    #[test]
    fn urgent_class_first_fcfs_within_a_class() {
        let shares = TenantShares {
            weights: vec![1.0; 3],
            levels: vec![10, 0, 10],
        };
        let mut p = Priority::new(shares, false);
        for (id, t) in [(0, 0), (1, 2), (2, 1), (3, 0), (4, 1)] {
            p.push_back(w(id, t));
        }
        p.push_front(w(5, 0)); // preempted batch request: front of its class
        let order: Vec<u32> = std::iter::from_fn(|| p.pop_front().map(|x| x.id)).collect();
        assert_eq!(order, vec![2, 4, 5, 0, 1, 3]);
        assert_eq!(p.len(), 0);
        assert_eq!(p.preemption_level(0), None);
    }
}
