//! Scaled out: projects whose fairies are hosted by several nodes (docs/scaling.md "Projects
//! across nodes").
//!
//! A project is coordinated by the node hosting its leader: group prompts and disbanding are
//! forwarded there (`crate::server::forward`), and only that node changes the project's record
//! (stored, then mirrored into the document). What must reach a fairy hosted by another node
//! travels as a typed message ([`Body`], JSON, at most
//! [`crate::pubsub::direct::MAX_PAYLOAD`] bytes) on that node's own channel
//! ([`crate::pubsub::direct`]), addressed to the node holding the fairy's lease:
//! - from the coordinator to a member: an interrupt (stand by, work on a task, go idle); the
//!   receiving node first reads the room's projects from the store (the coordinator stored
//!   them before sending), so its member finds its project and task;
//! - from a member to its leader's host: a [`Report`] (task done, task stopped), which the
//!   coordinator checks against its own record before acting (the task must be in progress
//!   and assigned to that member).
//!
//! Owns the bounded, ordered outbound queue and its sender (a message waits for the project
//! records handed to the store, resolves the fairy's host from its lease, retries while no
//! node holds it or the host does not receive it, for [`DELIVERY_DEADLINE`] at most), the
//! receiver (handling messages one at a time, in order), and what happens to a message
//! nobody received: a direction to a member is handed back by its coordinator (the task
//! back to `todo`, the leader told), as when the member stops. Nothing here reads the
//! document's `projects` or `tasks`, which any peer can write. Must not touch the leases'
//! keys (`crate::pubsub::lease`) nor the runtime's internals.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::agent::host::hub::{FairyHub, HubDeliver, HubError};
use crate::agent::host::inbox::Inbox;
use crate::agent::modes::Mode;
use crate::agent::projects::book::RoomProjects;
use crate::agent::projects::waits::{Peers, Report, stopped_message};
use crate::agent::state::fairy::{FairyError, list_fairies};
use crate::agent::state::{Interrupt, Request};
use crate::agent::work::TaskStatus;
use crate::ids::FairyId;
use crate::ids::ProjectId;
use crate::ids::RoomName;
use crate::origin::TxnOrigin;
use crate::pubsub::direct::DirectChannel;
use crate::pubsub::lease::RedisLeases;
use crate::store::StoreError;

/// Messages queued for other nodes before new ones are refused.
const OUT_QUEUE: usize = 1024;
/// How long a message keeps trying to reach its fairy's host: a dead host's leases expire
/// after 6 s and another node takes them within about a second.
const DELIVERY_DEADLINE: Duration = Duration::from_secs(12);
/// Pause between two tries of a message.
const RETRY_EVERY: Duration = Duration::from_millis(200);
/// How many times nodes that no longer host a message's fairy pass it on.
const MAX_HOPS: u8 = 3;
/// The version of [`Wire`].
const WIRE_VERSION: u8 = 1;

/// One message between nodes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Wire {
    /// [`WIRE_VERSION`].
    v: u8,
    /// The room.
    room: String,
    /// The fairy whose host the message is for.
    to: FairyId,
    /// How many nodes passed it on.
    hops: u8,
    /// What it says.
    body: Body,
}

/// What a message says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
enum Body {
    /// Interrupt the fairy (from its project's coordinator).
    Interrupt {
        /// The request to run.
        input: Option<Request>,
        /// The mode to switch to.
        mode: Option<Mode>,
        /// A direction: the task it sends the member to.
        task: Option<TaskRef>,
    },
    /// For the coordinator, the host of the addressed leader.
    Report {
        /// What the member says.
        report: Report,
    },
}

/// The task a direction sends a member to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TaskRef {
    project: ProjectId,
    task: String,
    leader: FairyId,
}

/// A message on its way.
#[derive(Debug, Clone)]
struct Outgoing {
    room: RoomName,
    to: FairyId,
    hops: u8,
    body: Body,
}

impl Outgoing {
    fn encode(&self) -> Option<Bytes> {
        let wire = Wire {
            v: WIRE_VERSION,
            room: self.room.as_str().to_owned(),
            to: self.to.clone(),
            hops: self.hops,
            body: self.body.clone(),
        };
        match serde_json::to_vec(&wire) {
            Ok(bytes) => Some(Bytes::from(bytes)),
            Err(error) => {
                tracing::error!(%error, "node message not encoded");
                None
            }
        }
    }

    fn decode(bytes: &[u8]) -> Option<Outgoing> {
        let wire: Wire = match serde_json::from_slice(bytes) {
            Ok(wire) => wire,
            Err(error) => {
                tracing::warn!(%error, "unreadable node message dropped");
                return None;
            }
        };
        if wire.v != WIRE_VERSION {
            tracing::warn!(version = wire.v, "node message of another version dropped");
            return None;
        }
        let room = RoomName::parse(&wire.room).ok()?;
        Some(Outgoing {
            room,
            to: wire.to,
            hops: wire.hops,
            body: wire.body,
        })
    }
}

/// This node's side of the node channels.
pub(super) struct Remote {
    out: mpsc::Sender<Outgoing>,
}

impl FairyHub {
    /// Scaled out: connects the hub to the node channels (`channel`, and what it receives as
    /// `inbound`), so that projects span nodes. Without leases (a single node) nothing changes.
    pub fn connect_nodes(&self, channel: DirectChannel, inbound: mpsc::Receiver<Bytes>) {
        let Some(leases) = self.inner.leases.clone() else {
            return;
        };
        let (out, queued) = mpsc::channel(OUT_QUEUE);
        if self.inner.remote.set(Remote { out }).is_err() {
            return;
        }
        let hub = self.clone();
        self.inner.tracker.spawn(async move {
            hub.send_loop(&leases, &channel, queued).await;
        });
        let hub = self.clone();
        self.inner.tracker.spawn(async move {
            hub.receive_loop(inbound).await;
        });
    }

    fn queue(&self, outgoing: Outgoing) -> bool {
        let Some(remote) = self.inner.remote.get() else {
            return false;
        };
        let queued = remote.out.try_send(outgoing).is_ok();
        if !queued {
            tracing::warn!("the queue of messages to other nodes is full; a message refused");
        }
        queued
    }

    /// Whether this node hosts `fairy` now.
    pub(super) fn hosts_here(&self, room: &RoomName, fairy: &FairyId) -> bool {
        self.lock().contains_key(&(room.clone(), fairy.clone()))
    }

    fn inbox_of(&self, room: &RoomName, fairy: &FairyId) -> Option<Arc<Inbox>> {
        self.lock()
            .get(&(room.clone(), fairy.clone()))
            .map(|(hosted, _)| hosted.inbox.clone())
    }

    /// Scaled out: queues `interrupt` for `fairy`, hosted by another node; false when this
    /// node is not scaled out or the queue is full.
    pub(super) fn interrupt_elsewhere(
        &self,
        room: &RoomName,
        fairy: &FairyId,
        interrupt: Interrupt,
    ) -> bool {
        if self.inner.remote.get().is_none() {
            return false;
        }
        let task = if interrupt.mode == Some(Mode::WorkingDrone) {
            self.inner
                .projects
                .loaded(room)
                .and_then(|book| direction_of(&book, fairy))
        } else {
            None
        };
        self.queue(Outgoing {
            room: room.clone(),
            to: fairy.clone(),
            hops: 0,
            body: Body::Interrupt {
                input: interrupt.input,
                mode: interrupt.mode,
                task,
            },
        })
    }

    /// Scaled out: queues `report` for the host of `leader`.
    pub(super) fn report_elsewhere(&self, room: &RoomName, leader: &FairyId, report: Report) {
        let queued = self.queue(Outgoing {
            room: room.clone(),
            to: leader.clone(),
            hops: 0,
            body: Body::Report { report },
        });
        if !queued {
            tracing::warn!(%room, %leader, "a project report could not be queued");
        }
    }

    /// Interrupts `fairy` wherever it is hosted: here through its inbox, scaled out on
    /// another node through the node channels. A fairy the room does not have is
    /// `Fairy(NotFound)`.
    pub(super) async fn interrupt_anywhere(
        &self,
        room: &RoomName,
        fairy: &FairyId,
        interrupt: Interrupt,
    ) -> Result<(), HubError> {
        match self.interrupt(room, fairy, interrupt.clone()).await {
            Err(HubError::Fairy(FairyError::NotFound(id))) if self.inner.remote.get().is_some() => {
                let loaded = self.loaded_room(room).await?;
                if !list_fairies(loaded.doc()).iter().any(|e| e.id == *fairy) {
                    return Err(FairyError::NotFound(id).into());
                }
                if self.interrupt_elsewhere(room, fairy, interrupt) {
                    Ok(())
                } else {
                    Err(HubError::Busy("too many messages to other nodes".into()))
                }
            }
            other => other,
        }
    }

    /// The room's projects for hosting `fairy`. Scaled out, every project this node does not
    /// coordinate is read again from the store (it may have been taken over from a dead
    /// node, whose record here is old); a single node completes them from the store.
    pub(super) async fn projects_for_hosting(
        &self,
        room: &RoomName,
        fairy: &FairyId,
    ) -> Result<Arc<RoomProjects>, StoreError> {
        if self.inner.leases.is_none() {
            return self.inner.projects.for_hosting(room).await;
        }
        self.inner.projects.flush().await;
        let book = self.inner.projects.of(room).await?;
        book.refresh_from_store(|p| {
            p.orchestrator_id != *fairy && self.hosts_here(room, &p.orchestrator_id)
        })
        .await?;
        Ok(book)
    }

    /// Scaled out: the room's projects with those another node coordinates read again from
    /// the store (single node: as held).
    pub(super) async fn fresh_projects(
        &self,
        room: &RoomName,
    ) -> Result<Arc<RoomProjects>, HubError> {
        let book = self.projects_of(room).await?;
        if self.inner.leases.is_some() {
            book.refresh_from_store(|p| self.hosts_here(room, &p.orchestrator_id))
                .await?;
        }
        Ok(book)
    }

    /// Sends the queued messages in order (see the module docs).
    async fn send_loop(
        &self,
        leases: &RedisLeases,
        channel: &DirectChannel,
        mut queued: mpsc::Receiver<Outgoing>,
    ) {
        let shutdown = self.inner.shutdown.clone();
        loop {
            let outgoing = tokio::select! {
                _ = shutdown.cancelled() => return,
                next = queued.recv() => match next {
                    Some(outgoing) => outgoing,
                    None => return,
                },
            };
            // The receiver reads the projects from the store: what this node changed is
            // stored first.
            self.inner.projects.flush().await;
            let deadline = Instant::now() + DELIVERY_DEADLINE;
            let delivered = loop {
                if self.try_deliver(leases, channel, &outgoing).await {
                    break true;
                }
                if Instant::now() >= deadline {
                    break false;
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(RETRY_EVERY) => {}
                }
            };
            if !delivered {
                self.undeliverable(outgoing);
            }
        }
    }

    /// One try: to the node holding the addressed fairy's lease (this one included).
    async fn try_deliver(
        &self,
        leases: &RedisLeases,
        channel: &DirectChannel,
        outgoing: &Outgoing,
    ) -> bool {
        match leases.holder(&outgoing.room, outgoing.to.as_str()).await {
            Ok(Some(holder)) if holder.node == channel.node() => self.handle_here(outgoing).await,
            Ok(Some(holder)) => match outgoing.encode() {
                Some(payload) => match channel.send(&holder.node, payload).await {
                    Ok(received) => received,
                    Err(error) => {
                        tracing::warn!(%error, "a message to another node failed; retrying");
                        false
                    }
                },
                None => false,
            },
            Ok(None) => false,
            Err(error) => {
                tracing::warn!(%error, "fairy leases unreadable; retrying a message");
                false
            }
        }
    }

    /// Handles what other nodes send, one message at a time.
    async fn receive_loop(&self, mut inbound: mpsc::Receiver<Bytes>) {
        let shutdown = self.inner.shutdown.clone();
        loop {
            let bytes = tokio::select! {
                _ = shutdown.cancelled() => return,
                next = inbound.recv() => match next {
                    Some(bytes) => bytes,
                    None => return,
                },
            };
            let Some(outgoing) = Outgoing::decode(&bytes) else {
                continue;
            };
            if self.handle_here(&outgoing).await {
                continue;
            }
            // Its fairy moved on meanwhile: to its new host, a few times at most.
            if outgoing.hops < MAX_HOPS {
                let again = Outgoing {
                    hops: outgoing.hops + 1,
                    ..outgoing
                };
                self.queue(again);
            } else {
                self.undeliverable(outgoing);
            }
        }
    }

    /// Carries a message out for a fairy hosted here; false when it is not (any more).
    async fn handle_here(&self, outgoing: &Outgoing) -> bool {
        let (room, to) = (&outgoing.room, &outgoing.to);
        let Some(inbox) = self.inbox_of(room, to) else {
            return false;
        };
        match &outgoing.body {
            Body::Interrupt { input, mode, .. } => {
                // The coordinator stored what this interrupt is about before sending it.
                if let Err(error) = self.fresh_projects(room).await {
                    tracing::warn!(%room, %error, "projects not read again before an interrupt");
                }
                let interrupt = Interrupt {
                    input: input.clone(),
                    mode: *mode,
                };
                inbox.interrupt(interrupt).is_ok()
            }
            Body::Report { report } => {
                self.on_report(room, to, report.clone()).await;
                true
            }
        }
    }

    /// On the coordinator (the host of `leader`): a member's report, checked against the
    /// project's record here.
    async fn on_report(&self, room: &RoomName, leader: &FairyId, report: Report) {
        let Some(loaded) = self
            .lock()
            .get(&(room.clone(), leader.clone()))
            .map(|(hosted, _)| hosted.room.clone())
        else {
            return;
        };
        let book = match self.projects_of(room).await {
            Ok(book) => book,
            Err(error) => {
                tracing::warn!(%room, %error, "a project report not handled");
                return;
            }
        };
        let (Report::TaskDone { project, task, by } | Report::TaskStopped { project, task, by }) =
            &report;
        let Some(record) = book
            .project(project)
            .filter(|p| p.status.is_live() && p.orchestrator_id == *leader)
        else {
            return;
        };
        let Some(mut current) = book
            .task(project, task)
            .filter(|t| t.status == TaskStatus::InProgress && t.assigned_to.as_ref() == Some(by))
        else {
            return;
        };
        let peers = Peers {
            waits: self.inner.waits.clone(),
            deliver: Arc::new(HubDeliver(Arc::downgrade(&self.inner))),
            projects: book.clone(),
        };
        let origin = TxnOrigin::fairy(by.as_str());
        match &report {
            Report::TaskDone { .. } => {
                current.status = TaskStatus::Done;
                book.put_task(loaded.doc(), origin, &current);
                peers.wake_if_finished(room, leader);
            }
            Report::TaskStopped { .. } => {
                let message = stopped_message(by, task);
                peers.hand_back(loaded.doc(), origin, room, &record, current, message);
            }
        }
    }

    /// Nobody received `outgoing` in time: a direction is handed back by the project's
    /// coordinator (told by a report, possibly to itself); anything else is logged.
    fn undeliverable(&self, outgoing: Outgoing) {
        tracing::warn!(room = %outgoing.room, fairy = %outgoing.to, "a message to another node's fairy was not delivered");
        if let Body::Interrupt {
            task: Some(direction),
            ..
        } = outgoing.body
        {
            let report = Report::TaskStopped {
                project: direction.project,
                task: direction.task,
                by: outgoing.to,
            };
            self.report_elsewhere(&outgoing.room, &direction.leader, report);
        }
    }
}

/// The task `fairy` was just directed to: in progress and assigned to it in its live project.
fn direction_of(book: &RoomProjects, fairy: &FairyId) -> Option<TaskRef> {
    let project = book.live_project_of(fairy)?;
    let id = project.id.clone()?;
    let task = book
        .tasks(&id)
        .into_iter()
        .find(|t| t.status == TaskStatus::InProgress && t.assigned_to.as_ref() == Some(fairy))?;
    Some(TaskRef {
        project: id,
        task: task.id,
        leader: project.orchestrator_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> FairyId {
        FairyId::parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn messages_round_trip_and_refuse_what_they_do_not_know() {
        let room = RoomName::parse("r").unwrap_or_else(|e| panic!("{e}"));
        let project = ProjectId::random();
        let sent = Outgoing {
            room,
            to: id("f-1"),
            hops: 1,
            body: Body::Interrupt {
                input: Some(Request::follow_up("go", None)),
                mode: Some(Mode::WorkingDrone),
                task: Some(TaskRef {
                    project: project.clone(),
                    task: "t1".into(),
                    leader: id("f-0"),
                }),
            },
        };
        let bytes = sent.encode().unwrap_or_else(|| panic!("encoded"));
        let back = Outgoing::decode(&bytes).unwrap_or_else(|| panic!("decoded"));
        assert_eq!((back.to, back.hops, back.body), (sent.to, 1, sent.body));
        let report = br#"{"v":1,"room":"r","to":"f-0","hops":0,"body":{"kind":"report","report":{"kind":"task-done","project":"PROJECT","task":"t1","by":"f-1"}}}"#;
        let report = String::from_utf8_lossy(report).replace("PROJECT", project.as_str());
        assert!(matches!(
            Outgoing::decode(report.as_bytes()).map(|o| o.body),
            Some(Body::Report {
                report: Report::TaskDone { .. }
            })
        ));
        for bad in [
            r#"{"v":2,"room":"r","to":"f-0","hops":0,"body":{"kind":"interrupt","input":null,"mode":null,"task":null}}"#,
            r#"{"v":1,"room":"r r","to":"f-0","hops":0,"body":{"kind":"interrupt","input":null,"mode":null,"task":null}}"#,
            r#"{"v":1,"room":"r","to":"f 0","hops":0,"body":{"kind":"interrupt","input":null,"mode":null,"task":null}}"#,
            r#"{"v":1,"room":"r","to":"f-0","hops":0,"body":{"kind":"delete-everything"}}"#,
            "not json",
        ] {
            assert!(Outgoing::decode(bad.as_bytes()).is_none(), "{bad}");
        }
    }
}
