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
        // The dataset is one JSON document, read whole: bounded like a
        // trace's line, so a wrong or endless file stops with a message.
        let limit = super::MAX_LINE_BYTES as u64;
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut std::io::Read::take(
                std::fs::File::open(path).map_err(|e| bad(format!("cannot read: {e}")))?,
                limit + 1,
            ),
            &mut text,
        )
        .map_err(|e| bad(format!("cannot read: {e}")))?;
        if text.len() as u64 > limit {
            return Err(bad(format!(
                "longer than {} MiB: not a ServeGen dataset (a JSON map of windows)",
                limit >> 20
            )));
        }
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
    /// Arrivals drawn from the fitted clients alone.
    fn open_loop(&self) -> bool {
        true
    }

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

mod describe;
pub use describe::{describe, RateDist, ServeGenStats};

#[cfg(test)]
mod tests;
