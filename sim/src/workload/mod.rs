//! Workloads: where requests come from. A [`RequestSource`] yields requests in
//! arrival order and may answer the end of a request with a follow-up (closed-
//! loop users, multi-turn conversations).

mod conversation;
mod prefix;
mod synthetic;

pub use conversation::Conversations;
pub use prefix::{SharedPrefix, HASH_BLOCK_TOKENS};
pub use synthetic::{Generator, LengthSampler};

use crate::request::Request;
use crate::scenario::WorkloadCfg;
use crate::time::SimTime;

/// One request as a workload produces it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestSpec {
    pub arrival: SimTime,
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    /// Tenant index (0 when the workload has one tenant).
    pub tenant: u32,
    /// Identifies the user or conversation a closed-loop source follows up
    /// on (0 when the source is open-loop).
    pub session: u64,
    /// Chained hashes of the prompt's leading blocks of `hash_block_tokens`
    /// tokens each: equal hash ⇔ equal prefix up to that block. Empty when the
    /// workload has no prefix structure.
    pub prefix_hashes: Vec<u64>,
    pub hash_block_tokens: u32,
    /// Leading prompt tokens the workload marks as worth pinning in the
    /// prefix cache (e.g. a tenant's system prompt); 0 for none.
    pub pinnable_tokens: u32,
}

/// A stream of requests.
pub trait RequestSource: Send {
    /// The next request in arrival order; `None` when the source is exhausted.
    fn next_request(&mut self) -> Option<RequestSpec>;

    /// The request `req` (produced by this source) ended at `now`, completed
    /// or rejected. Closed-loop sources return a follow-up arriving at or
    /// after `now`; open-loop sources return `None`.
    fn on_request_end(
        &mut self,
        _req: &Request,
        _now: SimTime,
        _completed: bool,
    ) -> Option<RequestSpec> {
        None
    }
}

/// The source a scenario's `[workload]` describes: the base stream, with
/// shared system prompts and conversations layered on when configured.
pub fn build(cfg: &WorkloadCfg, seed: u64) -> Box<dyn RequestSource> {
    let base: Box<dyn RequestSource> = Box::new(Generator::new(cfg, seed));
    let with_prefix: Box<dyn RequestSource> = match &cfg.shared_prefix {
        Some(p) => Box::new(SharedPrefix::new(base, p, seed)),
        None => base,
    };
    match &cfg.conversation {
        Some(c) => Box::new(Conversations::new(with_prefix, c, &cfg.output_tokens, seed)),
        None => with_prefix,
    }
}

impl RequestSource for Box<dyn RequestSource> {
    fn next_request(&mut self) -> Option<RequestSpec> {
        (**self).next_request()
    }

    fn on_request_end(
        &mut self,
        req: &Request,
        now: SimTime,
        completed: bool,
    ) -> Option<RequestSpec> {
        (**self).on_request_end(req, now, completed)
    }
}
