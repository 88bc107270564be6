//! Room instructions (the persona files of the design's agent engine): `PUT
//! /rooms/{room}/instructions` (scope `admin`) sets a room's plain-text instructions for its
//! fairies — at most [`MAX_INSTRUCTION_CHARS`] characters of UTF-8, an empty body removes them —
//! and `GET` (scope `fairies`) reads them back as `text/plain`. They are kept in the store,
//! never in the document (people without `admin` cannot edit them), and every fairy in the room
//! reads them into its system prompt at each turn.
//!
//! Owns only the admission, the body checks and the response; storage is
//! [`crate::store::Store`]'s.

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::access::{AdminScope, Admitted, FairyAccess};
use super::error::{ApiError, ErrorBody};
use super::openapi::{RoomPath, TokenRefusals};
use crate::store::StoreError;

/// Longest instructions accepted, in characters.
pub const MAX_INSTRUCTION_CHARS: usize = 50_000;

/// The instructions route, described.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(read, write))
}

fn store_error(error: StoreError) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "store_unavailable",
        error.to_string(),
    )
}

/// Checks a body as instructions: UTF-8, at most [`MAX_INSTRUCTION_CHARS`] characters.
pub fn instructions_text(body: &[u8]) -> Result<&str, ApiError> {
    let text = std::str::from_utf8(body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_text",
            format!("instructions must be UTF-8 text: {e}"),
        )
    })?;
    let chars = text.chars().count();
    if chars > MAX_INSTRUCTION_CHARS {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "instructions_too_long",
            format!("instructions are limited to {MAX_INSTRUCTION_CHARS} characters, not {chars}"),
        ));
    }
    Ok(text)
}

/// The room's instructions for its fairies.
#[utoipa::path(
    get,
    operation_id = "readInstructions",
    path = "/rooms/{room}/instructions",
    tag = "fairies",
    params(RoomPath),
    security(("bearer" = ["fairies"]), ("token" = ["fairies"])),
    responses(
        (status = 200, description = "The instructions (empty when none are set)", content_type = "text/plain", body = String),
        TokenRefusals,
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    ),
)]
async fn read(
    State(state): State<AppState>,
    Admitted { room: name, .. }: FairyAccess,
) -> Result<Response, ApiError> {
    let text = state
        .rooms
        .store()
        .side()
        .load_instructions(&name)
        .await
        .map_err(store_error)?
        .unwrap_or_default();
    let mut response = (StatusCode::OK, text).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    Ok(response)
}

/// Sets the room's instructions (an empty body removes them).
#[utoipa::path(
    put,
    operation_id = "writeInstructions",
    path = "/rooms/{room}/instructions",
    tag = "fairies",
    params(RoomPath),
    request_body(content = String, content_type = "text/plain", description = "At most 50,000 characters of UTF-8"),
    security(("bearer" = ["admin"]), ("token" = ["admin"])),
    responses(
        (status = 204, description = "Set: every fairy of the room reads them at its next turn"),
        (status = 400, description = "`invalid_text`", body = ErrorBody),
        TokenRefusals,
        (status = 413, description = "`instructions_too_long`, `body_too_large`", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
        (status = 507, description = "`store_full`: the server's storage is full; nothing was written (`retry-after`)", body = ErrorBody),
    ),
)]
async fn write(
    State(state): State<AppState>,
    Admitted {
        room: name, sub, ..
    }: Admitted<AdminScope>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, ApiError> {
    let body = body?;
    let text = instructions_text(&body)?;
    state
        .rooms
        .store()
        .side()
        .save_instructions(&name, text)
        .await
        .map_err(store_error)?;
    tracing::info!(room = %name, %sub, chars = text.chars().count(), "room instructions set");
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_utf8_and_bounded() {
        assert_eq!(
            instructions_text("Use blue.".as_bytes()).ok(),
            Some("Use blue.")
        );
        let e = instructions_text(&[0xff, 0xfe]).unwrap_err();
        assert_eq!(e.code(), "invalid_text");
        // The limit counts characters, not bytes.
        let at_limit = "é".repeat(MAX_INSTRUCTION_CHARS);
        assert!(instructions_text(at_limit.as_bytes()).is_ok());
        let over = "a".repeat(MAX_INSTRUCTION_CHARS + 1);
        let e = instructions_text(over.as_bytes()).unwrap_err();
        assert_eq!(
            (e.status(), e.code()),
            (StatusCode::PAYLOAD_TOO_LARGE, "instructions_too_long")
        );
    }
}
