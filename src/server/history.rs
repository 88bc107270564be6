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
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::access::{Admitted, ReadScope, WriteScope};
use super::error::ApiError;
use super::export::Format;
use crate::history::actor::Actor;
use crate::history::replay::{ActorKey, Replay};
use crate::history::service::{HistoryError, MAX_PAGE};

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

/// The history routes.
pub fn routes() -> axum::Router<AppState> {
    axum::Router::new()
        .route("/rooms/{room}/history", get(history))
        .route("/rooms/{room}/doc", get(doc))
        .route("/rooms/{room}/versions", get(version_at))
        .route("/rooms/{room}/versions/{seq}", get(version))
        .route("/rooms/{room}/restore", post(restore))
        .route("/rooms/{room}/rollback", post(rollback))
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

/// The answer for a replayed document in the asked format.
async fn answer(
    state: &AppState,
    query: &HashMap<String, String>,
    seq: u64,
    replay: Replay,
    images: bool,
) -> Result<Response, ApiError> {
    let format = query.get("format").map(|f| f.trim()).unwrap_or("json");
    let image = match format {
        "json" => None,
        "yjs" => {
            let mut response = (StatusCode::OK, replay.encode_v1()).into_response();
            let h = response.headers_mut();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
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
        return super::export::draw_document(state, query, replay.doc().clone(), format).await;
    }
    let doc = tokio::task::spawn_blocking(move || replay.to_json())
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    Ok(Json(json!({ "seq": seq, "doc": doc })).into_response())
}

async fn doc(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
    Admitted { room, .. }: Admitted<ReadScope>,
) -> Result<Response, ApiError> {
    let (seq, replay) = state.history.current(&room).await?;
    answer(&state, &query, seq, replay, false).await
}

async fn version(
    State(state): State<AppState>,
    Path(params): Path<HashMap<String, String>>,
    Query(query): Query<HashMap<String, String>>,
    Admitted { room, .. }: Admitted<ReadScope>,
) -> Result<Response, ApiError> {
    let seq = number(
        "seq",
        params.get("seq").map(String::as_str).unwrap_or_default(),
    )?;
    let replay = state.history.version(&room, seq).await?;
    answer(&state, &query, seq, replay, true).await
}

async fn version_at(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
    Admitted { room, .. }: Admitted<ReadScope>,
) -> Result<Response, ApiError> {
    let raw = query
        .get("at")
        .ok_or_else(|| invalid("give 'at': milliseconds since the epoch"))?;
    let at = number("at", raw)?;
    let seq = state.history.seq_at(&room, at).await?;
    Ok(Json(json!({ "seq": seq })).into_response())
}

/// Body of `POST /rooms/{room}/restore`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RestoreBody {
    seq: u64,
}

async fn restore(
    State(state): State<AppState>,
    Admitted {
        room, sub, name, ..
    }: Admitted<WriteScope>,
    body: Result<Json<RestoreBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body?;
    let loaded = state.rooms.get(&room).await?;
    let seq = state
        .history
        .restore(&loaded, body.seq, Actor::user(sub, name))
        .await?;
    Ok(Json(json!({ "seq": seq })).into_response())
}

/// Body of `POST /rooms/{room}/rollback`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RollbackBody {
    actor: ActorKey,
    #[serde(default)]
    since_seq: Option<u64>,
}

async fn rollback(
    State(state): State<AppState>,
    Admitted {
        room, sub, name, ..
    }: Admitted<WriteScope>,
    body: Result<Json<RollbackBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body?;
    if body.actor.id.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "'actor.id' must not be empty",
        ));
    }
    let loaded = state.rooms.get(&room).await?;
    let (outcome, seq) = state
        .history
        .rollback(&loaded, body.actor, body.since_seq, Actor::user(sub, name))
        .await?;
    Ok(
        Json(json!({ "reverted": outcome.reverted, "kept": outcome.kept, "seq": seq }))
            .into_response(),
    )
}
