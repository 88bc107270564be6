//! The runtime's non-canvas actions (docs/fairies.md): their names and JSON schemas, registered next to
//! the canvas actions so that one [`Registry`] yields the model's whole response schema. What
//! they do is the runtime's business ([`super::runtime`]); this file only declares them.

use serde_json::{Value, json};

use super::actions::common::{bare_schema, with_props};
use super::actions::{Registry, RuntimeAction};

/// A runtime action's schema: [`bare_schema`] with a `title`.
pub(super) fn schema(name: &str, description: &str, props: Value, required: &[&str]) -> Value {
    with_props(
        bare_schema(name, description, props, required),
        json!({"title": name}),
    )
}

pub(super) fn bounds_props() -> Value {
    json!({
        "x": {"type": "number"}, "y": {"type": "number"},
        "w": {"type": "number"}, "h": {"type": "number"},
    })
}

/// Every runtime action (the project actions are declared in [`super::projects::actions`]).
pub fn runtime_actions() -> Vec<RuntimeAction> {
    let mut all = solo_actions();
    all.extend(super::projects::actions::runtime_actions());
    all
}

fn solo_actions() -> Vec<RuntimeAction> {
    let text = json!({"text": {"type": "string"}});
    vec![
        RuntimeAction {
            name: "message",
            schema: schema(
                "message",
                "Say something to the user (shown in the chat).",
                text.clone(),
                &["text"],
            ),
            saves_to_history: true,
        },
        RuntimeAction {
            name: "think",
            schema: schema(
                "think",
                "Think out loud before acting (not shown as a message).",
                text,
                &["text"],
            ),
            saves_to_history: true,
        },
        RuntimeAction {
            name: "review",
            schema: schema(
                "review",
                "Look again at an area after this turn: a follow-up request is scheduled over these bounds.",
                with_props(bounds_props(), json!({"intent": {"type": "string"}})),
                &["x", "y", "w", "h"],
            ),
            saves_to_history: true,
        },
        RuntimeAction {
            name: "upsert-personal-todo",
            schema: schema(
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
            schema: schema(
                "fly-to-bounds",
                "Fly to an area of the canvas to work there.",
                bounds_props(),
                &["x", "y", "w", "h"],
            ),
            saves_to_history: true,
        },
        RuntimeAction {
            name: "create-solo-task",
            schema: schema(
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
            schema: schema(
                "start-solo-task",
                "Start working on one of your solo tasks.",
                json!({"taskId": {"type": "string"}}),
                &["taskId"],
            ),
            saves_to_history: true,
        },
        RuntimeAction {
            name: "mark-solo-task-done",
            schema: schema(
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
/// left out).
pub fn response_schema_for(registry: &Registry, allowed: &[&str]) -> Value {
    let one_of: Vec<Value> = allowed
        .iter()
        .filter_map(|n| registry.get(n).map(|r| r.schema()))
        .collect();
    json!({
        "type": "object",
        "properties": {"actions": {"type": "array", "items": {"oneOf": one_of}}},
        "required": ["actions"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
