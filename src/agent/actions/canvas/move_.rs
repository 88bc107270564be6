//! `move` `{shapeId, x, y, anchor?}`: moves a shape so that the chosen point of its bounds
//! (one of 9 anchors, default `top-left`) lands on `(x, y)`.

use serde_json::{Value, json};
use yrs::TransactionMut;

use crate::agent::actions::common::{
    ClosedSet, choice, closed_schema, closed_set, load, num_schema, number, schema, shape_ref,
};
use crate::agent::actions::{ActionCtx, ActionError, CanvasAction, Fields, Parsed};
use crate::canvas::geometry::{Bounds, shape_bounds};
use crate::canvas::shape::write_shape;
use crate::ids::ShapeId;

/// The `move` action.
pub struct Move;

closed_set!(
    /// The 9 points of a shape's bounds an action can name.
    pub Anchor {
        /// `top-left` (the default).
        TopLeft = "top-left",
        /// `top-center`.
        TopCenter = "top-center",
        /// `top-right`.
        TopRight = "top-right",
        /// `center-left`.
        CenterLeft = "center-left",
        /// `center`.
        Center = "center",
        /// `center-right`.
        CenterRight = "center-right",
        /// `bottom-left`.
        BottomLeft = "bottom-left",
        /// `bottom-center`.
        BottomCenter = "bottom-center",
        /// `bottom-right`.
        BottomRight = "bottom-right",
    }
);

impl Anchor {
    /// The point of `b` this anchor names.
    pub fn point(self, b: &Bounds) -> (f64, f64) {
        let name = self.name();
        let fx = if name.ends_with("left") {
            0.0
        } else if name.ends_with("right") {
            1.0
        } else {
            0.5
        };
        let fy = if name.starts_with("top") {
            0.0
        } else if name.starts_with("bottom") {
            1.0
        } else {
            0.5
        };
        (b.x + fx * b.w, b.y + fy * b.h)
    }
}

/// The arguments of `move`: the anchor of `shape` goes to `(x, y)` (page coordinates).
#[derive(Debug, Clone, PartialEq)]
pub struct MoveArgs {
    /// The shape moved.
    pub shape: ShapeId,
    /// Target x in page px.
    pub x: f64,
    /// Target y in page px.
    pub y: f64,
    /// Which point of the shape's bounds lands on the target.
    pub anchor: Anchor,
}

impl CanvasAction for Move {
    fn name(&self) -> &'static str {
        "move"
    }

    fn schema(&self) -> Value {
        schema(
            "move",
            "Move a shape so that its anchor point lands on (x, y).",
            json!({
                "shapeId": {"type": "string"},
                "x": num_schema("target x"),
                "y": num_schema("target y"),
                "anchor": closed_schema::<Anchor>(),
            }),
            &["shapeId", "x", "y"],
        )
    }

    fn parse(
        &self,
        txn: &TransactionMut<'_>,
        o: &Fields,
        ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError> {
        let shape = shape_ref(txn, o, "shapeId", ctx)?;
        let x = number(o, "x", ctx)?;
        let y = number(o, "y", ctx)?;
        Ok(Parsed::clean(MoveArgs {
            x: ctx.transform.from_model(shape.as_str(), "x", x),
            y: ctx.transform.from_model(shape.as_str(), "y", y),
            anchor: choice(o, "anchor", Some(Anchor::TopLeft), ctx)?,
            shape,
        }))
    }
}

/// Applies `move`.
pub fn apply(
    txn: &mut TransactionMut<'_>,
    args: &MoveArgs,
    _ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    let mut shape = load(txn, &args.shape)?;
    let (ax, ay) = args.anchor.point(&shape_bounds(&shape));
    shape.translate(args.x - ax, args.y - ay);
    write_shape(txn, &shape);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::agent::actions::canvas::test_util::*;
    use crate::agent::actions::{ActionCtx, Registry};
    use serde_json::json;

    #[test]
    fn moves_by_anchor() {
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 100.0, 50.0);
        assert!(
            run(
                &doc,
                json!({"_type": "move", "shapeId": "a", "x": 200, "y": 200, "anchor": "center"})
            )
            .is_ok()
        );
        let b = bounds(&doc, "a");
        approx(b.x, 150.0);
        approx(b.y, 175.0);
        assert!(run(&doc, json!({"_type": "move", "shapeId": "a", "x": "10", "y": 10, "anchor": "bottom-right"})).is_ok());
        let b = bounds(&doc, "a");
        approx(b.max_x(), 10.0);
        approx(b.max_y(), 10.0);
        assert!(
            run(
                &doc,
                json!({"_type": "move", "shapeId": "a", "x": 1, "y": 1, "anchor": "middle-ish"})
            )
            .is_err()
        );
    }

    #[test]
    fn moves_arrows_with_their_ends() {
        let doc = doc();
        put(
            &doc,
            json!({"_type": "arrow", "shapeId": "ar", "x1": 10, "y1": 10, "x2": 30, "y2": 50}),
        );
        assert!(
            run(
                &doc,
                json!({"_type": "move", "shapeId": "ar", "x": 0, "y": 0})
            )
            .is_ok()
        );
        let b = bounds(&doc, "ar");
        approx(b.x, 0.0);
        approx(b.w, 20.0);
        approx(b.h, 40.0);
    }

    #[test]
    fn model_coordinates_are_restored_exactly() {
        let doc = doc();
        rect(&doc, "a", 100.4, 0.0, 10.0, 10.0);
        let mut ctx = ActionCtx::new("f1");
        ctx.transform = crate::canvas::transform::PromptTransform::new(50.0, 0.0);
        let shown = ctx.transform.to_model("a", "x", 100.4);
        assert_eq!(shown, 50.0);
        let mv = json!({"_type": "move", "shapeId": "a", "x": shown, "y": 0});
        assert!(Registry::canvas().apply(&doc, &mv, &mut ctx).is_ok());
        approx(get(&doc, "a").x, 100.4);
    }
}
