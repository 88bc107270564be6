//! The prompt builder of a turn: what the prompt is built from, gathered once per turn
//! ([`Gathered`]: the changes since the last request, the corrections and notes for the model,
//! the parts beside the shapes, the review part), and the model request built from it
//! ([`TurnPrompt`]: the request and the transform its coordinates went through, which the
//! action pipeline needs to read the answer's coordinates back). A context overflow builds the
//! prompt again from the same gathering, with the recovery level's messages and budget.
//!
//! Reads the room (shapes through the live view, presence, suggestions) and the fairy's state;
//! writes nothing but the review part's "decisions told" mark. The prompt's text is
//! [`crate::agent::prompt`]'s.

use serde_json::Value;

use crate::agent::apply::changes::ChangeReport;
use crate::agent::prompt::parts::{PromptExtras, ReviewPart};
use crate::agent::prompt::{PromptInput, build_request};
use crate::agent::runtime::FairyRuntime;
use crate::agent::state::Request;
use crate::canvas::transform::PromptTransform;
use crate::llm::{Billing, ModelRequest};

/// History blocks kept apart at most (Anthropic looks 20 blocks back for a cached prefix).
const MAX_HISTORY_MARKS: usize = 16;

/// What a turn's prompt is built from, gathered once per turn.
pub(super) struct Gathered {
    /// The transform the changes were offset by (each build starts from a copy).
    transform: PromptTransform,
    /// What others changed since the fairy's last request (scoped to its task's bounds).
    changes: ChangeReport,
    /// The previous turn's corrections, then the sanitizer's notes.
    corrections: Vec<String>,
    /// Pages, task, viewport, model name, instructions, screenshot, review part.
    extras: PromptExtras,
}

/// The length of the history at each of its last model calls, oldest first: the prompt
/// splits the history there so that a call's prefix stays a prefix of the next (a few dozen
/// at most).
#[derive(Debug, Default)]
pub(in crate::agent::runtime) struct HistoryMarks(Vec<usize>);

impl HistoryMarks {
    /// Remembers where the history (`len` items) ended for the call just built: the next
    /// prompts split their history there. Marks past the history's end (it was summarised or
    /// cut) are forgotten; past [`MAX_HISTORY_MARKS`], the older half is, so the blocks change
    /// rarely.
    pub fn mark(&mut self, len: usize) {
        let marks = &mut self.0;
        if marks.last().is_some_and(|&m| m > len) {
            marks.clear();
        }
        if marks.last() != Some(&len) {
            marks.push(len);
        }
        if marks.len() > MAX_HISTORY_MARKS {
            marks.drain(..MAX_HISTORY_MARKS / 2);
        }
    }

    /// The marks, oldest first.
    pub fn as_slice(&self) -> &[usize] {
        &self.0
    }
}

/// A turn's model request, with the transform its coordinates went through: the hand-off
/// from the prompt builder to the streaming loop.
pub(super) struct TurnPrompt {
    /// What the model is sent.
    pub request: ModelRequest,
    /// How to read the answer's coordinates back.
    pub transform: PromptTransform,
}

impl FairyRuntime {
    /// Gathers what the turn's prompt is built from; starts the change tracker's next
    /// report and takes the pending corrections and notes.
    pub(super) async fn gather_prompt(&mut self, request: &Request) -> Gathered {
        let origin = self
            .state
            .chat_origin
            .unwrap_or((self.bounds.x, self.bounds.y));
        let mut transform = PromptTransform::new(origin.0, origin.1);
        let changes = self.scope_changes(self.tracker.report(&mut transform));
        self.tracker.start_request();
        let mut corrections = std::mem::take(&mut self.corrections);
        corrections.append(&mut self.notes);
        let mut extras = self.prompt_extras(request).await;
        extras.review = self.review_part();
        Gathered {
            transform,
            changes,
            corrections,
            extras,
        }
    }

    /// The model request for `request` from `gathered`, with the request's `messages` and the
    /// history's budget in characters as the turn's overflow recovery level has them.
    pub(super) fn build_prompt(
        &self,
        request: &Request,
        gathered: &Gathered,
        (messages, history_budget): (&[String], usize),
    ) -> TurnPrompt {
        let mut transform = gathered.transform.clone();
        let shapes = self.shapes_now();
        let me = self.beacon.client_id();
        let other_fairies: Vec<Value> = self
            .room
            .presence()
            .into_iter()
            .filter(|(id, _)| *id != me)
            .filter_map(|(_, s)| {
                let f = s.get("fairy")?;
                Some(serde_json::json!({"id": f["id"], "name": f["name"], "x": f["x"], "y": f["y"], "mode": f["mode"]}))
            })
            .collect();
        let tasks: Vec<_> = self.beacon.snapshot().tasks;
        let input = PromptInput {
            fairy: &self.entity,
            mode: self.modes.mode(),
            history: &self.state.history,
            messages,
            bounds: self.bounds,
            page_id: &self.state.page_id,
            shapes: &shapes,
            selected: &request.selected,
            changes: &gathered.changes,
            todo: &self.state.todo,
            tasks: &tasks,
            other_fairies,
            corrections: &gathered.corrections,
            time: crate::agent::prompt::parts::readable_time(self.clock.unix_millis()),
            history_budget,
            history_marks: self.history_marks.as_slice(),
            project: self.project_part(),
            extras: &gathered.extras,
        };
        let mut model_request = build_request(&input, &self.registry, &mut transform);
        model_request.billing = self.billing_of(request);
        TurnPrompt {
            request: model_request,
            transform,
        }
    }

    /// Who pays for the model calls of `request` beside the room: the person who asked and
    /// the project the fairy works in.
    pub(in crate::agent::runtime) fn billing_of(&self, request: &Request) -> Billing {
        Billing {
            person: request.from_user.clone(),
            project: self
                .state
                .project
                .as_ref()
                .map(|m| m.project_id.as_str().to_owned()),
        }
    }

    /// Its pending suggestions (in review mode) and people's decisions on its suggestions not
    /// told yet, for the prompt; marks those decisions told.
    fn review_part(&mut self) -> Option<ReviewPart> {
        use crate::review::record::{self, Status};
        let suggesting = self.landing.reviewing();
        let mine: Vec<record::Suggestion> = {
            let txn = yrs::Transact::transact(self.room.doc());
            let any = yrs::ReadTxn::get_map(&txn, crate::canvas::schema::SUGGESTIONS)
                .is_some_and(|root| yrs::Map::len(&root, &txn) > 0);
            if !any {
                Vec::new()
            } else {
                record::list(&txn)
                    .into_iter()
                    .filter(|s| s.fairy_id == self.entity.id)
                    .collect()
            }
        };
        let mut part = ReviewPart {
            suggesting,
            ..ReviewPart::default()
        };
        for s in mine {
            match s.status {
                Status::Pending if suggesting => part.pending.push(s),
                Status::Pending => {}
                _ if s.decided_at.unwrap_or(0.0) > self.state.decisions_told => {
                    part.decided.push(s)
                }
                _ => {}
            }
        }
        part.pending.sort_by(|a, b| a.at.total_cmp(&b.at));
        part.decided.sort_by(|a, b| {
            a.decided_at
                .unwrap_or(0.0)
                .total_cmp(&b.decided_at.unwrap_or(0.0))
        });
        if let Some(newest) = part.decided.last().and_then(|s| s.decided_at) {
            self.state.decisions_told = newest;
        }
        (!part.is_empty()).then_some(part)
    }
}
