//! The provider-neutral vocabulary: what a caller asks ([`ModelRequest`]) and what a model
//! streams back ([`ModelEvent`]), plus the [`Model`] trait every provider implements.
//!
//! Owns: these types only. Must not know any wire format.

use std::pin::Pin;
use std::time::Duration;

use futures_util::Stream;
use serde::{Deserialize, Serialize};

use super::error::LlmError;
use super::usage::Usage;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person (or the fairy runtime speaking for them).
    User,
    /// The model's earlier turns.
    Assistant,
}

/// One part of a message: text, or an image (for models that see the canvas).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Part {
    /// Plain text.
    Text { text: String },
    /// A base64-encoded image such as a PNG of the viewport.
    Image { media_type: String, data: String },
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who said it.
    pub role: Role,
    /// Its parts, in order.
    pub parts: Vec<Part>,
}

impl ChatMessage {
    /// A user turn made of one text part.
    pub fn user(text: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::User,
            parts: vec![Part::Text { text: text.into() }],
        }
    }

    /// The concatenated text parts (images skipped).
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                Part::Image { .. } => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

// A fairy's mode (docs/fairies.md "Modes"): the one mode enum, named by the agent (whose
// `agent::modes` gives each its memory level, actions and hooks, in `impl Mode` there) and
// carried typed on a [`ModelRequest`]. It lives here, below the agent, so that the model layer
// can name it without depending on the agent. Serialized kebab-case. Providers that talk to a
// real model ignore it (the model reads its mode in the system prompt); the offline model,
// which cannot read prose, decides by it. (A plain comment: the doc comment below is the
// description `/openapi.json` gives the schema.)
/// Every mode of the seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Waiting for a prompt.
    Idling,
    /// Working alone on a user's request.
    Soloing,
    /// Working alone on one of its solo tasks.
    WorkingSolo,
    /// A project member waiting for its orchestrator.
    StandingBy,
    /// A project member working on its task.
    WorkingDrone,
    /// An orchestrator doing a task itself.
    WorkingOrchestrator,
    /// An orchestrator planning and directing.
    OrchestratingActive,
    /// An orchestrator waiting for tasks to complete.
    OrchestratingWaiting,
    /// One of a duo, planning and directing.
    DuoOrchestratingActive,
    /// One of a duo, waiting for tasks to complete.
    DuoOrchestratingWaiting,
}

/// A place in a request's conversation where a provider may end a cached prefix: after part
/// `part` of message `message`. The prompt builder marks the ends of the blocks that a later
/// call is likely to repeat (the history, the canvas); Anthropic turns them into
/// `cache_control` breakpoints, others ignore them (their caches find prefixes themselves).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachePoint {
    /// Index in [`ModelRequest::messages`].
    pub message: usize,
    /// Index in that message's parts.
    pub part: usize,
}

impl CachePoint {
    /// After part `part` of message `message`.
    pub fn new(message: usize, part: usize) -> Self {
        CachePoint { message, part }
    }
}

/// The JSON schema an answer follows, as a value (for providers that constrain their output
/// to it: `--llm-structured`) and as the compact text a prompt shows.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseSchema {
    /// The schema.
    pub value: std::sync::Arc<serde_json::Value>,
    /// Its compact JSON text.
    pub text: std::sync::Arc<str>,
}

impl ResponseSchema {
    /// The section ending a system prompt: the schema's text when the provider reads it from
    /// the prompt, a pointer to the API's schema when the provider constrains the output.
    pub fn section(&self, constrained: bool) -> String {
        if constrained {
            "## Response schema\nYour answer is constrained to the actions schema the API gives: \
             answer with `{\"actions\": [...]}`."
                .to_owned()
        } else {
            format!("## Response schema\n```json\n{}\n```", self.text)
        }
    }
}

/// Everything a model needs for one completion.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The system prompt (cached by providers that support prompt caching).
    pub system: String,
    /// The conversation, oldest first.
    pub messages: Vec<ChatMessage>,
    /// Most tokens to generate.
    pub max_tokens: u32,
    /// Sampling temperature; omitted for models that reject it.
    pub temperature: Option<f32>,
    /// Text that starts the assistant's answer (e.g. `{"actions": [`), sent only to models whose
    /// capability flag allows it. When sent, it is also streamed back as the first text delta,
    /// so the caller sees the same whole document either way.
    pub prefill: Option<String>,
    /// The mode of the fairy asking, when a fairy's turn asks (not a history summary or a test);
    /// never sent over the wire (see [`Mode`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// Where cached prefixes may end, in order (the system prompt always may).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cache_points: Vec<CachePoint>,
    /// What routes calls sharing a prefix to the same cache (OpenAI's `prompt_cache_key`):
    /// one per fairy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_key: Option<String>,
    /// The schema of the answer: the provider ends the system prompt with its section
    /// ([`ResponseSchema::section`]) and, with structured output, constrains the answer to it.
    #[serde(skip)]
    pub response_schema: Option<ResponseSchema>,
    /// Who pays for the call beside the fairy's room (budgets and usage totals); never sent.
    #[serde(skip)]
    pub billing: Billing,
}

/// Who a call is charged to beside its room: the person whose request it serves and the
/// project the fairy works in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Billing {
    /// The token `sub` of the person who asked.
    pub person: Option<String>,
    /// The project's id.
    pub project: Option<String>,
}

impl ModelRequest {
    /// The system prompt as sent: [`Self::system`] and, when the request has a schema, its
    /// section (`constrained`: the provider passes the schema as structured output).
    pub fn system_text(&self, constrained: bool) -> String {
        match &self.response_schema {
            Some(schema) => format!("{}\n\n{}", self.system, schema.section(constrained)),
            None => self.system.clone(),
        }
    }

    /// Characters of the prompt's text (the system prompt and the messages' text; images not
    /// counted), for the estimate of a cut stream's usage ([`crate::llm::Usage::estimated_after_cut`]).
    pub fn text_chars(&self) -> usize {
        let parts = self.messages.iter().flat_map(|m| m.parts.iter());
        self.system.chars().count()
            + parts
                .map(|p| match p {
                    Part::Text { text } => text.chars().count(),
                    Part::Image { .. } => 0,
                })
                .sum::<usize>()
    }
}

/// What a model stream yields.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// The next piece of the answer's text.
    TextDelta(String),
    /// Cumulative usage of the current attempt so far; a later one replaces an earlier one.
    Usage(Usage),
    /// The current attempt failed and another is starting. When `discard` is true, text of the
    /// failed attempt was already delivered: the caller must revert whatever it did with it,
    /// because the next attempt streams its answer from the start (text is never re-delivered
    /// silently).
    Retry {
        /// The number of the attempt that is starting (2 for the first retry).
        attempt: u32,
        /// Why the previous attempt failed.
        error: LlmError,
        /// Whether text of the failed attempt had reached the caller.
        discard: bool,
        /// How long the failover waits before the next attempt (all profiles cooling).
        wait: Duration,
    },
    /// The answer is complete; no event follows.
    Done {
        /// The provider's stop reason (`end_turn`, `stop`, `max_tokens`, …) when it gave one.
        stop_reason: Option<String>,
    },
}

/// A stream of model events; dropping it cancels the request (the HTTP connection is closed).
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, LlmError>> + Send>>;

/// A language model fairies can think with.
pub trait Model: Send + Sync {
    /// A short name for logs and metrics (`offline`, `anthropic:claude-…`).
    fn name(&self) -> String;

    /// Streams an answer. Nothing is sent until the stream is first polled; dropping the stream
    /// at any moment aborts the request. A successful stream ends with [`ModelEvent::Done`];
    /// a failed one ends with one `Err`.
    fn stream(&self, request: ModelRequest) -> ModelStream;

    /// What `usage` cost in US dollars on this model, when its price is known (a model that
    /// is metered knows its prices; others say nothing).
    fn cost(&self, _usage: &Usage) -> Option<f64> {
        None
    }
}
