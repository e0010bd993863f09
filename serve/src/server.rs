//! The OpenAI-compatible HTTP front end (axum on tokio): `/v1/completions`
//! and `/v1/chat/completions` (streamed as server-sent events the way
//! OpenAI and vLLM send them, or whole), `/v1/models`, `/health` and
//! `/metrics`. Admission is bounded — a waiting-queue cap in the engine
//! (429 with `Retry-After`), a per-client concurrency limit, caps on body
//! size, prompt length and `max_tokens` — and a client that disconnects
//! mid-stream has its sequence cancelled at the next iteration.

use crate::engine::{EngineHandle, Job, Refusal, TokenEvent};
use crate::openai::{self, Endpoint};
use crate::prom::{self, Latencies};
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Limits and identity of a server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The model name clients must ask for.
    pub model: String,
    /// Requests need `Authorization: Bearer <key>` (all routes but /health).
    pub api_key: Option<String>,
    /// Longest prompt + output, tokens.
    pub max_model_len: u32,
    /// Largest `max_tokens` accepted (also the default when omitted in chat).
    pub max_tokens_cap: u32,
    /// Largest request body, bytes.
    pub max_body_bytes: usize,
    /// Most requests one client (API key, or address without one) may have
    /// open at once.
    pub per_client_limit: usize,
    /// A client must send its whole body within this.
    pub body_timeout: Duration,
    /// A response ends (and its sequence is cancelled) after this.
    pub request_timeout: Duration,
    /// Seconds a 429 tells the client to wait.
    pub retry_after_s: u32,
}

struct App {
    cfg: ServerConfig,
    engine: EngineHandle,
    latencies: Latencies,
    /// Open requests per client; entries leave when they reach zero.
    clients: Mutex<BTreeMap<String, usize>>,
    next_id: AtomicU64,
    created: u64,
}

/// The routes over an engine.
pub fn router(cfg: ServerConfig, engine: EngineHandle) -> Router {
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let app = Arc::new(App {
        cfg,
        engine,
        latencies: Latencies::default(),
        clients: Mutex::new(BTreeMap::new()),
        next_id: AtomicU64::new(0),
        created,
    });
    Router::new()
        .route(
            "/v1/completions",
            post(|s, c, h, b| complete(Endpoint::Completions, s, c, h, b)),
        )
        .route(
            "/v1/chat/completions",
            post(|s, c, h, b| complete(Endpoint::Chat, s, c, h, b)),
        )
        .route("/v1/models", get(models))
        .route("/health", get(|| async { StatusCode::OK }))
        .route("/metrics", get(metrics))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such route", "not_found_error") })
        .with_state(app)
}

/// Serves `router` on `listener` until `shutdown` resolves; a connection
/// whose client reads nothing for `write_stall` is closed (see
/// [`crate::stall`]).
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    write_stall: Duration,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt as _;
    // `tap_io` (a no-op here) gives the guarded listener axum's peer
    // address for `ConnectInfo`.
    let listener = crate::stall::GuardedListener::new(listener, write_stall).tap_io(|_| {});
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}

fn error(status: StatusCode, message: &str, kind: &str) -> Response {
    (
        status,
        axum::Json(openai::error(message, kind, status.as_u16())),
    )
        .into_response()
}

fn authorized(app: &App, headers: &HeaderMap) -> bool {
    let Some(key) = &app.cfg.api_key else {
        return true;
    };
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|k| k.trim() == key)
}

fn unauthorized(app: &App) -> Response {
    app.latencies.refused_auth.inc();
    error(
        StatusCode::UNAUTHORIZED,
        "missing or wrong API key (Authorization: Bearer <key>)",
        "authentication_error",
    )
}

async fn models(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if !authorized(&app, &headers) {
        return unauthorized(&app);
    }
    axum::Json(json!({"object": "list", "data": [{
        "id": app.cfg.model, "object": "model", "created": app.created,
        "owned_by": "servesim", "max_model_len": app.cfg.max_model_len,
    }]}))
    .into_response()
}

async fn metrics(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if !authorized(&app, &headers) {
        return unauthorized(&app);
    }
    let g = app.engine.gauges();
    match prom::render(&app.cfg.model, &g, &app.latencies) {
        Ok(text) => ([(header::CONTENT_TYPE, prom::CONTENT_TYPE)], text).into_response(),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the metrics could not be encoded",
            "server_error",
        ),
    }
}

/// One client's hold on a request slot; released when dropped.
struct ClientSlot {
    app: Arc<App>,
    client: String,
}

impl ClientSlot {
    fn take(app: &Arc<App>, client: String) -> Option<ClientSlot> {
        let mut m = app.clients.lock().expect("lock");
        let n = m.entry(client.clone()).or_default();
        if *n >= app.cfg.per_client_limit {
            if *n == 0 {
                m.remove(&client);
            }
            return None;
        }
        *n += 1;
        Some(ClientSlot {
            app: app.clone(),
            client,
        })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut m = self.app.clients.lock().expect("lock");
        if let Some(n) = m.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.client);
            }
        }
    }
}

/// Cancels the engine's sequence when the response is dropped before its
/// end — the client went away (hyper drops the body) or it timed out.
struct Ticket {
    app: Arc<App>,
    id: u32,
    done: bool,
    _slot: ClientSlot,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.done {
            self.app.engine.cancel(self.id);
        }
    }
}

fn invalid(app: &App, status: StatusCode, message: &str) -> Response {
    app.latencies.refused_invalid.inc();
    error(status, message, "invalid_request_error")
}

async fn complete(
    endpoint: Endpoint,
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let arrived = Instant::now();
    if !authorized(&app, &headers) {
        return unauthorized(&app);
    }
    let cfg = &app.cfg;
    let bytes = match tokio::time::timeout(
        cfg.body_timeout,
        axum::body::to_bytes(body, cfg.max_body_bytes),
    )
    .await
    {
        Err(_) => {
            return invalid(
                &app,
                StatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time",
            )
        }
        Ok(Err(_)) => {
            return invalid(
                &app,
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!(
                    "the request body is larger than {} bytes (or broken)",
                    cfg.max_body_bytes
                ),
            )
        }
        Ok(Ok(b)) => b,
    };
    let mut req = match openai::parse(endpoint, &bytes) {
        Ok(r) => r,
        Err(m) => return invalid(&app, StatusCode::BAD_REQUEST, &m),
    };
    // The live engine's tokenizer gives the real length (the twin counts
    // words).
    let prompt_ids = match app.engine.tokenize(&req.prompt) {
        None => Vec::new(),
        Some(Err(m)) => return invalid(&app, StatusCode::BAD_REQUEST, &m),
        Some(Ok(ids)) => {
            req.prompt_tokens = ids.len() as u32;
            ids
        }
    };
    if req.model != cfg.model {
        app.latencies.refused_invalid.inc();
        return error(
            StatusCode::NOT_FOUND,
            &format!(
                "The model `{}` does not exist; this server serves `{}`",
                req.model, cfg.model
            ),
            "NotFoundError",
        );
    }
    let room = cfg.max_model_len.saturating_sub(req.prompt_tokens);
    let max_tokens: u64 = match (req.max_tokens, endpoint) {
        (Some(n), _) => n,
        // The legacy completions API's default.
        (None, Endpoint::Completions) => 16,
        (None, Endpoint::Chat) => room.min(cfg.max_tokens_cap) as u64,
    };
    if max_tokens > cfg.max_tokens_cap as u64 {
        return invalid(
            &app,
            StatusCode::BAD_REQUEST,
            &format!(
                "'max_tokens' is {max_tokens}; this server allows at most {} (--max-tokens)",
                cfg.max_tokens_cap
            ),
        );
    }
    let max_tokens = max_tokens as u32;
    if req.prompt_tokens == 0 {
        return invalid(&app, StatusCode::BAD_REQUEST, "the prompt is empty");
    }
    if req.prompt_tokens as u64 + max_tokens as u64 > cfg.max_model_len as u64 || max_tokens == 0 {
        return invalid(
            &app,
            StatusCode::BAD_REQUEST,
            &format!(
                "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the messages, {} in the completion). Please reduce the length of the messages or completion.",
                cfg.max_model_len,
                req.prompt_tokens as u64 + max_tokens as u64,
                req.prompt_tokens,
                max_tokens
            ),
        );
    }
    let client = match headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        Some(k) if cfg.api_key.is_some() => format!("key:{k}"),
        _ => format!("addr:{}", peer.ip()),
    };
    let Some(slot) = ClientSlot::take(&app, client) else {
        app.latencies.refused_client_limit.inc();
        return too_many(
            &app,
            &format!(
                "this client already has {} requests open (the per-client limit)",
                cfg.per_client_limit
            ),
        );
    };
    let job = Job {
        prompt_tokens: req.prompt_tokens,
        output_tokens: max_tokens,
        prompt_ids,
        stop_at_eos_after: (!req.ignore_eos).then_some(req.min_tokens),
    };
    let admitted = match app.engine.submit(job).await {
        None => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the engine has stopped",
                "server_error",
            )
        }
        Some(Err(Refusal::QueueFull)) => {
            return too_many(&app, "the server's waiting queue is full; retry later")
        }
        // Counted by the engine as `unservable`, not as `invalid`.
        Some(Err(Refusal::Unservable(reason))) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!(
                    "the request can never be served: {}",
                    reason.as_str().replace('_', " ")
                ),
                "invalid_request_error",
            )
        }
        Some(Ok(a)) => a,
    };
    let n = app.next_id.fetch_add(1, Ordering::Relaxed);
    let rid = match endpoint {
        Endpoint::Completions => format!("cmpl-{n}"),
        Endpoint::Chat => format!("chatcmpl-{n}"),
    };
    let ticket = Ticket {
        app: app.clone(),
        id: admitted.id,
        done: false,
        _slot: slot,
    };
    let run = Run {
        endpoint,
        rid,
        prompt_tokens: req.prompt_tokens,
        max_tokens,
        include_usage: req.include_usage,
        events: admitted.events,
        ticket,
        arrived,
        // A timeout past what the clock holds is no timeout (a century on).
        deadline: tokio::time::Instant::from_std(
            arrived
                .checked_add(cfg.request_timeout)
                .unwrap_or_else(|| arrived + Duration::from_secs(100 * 365 * 86_400)),
        ),
        last: None,
        tokens: 0,
    };
    if req.stream {
        stream(run)
    } else {
        whole(run).await
    }
}

fn too_many(app: &App, message: &str) -> Response {
    let mut r = error(
        StatusCode::TOO_MANY_REQUESTS,
        message,
        "rate_limit_exceeded",
    );
    r.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(app.cfg.retry_after_s),
    );
    r
}

/// One admitted request on its way to the client.
struct Run {
    endpoint: Endpoint,
    rid: String,
    prompt_tokens: u32,
    max_tokens: u32,
    include_usage: bool,
    events: tokio::sync::mpsc::UnboundedReceiver<TokenEvent>,
    ticket: Ticket,
    arrived: Instant,
    deadline: tokio::time::Instant,
    last: Option<Instant>,
    tokens: u32,
}

enum Next {
    Token(String),
    Finished,
    /// Timed out, or the engine went away.
    Broken,
}

impl Run {
    async fn next(&mut self) -> Next {
        match tokio::time::timeout_at(self.deadline, self.events.recv()).await {
            Ok(Some(TokenEvent::Token(t))) => {
                let now = Instant::now();
                let l = &self.ticket.app.latencies;
                match self.last {
                    None => l.ttft.observe((now - self.arrived).as_secs_f64()),
                    Some(p) => l.itl.observe((now - p).as_secs_f64()),
                }
                self.last = Some(now);
                self.tokens += 1;
                Next::Token(t)
            }
            Ok(Some(TokenEvent::Finished)) => {
                self.ticket.done = true;
                self.ticket
                    .app
                    .latencies
                    .e2e
                    .observe(self.arrived.elapsed().as_secs_f64());
                Next::Finished
            }
            Ok(None) | Err(_) => Next::Broken,
        }
    }

    fn head(&self) -> openai::Head<'_> {
        openai::Head {
            endpoint: self.endpoint,
            id: &self.rid,
            created: self.ticket.app.created,
            model: &self.ticket.app.cfg.model,
        }
    }
}

async fn whole(mut run: Run) -> Response {
    let mut text = String::new();
    loop {
        match run.next().await {
            Next::Token(t) => text.push_str(&t),
            Next::Finished => break,
            Next::Broken => {
                return error(
                    StatusCode::GATEWAY_TIMEOUT,
                    "the request did not finish in time",
                    "timeout_error",
                )
            }
        }
    }
    axum::Json(openai::response(
        &run.head(),
        &text,
        if run.tokens >= run.max_tokens {
            "length"
        } else {
            "stop"
        },
        run.prompt_tokens,
        run.tokens,
    ))
    .into_response()
}

/// One `data: {json}` event, the JSON compact on one line as OpenAI sends
/// it.
fn sse(v: &Value) -> Result<Event, axum::Error> {
    Event::default().json_data(v)
}

/// The streamed response: one `data: {json}` event per token (the last
/// carrying `finish_reason`), the usage chunk when asked for, then
/// `data: [DONE]`. Each token goes out the moment the engine emits it; the
/// last one carries the finish reason, as vLLM sends it.
fn stream(run: Run) -> Response {
    enum Phase {
        Start,
        Tokens,
        Usage,
        Done,
        End,
    }
    struct St {
        run: Run,
        phase: Phase,
    }
    let st = St {
        run,
        phase: Phase::Start,
    };
    let body = futures_util::stream::unfold(st, |mut st| async move {
        loop {
            match st.phase {
                Phase::Start => {
                    st.phase = Phase::Tokens;
                    if st.run.endpoint == Endpoint::Chat {
                        let r = &st.run;
                        let v = openai::role_chunk(&r.head(), r.include_usage);
                        return Some((sse(&v), st));
                    }
                }
                Phase::Tokens => match st.run.next().await {
                    Next::Token(t) => {
                        let r = &st.run;
                        let finish = (r.tokens >= r.max_tokens).then_some("length");
                        let v = openai::chunk(&r.head(), &t, finish, r.include_usage);
                        return Some((sse(&v), st));
                    }
                    Next::Finished => {
                        st.phase = if st.run.include_usage {
                            Phase::Usage
                        } else {
                            Phase::Done
                        };
                        let r = &st.run;
                        if r.tokens < r.max_tokens {
                            // Stopped before max_tokens: say so.
                            let v = openai::chunk(&r.head(), "", Some("stop"), r.include_usage);
                            return Some((sse(&v), st));
                        }
                    }
                    // Ending the body without [DONE] tells the client the
                    // stream broke; dropping the ticket cancels the sequence.
                    Next::Broken => return None,
                },
                Phase::Usage => {
                    st.phase = Phase::Done;
                    let r = &st.run;
                    let v = openai::usage_chunk(&r.head(), r.prompt_tokens, r.tokens);
                    return Some((sse(&v), st));
                }
                Phase::Done => {
                    st.phase = Phase::End;
                    return Some((Ok(Event::default().data("[DONE]")), st));
                }
                Phase::End => return None,
            }
        }
    });
    // `text/event-stream` and `Cache-Control: no-cache`; no keep-alive
    // comments, which OpenAI's stream does not have either.
    Sse::new(body).into_response()
}
