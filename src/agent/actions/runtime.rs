//! The runtime's non-canvas actions (docs/fairies.md): their names and JSON schemas, registered next to
//! the canvas actions so that one [`Registry`] yields the model's whole response schema, and
//! their typed arguments: [`RuntimeCommand::parse`] reads a complete action once into
//! [`SoloAction`] or [`ProjectAction`], so the runtime matches on variants, never on name
//! strings. What they do is the runtime's business (`runtime/turn/runtime_actions.rs`); this file only
//! declares them.
//!
//! The solo actions' fields are read as leniently as before typed arguments existed: a text
//! that is not a string is empty, a number may be a string holding one, a missing bound is
//! `None` (and `review`/`fly-to-bounds` then say what they need).

use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use crate::agent::actions::common::{bounds_props, runtime_schema, with_props};
use crate::agent::actions::kinds::SoloKind;
use crate::agent::actions::project::{MalformedAction, ProjectAction};
use crate::agent::actions::{Registry, RuntimeAction};
use crate::agent::work::TaskStatus;
use crate::canvas::geometry::Bounds;
use crate::canvas::transform::PromptTransform;

/// Longest text kept from a `message` or `think` action.
const MAX_SAY_CHARS: usize = 4000;

/// A string field; anything else reads as empty. Cut at [`MAX_SAY_CHARS`].
fn lenient_text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => s.chars().take(MAX_SAY_CHARS).collect(),
        _ => String::new(),
    })
}

/// A finite number, or a string holding one; anything else reads as absent.
fn lenient_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|n: &f64| n.is_finite()))
}

/// `{text}` of `message` and `think`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Text {
    /// What the fairy says or thinks.
    #[serde(default, deserialize_with = "lenient_text")]
    pub text: String,
}

/// Model-space bounds `{x, y, w, h}`; `x` and `y` are needed, `w` and `h` default to 0.
#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize)]
pub struct ModelBounds {
    /// Left, in model coordinates.
    #[serde(default, deserialize_with = "lenient_number")]
    pub x: Option<f64>,
    /// Top, in model coordinates.
    #[serde(default, deserialize_with = "lenient_number")]
    pub y: Option<f64>,
    /// Width.
    #[serde(default, deserialize_with = "lenient_number")]
    pub w: Option<f64>,
    /// Height.
    #[serde(default, deserialize_with = "lenient_number")]
    pub h: Option<f64>,
}

impl ModelBounds {
    /// The bounds in page coordinates; `None` without `x` and `y`.
    pub fn to_page(&self, t: &PromptTransform) -> Option<Bounds> {
        let (x, y) = t.point_from_model(self.x?, self.y?);
        Some(Bounds::new(
            x,
            y,
            self.w.unwrap_or(0.0),
            self.h.unwrap_or(0.0),
        ))
    }
}

/// `review` `{x, y, w, h, intent}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Review {
    /// The area to look at again.
    #[serde(flatten)]
    pub bounds: ModelBounds,
    /// What to look for.
    #[serde(default, deserialize_with = "lenient_text")]
    pub intent: String,
}

fn todo() -> TaskStatus {
    TaskStatus::Todo
}

/// `upsert-personal-todo` `{id, text, status}`; an unknown status reads as `todo`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct UpsertTodo {
    /// The item's id; empty: a new one is numbered.
    #[serde(default, deserialize_with = "lenient_text")]
    pub id: String,
    /// Its text; empty: an existing item keeps its text.
    #[serde(default, deserialize_with = "lenient_text")]
    pub text: String,
    /// Its status.
    #[serde(default = "todo", deserialize_with = "TaskStatus::lenient")]
    pub status: TaskStatus,
}

/// `create-solo-task` `{taskId, title, text, x, y, w, h}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateSoloTask {
    /// The task's id; empty: a new one is numbered.
    #[serde(default, deserialize_with = "lenient_text")]
    pub task_id: String,
    /// Title.
    #[serde(default, deserialize_with = "lenient_text")]
    pub title: String,
    /// What to do.
    #[serde(default, deserialize_with = "lenient_text")]
    pub text: String,
    /// The area it covers, if given.
    #[serde(flatten)]
    pub bounds: ModelBounds,
}

/// `start-solo-task` `{taskId}` (`mark-solo-task-done` ignores its arguments).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRef {
    /// The task.
    #[serde(default, deserialize_with = "lenient_text")]
    pub task_id: String,
}

/// The solo runtime actions, with their typed arguments.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "_type", rename_all = "kebab-case")]
pub enum SoloAction {
    /// Say something in the chat.
    Message(Text),
    /// Think out loud.
    Think(Text),
    /// Look again at an area after this turn.
    Review(Review),
    /// Add or update a todo item.
    UpsertPersonalTodo(UpsertTodo),
    /// Fly to an area.
    FlyToBounds(ModelBounds),
    /// Plan a solo task.
    CreateSoloTask(CreateSoloTask),
    /// Start a solo task.
    StartSoloTask(TaskRef),
    /// Finish the current solo task.
    MarkSoloTaskDone(serde::de::IgnoredAny),
}

/// A complete runtime action, read once.
#[derive(Debug, Clone, PartialEq)]
pub enum RuntimeCommand {
    /// One of the solo actions.
    Solo(SoloAction),
    /// One of the project actions.
    Project(ProjectAction),
}

/// Why a runtime action could not be read; the text is the correction the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// No runtime action has that name.
    #[error("Rejected '{0}': this action is not available yet")]
    Unknown(String),
    /// Its arguments cannot be read.
    #[error(transparent)]
    Malformed(#[from] MalformedAction),
}

impl RuntimeCommand {
    /// Reads a complete runtime action's arguments (once).
    pub fn parse(action: &Value) -> Result<Self, CommandError> {
        let kind = action.get("_type").and_then(Value::as_str).unwrap_or("");
        if SoloKind::parse(kind).is_some() {
            serde_json::from_value(action.clone())
                .map(RuntimeCommand::Solo)
                .map_err(|e| {
                    CommandError::Malformed(MalformedAction {
                        kind: kind.to_owned(),
                        why: e.to_string(),
                    })
                })
        } else if ProjectAction::is_project_action(kind) {
            Ok(RuntimeCommand::Project(ProjectAction::parse(action)?))
        } else {
            Err(CommandError::Unknown(kind.to_owned()))
        }
    }
}

/// Every runtime action (the project actions are declared in [`crate::agent::actions::project`]).
pub fn runtime_actions() -> Vec<RuntimeAction> {
    let mut all = solo_actions();
    all.extend(crate::agent::actions::project::runtime_actions());
    all
}

/// The solo actions' schemas, in [`SoloKind::ALL`] order.
fn solo_actions() -> Vec<RuntimeAction> {
    let text = json!({"text": {"type": "string"}});
    vec![
        RuntimeAction {
            name: "message",
            schema: runtime_schema(
                "message",
                "Say something to the user (shown in the chat).",
                text.clone(),
                &["text"],
            ),
            saves_to_history: true,
        },
        RuntimeAction {
            name: "think",
            schema: runtime_schema(
                "think",
                "Think out loud before acting (not shown as a message).",
                text,
                &["text"],
            ),
            saves_to_history: true,
        },
        RuntimeAction {
            name: "review",
            schema: runtime_schema(
                "review",
                "Look again at an area after this turn: a follow-up request is scheduled over these bounds.",
                with_props(bounds_props(), json!({"intent": {"type": "string"}})),
                &["x", "y", "w", "h"],
            ),
            saves_to_history: true,
        },
        RuntimeAction {
            name: "upsert-personal-todo",
            schema: runtime_schema(
                "upsert-personal-todo",
                "Add or update an item of your own todo list; you keep working while items are not done.",
                json!({"id": {"type": "string"}, "text": {"type": "string"},
                       "status": {"type": "string", "enum": ["todo", "in-progress", "done"]}}),
                &["id", "status"],
            ),
            saves_to_history: true,
        },
        RuntimeAction {
            name: "fly-to-bounds",
            schema: runtime_schema(
                "fly-to-bounds",
                "Fly to an area of the canvas to work there.",
                bounds_props(),
                &["x", "y", "w", "h"],
            ),
            saves_to_history: true,
        },
        RuntimeAction {
            name: "create-solo-task",
            schema: runtime_schema(
                "create-solo-task",
                "Plan a task for yourself, with the area it covers.",
                with_props(
                    bounds_props(),
                    json!({"taskId": {"type": "string"}, "title": {"type": "string"}, "text": {"type": "string"}}),
                ),
                &["taskId", "title"],
            ),
            saves_to_history: true,
        },
        RuntimeAction {
            name: "start-solo-task",
            schema: runtime_schema(
                "start-solo-task",
                "Start working on one of your solo tasks.",
                json!({"taskId": {"type": "string"}}),
                &["taskId"],
            ),
            saves_to_history: true,
        },
        RuntimeAction {
            name: "mark-solo-task-done",
            schema: runtime_schema(
                "mark-solo-task-done",
                "Mark the solo task you are working on as done.",
                json!({"taskId": {"type": "string"}}),
                &[],
            ),
            saves_to_history: true,
        },
    ]
}

/// The canvas actions plus every runtime action.
///
/// # Panics
/// If a runtime action's name is taken (by a canvas action or another runtime action): a
/// programming error no input can cause, refused loudly at the first registry built.
pub fn full_registry() -> Registry {
    let mut r = Registry::canvas();
    for a in runtime_actions() {
        r.register_runtime(a).unwrap_or_else(|e| panic!("{e}"));
    }
    r
}

/// The response schema restricted to `allowed` (in that order; names without a schema are
/// left out), lean as the model reads it ([`lean`]).
pub fn response_schema_for(registry: &Registry, allowed: &[&str]) -> Value {
    let one_of: Vec<Value> = allowed
        .iter()
        .filter_map(|n| registry.get(n).map(|r| r.schema()))
        .map(|mut s| {
            lean(&mut s);
            s
        })
        .collect();
    json!({
        "type": "object",
        "properties": {"actions": {"type": "array", "items": {"oneOf": one_of}}},
        "required": ["actions"],
    })
}

/// Leaves out of an action's schema what says nothing a model needs, validation unchanged:
/// the `type` beside a `const` (the constant has one), `title` (the `_type` constant names
/// the action), and the optional `intent` every canvas action takes (the system prompt's
/// canvas section says it once; other properties are allowed, so it still validates).
pub fn lean(schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    if obj.contains_key("const") {
        obj.remove("type");
    }
    obj.remove("title");
    let open = obj.get("additionalProperties") != Some(&Value::Bool(false));
    let optional_intent = !obj
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|r| r.iter().any(|k| k == "intent"));
    if let Some(props) = obj.get_mut("properties").and_then(Value::as_object_mut) {
        if open && optional_intent {
            props.remove("intent");
        }
        props.values_mut().for_each(lean);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lean_schemas_keep_what_validates() {
        let mut s = json!({"title": "move", "type": "object", "description": "Move a shape.",
            "properties": {"_type": {"const": "move", "type": "string"},
                           "intent": {"type": "string", "description": "one short sentence shown to users"},
                           "x": {"type": "number", "description": "target x"}},
            "required": ["_type", "x"]});
        lean(&mut s);
        assert_eq!(
            s,
            json!({"type": "object", "description": "Move a shape.",
                "properties": {"_type": {"const": "move"},
                               "x": {"type": "number", "description": "target x"}},
                "required": ["_type", "x"]})
        );
        // A schema that closes its properties or needs an intent keeps it.
        let mut closed =
            json!({"properties": {"intent": {"type": "string"}}, "additionalProperties": false});
        lean(&mut closed);
        assert!(closed["properties"]["intent"].is_object());
    }

    #[test]
    fn solo_actions_parse_once_and_leniently() {
        let names: Vec<&str> = solo_actions().iter().map(|a| a.name).collect();
        let kinds: Vec<&str> = SoloKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names, kinds);
        for name in kinds {
            let bare = RuntimeCommand::parse(&json!({"_type": name}));
            assert!(
                matches!(bare, Ok(RuntimeCommand::Solo(_))),
                "{name}: {bare:?}"
            );
        }
        let todo = RuntimeCommand::parse(
            &json!({"_type": "upsert-personal-todo", "id": 7, "status": "blocked", "text": "x"}),
        );
        assert_eq!(
            todo,
            Ok(RuntimeCommand::Solo(SoloAction::UpsertPersonalTodo(
                UpsertTodo {
                    id: String::new(),
                    text: "x".into(),
                    status: TaskStatus::Todo,
                }
            )))
        );
        let fly = RuntimeCommand::parse(&json!({"_type": "fly-to-bounds", "x": "10", "y": 20}));
        let Ok(RuntimeCommand::Solo(SoloAction::FlyToBounds(b))) = fly else {
            panic!("{fly:?}");
        };
        let page = b.to_page(&PromptTransform::default());
        assert_eq!(page, Some(Bounds::new(10.0, 20.0, 0.0, 0.0)));
        let no_y = ModelBounds {
            x: Some(1.0),
            ..ModelBounds::default()
        };
        assert_eq!(no_y.to_page(&PromptTransform::default()), None);
        let long = "a".repeat(MAX_SAY_CHARS + 10);
        let said = RuntimeCommand::parse(&json!({"_type": "message", "text": long}));
        assert!(
            matches!(said, Ok(RuntimeCommand::Solo(SoloAction::Message(t))) if t.text.len() == MAX_SAY_CHARS)
        );
        assert_eq!(
            RuntimeCommand::parse(&json!({"_type": "dance"})).map_err(|e| e.to_string()),
            Err("Rejected 'dance': this action is not available yet".into())
        );
        let project = RuntimeCommand::parse(&json!({"_type": "direct-to-start-project-task"}));
        assert!(
            matches!(project, Err(CommandError::Malformed(_))),
            "{project:?}"
        );
    }

    #[test]
    fn runtime_actions_register_without_clashes() {
        let mut r = Registry::canvas();
        for a in runtime_actions() {
            assert_eq!(r.register_runtime(a.clone()), Ok(()), "{}", a.name);
            assert_eq!(a.schema["properties"]["_type"]["const"], json!(a.name));
        }
        let s = response_schema_for(&full_registry(), &["message", "create", "no-such"]);
        assert_eq!(
            s["properties"]["actions"]["items"]["oneOf"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );
    }
}
