//! `servesim calibrate --engine URL`: calibrates a served engine (vLLM,
//! SGLang, TGI, llama.cpp's `llama-server`, `servesim serve`) through its
//! OpenAI-compatible API and writes the profile `simulate` reads
//! (`[hardware] profile`). The probe workload ([`design`]) makes each cost
//! term identifiable from token arrival times; [`shapes`] turns what came
//! back into timed batch shapes; [`fit`] fits them in the profile's own
//! basis. Requests go out through `observe`'s client (one SSE parser, one
//! way of forcing output lengths).

pub mod design;
pub mod fit;
pub mod shapes;

use crate::observe::{self, ObserveConfig, Observed, Outcome};
use crate::openai::Endpoint;
use anyhow::{bail, Context, Result};
use design::{Design, Limits, Pilot, Probe, ProbeKind, PREFILL_OUTPUT, SHORT_PROMPT};
use serde_json::Value;
use sim::catalog::{Dtype, ModelArch};
use sim::profile::*;
use sim::profiled::{Basis, Profiled};
use sim::time::SimTime;
use sim::workload::RequestSpec;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to calibrate and how long it may take.
#[derive(Clone, Debug)]
pub struct EngineArgs {
    /// Base URL, e.g. `http://127.0.0.1:8000`.
    pub url: String,
    pub api_key: Option<String>,
    /// Model name to request [default: the first `/v1/models` lists].
    pub served_model: Option<String>,
    /// Catalog preset of the architecture [default: matched from the
    /// served model's name].
    pub arch: Option<String>,
    /// Dtype the server holds weights and KV in (`f32`, `f16`, `bf16`).
    pub dtype: String,
    pub budget: Duration,
    pub max_concurrency: u32,
    /// Longest prompt to probe [default: half the server's context, at most 2048].
    pub max_prompt: Option<u32>,
    /// The server's KV capacity in tokens [default: what its `/metrics`
    /// or `/props` say, else its context × the concurrency probed].
    pub kv_tokens: Option<u64>,
}

/// What the server said about itself.
#[derive(Clone, Debug, Default)]
struct Server {
    served: String,
    owned_by: String,
    max_model_len: Option<u32>,
    /// The running-requests gauge of its `/metrics`, when it has one.
    running_gauge: Option<&'static str>,
    family: String,
    kv_tokens: Option<(u64, String)>,
    slots: Option<u32>,
}

fn client(timeout: Duration) -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(5))
        .timeout(timeout)
        .build()?)
}

/// GET `path`: the status and body, or the transport error.
fn get(url: &str, key: Option<&str>, path: &str) -> std::result::Result<(u16, String), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let c = client(Duration::from_secs(10)).map_err(|e| e.to_string())?;
        let mut r = c.get(format!("{}{path}", url.trim_end_matches('/')));
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        let resp = r
            .send()
            .await
            .map_err(|e| crate::observe::error_chain(&e))?;
        let status = resp.status().as_u16();
        Ok((status, resp.text().await.unwrap_or_default()))
    })
}

/// One gauge's value summed over its series (`name{labels} value` or
/// `name value` lines); `None` when absent.
pub fn gauge(text: &str, name: &str) -> Option<f64> {
    let mut sum = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            continue;
        }
        let v = rest.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok());
        if let Some(v) = v {
            sum = Some(sum.unwrap_or(0.0) + v);
        }
    }
    sum
}

/// A label's value on the first series of `name`.
fn label(text: &str, name: &str, key: &str) -> Option<String> {
    let line = text
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))?;
    let pat = format!("{key}=\"");
    let at = line.find(&pat)? + pat.len();
    Some(line[at..].split('"').next()?.to_string())
}

fn inspect(a: &EngineArgs) -> Result<Server> {
    let key = a.api_key.as_deref();
    let (status, body) = get(&a.url, key, "/v1/models").map_err(|e| {
        anyhow::anyhow!(
            "cannot reach {}: {e} (is the server running, and is this its base URL, e.g. http://127.0.0.1:8000?)",
            a.url
        )
    })?;
    if status == 401 || status == 403 {
        bail!("{} refused GET /v1/models with HTTP {status}: it needs an API key (--api-key or SERVESIM_API_KEY)", a.url);
    }
    let short = |s: &str| s.chars().take(120).collect::<String>().replace('\n', " ");
    if status != 200 {
        bail!(
            "{} does not answer like an OpenAI-compatible server: GET /v1/models gave HTTP {status} ({})",
            a.url,
            short(&body)
        );
    }
    let v: Value = serde_json::from_str(&body).map_err(|_| {
        anyhow::anyhow!(
            "{} does not answer like an OpenAI-compatible server: GET /v1/models is not JSON ({})",
            a.url,
            short(&body)
        )
    })?;
    let models = v["data"].as_array().filter(|m| !m.is_empty()).ok_or_else(|| {
        anyhow::anyhow!(
            "{} does not answer like an OpenAI-compatible server: GET /v1/models lists no models in `data` ({})",
            a.url,
            short(&body)
        )
    })?;
    let ids: Vec<&str> = models.iter().filter_map(|m| m["id"].as_str()).collect();
    let pick = match &a.served_model {
        Some(want) => models
            .iter()
            .find(|m| m["id"].as_str() == Some(want))
            .ok_or_else(|| anyhow::anyhow!("{} serves {}, not {want:?}", a.url, ids.join(", ")))?,
        None => &models[0],
    };
    let mut s = Server {
        served: pick["id"].as_str().unwrap_or_default().to_string(),
        owned_by: pick["owned_by"].as_str().unwrap_or_default().to_string(),
        max_model_len: pick["max_model_len"]
            .as_u64()
            .or_else(|| pick["meta"]["n_ctx_train"].as_u64())
            .map(|n| n as u32),
        ..Server::default()
    };
    if let Ok((200, text)) = get(&a.url, key, "/metrics") {
        if gauge(&text, "vllm:num_requests_running").is_some() {
            s.running_gauge = Some("vllm:num_requests_running");
            s.family = "vLLM-style /metrics".into();
            let blocks = label(&text, "vllm:cache_config_info", "num_gpu_blocks")
                .and_then(|b| b.parse::<u64>().ok());
            let size = label(&text, "vllm:cache_config_info", "block_size")
                .and_then(|b| b.parse::<u64>().ok());
            if let (Some(b), Some(z)) = (blocks, size) {
                s.kv_tokens = Some((
                    b * z,
                    format!("vllm:cache_config_info: {b} blocks of {z} tokens"),
                ));
            }
        } else if gauge(&text, "llamacpp:requests_processing").is_some() {
            s.running_gauge = Some("llamacpp:requests_processing");
            s.family = "llama.cpp /metrics".into();
        }
    }
    // llama.cpp's server says how many slots it has and each one's context.
    if let Ok((200, text)) = get(&a.url, key, "/props") {
        if let Ok(p) = serde_json::from_str::<Value>(&text) {
            let slots = p["total_slots"].as_u64();
            let ctx = p["default_generation_settings"]["n_ctx"].as_u64();
            if let (Some(n), Some(c)) = (slots, ctx) {
                s.slots = Some(n as u32);
                s.max_model_len = Some(c as u32);
                if s.family.is_empty() {
                    s.family = "llama.cpp /props".into();
                }
                s.kv_tokens
                    .get_or_insert((n * c, format!("/props: {n} slots of {c} tokens")));
            }
        }
    }
    Ok(s)
}

/// The architecture: `--model`, else the served name matched to a preset.
fn architecture(a: &EngineArgs, s: &Server) -> Result<(ModelArch, String)> {
    let known = || sim::catalog::model_keys().join(", ");
    if let Some(p) = &a.arch {
        return match sim::catalog::model(p) {
            Some((m, _)) => Ok((m, format!("catalog preset {p}"))),
            None => bail!("unknown model preset {p:?} for --model; known: {}", known()),
        };
    }
    let id = s.served.to_ascii_lowercase();
    let base = id.rsplit('/').next().unwrap_or(&id).to_string();
    let stem = base.split('.').next().unwrap_or(&base).to_string();
    let mut tries = vec![id.clone(), base.clone(), stem.clone()];
    for t in [&base, &stem] {
        for suffix in ["-instruct", "-chat", "-it"] {
            if let Some(x) = t.strip_suffix(suffix) {
                tries.push(x.to_string());
            }
        }
    }
    for t in &tries {
        if let Some((m, _)) = sim::catalog::model(t) {
            return Ok((
                m,
                format!(
                    "catalog preset {t}, matched from the served name {:?}",
                    s.served
                ),
            ));
        }
    }
    bail!(
        "{} serves {:?}, which no catalog preset matches; name its architecture with --model (one of: {})",
        a.url,
        s.served,
        known()
    )
}

/// Polls the running gauge until stopped; the most it saw.
fn watch_running(
    a: &EngineArgs,
    gauge_name: &'static str,
    stop: Arc<AtomicBool>,
    seen: Arc<AtomicU32>,
) -> std::thread::JoinHandle<()> {
    let (url, key) = (a.url.clone(), a.api_key.clone());
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            if let Ok((200, text)) = get(&url, key.as_deref(), "/metrics") {
                if let Some(v) = gauge(&text, gauge_name) {
                    seen.fetch_max(v.round() as u32, Ordering::Relaxed);
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

/// Sends requests and checks that the server answered them.
struct Prober<'a> {
    args: &'a EngineArgs,
    server: Server,
    /// Distinct prompts: every request gets a fresh prefix hash unless a
    /// probe repeats one on purpose.
    next_hash: u64,
    requests: u32,
}

impl Prober<'_> {
    fn spec(&mut self, at: Duration, prompt: u32, output: u32, hash: Option<u64>) -> RequestSpec {
        let h = hash.unwrap_or_else(|| {
            self.next_hash += 1;
            0x5EED_0000_0000 + self.next_hash
        });
        RequestSpec {
            arrival: SimTime(at.as_nanos() as u64),
            prompt_tokens: prompt,
            output_tokens: output,
            prefix_hashes: vec![h],
            hash_block_tokens: prompt.max(1),
            ..RequestSpec::default()
        }
    }

    fn send(
        &mut self,
        specs: Vec<RequestSpec>,
        connections: usize,
        limit: Duration,
    ) -> Result<Observed> {
        let cfg = ObserveConfig {
            url: self.args.url.clone(),
            model: self.server.served.clone(),
            endpoint: Endpoint::Completions,
            api_key: self.args.api_key.clone(),
            max_requests: specs.len() as u64,
            max_duration: limit,
            max_connections: connections,
            request_timeout: limit,
            cancel_share: 0.0,
            cancel_after: 0,
        };
        let n = specs.len();
        self.requests += n as u32;
        let o = observe::run(&cfg, specs, 0)?;
        let bad: Vec<&observe::Observation> = o
            .observations
            .iter()
            .filter(|x| x.outcome != Outcome::Completed)
            .collect();
        if let Some(first) = bad.first() {
            let why = if first.error.is_empty() {
                "no answer within the probe's time".to_string()
            } else {
                first.error.clone()
            };
            bail!(
                "{} did not complete {} of {n} probe requests (streaming /v1/completions with token-id prompts, max_tokens, ignore_eos): {why}",
                self.args.url,
                bad.len()
            );
        }
        if let Some(x) = o
            .observations
            .iter()
            .find(|x| x.token_times.len() < x.tokens.min(2) as usize)
        {
            bail!(
                "{} streamed {} tokens in fewer chunks: token gaps cannot be read",
                self.args.url,
                x.tokens
            );
        }
        Ok(o)
    }

    fn lone(
        &mut self,
        prompt: u32,
        output: u32,
        repeats: u32,
        limit: Duration,
    ) -> Result<Observed> {
        let specs = (0..repeats)
            .map(|_| self.spec(Duration::ZERO, prompt, output, None))
            .collect();
        self.send(specs, 1, limit)
    }
}

fn median_of(mut v: Vec<u64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    shapes::median(&v) as f64
}

/// The host's own copy bandwidth (what a swap of KV over the host moves
/// at, at best), measured on this machine: the API shows no device copies.
fn host_copy_bytes_per_s() -> f64 {
    let n = 64 << 20;
    let src = vec![1u8; n];
    let mut dst = vec![0u8; n];
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&dst);
        best = best.min(t.elapsed().as_secs_f64());
    }
    n as f64 / best.max(1e-9)
}

/// Spread of a sample's repetitions, percent of its median (p90 − p10).
fn spread_pct(s: &Sample) -> f64 {
    let mut t = s.times_ns.clone();
    t.sort_unstable();
    let at = |q: f64| t[((t.len() - 1) as f64 * q).round() as usize] as f64;
    100.0 * (at(0.9) - at(0.1)) / (s.median_ns.max(1) as f64)
}

fn describe(s: &Sample) -> String {
    match s.kind.as_str() {
        "prefill" => format!("TTFT of a {}-token prompt", s.prefill[0][0]),
        _ if s.prefill.is_empty() => format!(
            "decode step at batch {} (context {})",
            s.decode.len(),
            s.decode.iter().map(|&c| c as u64).sum::<u64>()
        ),
        k => format!("{k} shape"),
    }
}

/// Calibrates the engine at `a.url`. `progress(done, total, what)` is told
/// each probe's share of the estimated time as it ends.
pub fn calibrate(a: &EngineArgs, progress: &mut dyn FnMut(f64, f64, &str)) -> Result<Profile> {
    let started = Instant::now();
    let server = inspect(a)?;
    let (arch, arch_source) = architecture(a, &server)?;
    let dtype = match a.dtype.as_str() {
        "f32" => Dtype::Fp32,
        "f16" => Dtype::Fp16,
        "bf16" => Dtype::Bf16,
        d => bail!("unknown --dtype {d:?}; allowed: f32, f16, bf16"),
    };
    let context = server
        .max_model_len
        .unwrap_or(arch.max_context)
        .max(2 * SHORT_PROMPT + 8);
    let max_prompt = a
        .max_prompt
        .unwrap_or((context / 2).min(2048))
        .clamp(SHORT_PROMPT, context / 2);
    let max_concurrency = server
        .slots
        .map_or(a.max_concurrency, |n| n.min(a.max_concurrency))
        .max(1);
    let mut p = Prober {
        args: a,
        server: server.clone(),
        next_hash: 0,
        requests: 0,
    };
    let probe_limit = a.budget.max(Duration::from_secs(30));
    progress(0.0, 1.0, "pilot");
    // A warm-up, then the pilot: a short and a long prompt with a few gaps.
    p.lone(SHORT_PROMPT, 4, 1, probe_limit)?;
    let short = p.lone(SHORT_PROMPT, 8, 2, probe_limit)?;
    let long_pilot = max_prompt.min(512);
    let long = p.lone(long_pilot, 2, 1, probe_limit)?;
    let gaps: Vec<u64> = short
        .observations
        .iter()
        .flat_map(|x| {
            x.token_times
                .windows(2)
                .map(|w| (w[1] - w[0]).as_nanos() as u64)
        })
        .collect();
    let pilot = Pilot {
        ttft_short_ns: median_of(shapes::ttfts(&short)),
        ttft_long_ns: median_of(shapes::ttfts(&long)),
        long_prompt: long_pilot,
        gap_ns: median_of(gaps),
    };
    let limits = Limits {
        max_prompt,
        max_concurrency,
        budget: a.budget.saturating_sub(started.elapsed()),
    };
    let d = design::design(&pilot, &limits).map_err(anyhow::Error::msg)?;
    let mut samples = Vec::new();
    let mut findings = Vec::new();
    let mut concurrency = Vec::new();
    let mut capped: Option<(u32, u32)> = None;
    let mut mixed_samples = Vec::new();
    let mut prefix: Option<(f64, f64)> = None;
    let total = d.estimate.as_secs_f64();
    let mut done = 0.0;
    let mut skipped = Vec::new();
    for probe in &d.probes {
        let what = format!(
            "{} prompt {} × {}",
            probe.kind.name(),
            probe.prompt,
            probe.concurrency
        );
        if started.elapsed() + probe.estimate > a.budget {
            skipped.push(what);
            continue;
        }
        progress(done, total, &what);
        let watch = (matches!(probe.kind, ProbeKind::Decode | ProbeKind::Mixed))
            .then_some(server.running_gauge)
            .flatten()
            .map(|g| {
                let stop = Arc::new(AtomicBool::new(false));
                let seen = Arc::new(AtomicU32::new(0));
                (watch_running(a, g, stop.clone(), seen.clone()), stop, seen)
            });
        run_probe(
            &mut p,
            probe,
            &pilot,
            &d,
            probe_limit,
            &mut samples,
            &mut mixed_samples,
            &mut prefix,
            &mut capped,
        )?;
        if let Some((h, stop, seen)) = watch {
            stop.store(true, Ordering::Relaxed);
            let _ = h.join();
            if probe.kind == ProbeKind::Decode && probe.prompt == SHORT_PROMPT {
                concurrency.push([probe.concurrency, seen.load(Ordering::Relaxed)]);
            }
        } else if probe.kind == ProbeKind::Decode && probe.prompt == SHORT_PROMPT {
            concurrency.push([probe.concurrency, 0]);
        }
        done += probe.estimate.as_secs_f64();
        progress(done, total, &what);
    }
    if !skipped.is_empty() {
        findings.push(format!(
            "the budget ran out before {} probe(s): {}",
            skipped.len(),
            skipped.join(", ")
        ));
    }
    // Too erratic to fit: repeated measurements of one shape far apart.
    let mut spreads: Vec<(f64, &Sample)> = samples
        .iter()
        .filter(|s| s.fitted && s.times_ns.len() >= 3)
        .map(|s| (spread_pct(s), s))
        .collect();
    spreads.sort_by(|x, y| x.0.total_cmp(&y.0));
    if let Some(&(mid, _)) = spreads.get(spreads.len() / 2) {
        if mid > 50.0 {
            let (worst, s) = spreads[spreads.len() - 1];
            bail!(
                "{} answers too erratically to fit: repeated measurements of one shape spread {mid:.0} % (p90 − p10 over the median) at the median shape, {worst:.0} % for the {} ({:.1}–{:.1} ms); quiet the server (other load, power saving) and try again",
                a.url,
                describe(s),
                s.min_ns as f64 / 1e6,
                s.max_ns as f64 / 1e6
            );
        }
    }
    let basis = Basis {
        token_knots: d.token_knots.clone(),
        row_knots: d.row_knots.clone(),
    };
    let fitted_terms = fit::fit(&samples, &basis);
    samples.extend(mixed_samples);
    let weight_bytes = arch.total_params() * dtype.weight_bytes();
    let kv_bytes_per_token = arch.kv_bytes_per_token(dtype);
    let (kv_tokens, kv_source) = match (a.kv_tokens, &server.kv_tokens) {
        (Some(n), _) => (n, "--kv-tokens".to_string()),
        (None, Some((n, src))) => (*n, src.clone()),
        (None, None) => (
            context as u64 * max_concurrency as u64,
            format!("not exposed by the server: its context ({context}) × the concurrency probed ({max_concurrency}); give --kv-tokens for the real figure"),
        ),
    };
    findings.push(format!("KV capacity {kv_tokens} tokens ({kv_source})"));
    if let Some((asked, ran)) = capped {
        findings.push(format!(
            "asked for {asked} requests at once, at most {ran} decoded together: the server caps concurrency"
        ));
    }
    if let Some((first, second)) = prefix {
        findings.push(if second < 0.7 * first {
            format!(
                "prefix cache: the same {}-token prompt's TTFT fell from {:.1} ms to {:.1} ms the second time (the server caches prefixes)",
                d.long_prompt,
                first / 1e6,
                second / 1e6
            )
        } else {
            format!(
                "no prefix caching seen: the same {}-token prompt took {:.1} ms, then {:.1} ms",
                d.long_prompt,
                first / 1e6,
                second / 1e6
            )
        });
    }
    let usable_fraction = 0.9;
    let mut profile = Profile {
        version: PROFILE_VERSION,
        created_by: format!("servesim-calibrate-engine {}", env!("CARGO_PKG_VERSION")),
        device: DeviceInfo {
            spec: format!("engine {}", a.url),
            name: if server.owned_by.is_empty() {
                "an OpenAI-compatible server".into()
            } else {
                format!("an OpenAI-compatible server (owned_by {:?})", server.owned_by)
            },
            driver: if server.family.is_empty() {
                "no /metrics".into()
            } else {
                server.family.clone()
            },
            threads: 0,
        },
        model: ProfileModel {
            name: arch.name.clone(),
            source: format!("{arch_source}; rope and norm settings are not used for a served engine"),
            layers: arch.layers,
            hidden_size: arch.hidden_size,
            num_heads: arch.num_heads,
            num_kv_heads: arch.num_kv_heads,
            head_dim: arch.head_dim,
            intermediate_size: arch.intermediate_size,
            vocab_size: arch.vocab_size,
            tied_embeddings: arch.tied_embeddings,
            max_context: context,
            rope_theta: 10000.0,
            rms_norm_eps: 1e-5,
            attention_bias: false,
            rope_layout: "half".into(),
            dtype: a.dtype.clone(),
            weights: WeightsInfo::Served {
                url: a.url.clone(),
                model: server.served.clone(),
            },
        },
        memory: ProfileMemory {
            device_bytes: (weight_bytes + kv_tokens as f64 * kv_bytes_per_token) / usable_fraction,
            weight_bytes,
            kv_bytes_per_token,
            activation_bytes: 0.0,
            runtime_bytes: 0.0,
            method: format!(
                "through the API: weights and KV per token from the architecture at {}; KV capacity {kv_tokens} tokens ({kv_source}); device_bytes is what leaves that capacity at gpu_memory_utilization {usable_fraction}",
                a.dtype
            ),
        },
        measurement: MeasurementInfo {
            warmup: 1,
            repetitions: d.probes.iter().map(|p| p.repeats).max().unwrap_or(1),
            quick: a.budget < Duration::from_secs(300),
            max_context: max_prompt + PREFILL_OUTPUT,
            wall_s: 0.0,
            host_copy_bytes_per_s: host_copy_bytes_per_s(),
            extra_rounds: 0,
            noise: vec![],
            attention: None,
            host: None,
        },
        fit: fitted_terms,
        held_out: FitError::default(),
        engine: None,
        samples,
    };
    let model = Profiled::new(&profile, "the fit");
    profile.held_out = fit::errors(&profile.samples, &model);
    for s in profile.samples.iter().filter(|s| s.kind == "mixed") {
        let mut alone = sim::cost::BatchShape::default();
        for &c in &s.decode {
            alone.add_decode(c as u64);
        }
        findings.push(format!(
            "a {}-token prefill joining {} decodes made their step {:.1} ms (one mixed iteration predicted: {:.1} ms; the decodes alone: {:.1} ms)",
            s.prefill[0][0],
            s.decode.len(),
            s.median_ns as f64 / 1e6,
            model.predict_ns(&s.shape()) / 1e6,
            model.predict_ns(&alone) / 1e6
        ));
    }
    // The mixed step shows how much of the per-request term the server
    // spends outside its iterations: the fit charges all of it to the
    // prefill's iteration, so a decoder's step with a joining prefill comes
    // out shorter than predicted by that much.
    let outside: Vec<u64> = profile
        .samples
        .iter()
        .filter(|s| s.kind == "mixed")
        .map(|s| (model.predict_ns(&s.shape()) - s.median_ns as f64).max(0.0) as u64)
        .collect();
    let f = &profile.fit;
    let request_ns = if outside.is_empty() {
        f.prefill_seq_ns
    } else {
        median_of(outside).min(f.prefill_seq_ns)
    };
    let floor = profile
        .samples
        .iter()
        .find(|s| s.fitted && s.kind == "prefill" && s.prefill[0][0] == 1)
        .map_or(0.0, |s| s.median_ns as f64);
    let slope = |knots: &[u32], v: &[f64]| v[1] / (knots[1] - knots[0]).max(1) as f64;
    profile.engine = Some(EngineProbe {
        url: a.url.clone(),
        server: if server.family.is_empty() {
            server.owned_by.clone()
        } else {
            format!("{} ({})", server.owned_by, server.family)
        },
        served_model: server.served.clone(),
        requests: p.requests,
        budget_s: a.budget.as_secs_f64(),
        host: HostTerms {
            ttft_floor_ns: floor,
            request_ns,
            step_ns: f.step_ns,
            seq_ns: slope(&f.row_knots, &f.row_ns) + slope(&f.token_knots, &f.token_ns),
        },
        concurrency,
        findings,
    });
    profile.measurement.wall_s = started.elapsed().as_secs_f64();
    // The profile must read back as `simulate` reads it.
    Profile::from_toml_str(&profile.to_toml_string(), "the engine profile")
        .context("the fitted profile does not validate")?;
    Ok(profile)
}

#[allow(clippy::too_many_arguments)]
fn run_probe(
    p: &mut Prober,
    probe: &Probe,
    pilot: &Pilot,
    d: &Design,
    limit: Duration,
    samples: &mut Vec<Sample>,
    mixed: &mut Vec<Sample>,
    prefix: &mut Option<(f64, f64)>,
    capped: &mut Option<(u32, u32)>,
) -> Result<()> {
    match probe.kind {
        ProbeKind::Prefill => {
            let o = p.lone(probe.prompt, probe.output, probe.repeats, limit)?;
            samples.extend(shapes::lone(&o, probe.prompt, probe.fitted));
        }
        ProbeKind::Decode => {
            let specs = (0..probe.concurrency)
                .map(|_| p.spec(Duration::ZERO, probe.prompt, probe.output, None))
                .collect();
            let o = p.send(specs, probe.concurrency as usize, limit)?;
            let mut gaps = shapes::decode_gaps(&o);
            let most = gaps.iter().map(|g| g.batch).max().unwrap_or(0);
            if most < probe.concurrency && capped.is_none_or(|c| c.1 > most) {
                *capped = Some((probe.concurrency, most));
            }
            // Only the steady batch: the few steps of smaller batches as
            // requests start or end apart are where a token's jitter can
            // put a gap in the wrong batch.
            gaps.retain(|g| g.batch == most);
            samples.extend(shapes::decode_samples(&gaps, probe.fitted));
        }
        ProbeKind::Mixed => {
            for _ in 0..probe.repeats {
                let decoders = probe.concurrency - 1;
                // The joiner arrives once the decoders are decoding.
                let join_at = Duration::from_nanos(
                    (pilot.ttft_short_ns * 1.5 + 8.0 * pilot.gap_ns * (1.0 + 0.5 * decoders as f64))
                        as u64,
                );
                let mut specs: Vec<RequestSpec> = (0..decoders)
                    .map(|_| p.spec(Duration::ZERO, SHORT_PROMPT, probe.output, None))
                    .collect();
                specs.push(p.spec(join_at, probe.prompt, 2, None));
                let o = p.send(specs, probe.concurrency as usize, limit)?;
                if let Some(s) = shapes::mixed_sample(&o, decoders as usize) {
                    mixed.push(s);
                }
            }
        }
        ProbeKind::Prefix => {
            p.next_hash += 1;
            let h = 0x5EED_0000_0000 + p.next_hash;
            let specs = (0..2)
                .map(|_| p.spec(Duration::ZERO, d.long_prompt, 1, Some(h)))
                .collect();
            let o = p.send(specs, 1, limit)?;
            let t = shapes::ttfts(&o);
            if t.len() == 2 {
                *prefix = Some((t[0] as f64, t[1] as f64));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_sum_their_series_and_labels_are_read() {
        let text = "# HELP vllm:num_requests_running x\nvllm:num_requests_running{model_name=\"a\"} 3.0\nvllm:num_requests_running{model_name=\"b\"} 1\nvllm:num_requests_running_total 9\nllamacpp:requests_processing 2\nvllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"1000\"} 1.0\n";
        assert_eq!(gauge(text, "vllm:num_requests_running"), Some(4.0));
        assert_eq!(gauge(text, "llamacpp:requests_processing"), Some(2.0));
        assert_eq!(gauge(text, "vllm:num_requests_waiting"), None);
        assert_eq!(
            label(text, "vllm:cache_config_info", "num_gpu_blocks").as_deref(),
            Some("1000")
        );
        assert_eq!(
            label(text, "vllm:cache_config_info", "block_size").as_deref(),
            Some("16")
        );
    }

    fn args(url: &str) -> EngineArgs {
        EngineArgs {
            url: url.into(),
            api_key: None,
            served_model: None,
            arch: None,
            dtype: "bf16".into(),
            budget: Duration::from_secs(60),
            max_concurrency: 4,
            max_prompt: None,
            kv_tokens: None,
        }
    }

    #[test]
    fn an_unreachable_server_is_one_line_naming_the_url() {
        // A port nothing listens on: bind one, then free it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let e = calibrate(&args(&url), &mut |_, _, _| {})
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(&format!("cannot reach {url}: ")), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn a_server_that_is_not_openai_compatible_is_named_so() {
        let router =
            axum::Router::new().route("/v1/models", axum::routing::get(|| async { "hello" }));
        let s = crate::spawn("127.0.0.1:0".parse().unwrap(), router).unwrap();
        let url = format!("http://{}", s.addr);
        let e = calibrate(&args(&url), &mut |_, _, _| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not answer like an OpenAI-compatible server: GET /v1/models is not JSON (hello)"), "{e}");
        let router = axum::Router::new();
        let s2 = crate::spawn("127.0.0.1:0".parse().unwrap(), router).unwrap();
        let url = format!("http://{}", s2.addr);
        let e = calibrate(&args(&url), &mut |_, _, _| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("GET /v1/models gave HTTP 404"), "{e}");
        drop(s);
    }

    #[test]
    fn served_names_match_catalog_presets() {
        let a = args("http://x");
        let s = |id: &str| Server {
            served: id.into(),
            ..Server::default()
        };
        let (m, src) = architecture(&a, &s("HuggingFaceTB/SmolLM2-135M-Instruct")).unwrap();
        assert_eq!(
            m.name,
            sim::catalog::model("smollm2-135m").unwrap().0.name,
            "{src}"
        );
        let (m, _) = architecture(&a, &s("SmolLM2-135M-Instruct.Q4_1.gguf")).unwrap();
        assert_eq!(m.layers, 30);
        let e = architecture(&a, &s("my-own-model"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("name its architecture with --model"), "{e}");
    }
}
