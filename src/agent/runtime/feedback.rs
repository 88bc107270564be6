//! What the model is told about its own answer: the [`Feedback`] value keeps the corrections
//! it must answer next turn (rejected actions, broken JSON: a request with corrections runs
//! another turn), the sanitizer's notes (told with the next prompt, no reason for another
//! turn), whether an action's correction cut the rest of the answer, and why the last turn hit
//! a per-turn bound. Every verdict on a complete action goes through it: kept in the history as
//! accepted or rejected, counted, and a rejection told to the observers and to the model.
//!
//! Must not touch the document or the store.

use serde_json::Value;

use super::report::Emitter;
use crate::agent::modes::MemoryLevel;
use crate::agent::runtime::events::AgentEvent;
use crate::agent::state::memory::{Acceptance, ActionJson, HistoryItem};
use crate::ids::FairyId;
use crate::partial_json::StreamedAction;

/// What the model is told about its answers (see the module docs).
#[derive(Debug, Default)]
pub(super) struct Feedback {
    /// What the model must answer next turn (rejected actions, broken JSON): a request with
    /// corrections runs another turn.
    corrections: Vec<String>,
    /// What the sanitizer changed in accepted actions (a colliding id renamed, a number read
    /// from a string): told to the model with its next prompt, but no reason for another turn.
    /// Beside other fairies, ids collide all the time (their shapes are in the same `shapes`
    /// map), and a follow-up for every rename kept requests running to the turn cap.
    notes: Vec<String>,
    /// Set by an action that interrupts the rest of the answer with its correction (the
    /// design's error-correction interrupt: a refused direction); the turn drops the stream.
    cut_answer: bool,
    /// Set when the last turn hit a per-turn bound (`--fairy-turn-max-actions`,
    /// `--fairy-turn-max-secs`): why, for the chat; the request ends after that turn.
    turn_bound: Option<String>,
}

impl Feedback {
    /// A new request: nothing pending from the last one.
    pub fn clear(&mut self) {
        self.corrections.clear();
        self.notes.clear();
    }

    /// Tells the model `why` next turn.
    pub fn correct(&mut self, why: String) {
        self.corrections.push(why);
    }

    /// Whether a correction waits for the next turn.
    pub fn has_corrections(&self) -> bool {
        !self.corrections.is_empty()
    }

    /// The sanitizer's notes on an accepted action, for the next prompt.
    pub fn note(&mut self, notes: impl IntoIterator<Item = String>) {
        self.notes.extend(notes);
    }

    /// What the next prompt tells: the corrections, then the notes (both taken).
    pub fn take_for_prompt(&mut self) -> Vec<String> {
        let mut told = std::mem::take(&mut self.corrections);
        told.append(&mut self.notes);
        told
    }

    /// Cuts the rest of the answer (when `cut`): what the model planned after a refused
    /// direction is not carried out.
    pub fn cut_answer(&mut self, cut: bool) {
        self.cut_answer = cut;
    }

    /// Whether the rest of the answer is cut.
    pub fn answer_cut(&self) -> bool {
        self.cut_answer
    }

    /// Whether the answer was cut; the next answer starts uncut.
    pub fn take_cut(&mut self) -> bool {
        std::mem::take(&mut self.cut_answer)
    }

    /// The turn hit a per-turn bound: why, for the chat.
    pub fn bound(&mut self, why: String) {
        self.turn_bound = Some(why);
    }

    /// Why the last turn hit a per-turn bound, if it did (taken).
    pub fn take_bound(&mut self) -> Option<String> {
        self.turn_bound.take()
    }

    /// Whether `a` is past the `cap` actions (`--fairy-turn-max-actions`; 0: none) a turn may
    /// apply: then nothing of it is applied and the answer is cut (as a correction's interrupt
    /// cuts it), with why for the chat. An answer of exactly `cap` actions ends normally.
    pub fn past_action_cap(&mut self, cap: usize, fairy: &FairyId, a: &StreamedAction) -> bool {
        if cap == 0 || a.index < cap {
            return false;
        }
        tracing::info!(fairy = %fairy, cap, "turn action cap: model stream dropped");
        self.bound(format!(
            "one answer went past the {cap} actions a turn may apply"
        ));
        self.cut_answer = true;
        true
    }

    /// A complete action accepted: kept in `history` (with the sanitizer's `note`) and counted.
    pub fn accept(
        &self,
        history: &mut Vec<HistoryItem>,
        action: &Value,
        note: String,
        level: MemoryLevel,
    ) {
        let metrics = crate::metrics::global();
        crate::metrics::Metrics::count(&metrics.fairy_actions, Acceptance::Accepted.as_str(), 1);
        history.push(HistoryItem::Action {
            action: ActionJson::new(action),
            acceptance: Acceptance::Accepted,
            note: (!note.is_empty()).then_some(note),
            memory_level: level,
        });
    }

    /// A complete action refused: counted, told to the observers (through `out`) and to the
    /// model, and kept in `history` as rejected with `why`.
    pub fn reject(
        &mut self,
        (history, out): (&mut Vec<HistoryItem>, &Emitter),
        (action, kind): (&Value, &str),
        why: String,
        level: MemoryLevel,
    ) {
        let metrics = crate::metrics::global();
        crate::metrics::Metrics::count(&metrics.fairy_actions, Acceptance::Rejected.as_str(), 1);
        out.emit(AgentEvent::ActionRejected {
            action_type: kind.into(),
            reason: why.clone(),
        });
        self.corrections.push(format!("Rejected '{kind}': {why}"));
        history.push(HistoryItem::Action {
            action: ActionJson::new(action),
            acceptance: Acceptance::Rejected,
            note: Some(why),
            memory_level: level,
        });
    }
}
