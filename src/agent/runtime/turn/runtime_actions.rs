//! Carrying out the runtime's non-canvas actions once they are complete and allowed:
//! `message` (chat + `lastMessage`), `think`, `review` (a follow-up over bounds),
//! `fly-to-bounds`, `upsert-personal-todo`, and the solo tasks (`create-solo-task`,
//! `start-solo-task` → working-solo, `mark-solo-task-done`), mirrored into the `tasks` root.
//! Project actions go on to the fairy's [`crate::agent::runtime::project_work::ProjectWork`].
//!
//! The solo actions are a value, the [`SoloWork`]: what they change (the fairy's state, the
//! request's bounds, its awareness peer) borrowed from the runtime for one action, which
//! hands back the [`Step`]s the runtime carries out after it (a mode switch, a request
//! scheduled, a chat message, a correction).

use serde_json::Value;

use crate::agent::actions::runtime::{
    Review, RuntimeCommand, SoloAction, TaskRef, Text, UpsertTodo,
};
use crate::agent::modes::Mode;
use crate::agent::presence::beacon::Beacon;
use crate::agent::runtime::FairyRuntime;
use crate::agent::runtime::steps::Step;
use crate::agent::state::{FairyState, Request, SoloTask};
use crate::agent::work::TaskStatus;
use crate::agent::work::TodoItem;
use crate::canvas::geometry::Bounds;
use crate::canvas::transform::PromptTransform;
use crate::ids::FairyId;
use crate::room::Room;

/// The solo runtime actions, and what they change.
struct SoloWork<'a> {
    /// The fairy's todo, solo tasks and current task.
    state: &'a mut FairyState,
    /// The running request's bounds (`fly-to-bounds` moves them).
    bounds: &'a mut Bounds,
    /// Its awareness peer (thinking, flights).
    beacon: &'a std::sync::Arc<Beacon>,
    /// The room, whose `tasks` root mirrors the solo tasks.
    room: &'a Room,
    me: &'a FairyId,
}

impl FairyRuntime {
    /// Carries out a complete, allowed runtime action: read once ([`RuntimeCommand::parse`]),
    /// then matched by variant; an unknown or malformed one becomes a correction.
    pub(super) fn carry_out(&mut self, action: &Value, t: &PromptTransform) {
        match RuntimeCommand::parse(action) {
            Ok(RuntimeCommand::Solo(solo)) => {
                let steps = SoloWork {
                    state: &mut self.state,
                    bounds: &mut self.bounds,
                    beacon: &self.beacon,
                    room: &self.room,
                    me: &self.entity.id,
                }
                .act(solo, t);
                self.follow(steps);
            }
            Ok(RuntimeCommand::Project(project)) => {
                let kind = action.get("_type").and_then(Value::as_str).unwrap_or("");
                let directs = matches!(
                    project,
                    crate::agent::actions::project::ProjectAction::DirectToStartProjectTask(_)
                        | crate::agent::actions::project::ProjectAction::DirectToStartDuoTask(_)
                );
                let mut steps = Vec::new();
                let outcome = self.projects.act(project, t, &mut self.state, &mut steps);
                self.follow(steps);
                if directs {
                    // The design's error-correction interrupt: what the model planned after a
                    // refused direction is not carried out; it answers the correction instead.
                    self.feedback.cut_answer(outcome.is_err());
                }
                if let Err(why) = outcome {
                    self.feedback.correct(format!("Rejected '{kind}': {why}"));
                }
                self.refresh_tasks();
            }
            Err(e) => self.feedback.correct(e.to_string()),
        }
    }
}

impl SoloWork<'_> {
    /// Carries out `action`; what the runtime does next, in order.
    fn act(mut self, action: SoloAction, t: &PromptTransform) -> Vec<Step> {
        match action {
            SoloAction::Message(Text { text }) => {
                if !text.is_empty() {
                    return vec![Step::Say(text)];
                }
            }
            SoloAction::Think(Text { text }) => {
                self.beacon.update(|p| p.thinking = Some(text));
            }
            SoloAction::Review(Review { bounds, intent }) => {
                return vec![match bounds.to_page(t) {
                    Some(b) => Step::Schedule(Request::follow_up(
                        format!("Review your work in the bounds given. {intent}"),
                        Some(b),
                    )),
                    None => Step::Correct("Rejected 'review': it needs x, y, w, h".into()),
                }];
            }
            SoloAction::FlyToBounds(bounds) => match bounds.to_page(t) {
                Some(b) => {
                    *self.bounds = b;
                    self.beacon.fly_to((b.center_x(), b.center_y()));
                }
                None => {
                    return vec![Step::Correct(
                        "Rejected 'fly-to-bounds': it needs x, y, w, h".into(),
                    )];
                }
            },
            SoloAction::UpsertPersonalTodo(UpsertTodo { id, text, status }) => {
                let todo = &mut self.state.todo;
                let id = if id.is_empty() {
                    format!("todo-{}", todo.len() + 1)
                } else {
                    id
                };
                match todo.iter_mut().find(|i| i.id == id) {
                    Some(item) => {
                        item.status = status;
                        if !text.is_empty() {
                            item.text = text;
                        }
                    }
                    None => todo.push(TodoItem { id, text, status }),
                }
                return vec![Step::RefreshTasks];
            }
            SoloAction::CreateSoloTask(task) => {
                let tasks = &mut self.state.tasks;
                let id = if task.task_id.is_empty() {
                    format!("task-{}", tasks.len() + 1)
                } else {
                    task.task_id
                };
                tasks.retain(|t| t.id != id);
                tasks.push(SoloTask {
                    id: id.clone(),
                    title: task.title,
                    text: task.text,
                    status: TaskStatus::Todo,
                    bounds: task.bounds.to_page(t),
                });
                self.mirror_task(&id);
                return vec![Step::RefreshTasks];
            }
            SoloAction::StartSoloTask(TaskRef { task_id }) => return self.start_task(&task_id),
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
                return vec![Step::RefreshTasks];
            }
        }
        Vec::new()
    }

    /// Writes the solo task's current state into the document's `tasks` root.
    fn mirror_task(&self, id: &str) {
        if let Some(task) = self.state.tasks.iter().find(|t| t.id == id) {
            crate::agent::state::tasks_doc::upsert_task(
                self.room.doc(),
                self.me,
                task,
                &self.state.page_id,
            );
        }
    }

    fn start_task(&mut self, id: &str) -> Vec<Step> {
        let Some(task) = self.state.tasks.iter_mut().find(|t| t.id == id) else {
            return vec![Step::Correct(format!(
                "Rejected 'start-solo-task': there is no task '{id}'"
            ))];
        };
        task.status = TaskStatus::InProgress;
        let (title, text, bounds) = (task.title.clone(), task.text.clone(), task.bounds);
        self.mirror_task(id);
        self.state.current_task = Some(id.to_owned());
        vec![
            Step::Switch(Mode::WorkingSolo),
            // Again: the switch's hooks may have cleared it.
            Step::CurrentTask(id.to_owned()),
            Step::RefreshTasks,
            Step::Schedule(Request::follow_up(
                format!("Work on your task '{id}': {title}. {text}"),
                bounds,
            )),
        ]
    }
}
