//! Carrying out the runtime's non-canvas actions once they are complete and allowed:
//! `message` (chat + `lastMessage`), `think`, `review` (a follow-up over bounds),
//! `fly-to-bounds`, `upsert-personal-todo`, and the solo tasks (`create-solo-task`,
//! `start-solo-task` → working-solo, `mark-solo-task-done`), mirrored into the `tasks` root.

use serde_json::Value;

use crate::agent::actions::runtime::{
    Review, RuntimeCommand, SoloAction, TaskRef, Text, UpsertTodo,
};
use crate::agent::modes::Mode;
use crate::agent::runtime::FairyRuntime;
use crate::agent::state::{Request, SoloTask};
use crate::agent::work::TaskStatus;
use crate::agent::work::TodoItem;
use crate::canvas::transform::PromptTransform;

impl FairyRuntime {
    /// Carries out a complete, allowed runtime action: read once ([`RuntimeCommand::parse`]),
    /// then matched by variant; an unknown or malformed one becomes a correction.
    pub(super) fn apply_runtime(&mut self, action: &Value, t: &PromptTransform) {
        match RuntimeCommand::parse(action) {
            Ok(RuntimeCommand::Solo(solo)) => self.apply_solo(solo, t),
            Ok(RuntimeCommand::Project(project)) => {
                let kind = action.get("_type").and_then(Value::as_str).unwrap_or("");
                self.apply_project(project, kind, t)
            }
            Err(e) => self.corrections.push(e.to_string()),
        }
    }

    fn apply_solo(&mut self, action: SoloAction, t: &PromptTransform) {
        match action {
            SoloAction::Message(Text { text }) => {
                if !text.is_empty() {
                    self.say(&text);
                }
            }
            SoloAction::Think(Text { text }) => {
                self.beacon.update(|p| p.thinking = Some(text));
            }
            SoloAction::Review(Review { bounds, intent }) => match bounds.to_page(t) {
                Some(b) => {
                    self.schedule(Request::follow_up(
                        format!("Review your work in the bounds given. {intent}"),
                        Some(b),
                    ));
                }
                None => self
                    .corrections
                    .push("Rejected 'review': it needs x, y, w, h".into()),
            },
            SoloAction::FlyToBounds(bounds) => match bounds.to_page(t) {
                Some(b) => {
                    self.bounds = b;
                    self.beacon.fly_to((b.center_x(), b.center_y()));
                }
                None => self
                    .corrections
                    .push("Rejected 'fly-to-bounds': it needs x, y, w, h".into()),
            },
            SoloAction::UpsertPersonalTodo(UpsertTodo { id, text, status }) => {
                let id = if id.is_empty() {
                    format!("todo-{}", self.state.todo.len() + 1)
                } else {
                    id
                };
                match self.state.todo.iter_mut().find(|i| i.id == id) {
                    Some(item) => {
                        item.status = status;
                        if !text.is_empty() {
                            item.text = text;
                        }
                    }
                    None => self.state.todo.push(TodoItem { id, text, status }),
                }
                self.refresh_tasks();
            }
            SoloAction::CreateSoloTask(task) => {
                let id = if task.task_id.is_empty() {
                    format!("task-{}", self.state.tasks.len() + 1)
                } else {
                    task.task_id
                };
                self.state.tasks.retain(|t| t.id != id);
                self.state.tasks.push(SoloTask {
                    id: id.clone(),
                    title: task.title,
                    text: task.text,
                    status: TaskStatus::Todo,
                    bounds: task.bounds.to_page(t),
                });
                self.mirror_task(&id);
                self.refresh_tasks();
            }
            SoloAction::StartSoloTask(TaskRef { task_id }) => self.start_task(&task_id),
            SoloAction::MarkSoloTaskDone(_) => {
                let id = self.state.current_task.clone();
                if let Some(task) = self
                    .state
                    .tasks
                    .iter_mut()
                    .find(|t| Some(&t.id) == id.as_ref())
                {
                    task.status = TaskStatus::Done;
                }
                if let Some(id) = id {
                    self.mirror_task(&id);
                }
                self.refresh_tasks();
            }
        }
    }

    /// Writes the solo task's current state into the document's `tasks` root.
    fn mirror_task(&self, id: &str) {
        if let Some(task) = self.state.tasks.iter().find(|t| t.id == id) {
            crate::agent::state::tasks_doc::upsert_task(
                self.room.doc(),
                &self.entity.id,
                task,
                &self.state.page_id,
            );
        }
    }

    fn start_task(&mut self, id: &str) {
        let Some(task) = self.state.tasks.iter_mut().find(|t| t.id == id) else {
            self.corrections.push(format!(
                "Rejected 'start-solo-task': there is no task '{id}'"
            ));
            return;
        };
        task.status = TaskStatus::InProgress;
        let (title, text, bounds) = (task.title.clone(), task.text.clone(), task.bounds);
        self.mirror_task(id);
        self.state.current_task = Some(id.to_owned());
        self.switch_mode(Mode::WorkingSolo);
        self.state.current_task = Some(id.to_owned());
        self.refresh_tasks();
        self.schedule(Request::follow_up(
            format!("Work on your task '{id}': {title}. {text}"),
            bounds,
        ));
    }
}
