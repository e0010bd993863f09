//! `servesim calibrate --engine URL`: calibrates a served engine (vLLM,
//! SGLang, TGI, llama.cpp's `llama-server`, `servesim serve`) through its
//! OpenAI-compatible API and writes the profile `simulate` reads
//! (`[hardware] profile`). The probe workload ([`design`]) makes each cost
//! term identifiable from token arrival times; [`shapes`] turns what came
//! back into timed batch shapes; [`fit`] fits them in the profile's own
//! basis. Requests go out through `observe`'s client (one SSE parser, one
//! way of forcing output lengths).

mod architecture;
pub mod design;
pub mod fit;
mod server;
pub mod shapes;

use architecture::{architecture, check_architecture};
use server::{batching, get, inspect, Server};
pub use server::{describe_batching, gauge, MAX_KV_TOKENS};

use crate::observe::{self, ObserveConfig, Observed, Outcome};
use crate::openai::Endpoint;
use anyhow::{bail, Context, Result};
use design::{Design, Limits, Pilot, Probe, ProbeKind, PREFILL_OUTPUT, SHORT_PROMPT};
use sim::catalog::Dtype;
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
    /// Longest prompt to probe [default: the workload's longest, else half
    /// the server's context, at most 2048].
    pub max_prompt: Option<u32>,
    /// The longest prompt the user's workload sends and where that figure
    /// comes from (`--scenario`): the probes reach it, within the server's
    /// context, so its prefills are measured rather than extrapolated.
    pub workload_prompt: Option<(u32, String)>,
    /// The engine's batching as it was started, when it does not report it:
    /// tokens per iteration (vLLM `--max-num-batched-tokens`, llama.cpp
    /// `-b`), sequences per iteration (vLLM `--max-num-seqs`, llama.cpp
    /// `-np`) and llama.cpp's micro-batch (`-ub`).
    pub max_batched_tokens: Option<u32>,
    pub max_num_seqs: Option<u32>,
    pub ubatch_tokens: Option<u32>,
    /// The server's KV capacity in tokens [default: what its `/metrics`
    /// or `/props` say, else its context × the concurrency probed].
    pub kv_tokens: Option<u64>,
    /// Write the profile even when it cannot be trusted (no held-out
    /// shapes, a fit error past [`FIT_ERROR_MAX_PCT`], a probe family
    /// missing, a served model of another architecture class); the reasons
    /// are kept in its findings.
    pub force: bool,
}

/// Mean error (%) of the fit on its held-out shapes, or on its own fitted
/// ones, past which a profile is not written without `--force`: the
/// llama.cpp runs in docs/calibration.md fitted 4–9 % on a quiet machine
/// and 23–41 % on a busy one.
pub const FIT_ERROR_MAX_PCT: f64 = 15.0;

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
                format!(
                    "no end within the probe's limit of {:.1} s (each pilot request may take a quarter of the budget, the probes what is left of it and a quarter more)",
                    limit.as_secs_f64()
                )
            } else {
                first.error.clone()
            };
            bail!(
                "{} did not complete {} of {n} probe requests (streaming /v1/completions with token-id prompts, max_tokens, ignore_eos): {why}",
                self.args.url,
                bad.len()
            );
        }
        // The gaps are decode steps only when each chunk is one token:
        // a server that packs tokens into chunks, or whose usage block
        // claims another count, cannot be timed token by token.
        for (spec, x) in o.specs.iter().zip(&o.observations) {
            if x.one_chunk(spec.output_tokens) || x.usage_disagrees() {
                bail!(
                    "{} streamed {} chunk(s) for {} tokens asked{}: token gaps cannot be read",
                    self.args.url,
                    x.tokens,
                    spec.output_tokens,
                    x.usage_tokens
                        .map_or(String::new(), |u| format!(" (its usage block claims {u})"))
                );
            }
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
    let mut findings = Vec::new();
    let mut untrusted = Vec::new();
    match check_architecture(a, &server, &arch) {
        Ok(line) => findings.push(line),
        Err(e) if a.force => untrusted.push(e.to_string()),
        Err(e) => return Err(e),
    }
    match a.kv_tokens {
        Some(n) if !(1..=MAX_KV_TOKENS).contains(&n) => bail!(
            "--kv-tokens {n} is no engine's KV capacity (allowed: 1 to {MAX_KV_TOKENS} tokens)"
        ),
        _ => {}
    }
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
    // Prefill probes need their prompt and a few output tokens within the
    // context; the long decodes' shorter prompt is bounded by the design.
    let room = context - PREFILL_OUTPUT;
    let wanted = a
        .max_prompt
        .or(a.workload_prompt.as_ref().map(|w| w.0))
        .unwrap_or((context / 2).min(2048));
    let max_prompt = wanted.clamp(SHORT_PROMPT, room);
    if let (None, Some((n, from))) = (a.max_prompt, &a.workload_prompt) {
        findings.push(if *n > room {
            format!("the workload's longest prompt is {n} tokens ({from}), past the server's context of {context}: probed up to {room}")
        } else {
            format!("prompts probed up to the workload's longest, {n} tokens ({from})")
        });
    }
    let (recorded_batching, batching_line) = batching(a, &server);
    findings.push(batching_line);
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
    // Every request waits at most until the budget and a quarter of it
    // (at least a second) are spent: a stalled server ends the run near
    // its budget, not when the server stops.
    let slack = (a.budget / 4).max(Duration::from_secs(1));
    let limit = || {
        a.budget
            .saturating_add(slack)
            .saturating_sub(started.elapsed())
            .max(Duration::from_secs(1))
    };
    // The pilot's few short requests get a quarter of the budget each at
    // most: a server that cannot answer them in that is not probed further.
    let pilot_limit = || limit().min(slack);
    progress(0.0, 1.0, "pilot");
    // A warm-up, then the pilot: a short and a long prompt with a few gaps.
    p.lone(SHORT_PROMPT, 4, 1, pilot_limit())?;
    let short = p.lone(SHORT_PROMPT, 8, 2, pilot_limit())?;
    let long_pilot = max_prompt.min(512);
    let long = p.lone(long_pilot, 2, 1, pilot_limit())?;
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
        context,
        max_concurrency,
        budget: a.budget.saturating_sub(started.elapsed()),
    };
    let d = design::design(&pilot, &limits).map_err(|e| {
        anyhow::anyhow!(
            "{e} (besides the {:.1} s the pilot took)",
            started.elapsed().as_secs_f64()
        )
    })?;
    if d.max_prompt < max_prompt {
        findings.push(format!(
            "prompts probed up to {} tokens, not {max_prompt}: the budget does not fit longer prefills at this server's speed; longer prompts are extrapolated (give a larger --budget to measure them)",
            d.max_prompt
        ));
    }
    let mut samples = Vec::new();
    let mut concurrency = Vec::new();
    let mut capped: Option<(u32, u32)> = None;
    let mut mixed_samples = Vec::new();
    let mut prefix: Option<(f64, f64)> = None;
    let total = d.estimate.as_secs_f64();
    let mut done = 0.0;
    let mut skipped = Vec::new();
    let mut skipped_essential = Vec::new();
    // How much slower the server runs than the pilot's figures said (a
    // busy machine): the estimates of the probes still to run are scaled
    // by it, so the budget goes to the essential probes first.
    let (mut estimated_s, mut took_s) = (0.0f64, 0.0f64);
    for probe in &d.probes {
        let what = format!(
            "{} prompt {} × {}",
            probe.kind.name(),
            probe.prompt,
            probe.concurrency
        );
        let slowdown = if estimated_s > 0.0 {
            (took_s / estimated_s).max(1.0)
        } else {
            1.0
        };
        let expect = probe.estimate.as_secs_f64() * slowdown;
        if started.elapsed().as_secs_f64() + expect > a.budget.as_secs_f64() {
            if probe.essential {
                skipped_essential.push((what.clone(), expect));
            }
            skipped.push(what);
            continue;
        }
        let probe_started = Instant::now();
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
            limit(),
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
        estimated_s += probe.estimate.as_secs_f64();
        took_s += probe_started.elapsed().as_secs_f64();
        done += probe.estimate.as_secs_f64();
        progress(done, total, &what);
    }
    if let Some((first, _)) = skipped_essential.first() {
        let more: f64 = skipped_essential.iter().map(|(_, s)| s).sum();
        let need = (started.elapsed().as_secs_f64() + more) / 60.0;
        untrusted.push(format!(
            "the budget ran out before {} essential probe(s) (first: {first}) at this server's measured speed ({:.1}× the pilot's estimate); a --budget of {} min would cover them",
            skipped_essential.len(),
            if estimated_s > 0.0 { (took_s / estimated_s).max(1.0) } else { 1.0 },
            (need * 1.15 * 2.0).ceil() / 2.0
        ));
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
            max_context: d.max_prompt + PREFILL_OUTPUT,
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
        elementwise: None,
        bench: None,
        samples,
    };
    let model = Profiled::new(&profile, "the fit");
    profile.held_out = fit::errors(&profile.samples, &model);
    untrusted.extend(trust_problems(&profile, &d, prefix.is_some()));
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
        batching: recorded_batching,
    });
    profile.measurement.wall_s = started.elapsed().as_secs_f64();
    if !untrusted.is_empty() {
        if !a.force {
            bail!(
                "the profile of {} cannot be trusted, so it is not written: {}; give --force to write it anyway",
                a.url,
                untrusted.join("; ")
            );
        }
        if let Some(e) = profile.engine.as_mut() {
            for u in &untrusted {
                e.findings
                    .push(format!("not to be trusted (written with --force): {u}"));
            }
        }
    }
    // The profile must read back as `simulate` reads it.
    Profile::from_toml_str(&profile.to_toml_string(), "the engine profile")
        .context("the fitted profile does not validate")?;
    Ok(profile)
}

/// Why a fitted profile is not to be trusted: no held-out shapes (its
/// error unmeasured), a mean error past [`FIT_ERROR_MAX_PCT`] on the
/// held-out or the fitted shapes, or a probe family the design planned
/// that measured nothing. Empty when it can be.
fn trust_problems(profile: &Profile, d: &Design, prefix_measured: bool) -> Vec<String> {
    let h = &profile.held_out;
    let mut out = Vec::new();
    if h.shapes == 0 {
        out.push(format!(
            "no held-out shapes, so its error is unmeasured (its {} fitted shapes are {:.1} % off on average)",
            profile.samples.iter().filter(|s| s.fitted).count(),
            h.fitted_mape_pct
        ));
    } else if h.mape_pct > FIT_ERROR_MAX_PCT {
        out.push(format!(
            "it misses its {} held-out shapes by {:.1} % on average (at most {FIT_ERROR_MAX_PCT} % allowed; worst {:.1} %): the server's speed changed during the probes (other load, a clock change) or its costs are not this profile's shape; calibrate on a quiet machine",
            h.shapes, h.mape_pct, h.max_error_pct
        ));
    }
    if h.fitted_mape_pct > FIT_ERROR_MAX_PCT {
        out.push(format!(
            "it misses even the shapes it was fitted to by {:.1} % on average (at most {FIT_ERROR_MAX_PCT} % allowed)",
            h.fitted_mape_pct
        ));
    }
    let planned = |k: ProbeKind| d.probes.iter().any(|p| p.kind == k);
    let measured = |kind: &str| profile.samples.iter().any(|s| s.kind == kind);
    let mut missing = Vec::new();
    for (k, kind) in [
        (ProbeKind::Prefill, "prefill"),
        (ProbeKind::Decode, "decode"),
        (ProbeKind::Mixed, "mixed"),
    ] {
        if planned(k) && !measured(kind) {
            missing.push(k.name());
        }
    }
    if planned(ProbeKind::Prefix) && !prefix_measured {
        missing.push(ProbeKind::Prefix.name());
    }
    if !missing.is_empty() {
        out.push(format!(
            "no {} probe measured anything",
            missing.join(", no ")
        ));
    }
    out
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
            workload_prompt: None,
            max_batched_tokens: None,
            max_num_seqs: None,
            ubatch_tokens: None,
            kv_tokens: None,
            force: false,
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
    fn a_profile_without_measured_error_or_a_family_is_not_trusted() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scenarios/validate/cpu-profile.toml"
        );
        let mut p = Profile::load(std::path::Path::new(path)).unwrap();
        let pilot = Pilot {
            ttft_short_ns: 30e6,
            ttft_long_ns: 130e6,
            long_prompt: 512,
            gap_ns: 20e6,
        };
        let limits = Limits {
            max_prompt: 2048,
            context: 8192,
            max_concurrency: 4,
            budget: Duration::from_secs(300),
        };
        let d = design::design(&pilot, &limits).unwrap();
        // Every family measured, errors small: trusted.
        for kind in ["prefill", "decode", "mixed"] {
            if !p.samples.iter().any(|s| s.kind == kind) {
                let mut s = p.samples[0].clone();
                s.kind = kind.into();
                p.samples.push(s);
            }
        }
        p.held_out = FitError {
            shapes: 10,
            mape_pct: 4.0,
            max_error_pct: 9.0,
            fitted_mape_pct: 3.0,
        };
        assert_eq!(trust_problems(&p, &d, true), Vec::<String>::new());
        // No held-out shapes, fitted ones 33 % off: both named.
        p.held_out = FitError {
            shapes: 0,
            mape_pct: 0.0,
            max_error_pct: 0.0,
            fitted_mape_pct: 33.0,
        };
        let why = trust_problems(&p, &d, true);
        assert_eq!(why.len(), 2, "{why:?}");
        assert!(why[0].starts_with("no held-out shapes"), "{why:?}");
        assert!(why[1].contains("fitted to by 33.0 %"), "{why:?}");
        // A held-out error past the threshold; a family that measured nothing.
        p.held_out.shapes = 5;
        p.held_out.mape_pct = 23.0;
        p.held_out.fitted_mape_pct = 2.0;
        p.samples.retain(|s| s.kind != "mixed");
        let why = trust_problems(&p, &d, false);
        assert_eq!(why.len(), 2, "{why:?}");
        assert!(why[0].contains("by 23.0 % on average"), "{why:?}");
        assert_eq!(why[1], "no mixed, no prefix probe measured anything");
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
