//! A fairy's chat history (the seed's `ChatHistoryItem`s): prompts, actions with their
//! acceptance, continuations and memory transitions, each tagged with the memory level of the
//! mode it was written in; the seed's `filterChatHistoryByMode`; and the bound that keeps the
//! history inside the model's context budget (oldest items folded into one summary item, then
//! oversized items truncated).
//!
//! Owns the item types and pure functions over them. No I/O.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::modes::MemoryLevel;
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
        action: Value,
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
        v
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

/// Bytes of `value` written as compact JSON, counted without keeping the text.
pub fn json_len(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail, nor can serializing these types.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// One item as the prompt carries it, and its length in the prompt: its JSON, or the JSON's
/// text cut to [`MAX_ITEM_CHARS`] when longer.
fn prompt_item(item: &HistoryItem) -> (Value, usize) {
    let value = item.to_prompt_json();
    let len = json_len(&value);
    // A text is never longer in characters than in bytes: only a long one is written out.
    if len > MAX_ITEM_CHARS {
        let text = value.to_string();
        if text.chars().count() > MAX_ITEM_CHARS {
            let cut = clip(&text, MAX_ITEM_CHARS);
            let len = cut.len();
            return (Value::String(cut), len);
        }
    }
    (value, len)
}

/// The prompt's history items as JSON, within `budget` characters: the oldest items are folded
/// into one memory-transition summary (counting what was left out, by kind), then every item
/// is cut to [`MAX_ITEM_CHARS`]. Never fails: at worst only the summary remains. Only the
/// items that fit are written: the cost is the budget's, not the whole history's.
pub fn compact_for_prompt(items: &[&HistoryItem], budget: usize) -> Vec<Value> {
    let mut total = 0usize;
    let mut keep_from = items.len();
    let mut kept = Vec::new();
    for (i, item) in items.iter().enumerate().rev() {
        let (value, len) = prompt_item(item);
        if total + len > budget {
            break;
        }
        total += len;
        keep_from = i;
        kept.push(value);
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
        out.push(serde_json::json!({"type": "memory-transition", "agentFacingMessage": text}));
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
        let all = compact_for_prompt(&refs, usize::MAX);
        assert_eq!(all.len(), 50);
        let out = compact_for_prompt(&refs, 1000);
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
        assert!(out[0].to_string().len() < MAX_ITEM_CHARS + 100);
        assert_eq!(compact_for_prompt(&refs, 10).len(), 1);
    }
}
