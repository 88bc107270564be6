//! Offsetting model-facing shapes to the chat origin and rounding their numbers, remembering
//! each rounding difference per `shapeId_property` so that a value the model hands back
//! unchanged is restored exactly (the seed's `roundAndSaveNumber` / `unroundAndRestoreNumber`).
//!
//! Owns the [`PromptTransform`] of one fairy; it works on simple-format JSON objects (see
//! [`super::format`]) and never touches the document.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::coerce::{coerce_number, number_value};
use super::geometry::Bounds;

/// Which axis a numeric property lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Axis {
    X,
    Y,
    /// Sizes and other numbers: rounded but not offset.
    Size,
}

fn axis_of(prop: &str) -> Option<Axis> {
    match prop {
        "x" | "x1" | "x2" | "originX" => Some(Axis::X),
        "y" | "y1" | "y2" | "originY" => Some(Axis::Y),
        "w" | "h" | "fontSize" | "maxWidth" | "bend" => Some(Axis::Size),
        _ => None,
    }
}

/// The chat origin and the rounding differences of one fairy's prompts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptTransform {
    origin_x: f64,
    origin_y: f64,
    diffs: HashMap<String, f64>,
}

impl PromptTransform {
    /// A transform that maps page `(origin_x, origin_y)` to the model's `(0, 0)`.
    pub fn new(origin_x: f64, origin_y: f64) -> Self {
        PromptTransform {
            origin_x,
            origin_y,
            diffs: HashMap::new(),
        }
    }

    fn offset(&self, axis: Axis) -> f64 {
        match axis {
            Axis::X => self.origin_x,
            Axis::Y => self.origin_y,
            Axis::Size => 0.0,
        }
    }

    /// Page value → model value: offset then rounded; the difference is remembered under
    /// `shapeId_prop`.
    pub fn to_model(&mut self, shape_id: &str, prop: &str, page: f64) -> f64 {
        let axis = axis_of(prop).unwrap_or(Axis::Size);
        let v = page - self.offset(axis);
        let r = v.round();
        let key = format!("{shape_id}_{prop}");
        if v != r {
            self.diffs.insert(key, v - r);
        } else {
            self.diffs.remove(&key);
        }
        r
    }

    /// Model value → page value: the remembered difference is added back, then the offset.
    pub fn from_model(&self, shape_id: &str, prop: &str, model: f64) -> f64 {
        let axis = axis_of(prop).unwrap_or(Axis::Size);
        let diff = self
            .diffs
            .get(&format!("{shape_id}_{prop}"))
            .copied()
            .unwrap_or(0.0);
        model + diff + self.offset(axis)
    }

    /// Model point → page point (pen strokes, origins): offset only, nothing remembered.
    pub fn point_from_model(&self, x: f64, y: f64) -> (f64, f64) {
        (x + self.origin_x, y + self.origin_y)
    }

    /// Page point → model point, rounded.
    pub fn point_to_model(&self, x: f64, y: f64) -> (f64, f64) {
        ((x - self.origin_x).round(), (y - self.origin_y).round())
    }

    /// Bounds in model coordinates `{x, y, w, h}`, rounded (the prompt's task, viewport,
    /// screenshot and cluster bounds).
    pub fn bounds_to_model(&self, b: &Bounds) -> Value {
        let (x, y) = self.point_to_model(b.x, b.y);
        serde_json::json!({"x": x, "y": y, "w": b.w.round(), "h": b.h.round()})
    }

    /// Rewrites a simple-format shape (or any object with a `shapeId`) for the prompt.
    pub fn shape_to_model(&mut self, obj: &mut Map<String, Value>) {
        let id = obj
            .get("shapeId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        for (prop, value) in obj.iter_mut() {
            if axis_of(prop).is_some()
                && let Some(n) = coerce_number(value)
            {
                *value = number_value(self.to_model(&id, prop, n));
            }
        }
        self.points(obj, true);
    }

    /// Rewrites a simple-format shape coming back from the model into page coordinates.
    pub fn shape_from_model(&self, obj: &mut Map<String, Value>) {
        let id = obj
            .get("shapeId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        for (prop, value) in obj.iter_mut() {
            if axis_of(prop).is_some()
                && let Some(n) = coerce_number(value)
            {
                *value = number_value(self.from_model(&id, prop, n));
            }
        }
        self.points(obj, false);
    }

    fn points(&self, obj: &mut Map<String, Value>, to_model: bool) {
        let Some(Value::Array(points)) = obj.get_mut("points") else {
            return;
        };
        for p in points.iter_mut() {
            let Some(p) = p.as_object_mut() else { continue };
            let (Some(x), Some(y)) = (
                p.get("x").and_then(coerce_number),
                p.get("y").and_then(coerce_number),
            ) else {
                continue;
            };
            let (nx, ny) = if to_model {
                self.point_to_model(x, y)
            } else {
                self.point_from_model(x, y)
            };
            p.insert("x".into(), number_value(nx));
            p.insert("y".into(), number_value(ny));
        }
    }
}

/// Writes whole numbers without a fraction (`10`, not `10.0`): shorter prompts, and what the
/// model is expected to write back.
pub fn tidy_numbers(value: &mut Value) {
    match value {
        Value::Number(n) => {
            if let Some(f) = n.as_f64()
                && n.is_f64()
                && f.fract() == 0.0
                && f.abs() < 9.0e15
            {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(tidy_numbers),
        Value::Object(map) => map.values_mut().for_each(tidy_numbers),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trip_restores_exact_values() {
        let mut t = PromptTransform::new(100.0, -50.0);
        let m = t.to_model("box1", "x", 123.456);
        assert_eq!(m, 23.0);
        assert_eq!(t.from_model("box1", "x", m), 123.456);
        let h = t.to_model("box1", "h", 10.4);
        assert_eq!(h, 10.0);
        assert_eq!(t.from_model("box1", "h", h), 10.4);
        // Another shape's property has its own memory.
        assert_eq!(t.from_model("box2", "x", 23.0), 123.0);
    }

    #[test]
    fn shapes_round_trip_through_json() {
        let mut t = PromptTransform::new(10.5, 20.25);
        let original = json!({"_type": "rectangle", "shapeId": "a", "x": 11.0, "y": 30.7, "w": 99.9, "h": 5, "text": "x"});
        let mut v = original.clone();
        let Some(obj) = v.as_object_mut() else {
            panic!("object")
        };
        t.shape_to_model(obj);
        assert_eq!(obj["x"], json!(1.0));
        assert_eq!(obj["w"], json!(100.0));
        t.shape_from_model(obj);
        for k in ["x", "y", "w", "h"] {
            let (a, b) = (obj[k].as_f64(), original[k].as_f64());
            assert!(
                matches!((a, b), (Some(a), Some(b)) if (a - b).abs() < 1e-9),
                "{k}"
            );
        }
    }
}
