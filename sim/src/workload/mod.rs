//! Workloads: where requests come from. A [`RequestSource`] yields requests in
//! arrival order and may answer the end of a request with a follow-up (closed-
//! loop users, multi-turn conversations).

mod synthetic;

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

/// The source a scenario's `[workload]` describes.
pub fn build(cfg: &WorkloadCfg, seed: u64) -> Box<dyn RequestSource> {
    Box::new(Generator::new(cfg, seed))
}
