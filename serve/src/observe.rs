//! `servesim observe`: a load generator that sends a scenario's workload to
//! any OpenAI-compatible server as real streaming requests and records what
//! came back, as `vllm bench serve` and `genai-perf` do: open loop at the
//! workload's arrival times or closed loop (each user's next request a
//! think time after its previous one ended), bounded in count, time and open connections,
//! output lengths forced with `max_tokens` + `ignore_eos` + `min_tokens`,
//! optionally a share of clients that disconnect after k tokens. Every
//! request ends in the record — completed, rejected (with its HTTP status),
//! failed (with its message), cancelled, or in flight when time ran out —
//! and the results are written as `simulate` writes them (`summary.json`,
//! `requests.csv`, with the same percentiles), plus `observe.csv` with each
//! request's HTTP status, error and every inter-token gap.
//!
//! What is measured is what the stream delivered: tokens are the chunks
//! that carried one, and a `usage` block that claims another count is
//! reported, not used; a stream with no token fails; an answer in one chunk
//! has no TPOT. Every read is bounded in bytes ([`crate::wire`]) and waits
//! at most until the request's deadline, so a server that stalls or never
//! ends a line costs a timeout, not a hang.

use crate::openai::Endpoint;
use crate::wire;
use rand::Rng;
use serde_json::{json, Value};
use sim::report::RunResult;
use sim::report::{summarize_requests, ObservedLoad, Summary};
use sim::request::{RejectReason, Request, Status};
use sim::time::SimTime;
use sim::workload::{RequestSource, RequestSpec};
use sim::Scenario;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// How to drive the server.
#[derive(Debug, Clone)]
pub struct ObserveConfig {
    /// Base URL, e.g. `http://127.0.0.1:8000`.
    pub url: String,
    /// Model name sent in each request.
    pub model: String,
    pub endpoint: Endpoint,
    pub api_key: Option<String>,
    /// Most requests sent.
    pub max_requests: u64,
    /// No request is sent after this, and any still open then is closed
    /// and recorded in flight.
    pub max_duration: Duration,
    /// Most requests open at once; later arrivals wait for a slot (their
    /// delay shows as send lag).
    pub max_connections: usize,
    /// One request's limit; past it the request is recorded failed.
    pub request_timeout: Duration,
    /// Share of requests whose client disconnects after `cancel_after`
    /// tokens.
    pub cancel_share: f64,
    pub cancel_after: u32,
}

/// One request as observed.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    /// Scheduled send time since the start.
    pub scheduled: Duration,
    /// Actual send time since the start.
    pub sent: Option<Duration>,
    pub http_status: u16,
    /// Token (chunk) arrival times since the start.
    pub token_times: Vec<Duration>,
    /// Output tokens received: the chunks that carried a token. One chunk
    /// is one token's arrival; a server that packs several into one chunk
    /// shows fewer, and its gaps are per chunk.
    pub tokens: u32,
    /// What the stream's `usage` block claimed (`completion_tokens`), when
    /// it sent one; a claim other than `tokens` is reported, not used.
    pub usage_tokens: Option<u32>,
    pub end: Option<Duration>,
    pub outcome: Outcome,
    pub error: String,
}

impl Observation {
    /// The stream's `usage` block claimed another count than the chunks
    /// that arrived.
    pub fn usage_disagrees(&self) -> bool {
        self.usage_tokens.is_some_and(|u| u != self.tokens)
    }

    /// Completed with its whole answer in one chunk although more than one
    /// token was asked for: there are no gaps to time, so its TPOT is not
    /// measured (it is left out, not counted as 0).
    pub fn one_chunk(&self, requested: u32) -> bool {
        self.outcome == Outcome::Completed && self.tokens == 1 && requested > 1
    }

    /// What is doubtful about this request's figures, for `observe.csv`.
    pub fn note(&self, requested: u32) -> String {
        let mut notes = Vec::new();
        if let Some(u) = self.usage_tokens.filter(|_| self.usage_disagrees()) {
            notes.push(format!(
                "usage claims {u} tokens, {} streamed; counted as streamed",
                self.tokens
            ));
        }
        if self.one_chunk(requested) {
            notes.push(format!(
                "the whole answer in one chunk ({requested} tokens asked): TPOT not measurable"
            ));
        }
        notes.join("; ")
    }
}

/// How an observed request ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Outcome {
    /// Still open when the run's time ran out.
    #[default]
    InFlight,
    Completed,
    Rejected,
    Failed,
    Cancelled,
}

/// What `run` produced.
pub struct Observed {
    pub specs: Vec<RequestSpec>,
    pub observations: Vec<Observation>,
    pub wall: Duration,
}

/// The requests `observe` sends: the scenario's workload, open loop, cut to
/// `max_requests` and the scenario's horizon.
pub fn workload(s: &Scenario, max_requests: u64) -> anyhow::Result<Vec<RequestSpec>> {
    let ctx = sim::workload::Context::new(&s.origin, &s.base_dir, s.seed());
    let mut src = sim::workload::build(s.workload(), &ctx)?;
    let cap = s.horizon().requests.unwrap_or(u64::MAX).min(max_requests);
    let deadline = s.horizon().duration_s.map(SimTime::from_secs_f64);
    let mut v = Vec::new();
    while (v.len() as u64) < cap {
        let Some(r) = src.next_request() else { break };
        if deadline.is_some_and(|d| r.arrival > d) {
            break;
        }
        v.push(r);
    }
    Ok(v)
}

/// Token ids of request `i`'s prompt: blocks with a shared prefix hash get
/// the same ids (so a server's prefix cache sees what the workload shares),
/// the rest are distinct per request. Ids stay in 100..1100, inside any
/// real vocabulary.
pub fn prompt_ids(i: usize, spec: &RequestSpec) -> Vec<u32> {
    let mix = |a: u64, b: u64| {
        let mut z = a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        100 + ((z ^ (z >> 29)) % 1000) as u32
    };
    let bt = spec.hash_block_tokens.max(1) as usize;
    (0..spec.prompt_tokens as usize)
        .map(|j| match spec.prefix_hashes.get(j / bt) {
            Some(&h) => mix(h, j as u64),
            None => mix(0xA5A5_0000 + i as u64, j as u64),
        })
        .collect()
}

fn body(cfg: &ObserveConfig, i: usize, spec: &RequestSpec) -> Value {
    let ids = prompt_ids(i, spec);
    let mut b = json!({
        "model": cfg.model,
        "max_tokens": spec.output_tokens.max(1),
        "min_tokens": spec.output_tokens.max(1),
        "ignore_eos": true,
        "stream": true,
        "stream_options": {"include_usage": true},
        "temperature": 0.0,
    });
    match cfg.endpoint {
        Endpoint::Completions => b["prompt"] = json!(ids),
        Endpoint::Chat => {
            // Chat takes text: one word per prompt token.
            let text: Vec<String> = ids.iter().map(|t| format!("w{t}")).collect();
            b["messages"] = json!([{"role": "user", "content": text.join(" ")}]);
        }
    }
    b
}

/// Sends a fixed list of requests (open loop) and waits for every request
/// to end (or the time limit). `seed` picks the cancelled clients.
pub fn run(cfg: &ObserveConfig, specs: Vec<RequestSpec>, seed: u64) -> anyhow::Result<Observed> {
    run_source(
        cfg,
        Box::new(Listed(specs.into_iter())),
        u64::MAX,
        None,
        seed,
    )
}

/// Sends the scenario's workload as `simulate` generates it — open loop at
/// its arrival times, or closed loop: each user (a `process = "closed"`
/// arrival, or a conversation) sends its next request a think time after
/// its previous one ended, the follow-up drawn by the very source
/// `simulate` runs from the observed end. Cut to `max_requests`, the
/// scenario's horizon and `cfg.max_duration`.
pub fn run_scenario(
    cfg: &ObserveConfig,
    s: &Scenario,
    max_requests: u64,
) -> anyhow::Result<Observed> {
    let ctx = sim::workload::Context::new(&s.origin, &s.base_dir, s.seed());
    let src = sim::workload::build(s.workload(), &ctx)?;
    let cap = s.horizon().requests.unwrap_or(u64::MAX).min(max_requests);
    let deadline = s.horizon().duration_s.map(SimTime::from_secs_f64);
    run_source(cfg, src, cap, deadline, s.seed())
}

/// A fixed list of requests as a source.
struct Listed(std::vec::IntoIter<RequestSpec>);

impl RequestSource for Listed {
    fn next_request(&mut self) -> Option<RequestSpec> {
        self.0.next()
    }
}

/// Sends `src`'s requests (at most `cap`, none arriving after `deadline`)
/// and waits for every request to end (or the time limit).
pub fn run_source(
    cfg: &ObserveConfig,
    src: Box<dyn RequestSource>,
    cap: u64,
    deadline: Option<SimTime>,
    seed: u64,
) -> anyhow::Result<Observed> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(run_async(cfg, src, cap, deadline, seed))
}

/// Starts one task per request; each reports its observation on `done`.
struct Launcher {
    client: reqwest::Client,
    url: String,
    key: Option<String>,
    slots: Arc<Semaphore>,
    start: tokio::time::Instant,
    stop: tokio::time::Instant,
    timeout: Duration,
    cancel_share: f64,
    cancel_after: u32,
    rng: sim::rng::StreamRng,
    done: tokio::sync::mpsc::UnboundedSender<(usize, Observation)>,
}

impl Launcher {
    fn launch(&mut self, cfg: &ObserveConfig, i: usize, spec: &RequestSpec) {
        let scheduled = Duration::from_nanos(spec.arrival.0);
        let b = body(cfg, i, spec);
        let (client, url, slots) = (self.client.clone(), self.url.clone(), self.slots.clone());
        let key = self.key.clone();
        let cancel_after =
            (self.rng.random::<f64>() < self.cancel_share).then_some(self.cancel_after);
        let (timeout, start, stop, done) = (self.timeout, self.start, self.stop, self.done.clone());
        tokio::spawn(async move {
            let mut o = Observation {
                scheduled,
                ..Observation::default()
            };
            let at = start + scheduled;
            if at < stop {
                tokio::time::sleep_until(at).await;
                let work = async {
                    let Ok(_permit) = slots.acquire().await else {
                        return;
                    };
                    if tokio::time::Instant::now() >= stop {
                        return;
                    }
                    o.sent = Some(start.elapsed());
                    let end = later(tokio::time::Instant::now(), timeout).min(stop);
                    // Every read inside waits at most until `end`; the outer
                    // limit is for a future that never yields.
                    let one = one_request(
                        &client,
                        &url,
                        key.as_deref(),
                        b,
                        cancel_after,
                        start,
                        end,
                        &mut o,
                    );
                    let _ = tokio::time::timeout_at(end, one).await;
                    if o.outcome == Outcome::InFlight && end < stop {
                        o.outcome = Outcome::Failed;
                        o.error = format!(
                            "no end within the {} s request timeout",
                            timeout.as_secs_f64()
                        );
                        o.end = Some(start.elapsed());
                    }
                };
                // The run's time limit: whatever is open then stays in flight.
                let _ = tokio::time::timeout_at(stop, work).await;
            }
            let _ = done.send((i, o));
        });
    }
}

async fn run_async(
    cfg: &ObserveConfig,
    mut src: Box<dyn RequestSource>,
    cap: u64,
    deadline: Option<SimTime>,
    seed: u64,
) -> anyhow::Result<Observed> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(cfg.max_connections)
        .connect_timeout(Duration::from_secs(10))
        .build()?;
    let endpoint = match cfg.endpoint {
        Endpoint::Completions => "/v1/completions",
        Endpoint::Chat => "/v1/chat/completions",
    };
    let (done, mut finished) = tokio::sync::mpsc::unbounded_channel();
    let start = tokio::time::Instant::now() + Duration::from_millis(20);
    let mut l = Launcher {
        client,
        url: format!("{}{endpoint}", cfg.url.trim_end_matches('/')),
        key: cfg.api_key.clone(),
        slots: Arc::new(Semaphore::new(cfg.max_connections.max(1))),
        start,
        stop: later(start, cfg.max_duration),
        timeout: cfg.request_timeout,
        cancel_share: cfg.cancel_share,
        cancel_after: cfg.cancel_after,
        rng: sim::rng::stream(seed, "observe.cancel"),
        done,
    };
    let within = |spec: &RequestSpec, n: usize| {
        (n as u64) < cap && deadline.is_none_or(|d| spec.arrival <= d)
    };
    let mut specs: Vec<RequestSpec> = Vec::new();
    while let Some(r) = src.next_request() {
        if !within(&r, specs.len()) {
            break;
        }
        l.launch(cfg, specs.len(), &r);
        specs.push(r);
    }
    let mut observations = vec![Observation::default(); specs.len()];
    let mut open = specs.len();
    let wall0 = Instant::now();
    while open > 0 {
        let Some((i, o)) = finished.recv().await else {
            break;
        };
        open -= 1;
        // A closed-loop user follows up on a request that ended (not one
        // still open when time ran out), from when it ended.
        let follow = match (o.outcome, o.end) {
            (Outcome::InFlight, _) | (_, None) => None,
            (outcome, Some(end)) => {
                let req = Request::from_spec(specs[i].clone());
                src.on_request_end(&req, ns(end), outcome == Outcome::Completed)
            }
        };
        observations[i] = o;
        if let Some(next) = follow {
            if within(&next, specs.len()) && l.start + Duration::from_nanos(next.arrival.0) < l.stop
            {
                l.launch(cfg, specs.len(), &next);
                specs.push(next);
                observations.push(Observation::default());
                open += 1;
            }
        }
    }
    Ok(Observed {
        specs,
        observations,
        wall: wall0.elapsed(),
    })
}

/// `at + d`, or far in the future when that is past what the clock holds
/// (a limit of 1e20 s is no limit, not a panic).
fn later(at: tokio::time::Instant, d: Duration) -> tokio::time::Instant {
    at.checked_add(d)
        .unwrap_or_else(|| at + Duration::from_secs(100 * 365 * 86_400))
}

/// Warnings on what the server streamed: `usage` blocks that disagree with
/// the chunks, answers in one chunk. One line per cause, with a count and
/// the first request's figures; empty when nothing is doubtful.
pub fn warnings(obs: &Observed) -> Vec<String> {
    let rows = || obs.specs.iter().zip(&obs.observations).enumerate();
    let completed = obs
        .observations
        .iter()
        .filter(|o| o.outcome != Outcome::InFlight && o.usage_tokens.is_some())
        .count();
    let mut out = Vec::new();
    let disagree: Vec<(usize, &Observation)> = rows()
        .filter(|(_, (_, o))| o.usage_disagrees())
        .map(|(i, (_, o))| (i, o))
        .collect();
    if let Some(&(i, o)) = disagree.first() {
        out.push(format!(
            "{} of {completed} requests with a usage block: it disagrees with the tokens streamed (request {i}: usage {}, streamed {}); tokens are counted as streamed, see observe.csv's note column",
            disagree.len(),
            o.usage_tokens.unwrap_or(0),
            o.tokens
        ));
    }
    let one: Vec<(usize, u32)> = rows()
        .filter(|(_, (s, o))| o.one_chunk(s.output_tokens))
        .map(|(i, (s, _))| (i, s.output_tokens))
        .collect();
    if let Some(&(i, asked)) = one.first() {
        out.push(format!(
            "{} completed request(s) came back in one chunk (request {i}: {asked} tokens asked): their TPOT cannot be measured and is left out of the TPOT percentiles",
            one.len()
        ));
    }
    out
}

/// Fails when the run measured nothing: every request sent failed or was
/// refused. The message names the URL, what came back most, and what to
/// fix (a server not listening; a base URL that already ends in `/v1`).
pub fn check_ran(cfg: &ObserveConfig, obs: &Observed) -> anyhow::Result<()> {
    let sent: Vec<&Observation> = obs
        .observations
        .iter()
        .filter(|o| o.sent.is_some())
        .collect();
    let measured = sent
        .iter()
        .any(|o| matches!(o.outcome, Outcome::Completed | Outcome::Cancelled));
    let ended_badly = sent
        .iter()
        .filter(|o| matches!(o.outcome, Outcome::Failed | Outcome::Rejected))
        .count();
    if measured || ended_badly == 0 || ended_badly < sent.len() {
        return Ok(());
    }
    let mut why: BTreeMap<&str, usize> = BTreeMap::new();
    for o in &sent {
        *why.entry(o.error.as_str()).or_default() += 1;
    }
    let (top, n) = why
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(e, n)| (*e, *n))
        .unwrap_or(("", 0));
    let endpoint = match cfg.endpoint {
        Endpoint::Completions => "/v1/completions",
        Endpoint::Chat => "/v1/chat/completions",
    };
    let base = cfg.url.trim_end_matches('/');
    let hint = if base.ends_with("/v1") {
        format!(
            "; the URL is the server's base, without /v1: observe sends to <URL>{endpoint}, so give {}",
            base.trim_end_matches("/v1")
        )
    } else if sent.iter().all(|o| o.http_status == 0) {
        format!("; is the server running and listening at {}?", cfg.url)
    } else if sent.iter().any(|o| o.http_status == 404) {
        format!(
            "; the server has no {endpoint} at this base URL (try --endpoint, or check the URL)"
        )
    } else if sent.iter().any(|o| matches!(o.http_status, 401 | 403)) {
        "; it needs an API key (--api-key or SERVESIM_API_KEY)".to_string()
    } else {
        String::new()
    };
    anyhow::bail!(
        "every one of the {} requests sent to {}{endpoint} failed, so nothing was measured and no results were written; {n} ended: {}{hint}",
        sent.len(),
        base,
        top.trim()
    )
}

/// An error with its causes ("error sending request for url (…): connection
/// closed before message completed"): reqwest's own text names only the
/// step that failed.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let s_text = s.to_string();
        if !msg.contains(&s_text) {
            msg = format!("{msg}: {s_text}");
        }
        src = s.source();
    }
    msg
}

/// How a stream that reached its end ended, given what it streamed.
fn finish(o: &mut Observation, chunks: u32, usage: Option<u32>, start: tokio::time::Instant) {
    o.tokens = chunks;
    o.usage_tokens = usage;
    o.end = Some(start.elapsed());
    if chunks == 0 {
        // Nothing streamed: no first token to time, whatever `usage` says.
        o.outcome = Outcome::Failed;
        o.error = format!(
            "the stream ended ([DONE]) with no tokens{}",
            usage.map_or(String::new(), |n| format!(" (its usage block claims {n})"))
        );
        return;
    }
    o.outcome = Outcome::Completed;
    o.end = o.token_times.last().copied();
}

#[allow(clippy::too_many_arguments)]
async fn one_request(
    client: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    body: Value,
    cancel_after: Option<u32>,
    start: tokio::time::Instant,
    deadline: tokio::time::Instant,
    o: &mut Observation,
) {
    let send = || {
        let mut req = client.post(url).json(&body);
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        tokio::time::timeout_at(deadline, req.send())
    };
    let sent = match send().await {
        // A pooled keep-alive connection that the server closed as this
        // request went out fails before any answer is read (cpp-httplib,
        // under llama-server, closes one after a number of requests or
        // idle seconds). The server never saw the request, and hyper does
        // not resend a POST itself, so it is sent once more on a new
        // connection; a refused connection or a timeout is not retried.
        Ok(Err(e)) if !e.is_timeout() && !e.is_connect() => send().await,
        r => r,
    };
    let resp = match sent {
        // The deadline: the caller records it (failed or in flight).
        Err(_) => return,
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            o.outcome = Outcome::Failed;
            o.error = format!("request failed: {}", error_chain(&e));
            o.end = Some(start.elapsed());
            return;
        }
    };
    o.http_status = resp.status().as_u16();
    if !resp.status().is_success() {
        let status = resp.status();
        let text = match wire::body(resp, wire::MAX_ERROR_BODY_BYTES, deadline).await {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(wire::ReadError::Timeout) => return,
            Err(e) => format!("(its body unread: {e})"),
        };
        let msg = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .unwrap_or(text);
        o.outcome = if status.is_client_error() {
            Outcome::Rejected
        } else {
            Outcome::Failed
        };
        o.error = format!("HTTP {}: {}", status.as_u16(), msg.trim());
        o.end = Some(start.elapsed());
        return;
    }
    let mut body = resp.bytes_stream();
    let mut sse = wire::SseParser::default();
    let mut events = Vec::new();
    let mut chunks = 0u32;
    let mut usage: Option<u32> = None;
    loop {
        let piece = match wire::next_by(&mut body, deadline).await {
            Ok(Some(piece)) => piece,
            Ok(None) => break,
            // The deadline: the caller records it (failed or in flight).
            Err(wire::ReadError::Timeout) => return,
            Err(e) => {
                o.outcome = Outcome::Failed;
                o.error = format!("the stream broke: {e}");
                o.end = Some(start.elapsed());
                return;
            }
        };
        if let Err(e) = sse.feed(&piece, &mut events) {
            o.outcome = Outcome::Failed;
            o.error = format!("the stream is not a completion stream: {e}");
            o.end = Some(start.elapsed());
            return;
        }
        for data in events.drain(..) {
            if data.trim() == "[DONE]" {
                finish(o, chunks, usage, start);
                return;
            }
            let v: Value = match serde_json::from_str(&data) {
                Ok(v) => v,
                Err(e) => {
                    o.outcome = Outcome::Failed;
                    let shown: String = data.chars().take(200).collect();
                    o.error = format!("a chunk is not JSON ({e}): {shown}");
                    o.end = Some(start.elapsed());
                    return;
                }
            };
            if let Some(n) = v["usage"]["completion_tokens"].as_u64() {
                usage = Some(n.min(u32::MAX as u64) as u32);
            }
            let c = &v["choices"][0];
            // Chat's first chunk names the assistant's role with no content
            // yet (OpenAI, vLLM): it carries no token.
            let role_only = c["delta"]["role"].is_string()
                && c["delta"]["content"].as_str().is_none_or(str::is_empty);
            let text = c["text"]
                .as_str()
                .or_else(|| c["delta"]["content"].as_str())
                .filter(|_| !role_only);
            // A token whose bytes end inside a UTF-8 character streams as an
            // empty text (llama.cpp holds the bytes for the next chunk), and
            // is still a token at this time; an empty text that closes the
            // stream (`finish_reason` set) carries none, unless the usage
            // counts exactly one token no chunk showed (one held back whole,
            // as a lone token ending inside a character is): it arrived by
            // this time. A usage further off is a disagreement, reported.
            let open = c["finish_reason"].is_null();
            let held = usage.is_some_and(|n| n == chunks + 1);
            if text.is_some_and(|t| !t.is_empty() || open || held) {
                chunks += 1;
                o.token_times.push(start.elapsed());
                o.tokens = chunks;
                if cancel_after.is_some_and(|k| chunks >= k) {
                    // Dropping the stream closes the connection: the client
                    // is gone, as a user closing the tab.
                    o.outcome = Outcome::Cancelled;
                    o.end = Some(start.elapsed());
                    return;
                }
            }
        }
    }
    o.outcome = Outcome::Failed;
    o.error = if chunks == 0 {
        "the stream ended with no tokens and without [DONE]".into()
    } else {
        format!("the stream ended after {chunks} token(s) without [DONE]")
    };
    o.end = Some(start.elapsed());
}

fn ns(d: Duration) -> SimTime {
    SimTime(d.as_nanos() as u64)
}

/// The observation as `simulate`'s result: one `Request` per request (the
/// send time as its arrival, so TTFT counts from the send), inter-token gaps
/// as samples, and the summary computed by the same code (which fails only
/// when samples it spilled to disk cannot be read back).
pub fn to_result(s: &Scenario, cfg: &ObserveConfig, obs: &Observed) -> anyhow::Result<RunResult> {
    let mut reqs = Vec::with_capacity(obs.observations.len());
    let mut itl = Vec::new();
    let mut end = SimTime::ZERO;
    let mut statuses: BTreeMap<String, u64> = BTreeMap::new();
    let mut lag = (0.0, 0u64);
    for (spec, o) in obs.specs.iter().zip(&obs.observations) {
        let mut r = Request::from_spec(spec.clone());
        r.arrival = ns(o.sent.unwrap_or(o.scheduled));
        r.replica = u32::MAX;
        if let Some(sent) = o.sent {
            *statuses.entry(o.http_status.to_string()).or_default() += 1;
            lag.0 += (sent.saturating_sub(o.scheduled)).as_secs_f64() * 1e3;
            lag.1 += 1;
        }
        r.first_token = o.token_times.first().map(|&t| ns(t)).into();
        r.generated = o.tokens;
        for w in o.token_times.windows(2) {
            itl.push(((w[1] - w[0]).as_nanos() as u64, 1));
        }
        if let Some(e) = o.end {
            end = end.max(ns(e));
        }
        r.last_token = o.token_times.last().map_or(r.arrival, |&t| ns(t));
        r.status = match o.outcome {
            Outcome::InFlight => Status::InFlight,
            Outcome::Completed => {
                // TPOT is over the tokens received (a server may stop
                // early); the requested count is in observe.csv.
                r.output_tokens = o.tokens.max(1);
                r.finished = o.end.map(ns).into();
                Status::Completed
            }
            Outcome::Rejected => Status::Rejected(if matches!(o.http_status, 429 | 503) {
                RejectReason::ServerBusy
            } else {
                RejectReason::ServerRefused
            }),
            Outcome::Failed => Status::Failed,
            Outcome::Cancelled => Status::Cancelled,
        };
        if matches!(
            o.outcome,
            Outcome::Rejected | Outcome::Failed | Outcome::Cancelled
        ) {
            r.finished = o.end.map(ns).into();
        }
        reqs.push(r);
    }
    let mut summary = Summary {
        scenario: s.name().to_string(),
        seed: s.seed(),
        cost_source: format!("observed over HTTP at {}", cfg.url),
        model: cfg.model.clone(),
        hardware: "the server's".into(),
        replicas: s.replicas(),
        tensor_parallel: s.parallel.tensor,
        gpus: s.gpus(),
        router: "the server's".into(),
        kv_blocks_per_replica: 0,
        block_size: 0,
        duration_s: end.as_secs_f64(),
        ..Summary::default()
    };
    let slo = s.slo().map(sim::scenario::SloCfg::targets);
    summarize_requests(&reqs, itl, end, s.gpus(), slo, &mut summary).map_err(anyhow::Error::msg)?;
    let span = obs
        .specs
        .iter()
        .map(|r| r.arrival.as_secs_f64())
        .fold(0.0, f64::max)
        .max(1e-9);
    let sent = lag.1;
    let send_span = obs
        .observations
        .iter()
        .filter_map(|o| o.sent)
        .max()
        .map_or(1e-9, |d| d.as_secs_f64().max(1e-9));
    summary.observed = Some(ObservedLoad {
        url: cfg.url.clone(),
        offered_rps: obs.specs.len() as f64 / span,
        sent_rps: sent as f64 / send_span,
        send_lag_ms: if sent > 0 { lag.0 / sent as f64 } else { 0.0 },
        http_status: statuses,
    });
    Ok(RunResult {
        summary,
        requests: reqs,
        ended: Vec::new(),
        timeseries: Default::default(),
        attribution: true,
        fleet_series: Vec::new(),
        pool_series: Vec::new(),
        streamed_requests: Default::default(),
        scenario_hash: sim::output::scenario_hash(s),
        routing_trace: None,
    })
}

/// Writes `summary.json`, `requests.csv`, `timeseries.csv` (empty: a remote
/// server's queues are not visible) and `observe.csv`.
pub fn write(dir: &Path, result: &RunResult, obs: &Observed) -> std::io::Result<()> {
    sim::report::write_all(dir, result)?;
    // Whole or not at all, as `simulate`'s files are.
    let mut w = Vec::new();
    writeln!(
        w,
        "id,scheduled_s,sent_s,http_status,requested_tokens,received_tokens,usage_tokens,outcome,error,note,gaps_ms"
    )?;
    for (i, (spec, o)) in obs.specs.iter().zip(&obs.observations).enumerate() {
        let gaps: Vec<String> = o
            .token_times
            .windows(2)
            .map(|w| format!("{:.3}", (w[1] - w[0]).as_secs_f64() * 1e3))
            .collect();
        let status = result.requests[i].status.as_str();
        let err = o.error.replace(['"', '\n', '\r'], "'");
        let note = o.note(spec.output_tokens).replace(['"', '\n', '\r'], "'");
        writeln!(
            w,
            "{i},{:.6},{},{},{},{},{},{status},\"{err}\",\"{note}\",{}",
            o.scheduled.as_secs_f64(),
            o.sent
                .map(|d| format!("{:.6}", d.as_secs_f64()))
                .unwrap_or_default(),
            o.http_status,
            spec.output_tokens,
            o.tokens,
            o.usage_tokens.map(|u| u.to_string()).unwrap_or_default(),
            gaps.join(";")
        )?;
    }
    sim::output::write_bytes_atomic(&dir.join("observe.csv"), &w)
}
