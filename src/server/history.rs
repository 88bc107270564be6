//! The history routes (docs/storage.md "History"; README "History"):
//! - `GET /rooms/{room}/history?after=SEQ&limit=N` (scope `read`) → `{"entries", "next"}`;
//! - `GET /rooms/{room}/doc` (scope `read`) → `{"seq", "doc"}`, `?format=yjs` the whole
//!   document as one Yjs v1 update;
//! - `GET /rooms/{room}/versions/{seq}` (scope `read`) → the same, as the room was just after
//!   update `seq`; `?format=yjs|svg|png` (the export query parameters apply to images);
//! - `GET /rooms/{room}/versions?at=MILLIS` (scope `read`) → `{"seq"}`;
//! - `POST /rooms/{room}/restore` `{"seq"}` (scope `write`) → `{"seq"}`;
//! - `POST /rooms/{room}/rollback` `{"actor": {"kind", "id"}, "sinceSeq"?}` (scope `write`) →
//!   `{"reverted", "kept", "seq"}`.
//!
//! Owns only the parsing of queries and bodies, admission and the mapping of
//! [`HistoryError`] to HTTP; the work is [`crate::history::service`]'s.

use std::collections::HashMap;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::access::{Admitted, ReadScope, WriteScope};
use super::error::{ApiError, ErrorBody};
use super::export::Format;
use super::held_body::{self, Piece};
use super::openapi::{RoomPath, SeqAnswer, TokenRefusals};
use super::write_rate::WriteCost;
use crate::actor::{Actor, ActorKey};
use crate::history::service::{Held, HistoryError, MAX_PAGE, ReplayPermit};

/// Entries of a history page when `limit` is not given.
const DEFAULT_PAGE: usize = 50;

impl From<HistoryError> for ApiError {
    fn from(error: HistoryError) -> Self {
        match &error {
            HistoryError::RoomNotFound(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "room_not_found", error.to_string())
            }
            HistoryError::NotKept(_) => ApiError::new(
                StatusCode::NOT_FOUND,
                "version_not_found",
                error.to_string(),
            ),
            HistoryError::Store(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                error.to_string(),
            ),
            HistoryError::Replay(_) => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "replay_failed",
                error.to_string(),
            ),
            HistoryError::DocTooLarge(_) => ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "doc_too_large",
                error.to_string(),
            ),
            HistoryError::Room(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "room_unavailable",
                error.to_string(),
            ),
        }
    }
}

/// The history routes, described.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(history))
        .routes(routes!(doc))
        .routes(routes!(version_at))
        .routes(routes!(version))
        .routes(routes!(restore))
        .routes(routes!(rollback))
}

/// A room as JSON: `{"seq", "doc"}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocAnswer {
    /// The last update it includes.
    seq: u64,
    /// Every root map of the document schema as JSON (`doc.shapes.ID.x`, docs/document-schema.md).
    #[schema(value_type = Object)]
    doc: serde_json::Map<String, serde_json::Value>,
}

/// The answer of a rollback.
#[derive(Debug, Serialize, ToSchema)]
pub struct RollbackAnswer {
    /// Shapes whose every change by the actor was taken back.
    reverted: u64,
    /// Shapes kept, wholly or in part, because someone changed them afterwards.
    kept: u64,
    /// The room's last update once the rollback is written.
    seq: u64,
}

fn invalid(detail: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", detail)
}

/// A sequence number or time from the query or path: digits only.
fn number(name: &str, raw: &str) -> Result<u64, ApiError> {
    raw.trim()
        .parse::<u64>()
        .map_err(|_| invalid(format!("'{name}' must be a whole number ≥ 0, not '{raw}'")))
}

/// Who changed what, oldest first.
#[utoipa::path(
    get,
    operation_id = "roomHistory",
    path = "/rooms/{room}/history",
    tag = "history",
    params(
        RoomPath,
        ("after" = Option<u64>, Query, description = "Entries after this update (default 0)"),
        ("limit" = Option<u32>, Query, description = "Entries in the page: 1 to 200 (default 50)"),
    ),
    security(("bearer" = ["read"]), ("token" = ["read"])),
    responses(
        (status = 200, description = "One page of entries: consecutive updates of one actor, merged", body = crate::history::service::Page),
        (status = 400, description = "`invalid_query`, `invalid_room_name`", body = ErrorBody),
        TokenRefusals,
        (status = 404, description = "`room_not_found`", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    ),
)]
async fn history(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
    Admitted { room, .. }: Admitted<ReadScope>,
) -> Result<Response, ApiError> {
    let after = match query.get("after") {
        Some(raw) => number("after", raw)?,
        None => 0,
    };
    let limit = match query.get("limit") {
        Some(raw) => {
            let n = number("limit", raw)?;
            if n == 0 || n > MAX_PAGE as u64 {
                return Err(invalid(format!("'limit' must be 1 to {MAX_PAGE}")));
            }
            n as usize
        }
        None => DEFAULT_PAGE,
    };
    let page = state.history.page(&room, after, limit).await?;
    Ok(Json(page).into_response())
}

/// The answer for a replayed document in the asked format, built and sent while the replay
/// permit is held, so that no more than the permits' worth of rooms and answers are held by
/// reads at once, however many ask and however slowly they read (issue 43, finding 4). JSON is
/// written one root entry at a time on a blocking thread into a channel of two chunks
/// ([`held_body::channel`]); a Yjs update is encoded whole (Yrs has no incremental encoder),
/// the room dropped, and sent in chunks; an image holds the permit while it is sent too. A
/// client that stops reading keeps its permit until `--http-write-timeout` drops it.
async fn answer(
    state: &AppState,
    query: &HashMap<String, String>,
    seq: u64,
    held: Held,
    images: bool,
) -> Result<Response, ApiError> {
    let format = query.get("format").map(|f| f.trim()).unwrap_or("json");
    let image = match format {
        "json" => None,
        "yjs" => {
            let (bytes, permit) = off_thread(move || {
                let bytes = held.replay.encode_v1();
                (bytes, held.into_permit())
            })
            .await?;
            let length = HeaderValue::from(bytes.len());
            let mut response =
                (StatusCode::OK, held_body::sliced(bytes.into(), permit)).into_response();
            let h = response.headers_mut();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
            h.insert(header::CONTENT_LENGTH, length);
            if let Ok(v) = HeaderValue::from_str(&seq.to_string()) {
                h.insert("x-fairyring-seq", v);
            }
            return Ok(response);
        }
        "svg" if images => Some(Format::Svg),
        "png" if images => Some(Format::Png),
        _ => {
            let allowed = if images {
                "json, yjs, svg or png"
            } else {
                "json or yjs"
            };
            return Err(invalid(format!(
                "'format' must be {allowed}, not '{format}'"
            )));
        }
    };
    if let Some(format) = image {
        let doc = held.replay.doc().clone();
        let drawn = super::export::draw_document(state, query, doc, format).await?;
        let permit = held.into_permit();
        let (parts, body) = drawn.into_parts();
        return Ok(Response::from_parts(
            parts,
            held_body::guarded(body, permit),
        ));
    }
    let (tx, rx) = mpsc::channel::<Piece<ReplayPermit>>(2);
    tokio::task::spawn_blocking(move || {
        let mut out = Vec::with_capacity(held_body::CHUNK + 4096);
        out.extend_from_slice(format!("{{\"seq\":{seq},\"doc\":").as_bytes());
        let mut emit = |chunk: Vec<u8>| tx.blocking_send((chunk.into(), None)).is_ok();
        if held
            .replay
            .write_json(&mut out, held_body::CHUNK, &mut emit)
        {
            out.push(b'}');
            // The replayed room goes here, on this thread; its permit with the last chunk.
            let permit = held.into_permit();
            let _ = tx.blocking_send((out.into(), Some(permit)));
        }
    });
    let mut response = (StatusCode::OK, held_body::channel(rx)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// Runs `work` on a blocking thread.
async fn off_thread<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))
}

/// The room now.
#[utoipa::path(
    get,
    operation_id = "roomDoc",
    path = "/rooms/{room}/doc",
    tag = "rooms",
    params(
        RoomPath,
        ("format" = Option<String>, Query, description = "`json` (default) or `yjs`: the whole document as one Yjs v1 update, its seq in `x-fairyring-seq`"),
    ),
    security(("bearer" = ["read"]), ("token" = ["read"])),
    responses(
        (status = 200, description = "The room as JSON, or as a Yjs update", content(
            (DocAnswer = "application/json"),
            ("application/octet-stream"),
        )),
        (status = 400, description = "`invalid_query`, `invalid_room_name`", body = ErrorBody),
        TokenRefusals,
        (status = 404, description = "`room_not_found`", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    ),
)]
async fn doc(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
    Admitted { room, .. }: Admitted<ReadScope>,
) -> Result<Response, ApiError> {
    let (seq, held) = state.history.current(&room).await?;
    answer(&state, &query, seq, held, false).await
}

/// `{room}` and `{seq}`: a version of a room.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct VersionPath {
    /// The room's name.
    pub room: String,
    /// The update after which the room is shown (read as text, so that a malformed one is
    /// named in a 400 `invalid_query`).
    #[param(value_type = u64)]
    pub seq: String,
}

/// The room as it was just after update `seq`.
#[utoipa::path(
    get,
    operation_id = "version",
    path = "/rooms/{room}/versions/{seq}",
    tag = "history",
    params(
        VersionPath,
        ("format" = Option<String>, Query, description = "`json` (default), `yjs`, `svg` or `png` (images take the export query: `page`, `x`, `y`, `w`, `h`, `scale`)"),
    ),
    security(("bearer" = ["read"]), ("token" = ["read"])),
    responses(
        (status = 200, description = "The version as JSON, a Yjs update or an image", content(
            (DocAnswer = "application/json"),
            ("application/octet-stream"),
            ("image/svg+xml"),
            ("image/png"),
        )),
        (status = 400, description = "`invalid_query`, `invalid_room_name`", body = ErrorBody),
        TokenRefusals,
        (status = 404, description = "`room_not_found`, `version_not_found` (not reached, or no longer kept), `page_not_found`, `empty_page`", body = ErrorBody),
        (status = 503, description = "`store_unavailable`, `busy`, `render_timeout`", body = ErrorBody),
    ),
)]
async fn version(
    State(state): State<AppState>,
    Path(VersionPath { seq, .. }): Path<VersionPath>,
    Query(query): Query<HashMap<String, String>>,
    Admitted { room, .. }: Admitted<ReadScope>,
) -> Result<Response, ApiError> {
    let seq = number("seq", &seq)?;
    let held = state.history.version(&room, seq).await?;
    answer(&state, &query, seq, held, true).await
}

/// The last update at or before a time.
#[utoipa::path(
    get,
    operation_id = "versionAt",
    path = "/rooms/{room}/versions",
    tag = "history",
    params(
        RoomPath,
        ("at" = u64, Query, description = "Milliseconds since the epoch"),
    ),
    security(("bearer" = ["read"]), ("token" = ["read"])),
    responses(
        (status = 200, description = "The last update at or before `at`", body = SeqAnswer),
        (status = 400, description = "`invalid_query`, `invalid_room_name`", body = ErrorBody),
        TokenRefusals,
        (status = 404, description = "`room_not_found`, `version_not_found`", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    ),
)]
async fn version_at(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
    Admitted { room, .. }: Admitted<ReadScope>,
) -> Result<Json<SeqAnswer>, ApiError> {
    let raw = query
        .get("at")
        .ok_or_else(|| invalid("give 'at': milliseconds since the epoch"))?;
    let at = number("at", raw)?;
    let seq = state.history.seq_at(&room, at).await?;
    Ok(Json(SeqAnswer { seq }))
}

/// A JSON body that must be an object (serde would read a struct from an array too: `[3]`
/// is not `{"seq": 3}`); `400 invalid_json` otherwise.
fn object_body<T: serde::de::DeserializeOwned>(
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<T, ApiError> {
    let Json(value) = body?;
    if !value.is_object() {
        return Err(ApiError::body(
            StatusCode::BAD_REQUEST,
            "the body must be a JSON object",
        ));
    }
    serde_json::from_value(value)
        .map_err(|e| ApiError::body(StatusCode::BAD_REQUEST, e.to_string()))
}

/// Body of `POST /rooms/{room}/restore`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct RestoreBody {
    /// The version to bring back.
    seq: u64,
}

/// Brings back a version as one new update.
#[utoipa::path(
    post,
    operation_id = "restore",
    path = "/rooms/{room}/restore",
    tag = "history",
    params(RoomPath),
    request_body = RestoreBody,
    security(("bearer" = ["write"]), ("token" = ["write"])),
    responses(
        (status = 200, description = "The update the restore became", body = SeqAnswer),
        (status = 400, description = "`invalid_json`, `invalid_room_name`", body = ErrorBody),
        TokenRefusals,
        (status = 404, description = "`room_not_found`, `version_not_found`", body = ErrorBody),
        (status = 413, description = "`doc_too_large`", body = ErrorBody),
        (status = 429, description = "`rate_limited` (`retryAfter`, `retry-after`)", body = ErrorBody),
        (status = 503, description = "`store_unavailable`, `room_unavailable`", body = ErrorBody),
        (status = 507, description = "`store_full`: the server's storage is full; nothing was written (`retry-after`)", body = ErrorBody),
    ),
)]
async fn restore(
    State(state): State<AppState>,
    Admitted {
        room, sub, name, ..
    }: Admitted<WriteScope>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let body: RestoreBody = object_body(body)?;
    state.write_rate.check(&sub, WriteCost::History)?;
    state.history.written(&room).await?;
    let loaded = state.rooms.get(&room).await?;
    let seq = state
        .history
        .restore(&loaded, body.seq, Actor::user(sub, name))
        .await?;
    Ok(Json(SeqAnswer { seq }).into_response())
}

/// Body of `POST /rooms/{room}/rollback`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RollbackBody {
    /// Whose changes to take back: a person (`user`, the token's `sub`) or a fairy.
    actor: ActorKey,
    /// Only their changes after this update (default: all of them).
    #[serde(default)]
    since_seq: Option<u64>,
}

/// Takes back one actor's changes, as one new update.
#[utoipa::path(
    post,
    operation_id = "rollback",
    path = "/rooms/{room}/rollback",
    tag = "history",
    params(RoomPath),
    request_body = RollbackBody,
    security(("bearer" = ["write"]), ("token" = ["write"])),
    responses(
        (status = 200, description = "What was taken back, and the update it became", body = RollbackAnswer),
        (status = 400, description = "`invalid_body`, `invalid_json`, `invalid_room_name`", body = ErrorBody),
        TokenRefusals,
        (status = 404, description = "`room_not_found`, `version_not_found`", body = ErrorBody),
        (status = 413, description = "`doc_too_large`", body = ErrorBody),
        (status = 429, description = "`rate_limited` (`retryAfter`, `retry-after`)", body = ErrorBody),
        (status = 503, description = "`store_unavailable`, `room_unavailable`", body = ErrorBody),
        (status = 507, description = "`store_full`: the server's storage is full; nothing was written (`retry-after`)", body = ErrorBody),
    ),
)]
async fn rollback(
    State(state): State<AppState>,
    Admitted {
        room, sub, name, ..
    }: Admitted<WriteScope>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let body: RollbackBody = object_body(body)?;
    if body.actor.id.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "'actor.id' must not be empty",
        ));
    }
    state.write_rate.check(&sub, WriteCost::History)?;
    state.history.written(&room).await?;
    let loaded = state.rooms.get(&room).await?;
    let (outcome, seq) = state
        .history
        .rollback(&loaded, body.actor, body.since_seq, Actor::user(sub, name))
        .await?;
    Ok(Json(RollbackAnswer {
        reverted: outcome.reverted,
        kept: outcome.kept,
        seq,
    })
    .into_response())
}
