//! Fairies: the agent runtime (actions, modes, requests, memory).
//!
//! # Layout
//! - `actions/`: one file per canvas action; [`runtime_actions`] declares the non-canvas ones
//!   and `runtime/turn/apply.rs` carries them out.
//! - [`tentative`]: applying still-streaming actions revertibly; [`throttle`]: when a streaming
//!   action is worth re-applying; [`changes`]: the changes that were not a fairy's own.
//! - [`ledger`]: what each request changed; [`revert`]: taking a request back.
//! - [`suggest`]: review mode — a turn's canvas actions on a private copy, written as
//!   suggestion records ([`crate::review`]) instead of changes to `shapes`.
//! - [`fairy`]: the public entity in the document; [`tasks_doc`]: solo tasks mirrored into
//!   the `tasks` root.
//! - [`state_store`]: a fairy's private state (mode, history, todo, tasks) in the store, never
//!   in the document; [`state_migration`]: moving it out of documents of earlier versions.
//! - [`presence`]: the awareness state and flights; [`beacon`]: publishing them.
//! - [`modes`]: the modes and their state machine (`modes/mod.rs`), with their hooks as the
//!   child `modes/hooks.rs`.
//! - [`memory`]: chat history and its filtering.
//! - [`prompt`]: model requests, with the parts and sections of [`prompt_parts`] (what
//!   [`runtime_view`] gathers: pages, task, viewport, instructions, [`screenshot`]); [`state`]:
//!   a fairy's data; [`events`]: what observers see.
//! - [`runtime/`](runtime): the fairy at work, a folder whose children depend only on their
//!   parent: `runtime/mod.rs` (the type, the request loop, finishing and aborting),
//!   `runtime/turn/` (one model turn; its children `apply.rs`, the runtime actions, and
//!   `compact.rs`, summarising the history), `runtime/interrupt.rs` (`interrupt({input, mode})`;
//!   the `Interrupt` data is [`state`]'s), `runtime/project/`
//!   (a fairy's part in a project: project actions, joining and leaving, what a member sees).
//! - [`projects`]: what fairies working together share (project vocabulary, the `projects`
//!   and `tasks` records, the project actions' arguments, wait and wake, task bounds, prompt
//!   parts); below the runtime: it never names it (runtime → projects only).
//! - [`inbox`]: delivering interrupts (never refused) and dismissals to a fairy's host task.
//! - [`work`]: the vocabulary of a fairy's work (task statuses, project roles and statuses,
//!   membership), below the state and projects.
//! - [`executor`]: the runtime fairies run on, below the people's work.
//! - [`hub`]: hosting the fairies of every room (one task each), with `hub/group.rs` (group
//!   prompts, disbanding, refusing users' prompts to busy members); [`budget`]: the per-room
//!   hourly model-token budget.
//!
//! Must not touch sockets; reaches the store only through the [`crate::store::Store`] trait's
//! fairy-state methods, in [`state_store`] and [`state_migration`], and to read the room's
//! instructions, in [`runtime_view`].

pub mod actions;
pub mod beacon;
pub mod budget;
pub mod changes;
pub mod events;
pub mod executor;
pub mod fairy;
pub mod hub;
pub mod inbox;
pub mod ledger;
pub mod memory;
pub mod model_space;
pub mod modes;
pub mod presence;
pub mod projects;
pub mod prompt;
pub mod prompt_parts;
pub mod revert;
pub mod runtime;
pub mod runtime_actions;
pub mod runtime_view;
pub mod screenshot;
pub mod state;
pub mod state_migration;
pub mod state_store;
pub mod suggest;
pub mod tasks_doc;
pub mod tentative;
pub mod throttle;
pub mod work;
