//! The REST writes into a live room (docs/rest.md), for a team's own backend that does not
//! speak y-sync:
//! - `POST /rooms/{room}/update` (scope `write`), a Yjs v1 update as the body → `{"seq"}`;
//! - `PATCH /rooms/{room}/shapes` (scope `write`), `{"create", "update", "delete"}` in the
//!   document schema's JSON form → `{"seq", "created", "updated", "deleted"}`.
//!
//! Both are written like a person's edit, logged with the token's `sub` via `api`, durable
//! before any peer sees them. Owns only the parsing of bodies and the mapping of
//! [`PatchError`] to HTTP; the vetting of an update is the peer path's
//! ([`crate::room::Room::apply_update_as`]), the validation of a patch the canvas model's
//! ([`crate::canvas::patch`]).

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::access::{Admitted, WriteScope};
use super::error::{ApiError, ErrorBody};
use super::openapi::{RoomPath, SeqAnswer, TokenRefusals};
use super::write_rate::WriteCost;
use crate::actor::{Actor, Via};
use crate::canvas::patch::{self as shape_patch, Applied, PatchError, ShapePatch};

/// The REST write routes, described.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(update))
        .routes(routes!(shapes))
}

/// The answer of a shape patch.
#[derive(Debug, Serialize, ToSchema)]
pub struct PatchAnswer {
    /// The update the patch became (the room's last one when it changed nothing).
    seq: u64,
    /// The ids it created, updated and deleted.
    #[serde(flatten)]
    applied: Applied,
}

impl From<PatchError> for ApiError {
    fn from(error: PatchError) -> Self {
        match &error {
            PatchError::Invalid(items) => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_patch", error.to_string())
                    .with_field("items", json!(items))
            }
            PatchError::NotFound(ids) => {
                ApiError::new(StatusCode::NOT_FOUND, "shape_not_found", error.to_string())
                    .with_field("ids", json!(ids))
            }
            PatchError::TooManyItems(_) => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_patch", error.to_string())
            }
        }
    }
}

/// The person a REST write is logged with.
fn api_actor(sub: String, name: Option<String>) -> Actor {
    Actor::user(sub, name).via(Via::Api)
}

/// Applies a Yjs v1 update, as a peer's.
#[utoipa::path(
    post,
    operation_id = "applyUpdate",
    path = "/rooms/{room}/update",
    tag = "rooms",
    params(RoomPath),
    request_body(content(("application/octet-stream")), description = "A Yjs v1 update, at most `--max-message-bytes`"),
    security(("bearer" = ["write"]), ("token" = ["write"])),
    responses(
        (status = 200, description = "Durable, and sent to every peer", body = SeqAnswer),
        (status = 400, description = "`invalid_update`, `server_owned_root`, `invalid_room_name`", body = ErrorBody),
        TokenRefusals,
        (status = 413, description = "`body_too_large`, `doc_too_large`", body = ErrorBody),
        (status = 429, description = "`rate_limited` (`retryAfter`, `retry-after`)", body = ErrorBody),
        (status = 503, description = "`store_unavailable`, `too_many_rooms`, `shutting_down`", body = ErrorBody),
        (status = 507, description = "`store_full`: the server's storage is full; nothing was written (`retry-after`)", body = ErrorBody),
    ),
)]
async fn update(
    State(state): State<AppState>,
    Admitted {
        room, sub, name, ..
    }: Admitted<WriteScope>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body?;
    if body.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_update",
            "the body must be a Yjs v1 update (application/octet-stream)",
        ));
    }
    // The same limit as a peer's message.
    if body.len() > state.config.max_message_bytes {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!(
                "an update is limited to {} bytes (--max-message-bytes)",
                state.config.max_message_bytes
            ),
        ));
    }
    state.write_rate.check(&sub, WriteCost::Body(body.len()))?;
    let loaded = state.rooms.get(&room).await?;
    let seq = loaded.apply_update_as(&api_actor(sub, name), &body).await?;
    Ok(Json(SeqAnswer { seq }).into_response())
}

/// Creates, updates and deletes shapes in one transaction.
#[utoipa::path(
    patch,
    operation_id = "patchShapes",
    path = "/rooms/{room}/shapes",
    tag = "rooms",
    params(RoomPath),
    request_body = ShapePatch,
    security(("bearer" = ["write"]), ("token" = ["write"])),
    responses(
        (status = 200, description = "Applied whole, durable, sent to every peer", body = PatchAnswer),
        (status = 400, description = "`invalid_patch` (each refused item in `items`: `{op, index, id?, detail}`; nothing applied), `invalid_json`, `invalid_room_name`", body = ErrorBody),
        TokenRefusals,
        (status = 404, description = "`shape_not_found` (the missing ids in `ids`; nothing applied)", body = ErrorBody),
        (status = 413, description = "`body_too_large`, `doc_too_large`", body = ErrorBody),
        (status = 429, description = "`rate_limited` (`retryAfter`, `retry-after`)", body = ErrorBody),
        (status = 503, description = "`store_unavailable`, `too_many_rooms`, `shutting_down`", body = ErrorBody),
        (status = 507, description = "`store_full`: the server's storage is full; nothing was written (`retry-after`)", body = ErrorBody),
    ),
)]
async fn shapes(
    State(state): State<AppState>,
    Admitted {
        room, sub, name, ..
    }: Admitted<WriteScope>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body?;
    state.write_rate.check(&sub, WriteCost::Body(body.len()))?;
    let patch: ShapePatch = serde_json::from_slice(&body)
        .map_err(|e| ApiError::body(StatusCode::BAD_REQUEST, e.to_string()))?;
    let loaded = state.rooms.get(&room).await?;
    let author = format!("user:{sub}");
    let mut outcome: Option<Result<Applied, PatchError>> = None;
    // Validated and written in one transaction: nothing of a refused patch is applied, and
    // nothing can change between its validation and its writes.
    let seq = loaded
        .write_as(&api_actor(sub, name), |txn| {
            let plan = match shape_patch::plan(txn, &patch, &author) {
                Ok(plan) => plan,
                Err(error) => {
                    outcome = Some(Err(error));
                    return Ok(false);
                }
            };
            loaded.admit_in(txn, plan.growth_bound(&*txn))?;
            let changed = shape_patch::apply(txn, &plan);
            outcome = Some(Ok(plan.applied().clone()));
            Ok(changed)
        })
        .await?;
    let applied = outcome.unwrap_or_else(|| Ok(Applied::default()))?;
    Ok(Json(PatchAnswer { seq, applied }).into_response())
}
