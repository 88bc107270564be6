//! Mock model scripts: the JSON files that say what the mock server answers, in order.
//!
//! Owns: the script format and its validation. Must not do I/O beyond reading the file.
//!
//! ```json
//! {"responses": [
//!   {"fault": {"kind": "http", "status": 429, "body": "{\"error\":{\"message\":\"slow\"}}", "retry_after": "2"}},
//!   {"text": "{\"actions\": []}", "delta_chars": 4, "chunk_size": 1, "delay_ms": 0,
//!    "usage": {"input_tokens": 10, "output_tokens": 5}}
//! ]}
//! ```
//! The n-th request gets `responses[n]`; once they are used up the last one repeats.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::llm::usage::Usage;

/// A scripted sequence of responses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockScript {
    /// Served in request order; the last repeats.
    pub responses: Vec<MockResponse>,
}

/// Answers for the requests whose system prompt contains every one of `when` (for example a
/// fairy's name and its mode), served in order with their own count (the last repeats), so
/// that several fairies of one test get their own scripts whatever order they ask in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockRoute {
    /// Substrings the system prompt must all contain.
    pub when: Vec<String>,
    /// Served in order; the last repeats.
    pub responses: Vec<MockResponse>,
}

impl MockRoute {
    /// Whether a request with this system prompt takes this route.
    pub fn matches(&self, system: &str) -> bool {
        self.when.iter().all(|w| system.contains(w.as_str()))
    }
}

/// One scripted answer, rendered in whichever wire format the request path asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MockResponse {
    /// The model's whole answer text.
    pub text: String,
    /// Characters of text per delta event.
    pub delta_chars: usize,
    /// Bytes per network write (0: the whole body at once).
    pub chunk_size: usize,
    /// Delay before each write, in milliseconds.
    pub delay_ms: u64,
    /// Usage reported by the stream.
    pub usage: Usage,
    /// Thinking text sent before the answer (`reasoning_content` / `thinking_delta`), which
    /// clients must not treat as output.
    pub reasoning: String,
    /// A failure to inject.
    pub fault: Option<Fault>,
    /// Refuse a request that asks for structured output (OpenAI `response_format`, Anthropic
    /// `tools`) with a 400 naming it, as providers without it do; such a refusal does not use
    /// up this response: the request made again without it gets it.
    pub refuse_structured: bool,
}

impl Default for MockResponse {
    fn default() -> Self {
        MockResponse {
            text: String::new(),
            delta_chars: 8,
            chunk_size: 0,
            delay_ms: 0,
            usage: Usage::default(),
            reasoning: String::new(),
            fault: None,
            refuse_structured: false,
        }
    }
}

/// Faults the mock can inject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Refuse with an HTTP status (429, 500, 529, 401, 400 …), a body and maybe `retry-after`.
    Http {
        status: u16,
        #[serde(default)]
        body: String,
        #[serde(default)]
        retry_after: Option<String>,
    },
    /// After `after_chars` characters of text, send the format's error event and end the body.
    ErrorEvent {
        after_chars: usize,
        #[serde(default = "default_error_type")]
        error_type: String,
        #[serde(default = "default_error_message")]
        message: String,
    },
    /// After `after_chars` characters of text, cut the connection (no terminal chunk).
    Cut { after_chars: usize },
    /// After `after_chars` characters of text, send nothing more (until the client leaves).
    Stall { after_chars: usize },
    /// After `after_chars` characters of text, send nothing for `ms` milliseconds, then the
    /// rest (a model thinking in the middle of an answer).
    Pause { after_chars: usize, ms: u64 },
    /// Interleave lines that are not events of the format (comments, unknown fields, unknown
    /// events); a correct client ignores them.
    Garbage,
}

fn default_error_type() -> String {
    "overloaded_error".into()
}

fn default_error_message() -> String {
    "Overloaded".into()
}

/// Errors loading a script.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read script {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// The file is not a valid script.
    #[error("invalid script {path}: {source}")]
    Parse {
        path: String,
        source: serde_json::Error,
    },
    /// The script has no response.
    #[error("script has no responses")]
    Empty,
}

impl MockScript {
    /// Parses and validates a script.
    pub fn from_json(text: &str, path: &str) -> Result<Self, ScriptError> {
        let s: MockScript = serde_json::from_str(text).map_err(|source| ScriptError::Parse {
            path: path.into(),
            source,
        })?;
        if s.responses.is_empty() {
            return Err(ScriptError::Empty);
        }
        Ok(s)
    }

    /// Reads a script file.
    pub fn load(path: &Path) -> Result<Self, ScriptError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::from_json(&text, &shown)
    }

    /// A script that answers every request with `text`.
    pub fn text(text: impl Into<String>) -> Self {
        MockScript {
            responses: vec![MockResponse {
                text: text.into(),
                ..MockResponse::default()
            }],
        }
    }

    /// The response for the `n`-th request (0-based).
    pub fn response(&self, n: usize) -> Option<&MockResponse> {
        self.responses.get(n).or_else(|| self.responses.last())
    }
}
