//! The project HTTP API (docs/fairies.md "Projects", scope `fairies`):
//! `POST /rooms/{room}/group-prompt` `{message, fairyIds, orchestratorId?, bounds?,
//! selectedShapeIds?}` → `202 {projectId, orchestratorId, mode}` (unknown fairy 404
//! `fairy_not_found`; fewer than two fairies or one already in a live project 409
//! `fairy_in_project`), and `DELETE /rooms/{room}/projects/{projectId}` → `204` (disband).
//! Admission, rate limits and errors are the fairy API's; the work is the hub's
//! ([`crate::agent::hub::group`]).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, post};
use serde::Deserialize;

use super::AppState;
use super::access::{Admitted, FairyAccess};
use super::error::ApiError;
use super::fairies::{fairy_id, json_body, limit, user_request};
use crate::agent::hub::group::GroupPrompt;
use crate::canvas::geometry::Bounds;
use crate::ids::ProjectId;

/// Most fairies one group prompt may name.
const MAX_GROUP: usize = 32;

/// The project routes.
pub fn routes() -> axum::Router<AppState> {
    axum::Router::new()
        .route("/rooms/{room}/group-prompt", post(group_prompt))
        .route("/rooms/{room}/projects/{project}", delete(disband))
}

/// Body of a group prompt.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GroupPromptBody {
    message: String,
    fairy_ids: Vec<String>,
    orchestrator_id: Option<String>,
    bounds: Option<Bounds>,
    #[serde(default)]
    selected_shape_ids: Vec<String>,
}

async fn group_prompt(
    State(state): State<AppState>,
    Admitted { room, sub, .. }: FairyAccess,
    body: Result<Json<GroupPromptBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    limit(&state, &sub)?;
    let body = json_body(body)?;
    let request = user_request(
        &body.message,
        body.bounds,
        body.selected_shape_ids,
        "invalid_group_prompt",
    )?;
    if body.fairy_ids.len() > MAX_GROUP {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_group_prompt",
            format!("at most {MAX_GROUP} fairies"),
        ));
    }
    let fairy_ids = body
        .fairy_ids
        .iter()
        .map(|id| fairy_id(id))
        .collect::<Result<Vec<_>, _>>()?;
    let orchestrator_id = body.orchestrator_id.as_deref().map(fairy_id).transpose()?;
    let prompt = GroupPrompt {
        request,
        fairy_ids,
        orchestrator_id,
        sub,
    };
    let started = state.fairies.group_prompt(&room, prompt).await?;
    Ok((StatusCode::ACCEPTED, Json(started)).into_response())
}

async fn disband(
    State(state): State<AppState>,
    Admitted { room, sub, .. }: FairyAccess,
    Path((_, project)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    limit(&state, &sub)?;
    let project = ProjectId::parse(&project)
        .map_err(|e| ApiError::new(StatusCode::NOT_FOUND, "project_not_found", e.to_string()))?;
    state.fairies.disband(&room, &project).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
