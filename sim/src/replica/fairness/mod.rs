//! Fairness policies: how a replica orders its waiting queue among tenants.
//! One file per policy; [`build`] is the registry `[fairness] policy` names.
//!
//! The replica's waiting queue (`replica::WaitingQueue`) delegates its
//! ordering here, so every batch policy (which only ever looks at and admits
//! the head of the queue) works with every fairness policy. A policy sees
//! each request as a [`Waiting`] entry, is told when the head is admitted
//! (its prefill is charged then) and when a tenant's running sequences
//! decode (their output tokens are charged then).

mod drr;
mod fcfs;
mod priority;
mod vtc;
mod wfq;

pub use drr::Drr;
pub use fcfs::Fcfs;
pub use priority::Priority;
pub use vtc::Vtc;
pub use wfq::Wfq;

use crate::request::RequestId;
use crate::scenario::{FairnessCfg, FairnessKind};
use std::collections::VecDeque;

/// A request in a waiting queue, as a fairness policy sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Waiting {
    pub id: RequestId,
    pub tenant: u32,
    /// Tokens its (re)admission must prefill: prompt, plus what it had
    /// generated when a recompute preemption sent it back.
    pub tokens: u32,
    /// Output tokens the request asks for (its `max_tokens`).
    pub output: u32,
}

/// What a fairness policy knows of each tenant, by tenant index.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantShares {
    /// Weights (> 0) of weighted fairness.
    pub weights: Vec<f64>,
    /// Priority levels: lower is more urgent.
    pub levels: Vec<i64>,
}

impl TenantShares {
    /// Weight of tenant `t` (1 for a tenant the scenario does not list, such
    /// as a trace's own tenant numbering).
    pub fn weight(&self, t: u32) -> f64 {
        self.weights.get(t as usize).copied().unwrap_or(1.0)
    }
    pub fn level(&self, t: u32) -> i64 {
        self.levels.get(t as usize).copied().unwrap_or(0)
    }
}

/// Orders one replica's waiting queue. Must be deterministic: ties go to the
/// lower tenant index, then to the earlier entry.
pub trait FairnessPolicy: Send {
    /// A request joins the queue (routed here).
    fn push_back(&mut self, w: Waiting);
    /// A preempted request returns ahead of its tenant's later arrivals.
    fn push_front(&mut self, w: Waiting);
    /// The request to admit next.
    fn front(&self) -> Option<Waiting>;
    /// Removes the head: it was admitted, and its prefill is charged.
    fn pop_front(&mut self) -> Option<Waiting>;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Every waiting request (any order).
    fn ids(&self) -> Vec<RequestId>;
    /// Takes `id` out without serving it (its client went away: nothing is
    /// charged); `None` if it is not waiting.
    fn remove(&mut self, id: RequestId) -> Option<Waiting>;
    /// Tenant `tenant`'s running sequences decoded `tokens` tokens.
    fn on_decode(&mut self, _tenant: u32, _tokens: u32) {}
    /// Whether a head that cannot be admitted may preempt running sequences
    /// of a less urgent class, and the class level of a tenant.
    fn preemption_level(&self, _tenant: u32) -> Option<i64> {
        None
    }
    /// Whether [`Self::preemption_level`] is ever `Some`: a head that
    /// cannot be admitted may preempt running sequences.
    fn preempts(&self) -> bool {
        false
    }
    /// Whether decoded tokens matter to the policy (saves the replica a
    /// lookup per sequence per iteration when they do not).
    fn charges_decode(&self) -> bool {
        false
    }
}

/// The policy a scenario names, for a replica serving `shares`' tenants.
pub fn build(cfg: &FairnessCfg, shares: &TenantShares) -> Box<dyn FairnessPolicy> {
    match cfg.policy {
        FairnessKind::Fcfs => Box::new(Fcfs::default()),
        FairnessKind::Priority => Box::new(Priority::new(shares.clone(), cfg.preempt)),
        FairnessKind::Drr => Box::new(Drr::new(cfg, shares.clone())),
        FairnessKind::Vtc => Box::new(Vtc::new(cfg, shares.clone())),
        FairnessKind::Wfq => Box::new(Wfq::new(cfg, shares.clone())),
    }
}

/// Takes request `id` out of per-tenant queues: its tenant and entry.
pub(crate) fn take_from(
    queues: &mut [VecDeque<Waiting>],
    id: RequestId,
) -> Option<(usize, Waiting)> {
    let (t, i) = queues
        .iter()
        .enumerate()
        .find_map(|(t, q)| q.iter().position(|w| w.id == id).map(|i| (t, i)))?;
    queues[t].remove(i).map(|w| (t, w))
}

/// Per-tenant queues grown on demand (tenant indices are small and dense).
pub(crate) fn queue_of<T: Default>(queues: &mut Vec<T>, t: u32) -> &mut T {
    let t = t as usize;
    if queues.len() <= t {
        queues.resize_with(t + 1, T::default);
    }
    &mut queues[t]
}
