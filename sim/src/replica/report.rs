//! The engine's share of a run's summary (`summary.json` field `engine`):
//! batching, busy time, KV use, preemptions and speculation, summed or
//! averaged over the fleet's replicas.

use serde::Serialize;

/// Batching and memory behaviour.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct EngineReport {
    /// Batch policy (`[engine] policy`).
    pub policy: String,
    /// Preemption mode (`[engine] preemption`).
    pub preemption_mode: String,
    pub iterations: u64,
    /// Mean sequences per iteration.
    pub mean_batch_size: f64,
    /// Mean tokens per iteration.
    pub mean_batch_tokens: f64,
    /// Mean fraction of time replicas were running an iteration.
    pub busy_fraction: f64,
    /// Time-weighted mean of KV blocks used / total, over replicas and the run.
    pub kv_util_mean: f64,
    /// Highest KV use reached on any replica.
    pub kv_util_max: f64,
    pub preemptions: u64,
    /// Preemptions that swapped KV to host memory (the rest recomputed).
    pub swap_outs: u64,
    pub preempted_requests: u64,
    /// Mean tokens per speculative verification step (None without speculation).
    pub spec_tokens_per_step: Option<f64>,
    /// Prefix-cache effect (None when prefix caching is off).
    pub prefix_cache: Option<crate::kv::prefix_cache::PrefixCacheReport>,
}
