//! What a fairy tells its observers (`GET …/fairies/{id}/events`, SSE): requests starting and
//! ending, actions as they stream (with `complete`), mode changes, errors. Sent on a bounded
//! broadcast channel; a slow observer misses events (it is told how many), the fairy never
//! waits for it.

use serde::Serialize;
use serde_json::Value;

/// Events kept for slow observers before they start missing some.
pub const EVENT_BUFFER: usize = 256;

/// One agent event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum AgentEvent {
    /// A request started with these messages.
    RequestStarted {
        /// The request's messages.
        messages: Vec<String>,
    },
    /// A model turn of the request started (1-based).
    TurnStarted {
        /// Turn number.
        turn: usize,
    },
    /// An action streamed (incomplete) or completed.
    Action {
        /// Index in the turn's answer.
        index: usize,
        /// The action as the model wrote it so far.
        action: Value,
        /// Its final version.
        complete: bool,
        /// Unix time in milliseconds when the model text that produced this version arrived
        /// (for measuring the server's latency from model token to peer receipt).
        #[serde(rename = "receivedAt")]
        received_at: f64,
    },
    /// An action was refused; the model is told why next turn.
    ActionRejected {
        /// The action's `_type`.
        action_type: String,
        /// Why.
        reason: String,
    },
    /// The mode changed.
    ModeChanged {
        /// The new mode's name.
        mode: String,
    },
    /// The request ended.
    RequestEnded {
        /// `done`, `cancelled`, `interrupted`, `error` or `max-iterations`.
        reason: String,
    },
    /// Something went wrong (also posted in the fairy's chat).
    Error {
        /// What.
        message: String,
    },
}

impl AgentEvent {
    /// The SSE event name.
    pub fn name(&self) -> &'static str {
        match self {
            AgentEvent::RequestStarted { .. } => "request-started",
            AgentEvent::TurnStarted { .. } => "turn-started",
            AgentEvent::Action { .. } => "action",
            AgentEvent::ActionRejected { .. } => "action-rejected",
            AgentEvent::ModeChanged { .. } => "mode-changed",
            AgentEvent::RequestEnded { .. } => "request-ended",
            AgentEvent::Error { .. } => "error",
        }
    }
}
