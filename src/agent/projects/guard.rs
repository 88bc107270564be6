//! A fairy working on a project task (working-drone, working-orchestrator) may only touch
//! shapes that intersect the task's bounds (docs/fairies.md "Projects"): every existing shape
//! an action names must intersect them, a shape it creates must intersect them, and a point it
//! moves something to must lie in them. Anything else is refused with a correction before it
//! reaches the document. The same reading of an action gives [`action_area`], where an action
//! works (the runtime flies the fairy there). Pure: the caller passes the shapes and the
//! request's transform.

use std::borrow::Borrow;

use serde_json::Value;

use crate::canvas::geometry::{Bounds, shape_bounds};
use crate::canvas::shape::Shape;
use crate::canvas::transform::PromptTransform;

/// Keys of an action that never name shapes.
const NOT_SHAPE_IDS: &[&str] = &["pageId", "taskId", "taskIds", "fairyId"];

/// The finite number at `key` (a number, or a string holding one).
fn num(action: &Value, key: &str) -> Option<f64> {
    match action.get(key)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|n: &f64| n.is_finite())
}

fn is_shape_id_key(key: &str) -> bool {
    !NOT_SHAPE_IDS.contains(&key) && (key == "id" || key.ends_with("Id") || key.ends_with("Ids"))
}

fn collect_ids(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if is_shape_id_key(k) {
                    match v {
                        Value::String(s) => out.push(s.clone()),
                        Value::Array(items) => {
                            out.extend(items.iter().filter_map(Value::as_str).map(str::to_owned))
                        }
                        _ => {}
                    }
                } else {
                    collect_ids(v, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_ids(v, out)),
        _ => {}
    }
}

/// The page-space area a created shape (simple format, model coordinates) covers.
fn created_area(shape: &Value, t: &PromptTransform) -> Option<Bounds> {
    if let (Some(x), Some(y)) = (num(shape, "x"), num(shape, "y")) {
        let (px, py) = t.point_from_model(x, y);
        let w = num(shape, "w").unwrap_or(0.0).max(0.0);
        let h = num(shape, "h").unwrap_or(0.0).max(0.0);
        return Some(Bounds::new(px, py, w, h));
    }
    let points: Vec<(f64, f64)> = [("x1", "y1"), ("x2", "y2")]
        .iter()
        .filter_map(|(kx, ky)| Some(t.point_from_model(num(shape, kx)?, num(shape, ky)?)))
        .collect();
    Bounds::from_points(points)
}

/// The page-space area a shape covers after an `update` that sets its place (`x`/`y`, with `w`/`h`
/// or the shape's own size; or a connector's ends): `None` when the update leaves its place.
fn updated_area<S: Borrow<Shape>>(
    update: &Value,
    shape: &impl Fn(&str) -> Option<S>,
    t: &PromptTransform,
) -> Option<Bounds> {
    let current = update
        .get("shapeId")
        .and_then(Value::as_str)
        .and_then(shape)
        .map(|s| shape_bounds(s.borrow()));
    let (x, y) = (num(update, "x"), num(update, "y"));
    if x.is_none() && y.is_none() {
        // A connector's ends, when the update sets them.
        return ["x1", "x2"]
            .iter()
            .any(|k| update.get(*k).is_some())
            .then(|| created_area(update, t))
            .flatten();
    }
    let (cx, cy) = current.map_or((0.0, 0.0), |b| t.point_to_model(b.x, b.y));
    let (px, py) = t.point_from_model(x.unwrap_or(cx), y.unwrap_or(cy));
    let w = num(update, "w")
        .or(current.map(|b| b.w))
        .unwrap_or(0.0)
        .max(0.0);
    let h = num(update, "h")
        .or(current.map(|b| b.h))
        .unwrap_or(0.0)
        .max(0.0);
    Some(Bounds::new(px, py, w, h))
}

/// `Ok` if `action` stays in `task`; otherwise the reason, for the model. `shape` finds an
/// existing shape by id (one lookup per id the action names, not a scan of the canvas).
pub fn check<S: Borrow<Shape>>(
    action: &Value,
    shape: impl Fn(&str) -> Option<S>,
    task: &Bounds,
    t: &PromptTransform,
) -> Result<(), String> {
    let mut ids = Vec::new();
    collect_ids(action, &mut ids);
    let created = action
        .get("shape")
        .and_then(|s| s.get("shapeId"))
        .and_then(Value::as_str);
    for id in &ids {
        if Some(id.as_str()) == created {
            continue;
        }
        if let Some(s) = shape(id)
            && !shape_bounds(s.borrow()).intersects(task)
        {
            return Err(format!(
                "shape '{id}' is outside your task's bounds; you may only change shapes that intersect them"
            ));
        }
    }
    if let Some(shape) = action.get("shape")
        && let Some(area) = created_area(shape, t)
        && !area.intersects(task)
    {
        return Err("the shape would be outside your task's bounds; draw inside them".into());
    }
    if let Some(update) = action.get("update")
        && let Some(area) = updated_area(update, &shape, t)
        && !area.intersects(task)
    {
        return Err("the update would move the shape outside your task's bounds".into());
    }
    if action.get("shape").is_none()
        && let (Some(x), Some(y)) = (num(action, "x"), num(action, "y"))
    {
        let (px, py) = t.point_from_model(x, y);
        if !Bounds::new(px, py, 0.0, 0.0).intersects(task) {
            return Err("that position is outside your task's bounds".into());
        }
    }
    Ok(())
}

/// Where `action` works, in page space: the area of the shape it creates, the place an update
/// or a move takes a shape to, else the shapes it names (their joint bounds); `None` when it
/// names nothing found. The runtime flies the fairy there while it carries the action out.
pub fn action_area<S: Borrow<Shape>>(
    action: &Value,
    shape: impl Fn(&str) -> Option<S>,
    t: &PromptTransform,
) -> Option<Bounds> {
    if let Some(created) = action.get("shape") {
        return created_area(created, t);
    }
    if let Some(update) = action.get("update")
        && let Some(area) = updated_area(update, &shape, t)
    {
        return Some(area);
    }
    let mut ids = Vec::new();
    collect_ids(action, &mut ids);
    let named = ids
        .iter()
        .filter_map(|id| shape(id).map(|s| shape_bounds(s.borrow())))
        .reduce(|a, b| a.union(&b));
    if let (Some(x), Some(y)) = (num(action, "x"), num(action, "y")) {
        let (px, py) = t.point_from_model(x, y);
        let (w, h) = named.map_or((0.0, 0.0), |b| (b.w, b.h));
        return Some(Bounds::new(px, py, w, h));
    }
    named
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shapes() -> Vec<Shape> {
        ["inside", "outside"]
            .iter()
            .zip([10.0, 900.0])
            .filter_map(|(id, x)| {
                crate::canvas::format::from_simple(
                    &json!({"_type": "rectangle", "shapeId": id, "x": x, "y": 10, "w": 20, "h": 20}),
                    &Default::default(),
                )
                .ok()
            })
            .collect()
    }

    #[test]
    fn edits_must_stay_in_the_task() {
        let task = Bounds::new(0.0, 0.0, 200.0, 200.0);
        let t = PromptTransform::new(0.0, 0.0);
        let all = shapes();
        assert_eq!(all.len(), 2);
        let s = |id: &str| all.iter().find(|s| s.id == id);
        let ok = json!({"_type": "update", "shapeId": "inside", "color": "red"});
        assert!(check(&ok, s, &task, &t).is_ok());
        let far = json!({"_type": "delete", "shapeId": "outside"});
        assert!(check(&far, s, &task, &t).is_err_and(|e| e.contains("outside")));
        let many = json!({"_type": "align", "shapeIds": ["inside", "outside"]});
        assert!(check(&many, s, &task, &t).is_err());
        let create_in = json!({"_type": "create", "shape": {"_type": "ellipse", "shapeId": "c", "x": 50, "y": 50, "w": 10, "h": 10}});
        assert!(check(&create_in, s, &task, &t).is_ok());
        let create_out = json!({"_type": "create", "shape": {"_type": "ellipse", "shapeId": "c", "x": 500, "y": 50, "w": 10, "h": 10}});
        assert!(check(&create_out, s, &task, &t).is_err());
        let moved = json!({"_type": "move", "shapeId": "inside", "x": 700, "y": 0});
        assert!(check(&moved, s, &task, &t).is_err());
        // An update that sets the place is checked like a move (one axis keeps the other).
        let away = json!({"_type": "update", "update": {"shapeId": "inside", "x": 700}});
        assert!(check(&away, s, &task, &t).is_err_and(|e| e.contains("outside")));
        let near = json!({"_type": "update", "update": {"shapeId": "inside", "x": 100, "y": 20}});
        assert!(check(&near, s, &task, &t).is_ok());
        let ends = json!({"_type": "update", "update": {"shapeId": "inside", "x1": 600, "y1": 600, "x2": 700, "y2": 700}});
        assert!(check(&ends, s, &task, &t).is_err());
        // Offsets: model (0, 0) is page (1000, 1000).
        let offset = PromptTransform::new(1000.0, 1000.0);
        let far_task = Bounds::new(1000.0, 1000.0, 100.0, 100.0);
        assert!(check(&create_in, s, &far_task, &offset).is_ok());
    }

    #[test]
    fn an_actions_area_is_where_it_works() {
        let all = shapes();
        let s = |id: &str| all.iter().find(|x| x.id == id);
        let t = PromptTransform::new(1000.0, 0.0);
        let area = |a: Value| action_area(&a, s, &t);
        let create = json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "n",
            "x": 50, "y": 60, "w": 30, "h": 40}});
        assert_eq!(area(create), Some(Bounds::new(1050.0, 60.0, 30.0, 40.0)));
        let moved = json!({"_type": "move", "shapeId": "inside", "x": 300, "y": 10});
        assert_eq!(area(moved), Some(Bounds::new(1300.0, 10.0, 20.0, 20.0)));
        let deleted = json!({"_type": "delete", "shapeId": "outside"});
        assert_eq!(area(deleted), Some(Bounds::new(900.0, 10.0, 20.0, 20.0)));
        let recoloured =
            json!({"_type": "update", "update": {"shapeId": "inside", "color": "red"}});
        assert_eq!(area(recoloured), Some(Bounds::new(10.0, 10.0, 20.0, 20.0)));
        assert_eq!(area(json!({"_type": "delete", "shapeId": "gone"})), None);
    }
}
