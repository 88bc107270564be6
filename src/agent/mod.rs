//! Fairies: the agent runtime (actions, modes, requests, memory).
//!
//! # Layout, along a request's way
//! - [`host`]: hosting the fairies of every room, one task each ([`host::hub`], with its group
//!   prompts, node leases and cross-node delivery as children), the [`host::inbox`] that
//!   never refuses an interrupt, the [`host::events`] observers see, the per-room hourly token
//!   [`host::budget`] and the [`host::executor`] fairies run on, below the people's work.
//! - [`runtime`]: one fairy at work, a folder whose children depend only on their parent:
//!   the type (`runtime/mod.rs`), the request loop (`runtime/request.rs`), one model turn
//!   along its pipeline (`runtime/turn/`: the prompt builder `prompt.rs`, the streaming loop,
//!   the checks `pipeline.rs`, `canvas.rs` and `runtime_actions.rs` applying what passed, the
//!   history summarised in `compact.rs`), `interrupt({input, mode})` ([`runtime::interrupt`]), what the prompt
//!   needs beside the shapes ([`runtime::view`]) and the fairy's part in a project
//!   ([`runtime::project`]).
//! - [`prompt`]: building the model request, with its [`prompt::parts`], [`prompt::project`]
//!   parts, [`prompt::screenshot`] and [`prompt::model_space`] (values as the model reads
//!   them) as children.
//! - [`actions`]: what a model's answer may hold: one file per canvas action and the
//!   [`actions::Registry`] (`actions/mod.rs`), the solo runtime actions ([`actions::runtime`],
//!   which also reads a complete runtime action once) and the project actions
//!   ([`actions::project`]), each typed once from the model's JSON.
//! - [`modes`]: the modes and their state machine (`modes/mod.rs`), with their hooks as the
//!   child `modes/hooks.rs`: what each mode may do.
//! - [`apply`]: carrying canvas actions out and keeping account: [`apply::tentative`] and
//!   [`apply::throttle`] for still-streaming actions, [`apply::suggest`] for review mode,
//!   [`apply::changes`] (the changes that were not a fairy's own), [`apply::ledger`] (what
//!   each request changed) and [`apply::revert`] (taking a request back).
//! - [`state`]: a fairy's data: its private state ([`state`], kept in the store by
//!   [`state::store`], moved out of old documents by [`state::migration`]), its public entity
//!   ([`state::fairy`]) and solo tasks ([`state::tasks_doc`]) in the document, its history
//!   ([`state::memory`]) and the vocabulary of its work ([`state::work`]).
//! - [`presence`]: the awareness state and flights, published by [`presence::beacon`].
//! - [`projects`]: what fairies working together share (the `projects` and `tasks` records,
//!   wait and wake, task bounds, membership); below the runtime: it never names it (runtime →
//!   projects only).
//!
//! Must not touch sockets; reaches the store only through its side tables
//! ([`crate::store::Store::side`]): fairies' private state, in [`state::store`],
//! [`state::migration`] and the hub's invitation, the room's projects, in [`projects::book`],
//! and the room's instructions, read in [`runtime::view`].

pub mod actions;
pub mod apply;
pub mod host;
pub mod modes;
pub mod presence;
pub mod projects;
pub mod prompt;
pub mod runtime;
pub mod state;
