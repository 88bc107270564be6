//! Fairies: the agent runtime (actions, modes, requests, memory).
//!
//! # Layout, along a request's way (each folder names only folders below it)
//! - [`host`]: hosting the fairies of every room, one task each ([`host::hub`], with its group
//!   prompts, node leases and cross-node delivery as children), the [`host::inbox`] that
//!   never refuses an interrupt, the per-room hourly token [`host::budget`], the
//!   [`host::executor`] fairies run on, below the people's work, and the load-time clean-up of
//!   the `fairies` and `projects` roots ([`host::migration`]).
//! - [`runtime`]: one fairy at work, a folder whose children depend only on their parent:
//!   the type (`runtime/mod.rs`), which keeps the request loop (`runtime/request.rs`) and
//!   hands typed values between stages that hold what they use: one model turn along its
//!   pipeline (`runtime/turn/`: the turn's inputs `inputs.rs`, the streaming loop, the checks
//!   `pipeline.rs`, `canvas.rs` and `runtime_actions.rs` carrying out what passed, the history
//!   summarised in `compact.rs`), what the model is told (`runtime/feedback.rs`), the steps a
//!   stage hands back (`runtime/steps.rs`), `interrupt({input, mode})`
//!   ([`runtime::interrupt`]) and, next to it, taking a request back ([`runtime::revert`]),
//!   the [`runtime::events`] observers see, the asker's viewport ([`runtime::viewport`]) and the
//!   fairy's part in a project ([`runtime::project_work`]).
//! - [`prompt`]: building the model request, with its [`prompt::parts`], [`prompt::project`]
//!   parts and [`prompt::screenshot`] as children.
//! - [`projects`]: what fairies working together share (the `projects` and `tasks` records,
//!   wait and wake, task bounds, membership).
//! - [`presence`]: the awareness state and flights, published by [`presence::beacon`].
//! - [`state`]: a fairy's data: its private state ([`state`], kept in the store by
//!   [`state::store`]), its public entity ([`state::fairy`]) and solo tasks
//!   ([`state::tasks_doc`]) in the document, and its history ([`state::memory`]).
//! - [`apply`]: carrying canvas actions out and keeping account: [`apply::tentative`] and
//!   [`apply::throttle`] for still-streaming actions, [`apply::suggest`] for review mode,
//!   [`apply::changes`] (the changes that were not a fairy's own) and [`apply::ledger`] (what
//!   each request changed).
//! - [`modes`]: what each mode may do, and the modes' state machine (`modes/mod.rs`), with
//!   their hooks as the child `modes/hooks.rs`. The [`Mode`](crate::llm::Mode) enum itself is
//!   the model layer's, so that a model request can carry it.
//! - [`actions`]: what a model's answer may hold: one file per canvas action and the
//!   [`actions::Registry`] (`actions/mod.rs`), the solo runtime actions ([`actions::runtime`],
//!   which also reads a complete runtime action once) and the project actions
//!   ([`actions::project`]), each typed once from the model's JSON.
//! - [`work`]: the vocabulary of a fairy's work (task statuses, todo items, project roles and
//!   statuses, membership), below every folder.
//!
//! The arrows go down this list only (`python3 scripts/import-cycles.py src --folders`):
//! host → runtime → prompt → projects → presence → state → apply → modes → actions → work.
//! Not every pair is an edge; none goes up.
//!
//! Must not touch sockets; reaches the store only through its side tables
//! ([`crate::store::Store::side`]): fairies' private state, in [`state::store`],
//! [`host::migration`] and the hub's invitation, the room's projects, in [`projects::book`],
//! and the room's instructions, read with a turn's inputs (`runtime/turn/inputs.rs`).

pub mod actions;
pub mod apply;
pub mod host;
pub mod modes;
pub mod presence;
pub mod projects;
pub mod prompt;
pub mod runtime;
pub mod state;
pub mod work;
