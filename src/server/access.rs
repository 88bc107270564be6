//! Admission of a request to a room: the token (query `?token=` or `Authorization: Bearer`),
//! verified by [`crate::auth`], decides who the peer is, whether it may write, and when its
//! session ends. Also the `--dev` token route. Refusals become 401/403 JSON before any upgrade.
//! Every route in a room (the WebSocket, fairies, projects, exports, instructions) takes an
//! [`Admitted`] extractor, so admission is written once here, not in each handler.

use std::collections::HashMap;
use std::marker::PhantomData;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::ApiError;
use crate::auth::{Scope, unix_now};
use crate::ids::RoomName;

/// Who may join, as decided before the upgrade.
#[derive(Debug, Clone)]
pub struct Admission {
    /// The token's `sub` (`anonymous` when auth is off).
    pub sub: String,
    /// The token's `name`, when it has one.
    pub name: Option<String>,
    /// False for read-only peers.
    pub can_write: bool,
    /// Unix second at which the session is closed with 4401 (`None` when auth is off).
    pub expires_at: Option<u64>,
}

/// Body of `POST /auth/dev-token`.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
pub struct DevTokenRequest {
    /// Display name for the token's `name` claim.
    pub name: String,
}

/// The cookie naming the browser that asks for dev tokens ([`crate::auth::DevBrowser`]).
pub const DEV_BROWSER_COOKIE: &str = "fairyring_dev_browser";

/// A short-lived token for every room (only with `--dev`).
///
/// Its `sub` is the asking browser's: the id in its [`DEV_BROWSER_COOKIE`], or a new one set in
/// it.
#[utoipa::path(
    post,
    operation_id = "devToken",
    path = "/auth/dev-token",
    tag = "server",
    request_body = DevTokenRequest,
    responses(
        (status = 200, description = "A token for every room, scopes `read write fairies` (only served with `--dev`); sets the `fairyring_dev_browser` cookie", body = crate::auth::DevToken),
        (status = 400, description = "`invalid_request` (the name), `invalid_json`", body = super::error::ErrorBody),
    ),
)]
pub async fn dev_token(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Json<DevTokenRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(request) = body?;
    let auth = state.auth.as_ref().ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", "dev tokens need --dev")
    })?;
    let browser = headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == DEV_BROWSER_COOKIE)
        .and_then(|(_, id)| crate::auth::DevBrowser::parse(id))
        .unwrap_or_else(crate::auth::DevBrowser::random);
    let token = auth.mint_dev_token(&request.name, &browser, unix_now())?;
    let cookie = format!(
        "{DEV_BROWSER_COOKIE}={browser}; Path=/auth; Max-Age=31536000; HttpOnly; SameSite=Strict"
    );
    Ok(([(axum::http::header::SET_COOKIE, cookie)], Json(token)).into_response())
}

/// Checks the room name and that the request's token grants `scope` in that room (the
/// WebSocket, the fairy API, exports, room instructions); returns the room and who the peer is
/// (`anonymous`, writing, never expiring when auth is off). 400 for a bad room name, 401/403
/// as [`crate::auth`] decides.
pub fn admit_scope(
    state: &AppState,
    room: &str,
    query_token: Option<&str>,
    headers: &HeaderMap,
    scope: Scope,
) -> Result<(RoomName, Admission), ApiError> {
    let name = RoomName::parse(room)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_room_name", e.to_string()))?;
    let Some(auth) = &state.auth else {
        let admission = Admission {
            sub: "anonymous".into(),
            name: None,
            can_write: true,
            expires_at: None,
        };
        return Ok((name, admission));
    };
    let claims = verified_claims(auth, query_token, headers)?;
    let access = crate::auth::authorize_scope(&claims, name.as_str(), scope)?;
    let admission = Admission {
        sub: claims.sub,
        name: claims.name,
        can_write: access.can_write,
        expires_at: Some(access.expires_at),
    };
    Ok((name, admission))
}

/// The scope a route asks of the token, as a type (so that [`Admitted`] names it in a
/// handler's signature).
pub trait RoomScope: Send + Sync + 'static {
    /// The scope checked.
    const SCOPE: Scope;
}

/// The `fairies` scope: the fairy and project routes, reading the room's instructions.
#[derive(Debug)]
pub struct FairiesScope;
impl RoomScope for FairiesScope {
    const SCOPE: Scope = Scope::Fairies;
}

/// The `read` scope: the WebSocket, exports.
#[derive(Debug)]
pub struct ReadScope;
impl RoomScope for ReadScope {
    const SCOPE: Scope = Scope::Read;
}

/// The `write` scope: restoring a version, rolling back an actor's changes.
#[derive(Debug)]
pub struct WriteScope;
impl RoomScope for WriteScope {
    const SCOPE: Scope = Scope::Write;
}

/// The `admin` scope: writing the room's instructions.
#[derive(Debug)]
pub struct AdminScope;
impl RoomScope for AdminScope {
    const SCOPE: Scope = Scope::Admin;
}

/// A request admitted to the room of its `{room}` path segment with scope `S`: the room name
/// checked and the token verified once, as [`admit_scope`] does (400 `invalid_room_name`,
/// 401/403 as [`crate::auth`] decides). The token is the query's `token` or the
/// `Authorization: Bearer` header.
#[derive(Debug)]
pub struct Admitted<S> {
    /// The room.
    pub room: RoomName,
    /// The token's `sub` (`anonymous` when auth is off).
    pub sub: String,
    /// The token's `name`, when it has one.
    pub name: Option<String>,
    /// False for read-only peers (a token without `write`).
    pub can_write: bool,
    /// Unix second at which the token expires (`None` when auth is off).
    pub expires_at: Option<u64>,
    scope: PhantomData<S>,
}

impl<S: RoomScope> FromRequestParts<AppState> for Admitted<S> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let Path(params) = Path::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let Query(query) = Query::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let room = params.get("room").ok_or_else(|| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "route has no {room} segment",
            )
            .into_response()
        })?;
        let token = query.get("token").map(String::as_str);
        let (room, admission) = admit_scope(state, room, token, &parts.headers, S::SCOPE)
            .map_err(IntoResponse::into_response)?;
        Ok(Admitted {
            room,
            sub: admission.sub,
            name: admission.name,
            can_write: admission.can_write,
            expires_at: admission.expires_at,
            scope: PhantomData,
        })
    }
}

/// The `fairies` scope's admission: the fairy and project routes, reading instructions.
pub type FairyAccess = Admitted<FairiesScope>;

/// The claims of the request's token (query `?token=` or `Authorization: Bearer`), verified.
fn verified_claims(
    auth: &crate::auth::Authenticator,
    query_token: Option<&str>,
    headers: &HeaderMap,
) -> Result<crate::auth::Claims, ApiError> {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let token = crate::auth::token_from_request(query_token, authorization)
        .ok_or(crate::auth::AuthError::MissingToken)?;
    Ok(auth.authenticate(token, unix_now())?)
}
