//! `GET /rooms/{room}/usage` (scope `fairies`): what the room's fairies used and cost over the
//! last hour and the last day, per fairy, per person and per project, with the budgets they
//! draw on and the asking person's own share (docs/fairies.md "Usage and budgets").
//!
//! Owns only the admission and the answer's shape; the totals are the hub's
//! ([`crate::agent::host::usage`]).

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::access::{Admitted, FairyAccess};
use super::openapi::{RoomPath, TokenRefusals};
use crate::agent::host::usage::{Totals, WindowTotals};

/// The usage route, described.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(usage))
}

/// The model-token budgets (0: no limit).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budgets {
    /// Tokens per room per hour (`--fairy-token-budget`).
    pub room_per_hour: u64,
    /// Tokens per person per day (`--fairy-token-budget-person`).
    pub person_per_day: u64,
    /// Tokens per project per day (`--fairy-token-budget-project`).
    pub project_per_day: u64,
}

/// A room's usage.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct UsageAnswer {
    /// The last 60 minutes.
    pub hour: WindowTotals,
    /// The last 24 hours.
    pub day: WindowTotals,
    /// The asking person's calls in this room over the last 24 hours.
    pub you: Totals,
    /// The budgets.
    pub budgets: Budgets,
}

/// What the room's fairies used and cost.
#[utoipa::path(
    get,
    operation_id = "roomUsage",
    path = "/rooms/{room}/usage",
    tag = "fairies",
    params(RoomPath),
    security(("bearer" = ["fairies"]), ("token" = ["fairies"])),
    responses(
        (status = 200, description = "Tokens and cost (USD, for models with a price) per fairy, person and project over the last hour and day, on the node that answers", body = UsageAnswer),
        TokenRefusals,
    ),
)]
async fn usage(
    State(state): State<AppState>,
    Admitted { room, sub, .. }: FairyAccess,
) -> Json<UsageAnswer> {
    let totals = state.fairies.usage(&room);
    let limits = state.fairies.budget_limits();
    let you = totals.day.people.get(&sub).copied().unwrap_or_default();
    Json(UsageAnswer {
        hour: totals.hour,
        day: totals.day,
        you,
        budgets: Budgets {
            room_per_hour: limits.room_per_hour,
            person_per_day: limits.person_per_day,
            project_per_day: limits.project_per_day,
        },
    })
}
