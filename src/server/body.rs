//! Request bodies: every body is read here, up to [`MAX_BODY_BYTES`], before a handler sees
//! it. A larger one (declared by `content-length` or found while reading a chunked body) is
//! answered `413 {"error": "body_too_large"}` — after the rest of it has been read and
//! discarded (at most [`DRAIN_BYTES`] more, for at most [`DRAIN_TIME`]), because a server that
//! answers and closes while the client is still sending makes the client's write fail (a
//! broken pipe or a reset) before it reads the answer.
//!
//! Owns only the size policy; what a body must contain is each handler's business. `GET` and
//! `HEAD` requests (the WebSocket upgrade, SSE, reads) pass through untouched.

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use futures_util::StreamExt;

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
