//! Keeping a fairy's chat history inside its context budget (issue: "compact it instead of
//! failing"): when the history its mode sees outgrows [`RuntimeConfig::history_budget`], the
//! oldest items are summarised through the model into one memory-transition item; if the model
//! fails, nothing is lost either — the prompt builder folds and truncates what does not fit
//! ([`super::memory::compact_for_prompt`]).
//!
//! When the provider answers that the prompt does not fit its context window, the turn is
//! recovered in levels ([`OverflowRecovery`]): first the older history is summarised (even under
//! budget) and the call made again; then oversized items are truncated, the prompt's history
//! budget cut to a quarter and long messages clipped, and the call made again; then the turn
//! fails and the runtime reports it (a chat message and an `error` event). Each level is told
//! to observers as a `compaction` event.
//!
//! The stage is a value, [`Compaction`], that borrows only what it uses.
//!
//! [`RuntimeConfig::history_budget`]: crate::agent::state::RuntimeConfig

use futures_util::StreamExt;

use serde_json::Value;

use crate::agent::modes::MemoryLevel;
use crate::agent::runtime::FairyRuntime;
use crate::agent::runtime::events::{AgentEvent, CompactionLevel, CompactionReason, UsagePurpose};
use crate::agent::runtime::report::Emitter;
use crate::agent::state::memory::{ActionJson, HistoryItem, filter_by_level, visible_indices};
use crate::ids::FairyId;
use crate::llm::{Billing, ChatMessage, Model, ModelEvent, ModelRequest, Usage};
use std::sync::Arc;

/// Longest summary kept, in characters.
const MAX_SUMMARY_CHARS: usize = 4000;

const SUMMARY_SYSTEM: &str = "You summarise a fairy's chat history for the fairy's own memory. \
Write a few plain sentences: what the user asked, what was drawn or changed (with shape ids), \
and anything still open. No JSON, no preamble.";

/// Longest string kept in a history item after a context overflow, in characters.
pub const OVERFLOW_ITEM_CHARS: usize = 1_000;
/// Longest request message kept after a context overflow, in characters.
pub const OVERFLOW_MESSAGE_CHARS: usize = 8_000;

fn rendered_len(item: &HistoryItem) -> usize {
    item.prompt_text().len()
}

/// How far a turn's context-overflow recovery went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum OverflowRecovery {
    /// Nothing tried yet.
    #[default]
    None,
    /// The older history was summarised.
    Summarised,
    /// Oversized items were truncated and the prompt's budgets cut.
    Truncated,
}

impl OverflowRecovery {
    /// The history budget of the prompt at this level.
    pub fn history_budget(self, configured: usize) -> usize {
        match self {
            OverflowRecovery::Truncated => configured / 4,
            _ => configured,
        }
    }

    /// The request's messages at this level (clipped once truncation started).
    pub fn messages(self, messages: &[String]) -> Vec<String> {
        match self {
            OverflowRecovery::Truncated => messages
                .iter()
                .map(|m| clip(m, OVERFLOW_MESSAGE_CHARS))
                .collect(),
            _ => messages.to_vec(),
        }
    }
}

/// `text` cut to `max` characters, saying so.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let head: String = text.chars().take(max).collect();
    format!("{head}… (truncated)")
}

/// Clips every string in `value` to `max` characters; true if one was.
fn clip_value(value: &mut Value, max: usize) -> bool {
    match value {
        Value::String(s) if s.chars().count() > max => {
            *s = clip(s, max);
            true
        }
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |any, v| clip_value(v, max) | any),
        Value::Object(map) => map
            .values_mut()
            .fold(false, |any, v| clip_value(v, max) | any),
        _ => false,
    }
}

/// Clips the strings of one history item to `max` characters; true if one was.
pub fn truncate_item(item: &mut HistoryItem, max: usize) -> bool {
    let clip_string = |s: &mut String| {
        let cut = s.chars().count() > max;
        if cut {
            *s = clip(s, max);
        }
        cut
    };
    match item {
        HistoryItem::Prompt {
            agent_facing_message,
            ..
        } => clip_string(agent_facing_message),
        HistoryItem::Action { action, note, .. } => {
            let mut value = action.to_value();
            let a = clip_value(&mut value, max);
            if a {
                *action = ActionJson::new(&value);
            }
            note.as_mut().is_some_and(clip_string) | a
        }
        HistoryItem::Continuation { data, .. } => data
            .iter_mut()
            .fold(false, |any, v| clip_value(v, max) | any),
        HistoryItem::MemoryTransition {
            agent_facing_message,
            ..
        } => clip_string(agent_facing_message),
    }
}

/// The positions of the items of `level` the mode sees, before the newest ones that fit in
/// `keep` characters.
fn older_at_level(history: &[HistoryItem], level: MemoryLevel, keep: usize) -> Vec<usize> {
    let visible = visible_indices(history, level);
    let mut kept = 0usize;
    let mut split = visible.len();
    for (k, &i) in visible.iter().enumerate().rev() {
        let len = rendered_len(&history[i]);
        if kept + len > keep {
            break;
        }
        kept += len;
        split = k;
    }
    visible[..split].to_vec()
}

/// Replaces the items at `indices` (ascending) with `summary`, in the place of the first.
fn fold(history: &mut Vec<HistoryItem>, indices: &[usize], summary: HistoryItem) {
    let Some(&first) = indices.first() else {
        return;
    };
    let mut summary = Some(summary);
    let old = std::mem::take(history);
    for (i, item) in old.into_iter().enumerate() {
        if i == first {
            history.extend(summary.take());
        } else if indices.binary_search(&i).is_err() {
            history.push(item);
        }
    }
}

/// The compaction stage: a fairy's history and what compacting it needs (its mode's memory
/// level, the budget, the model and who pays, where its events go), borrowed from the runtime
/// for one compaction ([`FairyRuntime::compaction`]).
pub(in crate::agent::runtime) struct Compaction<'a> {
    /// The history it compacts.
    pub history: &'a mut Vec<HistoryItem>,
    /// The memory level of the fairy's mode: the items it sees.
    pub level: MemoryLevel,
    /// The history budget (`RuntimeConfig::history_budget`), in characters.
    pub budget: usize,
    /// The model that summarises.
    pub model: &'a Arc<dyn Model>,
    /// Who pays for the summary (the request it serves).
    pub billing: &'a Billing,
    /// The fairy, for the logs.
    pub fairy: &'a FairyId,
    /// Where its events go.
    pub out: &'a Emitter,
}

impl FairyRuntime {
    /// The compaction stage over this fairy's history, in its current mode.
    pub(in crate::agent::runtime) fn compaction(&mut self) -> Compaction<'_> {
        Compaction {
            history: &mut self.state.history,
            level: self.modes.mode().memory_level(),
            budget: self.config.history_budget,
            model: &self.model,
            billing: &self.billing,
            fairy: &self.entity.id,
            out: &self.out,
        }
    }
}

impl Compaction<'_> {
    /// Summarises the oldest history items when the history the current mode sees is over
    /// budget. Best effort: a model failure leaves the history as it is.
    pub async fn when_over_budget(mut self) {
        let budget = self.budget;
        let level = self.level;
        // Newest first, and no further than the budget: the cost is the budget's.
        let mut visible = 0usize;
        let over = filter_by_level(self.history, level).iter().rev().any(|i| {
            visible += rendered_len(i);
            visible > budget
        });
        if !over {
            return;
        }
        self.summarise_older(budget / 2, CompactionReason::Budget)
            .await;
    }

    /// Summarises the items the current mode sees (those of its memory level, see
    /// [`visible_indices`]) before the newest ones that fit in `keep` characters into one
    /// memory-transition item of that level, in the place of the first; items of other levels
    /// stay as they are. The number of items summarised (0 when nothing was, or the model
    /// failed).
    async fn summarise_older(&mut self, keep: usize, reason: CompactionReason) -> usize {
        let budget = self.budget;
        let level = self.level;
        let older = older_at_level(self.history, level, keep);
        if older.is_empty() {
            return 0;
        }
        let split = older.len();
        let old: Vec<serde_json::Value> = older
            .iter()
            .map(|&i| self.history[i].to_prompt_json())
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
            // A summary, not a fairy's turn: no mode; paid like the request it serves.
            billing: self.billing.clone(),
            ..ModelRequest::default()
        };
        let Some(summary) = self.summarise(request).await else {
            return 0;
        };
        let item = HistoryItem::MemoryTransition {
            agent_facing_message: format!("Summary of earlier history: {summary}"),
            user_facing_message: None,
            memory_level: level,
        };
        fold(self.history, &older, item);
        tracing::info!(fairy = %self.fairy, items = split, ?reason, "chat history compacted");
        self.out.emit(AgentEvent::Compaction {
            level: CompactionLevel::Summary,
            reason,
            items: split,
        });
        split
    }

    /// The next level of recovery after the provider said the prompt does not fit: false when
    /// every level was tried (the caller reports the failure).
    pub async fn recover_overflow(mut self, recovery: &mut OverflowRecovery) -> bool {
        if *recovery == OverflowRecovery::None {
            *recovery = OverflowRecovery::Summarised;
            // Keep only the newest items that fit in a quarter of the budget.
            let keep = self.budget / 4;
            if self
                .summarise_older(keep, CompactionReason::ContextOverflow)
                .await
                > 0
            {
                return true;
            }
            // Nothing could be summarised: go on to the next level at once.
        }
        if *recovery == OverflowRecovery::Summarised {
            *recovery = OverflowRecovery::Truncated;
            let items = self
                .history
                .iter_mut()
                .map(|item| truncate_item(item, OVERFLOW_ITEM_CHARS))
                .filter(|cut| *cut)
                .count();
            tracing::info!(fairy = %self.fairy, items, "context overflow: history truncated");
            self.out.emit(AgentEvent::Compaction {
                level: CompactionLevel::Truncate,
                reason: CompactionReason::ContextOverflow,
                items,
            });
            return true;
        }
        false
    }

    async fn summarise(&self, request: ModelRequest) -> Option<String> {
        let mut stream = self.model.stream(request);
        let mut text = String::new();
        let (mut usage, mut spent, mut attempts) = (Usage::default(), Usage::default(), 1);
        let failed = loop {
            match stream.next().await {
                None | Some(Ok(ModelEvent::Done { .. })) => break None,
                Some(Ok(ModelEvent::TextDelta(t))) => text.push_str(&t),
                Some(Ok(ModelEvent::Usage(u))) => usage = u,
                Some(Ok(ModelEvent::Retry {
                    attempt,
                    error,
                    discard,
                    wait,
                })) => {
                    attempts = attempt;
                    self.out
                        .emit(AgentEvent::retry(attempt, &error, discard, wait));
                    spent = spent.with_attempt(&usage);
                    usage = Usage::default();
                    if discard {
                        text.clear();
                    }
                }
                Some(Err(error)) => break Some(error),
            }
        };
        drop(stream);
        let total = spent.with_attempt(&usage);
        crate::metrics::global().count_model_tokens(total.input_tokens, total.output_tokens);
        crate::metrics::global().count_cache_tokens(
            total.cache_read_input_tokens,
            total.cache_creation_input_tokens,
        );
        let cost = self.model.cost(&total);
        self.out.emit(AgentEvent::usage(
            UsagePurpose::Summary,
            &total,
            attempts,
            cost,
        ));
        if let Some(error) = failed {
            tracing::warn!(fairy = %self.fairy, %error, "history summary failed");
            return None;
        }
        let text: String = text.trim().chars().take(MAX_SUMMARY_CHARS).collect();
        (!text.is_empty()).then_some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn truncation_clips_every_long_string_of_an_item() {
        let long = "x".repeat(50);
        let mut item = HistoryItem::Action {
            action: json!({"_type": "message", "text": long, "n": 1, "list": [long]}).into(),
            acceptance: crate::agent::state::memory::Acceptance::Accepted,
            note: Some(long.clone()),
            memory_level: MemoryLevel::Fairy,
        };
        assert!(truncate_item(&mut item, 10));
        let text = item.to_prompt_json().to_string();
        assert!(!text.contains(&long), "{text}");
        assert!(text.contains("(truncated)"));
        assert!(!truncate_item(&mut item, 100), "nothing left to cut");
        let mut short = HistoryItem::Prompt {
            source: "user".into(),
            agent_facing_message: "hi".into(),
            memory_level: MemoryLevel::Fairy,
            request_id: None,
            acceptance: None,
        };
        assert!(!truncate_item(&mut short, 10));
    }

    #[test]
    fn compaction_folds_only_the_items_of_its_level() {
        let item = |text: &str, level| HistoryItem::Prompt {
            source: "user".into(),
            agent_facing_message: text.repeat(20),
            memory_level: level,
            request_id: None,
            acceptance: None,
        };
        use MemoryLevel::{Fairy, Project, Task};
        let mut history = vec![
            item("f", Fairy),
            item("p", Project),
            item("t", Task),
            item("q", Project),
            item("r", Project),
        ];
        let keep = rendered_len(&history[4]);
        let older = older_at_level(&history, Project, keep);
        assert_eq!(
            older,
            [1, 3],
            "the project items before the newest, nothing else"
        );
        let summary = HistoryItem::MemoryTransition {
            agent_facing_message: "summary".into(),
            user_facing_message: None,
            memory_level: Project,
        };
        fold(&mut history, &older, summary.clone());
        assert_eq!(history.len(), 4);
        assert_eq!(history[0].memory_level(), Fairy, "the fairy item survives");
        assert_eq!(history[1], summary);
        assert_eq!(history[2].memory_level(), Task);
        assert!(older_at_level(&history, Fairy, 0).len() == 1);
    }

    #[test]
    fn recovery_levels_cut_budgets_only_when_truncating() {
        let msgs = vec!["y".repeat(OVERFLOW_MESSAGE_CHARS + 100)];
        assert_eq!(OverflowRecovery::None.history_budget(400), 400);
        assert_eq!(OverflowRecovery::Summarised.messages(&msgs), msgs);
        assert_eq!(OverflowRecovery::Truncated.history_budget(400), 100);
        let clipped = OverflowRecovery::Truncated.messages(&msgs);
        assert!(clipped[0].chars().count() < msgs[0].chars().count());
    }
}
