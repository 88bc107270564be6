//! `move` `{shapeId, x, y, anchor?}`: moves a shape so that the chosen point of its bounds
//! (one of 9 anchors, default `top-left`) lands on `(x, y)`.

use serde_json::{Value, json};
use yrs::TransactionMut;

use super::common::{
    enum_schema, get_num, get_str, load, num_schema, number, obj, obj_ref, one_of, schema,
    shape_ref,
};
use super::{ActionCtx, ActionError, CanvasAction, Sanitized};
use crate::canvas::coerce::number_value;
use crate::canvas::geometry::{Bounds, shape_bounds};
use crate::canvas::shape::write_shape;

/// The `move` action.
pub struct Move;

/// The 9 anchor names.
pub const ANCHORS: &[&str] = &[
    "top-left",
    "top-center",
    "top-right",
    "center-left",
    "center",
    "center-right",
    "bottom-left",
    "bottom-center",
    "bottom-right",
];

/// The point of `b` an anchor names.
pub fn anchor_point(b: &Bounds, anchor: &str) -> (f64, f64) {
    let fx = if anchor.ends_with("left") {
        0.0
    } else if anchor.ends_with("right") {
        1.0
    } else {
        0.5
    };
    let fy = if anchor.starts_with("top") {
        0.0
    } else if anchor.starts_with("bottom") {
        1.0
    } else {
        0.5
    };
    (b.x + fx * b.w, b.y + fy * b.h)
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
                "anchor": enum_schema(ANCHORS),
            }),
            &["shapeId", "x", "y"],
        )
    }

    fn sanitize(
        &self,
        txn: &TransactionMut<'_>,
        action: &mut Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        let o = obj(action)?;
        let id = shape_ref(txn, o, "shapeId", ctx)?;
        let x = number(o, "x", ctx)?;
        let y = number(o, "y", ctx)?;
        o.insert(
            "x".into(),
            number_value(ctx.transform.from_model(&id, "x", x)),
        );
        o.insert(
            "y".into(),
            number_value(ctx.transform.from_model(&id, "y", y)),
        );
        one_of(o, "anchor", ANCHORS, Some("top-left"), ctx)?;
        Ok(Sanitized::default())
    }

    fn apply(
        &self,
        txn: &mut TransactionMut<'_>,
        action: &Value,
        _ctx: &mut ActionCtx,
    ) -> Result<(), ActionError> {
        let o = obj_ref(action)?;
        let mut shape = load(txn, get_str(o, "shapeId"))?;
        let (ax, ay) = anchor_point(&shape_bounds(&shape), get_str(o, "anchor"));
        shape.translate(get_num(o, "x") - ax, get_num(o, "y") - ay);
        write_shape(txn, &shape);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::super::{ActionCtx, Registry};
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
