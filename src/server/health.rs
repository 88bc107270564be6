//! `GET /healthz`: whether this node can do its work. Reports the store's reachability (a node
//! that cannot make updates durable answers `503`; one whose store's disk is full, `200` with
//! `store: full`, since it still serves reads) and, when scaled out, the pub/sub
//! subscription's (degraded but serving: rooms catch up from the store). Owns only the probe
//! and its JSON; it does not decide what rooms do when the store fails.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Serialize;

use super::AppState;

/// How long the store may take to answer the probe.
const STORE_PROBE: Duration = Duration::from_secs(2);

/// Reachability of one dependency.
#[derive(Debug, Serialize, PartialEq, Eq, Clone, Copy, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reach {
    /// It answered.
    Ok,
    /// It did not answer (in time).
    Unreachable,
    /// Not configured on this node.
    Off,
    /// The store answers but its disk is full: reads are served, writes refused (`507`)
    /// until space returns.
    Full,
}

/// The body of `/healthz`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Health {
    /// `ok`, `degraded` (pub/sub down: serving, with catch-ups; or the store's disk full:
    /// reads served, writes refused) or `unavailable` (store down).
    pub status: &'static str,
    /// The store's reachability.
    pub store: Reach,
    /// The pub/sub subscription's state.
    pub pubsub: Reach,
}

/// Whether this node can do its work.
#[utoipa::path(
    get,
    operation_id = "health",
    path = "/healthz",
    tag = "server",
    responses(
        (status = 200, description = "`ok`, or `degraded` (pub/sub down: serving, rooms catch up from the store; or `store: full`: reads served, writes refused with 507)", body = Health),
        (status = 503, description = "`unavailable`: the store does not answer", body = Health),
    ),
)]
pub async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    let store = match tokio::time::timeout(STORE_PROBE, state.store.ping()).await {
        Ok(Ok(())) if state.store.is_full() => Reach::Full,
        Ok(Ok(())) => Reach::Ok,
        _ => Reach::Unreachable,
    };
    let pubsub = match &state.pubsub {
        None => Reach::Off,
        Some(p) if p.fanout().is_connected() => Reach::Ok,
        Some(_) => Reach::Unreachable,
    };
    let (code, status) = match (store, pubsub) {
        (Reach::Unreachable, _) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        (Reach::Full, _) | (_, Reach::Unreachable) => (StatusCode::OK, "degraded"),
        _ => (StatusCode::OK, "ok"),
    };
    (
        code,
        Json(Health {
            status,
            store,
            pubsub,
        }),
    )
}
