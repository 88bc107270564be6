//! Carrying out the runtime's non-canvas actions once they are complete and allowed:
//! `message` (chat + `lastMessage`), `think`, `review` (a follow-up over bounds),
//! `fly-to-bounds`, `upsert-personal-todo`, and the solo tasks (`create-solo-task`,
//! `start-solo-task` → working-solo, `mark-solo-task-done`), mirrored into the `tasks` root.

use serde_json::Value;

use super::modes::Mode;
use super::presence::TodoItem;
use super::runtime::{FairyRuntime, Request, SoloTask};
use super::turn::{bounds_of, text_of};
use crate::canvas::transform::PromptTransform;

impl FairyRuntime {
    /// Carries out a complete, allowed runtime action.
    pub(super) fn apply_runtime(&mut self, kind: &str, action: &Value, t: &PromptTransform) {
        match kind {
            "message" => {
                let text = text_of(action, "text");
                if !text.is_empty() {
                    self.say(&text);
                }
            }
            "think" => {
                let text = text_of(action, "text");
                self.beacon.update(|p| p.thinking = Some(text));
            }
            "review" => match bounds_of(action, t) {
                Some(b) => {
                    let intent = text_of(action, "intent");
                    self.schedule(Request::follow_up(
                        format!("Review your work in the bounds given. {intent}"),
                        Some(b),
                    ));
                }
                None => self
                    .corrections
                    .push("Rejected 'review': it needs x, y, w, h".into()),
            },
            "fly-to-bounds" => match bounds_of(action, t) {
                Some(b) => {
                    self.bounds = b;
                    self.beacon.fly_to((b.center_x(), b.center_y()));
                }
                None => self
                    .corrections
                    .push("Rejected 'fly-to-bounds': it needs x, y, w, h".into()),
            },
            "upsert-personal-todo" => {
                let id = text_of(action, "id");
                let id = if id.is_empty() {
                    format!("todo-{}", self.state.todo.len() + 1)
                } else {
                    id
                };
                let status = match text_of(action, "status").as_str() {
                    s @ ("todo" | "in-progress" | "done") => s.to_owned(),
                    _ => "todo".to_owned(),
                };
                let text = text_of(action, "text");
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
            "create-solo-task" => {
                let id = text_of(action, "taskId");
                let id = if id.is_empty() {
                    format!("task-{}", self.state.tasks.len() + 1)
                } else {
                    id
                };
                self.state.tasks.retain(|t| t.id != id);
                self.state.tasks.push(SoloTask {
                    id: id.clone(),
                    title: text_of(action, "title"),
                    text: text_of(action, "text"),
                    status: "todo".into(),
                    bounds: bounds_of(action, t),
                });
                self.mirror_task(&id);
                self.refresh_tasks();
            }
            "start-solo-task" => self.start_task(&text_of(action, "taskId")),
            "mark-solo-task-done" => {
                let id = self.state.current_task.clone();
                if let Some(task) = self
                    .state
                    .tasks
                    .iter_mut()
                    .find(|t| Some(&t.id) == id.as_ref())
                {
                    task.status = "done".into();
                }
                if let Some(id) = id {
                    self.mirror_task(&id);
                }
                self.refresh_tasks();
            }
            name if super::projects::actions::ProjectAction::is_project_action(name) => {
                self.apply_project(action, t)
            }
            other => self.corrections.push(format!(
                "Rejected '{other}': this action is not available yet"
            )),
        }
    }

    /// Writes the solo task's current state into the document's `tasks` root.
    fn mirror_task(&self, id: &str) {
        if let Some(task) = self.state.tasks.iter().find(|t| t.id == id) {
            super::tasks_doc::upsert_task(
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
        task.status = "in-progress".into();
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
