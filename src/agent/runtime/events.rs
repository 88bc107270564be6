//! What a fairy tells its observers (`GET …/fairies/{id}/events`, SSE): requests starting and
//! ending, actions as they stream (with `complete`), mode changes, errors, the model's failover
//! retries, history compactions and the token usage of every model call. Sent on a bounded
//! broadcast channel; a slow observer misses events (it is told how many), the fairy never
//! waits for it.

use serde::Serialize;
use serde_json::Value;

use crate::ids::RequestId;

/// Events kept for slow observers before they start missing some.
pub const EVENT_BUFFER: usize = 256;

/// Why a request ended (the `reason` of `request-ended`, and the metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndReason {
    /// The fairy finished.
    Done,
    /// A user cancelled it (or dismissed the fairy).
    Cancelled,
    /// New input interrupted it.
    Interrupted,
    /// A person took it back while it ran.
    Rejected,
    /// The model failed.
    Error,
    /// It took more turns than allowed.
    MaxIterations,
}

impl EndReason {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            EndReason::Done => "done",
            EndReason::Cancelled => "cancelled",
            EndReason::Interrupted => "interrupted",
            EndReason::Rejected => "rejected",
            EndReason::Error => "error",
            EndReason::MaxIterations => "max-iterations",
        }
    }
}

/// One agent event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum AgentEvent {
    /// A request started with these messages.
    RequestStarted {
        /// The request's messages.
        messages: Vec<String>,
        /// Its id (what `…/requests/{requestId}/revert` takes).
        #[serde(rename = "requestId")]
        request_id: RequestId,
    },
    /// A person rejected a request: what it changed was taken back.
    RequestRejected {
        /// The request's id.
        #[serde(rename = "requestId")]
        request_id: RequestId,
        /// Shapes taken back entirely.
        reverted: usize,
        /// Shapes kept (someone changed them afterwards).
        kept: usize,
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
        #[serde(rename = "actionType")]
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
        /// Why.
        reason: EndReason,
    },
    /// Something went wrong (also posted in the fairy's chat).
    Error {
        /// What.
        message: String,
    },
    /// A model attempt failed and the failover starts another.
    Retry {
        /// The attempt that starts (2 for the first retry).
        attempt: u32,
        /// Why the previous attempt failed.
        error: String,
        /// Whether what the failed attempt had streamed was reverted.
        discard: bool,
        /// How long the failover waits before the attempt, in milliseconds.
        #[serde(rename = "waitMs")]
        wait_ms: u64,
    },
    /// The fairy's history was compacted.
    Compaction {
        /// How.
        level: CompactionLevel,
        /// Why.
        reason: CompactionReason,
        /// How many history items were summarised or truncated.
        items: usize,
    },
    /// The tokens of one model call (all of its attempts).
    Usage {
        /// What the call was for.
        purpose: UsagePurpose,
        /// Prompt tokens billed at the normal rate.
        #[serde(rename = "inputTokens")]
        input_tokens: u64,
        /// Generated tokens.
        #[serde(rename = "outputTokens")]
        output_tokens: u64,
        /// Prompt tokens read from the provider's cache (last attempt).
        #[serde(rename = "cacheReadInputTokens")]
        cache_read_input_tokens: u64,
        /// Prompt tokens written to the provider's cache (last attempt).
        #[serde(rename = "cacheCreationInputTokens")]
        cache_creation_input_tokens: u64,
        /// Attempts the call took (1 without a retry).
        attempts: u32,
        /// What the call cost in US dollars, when its model has a price (`--llm-prices`).
        #[serde(rename = "costUsd", skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        /// True when a figure is an estimate: the stream was dropped before the provider's
        /// final usage report, so the tokens were counted from the characters sent and received.
        estimated: bool,
    },
}

/// How a history was compacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompactionLevel {
    /// The oldest items were summarised through the model into one item.
    Summary,
    /// Oversized items were truncated.
    Truncate,
}

/// Why a history was compacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompactionReason {
    /// It outgrew the fairy's history budget.
    Budget,
    /// The provider said the prompt does not fit the model's context.
    ContextOverflow,
}

/// What a model call was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UsagePurpose {
    /// A turn of a request.
    Turn,
    /// Summarising the history.
    Summary,
}

impl AgentEvent {
    /// The `retry` event for a failover attempt that starts after `wait`.
    pub fn retry(
        attempt: u32,
        error: &impl std::fmt::Display,
        discard: bool,
        wait: std::time::Duration,
    ) -> Self {
        AgentEvent::Retry {
            attempt,
            error: error.to_string(),
            discard,
            wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

impl AgentEvent {
    /// A `usage` event for a call that took `attempts` attempts and cost `cost_usd`.
    pub fn usage(
        purpose: UsagePurpose,
        usage: &crate::llm::Usage,
        attempts: u32,
        cost_usd: Option<f64>,
    ) -> Self {
        AgentEvent::Usage {
            purpose,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cache_read_input_tokens: usage.cache_read_input_tokens,
            cache_creation_input_tokens: usage.cache_creation_input_tokens,
            attempts,
            cost_usd,
            estimated: false,
        }
    }

    /// A `usage` event whose figures are (`true`) or are not an estimate; other events as they are.
    pub fn estimated(mut self, estimate: bool) -> Self {
        if let AgentEvent::Usage { estimated, .. } = &mut self {
            *estimated = estimate;
        }
        self
    }

    /// The SSE event name.
    pub fn name(&self) -> &'static str {
        match self {
            AgentEvent::RequestStarted { .. } => "request-started",
            AgentEvent::RequestRejected { .. } => "request-rejected",
            AgentEvent::TurnStarted { .. } => "turn-started",
            AgentEvent::Action { .. } => "action",
            AgentEvent::ActionRejected { .. } => "action-rejected",
            AgentEvent::ModeChanged { .. } => "mode-changed",
            AgentEvent::RequestEnded { .. } => "request-ended",
            AgentEvent::Error { .. } => "error",
            AgentEvent::Retry { .. } => "retry",
            AgentEvent::Compaction { .. } => "compaction",
            AgentEvent::Usage { .. } => "usage",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_events_serialize_with_their_names() {
        let usage = crate::llm::Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Default::default()
        };
        let e = AgentEvent::usage(UsagePurpose::Turn, &usage, 2, None);
        assert_eq!(e.name(), "usage");
        let v = serde_json::to_value(&e).unwrap_or_default();
        assert_eq!(v["type"], "usage");
        assert!(v.get("costUsd").is_none(), "no price, no money figure");
        let priced = AgentEvent::usage(UsagePurpose::Turn, &usage, 1, Some(0.25));
        assert_eq!(
            serde_json::to_value(&priced).unwrap_or_default()["costUsd"],
            0.25
        );
        assert_eq!(
            (v["inputTokens"].as_u64(), v["outputTokens"].as_u64()),
            (Some(10), Some(5))
        );
        assert_eq!(v["purpose"], "turn");
        assert_eq!(v["estimated"], false);
        let cut = serde_json::to_value(e.clone().estimated(true)).unwrap_or_default();
        assert_eq!(cut["estimated"], true);
        let c = AgentEvent::Compaction {
            level: CompactionLevel::Truncate,
            reason: CompactionReason::ContextOverflow,
            items: 3,
        };
        let v = serde_json::to_value(&c).unwrap_or_default();
        assert_eq!(
            (
                v["type"].as_str(),
                v["level"].as_str(),
                v["reason"].as_str()
            ),
            (
                Some("compaction"),
                Some("truncate"),
                Some("context-overflow")
            )
        );
        let r = AgentEvent::Retry {
            attempt: 2,
            error: "x".into(),
            discard: false,
            wait_ms: 0,
        };
        assert_eq!(r.name(), "retry");
        assert_eq!(serde_json::to_value(&r).unwrap_or_default()["waitMs"], 0);
    }
}
