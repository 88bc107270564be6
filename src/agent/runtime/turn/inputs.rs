//! The prompt builder of a turn: what the prompt is built from, gathered once per turn
//! ([`Gathered`]: the changes since the last request, the corrections and notes for the model,
//! the parts beside the shapes, the review part), and the model request built from it
//! ([`TurnPrompt`]: the request and the transform its coordinates went through, which the
//! action pipeline needs to read the answer's coordinates back). A context overflow builds the
//! prompt again from the same gathering, with the recovery level's messages and budget.
//!
//! The stage is a value, the [`TurnInputs`]: what the prompt is built from (the fairy's state,
//! mode and bounds, the room, the live view of its shapes, its awareness peer, the registry,
//! the model, its project part, where the history was split before), borrowed from the runtime
//! for one call ([`FairyRuntime::inputs`]). Besides what the prompt holds beside the shapes
//! (docs/fairies.md "What a fairy sees": the pages, the task it works on, the viewport of the
//! person who asked, the model's name, the room's instructions — from the store, at every
//! turn, so an admin's edit reaches the next turn — and with `--llm-vision` a screenshot of the
//! request bounds, read and rendered in the screenshot pool, [`screenshot::shoot`]), it
//! gathers review mode's landing of the turn, the [`Suggester`].
//!
//! Reads the room (shapes through the live view, presence, suggestions, the store's
//! instructions) and the fairy's state; writes nothing but the review part's "decisions told"
//! mark. The prompt's text is [`crate::agent::prompt`]'s.

use std::sync::Arc;

use serde_json::Value;
use yrs::Transact;

use crate::agent::actions::Registry;
use crate::agent::apply::changes::{ChangeReport, ChangeTracker};
use crate::agent::apply::suggest::{Author, Suggester};
use crate::agent::modes::Mode;
use crate::agent::presence::beacon::Beacon;
use crate::agent::prompt::parts::{PromptExtras, ReviewPart, WorkingTask};
use crate::agent::prompt::screenshot;
use crate::agent::prompt::{PromptInput, build_request};
use crate::agent::runtime::FairyRuntime;
use crate::agent::runtime::project_work::ProjectWork;
use crate::agent::runtime::viewport::user_viewport;
use crate::agent::state::fairy::FairyEntity;
use crate::agent::state::{FairyState, Request};
use crate::agent::work::Membership;
use crate::canvas::geometry::Bounds;
use crate::canvas::page::list_pages;
use crate::canvas::transform::PromptTransform;
use crate::clock::SharedClock;
use crate::ids::RequestId;
use crate::llm::{Billing, Model, ModelRequest};
use crate::room::Room;

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

/// What a turn's prompt is built from, and how it is read (see the module docs).
pub(super) struct TurnInputs<'a> {
    /// The fairy's state: history, todo, tasks, page, project, chat origin, decisions told.
    state: &'a mut FairyState,
    entity: &'a FairyEntity,
    mode: Mode,
    /// The running request's bounds.
    bounds: Bounds,
    room: &'a Arc<Room>,
    /// The live view of the room's shapes, and the changes of others.
    tracker: &'a ChangeTracker,
    beacon: &'a Beacon,
    registry: &'a Registry,
    model: &'a Arc<dyn Model>,
    clock: &'a SharedClock,
    /// Its part in a project: the prompt's project part, changes scoped to its task.
    projects: &'a ProjectWork,
    /// Where the history was split for the last calls.
    history_marks: &'a HistoryMarks,
    /// The turn's canvas actions land as suggestions (review mode).
    reviewing: bool,
    /// A screenshot goes with the prompt (`--llm-vision`).
    vision: bool,
}

impl FairyRuntime {
    /// The turn's inputs as the fairy stands now.
    pub(super) fn inputs(&mut self) -> TurnInputs<'_> {
        TurnInputs {
            state: &mut self.state,
            entity: &self.entity,
            mode: self.modes.mode(),
            bounds: self.bounds,
            room: &self.room,
            tracker: &self.tracker,
            beacon: &self.beacon,
            registry: &self.registry,
            model: &self.model,
            clock: &self.clock,
            projects: &self.projects,
            history_marks: &self.history_marks,
            reviewing: self.landing.reviewing(),
            vision: self.config.vision,
        }
    }
}

/// Who pays for the model calls of `request` beside the room: the person who asked and
/// the project the fairy works in (its `membership`).
pub(in crate::agent::runtime) fn billing_of(
    request: &Request,
    membership: Option<&Membership>,
) -> Billing {
    Billing {
        person: request.from_user.clone(),
        project: membership.map(|m| m.project_id.as_str().to_owned()),
    }
}

impl TurnInputs<'_> {
    /// In review mode (the project's way in a live project, else `apply`, the request's), the
    /// turn's [`Suggester`] over the room's shapes now, for request `request_id`.
    pub fn suggester(
        &self,
        request: &Request,
        (request_id, apply): (Option<&RequestId>, crate::review::ApplyMode),
    ) -> Option<Suggester> {
        let apply = self
            .projects
            .apply_mode(self.state.project.as_ref())
            .unwrap_or(apply);
        if apply != crate::review::ApplyMode::Suggest {
            return None;
        }
        let author = Author {
            fairy: self.entity.id.clone(),
            request: request_id?.clone(),
            prompted_by: super::super::prompted_by(self.entity, request.from_user.as_deref()),
            model: self.model.name(),
        };
        Some(Suggester::new(
            self.room.clone(),
            self.tracker.shapes(),
            author,
            self.clock.clone(),
        ))
    }

    /// Gathers what the turn's prompt is built from, with `told` (the corrections and notes
    /// for the model); starts the change tracker's next report.
    pub async fn gather(&mut self, request: &Request, told: Vec<String>) -> Gathered {
        let origin = self
            .state
            .chat_origin
            .unwrap_or((self.bounds.x, self.bounds.y));
        let mut transform = PromptTransform::new(origin.0, origin.1);
        let changes = self.projects.scope_changes(
            (self.mode, self.state.project.as_ref()),
            (self.tracker, &self.state.page_id),
            self.tracker.report(&mut transform),
        );
        self.tracker.start_request();
        let corrections = told;
        let mut extras = self.extras(request).await;
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
    pub fn build(
        &self,
        request: &Request,
        gathered: &Gathered,
        (messages, history_budget): (&[String], usize),
    ) -> TurnPrompt {
        let mut transform = gathered.transform.clone();
        let shapes = self.tracker.shapes();
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
            fairy: self.entity,
            mode: self.mode,
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
            project: self
                .projects
                .prompt_part(self.mode, self.state.project.as_ref()),
            extras: &gathered.extras,
        };
        let mut model_request = build_request(&input, self.registry, &mut transform);
        model_request.billing = billing_of(request, self.state.project.as_ref());
        TurnPrompt {
            request: model_request,
            transform,
        }
    }

    /// Everything [`PromptExtras`] holds, for `request` at the current bounds.
    async fn extras(&self, request: &Request) -> PromptExtras {
        let pages = list_pages(&self.room.doc().transact());
        let working = matches!(
            self.mode,
            Mode::WorkingSolo | Mode::WorkingDrone | Mode::WorkingOrchestrator
        );
        let working_task = working
            .then(|| {
                let id = self.state.current_task.as_ref()?;
                let task = self.state.tasks.iter().find(|t| &t.id == id)?;
                Some(WorkingTask {
                    id: task.id.clone(),
                    title: task.title.clone(),
                    text: task.text.clone(),
                    bounds: task.bounds,
                })
            })
            .flatten();
        let user_viewport = request.from_user.as_deref().and_then(|sub| {
            let own = self.room.presence_of(sub);
            user_viewport(&own, sub)
        });
        let instructions = match self
            .room
            .store()
            .side()
            .load_instructions(self.room.name())
            .await
        {
            Ok(text) => text,
            Err(error) => {
                tracing::warn!(fairy = %self.entity.id, %error, "room instructions not read; this turn goes without them");
                None
            }
        };
        // Read and drawn in the screenshot pool, never waited for past the render budget.
        let (screenshot, screenshot_note) = if self.vision {
            // From the room's live view: the pool never walks the document under its lock.
            // Only what the screenshot can show is copied for the pool, in z-order.
            let page = self.state.page_id.clone();
            let all = self.tracker.shapes();
            let mut shapes: Vec<_> = crate::canvas::render::visible(&all, &page, &self.bounds)
                .into_iter()
                .cloned()
                .collect();
            shapes.sort_by(crate::canvas::shape::paint_order);
            match screenshot::shoot(shapes, page, self.bounds).await {
                Ok(shot) => (shot, None),
                Err(skipped) => (None, Some(skipped.note())),
            }
        } else {
            (None, None)
        };
        PromptExtras {
            pages,
            working_task,
            user_viewport,
            model_name: self.model.name(),
            instructions,
            screenshot,
            screenshot_note,
            review: None,
        }
    }

    /// Its pending suggestions (in review mode) and people's decisions on its suggestions not
    /// told yet, for the prompt; marks those decisions told.
    fn review_part(&mut self) -> Option<ReviewPart> {
        use crate::review::record::{self, Status};
        let suggesting = self.reviewing;
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
