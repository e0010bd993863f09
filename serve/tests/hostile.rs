//! `observe` and `calibrate --engine` against servers that misbehave, on
//! loopback: a stream that stalls mid-line or never ends its line, bodies
//! that never end, `usage` blocks that lie, streams with no tokens or the
//! whole answer in one chunk, nothing listening, a base URL with `/v1`.
//! One test per cause. Every test is bounded by short timeouts and asserts
//! how long it took, so a regression shows as a failure, not a hang.

use serve::observe::{self, ObserveConfig, Observed, Outcome};
use serve::openai::Endpoint;
use serve::probe::{self, EngineArgs};
use sim::time::SimTime;
use sim::workload::RequestSpec;
use sim::Scenario;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the hostile server answers to one request.
#[derive(Clone, Debug)]
enum Reply {
    /// 200 with this JSON body.
    Json(String),
    /// This status and body.
    Status(u16, String),
    /// An event stream of these events' data, then the connection closes.
    Events(Vec<String>),
    /// An event stream whose first line starts and then stops coming.
    Stall,
    /// An event stream whose first line never ends: `piece` bytes of it
    /// every `pause`.
    EndlessLine { piece: usize, pause: Duration },
    /// A status and a body that never ends.
    EndlessBody(u16),
}

type Route = dyn Fn(&str, &str) -> Reply + Send + Sync;

/// Serves `route(method, path)` on a loopback port until the test ends.
fn hostile(route: impl Fn(&str, &str) -> Reply + Send + Sync + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let route: Arc<Route> = Arc::new(route);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let route = route.clone();
            std::thread::spawn(move || {
                let _ = answer(conn, &*route);
            });
        }
    });
    url
}

fn answer(conn: TcpStream, route: &Route) -> std::io::Result<()> {
    let mut r = BufReader::new(conn.try_clone()?);
    let mut w = conn;
    let mut first = String::new();
    r.read_line(&mut first)?;
    let mut parts = first.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or("").to_string(),
        parts.next().unwrap_or("").to_string(),
    );
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        r.read_line(&mut h)?;
        if h.trim().is_empty() {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    r.read_exact(&mut body)?;
    let head = |status: u16, kind: &str| {
        format!("HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nConnection: close\r\n\r\n")
    };
    match route(&method, &path) {
        Reply::Json(b) => write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
            b.len()
        )?,
        Reply::Status(s, b) => write!(
            w,
            "HTTP/1.1 {s} X\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
            b.len()
        )?,
        Reply::Events(events) => {
            w.write_all(head(200, "text/event-stream").as_bytes())?;
            for e in events {
                write!(w, "data: {e}\n\n")?;
                w.flush()?;
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        Reply::Stall => {
            w.write_all(head(200, "text/event-stream").as_bytes())?;
            w.write_all(b"data: {\"choices\":[{\"text\":\"a")?;
            w.flush()?;
            std::thread::sleep(Duration::from_secs(120));
        }
        Reply::EndlessLine { piece, pause } => {
            w.write_all(head(200, "text/event-stream").as_bytes())?;
            w.write_all(b"data: {\"choices\":[{\"text\":\"")?;
            let bytes = vec![b'x'; piece];
            loop {
                w.write_all(&bytes)?;
                std::thread::sleep(pause);
            }
        }
        Reply::EndlessBody(s) => {
            w.write_all(head(s, "application/json").as_bytes())?;
            w.write_all(b"{\"data\":[")?;
            let bytes = b"{\"id\":\"m\"},".repeat(4096);
            loop {
                w.write_all(&bytes)?;
            }
        }
    }
    w.flush()
}

fn chunk(text: &str, finish: Option<&str>) -> String {
    serde_json::json!({"object": "text_completion",
        "choices": [{"index": 0, "text": text, "finish_reason": finish}]})
    .to_string()
}

fn usage(n: u32) -> String {
    serde_json::json!({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": n}})
        .to_string()
}

/// `n` one-token chunks, then a usage block claiming `claim`, then [DONE].
fn stream(n: usize, claim: Option<u32>) -> Vec<String> {
    let mut v: Vec<String> = (0..n).map(|_| chunk("a", None)).collect();
    v.push(chunk("", Some("length")));
    v.extend(claim.map(usage));
    v.push("[DONE]".into());
    v
}

fn cfg(url: &str, timeout: Duration, max_duration: Duration) -> ObserveConfig {
    ObserveConfig {
        url: url.into(),
        model: "m".into(),
        endpoint: Endpoint::Completions,
        api_key: None,
        max_requests: 100,
        max_duration,
        max_connections: 8,
        request_timeout: timeout,
        cancel_share: 0.0,
        cancel_after: 0,
    }
}

fn specs(n: usize, output: u32) -> Vec<RequestSpec> {
    (0..n)
        .map(|i| RequestSpec {
            arrival: SimTime(i as u64 * 1_000_000),
            prompt_tokens: 4,
            output_tokens: output,
            ..RequestSpec::default()
        })
        .collect()
}

fn observe_quickly(url: &str, n: usize, output: u32) -> Observed {
    let t = Instant::now();
    let o = observe::run(
        &cfg(url, Duration::from_secs(2), Duration::from_secs(5)),
        specs(n, output),
        1,
    )
    .unwrap();
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    o
}

fn scenario() -> Scenario {
    let text = r#"
name = "hostile"
seed = 1
[horizon]
requests = 4
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[workload]
arrival = { process = "poisson", rate = 1.0 }
prompt_tokens = { dist = "fixed", value = 4 }
output_tokens = { dist = "fixed", value = 5 }
"#;
    Scenario::from_toml_str(text, "hostile.toml").unwrap()
}

fn engine_args(url: &str) -> EngineArgs {
    EngineArgs {
        url: url.into(),
        api_key: None,
        served_model: None,
        arch: Some("smollm2-135m".into()),
        dtype: "bf16".into(),
        budget: Duration::from_secs(2),
        max_concurrency: 2,
        max_prompt: None,
        kv_tokens: None,
        force: false,
    }
}

const MODELS: &str = r#"{"object":"list","data":[{"id":"HuggingFaceTB/SmolLM2-135M-Instruct","owned_by":"hostile","max_model_len":2048}]}"#;

fn calibrate(a: &EngineArgs) -> String {
    let t = Instant::now();
    let e = match probe::calibrate(a, &mut |_, _, _| {}) {
        Ok(_) => panic!("a hostile server is calibrated"),
        Err(e) => e.to_string(),
    };
    assert!(
        t.elapsed() < Duration::from_secs(8),
        "{:?}: {e}",
        t.elapsed()
    );
    assert!(!e.contains('\n'), "{e}");
    e
}

/// A stalled line and a line that trickles forever end at the request's
/// timeout; the run's limit ends requests still open; calibrate's budget
/// bounds its probes.
#[test]
fn every_read_has_a_deadline() {
    let stall = hostile(|_, p| match p {
        "/v1/models" => Reply::Json(MODELS.into()),
        "/v1/completions" => Reply::Stall,
        _ => Reply::Status(404, String::new()),
    });
    let trickle = hostile(|_, _| Reply::EndlessLine {
        piece: 64,
        pause: Duration::from_millis(10),
    });
    for url in [&stall, &trickle] {
        let t = Instant::now();
        let o = observe::run(
            &cfg(url, Duration::from_secs(1), Duration::from_secs(30)),
            specs(2, 5),
            1,
        )
        .unwrap();
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        for x in &o.observations {
            assert_eq!(x.outcome, Outcome::Failed, "{x:?}");
            assert!(
                x.error.contains("no end within the 1 s request timeout"),
                "{}",
                x.error
            );
        }
        let e = observe::check_ran(&cfg(url, Duration::from_secs(1), Duration::ZERO), &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("every one of the 2 requests"), "{e}");
    }
    // The run's own limit: what is open then stays in flight.
    let t = Instant::now();
    let o = observe::run(
        &cfg(&stall, Duration::from_secs(60), Duration::from_millis(800)),
        specs(2, 5),
        1,
    )
    .unwrap();
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert!(o
        .observations
        .iter()
        .all(|x| x.outcome == Outcome::InFlight));
    // calibrate's probes: a 2 s budget ends within it and its slack.
    let e = calibrate(&engine_args(&stall));
    assert!(e.contains("did not complete"), "{e}");
    assert!(e.contains("no end within the probe's limit of"), "{e}");
}

/// A line, a body or an error body that never ends is cut at its cap.
#[test]
fn endless_bytes_are_cut_at_their_caps() {
    let flood = hostile(|_, _| Reply::EndlessLine {
        piece: 64 << 10,
        pause: Duration::ZERO,
    });
    let o = observe_quickly(&flood, 1, 5);
    let x = &o.observations[0];
    assert_eq!(x.outcome, Outcome::Failed);
    assert!(x.error.contains("passed the 1 MiB cap"), "{}", x.error);

    let error_flood = hostile(|_, _| Reply::EndlessBody(500));
    let o = observe_quickly(&error_flood, 1, 5);
    let x = &o.observations[0];
    assert_eq!((x.outcome, x.http_status), (Outcome::Failed, 500));
    assert!(x.error.contains("passed the 64 KiB cap"), "{}", x.error);

    let models = hostile(|_, _| Reply::EndlessBody(200));
    let e = calibrate(&engine_args(&models));
    assert!(
        e.contains("the body of GET /v1/models is over the 8 MiB cap"),
        "{e}"
    );
    let metrics = hostile(|_, p| match p {
        "/v1/models" => Reply::Json(MODELS.into()),
        _ => Reply::EndlessBody(200),
    });
    let e = calibrate(&engine_args(&metrics));
    assert!(
        e.contains("the body of GET /metrics is over the 8 MiB cap"),
        "{e}"
    );
}

/// Tokens are the chunks that arrived: a usage block claiming ten times
/// as many, or none, is reported per request and not used.
#[test]
fn tokens_are_counted_from_the_stream_not_the_usage_block() {
    let s = scenario();
    for claim in [50, 0] {
        let url = hostile(move |_, _| Reply::Events(stream(5, Some(claim))));
        let o = observe_quickly(&url, 2, 5);
        for x in &o.observations {
            assert_eq!(x.outcome, Outcome::Completed, "{x:?}");
            assert_eq!((x.tokens, x.usage_tokens), (5, Some(claim)));
            assert!(x.usage_disagrees());
            assert!(x
                .note(5)
                .contains(&format!("usage claims {claim} tokens, 5 streamed")));
        }
        let w = observe::warnings(&o);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("2 of 2 requests with a usage block"),
            "{w:?}"
        );
        let r = observe::to_result(&s, &cfg(&url, Duration::ZERO, Duration::ZERO), &o).unwrap();
        for (req, x) in r.requests.iter().zip(&o.observations) {
            assert_eq!(req.output_tokens, 5);
            // TPOT over the 4 gaps the stream showed, not over 49 or -1.
            let span = x.token_times[4] - x.token_times[0];
            let want = span.as_nanos() as f64 / 4.0;
            assert!((req.tpot().unwrap() - want).abs() < 1e3, "{:?}", req.tpot());
        }
        // An honest usage block is not reported.
        let honest = hostile(|_, _| Reply::Events(stream(5, Some(5))));
        assert!(observe::warnings(&observe_quickly(&honest, 1, 5)).is_empty());
    }
    // Chat's role chunk carries no token: 5 deltas are 5 tokens.
    let chat = hostile(|_, _| {
        let delta = |d: serde_json::Value, finish: Option<&str>| {
            serde_json::json!({"choices": [{"index": 0, "delta": d, "finish_reason": finish}]})
                .to_string()
        };
        let mut v = vec![delta(
            serde_json::json!({"role": "assistant", "content": ""}),
            None,
        )];
        v.extend((0..5).map(|_| delta(serde_json::json!({"content": "a"}), None)));
        v.push(delta(serde_json::json!({}), Some("length")));
        v.extend([usage(5), "[DONE]".into()]);
        Reply::Events(v)
    });
    let mut c = cfg(&chat, Duration::from_secs(2), Duration::from_secs(5));
    c.endpoint = Endpoint::Chat;
    let o = observe::run(&c, specs(1, 5), 1).unwrap();
    let x = &o.observations[0];
    assert_eq!(
        (x.outcome, x.tokens, x.token_times.len()),
        (Outcome::Completed, 5, 5)
    );
    assert!(observe::warnings(&o).is_empty());
}

/// A stream with no tokens failed (no TTFT of 0), whatever its usage says.
#[test]
fn a_stream_with_no_tokens_fails() {
    for claim in [None, Some(5)] {
        let url = hostile(move |_, _| Reply::Events(stream(0, claim)));
        let o = observe_quickly(&url, 2, 5);
        for x in &o.observations {
            assert_eq!(x.outcome, Outcome::Failed, "{x:?}");
            assert!(x.error.contains("with no tokens"), "{}", x.error);
            assert!(x.token_times.is_empty());
        }
        let r = observe::to_result(&scenario(), &cfg(&url, Duration::ZERO, Duration::ZERO), &o)
            .unwrap();
        assert!(r.requests.iter().all(|q| q.ttft().is_none()));
        assert!(observe::check_ran(&cfg(&url, Duration::ZERO, Duration::ZERO), &o).is_err());
    }
}

/// The whole answer in one chunk: completed, but its TPOT is not measured
/// (left out, not 0), and it is flagged.
#[test]
fn one_chunk_answers_leave_tpot_unmeasured() {
    let url = hostile(|_, _| {
        Reply::Events(vec![
            chunk("a b c d e", Some("length")),
            usage(5),
            "[DONE]".into(),
        ])
    });
    let o = observe_quickly(&url, 2, 5);
    let x = &o.observations[0];
    assert_eq!((x.outcome, x.tokens), (Outcome::Completed, 1));
    assert!(x.one_chunk(5));
    assert!(x.note(5).contains("TPOT not measurable"), "{}", x.note(5));
    let w = observe::warnings(&o);
    assert!(
        w.iter().any(|l| l.contains("came back in one chunk")),
        "{w:?}"
    );
    let r =
        observe::to_result(&scenario(), &cfg(&url, Duration::ZERO, Duration::ZERO), &o).unwrap();
    assert!(r.requests.iter().all(|q| q.tpot().is_none()));
    // calibrate cannot time tokens it was not shown one by one.
    let cal = hostile(|_, p| match p {
        "/v1/models" => Reply::Json(MODELS.into()),
        "/v1/completions" => Reply::Events(vec![
            chunk("a b c d", Some("length")),
            usage(4),
            "[DONE]".into(),
        ]),
        _ => Reply::Status(404, "no".into()),
    });
    let e = calibrate(&engine_args(&cal));
    assert!(e.contains("streamed 1 chunk(s) for 4 tokens asked"), "{e}");
}

/// Nothing listening, or a base URL that already ends in /v1: every
/// request fails, and the error names the URL and the fix.
#[test]
fn a_run_that_measured_nothing_is_an_error_naming_the_fix() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let c = cfg(&url, Duration::from_secs(2), Duration::from_secs(5));
    let o = observe::run(&c, specs(3, 5), 1).unwrap();
    let e = observe::check_ran(&c, &o).unwrap_err().to_string();
    assert!(
        e.contains(&format!("sent to {url}/v1/completions failed")),
        "{e}"
    );
    assert!(e.contains("is the server running and listening"), "{e}");

    let served = hostile(|_, p| match p {
        "/v1/completions" => Reply::Events(stream(3, Some(3))),
        "/v1/models" => Reply::Json(MODELS.into()),
        _ => Reply::Status(404, "{\"error\":{\"message\":\"Not Found\"}}".into()),
    });
    let v1 = format!("{served}/v1");
    let c = cfg(&v1, Duration::from_secs(2), Duration::from_secs(5));
    let o = observe::run(&c, specs(3, 5), 1).unwrap();
    let e = observe::check_ran(&c, &o).unwrap_err().to_string();
    assert!(e.contains("HTTP 404"), "{e}");
    assert!(
        e.contains(&format!(
            "without /v1: observe sends to <URL>/v1/completions, so give {served}"
        )),
        "{e}"
    );
    let e = calibrate(&engine_args(&v1));
    assert!(e.contains(&format!("without /v1: give {served}")), "{e}");
    // One request that completed is a measurement: no error.
    let c = cfg(&served, Duration::from_secs(2), Duration::from_secs(5));
    let o = observe::run(&c, specs(1, 3), 1).unwrap();
    observe::check_ran(&c, &o).unwrap();
}

/// Figures a server reports that no engine has (a KV capacity of 0, a
/// context of 10^12 or past u32) are refused naming their source, as is
/// `--kv-tokens 0`; nothing is probed.
#[test]
fn impossible_server_figures_are_refused_by_name() {
    let cases = [
        (
            "/props",
            r#"{"total_slots":4,"default_generation_settings":{"n_ctx":1000000000000}}"#.to_string(),
            "default_generation_settings.n_ctx in /props = 1000000000000",
        ),
        (
            "/metrics",
            "vllm:num_requests_running 0\nvllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"0\"} 1\n".into(),
            "vllm:cache_config_info num_gpu_blocks in /metrics = 0",
        ),
        (
            "/v1/models",
            format!(
                r#"{{"object":"list","data":[{{"id":"SmolLM2-135M","max_model_len":{}}}]}}"#,
                (1u64 << 32) + 64
            ),
            "max_model_len in /v1/models = 4294967360",
        ),
    ];
    for (path, body, want) in cases {
        let url = hostile(move |_, p| {
            if p == path {
                Reply::Json(body.clone())
            } else if p == "/v1/models" {
                Reply::Json(MODELS.into())
            } else {
                Reply::Status(404, String::new())
            }
        });
        let e = calibrate(&engine_args(&url));
        assert!(e.contains(want), "{e}");
        assert!(e.contains("which no engine has"), "{e}");
    }
    let url = hostile(|_, p| match p {
        "/v1/models" => Reply::Json(MODELS.into()),
        _ => Reply::Status(404, String::new()),
    });
    let mut a = engine_args(&url);
    a.kv_tokens = Some(0);
    let e = calibrate(&a);
    assert!(
        e.starts_with("--kv-tokens 0 is no engine's KV capacity"),
        "{e}"
    );
}

/// A preset of another architecture class than the served model's is
/// refused rather than fitted as if it were that model.
#[test]
fn a_preset_of_another_class_is_refused() {
    let url = hostile(|_, p| match p {
        "/v1/models" => Reply::Json(MODELS.into()),
        _ => Reply::Status(404, String::new()),
    });
    let mut a = engine_args(&url);
    a.arch = Some("deepseek-v3".into());
    let e = calibrate(&a);
    assert!(
        e.contains("does not serve a model of the chosen architecture"),
        "{e}"
    );
    assert!(e.contains("a dense model, and deepseek-v3 is"), "{e}");
    assert!(
        e.contains("mixture-of-experts with latent attention"),
        "{e}"
    );
    // llama.cpp's reported width catches a name that matches no preset.
    let wide = hostile(|_, p| {
        match p {
        "/v1/models" => Reply::Json(
            r#"{"object":"list","data":[{"id":"model.gguf","meta":{"n_embd":4096,"n_params":8030261248}}]}"#.into(),
        ),
        _ => Reply::Status(404, String::new()),
    }
    });
    let e = calibrate(&engine_args(&wide));
    assert!(e.contains("hidden size of 4096 (meta.n_embd)"), "{e}");
}
