//! Prefill/decode disaggregation's data path: the KV payload of a request,
//! the per-prefill-replica link it crosses (a FIFO resource: transfers queue
//! behind each other, they do not share bandwidth for free), and the decode
//! side's admission of incoming KV.
//!
//! Sources: Splitwise (Patel et al., ISCA'24) and DistServe (Zhong et al.,
//! OSDI'24) split prompt and token phases onto separate pools and move the KV
//! cache between them, DistServe layer by layer to hide the copy behind
//! compute; Mooncake (Qin et al., FAST'25) streams KV over RDMA and makes the
//! decode side reserve memory before it pulls; NVIDIA Dynamo's disaggregated
//! router prefills locally when the prompt's uncached part is short
//! (`max_local_prefill_length`).

use crate::request::TransferRecord;
use crate::scenario::{KvTransferCfg, TransferMode};
use crate::time::{secs_to_nanos, Nanos, SimTime};
use serde::Serialize;

/// A prefill replica's link to the decode pool: one transfer at a time, in
/// the order the decode side accepted them.
#[derive(Clone, Debug, Default)]
pub struct Link {
    /// When the last accepted transfer leaves the link.
    pub free_at: SimTime,
    pub busy_ns: u64,
    pub bytes_sent: u64,
    pub transfers: u64,
    /// Σ time transfers waited for the link after the decode side accepted.
    pub queue_ns: u64,
}

/// The link model: bandwidth, latency, whole vs layer-wise.
#[derive(Clone, Debug)]
pub struct LinkModel {
    pub cfg: KvTransferCfg,
    /// KV bytes one prompt token occupies across the whole model.
    pub bytes_per_token: f64,
    pub layers: u32,
}

impl LinkModel {
    /// Bytes of a `prompt`-token KV cache.
    pub fn payload(&self, prompt: u32) -> u64 {
        (self.bytes_per_token * prompt as f64).round() as u64
    }

    fn wire_ns(&self, bytes: f64) -> Nanos {
        secs_to_nanos(bytes / (self.cfg.bandwidth_gbyte_s * 1e9))
    }

    /// Books `rec`'s transfer on `link`, accepted by the decode side at
    /// `now`; returns when the KV has fully arrived. Whole: the copy starts
    /// when both the link and the decode side are ready. Layer-wise: layers
    /// stream as the prefill computes them, so a transfer accepted before
    /// the prefill ended could have started with the prefill; it cannot end
    /// before the last layer (computed at the hand-off) has crossed.
    pub fn book(&self, link: &mut Link, rec: &mut TransferRecord, now: SimTime) -> SimTime {
        let handoff = rec.handoff.expect("handed off");
        let wire = self.wire_ns(rec.bytes as f64);
        let ready = match self.cfg.mode {
            TransferMode::Whole => now,
            // Accepted at the hand-off: the layers were flowing since the
            // prefill began. Accepted later (decode was full): they waited.
            TransferMode::LayerWise if now <= handoff => rec.prefill_start.unwrap_or(handoff),
            TransferMode::LayerWise => now,
        };
        let start = ready.max(link.free_at);
        let mut end = start.plus(wire);
        if self.cfg.mode == TransferMode::LayerWise {
            let last_layer = self.wire_ns(rec.bytes as f64 / self.layers.max(1) as f64);
            end = end.max(handoff.plus(last_layer));
        }
        link.queue_ns += start.since(ready);
        link.free_at = end;
        link.busy_ns += end.since(start);
        link.bytes_sent += rec.bytes;
        link.transfers += 1;
        rec.link_ns = end.since(start);
        let latency = secs_to_nanos(self.cfg.latency_us * 1e-6);
        end.plus(latency).max(now)
    }
}

/// The link and transfer totals of a run (summary.json `kv_transfer`).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct TransferReport {
    pub mode: String,
    pub bandwidth_gbyte_s: f64,
    pub links: u32,
    pub transfers: u64,
    /// Requests the conditional rule prefilled on their decode replica.
    pub local_prefills: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Bytes sent over what the links could carry in the run (mean over
    /// links).
    pub link_utilization: f64,
    /// The same of the busiest link: a mean over links hides a hot one.
    pub link_utilization_max: f64,
    /// Mean fraction of the run a link was held by a transfer (layer-wise
    /// transfers hold it, at the prefill's pace, while the prefill computes).
    pub link_occupancy: f64,
    /// Mean and p99 wait for decode memory after the prefill, ms.
    pub decode_wait_ms_mean: f64,
    pub decode_wait_ms_p99: f64,
    /// Mean wait for the link once accepted, ms.
    pub link_queue_ms_mean: f64,
    /// Mean hand-off to arrival (wait + queue + copy + latency), ms.
    pub transfer_ms_mean: f64,
    pub transfer_ms_p99: f64,
}

/// requests.csv columns a disaggregated run appends: the prefill replica,
/// KV bytes moved, the wait for decode memory, the link time, and hand-off
/// to arrival (ms; empty for requests prefilled on their decode replica).
pub const CSV_COLUMNS: [&str; 5] = [
    "prefill_replica",
    "kv_bytes",
    "kv_decode_wait_ms",
    "kv_link_ms",
    "kv_handoff_to_decode_ms",
];

/// The [`CSV_COLUMNS`] fields of one request.
pub fn csv_fields(rec: Option<&TransferRecord>) -> [String; 5] {
    let Some(t) = rec else {
        return Default::default();
    };
    let ms = |a: Option<SimTime>, b: Option<SimTime>| match (a, b) {
        (Some(a), Some(b)) => format!("{:.3}", b.since(a) as f64 / 1e6),
        _ => String::new(),
    };
    [
        t.prefill_replica.to_string(),
        t.bytes.to_string(),
        ms(t.handoff, t.accepted),
        if t.done.is_some() {
            format!("{:.3}", t.link_ns as f64 / 1e6)
        } else {
            String::new()
        },
        ms(t.handoff, t.done),
    ]
}
