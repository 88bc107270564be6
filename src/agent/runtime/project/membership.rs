//! A fairy's side of being in a project: joining when an interrupt puts it into a project mode
//! (its membership read from the room's projects), picking up the task it was directed to, leaving
//! when it goes back to idling (the design's project-end memory transition pair), the task-end
//! pair, what it publishes in awareness (`projectId`, `taskId`, the project's `tasks`), and
//! resuming after a restart (waiting leaders wait again, drones start their task again).

use crate::agent::modes::{MemoryLevel, Mode};
use crate::agent::presence::TaskSummary;
use crate::agent::projects::doc::ProjectTask;
use crate::agent::projects::membership::task_request;
use crate::agent::projects::waits::{Report, Wait, stopped_message, wake_message};
use crate::agent::runtime::FairyRuntime;
use crate::agent::state::memory::HistoryItem;
use crate::agent::state::{Interrupt, Request};
use crate::agent::work::{Membership, ProjectStatus, TaskStatus, is_project_mode};

impl FairyRuntime {
    /// After an interrupt switched its mode: joins the live project it belongs to when the new
    /// mode is a project mode (and picks up its task as a drone), leaves its project when it
    /// is not, and republishes its tasks.
    pub(crate) fn after_interrupt_switch(&mut self) {
        let mode = self.modes.mode();
        if is_project_mode(mode) {
            self.join_project();
            if mode == Mode::WorkingDrone {
                self.pick_up_task();
            }
        } else if self.state.project.is_some() {
            self.leave_project();
        }
        self.refresh_tasks();
    }

    fn join_project(&mut self) {
        let me = self.entity.id.clone();
        let Some(project) = self.projects().and_then(|p| p.live_project_of(&me)) else {
            return;
        };
        let (Some(id), Some(role)) = (project.id.clone(), project.role_of(&me)) else {
            return;
        };
        if self.state.project.as_ref().map(|m| &m.project_id) != Some(&id) {
            self.state.project = Some(Membership {
                project_id: id,
                role,
                task_id: None,
                waiting_for: Vec::new(),
            });
        }
    }

    /// The in-progress task of its project assigned to it.
    fn pick_up_task(&mut self) {
        let me = self.entity.id.clone();
        let Some(projects) = self.projects() else {
            return;
        };
        if let Some(m) = &mut self.state.project {
            m.task_id = projects
                .tasks(&m.project_id)
                .into_iter()
                .find(|t| t.assigned_to.as_ref() == Some(&me) && t.status == TaskStatus::InProgress)
                .map(|t| t.id);
        }
    }

    /// Leaves its project: no wait stays registered, and the history gets the design's pair
    /// (a memory transition and a fairy-level self prompt naming the project and the others).
    pub(crate) fn leave_project(&mut self) {
        let Some(m) = self.state.project.take() else {
            return;
        };
        if let Some(peers) = &self.peers {
            peers.waits.remove(self.room.name(), &self.entity.id);
        }
        let project = self.projects().and_then(|p| p.project(&m.project_id));
        let title = project
            .as_ref()
            .map(|p| p.title.clone())
            .unwrap_or_default();
        let others: Vec<String> = project
            .as_ref()
            .map(|p| p.others(&self.entity.id))
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
        self.state.history.push(HistoryItem::MemoryTransition {
            agent_facing_message: "[ACTIONS]: <Project actions filtered for brevity>".into(),
            user_facing_message: None,
            memory_level: MemoryLevel::Fairy,
        });
        self.state.history.push(HistoryItem::Prompt {
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

    /// It went idle by itself (a model failure, too many turns) or because its project ended.
    /// While the project still lives, a leader aborts it (every other member goes idle) and a
    /// member puts its unfinished task back to `todo` and tells its leader, who is woken to
    /// direct it again; then it leaves the project.
    pub(crate) fn went_idle(&mut self) {
        let Some(m) = self.state.project.clone() else {
            return;
        };
        let doc = self.room.doc().clone();
        let Some(peers) = self.peers.clone() else {
            self.leave_project();
            return;
        };
        let projects = peers.projects.clone();
        let live = projects
            .project(&m.project_id)
            .filter(|p| p.status.is_live());
        if let Some(mut project) = live {
            let room = self.room.name().clone();
            if m.role.leads() {
                projects.abort(&doc, self.origin(), &m.project_id, &mut project);
                for other in project.others(&self.entity.id) {
                    let idle = Interrupt {
                        input: None,
                        mode: Some(Mode::Idling),
                    };
                    peers.deliver.interrupt(&room, &other, idle);
                }
                self.say("I stopped leading the project, so it is aborted.");
            } else if let Some(task) = m
                .task_id
                .as_deref()
                .and_then(|id| projects.task(&m.project_id, id))
                .filter(|t| t.status == TaskStatus::InProgress)
            {
                let me = self.entity.id.clone();
                if peers.coordinates(&room, &project) {
                    let message = stopped_message(&me, &task.id);
                    peers.hand_back(&doc, self.origin(), &room, &project, task, message);
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
                    peers
                        .deliver
                        .report(&room, &project.orchestrator_id, report);
                }
            }
        }
        self.leave_project();
    }

    /// The design's task-end pair, at the project level the member goes back to.
    pub(crate) fn task_transition(&mut self, task: &ProjectTask) {
        self.state.history.push(HistoryItem::MemoryTransition {
            agent_facing_message: "[ACTIONS]: <Task actions filtered for brevity>".into(),
            user_facing_message: None,
            memory_level: MemoryLevel::Project,
        });
        self.state.history.push(HistoryItem::Prompt {
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

    /// Its project task, and whether it is done (for the mode hooks).
    pub(crate) fn project_task_ctx(&self) -> Option<(String, bool)> {
        let m = self.state.project.as_ref()?;
        let id = m.task_id.clone()?;
        let done = self
            .projects()
            .and_then(|p| p.task(&m.project_id, &id))
            .is_none_or(|t| t.status == TaskStatus::Done);
        Some((id, done))
    }

    /// Publishes `projectId`, `taskId` and the project's `tasks` in awareness (nothing when it
    /// is in no project: the solo view stays). Publishes only what changed, so the host may
    /// call it on every idle tick to show the other members' progress.
    pub(crate) fn publish_project(&self) {
        let shown = self.beacon.snapshot();
        let Some(m) = &self.state.project else {
            if shown.project_id.is_some() {
                self.beacon.update(|p| p.project_id = None);
            }
            return;
        };
        let tasks: Vec<TaskSummary> = self
            .projects()
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
        self.beacon.update(|p| {
            p.project_id = Some(project);
            p.task_id = task;
            p.tasks = tasks;
        });
    }

    /// After a restart (its state restored): the request that resumes its part of a live
    /// project, if any — a waiting leader waits again (woken at once if its tasks are done
    /// meanwhile), a member whose task was in progress starts it again, an active leader
    /// continues. A member of a project that ended meanwhile goes idle.
    pub fn resume_project(&mut self) -> Option<Request> {
        let m = self.state.project.clone()?;
        let live = self
            .projects()
            .and_then(|p| p.project(&m.project_id))
            .is_some_and(|p| p.status.is_live());
        if !live {
            if is_project_mode(self.modes.mode()) {
                self.switch_mode(Mode::Idling);
            }
            self.leave_project();
            self.refresh_tasks();
            self.persist();
            return None;
        }
        self.refresh_tasks();
        match self.modes.mode() {
            Mode::OrchestratingWaiting | Mode::DuoOrchestratingWaiting => {
                let peers = self.peers.clone()?;
                let wait = Wait {
                    project: m.project_id.clone(),
                    task_ids: m.waiting_for.clone(),
                    wake_mode: m.role.active_mode(),
                };
                peers
                    .waits
                    .register(self.room.name(), &self.entity.id, wait);
                let (wait, done) = peers.take_finished(self.room.name(), &self.entity.id)?;
                self.switch_mode(wait.wake_mode);
                Some(Request::follow_up(wake_message(&done), None))
            }
            Mode::WorkingDrone | Mode::WorkingOrchestrator => {
                let task = self
                    .projects()?
                    .task(&m.project_id, m.task_id.as_deref()?)?;
                (task.status == TaskStatus::InProgress).then(|| task_request(&task))
            }
            Mode::OrchestratingActive | Mode::DuoOrchestratingActive => Some(Request::follow_up(
                "The server restarted while you were leading the project: look at the tasks and continue it.",
                None,
            )),
            _ => None,
        }
    }
}
