//! `distribute` `{shapeIds, direction}`: spaces three or more shapes evenly between the first
//! and the last along an axis (equal gaps between bounds, the outer two stay put).

use serde_json::{Value, json};
use yrs::TransactionMut;

use crate::agent::actions::common::{
    choice, closed_schema, closed_set, edit_shapes, ids_schema, schema, shape_list,
};
use crate::agent::actions::{ActionCtx, ActionError, CanvasAction, Fields, Parsed};
use crate::canvas::Shape;
use crate::canvas::geometry::shape_bounds;
use crate::ids::ShapeId;

/// The `distribute` action.
pub struct Distribute;

closed_set!(
    /// An axis along which shapes are spaced or stacked.
    pub Direction {
        /// Along x.
        Horizontal = "horizontal",
        /// Along y.
        Vertical = "vertical",
    }
);

impl Direction {
    /// Where `s` starts along this axis and how long it is.
    pub(crate) fn extent(self, s: &Shape) -> (f64, f64) {
        let b = shape_bounds(s);
        match self {
            Direction::Horizontal => (b.x, b.w),
            Direction::Vertical => (b.y, b.h),
        }
    }

    /// Moves `s` by `d` along this axis.
    pub(crate) fn shift(self, s: &mut Shape, d: f64) {
        match self {
            Direction::Horizontal => s.translate(d, 0.0),
            Direction::Vertical => s.translate(0.0, d),
        }
    }
}

/// The arguments of `distribute`.
#[derive(Debug, Clone, PartialEq)]
pub struct DistributeArgs {
    /// The shapes spaced (nothing happens below three).
    pub shapes: Vec<ShapeId>,
    /// Along which axis.
    pub direction: Direction,
}

impl CanvasAction for Distribute {
    fn name(&self) -> &'static str {
        "distribute"
    }

    fn schema(&self) -> Value {
        schema(
            "distribute",
            "Space three or more shapes evenly.",
            json!({"shapeIds": ids_schema(), "direction": closed_schema::<Direction>()}),
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
        Ok(Parsed {
            args: DistributeArgs { shapes, direction }.into(),
            notes,
        })
    }
}

/// Applies `distribute`.
pub fn apply(
    txn: &mut TransactionMut<'_>,
    args: &DistributeArgs,
    _ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    edit_shapes(txn, &args.shapes, |shapes| {
        distribute(args.direction, shapes)
    })
}

/// Spaces `shapes` evenly along `axis` (nothing below three shapes).
fn distribute(axis: Direction, shapes: &mut [Shape]) {
    if shapes.len() < 3 {
        return;
    }
    let start = |s: &Shape| axis.extent(s).0;
    let len = |s: &Shape| axis.extent(s).1;
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
        axis.shift(s, d);
    }
}

#[cfg(test)]
mod tests {
    use crate::agent::actions::canvas::test_util::*;
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
