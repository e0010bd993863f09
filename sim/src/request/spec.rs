//! A request as a workload produces it, before the simulator tracks it.

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
    /// Parallel samples of one prompt (vLLM's `n`); 0 when the source does
    /// not say (one sample, unless `[workload] n` draws one: `samples`).
    pub samples: u32,
    /// Origin region (index into `fleet.regions`; 0 without regions).
    pub region: u16,
}
