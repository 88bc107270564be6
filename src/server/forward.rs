//! Scaled out: a fairy's API calls on a node that does not host it are forwarded over HTTP to
//! the node holding its lease (docs/scaling.md "Fairies across nodes"), so a client may call
//! any node. The event stream (`…/events`, SSE) is streamed back through the same proxy.
//!
//! Owns the middleware over the per-fairy routes (`/rooms/{room}/fairies/{id}…`): it admits the
//! caller as the route would (room name, token, `fairies` scope), asks the hub where the fairy
//! is hosted, and either lets the route run here or relays the request (method, path and query,
//! body, `authorization`, `content-type`, `accept`) to the host and its answer back. The host
//! admits and rate-limits the call itself. A forwarded request carries `x-fairyring-forwarded`
//! and is never forwarded again: a node that receives one for a fairy it does not host (the
//! lease moved meanwhile) answers `503 fairy_moving`, as does any node while no node hosts the
//! fairy; the host unreachable is `503 fairy_host_unreachable`; both with `retry-after: 1`.
//! Listing and inviting are served by the node called (any node can).
//!
//! Also owns the routing of the project routes (docs/scaling.md "Projects across nodes"): a
//! group prompt (`POST /rooms/{room}/group-prompt`) goes to the node hosting the fairy that
//! will lead (`orchestratorId`, else the first of `fairyIds`, read from the body; a body that
//! does not parse is served here and refused by the route), and disbanding
//! (`DELETE /rooms/{room}/projects/{id}`) to the node hosting the live project's leader,
//! which coordinates it; with the same answers while the leader is moving.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderName, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

use serde::Deserialize;

use super::AppState;
use super::error::ApiError;
use crate::agent::host::hub::{HubError, Placement};
use crate::auth::Scope;
use crate::ids::RoomName;
use crate::ids::{FairyId, ProjectId};

/// Marks a request one node forwarded to another.
pub const FORWARDED: HeaderName = HeaderName::from_static("x-fairyring-forwarded");
/// Longest wait to connect to the host.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Request headers relayed to the host.
const REQUEST_HEADERS: [HeaderName; 3] =
    [header::AUTHORIZATION, header::CONTENT_TYPE, header::ACCEPT];
/// Response headers relayed back.
const RESPONSE_HEADERS: [HeaderName; 3] = [
    header::CONTENT_TYPE,
    header::RETRY_AFTER,
    header::CACHE_CONTROL,
];

/// The room and fairy a per-fairy route's path names (`/rooms/{room}/fairies/{id}…`).
fn fairy_path(path: &str) -> Option<(&str, &str)> {
    let mut segments = path.split('/');
    match (
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
    ) {
        (Some(""), Some("rooms"), Some(room), Some("fairies"), Some(id)) if !id.is_empty() => {
            Some((room, id))
        }
        _ => None,
    }
}

/// The middleware: serves the call here, or forwards it to the fairy's host.
pub async fn forward(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some((room, id)) = fairy_path(request.uri().path()) else {
        return next.run(request).await;
    };
    let room = match admit(&state, room, &request) {
        Ok(room) => room,
        Err(error) => return error.into_response(),
    };
    // An id that cannot be a fairy's: the route answers 404.
    let Ok(id) = FairyId::parse(id) else {
        return next.run(request).await;
    };
    to_host(&state, &room, &id, request, next).await
}

/// The room a call names, once its caller is admitted as the route would admit it.
fn admit(state: &AppState, room: &str, request: &Request) -> Result<RoomName, ApiError> {
    let query: HashMap<String, String> = Query::try_from_uri(request.uri())
        .map(|Query(q)| q)
        .unwrap_or_default();
    let token = query.get("token").map(String::as_str);
    super::access::admit_scope(state, room, token, request.headers(), Scope::Fairies)
        .map(|(room, _)| room)
}

/// The fields of a group prompt's body that say who leads (the route reads the whole body).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Lead {
    fairy_ids: Vec<String>,
    orchestrator_id: Option<String>,
}

/// The middleware of the project routes: serves the call here, or forwards it to the node
/// hosting the project's leader (see the module docs).
pub async fn forward_projects(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if state.pubsub.is_none() {
        // A single node coordinates every project.
        return next.run(request).await;
    }
    let path = request.uri().path().to_owned();
    let mut segments = path.split('/').skip(1);
    let (Some("rooms"), Some(room), Some(route), project, None) = (
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
    ) else {
        return next.run(request).await;
    };
    let room = match admit(&state, room, &request) {
        Ok(room) => room,
        Err(error) => return error.into_response(),
    };
    let leader = match (route, project) {
        ("group-prompt", None) => {
            let (parts, body) = request.into_parts();
            let body = match axum::body::to_bytes(body, super::error::MAX_BODY_BYTES).await {
                Ok(body) => body,
                Err(e) => {
                    return ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", e.to_string())
                        .into_response();
                }
            };
            let leader = serde_json::from_slice::<Lead>(&body)
                .ok()
                .and_then(|lead| lead.orchestrator_id.or(lead.fairy_ids.into_iter().next()))
                .and_then(|id| FairyId::parse(&id).ok());
            let request = Request::from_parts(parts, Body::from(body));
            match leader {
                Some(leader) => return to_host(&state, &room, &leader, request, next).await,
                None => return next.run(request).await,
            }
        }
        ("projects", Some(project)) => match ProjectId::parse(project) {
            Ok(project) => state.fairies.live_project_leader(&room, &project).await,
            Err(_) => Ok(None),
        },
        _ => Ok(None),
    };
    match leader {
        Ok(Some(leader)) => to_host(&state, &room, &leader, request, next).await,
        Ok(None) => next.run(request).await,
        Err(error) => ApiError::from(error).into_response(),
    }
}

/// Serves the call here if fairy `id` is hosted here (or nowhere known), else relays it to
/// its host.
async fn to_host(
    state: &AppState,
    room: &RoomName,
    id: &FairyId,
    request: Request,
    next: Next,
) -> Response {
    match state.fairies.placement(room, id).await {
        Ok(Placement::Here) => next.run(request).await,
        Ok(Placement::At(_)) if request.headers().contains_key(FORWARDED) => {
            ApiError::from(HubError::Moving).into_response()
        }
        Ok(Placement::At(addr)) => match relay(state, &addr, request).await {
            Ok(response) => response,
            Err(error) => error.into_response(),
        },
        Err(error) => ApiError::from(error).into_response(),
    }
}

fn client() -> Result<&'static reqwest::Client, ApiError> {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    if let Some(client) = CLIENT.get() {
        return Ok(client);
    }
    let built = reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(CONNECT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| unreachable_host(&e.to_string()))?;
    Ok(CLIENT.get_or_init(|| built))
}

fn unreachable_host(why: &str) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "fairy_host_unreachable",
        format!("the node hosting this fairy did not answer: {why}"),
    )
    .with_retry_after(1)
}

/// Sends the request to the host at `addr` and streams its answer back.
async fn relay(state: &AppState, addr: &str, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, super::error::MAX_BODY_BYTES)
        .await
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", e.to_string()))?;
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut outbound = client()?
        .request(parts.method.clone(), format!("http://{addr}{path}"))
        .header(FORWARDED, "1")
        .body(body);
    for name in REQUEST_HEADERS {
        if let Some(value) = parts.headers.get(&name) {
            outbound = outbound.header(name, value);
        }
    }
    // Without the URL: its query may hold the caller's `?token=`.
    let upstream = outbound
        .send()
        .await
        .map_err(|e| unreachable_host(&e.without_url().to_string()))?;
    let mut response = Response::builder().status(upstream.status());
    for name in RESPONSE_HEADERS {
        if let Some(value) = upstream.headers().get(&name) {
            response = response.header(name, value);
        }
    }
    // A relayed event stream ends when this node shuts down, as a local one does.
    let stream = upstream
        .bytes_stream()
        .take_until(state.shutdown.clone().cancelled_owned());
    response
        .body(Body::from_stream(stream))
        .map_err(|e| unreachable_host(&e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_per_fairy_paths_name_a_fairy() {
        assert_eq!(
            fairy_path("/rooms/r1/fairies/f1/prompt"),
            Some(("r1", "f1"))
        );
        assert_eq!(fairy_path("/rooms/r1/fairies/f1"), Some(("r1", "f1")));
        assert_eq!(
            fairy_path("/rooms/r1/fairies/f1/requests/q/revert"),
            Some(("r1", "f1"))
        );
        assert_eq!(fairy_path("/rooms/r1/fairies"), None);
        assert_eq!(fairy_path("/rooms/r1/fairies/"), None);
        assert_eq!(fairy_path("/rooms/r1/projects/p"), None);
    }
}
