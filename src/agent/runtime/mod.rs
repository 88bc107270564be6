//! One fairy at work in one loaded room: its private state (mode, history, todo, tasks, chat
//! origin; kept in the store through a [`StateSaver`], never in the document), the request loop (docs/fairies.md "requests": a prompt runs turns while a request is
//! scheduled or the mode's `on_prompt_end` asks for more, up to
//! [`RuntimeConfig::max_iterations`]), cancellation (revert the incomplete tentative action,
//! `on_prompt_cancel`), failure (revert, chat message, idle) and restoring after a restart
//! ([`FairyRuntime::restore`]). Each request has an id (the prompt route's, or one made here):
//! its `request-started` event, history items and chat items carry it, and its change tracker
//! records what it changed so that it can be taken back ([`crate::agent::runtime::revert`]).
//!
//! # Layout (parent → child only: children use this type and its helpers, never a sibling)
//! `FairyRuntime` keeps the request loop and hands typed values between its stages; each stage
//! is a value of its own that holds what it uses (owned, or borrowed from the runtime for one
//! call), so a stage's code names its inputs instead of reaching through `self`. Its methods
//! are counted by `python3 scripts/count-methods.py FairyRuntime src` (at most 40).
//! - this file: the type, its construction and restore, saving its state, and the helpers
//!   every child shares (`say`, `schedule`, `switch_mode` and `enact_outcome`,
//!   `refresh_tasks`).
//! - `request`: the request loop — starting, running turns, finishing, aborting, failing.
//! - `turn/`: one model turn along its pipeline — the prompt's inputs (`TurnInputs`), the
//!   streaming loop, the action checks (`Gate`), the canvas end (`CanvasStage`), the runtime
//!   actions (`SoloWork`), and keeping the history in budget (`Compaction`); its own module
//!   docs give the hand-offs.
//! - `feedback`: what the model is told about its answers (`Feedback`: corrections, notes, a
//!   cut answer, a turn's bound; every accepted or rejected action kept in the history).
//! - `steps`: what a stage hands back for the runtime to do (`Step`: switch mode, schedule,
//!   say, …), carried out in order by `FairyRuntime::follow`.
//! - [`interrupt`]: `interrupt({input, mode})` (the [`Interrupt`](crate::agent::state::Interrupt)
//!   data and its merge rule live in [`super::state`]), and, next to it, [`revert`]: taking a
//!   request back.
//! - `report`: the `Emitter` (where its events go), what a request reports to the webhooks
//!   when it ends (`fairy.request.ended`) and the usage its last chat item carries.
//! - [`viewport`]: the viewport of the person who asked (for the prompt and the hub).
//! - [`project_work`]: the fairy's part in a project (`ProjectWork`: the room's projects and the
//!   other fairies; project actions, joining and leaving, what a member sees). The project
//!   data it works with is [`super::projects`]', a lower module that never names the runtime:
//!   dependencies go runtime → projects only.
//!
//! The runtime is driven by its host task ([`crate::agent::host::hub`]); it never holds a lock across an
//! `.await`, and all of its document writes are short transactions with the fairy's origin.
//! Must not touch sockets or the store except through [`StateSaver`] and [`state_store`].

pub mod events;
mod feedback;
pub mod interrupt;
pub mod project_work;
mod report;
mod request;
pub mod revert;
mod steps;
mod turn;
pub mod viewport;

use crate::agent::state::{FairyState, Request, RuntimeConfig};
use std::sync::Arc;

use tokio::sync::broadcast;
use yrs::Transact;

use super::actions::Registry;
use super::modes::{HookCtx, Mode, ModeEffect, ModeMachine, Outcome};
use super::presence::TaskSummary;
use super::work::TodoItem;
use crate::agent::apply::changes::ChangeTracker;
use crate::agent::apply::landing::Landing;
use crate::agent::apply::tentative::{QUIET_PATIENCE, Tentative, TentativeError};
use crate::agent::presence::beacon::Beacon;
use crate::agent::runtime::events::AgentEvent;
use crate::agent::state::fairy::{ChatItem, FairyEntity, append_chat};
use crate::agent::state::memory::HistoryItem;
use crate::agent::state::store as state_store;
use crate::agent::state::store::{StateSaver, StateSync};
use crate::agent::work::TaskStatus;
use crate::canvas::geometry::Bounds;
use crate::canvas::shape::{delete_shape, list_shapes};
use crate::clock::SharedClock;
use crate::ids::RequestId;
use crate::llm::Model;
use crate::origin::TxnOrigin;
use crate::room::Room;
use crate::store::StoreError;

/// How the hub hosts a runtime.
#[derive(Debug, Clone)]
pub struct Hosting {
    /// Where its events go.
    pub events: broadcast::Sender<AgentEvent>,
    /// Its awareness client id (see [`Beacon::draw_client_id`]).
    pub client_id: u64,
    /// How long it waits for a quiet document (normally [`QUIET_PATIENCE`]).
    pub quiet_patience: std::time::Duration,
    /// Its clock: chat and event timestamps, the throttle's instants (normally the system's).
    pub clock: SharedClock,
}

impl Hosting {
    /// A hosting with a fresh client id and the normal patience.
    pub fn new(events: broadcast::Sender<AgentEvent>) -> Self {
        Hosting {
            events,
            client_id: Beacon::draw_client_id(),
            quiet_patience: QUIET_PATIENCE,
            clock: crate::clock::system(),
        }
    }
}

/// A fairy at work in one room.
pub struct FairyRuntime {
    /// Who it is.
    pub entity: FairyEntity,
    /// Its private state (stored by `saver`).
    pub state: FairyState,
    saver: StateSaver,
    modes: ModeMachine,
    room: Arc<Room>,
    beacon: Arc<Beacon>,
    /// Where its canvas actions land: the canvas, or a review-mode turn's suggestions.
    landing: Landing,
    tracker: ChangeTracker,
    model: Arc<dyn Model>,
    registry: Arc<Registry>,
    config: RuntimeConfig,
    /// Where its events go (observers, webhooks).
    out: report::Emitter,
    /// Follow-up scheduled during the current turn.
    scheduled: Option<Request>,
    /// What the model is told about its answers: corrections, notes, a cut answer, a bound.
    feedback: feedback::Feedback,
    /// The length of the history at each of its last model calls, oldest first: the prompt
    /// splits the history there so that a call's prefix stays a prefix of the next
    /// (`turn/inputs.rs`; a few dozen at most).
    history_marks: turn::HistoryMarks,
    /// Who pays for the running request's model calls beside the room (its person, the
    /// fairy's project): budgets and usage totals.
    billing: crate::llm::Billing,
    /// The current request's bounds.
    bounds: Bounds,
    /// The running request's ids (empty between requests).
    request_ids: Vec<RequestId>,
    /// Its part in its room's projects (the room's projects and the other fairies: set by the
    /// hub).
    projects: project_work::ProjectWork,
    /// Its clock (see [`Hosting::clock`]).
    clock: SharedClock,
    /// When the state was last handed to the store.
    persisted_at: Option<std::time::Instant>,
    /// The state changed since it was last handed to the store (see [`FairyRuntime::persist`]).
    unsaved: bool,
    /// How the running request's canvas actions land (its `apply`, else the fairy's default).
    apply: crate::review::ApplyMode,
}

/// Least time between two states handed to the store while the fairy works (see
/// [`FairyRuntime::persist`]).
const PERSIST_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

impl FairyRuntime {
    /// Hosts `entity` in `room` as `hosting` says (events, awareness client id, patience),
    /// with a fresh state written through `saver`; [`FairyRuntime::restore`] then loads the stored one and publishes
    /// the fairy's presence. Run in the fairy's own task: it waits for a quiet moment of the
    /// document (see [`Tentative::new_when_quiet`]) and fails if none comes, before anything
    /// of the fairy is published.
    pub async fn new(
        room: Arc<Room>,
        entity: FairyEntity,
        model: Arc<dyn Model>,
        registry: Arc<Registry>,
        config: RuntimeConfig,
        hosting: Hosting,
        saver: StateSaver,
    ) -> Result<Self, TentativeError> {
        let Hosting {
            events,
            client_id,
            quiet_patience,
            clock,
        } = hosting;
        let doc = room.doc().clone();
        let state = FairyState::default();
        let id = entity.id.as_str().to_owned();
        let tentative = Tentative::new_when_quiet(&doc, &id, quiet_patience).await?;
        let tracker = ChangeTracker::new(&doc, &id, &[tentative.revert_origin()]);
        let landing = Landing::new(tentative);
        let presence = super::presence::Presence::new(
            &entity.id,
            &entity.name,
            state.position.0,
            state.position.1,
        );
        let beacon = Beacon::with_client_id(room.clone(), presence, client_id);
        let out = report::Emitter::new(events, room.clone(), entity.id.clone());
        let projects = project_work::ProjectWork::new(room.clone(), entity.id.clone());
        Ok(FairyRuntime {
            modes: ModeMachine::new(state.mode),
            entity,
            state,
            saver,
            room,
            beacon,
            landing,
            tracker,
            model,
            registry,
            config,
            out,
            scheduled: None,
            feedback: feedback::Feedback::default(),
            history_marks: turn::HistoryMarks::default(),
            billing: crate::llm::Billing::default(),
            bounds: Bounds::default(),
            request_ids: Vec::new(),
            projects,
            clock,
            persisted_at: None,
            unsaved: false,
            apply: crate::review::ApplyMode::Direct,
        })
    }

    /// Loads the fairy's stored state and publishes its presence. A fairy that was working
    /// when the server stopped comes back idle: its half-applied (locked) shapes are removed
    /// and its chat says its work was interrupted. On a store error nothing is changed.
    pub async fn restore(&mut self) -> Result<(), StoreError> {
        let stored = state_store::load(
            self.room.store().as_ref(),
            self.room.name(),
            &self.entity.id,
        )
        .await?;
        let mut state = stored.unwrap_or_default();
        let interrupted = state.working;
        // A member of a live project keeps its mode: it resumes its part (see
        // `resume_project`), with nothing half-drawn left.
        let resumes = interrupted
            && super::projects::membership::resumes_after_restart(
                &state,
                self.projects.book().map(|b| &**b),
            );
        if interrupted {
            state.working = false;
            if !resumes {
                state.mode = Mode::Idling;
            }
        }
        self.modes = ModeMachine::new(state.mode);
        self.tracker.restore_ledger(state.requests.clone());
        let (x, y) = state.position;
        let (mode, todo) = (state.mode.name(), state.todo.clone());
        self.state = state;
        self.beacon.update(|p| {
            p.x = x;
            p.y = y;
            p.mode = mode.into();
            p.todo = todo;
        });
        self.refresh_tasks();
        if interrupted {
            // The half-drawn shapes belong to the interrupted request: recorded there, a
            // revert of it does not count them as someone else's change.
            self.tracker.reopen_latest_request();
            remove_locked_shapes(self.room.doc(), &self.entity.id);
            crate::agent::apply::suggest::remove_streaming(&self.room, &self.entity.id);
            self.tracker.close_request();
            if !resumes {
                self.say("My previous work was interrupted (the server restarted, or could not store the room); ask me again to continue.");
            }
            self.persist_now();
        }
        self.beacon.publish();
        Ok(())
    }

    /// A handle to wait until the states handed to the store so far are written.
    pub fn state_sync(&self) -> StateSync {
        self.saver.sync()
    }

    /// Deletes the stored state (the fairy is dismissed); see [`FairyRuntime::close_state`].
    pub fn forget_state(&mut self) {
        self.unsaved = false;
        self.saver.delete();
    }

    /// Writes what is pending of the state and stops its writer (the fairy's task is ending).
    pub async fn close_state(&mut self) {
        self.flush_state();
        self.saver.close().await;
    }

    /// The room instance this runtime lives in.
    pub fn room(&self) -> &Arc<Room> {
        &self.room
    }

    /// Its awareness peer.
    pub fn beacon(&self) -> &Arc<Beacon> {
        &self.beacon
    }

    /// The other fairies of its room, for projects (its host sets them once it is hosted).
    pub fn set_peers(&mut self, peers: super::projects::waits::Peers) {
        self.projects.set_peers(peers);
    }

    /// Reads the room's changes so far, so that the room keeps little for it.
    pub fn catch_up(&self) {
        self.tracker.catch_up();
    }

    /// Hands the state to the store (it survives a restart; it is never in the document), at
    /// most every [`PERSIST_EVERY`] while the fairy works: the state holds the whole history
    /// and the ledger of sixteen requests (hundreds of kilobytes), and a fairy prompted again and
    /// again stored it three or four times a request — most of its work beside other fairies.
    /// A change not stored yet goes with the next call once the interval passed, when the
    /// interval ends while a model streams (the turn's timer), when the fairy goes idle
    /// ([`FairyRuntime::flush_state`]), or when it stops. While a request draws this is called
    /// after every complete action, so the ledger of what it changed is stored within
    /// [`PERSIST_EVERY`] of each action (a revert after a crash needs it).
    pub fn persist(&mut self) {
        self.unsaved = true;
        let now = self.clock.now();
        let due = self
            .persisted_at
            .is_none_or(|at| now.saturating_duration_since(at) >= PERSIST_EVERY);
        if due {
            self.persist_now();
        }
    }

    /// When a change not stored yet is due to be (none waiting: `None`).
    pub(super) fn state_save_due(&self) -> Option<std::time::Instant> {
        match (self.unsaved, self.persisted_at) {
            (true, Some(at)) => Some(at + PERSIST_EVERY),
            _ => None,
        }
    }

    /// Hands the state to the store if it changed since it was last handed over.
    pub fn flush_state(&mut self) {
        if self.unsaved {
            self.persist_now();
        }
    }

    /// Hands the state to the store now.
    pub fn persist_now(&mut self) {
        self.unsaved = false;
        self.persisted_at = Some(self.clock.now());
        self.state.position = {
            let p = self.beacon.snapshot();
            (p.x, p.y)
        };
        self.state.mode = self.modes.mode();
        let (state, saver) = (&mut self.state, &self.saver);
        self.tracker.lend_ledger(|ledger| {
            state.requests = std::mem::take(ledger);
            saver.save(state);
            *ledger = std::mem::take(&mut state.requests);
        });
    }

    /// Posts a chat message as the fairy (doc `chat` and awareness `lastMessage`).
    pub(super) fn say(&self, text: &str) {
        let item = ChatItem {
            from: format!("fairy:{}", self.entity.id),
            role: "fairy".into(),
            text: text.into(),
            at: self.clock.unix_millis() as f64,
            request_id: self.request_ids.first().cloned(),
            acceptance: None,
        };
        if let Err(error) = append_chat(self.room.doc(), &self.entity.id, &item) {
            tracing::warn!(fairy = %self.entity.id, %error, "chat message lost");
        }
        self.beacon
            .update(|p| p.last_message = Some(text.to_owned()));
    }

    /// Carries out what the mode machine decided.
    fn enact_outcome(&mut self, outcome: Outcome) {
        if !outcome.entered.is_empty() {
            // The new mode is handed to the store before anyone hears of it: a reader told of
            // the change (an event's listener reading the fairy's history) reads it there. The
            // rest of the outcome is saved as before (the throttle and `unsaved` unchanged).
            let persisted_at = self.persisted_at;
            self.persist_now();
            self.persisted_at = persisted_at;
            self.unsaved = true;
        }
        for mode in &outcome.entered {
            self.out.emit(AgentEvent::ModeChanged {
                mode: mode.name().into(),
            });
        }
        if !outcome.entered.is_empty() {
            let mode = self.modes.mode();
            self.state.mode = mode;
            if mode != Mode::WorkingSolo {
                self.state.current_task = None;
            }
            self.beacon.update(|p| {
                p.mode = mode.name().into();
                if mode != Mode::WorkingSolo {
                    p.task_id = None;
                }
            });
            if mode == Mode::Idling
                && let Some(m) = self.state.project.clone()
            {
                if let Some(text) = self.projects.went_idle(&m) {
                    self.say(text);
                }
                self.projects.leave(&mut self.state);
            }
        }
        let level = self.modes.mode().memory_level();
        for effect in outcome.effects {
            match effect {
                ModeEffect::Schedule(message) => self.schedule(Request::follow_up(message, None)),
                ModeEffect::MemoryTransition(memory_level, text) => {
                    self.state.history.push(HistoryItem::MemoryTransition {
                        agent_facing_message: text,
                        user_facing_message: None,
                        memory_level,
                    })
                }
                ModeEffect::ClearTodo => {
                    self.state.todo.clear();
                    self.beacon.update(|p| p.todo.clear());
                }
                ModeEffect::SwitchTo(_) => {
                    tracing::debug!(?level, "switch effects are followed by the machine")
                }
            }
        }
    }

    /// Switches mode (exit and enter hooks in order).
    pub fn switch_mode(&mut self, to: Mode) {
        let ctx = hook_ctx(&self.state, &self.projects);
        let out = self.modes.switch(to, &ctx);
        self.enact_outcome(out);
    }

    /// Merges a follow-up into the pending request.
    pub(super) fn schedule(&mut self, request: Request) {
        match &mut self.scheduled {
            Some(pending) => pending.merge(request),
            None => self.scheduled = Some(request),
        }
    }

    pub(super) fn refresh_tasks(&self) {
        let tasks: Vec<TaskSummary> = self
            .state
            .tasks
            .iter()
            .map(|t| TaskSummary {
                id: t.id.clone(),
                title: t.title.clone(),
                status: t.status,
            })
            .collect();
        let todo = self.state.todo.clone();
        let current = self.state.current_task.clone();
        self.beacon.update(|p| {
            p.tasks = tasks;
            p.todo = todo;
            p.task_id = current;
        });
        self.publish_project();
    }
}

/// What the mode hooks read of the fairy's `state` and its part in a project.
fn hook_ctx(state: &FairyState, projects: &project_work::ProjectWork) -> HookCtx {
    let current = state.current_task.as_ref().map(|id| {
        let done = state
            .tasks
            .iter()
            .any(|t| &t.id == id && t.status == TaskStatus::Done);
        (id.clone(), done)
    });
    HookCtx {
        open_todo: state.todo.iter().any(TodoItem::is_open),
        current_task: current,
        pending_tasks: state
            .tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Todo && Some(&t.id) != state.current_task.as_ref())
            .count(),
        project_task: projects.task_ctx(state.project.as_ref()),
    }
}

/// The `sub` of whoever asked for the running request: `from_user`, else whoever invited
/// `entity` (a request of its own).
fn prompted_by(entity: &FairyEntity, from_user: Option<&str>) -> String {
    let creator = entity
        .created_by
        .strip_prefix("user:")
        .unwrap_or(&entity.created_by);
    from_user.unwrap_or(creator).to_owned()
}

/// Removes the shapes `fairy` left locked (half-drawn when the server stopped).
fn remove_locked_shapes(doc: &yrs::Doc, fairy: &crate::ids::FairyId) {
    let author = format!("fairy:{fairy}");
    let locked: Vec<String> = list_shapes(&doc.transact())
        .into_iter()
        .filter(|s| s.locked && s.created_by == author)
        .map(|s| s.id)
        .collect();
    if !locked.is_empty() {
        let mut txn = doc.transact_mut_with(TxnOrigin::fairy(fairy.as_str()));
        for id in &locked {
            delete_shape(&mut txn, id);
        }
    }
}
