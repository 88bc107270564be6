//! Splitting a streamed `{"actions": [...]}` response into per-action events.
//!
//! Owns: locating the actions object in a model's text (after prose or a code fence, or right
//! away when the caller sent the prefill), and turning parser progress into [`StreamedAction`]
//! events: for each action, zero or more incomplete snapshots (only when the snapshot changed)
//! then exactly one complete event, in index order. Finished actions are moved out of the
//! parser, so memory stays proportional to the open action, not the response. Must not touch:
//! what actions mean or how they are applied (`agent`).

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

use super::PartialJsonError;
use super::fence::Prelude;
use super::parser::{Container, Fed, Parser, Sink};

/// The assistant prefill that models supporting it are given, so that their text continues
/// inside the first action. Pass it to [`ActionStream::with_prefill`].
pub const ACTIONS_PREFILL: &str = r#"{"actions": [{"_type":"#;

/// One event about one action.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamedAction {
    /// Position in the actions array, from 0.
    pub index: usize,
    /// The action so far (see `partial_json`'s omission rules), or in full when `complete`.
    pub action: Value,
    /// The action's closing byte arrived: this is its final value, equal to what
    /// `serde_json` gives for it; no further event has this index.
    pub complete: bool,
}

/// Where the stream stands.
#[derive(Debug, Clone)]
enum State {
    /// Reading prose, looking for the `{` that starts the JSON.
    Prelude(Prelude),
    /// Inside a candidate JSON object.
    Json,
    /// The actions object closed; the rest of the text is ignored.
    Done,
    /// The JSON broke after events were emitted; the rest of the text is ignored.
    Failed,
    /// `finish` or `abort` was called.
    Ended,
}

/// Catches finished actions as the parser attaches them to the actions array.
#[derive(Debug, Default, Clone)]
struct ActionSink {
    /// Complete events found during the current `push`.
    events: Vec<StreamedAction>,
    /// Actions completed so far: also the index of the open action.
    completed: usize,
    /// The (first) actions array closed: later `"actions"` keys are plain values.
    closed: bool,
}

/// Whether `open` is the root object with its `"actions"` array open at depth 1.
fn in_actions_array(open: &[Container]) -> bool {
    matches!(
        open,
        [Container::Object { key: Some(key), .. }, Container::Array(_), ..] if key == "actions"
    )
}

impl Sink for ActionSink {
    fn finished(&mut self, open: &[Container], value: Value) -> Option<Value> {
        if self.closed {
            return Some(value);
        }
        if open.len() == 2 && in_actions_array(open) {
            self.events.push(StreamedAction {
                index: self.completed,
                action: value,
                complete: true,
            });
            self.completed += 1;
            return None;
        }
        if open.len() == 1 && in_actions_array_key(open) && value.is_array() {
            self.closed = true;
        }
        Some(value)
    }
}

/// Whether `open` is just the root object waiting on its `"actions"` value.
/// A structural hash of `value`. Object entries are combined independently of their order, so
/// equal maps hash equal whatever map type `serde_json` was built with.
fn hash_value(value: &Value) -> u64 {
    let mut h = DefaultHasher::new();
    match value {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => (1u8, b).hash(&mut h),
        Value::Number(n) => (2u8, n).hash(&mut h),
        Value::String(s) => (3u8, s).hash(&mut h),
        Value::Array(items) => {
            (4u8, items.len()).hash(&mut h);
            items.iter().for_each(|item| h.write_u64(hash_value(item)));
        }
        Value::Object(map) => {
            let entries = map.iter().fold(0u64, |sum, (key, item)| {
                let mut entry = DefaultHasher::new();
                (key, hash_value(item)).hash(&mut entry);
                sum.wrapping_add(entry.finish())
            });
            (5u8, map.len(), entries).hash(&mut h);
        }
    }
    h.finish()
}

fn in_actions_array_key(open: &[Container]) -> bool {
    matches!(open, [Container::Object { key: Some(key), .. }] if key == "actions")
}

/// Per-action events from a streamed model response.
///
/// Without prefill, prose and a Markdown fence before the JSON are skipped; a candidate object
/// that breaks or closes before its `"actions"` array opened is dropped and the scan resumes at
/// the offending byte (so `{braces}` in prose are harmless). Once the actions array opened, a
/// break is final: `error()` reports it and later input is ignored (the open action never
/// becomes complete). Text after the actions array (a closing fence, more prose) is ignored.
/// Whether a text is accepted never depends on how it is chunked: the complete events are the
/// same for every chunking; only the incomplete snapshots in between differ.
#[derive(Debug, Clone)]
pub struct ActionStream {
    state: State,
    parser: Parser,
    sink: ActionSink,
    /// The JSON may not be dropped on error even outside the actions array (prefill).
    committed: bool,
    /// `(index, parser version)` of the last incomplete snapshot emitted or seen.
    last_snapshot: Option<(usize, u64)>,
    /// A hash of the last incomplete snapshot emitted. A new version usually means a new
    /// snapshot, but a duplicate key can put back a value seen before (`{"a": 1, "a": 1}`), so
    /// compare. A hash rather than a copy: keeping a clone of every snapshot cost a third of the
    /// stream's time. Equal snapshots always hash equal, so none is ever emitted twice; a
    /// collision (2^-64) could only skip one intermediate snapshot, which the contract allows.
    last_hash: Option<u64>,
    error: Option<PartialJsonError>,
}

impl Default for ActionStream {
    fn default() -> Self {
        Self::new()
    }
}

impl ActionStream {
    /// A stream whose text is the model's whole response (no prefill sent).
    pub fn new() -> Self {
        Self {
            state: State::Prelude(Prelude::default()),
            parser: Parser::new(true),
            sink: ActionSink::default(),
            committed: false,
            last_snapshot: None,
            last_hash: None,
            error: None,
        }
    }

    /// A stream for a model that was given `prefill` (normally [`ACTIONS_PREFILL`]) as the
    /// start of its answer: its text continues the prefill, so no prose is expected. The
    /// prefill's own snapshot (`{}` for the first action) is not reported.
    pub fn with_prefill(prefill: &str) -> Self {
        let mut stream = Self::new();
        stream.state = State::Json;
        stream.committed = true;
        // Events of the prefill itself are the caller's own text: not reported.
        let _ = stream.push(prefill);
        stream
    }

    /// Feeds the next chunk and returns the events it caused, in order.
    pub fn push(&mut self, chunk: &str) -> Vec<StreamedAction> {
        let mut rest = chunk;
        while !rest.is_empty() {
            match &mut self.state {
                State::Prelude(prelude) => match prelude.find_start(rest) {
                    Some(start) => {
                        self.state = State::Json;
                        self.parser = Parser::new(true);
                        // Versions are per parser: forget the previous candidate's.
                        self.last_snapshot = None;
                        self.last_hash = None;
                        rest = rest.get(start..).unwrap_or_default();
                    }
                    None => break,
                },
                State::Json => {
                    rest = match self.parser.feed(rest, &mut self.sink) {
                        Fed::All => "",
                        Fed::RootDone(_) if self.sink.closed => {
                            self.state = State::Done;
                            break;
                        }
                        Fed::Invalid(_) if self.sink.closed => {
                            // Only what follows the actions array is broken: nothing is lost.
                            self.state = State::Done;
                            break;
                        }
                        Fed::Invalid(_)
                            if self.committed || in_actions_array(self.parser.open()) =>
                        {
                            self.error = self.parser.error().cloned();
                            self.state = State::Failed;
                            break;
                        }
                        // Not the actions object after all: back to prose, from the byte
                        // after it or from the offending byte (which may start a new object).
                        Fed::RootDone(resume) | Fed::Invalid(resume) => {
                            self.state = State::Prelude(Prelude::default());
                            rest.get(resume..).unwrap_or_default()
                        }
                    };
                }
                State::Done | State::Failed | State::Ended => break,
            }
        }
        let mut events = std::mem::take(&mut self.sink.events);
        events.extend(self.snapshot());
        events
    }

    /// The open action's snapshot, if it changed since the last one emitted.
    fn snapshot(&mut self) -> Option<StreamedAction> {
        if !matches!(self.state, State::Json) || self.sink.closed {
            return None;
        }
        let open = self.parser.open();
        if !in_actions_array(open) {
            return None;
        }
        let seen = (self.sink.completed, self.parser.version());
        if self.last_snapshot == Some(seen) {
            return None;
        }
        let same_index = self.last_snapshot.map(|(index, _)| index) == Some(seen.0);
        self.last_snapshot = Some(seen);
        let action = self.parser.snapshot_from(2)?;
        let hash = hash_value(&action);
        if same_index && self.last_hash == Some(hash) {
            return None;
        }
        self.last_hash = Some(hash);
        Some(StreamedAction {
            index: seen.0,
            action,
            complete: false,
        })
    }

    /// Ends a normal stream. Every action whose closing byte arrived was already reported
    /// complete by `push`; an action cut off by the end of the text is not complete JSON, so it
    /// is never marked complete. Returns no event with this parser, and later input is ignored.
    pub fn finish(&mut self) -> Vec<StreamedAction> {
        self.state = State::Ended;
        Vec::new()
    }

    /// Ends a failed or cancelled stream: nothing more is marked complete, and later input is
    /// ignored. The caller reverts the open action's tentative changes.
    pub fn abort(&mut self) -> Vec<StreamedAction> {
        self.state = State::Ended;
        Vec::new()
    }

    /// Why the JSON broke after its actions array opened (or after the prefill), if it did.
    pub fn error(&self) -> Option<&PartialJsonError> {
        self.error.as_ref()
    }

    /// Whether the actions array closed (every action in it was reported complete).
    pub fn is_done(&self) -> bool {
        self.sink.closed
    }

    /// When the open action's last snapshot ends inside a string value still streaming, the
    /// key of that value (`"shapeId"` while an id arrives: the snapshot holds only a prefix of
    /// it, which may name another shape). `None` otherwise, and once the stream ended.
    pub fn streaming_string_key(&self) -> Option<&str> {
        if !matches!(self.state, State::Json) || self.sink.closed {
            return None;
        }
        self.parser.open_string_key()
    }

    /// How many actions were reported complete.
    pub fn completed(&self) -> usize {
        self.sink.completed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Feeds `text` in `size`-byte chunks (on char boundaries) and collects every event.
    fn run(mut stream: ActionStream, text: &str, size: usize) -> Vec<StreamedAction> {
        let mut events = Vec::new();
        let mut start = 0;
        while start < text.len() {
            let mut end = (start + size).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            events.extend(stream.push(text.get(start..end).unwrap_or_default()));
            start = end;
        }
        events.extend(stream.finish());
        events
    }

    fn completes(events: &[StreamedAction]) -> Vec<Value> {
        events
            .iter()
            .filter(|e| e.complete)
            .map(|e| e.action.clone())
            .collect()
    }

    const RESPONSE: &str = r#"{"actions": [{"_type": "message", "text": "Hi \"there\" C:\\"}, {"_type": "create", "shape": {"x": 10, "y": -2.5, "note": "a\u00e9😀"}}, {"_type": "think", "text": ""}]}"#;

    fn expected() -> Vec<Value> {
        let whole: Value = serde_json::from_str(RESPONSE).unwrap();
        whole["actions"].as_array().cloned().unwrap()
    }

    /// Events are well-formed: per index, incomplete snapshots that each differ from the
    /// previous one, then one complete event; indexes in order.
    fn assert_well_formed(events: &[StreamedAction]) {
        let mut next_complete = 0;
        let mut last: Option<&StreamedAction> = None;
        for event in events {
            assert_eq!(event.index, next_complete, "{events:#?}");
            let same_open = |p: &&StreamedAction| p.index == event.index && !p.complete;
            if let Some(prev) = last.filter(same_open).filter(|_| !event.complete) {
                assert_ne!(prev.action, event.action, "unchanged snapshot re-emitted");
            }
            if event.complete {
                next_complete += 1;
            }
            last = Some(event);
        }
    }

    #[test]
    fn every_chunk_size_gives_the_same_complete_events() {
        for size in 1..=RESPONSE.len() {
            let events = run(ActionStream::new(), RESPONSE, size);
            assert_well_formed(&events);
            assert_eq!(completes(&events), expected(), "chunk size {size}");
        }
    }

    #[test]
    fn one_chunk_completing_several_actions_yields_them_all_in_order() {
        let mut stream = ActionStream::new();
        let events = stream.push(RESPONSE);
        assert_eq!(events.len(), 3);
        assert!(events.iter().all(|e| e.complete));
        assert_eq!(
            events.iter().map(|e| e.index).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert!(stream.is_done());
    }

    #[test]
    fn snapshots_grow_and_only_when_changed() {
        let mut stream = ActionStream::new();
        assert!(
            stream
                .push(r#"{"actions": [{"_type": "mess"#)
                .iter()
                .any(|e| e.action == json!({"_type": "mess"}) && !e.complete)
        );
        // Whitespace, a partial key, a partial number: nothing visible changed.
        assert_eq!(
            stream.push("age\", "),
            vec![StreamedAction {
                index: 0,
                action: json!({"_type": "message"}),
                complete: false,
            }]
        );
        assert!(stream.push("  \"te").is_empty());
        assert!(stream.push("xt\": 1").is_empty());
        let events = stream.push("2}, {");
        assert_eq!(
            events,
            vec![
                StreamedAction {
                    index: 0,
                    action: json!({"_type": "message", "text": 12}),
                    complete: true
                },
                StreamedAction {
                    index: 1,
                    action: json!({}),
                    complete: false
                },
            ]
        );
    }

    #[test]
    fn prose_and_fences_before_the_json_are_skipped() {
        let texts = [
            format!("Sure! I'll draw it {{quickly}}.\n\n```json\n{RESPONSE}\n```\nDone."),
            format!("Here: `{{}}` means nothing.\n~~~ {{x}}\n{RESPONSE}"),
            format!("{{\"note\": \"not it\"}}\n{RESPONSE}"),
            format!("{{ oops {RESPONSE}"),
        ];
        for text in &texts {
            for size in [1, 3, 16, text.len()] {
                let events = run(ActionStream::new(), text, size);
                assert_well_formed(&events);
                assert_eq!(completes(&events), expected(), "{text} / {size}");
            }
        }
    }

    #[test]
    fn a_think_block_before_the_json_is_skipped_even_when_it_holds_actions() {
        let text = format!(
            "<think>The user wants {{a box}}. Draft: {{\"actions\": [{{\"_type\": \"wrong\"}}]}}</think>\n\n```json\n{RESPONSE}\n```"
        );
        for size in [1, 2, 5, 9, text.len()] {
            let events = run(ActionStream::new(), &text, size);
            assert_well_formed(&events);
            assert_eq!(completes(&events), expected(), "chunks of {size}");
        }
    }

    #[test]
    fn the_key_of_a_string_still_streaming_is_known() {
        let mut stream = ActionStream::new();
        stream.push(r#"{"actions": [{"_type": "move", "shapeId": "bo"#);
        assert_eq!(stream.streaming_string_key(), Some("shapeId"));
        stream.push(r#"x2", "x": 1"#);
        assert_eq!(stream.streaming_string_key(), None, "closed string, number");
        stream.push(r#", "shape": {"note": "a"#);
        assert_eq!(stream.streaming_string_key(), Some("note"));
        stream.push(r#"", "ids": ["a", "b"#);
        assert_eq!(
            stream.streaming_string_key(),
            Some("ids"),
            "through an array"
        );
        stream.push(r#""]}}]}"#);
        assert_eq!(stream.streaming_string_key(), None);
    }

    #[test]
    fn prefill_continues_inside_the_first_action() {
        let rest = RESPONSE.strip_prefix(r#"{"actions": [{"_type":"#).unwrap();
        for size in [1, 7, rest.len()] {
            let events = run(ActionStream::with_prefill(ACTIONS_PREFILL), rest, size);
            assert_well_formed(&events);
            let leaked = events.iter().any(|e| e.index == 0 && e.action == json!({}));
            assert!(!leaked, "the prefill's own snapshot was reported");
            assert_eq!(completes(&events), expected());
        }
    }

    #[test]
    fn a_cut_off_action_is_never_complete() {
        let cut = &RESPONSE[..RESPONSE.find("\"think\"").unwrap()];
        for end in [ActionStream::finish, ActionStream::abort] {
            let mut stream = ActionStream::new();
            let events = stream.push(cut);
            assert_eq!(completes(&events).len(), 2);
            assert!(end(&mut stream).is_empty());
            assert!(
                stream.push("}]}").is_empty(),
                "input after the end is ignored"
            );
            assert!(!stream.is_done());
        }
    }

    #[test]
    fn a_break_inside_the_actions_array_is_final() {
        let mut stream = ActionStream::new();
        let events = stream.push(r#"{"actions": [{"a": 1}, {"b": tru"#);
        assert_eq!(completes(&events), vec![json!({"a": 1})]);
        assert!(stream.push("x}]} {\"actions\": [{}]}").is_empty());
        assert!(matches!(
            stream.error(),
            Some(PartialJsonError::InvalidLiteral { .. })
        ));
        // Before the array opened, a broken candidate is dropped instead.
        let mut stream = ActionStream::new();
        let events = stream.push(r#"{"actions" [1]} {"actions": [2]}"#);
        assert_eq!(completes(&events), vec![json!(2)]);
        assert!(stream.error().is_none());
    }

    #[test]
    fn a_duplicate_key_restoring_a_value_is_not_a_new_snapshot() {
        let mut stream = ActionStream::new();
        assert_eq!(stream.push(r#"{"actions": [{"a": [1]"#).len(), 1);
        assert!(
            stream.push(r#", "a": [1]"#).is_empty(),
            "same snapshot re-emitted"
        );
        assert_eq!(stream.push(r#", "a": [2]"#).len(), 1);
    }

    #[test]
    fn text_after_the_actions_is_ignored_and_only_the_first_array_counts() {
        let events = run(
            ActionStream::new(),
            r#"{"actions": [1], "actions": [2], "x": } trailing {"actions": [3]}"#,
            4,
        );
        assert_eq!(completes(&events), vec![json!(1)]);
    }
}
