//! Carrying out a complete, allowed project action on the runtime (docs/fairies.md
//! "Projects"): the leader's `start-project`, `create-project-task`,
//! `direct-to-start-project-task`, `await-tasks-completion`, `end-project`, `abort-project` and
//! their duo forms plus `start-duo-task`; the members' `mark-drone-task-done` and
//! `mark-duo-task-done`. The action is parsed once (`RuntimeCommand::parse`); anything the
//! model got wrong (malformed arguments, directing itself or a non-member, an unknown task) is
//! refused with a correction it reads next turn, and changes nothing; a refused direction also
//! interrupts the rest of that answer (the design's error-correction interrupt).

use std::sync::Arc;

use super::{Notice, ProjectWork};
use crate::agent::actions::project::{
    AwaitTasks, CreateTask, Direct, ProjectAction, StartDuoTask, StartProject,
};
use crate::agent::modes::Mode;
use crate::agent::projects::book::RoomProjects;
use crate::agent::projects::doc::{Project, ProjectTask};
use crate::agent::projects::membership::task_request;
use crate::agent::projects::waits::{Report, Wait};
use crate::agent::runtime::steps::Step;
use crate::agent::state::{FairyState, Interrupt, Request};
use crate::agent::work::{Membership, ProjectStatus, Role, TaskStatus};
use crate::canvas::transform::PromptTransform;
use crate::ids::FairyId;

/// Longest task id accepted.
const MAX_TASK_ID: usize = 64;

type Outcome = Result<(), String>;

impl ProjectWork {
    /// Carries out a project action (see the module docs) on the fairy's `state`; what the
    /// runtime must do next goes to `steps`, in order. `Err(why)`: refused.
    pub fn act(
        &self,
        parsed: ProjectAction,
        t: &PromptTransform,
        state: &mut FairyState,
        steps: &mut Vec<Step>,
    ) -> Outcome {
        match parsed {
            ProjectAction::StartProject(a) | ProjectAction::StartDuoProject(a) => {
                self.start_project(state, a)
            }
            ProjectAction::CreateProjectTask(a) | ProjectAction::CreateDuoTask(a) => {
                self.create_task(state, a, t)
            }
            ProjectAction::DirectToStartProjectTask(a) | ProjectAction::DirectToStartDuoTask(a) => {
                self.direct(state, a)
            }
            ProjectAction::AwaitTasksCompletion(a) | ProjectAction::AwaitDuoTasksCompletion(a) => {
                self.await_tasks(state, a, steps)
            }
            ProjectAction::EndProject(a) | ProjectAction::EndDuoProject(a) => {
                self.end_project(state, (ProjectStatus::Done, &a.summary), steps)
            }
            ProjectAction::AbortProject(a) => {
                self.end_project(state, (ProjectStatus::Aborted, &a.reason), steps)
            }
            ProjectAction::MarkDroneTaskDone(_) | ProjectAction::MarkDuoTaskDone(_) => {
                self.finish_task(state, steps)
            }
            ProjectAction::StartDuoTask(a) => self.start_own_task(state, a, steps),
        }
    }

    /// The room's projects.
    fn book_here(&self) -> Result<&Arc<RoomProjects>, String> {
        self.book()
            .ok_or_else(|| "projects are not available here".to_owned())
    }

    /// Its membership and the project record.
    fn project(&self, state: &FairyState) -> Result<(Membership, Project), String> {
        let m = state.project.clone().ok_or("you are not in a project")?;
        let p = self
            .book_here()?
            .project(&m.project_id)
            .filter(|p| p.status.is_live())
            .ok_or("your project is no longer running")?;
        Ok((m, p))
    }

    fn task(&self, m: &Membership, task_id: &str) -> Result<ProjectTask, String> {
        self.book_here()?
            .task(&m.project_id, task_id)
            .ok_or_else(|| format!("there is no task '{task_id}' in this project"))
    }

    fn put_task(&self, task: &ProjectTask) -> Outcome {
        self.book_here()?
            .put_task(self.room.doc(), self.origin(), task);
        Ok(())
    }

    /// The task `task_id`, if it has not started yet.
    fn startable_task(&self, m: &Membership, task_id: &str) -> Result<ProjectTask, String> {
        let task = self.task(m, task_id)?;
        if task.status != TaskStatus::Todo {
            return Err(format!(
                "task '{}' is {} already",
                task.id,
                task.status.name()
            ));
        }
        Ok(task)
    }

    fn start_project(&self, state: &FairyState, a: StartProject) -> Outcome {
        let (m, mut p) = self.project(state)?;
        if a.title.trim().is_empty() {
            return Err("the project needs a title".into());
        }
        p.title = a.title;
        p.description = a.description;
        p.plan = a.plan;
        p.status = ProjectStatus::Active;
        self.book_here()?
            .put_project(self.room.doc(), self.origin(), &m.project_id, &p);
        Ok(())
    }

    fn create_task(&self, state: &FairyState, a: CreateTask, t: &PromptTransform) -> Outcome {
        let (m, _) = self.project(state)?;
        let id = a.task_id.trim();
        if id.is_empty() || id.len() > MAX_TASK_ID || id.contains('/') {
            return Err("a task id is 1 to 64 characters without '/'".into());
        }
        if a.w <= 0.0 || a.h <= 0.0 {
            return Err("a task's bounds need a positive width and height".into());
        }
        if self.book_here()?.task(&m.project_id, id).is_some() {
            return Err(format!("task '{id}' exists already; use another id"));
        }
        let (x, y) = t.point_from_model(a.x, a.y);
        let task = ProjectTask {
            id: id.to_owned(),
            project_id: m.project_id.clone(),
            title: a.title,
            text: a.text,
            assigned_to: None,
            status: TaskStatus::Todo,
            x,
            y,
            w: a.w,
            h: a.h,
            page_id: state.page_id.clone(),
        };
        self.put_task(&task)
    }

    fn direct(&self, state: &FairyState, a: Direct) -> Outcome {
        let (m, p) = self.project(state)?;
        if a.fairy_id == self.me.as_str() {
            return Err(if m.role == Role::DuoOrchestrator {
                "You cannot direct yourself to do a task. Direct your partner, or use start-duo-task to work on it yourself.".into()
            } else {
                "You cannot direct yourself to do a task. Please direct another fairy to do the task.".into()
            });
        }
        let member = FairyId::parse(&a.fairy_id)
            .ok()
            .filter(|f| p.role_of(f).is_some());
        let Some(fairy) = member else {
            let others: Vec<String> = p.others(&self.me).iter().map(ToString::to_string).collect();
            return Err(format!(
                "'{}' is not a member of this project; direct one of: {}",
                a.fairy_id,
                others.join(", ")
            ));
        };
        let mut task = self.startable_task(&m, &a.task_id)?;
        let busy = self
            .book_here()?
            .tasks(&m.project_id)
            .into_iter()
            .find(|t| t.assigned_to.as_ref() == Some(&fairy) && t.status == TaskStatus::InProgress);
        if let Some(busy) = busy {
            return Err(format!(
                "'{fairy}' is working on task '{}'; await it before directing it again",
                busy.id
            ));
        }
        let peers = self.peers.as_ref().ok_or("no other fairy can be reached")?;
        task.assigned_to = Some(fairy.clone());
        task.status = TaskStatus::InProgress;
        self.put_task(&task)?;
        let delivered = peers.deliver.interrupt(
            self.room.name(),
            &fairy,
            Interrupt {
                input: Some(task_request(&task)),
                mode: Some(Mode::WorkingDrone),
            },
        );
        if !delivered {
            task.assigned_to = None;
            task.status = TaskStatus::Todo;
            self.put_task(&task)?;
            return Err(format!("'{fairy}' cannot be reached now"));
        }
        Ok(())
    }

    fn await_tasks(&self, state: &mut FairyState, a: AwaitTasks, steps: &mut Vec<Step>) -> Outcome {
        let (m, _) = self.project(state)?;
        if a.task_ids.is_empty() {
            return Err("name the tasks to wait for".into());
        }
        for id in &a.task_ids {
            self.task(&m, id)?;
        }
        self.peers.as_ref().ok_or("no other fairy can be reached")?;
        if let Some(own) = &mut state.project {
            own.waiting_for = a.task_ids.clone();
        }
        steps.push(Step::Switch(m.role.waiting_mode()));
        // Registered once waiting; tasks finished before that wake it at once.
        steps.push(Step::Await(Wait {
            project: m.project_id.clone(),
            task_ids: a.task_ids,
            wake_mode: m.role.active_mode(),
        }));
        Ok(())
    }

    fn end_project(
        &self,
        state: &FairyState,
        (status, text): (ProjectStatus, &str),
        steps: &mut Vec<Step>,
    ) -> Outcome {
        let (m, mut p) = self.project(state)?;
        let book = self.book_here()?;
        if status == ProjectStatus::Aborted {
            book.abort(self.room.doc(), self.origin(), &m.project_id, &mut p);
        } else {
            p.status = status;
            book.put_project(self.room.doc(), self.origin(), &m.project_id, &p);
        }
        if let Some(peers) = &self.peers {
            for other in p.others(&self.me) {
                peers.deliver.interrupt(
                    self.room.name(),
                    &other,
                    Interrupt {
                        input: None,
                        mode: Some(Mode::Idling),
                    },
                );
            }
        }
        if !text.trim().is_empty() {
            steps.push(Step::Say(text.trim().to_owned()));
        }
        steps.push(Step::Switch(Mode::Idling));
        steps.push(Step::Leave);
        Ok(())
    }

    fn finish_task(&self, state: &mut FairyState, steps: &mut Vec<Step>) -> Outcome {
        let (m, p) = self.project(state)?;
        let id = m.task_id.clone().ok_or("you are not working on a task")?;
        let mut task = self.task(&m, &id)?;
        task.status = TaskStatus::Done;
        // Scaled out, a member whose leader is hosted elsewhere tells the leader's host, which
        // stores the task and wakes the leader.
        let here = self
            .peers
            .as_ref()
            .is_none_or(|peers| peers.coordinates(self.room.name(), &p));
        if here {
            self.put_task(&task)?;
        } else {
            self.book_here()?.note_task(&task);
        }
        super::membership::task_end_pair(&mut state.history, &task);
        if let Some(own) = &mut state.project {
            own.task_id = None;
        }
        if m.role == Role::Drone {
            steps.push(Step::Switch(Mode::StandingBy));
            let leader = p.orchestrator_id.clone();
            steps.push(Step::Notify(if here {
                Notice::WakeLeader(leader)
            } else {
                let report = Report::TaskDone {
                    project: m.project_id.clone(),
                    task: id.clone(),
                    by: self.me.clone(),
                };
                Notice::Report(leader, report)
            }));
        } else {
            steps.push(Step::Switch(m.role.active_mode()));
            steps.push(Step::Schedule(Request::follow_up(
                format!(
                    "You finished your task '{id}'. Await your partner's tasks, direct the next one, or end the project."
                ),
                None,
            )));
        }
        Ok(())
    }

    fn start_own_task(
        &self,
        state: &FairyState,
        a: StartDuoTask,
        steps: &mut Vec<Step>,
    ) -> Outcome {
        let (m, _) = self.project(state)?;
        let mut task = self.startable_task(&m, &a.task_id)?;
        task.assigned_to = Some(self.me.clone());
        task.status = TaskStatus::InProgress;
        self.put_task(&task)?;
        steps.push(Step::Switch(Mode::WorkingOrchestrator));
        // Set once it works as the orchestrator (the switch's hooks saw it without).
        steps.push(Step::TakeTask(task.id.clone()));
        steps.push(Step::Schedule(task_request(&task)));
        Ok(())
    }
}
