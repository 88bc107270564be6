//! A fairy's chat history (the seed's `ChatHistoryItem`s): prompts, actions with their
//! acceptance, continuations and memory transitions, each tagged with the memory level of the
//! mode it was written in; the seed's `filterChatHistoryByMode`; and the bound that keeps the
//! history inside the model's context budget (oldest items folded into one summary item, then
//! oversized items truncated).
//!
//! An action is kept as its compact JSON text ([`ActionJson`]), not as a `serde_json::Value`
//! tree: a fairy drawing at full speed keeps hundreds of them (a tree took ~2.4 KB each, the
//! text ~250 bytes), and every turn's prompt copies the text instead of rebuilding and
//! re-serialising a tree per item.
//!
//! Owns the item types and pure functions over them. No I/O.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::agent::modes::MemoryLevel;
use crate::canvas::transform::tidy_numbers;
use crate::ids::RequestId;

/// Characters of history sent to the model at most (≈ 25k tokens).
pub const HISTORY_BUDGET_CHARS: usize = 100_000;
/// Characters one item may take in the prompt before it is truncated.
pub const MAX_ITEM_CHARS: usize = 4_000;

/// Whether a person accepted a fairy's work (only rejections are written today: a request
/// taken back, docs/fairies.md "Overrule").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Acceptance {
    /// Kept.
    Accepted,
    /// Taken back.
    Rejected,
}

impl Acceptance {
    /// The wire word (`accepted`, `rejected`).
    pub fn as_str(self) -> &'static str {
        match self {
            Acceptance::Accepted => "accepted",
            Acceptance::Rejected => "rejected",
        }
    }
}

/// An action as the history keeps it: its compact JSON text, numbers tidied
/// ([`tidy_numbers`]: `10`, not `10.0`, as the prompt shows them), keys in serde_json's order.
/// Serialised as that JSON (the stored state and the REST API see the action itself);
/// deserialised from any JSON value, which is written again in this form.
#[derive(Clone)]
pub struct ActionJson(Box<RawValue>);

impl ActionJson {
    /// The action `value`, kept as text.
    pub fn new(value: &Value) -> Self {
        let mut value = value.clone();
        tidy_numbers(&mut value);
        // A `Value` always serialises, and its text is valid JSON.
        let text = value.to_string();
        match RawValue::from_string(text) {
            Ok(raw) => ActionJson(raw),
            Err(_) => ActionJson(RawValue::NULL.to_owned()),
        }
    }

    /// The action as JSON text.
    pub fn text(&self) -> &str {
        self.0.get()
    }

    /// The action as a JSON value (parsed again: for the rare readers that edit it).
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.text()).unwrap_or(Value::Null)
    }
}

impl From<Value> for ActionJson {
    fn from(value: Value) -> Self {
        ActionJson::new(&value)
    }
}

impl PartialEq for ActionJson {
    fn eq(&self, other: &Self) -> bool {
        self.text() == other.text()
    }
}

impl std::fmt::Debug for ActionJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text())
    }
}

impl Serialize for ActionJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ActionJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(|value| ActionJson::new(&value))
    }
}

/// One history item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum HistoryItem {
    /// A request: the user's (or the runtime's) message.
    #[serde(rename_all = "camelCase")]
    Prompt {
        /// `user`, `self` (review/continuation) or `system`.
        source: String,
        /// What the model is told.
        agent_facing_message: String,
        /// The memory level of the mode it was written in.
        memory_level: MemoryLevel,
        /// The request it started (user prompts), or that it is about (a rejection's note).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<RequestId>,
        /// `rejected` once a person took the request back.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        acceptance: Option<Acceptance>,
    },
    /// An action the model wrote.
    #[serde(rename_all = "camelCase")]
    Action {
        /// The (sanitized) action.
        #[schema(value_type = serde_json::Value)]
        action: ActionJson,
        /// Whether it was carried out.
        acceptance: Acceptance,
        /// Why it was rejected or corrected, for the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        /// The memory level of the mode it was written in.
        memory_level: MemoryLevel,
    },
    /// Data carried to the next turn (a review's findings, corrections).
    #[serde(rename_all = "camelCase")]
    Continuation {
        /// What the model is told.
        data: Vec<Value>,
        /// The memory level of the mode it was written in.
        memory_level: MemoryLevel,
    },
    /// The end of a task or project: a summary replaces the filtered-out detail.
    #[serde(rename_all = "camelCase")]
    MemoryTransition {
        /// What the model is told.
        agent_facing_message: String,
        /// What the chat shows, if anything.
        user_facing_message: Option<String>,
        /// The level it belongs to.
        memory_level: MemoryLevel,
    },
}

impl HistoryItem {
    /// The item's memory level.
    pub fn memory_level(&self) -> MemoryLevel {
        match self {
            HistoryItem::Prompt { memory_level, .. }
            | HistoryItem::Action { memory_level, .. }
            | HistoryItem::Continuation { memory_level, .. }
            | HistoryItem::MemoryTransition { memory_level, .. } => *memory_level,
        }
    }

    /// The item as the model sees it in the prompt.
    pub fn to_prompt_json(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.remove("memoryLevel");
        }
        tidy_numbers(&mut v);
        v
    }

    /// [`HistoryItem::to_prompt_json`] as compact JSON text. An action (most of a busy
    /// fairy's history) is written around its kept text, with no tree built: keys in the
    /// order a `Value` writes them (sorted).
    pub fn prompt_text(&self) -> String {
        let HistoryItem::Action {
            action,
            acceptance,
            note,
            ..
        } = self
        else {
            return self.to_prompt_json().to_string();
        };
        let note = note
            .as_ref()
            .map(|n| serde_json::to_string(n).unwrap_or_default());
        let mut out =
            String::with_capacity(action.text().len() + note.as_ref().map_or(0, String::len) + 64);
        out.push_str("{\"acceptance\":\"");
        out.push_str(acceptance.as_str());
        out.push_str("\",\"action\":");
        out.push_str(action.text());
        if let Some(note) = note {
            out.push_str(",\"note\":");
            out.push_str(&note);
        }
        out.push_str(",\"type\":\"action\"}");
        out
    }
}

/// The history the prompt sees in a mode of `level` (the seed's `filterChatHistoryByMode`):
/// fairy level sees only fairy items; project level walks back over project items, skipping
/// task items, and stops at the first fairy item; task level walks back over task items and
/// stops at the first item of another level.
pub fn filter_by_level(items: &[HistoryItem], level: MemoryLevel) -> Vec<&HistoryItem> {
    visible_indices(items, level)
        .into_iter()
        .map(|i| &items[i])
        .collect()
}

/// The positions of the items [`filter_by_level`] keeps, in order.
pub fn visible_indices(items: &[HistoryItem], level: MemoryLevel) -> Vec<usize> {
    let levels = items.iter().map(HistoryItem::memory_level).enumerate();
    match level {
        MemoryLevel::Fairy => levels
            .filter(|(_, l)| *l == MemoryLevel::Fairy)
            .map(|(i, _)| i)
            .collect(),
        MemoryLevel::Project => {
            let mut out = Vec::new();
            for (i, l) in levels.rev() {
                match l {
                    MemoryLevel::Project => out.push(i),
                    MemoryLevel::Task => continue,
                    MemoryLevel::Fairy => break,
                }
            }
            out.reverse();
            out
        }
        MemoryLevel::Task => {
            let mut out: Vec<usize> = levels
                .rev()
                .take_while(|(_, l)| *l == MemoryLevel::Task)
                .map(|(i, _)| i)
                .collect();
            out.reverse();
            out
        }
    }
}

/// Truncates a text to `max` characters, saying so.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let head: String = text.chars().take(max).collect();
    format!("{head}… (truncated)")
}

/// One item as the prompt carries it, and its length in the prompt: its JSON text, or that
/// text cut to [`MAX_ITEM_CHARS`] (as a JSON string) when longer.
fn prompt_item(item: &HistoryItem) -> (String, usize) {
    let text = item.prompt_text();
    // A text is never longer in characters than in bytes: only a long one is counted.
    if text.len() > MAX_ITEM_CHARS && text.chars().count() > MAX_ITEM_CHARS {
        let cut = clip(&text, MAX_ITEM_CHARS);
        let len = cut.len();
        return (serde_json::to_string(&cut).unwrap_or_default(), len);
    }
    let len = text.len();
    (text, len)
}

/// The prompt's history items as JSON texts, within `budget` characters: the oldest items are
/// folded into one memory-transition summary (counting what was left out, by kind), then every
/// item is cut to [`MAX_ITEM_CHARS`]. Never fails: at worst only the summary remains. Only the
/// items that fit are written: the cost is the budget's, not the whole history's.
pub fn compact_for_prompt(items: &[&HistoryItem], budget: usize) -> Vec<String> {
    let mut total = 0usize;
    let mut keep_from = items.len();
    let mut kept = Vec::new();
    for (i, item) in items.iter().enumerate().rev() {
        let (text, len) = prompt_item(item);
        if total + len > budget {
            break;
        }
        total += len;
        keep_from = i;
        kept.push(text);
    }
    let mut out = Vec::with_capacity(kept.len() + 1);
    if keep_from > 0 {
        let dropped = &items[..keep_from];
        let prompts = dropped
            .iter()
            .filter(|i| matches!(i, HistoryItem::Prompt { .. }))
            .count();
        let actions = dropped
            .iter()
            .filter(|i| matches!(i, HistoryItem::Action { .. }))
            .count();
        let last_request = dropped.iter().rev().find_map(|i| match i {
            HistoryItem::Prompt {
                agent_facing_message,
                ..
            } => Some(clip(agent_facing_message, 200)),
            _ => None,
        });
        let mut text = format!(
            "Earlier history was compacted: {prompts} requests and {actions} actions are not shown."
        );
        if let Some(last) = last_request {
            text.push_str(&format!(" The last of those requests was: {last}"));
        }
        out.push(
            serde_json::json!({"type": "memory-transition", "agentFacingMessage": text})
                .to_string(),
        );
    }
    out.extend(kept.into_iter().rev());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(text: &str, level: MemoryLevel) -> HistoryItem {
        HistoryItem::Prompt {
            source: "user".into(),
            agent_facing_message: text.into(),
            memory_level: level,
            request_id: None,
            acceptance: None,
        }
    }

    fn texts(items: &[&HistoryItem]) -> Vec<String> {
        items
            .iter()
            .map(|i| match i {
                HistoryItem::Prompt {
                    agent_facing_message,
                    ..
                } => agent_facing_message.clone(),
                _ => "?".into(),
            })
            .collect()
    }

    #[test]
    fn filtering_matches_the_seed() {
        use MemoryLevel::*;
        let items = vec![
            prompt("f1", Fairy),
            prompt("p1", Project),
            prompt("t1", Task),
            prompt("f2", Fairy),
            prompt("p2", Project),
            prompt("t2", Task),
            prompt("p3", Project),
            prompt("t3", Task),
            prompt("t4", Task),
        ];
        assert_eq!(texts(&filter_by_level(&items, Fairy)), ["f1", "f2"]);
        assert_eq!(texts(&filter_by_level(&items, Project)), ["p2", "p3"]);
        assert_eq!(texts(&filter_by_level(&items, Task)), ["t3", "t4"]);
        assert!(filter_by_level(&items[..1], Task).is_empty());
    }

    #[test]
    fn compaction_keeps_recent_items_and_summarises_the_rest() {
        let items: Vec<HistoryItem> = (0..50)
            .map(|i| {
                prompt(
                    &format!("request {i} {}", "x".repeat(100)),
                    MemoryLevel::Fairy,
                )
            })
            .collect();
        let refs: Vec<&HistoryItem> = items.iter().collect();
        let parse = |texts: Vec<String>| -> Vec<Value> {
            texts
                .iter()
                .map(|t| serde_json::from_str(t).unwrap())
                .collect()
        };
        let all = parse(compact_for_prompt(&refs, usize::MAX));
        assert_eq!(all.len(), 50);
        let out = parse(compact_for_prompt(&refs, 1000));
        assert!(out.len() < 50 && out.len() > 1);
        assert_eq!(out[0]["type"], "memory-transition");
        let summary = out[0]["agentFacingMessage"].as_str().unwrap_or_default();
        assert!(summary.contains("requests"), "{summary}");
        assert!(
            out.last()
                .map(|v| v["agentFacingMessage"].to_string())
                .unwrap_or_default()
                .contains("request 49")
        );
        let huge = [prompt(&"y".repeat(MAX_ITEM_CHARS * 3), MemoryLevel::Fairy)];
        let refs: Vec<&HistoryItem> = huge.iter().collect();
        let out = compact_for_prompt(&refs, HISTORY_BUDGET_CHARS);
        assert!(out[0].len() < MAX_ITEM_CHARS + 100);
        assert_eq!(compact_for_prompt(&refs, 10).len(), 1);
    }

    /// An item's prompt text is exactly its prompt JSON written out, for every kind; an
    /// action's text is kept tidy and survives a store round trip.
    #[test]
    fn prompt_text_is_the_prompt_json_written_out() {
        use serde_json::json;
        let action = json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "b\u{e9}\"x", "x": 10.0, "y": -2.5, "w": 1e3}});
        let items = [
            prompt("draw \"this\" \u{2713}", MemoryLevel::Task),
            HistoryItem::Action {
                action: ActionJson::new(&action),
                acceptance: Acceptance::Accepted,
                note: None,
                memory_level: MemoryLevel::Fairy,
            },
            HistoryItem::Action {
                action: ActionJson::new(&json!({"_type": "x"})),
                acceptance: Acceptance::Rejected,
                note: Some("why \"not\"\n".into()),
                memory_level: MemoryLevel::Project,
            },
            HistoryItem::Continuation {
                data: vec![json!({"a": 1.0}), json!("b")],
                memory_level: MemoryLevel::Fairy,
            },
            HistoryItem::MemoryTransition {
                agent_facing_message: "done".into(),
                user_facing_message: None,
                memory_level: MemoryLevel::Fairy,
            },
        ];
        for item in &items {
            assert_eq!(item.prompt_text(), item.to_prompt_json().to_string());
            let stored = serde_json::to_string(item).unwrap();
            let back: HistoryItem = serde_json::from_str(&stored).unwrap();
            assert_eq!(&back, item);
        }
        let HistoryItem::Action { action: kept, .. } = &items[1] else {
            unreachable!()
        };
        assert!(kept.text().contains(r#""x":10,"#), "{}", kept.text());
        let mut tidy = action.clone();
        tidy_numbers(&mut tidy);
        assert_eq!(kept.to_value(), tidy);
    }
}
