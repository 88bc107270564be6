//! The Anthropic Messages API: request body, per-model capabilities, and the SSE decoder.
//!
//! Owns: the Anthropic wire format (`POST {base}/v1/messages`, `x-api-key`,
//! `anthropic-version: 2023-06-01`, `stream: true`). Must not retry (see [`super::failover`]).

use std::time::Duration;

use eventsource_stream::Event;
use serde_json::{Value, json};

use super::error::LlmError;
use super::failover::{Profile, Provider};
use super::sse::{Decoder, http_stream, json_data};
use super::types::{ModelEvent, ModelRequest, ModelStream, Part, Role};
use super::usage::Usage;

/// The API version header value this client speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// Default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// Default model when `--llm-model` is not given.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";

/// Whether a Claude model accepts an assistant prefill. Only models known to accept it get
/// one: newer models answer a prefill with HTTP 400, and prompts work without it.
pub fn supports_prefill(model: &str) -> bool {
    const PREFILL_OK: &[&str] = &[
        "claude-3",
        "claude-sonnet-4-0",
        "claude-sonnet-4-2025",
        "claude-opus-4-0",
        "claude-opus-4-2025",
        "claude-opus-4-1",
        "claude-sonnet-4-5",
        "claude-haiku-4-5",
    ];
    PREFILL_OK.iter().any(|p| model.starts_with(p))
}

/// Builds the JSON body of a streaming Messages request.
pub fn request_body(model: &str, request: &ModelRequest) -> Value {
    let mut messages: Vec<Value> = request
        .messages
        .iter()
        .map(|m| {
            let content: Vec<Value> = m.parts.iter().map(part_json).collect();
            json!({"role": role(m.role), "content": content})
        })
        .collect();
    let prefill = prefill_used(model, request);
    if let Some(p) = prefill {
        messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": p}]}));
    }
    let mut body = json!({
        "model": model,
        "max_tokens": request.max_tokens.max(1),
        "stream": true,
        "system": [{"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}],
        "messages": messages,
    });
    if let (Some(t), Some(obj)) = (request.temperature, body.as_object_mut()) {
        obj.insert("temperature".into(), json!(t));
    }
    body
}

/// The prefill actually sent: the request's, when the model accepts one.
fn prefill_used<'a>(model: &str, request: &'a ModelRequest) -> Option<&'a str> {
    request
        .prefill
        .as_deref()
        .filter(|p| !p.is_empty() && supports_prefill(model))
}

fn role(r: Role) -> &'static str {
    match r {
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

fn part_json(p: &Part) -> Value {
    match p {
        Part::Text { text } => json!({"type": "text", "text": text}),
        Part::Image { media_type, data } => json!({
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }),
    }
}

/// Decodes Anthropic's stream events into [`ModelEvent`]s.
#[derive(Debug, Default)]
pub struct AnthropicDecoder {
    usage: Usage,
    stop_reason: Option<String>,
}

fn usage_of(v: Option<&Value>) -> Usage {
    let n = |k: &str| {
        v.and_then(|u| u.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    Usage {
        input_tokens: n("input_tokens"),
        output_tokens: n("output_tokens"),
        cache_read_input_tokens: n("cache_read_input_tokens"),
        cache_creation_input_tokens: n("cache_creation_input_tokens"),
    }
}

impl Decoder for AnthropicDecoder {
    fn on_event(&mut self, event: &Event, out: &mut Vec<ModelEvent>) -> Result<(), LlmError> {
        const KNOWN: &[&str] = &[
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
            "ping",
            "error",
        ];
        // The `event:` line names the event; without it, the data's `type` does.
        let named = KNOWN.contains(&event.event.as_str());
        if !named && event.event != "message" {
            return Ok(()); // unknown event: ignored, as the API documents
        }
        let data = match json_data(event) {
            Ok(d) => d,
            Err(_) if !named => return Ok(()),
            Err(e) => return Err(e),
        };
        let kind = if named {
            event.event.as_str()
        } else {
            data.get("type").and_then(Value::as_str).unwrap_or("")
        };
        match kind {
            "message_start" => {
                self.usage
                    .merge_from(&usage_of(data.pointer("/message/usage")));
                out.push(ModelEvent::Usage(self.usage));
            }
            "content_block_start" => {
                let text = data.pointer("/content_block/text").and_then(Value::as_str);
                let is_text =
                    data.pointer("/content_block/type").and_then(Value::as_str) == Some("text");
                if let (true, Some(t)) = (is_text, text)
                    && !t.is_empty()
                {
                    out.push(ModelEvent::TextDelta(t.to_owned()));
                }
            }
            "content_block_delta"
                if data.pointer("/delta/type").and_then(Value::as_str) == Some("text_delta") =>
            {
                let text = data
                    .pointer("/delta/text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| LlmError::Protocol("text_delta without text".into()))?;
                if !text.is_empty() {
                    out.push(ModelEvent::TextDelta(text.to_owned()));
                }
            }
            "message_delta" => {
                if let Some(r) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(r.to_owned());
                }
                self.usage.merge_from(&usage_of(data.get("usage")));
                out.push(ModelEvent::Usage(self.usage));
            }
            "message_stop" => out.push(ModelEvent::Done {
                stop_reason: self.stop_reason.take(),
            }),
            "error" => {
                let s = |p: &str| {
                    data.pointer(p)
                        .and_then(Value::as_str)
                        .unwrap_or("unknown")
                        .to_owned()
                };
                return Err(LlmError::StreamError {
                    kind: s("/error/type"),
                    message: s("/error/message"),
                });
            }
            _ => {}
        }
        Ok(())
    }
}

/// One Anthropic model behind any number of profiles (keys/endpoints).
#[derive(Debug, Clone)]
pub struct AnthropicProvider {
    http: reqwest::Client,
    model: String,
    idle: Duration,
}

impl AnthropicProvider {
    /// A provider for `model`; `idle` bounds every wait for a byte.
    pub fn new(http: reqwest::Client, model: impl Into<String>, idle: Duration) -> Self {
        AnthropicProvider {
            http,
            model: model.into(),
            idle,
        }
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> String {
        format!("anthropic:{}", self.model)
    }

    fn attempt(&self, profile: &Profile, request: &ModelRequest) -> ModelStream {
        let url = format!("{}/v1/messages", profile.base_url);
        let mut rb = self
            .http
            .post(url)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .header("accept", "text/event-stream")
            .json(&request_body(&self.model, request));
        if let Some(key) = &profile.api_key {
            rb = rb.header("x-api-key", key);
        }
        let prelude = prefill_used(&self.model, request)
            .map(|p| vec![ModelEvent::TextDelta(p.to_owned())])
            .unwrap_or_default();
        http_stream(rb, AnthropicDecoder::default(), self.idle, prelude)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::types::{AgentMode, ChatMessage};

    fn ev(name: &str, data: &str) -> Event {
        Event {
            event: name.into(),
            data: data.into(),
            ..Event::default()
        }
    }

    fn run(events: &[Event]) -> Result<Vec<ModelEvent>, LlmError> {
        let mut d = AnthropicDecoder::default();
        let mut out = Vec::new();
        for e in events {
            d.on_event(e, &mut out)?;
        }
        Ok(out)
    }

    #[test]
    fn decodes_text_usage_and_stop() {
        let out = run(&[
            ev("message_start", r#"{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":5}}}"#),
            ev("ping", r#"{"type":"ping"}"#),
            ev("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#),
            ev("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"{\"a\""}}"#),
            ev("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#),
            ev("future_event", "not even json"),
            ev("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
            ev("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}"#),
            ev("message_stop", r#"{"type":"message_stop"}"#),
        ])
        .unwrap();
        let usage = Usage {
            input_tokens: 10,
            output_tokens: 7,
            cache_read_input_tokens: 5,
            cache_creation_input_tokens: 0,
        };
        assert_eq!(out[1], ModelEvent::TextDelta("{\"a\"".into()));
        assert_eq!(out[2], ModelEvent::Usage(usage));
        assert_eq!(
            out[3],
            ModelEvent::Done {
                stop_reason: Some("end_turn".into())
            }
        );
    }

    #[test]
    fn error_event_is_an_error() {
        let e = run(&[ev(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )])
        .unwrap_err();
        assert_eq!(
            e,
            LlmError::StreamError {
                kind: "overloaded_error".into(),
                message: "Overloaded".into()
            }
        );
    }

    #[test]
    fn bad_json_in_known_event_is_protocol_error() {
        let e = run(&[ev("content_block_delta", "{oops")]).unwrap_err();
        assert!(matches!(e, LlmError::Protocol(_)));
    }

    #[test]
    fn body_has_cached_system_and_prefill_only_when_allowed() {
        let req = ModelRequest {
            system: "sys".into(),
            messages: vec![ChatMessage::user("hi")],
            max_tokens: 100,
            temperature: Some(0.5),
            prefill: Some("{\"actions\": [".into()),
            mode: Some(AgentMode::WorkingDrone),
        };
        let old = request_body("claude-3-5-sonnet-latest", &req);
        // The fairy's mode is for the offline model; the provider never sends it.
        assert!(!old.to_string().contains("working-drone"), "{old}");
        assert_eq!(old["system"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(old["stream"], true);
        assert_eq!(old["messages"].as_array().map(Vec::len), Some(2));
        assert_eq!(old["messages"][1]["role"], "assistant");
        let new = request_body("claude-opus-4-6", &req);
        assert_eq!(new["messages"].as_array().map(Vec::len), Some(1));
        assert_eq!(new["temperature"], 0.5);
    }
}
