//! The fairy HTTP API (docs/fairies.md, scope `fairies`): invite, list, prompt and cancel (both
//! `interrupt({input, mode})`, `202`, never refused for being busy; an optional `mode` switches
//! the fairy's mode to a solo one (`idling`, `soloing`), any other is a 400; an accepted
//! prompt also writes the person's
//! message into the fairy's `chat` as `{from: "user:SUB", role: "user", text, at, requestId}`
//! and answers the request's id), dismiss, history (the fairy's private state, from the
//! store), the SSE stream of a fairy's events, and taking a request back
//! (`POST …/requests/{requestId}/revert`: `200 {reverted, kept}`, `404 request_not_found`). Bodies are JSON; errors are `{"error", "detail"}` like every other route. The work
//! is done by [`crate::agent::host::hub::FairyHub`] (a prompt and a cancel through
//! [`crate::agent::host::hub::ask`]); this file only admits and parses requests, and its
//! errors map to HTTP in [`super::error`].
//!
//! Calls that start or stop work (invite, prompt, cancel, dismiss, revert) are rate limited per token
//! `sub` (`--fairy-api-rate-per-min`, 429 `rate_limited` with `retry-after`); reads (list,
//! history, events) are not.

use std::convert::Infallible;
use std::num::NonZeroU32;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::access::{Admitted, FairyAccess};
use super::body::OptionalJson;
use super::error::{ApiError, ErrorBody};
use super::openapi::{FairyPath, RoomPath, TokenRefusals};
use crate::agent::host::hub::FairyView;
use crate::agent::host::hub::ask::UserPrompt;
use crate::agent::modes::Mode;
use crate::agent::state::Request;
use crate::agent::state::fairy::MAX_TEXT_CHARS;
use crate::canvas::geometry::Bounds;
use crate::ids::FairyId;
use crate::ids::RequestId;

/// Most selected shape ids accepted in one prompt.
const MAX_SELECTED: usize = 1000;
/// Rate-limiter keys kept before idle ones are forgotten.
const RATE_KEYS_PRUNE_ABOVE: usize = 10_000;

/// The per-`sub` rate limit on fairy calls that start or stop work.
pub type FairyRate = DefaultKeyedRateLimiter<String>;

/// The limiter for `--fairy-api-rate-per-min` (`None`: no limit): a bucket of that many calls
/// per `sub`, refilling over a minute.
pub fn rate_limiter(per_minute: u32) -> Option<Arc<FairyRate>> {
    NonZeroU32::new(per_minute).map(|n| Arc::new(FairyRate::keyed(Quota::per_minute(n))))
}

/// Counts one call of `sub` against the rate limit; 429 `rate_limited` when over it.
pub(super) fn limit(state: &AppState, sub: &str) -> Result<(), ApiError> {
    let Some(limiter) = &state.fairy_rate else {
        return Ok(());
    };
    if limiter.len() > RATE_KEYS_PRUNE_ABOVE {
        limiter.retain_recent();
    }
    limiter.check_key(&sub.to_owned()).map_err(|not_until| {
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            format!(
                "too many fairy calls for this token (--fairy-api-rate-per-min {}); retry in {} ms",
                state.config.fairy_api_rate_per_min,
                wait.as_millis()
            ),
        )
        .with_retry_after(wait.as_secs_f64().ceil() as u64)
    })
}

/// The fairy routes, described.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(invite, list))
        .routes(routes!(dismiss, update))
        .routes(routes!(prompt))
        .routes(routes!(cancel))
        .routes(routes!(history))
        .routes(routes!(events))
        .routes(routes!(revert))
}

pub(super) fn fairy_id(raw: &str) -> Result<FairyId, ApiError> {
    FairyId::parse(raw)
        .map_err(|e| ApiError::new(StatusCode::NOT_FOUND, "fairy_not_found", e.to_string()))
}

pub(super) fn json_body<T>(body: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    Ok(body.map(|Json(b)| b)?)
}

/// Body of an invitation (everything optional; the body itself may be empty).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InviteBody {
    /// Display name (random when missing).
    name: Option<String>,
    /// A short description its system prompt uses (random when missing).
    personality: Option<String>,
    /// Its hat (random when missing).
    hat: Option<String>,
    /// How its canvas actions land unless a prompt says otherwise: `direct` (default) or
    /// `suggest` (README "Review mode").
    #[serde(default)]
    apply: crate::review::ApplyMode,
    /// Where its sprite first appears, in page coordinates (default `{x: 100, y: 100}`;
    /// clamped to ±10,000,000): the demo page spreads the fairies it invites around the
    /// person's view.
    position: Option<SpawnPoint>,
}

/// A page point where an invited fairy first appears.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnPoint {
    /// Page x.
    x: f64,
    /// Page y.
    y: f64,
}

/// Invites a fairy.
#[utoipa::path(
    post,
    operation_id = "inviteFairy",
    path = "/rooms/{room}/fairies",
    tag = "fairies",
    params(RoomPath),
    request_body(content = Option<InviteBody>, description = "Optional: an empty body invites a fairy with random traits"),
    security(("bearer" = ["fairies"]), ("token" = ["fairies"])),
    responses(
        (status = 201, description = "The fairy, hosted in the room", body = FairyView),
        (status = 400, description = "`invalid_fairy`, `invalid_json`", body = ErrorBody),
        TokenRefusals,
        (status = 409, description = "`too_many_fairies`", body = ErrorBody),
        (status = 429, description = "`rate_limited` (`retry-after`)", body = ErrorBody),
        (status = 503, description = "`store_unavailable`, `shutting_down`", body = ErrorBody),
        (status = 507, description = "`store_full`: the server's storage is full; nothing was written (`retry-after`)", body = ErrorBody),
    ),
)]
async fn invite(
    State(state): State<AppState>,
    Admitted { room, sub, .. }: FairyAccess,
    body: Result<OptionalJson<InviteBody>, ApiError>,
) -> Result<Response, ApiError> {
    limit(&state, &sub)?;
    // The body is optional: nothing (or whitespace) invites a fairy with random traits.
    let OptionalJson(body) = body?;
    let view = state
        .fairies
        .invite(
            &room,
            body.name.as_deref(),
            body.personality.as_deref(),
            body.hat.as_deref(),
            &sub,
            body.apply,
            body.position.map(|p| {
                let c = crate::canvas::coerce::clamp_coord;
                (c(p.x), c(p.y))
            }),
        )
        .await?;
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

/// The answer of `GET /rooms/{room}/fairies`.
#[derive(Debug, Serialize, ToSchema)]
pub struct FairyList {
    /// The room's fairies.
    fairies: Vec<FairyView>,
}

/// The room's fairies.
#[utoipa::path(
    get,
    operation_id = "listFairies",
    path = "/rooms/{room}/fairies",
    tag = "fairies",
    params(RoomPath),
    security(("bearer" = ["fairies"]), ("token" = ["fairies"])),
    responses(
        (status = 200, description = "The room's fairies", body = FairyList),
        TokenRefusals,
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    ),
)]
async fn list(
    State(state): State<AppState>,
    Admitted { room, .. }: FairyAccess,
) -> Result<Json<FairyList>, ApiError> {
    let fairies = state.fairies.list(&room).await?;
    Ok(Json(FairyList { fairies }))
}

/// Body of a prompt.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PromptBody {
    /// What the person asks, 1 to 2,000 characters.
    message: String,
    /// The person's viewport, in page coordinates.
    bounds: Option<Bounds>,
    /// The shapes the person has selected (at most 1,000).
    #[serde(default)]
    selected_shape_ids: Vec<String>,
    /// Switches the fairy to a solo mode first: `idling` or `soloing`.
    mode: Option<String>,
    /// How this request's canvas actions land: `direct` or `suggest` (default: the fairy's,
    /// README "Review mode").
    apply: Option<crate::review::ApplyMode>,
}

/// Body of a cancel (optional).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelBody {
    /// Switches the fairy to a solo mode: `idling` or `soloing`.
    mode: Option<String>,
}

/// The answer to an accepted prompt.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromptAccepted {
    /// Always `accepted`.
    status: &'static str,
    /// The request the prompt started (for its revert, and in the fairy's events).
    request_id: RequestId,
}

/// The answer to a cancel.
#[derive(Debug, Serialize, ToSchema)]
pub struct Cancelling {
    /// Always `cancelling`.
    status: &'static str,
}

/// The modes a person may switch a fairy to with a prompt or a cancel: the solo ones that need
/// neither a project nor a task. A project mode outside a project left the fairy without the
/// actions to leave it, burning every turn of the request.
const PERSON_MODES: [Mode; 2] = [Mode::Idling, Mode::Soloing];

/// The mode named `name` (its wire name, e.g. `soloing`), one of [`PERSON_MODES`]; anything
/// else → 400 with `code`.
fn parse_mode(name: Option<&str>, code: &'static str) -> Result<Option<Mode>, ApiError> {
    name.map(|n| match Mode::parse(n) {
        Some(mode) if PERSON_MODES.contains(&mode) => Ok(mode),
        Some(_) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            code,
            format!("mode '{n}' is not a solo mode (idling, soloing)"),
        )),
        None => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            code,
            format!("unknown mode '{n}'"),
        )),
    })
    .transpose()
}

/// Asks the fairy for something.
#[utoipa::path(
    post,
    operation_id = "promptFairy",
    path = "/rooms/{room}/fairies/{id}/prompt",
    tag = "fairies",
    params(FairyPath),
    request_body = PromptBody,
    security(("bearer" = ["fairies"]), ("token" = ["fairies"])),
    responses(
        (status = 202, description = "Accepted: the fairy interrupts what it does and takes the request", body = PromptAccepted),
        (status = 400, description = "`invalid_prompt`, `invalid_json`", body = ErrorBody),
        TokenRefusals,
        (status = 404, description = "`fairy_not_found`", body = ErrorBody),
        (status = 409, description = "`fairy_in_project`", body = ErrorBody),
        (status = 429, description = "`rate_limited` (`retry-after`)", body = ErrorBody),
        (status = 503, description = "`fairy_moving` (`retry-after`), `fairy_not_started`, `store_unavailable`, `shutting_down`", body = ErrorBody),
        (status = 507, description = "`store_full`: the server's storage is full; nothing was written (`retry-after`)", body = ErrorBody),
    ),
)]
async fn prompt(
    State(state): State<AppState>,
    Admitted { room, sub, .. }: FairyAccess,
    Path(FairyPath { id, .. }): Path<FairyPath>,
    body: Result<Json<PromptBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    limit(&state, &sub)?;
    let id = fairy_id(&id)?;
    let body = json_body(body)?;
    let mode = parse_mode(body.mode.as_deref(), "invalid_prompt")?;
    let request = user_request(
        &body.message,
        body.bounds,
        body.selected_shape_ids,
        "invalid_prompt",
    )?;
    let prompt = UserPrompt {
        request,
        sub,
        mode,
        apply: body.apply,
    };
    let request_id = state.fairies.prompt(&room, &id, prompt).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(PromptAccepted {
            status: "accepted",
            request_id,
        }),
    )
        .into_response())
}

/// A user's request from a prompt's `message`, `bounds` and `selectedShapeIds`, checked (a
/// 400 with `code` otherwise): 1 to [`MAX_TEXT_CHARS`] characters, finite bounds, at most
/// [`MAX_SELECTED`] ids.
pub(super) fn user_request(
    message: &str,
    bounds: Option<Bounds>,
    selected: Vec<String>,
    code: &'static str,
) -> Result<Request, ApiError> {
    let message = message.trim();
    if message.is_empty() || message.chars().count() > MAX_TEXT_CHARS {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            code,
            format!("message must be 1 to {MAX_TEXT_CHARS} characters"),
        ));
    }
    let bounds = match bounds {
        Some(b) if [b.x, b.y, b.w, b.h].iter().all(|v| v.is_finite()) => {
            Some(Bounds::new(b.x, b.y, b.w, b.h))
        }
        Some(_) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                code,
                "bounds must be finite numbers",
            ));
        }
        None => None,
    };
    if selected.len() > MAX_SELECTED {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            code,
            "too many selected shapes",
        ));
    }
    Ok(Request {
        messages: vec![message.to_owned()],
        bounds,
        selected,
        source: "user".into(),
        ids: Vec::new(),
        from_user: None,
        apply: None,
    })
}

/// Stops what the fairy does.
#[utoipa::path(
    post,
    operation_id = "cancelFairy",
    path = "/rooms/{room}/fairies/{id}/cancel",
    tag = "fairies",
    params(FairyPath),
    request_body(content = Option<CancelBody>, description = "Optional"),
    security(("bearer" = ["fairies"]), ("token" = ["fairies"])),
    responses(
        (status = 202, description = "The fairy stops (its request ends `interrupted`)", body = Cancelling),
        (status = 400, description = "`invalid_mode`, `invalid_json`", body = ErrorBody),
        TokenRefusals,
        (status = 404, description = "`fairy_not_found`", body = ErrorBody),
        (status = 409, description = "`fairy_in_project`", body = ErrorBody),
        (status = 429, description = "`rate_limited` (`retry-after`)", body = ErrorBody),
        (status = 503, description = "`fairy_moving`, `fairy_not_started`, `shutting_down`", body = ErrorBody),
    ),
)]
async fn cancel(
    State(state): State<AppState>,
    Admitted { room, sub, .. }: FairyAccess,
    Path(FairyPath { id, .. }): Path<FairyPath>,
    body: Result<OptionalJson<CancelBody>, ApiError>,
) -> Result<Response, ApiError> {
    limit(&state, &sub)?;
    let id = fairy_id(&id)?;
    // The body is optional: nothing (or whitespace) just cancels.
    let OptionalJson(body) = body?;
    let mode = parse_mode(body.mode.as_deref(), "invalid_mode")?;
    state.fairies.cancel(&room, &id, mode).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(Cancelling {
            status: "cancelling",
        }),
    )
        .into_response())
}

/// Body of a fairy's update.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateBody {
    /// How its canvas actions land unless a prompt says otherwise: `direct` or `suggest`
    /// (README "Review mode").
    apply: crate::review::ApplyMode,
}

/// Changes the fairy's default way of applying its canvas actions.
#[utoipa::path(
    patch,
    operation_id = "updateFairy",
    path = "/rooms/{room}/fairies/{id}",
    tag = "fairies",
    params(FairyPath),
    request_body = UpdateBody,
    security(("bearer" = ["fairies"]), ("token" = ["fairies"])),
    responses(
        (status = 200, description = "The fairy, with its new default (its next request follows it)", body = FairyView),
        (status = 400, description = "`invalid_json`", body = ErrorBody),
        TokenRefusals,
        (status = 404, description = "`fairy_not_found`", body = ErrorBody),
        (status = 503, description = "`fairy_moving`, `store_unavailable`, `shutting_down`", body = ErrorBody),
        (status = 507, description = "`store_full`: the server's storage is full; nothing was written (`retry-after`)", body = ErrorBody),
    ),
)]
async fn update(
    State(state): State<AppState>,
    Admitted { room, .. }: FairyAccess,
    Path(FairyPath { id, .. }): Path<FairyPath>,
    body: Result<Json<UpdateBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let id = fairy_id(&id)?;
    let body = json_body(body)?;
    let view = state.fairies.set_apply(&room, &id, body.apply).await?;
    Ok(Json(view).into_response())
}

/// Dismisses the fairy.
#[utoipa::path(
    delete,
    operation_id = "dismissFairy",
    path = "/rooms/{room}/fairies/{id}",
    tag = "fairies",
    params(FairyPath),
    security(("bearer" = ["fairies"]), ("token" = ["fairies"])),
    responses(
        (status = 204, description = "Gone from the room"),
        TokenRefusals,
        (status = 404, description = "`fairy_not_found`", body = ErrorBody),
        (status = 429, description = "`rate_limited` (`retry-after`)", body = ErrorBody),
        (status = 503, description = "`fairy_moving`, `store_unavailable`, `shutting_down`", body = ErrorBody),
        (status = 507, description = "`store_full`: the server's storage is full; nothing was written (`retry-after`)", body = ErrorBody),
    ),
)]
async fn dismiss(
    State(state): State<AppState>,
    Admitted { room, sub, .. }: FairyAccess,
    Path(FairyPath { id, .. }): Path<FairyPath>,
) -> Result<Response, ApiError> {
    limit(&state, &sub)?;
    state.fairies.dismiss(&room, &fairy_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `{room}`, `{id}` and `{request}`: one request of a fairy.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct RequestPath {
    /// The room's name.
    pub room: String,
    /// The fairy's id.
    pub id: String,
    /// The request's id (a prompt's `requestId`).
    pub request: String,
}

/// The answer to a revert.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevertAnswer {
    /// Shapes taken back entirely.
    reverted: usize,
    /// Shapes kept, wholly or in part (someone changed the same thing since).
    kept: usize,
    /// Its suggestions that were pending, now rejected (review mode; left out when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    rejected_suggestions: Vec<crate::ids::SuggestionId>,
}

/// Takes a request back.
///
/// A review-mode request with pending suggestions needs the `write` scope too: reverting it
/// rejects them; without it, `403 insufficient_scope`.
#[utoipa::path(
    post,
    operation_id = "revertRequest",
    path = "/rooms/{room}/fairies/{id}/requests/{request}/revert",
    tag = "fairies",
    params(RequestPath),
    security(("bearer" = ["fairies"]), ("token" = ["fairies"])),
    responses(
        (status = 200, description = "Taken back, except where someone changed the same thing since; a review-mode request's pending suggestions rejected", body = RevertAnswer),
        TokenRefusals,
        (status = 404, description = "`fairy_not_found`, `request_not_found`", body = ErrorBody),
        (status = 429, description = "`rate_limited` (`retry-after`)", body = ErrorBody),
        (status = 503, description = "`fairy_moving`, `fairy_busy`, `store_unavailable`, `shutting_down`", body = ErrorBody),
        (status = 507, description = "`store_full`: the server's storage is full; nothing was written (`retry-after`)", body = ErrorBody),
    ),
)]
async fn revert(
    State(state): State<AppState>,
    Admitted {
        room,
        sub,
        name,
        can_write,
        ..
    }: FairyAccess,
    Path(RequestPath { id, request, .. }): Path<RequestPath>,
) -> Result<Response, ApiError> {
    limit(&state, &sub)?;
    let id = fairy_id(&id)?;
    // An id that cannot be one of ours names no request.
    let request = RequestId::parse(&request)
        .map_err(|e| ApiError::new(StatusCode::NOT_FOUND, "request_not_found", e.to_string()))?;
    // Rejecting suggestions needs `write`, whichever route does it: a token without it may
    // not revert a review-mode request with pending suggestions (and should one appear
    // meanwhile, the revert leaves it pending).
    if !can_write {
        let loaded = state.rooms.get(&room).await?;
        let pending = crate::review::record::pending_of(
            &yrs::Transact::transact(loaded.doc()),
            &id,
            Some(&request),
        );
        if !pending.is_empty() {
            return Err(crate::auth::AuthError::InsufficientScope { needed: "write" }.into());
        }
    }
    let by = crate::review::service::Person {
        sub,
        name,
        may_decide: can_write,
    };
    let reverted = state.fairies.revert(&room, &id, request, &by).await?;
    Ok(Json(RevertAnswer {
        reverted: reverted.outcome.reverted,
        kept: reverted.outcome.kept,
        rejected_suggestions: reverted.rejected_suggestions,
    })
    .into_response())
}

/// The fairy's private state.
#[utoipa::path(
    get,
    operation_id = "fairyHistory",
    path = "/rooms/{room}/fairies/{id}/history",
    tag = "fairies",
    params(FairyPath),
    security(("bearer" = ["fairies"]), ("token" = ["fairies"])),
    responses(
        (status = 200, description = "Its mode, chat history, todo list and tasks (from the store)", body = HistoryView),
        TokenRefusals,
        (status = 404, description = "`fairy_not_found`", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    ),
)]
async fn history(
    State(state): State<AppState>,
    Admitted { room, .. }: FairyAccess,
    Path(FairyPath { id, .. }): Path<FairyPath>,
) -> Result<Response, ApiError> {
    // The fairy's private state, read from the store (it is not in the document).
    let stored = state.fairies.state(&room, &fairy_id(&id)?).await?;
    Ok(Json(HistoryView::of(&stored)).into_response())
}

/// The body of `GET …/fairies/{id}/history`: the parts of the fairy's private state a client
/// may read, borrowed from the state type.
#[derive(serde::Serialize, ToSchema)]
#[schema(as = FairyHistory)]
struct HistoryView<'a> {
    /// Its mode.
    mode: crate::agent::modes::Mode,
    /// What it remembers: prompts, its actions, carried data, summaries.
    #[schema(value_type = Vec<crate::agent::state::memory::HistoryItem>)]
    history: &'a [crate::agent::state::memory::HistoryItem],
    /// Its todo list.
    #[schema(value_type = Vec<crate::agent::work::TodoItem>)]
    todo: &'a [crate::agent::work::TodoItem],
    /// Its solo tasks.
    #[schema(value_type = Vec<crate::agent::state::SoloTask>)]
    tasks: &'a [crate::agent::state::SoloTask],
}

impl<'a> HistoryView<'a> {
    fn of(state: &'a crate::agent::state::FairyState) -> Self {
        HistoryView {
            mode: state.mode,
            history: &state.history,
            todo: &state.todo,
            tasks: &state.tasks,
        }
    }
}

/// What ends a fairy's event stream besides the fairy going away.
enum StreamEnd {
    /// The server shuts down.
    Shutdown,
    /// The token expired: a final `auth-expired` event, then the stream ends (a WebSocket
    /// closes with 4401 in the same case; the client reconnects with a fresh token).
    Expired,
}

/// The fairy's events as they happen.
#[utoipa::path(
    get,
    operation_id = "fairyEvents",
    path = "/rooms/{room}/fairies/{id}/events",
    tag = "fairies",
    params(FairyPath),
    security(("bearer" = ["fairies"]), ("token" = ["fairies"])),
    responses(
        (status = 200, description = "Server-sent events: each event's name is its type (docs/fairies.md \"Events\"), its data the event as JSON; `lagged` `{missed}` when the reader fell behind; `auth-expired` last when the token expires", content_type = "text/event-stream", body = String),
        TokenRefusals,
        (status = 404, description = "`fairy_not_found`", body = ErrorBody),
    ),
)]
async fn events(
    State(state): State<AppState>,
    Admitted {
        room, expires_at, ..
    }: FairyAccess,
    Path(FairyPath { id, .. }): Path<FairyPath>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let rx = state.fairies.subscribe(&room, &fairy_id(&id)?).await?;
    let shutdown = state.shutdown.clone();
    let expiry = expires_at.map(|at| {
        let left = at.saturating_sub(crate::auth::unix_now());
        tokio::time::Instant::now() + std::time::Duration::from_secs(left)
    });
    let stream = futures_util::stream::unfold(Some((rx, shutdown)), move |open| async move {
        let (mut rx, shutdown) = open?;
        let next = tokio::select! {
            next = rx.recv() => Ok(next),
            _ = shutdown.cancelled() => Err(StreamEnd::Shutdown),
            _ = sleep_until_opt(expiry) => Err(StreamEnd::Expired),
        };
        let event = match next {
            Ok(Ok(event)) => Event::default()
                .event(event.name())
                .data(serde_json::to_string(&event).unwrap_or_default()),
            Ok(Err(RecvError::Lagged(n))) => Event::default()
                .event("lagged")
                .data(json!({ "missed": n }).to_string()),
            Ok(Err(RecvError::Closed)) | Err(StreamEnd::Shutdown) => return None,
            Err(StreamEnd::Expired) => {
                let event = Event::default().event("auth-expired").data(
                    json!({"error": "token_expired", "detail": "reconnect with a fresh token"})
                        .to_string(),
                );
                return Some((Ok(event), None));
            }
        };
        Some((Ok(event), Some((rx, shutdown))))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
