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
//! - this file: the type, its construction and restore, and the helpers every child shares
//!   (`emit`, `say`, `schedule`, `persist`, `apply_outcome`, `refresh_tasks`).
//! - `request`: the request loop — starting, running turns, finishing, aborting, failing.
//! - `turn/`: one model turn along its pipeline — the prompt builder, the streaming loop, the
//!   action checks, applying canvas actions, carrying out runtime actions, and keeping the
//!   history in budget (its own module docs give the hand-offs).
//! - [`interrupt`]: `interrupt({input, mode})` (the [`Interrupt`](crate::agent::state::Interrupt)
//!   data and its merge rule live in [`super::state`]).
//! - `report`: what a request reports to the webhooks when it ends (`fairy.request.ended`)
//!   and the usage its last chat item carries.
//! - [`view`]: what the runtime gathers for a prompt beside the shapes (pages, task, viewport,
//!   model name, instructions, screenshot).
//! - [`project`]: the fairy's part in a project (project actions, joining and leaving,
//!   what a member sees). The project data it works with is [`super::projects`]', a lower
//!   module that never names the runtime: dependencies go runtime → projects only.
//!
//! The runtime is driven by its host task ([`crate::agent::host::hub`]); it never holds a lock across an
//! `.await`, and all of its document writes are short transactions with the fairy's origin.
//! Must not touch sockets or the store except through [`StateSaver`] and [`state_store`].

pub mod events;
pub mod interrupt;
pub mod project;
mod report;
mod request;
pub mod revert;
mod turn;
pub mod view;

use crate::agent::state::{DEFAULT_VIEW, FairyState, Request, RuntimeConfig};
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
    /// The length of the history at each of its last model calls, oldest first: the prompt
    /// splits the history there so that a call's prefix stays a prefix of the next
    /// (`turn/prompt.rs`; a few dozen at most).
    history_marks: turn::HistoryMarks,
    /// Who pays for the running request's model calls beside the room (its person, the
    /// fairy's project): budgets and usage totals.
    billing: crate::llm::Billing,
    /// The current request's bounds.
    bounds: Bounds,
    /// The running request's ids (empty between requests).
    request_ids: Vec<RequestId>,
    /// The other fairies of its room, for projects (set by the hub).
    peers: Option<super::projects::waits::Peers>,
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
            corrections: Vec::new(),
            notes: Vec::new(),
            cut_answer: false,
            turn_bound: None,
            history_marks: turn::HistoryMarks::default(),
            billing: crate::llm::Billing::default(),
            bounds: Bounds::default(),
            request_ids: Vec::new(),
            peers: None,
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
                self.projects().as_deref(),
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
            self.remove_locked_shapes();
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

    /// The room's shapes now, from the room's live view (no walk of the document under its
    /// lock; docs/fairies.md "People and fairies in one room"): shared pointers, in no
    /// particular order, so nothing of a shape is copied and readers put in z-order only the
    /// few they pick.
    pub(super) fn shapes_now(&self) -> Vec<Arc<crate::canvas::shape::Shape>> {
        self.tracker.shapes()
    }

    /// Its awareness peer.
    pub fn beacon(&self) -> &Arc<Beacon> {
        &self.beacon
    }

    /// The other fairies of its room, for projects (its host sets them once it is hosted).
    pub fn set_peers(&mut self, peers: super::projects::waits::Peers) {
        self.peers = Some(peers);
    }

    /// Reads the room's changes so far, so that the room keeps little for it.
    pub fn catch_up(&self) {
        self.tracker.catch_up();
    }

    fn remove_locked_shapes(&mut self) {
        let author = format!("fairy:{}", self.entity.id);
        let doc = self.room.doc();
        let locked: Vec<String> = list_shapes(&doc.transact())
            .into_iter()
            .filter(|s| s.locked && s.created_by == author)
            .map(|s| s.id)
            .collect();
        if !locked.is_empty() {
            let mut txn = doc.transact_mut_with(TxnOrigin::fairy(self.entity.id.as_str()));
            for id in &locked {
                delete_shape(&mut txn, id);
            }
        }
    }

    pub(super) fn emit(&self, event: AgentEvent) {
        self.out.emit(event);
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

    /// Unix milliseconds on the fairy's clock (chat items).
    pub(super) fn now_millis(&self) -> f64 {
        self.clock.unix_millis() as f64
    }

    /// Posts a chat message as the fairy (doc `chat` and awareness `lastMessage`).
    pub(super) fn say(&self, text: &str) {
        let item = ChatItem {
            from: format!("fairy:{}", self.entity.id),
            role: "fairy".into(),
            text: text.into(),
            at: self.now_millis(),
            request_id: self.request_ids.first().cloned(),
            acceptance: None,
        };
        if let Err(error) = append_chat(self.room.doc(), &self.entity.id, &item) {
            tracing::warn!(fairy = %self.entity.id, %error, "chat message lost");
        }
        self.beacon
            .update(|p| p.last_message = Some(text.to_owned()));
    }

    fn hook_ctx(&self) -> HookCtx {
        let current = self.state.current_task.as_ref().map(|id| {
            let done = self
                .state
                .tasks
                .iter()
                .any(|t| &t.id == id && t.status == TaskStatus::Done);
            (id.clone(), done)
        });
        HookCtx {
            open_todo: self.state.todo.iter().any(TodoItem::is_open),
            current_task: current,
            pending_tasks: self
                .state
                .tasks
                .iter()
                .filter(|t| {
                    t.status == TaskStatus::Todo && Some(&t.id) != self.state.current_task.as_ref()
                })
                .count(),
            project_task: self.project_task_ctx(),
        }
    }

    /// Carries out what the mode machine decided.
    fn apply_outcome(&mut self, outcome: Outcome) {
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
            self.emit(AgentEvent::ModeChanged {
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
            if mode == Mode::Idling {
                self.went_idle();
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
        let ctx = self.hook_ctx();
        let out = self.modes.switch(to, &ctx);
        self.apply_outcome(out);
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

    fn default_bounds(&self) -> Bounds {
        let p = self.beacon.snapshot();
        Bounds::new(p.x - 100.0, p.y - 100.0, DEFAULT_VIEW.0, DEFAULT_VIEW.1)
    }

    /// The `sub` of whoever asked for the running request: `from_user`, else whoever invited
    /// the fairy (a request of its own).
    pub(super) fn prompted_by(&self, from_user: Option<&str>) -> String {
        let creator = self
            .entity
            .created_by
            .strip_prefix("user:")
            .unwrap_or(&self.entity.created_by);
        from_user.unwrap_or(creator).to_owned()
    }

    /// How the current turn's canvas actions land: its project's way in a live project, else
    /// the request's.
    pub(super) fn apply_mode(&self) -> crate::review::ApplyMode {
        self.project_apply().unwrap_or(self.apply)
    }

    /// Reverts the incomplete streamed version, on the canvas or (in review mode) in the
    /// turn's suggestions.
    pub(super) fn revert_streamed(&mut self) {
        self.landing.take_back_shown();
    }
}
