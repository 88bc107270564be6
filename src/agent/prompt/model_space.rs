//! Values as a prompt writes them for the model: page bounds in model coordinates through the
//! request's [`PromptTransform`], and whole numbers without a fraction. Shared by
//! [`crate::agent::prompt`] and [`crate::agent::prompt::parts`], below both; owns no prompt text and must
//! not name either.

use serde_json::{Value, json};

use crate::canvas::geometry::Bounds;
use crate::canvas::transform::PromptTransform;

/// Bounds in model coordinates `{x, y, w, h}`, rounded through the request's transform.
pub fn bounds_to_model(b: &Bounds, t: &PromptTransform) -> Value {
    let (x, y) = t.point_to_model(b.x, b.y);
    json!({"x": x, "y": y, "w": b.w.round(), "h": b.h.round()})
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
                *value = json!(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(tidy_numbers),
        Value::Object(map) => map.values_mut().for_each(tidy_numbers),
        _ => {}
    }
}
