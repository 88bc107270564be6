//! `stack` `{shapeIds, direction, gap}`: lines shapes up one after another along an axis with a
//! fixed gap, in their current order along that axis; the first stays put, the other axis is
//! kept.

use serde_json::{Value, json};
use yrs::TransactionMut;

use crate::agent::actions::canvas::distribute::Direction;
use crate::agent::actions::common::{
    choice, closed_schema, edit_shapes, ids_schema, num_schema, number_or, schema, shape_list,
};
use crate::agent::actions::{ActionCtx, ActionError, CanvasAction, Fields, Parsed};
use crate::ids::ShapeId;

/// The `stack` action.
pub struct Stack;

/// The arguments of `stack`.
#[derive(Debug, Clone, PartialEq)]
pub struct StackArgs {
    /// The shapes stacked, in their current order along the axis.
    pub shapes: Vec<ShapeId>,
    /// Along which axis.
    pub direction: Direction,
    /// Gap between neighbours in px (the schema's default: 0).
    pub gap: f64,
}

impl CanvasAction for Stack {
    fn name(&self) -> &'static str {
        "stack"
    }

    fn schema(&self) -> Value {
        schema(
            "stack",
            "Stack shapes one after another with a fixed gap.",
            json!({"shapeIds": ids_schema(), "direction": closed_schema::<Direction>(), "gap": num_schema("gap in px")}),
            &["shapeIds", "direction"],
        )
    }

    fn parse(
        &self,
        txn: &TransactionMut<'_>,
        o: &Fields,
        ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError> {
        let (shapes, notes) = shape_list(txn, o, ctx)?;
        let direction = choice(o, "direction", None, ctx)?;
        let gap = number_or(o, "gap", 0.0)?;
        Ok(Parsed {
            args: StackArgs {
                shapes,
                direction,
                gap,
            }
            .into(),
            notes,
        })
    }
}

/// Applies `stack`.
pub fn apply(
    txn: &mut TransactionMut<'_>,
    args: &StackArgs,
    _ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    let axis = args.direction;
    edit_shapes(txn, &args.shapes, |shapes| {
        shapes.sort_by(|a, b| axis.extent(a).0.total_cmp(&axis.extent(b).0));
        let mut cursor: Option<f64> = None;
        for s in shapes {
            let (start, len) = axis.extent(s);
            let target = cursor.unwrap_or(start);
            axis.shift(s, target - start);
            cursor = Some(target + len + args.gap);
        }
    })
}

#[cfg(test)]
mod tests {
    use crate::agent::actions::canvas::test_util::*;
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
