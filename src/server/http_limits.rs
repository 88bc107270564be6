//! Caps on HTTP requests in flight (docs/limits.md "HTTP"): at most `--max-http-requests` in
//! the whole process (over it: `503 {"error":"server_busy","retryAfter":1}`) and
//! `--max-http-requests-per-token` per token (over it: `429
//! {"error":"too_many_requests","retryAfter":1}`), both with a `retry-after` header. A request
//! holds its place from its arrival until its answer's body is sent whole, so clients that ask
//! for large answers and never read them hold at most these many answers in memory. WebSocket
//! upgrades are not counted (sockets have their own caps: `--max-connections`).
//!
//! Owns the two counters and the middleware that takes and gives back a place; a request's
//! token is keyed by its text (the `Authorization` bearer or `?token=`) before it is verified,
//! so a token is counted even when its request is then refused; a request without one counts
//! against the process cap only. Touches no room, no store.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::AppState;
use super::error::ApiError;
use crate::config::ServeConfig;

/// Seconds a refused client is told to wait.
const RETRY_AFTER: u64 = 1;

/// The requests in flight: a process-wide semaphore and a count per token.
pub struct HttpLimits {
    process: Arc<Semaphore>,
    max_process: usize,
    per_token: usize,
    tokens: Arc<Mutex<HashMap<u64, usize>>>,
}

impl std::fmt::Debug for HttpLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpLimits")
            .field("max_process", &self.max_process)
            .field("per_token", &self.per_token)
            .finish_non_exhaustive()
    }
}

/// A token's place, given back when dropped.
struct TokenPlace {
    tokens: Arc<Mutex<HashMap<u64, usize>>>,
    key: u64,
}

impl Drop for TokenPlace {
    fn drop(&mut self) {
        let mut tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = tokens.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                tokens.remove(&self.key);
            }
        }
    }
}

/// A request's places (process and token), held until its answer is sent.
pub struct Place {
    _process: Option<OwnedSemaphorePermit>,
    _token: Option<TokenPlace>,
}

/// Why a request got no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// `--max-http-requests` are in flight.
    Process,
    /// `--max-http-requests-per-token` of this token are in flight.
    Token,
}

impl HttpLimits {
    /// The caps of `config` (0: no cap).
    pub fn from_config(config: &ServeConfig) -> Self {
        let max_process = if config.max_http_requests == 0 {
            Semaphore::MAX_PERMITS
        } else {
            config.max_http_requests
        };
        HttpLimits {
            process: Arc::new(Semaphore::new(max_process)),
            max_process,
            per_token: config.max_http_requests_per_token,
            tokens: Arc::default(),
        }
    }

    /// Requests holding a place now.
    pub fn in_flight(&self) -> usize {
        self.max_process
            .saturating_sub(self.process.available_permits())
    }

    /// A place for a request carrying `token` (its text, unverified), or why there is none.
    pub fn enter(&self, token: Option<&str>) -> Result<Place, Refused> {
        let process = Arc::clone(&self.process)
            .try_acquire_owned()
            .map_err(|_| Refused::Process)?;
        let token = match token {
            Some(token) if self.per_token > 0 => {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                token.hash(&mut hasher);
                let key = hasher.finish();
                let mut tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
                let count = tokens.entry(key).or_default();
                if *count >= self.per_token {
                    return Err(Refused::Token);
                }
                *count += 1;
                Some(TokenPlace {
                    tokens: Arc::clone(&self.tokens),
                    key,
                })
            }
            _ => None,
        };
        Ok(Place {
            _process: Some(process),
            _token: token,
        })
    }
}

/// The token a request carries, as text: the `Authorization` bearer, else `?token=`.
fn token_of(request: &Request) -> Option<String> {
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::to_owned);
    bearer.or_else(|| {
        request.uri().query().and_then(|query| {
            query
                .split('&')
                .find_map(|pair| pair.strip_prefix("token="))
                .map(str::to_owned)
        })
    })
}

/// The middleware: a place for every request but WebSocket upgrades, held until the answer's
/// body is sent, or the refusal.
pub async fn admit(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let upgrade = request
        .headers()
        .get(header::UPGRADE)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket"));
    if upgrade {
        return next.run(request).await;
    }
    let token = token_of(&request);
    let place = match state.http_limits.enter(token.as_deref()) {
        Ok(place) => place,
        Err(Refused::Process) => {
            return ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_busy",
                format!(
                    "{} requests are in flight (--max-http-requests); retry shortly",
                    state.http_limits.max_process
                ),
            )
            .with_field("retryAfter", serde_json::json!(RETRY_AFTER))
            .with_retry_after(RETRY_AFTER)
            .into_response();
        }
        Err(Refused::Token) => {
            return ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_requests",
                format!(
                    "{} requests of this token are in flight (--max-http-requests-per-token); retry shortly",
                    state.http_limits.per_token
                ),
            )
            .with_field("retryAfter", serde_json::json!(RETRY_AFTER))
            .with_retry_after(RETRY_AFTER)
            .into_response();
        }
    };
    let response = next.run(request).await;
    // The place goes with the body: given back once it is sent whole (or the client left).
    let (mut parts, body) = response.into_parts();
    // The stream has no size of its own: the answer keeps its length (else it would go out
    // chunked), where it may have a body.
    let bodiless = parts.status.is_informational()
        || parts.status == StatusCode::NO_CONTENT
        || parts.status == StatusCode::NOT_MODIFIED;
    if let Some(length) = axum::body::HttpBody::size_hint(&body).exact()
        && !bodiless
        && !parts.headers.contains_key(header::CONTENT_LENGTH)
    {
        parts
            .headers
            .insert(header::CONTENT_LENGTH, header::HeaderValue::from(length));
    }
    let stream = body.into_data_stream().map(move |chunk| {
        let _held = &place;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(process: usize, per_token: usize) -> HttpLimits {
        HttpLimits::from_config(&ServeConfig {
            max_http_requests: process,
            max_http_requests_per_token: per_token,
            ..ServeConfig::for_test()
        })
    }

    #[test]
    fn places_are_counted_per_token_and_per_process_and_given_back() {
        let limits = limits(3, 2);
        let a1 = limits.enter(Some("a")).unwrap();
        let _a2 = limits.enter(Some("a")).unwrap();
        assert_eq!(limits.enter(Some("a")).err(), Some(Refused::Token));
        let _b1 = limits.enter(Some("b")).unwrap();
        assert_eq!(limits.enter(None).err(), Some(Refused::Process));
        drop(a1);
        let _a3 = limits.enter(Some("a")).unwrap();
        // No cap: 0.
        let open = super::tests::limits(0, 0);
        let held: Vec<Place> = (0..100).map(|_| open.enter(Some("a")).unwrap()).collect();
        assert_eq!(open.in_flight(), 100);
        drop(held);
        assert_eq!(open.in_flight(), 0);
    }
}
