//! Structured output (`--llm-structured auto|on|off`): whether a provider is asked to constrain
//! its answer to the response schema, what a refusal of it looks like, and the fallback to the
//! prompt's schema when a provider refuses.
//!
//! Owns the decision and the fallback; the wire formats ([`super::openai`]'s `response_format`,
//! [`super::anthropic`]'s tool) are the providers'. Must not retry anything else (that is
//! [`super::failover`]'s job).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::{StreamExt, stream};

use super::error::LlmError;
use super::types::{ModelRequest, ModelStream};
use crate::config::LlmStructured;

/// The name of the schema (OpenAI `json_schema.name`) and of the Anthropic tool.
pub const SCHEMA_NAME: &str = "fairy_actions";

/// Whether `error` is a provider refusing structured output: a 400 or 422 whose message names
/// what was asked (`response_format`, `json_schema`, `tools`, `tool_choice`).
pub fn is_refusal(error: &LlmError) -> bool {
    let LlmError::BadRequest { status, message } = error else {
        return false;
    };
    let m = message.to_ascii_lowercase();
    matches!(status, 400 | 422)
        && [
            "response_format",
            "json_schema",
            "tools",
            "tool_choice",
            "tool_use",
        ]
        .iter()
        .any(|w| m.contains(w))
}

/// One provider's structured-output setting and what it learnt: a provider that refused once
/// is not asked again (`auto`).
#[derive(Debug)]
pub struct Structured {
    mode: LlmStructured,
    refused: AtomicBool,
}

impl Structured {
    /// The setting `mode`, nothing refused yet.
    pub fn new(mode: LlmStructured) -> Arc<Self> {
        Arc::new(Structured {
            mode,
            refused: AtomicBool::new(false),
        })
    }

    /// Whether `request` is sent with structured output: it has a schema, the mode asks for
    /// it, and (in `auto`) the provider has not refused it.
    pub fn wanted(&self, request: &ModelRequest) -> bool {
        request.response_schema.is_some()
            && match self.mode {
                LlmStructured::Off => false,
                LlmStructured::On => true,
                LlmStructured::Auto => !self.refused.load(Ordering::Relaxed),
            }
    }

    /// Streams `first` (a structured request); when it fails at once with a refusal of
    /// structured output in `auto`, notes it (a log line; the provider is not asked again)
    /// and streams `plain()` (the same request with the prompt's schema) instead.
    pub fn with_fallback(
        self: &Arc<Self>,
        provider: String,
        first: ModelStream,
        plain: impl FnOnce() -> ModelStream + Send + 'static,
    ) -> ModelStream {
        if self.mode != LlmStructured::Auto {
            return first;
        }
        let this = self.clone();
        stream::once(async move {
            let mut first = first;
            match first.next().await {
                Some(Err(error)) if is_refusal(&error) => {
                    this.refused.store(true, Ordering::Relaxed);
                    tracing::warn!(
                        model = %provider,
                        %error,
                        "the provider refused structured output: falling back to the response schema in the prompt"
                    );
                    plain()
                }
                Some(item) => stream::iter([item]).chain(first).boxed(),
                None => stream::empty().boxed(),
            }
        })
        .flatten()
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_what_was_asked() {
        let bad = |status, message: &str| LlmError::BadRequest {
            status,
            message: message.into(),
        };
        assert!(is_refusal(&bad(
            400,
            "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model."
        )));
        assert!(is_refusal(&bad(
            400,
            "tools: Extra inputs are not permitted"
        )));
        assert!(is_refusal(&bad(422, "unknown field `tool_choice`")));
        assert!(!is_refusal(&bad(400, "max_tokens: must be at most 8192")));
        assert!(!is_refusal(&LlmError::Overloaded {
            status: 500,
            message: "response_format".into(),
            retry_after: None
        }));
    }

    #[test]
    fn the_mode_decides_and_auto_learns() {
        use crate::llm::types::ResponseSchema;
        let with = ModelRequest {
            response_schema: Some(ResponseSchema {
                value: Arc::new(serde_json::json!({"type": "object"})),
                text: "{\"type\":\"object\"}".into(),
            }),
            ..ModelRequest::default()
        };
        let without = ModelRequest::default();
        let auto = Structured::new(LlmStructured::Auto);
        assert!(auto.wanted(&with) && !auto.wanted(&without));
        auto.refused.store(true, Ordering::Relaxed);
        assert!(!auto.wanted(&with));
        assert!(Structured::new(LlmStructured::On).wanted(&with));
        assert!(!Structured::new(LlmStructured::Off).wanted(&with));
    }
}
