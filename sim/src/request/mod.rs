//! Requests as the simulator tracks them: one slab entry per request, indexed
//! by id, holding what the per-request record reports.

mod spec;
pub mod summary;
mod transfer;

pub use spec::RequestSpec;
pub use transfer::TransferRecord;

use crate::attribution::Attribution;
use crate::scenario::SloTargets;
use crate::time::{nanos_to_ms, SimTime, Stamp};
use serde::Serialize;

/// Index of a request in the run's slab (arrival order).
pub type RequestId = u32;

/// Why a request was turned away at arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectReason {
    /// prompt + output is longer than `engine.max_model_len`.
    ExceedsMaxModelLen,
    /// The prompt alone exceeds `engine.max_batched_tokens` and the batch
    /// policy cannot split a prefill.
    PromptExceedsTokenBudget,
    /// prompt + output can never fit in one replica's KV cache.
    ExceedsKvCapacity,
    /// The tenant's token bucket (requests/s or tokens/min) is empty
    /// (HTTP 429).
    RateLimited,
    /// The tenant's or the fleet's queue cap is reached (HTTP 503).
    QueueFull,
    /// The tenant has its maximum of requests in flight (HTTP 429).
    ConcurrencyLimit,
    /// The predicted TTFT already exceeds the tenant's target: shed.
    Deadline,
    /// An HTTP server turned the request away (`servesim observe`): 429 or
    /// 503, its queue was full.
    ServerBusy,
    /// An HTTP server refused the request as invalid (another 4xx).
    ServerRefused,
    /// No replica was ready and the fleet has no activator to hold it
    /// (`lifecycle`; HTTP 503).
    NoReadyReplica,
    /// The replica serving it failed and retries were off or used up
    /// (`failures.max_retries`; HTTP 503).
    ReplicaFailed,
}

impl RejectReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::ExceedsMaxModelLen => "exceeds_max_model_len",
            RejectReason::PromptExceedsTokenBudget => "prompt_exceeds_token_budget",
            RejectReason::ExceedsKvCapacity => "exceeds_kv_capacity",
            RejectReason::RateLimited => "rate_limited",
            RejectReason::QueueFull => "queue_full",
            RejectReason::ConcurrencyLimit => "concurrency_limit",
            RejectReason::Deadline => "deadline",
            RejectReason::ServerBusy => "server_busy",
            RejectReason::ServerRefused => "server_refused",
            RejectReason::NoReadyReplica => "no_ready_replica",
            RejectReason::ReplicaFailed => "replica_failed",
        }
    }
}

/// How a request ended (or had not, when the run stopped).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Status {
    /// Still waiting or running when the horizon was reached.
    InFlight,
    Completed,
    Rejected(RejectReason),
    /// The client went away before the last token (`servesim observe`'s
    /// cancellations, or a disconnect at `servesim serve`).
    Cancelled,
    /// The request failed: a transport error, a 5xx, a broken stream. The
    /// message is kept beside the record (observe.csv).
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::InFlight => "in_flight",
            Status::Completed => "completed",
            Status::Rejected(_) => "rejected",
            Status::Cancelled => "cancelled",
            Status::Failed => "failed",
        }
    }
}

/// One request's life.
#[derive(Clone, Debug)]
pub struct Request {
    pub arrival: SimTime,
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    /// Replica it was routed to (`u32::MAX` before routing or when rejected).
    pub replica: u32,
    /// First time it was admitted into a batch (end of its queue wait).
    /// The three optional instants are [`Stamp`]s, 8 bytes each: a run
    /// holds every request in flight, 720,000 at once on a fleet of 10,000
    /// replicas.
    pub first_scheduled: Stamp,
    pub first_token: Stamp,
    /// Time of its latest token (kept while preempted, for inter-token gaps).
    pub last_token: SimTime,
    pub finished: Stamp,
    /// Output tokens produced so far.
    pub generated: u32,
    pub preemptions: u32,
    pub status: Status,
    /// Tenant index (0 with a single tenant).
    pub tenant: u32,
    /// Token size of the blocks its prefix hashes cover (with prefix
    /// caching, the engine's block size once admitted; the router's index
    /// counts cached tokens by it even for a request without hashes).
    pub hash_block_tokens: u32,
    /// Where its latency went, component by component (`attribution`).
    pub attribution: Attribution,
    /// What few requests carry (a session, prefix hashes, parallel samples,
    /// a KV transfer), out of line: `None` for a plain request.
    rare: Option<Box<Rare>>,
    /// Origin region (index into `fleet.regions`; 0 without regions): where
    /// the request entered the fleet, whichever region served it.
    pub region: u16,
}

/// The fields of a [`Request`] that most requests leave at their defaults,
/// kept in one box so that a plain request does not pay for them: a run
/// holds every request in flight (720,000 at once on a fleet of 10,000
/// replicas, docs/performance.md), and these 48 bytes inline were a fifth
/// of a request.
#[derive(Clone, Debug)]
struct Rare {
    /// User or conversation of a closed-loop workload (0 when open-loop).
    session: u64,
    /// Chained prefix-block hashes from the workload (see `RequestSpec`).
    prefix_hashes: Vec<u64>,
    /// Leading prompt tokens worth pinning in the prefix cache.
    pinnable_tokens: u32,
    /// Parallel samples (vLLM's `n`, ≥ 1): they share the prompt's KV blocks
    /// and each decodes `output_tokens` (`replica::fork`). `generated`
    /// counts one sample's tokens; the samples advance together.
    samples: u32,
    /// Its KV cache's trip from a prefill to a decode replica, when a
    /// disaggregated fleet prefilled it remotely (`cluster::disagg`).
    kv_transfer: Option<Box<TransferRecord>>,
}

impl Default for Rare {
    fn default() -> Rare {
        Rare {
            session: 0,
            prefix_hashes: Vec::new(),
            pinnable_tokens: 0,
            samples: 1,
            kv_transfer: None,
        }
    }
}

impl Rare {
    /// The rare fields of `spec`, in their box (out of line: the caller,
    /// run once per arrival, stays small enough to inline).
    #[inline(never)]
    fn boxed(spec: RequestSpec) -> Box<Rare> {
        Box::new(Rare {
            session: spec.session,
            prefix_hashes: spec.prefix_hashes,
            pinnable_tokens: spec.pinnable_tokens,
            samples: spec.samples.max(1),
            kv_transfer: None,
        })
    }
}

impl Request {
    pub fn new(arrival: SimTime, prompt_tokens: u32, output_tokens: u32) -> Request {
        Request {
            arrival,
            prompt_tokens,
            output_tokens,
            replica: u32::MAX,
            first_scheduled: Stamp::NONE,
            first_token: Stamp::NONE,
            last_token: arrival,
            finished: Stamp::NONE,
            generated: 0,
            preemptions: 0,
            status: Status::InFlight,
            tenant: 0,
            hash_block_tokens: 0,
            attribution: Attribution::new(arrival),
            rare: None,
            region: 0,
        }
    }

    /// A request as a workload specified it, not yet routed.
    #[inline]
    pub fn from_spec(spec: RequestSpec) -> Request {
        let mut r = Request::new(spec.arrival, spec.prompt_tokens, spec.output_tokens);
        r.tenant = spec.tenant;
        r.hash_block_tokens = spec.hash_block_tokens;
        r.region = spec.region;
        // Tested field by field, and the box made out of line: most requests
        // have none of them, and this runs once per arrival.
        if spec.session != 0
            || !spec.prefix_hashes.is_empty()
            || spec.pinnable_tokens != 0
            || spec.samples > 1
        {
            r.rare = Some(Rare::boxed(spec));
        }
        r
    }

    /// The rare fields, boxed on first write.
    fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    /// User or conversation of a closed-loop workload (0 when open-loop).
    #[inline]
    pub fn session(&self) -> u64 {
        self.rare.as_ref().map_or(0, |x| x.session)
    }

    pub fn set_session(&mut self, session: u64) {
        if session != 0 || self.rare.is_some() {
            self.rare_mut().session = session;
        }
    }

    /// Chained prefix-block hashes from the workload (see `RequestSpec`),
    /// each covering `hash_block_tokens` tokens; empty without any.
    #[inline]
    pub fn prefix_hashes(&self) -> &[u64] {
        self.rare.as_ref().map_or(&[], |x| &x.prefix_hashes)
    }

    /// The prefix hashes to rewrite in place (into the engine's blocks).
    pub fn prefix_hashes_mut(&mut self) -> Option<&mut Vec<u64>> {
        self.rare.as_mut().map(|x| &mut x.prefix_hashes)
    }

    pub fn set_prefix_hashes(&mut self, hashes: Vec<u64>) {
        if !hashes.is_empty() || self.rare.is_some() {
            self.rare_mut().prefix_hashes = hashes;
        }
    }

    /// Drops the prefix hashes (a request that will never look them up).
    pub fn clear_prefix_hashes(&mut self) {
        if let Some(x) = &mut self.rare {
            x.prefix_hashes = Vec::new();
        }
    }

    /// Leading prompt tokens worth pinning in the prefix cache.
    #[inline]
    pub fn pinnable_tokens(&self) -> u32 {
        self.rare.as_ref().map_or(0, |x| x.pinnable_tokens)
    }

    pub fn set_pinnable_tokens(&mut self, tokens: u32) {
        if tokens != 0 || self.rare.is_some() {
            self.rare_mut().pinnable_tokens = tokens;
        }
    }

    /// Parallel samples (vLLM's `n`, ≥ 1): they share the prompt's KV blocks
    /// and each decodes `output_tokens` (`replica::fork`). `generated`
    /// counts one sample's tokens; the samples advance together.
    #[inline]
    pub fn samples(&self) -> u32 {
        self.rare.as_ref().map_or(1, |x| x.samples)
    }

    pub fn set_samples(&mut self, samples: u32) {
        let samples = samples.max(1);
        if samples != 1 || self.rare.is_some() {
            self.rare_mut().samples = samples;
        }
    }

    /// Its KV cache's trip from a prefill to a decode replica, when a
    /// disaggregated fleet prefilled it remotely (`cluster::disagg`).
    #[inline]
    pub fn kv_transfer(&self) -> Option<&TransferRecord> {
        self.rare.as_ref()?.kv_transfer.as_deref()
    }

    pub fn kv_transfer_mut(&mut self) -> Option<&mut TransferRecord> {
        self.rare.as_mut()?.kv_transfer.as_deref_mut()
    }

    pub fn set_kv_transfer(&mut self, record: TransferRecord) {
        self.rare_mut().kv_transfer = Some(Box::new(record));
    }

    /// Time to first token, ns.
    pub fn ttft(&self) -> Option<u64> {
        self.first_token.map(|t| t.since(self.arrival))
    }

    /// Mean time per output token after the first, ns (None with one token).
    pub fn tpot(&self) -> Option<f64> {
        match (self.first_token.get(), self.finished.get()) {
            (Some(f), Some(e)) if self.output_tokens > 1 => {
                Some(e.since(f) as f64 / (self.output_tokens - 1) as f64)
            }
            _ => None,
        }
    }

    pub fn e2e(&self) -> Option<u64> {
        self.finished.map(|t| t.since(self.arrival))
    }

    pub fn queue_wait(&self) -> Option<u64> {
        self.first_scheduled.map(|t| t.since(self.arrival))
    }
}
/// How a request is judged by the `[slo]` thresholds (the targets are the
/// plan's; judging one request is the request's).
impl SloTargets {
    /// Whether completed request `r` meets each per-request threshold:
    /// (TTFT, TPOT, E2E); one not given holds, as does TPOT for a request
    /// with one output token (vLLM counts its TPOT as 0).
    pub fn judge(&self, r: &Request) -> [bool; 3] {
        let ttft = nanos_to_ms(r.ttft().unwrap_or(0));
        let e2e = nanos_to_ms(r.e2e().unwrap_or(0));
        let tpot = r.tpot().map(|x| x / 1e6);
        [
            self.ttft_ms.is_none_or(|t| ttft <= t),
            self.tpot_ms.is_none_or(|t| tpot.is_none_or(|p| p <= t)),
            self.e2e_ms.is_none_or(|t| e2e <= t),
        ]
    }

    /// Whether `r` is a good request: completed and within every threshold.
    pub fn meets(&self, r: &Request) -> bool {
        r.status == Status::Completed && self.judge(r).iter().all(|&ok| ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run holds every request in flight (720,000 at once on a fleet of
    /// 10,000 replicas, docs/performance.md), so a request's size is most of
    /// a large fleet's memory: a field that grows it should be a choice.
    #[test]
    fn a_request_stays_within_208_bytes() {
        assert!(
            std::mem::size_of::<Request>() <= 208,
            "{} bytes",
            std::mem::size_of::<Request>()
        );
    }
}
