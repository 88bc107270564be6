//! OpenAI-compatible chat completions (OpenAI, Ollama, llama.cpp server, vLLM): request body,
//! per-model capabilities, and the SSE decoder.
//!
//! Owns: that wire format (`POST {base}/v1/chat/completions`, `stream: true`,
//! `stream_options.include_usage`, `data: [DONE]`). Must not retry (see [`super::failover`]).

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
use crate::config::LlmStructured;

/// Default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com";
/// Default model when `--llm-model` is not given.
pub const DEFAULT_MODEL: &str = "gpt-4.1-mini";

/// Reasoning models (`o1`, `o3`, `o4-mini`, `gpt-5…`) reject `temperature` and `max_tokens`.
pub fn is_reasoning_model(model: &str) -> bool {
    let m = model.rsplit('/').next().unwrap_or(model);
    ["o1", "o3", "o4", "gpt-5"].iter().any(|p| m.starts_with(p))
}

/// Builds the JSON body of a streaming chat-completions request. Prefill is never sent:
/// chat-completions servers treat a trailing assistant turn as history, not as a prefix.
/// `structured`: the request's schema goes in `response_format` (a `json_schema`, not strict:
/// the actions' schema has optional fields) and the system prompt only points to it.
pub fn request_body(model: &str, request: &ModelRequest, structured: bool) -> Value {
    let structured = structured && request.response_schema.is_some();
    let mut messages = vec![json!({"role": "system", "content": request.system_text(structured)})];
    for m in &request.messages {
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let has_image = m.parts.iter().any(|p| matches!(p, Part::Image { .. }));
        // Text-only turns as a plain string: the widest-supported form (llama.cpp, old vLLM).
        let content = if has_image {
            Value::Array(m.parts.iter().map(part_json).collect())
        } else {
            Value::String(m.text())
        };
        messages.push(json!({"role": role, "content": content}));
    }
    let reasoning = is_reasoning_model(model);
    let mut body = json!({
        "model": model,
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": messages,
    });
    if let Some(obj) = body.as_object_mut() {
        let max_key = if reasoning {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        obj.insert(max_key.into(), json!(request.max_tokens.max(1)));
        if let (Some(t), false) = (request.temperature, reasoning) {
            obj.insert("temperature".into(), json!(t));
        }
        // Calls of one fairy go to the same cache (OpenAI routes by it; others ignore it).
        if let Some(key) = &request.cache_key {
            obj.insert("prompt_cache_key".into(), json!(key));
        }
        if let (true, Some(schema)) = (structured, &request.response_schema) {
            obj.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {
                    "name": SCHEMA_NAME, "strict": false, "schema": *schema.value}}),
            );
        }
    }
    body
}

fn part_json(p: &Part) -> Value {
    match p {
        Part::Text { text } => json!({"type": "text", "text": text}),
        Part::Image { media_type, data } => json!({
            "type": "image_url",
            "image_url": {"url": format!("data:{media_type};base64,{data}")},
        }),
    }
}

/// Decodes chat-completion chunks into [`ModelEvent`]s.
#[derive(Debug, Default)]
pub struct OpenAiDecoder {
    stop_reason: Option<String>,
}

/// OpenAI counts cached tokens inside `prompt_tokens` (`prompt_tokens_details.cached_tokens`;
/// DeepSeek: `prompt_cache_hit_tokens`); [`Usage::input_tokens`] excludes them. Writing to
/// these caches is not billed apart, so no cache writes are reported.
fn usage_of(u: &Value) -> Usage {
    let n = |p: &str| u.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let cached = u
        .pointer("/prompt_tokens_details/cached_tokens")
        .and_then(Value::as_u64)
        .unwrap_or_else(|| n("/prompt_cache_hit_tokens"));
    Usage {
        input_tokens: n("/prompt_tokens").saturating_sub(cached),
        output_tokens: n("/completion_tokens"),
        cache_read_input_tokens: cached,
        cache_creation_input_tokens: 0,
    }
}

impl Decoder for OpenAiDecoder {
    fn on_event(&mut self, event: &Event, out: &mut Vec<ModelEvent>) -> Result<(), LlmError> {
        if event.event != "message" && event.event != "error" {
            return Ok(()); // named events are not part of this format
        }
        if event.data.trim() == "[DONE]" {
            out.push(ModelEvent::Done {
                stop_reason: self.stop_reason.take(),
            });
            return Ok(());
        }
        let data = json_data(event)?;
        if let Some(err) = data.get("error").filter(|e| !e.is_null()) {
            let text = |v: Option<&Value>| {
                v.filter(|v| !v.is_null()).map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
            };
            let kind = text(err.get("type"))
                .or_else(|| text(err.get("code")))
                .unwrap_or_else(|| "error".into());
            let message = match err.as_str() {
                Some(s) => s.to_owned(),
                None => text(err.get("message")).unwrap_or_else(|| "unknown".into()),
            };
            return Err(LlmError::StreamError { kind, message });
        }
        let choice = data.get("choices").and_then(|c| c.get(0));
        if let Some(choice) = choice {
            // `reasoning_content` (vLLM, llama.cpp, DeepSeek) is thinking, not output.
            if let Some(text) = choice.pointer("/delta/content").and_then(Value::as_str)
                && !text.is_empty()
            {
                out.push(ModelEvent::TextDelta(text.to_owned()));
            }
            if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                self.stop_reason = Some(r.to_owned());
            }
        }
        if let Some(u) = data.get("usage").filter(|u| u.is_object()) {
            out.push(ModelEvent::Usage(usage_of(u)));
        }
        Ok(())
    }
}

/// One OpenAI-compatible model behind any number of profiles (keys/endpoints).
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    http: reqwest::Client,
    model: String,
    timeouts: Timeouts,
    structured: Arc<Structured>,
}

impl OpenAiProvider {
    /// A provider for `model`; `idle` bounds every wait for a byte. Structured output is
    /// asked for (`auto`) unless [`Self::with_structured`] says otherwise.
    pub fn new(http: reqwest::Client, model: impl Into<String>, idle: Duration) -> Self {
        OpenAiProvider {
            http,
            model: model.into(),
            timeouts: Timeouts::idle(idle),
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
        let url = format!("{}/v1/chat/completions", profile.base_url);
        let mut rb = self
            .http
            .post(url)
            .header("accept", "text/event-stream")
            .json(&request_body(&self.model, request, structured));
        if let Some(key) = &profile.api_key {
            rb = rb.bearer_auth(key);
        }
        http_stream(rb, OpenAiDecoder::default(), self.timeouts, Vec::new())
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> String {
        format!("openai:{}", self.model)
    }

    fn attempt(&self, profile: &Profile, request: &ModelRequest) -> ModelStream {
        if !self.structured.wanted(request) {
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

    fn data(d: &str) -> Event {
        Event {
            event: "message".into(),
            data: d.into(),
            ..Event::default()
        }
    }

    fn run(events: &[Event]) -> Result<Vec<ModelEvent>, LlmError> {
        let mut d = OpenAiDecoder::default();
        let mut out = Vec::new();
        for e in events {
            d.on_event(e, &mut out)?;
        }
        Ok(out)
    }

    #[test]
    fn decodes_content_null_reasoning_usage_and_done() {
        let out = run(&[
            data(r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#),
            data(r#"{"choices":[{"index":0,"delta":{"reasoning_content":"think"}}]}"#),
            data(r#"{"choices":[{"index":0,"delta":{"content":"hi"}}]}"#),
            data(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#),
            data(r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}"#),
            data("[DONE]"),
        ])
        .unwrap();
        assert_eq!(
            out,
            vec![
                ModelEvent::TextDelta("hi".into()),
                ModelEvent::Usage(Usage {
                    input_tokens: 10,
                    output_tokens: 3,
                    cache_read_input_tokens: 2,
                    cache_creation_input_tokens: 0
                }),
                ModelEvent::Done {
                    stop_reason: Some("stop".into())
                },
            ]
        );
    }

    #[test]
    fn error_object_mid_stream() {
        let e = run(&[data(
            r#"{"error":{"message":"boom","type":"server_error"}}"#,
        )])
        .unwrap_err();
        assert_eq!(
            e,
            LlmError::StreamError {
                kind: "server_error".into(),
                message: "boom".into()
            }
        );
        let e = run(&[data(r#"{"error":"plain"}"#)]).unwrap_err();
        assert!(matches!(e, LlmError::StreamError { message, .. } if message == "plain"));
        assert!(matches!(
            run(&[data("garbage")]),
            Err(LlmError::Protocol(_))
        ));
    }

    #[test]
    fn reasoning_models_get_no_temperature() {
        let req = ModelRequest {
            system: "s".into(),
            messages: vec![ChatMessage::user("u")],
            max_tokens: 50,
            temperature: Some(0.2),
            prefill: Some("{".into()),
            mode: Some(Mode::Soloing),
            ..ModelRequest::default()
        };
        let b = request_body("o3-mini", &req, false);
        // The fairy's mode is for the offline model; the provider never sends it.
        assert!(!b.to_string().contains("soloing"), "{b}");
        assert!(b.get("temperature").is_none());
        assert_eq!(b["max_completion_tokens"], 50);
        let b = request_body("llama3.1:8b", &req, false);
        assert_eq!(b["max_tokens"], 50);
        assert!(b.get("temperature").is_some());
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert_eq!(b["messages"][1]["content"], "u");
        assert_eq!(b["messages"].as_array().map(Vec::len), Some(2));
        assert!(b.get("prompt_cache_key").is_none());
        let keyed = ModelRequest {
            cache_key: Some("fairy-f-1".into()),
            ..req
        };
        assert_eq!(
            request_body("gpt-4.1-mini", &keyed, false)["prompt_cache_key"],
            "fairy-f-1"
        );
        // Structured: the schema in `response_format`, the prompt pointing to it.
        let schema = json!({"type": "object", "properties": {"actions": {"type": "array"}}});
        let with_schema = ModelRequest {
            response_schema: Some(crate::llm::types::ResponseSchema {
                value: Arc::new(schema.clone()),
                text: schema.to_string().into(),
            }),
            ..keyed
        };
        let b = request_body("gpt-4.1-mini", &with_schema, true);
        assert_eq!(
            b["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "fairy_actions", "strict": false, "schema": schema}})
        );
        let system = b["messages"][0]["content"].as_str().unwrap_or_default();
        assert!(
            system.ends_with("answer with `{\"actions\": [...]}`."),
            "{system}"
        );
        let b = request_body("gpt-4.1-mini", &with_schema, false);
        assert!(b.get("response_format").is_none());
        let system = b["messages"][0]["content"].as_str().unwrap_or_default();
        assert!(
            system.ends_with(&format!("```json\n{schema}\n```")),
            "{system}"
        );
    }
}
