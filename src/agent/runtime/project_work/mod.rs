//! A fairy's part in a project, as a stage of its own (docs/fairies.md "Projects"): the
//! [`ProjectWork`] value holds what that part works with — the room's projects, their waits
//! and the delivery to the other fairies ([`Peers`], set by the hub once it hosts the fairy),
//! the room and the fairy's id — and is handed the fairy's membership and history by the
//! runtime. What it needs the runtime to do (switch mode, schedule a request, say something,
//! leave the project) it hands back as steps
//! ([`Step`](crate::agent::runtime::steps::Step)), in order, which the runtime carries out.
//! The project vocabulary, the document records, the actions' arguments, the waits and the
//! prompt parts are [`crate::agent::projects`]'s, a lower module that knows nothing of the
//! runtime.
//!
//! # Layout
//! - this file: the value, its handle on the room's projects, and the notices sent after a
//!   step.
//! - [`actions`]: carrying out a complete, allowed project action.
//! - [`membership`]: joining and leaving a project (memory transitions, awareness), restart
//!   resumption.
//! - [`sight`]: what a member sees and may touch (its prompt part, changes and edits in its
//!   task's bounds).
//!
//! Must not touch sockets or the store: project state lives in the room's projects
//! ([`crate::agent::projects::book`], which store and mirror it) and in each member's private
//! state (saved by the runtime like the rest of it).

pub mod actions;
pub mod membership;
pub mod sight;

use std::sync::Arc;

use crate::agent::projects::book::RoomProjects;
use crate::agent::projects::waits::{Peers, Report, Wait, wake_message};
use crate::agent::state::Request;
use crate::ids::FairyId;
use crate::origin::TxnOrigin;
use crate::room::Room;

/// A fairy's part in its room's projects: what it works with (see the module docs).
pub(in crate::agent::runtime) struct ProjectWork {
    /// The room's projects, the waiting leaders and the delivery to other fairies (none until
    /// the hub hosts the fairy).
    peers: Option<Peers>,
    /// Its room.
    room: Arc<Room>,
    /// The fairy.
    me: FairyId,
}

/// What a member tells its leader after it changed its own mode (a step of
/// [`Step::Notify`](crate::agent::runtime::steps::Step::Notify)).
#[derive(Debug)]
pub(in crate::agent::runtime) enum Notice {
    /// The leader is hosted here: woken if every task it waits for is done.
    WakeLeader(FairyId),
    /// The leader is hosted on another node: its host is told.
    Report(FairyId, Report),
}

impl ProjectWork {
    /// The part of fairy `me` of `room`, with no projects until [`ProjectWork::set_peers`].
    pub fn new(room: Arc<Room>, me: FairyId) -> Self {
        ProjectWork {
            peers: None,
            room,
            me,
        }
    }

    /// The other fairies of its room and their projects (its host sets them once it is hosted).
    pub fn set_peers(&mut self, peers: Peers) {
        self.peers = Some(peers);
    }

    /// The projects of its room (a runtime the hub hosts has them).
    pub fn book(&self) -> Option<&Arc<RoomProjects>> {
        self.peers.as_ref().map(|p| &p.projects)
    }

    /// Its writes' origin in the document.
    fn origin(&self) -> TxnOrigin {
        TxnOrigin::fairy(self.me.as_str())
    }

    /// Registers a leader's wait; tasks finished before it was registered wake it at once:
    /// then the mode it wakes to and the request that tells it.
    pub fn register_wait(&self, wait: Wait) -> Option<(crate::agent::modes::Mode, Request)> {
        let peers = self.peers.as_ref()?;
        let room = self.room.name();
        peers.waits.register(room, &self.me, wait);
        let (wait, done) = peers.take_finished(room, &self.me)?;
        Some((
            wait.wake_mode,
            Request::follow_up(wake_message(&done), None),
        ))
    }

    /// Sends `notice` to its leader.
    pub fn notify(&self, notice: Notice) {
        let Some(peers) = &self.peers else {
            return;
        };
        let room = self.room.name();
        match notice {
            Notice::WakeLeader(leader) => {
                peers.wake_if_finished(room, &leader);
            }
            Notice::Report(leader, report) => peers.deliver.report(room, &leader, report),
        }
    }
}
