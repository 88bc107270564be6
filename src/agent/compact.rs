//! Keeping a fairy's chat history inside its context budget (issue: "compact it instead of
//! failing"): when the history its mode sees outgrows [`RuntimeConfig::history_budget`], the
//! oldest items are summarised through the model into one memory-transition item; if the model
//! fails, nothing is lost either — the prompt builder folds and truncates what does not fit
//! ([`super::memory::compact_for_prompt`]).
//!
//! [`RuntimeConfig::history_budget`]: super::state::RuntimeConfig

use futures_util::StreamExt;

use super::memory::{HistoryItem, filter_by_level};
use super::runtime::FairyRuntime;
use crate::llm::{ChatMessage, ModelEvent, ModelRequest};

/// Longest summary kept, in characters.
const MAX_SUMMARY_CHARS: usize = 4000;

const SUMMARY_SYSTEM: &str = "You summarise a fairy's chat history for the fairy's own memory. \
Write a few plain sentences: what the user asked, what was drawn or changed (with shape ids), \
and anything still open. No JSON, no preamble.";

fn rendered_len(item: &HistoryItem) -> usize {
    item.to_prompt_json().to_string().len()
}

impl FairyRuntime {
    /// Summarises the oldest history items when the history the current mode sees is over
    /// budget. Best effort: a model failure leaves the history as it is.
    pub(super) async fn compact_history(&mut self) {
        let budget = self.config.history_budget;
        let level = self.modes.mode().memory_level();
        let visible: usize = filter_by_level(&self.state.history, level)
            .iter()
            .map(|i| rendered_len(i))
            .sum();
        if visible <= budget {
            return;
        }
        // Keep the newest items that fit in half the budget; summarise everything before.
        let mut kept = 0usize;
        let mut split = self.state.history.len();
        for (i, item) in self.state.history.iter().enumerate().rev() {
            let len = rendered_len(item);
            if kept + len > budget / 2 {
                break;
            }
            kept += len;
            split = i;
        }
        if split == 0 {
            return;
        }
        let old: Vec<serde_json::Value> = self.state.history[..split]
            .iter()
            .map(HistoryItem::to_prompt_json)
            .collect();
        let mut text = serde_json::Value::Array(old).to_string();
        if text.len() > budget {
            let mut end = budget;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
        }
        let request = ModelRequest {
            system: SUMMARY_SYSTEM.into(),
            messages: vec![ChatMessage::user(format!(
                "Summarise this history:\n{text}"
            ))],
            max_tokens: 1024,
            temperature: None,
            prefill: None,
        };
        let Some(summary) = self.summarise(request).await else {
            return;
        };
        let item = HistoryItem::MemoryTransition {
            agent_facing_message: format!("Summary of earlier history: {summary}"),
            user_facing_message: None,
            memory_level: level,
        };
        self.state.history.splice(..split, [item]);
        tracing::info!(fairy = %self.entity.id, items = split, "chat history compacted");
    }

    async fn summarise(&self, request: ModelRequest) -> Option<String> {
        let mut stream = self.model.stream(request);
        let mut text = String::new();
        while let Some(event) = stream.next().await {
            match event {
                Ok(ModelEvent::TextDelta(t)) => text.push_str(&t),
                Ok(ModelEvent::Retry { discard: true, .. }) => text.clear(),
                Ok(ModelEvent::Done { .. }) => break,
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(fairy = %self.entity.id, %error, "history summary failed");
                    return None;
                }
            }
        }
        let text: String = text.trim().chars().take(MAX_SUMMARY_CHARS).collect();
        (!text.is_empty()).then_some(text)
    }
}
