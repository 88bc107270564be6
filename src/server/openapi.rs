//! The OpenAPI 3.1 description of the HTTP API, served at `GET /openapi.json` (docs/rest.md
//! "OpenAPI").
//!
//! Owns the description's frame — title, the two ways to present a token (a bearer JWT or
//! `?token=`, with the route's scope named as the requirement's role), the tags — the path
//! parameters and the `{"seq"}` answer several route modules share, and the route that serves
//! the description. It owns no
//! operation: each handler carries its own `#[utoipa::path]` (request and response types,
//! scope, error codes) and is registered with `utoipa_axum::routes!`, which adds the route to
//! the router and its operation to the description in one step, so a route cannot be served
//! without being described ([`super::router`], and `tests/http/openapi.rs` checks it against the
//! running server). The web demo's static files are not API and are not described.

use axum::Extension;
use axum::http::header;
use axum::response::IntoResponse;
use bytes::Bytes;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

/// The frame every operation is added to.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "fairyring",
        description = "People and AI fairies drawing on one Yjs canvas. Each room is a Yrs \
            document served over WebSockets with the standard Yjs protocol (`GET /rooms/{room}`); \
            these routes invite and prompt fairies, read and write documents and their history, \
            and export images. Errors are `{\"error\", \"detail\"}` with a stable `error` code. \
            Tokens are JWTs (`Authorization: Bearer` or `?token=`); each operation's security \
            requirement names the scope it needs (`read`, `write`, `fairies`, `admin`)."
    ),
    modifiers(&Security),
    tags(
        (name = "rooms", description = "The Yjs WebSocket and the room's documents"),
        (name = "fairies", description = "Fairies: invite, prompt, cancel, revert (scope `fairies`)"),
        (name = "projects", description = "Projects of several fairies (scope `fairies`)"),
        (name = "history", description = "Who changed what, versions, restore and rollback"),
        (name = "review", description = "Review mode: accepting and rejecting fairies' suggestions (scope `write`)"),
        (name = "exports", description = "A page drawn as an image (scope `read`)"),
        (name = "server", description = "Health, metrics, this description, dev tokens"),
    )
)]
struct Frame;

/// The security schemes: the same JWT in a header or in the query.
struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "A JWT (HS256 or RS256, docs/auth.md) whose `rooms` include the room; \
                         the requirement's role is the scope the route needs.",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "token",
            SecurityScheme::ApiKey(ApiKey::Query(ApiKeyValue::with_description(
                "token",
                "The same JWT as `?token=` (browsers' WebSockets and event streams cannot set \
                 headers).",
            ))),
        );
    }
}

/// The description's frame, before any operation is added.
pub fn frame() -> utoipa::openapi::OpenApi {
    Frame::openapi()
}

/// `{room}`: the path parameter of every room route.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct RoomPath {
    /// The room's name: 1–128 characters of `[A-Za-z0-9._-]`.
    pub room: String,
}

/// `{room}` and `{id}`: a fairy of a room.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct FairyPath {
    /// The room's name: 1–128 characters of `[A-Za-z0-9._-]`.
    pub room: String,
    /// The fairy's id (`f-…`).
    pub id: String,
}

/// The refusals of a room route's token, common to every route that takes one (listed in its
/// responses beside its own).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Only described: the refusals are answered by [`super::access`].
pub enum TokenRefusals {
    /// The token: `missing_token`, `malformed_token`, `bad_signature`, `token_expired`, …
    #[response(status = 401)]
    Unauthorized(super::error::ErrorBody),
    /// `room_not_granted`, `insufficient_scope`.
    #[response(status = 403)]
    Forbidden(super::error::ErrorBody),
}

/// `{"seq"}`: the sequence number of an update (the one a write became, or a version's).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct SeqAnswer {
    /// The update's sequence number in the room's log.
    pub seq: u64,
}

/// The description as served, JSON text built once (a clone shares it).
#[derive(Debug, Clone)]
pub struct Described(Bytes);

impl Described {
    /// The JSON text of `doc`.
    pub fn new(doc: &utoipa::openapi::OpenApi) -> Self {
        // A description that does not serialize is a bug in a derive, not input: an empty
        // object is served rather than a panic, and tests/http/openapi.rs fails on it.
        Described(Bytes::from(
            doc.to_pretty_json().unwrap_or_else(|_| "{}".to_owned()),
        ))
    }
}

/// This description.
#[utoipa::path(
    get,
    operation_id = "openapi",
    path = "/openapi.json",
    tag = "server",
    responses((status = 200, description = "This description (OpenAPI 3.1)", content_type = "application/json", body = Object)),
)]
pub async fn describe(Extension(described): Extension<Described>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], described.0)
}
