//! Admission of a request to a room: the token (query `?token=` or `Authorization: Bearer`),
//! verified by [`crate::auth`], decides who the peer is, whether it may write, and when its
//! session ends. Also the `--dev` token route. Refusals become 401/403 JSON before any upgrade.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::{HeaderMap, StatusCode, header};

use super::AppState;
use super::error::ApiError;
use crate::auth::unix_now;
use crate::room::RoomName;

/// Who may join, as decided before the upgrade.
#[derive(Debug, Clone)]
pub struct Admission {
    /// The token's `sub` (`anonymous` when auth is off).
    pub sub: String,
    /// False for read-only peers.
    pub can_write: bool,
    /// Unix second at which the session is closed with 4401 (`None` when auth is off).
    pub expires_at: Option<u64>,
}

/// Verifies the request's token for `room`.
pub fn admit(
    state: &AppState,
    room: &RoomName,
    query_token: Option<&str>,
    headers: &HeaderMap,
) -> Result<Admission, ApiError> {
    let Some(auth) = &state.auth else {
        return Ok(Admission {
            sub: "anonymous".into(),
            can_write: true,
            expires_at: None,
        });
    };
    let claims = verified_claims(auth, query_token, headers)?;
    let access = crate::auth::authorize(&claims, room.as_str())?;
    Ok(Admission {
        sub: claims.sub,
        can_write: access.can_write,
        expires_at: Some(access.expires_at),
    })
}

/// Body of `POST /auth/dev-token`.
#[derive(Debug, serde::Deserialize)]
pub struct DevTokenRequest {
    /// Display name for the token's `name` claim.
    pub name: String,
}

/// `POST /auth/dev-token` (only with `--dev`): a short-lived token for every room.
pub async fn dev_token(
    State(state): State<AppState>,
    body: Result<Json<DevTokenRequest>, JsonRejection>,
) -> Result<Json<crate::auth::DevToken>, ApiError> {
    let Json(request) = body?;
    let auth = state.auth.as_ref().ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", "dev tokens need --dev")
    })?;
    Ok(Json(auth.mint_dev_token(&request.name, unix_now())?))
}

/// Checks the room name and that the request's token grants `scope` in that room (the fairy
/// API, exports, room instructions); returns the room and the token's `sub` (`anonymous` when
/// auth is off). 400 for a bad room name, 401/403 as [`crate::auth`] decides.
pub fn admit_scope(
    state: &AppState,
    room: &str,
    query_token: Option<&str>,
    headers: &HeaderMap,
    scope: crate::auth::Scope,
) -> Result<(RoomName, String), ApiError> {
    let name = RoomName::parse(room)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_room_name", e.to_string()))?;
    let Some(auth) = &state.auth else {
        return Ok((name, "anonymous".into()));
    };
    let claims = verified_claims(auth, query_token, headers)?;
    crate::auth::authorize_scope(&claims, name.as_str(), scope)?;
    Ok((name, claims.sub))
}

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
