//! The server and the load generator over real loopback sockets: SSE framing
//! (read by hand, by curl and by the openai client), admission and limits,
//! disconnect cleanup, and observe-vs-simulate agreement. Every request loop
//! is bounded in count and time.

use serve::engine::EngineHandle;
use serve::observe::{self, ObserveConfig, Outcome};
use serve::openai::Endpoint;
use serve::server::{self, ServerConfig};
use serve::twin::{self, TwinConfig};
use sim::request::Status;
use sim::Scenario;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Llama-3.1-8B on one H100 (roofline): iterations of several ms, long
/// enough that the wall clock's jitter is small beside them.
fn scenario() -> Scenario {
    Scenario::from_toml_str(SCENARIO, "loopback.toml").unwrap()
}

/// The loopback scenario with its `[engine]` serving one sequence at a
/// time: an edit of the file, resolved as the file is (its memory plan
/// included).
fn scenario_one_at_a_time() -> Scenario {
    let text = SCENARIO.replace("max_num_seqs = 64", "max_num_seqs = 1");
    assert_ne!(text, SCENARIO);
    Scenario::from_toml_str(&text, "loopback.toml").unwrap()
}

const SCENARIO: &str = r#"
name = "loopback"
seed = 3
[horizon]
requests = 60
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[fleet]
replicas = 1
[engine]
max_num_seqs = 64
max_batched_tokens = 2048
max_model_len = 4096
[workload]
arrival = { process = "poisson", rate = 20.0 }
prompt_tokens = { dist = "uniform", min = 64, max = 512 }
output_tokens = { dist = "uniform", min = 8, max = 40 }
"#;

fn config(model: &str) -> ServerConfig {
    ServerConfig {
        model: model.into(),
        api_key: None,
        max_model_len: 4096,
        max_tokens_cap: 1024,
        max_body_bytes: 64 * 1024,
        per_client_limit: 1000,
        body_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(30),
        retry_after_s: 1,
    }
}

fn start(s: &Scenario, cfg: ServerConfig, max_waiting: usize) -> (serve::Running, EngineHandle) {
    let engine = twin::start(
        s.clone(),
        TwinConfig {
            speed: 1.0,
            max_waiting,
        },
    );
    let router = server::router(cfg, engine.clone());
    let running = serve::spawn("127.0.0.1:0".parse().unwrap(), router).unwrap();
    (running, engine)
}

/// One raw HTTP/1.1 exchange; returns (status, headers and body).
fn http(addr: SocketAddr, method: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = Vec::new();
    // The server may close before reading an oversized body.
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out).into_owned();
    let status = out[9..12].parse().unwrap();
    (status, out)
}

fn body_of(text: &str) -> &str {
    text.split("\r\n\r\n").nth(1).unwrap()
}

fn metric(addr: SocketAddr, name: &str) -> f64 {
    let (_, text) = http(addr, "GET", "/metrics", "", "");
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in /metrics"))
}

/// The `data:` payloads of an SSE body, in order.
fn sse_data(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|ev| {
            ev.lines()
                .find_map(|l| l.strip_prefix("data: "))
                .map(str::to_string)
        })
        .collect()
}

/// Un-chunks an HTTP/1.1 chunked body.
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&after[..n]);
        rest = &after[n + 2..];
    }
    out
}

#[test]
fn streams_openai_sse_with_usage_and_exact_token_counts() {
    let s = scenario();
    let (srv, _) = start(&s, config("m"), 100);
    let body = r#"{"model":"m","prompt":[1,2,3,4,5,6,7,8],"max_tokens":7,"stream":true,"stream_options":{"include_usage":true}}"#;
    let (status, text) = http(srv.addr, "POST", "/v1/completions", "", body);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("content-type: text/event-stream"), "{text}");
    let raw = dechunk(body_of(&text));
    // OpenAI's framing to the byte: `data: {json}` events, one line each,
    // then `data: [DONE]`, nothing else (no comments, ids or event names).
    assert!(raw.ends_with("}\n\ndata: [DONE]\n\n"), "{raw:?}");
    for ev in raw.trim_end_matches("\n\n").split("\n\n") {
        assert!(ev.starts_with("data: ") && !ev.contains('\n'), "{ev:?}");
    }
    let data = sse_data(&raw);
    assert_eq!(data.last().unwrap(), "[DONE]");
    let chunks: Vec<serde_json::Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let tokens = &chunks[..chunks.len() - 1];
    assert_eq!(tokens.len(), 7);
    assert!(tokens[..6]
        .iter()
        .all(|c| c["choices"][0]["finish_reason"].is_null()));
    assert_eq!(tokens[6]["choices"][0]["finish_reason"], "length");
    assert!(tokens
        .iter()
        .all(|c| c["usage"].is_null() && c["object"] == "text_completion"));
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(usage["prompt_tokens"], 8);
    assert_eq!(usage["completion_tokens"], 7);
    assert_eq!(
        chunks.last().unwrap()["choices"].as_array().unwrap().len(),
        0
    );

    // Chat: a role chunk, then deltas; non-streamed: one JSON body.
    let chat = r#"{"model":"m","messages":[{"role":"user","content":"a b c"}],"max_tokens":3,"stream":true}"#;
    let (_, text) = http(srv.addr, "POST", "/v1/chat/completions", "", chat);
    let data = sse_data(&dechunk(body_of(&text)));
    assert_eq!(data.len(), 1 + 3 + 1, "{data:?}");
    let first: serde_json::Value = serde_json::from_str(&data[0]).unwrap();
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
    let whole = r#"{"model":"m","prompt":"one two three","max_tokens":4}"#;
    let (status, text) = http(srv.addr, "POST", "/v1/completions", "", whole);
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(body_of(&text)).unwrap();
    assert_eq!(v["usage"]["completion_tokens"], 4);
    assert_eq!(v["usage"]["prompt_tokens"], 3);
    assert_eq!(v["choices"][0]["text"], " tok tok tok tok");
    srv.stop().unwrap();
}

#[test]
fn bad_requests_get_openai_errors_and_the_key_guards_every_route_but_health() {
    let s = scenario();
    let mut cfg = config("m");
    cfg.api_key = Some("sekret".into());
    let (srv, _) = start(&s, cfg, 100);
    let a = srv.addr;
    let auth = "Authorization: Bearer sekret\r\n";
    assert_eq!(http(a, "GET", "/health", "", "").0, 200);
    for path in ["/v1/models", "/metrics"] {
        assert_eq!(http(a, "GET", path, "", "").0, 401, "{path}");
        assert_eq!(http(a, "GET", path, auth, "").0, 200, "{path}");
    }
    let (st, t) = http(
        a,
        "POST",
        "/v1/completions",
        "",
        r#"{"model":"m","prompt":"x"}"#,
    );
    assert_eq!(st, 401);
    assert!(t.contains("\"error\""), "{t}");
    let cases = [
        ("{not json", 400, "JSON"),
        (r#"{"model":"other","prompt":"x"}"#, 404, "does not exist"),
        (
            r#"{"model":"m","prompt":"x","max_tokens":5000}"#,
            400,
            "at most 1024",
        ),
        (r#"{"model":"m","prompt":"x","n":3}"#, 400, "'n'"),
    ];
    for (body, code, needle) in cases {
        let (st, t) = http(a, "POST", "/v1/completions", auth, body);
        assert_eq!(st, code, "{body}: {t}");
        let v: serde_json::Value = serde_json::from_str(body_of(&t)).unwrap();
        assert!(
            v["error"]["message"].as_str().unwrap().contains(needle),
            "{t}"
        );
    }
    // Over-long prompt for the model's context.
    let ids: Vec<String> = (0..4000).map(|i| (i % 500).to_string()).collect();
    let long = format!(
        r#"{{"model":"m","prompt":[{}],"max_tokens":200}}"#,
        ids.join(",")
    );
    let (st, t) = http(a, "POST", "/v1/completions", auth, &long);
    assert_eq!(st, 400);
    assert!(t.contains("maximum context length"), "{t}");
    // Body over the cap.
    let huge = format!(r#"{{"model":"m","prompt":"{}"}}"#, "w ".repeat(40_000));
    assert_eq!(http(a, "POST", "/v1/completions", auth, &huge).0, 413);
    assert_eq!(http(a, "GET", "/nope", auth, "").0, 404);
    srv.stop().unwrap();
}

#[test]
fn a_disconnected_stream_leaves_the_batch_and_frees_its_blocks() {
    let s = scenario();
    let (srv, engine) = start(&s, config("m"), 100);
    let mut c = TcpStream::connect(srv.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = r#"{"model":"m","prompt":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20],"max_tokens":1000,"stream":true}"#;
    write!(
        c,
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // Read until a few tokens have come.
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while String::from_utf8_lossy(&seen).matches("data: ").count() < 3 {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "stream ended early");
        seen.extend_from_slice(&buf[..n]);
    }
    let g = engine.gauges();
    assert_eq!(g.running, 1);
    assert!(g.kv_blocks_used > 0);
    drop(c);
    let t0 = Instant::now();
    loop {
        let g = engine.gauges();
        if g.kv_blocks_used == 0 && g.running == 0 {
            assert_eq!(g.cancelled, 1);
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "not cleaned up: {g:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The replica is idle: no more iterations for the cancelled sequence.
    let its = metric(srv.addr, "servesim:iterations_total");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(metric(srv.addr, "servesim:iterations_total"), its);
    assert_eq!(metric(srv.addr, "servesim:kv_blocks_used"), 0.0);
    assert!(engine.gauges().generation_tokens < 1000);
    srv.stop().unwrap();
}

fn observe_cfg(addr: SocketAddr) -> ObserveConfig {
    ObserveConfig {
        url: format!("http://{addr}"),
        model: "m".into(),
        endpoint: Endpoint::Completions,
        api_key: None,
        max_requests: 10_000,
        max_duration: Duration::from_secs(60),
        max_connections: 1000,
        request_timeout: Duration::from_secs(30),
        cancel_share: 0.0,
        cancel_after: 1,
    }
}

/// The twin over HTTP, measured by observe, against `simulate` of the same
/// scenario and seed: the HTTP path adds little.
#[test]
fn observed_twin_agrees_with_the_simulation() {
    let s = scenario();
    let (srv, _) = start(&s, config("m"), 1000);
    let cfg = observe_cfg(srv.addr);
    let specs = observe::workload(&s, 1000).unwrap();
    assert_eq!(specs.len(), 60);
    let obs = observe::run(&cfg, specs, s.seed()).unwrap();
    let got = observe::to_result(&s, &cfg, &obs).unwrap();
    let want = sim::Simulation::new(&s).run(|_| {}).unwrap();
    assert_eq!(got.summary.counts.completed, 60, "{:?}", got.summary.counts);
    let (g, w) = (&got.summary.latency, &want.summary.latency);
    // The HTTP path (a loopback round trip, axum, the scheduler thread's
    // wake-up) adds about a millisecond; a shared CI machine running tests
    // in parallel can stall a thread for several, so: 10 % + 8 ms.
    let close = |name: &str, a: f64, b: f64| {
        eprintln!(
            "{name}: observed {a:.2} ms, simulated {b:.2} ms ({:+.1} %)",
            (a - b) / b * 100.0
        );
        assert!(
            (a - b).abs() < 0.1 * b + 8.0,
            "{name}: observed {a} vs simulated {b}"
        );
    };
    close("TTFT p50", g.ttft_ms.p50, w.ttft_ms.p50);
    close("TTFT p90", g.ttft_ms.p90, w.ttft_ms.p90);
    close("TPOT p50", g.tpot_ms.p50, w.tpot_ms.p50);
    close("E2E p50", g.e2e_ms.p50, w.e2e_ms.p50);
    close("E2E p90", g.e2e_ms.p90, w.e2e_ms.p90);
    let dir = tempfile::tempdir().unwrap();
    observe::write(dir.path(), &got, &obs).unwrap();
    let csv = std::fs::read_to_string(dir.path().join("requests.csv")).unwrap();
    assert_eq!(csv.lines().count(), 61);
    assert!(csv.starts_with("id,arrival_s,replica,"));
    let oc = std::fs::read_to_string(dir.path().join("observe.csv")).unwrap();
    assert_eq!(oc.lines().count(), 61);
    let summary = std::fs::read_to_string(dir.path().join("summary.json")).unwrap();
    assert!(summary.contains("\"offered_rps\""));
    srv.stop().unwrap();
}

/// A burst of a few hundred concurrent streams: every request ends in the
/// record, none hangs, and the rejections are exactly the engine's
/// queue-full refusals.
#[test]
fn a_burst_over_the_cap_is_rejected_exactly_and_nothing_is_lost() {
    // One sequence at a time and a waiting cap of 50: of 300 requests sent
    // at once, 1 runs and 50 wait; the rest are refused with 429, but for a
    // few that arrive after a slot frees.
    let s = scenario();
    let s1 = scenario_one_at_a_time();
    let (srv, engine) = start(&s1, config("m"), 50);
    let cfg = observe_cfg(srv.addr);
    let one = observe::workload(&s, 1).unwrap().remove(0);
    let specs: Vec<_> = (0..300)
        .map(|_| {
            let mut r = one.clone();
            r.arrival = sim::time::SimTime::ZERO;
            r.output_tokens = 2;
            r.prompt_tokens = 16;
            r
        })
        .collect();
    let t0 = Instant::now();
    let obs = observe::run(&cfg, specs, 1).unwrap();
    assert!(t0.elapsed() < Duration::from_secs(40));
    let res = observe::to_result(&s1, &cfg, &obs).unwrap();
    let c = &res.summary.counts;
    assert_eq!(c.arrived, 300);
    assert_eq!(c.completed + c.rejected, 300, "{c:?}");
    assert_eq!(c.rejected_by_reason["server_busy"], c.rejected);
    assert_eq!(engine.gauges().queue_full, c.rejected);
    assert!(c.completed >= 51 && c.rejected > 100, "{c:?}");
    assert!(obs
        .observations
        .iter()
        .all(|o| o.outcome != Outcome::InFlight));
    assert_eq!(
        res.summary.observed.as_ref().unwrap().http_status["429"],
        c.rejected
    );
    srv.stop().unwrap();
}

#[test]
fn cancelling_clients_are_recorded_and_their_sequences_freed() {
    let s = scenario();
    let (srv, engine) = start(&s, config("m"), 1000);
    let mut cfg = observe_cfg(srv.addr);
    cfg.cancel_share = 0.5;
    cfg.cancel_after = 3;
    let specs = observe::workload(&s, 30).unwrap();
    let obs = observe::run(&cfg, specs, 9).unwrap();
    let res = observe::to_result(&s, &cfg, &obs).unwrap();
    let c = &res.summary.counts;
    assert!(c.cancelled > 5 && c.completed > 5, "{c:?}");
    assert_eq!(c.cancelled + c.completed, 30);
    for (o, r) in obs.observations.iter().zip(&res.requests) {
        if r.status == Status::Cancelled {
            assert_eq!(o.tokens, 3);
        }
    }
    let t0 = Instant::now();
    while engine.gauges().kv_blocks_used > 0 || engine.gauges().cancelled < c.cancelled {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{:?}",
            engine.gauges()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    srv.stop().unwrap();
}

#[test]
fn curl_reads_the_stream() {
    if std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no curl");
        return;
    }
    let s = scenario();
    let (srv, _) = start(&s, config("m"), 100);
    let out = std::process::Command::new("curl")
        .args(["-sS", "-N", "--max-time", "20", "--noproxy", "*"])
        .arg(format!("http://{}/v1/chat/completions", srv.addr))
        .args(["-H", "Content-Type: application/json", "-d"])
        .arg(r#"{"model":"m","messages":[{"role":"user","content":"hi there"}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}"#)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let data = sse_data(&text);
    assert_eq!(data.last().unwrap(), "[DONE]");
    let content: String = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str::<serde_json::Value>(d).unwrap())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(content, " tok".repeat(5));
    let last: serde_json::Value = serde_json::from_str(&data[data.len() - 2]).unwrap();
    assert_eq!(last["usage"]["completion_tokens"], 5);
    assert_eq!(last["usage"]["prompt_tokens"], 2);
    srv.stop().unwrap();
}

/// The official `openai` Python client streams from the twin (skipped when
/// python3 or the package is missing: `pip install openai`).
#[test]
fn the_openai_python_client_streams() {
    let has = std::process::Command::new("python3")
        .args(["-c", "import openai"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        eprintln!("skipped: python3 with the openai package is not installed");
        return;
    }
    let s = scenario();
    let (srv, _) = start(&s, config("m"), 100);
    let script = format!(
        r#"
import openai
c = openai.OpenAI(base_url="http://{}/v1", api_key="none", max_retries=0, timeout=20)
n = 0
usage = None
for ch in c.chat.completions.create(model="m", messages=[{{"role": "user", "content": "a b c d"}}], max_tokens=6, stream=True, stream_options={{"include_usage": True}}):
    if ch.choices and ch.choices[0].delta.content:
        n += 1
    if ch.usage:
        usage = ch.usage
r = c.completions.create(model="m", prompt=[1, 2, 3], max_tokens=4)
print(n, usage.prompt_tokens, usage.completion_tokens, r.usage.completion_tokens, [m.id for m in c.models.list()])
"#,
        srv.addr
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &script])
        .env("NO_PROXY", "*")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "6 4 6 4 ['m']");
    srv.stop().unwrap();
}

/// A client that stops reading its stream is dropped once its socket has
/// taken nothing for the idle limit (the kernel's buffers and the server's
/// write buffer full), and its sequence is cancelled while it still had
/// tokens to generate; a client that reads on is untouched.
#[test]
fn a_client_that_stops_reading_is_dropped_and_its_sequence_cancelled() {
    let text = r#"
name = "stall"
seed = 3
[horizon]
requests = 1
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[engine]
max_num_seqs = 8
max_model_len = 65536
[workload]
arrival = { process = "poisson", rate = 1.0 }
prompt_tokens = { dist = "fixed", value = 16 }
output_tokens = { dist = "fixed", value = 16 }
"#;
    let s = Scenario::from_toml_str(text, "stall.toml").unwrap();
    // ~7 ms decodes at ×50: 40000 tokens take ~6 s of wall time.
    let engine = twin::start(
        s,
        TwinConfig {
            speed: 50.0,
            max_waiting: 10,
        },
    );
    let mut cfg = config("m");
    cfg.max_model_len = 65536;
    cfg.max_tokens_cap = 60000;
    let router = server::router(cfg, engine.clone());
    let srv = serve::spawn_with(
        "127.0.0.1:0".parse().unwrap(),
        router,
        Duration::from_millis(300),
    )
    .unwrap();
    let mut c = TcpStream::connect(srv.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let body = r#"{"model":"m","prompt":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"max_tokens":40000,"stream":true}"#;
    write!(
        c,
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut buf = [0u8; 4096];
    let n = c.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // Stop reading: the engine cancels the sequence well before its end.
    let t0 = Instant::now();
    loop {
        let g = engine.gauges();
        if g.cancelled == 1 && g.running == 0 && g.kv_blocks_used == 0 {
            assert_eq!(g.completed, 0);
            assert!(g.generation_tokens < 40000, "{g:?}");
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "the stalled client was not dropped: {g:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The connection is closed: what is left to read ends without [DONE].
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
    assert!(!String::from_utf8_lossy(&rest).contains("data: [DONE]"));
    srv.stop().unwrap();
}

/// Closed-loop users observed over HTTP: each user's next request is
/// scheduled exactly its think time after its previous one ended (as
/// `simulate`'s source draws it), never more than one per user is open, and
/// the number sent in the horizon is close to `simulate`'s.
#[test]
fn closed_loop_users_send_their_next_request_a_think_time_after_the_last_ends() {
    let text = r#"
name = "closed"
seed = 4
[horizon]
duration_s = 3.0
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[engine]
max_num_seqs = 4
max_model_len = 4096
[workload]
arrival = { process = "closed", users = 6, think_time = { dist = "fixed", value_s = 0.15 }, ramp_up_s = 0.3 }
prompt_tokens = { dist = "uniform", min = 64, max = 256 }
output_tokens = { dist = "uniform", min = 8, max = 24 }
"#;
    let s = Scenario::from_toml_str(text, "closed.toml").unwrap();
    let (srv, _) = start(&s, config("m"), 1000);
    let cfg = observe_cfg(srv.addr);
    let obs = observe::run_scenario(&cfg, &s, 10_000).unwrap();
    let mut by_user: std::collections::BTreeMap<u64, Vec<usize>> = Default::default();
    for (i, spec) in obs.specs.iter().enumerate() {
        by_user.entry(spec.session).or_default().push(i);
    }
    assert_eq!(by_user.len(), 6, "six users");
    for (user, ids) in &by_user {
        assert!(ids.len() >= 3, "user {user} sent {}", ids.len());
        for w in ids.windows(2) {
            let (prev, next) = (&obs.observations[w[0]], &obs.observations[w[1]]);
            assert_eq!(prev.outcome, Outcome::Completed, "user {user}");
            let end = prev.end.unwrap();
            // Scheduled from the observed end plus the think time, to the
            // nanosecond, and not sent before.
            assert_eq!(
                next.scheduled.as_nanos(),
                end.as_nanos() + 150_000_000,
                "user {user}"
            );
            assert!(next.sent.unwrap() >= next.scheduled);
        }
    }
    let got = observe::to_result(&s, &cfg, &obs).unwrap();
    let want = sim::Simulation::new(&s).run(|_| {}).unwrap();
    let (g, w) = (obs.specs.len() as f64, want.requests.len() as f64);
    eprintln!("closed loop: {g} requests observed, {w} simulated");
    assert!(
        (g - w).abs() <= 0.15 * w + 2.0,
        "observed {g} vs simulated {w}"
    );
    assert_eq!(
        got.summary.counts.completed + got.summary.counts.in_flight,
        obs.specs.len() as u64
    );
    srv.stop().unwrap();
}
