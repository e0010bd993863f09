//! The replica's waiting queue: order from a fairness policy, per-tenant
//! counts and queued prefill tokens for admission control.

use super::*;

/// The waiting queue of a replica. Its order is a fairness policy's
/// (`fairness`; FCFS, with preempted sequences returning to the
/// front, unless the scenario names another), and it keeps per-tenant counts
/// and the prefill tokens waiting for admission control.
///
/// Its length and whether the policy charges decoded tokens are kept beside
/// the policy: every iteration asks both (is anything waiting, may a decode
/// run start), and through the boxed policy each question was a virtual
/// call (a fleet's replicas ask millions of times).
pub struct WaitingQueue {
    pub(super) order: Box<dyn FairnessPolicy>,
    pub(super) per_tenant: Vec<u32>,
    pub(super) tokens: u64,
    /// Entries in `order`.
    len: usize,
    /// `order.charges_decode()`, fixed for a policy's life.
    charges_decode: bool,
    /// `order.preempts()`, likewise.
    preempts: bool,
}

impl Default for WaitingQueue {
    fn default() -> Self {
        WaitingQueue {
            order: Box::new(Fcfs::default()),
            per_tenant: Vec::new(),
            tokens: 0,
            len: 0,
            charges_decode: false,
            preempts: false,
        }
    }
}

impl std::fmt::Debug for WaitingQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingQueue")
            .field("len", &self.order.len())
            .finish()
    }
}

impl WaitingQueue {
    /// Replaces the order (the queue must be empty).
    pub(super) fn set_order(&mut self, order: Box<dyn FairnessPolicy>) {
        debug_assert!(self.is_empty() && order.is_empty());
        self.charges_decode = order.charges_decode();
        self.preempts = order.preempts();
        self.order = order;
    }
    /// Whether a head that does not fit may preempt running sequences.
    #[inline]
    pub fn preempts(&self) -> bool {
        self.preempts
    }
    /// Whether the order's policy is told of decoded tokens.
    #[inline]
    pub fn charges_decode(&self) -> bool {
        self.charges_decode
    }
    pub(super) fn count(&mut self, w: &Waiting) {
        *super::fairness::queue_of(&mut self.per_tenant, w.tenant) += 1;
        self.tokens += w.tokens as u64;
        self.len += 1;
    }
    pub fn push_back(&mut self, w: Waiting) {
        self.count(&w);
        self.order.push_back(w);
    }
    /// A preempted sequence goes back ahead of everything that arrived later.
    pub fn push_front(&mut self, w: Waiting) {
        self.count(&w);
        self.order.push_front(w);
    }
    pub fn front(&self) -> Option<RequestId> {
        self.order.front().map(|w| w.id)
    }
    pub fn pop_front(&mut self) -> Option<RequestId> {
        let w = self.order.pop_front()?;
        self.uncount(&w);
        Some(w.id)
    }
    fn uncount(&mut self, w: &Waiting) {
        self.per_tenant[w.tenant as usize] -= 1;
        self.tokens -= w.tokens as u64;
        self.len -= 1;
    }
    #[inline]
    pub fn len(&self) -> usize {
        debug_assert_eq!(self.len, self.order.len());
        self.len
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn iter(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.order.ids().into_iter()
    }
    /// Requests of `tenant` waiting.
    pub fn tenant_len(&self, tenant: u32) -> u32 {
        self.per_tenant.get(tenant as usize).copied().unwrap_or(0)
    }
    /// Prefill tokens of every waiting request.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }
    /// Takes `id` out of the queue (its client went away); false if absent.
    pub fn remove(&mut self, id: RequestId) -> bool {
        match self.order.remove(id) {
            Some(w) => {
                self.uncount(&w);
                true
            }
            None => false,
        }
    }
}
