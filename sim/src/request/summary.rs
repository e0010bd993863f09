//! The request-derived parts of a run's results, folded one ended request
//! at a time ([`RequestsSummary`]): counts by outcome, throughput, SLO
//! attainment and goodput, latency distributions, preemptions. The run's
//! summary (`report::Summary`) and each tenant's report take them from
//! here.

use super::{RejectReason, Request, Status};
use crate::scenario::SloTargets;
use crate::stats::{Counts, Dist, Latency, SloReport, Throughput};
use crate::store::{f64_key, f64_of_key, SpillSort};
use crate::time::{nanos_to_ms, SimTime};

/// What [`RequestsSummary::finish`] gives.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestStats {
    pub counts: Counts,
    pub latency: Latency,
    pub throughput: Throughput,
    pub slo: Option<SloReport>,
    pub preempted_requests: u64,
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

    /// Counts, throughput, SLO attainment, latencies (with `itl`, the
    /// inter-token latencies gathered per iteration) and preempted requests;
    /// fails when a spilled run of samples cannot be read back (the
    /// distributions would then be of part of the requests).
    pub fn finish(
        mut self,
        itl: Dist,
        duration: SimTime,
        gpus: u32,
    ) -> Result<RequestStats, String> {
        let mut s = RequestStats::default();
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
        s.preempted_requests = self.preempted;
        s.counts = counts;
        Ok(s)
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
        use crate::store::CHUNK;
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
}
