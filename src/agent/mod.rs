//! Fairies: the agent runtime (actions, modes, requests, memory).
//!
//! Layout: `actions/` holds one file per action; [`tentative`] applies still-streaming actions
//! revertibly; [`changes`] tracks the changes that were not a fairy's own; [`throttle`] decides
//! when a streaming action is worth re-applying. Must not touch sockets or stores directly.

pub mod actions;
pub mod changes;
pub mod tentative;
pub mod throttle;
