//! A fairy's side of being in a project: joining when an interrupt puts it into a project mode
//! (its membership read from the room's projects), picking up the task it was directed to, leaving
//! when it goes back to idling (the design's project-end memory transition pair), the task-end
//! pair, what it publishes in awareness (`projectId`, `taskId`, the project's `tasks`), and
//! resuming after a restart (waiting leaders wait again, drones start their task again).

use crate::agent::modes::{MemoryLevel, Mode};
use crate::agent::presence::TaskSummary;
use crate::agent::presence::beacon::Beacon;
use crate::agent::projects::doc::ProjectTask;
use crate::agent::projects::membership::task_request;
use crate::agent::projects::waits::{Report, Wait, stopped_message};
use crate::agent::runtime::FairyRuntime;
use crate::agent::state::memory::HistoryItem;
use crate::agent::state::{FairyState, Interrupt, Request};
use crate::agent::work::{Membership, ProjectStatus, TaskStatus, is_project_mode};

use super::ProjectWork;

impl ProjectWork {
    /// After an interrupt switched its mode to `mode`: joins the live project it belongs to
    /// when the new mode is a project mode (and picks up its task as a drone), leaves its
    /// project when it is not.
    pub fn after_switch(&self, mode: Mode, state: &mut FairyState) {
        if is_project_mode(mode) {
            self.join(&mut state.project);
            if mode == Mode::WorkingDrone {
                self.pick_up_task(&mut state.project);
            }
        } else if state.project.is_some() {
            self.leave(state);
        }
    }

    fn join(&self, membership: &mut Option<Membership>) {
        let me = &self.me;
        let Some(project) = self.book().and_then(|p| p.live_project_of(me)) else {
            return;
        };
        let (Some(id), Some(role)) = (project.id.clone(), project.role_of(me)) else {
            return;
        };
        if membership.as_ref().map(|m| &m.project_id) != Some(&id) {
            *membership = Some(Membership {
                project_id: id,
                role,
                task_id: None,
                waiting_for: Vec::new(),
            });
        }
    }

    /// The in-progress task of its project assigned to it.
    fn pick_up_task(&self, membership: &mut Option<Membership>) {
        let me = &self.me;
        let Some(projects) = self.book() else {
            return;
        };
        if let Some(m) = membership {
            m.task_id = projects
                .tasks(&m.project_id)
                .into_iter()
                .find(|t| t.assigned_to.as_ref() == Some(me) && t.status == TaskStatus::InProgress)
                .map(|t| t.id);
        }
    }

    /// Leaves its project: no wait stays registered, and the history gets the design's pair
    /// (a memory transition and a fairy-level self prompt naming the project and the others).
    pub fn leave(&self, state: &mut FairyState) {
        let Some(m) = state.project.take() else {
            return;
        };
        if let Some(peers) = &self.peers {
            peers.waits.remove(self.room.name(), &self.me);
        }
        let project = self.book().and_then(|p| p.project(&m.project_id));
        let title = project
            .as_ref()
            .map(|p| p.title.clone())
            .unwrap_or_default();
        let others: Vec<String> = project
            .as_ref()
            .map(|p| p.others(&self.me))
            .unwrap_or_default()
            .iter()
            .map(|f| f.to_string())
            .collect();
        let verb = if m.role.leads() {
            "led"
        } else {
            "took part in"
        };
        let outcome = match project.map(|p| p.status) {
            Some(ProjectStatus::Done) => "completed",
            Some(ProjectStatus::Aborted) => "aborted",
            _ => "unfinished",
        };
        state.history.push(HistoryItem::MemoryTransition {
            agent_facing_message: "[ACTIONS]: <Project actions filtered for brevity>".into(),
            user_facing_message: None,
            memory_level: MemoryLevel::Fairy,
        });
        state.history.push(HistoryItem::Prompt {
            source: "self".into(),
            agent_facing_message: format!(
                "I {verb} the \"{title}\" project ({outcome}) with {} other fairy(s): {}",
                others.len(),
                others.join(", ")
            ),
            memory_level: MemoryLevel::Fairy,
            request_id: None,
            acceptance: None,
        });
    }

    /// It went idle by itself (a model failure, too many turns) or because its project ended,
    /// a member of `m`'s project. While the project still lives, a leader aborts it (every
    /// other member goes idle) and a member puts its unfinished task back to `todo` and tells
    /// its leader, who is woken to direct it again. What it says about it, if anything; it
    /// leaves the project next ([`ProjectWork::leave`]).
    pub fn went_idle(&self, m: &Membership) -> Option<&'static str> {
        let doc = self.room.doc();
        let peers = self.peers.as_ref()?;
        let projects = &peers.projects;
        let mut project = projects
            .project(&m.project_id)
            .filter(|p| p.status.is_live())?;
        let room = self.room.name();
        if m.role.leads() {
            projects.abort(doc, self.origin(), &m.project_id, &mut project);
            for other in project.others(&self.me) {
                let idle = Interrupt {
                    input: None,
                    mode: Some(Mode::Idling),
                };
                peers.deliver.interrupt(room, &other, idle);
            }
            return Some("I stopped leading the project, so it is aborted.");
        }
        if let Some(task) = m
            .task_id
            .as_deref()
            .and_then(|id| projects.task(&m.project_id, id))
            .filter(|t| t.status == TaskStatus::InProgress)
        {
            let me = self.me.clone();
            if peers.coordinates(room, &project) {
                let message = stopped_message(&me, &task.id);
                peers.hand_back(doc, self.origin(), room, &project, task, message);
            } else {
                // Scaled out, the leader's host coordinates: it hands the task back.
                let mut mine = task.clone();
                mine.status = TaskStatus::Todo;
                mine.assigned_to = None;
                projects.note_task(&mine);
                let report = Report::TaskStopped {
                    project: m.project_id.clone(),
                    task: task.id,
                    by: me,
                };
                peers.deliver.report(room, &project.orchestrator_id, report);
            }
        }
        None
    }

    /// Its project task, and whether it is done (for the mode hooks).
    pub fn task_ctx(&self, membership: Option<&Membership>) -> Option<(String, bool)> {
        let m = membership?;
        let id = m.task_id.clone()?;
        let done = self
            .book()
            .and_then(|p| p.task(&m.project_id, &id))
            .is_none_or(|t| t.status == TaskStatus::Done);
        Some((id, done))
    }

    /// Publishes `projectId`, `taskId` and the project's `tasks` on `beacon` (nothing when it
    /// is in no project: the solo view stays). Publishes only what changed, so the host may
    /// call it on every idle tick to show the other members' progress.
    pub fn publish(&self, beacon: &Beacon, membership: Option<&Membership>) {
        let shown = beacon.snapshot();
        let Some(m) = membership else {
            if shown.project_id.is_some() {
                beacon.update(|p| p.project_id = None);
            }
            return;
        };
        let tasks: Vec<TaskSummary> = self
            .book()
            .map(|p| p.tasks(&m.project_id))
            .unwrap_or_default()
            .into_iter()
            .map(|t| TaskSummary {
                id: t.id,
                title: t.title,
                status: t.status,
            })
            .collect();
        let (project, task) = (m.project_id.clone(), m.task_id.clone());
        if shown.project_id.as_ref() == Some(&project)
            && shown.task_id == task
            && shown.tasks == tasks
        {
            return;
        }
        beacon.update(|p| {
            p.project_id = Some(project);
            p.task_id = task;
            p.tasks = tasks;
        });
    }

    /// How a member of `m`'s project in `mode` resumes its part after a restart (see
    /// [`FairyRuntime::resume_project`]); `None` when the project ended meanwhile.
    fn resumption(&self, mode: Mode, m: &Membership) -> Option<Resume> {
        let live = self
            .book()
            .and_then(|p| p.project(&m.project_id))
            .is_some_and(|p| p.status.is_live());
        if !live {
            return None;
        }
        Some(match mode {
            Mode::OrchestratingWaiting | Mode::DuoOrchestratingWaiting => {
                Resume::Wait(self.peers.is_some().then(|| Wait {
                    project: m.project_id.clone(),
                    task_ids: m.waiting_for.clone(),
                    wake_mode: m.role.active_mode(),
                }))
            }
            Mode::WorkingDrone | Mode::WorkingOrchestrator => Resume::Request(
                m.task_id
                    .as_deref()
                    .and_then(|id| self.book()?.task(&m.project_id, id))
                    .filter(|task| task.status == TaskStatus::InProgress)
                    .map(|task| task_request(&task)),
            ),
            Mode::OrchestratingActive | Mode::DuoOrchestratingActive => {
                Resume::Request(Some(Request::follow_up(
                    "The server restarted while you were leading the project: look at the tasks and continue it.",
                    None,
                )))
            }
            _ => Resume::Request(None),
        })
    }
}

/// How a member of a live project resumes after a restart.
enum Resume {
    /// A waiting leader waits again (none without peers).
    Wait(Option<Wait>),
    /// The request that resumes its part, if any.
    Request(Option<Request>),
}

/// The design's task-end pair, at the project level the member goes back to.
pub(super) fn task_end_pair(history: &mut Vec<HistoryItem>, task: &ProjectTask) {
    history.push(HistoryItem::MemoryTransition {
        agent_facing_message: "[ACTIONS]: <Task actions filtered for brevity>".into(),
        user_facing_message: None,
        memory_level: MemoryLevel::Project,
    });
    history.push(HistoryItem::Prompt {
        source: "self".into(),
        agent_facing_message: format!(
            "I just finished the task.\nID: \"{}\"\nTitle: \"{}\"\nDescription: \"{}\".",
            task.id, task.title, task.text
        ),
        memory_level: MemoryLevel::Project,
        request_id: None,
        acceptance: None,
    });
}

impl FairyRuntime {
    /// Publishes its project in awareness (see [`ProjectWork::publish`]).
    pub fn publish_project(&self) {
        self.projects
            .publish(&self.beacon, self.state.project.as_ref());
    }

    /// After a restart (its state restored): the request that resumes its part of a live
    /// project, if any — a waiting leader waits again (woken at once if its tasks are done
    /// meanwhile), a member whose task was in progress starts it again, an active leader
    /// continues. A member of a project that ended meanwhile goes idle.
    pub fn resume_project(&mut self) -> Option<Request> {
        let m = self.state.project.clone()?;
        let Some(resume) = self.projects.resumption(self.modes.mode(), &m) else {
            if is_project_mode(self.modes.mode()) {
                self.switch_mode(Mode::Idling);
            }
            self.projects.leave(&mut self.state);
            self.refresh_tasks();
            self.persist();
            return None;
        };
        self.refresh_tasks();
        match resume {
            Resume::Wait(wait) => {
                let (mode, request) = self.projects.register_wait(wait?)?;
                self.switch_mode(mode);
                Some(request)
            }
            Resume::Request(request) => request,
        }
    }
}
