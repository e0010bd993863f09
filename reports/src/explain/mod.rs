//! `servesim explain`: why the tail is slow, from a run's result folder.
//!
//! For TTFT, TPOT and E2E it takes the requests at or above each percentile
//! (p50, p90, p99, p99.9) and reports the mean of each latency component
//! there (the simulator's attribution, `sim::attribution`) and its mean
//! share of the request's latency; it lists the slowest requests with their
//! timelines and what their replica looked like meanwhile (queue, running
//! batch, KV use from `timeseries.csv`); it breaks the tail down by replica;
//! and it ranks hypotheses the numbers support, each carrying the figures it
//! was built from. Everything is read from the folder, so it works on any
//! past run that recorded the components.

pub mod load;
pub mod routing;
mod text;

pub use load::{Row, Sample};
pub use text::{render, render_request};

use serde::Serialize;
use sim::attribution::Component;
use std::collections::BTreeMap;
use std::path::Path;

/// Percentiles whose tails are analysed.
pub const BANDS: [(&str, f64); 4] = [
    ("p50", 0.50),
    ("p90", 0.90),
    ("p99", 0.99),
    ("p99.9", 0.999),
];
/// Slowest requests listed per metric.
pub const TAIL_REQUESTS: usize = 10;

/// A latency the analysis splits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    Ttft,
    Tpot,
    E2e,
}

impl Metric {
    pub const ALL: [Metric; 3] = [Metric::Ttft, Metric::Tpot, Metric::E2e];

    pub fn label(self) -> &'static str {
        match self {
            Metric::Ttft => "TTFT",
            Metric::Tpot => "TPOT",
            Metric::E2e => "E2E",
        }
    }

    /// Whether component `c` is part of this latency.
    pub fn has(self, c: Component) -> bool {
        match self {
            Metric::Ttft => c.before_first_token(),
            Metric::Tpot => !c.before_first_token(),
            Metric::E2e => true,
        }
    }

    /// The request's value (ns; TPOT per output token after the first) and
    /// the divisor that turns its components into the same unit.
    fn value(self, r: &Row) -> Option<(f64, f64)> {
        if !r.attributed() {
            return None;
        }
        match self {
            Metric::Ttft => r.ttft_ns.map(|t| (t as f64, 1.0)),
            Metric::E2e => r.e2e_ns.map(|t| (t as f64, 1.0)),
            Metric::Tpot => match (r.e2e_ns, r.ttft_ns) {
                (Some(e), Some(t)) if r.output_tokens > 1 => {
                    let n = (r.output_tokens - 1) as f64;
                    Some(((e - t) as f64 / n, n))
                }
                _ => None,
            },
        }
    }
}

/// One component's weight in a band.
#[derive(Clone, Debug, Serialize)]
pub struct Share {
    pub component: &'static str,
    /// Mean over the band's requests, ms (per token for TPOT).
    pub mean_ms: f64,
    /// Mean over the band's requests of component / latency.
    pub share: f64,
}

/// The requests at or above one percentile of a metric.
#[derive(Clone, Debug, Serialize)]
pub struct Band {
    pub label: String,
    pub quantile: f64,
    /// The percentile itself, ms.
    pub threshold_ms: f64,
    pub requests: usize,
    pub mean_ms: f64,
    /// Every component of the metric, in column order.
    pub components: Vec<Share>,
}

impl Band {
    /// The component with the largest mean share.
    pub fn top(&self) -> Option<&Share> {
        self.components
            .iter()
            .max_by(|a, b| a.share.total_cmp(&b.share))
    }

    pub fn share_of(&self, name: &str) -> f64 {
        self.components
            .iter()
            .find(|s| s.component == name)
            .map_or(0.0, |s| s.share)
    }
}

/// A metric's distribution and its bands.
#[derive(Clone, Debug, Serialize)]
pub struct MetricBands {
    pub metric: Metric,
    pub requests: usize,
    /// All requests with the metric, as a baseline band labelled "all".
    pub all: Band,
    pub bands: Vec<Band>,
}

/// A phase of a request's timeline.
#[derive(Clone, Debug, Serialize)]
pub struct Phase {
    pub phase: &'static str,
    pub start_s: f64,
    pub end_s: f64,
    /// Non-zero components in the phase, ms.
    pub components: Vec<(&'static str, f64)>,
}

/// What the request's replica looked like while it was in the system
/// (`timeseries.csv` samples).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReplicaContext {
    pub samples: usize,
    pub waiting_mean: f64,
    pub waiting_max: f64,
    pub running_mean: f64,
    pub running_max: f64,
    pub kv_util_mean: f64,
    pub kv_util_max: f64,
}

/// One request's story.
#[derive(Clone, Debug, Serialize)]
pub struct Timeline {
    pub id: u64,
    pub replica: Option<u32>,
    pub status: String,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    pub preemptions: u64,
    pub arrival_s: f64,
    pub ttft_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
    /// Queue (arrival → first admission), prefill (→ first token), decode
    /// (→ last token).
    pub phases: Vec<Phase>,
    pub context: ReplicaContext,
}

/// The tail of one replica.
#[derive(Clone, Debug, Serialize)]
pub struct ReplicaRow {
    pub replica: u32,
    pub requests: usize,
    pub ttft_p50_ms: f64,
    pub ttft_p99_ms: f64,
    pub e2e_p99_ms: f64,
    /// Requests of the fleet's p99 TTFT / E2E tails that ran here.
    pub ttft_tail: usize,
    pub e2e_tail: usize,
    pub preemptions: u64,
    pub kv_util_max: f64,
    pub waiting_mean: f64,
    /// Largest component of its p99-TTFT-tail requests (mean share).
    pub tail_top: Option<(&'static str, f64)>,
}

/// A ranked, evidenced statement.
#[derive(Clone, Debug, Serialize)]
pub struct Hypothesis {
    pub statement: String,
    /// A change to the scenario that tests the hypothesis: the key to edit
    /// and which way.
    pub try_change: String,
    /// Rank key: the share of the latency it explains (0..1).
    pub score: f64,
    /// The numbers the statement was built from.
    pub evidence: BTreeMap<String, f64>,
}

/// Everything `explain` reports.
#[derive(Clone, Debug, Serialize)]
pub struct Explanation {
    pub requests: usize,
    pub attributed: usize,
    pub metrics: Vec<MetricBands>,
    /// Slowest requests by TTFT, then by E2E.
    pub tail_ttft: Vec<Timeline>,
    pub tail_e2e: Vec<Timeline>,
    pub replicas: Vec<ReplicaRow>,
    pub hypotheses: Vec<Hypothesis>,
    /// What the router's picks cost (a run with `[metrics] routing_trace`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing: Option<routing::RoutingFinding>,
}

/// Points a sweep folder's error lists at most.
const POINTS_LISTED: usize = 8;

/// The run folder `explain` reads for `dir`, and a note saying so when it
/// is not `dir` itself: a run's folder as it is; a sweep's folder by the
/// run of its operating point, the one run a sweep keeps
/// (`operating-point/`). A sweep with no operating point, or a capacity
/// search, keeps no run: the error lists the points and how to run one.
pub fn run_dir(dir: &Path) -> Result<(std::path::PathBuf, Option<String>), String> {
    if dir.join("requests.csv").exists() {
        return Ok((dir.to_path_buf(), None));
    }
    let sweep = dir.join("sweep.json");
    if sweep.exists() {
        let op = dir.join(crate::OPERATING_POINT_DIR);
        let results = sim::sweep::results::SweepResults::read(&sweep).map_err(|e| e.to_string())?;
        let point = |i: usize| -> String {
            match results.points.iter().find(|p| p.index == i) {
                Some(p) => results
                    .axes
                    .iter()
                    .zip(&p.values)
                    .map(|(k, v)| format!("{k} = {v}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                None => String::new(),
            }
        };
        let best = sim::input_file::read_result(&dir.join("operating-point.json"), "result file")
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["best"].as_u64())
            .map(|i| i as usize);
        if op.join("requests.csv").exists() {
            let which = best
                .map(|i| format!(" (point {i}: {})", point(i)))
                .unwrap_or_default();
            return Ok((
                op.clone(),
                Some(format!(
                    "{} is a sweep's folder: explaining its operating point's run, {}{which}",
                    dir.display(),
                    op.display()
                )),
            ));
        }
        let mut listed: Vec<String> = results
            .points
            .iter()
            .take(POINTS_LISTED)
            .map(|p| format!("  point {}: {}", p.index, point(p.index)))
            .collect();
        if results.points.len() > POINTS_LISTED {
            listed.push(format!(
                "  … {} more in {}",
                results.points.len() - POINTS_LISTED,
                dir.join("sweep.csv").display()
            ));
        }
        return Err(format!(
            "{}: a sweep's folder keeps the run of its operating point only (in {}/), and this sweep chose none, so there is no run to explain here. To explain a point, set its keys in the scenario ({}), run `servesim simulate SCENARIO --out DIR` and `servesim explain DIR`. The points:\n{}",
            dir.display(),
            crate::OPERATING_POINT_DIR,
            results.scenario_path,
            listed.join("\n")
        ));
    }
    if dir.join("capacity.json").exists() {
        return Err(format!(
            "{}: a capacity search's folder keeps no run (its probes are summarised in capacity.json); to explain a probe, set its fleet.replicas and workload.arrival.rate in the scenario, run `servesim simulate SCENARIO --out DIR` and `servesim explain DIR`",
            dir.display()
        ));
    }
    Err(format!(
        "{}: no requests.csv here (explain reads the output folder of `servesim simulate`, or a sweep's folder with its operating point)",
        dir.display()
    ))
}

/// A result folder, loaded.
pub struct Run {
    pub rows: Vec<Row>,
    pub samples: Vec<Vec<Sample>>,
    /// Per request, its routing regret (`routing.csv`, traced runs only).
    pub routing: Option<routing::Regrets>,
}

impl Run {
    /// Reads `requests.csv` (and `timeseries.csv` when present) from `dir`
    /// (a run's folder; see [`run_dir`] for the folders it stands for).
    pub fn load(dir: &Path) -> Result<Run, String> {
        let req = dir.join("requests.csv");
        if !req.exists() {
            return Err(run_dir(dir)
                .err()
                .unwrap_or_else(|| format!("{}: no requests.csv here", dir.display())));
        }
        for name in ["requests.csv", "timeseries.csv"] {
            crate::data::check_belongs(dir, name)?;
        }
        let rows = load::requests(&req)?;
        let ts = dir.join("timeseries.csv");
        let samples = if ts.exists() {
            load::samples(&ts)?
        } else {
            Vec::new()
        };
        let routing = routing::load(dir)?;
        Ok(Run {
            rows,
            samples,
            routing,
        })
    }

    fn row(&self, id: u64) -> Option<&Row> {
        // Rows are loaded in id order; fall back to a search where ids have
        // gaps (a file with rows left out).
        match self.rows.get(id as usize) {
            Some(r) if r.id == id => Some(r),
            _ => self.rows.iter().find(|r| r.id == id),
        }
    }
}

/// Type-7 quantile of sorted values.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// (request index, value ns, divisor) of a metric, sorted by value.
fn ranked(run: &Run, m: Metric) -> Vec<(usize, f64, f64)> {
    let mut v: Vec<(usize, f64, f64)> = run
        .rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| m.value(r).map(|(x, d)| (i, x, d)))
        .collect();
    v.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    v
}

fn band(
    run: &Run,
    m: Metric,
    members: &[(usize, f64, f64)],
    label: &str,
    q: f64,
    thr: f64,
) -> Band {
    let n = members.len().max(1) as f64;
    let components = Component::ALL
        .iter()
        .filter(|c| m.has(**c))
        .map(|&c| {
            let (mut sum, mut share) = (0.0, 0.0);
            for &(i, x, d) in members {
                let v = run.rows[i].get(c) as f64 / d;
                sum += v;
                if x > 0.0 {
                    share += v / x;
                }
            }
            Share {
                component: c.name(),
                mean_ms: sum / n / 1e6,
                share: share / n,
            }
        })
        .collect();
    Band {
        label: label.to_string(),
        quantile: q,
        threshold_ms: thr / 1e6,
        requests: members.len(),
        mean_ms: members.iter().map(|m| m.1).sum::<f64>() / n / 1e6,
        components,
    }
}

/// The bands of one metric.
pub fn bands(run: &Run, m: Metric) -> Option<MetricBands> {
    let v = ranked(run, m);
    if v.is_empty() {
        return None;
    }
    let values: Vec<f64> = v.iter().map(|x| x.1).collect();
    let all = band(run, m, &v, "all", 0.0, values[0]);
    let bands = BANDS
        .iter()
        .map(|&(label, q)| {
            let thr = quantile(&values, q);
            // At or above the percentile: at least the slowest request.
            let from = values.partition_point(|&x| x < thr).min(v.len() - 1);
            band(run, m, &v[from..], label, q, thr)
        })
        .collect();
    Some(MetricBands {
        metric: m,
        requests: v.len(),
        all,
        bands,
    })
}

/// The replica's samples within `[from_s, to_s]` (the nearest one when none).
fn context(run: &Run, replica: Option<u32>, from_s: f64, to_s: f64) -> ReplicaContext {
    let Some(s) = replica.and_then(|r| run.samples.get(r as usize)) else {
        return ReplicaContext::default();
    };
    let mut inside: Vec<&Sample> = s
        .iter()
        .filter(|x| x.time_s >= from_s && x.time_s <= to_s)
        .collect();
    if inside.is_empty() {
        // The last sample before the request arrived describes its replica.
        if let Some(x) = s.iter().rev().find(|x| x.time_s <= from_s).or(s.first()) {
            inside.push(x);
        }
    }
    let n = inside.len().max(1) as f64;
    let mean = |f: fn(&Sample) -> f64| inside.iter().map(|x| f(x)).sum::<f64>() / n;
    let max = |f: fn(&Sample) -> f64| inside.iter().map(|x| f(x)).fold(0.0, f64::max);
    ReplicaContext {
        samples: inside.len(),
        waiting_mean: mean(|x| x.waiting),
        waiting_max: max(|x| x.waiting),
        running_mean: mean(|x| x.running),
        running_max: max(|x| x.running),
        kv_util_mean: mean(|x| x.kv_util),
        kv_util_max: max(|x| x.kv_util),
    }
}

/// The timeline of request `r`.
pub fn timeline(run: &Run, r: &Row) -> Timeline {
    let s = |ns: u64| ns as f64 / 1e9;
    let arrival = r.arrival_ns;
    let queue: u64 = Component::ALL
        .iter()
        .filter(|c| c.is_queue())
        .map(|&c| r.get(c))
        .sum();
    let admitted = arrival + r.queue_wait_ns.unwrap_or(queue);
    let first = r.ttft_ns.map(|t| arrival + t);
    let end = r.e2e_ns.map(|t| arrival + t);
    let comps = |pick: &dyn Fn(Component) -> bool| -> Vec<(&'static str, f64)> {
        Component::ALL
            .iter()
            .filter(|&&c| pick(c) && r.get(c) > 0)
            .map(|&c| (c.name(), r.get(c) as f64 / 1e6))
            .collect()
    };
    let mut phases = Vec::new();
    if r.attributed() {
        phases.push(Phase {
            phase: "queue",
            start_s: s(arrival),
            end_s: s(admitted),
            components: comps(&|c| c.is_queue()),
        });
        if let Some(f) = first {
            phases.push(Phase {
                phase: "prefill",
                start_s: s(admitted),
                end_s: s(f),
                components: comps(&|c| c.before_first_token() && !c.is_queue()),
            });
            if let Some(e) = end {
                phases.push(Phase {
                    phase: "decode",
                    start_s: s(f),
                    end_s: s(e),
                    components: comps(&|c| !c.before_first_token()),
                });
            }
        }
    }
    let until = end.or(first).unwrap_or(admitted);
    Timeline {
        id: r.id,
        replica: r.replica,
        status: r.status.clone(),
        prompt_tokens: r.prompt_tokens,
        output_tokens: r.output_tokens,
        preemptions: r.preemptions,
        arrival_s: s(arrival),
        ttft_ms: r.ttft_ns.map(|t| t as f64 / 1e6),
        e2e_ms: r.e2e_ns.map(|t| t as f64 / 1e6),
        phases,
        context: context(run, r.replica, s(arrival), s(until)),
    }
}

/// The timeline of request `id`, if the run has it.
pub fn request(run: &Run, id: u64) -> Option<Timeline> {
    run.row(id).map(|r| timeline(run, r))
}

/// Indices of the fleet's p99 tail of a metric.
fn tail(run: &Run, m: Metric, q: f64) -> Vec<usize> {
    let v = ranked(run, m);
    if v.is_empty() {
        return Vec::new();
    }
    let values: Vec<f64> = v.iter().map(|x| x.1).collect();
    let thr = quantile(&values, q);
    let from = values.partition_point(|&x| x < thr).min(v.len() - 1);
    v[from..].iter().map(|x| x.0).collect()
}

fn replicas(run: &Run) -> Vec<ReplicaRow> {
    let n = run
        .rows
        .iter()
        .filter_map(|r| r.replica)
        .max()
        .map_or(0, |m| m as usize + 1);
    let ttft_tail = tail(run, Metric::Ttft, 0.99);
    let e2e_tail = tail(run, Metric::E2e, 0.99);
    (0..n)
        .map(|rep| {
            let mine: Vec<&Row> = run
                .rows
                .iter()
                .filter(|r| r.replica == Some(rep as u32))
                .collect();
            let sorted = |f: fn(&Row) -> Option<u64>| {
                let mut v: Vec<f64> = mine
                    .iter()
                    .filter_map(|r| f(r))
                    .map(|x| x as f64 / 1e6)
                    .collect();
                v.sort_by(f64::total_cmp);
                v
            };
            let ttft = sorted(|r| r.ttft_ns);
            let e2e = sorted(|r| r.e2e_ns);
            let on = |i: &usize| run.rows[*i].replica == Some(rep as u32);
            let tail_here: Vec<usize> = ttft_tail.iter().copied().filter(|i| on(i)).collect();
            let tail_top = (!tail_here.is_empty())
                .then(|| {
                    let members: Vec<(usize, f64, f64)> = tail_here
                        .iter()
                        .filter_map(|&i| Metric::Ttft.value(&run.rows[i]).map(|(x, d)| (i, x, d)))
                        .collect();
                    let b = band(run, Metric::Ttft, &members, "", 0.99, 0.0);
                    b.top().map(|t| (t.component, t.share))
                })
                .flatten();
            let s = run.samples.get(rep).map(Vec::as_slice).unwrap_or(&[]);
            ReplicaRow {
                replica: rep as u32,
                requests: mine.len(),
                ttft_p50_ms: quantile(&ttft, 0.5),
                ttft_p99_ms: quantile(&ttft, 0.99),
                e2e_p99_ms: quantile(&e2e, 0.99),
                ttft_tail: tail_here.len(),
                e2e_tail: e2e_tail.iter().filter(|i| on(i)).count(),
                preemptions: mine.iter().map(|r| r.preemptions).sum(),
                kv_util_max: s.iter().map(|x| x.kv_util).fold(0.0, f64::max),
                waiting_mean: s.iter().map(|x| x.waiting).sum::<f64>() / s.len().max(1) as f64,
                tail_top,
            }
        })
        .collect()
}

/// Plain words for a component, for statements.
pub fn describe(name: &str) -> &'static str {
    match name {
        "queue_kv" => "queueing behind KV-cache exhaustion",
        "queue_token_budget" => "queueing behind a full token budget",
        "queue_max_seqs" => "queueing for a sequence slot (max_num_seqs)",
        "queue_policy" => "queueing while the batch policy admitted no one",
        "queue_iteration" => "waiting for the running iteration to end",
        "queue_fairness" => "held back by the fairness policy",
        "queue_rate_limit" => "held back by a rate limit",
        "cold_start" => "waiting for a replica to start",
        "prefill_compute" => "its own prefill compute",
        "prefill_interference" => "prefill sharing iterations with other work",
        "prefill_preempted" => "preemption before the first token",
        "kv_transfer" => "KV transfer",
        "decode_compute" => "decode compute",
        "decode_stall" => "decode stalls behind other requests' prefills",
        "decode_preempted" => "preemption during decode",
        _ => "other",
    }
}

mod hypotheses;

/// Analyses a loaded run.
pub fn analyze(run: &Run) -> Explanation {
    let metrics: Vec<MetricBands> = Metric::ALL.iter().filter_map(|&m| bands(run, m)).collect();
    let slowest = |m: Metric| -> Vec<Timeline> {
        ranked(run, m)
            .iter()
            .rev()
            .take(TAIL_REQUESTS)
            .map(|&(i, _, _)| timeline(run, &run.rows[i]))
            .collect()
    };
    let replicas = replicas(run);
    let mut hypotheses = hypotheses::rank(run, &metrics, &replicas);
    let routing = run.routing.as_ref().map(|g| routing::analyze(&run.rows, g));
    if let Some(f) = routing.as_ref().filter(|f| f.tail_regret_ms > 0.0) {
        // Ranked by the share of the tail's TTFT the picks lost.
        hypotheses.push(Hypothesis {
            statement: f.statement.clone(),
            try_change: "lower fleet.report_interval_s (a stale view herds), or set fleet.router = \"power-of-two\" (its candidates differ per request) or a prefix router's load bound".into(),
            // The regret is an estimate that can pass the measured TTFT.
            score: f.tail_regret_share.min(1.0),
            evidence: [
                ("routing_regret_ms_tail".to_string(), f.tail_regret_ms),
                ("routing_regret_ms_total".to_string(), f.regret_ms_total),
                ("routing_regret_share_tail".to_string(), f.tail_regret_share),
            ]
            .into_iter()
            .collect(),
        });
        hypotheses.sort_by(|a, b| b.score.total_cmp(&a.score));
    }
    Explanation {
        requests: run.rows.len(),
        attributed: run.rows.iter().filter(|r| r.attributed()).count(),
        tail_ttft: slowest(Metric::Ttft),
        tail_e2e: slowest(Metric::E2e),
        metrics,
        replicas,
        hypotheses,
        routing,
    }
}

/// Loads and analyses the run in `dir`; an error when it recorded no
/// latency components.
pub fn explain(dir: &Path) -> Result<Explanation, String> {
    let run = Run::load(dir)?;
    let e = analyze(&run);
    if e.attributed == 0 && !run.rows.is_empty() {
        return Err(format!(
            "{}: this folder has no latency attribution: requests.csv has no attr_* columns (the run had `[metrics] attribution = false`, or was not a `servesim simulate` run); rerun it with attribution on",
            dir.join("requests.csv").display()
        ));
    }
    Ok(e)
}
