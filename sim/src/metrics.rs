//! What a run reports: per-request records, the summary (latency percentiles,
//! throughput, goodput and SLO attainment, batching and KV use), and the
//! per-replica time series.

use crate::records::spill::{f64_key, f64_of_key, SpillSort};
use crate::request::{RejectReason, Request, Status};
use crate::time::{nanos_to_ms, Nanos, SimTime};
use crate::workload::WorkloadReport;
use serde::Serialize;
use std::collections::BTreeMap;

pub use crate::stats::{Counts, Dist, Latency, PercentileVerdict};

/// Throughput over the run's duration (first arrival at t = 0 to the end).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Throughput {
    pub requests_per_s: f64,
    pub input_tokens_per_s: f64,
    pub output_tokens_per_s: f64,
    pub output_tokens_per_s_per_gpu: f64,
    pub requests_per_s_per_gpu: f64,
}

pub use crate::scenario::{describe_slo, SloTargets, SLO_METRICS, SLO_PERCENTILES};

/// SLO attainment and goodput (DistServe, Zhong et al. OSDI'24: requests per
/// second that meet every latency target; vLLM's `bench serve --goodput`),
/// and the verdict of each percentile target.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct SloReport {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<f64>,
    /// Share of ended requests (completed + rejected) meeting every
    /// per-request threshold; a rejection counts as a miss (with no
    /// threshold given, the share completed).
    pub attainment: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_attainment: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot_attainment: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2e_attainment: Option<f64>,
    /// Good requests per second of the run.
    pub goodput_rps: f64,
    pub goodput_rps_per_gpu: f64,
    /// The percentile targets against the run's values (with any given).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub percentiles: Vec<PercentileVerdict>,
    /// Whether every percentile target holds (with any given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentiles_met: Option<bool>,
}

impl SloReport {
    /// Whether the percentile targets hold (true when none is given).
    pub fn percentiles_hold(&self) -> bool {
        self.percentiles_met.unwrap_or(true)
    }
}

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
    pub prefix_cache: Option<PrefixCacheReport>,
}

/// Prefix-cache counters summed over replicas. Hit rates count each
/// request's first admission (a recompute after preemption is not a lookup).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct PrefixCacheReport {
    /// Prompt tokens served from cache / prompt tokens looked up.
    pub token_hit_rate: f64,
    /// Hashed prompt blocks found / looked up.
    pub block_hit_rate: f64,
    pub lookup_tokens: u64,
    pub hit_tokens: u64,
    pub lookup_blocks: u64,
    pub hit_blocks: u64,
    pub inserted_blocks: u64,
    pub evicted_blocks: u64,
    pub cached_blocks_at_end: u64,
    pub pinned_blocks_at_end: u64,
}

/// The summary of one run (`summary.json`).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Summary {
    pub scenario: String,
    pub seed: u64,
    pub cost_source: String,
    pub model: String,
    pub hardware: String,
    pub replicas: u32,
    pub tensor_parallel: u32,
    pub gpus: u32,
    pub router: String,
    pub kv_blocks_per_replica: u64,
    pub block_size: u32,
    /// Simulated seconds from t = 0 to the end of the run.
    pub duration_s: f64,
    pub counts: Counts,
    pub latency: Latency,
    pub throughput: Throughput,
    pub slo: Option<SloReport>,
    pub engine: EngineReport,
    /// Offered vs achieved load and whether the run reached a steady state.
    pub load: crate::load::LoadReport,
    pub events: u64,
    /// What the workload reports (trace lines read and skipped, closed-loop
    /// users that left); absent for a plain synthetic stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadReport>,
    /// Per-tenant results and fairness (only with `[[tenants]]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenancy: Option<crate::tenancy::TenancyReport>,
    /// Offered against achieved load, when the run was observed over HTTP
    /// (`servesim observe`); absent for simulations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed: Option<ObservedLoad>,
    /// Replica life cycle: GPU-hours by phase, cold starts, failures and
    /// retries (only with `[lifecycle]`, `[autoscale]` or `[failures]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<crate::lifecycle::LifecycleReport>,
    /// Per-pool GPUs, utilization and KV use (only with `[[fleet.pools]]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<crate::cluster::fleet::PoolReport>,
    /// Per-region demand, overflow, SLO attainment and cost (only with
    /// `[[fleet.regions]]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<crate::region::RegionReport>,
    /// The KV links of a disaggregated fleet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_transfer: Option<crate::cluster::disagg::TransferReport>,
    /// Only with `[canary]`: the rollout's gate decisions and outcome.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary: Option<crate::canary::report::CanaryReport>,
}

/// What a load generator offered a real server and what it got back.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ObservedLoad {
    /// The server's base URL.
    pub url: String,
    /// Requests per second the workload's arrival times ask for.
    pub offered_rps: f64,
    /// Requests per second actually sent (the connection cap can delay them).
    pub sent_rps: f64,
    /// Mean lateness of a send behind its scheduled arrival, ms.
    pub send_lag_ms: f64,
    /// Responses by HTTP status (0: no response: a transport error).
    pub http_status: BTreeMap<String, u64>,
}

/// One sample of the per-replica time series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeseriesRow {
    pub time: SimTime,
    pub replica: u32,
    pub waiting: u32,
    pub running: u32,
    pub kv_blocks_used: u64,
    pub kv_blocks_total: u64,
}

/// A row as the time series spills it (`RunResult::timeseries`): its six
/// fields, little-endian.
impl crate::records::spill::Spill for TimeseriesRow {
    const BYTES: usize = 36;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.time.0.to_le_bytes());
        out.extend_from_slice(&self.replica.to_le_bytes());
        out.extend_from_slice(&self.waiting.to_le_bytes());
        out.extend_from_slice(&self.running.to_le_bytes());
        out.extend_from_slice(&self.kv_blocks_used.to_le_bytes());
        out.extend_from_slice(&self.kv_blocks_total.to_le_bytes());
    }
    fn get(b: &[u8]) -> TimeseriesRow {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        TimeseriesRow {
            time: SimTime(u64_at(0)),
            replica: u32_at(8),
            waiting: u32_at(12),
            running: u32_at(16),
            kv_blocks_used: u64_at(20),
            kv_blocks_total: u64_at(28),
        }
    }
}

/// Fills the request-derived parts of a summary (a fold of
/// [`RequestsSummary`] over `reqs`, the one code path a streamed run uses
/// too); fails as [`RequestsSummary::finish`] does.
pub fn summarize_requests(
    reqs: &[Request],
    itl_samples: Vec<(Nanos, u32)>,
    duration: SimTime,
    gpus: u32,
    slo: Option<SloTargets>,
    s: &mut Summary,
) -> Result<(), String> {
    let mut acc = RequestsSummary::new(slo);
    for r in reqs {
        acc.add(r);
    }
    acc.finish(Dist::of_weighted(itl_samples), duration, gpus, s)
}

/// The request-derived parts of a summary, folded one ended request at a
/// time (in any order: every statistic is a count, an integer sum, or a
/// distribution whose samples are sorted before they are summed).
///
/// The latency samples go to [`SpillSort`]s: a bounded buffer, sorted runs
/// on disk beyond it, merged at the end; memory does not grow with the
/// number of requests.
#[derive(Debug, Default)]
pub struct RequestsSummary {
    slo: Option<SloTargets>,
    counts: Counts,
    ttft: SpillSort<u64>,
    tpot: SpillSort<u64>,
    e2e: SpillSort<u64>,
    wait: SpillSort<u64>,
    in_tok: u64,
    out_tok: u64,
    good: u64,
    ttft_ok: u64,
    tpot_ok: u64,
    e2e_ok: u64,
    preempted: u64,
    /// The latency distributions merging on a thread of their own
    /// ([`Self::start_dists`]), and the spill error their samples had.
    early: Option<EarlyDists>,
}

/// [`latency_dists`] of the queue-wait, TTFT, TPOT and E2E samples, started
/// once the last sample was in.
type EarlyDists = (
    std::thread::JoinHandle<Result<[Dist; 4], String>>,
    Option<String>,
);

impl RequestsSummary {
    pub fn new(slo: Option<SloTargets>) -> RequestsSummary {
        RequestsSummary {
            slo,
            ..RequestsSummary::default()
        }
    }

    /// Counts request `r` as it ended (or stood at the horizon).
    pub fn add(&mut self, r: &Request) {
        self.add_as(r, r.samples);
    }

    /// [`Self::add`] counting `samples` parallel samples' output tokens (the
    /// per-tenant report counts one).
    pub fn add_as(&mut self, r: &Request, samples: u32) {
        debug_assert!(self.early.is_none(), "a request after start_dists");
        let counts = &mut self.counts;
        counts.arrived += 1;
        match r.status {
            Status::Completed => {
                counts.completed += 1;
                self.in_tok += r.prompt_tokens as u64;
                // Every sample's tokens (vLLM counts n × tokens for `n`).
                self.out_tok += r.generated as u64 * samples as u64;
                let t = nanos_to_ms(r.ttft().unwrap_or(0));
                self.ttft.push(f64_key(t));
                self.e2e.push(f64_key(nanos_to_ms(r.e2e().unwrap_or(0))));
                if let Some(p) = r.tpot().map(|x| x / 1e6) {
                    self.tpot.push(f64_key(p));
                }
                if let Some(slo) = &self.slo {
                    let [a, b, c] = slo.judge(r);
                    self.ttft_ok += a as u64;
                    self.tpot_ok += b as u64;
                    self.e2e_ok += c as u64;
                    self.good += (a && b && c) as u64;
                }
            }
            Status::Rejected(reason) => {
                counts.rejected += 1;
                *counts
                    .rejected_by_reason
                    .entry(reason_key(reason))
                    .or_default() += 1;
            }
            Status::InFlight => counts.in_flight += 1,
            Status::Cancelled => counts.cancelled += 1,
            Status::Failed => counts.failed += 1,
        }
        if let Some(w) = r.queue_wait() {
            self.wait.push(f64_key(nanos_to_ms(w)));
        }
        self.preempted += (r.preemptions > 0) as u64;
    }

    /// Starts merging the latency distributions on a thread of their own
    /// (no request may be added after), when they are large enough for
    /// [`latency_dists`] to use threads: the caller goes on with other
    /// work, and [`Self::finish`] takes the result.
    pub fn start_dists(&mut self) {
        let samples = [&self.wait, &self.ttft, &self.tpot, &self.e2e];
        if self.early.is_some() || samples.iter().all(|v| v.len() < PARALLEL_FROM) {
            return;
        }
        let error = self.error().map(str::to_string);
        let mut sets = [
            std::mem::take(&mut self.wait),
            std::mem::take(&mut self.ttft),
            std::mem::take(&mut self.tpot),
            std::mem::take(&mut self.e2e),
        ];
        // A thread that cannot start panics here, as in `latency_dists`.
        let merging = std::thread::Builder::new()
            .name("servesim-dists".into())
            .spawn(move || {
                let [a, b, c, d] = &mut sets;
                latency_dists([a, b, c, d])
            })
            .unwrap_or_else(|e| panic!("cannot start a thread: {e}"));
        self.early = Some((merging, error));
    }

    /// Writes counts, throughput, SLO attainment, latencies (with `itl`, the
    /// inter-token latencies gathered per iteration) and preempted requests;
    /// fails when a spilled run of samples cannot be read back (the
    /// distributions would then be of part of the requests).
    pub fn finish(
        mut self,
        itl: Dist,
        duration: SimTime,
        gpus: u32,
        s: &mut Summary,
    ) -> Result<(), String> {
        let counts = self.counts;
        let (in_tok, out_tok) = (self.in_tok, self.out_tok);
        let secs = duration.as_secs_f64().max(1e-9);
        let g = gpus.max(1) as f64;
        s.throughput = Throughput {
            requests_per_s: counts.completed as f64 / secs,
            input_tokens_per_s: in_tok as f64 / secs,
            output_tokens_per_s: out_tok as f64 / secs,
            output_tokens_per_s_per_gpu: out_tok as f64 / secs / g,
            requests_per_s_per_gpu: counts.completed as f64 / secs / g,
        };
        if let Some(slo) = &self.slo {
            let good = self.good;
            let ended = (counts.completed + counts.rejected).max(1) as f64;
            let share = |given: Option<f64>, ok: u64| given.map(|_| ok as f64 / ended);
            s.slo = Some(SloReport {
                ttft_ms: slo.ttft_ms,
                tpot_ms: slo.tpot_ms,
                e2e_ms: slo.e2e_ms,
                attainment: good as f64 / ended,
                ttft_attainment: share(slo.ttft_ms, self.ttft_ok),
                tpot_attainment: share(slo.tpot_ms, self.tpot_ok),
                e2e_attainment: share(slo.e2e_ms, self.e2e_ok),
                goodput_rps: good as f64 / secs,
                goodput_rps_per_gpu: good as f64 / secs / g,
                percentiles: Vec::new(),
                percentiles_met: None,
            });
        }
        let [wait, ttft, tpot, e2e] = match self.early.take() {
            Some((h, _)) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?,
            None => latency_dists([
                &mut self.wait,
                &mut self.ttft,
                &mut self.tpot,
                &mut self.e2e,
            ])?,
        };
        s.latency = Latency {
            queue_wait_ms: wait,
            ttft_ms: ttft,
            tpot_ms: tpot,
            itl_ms: itl,
            e2e_ms: e2e,
        };
        if let (Some(slo), Some(report)) = (&self.slo, &mut s.slo) {
            if slo.has_percentiles() {
                report.percentiles = slo.verdicts(&s.latency);
                report.percentiles_met = Some(report.percentiles.iter().all(|v| v.met));
            }
        }
        s.engine.preempted_requests = self.preempted;
        s.counts = counts;
        Ok(())
    }

    /// The first error spilling samples to disk (the distributions are then
    /// incomplete).
    pub fn error(&self) -> Option<&str> {
        if let Some((_, e)) = &self.early {
            return e.as_deref();
        }
        [&self.ttft, &self.tpot, &self.e2e, &self.wait]
            .into_iter()
            .find_map(|v| v.error())
    }
}

/// Samples from which [`latency_dists`] merges on threads (below, the
/// threads would cost more than they save); the run's load report goes on
/// a thread of its own from as many requests (`Simulation::finish`).
pub(crate) const PARALLEL_FROM: usize = 1 << 18;

/// The distributions of `samples`, each from its own sorted stream. On a
/// large run each merges its runs spilled to disk (a k-way merge of up to
/// tens of millions of samples) on a thread of its own: the four are
/// independent, so the numbers are the same as one after the other. The
/// first spilled run that cannot be read back is the error.
fn latency_dists(samples: [&mut SpillSort<u64>; 4]) -> Result<[Dist; 4], String> {
    let dist = |v: &mut SpillSort<u64>| {
        let d = Dist::of_sorted(v.len(), v.sorted().map(f64_of_key));
        v.error().map_or(Ok(d), |e| Err(e.to_string()))
    };
    if samples.iter().all(|v| v.len() < PARALLEL_FROM) {
        let [a, b, c, d] = samples.map(dist);
        return Ok([a?, b?, c?, d?]);
    }
    std::thread::scope(|sc| {
        let [first, rest @ ..] = samples;
        // (A thread that cannot start panics here, as an allocation that
        // fails does.)
        let handles = rest.map(|v| sc.spawn(move || dist(v)));
        let d0 = dist(first);
        let [d1, d2, d3] =
            handles.map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        Ok([d0?, d1?, d2?, d3?])
    })
}

fn reason_key(r: RejectReason) -> String {
    r.as_str().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A completed request: TTFT, then `out` tokens ending at E2E, ms.
    fn done(ttft_ms: u64, e2e_ms: u64, out: u32) -> Request {
        let ms = 1_000_000;
        let mut r = Request::new(SimTime(0), 100, out);
        r.first_token = Some(SimTime(ttft_ms * ms));
        r.finished = Some(SimTime(e2e_ms * ms));
        r.generated = out;
        r.status = Status::Completed;
        r
    }

    #[test]
    fn a_good_request_meets_every_threshold_given_as_vllm_counts_it() {
        let t = SloTargets {
            ttft_ms: Some(200.0),
            tpot_ms: Some(10.0),
            ..SloTargets::default()
        };
        // TPOT = (E2E − TTFT) / (output − 1) = (1190 − 200) / 99 = 10 ms.
        assert_eq!(t.judge(&done(200, 1190, 100)), [true, true, true]);
        assert_eq!(t.judge(&done(201, 1190, 100)), [false, true, true]);
        assert_eq!(t.judge(&done(200, 1200, 100)), [true, false, true]);
        // One output token: no TPOT, which vLLM counts as 0 (good).
        assert!(t.meets(&done(100, 5000, 1)));
        // E2E is judged only when given.
        let e = SloTargets {
            e2e_ms: Some(1000.0),
            ..t
        };
        assert!(!e.meets(&done(200, 1190, 100)));
        let mut rejected = done(1, 2, 2);
        rejected.status = Status::Rejected(RejectReason::QueueFull);
        assert!(!SloTargets::default().meets(&rejected));
        assert!(SloTargets::default().meets(&done(1, 2, 2)));
    }

    #[test]
    fn percentile_targets_hold_when_the_percentile_is_at_most_the_target() {
        let mut t = SloTargets::default();
        t.percentile_ms[0][3] = Some(100.0); // ttft_p99_ms
        t.percentile_ms[2][0] = Some(5.0); // itl_p50_ms
        let l = Latency {
            ttft_ms: Dist::of((1..=100).map(f64::from).collect()),
            ..Latency::default()
        };
        let v = t.verdicts(&l);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].key, "ttft_p99_ms");
        assert_eq!(v[0].value_ms, Some(l.ttft_ms.p99));
        assert!(v[0].met, "{v:?}");
        // No inter-token samples: not measured, so not met.
        assert_eq!(
            (v[1].key.as_str(), v[1].value_ms, v[1].met),
            ("itl_p50_ms", None, false)
        );
        assert!(!t
            .without("itl")
            .verdicts(&l)
            .iter()
            .any(|v| v.key == "itl_p50_ms"));
        assert_eq!(t.describe(", "), "TTFT p99 ≤ 100 ms, ITL p50 ≤ 5 ms");
    }

    #[test]
    fn a_spilled_time_series_comes_back_row_for_row() {
        use crate::records::spill::{SpillLog, CHUNK};
        let row = |i: u64| TimeseriesRow {
            time: SimTime(i * 1_000_000_007),
            replica: (i % 1_000) as u32,
            waiting: (i * 7) as u32,
            running: u32::MAX - i as u32,
            kv_blocks_used: i << 33,
            kv_blocks_total: u64::MAX - i,
        };
        // Two chunks on disk and a part in memory.
        let n = 2 * CHUNK as u64 + 77;
        let mut log = SpillLog::default();
        for i in 0..n {
            log.push(row(i));
        }
        assert_eq!(log.len() as u64, n);
        assert!(log.error().is_none());
        assert!(log.iter().eq((0..n).map(row)));
    }

    #[test]
    fn latency_dists_on_threads_equal_one_after_the_other() {
        // Enough samples to take the threaded path (and spill to disk).
        let n = PARALLEL_FROM + 12_345;
        let mut sets: [SpillSort<u64>; 4] = Default::default();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for (k, set) in sets.iter_mut().enumerate() {
            for _ in 0..n + k * 1000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                set.push(f64_key((x >> 40) as f64 * 1e-3));
            }
        }
        let want: Vec<Dist> = sets
            .iter_mut()
            .map(|v| Dist::of_sorted(v.len(), v.sorted().map(f64_of_key)))
            .collect();
        let [a, b, c, d] = &mut sets;
        let got = latency_dists([a, b, c, d]).unwrap();
        assert_eq!(format!("{want:?}"), format!("{got:?}"));
        // Each set kept its own place.
        assert_ne!(format!("{:?}", got[0]), format!("{:?}", got[3]));
    }

    #[test]
    fn latency_samples_that_cannot_be_read_back_are_an_error() {
        use crate::records::spill::CHUNK;
        // Below and above the size the merges go on threads from.
        for n in [2 * CHUNK + 3, PARALLEL_FROM + 5] {
            let mut sets: [SpillSort<u64>; 4] = Default::default();
            for (k, set) in sets.iter_mut().enumerate() {
                for i in 0..n as u64 {
                    set.push(f64_key((i * 7919 % 1009 + k as u64) as f64));
                }
            }
            sets[2].lose_all_but_the_first_run();
            let [a, b, c, d] = &mut sets;
            let got = latency_dists([a, b, c, d]);
            assert!(
                got.as_ref().is_err_and(|e| e.contains("cannot read")),
                "{n} samples: {got:?}"
            );
        }
    }

    /// Linear-interpolation quantile of sorted data (NumPy's default, Hyndman &
    /// Fan type 7).
    fn quantile_sorted(v: &[f64], q: f64) -> f64 {
        if v.is_empty() {
            return 0.0;
        }
        let pos = q * (v.len() - 1) as f64;
        let lo = pos.floor() as usize;
        let hi = pos.ceil() as usize;
        v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
    }

    /// The vector version the one-pass [`Dist::of_sorted`] replaced.
    fn of_vec(mut v: Vec<f64>) -> Dist {
        if v.is_empty() {
            return Dist::default();
        }
        v.sort_by(f64::total_cmp);
        Dist {
            count: v.len() as u64,
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p50: quantile_sorted(&v, 0.50),
            p90: quantile_sorted(&v, 0.90),
            p95: quantile_sorted(&v, 0.95),
            p99: quantile_sorted(&v, 0.99),
            max: v[v.len() - 1],
        }
    }

    proptest! {
        #[test]
        fn one_pass_distribution_is_bit_identical(v in proptest::collection::vec(0f64..1e5, 0..300)) {
            let (a, b) = (Dist::of(v.clone()), of_vec(v));
            prop_assert_eq!(a.count, b.count);
            for (x, y) in [(a.mean, b.mean), (a.p50, b.p50), (a.p90, b.p90),
                           (a.p95, b.p95), (a.p99, b.p99), (a.max, b.max)] {
                prop_assert_eq!(x.to_bits(), y.to_bits());
            }
        }
    }

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let d = Dist::of(vec![4.0, 1.0, 3.0, 2.0]);
        assert_eq!(d.p50, 2.5);
        assert_eq!(d.max, 4.0);
        assert_eq!(d.mean, 2.5);
        assert!((d.p90 - 3.7).abs() < 1e-12);
        assert_eq!(Dist::of(vec![]).count, 0);
    }

    #[test]
    fn weighted_quantiles_count_each_token() {
        // 99 tokens at 10 ms and 1 token at 500 ms.
        let d = Dist::of_weighted(vec![(500_000_000, 1), (10_000_000, 99)]);
        assert_eq!(d.count, 100);
        assert_eq!(d.p50, 10.0);
        assert_eq!(d.p99, 10.0);
        assert_eq!(d.max, 500.0);
        assert!((d.mean - 14.9).abs() < 1e-9);
    }
}
