//! Values as a prompt writes them for the model: page bounds in model coordinates through the
//! request's [`PromptTransform`] (whole numbers without a fraction are
//! [`crate::canvas::transform::tidy_numbers`], which the history uses too). Shared by
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
