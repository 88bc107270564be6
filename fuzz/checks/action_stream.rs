//! Fuzz check for `action_stream` (shared by the cargo-fuzz target and `tests/sync/fuzz_corpus.rs`).
//!
//! The input is the model's text (invalid UTF-8 replaced) and, through its own bytes, the
//! chunking and an abort point. Asserts: no panic; events well formed (indexes in order, one
//! complete event per index, no unchanged snapshot repeated); the complete events, error and
//! end state do not depend on the chunking; abort marks nothing more complete; and when the
//! input is a JSON array, wrapping it as `{"actions": ...}` in prose and a code fence yields
//! exactly its elements as `serde_json` parses them.

use fairyring::partial_json::{ActionStream, StreamedAction};
use serde_json::Value;

/// Chunks of `text` whose sizes (1 to 16 bytes, moved to char boundaries) come from `data`.
fn chunks<'a>(text: &'a str, data: &[u8]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while start < text.len() {
        let size = usize::from(data.get(i % data.len().max(1)).copied().unwrap_or(0) % 16) + 1;
        let mut end = (start + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
        i += 1;
    }
    out
}

/// Asserts the event contract and returns the complete actions in order.
fn completes(events: &[StreamedAction]) -> Vec<Value> {
    let mut next = 0;
    let mut last: Option<&StreamedAction> = None;
    for event in events {
        assert_eq!(event.index, next, "events out of order");
        if let Some(prev) = last {
            let same_open = prev.index == event.index && !prev.complete && !event.complete;
            assert!(
                !same_open || prev.action != event.action,
                "unchanged snapshot re-emitted"
            );
        }
        next += usize::from(event.complete);
        last = Some(event);
    }
    events
        .iter()
        .filter(|e| e.complete)
        .map(|e| e.action.clone())
        .collect()
}

/// Runs `text` through a new stream in the chunks `data` gives; `abort_after` chunks then abort.
fn run(text: &str, data: &[u8], abort_after: Option<usize>) -> (ActionStream, Vec<StreamedAction>) {
    let mut stream = ActionStream::new();
    let mut events = Vec::new();
    for (i, chunk) in chunks(text, data).into_iter().enumerate() {
        if abort_after == Some(i) {
            assert!(stream.abort().is_empty(), "abort reported events");
        }
        events.extend(stream.push(chunk));
    }
    events.extend(stream.finish());
    (stream, events)
}

/// Must never panic, whatever the bytes; panics (fails) when an invariant breaks.
pub fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut whole = ActionStream::new();
    let mut whole_events = whole.push(&text);
    whole_events.extend(whole.finish());
    let expected = completes(&whole_events);

    let (chunked, events) = run(&text, data, None);
    assert_eq!(
        completes(&events),
        expected,
        "complete events depend on chunking"
    );
    assert_eq!(chunked.error(), whole.error());
    assert_eq!(chunked.is_done(), whole.is_done());

    let abort_at = usize::from(data.first().copied().unwrap_or(0) % 8);
    let (_, aborted) = run(&text, data, Some(abort_at));
    let done = completes(&aborted);
    assert!(
        expected.starts_with(&done),
        "abort changed the complete events"
    );

    let body = format!("{{\"actions\": {text}}}");
    let is_array = matches!(serde_json::from_str::<Value>(&text), Ok(Value::Array(_)));
    // Both parses: `text` is one array (no injected keys) and nesting stays within limits.
    if let (true, Ok(Value::Object(mut root))) = (is_array, serde_json::from_str::<Value>(&body)) {
        let actions = match root.remove("actions") {
            Some(Value::Array(actions)) => actions,
            _ => return,
        };
        let wrapped = format!("Plan {{ahead}}:\n```json\n{body}\n```\n");
        let (stream, events) = run(&wrapped, data, None);
        assert_eq!(
            completes(&events),
            actions,
            "actions differ from serde_json"
        );
        assert!(stream.is_done() && stream.error().is_none());
    }
}
