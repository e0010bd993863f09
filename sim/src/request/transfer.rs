//! One request's KV transfer between a prefill and a decode replica
//! (disaggregated serving: `cluster::disagg` books it, requests.csv reports it).

use crate::time::{Nanos, SimTime};

/// One request's KV transfer, kept on the request for requests.csv.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransferRecord {
    /// Global index of the prefill replica that computed the prompt.
    pub prefill_replica: u32,
    /// Global index of the decode replica chosen at arrival.
    pub decode_replica: u32,
    /// KV bytes moved (all layers, all KV heads, the prompt's tokens).
    pub bytes: u64,
    /// Prefill started (its first admission on the prefill replica).
    pub prefill_start: Option<SimTime>,
    /// First token produced; the KV waits for decode memory from here.
    pub handoff: Option<SimTime>,
    /// The decode replica reserved its blocks.
    pub accepted: Option<SimTime>,
    /// The last byte arrived (plus the link's latency).
    pub done: Option<SimTime>,
    /// Time the link itself was busy with this transfer, ns.
    pub link_ns: Nanos,
}
