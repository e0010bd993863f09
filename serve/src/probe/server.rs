//! What a served engine says about itself: its identity, context, KV
//! capacity and slots from `/v1/models`, `/metrics` and `/props` (each body
//! read bounded, each figure range-checked), and the batching it runs.

use super::EngineArgs;
use crate::wire;
use anyhow::{bail, Result};
use serde_json::Value;
use sim::profile::*;
use std::time::Duration;

/// What the server said about itself.
#[derive(Clone, Debug, Default)]
pub(super) struct Server {
    pub(super) served: String,
    pub(super) owned_by: String,
    pub(super) max_model_len: Option<u32>,
    /// The running-requests gauge of its `/metrics`, when it has one.
    pub(super) running_gauge: Option<&'static str>,
    pub(super) family: String,
    pub(super) kv_tokens: Option<(u64, String)>,
    pub(super) slots: Option<u32>,
    /// llama.cpp's `/v1/models` `meta`: the model's width and parameters.
    pub(super) hidden_size: Option<u64>,
    pub(super) params: Option<u64>,
    /// llama.cpp's `n_batch` and `n_ubatch`, where its `/props` reports them.
    pub(super) n_batch: Option<u64>,
    pub(super) n_ubatch: Option<u64>,
}

pub(super) fn client(timeout: Duration) -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(5))
        .timeout(timeout)
        .build()?)
}

/// GET `path`: the status and body (at most [`wire::MAX_BODY_BYTES`], by
/// a 10 s deadline), or why not.
pub(super) fn get(
    url: &str,
    key: Option<&str>,
    path: &str,
) -> std::result::Result<(u16, String), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let limit = Duration::from_secs(10);
        let deadline = tokio::time::Instant::now() + limit;
        let c = client(limit).map_err(|e| e.to_string())?;
        let mut r = c.get(format!("{}{path}", url.trim_end_matches('/')));
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        let resp = tokio::time::timeout_at(deadline, r.send())
            .await
            .map_err(|_| format!("no answer to GET {path} within {} s", limit.as_secs()))?
            .map_err(|e| crate::observe::error_chain(&e))?;
        let status = resp.status().as_u16();
        let body = wire::body(resp, wire::MAX_BODY_BYTES, deadline)
            .await
            .map_err(|e| match e {
                wire::ReadError::TooLarge(cap) => format!(
                    "the body of GET {path} is over the {} cap (a server's {path} is far smaller; this one is misbehaving)",
                    wire::bytes(cap)
                ),
                wire::ReadError::Timeout => format!(
                    "the body of GET {path} did not end within {} s",
                    limit.as_secs()
                ),
                e => format!("GET {path}: {e}"),
            })?;
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    })
}

/// A GET whose failure to answer is fine (the server has no such route)
/// but whose misbehaving body is not: `Ok(None)` for a transport error or
/// a status other than 200.
pub(super) fn get_optional(a: &EngineArgs, path: &str) -> Result<Option<String>> {
    match get(&a.url, a.api_key.as_deref(), path) {
        Ok((200, text)) => Ok(Some(text)),
        Ok(_) => Ok(None),
        Err(e) if e.starts_with("the body of") => bail!("{}: {e}", a.url),
        Err(_) => Ok(None),
    }
}

/// A figure the server reports about itself, checked to be one an engine
/// can have: a whole number in `1..=max`, named with its source so that a
/// wrong one says where it came from and how to override it.
pub(super) fn figure(v: &Value, source: &str, max: u64, fix: &str) -> Result<Option<u64>> {
    match v {
        Value::Null => Ok(None),
        v => match v.as_u64() {
            Some(n) if (1..=max).contains(&n) => Ok(Some(n)),
            _ => bail!(
                "the server reports {source} = {v}, which no engine has (allowed: a whole number from 1 to {max}); {fix}"
            ),
        },
    }
}

/// Most KV tokens a profile takes: 2^32 is past any engine's cache (vLLM's
/// largest deployments hold a few million), and block counts are u32.
pub const MAX_KV_TOKENS: u64 = u32::MAX as u64;

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
pub(super) fn label(text: &str, name: &str, key: &str) -> Option<String> {
    let line = text
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))?;
    // The whole key: `block_size` is not the tail of `cpu_block_size`.
    let at = [b'{', b','].iter().find_map(|&sep| {
        let pat = format!("{}{key}=\"", sep as char);
        line.find(&pat).map(|i| i + pat.len())
    })?;
    Some(line[at..].split('"').next()?.to_string())
}

pub(super) fn inspect(a: &EngineArgs) -> Result<Server> {
    let key = a.api_key.as_deref();
    let (status, body) = get(&a.url, key, "/v1/models").map_err(|e| {
        if e.starts_with("the body of") {
            anyhow::anyhow!("{}: {e}", a.url)
        } else {
            anyhow::anyhow!(
                "cannot reach {}: {e} (is the server running, and is this its base URL, e.g. http://127.0.0.1:8000?)",
                a.url
            )
        }
    })?;
    if status == 401 || status == 403 {
        bail!("{} refused GET /v1/models with HTTP {status}: it needs an API key (--api-key or SERVESIM_API_KEY)", a.url);
    }
    let short = |s: &str| s.chars().take(120).collect::<String>().replace('\n', " ");
    if status != 200 {
        let base = a.url.trim_end_matches('/');
        let hint = if status == 404 && base.ends_with("/v1") {
            format!(
                "; the URL is the server's base, without /v1: give {}",
                base.trim_end_matches("/v1")
            )
        } else {
            String::new()
        };
        bail!(
            "{} does not answer like an OpenAI-compatible server: GET /v1/models gave HTTP {status} ({}){hint}",
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
    let fix_len = "give --max-prompt to probe within the context it really has";
    let max_model_len = match figure(
        &pick["max_model_len"],
        "max_model_len in /v1/models",
        u32::MAX as u64,
        fix_len,
    )? {
        Some(n) => Some(n),
        None => figure(
            &pick["meta"]["n_ctx_train"],
            "meta.n_ctx_train in /v1/models",
            u32::MAX as u64,
            fix_len,
        )?,
    };
    let mut s = Server {
        served: pick["id"].as_str().unwrap_or_default().to_string(),
        owned_by: pick["owned_by"].as_str().unwrap_or_default().to_string(),
        max_model_len: max_model_len.map(|n| n as u32),
        hidden_size: pick["meta"]["n_embd"].as_u64(),
        params: pick["meta"]["n_params"].as_u64(),
        ..Server::default()
    };
    let fix_kv = "give --kv-tokens with the real capacity";
    if let Some(text) = get_optional(a, "/metrics")? {
        if gauge(&text, "vllm:num_requests_running").is_some() {
            s.running_gauge = Some("vllm:num_requests_running");
            s.family = "vLLM-style /metrics".into();
            let read = |key: &str| -> Result<Option<u64>> {
                // A label that is not a number ("None" before the cache
                // is sized) says nothing; a number must be one an engine has.
                match label(&text, "vllm:cache_config_info", key)
                    .and_then(|b| b.parse::<i128>().ok())
                {
                    None => Ok(None),
                    Some(b) => figure(
                        &u64::try_from(b).map_or(Value::from(b as f64), Value::from),
                        &format!("vllm:cache_config_info {key} in /metrics"),
                        MAX_KV_TOKENS,
                        fix_kv,
                    ),
                }
            };
            if let (Some(b), Some(z)) = (read("num_gpu_blocks")?, read("block_size")?) {
                let n = b.checked_mul(z).filter(|&n| n <= MAX_KV_TOKENS).ok_or_else(|| {
                    anyhow::anyhow!("the server reports a KV cache of {b} blocks of {z} tokens in /metrics, past {MAX_KV_TOKENS} tokens; {fix_kv}")
                })?;
                s.kv_tokens = Some((
                    n,
                    format!("vllm:cache_config_info: {b} blocks of {z} tokens"),
                ));
            }
        } else if gauge(&text, "llamacpp:requests_processing").is_some() {
            s.running_gauge = Some("llamacpp:requests_processing");
            s.family = "llama.cpp /metrics".into();
        }
    }
    // llama.cpp's server says how many slots it has and each one's context.
    if let Some(text) = get_optional(a, "/props")? {
        if let Ok(p) = serde_json::from_str::<Value>(&text) {
            let slots = figure(&p["total_slots"], "total_slots in /props", 1 << 16, fix_kv)?;
            let ctx = figure(
                &p["default_generation_settings"]["n_ctx"],
                "default_generation_settings.n_ctx in /props",
                u32::MAX as u64,
                fix_len,
            )?;
            let dgs = &p["default_generation_settings"];
            for (key, at) in [("n_batch", &mut s.n_batch), ("n_ubatch", &mut s.n_ubatch)] {
                let v = if dgs[key].is_null() {
                    &p[key]
                } else {
                    &dgs[key]
                };
                *at = figure(
                    v,
                    &format!("{key} in /props"),
                    1 << 24,
                    "give --max-num-batched-tokens and --ubatch-size as the server was started",
                )?;
            }
            if let (Some(n), Some(c)) = (slots, ctx) {
                s.slots = Some(n as u32);
                s.max_model_len = Some(c as u32);
                if s.family.is_empty() {
                    s.family = "llama.cpp /props".into();
                }
                let total = n.checked_mul(c).filter(|&t| t <= MAX_KV_TOKENS).ok_or_else(|| {
                    anyhow::anyhow!("the server reports {n} slots of {c} tokens in /props, a KV capacity past {MAX_KV_TOKENS} tokens; {fix_kv}")
                })?;
                s.kv_tokens
                    .get_or_insert((total, format!("/props: {n} slots of {c} tokens")));
            }
        }
    }
    Ok(s)
}

/// Most tokens or sequences per iteration a recorded batching takes (what
/// the profile's validation allows).
pub(super) const MAX_BATCH_FIGURE: u32 = 1 << 24;

/// The engine's batching, from what it reported and the flags, with the
/// finding that says where it came from (or why nothing is recorded).
///
/// llama.cpp's server (`update_slots`) batches its slots as Sarathi-Serve
/// does: one decode token per generating slot first, then prompt tokens up
/// to `n_batch`, at most one sequence per slot; its `/props` gives the
/// slots, and `n_batch`/`n_ubatch` when the build reports them, else the
/// flags or its documented defaults (`-b 2048`, `-ub 512`). llama.cpp caps
/// `n_batch` at its whole context. vLLM V1 always chunks prefills under
/// `max_num_batched_tokens`, decodes first; its `/metrics` shows only its
/// cache configuration, so its limits come from the flags.
pub(super) fn batching(a: &EngineArgs, s: &Server) -> (Option<EngineBatching>, String) {
    let llamacpp = s.slots.is_some() || s.family.starts_with("llama.cpp");
    let mut src = Vec::new();
    let mut pick = |flag: Option<u32>, flag_name: &str, reported: Option<u64>, what: &str| {
        if let Some(v) = flag {
            src.push(format!("{what} from {flag_name}"));
            Some(v)
        } else if let Some(v) = reported {
            src.push(format!("{what} from the server"));
            Some(v as u32)
        } else {
            None
        }
    };
    if llamacpp {
        let total_ctx = s
            .max_model_len
            .zip(s.slots)
            .map_or(u32::MAX, |(c, n)| c.saturating_mul(n));
        let mut n_batch = pick(
            a.max_batched_tokens,
            "--max-num-batched-tokens",
            s.n_batch,
            "n_batch",
        );
        let mut n_ubatch = pick(a.ubatch_tokens, "--ubatch-size", s.n_ubatch, "n_ubatch");
        let seqs = pick(
            a.max_num_seqs,
            "--max-num-seqs",
            s.slots.map(u64::from),
            "slots",
        );
        if n_batch.is_none() {
            src.push("n_batch llama.cpp's default 2048 (the server does not report it; give --max-num-batched-tokens if it was started with -b)".into());
            n_batch = Some(2048);
        }
        if n_ubatch.is_none() {
            src.push(
                "n_ubatch llama.cpp's default 512 (give --ubatch-size if it was started with -ub)"
                    .into(),
            );
            n_ubatch = Some(512);
        }
        let n_batch = n_batch.map(|b| b.min(total_ctx).min(MAX_BATCH_FIGURE));
        let b = EngineBatching {
            policy: Some(sim::config::BatchPolicyKind::Sarathi),
            max_batched_tokens: n_batch,
            max_num_seqs: seqs.map(|n| n.min(1 << 16)),
            ubatch_tokens: n_ubatch.zip(n_batch).map(|(u, b)| u.min(b)),
            source: format!("llama.cpp's slot batching: {}", src.join(", ")),
        };
        let line = describe_batching(&b);
        return (Some(b), line);
    }
    let tokens = pick(
        a.max_batched_tokens,
        "--max-num-batched-tokens",
        None,
        "tokens",
    );
    let seqs = pick(a.max_num_seqs, "--max-num-seqs", None, "sequences");
    if tokens.is_none() && seqs.is_none() {
        return (
            None,
            "batching not recorded: the server does not report its iteration limits; give --max-num-batched-tokens and --max-num-seqs as it was started (vLLM's flags of those names) so that simulate batches the same way".into(),
        );
    }
    // Only vLLM's own server is known to chunk prefills (V1 always does).
    let policy = (s.owned_by == "vllm").then_some(sim::config::BatchPolicyKind::Sarathi);
    let b = EngineBatching {
        policy,
        max_batched_tokens: tokens,
        max_num_seqs: seqs,
        ubatch_tokens: None,
        source: if policy.is_some() {
            format!("vLLM V1's chunked prefill: {}", src.join(", "))
        } else {
            format!(
                "{}; the policy is the scenario's (the server's scheduler is not known)",
                src.join(", ")
            )
        },
    };
    let line = describe_batching(&b);
    (Some(b), line)
}

/// One line for a recorded batching.
pub fn describe_batching(b: &EngineBatching) -> String {
    let mut parts = Vec::new();
    if let Some(p) = b.policy {
        parts.push(format!("policy {}", p.name()));
    }
    if let Some(t) = b.max_batched_tokens {
        parts.push(match b.ubatch_tokens {
            Some(u) => format!("{t} tokens per iteration in micro-batches of {u}"),
            None => format!("{t} tokens per iteration"),
        });
    }
    if let Some(n) = b.max_num_seqs {
        parts.push(format!("{n} sequences at most"));
    }
    format!("batching {} ({})", parts.join(", "), b.source)
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
        let other = "vllm:cache_config_info{cpu_block_size=\"9\",block_size=\"32\"} 1\n";
        assert_eq!(
            label(other, "vllm:cache_config_info", "block_size").as_deref(),
            Some("32")
        );
    }
}
