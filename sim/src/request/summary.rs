//! The request-derived parts of a run's results, folded one ended request
//! at a time ([`RequestsSummary`]): counts by outcome, throughput, SLO
//! attainment and goodput, latency distributions, preemptions. The run's
//! summary (`report::Summary`) and each tenant's report take them from
//! here.

use super::{RejectReason, Request, Status};
use crate::scenario::SloTargets;
use crate::stats::{Counts, Dist, Latency, Samples, SloReport, Throughput};
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
/// The latency samples go to [`Samples`], whose memory does not grow with
/// the number of requests.
#[derive(Debug, Default)]
pub struct RequestsSummary {
    slo: Option<SloTargets>,
    counts: Counts,
    ttft: Samples,
    tpot: Samples,
    e2e: Samples,
    wait: Samples,
    in_tok: u64,
    out_tok: u64,
    good: u64,
    ttft_ok: u64,
    tpot_ok: u64,
    e2e_ok: u64,
    preempted: u64,
}

impl RequestsSummary {
    pub fn new(slo: Option<SloTargets>) -> RequestsSummary {
        RequestsSummary {
            slo,
            ..RequestsSummary::default()
        }
    }

    /// Counts request `r` as it ended (or stood at the horizon).
    pub fn add(&mut self, r: &Request) {
        self.add_as(r, r.samples());
    }

    /// [`Self::add`] counting `samples` parallel samples' output tokens (the
    /// per-tenant report counts one).
    pub fn add_as(&mut self, r: &Request, samples: u32) {
        let counts = &mut self.counts;
        counts.arrived += 1;
        match r.status {
            Status::Completed => {
                counts.completed += 1;
                self.in_tok += r.prompt_tokens as u64;
                // Every sample's tokens (vLLM counts n × tokens for `n`).
                self.out_tok += r.generated as u64 * samples as u64;
                let t = nanos_to_ms(r.ttft().unwrap_or(0));
                self.ttft.push(t);
                self.e2e.push(nanos_to_ms(r.e2e().unwrap_or(0)));
                if let Some(p) = r.tpot().map(|x| x / 1e6) {
                    self.tpot.push(p);
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
            self.wait.push(nanos_to_ms(w));
        }
        self.preempted += (r.preemptions > 0) as u64;
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
        // The first distribution that cannot be read back is the error.
        let wait = self.wait.dist()?;
        let ttft = self.ttft.dist()?;
        let tpot = self.tpot.dist()?;
        let e2e = self.e2e.dist()?;
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
        [&self.ttft, &self.tpot, &self.e2e, &self.wait]
            .into_iter()
            .find_map(|v| v.error())
    }
}

fn reason_key(r: RejectReason) -> String {
    r.as_str().to_string()
}
