//! The project HTTP API (docs/fairies.md "Projects", scope `fairies`):
//! `POST /rooms/{room}/group-prompt` `{message, fairyIds, orchestratorId?, bounds?,
//! selectedShapeIds?}` → `202 {projectId, orchestratorId, mode}` (unknown fairy 404
//! `fairy_not_found`; fewer than two fairies or one already in a live project 409
//! `fairy_in_project`), and `DELETE /rooms/{room}/projects/{projectId}` → `204` (disband).
//! Admission, rate limits and errors are the fairy API's; the work is the hub's
//! ([`crate::agent::host::hub::group`]). Scaled out, both are served by the node hosting the
//! project's leader ([`super::forward::forward_projects`] sends them there).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::access::{Admitted, FairyAccess};
use super::error::{ApiError, ErrorBody};
use super::fairies::{fairy_id, json_body, limit, user_request};
use super::openapi::{RoomPath, TokenRefusals};
use crate::agent::host::hub::group::{GroupPrompt, ProjectStarted};
use crate::canvas::geometry::Bounds;
use crate::ids::ProjectId;

/// Most fairies one group prompt may name.
const MAX_GROUP: usize = 32;

/// The project routes, described.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(group_prompt))
        .routes(routes!(disband))
}

/// Body of a group prompt.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GroupPromptBody {
    /// What the people ask of the group, 1 to 2,000 characters.
    message: String,
    /// The fairies of the project (2 to 32), hosted in this room.
    fairy_ids: Vec<String>,
    /// The one that leads (default: the first of `fairyIds`).
    orchestrator_id: Option<String>,
    /// The person's viewport, in page coordinates.
    bounds: Option<Bounds>,
    /// The shapes the person has selected (at most 1,000).
    #[serde(default)]
    selected_shape_ids: Vec<String>,
    /// How the fairies' canvas actions land: `direct` (default) or `suggest` (README "Review
    /// mode").
    apply: Option<crate::review::ApplyMode>,
}

/// Starts a project of several fairies.
#[utoipa::path(
    post,
    operation_id = "groupPrompt",
    path = "/rooms/{room}/group-prompt",
    tag = "projects",
    params(RoomPath),
    request_body = GroupPromptBody,
    security(("bearer" = ["fairies"]), ("token" = ["fairies"])),
    responses(
        (status = 202, description = "The project started: its leader plans, then directs the others", body = ProjectStarted),
        (status = 400, description = "`invalid_group_prompt`, `invalid_json`", body = ErrorBody),
        TokenRefusals,
        (status = 404, description = "`fairy_not_found`", body = ErrorBody),
        (status = 409, description = "`fairy_in_project`", body = ErrorBody),
        (status = 429, description = "`rate_limited` (`retry-after`)", body = ErrorBody),
        (status = 503, description = "`fairy_moving`, `fairy_host_unreachable` (scaled out: the leader's host), `fairy_not_started`, `fairy_busy`, `store_unavailable`, `shutting_down`", body = ErrorBody),
        (status = 507, description = "`store_full`: the server's storage is full; nothing was written (`retry-after`)", body = ErrorBody),
    ),
)]
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
        apply: body.apply.unwrap_or_default(),
    };
    let started = state.fairies.group_prompt(&room, prompt).await?;
    Ok((StatusCode::ACCEPTED, Json(started)).into_response())
}

/// `{room}` and `{project}`: a project of a room.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ProjectPath {
    /// The room's name.
    pub room: String,
    /// The project's id (a group prompt's `projectId`).
    pub project: String,
}

/// Disbands a project.
#[utoipa::path(
    delete,
    operation_id = "disbandProject",
    path = "/rooms/{room}/projects/{project}",
    tag = "projects",
    params(ProjectPath),
    security(("bearer" = ["fairies"]), ("token" = ["fairies"])),
    responses(
        (status = 204, description = "Disbanded: its fairies stop and go back to idling"),
        TokenRefusals,
        (status = 404, description = "`project_not_found`", body = ErrorBody),
        (status = 429, description = "`rate_limited` (`retry-after`)", body = ErrorBody),
        (status = 503, description = "`fairy_moving`, `fairy_host_unreachable` (scaled out: the leader's host), `fairy_busy`, `store_unavailable`, `shutting_down`", body = ErrorBody),
        (status = 507, description = "`store_full`: the server's storage is full; nothing was written (`retry-after`)", body = ErrorBody),
    ),
)]
async fn disband(
    State(state): State<AppState>,
    Admitted { room, sub, .. }: FairyAccess,
    Path(ProjectPath { project, .. }): Path<ProjectPath>,
) -> Result<Response, ApiError> {
    limit(&state, &sub)?;
    let project = ProjectId::parse(&project)
        .map_err(|e| ApiError::new(StatusCode::NOT_FOUND, "project_not_found", e.to_string()))?;
    state.fairies.disband(&room, &project).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
