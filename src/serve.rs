//! `servesim serve`, `observe` and `compare`: the command-line side of the
//! `serve` crate (flags, printing); the HTTP work lives there.

use crate::ranges;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serve::openai::Endpoint;
use sim::Scenario;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which engine answers behind the HTTP front end.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum EngineKind {
    /// The scenario's fleet and cost model, paced to the wall clock.
    Sim,
    /// A real model (the --profile's) on its device, with its tokenizer.
    Live,
}

/// `servesim serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Engine behind the endpoint.
    #[arg(long, value_enum, default_value_t = EngineKind::Sim)]
    pub engine: EngineKind,
    /// Scenario TOML file (fleet, engine, model, cost model; live: its
    /// [engine] only).
    pub scenario: PathBuf,
    /// Live engine: profile written by `servesim calibrate` (gives the model,
    /// its weights and the device).
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Live engine: run on another device than the profile's (e.g. cuda:1).
    #[arg(long, value_parser = crate::cli::device)]
    pub device: Option<String>,
    /// Live engine: a GGUF file whose tokenizer to use (for a model whose
    /// weights carry none, e.g. random weights).
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Simulated seconds per wall second.
    #[arg(long, default_value_t = 1.0, value_parser = ranges::SPEED, allow_negative_numbers = true)]
    pub speed: f64,
    /// Address to bind (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port (0: any free one; the address is printed).
    #[arg(long, default_value_t = 8000, allow_negative_numbers = true)]
    pub port: u16,
    /// Require `Authorization: Bearer <KEY>` on every route but /health.
    #[arg(long, env = "SERVESIM_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Model name clients ask for [default: the scenario's model].
    #[arg(long, value_name = "NAME")]
    pub served_model_name: Option<String>,
    /// Most requests waiting across the fleet; more get 429.
    #[arg(long, default_value_t = 256, value_parser = ranges::QUEUE_LENGTH, allow_negative_numbers = true)]
    pub max_waiting: usize,
    /// Most requests one client (API key, or address) may have open.
    #[arg(long, default_value_t = 256, value_parser = ranges::QUEUE_LENGTH, allow_negative_numbers = true)]
    pub per_client_limit: usize,
    /// Largest max_tokens accepted.
    #[arg(long, default_value_t = 4096, allow_negative_numbers = true)]
    pub max_tokens: u32,
    /// Largest request body, bytes.
    #[arg(long, default_value_t = 1 << 20, value_parser = ranges::BODY_BYTES, allow_negative_numbers = true)]
    pub max_body_bytes: usize,
    /// Seconds a client has to send its body.
    #[arg(long, default_value_t = 10.0, value_parser = ranges::SECONDS, allow_negative_numbers = true)]
    pub body_timeout_s: f64,
    /// Seconds after which a response is ended and its sequence cancelled.
    #[arg(long, default_value_t = 600.0, value_parser = ranges::SECONDS, allow_negative_numbers = true)]
    pub request_timeout_s: f64,
    /// Seconds a client may read nothing of its stream (while the server
    /// has data for it) before it is dropped and its sequence cancelled.
    #[arg(long, default_value_t = 30.0, value_parser = ranges::SECONDS, allow_negative_numbers = true)]
    pub idle_timeout_s: f64,
}

/// `servesim observe`.
#[derive(Args, Debug)]
pub struct ObserveArgs {
    /// Base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000.
    pub url: String,
    /// Scenario whose workload is sent.
    pub scenario: PathBuf,
    /// Output folder [default: out/<scenario name>-observed/].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print summary.json on stdout (the text goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Model name to request [default: the scenario's model].
    #[arg(long = "served-model-name", alias = "model", value_name = "NAME")]
    pub model: Option<String>,
    /// Endpoint: completions (prompts as token ids) or chat (words).
    #[arg(long, value_enum, default_value_t = EndpointArg::Completions)]
    pub endpoint: EndpointArg,
    /// Bearer key for the server.
    #[arg(long, env = "SERVESIM_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Most requests sent (also cut by the scenario's horizon).
    #[arg(long, default_value_t = 1000, value_parser = ranges::ITEMS_U64, allow_negative_numbers = true)]
    pub max_requests: u64,
    /// Seconds after which nothing more is sent and open requests are closed.
    #[arg(long, default_value_t = 300.0, value_parser = ranges::SECONDS, allow_negative_numbers = true)]
    pub max_duration_s: f64,
    /// Most requests open at once.
    #[arg(long, default_value_t = 256, value_parser = ranges::ITEMS_USIZE, allow_negative_numbers = true)]
    pub max_connections: usize,
    /// Seconds one request may take.
    #[arg(long, default_value_t = 600.0, value_parser = ranges::SECONDS, allow_negative_numbers = true)]
    pub request_timeout_s: f64,
    /// Share of clients that disconnect after --cancel-after tokens.
    #[arg(long, default_value_t = 0.0, value_parser = ranges::SHARE, allow_negative_numbers = true)]
    pub cancel_share: f64,
    /// Tokens a cancelling client reads before it goes away.
    #[arg(long, default_value_t = 5, allow_negative_numbers = true)]
    pub cancel_after: u32,
    /// Override the scenario's seed (workload and cancellations).
    #[arg(long, value_parser = ranges::ANY_U64, allow_negative_numbers = true)]
    pub seed: Option<u64>,
    /// What to write besides the results folder: nothing more (servesim),
    /// or also vLLM's benchmark result (`vllm bench serve --save-result`'s
    /// JSON) beside it as <out>.vllm.json, which `compare` reads.
    #[arg(long, value_enum, default_value_t = ObserveFormat::Servesim)]
    pub format: ObserveFormat,
}

/// `observe --format`.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum ObserveFormat {
    Servesim,
    Vllm,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum EndpointArg {
    Completions,
    Chat,
}

fn secs(name: &str, v: f64) -> Result<Duration> {
    // `try_from`: a value past what a Duration holds (1e300) is an error
    // naming the flag, not a panic.
    match Duration::try_from_secs_f64(v) {
        Ok(d) if v > 0.0 => Ok(d),
        _ => bail!(
            "--{name} must be a positive number of seconds that a clock can hold (at most about 1.8e19), not {}",
            if v.abs() < 1e15 { v.to_string() } else { format!("{v:e}") }
        ),
    }
}

pub fn serve(a: ServeArgs) -> Result<()> {
    if !(a.speed.is_finite() && a.speed > 0.0) {
        bail!("--speed must be positive, not {}", a.speed);
    }
    if a.max_waiting == 0 || a.per_client_limit == 0 {
        bail!("--max-waiting and --per-client-limit must be at least 1");
    }
    if a.api_key.as_deref().is_some_and(|k| k.trim().is_empty()) {
        bail!("--api-key (or SERVESIM_API_KEY) is empty: give the key clients must send, or leave it out to serve without one");
    }
    if a.max_tokens == 0 {
        bail!("--max-tokens 0 would refuse every request: give the largest max_tokens to accept (at least 1; default 4096)");
    }
    if a.max_body_bytes == 0 {
        bail!("--max-body-bytes: must be at least 1 byte (a server that takes no body answers every request 413)");
    }
    if a.engine == EngineKind::Live {
        return serve_live(a);
    }
    if a.profile.is_some() || a.tokenizer.is_some() || a.device.is_some() {
        bail!("--profile, --device and --tokenizer are for --engine live");
    }
    let scenario = Scenario::load(&a.scenario)?;
    let model = a
        .served_model_name
        .clone()
        .unwrap_or_else(|| scenario.model.name.clone());
    let cfg = server_config(&a, model, scenario.max_model_len)?;
    let name = scenario.name().to_string();
    let replicas = scenario.replicas();
    let engine = serve::twin::start(
        scenario,
        serve::twin::TwinConfig {
            speed: a.speed,
            max_waiting: a.max_waiting,
        },
    );
    let model = cfg.model.clone();
    let keyed = cfg.api_key.is_some();
    let router = serve::server::router(cfg, engine);
    serve::serve_forever(SocketAddr::new(a.host, a.port), router, secs("idle-timeout-s", a.idle_timeout_s)?, |addr| {
        // One line a script can read the address from.
        eprintln!(
            "serving {model} (simulated twin of {name}: {replicas} replica(s), ×{} speed{}) on http://{addr}",
            a.speed,
            if keyed { ", API key required" } else { "" }
        );
    })
    .with_context(|| format!("cannot serve on {}:{}", a.host, a.port))
}

fn server_config(
    a: &ServeArgs,
    model: String,
    max_model_len: u32,
) -> Result<serve::server::ServerConfig> {
    Ok(serve::server::ServerConfig {
        model,
        api_key: a.api_key.clone(),
        max_model_len,
        max_tokens_cap: a.max_tokens,
        max_body_bytes: a.max_body_bytes,
        per_client_limit: a.per_client_limit,
        body_timeout: secs("body-timeout-s", a.body_timeout_s)?,
        request_timeout: secs("request-timeout-s", a.request_timeout_s)?,
        retry_after_s: 1,
    })
}

#[cfg(not(feature = "calibrate"))]
fn serve_live(_: ServeArgs) -> Result<()> {
    bail!("this servesim was built without the live engine (the default, simulator-only build); rebuild with --features calibrate")
}

/// `serve --engine live`: the profile's model behind the same front end.
#[cfg(feature = "calibrate")]
fn serve_live(a: ServeArgs) -> Result<()> {
    let Some(profile) = &a.profile else {
        bail!("--engine live needs --profile (a profile written by `servesim calibrate`)");
    };
    if a.speed != 1.0 {
        bail!("--speed is for --engine sim: the live engine runs on the wall clock");
    }
    let scenario = serve::live::scenario_with_profile(&a.scenario, profile)?;
    let lm = serve::live::load(profile, a.device.as_deref(), a.tokenizer.as_deref())?;
    let model = a
        .served_model_name
        .clone()
        .unwrap_or_else(|| scenario.model.name.clone());
    let cfg = server_config(&a, model, scenario.max_model_len)?;
    let about = format!(
        "live, {} on {}, {}, {} KV blocks{}",
        lm.weights,
        lm.dev.spec.label(),
        scenario.engine().policy.name(),
        scenario.memory.kv_blocks,
        if lm.tokenizer.is_some() {
            ""
        } else {
            ", no tokenizer: prompts as token ids"
        }
    );
    let engine = serve::live::start(
        scenario,
        lm.dev,
        lm.model,
        lm.tokenizer,
        serve::live::LiveConfig {
            max_waiting: a.max_waiting,
        },
    );
    let model = cfg.model.clone();
    let keyed = cfg.api_key.is_some();
    let router = serve::server::router(cfg, engine);
    serve::serve_forever(
        SocketAddr::new(a.host, a.port),
        router,
        secs("idle-timeout-s", a.idle_timeout_s)?,
        |addr| {
            eprintln!(
                "serving {model} ({about}{}) on http://{addr}",
                if keyed { ", API key required" } else { "" }
            );
        },
    )
    .with_context(|| format!("cannot serve on {}:{}", a.host, a.port))
}

pub fn observe(a: ObserveArgs) -> Result<()> {
    if !(0.0..=1.0).contains(&a.cancel_share) {
        bail!("--cancel-share must be within 0..1, not {}", a.cancel_share);
    }
    if a.max_connections == 0 {
        bail!("--max-connections must be at least 1");
    }
    if !(a.url.starts_with("http://") || a.url.starts_with("https://")) {
        bail!("the URL must start with http:// (got {:?})", a.url);
    }
    if a.json {
        crate::json_stdout();
    }
    let overrides = sim::scenario::Overrides {
        seed: a.seed,
        ..Default::default()
    };
    let scenario = Scenario::load_with(&a.scenario, &overrides)?;
    let cfg = serve::observe::ObserveConfig {
        url: a.url.clone(),
        model: a
            .model
            .clone()
            .unwrap_or_else(|| scenario.model.name.clone()),
        endpoint: match a.endpoint {
            EndpointArg::Completions => Endpoint::Completions,
            EndpointArg::Chat => Endpoint::Chat,
        },
        api_key: a.api_key.clone().filter(|k| !k.is_empty()),
        max_requests: a.max_requests,
        max_duration: secs("max-duration-s", a.max_duration_s)?,
        max_connections: a.max_connections,
        request_timeout: secs("request-timeout-s", a.request_timeout_s)?,
        cancel_share: a.cancel_share,
        cancel_after: a.cancel_after.max(1),
    };
    eprintln!(
        "observing {} with the workload of {} (at most {} requests, {} s)",
        a.url,
        scenario.name(),
        a.max_requests,
        a.max_duration_s
    );
    let obs = serve::observe::run_scenario(&cfg, &scenario, a.max_requests)?;
    // A run that measured nothing (no server there, a wrong path) is an
    // error, and leaves no results folder a later command would read.
    serve::observe::check_ran(&cfg, &obs)?;
    let result = serve::observe::to_result(&scenario, &cfg, &obs)?;
    for w in serve::observe::warnings(&obs) {
        eprintln!("warning: {w}");
    }
    let out = a
        .out
        .unwrap_or_else(|| Path::new("out").join(format!("{}-observed", scenario.name())));
    serve::observe::write(&out, &result, &obs)
        .with_context(|| format!("cannot write results to {}", out.display()))?;
    let vllm = (a.format == ObserveFormat::Vllm).then(|| {
        let mut name = out.clone().into_os_string();
        name.push(".vllm.json");
        PathBuf::from(name)
    });
    if let Some(path) = &vllm {
        let offered = result
            .summary
            .observed
            .as_ref()
            .map_or(0.0, |o| o.offered_rps);
        let v = serve::vllm_bench::to_json(&cfg, &obs, offered);
        let text = serde_json::to_string_pretty(&v).expect("JSON values serialize");
        sim::output::write_bytes_atomic(path, text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    crate::print::summary(&scenario, &result.summary);
    if let Some(o) = &result.summary.observed {
        let c = &result.summary.counts;
        outln!();
        outln!(
            "offered {} req/s, sent {} req/s (mean send lag {:.1} ms); {} completed, {} rejected, {} cancelled, {} failed, {} in flight",
            sim::sig_figs::rate(o.offered_rps), sim::sig_figs::rate(o.sent_rps), o.send_lag_ms, c.completed, c.rejected, c.cancelled, c.failed, c.in_flight
        );
    }
    outln!(
        "results: {}/{{summary.json,requests.csv,observe.csv}}",
        out.display()
    );
    if let Some(path) = &vllm {
        outln!("vLLM benchmark result: {}", path.display());
    }
    if a.json {
        crate::print_json_file(&out.join("summary.json"))?;
    }
    Ok(())
}

pub fn compare(a: &Path, b: &Path, json: bool) -> Result<()> {
    let rows = serve::compare::compare(a, b)?;
    let differences = serve::compare::differences(a, b)?;
    if json {
        // Unmeasured values (NaN: a run that completed no request) are null.
        let finite = |v: f64| v.is_finite().then_some(v);
        let rows: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "metric": r.metric,
                    "a": finite(r.a),
                    "b": finite(r.b),
                    "error_pct": r.error_pct.and_then(finite),
                })
            })
            .collect();
        let doc = serde_json::json!({
            "a": a.display().to_string(),
            "b": b.display().to_string(),
            "differences": differences,
            "rows": rows,
        });
        crate::print_json(&serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    if !differences.is_empty() {
        eprintln!(
            "warning: A and B come from different setups, so B vs A is not a model's error alone:"
        );
        for d in &differences {
            eprintln!("  {d}");
        }
    }
    outln!("A  {}\nB  {}\n", a.display(), b.display());
    outln!("{:<28} {:>12} {:>12} {:>9}", "metric", "A", "B", "B vs A");
    for r in rows {
        outln!(
            "{:<28} {:>12} {:>12} {:>9}",
            r.metric,
            r.value(r.a),
            r.value(r.b),
            r.difference()
        );
    }
    Ok(())
}
