//! `stack` `{shapeIds, direction, gap}`: lines shapes up one after another along an axis with a
//! fixed gap, in their current order along that axis; the first stays put, the other axis is
//! kept.

use serde_json::{Value, json};
use yrs::TransactionMut;

use super::common::{
    ShapeList, edit_shape_list, enum_schema, get_num, get_str, ids_schema, num_schema, number_or,
    one_of, schema, shape_list,
};
use super::distribute::DIRECTIONS;
use super::{ActionCtx, ActionError, CanvasAction, Sanitized};
use crate::canvas::geometry::shape_bounds;

/// The `stack` action.
pub struct Stack;

impl CanvasAction for Stack {
    fn name(&self) -> &'static str {
        "stack"
    }

    fn schema(&self) -> Value {
        schema(
            "stack",
            "Stack shapes one after another with a fixed gap.",
            json!({"shapeIds": ids_schema(), "direction": enum_schema(DIRECTIONS), "gap": num_schema("gap in px")}),
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
        number_or(o, "gap", 0.0)?;
        Ok(Sanitized { notes })
    }

    fn apply(
        &self,
        txn: &mut TransactionMut<'_>,
        action: &Value,
        _ctx: &mut ActionCtx,
    ) -> Result<(), ActionError> {
        edit_shape_list(txn, action, |o, shapes| {
            let horizontal = get_str(o, "direction") == "horizontal";
            let gap = get_num(o, "gap");
            let key = |s: &crate::canvas::Shape| {
                let b = shape_bounds(s);
                if horizontal { b.x } else { b.y }
            };
            shapes.sort_by(|a, b| key(a).total_cmp(&key(b)));
            let mut cursor: Option<f64> = None;
            for s in shapes {
                let b = shape_bounds(s);
                let (start, len) = if horizontal { (b.x, b.w) } else { (b.y, b.h) };
                let target = cursor.unwrap_or(start);
                if horizontal {
                    s.translate(target - start, 0.0);
                } else {
                    s.translate(0.0, target - start);
                }
                cursor = Some(target + len + gap);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use serde_json::json;

    #[test]
    fn stacks_with_gap() {
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 10.0, 10.0);
        rect(&doc, "b", 0.0, 300.0, 10.0, 30.0);
        rect(&doc, "c", 7.0, 40.0, 10.0, 5.0);
        assert!(run(&doc, json!({"_type": "stack", "shapeIds": ["a", "b", "c"], "direction": "vertical", "gap": "8"})).is_ok());
        approx(bounds(&doc, "a").y, 0.0);
        approx(bounds(&doc, "c").y, 18.0);
        approx(bounds(&doc, "b").y, 31.0);
        approx(bounds(&doc, "c").x, 7.0);
    }
}
