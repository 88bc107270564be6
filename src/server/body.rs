//! Request bodies: every body is read here, up to [`MAX_BODY_BYTES`], before a handler sees
//! it. A larger one (declared by `content-length` or found while reading a chunked body) is
//! answered `413 {"error": "body_too_large"}` — after the rest of it has been read and
//! discarded (at most [`DRAIN_BYTES`] more, for at most [`DRAIN_TIME`]), because a server that
//! answers and closes while the client is still sending makes the client's write fail (a
//! broken pipe or a reset) before it reads the answer.
//!
//! Owns the size policy and [`OptionalJson`], the extractor of bodies that may be absent;
//! what a body must contain is each handler's business. `GET` and `HEAD` requests (the
//! WebSocket upgrade, SSE, reads) pass through the middleware untouched.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{FromRequest, Request};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use futures_util::StreamExt;
use serde::de::DeserializeOwned;

use super::error::{ApiError, MAX_BODY_BYTES};

/// Most bytes of an oversized body read and thrown away before the 413 is sent.
pub const DRAIN_BYTES: usize = 16 * 1024 * 1024;
/// Longest time spent discarding an oversized body.
pub const DRAIN_TIME: Duration = Duration::from_secs(2);

fn too_large() -> Response {
    ApiError::body(StatusCode::PAYLOAD_TOO_LARGE, "").into_response()
}

/// The middleware (see the module docs).
pub async fn limit(request: Request, next: Next) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD) {
        return next.run(request).await;
    }
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let (parts, body) = request.into_parts();
    let mut stream = body.into_data_stream();
    let mut buffer = BytesMut::new();
    let mut over = declared.is_some_and(|n| n > MAX_BODY_BYTES as u64);
    while !over {
        match stream.next().await {
            None => break,
            Some(Ok(chunk)) if buffer.len() + chunk.len() <= MAX_BODY_BYTES => {
                buffer.extend_from_slice(&chunk)
            }
            Some(Ok(_)) => over = true,
            Some(Err(error)) => {
                return ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "bad_request",
                    format!("could not read the request body: {error}"),
                )
                .into_response();
            }
        }
    }
    if over {
        let discard = async {
            let mut read = 0usize;
            while let Some(Ok(chunk)) = stream.next().await {
                read += chunk.len();
                if read > DRAIN_BYTES {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(DRAIN_TIME, discard).await;
        return too_large();
    }
    next.run(Request::from_parts(parts, Body::from(buffer.freeze())))
        .await
}

/// An optional JSON body: absent, empty or only whitespace is `T::default()`; JSON that is not
/// a `T` is 400 `invalid_json`; more than [`MAX_BODY_BYTES`] is 413 `body_too_large` (also
/// without the [`limit`] middleware in front). Unlike axum's `Json`, no `content-type` is
/// required (an empty body has none). Take it as `Result<OptionalJson<T>, ApiError>` to answer
/// other checks (rate limits, ids) first.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct OptionalJson<T>(pub T);

impl<T: DeserializeOwned + Default> OptionalJson<T> {
    /// Parses a whole body (see the type's docs).
    pub fn parse(body: &[u8]) -> Result<Self, ApiError> {
        if body.len() > MAX_BODY_BYTES {
            return Err(ApiError::body(StatusCode::PAYLOAD_TOO_LARGE, ""));
        }
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(T::default()));
        }
        serde_json::from_slice(body)
            .map(OptionalJson)
            .map_err(|e| ApiError::body(StatusCode::BAD_REQUEST, e.to_string()))
    }
}

impl<T, S> FromRequest<S> for OptionalJson<T>
where
    T: DeserializeOwned + Default,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &S) -> Result<Self, ApiError> {
        let mut stream = request.into_body().into_data_stream();
        let mut buffer = BytesMut::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|error| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "bad_request",
                    format!("could not read the request body: {error}"),
                )
            })?;
            if buffer.len() + chunk.len() > MAX_BODY_BYTES {
                return Err(ApiError::body(StatusCode::PAYLOAD_TOO_LARGE, ""));
            }
            buffer.extend_from_slice(&chunk);
        }
        Self::parse(&buffer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct CancelLike {
        mode: Option<String>,
    }

    async fn extract(
        body: impl Into<axum::body::Body>,
    ) -> Result<CancelLike, (StatusCode, String)> {
        let request = Request::builder()
            .method(Method::POST)
            .uri("/")
            .body(body.into())
            .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        OptionalJson::<CancelLike>::from_request(request, &())
            .await
            .map(|OptionalJson(b)| b)
            .map_err(|e| (e.status(), e.code().to_owned()))
    }

    #[tokio::test]
    async fn absent_or_blank_bodies_are_the_default() {
        assert_eq!(
            extract(axum::body::Body::empty()).await,
            Ok(CancelLike::default())
        );
        assert_eq!(extract(" \n\t").await, Ok(CancelLike::default()));
        assert_eq!(
            extract(r#"{"mode":"soloing"}"#).await,
            Ok(CancelLike {
                mode: Some("soloing".into())
            })
        );
    }

    #[tokio::test]
    async fn bad_json_is_400_and_too_large_413() {
        let invalid = Err((StatusCode::BAD_REQUEST, "invalid_json".to_owned()));
        assert_eq!(extract("{").await, invalid);
        assert_eq!(extract(r#"{"other":1}"#).await, invalid);
        assert_eq!(extract("[1]").await, invalid);
        let large = format!("{{\"mode\":\"{}\"}}", "x".repeat(MAX_BODY_BYTES));
        assert_eq!(
            extract(large).await,
            Err((StatusCode::PAYLOAD_TOO_LARGE, "body_too_large".to_owned()))
        );
    }
}
