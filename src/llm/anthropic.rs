//! The Anthropic Messages API: request body, per-model capabilities, and the SSE decoder.
//!
//! Owns: the Anthropic wire format (`POST {base}/v1/messages`, `x-api-key`,
//! `anthropic-version: 2023-06-01`, `stream: true`). Must not retry (see [`super::failover`]).

use std::sync::Arc;
use std::time::Duration;

use eventsource_stream::Event;
use serde_json::{Value, json};

use super::error::LlmError;
use super::failover::{Profile, Provider};
use super::sse::{Decoder, Timeouts, http_stream, json_data};
use super::structured::{SCHEMA_NAME, Structured};
use super::types::{ModelEvent, ModelRequest, ModelStream, Part, Role};
use super::usage::Usage;
use crate::config::{LlmCacheTtl, LlmStructured};

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

/// Cache breakpoints a request may carry (the API's limit).
pub const MAX_CACHE_BREAKPOINTS: usize = 4;

/// The `cache_control` of a breakpoint with `ttl`.
fn cache_control(ttl: LlmCacheTtl) -> Value {
    match ttl {
        LlmCacheTtl::FiveMinutes => json!({"type": "ephemeral"}),
        LlmCacheTtl::OneHour => json!({"type": "ephemeral", "ttl": "1h"}),
    }
}

/// Builds the JSON body of a streaming Messages request: a cache breakpoint ends the system
/// prompt and each of the request's [`ModelRequest::cache_points`] (up to
/// [`MAX_CACHE_BREAKPOINTS`] in all, the first ones kept), each written with `ttl`.
/// `structured`: the request's schema is the input of a tool the model must call (its input,
/// `{"actions": [...]}`, streams as `input_json_delta`); no prefill then.
pub fn request_body(
    model: &str,
    request: &ModelRequest,
    ttl: LlmCacheTtl,
    structured: bool,
) -> Value {
    let structured = structured && request.response_schema.is_some();
    let mut messages: Vec<Value> = request
        .messages
        .iter()
        .map(|m| {
            let content: Vec<Value> = m.parts.iter().map(part_json).collect();
            json!({"role": role(m.role), "content": content})
        })
        .collect();
    let mut placed = 1; // the system prompt's
    for point in &request.cache_points {
        if placed >= MAX_CACHE_BREAKPOINTS {
            break;
        }
        let block = messages
            .get_mut(point.message)
            .and_then(|m| m.get_mut("content"))
            .and_then(|c| c.get_mut(point.part))
            .and_then(Value::as_object_mut);
        if let Some(block) = block
            && !block.contains_key("cache_control")
        {
            block.insert("cache_control".into(), cache_control(ttl));
            placed += 1;
        }
    }
    let prefill = prefill_used(model, request).filter(|_| !structured);
    if let Some(p) = prefill {
        messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": p}]}));
    }
    let mut body = json!({
        "model": model,
        "max_tokens": request.max_tokens.max(1),
        "stream": true,
        "system": [{"type": "text", "text": request.system_text(structured), "cache_control": cache_control(ttl)}],
        "messages": messages,
    });
    if let (Some(t), Some(obj)) = (request.temperature, body.as_object_mut()) {
        obj.insert("temperature".into(), json!(t));
    }
    if let (true, Some(schema), Some(obj)) =
        (structured, &request.response_schema, body.as_object_mut())
    {
        obj.insert(
            "tools".into(),
            json!([{"name": SCHEMA_NAME,
                    "description": "The actions to take, in order: call it once with all of them.",
                    "input_schema": *schema.value}]),
        );
        obj.insert(
            "tool_choice".into(),
            json!({"type": "tool", "name": SCHEMA_NAME}),
        );
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
            // Structured output: the tool's input, streamed as JSON text like an answer's.
            "content_block_delta"
                if data.pointer("/delta/type").and_then(Value::as_str)
                    == Some("input_json_delta") =>
            {
                let json = data
                    .pointer("/delta/partial_json")
                    .and_then(Value::as_str)
                    .ok_or_else(|| LlmError::Protocol("input_json_delta without json".into()))?;
                if !json.is_empty() {
                    out.push(ModelEvent::TextDelta(json.to_owned()));
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
    timeouts: Timeouts,
    cache_ttl: LlmCacheTtl,
    structured: Arc<Structured>,
}

impl AnthropicProvider {
    /// A provider for `model`; `idle` bounds every wait for a byte.
    pub fn new(http: reqwest::Client, model: impl Into<String>, idle: Duration) -> Self {
        AnthropicProvider {
            http,
            model: model.into(),
            timeouts: Timeouts::idle(idle),
            cache_ttl: LlmCacheTtl::FiveMinutes,
            structured: Structured::new(LlmStructured::Auto),
        }
    }

    /// The same provider waiting up to `first_byte` for the provider's first byte
    /// (`--llm-first-byte-timeout`); the idle bound stays.
    pub fn with_first_byte_timeout(mut self, first_byte: Duration) -> Self {
        self.timeouts.first_byte = first_byte;
        self
    }

    /// The same provider with structured output as `mode` says (`--llm-structured`).
    pub fn with_structured(mut self, mode: LlmStructured) -> Self {
        self.structured = Structured::new(mode);
        self
    }

    fn send(&self, profile: &Profile, request: &ModelRequest, structured: bool) -> ModelStream {
        let url = format!("{}/v1/messages", profile.base_url);
        let mut rb = self
            .http
            .post(url)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .header("accept", "text/event-stream")
            .json(&request_body(
                &self.model,
                request,
                self.cache_ttl,
                structured,
            ));
        if let Some(key) = &profile.api_key {
            rb = rb.header("x-api-key", key);
        }
        let prelude = prefill_used(&self.model, request)
            .filter(|_| !structured)
            .map(|p| vec![ModelEvent::TextDelta(p.to_owned())])
            .unwrap_or_default();
        http_stream(rb, AnthropicDecoder::default(), self.timeouts, prelude)
    }

    /// The same provider writing its cache entries with `ttl` (`--llm-cache-ttl`).
    pub fn with_cache_ttl(mut self, ttl: LlmCacheTtl) -> Self {
        self.cache_ttl = ttl;
        self
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> String {
        format!("anthropic:{}", self.model)
    }

    fn attempt(&self, profile: &Profile, request: &ModelRequest) -> ModelStream {
        let structured = self.structured.wanted(request);
        if !structured {
            return self.send(profile, request, false);
        }
        let first = self.send(profile, request, true);
        let (this, profile, request) = (self.clone(), profile.clone(), request.clone());
        self.structured.with_fallback(self.name(), first, move || {
            this.send(&profile, &request, false)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::types::{ChatMessage, Mode};

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
    fn a_tools_streamed_input_is_the_answers_text() {
        let out = run(&[
            ev("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01","name":"fairy_actions","input":{}}}"#),
            ev("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}"#),
            ev("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"actions\": [{\"_type\""}}"#),
            ev("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":": \"think\"}]}"}}"#),
        ])
        .unwrap();
        assert_eq!(
            out,
            vec![
                ModelEvent::TextDelta("{\"actions\": [{\"_type\"".into()),
                ModelEvent::TextDelta(": \"think\"}]}".into()),
            ]
        );
    }

    #[test]
    fn structured_bodies_carry_the_schema_as_a_forced_tool_without_prefill() {
        let schema = json!({"type": "object", "properties": {"actions": {"type": "array"}}});
        let req = ModelRequest {
            system: "sys".into(),
            messages: vec![ChatMessage::user("hi")],
            max_tokens: 100,
            prefill: Some("{\"actions\": [".into()),
            response_schema: Some(crate::llm::types::ResponseSchema {
                value: Arc::new(schema.clone()),
                text: schema.to_string().into(),
            }),
            ..ModelRequest::default()
        };
        let b = request_body("claude-sonnet-4-5", &req, LlmCacheTtl::FiveMinutes, true);
        assert_eq!(b["tools"][0]["name"], "fairy_actions");
        assert_eq!(b["tools"][0]["input_schema"], schema);
        assert_eq!(
            b["tool_choice"],
            json!({"type": "tool", "name": "fairy_actions"})
        );
        assert_eq!(
            b["messages"].as_array().map(Vec::len),
            Some(1),
            "no prefill"
        );
        let plain = request_body("claude-sonnet-4-5", &req, LlmCacheTtl::FiveMinutes, false);
        assert!(plain.get("tools").is_none() && plain.get("tool_choice").is_none());
        assert_eq!(plain["messages"].as_array().map(Vec::len), Some(2));
        let system = plain["system"][0]["text"].as_str().unwrap_or_default();
        assert!(
            system.starts_with("sys\n\n## Response schema\n```json\n"),
            "{system}"
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
            mode: Some(Mode::WorkingDrone),
            ..ModelRequest::default()
        };
        let old = request_body(
            "claude-3-5-sonnet-latest",
            &req,
            LlmCacheTtl::FiveMinutes,
            false,
        );
        // The fairy's mode is for the offline model; the provider never sends it.
        assert!(!old.to_string().contains("working-drone"), "{old}");
        assert_eq!(old["system"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(old["stream"], true);
        assert_eq!(old["messages"].as_array().map(Vec::len), Some(2));
        assert_eq!(old["messages"][1]["role"], "assistant");
        let new = request_body("claude-opus-4-6", &req, LlmCacheTtl::FiveMinutes, false);
        assert_eq!(new["messages"].as_array().map(Vec::len), Some(1));
        assert_eq!(new["temperature"], 0.5);
    }

    #[test]
    fn cache_points_become_at_most_four_breakpoints_with_the_ttl() {
        use crate::llm::types::CachePoint;
        let two = ChatMessage {
            role: Role::User,
            parts: vec![
                Part::Text { text: "a".into() },
                Part::Text { text: "b".into() },
            ],
        };
        let req = ModelRequest {
            system: "sys".into(),
            messages: vec![two.clone(), ChatMessage::user("ack"), two],
            max_tokens: 10,
            cache_points: vec![
                CachePoint::new(0, 0),
                CachePoint::new(0, 0), // twice the same: one breakpoint
                CachePoint::new(9, 0), // no such message: none
                CachePoint::new(0, 1),
                CachePoint::new(2, 0),
                CachePoint::new(2, 1), // a fifth: over the limit
            ],
            ..ModelRequest::default()
        };
        let body = request_body("claude-sonnet-4-5", &req, LlmCacheTtl::OneHour, false);
        let marked: Vec<(usize, usize)> = (0..3)
            .flat_map(|m| (0..2).map(move |p| (m, p)))
            .filter(|(m, p)| {
                body["messages"][*m]["content"][*p]
                    .get("cache_control")
                    .is_some()
            })
            .collect();
        assert_eq!(marked, [(0, 0), (0, 1), (2, 0)]);
        let one_hour = json!({"type": "ephemeral", "ttl": "1h"});
        assert_eq!(body["system"][0]["cache_control"], one_hour);
        assert_eq!(body["messages"][2]["content"][0]["cache_control"], one_hour);
        let five = request_body("claude-sonnet-4-5", &req, LlmCacheTtl::FiveMinutes, false);
        assert_eq!(
            five["messages"][0]["content"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
    }
}
