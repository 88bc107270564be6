//! The review-mode routes (README "Review mode"), scope `write`:
//! - `POST /rooms/{room}/suggestions/{id}/accept` and `…/reject` → `{"status", "seq"}`;
//! - `POST /rooms/{room}/fairies/{id}/requests/{request}/accept`: every pending suggestion of
//!   one request → `{"accepted", "conflicts", "seq"}`.
//!
//! Decisions are document writes: any node with the room loaded answers them (no forwarding to
//! the fairy's host). Owns only the parsing and the mapping of [`ReviewError`] to HTTP; the
//! rules are [`crate::review`]'s.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::access::{Admitted, WriteScope};
use super::error::{ApiError, ErrorBody};
use super::fairies::{RequestPath, fairy_id};
use super::openapi::TokenRefusals;
use super::write_rate::WriteCost;
use crate::ids::{RequestId, SuggestionId};
use crate::review::decide::{DecideError, Verdict};
use crate::review::record::Status;
use crate::review::service::{self, Person, ReviewError};
use crate::store::keyed::Table;

/// The review routes, described.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(accept))
        .routes(routes!(reject))
        .routes(routes!(accept_request))
}

impl From<DecideError> for ApiError {
    fn from(error: DecideError) -> Self {
        let status = match error {
            DecideError::NotFound(_) => StatusCode::NOT_FOUND,
            DecideError::AlreadyDecided(_)
            | DecideError::ShapeGone(_)
            | DecideError::ShapeExists(_)
            | DecideError::Streaming(_) => StatusCode::CONFLICT,
        };
        ApiError::new(status, error.code(), error.to_string())
    }
}

impl From<ReviewError> for ApiError {
    fn from(error: ReviewError) -> Self {
        match error {
            ReviewError::Decide(e) => e.into(),
            ReviewError::Room(e) => e.into(),
        }
    }
}

/// `{room}` and `{id}`: one suggestion of a room.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SuggestionPath {
    /// The room's name.
    pub room: String,
    /// The suggestion's id (its key in the `suggestions` root).
    pub id: String,
}

/// The answer to a decision.
#[derive(Debug, Serialize, ToSchema)]
pub struct DecisionAnswer {
    /// `accepted` or `rejected`.
    status: Status,
    /// The update the decision became.
    seq: u64,
}

/// One suggestion an accept-all could not apply (it is rejected).
#[derive(Debug, Serialize, ToSchema)]
pub struct Conflict {
    /// The suggestion.
    id: SuggestionId,
    /// `shape_gone` or `shape_exists`.
    error: &'static str,
}

/// The answer to accepting a whole request.
#[derive(Debug, Serialize, ToSchema)]
pub struct RequestAcceptedAnswer {
    /// The suggestions applied.
    accepted: Vec<SuggestionId>,
    /// The ones that could not be applied, rejected instead.
    conflicts: Vec<Conflict>,
    /// The update it became (the room's last one when nothing was pending).
    seq: u64,
}

fn suggestion_id(raw: &str) -> Result<SuggestionId, ApiError> {
    SuggestionId::parse(raw).map_err(|e| DecideError::NotFound(e.0).into())
}

async fn decide(
    state: &AppState,
    admitted: Admitted<WriteScope>,
    id: &str,
    verdict: Verdict,
) -> Result<Response, ApiError> {
    let id = suggestion_id(id)?;
    state.write_rate.check(&admitted.sub, WriteCost::Decision)?;
    let loaded = state.rooms.get(&admitted.room).await?;
    let person = Person {
        sub: admitted.sub,
        name: admitted.name,
        may_decide: true,
    };
    let decided = service::decide(&loaded, &id, verdict, &person).await?;
    Ok(Json(DecisionAnswer {
        status: decided.record.status,
        seq: decided.seq,
    })
    .into_response())
}

/// Accepts a suggestion: its keys are written to `shapes`.
#[utoipa::path(
    post,
    operation_id = "acceptSuggestion",
    path = "/rooms/{room}/suggestions/{id}/accept",
    tag = "review",
    params(SuggestionPath),
    security(("bearer" = ["write"]), ("token" = ["write"])),
    responses(
        (status = 200, description = "Applied to the canvas", body = DecisionAnswer),
        (status = 400, description = "`invalid_room_name`", body = ErrorBody),
        TokenRefusals,
        (status = 404, description = "`suggestion_not_found`, `room_not_found`", body = ErrorBody),
        (status = 409, description = "`already_decided`, `shape_gone` (its shape was deleted), `shape_exists` (its id was taken), `suggestion_streaming` (its fairy is still writing it)", body = ErrorBody),
        (status = 413, description = "`doc_too_large`", body = ErrorBody),
        (status = 429, description = "`rate_limited` (`retryAfter`, `retry-after`)", body = ErrorBody),
        (status = 503, description = "`store_unavailable`, `room_unavailable`", body = ErrorBody),
        (status = 507, description = "`store_full`: the server's storage is full; nothing was written (`retry-after`)", body = ErrorBody),
    ),
)]
async fn accept(
    State(state): State<AppState>,
    admitted: Admitted<WriteScope>,
    Path(SuggestionPath { id, .. }): Path<SuggestionPath>,
) -> Result<Response, ApiError> {
    decide(&state, admitted, &id, Verdict::Accept).await
}

/// Rejects a suggestion: the canvas stays as it is.
#[utoipa::path(
    post,
    operation_id = "rejectSuggestion",
    path = "/rooms/{room}/suggestions/{id}/reject",
    tag = "review",
    params(SuggestionPath),
    security(("bearer" = ["write"]), ("token" = ["write"])),
    responses(
        (status = 200, description = "Turned down", body = DecisionAnswer),
        (status = 400, description = "`invalid_room_name`", body = ErrorBody),
        TokenRefusals,
        (status = 404, description = "`suggestion_not_found`, `room_not_found`", body = ErrorBody),
        (status = 409, description = "`already_decided`", body = ErrorBody),
        (status = 429, description = "`rate_limited` (`retryAfter`, `retry-after`)", body = ErrorBody),
        (status = 503, description = "`store_unavailable`, `room_unavailable`", body = ErrorBody),
        (status = 507, description = "`store_full`: the server's storage is full; nothing was written (`retry-after`)", body = ErrorBody),
    ),
)]
async fn reject(
    State(state): State<AppState>,
    admitted: Admitted<WriteScope>,
    Path(SuggestionPath { id, .. }): Path<SuggestionPath>,
) -> Result<Response, ApiError> {
    decide(&state, admitted, &id, Verdict::Reject).await
}

/// Accepts every pending suggestion of one fairy request.
#[utoipa::path(
    post,
    operation_id = "acceptRequest",
    path = "/rooms/{room}/fairies/{id}/requests/{request}/accept",
    tag = "review",
    params(RequestPath),
    security(("bearer" = ["write"]), ("token" = ["write"])),
    responses(
        (status = 200, description = "Applied, except the conflicts (rejected instead)", body = RequestAcceptedAnswer),
        (status = 400, description = "`invalid_room_name`", body = ErrorBody),
        TokenRefusals,
        (status = 404, description = "`fairy_not_found` (an id that cannot be a fairy's, or no fairy of this room), `request_not_found` (an id that cannot be a request's), `room_not_found`", body = ErrorBody),
        (status = 413, description = "`doc_too_large`", body = ErrorBody),
        (status = 429, description = "`rate_limited` (`retryAfter`, `retry-after`)", body = ErrorBody),
        (status = 503, description = "`store_unavailable`, `room_unavailable`", body = ErrorBody),
        (status = 507, description = "`store_full`: the server's storage is full; nothing was written (`retry-after`)", body = ErrorBody),
    ),
)]
async fn accept_request(
    State(state): State<AppState>,
    admitted: Admitted<WriteScope>,
    Path(RequestPath { id, request, .. }): Path<RequestPath>,
) -> Result<Response, ApiError> {
    let fairy = fairy_id(&id)?;
    let request = RequestId::parse(&request)
        .map_err(|e| ApiError::new(StatusCode::NOT_FOUND, "request_not_found", e.to_string()))?;
    state.write_rate.check(&admitted.sub, WriteCost::Decision)?;
    let loaded = state.rooms.get(&admitted.room).await?;
    // A fairy of this room: one the store keeps, or one whose suggestions the room holds (a
    // dismissed fairy's are still decided); another room's fairy id is not found here.
    let named = {
        let txn = yrs::Transact::transact(loaded.doc());
        crate::review::record::list(&txn)
            .iter()
            .any(|record| record.fairy_id == fairy)
    };
    if !named
        && state
            .store
            .side()
            .get(Table::FairyStates, &admitted.room, fairy.as_str())
            .await
            .map_err(|e| {
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "store_unavailable",
                    e.to_string(),
                )
            })?
            .is_none()
    {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "fairy_not_found",
            format!("no fairy '{fairy}' in this room"),
        ));
    }
    let person = Person {
        sub: admitted.sub,
        name: admitted.name,
        may_decide: true,
    };
    let outcome = service::accept_request(&loaded, &fairy, &request, &person).await?;
    Ok(Json(RequestAcceptedAnswer {
        accepted: outcome.accepted,
        conflicts: outcome
            .conflicts
            .into_iter()
            .map(|(id, why)| Conflict {
                id,
                error: why.code(),
            })
            .collect(),
        seq: outcome.seq,
    })
    .into_response())
}
