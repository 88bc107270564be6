//! `distribute` `{shapeIds, direction}`: spaces three or more shapes evenly between the first
//! and the last along an axis (equal gaps between bounds, the outer two stay put).

use serde_json::{Value, json};
use yrs::TransactionMut;

use super::common::{
    ShapeList, edit_shape_list, enum_schema, get_str, ids_schema, one_of, schema, shape_list,
};
use super::{ActionCtx, ActionError, CanvasAction, Sanitized};
use crate::canvas::geometry::shape_bounds;

/// The `distribute` action.
pub struct Distribute;

/// Horizontal or vertical.
pub(crate) const DIRECTIONS: &[&str] = &["horizontal", "vertical"];

impl CanvasAction for Distribute {
    fn name(&self) -> &'static str {
        "distribute"
    }

    fn schema(&self) -> Value {
        schema(
            "distribute",
            "Space three or more shapes evenly.",
            json!({"shapeIds": ids_schema(), "direction": enum_schema(DIRECTIONS)}),
            &["shapeIds", "direction"],
        )
    }

    fn sanitize(
        &self,
        txn: &TransactionMut<'_>,
        action: &mut Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        let ShapeList {
            fields: o, notes, ..
        } = shape_list(txn, action, ctx)?;
        one_of(o, "direction", DIRECTIONS, None, ctx)?;
        Ok(Sanitized { notes })
    }

    fn apply(
        &self,
        txn: &mut TransactionMut<'_>,
        action: &Value,
        _ctx: &mut ActionCtx,
    ) -> Result<(), ActionError> {
        edit_shape_list(txn, action, |o, shapes| distribute(o, shapes))
    }
}

/// Spaces `shapes` evenly as the sanitized action `o` says (nothing below three shapes).
fn distribute(o: &serde_json::Map<String, Value>, shapes: &mut [crate::canvas::Shape]) {
    if shapes.len() < 3 {
        return;
    }
    let horizontal = get_str(o, "direction") == "horizontal";
    let start = |s: &crate::canvas::Shape| {
        let b = shape_bounds(s);
        if horizontal { b.x } else { b.y }
    };
    let len = |s: &crate::canvas::Shape| {
        let b = shape_bounds(s);
        if horizontal { b.w } else { b.h }
    };
    shapes.sort_by(|a, b| start(a).total_cmp(&start(b)));
    let (Some(first), Some(last)) = (shapes.first(), shapes.last()) else {
        return;
    };
    let span = start(last) + len(last) - start(first);
    let total: f64 = shapes.iter().map(len).sum();
    let gap = (span - total) / (shapes.len() - 1) as f64;
    let mut cursor = start(first);
    for s in shapes {
        let d = cursor - start(s);
        cursor += len(s) + gap;
        if horizontal {
            s.translate(d, 0.0);
        } else {
            s.translate(0.0, d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use serde_json::json;

    #[test]
    fn equal_gaps_between_outer_shapes() {
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 10.0, 10.0);
        rect(&doc, "b", 15.0, 5.0, 20.0, 10.0);
        rect(&doc, "c", 100.0, 0.0, 10.0, 10.0);
        assert!(run(&doc, json!({"_type": "distribute", "shapeIds": ["c", "a", "b"], "direction": "horizontal"})).is_ok());
        // span 0..110, widths 40 → gap 35.
        approx(bounds(&doc, "a").x, 0.0);
        approx(bounds(&doc, "b").x, 45.0);
        approx(bounds(&doc, "c").x, 100.0);
        approx(bounds(&doc, "b").y, 5.0);
    }

    #[test]
    fn vertical_and_too_few() {
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 10.0, 10.0);
        rect(&doc, "b", 0.0, 12.0, 10.0, 10.0);
        rect(&doc, "c", 0.0, 100.0, 10.0, 20.0);
        assert!(
            run(
                &doc,
                json!({"_type": "distribute", "shapeIds": ["a", "b", "c"], "direction": "VERTICAL"})
            )
            .is_ok()
        );
        // span 0..120, heights 40 → gap 40.
        approx(bounds(&doc, "b").y, 50.0);
        assert!(
            run(
                &doc,
                json!({"_type": "distribute", "shapeIds": ["a", "b"], "direction": "vertical"})
            )
            .is_ok()
        );
        approx(bounds(&doc, "b").y, 50.0);
    }
}
