//! The mock model server: a real axum HTTP server on loopback that answers
//! `POST /v1/messages` (Anthropic) and `POST /v1/chat/completions` (OpenAI) from a
//! [`MockScript`], records every request, and notices clients that leave mid-stream.
//! `GET /_mock/requests` and `GET /_mock/stats` expose the same to other processes.
//!
//! Owns: its listener, its recorded requests and its disconnect count. Must not be used by
//! production paths (only tests and `fairyring mock-model`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::stream;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{Notify, mpsc};

use super::script::{Fault, MockRoute, MockScript};
use super::wire::{Segment, WireFormat, chunks, render, render_tool};

/// A request the mock received.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordedRequest {
    /// `/v1/messages` or `/v1/chat/completions`.
    pub path: String,
    /// The key sent (`x-api-key` or `Authorization: Bearer`).
    pub api_key: Option<String>,
    /// `anthropic-version` header, when sent.
    pub anthropic_version: Option<String>,
    /// The JSON body (`null` when it was not JSON).
    pub body: Value,
}

#[derive(Debug)]
struct Shared {
    script: MockScript,
    /// Routes tried first, each with the number of requests it served.
    routes: Mutex<Vec<(MockRoute, usize)>>,
    served: AtomicUsize,
    requests: Mutex<Vec<RecordedRequest>>,
    disconnects: AtomicUsize,
    completed: AtomicUsize,
    changed: Notify,
}

/// A running mock server; stops when dropped.
#[derive(Debug)]
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockServer {
    /// Starts a mock on a free loopback port.
    pub async fn start(script: MockScript) -> std::io::Result<Self> {
        Self::bind(SocketAddr::from(([127, 0, 0, 1], 0)), script).await
    }

    /// Starts a mock on `addr`.
    pub async fn bind(addr: SocketAddr, script: MockScript) -> std::io::Result<Self> {
        Self::bind_routed(addr, script, Vec::new()).await
    }

    /// Starts a mock on a free loopback port that answers a request from the first of
    /// `routes` its system prompt matches, and from `script` otherwise.
    pub async fn start_routed(script: MockScript, routes: Vec<MockRoute>) -> std::io::Result<Self> {
        Self::bind_routed(SocketAddr::from(([127, 0, 0, 1], 0)), script, routes).await
    }

    async fn bind_routed(
        addr: SocketAddr,
        script: MockScript,
        routes: Vec<MockRoute>,
    ) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            script,
            routes: Mutex::new(routes.into_iter().map(|r| (r, 0)).collect()),
            served: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
            disconnects: AtomicUsize::new(0),
            completed: AtomicUsize::new(0),
            changed: Notify::new(),
        });
        let app = router(shared.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "mock model server stopped");
            }
        });
        Ok(MockServer { addr, shared, task })
    }

    /// Adds a route (tried after the earlier ones), e.g. once the fairy ids it answers with
    /// are known.
    pub fn add_route(&self, route: MockRoute) {
        self.shared
            .routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((route, 0));
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`, to use as a provider base URL.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Streams abandoned by their client before the body was complete.
    pub fn disconnects(&self) -> usize {
        self.shared.disconnects.load(Ordering::SeqCst)
    }

    /// Streams sent to the end.
    pub fn completed(&self) -> usize {
        self.shared.completed.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` clients have left mid-stream; false on timeout.
    pub async fn wait_disconnects(&self, n: usize, timeout: Duration) -> bool {
        let wait = async {
            loop {
                let notified = self.shared.changed.notified();
                if self.disconnects() >= n {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(timeout, wait).await.is_ok()
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/messages", post(anthropic))
        .route("/v1/chat/completions", post(openai))
        .route("/_mock/requests", get(list_requests))
        .route("/_mock/stats", get(stats))
        .with_state(shared)
}

async fn anthropic(State(s): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    serve(s, WireFormat::Anthropic, "/v1/messages", &headers, &body)
}

async fn openai(State(s): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    serve(
        s,
        WireFormat::OpenAi,
        "/v1/chat/completions",
        &headers,
        &body,
    )
}

async fn list_requests(State(s): State<Arc<Shared>>) -> Response {
    let list = s.requests.lock().unwrap_or_else(|p| p.into_inner()).clone();
    axum::Json(list).into_response()
}

/// `{requests, disconnects, completed}`: for tests driving a mock in another process.
async fn stats(State(s): State<Arc<Shared>>) -> Response {
    let requests = s.requests.lock().unwrap_or_else(|p| p.into_inner()).len();
    axum::Json(serde_json::json!({
        "requests": requests,
        "disconnects": s.disconnects.load(Ordering::SeqCst),
        "completed": s.completed.load(Ordering::SeqCst),
    }))
    .into_response()
}

fn serve(
    s: Arc<Shared>,
    format: WireFormat,
    path: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let h = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let api_key = h("x-api-key")
        .or_else(|| h("authorization").and_then(|a| a.strip_prefix("Bearer ").map(str::to_owned)));
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let system = system_text(&body);
    let asked = structured_asked(&body);
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("mock")
        .to_owned();
    s.requests
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(RecordedRequest {
            path: path.into(),
            api_key,
            anthropic_version: h("anthropic-version"),
            body,
        });
    let routed = s
        .routes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter_mut()
        .find(|(r, _)| r.matches(&system))
        .map(|(r, n)| {
            *n += 1;
            r.responses
                .get(*n - 1)
                .or_else(|| r.responses.last())
                .cloned()
        });
    let n = s.served.fetch_add(1, Ordering::SeqCst);
    let from_script = routed.is_none();
    let Some(resp) = routed.unwrap_or_else(|| s.script.response(n).cloned()) else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "empty script").into_response();
    };
    if resp.refuse_structured && asked.is_some() {
        // Not used up: the request made again without structured output gets it.
        if from_script {
            s.served.fetch_sub(1, Ordering::SeqCst);
        } else if let Some((_, n)) = s
            .routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter_mut()
            .find(|(r, _)| r.matches(&system))
        {
            *n = n.saturating_sub(1);
        }
        return refusal(format);
    }
    if let Some(Fault::Http {
        status,
        body,
        retry_after,
    }) = &resp.fault
    {
        let code = StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut r = (
            code,
            [(header::CONTENT_TYPE, "application/json")],
            body.clone(),
        )
            .into_response();
        if let Some(ra) = retry_after.as_deref().and_then(|v| v.parse().ok()) {
            r.headers_mut().insert(header::RETRY_AFTER, ra);
        }
        return r;
    }
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    let segments = match (format, asked) {
        (WireFormat::Anthropic, Some(tool)) => render_tool(&resp, &model, &tool),
        _ => render(format, &resp, &model),
    };
    tokio::spawn(feed(s, tx, segments, resp.chunk_size, resp.delay_ms));
    let body = Body::from_stream(stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }));
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// Whether a request asks for structured output: `Some` with the tool Anthropic must call
/// (empty for OpenAI's `response_format`).
fn structured_asked(body: &Value) -> Option<String> {
    if body.get("response_format").is_some() {
        return Some(String::new());
    }
    body.pointer("/tool_choice/name")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// A provider's 400 for structured output it does not offer.
fn refusal(format: WireFormat) -> Response {
    let body = match format {
        WireFormat::OpenAi => serde_json::json!({"error": {
            "message": "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
            "type": "invalid_request_error", "param": "response_format", "code": null}}),
        WireFormat::Anthropic => serde_json::json!({"type": "error", "error": {
            "type": "invalid_request_error", "message": "tools: Extra inputs are not permitted"}}),
    };
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The system prompt of a request in either format (Anthropic's `system`, a string or text
/// blocks; OpenAI's `system` messages).
fn system_text(body: &Value) -> String {
    let text_of = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    let mut text = body.get("system").map(text_of).unwrap_or_default();
    for m in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("system"))
    {
        text.push('\n');
        text.push_str(&text_of(m.get("content").unwrap_or(&Value::Null)));
    }
    text
}

/// Writes the segments into the body channel; a closed channel means the client left.
async fn feed(
    s: Arc<Shared>,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    segments: Vec<Segment>,
    chunk_size: usize,
    delay_ms: u64,
) {
    let left = |s: &Shared| {
        s.disconnects.fetch_add(1, Ordering::SeqCst);
        s.changed.notify_waiters();
    };
    for seg in segments {
        match seg {
            Segment::Bytes(bytes) => {
                for piece in chunks(&bytes, chunk_size) {
                    if delay_ms > 0 {
                        tokio::select! {
                            _ = tx.closed() => return left(&s),
                            _ = tokio::time::sleep(Duration::from_millis(delay_ms)) => {}
                        }
                    }
                    if tx.send(Ok(Bytes::from(piece))).await.is_err() {
                        return left(&s);
                    }
                }
            }
            Segment::Cut => {
                let cut =
                    std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "scripted cut");
                let _ = tx.send(Err(cut)).await;
                return;
            }
            Segment::Stall => {
                tx.closed().await;
                return left(&s);
            }
            Segment::Pause(ms) => {
                tokio::select! {
                    _ = tx.closed() => return left(&s),
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
                }
            }
        }
    }
    s.completed.fetch_add(1, Ordering::SeqCst);
    s.changed.notify_waiters();
}
