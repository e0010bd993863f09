//! What the router's choices cost, from a traced run's `routing.csv`
//! (`[metrics] routing_trace`): each decision's regret — the estimated TTFT
//! of the pick less that of the fastest candidate — joined to the requests,
//! so the regret in the TTFT tail can be told apart from the rest, and laid
//! on the replicas the router overloaded.
//!
//! The file is read row by row; what is kept is one regret and two
//! replicas per request.

use super::load::Row;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

/// Each request's routing regret, from `routing.csv`.
#[derive(Clone, Debug, Default)]
pub struct Regrets {
    /// Request id → (regret ns summed over its decisions, the replica of its
    /// last pick, the fastest candidate of that decision).
    pub by_request: BTreeMap<u64, (u64, u32, u32)>,
    pub decisions: u64,
    /// What the router's score meant and the router's name
    /// (`summary.json`), when there.
    pub score: Option<String>,
    pub router: Option<String>,
}

/// The routing finding `explain` reports.
#[derive(Clone, Debug, Serialize)]
pub struct RoutingFinding {
    pub router: String,
    pub decisions: u64,
    pub regret_ms_total: f64,
    pub regret_ms_mean: f64,
    /// The fleet's TTFT p99, ms, and the requests at or above it.
    pub ttft_p99_ms: f64,
    pub tail_requests: usize,
    /// Regret summed over those requests, ms, and its ratio to their
    /// measured TTFT (the regret is an estimate: queued prompts count at
    /// full length, so on prefix-heavy workloads it can pass 1).
    pub tail_regret_ms: f64,
    pub tail_regret_share: f64,
    /// The replica whose picks carry most of the tail's regret, its part
    /// (ms), and the candidate most often faster for them.
    pub worst_replica: Option<u32>,
    pub worst_replica_regret_ms: f64,
    pub faster_replica: Option<u32>,
    pub statement: String,
}

fn field<'a>(cols: &[&'a str], i: usize, path: &Path, line: usize) -> Result<&'a str, String> {
    cols.get(i)
        .copied()
        .ok_or_else(|| format!("{}:{line}: too few columns", path.display()))
}

/// Reads `dir/routing.csv`; `None` when the run was not traced.
pub fn load(dir: &Path) -> Result<Option<Regrets>, String> {
    let path = dir.join("routing.csv");
    if !path.exists() {
        return Ok(None);
    }
    sim::input_file::check_file_type(&path, "result file").map_err(|e| e.to_string())?;
    let file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = std::io::BufReader::new(file).lines();
    let header = lines
        .next()
        .transpose()
        .map_err(|e| format!("{}: {e}", path.display()))?
        .unwrap_or_default();
    if header != sim::cluster::routing_trace::COLUMNS.join(",") {
        return Err(format!(
            "{}: not a routing trace (its header is {header:?}, expected {:?})",
            path.display(),
            sim::cluster::routing_trace::COLUMNS.join(",")
        ));
    }
    let mut out = Regrets::default();
    // The decision being read: its key (request, time), its fastest
    // candidate (estimate, replica) and its pick (replica, regret).
    let mut key: Option<(String, String)> = None;
    let mut fastest = (f64::INFINITY, 0u32);
    let mut pick: Option<(u32, u64)> = None;
    let finish = |key: &Option<(String, String)>,
                  fastest: (f64, u32),
                  pick: Option<(u32, u64)>,
                  out: &mut Regrets|
     -> Result<(), String> {
        let Some((req, _)) = key else {
            return Ok(());
        };
        let (replica, regret) = pick.ok_or_else(|| {
            format!(
                "{}: request {req}: a decision without a pick",
                path.display()
            )
        })?;
        let id: u64 = req
            .parse()
            .map_err(|_| format!("{}: request {req:?} is not an id", path.display()))?;
        let e = out.by_request.entry(id).or_insert((0, replica, fastest.1));
        e.0 += regret;
        e.1 = replica;
        e.2 = fastest.1;
        out.decisions += 1;
        Ok(())
    };
    for (k, line) in lines.enumerate() {
        let n = k + 2;
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        let cols: Vec<&str> = line.split(',').collect();
        let this = (
            field(&cols, 0, &path, n)?.to_string(),
            field(&cols, 1, &path, n)?.to_string(),
        );
        if key.as_ref() != Some(&this) {
            finish(&key, fastest, pick, &mut out)?;
            key = Some(this);
            fastest = (f64::INFINITY, 0);
            pick = None;
        }
        let num = |i: usize| -> Result<f64, String> {
            field(&cols, i, &path, n)?.parse::<f64>().map_err(|_| {
                format!(
                    "{}:{n}: column {} is not a number",
                    path.display(),
                    sim::cluster::routing_trace::COLUMNS[i]
                )
            })
        };
        let replica = num(2)? as u32;
        let est = num(5)?;
        if est < fastest.0 {
            fastest = (est, replica);
        }
        if field(&cols, 6, &path, n)? == "1" {
            pick = Some((replica, (num(7)? * 1e6).round() as u64));
        }
    }
    finish(&key, fastest, pick, &mut out)?;
    let summary = dir.join("summary.json");
    if summary.exists() {
        let s = crate::data::read_json(&summary)?;
        out.router = s.get("router").and_then(|v| v.as_str()).map(String::from);
        out.score = s
            .pointer("/routing/score")
            .and_then(|v| v.as_str())
            .map(String::from);
    }
    Ok(Some(out))
}

/// Milliseconds in words: "1.8 s", "240 ms".
fn duration(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else {
        format!("{ms:.0} ms")
    }
}

/// The finding: how much TTFT the router's picks lost, overall and in the
/// p99 tail, and on which replica.
pub fn analyze(rows: &[Row], g: &Regrets) -> RoutingFinding {
    let total: u64 = g.by_request.values().map(|v| v.0).sum();
    let mut ttfts: Vec<(u64, u64)> = rows
        .iter()
        .filter_map(|r| Some((r.ttft_ns?, r.id)))
        .collect();
    ttfts.sort_unstable();
    let p99 = if ttfts.is_empty() {
        0
    } else {
        let k = ((ttfts.len() as f64 * 0.99).ceil() as usize).clamp(1, ttfts.len()) - 1;
        ttfts[k].0
    };
    let tail: Vec<(u64, u64)> = ttfts.iter().copied().filter(|t| t.0 >= p99).collect();
    let mut tail_regret = 0u64;
    let mut tail_ttft = 0u64;
    let mut by_replica: BTreeMap<u32, (u64, BTreeMap<u32, u64>)> = BTreeMap::new();
    for &(t, id) in &tail {
        tail_ttft += t;
        if let Some(&(regret, picked, fastest)) = g.by_request.get(&id) {
            tail_regret += regret;
            if regret > 0 {
                let e = by_replica.entry(picked).or_default();
                e.0 += regret;
                *e.1.entry(fastest).or_default() += 1;
            }
        }
    }
    let worst = by_replica
        .iter()
        .max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.0.cmp(a.0)))
        .map(|(&r, (ns, alts))| {
            let faster = alts
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                .map(|(&k, _)| k);
            (r, *ns, faster)
        });
    let ms = |ns: u64| ns as f64 / 1e6;
    let router = g.router.clone().unwrap_or_else(|| "the router".into());
    let share = if tail_ttft > 0 {
        tail_regret as f64 / tail_ttft as f64
    } else {
        0.0
    };
    let statement = if total == 0 {
        format!(
            "{router} picked the fastest candidate by the cost model's estimate in every one of its {} decisions: no TTFT lost to routing.",
            g.decisions
        )
    } else {
        let mut s = format!(
            "{router} lost an estimated {} of TTFT over the p99 tail ({} requests at or above {:.1} ms) and {} in all ({} decisions, mean {:.2} ms) to picks slower than the fastest candidate",
            duration(ms(tail_regret)),
            tail.len(),
            ms(p99),
            duration(ms(total)),
            g.decisions,
            ms(total) / g.decisions.max(1) as f64
        );
        if let Some((r, ns, faster)) = worst {
            let _ = std::fmt::Write::write_fmt(
                &mut s,
                format_args!(
                    "; in the tail most of it to load imbalance on replica {r} ({}{})",
                    duration(ms(ns)),
                    faster
                        .map(|k| format!(", where replica {k} was most often the faster choice"))
                        .unwrap_or_default()
                ),
            );
        }
        s.push('.');
        s
    };
    RoutingFinding {
        router,
        decisions: g.decisions,
        regret_ms_total: ms(total),
        regret_ms_mean: ms(total) / g.decisions.max(1) as f64,
        ttft_p99_ms: ms(p99),
        tail_requests: tail.len(),
        tail_regret_ms: ms(tail_regret),
        tail_regret_share: share,
        worst_replica: worst.map(|w| w.0),
        worst_replica_regret_ms: worst.map_or(0.0, |w| ms(w.1)),
        faster_replica: worst.and_then(|w| w.2),
        statement,
    }
}
