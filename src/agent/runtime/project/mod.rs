//! A fairy's part in a project, carried out on its runtime (docs/fairies.md "Projects"). The
//! project vocabulary, the document records, the actions' arguments, the waits and the prompt
//! parts are [`crate::agent::projects`]'s, a lower module that knows nothing of the runtime;
//! this folder adds the runtime's side as `impl FairyRuntime` blocks.
//!
//! # Layout
//! - [`apply`]: carrying out a complete, allowed project action.
//! - [`membership`]: joining and leaving a project (memory transitions, awareness), restart
//!   resumption.
//! - [`view`]: what a member sees and may touch (its prompt part, changes and edits in its
//!   task's bounds).
//!
//! Must not touch sockets or the store: project state lives in the room's projects
//! ([`crate::agent::projects::book`], which store and mirror it) and in each member's private
//! state (saved by the runtime like the rest of it).

pub mod apply;
pub mod membership;
pub mod view;

use std::sync::Arc;

use crate::agent::projects::book::RoomProjects;
use crate::agent::runtime::FairyRuntime;

impl FairyRuntime {
    /// The projects of its room (a runtime the hub hosts has them).
    pub(crate) fn projects(&self) -> Option<Arc<RoomProjects>> {
        self.peers.as_ref().map(|p| p.projects.clone())
    }
}
