//! Why the router chose (`[metrics] routing_trace = true`): per routing
//! decision, every candidate replica's score under the router's policy,
//! its load, an estimate of the time to first token the request would have
//! had there, and the pick; and the decision's *regret*, the estimated TTFT
//! of the pick minus the lowest estimate among the candidates (the
//! counterfactual choice given the state at that moment). Tracing routing
//! decisions and scoring each against the counterfactual best is what
//! llm-d's inference simulator (BLIS) does for its routing policies.
//!
//! The estimate reads each candidate's state when the request arrives, not
//! the router's (possibly stale) view of it: the prompt tokens still to
//! prefill there (queued prompts and the rest of the prompts in its batch,
//! first come first served), plus this request's prompt tokens outside that
//! replica's prefix cache; each iteration prefills up to the engine's
//! `max_batched_tokens` less a token per decoding sequence (vLLM's chunked
//! prefill), priced by the replica's own cost model with its running batch
//! decoding beside it. It leaves out the rest of the iteration in progress,
//! memory waits and preemption: an estimate to rank replicas by, the same
//! for every candidate, not a forecast of the TTFT the run measures.
//!
//! Memory stays bounded on long runs: each candidate's row goes to a
//! spilling log (`store::SpillLog`, the mechanism `timeseries.csv` uses),
//! 49 bytes per row on disk past its in-memory chunk, written out as
//! `routing.csv` with the other result files; the summary keeps sums and one
//! entry per replica.

use crate::cost::{BatchShape, CostModel};
use crate::replica::Replica;
use crate::request::Request;
use crate::store::{Spill, SpillLog};
use crate::time::SimTime;
use serde::{Deserialize, Serialize};
use std::io::Write;

/// Header of `routing.csv`.
pub const COLUMNS: [&str; 8] = [
    "request",
    "time_s",
    "replica",
    "score",
    "outstanding",
    "est_ttft_ms",
    "picked",
    "regret_ms",
];

/// One candidate of one decision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CandidateRow {
    /// The request's id (`requests.csv`'s `id`).
    pub request: u64,
    pub time: SimTime,
    pub replica: u32,
    /// The policy's score; NaN for a policy without one (round robin, random).
    pub score: f64,
    /// Requests queued or running there at the decision.
    pub outstanding: u32,
    pub est_ttft_ns: u64,
    /// Estimated TTFT of the pick minus the lowest estimate (set on the
    /// picked row; `None` on the others).
    pub regret_ns: Option<u64>,
}

impl Spill for CandidateRow {
    const BYTES: usize = 49;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.request.to_le_bytes());
        out.extend_from_slice(&self.time.0.to_le_bytes());
        out.extend_from_slice(&self.replica.to_le_bytes());
        out.extend_from_slice(&self.score.to_bits().to_le_bytes());
        out.extend_from_slice(&self.outstanding.to_le_bytes());
        out.extend_from_slice(&self.est_ttft_ns.to_le_bytes());
        out.push(self.regret_ns.is_some() as u8);
        out.extend_from_slice(&self.regret_ns.unwrap_or(0).to_le_bytes());
    }
    fn get(b: &[u8]) -> CandidateRow {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        CandidateRow {
            request: u64_at(0),
            time: SimTime(u64_at(8)),
            replica: u32_at(16),
            score: f64::from_bits(u64_at(20)),
            outstanding: u32_at(28),
            est_ttft_ns: u64_at(32),
            regret_ns: (b[40] != 0).then(|| u64_at(41)),
        }
    }
}

/// The summary's `routing` section: what the trace adds up to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingReport {
    /// What the router's score in `routing.csv` means.
    pub score: String,
    pub decisions: u64,
    /// Decisions whose pick had the lowest estimated TTFT (ties included).
    pub fastest_picks: u64,
    /// Regret summed over the decisions, ms.
    pub regret_ms_total: f64,
    pub regret_ms_mean: f64,
    pub regret_ms_max: f64,
    /// Per replica that took part in a decision.
    pub replicas: Vec<ReplicaRegret>,
}

/// One replica's part in the regret.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaRegret {
    pub replica: u32,
    /// Decisions that picked it.
    pub picks: u64,
    /// Regret of those picks, ms: TTFT lost by sending requests here.
    pub regret_ms: f64,
    /// Decisions with regret whose fastest candidate it was.
    pub fastest_alternative: u64,
}

/// What one decision offers the trace: the candidates (replicas
/// `first..first + len`, those the router could choose) and the router's
/// scores of them.
pub struct Decision<'a> {
    pub first: usize,
    pub len: usize,
    pub routable: &'a dyn Fn(usize) -> bool,
    /// Per candidate, in order (empty: the policy has no score).
    pub scores: &'a [f64],
}

/// Per replica sums, in ns.
#[derive(Clone, Copy, Debug, Default)]
struct Sums {
    picks: u64,
    regret_ns: u64,
    fastest_alternative: u64,
}

/// The trace of one run.
#[derive(Debug)]
pub struct RoutingTrace {
    rows: SpillLog<CandidateRow>,
    score: String,
    decisions: u64,
    fastest_picks: u64,
    regret_ns: u64,
    max_regret_ns: u64,
    per_replica: Vec<Sums>,
    /// Scratch: the current decision's estimates.
    est: Vec<(usize, u64)>,
}

impl RoutingTrace {
    /// A trace of a fleet of `replicas` (slots), whose router scores mean
    /// `score`.
    pub fn new(replicas: usize, score: &str) -> RoutingTrace {
        RoutingTrace {
            rows: SpillLog::default(),
            score: score.to_string(),
            decisions: 0,
            fastest_picks: 0,
            regret_ns: 0,
            max_regret_ns: 0,
            per_replica: vec![Sums::default(); replicas],
            est: Vec::new(),
        }
    }

    /// Records the decision that sent request `id` (`req`) to `picked` at
    /// `now`, before it joins that replica's queue. `cost(r)` and
    /// `budget(r)` are replica `r`'s cost model and `max_batched_tokens`.
    #[allow(clippy::too_many_arguments)]
    pub fn record<'c>(
        &mut self,
        now: SimTime,
        id: u64,
        req: &Request,
        picked: usize,
        d: &Decision<'_>,
        replicas: &[Replica],
        cost: impl Fn(usize) -> &'c dyn CostModel,
        budget: impl Fn(usize) -> u32,
    ) {
        self.est.clear();
        let group = &replicas[d.first..d.first + d.len];
        for (k, rep) in group.iter().enumerate() {
            let r = d.first + k;
            if r == picked || (d.routable)(k) {
                self.est
                    .push((r, estimate_ttft_ns(rep, req, budget(r), cost(r))));
            }
        }
        let best = self
            .est
            .iter()
            .min_by_key(|&&(r, t)| (t, r))
            .copied()
            .expect("the pick is a candidate");
        let mine = self
            .est
            .iter()
            .find(|e| e.0 == picked)
            .expect("the pick is a candidate")
            .1;
        let regret = mine - best.1;
        self.decisions += 1;
        self.regret_ns += regret;
        self.max_regret_ns = self.max_regret_ns.max(regret);
        if self.per_replica.len() <= picked.max(best.0) {
            self.per_replica
                .resize(picked.max(best.0) + 1, Sums::default());
        }
        let p = &mut self.per_replica[picked];
        p.picks += 1;
        p.regret_ns += regret;
        if regret == 0 {
            self.fastest_picks += 1;
        } else {
            self.per_replica[best.0].fastest_alternative += 1;
        }
        for &(r, t) in &self.est {
            self.rows.push(CandidateRow {
                request: id,
                time: now,
                replica: r as u32,
                score: d.scores.get(r - d.first).copied().unwrap_or(f64::NAN),
                outstanding: replicas[r].outstanding() as u32,
                est_ttft_ns: t,
                regret_ns: (r == picked).then_some(regret),
            });
        }
    }

    /// The summary's section.
    pub fn report(&self) -> RoutingReport {
        let ms = |ns: u64| ns as f64 / 1e6;
        RoutingReport {
            score: self.score.clone(),
            decisions: self.decisions,
            fastest_picks: self.fastest_picks,
            regret_ms_total: ms(self.regret_ns),
            regret_ms_mean: if self.decisions > 0 {
                ms(self.regret_ns) / self.decisions as f64
            } else {
                0.0
            },
            regret_ms_max: ms(self.max_regret_ns),
            replicas: self
                .per_replica
                .iter()
                .enumerate()
                .filter(|(_, s)| s.picks > 0 || s.fastest_alternative > 0)
                .map(|(r, s)| ReplicaRegret {
                    replica: r as u32,
                    picks: s.picks,
                    regret_ms: ms(s.regret_ns),
                    fastest_alternative: s.fastest_alternative,
                })
                .collect(),
        }
    }

    /// Writes `routing.csv`: one row per candidate per decision, in
    /// decision order.
    pub fn write_csv(&self, w: &mut impl Write) -> std::io::Result<()> {
        writeln!(w, "{}", COLUMNS.join(","))?;
        let ms = |ns: u64| ns as f64 / 1e6;
        for row in self.rows.iter() {
            write!(
                w,
                "{},{:.6},{},",
                row.request,
                row.time.as_secs_f64(),
                row.replica
            )?;
            if row.score.is_finite() {
                write!(w, "{}", row.score)?;
            }
            write!(
                w,
                ",{},{:.6},{},",
                row.outstanding,
                ms(row.est_ttft_ns),
                row.regret_ns.is_some() as u8
            )?;
            if let Some(r) = row.regret_ns {
                write!(w, "{:.6}", ms(r))?;
            }
            writeln!(w)?;
        }
        if let Some(e) = self.rows.error() {
            return Err(std::io::Error::other(e.to_string()));
        }
        w.flush()
    }
}

/// The TTFT `req` would have on `rep` if it joined its queue now (see the
/// module comment): the prefill work ahead of it and its own uncached
/// prompt, in iterations of `budget` tokens beside the running decodes,
/// each priced by `cost`.
pub fn estimate_ttft_ns(rep: &Replica, req: &Request, budget: u32, cost: &dyn CostModel) -> u64 {
    let own = req
        .prompt_tokens
        .saturating_sub(rep.cached_prefix_tokens(req)) as u64;
    let work = rep.prefill_backlog_tokens() + own.max(1);
    let (mut decodes, mut context) = (0u64, 0u64);
    for e in rep.batch().filter(|e| e.decode) {
        decodes += 1;
        context += e.kv_tokens as u64 + 1;
    }
    if decodes == 0 {
        decodes = rep.running_len() as u64;
    }
    let per_iter = (budget as u64).saturating_sub(decodes).max(1);
    let step = |tokens: u64| {
        let mut b = BatchShape::default();
        b.add_prefill(tokens, 0);
        if decodes > 0 {
            b.decode_seqs = decodes as u32;
            b.decode_context_tokens = context;
        }
        cost.iteration_time(&b)
    };
    let full = work / per_iter;
    let rest = work % per_iter;
    let mut t = 0u64;
    if full > 0 {
        t = t.saturating_add(step(per_iter).saturating_mul(full));
    }
    if rest > 0 {
        t = t.saturating_add(step(rest));
    }
    t
}

#[cfg(test)]
mod tests {
    use crate::report::RunResult;
    use crate::scenario::Scenario;
    use crate::simulation::Simulation;

    fn run(fleet: &str) -> RunResult {
        let text = format!(
            r#"
name = "trace"
seed = 7
[horizon]
requests = 400
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[engine]
max_batched_tokens = 8192
[workload]
arrival = {{ process = "poisson", rate = 30.0 }}
prompt_tokens = {{ dist = "lognormal", mean = 1500, cv = 0.5, min = 64, max = 6000 }}
output_tokens = {{ dist = "lognormal", mean = 120, cv = 0.5, min = 8, max = 400 }}
[metrics]
routing_trace = true
[fleet]
{fleet}
"#
        );
        let s = Scenario::from_toml_str(&text, "trace.toml").unwrap();
        Simulation::new(&s).run(|_| {}).unwrap()
    }

    fn csv(r: &RunResult) -> String {
        let mut out = Vec::new();
        r.routing_trace
            .as_ref()
            .unwrap()
            .write_csv(&mut out)
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Per decision (consecutive rows of one request at one time): exactly
    /// one pick, and its regret is its estimate less the lowest one.
    fn check_rows(text: &str) -> usize {
        let mut lines = text.lines();
        assert_eq!(lines.next().unwrap(), super::COLUMNS.join(","));
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
        let mut decisions = 0;
        let mut i = 0;
        while i < rows.len() {
            let key = (rows[i][0], rows[i][1]);
            let j = (i..rows.len())
                .find(|&j| (rows[j][0], rows[j][1]) != key)
                .unwrap_or(rows.len());
            let est = |r: &Vec<&str>| r[5].parse::<f64>().unwrap();
            let best = rows[i..j].iter().map(est).fold(f64::INFINITY, f64::min);
            let picked: Vec<&Vec<&str>> = rows[i..j].iter().filter(|r| r[6] == "1").collect();
            assert_eq!(picked.len(), 1, "{key:?}");
            let regret: f64 = picked[0][7].parse().unwrap();
            assert!((regret - (est(picked[0]) - best)).abs() < 1e-5, "{key:?}");
            decisions += 1;
            i = j;
        }
        decisions
    }

    #[test]
    fn one_replica_is_always_the_fastest_choice() {
        let r = run("replicas = 1\nrouter = \"least-outstanding\"");
        let t = r.summary.routing.as_ref().unwrap();
        assert_eq!(t.decisions, 400, "{:?}", r.summary.counts);
        assert_eq!(t.fastest_picks, 400);
        assert_eq!(t.regret_ms_total, 0.0);
        assert_eq!(t.regret_ms_max, 0.0);
        assert_eq!(check_rows(&csv(&r)), 400);
    }

    #[test]
    fn a_herding_router_regrets_its_picks_on_the_busy_replica() {
        // Load reports every 10 s: least-outstanding sends everything
        // between two reports to the replica that looked idlest at the
        // last one, while the other one idles.
        let stale = run("replicas = 2\nrouter = \"least-outstanding\"\nreport_interval_s = 10.0");
        let t = stale.summary.routing.as_ref().unwrap();
        assert_eq!(check_rows(&csv(&stale)), t.decisions as usize);
        assert!(t.regret_ms_total > 0.0 && t.regret_ms_max > 0.0, "{t:?}");
        assert!(t.fastest_picks < t.decisions);
        let sum: f64 = t.replicas.iter().map(|x| x.regret_ms).sum();
        assert!((sum - t.regret_ms_total).abs() < 1e-6 * t.regret_ms_total.max(1.0));
        // A live view spreads the same load: far less regret.
        let live = run("replicas = 2\nrouter = \"least-outstanding\"");
        let l = live.summary.routing.as_ref().unwrap();
        assert!(
            l.regret_ms_total < t.regret_ms_total / 2.0,
            "live {} vs stale {}",
            l.regret_ms_total,
            t.regret_ms_total
        );
        assert!(t.score.contains("outstanding"));
    }

    #[test]
    fn the_trace_changes_no_decision() {
        let on = run("replicas = 3\nrouter = \"weighted\"");
        let text = r#"
name = "trace"
seed = 7
[horizon]
requests = 400
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[engine]
max_batched_tokens = 8192
[workload]
arrival = { process = "poisson", rate = 30.0 }
prompt_tokens = { dist = "lognormal", mean = 1500, cv = 0.5, min = 64, max = 6000 }
output_tokens = { dist = "lognormal", mean = 120, cv = 0.5, min = 8, max = 400 }
[fleet]
replicas = 3
router = "weighted"
"#;
        let s = Scenario::from_toml_str(text, "trace.toml").unwrap();
        let off = Simulation::new(&s).run(|_| {}).unwrap();
        assert!(off.summary.routing.is_none() && off.routing_trace.is_none());
        let replicas = |r: &RunResult| r.requests.iter().map(|q| q.replica).collect::<Vec<_>>();
        assert_eq!(replicas(&on), replicas(&off));
        let mut a = on.summary.clone();
        a.routing = None;
        assert_eq!(a, off.summary);
    }

    #[test]
    fn rows_spill_and_come_back() {
        use crate::store::Spill;
        let row = super::CandidateRow {
            request: 9,
            time: crate::time::SimTime(123),
            replica: 4,
            score: f64::NAN,
            outstanding: 3,
            est_ttft_ns: 5_000_000_000_000,
            regret_ns: Some(7_000_000_000_000),
        };
        let mut b = Vec::new();
        row.put(&mut b);
        assert_eq!(b.len(), super::CandidateRow::BYTES);
        let back = super::CandidateRow::get(&b);
        assert!(back.score.is_nan());
        assert_eq!(back.regret_ns, row.regret_ns);
        assert_eq!(back.est_ttft_ns, row.est_ttft_ns);
    }
}
