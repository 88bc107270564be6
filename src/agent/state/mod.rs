//! The data of a fairy at work: its settings ([`RuntimeConfig`]), what survives a restart
//! ([`FairyState`], its private state, kept in the store by [`crate::agent::state::store`] and never in
//! the room document), its solo tasks and the
//! [`Request`]s it runs (with the `schedule` merge rule), and what its recent requests changed
//! ([`RequestLedger`], so a request can be taken back after a restart too). Plain data, no I/O.
//!
//! # Layout
//! - this file: the data above.
//! - [`store`]: the private state in the store (never in the document; moving it out of
//!   documents of earlier versions, on every room load, is the host's
//!   [`crate::agent::host::migration`]).
//! - [`fairy`]: the public fairy entity in the document (`fairies` root, chat);
//!   [`tasks_doc`]: solo tasks mirrored into the `tasks` root.
//! - [`memory`]: the model-facing chat history and its filtering by memory level.
//!
//! The vocabulary of a fairy's work (task statuses, todo items, project roles, membership) is
//! [`crate::agent::work`], below every folder of the agent.
//!
//! Must not touch sockets; reaches the store only in [`store`], through
//! the store's side tables ([`crate::store::Store::side`]).

pub mod fairy;
pub mod memory;
pub mod store;
pub mod tasks_doc;

use serde::{Deserialize, Serialize};

use super::modes::Mode;
use super::work::TodoItem;
use crate::agent::apply::ledger::{MAX_IDS, RequestLedger};
use crate::agent::apply::throttle::ThrottleConfig;
use crate::agent::state::memory::HistoryItem;
use crate::agent::work::TaskStatus;
use crate::canvas::geometry::Bounds;
use crate::canvas::schema::MAIN_PAGE;
use crate::ids::RequestId;

/// Default most model turns per request.
pub const DEFAULT_MAX_ITERATIONS: usize = 25;
/// Size of the area a request without bounds works on, around the fairy.
pub const DEFAULT_VIEW: (f64, f64) = (1200.0, 800.0);

/// Settings of every fairy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RuntimeConfig {
    /// Most model turns per request.
    pub max_iterations: usize,
    /// Most complete actions one model turn applies (0: no limit).
    pub turn_max_actions: usize,
    /// Longest stream of one model turn, from the model's first event (`None`: no limit).
    pub turn_max_time: Option<std::time::Duration>,
    /// Characters of history a prompt may carry before old items are summarised.
    pub history_budget: usize,
    /// Tentative application throttle.
    pub throttle: ThrottleConfig,
    /// Whether requests carry a screenshot of their bounds (`--llm-vision`).
    pub vision: bool,
    /// How the fairies' private states are written (`--fairy-state-layout`).
    pub state_layout: crate::config::FairyStateLayout,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            max_iterations: DEFAULT_MAX_ITERATIONS,
            turn_max_actions: crate::config::DEFAULT_FAIRY_TURN_MAX_ACTIONS,
            turn_max_time: Some(std::time::Duration::from_secs(
                crate::config::DEFAULT_FAIRY_TURN_MAX_SECS,
            )),
            history_budget: crate::agent::state::memory::HISTORY_BUDGET_CHARS,
            throttle: ThrottleConfig::default(),
            vision: false,
            state_layout: crate::config::FairyStateLayout::Rows,
        }
    }
}

/// A solo task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SoloTask {
    /// Task id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Details.
    pub text: String,
    /// `todo`, `in-progress` or `done`.
    #[serde(deserialize_with = "TaskStatus::lenient")]
    pub status: TaskStatus,
    /// Area it covers (page coordinates).
    pub bounds: Option<Bounds>,
}

/// What survives a restart: the fairy's private state, in the store (never in the document).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FairyState {
    /// Current mode.
    pub mode: Mode,
    /// Chat history.
    pub history: Vec<HistoryItem>,
    /// Personal todo list.
    pub todo: Vec<TodoItem>,
    /// Solo tasks.
    pub tasks: Vec<SoloTask>,
    /// The solo task in progress.
    pub current_task: Option<String>,
    /// Page point the model's coordinates are relative to.
    pub chat_origin: Option<(f64, f64)>,
    /// Where the fairy is.
    pub position: (f64, f64),
    /// Page it works on.
    pub page_id: String,
    /// True while a request runs (found true after a restart: the work was interrupted).
    pub working: bool,
    /// What its recent requests changed (a copy of its change tracker's, taken when the state
    /// is stored).
    pub requests: RequestLedger,
    /// Its project, while it is a member of one.
    pub project: Option<crate::agent::work::Membership>,
    /// People's decisions on its suggestions up to this time (Unix ms) were told to it
    /// (review mode).
    pub decisions_told: f64,
}

impl Default for FairyState {
    fn default() -> Self {
        FairyState {
            mode: Mode::Idling,
            history: Vec::new(),
            todo: Vec::new(),
            tasks: Vec::new(),
            current_task: None,
            chat_origin: None,
            position: (100.0, 100.0),
            page_id: MAIN_PAGE.into(),
            working: false,
            requests: RequestLedger::default(),
            project: None,
            decisions_told: 0.0,
        }
    }
}

/// One request: messages and where to work. Scheduling merges into the pending one. Scaled
/// out it crosses nodes as JSON (a project's direction, `crate::agent::host::hub`'s node messages).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Request {
    /// Messages, oldest first.
    pub messages: Vec<String>,
    /// Area (page coordinates); `None`: around the fairy, or the previous request's.
    pub bounds: Option<Bounds>,
    /// Selected shape ids.
    pub selected: Vec<String>,
    /// `user` or `self`.
    pub source: String,
    /// Its ids: the prompt route names a person's request (its chat item carries the id);
    /// ids of prompts merged into it follow. Empty: the runtime names it when it starts.
    pub ids: Vec<RequestId>,
    /// The token `sub` of the person who asked (whose viewport the prompt shows); follow-ups
    /// keep the one of the request they follow.
    pub from_user: Option<String>,
    /// How its canvas actions land (`"apply"` of a prompt); `None`: the fairy's default, or
    /// its project's.
    pub apply: Option<crate::review::ApplyMode>,
}

impl Request {
    /// A request from the runtime itself.
    pub fn follow_up(message: impl Into<String>, bounds: Option<Bounds>) -> Self {
        Request {
            messages: vec![message.into()],
            bounds,
            selected: Vec::new(),
            source: "self".into(),
            ids: Vec::new(),
            from_user: None,
            apply: None,
        }
    }

    /// `schedule` semantics: messages appended, bounds and selection overridden when given.
    pub fn merge(&mut self, other: Request) {
        self.messages.extend(other.messages);
        for id in other.ids {
            if self.ids.len() < MAX_IDS && !self.ids.contains(&id) {
                self.ids.push(id);
            }
        }
        if other.bounds.is_some() {
            self.bounds = other.bounds;
        }
        if !other.selected.is_empty() {
            self.selected = other.selected;
        }
        if other.from_user.is_some() {
            self.from_user = other.from_user;
        }
        if other.apply.is_some() {
            self.apply = other.apply;
        }
    }
}

/// Most messages a merged pending input keeps (the oldest are dropped first), so that a burst
/// of interrupts the fairy has not handled yet stays bounded.
pub const MAX_MERGED_MESSAGES: usize = 16;

/// One interrupt: optional input to run, optional mode to switch to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Interrupt {
    /// The request to run once the active one is cancelled.
    pub input: Option<Request>,
    /// The mode to switch to before running it.
    pub mode: Option<Mode>,
}

impl Interrupt {
    /// Merges a later interrupt into this one, as if both were handled in order: the inputs
    /// merge like `schedule` (messages appended, bounds and selection overridden when given);
    /// a later interrupt without input (a cancel) drops the input that had not started; the
    /// later mode wins when it names one.
    pub fn merge(&mut self, later: Interrupt) {
        self.input = match (self.input.take(), later.input) {
            (Some(mut pending), Some(input)) => {
                pending.merge(input);
                let excess = pending.messages.len().saturating_sub(MAX_MERGED_MESSAGES);
                pending.messages.drain(..excess);
                Some(pending)
            }
            (_, input) => input,
        };
        if later.mode.is_some() {
            self.mode = later.mode;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_appends_messages_and_overrides_bounds() {
        let mut r = Request {
            messages: vec!["a".into()],
            bounds: Some(Bounds::new(0.0, 0.0, 1.0, 1.0)),
            selected: vec!["s".into()],
            source: "user".into(),
            ids: Vec::new(),
            apply: None,
            from_user: Some("ann".into()),
        };
        r.merge(Request::follow_up("b", None));
        assert_eq!(r.messages, ["a", "b"]);
        assert_eq!(
            r.from_user.as_deref(),
            Some("ann"),
            "a follow-up keeps who asked"
        );
        assert_eq!(r.bounds, Some(Bounds::new(0.0, 0.0, 1.0, 1.0)));
        r.merge(Request::follow_up(
            "c",
            Some(Bounds::new(5.0, 5.0, 1.0, 1.0)),
        ));
        assert_eq!(r.bounds, Some(Bounds::new(5.0, 5.0, 1.0, 1.0)));
        assert_eq!(r.selected, ["s"]);
    }

    #[test]
    fn state_round_trips_and_tolerates_missing_fields() {
        let state = FairyState {
            working: true,
            chat_origin: Some((1.5, 2.0)),
            ..FairyState::default()
        };
        let json = serde_json::to_value(&state).unwrap_or_default();
        let back: Option<FairyState> = serde_json::from_value(json).ok();
        assert_eq!(back, Some(state));
        let partial: Option<FairyState> =
            serde_json::from_value(serde_json::json!({"mode": "working-solo"})).ok();
        assert_eq!(partial.map(|s| s.mode), Some(Mode::WorkingSolo));
    }
}
