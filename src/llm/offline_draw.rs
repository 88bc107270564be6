//! What the offline model says and draws with, shared by its solo answers ([`super::offline`])
//! and its project answers ([`super::offline_project`]), below both: the notice that opens
//! an answer to a request it does not understand, the actions of a few shapes, and the reading of the context turn both answer
//! from. Owns no pattern matching and must not name either of them.

use serde_json::{Map, Value, json};

use super::types::{ModelRequest, Role};

/// The context of a request as one object: every line of its first user turn that is a JSON
/// object, merged (the prompt writes its blocks one per line; other lines are prose).
pub(super) fn context(request: &ModelRequest) -> Value {
    let Some(state) = request.messages.iter().find(|m| m.role == Role::User) else {
        return Value::Null;
    };
    let mut all = Map::new();
    for line in state.text().lines() {
        if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(line) {
            all.extend(map);
        }
    }
    if all.is_empty() {
        Value::Null
    } else {
        Value::Object(all)
    }
}

/// The first words of the offline model's answer to a request it does not understand, so users
/// know no real model is thinking and what it can do.
pub const OFFLINE_NOTICE: &str = "I am the offline model: no language model is configured, so I can only draw simple things (try \"draw a house\", \"three boxes in a row\" or \"flowchart A -> B -> C\", or select shapes and say \"move them right\", \"paint them green\" or \"delete them\").";

/// A geo shape at `[x, y, w, h]`.
pub(super) fn geo(kind: &str, id: &str, [x, y, w, h]: [i64; 4], color: &str, text: &str) -> Value {
    json!({"_type": kind, "shapeId": id, "note": "", "x": x, "y": y, "w": w, "h": h,
        "color": color, "fill": "semi", "text": text, "textAlign": "middle"})
}

/// A `create` action of `shape`.
pub(super) fn create(intent: &str, shape: Value) -> Value {
    json!({"_type": "create", "intent": intent, "shape": shape})
}

/// A house: walls, roof, door and window.
pub(super) fn house() -> Vec<Value> {
    vec![
        create(
            "Draw the walls",
            geo("rectangle", "walls", [0, 100, 200, 150], "light-red", ""),
        ),
        create(
            "Put a roof on top",
            geo("triangle", "roof", [-20, 0, 240, 100], "red", ""),
        ),
        create(
            "Add a door",
            geo("rectangle", "door", [80, 170, 40, 80], "orange", ""),
        ),
        create(
            "Add a window",
            geo("rectangle", "window", [25, 130, 40, 40], "light-blue", ""),
        ),
    ]
}
