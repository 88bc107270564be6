//! Fairies: the agent runtime (actions, modes, requests, memory).
//!
//! Layout: `actions/` holds one file per action; [`tentative`] applies still-streaming actions
//! revertibly; [`changes`] tracks the changes that were not a fairy's own; [`throttle`] decides
//! when a streaming action is worth re-applying; [`fairy`] is the persistent entity in the
//! document; [`presence`] its awareness state and flight; [`modes`] the modes and [`mode_hooks`] their state machine;
//! [`memory`] the chat history and its filtering, [`compact`] its summarising; [`prompt`] builds model requests;
//! [`runtime`] runs requests (its data in [`state`]) and [`turn`] one model turn of them ([`runtime_actions`]
//! declares the non-canvas actions, [`events`] what observers see, [`beacon`] publishes the
//! presence); [`tasks_doc`] mirrors solo tasks into the `tasks` root; [`hub`] hosts the fairies of every room. Must not touch sockets
//! or stores directly.

pub mod actions;
pub mod beacon;
pub mod changes;
pub mod compact;
pub mod events;
pub mod fairy;
pub mod hub;
pub mod memory;
pub mod mode_hooks;
pub mod modes;
pub mod presence;
pub mod prompt;
pub mod runtime;
pub mod runtime_actions;
pub mod state;
pub mod tasks_doc;
pub mod tentative;
pub mod throttle;
pub mod turn;
