//! The project actions (docs/fairies.md "Projects"): each one's arguments are a typed struct,
//! deserialized once from the model's JSON (numbers given as strings are accepted, unknown
//! fields such as `intent` ignored), and the whole set is one enum, [`ProjectAction`].
//! A malformed action is one [`MalformedAction`] whose text is the correction the model reads.
//! Their JSON schemas are declared here and registered beside the other runtime actions.

use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use crate::agent::actions::RuntimeAction;
use crate::agent::actions::common::{bounds_props, runtime_schema, with_props};
use crate::agent::actions::kinds::ProjectKind;

/// `start-project` / `start-duo-project`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StartProject {
    /// The project's title.
    pub title: String,
    /// What it is about.
    #[serde(default)]
    pub description: String,
    /// How it is split into tasks, where they go, in which order.
    #[serde(default)]
    pub plan: String,
}

/// `create-project-task` / `create-duo-task`: bounds in model coordinates.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateTask {
    /// The task's id (the model's).
    pub task_id: String,
    /// Title.
    pub title: String,
    /// What to do, as the member working on it will read it.
    #[serde(default)]
    pub text: String,
    /// Bounds.
    #[serde(deserialize_with = "number")]
    pub x: f64,
    /// Bounds.
    #[serde(deserialize_with = "number")]
    pub y: f64,
    /// Bounds.
    #[serde(deserialize_with = "number")]
    pub w: f64,
    /// Bounds.
    #[serde(deserialize_with = "number")]
    pub h: f64,
}

/// `direct-to-start-project-task` / `direct-to-start-duo-task`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Direct {
    /// The task.
    pub task_id: String,
    /// The member to work on it.
    pub fairy_id: String,
}

/// `await-tasks-completion` / `await-duo-tasks-completion`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitTasks {
    /// The tasks to wait for.
    pub task_ids: Vec<String>,
}

/// `end-project` / `end-duo-project`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct EndProject {
    /// What was done.
    #[serde(default)]
    pub summary: String,
}

/// `abort-project`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AbortProject {
    /// Why.
    #[serde(default)]
    pub reason: String,
}

/// `start-duo-task`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartDuoTask {
    /// The task the leader works on itself.
    pub task_id: String,
}

/// Actions without arguments (`mark-drone-task-done`, `mark-duo-task-done`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct NoArgs {}

/// Every project action, with its typed arguments.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "_type", rename_all = "kebab-case")]
pub enum ProjectAction {
    /// Names the project and writes its plan (status → active).
    StartProject(StartProject),
    /// Creates a task with bounds.
    CreateProjectTask(CreateTask),
    /// Assigns a task to a drone and sends it to work.
    DirectToStartProjectTask(Direct),
    /// Waits until the tasks are done.
    AwaitTasksCompletion(AwaitTasks),
    /// Ends the project.
    EndProject(EndProject),
    /// Aborts the project.
    AbortProject(AbortProject),
    /// A drone finished its task.
    MarkDroneTaskDone(NoArgs),
    /// The duo's `start-project`.
    StartDuoProject(StartProject),
    /// The duo's `create-project-task`.
    CreateDuoTask(CreateTask),
    /// The duo's `direct-to-start-project-task`.
    DirectToStartDuoTask(Direct),
    /// The duo leader works on a task itself.
    StartDuoTask(StartDuoTask),
    /// The duo leader finished its own task.
    MarkDuoTaskDone(NoArgs),
    /// The duo's `await-tasks-completion`.
    AwaitDuoTasksCompletion(AwaitTasks),
    /// The duo's `end-project`.
    EndDuoProject(EndProject),
}

/// A project action the model wrote that cannot be read; the text is its correction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Rejected '{kind}': its arguments are invalid ({why})")]
pub struct MalformedAction {
    /// The `_type`.
    pub kind: String,
    /// What serde said.
    pub why: String,
}

impl ProjectAction {
    /// Whether `name` is a project action.
    pub fn is_project_action(name: &str) -> bool {
        ProjectKind::parse(name).is_some()
    }

    /// Reads the action's arguments (once).
    pub fn parse(action: &Value) -> Result<Self, MalformedAction> {
        serde_json::from_value(action.clone()).map_err(|e| MalformedAction {
            kind: action
                .get("_type")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_owned(),
            why: e.to_string(),
        })
    }
}

/// A number, or a string holding one (`"12"`), finite.
fn number<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Num {
        N(f64),
        S(String),
    }
    let n = match Num::deserialize(d)? {
        Num::N(n) => n,
        Num::S(s) => s
            .trim()
            .parse()
            .map_err(|_| serde::de::Error::custom(format!("'{s}' is not a number")))?,
    };
    if n.is_finite() {
        Ok(n)
    } else {
        Err(serde::de::Error::custom("not a finite number"))
    }
}

fn declare(
    name: &'static str,
    description: &str,
    props: Value,
    required: &[&str],
) -> RuntimeAction {
    RuntimeAction {
        name,
        schema: runtime_schema(name, description, props, required),
        saves_to_history: true,
    }
}

/// The project actions' schemas, for the registry.
pub fn runtime_actions() -> Vec<RuntimeAction> {
    let start = json!({"title": {"type": "string"}, "description": {"type": "string"},
                       "plan": {"type": "string"}});
    let task = with_props(
        bounds_props(),
        json!({"taskId": {"type": "string"}, "title": {"type": "string"}, "text": {"type": "string"}}),
    );
    let direct = json!({"taskId": {"type": "string"}, "fairyId": {"type": "string"}});
    let wait = json!({"taskIds": {"type": "array", "items": {"type": "string"}}});
    let summary = json!({"summary": {"type": "string"}});
    let none = json!({});
    let task_req: &[&str] = &["taskId", "title", "text", "x", "y", "w", "h"];
    vec![
        declare(
            "start-project",
            "Start the project: name it, describe it and write the plan (tasks, where each goes on the canvas, their order, which run in parallel).",
            start.clone(),
            &["title", "description", "plan"],
        ),
        declare(
            "create-project-task",
            "Create a task of the project with the area of the canvas it covers (its bounds); the member working on it sees and edits only that area.",
            task.clone(),
            task_req,
        ),
        declare(
            "direct-to-start-project-task",
            "Send another member of the project (not yourself) to work on a task.",
            direct.clone(),
            &["taskId", "fairyId"],
        ),
        declare(
            "await-tasks-completion",
            "Wait until these tasks are done; you are woken with a message when they all are.",
            wait.clone(),
            &["taskIds"],
        ),
        declare(
            "end-project",
            "End the project once every task is done and the result is coherent.",
            summary.clone(),
            &["summary"],
        ),
        declare(
            "abort-project",
            "Abort the project (every member stops).",
            json!({"reason": {"type": "string"}}),
            &["reason"],
        ),
        declare(
            "mark-drone-task-done",
            "Mark your task as done when it is finished.",
            none.clone(),
            &[],
        ),
        declare(
            "start-duo-project",
            "Start the duo project: name it, describe it and write the plan.",
            start,
            &["title", "description", "plan"],
        ),
        declare(
            "create-duo-task",
            "Create a task of the duo project with the area of the canvas it covers.",
            task,
            task_req,
        ),
        declare(
            "direct-to-start-duo-task",
            "Send your partner to work on a task.",
            direct,
            &["taskId", "fairyId"],
        ),
        declare(
            "start-duo-task",
            "Work on a task yourself (you then see and edit only its bounds).",
            json!({"taskId": {"type": "string"}}),
            &["taskId"],
        ),
        declare(
            "mark-duo-task-done",
            "Mark the task you work on yourself as done.",
            none,
            &[],
        ),
        declare(
            "await-duo-tasks-completion",
            "Wait until these tasks are done; you are woken with a message when they all are.",
            wait,
            &["taskIds"],
        ),
        declare(
            "end-duo-project",
            "End the duo project once every task is done.",
            summary,
            &["summary"],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_parse_once_into_typed_arguments() {
        let a = ProjectAction::parse(&json!({"_type": "create-project-task", "taskId": "t1",
            "title": "roof", "x": "10", "y": 20, "w": 30, "h": 40, "intent": "ignored"}));
        assert_eq!(
            a,
            Ok(ProjectAction::CreateProjectTask(CreateTask {
                task_id: "t1".into(),
                title: "roof".into(),
                text: String::new(),
                x: 10.0,
                y: 20.0,
                w: 30.0,
                h: 40.0,
            }))
        );
        assert_eq!(
            ProjectAction::parse(&json!({"_type": "mark-drone-task-done"})),
            Ok(ProjectAction::MarkDroneTaskDone(NoArgs {}))
        );
        let bad =
            ProjectAction::parse(&json!({"_type": "direct-to-start-project-task", "taskId": "t1"}));
        let err = bad.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            err.contains("direct-to-start-project-task") && err.contains("fairyId"),
            "{err}"
        );
        assert!(ProjectAction::parse(&json!({"_type": "create-duo-task", "taskId": "t", "title": "x", "x": "a", "y": 0, "w": 1, "h": 1})).is_err());
    }

    #[test]
    fn every_name_has_a_schema_and_a_variant() {
        let declared: Vec<&str> = runtime_actions().iter().map(|a| a.name).collect();
        let kinds: Vec<&str> = ProjectKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(declared, kinds);
        for name in kinds {
            // Every variant exists: a bare action fails on a missing field or parses, never
            // on an unknown variant.
            let err = ProjectAction::parse(&json!({"_type": name}))
                .err()
                .map(|e| e.why)
                .unwrap_or_default();
            assert!(!err.contains("unknown variant"), "{name}: {err}");
        }
    }
}
