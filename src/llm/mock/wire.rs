//! Renders a scripted [`MockResponse`] as the bytes a real provider would send: Anthropic
//! Messages SSE or OpenAI chat-completion chunks, with faults placed at a character offset.
//!
//! Owns: the server side of both wire formats (pure; also used by the offline model so its
//! answers travel the same parsing path as a real provider's). Must not do I/O.

use serde_json::{Value, json};

use super::script::{Fault, MockResponse};

/// Which wire format a request asked for (by its path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFormat {
    /// `POST /v1/messages`.
    Anthropic,
    /// `POST /v1/chat/completions`.
    OpenAi,
}

/// A piece of a scripted body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// Bytes to send.
    Bytes(Vec<u8>),
    /// Cut the connection here.
    Cut,
    /// Send nothing more, without closing.
    Stall,
    /// Send nothing for this many milliseconds, then go on.
    Pause(u64),
}

/// Garbage lines that are valid SSE but no event of either format: a comment, a field-less
/// line, an unknown named event with junk data, a stray id.
const GARBAGE: &str = ": keep-alive comment\nthis line is not an sse field\n\nevent: mystery_event\ndata: {not json at all\n\nid: 42\n\n";

/// The whole body of `resp` in `format`, split where faults go.
pub fn render(format: WireFormat, resp: &MockResponse, model: &str) -> Vec<Segment> {
    render_with(format, resp, model, None)
}

/// [`render`], with the answer as the input of the tool `tool` in Anthropic's format (a
/// `tool_use` block streamed as `input_json_delta`), as a model forced to call it answers.
pub fn render_tool(resp: &MockResponse, model: &str, tool: &str) -> Vec<Segment> {
    render_with(WireFormat::Anthropic, resp, model, Some(tool))
}

fn render_with(
    format: WireFormat,
    resp: &MockResponse,
    model: &str,
    tool: Option<&str>,
) -> Vec<Segment> {
    let mut w = Writer {
        format,
        garbage: matches!(resp.fault, Some(Fault::Garbage)),
        tool: tool.map(str::to_owned),
        out: Vec::new(),
        buf: String::new(),
    };
    w.start(resp, model);
    let split_at = match &resp.fault {
        Some(Fault::ErrorEvent { after_chars, .. })
        | Some(Fault::Cut { after_chars })
        | Some(Fault::Stall { after_chars })
        | Some(Fault::Pause { after_chars, .. }) => Some(*after_chars),
        _ => None,
    };
    let chars: Vec<char> = resp.text.chars().collect();
    let cut = split_at.unwrap_or(chars.len()).min(chars.len());
    let (head, tail) = chars.split_at(cut);
    w.deltas(head, resp.delta_chars);
    match &resp.fault {
        Some(Fault::ErrorEvent {
            error_type,
            message,
            ..
        }) => {
            w.error(error_type, message);
            w.flush();
            return w.out;
        }
        Some(Fault::Cut { .. }) => {
            w.flush();
            w.out.push(Segment::Cut);
            return w.out;
        }
        Some(Fault::Stall { .. }) => {
            w.flush();
            w.out.push(Segment::Stall);
            return w.out;
        }
        Some(Fault::Pause { ms, .. }) => {
            w.flush();
            w.out.push(Segment::Pause(*ms));
        }
        _ => {}
    }
    w.deltas(tail, resp.delta_chars);
    w.finish(resp);
    w.flush();
    w.out
}

struct Writer {
    format: WireFormat,
    garbage: bool,
    /// Anthropic: the answer is this tool's input.
    tool: Option<String>,
    out: Vec<Segment>,
    buf: String,
}

impl Writer {
    fn event(&mut self, name: &str, data: &Value) {
        if self.format == WireFormat::Anthropic {
            self.buf.push_str("event: ");
            self.buf.push_str(name);
            self.buf.push('\n');
        }
        self.buf.push_str("data: ");
        self.buf.push_str(&data.to_string());
        self.buf.push_str("\n\n");
        if self.garbage {
            self.buf.push_str(GARBAGE);
        }
    }

    fn flush(&mut self) {
        if !self.buf.is_empty() {
            let bytes = std::mem::take(&mut self.buf).into_bytes();
            self.out.push(Segment::Bytes(bytes));
        }
    }

    fn start(&mut self, resp: &MockResponse, model: &str) {
        let u = &resp.usage;
        match self.format {
            WireFormat::Anthropic => {
                self.event(
                    "message_start",
                    &json!({"type": "message_start", "message": {
                    "id": "msg_mock", "type": "message", "role": "assistant", "model": model,
                    "content": [], "stop_reason": null,
                    "usage": {"input_tokens": u.input_tokens, "output_tokens": 1,
                        "cache_read_input_tokens": u.cache_read_input_tokens,
                        "cache_creation_input_tokens": u.cache_creation_input_tokens}}}),
                );
                self.event("ping", &json!({"type": "ping"}));
                if !resp.reasoning.is_empty() {
                    self.event("content_block_start", &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}));
                    self.event("content_block_delta", &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": resp.reasoning}}));
                    self.event(
                        "content_block_stop",
                        &json!({"type": "content_block_stop", "index": 0}),
                    );
                }
                let block = match &self.tool {
                    Some(name) => {
                        json!({"type": "tool_use", "id": "toolu_mock", "name": name, "input": {}})
                    }
                    None => json!({"type": "text", "text": ""}),
                };
                self.event(
                    "content_block_start",
                    &json!({"type": "content_block_start", "index": 1, "content_block": block}),
                );
            }
            WireFormat::OpenAi => {
                self.chunk(json!({"role": "assistant", "content": null}), None);
                if !resp.reasoning.is_empty() {
                    self.chunk(json!({"reasoning_content": resp.reasoning}), None);
                }
            }
        }
    }

    fn chunk(&mut self, delta: Value, finish: Option<&str>) {
        let c = json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0,
            "model": "mock", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        self.event("message", &c);
    }

    fn deltas(&mut self, chars: &[char], per: usize) {
        for piece in chars.chunks(per.max(1)) {
            let text: String = piece.iter().collect();
            match self.format {
                WireFormat::Anthropic => {
                    let delta = match self.tool {
                        Some(_) => json!({"type": "input_json_delta", "partial_json": text}),
                        None => json!({"type": "text_delta", "text": text}),
                    };
                    self.event(
                        "content_block_delta",
                        &json!({"type": "content_block_delta", "index": 1, "delta": delta}),
                    );
                }
                WireFormat::OpenAi => self.chunk(json!({"content": text}), None),
            }
        }
    }

    fn error(&mut self, kind: &str, message: &str) {
        let body = json!({"type": "error", "error": {"type": kind, "message": message}});
        match self.format {
            WireFormat::Anthropic => self.event("error", &body),
            WireFormat::OpenAi => self.event(
                "message",
                &json!({"error": {"message": message, "type": kind}}),
            ),
        }
    }

    fn finish(&mut self, resp: &MockResponse) {
        let u = &resp.usage;
        match self.format {
            WireFormat::Anthropic => {
                self.event(
                    "content_block_stop",
                    &json!({"type": "content_block_stop", "index": 1}),
                );
                self.event(
                    "message_delta",
                    &json!({"type": "message_delta",
                    "delta": {"stop_reason": if self.tool.is_some() { "tool_use" } else { "end_turn" },
                        "stop_sequence": null},
                    "usage": {"output_tokens": u.output_tokens}}),
                );
                self.event("message_stop", &json!({"type": "message_stop"}));
            }
            WireFormat::OpenAi => {
                self.chunk(json!({}), Some("stop"));
                let usage = json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "choices": [],
                    "usage": {"prompt_tokens": u.input_tokens + u.cache_read_input_tokens,
                        "completion_tokens": u.output_tokens,
                        "total_tokens": u.input_tokens + u.cache_read_input_tokens + u.output_tokens,
                        "prompt_tokens_details": {"cached_tokens": u.cache_read_input_tokens}}});
                self.event("message", &usage);
                self.buf.push_str("data: [DONE]\n\n");
            }
        }
    }
}

/// Splits `bytes` into pieces of `size` bytes (0: one piece).
pub fn chunks(bytes: &[u8], size: usize) -> Vec<Vec<u8>> {
    if size == 0 || bytes.is_empty() {
        return vec![bytes.to_vec()];
    }
    bytes.chunks(size).map(<[u8]>::to_vec).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::anthropic::AnthropicDecoder;
    use crate::llm::openai::OpenAiDecoder;
    use crate::llm::sse::{drive, sse_events};
    use crate::llm::types::{ModelEvent, ModelStream};
    use futures_util::{StreamExt, stream};
    use proptest::prelude::*;
    use std::convert::Infallible;
    use std::time::Duration;

    /// Decodes `bytes` fed in pieces cut at `cuts` (byte offsets, possibly mid-character).
    fn decode(format: WireFormat, bytes: &[u8], cuts: &[usize]) -> Vec<ModelEvent> {
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        points.push(0);
        points.push(bytes.len());
        points.sort_unstable();
        let pieces: Vec<Vec<u8>> = points
            .windows(2)
            .filter_map(|w| bytes.get(w[0]..w[1]).map(<[u8]>::to_vec))
            .collect();
        let idle = Duration::from_secs(5);
        let events = sse_events(
            stream::iter(pieces.into_iter().map(Ok::<_, Infallible>)),
            idle,
        );
        let s: ModelStream = match format {
            WireFormat::Anthropic => drive(events, AnthropicDecoder::default(), idle, Vec::new()),
            WireFormat::OpenAi => drive(events, OpenAiDecoder::default(), idle, Vec::new()),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(s.collect::<Vec<_>>())
            .into_iter()
            .map(|r| r.unwrap())
            .collect()
    }

    fn body(format: WireFormat, resp: &MockResponse) -> Vec<u8> {
        render(format, resp, "m")
            .into_iter()
            .flat_map(|s| match s {
                Segment::Bytes(b) => b,
                _ => Vec::new(),
            })
            .collect()
    }

    fn text(events: &[ModelEvent]) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Decodes arbitrary bytes; returns how the stream ended.
    fn decode_any(
        format: WireFormat,
        bytes: Vec<u8>,
    ) -> Vec<Result<ModelEvent, crate::llm::LlmError>> {
        let idle = Duration::from_secs(5);
        let events = sse_events(stream::iter([Ok::<_, Infallible>(bytes)]), idle);
        let s: ModelStream = match format {
            WireFormat::Anthropic => drive(events, AnthropicDecoder::default(), idle, Vec::new()),
            WireFormat::OpenAi => drive(events, OpenAiDecoder::default(), idle, Vec::new()),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(s.collect::<Vec<_>>())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Any bytes at all: no panic, and the stream ends with `Done` or one error.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400), prefix in "(event: [a-z_]{0,20}\n)?data: ") {
            for format in [WireFormat::Anthropic, WireFormat::OpenAi] {
                let mut input = prefix.clone().into_bytes();
                input.extend_from_slice(&bytes);
                let items = decode_any(format, input);
                let errors = items.iter().filter(|i| i.is_err()).count();
                let done = matches!(items.last(), Some(Ok(ModelEvent::Done { .. })));
                prop_assert!(done || (errors == 1 && items.last().is_some_and(|i| i.is_err())));
            }
        }

        /// Feeding a body in arbitrary pieces gives the same events as feeding it whole, and
        /// the text is the scripted text, garbage lines or not.
        #[test]
        fn chunking_never_changes_the_events(
            t in "\\PC{0,80}",
            delta in 1usize..12,
            garbage in any::<bool>(),
            cuts in proptest::collection::vec(any::<usize>(), 0..40),
        ) {
            for format in [WireFormat::Anthropic, WireFormat::OpenAi] {
                let resp = MockResponse {
                    text: t.clone(),
                    delta_chars: delta,
                    fault: garbage.then_some(Fault::Garbage),
                    ..MockResponse::default()
                };
                let bytes = body(format, &resp);
                let whole = decode(format, &bytes, &[]);
                prop_assert_eq!(text(&whole), t.clone());
                let done = matches!(whole.last(), Some(ModelEvent::Done { .. }));
                prop_assert!(done, "the stream ends with done");
                prop_assert_eq!(decode(format, &bytes, &cuts), whole);
            }
        }
    }
}
