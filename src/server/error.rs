//! The one place where errors become HTTP responses (status + JSON `{error, detail}`) or
//! WebSocket close frames (code + reason): the room's, the token's, and the fairy hub's
//! (fairies and projects). Internal details of 5xx are logged, not sent.
//! Request bodies are capped at [`MAX_BODY_BYTES`] (413 `body_too_large`), and
//! [`json_errors`] turns the plain-text refusals axum's extractors and router produce on their
//! own (a bad query string, a wrong method) into the same JSON shape.

use axum::Json;
use axum::extract::rejection::{BytesRejection, JsonRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::agent::host::hub::HubError;
use crate::agent::runtime::revert::RevertError;
use crate::agent::state::fairy::FairyError;
use crate::room::RoomError;

/// WebSocket close codes used by the server.
pub mod close {
    /// The server is shutting down or the room unloading.
    pub const GOING_AWAY: u16 = 1001;
    /// Text frames or unknown message types.
    pub const UNSUPPORTED: u16 = 1003;
    /// Malformed messages or document updates.
    pub const INVALID_PAYLOAD: u16 = 1007;
    /// Rate limit abuse.
    pub const POLICY: u16 = 1008;
    /// Message larger than `--max-message-bytes`.
    pub const TOO_BIG: u16 = 1009;
    /// Storage failure.
    pub const INTERNAL: u16 = 1011;
    /// The peer was too slow, or the room full: reconnect later.
    pub const TRY_AGAIN_LATER: u16 = 1013;
    /// The token expired during the session.
    pub const TOKEN_EXPIRED: u16 = 4401;
    /// The store's disk is full: the update was not kept; reconnect and write once space
    /// returns (reading goes on). Mirrors HTTP `507`.
    pub const STORE_FULL: u16 = 4507;
}

/// Largest request body accepted, in bytes (larger: 413 `body_too_large`).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// An error answered over HTTP.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    detail: String,
    /// Seconds for a `retry-after` header.
    retry_after: Option<u64>,
    /// Fields answered beside `error` and `detail` (a patch's refused items).
    extra: serde_json::Map<String, serde_json::Value>,
}

impl ApiError {
    /// A new error with a stable snake_case code and a human-readable detail.
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            detail: detail.into(),
            retry_after: None,
            extra: serde_json::Map::new(),
        }
    }

    /// Adds a field to the JSON body beside `error` and `detail` (never one of those two).
    pub fn with_field(mut self, key: &str, value: serde_json::Value) -> Self {
        if key != "error" && key != "detail" {
            self.extra.insert(key.to_owned(), value);
        }
        self
    }

    /// Adds a `retry-after` header (whole seconds, at least 1).
    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds.max(1));
        self
    }

    /// A request body that could not be read (413 `body_too_large` past [`MAX_BODY_BYTES`])
    /// or is not the JSON expected (400 `invalid_json`).
    pub fn body(status: StatusCode, detail: impl Into<String>) -> Self {
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                status,
                "body_too_large",
                format!("request bodies are limited to {MAX_BODY_BYTES} bytes"),
            )
        } else {
            ApiError::new(StatusCode::BAD_REQUEST, "invalid_json", detail)
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The stable code.
    pub fn code(&self) -> &'static str {
        self.code
    }
}

/// The body of every error answer (the `ErrorBody` of `/openapi.json`).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// A stable snake_case code (`fairy_not_found`, `doc_too_large`, …).
    pub error: &'static str,
    /// What went wrong, for a person (5xx other than 503: `internal error`).
    pub detail: String,
    /// Fields some errors add (a refused patch's `items`, a missing shape's `ids`).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        crate::metrics::global().refuse(self.code);
        let detail = if self.status.is_server_error()
            && self.status != StatusCode::SERVICE_UNAVAILABLE
            && self.status != StatusCode::INSUFFICIENT_STORAGE
        {
            tracing::error!(code = self.code, detail = %self.detail, "internal error");
            "internal error".to_owned()
        } else {
            self.detail
        };
        let body = ErrorBody {
            error: self.code,
            detail,
            extra: self.extra,
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        ApiError::body(rejection.status(), rejection.body_text())
    }
}

impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> Self {
        ApiError::body(rejection.status(), rejection.body_text())
    }
}

/// Rewrites a client-error response that is not JSON (axum's own plain-text refusals: a query
/// string that does not parse, a method a route does not take, a body over the limit caught
/// by an extractor this crate does not wrap) as `{"error", "detail"}` with the same status.
/// JSON responses, and every other status, pass unchanged.
pub async fn json_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !status.is_client_error() || is_json || status == StatusCode::NOT_FOUND {
        return response;
    }
    let retry_after = response.headers().get(header::RETRY_AFTER).cloned();
    let text = axum::body::to_bytes(response.into_body(), 4096)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let error = match status {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::body(status, text),
        StatusCode::METHOD_NOT_ALLOWED => ApiError::new(status, "method_not_allowed", text),
        StatusCode::UNSUPPORTED_MEDIA_TYPE | StatusCode::UNPROCESSABLE_ENTITY => {
            ApiError::new(status, "invalid_json", text)
        }
        StatusCode::TOO_MANY_REQUESTS => ApiError::new(status, "rate_limited", text),
        _ => ApiError::new(status, "bad_request", text),
    };
    let mut response = error.into_response();
    if let Some(value) = retry_after {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

impl From<crate::auth::AuthError> for ApiError {
    fn from(error: crate::auth::AuthError) -> Self {
        let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::UNAUTHORIZED);
        ApiError::new(status, error.code(), error.detail())
    }
}

impl From<RoomError> for ApiError {
    fn from(error: RoomError) -> Self {
        let (status, code) = match &error {
            RoomError::RoomFull => (StatusCode::SERVICE_UNAVAILABLE, "room_full"),
            RoomError::TooManyRooms => (StatusCode::SERVICE_UNAVAILABLE, "too_many_rooms"),
            RoomError::Closed => (StatusCode::SERVICE_UNAVAILABLE, "shutting_down"),
            RoomError::Store => (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"),
            RoomError::StoreFull => (StatusCode::INSUFFICIENT_STORAGE, "store_full"),
            RoomError::Fenced => (StatusCode::SERVICE_UNAVAILABLE, "room_reloading"),
            RoomError::DocTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "doc_too_large"),
            RoomError::BadUpdate(_) | RoomError::Protocol(_) => {
                (StatusCode::BAD_REQUEST, "invalid_update")
            }
            RoomError::ServerOwned(_) => (StatusCode::BAD_REQUEST, "server_owned_root"),
            _ => (StatusCode::BAD_REQUEST, "bad_request"),
        };
        let api = ApiError::new(status, code, error.to_string());
        // A store that failed or filled up: worth retrying after a moment (docs/operations.md).
        match error {
            RoomError::Store => api.with_retry_after(1),
            RoomError::StoreFull => api.with_retry_after(5),
            _ => api,
        }
    }
}

/// A fairy or project operation's failure (the fairy and project APIs, and their forwarding):
/// the status and code each answers (docs/fairies.md "HTTP API", `/openapi.json`).
impl From<HubError> for ApiError {
    fn from(error: HubError) -> Self {
        match error {
            HubError::Room(e) => e.into(),
            HubError::Fairy(FairyError::NotFound(id)) => ApiError::new(
                StatusCode::NOT_FOUND,
                "fairy_not_found",
                format!("no fairy '{id}' in this room"),
            ),
            HubError::Fairy(e) => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_fairy", e.to_string())
            }
            HubError::Store(crate::store::StoreError::Full) => RoomError::StoreFull.into(),
            HubError::Store(e) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                e.to_string(),
            ),
            HubError::ShuttingDown => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting_down",
                error.to_string(),
            ),
            HubError::NotStarted(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "fairy_not_started",
                error.to_string(),
            ),
            HubError::TooManyFairies(_) => {
                ApiError::new(StatusCode::CONFLICT, "too_many_fairies", error.to_string())
            }
            HubError::Revert(RevertError::UnknownRequest(_)) => ApiError::new(
                StatusCode::NOT_FOUND,
                "request_not_found",
                error.to_string(),
            ),
            HubError::Busy(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "fairy_busy",
                error.to_string(),
            ),
            HubError::FairyInProject(_) => {
                ApiError::new(StatusCode::CONFLICT, "fairy_in_project", error.to_string())
            }
            HubError::ProjectNotFound(_) => ApiError::new(
                StatusCode::NOT_FOUND,
                "project_not_found",
                error.to_string(),
            ),
            HubError::InvalidGroup(_) => ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_group_prompt",
                error.to_string(),
            ),
            HubError::Moving => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "fairy_moving",
                error.to_string(),
            )
            .with_retry_after(1),
            HubError::BudgetExhausted {
                budget,
                retry_after,
                detail,
            } => ApiError::new(StatusCode::TOO_MANY_REQUESTS, "budget_exhausted", detail)
                .with_field("budget", serde_json::json!(budget.name()))
                .with_field("retryAfter", serde_json::json!(retry_after))
                .with_retry_after(retry_after),
            HubError::Leases(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "pubsub_unavailable",
                error.to_string(),
            ),
        }
    }
}

/// The close code, metric reason and close reason for a room error.
pub fn close_for(error: &RoomError) -> (u16, &'static str, String) {
    let (code, reason) = match error {
        RoomError::Protocol(crate::protocol::ProtocolError::UnknownType(_)) => {
            (close::UNSUPPORTED, "unknown_type")
        }
        RoomError::Protocol(_) => (close::INVALID_PAYLOAD, "malformed"),
        RoomError::BadUpdate(_) => (close::INVALID_PAYLOAD, "bad_update"),
        RoomError::ServerOwned(_) => (close::POLICY, "server_owned_root"),
        RoomError::AwarenessTooBig { .. } => (close::TOO_BIG, "too_big"),
        RoomError::BadAwareness(_) => (close::INVALID_PAYLOAD, "bad_awareness"),
        RoomError::SlowConsumer => (close::TRY_AGAIN_LATER, "slow_consumer"),
        RoomError::RoomFull | RoomError::TooManyRooms => (close::TRY_AGAIN_LATER, "full"),
        RoomError::Store => (close::INTERNAL, "store_failure"),
        RoomError::StoreFull => (close::STORE_FULL, "store_full"),
        RoomError::Fenced => (close::TRY_AGAIN_LATER, "room_reloading"),
        RoomError::Closed => (close::GOING_AWAY, "room_closed"),
        RoomError::DocTooLarge(_) => (close::TOO_BIG, "doc_too_large"),
    };
    // Close reasons are limited to 123 bytes by RFC 6455.
    (code, reason, truncate(&error.to_string(), 120))
}

/// Truncates at a character boundary.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_reasons_fit_a_control_frame() {
        let long = RoomError::BadUpdate("é".repeat(200));
        let (code, reason, text) = close_for(&long);
        assert_eq!((code, reason), (close::INVALID_PAYLOAD, "bad_update"));
        assert!(text.len() <= 123);
    }
}
