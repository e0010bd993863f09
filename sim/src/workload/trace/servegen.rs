//! ServeGen (Xiang et al., "ServeGen: Workload Characterization of Large
//! Language Model Serving in Production", arXiv 2505.09999;
//! alibaba/ServeGen): per-client descriptors of Alibaba Cloud Model Studio
//! (Bailian) traffic, turned into a multi-tenant request stream with one
//! tenant per client.
//!
//! The `path` is a folder of `chunk-N-trace.csv` files (no header:
//! `window_start, rate, cv, pattern, shape, scale` per 600 s window; an
//! empty pattern with rate 0 is an idle window) and optional
//! `chunk-N-dataset.json` files (`{"<window_start>": {"input_tokens":
//! "{value: prob, ...}", "output_tokens": "..."}}`, one PMF per 6 h window,
//! `"{}"` when there is no data).
//!
//! Like ServeGen's `generate_workload`, each client's arrivals in a window
//! are a renewal process from the window start with the fitted `pattern`
//! (scipy's `gamma(a=shape)` or `weibull_min(c=shape)`), rescaled so the
//! window's mean rate is `rate` (ServeGen instead draws ⌈rate·600⌉ gaps and
//! stretches them to fill the window; the mean count is the same). Lengths
//! come from the client's PMF of the 6 h window (the nearest window with
//! data when that one has none). Unlike ServeGen, which reuses one uniform
//! draw for every field (making input and output perfectly rank-correlated),
//! prompt and output are drawn independently. `reason_ratio` is not used:
//! output tokens already include the reasoning.

use super::csv_rows::CsvRows;
use crate::rng::{self, StreamRng};
use crate::scenario::TraceCfg;
use crate::time::{secs_to_nanos, SimTime};
use crate::workload::{
    Context, LengthSampler, RequestSource, RequestSpec, TraceReport, WorkloadError, WorkloadReport,
};
use rand_distr::weighted::WeightedAliasIndex;
use rand_distr::{Distribution, Gamma, Weibull};
use serde::Serialize;
use statrs::function::gamma::ln_gamma;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::path::{Path, PathBuf};

/// Length of a ServeGen rate window, seconds.
pub const WINDOW_S: f64 = 600.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pattern {
    Gamma,
    Weibull,
}

/// One row of a client's trace CSV.
#[derive(Clone, Debug)]
struct Window {
    start: f64,
    rate: f64,
    cv: f64,
    pattern: Option<Pattern>,
    shape: f64,
}

/// A token-length PMF, sampled by the alias method.
struct Pmf {
    values: Vec<u32>,
    alias: WeightedAliasIndex<f64>,
}

impl Pmf {
    fn sample(&self, rng: &mut StreamRng) -> u32 {
        self.values[self.alias.sample(rng)]
    }
}

/// Parses a Python dict literal `{163: 0.25, 9: 1e-3}` into (value, weight)
/// pairs; `None` when it is not one. `{}` gives no pairs.
fn parse_pmf(s: &str) -> Option<Vec<(f64, f64)>> {
    let s = s.trim().strip_prefix('{')?.strip_suffix('}')?.trim();
    if s.is_empty() {
        return Some(Vec::new());
    }
    s.split(',')
        .map(|kv| {
            let (k, v) = kv.split_once(':')?;
            let (k, v): (f64, f64) = (k.trim().parse().ok()?, v.trim().parse().ok()?);
            (k.is_finite() && k >= 0.0 && v.is_finite() && v >= 0.0).then_some((k, v))
        })
        .collect()
}

/// A client's length PMFs by 6 h window (raw text until first used).
struct Dataset {
    file: String,
    /// (window start, input PMF text, output PMF text), by start.
    windows: Vec<(f64, String, String)>,
    /// For each window, the window whose PMFs it uses (itself when it has
    /// data, else the nearest earlier one with data, else the nearest later).
    effective: Vec<usize>,
    cache: Option<(usize, Pmf, Pmf)>,
}

impl Dataset {
    fn read(path: &Path) -> Result<Option<Dataset>, WorkloadError> {
        let file = path.display().to_string();
        let bad = |m: String| WorkloadError::Data {
            file: file.clone(),
            line: None,
            message: m,
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read: {e}")))?;
        let raw: BTreeMap<String, BTreeMap<String, String>> =
            serde_json::from_str(&text).map_err(|e| bad(format!("not a ServeGen dataset: {e}")))?;
        let mut windows = Vec::new();
        for (k, fields) in raw {
            let start: f64 = k
                .trim()
                .parse()
                .map_err(|_| bad(format!("window key {k:?} is not a time in seconds")))?;
            let get = |f: &str| fields.get(f).cloned().unwrap_or_else(|| "{}".into());
            windows.push((start, get("input_tokens"), get("output_tokens")));
        }
        windows.sort_by(|a, b| a.0.total_cmp(&b.0));
        let has = |w: &(f64, String, String)| {
            let nonempty = |s: &str| {
                s.trim()
                    .trim_start_matches('{')
                    .trim_end_matches('}')
                    .trim()
                    != ""
            };
            nonempty(&w.1) && nonempty(&w.2)
        };
        let with_data: Vec<usize> = (0..windows.len()).filter(|&i| has(&windows[i])).collect();
        if with_data.is_empty() {
            return Ok(None);
        }
        let effective = (0..windows.len())
            .map(|i| {
                with_data
                    .iter()
                    .rev()
                    .find(|&&j| j <= i)
                    .or_else(|| with_data.iter().find(|&&j| j > i))
                    .copied()
                    .unwrap_or(i)
            })
            .collect();
        Ok(Some(Dataset {
            file,
            windows,
            effective,
            cache: None,
        }))
    }

    /// The (input, output) PMFs for time `t`.
    fn pmfs(&mut self, t: f64) -> Result<(&Pmf, &Pmf), WorkloadError> {
        let at = self.windows.partition_point(|w| w.0 <= t).saturating_sub(1);
        let i = self.effective[at];
        if self.cache.as_ref().is_none_or(|c| c.0 != i) {
            let (start, inp, out) = &self.windows[i];
            let mk = |text: &str, field: &str| -> Result<Pmf, WorkloadError> {
                let bad = |m: &str| WorkloadError::Data {
                    file: self.file.clone(),
                    line: None,
                    message: format!("window {start}: {field}: {m}"),
                };
                let pairs =
                    parse_pmf(text).ok_or_else(|| bad("not a PMF like {163: 0.25, ...}"))?;
                let (values, weights): (Vec<u32>, Vec<f64>) = pairs
                    .iter()
                    .map(|&(v, w)| (v.min(u32::MAX as f64) as u32, w))
                    .unzip();
                let alias = WeightedAliasIndex::new(weights)
                    .map_err(|e| bad(&format!("bad weights: {e}")))?;
                Ok(Pmf { values, alias })
            };
            self.cache = Some((i, mk(inp, "input_tokens")?, mk(out, "output_tokens")?));
        }
        let c = self.cache.as_ref().expect("just filled");
        Ok((&c.1, &c.2))
    }
}

/// How a client's request lengths are drawn.
enum ClientLengths {
    Pmfs(Box<Dataset>),
    Fallback,
}

/// One client: its active windows and where its arrivals are.
struct Client {
    windows: Vec<Window>,
    wi: usize,
    /// Current time, descriptor seconds, and the gap law of window `wi`.
    t: f64,
    gaps: Option<Gaps>,
    lengths: ClientLengths,
    arrivals: StreamRng,
    prompt: StreamRng,
    output: StreamRng,
}

enum Gaps {
    Gamma(Gamma<f64>),
    Weibull(Weibull<f64>),
}

impl Gaps {
    /// The window's gap law with mean 1/rate: scipy's gamma(a=k) has mean
    /// k·scale, weibull_min(c=k) has mean scale·Γ(1 + 1/k).
    fn new(p: Pattern, shape: f64, rate: f64) -> Option<Gaps> {
        Some(match p {
            Pattern::Gamma => Gaps::Gamma(Gamma::new(shape, 1.0 / (rate * shape)).ok()?),
            Pattern::Weibull => Gaps::Weibull(
                Weibull::new(1.0 / (rate * ln_gamma(1.0 + 1.0 / shape).exp()), shape).ok()?,
            ),
        })
    }

    fn sample(&self, rng: &mut StreamRng) -> f64 {
        match self {
            Gaps::Gamma(d) => d.sample(rng),
            Gaps::Weibull(d) => d.sample(rng),
        }
    }
}

impl Client {
    /// The client's next arrival before `end` (descriptor seconds), with
    /// rates multiplied by `factor`.
    fn next_time(&mut self, factor: f64, from: f64, end: f64) -> Option<f64> {
        loop {
            let w = self.windows.get(self.wi)?;
            let w_end = (w.start + WINDOW_S).min(end);
            if w.start >= end {
                return None;
            }
            if self.gaps.is_none() {
                let p = w.pattern.expect("active windows have a pattern");
                self.gaps = Some(Gaps::new(p, w.shape, w.rate * factor).expect("validated shape"));
                self.t = w.start.max(from);
            }
            self.t += self.gaps.as_ref().expect("set").sample(&mut self.arrivals);
            if self.t < w_end {
                return Some(self.t);
            }
            self.wi += 1;
            self.gaps = None;
        }
    }
}

/// The multi-tenant stream of a ServeGen folder (a [`RequestSource`]).
pub struct ServeGen {
    clients: Vec<Client>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    next_t: Vec<f64>,
    fallback: Option<(LengthSampler, LengthSampler)>,
    factor: f64,
    from: f64,
    end: f64,
    scale: f64,
    max: u64,
    report: TraceReport,
    error: Option<WorkloadError>,
}

/// The chunk files of a ServeGen folder, by client number.
fn chunk_files(dir: &Path, key: &str, ctx: &Context) -> Result<Vec<(u64, PathBuf)>, WorkloadError> {
    let rd = std::fs::read_dir(dir).map_err(|e| {
        ctx.config_error(
            &format!("{key}.path"),
            format!("cannot read folder {}: {e}", dir.display()),
        )
    })?;
    let mut v = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(n) = name
            .strip_prefix("chunk-")
            .and_then(|r| r.strip_suffix("-trace.csv"))
        {
            if let Ok(n) = n.parse::<u64>() {
                v.push((n, e.path()));
            }
        }
    }
    v.sort();
    if v.is_empty() {
        return Err(ctx.config_error(
            &format!("{key}.path"),
            format!("no ServeGen chunk-N-trace.csv files in {}", dir.display()),
        ));
    }
    Ok(v)
}

/// Reads a client's windows; malformed rows are errors, or skipped and
/// counted when `lenient`.
fn read_windows(
    path: &Path,
    key: &str,
    ctx: &Context,
    lenient: bool,
    report: &mut TraceReport,
) -> Result<Vec<Window>, WorkloadError> {
    let mut csv = CsvRows::open(path, key, ctx, false)?;
    let mut out: Vec<Window> = Vec::new();
    loop {
        let r = (|| -> Result<Option<Window>, super::RowError> {
            if !csv.next()? {
                return Ok(None);
            }
            let line = csv.line();
            let num = |i: usize, name: &str| -> Result<f64, super::RowError> {
                let f = csv.get(i, name)?;
                std::str::from_utf8(f)
                    .ok()
                    .and_then(|s| s.trim().parse::<f64>().ok())
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| super::RowError::field(line, name, "a number ≥ 0", f))
            };
            let start = num(0, "window_start")?;
            let rate = num(1, "rate")?;
            let cv = num(2, "cv")?;
            let pat = csv.get(3, "pattern")?.trim_ascii();
            let pattern = match pat {
                b"Gamma" => Some(Pattern::Gamma),
                b"Weibull" => Some(Pattern::Weibull),
                b"" => None,
                other => {
                    return Err(super::RowError::field(
                        line,
                        "pattern",
                        "Gamma, Weibull or empty",
                        other,
                    ))
                }
            };
            let shape = num(4, "shape")?;
            num(5, "scale")?;
            if rate > 0.0 && (pattern.is_none() || shape <= 0.0) {
                return Err(super::RowError::new(
                    line,
                    format!("rate {rate} > 0 needs a Gamma or Weibull pattern with shape > 0"),
                ));
            }
            if let Some(prev) = out.last() {
                if start < prev.start + WINDOW_S {
                    return Err(super::RowError::new(
                        line,
                        format!("window_start {start} is not after the previous window ({} + {WINDOW_S} s)", prev.start),
                    ));
                }
            }
            Ok(Some(Window {
                start,
                rate,
                cv,
                pattern,
                shape,
            }))
        })();
        match r {
            Ok(None) => break,
            Ok(Some(w)) => {
                report.rows += 1;
                out.push(w);
            }
            Err(e) if lenient && !e.fatal => {
                report.skipped_lines += 1;
                if report.first_skipped.is_none() {
                    report.first_skipped =
                        Some(format!("{}: line {}: {}", csv.file(), e.line, e.message));
                }
            }
            Err(e) => {
                return Err(WorkloadError::Data {
                    file: csv.file().to_string(),
                    line: Some(e.line),
                    message: e.message,
                })
            }
        }
    }
    Ok(out)
}

impl ServeGen {
    /// Opens a ServeGen folder. `fallback` lengths serve clients without
    /// length PMFs; without it such a client is an error.
    pub fn open(
        cfg: &TraceCfg,
        key: &str,
        ctx: &Context,
        fallback: Option<(LengthSampler, LengthSampler)>,
    ) -> Result<ServeGen, WorkloadError> {
        let dir = ctx.resolve(&cfg.path);
        let mut report = TraceReport {
            format: "servegen".into(),
            path: dir.display().to_string(),
            time_scale: cfg.time_scale.unwrap_or(1.0),
            ..TraceReport::default()
        };
        let from = cfg.start_s.unwrap_or(0.0);
        let end = cfg.end_s.unwrap_or(f64::INFINITY);
        let mut clients = Vec::new();
        for (n, trace) in chunk_files(&dir, key, ctx)? {
            let windows: Vec<Window> = read_windows(&trace, key, ctx, cfg.lenient, &mut report)?
                .into_iter()
                .filter(|w| w.rate > 0.0 && w.start + WINDOW_S > from && w.start < end)
                .collect();
            let ds_path = dir.join(format!("chunk-{n}-dataset.json"));
            let lengths = match ds_path.exists().then(|| Dataset::read(&ds_path)).transpose()?.flatten() {
                Some(d) => ClientLengths::Pmfs(Box::new(d)),
                None if fallback.is_some() => ClientLengths::Fallback,
                None => {
                    return Err(ctx.config_error(
                        key,
                        format!(
                            "ServeGen client {n} has no length PMFs ({} is missing or empty): give workload.prompt_tokens and workload.output_tokens as fallback lengths",
                            ds_path.display()
                        ),
                    ))
                }
            };
            let stream =
                |what: &str| rng::stream(ctx.seed, &format!("workload.servegen.{n}.{what}"));
            report.tenants.push(format!("chunk-{n}"));
            clients.push(Client {
                windows,
                wi: 0,
                t: 0.0,
                gaps: None,
                lengths,
                arrivals: stream("arrivals"),
                prompt: stream("prompt_tokens"),
                output: stream("output_tokens"),
            });
        }
        let factor = match cfg.rate {
            Some(target) => {
                let span_end = clients
                    .iter()
                    .filter_map(|c| c.windows.last().map(|w| w.start + WINDOW_S))
                    .fold(from, f64::max)
                    .min(end);
                let mut total = 0.0;
                for c in &clients {
                    for w in &c.windows {
                        let overlap = (w.start + WINDOW_S).min(span_end) - w.start.max(from);
                        total += w.rate * overlap.max(0.0);
                    }
                }
                if total <= 0.0 || span_end <= from {
                    return Err(ctx.config_error(
                        &format!("{key}.rate"),
                        "cannot replay at a rate: no client is active in the selected window",
                    ));
                }
                target / (total / (span_end - from))
            }
            None => 1.0,
        };
        let mut sg = ServeGen {
            next_t: vec![0.0; clients.len()],
            clients,
            heap: BinaryHeap::new(),
            fallback,
            factor,
            from,
            end,
            scale: cfg.time_scale.unwrap_or(1.0),
            max: cfg.max_requests.unwrap_or(u64::MAX),
            report,
            error: None,
        };
        for i in 0..sg.clients.len() {
            sg.advance(i);
        }
        Ok(sg)
    }

    fn advance(&mut self, i: usize) {
        if let Some(t) = self.clients[i].next_time(self.factor, self.from, self.end) {
            self.next_t[i] = t;
            let ns = secs_to_nanos((t - self.from) / self.scale);
            self.heap.push(Reverse((ns, i as u32)));
        }
    }
}

impl RequestSource for ServeGen {
    fn next_request(&mut self) -> Option<RequestSpec> {
        if self.error.is_some() || self.report.requests >= self.max {
            return None;
        }
        let Reverse((ns, i)) = self.heap.pop()?;
        let c = i as usize;
        let t = self.next_t[c];
        let client = &mut self.clients[c];
        let (p, o) = match &mut client.lengths {
            ClientLengths::Pmfs(d) => match d.pmfs(t) {
                Ok((pi, po)) => (pi.sample(&mut client.prompt), po.sample(&mut client.output)),
                Err(e) => {
                    self.error = Some(e);
                    return None;
                }
            },
            ClientLengths::Fallback => {
                let (fp, fo) = self.fallback.as_ref().expect("fallback given");
                (fp.sample(&mut client.prompt), fo.sample(&mut client.output))
            }
        };
        self.report.zero_prompt += (p == 0) as u64;
        self.report.zero_output += (o == 0) as u64;
        self.advance(c);
        self.report.requests += 1;
        Some(RequestSpec {
            arrival: SimTime(ns),
            prompt_tokens: p.max(1),
            output_tokens: o.max(1),
            tenant: i,
            ..RequestSpec::default()
        })
    }

    fn finish(&mut self) -> Result<Option<WorkloadReport>, WorkloadError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        Ok(Some(WorkloadReport {
            traces: vec![self.report.clone()],
            users_left: None,
        }))
    }
}

/// Statistics of a ServeGen folder, computed from its descriptors (a
/// generated stream would take billions of requests to cover two weeks).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ServeGenStats {
    pub path: String,
    pub clients: u64,
    pub windows: u64,
    pub span_s: f64,
    /// Sum of client rates per window, requests/s.
    pub aggregate_rate: RateDist,
    /// Share of (client, window) pairs with rate > 0.
    pub active_share: f64,
    /// IAT CV of active client-windows, p50 and p90.
    pub cv_p50: f64,
    pub cv_p90: f64,
    /// Share of all requests (rate × 600 s) from the busiest client, and
    /// from the ten busiest.
    pub top1_share: f64,
    pub top10_share: f64,
    pub gamma_windows: u64,
    pub weibull_windows: u64,
    /// Length PMFs mixed over clients and 6 h windows, each weighted by the
    /// client's requests in that window; absent without dataset files.
    pub input_tokens: Option<super::stats::LengthStats>,
    pub output_tokens: Option<super::stats::LengthStats>,
    pub skipped_lines: u64,
}

/// Percentiles of a rate over windows.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RateDist {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// Describes a ServeGen folder (`trace stats --format servegen`).
pub fn describe(cfg: &TraceCfg, key: &str, ctx: &Context) -> Result<ServeGenStats, WorkloadError> {
    let dir = ctx.resolve(&cfg.path);
    let mut report = TraceReport::default();
    let mut per_window: BTreeMap<i64, f64> = BTreeMap::new();
    let (mut rows, mut active, mut cvs) = (0u64, 0u64, Vec::new());
    let (mut gamma, mut weibull) = (0u64, 0u64);
    let mut client_reqs = Vec::new();
    let mut inp: BTreeMap<u32, f64> = BTreeMap::new();
    let mut out: BTreeMap<u32, f64> = BTreeMap::new();
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    let files = chunk_files(&dir, key, ctx)?;
    let mut windows_max = 0u64;
    for (n, trace) in &files {
        let ws = read_windows(trace, key, ctx, cfg.lenient, &mut report)?;
        windows_max = windows_max.max(ws.len() as u64);
        let mut reqs = 0.0;
        for w in &ws {
            rows += 1;
            lo = lo.min(w.start);
            hi = hi.max(w.start + WINDOW_S);
            *per_window.entry(w.start.round() as i64).or_insert(0.0) += w.rate;
            if w.rate > 0.0 {
                active += 1;
                cvs.push(w.cv);
                match w.pattern {
                    Some(Pattern::Gamma) => gamma += 1,
                    Some(Pattern::Weibull) => weibull += 1,
                    None => {}
                }
            }
            reqs += w.rate * WINDOW_S;
        }
        client_reqs.push(reqs);
        let ds_path = dir.join(format!("chunk-{n}-dataset.json"));
        if let Some(mut d) = ds_path
            .exists()
            .then(|| Dataset::read(&ds_path))
            .transpose()?
            .flatten()
        {
            for k in 0..d.windows.len() {
                if d.effective[k] != k {
                    continue; // a window without data
                }
                let start = d.windows[k].0;
                let stop = d.windows.get(k + 1).map_or(f64::INFINITY, |w| w.0);
                let weight: f64 = ws
                    .iter()
                    .filter(|w| w.start >= start && w.start < stop)
                    .map(|w| w.rate * WINDOW_S)
                    .sum();
                if weight <= 0.0 {
                    continue;
                }
                let (dp, dout) = (d.windows[k].1.clone(), d.windows[k].2.clone());
                for (text, acc, field) in [
                    (&dp, &mut inp, "input_tokens"),
                    (&dout, &mut out, "output_tokens"),
                ] {
                    let pairs = parse_pmf(text).ok_or_else(|| WorkloadError::Data {
                        file: d.file.clone(),
                        line: None,
                        message: format!(
                            "window {start}: {field}: not a PMF like {{163: 0.25, ...}}"
                        ),
                    })?;
                    let total: f64 = pairs.iter().map(|p| p.1).sum();
                    for (v, p) in pairs {
                        *acc.entry(v as u32).or_insert(0.0) += weight * p / total;
                    }
                }
            }
            d.cache = None;
        }
    }
    let rates: Vec<f64> = per_window.values().copied().collect();
    let q = |v: &[f64], p: f64| super::stats::quantile_sorted(v, p);
    let mut sorted = rates.clone();
    sorted.sort_by(f64::total_cmp);
    cvs.sort_by(f64::total_cmp);
    client_reqs.sort_by(|a, b| b.total_cmp(a));
    let total: f64 = client_reqs.iter().sum();
    let lens =
        |m: &BTreeMap<u32, f64>| (!m.is_empty()).then(|| super::stats::LengthStats::of_weights(m));
    Ok(ServeGenStats {
        path: dir.display().to_string(),
        clients: files.len() as u64,
        windows: windows_max,
        span_s: if hi > lo { hi - lo } else { 0.0 },
        aggregate_rate: RateDist {
            mean: rates.iter().sum::<f64>() / rates.len().max(1) as f64,
            p50: q(&sorted, 0.5),
            p99: q(&sorted, 0.99),
            max: sorted.last().copied().unwrap_or(0.0),
        },
        active_share: active as f64 / rows.max(1) as f64,
        cv_p50: q(&cvs, 0.5),
        cv_p90: q(&cvs, 0.9),
        top1_share: client_reqs.first().copied().unwrap_or(0.0) / total.max(1e-300),
        top10_share: client_reqs.iter().take(10).sum::<f64>() / total.max(1e-300),
        gamma_windows: gamma,
        weibull_windows: weibull,
        input_tokens: lens(&inp),
        output_tokens: lens(&out),
        skipped_lines: report.skipped_lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_dict_pmfs_parse() {
        assert_eq!(parse_pmf("{}"), Some(vec![]));
        assert_eq!(
            parse_pmf("{9: 0.5, 163: 5e-1}"),
            Some(vec![(9.0, 0.5), (163.0, 0.5)])
        );
        assert_eq!(parse_pmf("{9 0.5}"), None);
        assert_eq!(parse_pmf("[1, 2]"), None);
        assert_eq!(parse_pmf("{1: -0.5}"), None);
    }

    #[test]
    fn window_gaps_have_the_window_rate() {
        for (p, shape) in [(Pattern::Gamma, 0.3), (Pattern::Weibull, 0.6)] {
            let g = Gaps::new(p, shape, 4.0).unwrap();
            let mut r = rng::stream(1, "t");
            let n = 400_000;
            let mean = (0..n).map(|_| g.sample(&mut r)).sum::<f64>() / n as f64;
            assert!((mean * 4.0 - 1.0).abs() < 0.03, "{p:?}: {mean}");
        }
    }
}

#[cfg(test)]
mod generation_tests {
    use super::*;
    use crate::scenario::TraceFormat;
    use crate::workload::length::{Fixed, LengthSampler};

    /// Two clients over six windows: client 0 Gamma (CV ≈ 1.4) at 10/s
    /// with an idle window, client 5 Weibull at 5/s; client 0 has
    /// PMFs, client 5 uses the fallback.
    fn folder() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let mut a = String::new();
        for k in 0..6 {
            if k == 2 {
                a.push_str(&format!("{},0,0,,0,0\n", k * 600));
            } else {
                a.push_str(&format!("{},10,1.41,Gamma,0.5,0.2\n", k * 600));
            }
        }
        std::fs::write(d.path().join("chunk-0-trace.csv"), a).unwrap();
        let b: String = (0..6)
            .map(|k| format!("{},5,1.6,Weibull,0.7,0.12\n", k * 600))
            .collect();
        std::fs::write(d.path().join("chunk-5-trace.csv"), b).unwrap();
        std::fs::write(
            d.path().join("chunk-0-dataset.json"),
            r#"{"0": {"input_tokens": "{100: 0.5, 300: 0.5}", "output_tokens": "{0: 0.2, 10: 0.8}"}, "21600": {"input_tokens": "{}", "output_tokens": "{}"}}"#,
        )
        .unwrap();
        d
    }

    fn cfg(d: &std::path::Path) -> TraceCfg {
        TraceCfg::new(TraceFormat::Servegen, d.display().to_string())
    }

    fn fallback() -> Option<(LengthSampler, LengthSampler)> {
        let f = |v| LengthSampler::new(Box::new(Fixed(v)), None, None);
        Some((f(7), f(3)))
    }

    fn all(c: &TraceCfg, seed: u64) -> (Vec<RequestSpec>, TraceReport) {
        let ctx = Context::new("t", std::path::Path::new("."), seed);
        let mut s = ServeGen::open(c, "workload.trace", &ctx, fallback()).unwrap();
        let v: Vec<RequestSpec> = std::iter::from_fn(|| s.next_request()).collect();
        (v, s.finish().unwrap().unwrap().traces.pop().unwrap())
    }

    #[test]
    fn each_client_is_a_tenant_arriving_at_its_window_rates() {
        let d = folder();
        let (v, rep) = all(&cfg(d.path()), 1);
        assert_eq!(rep.tenants, vec!["chunk-0", "chunk-5"]);
        assert!(v.windows(2).all(|w| w[0].arrival <= w[1].arrival));
        let count = |t: u32, lo: f64, hi: f64| {
            v.iter()
                .filter(|r| r.tenant == t && (lo..hi).contains(&r.arrival.as_secs_f64()))
                .count() as f64
        };
        // 10/s × 600 s per active window; nothing in the idle one.
        for k in [0, 1, 3, 4, 5] {
            let n = count(0, k as f64 * 600.0, (k + 1) as f64 * 600.0);
            assert!((n / 6_000.0 - 1.0).abs() < 0.06, "window {k}: {n}");
        }
        assert_eq!(count(0, 1200.0, 1800.0), 0.0);
        assert!((count(1, 0.0, 3600.0) / 18_000.0 - 1.0).abs() < 0.04);
        // Client 0 draws from its PMFs (a 0 output is replayed as 1 and
        // counted); client 5 from the fallback.
        assert!(v
            .iter()
            .filter(|r| r.tenant == 0)
            .all(|r| [100, 300].contains(&r.prompt_tokens) && [1, 10].contains(&r.output_tokens)));
        assert!(v
            .iter()
            .filter(|r| r.tenant == 1)
            .all(|r| (r.prompt_tokens, r.output_tokens) == (7, 3)));
        let zeros = rep.zero_output as f64 / count(0, 0.0, 3600.0);
        assert!((zeros - 0.2).abs() < 0.015, "{zeros}");
    }

    #[test]
    fn options_and_seeds() {
        let d = folder();
        let base = cfg(d.path());
        let (a, _) = all(&base, 1);
        let (b, _) = all(&base, 1);
        let (c, _) = all(&base, 2);
        assert_eq!(a, b);
        assert_ne!(a, c);
        // Window [600, 1200) at 2× speed: 300 s of arrivals.
        let mut w = base.clone();
        w.start_s = Some(600.0);
        w.end_s = Some(1200.0);
        w.time_scale = Some(2.0);
        let (v, _) = all(&w, 1);
        let last = v.last().unwrap().arrival.as_secs_f64();
        assert!(last < 300.0 && last > 299.0, "{last}");
        assert!((v.len() as f64 / 9_000.0 - 1.0).abs() < 0.06, "{}", v.len());
        // A rate override scales every client; first N stops early.
        let mut r = base.clone();
        r.rate = Some(6.0);
        let (v, _) = all(&r, 1);
        assert!(
            (v.len() as f64 / 3600.0 / 6.0 - 1.0).abs() < 0.05,
            "{}",
            v.len()
        );
        r.max_requests = Some(500);
        let (v, rep) = all(&r, 1);
        assert_eq!((v.len(), rep.requests), (500, 500));
        // A malformed descriptor row names its file and line, or is
        // skipped and counted when lenient.
        let bad = tempfile::tempdir().unwrap();
        for f in std::fs::read_dir(d.path()).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, bad.path().join(f.file_name().unwrap())).unwrap();
        }
        let trace = bad.path().join("chunk-5-trace.csv");
        let text = std::fs::read_to_string(&trace).unwrap().replacen(
            "1200,5,1.6,Weibull",
            "1200,5,1.6,Pareto",
            1,
        );
        std::fs::write(&trace, text).unwrap();
        let mut c = cfg(bad.path());
        let ctx = Context::new("s.toml", std::path::Path::new("."), 1);
        let e = ServeGen::open(&c, "workload.trace", &ctx, fallback())
            .err()
            .unwrap()
            .to_string();
        assert!(e.ends_with("chunk-5-trace.csv: line 3: pattern: expected Gamma, Weibull or empty, got \"Pareto\""), "{e}");
        c.lenient = true;
        let (v, rep) = all(&c, 1);
        assert_eq!(rep.skipped_lines, 1);
        assert!(rep.first_skipped.unwrap().contains("line 3"));
        assert!(!v.is_empty());
        // Without fallback lengths, a client without PMFs is an error.
        let ctx = Context::new("s.toml", std::path::Path::new("."), 1);
        let e = ServeGen::open(&base, "workload.trace", &ctx, None)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("s.toml: workload.trace: ServeGen client 5 has no length PMFs"),
            "{e}"
        );
    }
}
