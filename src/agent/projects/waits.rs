//! Wait and wake (the design's wait manager): a leader that awaits tasks registers a [`Wait`]
//! with the room's hub; whoever finishes one of those tasks (a drone, or the leader itself)
//! checks the room's projects ([`super::book`]) and, when every awaited task is done, takes the wait out — atomically,
//! so exactly one of two members finishing at once wakes the leader — and interrupts the
//! leader into its active mode with a message naming the finished tasks.
//!
//! [`Peers`] is what a runtime holds to reach the other fairies of its room: the wait registry
//! and a way to deliver an interrupt (the hub's inboxes, never refused while hosted; scaled
//! out, also a fairy hosted by another node). Short critical sections only, never held across
//! an `.await` or while writing the document.
//!
//! Scaled out, a project is coordinated by the node hosting its leader (docs/scaling.md
//! "Projects across nodes"): only that node changes the project's record. A member hosted
//! elsewhere sends it a [`Report`] instead of writing ([`Peers::coordinates`] tells which).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use yrs::Doc;

use super::book::RoomProjects;
use super::doc::{Project, ProjectTask};
use crate::agent::modes::Mode;
use crate::agent::state::{Interrupt, Request};
use crate::agent::work::TaskStatus;
use crate::ids::FairyId;
use crate::ids::ProjectId;
use crate::ids::RoomName;
use crate::origin::TxnOrigin;

/// A leader waiting for tasks.
#[derive(Debug, Clone, PartialEq)]
pub struct Wait {
    /// The project.
    pub project: ProjectId,
    /// The awaited tasks.
    pub task_ids: Vec<String>,
    /// The mode it is woken into.
    pub wake_mode: Mode,
}

impl Wait {
    /// The awaited tasks if every one of them is done, `task` finding a task of a project (a
    /// task that vanished counts as done: nobody can finish it).
    pub fn finished(
        &self,
        task: impl Fn(&ProjectId, &str) -> Option<ProjectTask>,
    ) -> Option<Vec<ProjectTask>> {
        let mut done = Vec::new();
        for id in &self.task_ids {
            match task(&self.project, id) {
                Some(t) if t.status == TaskStatus::Done => done.push(t),
                Some(_) => return None,
                None => {}
            }
        }
        Some(done)
    }
}

/// The message a woken leader gets.
pub fn wake_message(done: &[ProjectTask]) -> String {
    let names: Vec<String> = done
        .iter()
        .map(|t| format!("'{}' ({})", t.id, t.title))
        .collect();
    format!(
        "The tasks you were waiting for are done: {}. Review the canvas, then direct more tasks, or end the project.",
        names.join(", ")
    )
}

type Key = (RoomName, FairyId);

/// Every waiting leader of the process.
#[derive(Debug, Default)]
pub struct WaitRegistry {
    waits: Mutex<HashMap<Key, Wait>>,
}

impl WaitRegistry {
    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Wait>> {
        self.waits.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `fairy` waits (replacing an earlier wait of it).
    pub fn register(&self, room: &RoomName, fairy: &FairyId, wait: Wait) {
        self.lock().insert((room.clone(), fairy.clone()), wait);
    }

    /// `fairy` no longer waits.
    pub fn remove(&self, room: &RoomName, fairy: &FairyId) {
        self.lock().remove(&(room.clone(), fairy.clone()));
    }

    /// Takes `fairy`'s wait out if every task of it is done (`task` finds a task of a
    /// project); the wait and the tasks.
    pub fn take_finished(
        &self,
        room: &RoomName,
        fairy: &FairyId,
        task: impl Fn(&ProjectId, &str) -> Option<ProjectTask>,
    ) -> Option<(Wait, Vec<ProjectTask>)> {
        let mut waits = self.lock();
        let key = (room.clone(), fairy.clone());
        let done = waits.get(&key)?.finished(task)?;
        waits.remove(&key).map(|w| (w, done))
    }
}

/// What a member tells its project's coordinator when that is another node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Report {
    /// `by` marked its task `task` done.
    TaskDone {
        /// The project.
        project: ProjectId,
        /// The task.
        task: String,
        /// The member.
        by: FairyId,
    },
    /// `by` stopped before finishing `task` (it went idle), or could not be reached.
    TaskStopped {
        /// The project.
        project: ProjectId,
        /// The task.
        task: String,
        /// The member.
        by: FairyId,
    },
}

/// The message a leader gets when `who` stopped before finishing `task`.
pub fn stopped_message(who: &FairyId, task: &str) -> String {
    format!(
        "'{who}' stopped before finishing task '{task}', which is back to todo: direct it again, or end the project."
    )
}

/// Delivers interrupts to the fairies of a room (the hub).
pub trait Deliver: Send + Sync {
    /// Interrupts `fairy` in `room`; false if it cannot be reached (not hosted, or scaled
    /// out: no node hosts it).
    fn interrupt(&self, room: &RoomName, fairy: &FairyId, interrupt: Interrupt) -> bool;
    /// Whether `fairy` is hosted by this node (a single node hosts every fairy).
    fn hosts(&self, room: &RoomName, fairy: &FairyId) -> bool;
    /// Sends `report` to the node hosting `leader` (scaled out; nothing on a single node).
    fn report(&self, room: &RoomName, leader: &FairyId, report: Report);
}

/// What a runtime holds to reach the other fairies of its room.
#[derive(Clone)]
pub struct Peers {
    /// The waiting leaders.
    pub waits: Arc<WaitRegistry>,
    /// Interrupt delivery.
    pub deliver: Arc<dyn Deliver>,
    /// The room's projects.
    pub projects: Arc<RoomProjects>,
}

impl Peers {
    /// Takes `fairy`'s wait out if every task it waits for is done in the room's projects.
    pub fn take_finished(
        &self,
        room: &RoomName,
        fairy: &FairyId,
    ) -> Option<(Wait, Vec<ProjectTask>)> {
        self.waits
            .take_finished(room, fairy, |p, id| self.projects.task(p, id))
    }

    /// Whether this node coordinates `project` (hosts its leader): only then does it change
    /// the project's record; otherwise its members [`Deliver::report`] to the leader's host.
    pub fn coordinates(&self, room: &RoomName, project: &Project) -> bool {
        self.deliver.hosts(room, &project.orchestrator_id)
    }

    /// On the coordinator: hands `task` of `project` back (`todo`, unassigned, written by
    /// `origin`) and wakes the leader, its wait removed, with `message` to direct it again.
    pub fn hand_back(
        &self,
        doc: &Doc,
        origin: TxnOrigin,
        room: &RoomName,
        project: &Project,
        mut task: ProjectTask,
        message: String,
    ) {
        task.status = TaskStatus::Todo;
        task.assigned_to = None;
        self.projects.put_task(doc, origin, &task);
        let leader = &project.orchestrator_id;
        let mode = project.role_of(leader).map(|r| r.active_mode());
        self.waits.remove(room, leader);
        let wake = Interrupt {
            input: Some(Request::follow_up(message, None)),
            mode,
        };
        self.deliver.interrupt(room, leader, wake);
    }

    /// Wakes `leader` if it waits and every task it waits for is done.
    pub fn wake_if_finished(&self, room: &RoomName, leader: &FairyId) -> bool {
        let Some((wait, done)) = self.take_finished(room, leader) else {
            return false;
        };
        let input = Request::follow_up(wake_message(&done), None);
        self.deliver.interrupt(
            room,
            leader,
            Interrupt {
                input: Some(input),
                mode: Some(wait.wake_mode),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn task(project: &ProjectId, id: &str, status: TaskStatus) -> ProjectTask {
        ProjectTask {
            id: id.into(),
            project_id: project.clone(),
            title: format!("task {id}"),
            text: String::new(),
            assigned_to: None,
            status,
            x: 0.0,
            y: 0.0,
            w: 10.0,
            h: 10.0,
            page_id: "page:main".into(),
        }
    }

    #[test]
    fn a_wait_is_taken_once_when_every_task_is_done() {
        let project = ProjectId::random();
        let mut tasks: HashMap<String, ProjectTask> = HashMap::new();
        tasks.insert("a".into(), task(&project, "a", TaskStatus::Done));
        tasks.insert("b".into(), task(&project, "b", TaskStatus::InProgress));
        let reg = WaitRegistry::default();
        let room = RoomName::parse("r").unwrap_or_else(|e| panic!("{e}"));
        let leader = FairyId::parse("o").unwrap_or_else(|e| panic!("{e}"));
        reg.register(
            &room,
            &leader,
            Wait {
                project: project.clone(),
                task_ids: vec!["a".into(), "b".into()],
                wake_mode: Mode::OrchestratingActive,
            },
        );
        let lookup = |tasks: &HashMap<String, ProjectTask>| {
            let tasks = tasks.clone();
            move |_: &ProjectId, id: &str| tasks.get(id).cloned()
        };
        assert!(reg.take_finished(&room, &leader, lookup(&tasks)).is_none());
        tasks.insert("b".into(), task(&project, "b", TaskStatus::Done));
        let (wait, done) = reg
            .take_finished(&room, &leader, lookup(&tasks))
            .unwrap_or_else(|| panic!("not woken"));
        assert_eq!(wait.wake_mode, Mode::OrchestratingActive);
        assert!(wake_message(&done).contains("'a' (task a), 'b' (task b)"));
        assert!(
            reg.take_finished(&room, &leader, lookup(&tasks)).is_none(),
            "once"
        );
    }
}
