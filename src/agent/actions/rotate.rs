//! `rotate` `{shapeIds, degrees, originX, originY}`: rotates shapes clockwise about an origin
//! (default: the centre of their common bounds). Box-like shapes and strokes rotate their
//! position about the origin and add to `rotation`; arrows and lines rotate their ends.

use serde_json::{Value, json};
use yrs::TransactionMut;

use super::common::{
    get_ids, get_num, ids_schema, load_all, num_schema, number, obj, obj_ref, origin_point,
    save_all, schema, shape_refs,
};
use super::{ActionCtx, ActionError, CanvasAction, Sanitized};
use crate::canvas::Shape;
use crate::canvas::coerce::number_value;
use crate::canvas::geometry::{rotate_point, union_bounds};
use crate::canvas::shape::ShapeProps;

/// The `rotate` action.
pub struct Rotate;

/// Rotates one shape by `angle` radians about `(ox, oy)`.
pub fn rotate_shape(s: &mut Shape, ox: f64, oy: f64, angle: f64) {
    match &mut s.props {
        ShapeProps::Connector(c) => {
            (c.x1, c.y1) = rotate_point(c.x1, c.y1, ox, oy, angle);
            (c.x2, c.y2) = rotate_point(c.x2, c.y2, ox, oy, angle);
            s.normalize_origin();
        }
        _ => {
            (s.x, s.y) = rotate_point(s.x, s.y, ox, oy, angle);
            s.rotation = (s.rotation + angle).rem_euclid(std::f64::consts::TAU);
        }
    }
}

impl CanvasAction for Rotate {
    fn name(&self) -> &'static str {
        "rotate"
    }

    fn schema(&self) -> Value {
        schema(
            "rotate",
            "Rotate shapes clockwise by some degrees about an origin point.",
            json!({
                "shapeIds": ids_schema(),
                "degrees": num_schema("clockwise"),
                "originX": num_schema("rotation centre x (default: centre of the shapes)"),
                "originY": num_schema("rotation centre y"),
            }),
            &["shapeIds", "degrees"],
        )
    }

    fn sanitize(
        &self,
        txn: &TransactionMut<'_>,
        action: &mut Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        let mut notes = Vec::new();
        let o = obj(action)?;
        let ids = shape_refs(txn, o, "shapeIds", ctx, &mut notes)?;
        let degrees = number(o, "degrees", ctx)?;
        o.insert("degrees".into(), number_value(degrees.rem_euclid(360.0)));
        if origin_point(o, ctx)?.is_none() {
            let shapes = load_all(txn, &ids)?;
            if let Some(b) = union_bounds(&shapes) {
                o.insert("originX".into(), number_value(b.center_x()));
                o.insert("originY".into(), number_value(b.center_y()));
            }
        }
        Ok(Sanitized { notes })
    }

    fn apply(
        &self,
        txn: &mut TransactionMut<'_>,
        action: &Value,
        _ctx: &mut ActionCtx,
    ) -> Result<(), ActionError> {
        let o = obj_ref(action)?;
        let mut shapes = load_all(txn, &get_ids(o, "shapeIds"))?;
        let angle = get_num(o, "degrees").to_radians();
        let (ox, oy) = (get_num(o, "originX"), get_num(o, "originY"));
        for s in &mut shapes {
            rotate_shape(s, ox, oy, angle);
        }
        save_all(txn, &shapes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use serde_json::json;

    #[test]
    fn quarter_turn_about_centre() {
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 100.0, 50.0);
        assert!(
            run(
                &doc,
                json!({"_type": "rotate", "shapeIds": ["a"], "degrees": 90})
            )
            .is_ok()
        );
        // About its centre (50, 25): the bounds become 50 wide, 100 tall, same centre.
        let b = bounds(&doc, "a");
        approx(b.w, 50.0);
        approx(b.h, 100.0);
        approx(b.center_x(), 50.0);
        approx(b.center_y(), 25.0);
        approx(get(&doc, "a").rotation, std::f64::consts::FRAC_PI_2);
    }

    #[test]
    fn arrow_ends_rotate_about_given_origin() {
        let doc = doc();
        put(
            &doc,
            json!({"_type": "line", "shapeId": "l", "x1": 10, "y1": 0, "x2": 20, "y2": 0}),
        );
        assert!(run(&doc, json!({"_type": "rotate", "shapeIds": ["l"], "degrees": "180", "originX": 0, "originY": 0})).is_ok());
        let b = bounds(&doc, "l");
        approx(b.x, -20.0);
        approx(b.w, 10.0);
        approx(b.h, 0.0);
        assert!(
            run(
                &doc,
                json!({"_type": "rotate", "shapeIds": ["l"], "degrees": "NaN"})
            )
            .is_err()
        );
    }
}
