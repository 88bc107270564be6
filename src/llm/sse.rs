//! Server-sent-events glue: sends a provider request with `reqwest`, turns its byte stream into
//! SSE events with `eventsource-stream` (no hand-rolled framing), and drives a wire-format
//! [`Decoder`] over them with an idle timeout.
//!
//! Owns: the HTTP round trip of one attempt and the event loop. Must not know any provider's
//! JSON (that is the decoders' job) nor retry anything (that is [`super::failover`]'s).

use std::collections::VecDeque;
use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt, stream};

use super::error::{LlmError, classify_http, classify_transport, parse_retry_after};
use super::types::{ModelEvent, ModelStream};

/// Largest error body read from a refusing provider.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// A wire format's interpretation of SSE events. Pure: unit tests feed it events directly.
pub trait Decoder: Send + 'static {
    /// Appends the model events that one SSE event means to `out`. A terminal event pushes
    /// [`ModelEvent::Done`] last; an error event returns `Err`.
    fn on_event(&mut self, event: &Event, out: &mut Vec<ModelEvent>) -> Result<(), LlmError>;
}

/// SSE events parsed from any byte stream (a reqwest body, or in-memory bytes).
pub fn sse_events<S, B, E>(bytes: S, idle: Duration) -> impl Stream<Item = Result<Event, LlmError>>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: TransportError,
{
    bytes.eventsource().map(move |r| {
        r.map_err(|e| match e {
            EventStreamError::Transport(t) => t.into_llm_error(idle),
            EventStreamError::Utf8(u) => LlmError::Protocol(format!("invalid utf-8: {u}")),
            EventStreamError::Parser(p) => LlmError::Protocol(format!("bad sse line: {p}")),
        })
    })
}

/// A byte-stream error that can be classified as an [`LlmError`].
pub trait TransportError {
    /// The classified error; `idle` is the configured idle timeout, for timeout messages.
    fn into_llm_error(self, idle: Duration) -> LlmError;
}

impl TransportError for reqwest::Error {
    fn into_llm_error(self, idle: Duration) -> LlmError {
        classify_transport(&self, idle)
    }
}

impl TransportError for std::convert::Infallible {
    fn into_llm_error(self, _idle: Duration) -> LlmError {
        match self {}
    }
}

/// How long an attempt waits: for the provider's first byte (its answer's head and first
/// event: a local model reads the whole prompt first, which is slow, not stalled), then
/// between two events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From sending the request to its first event (`--llm-first-byte-timeout`).
    pub first_byte: Duration,
    /// Between two events after that (`--llm-timeout`).
    pub idle: Duration,
}

impl Timeouts {
    /// The same bound for the first byte and between events.
    pub fn idle(idle: Duration) -> Self {
        Timeouts {
            first_byte: idle,
            idle,
        }
    }
}

/// Sends `request` when first polled and streams the decoded events. `prelude` events (the
/// prefill echo) are delivered once the provider has accepted the request.
pub fn http_stream<D: Decoder>(
    request: reqwest::RequestBuilder,
    decoder: D,
    timeouts: Timeouts,
    prelude: Vec<ModelEvent>,
) -> ModelStream {
    stream::once(async move {
        // The head and the first event share the first byte's allowance.
        let deadline = tokio::time::Instant::now() + timeouts.first_byte;
        match open(request, timeouts.first_byte, timeouts.idle).await {
            Ok(events) => drive_until(events, decoder, timeouts, Some(deadline), prelude),
            Err(e) => stream::iter([Err(e)]).boxed(),
        }
    })
    .flatten()
    .boxed()
}

/// Sends the request and, on success, returns its SSE events; a refusal is classified.
async fn open(
    request: reqwest::RequestBuilder,
    first_byte: Duration,
    idle: Duration,
) -> Result<impl Stream<Item = Result<Event, LlmError>> + Send + 'static, LlmError> {
    let response = tokio::time::timeout(first_byte, request.send())
        .await
        .map_err(|_| LlmError::Timeout(first_byte))?
        .map_err(|e| classify_transport(&e, idle))?;
    let status = response.status();
    if !status.is_success() {
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let retry_after = parse_retry_after(
            header("retry-after").as_deref(),
            header("retry-after-ms").as_deref(),
        );
        let body = read_limited(response, idle).await;
        return Err(classify_http(status.as_u16(), retry_after, &body));
    }
    Ok(sse_events(response.bytes_stream(), idle))
}

/// Reads at most [`MAX_ERROR_BODY`] bytes of an error body; what cannot be read is left out.
async fn read_limited(mut response: reqwest::Response, idle: Duration) -> String {
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY {
        match tokio::time::timeout(idle, response.chunk()).await {
            Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(MAX_ERROR_BODY);
    String::from_utf8_lossy(&body).into_owned()
}

/// Runs `decoder` over `events`: each wait for the next event is bounded by `idle`; the
/// stream ends after [`ModelEvent::Done`] or after the first error (a stream that ends without
/// `Done` yields [`LlmError::Truncated`]).
pub fn drive<S, D>(events: S, decoder: D, idle: Duration, prelude: Vec<ModelEvent>) -> ModelStream
where
    S: Stream<Item = Result<Event, LlmError>> + Send + 'static,
    D: Decoder,
{
    drive_with(events, decoder, Timeouts::idle(idle), prelude)
}

/// [`drive`], the wait for the first event bounded by `timeouts.first_byte` and each later
/// one by `timeouts.idle`.
pub fn drive_with<S, D>(
    events: S,
    decoder: D,
    timeouts: Timeouts,
    prelude: Vec<ModelEvent>,
) -> ModelStream
where
    S: Stream<Item = Result<Event, LlmError>> + Send + 'static,
    D: Decoder,
{
    drive_until(events, decoder, timeouts, None, prelude)
}

/// [`drive_with`], the first event due by `first_deadline` when given (the request's head
/// took part of the first byte's allowance); a timeout names the configured bound.
fn drive_until<S, D>(
    events: S,
    decoder: D,
    timeouts: Timeouts,
    first_deadline: Option<tokio::time::Instant>,
    prelude: Vec<ModelEvent>,
) -> ModelStream
where
    S: Stream<Item = Result<Event, LlmError>> + Send + 'static,
    D: Decoder,
{
    struct State<S, D> {
        events: std::pin::Pin<Box<S>>,
        decoder: D,
        queue: VecDeque<ModelEvent>,
        finished: bool,
        first: bool,
    }
    let state = State {
        events: Box::pin(events),
        decoder,
        queue: prelude.into(),
        finished: false,
        first: true,
    };
    stream::unfold(state, move |mut st| async move {
        loop {
            if let Some(ev) = st.queue.pop_front() {
                if matches!(ev, ModelEvent::Done { .. }) {
                    st.queue.clear();
                    st.finished = true;
                }
                return Some((Ok(ev), st));
            }
            if st.finished {
                return None;
            }
            let (bound, due) = if st.first {
                let due = first_deadline
                    .unwrap_or_else(|| tokio::time::Instant::now() + timeouts.first_byte);
                (timeouts.first_byte, due)
            } else {
                (timeouts.idle, tokio::time::Instant::now() + timeouts.idle)
            };
            st.first = false;
            let next = match tokio::time::timeout_at(due, st.events.next()).await {
                Err(_) => Err(LlmError::Timeout(bound)),
                Ok(None) => Err(LlmError::Truncated),
                Ok(Some(Err(e))) => Err(e),
                Ok(Some(Ok(event))) => {
                    let mut out = Vec::new();
                    st.decoder.on_event(&event, &mut out).map(|()| out)
                }
            };
            match next {
                Ok(out) => st.queue.extend(out),
                Err(e) => {
                    st.finished = true;
                    return Some((Err(e), st));
                }
            }
        }
    })
    .boxed()
}

/// Parses an event's `data` as JSON, as a protocol error when it is not.
pub fn json_data(event: &Event) -> Result<serde_json::Value, LlmError> {
    serde_json::from_str(&event.data).map_err(|e| {
        let head: String = event.data.chars().take(80).collect();
        LlmError::Protocol(format!("bad json in `{}` event ({e}): {head}", event.event))
    })
}
