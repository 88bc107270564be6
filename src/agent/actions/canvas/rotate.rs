//! `rotate` `{shapeIds, degrees, originX, originY}`: rotates shapes clockwise about an origin
//! (default: the centre of their common bounds). Box-like shapes and strokes rotate their
//! position about the origin and add to `rotation`; arrows and lines rotate their ends.

use serde_json::{Value, json};
use yrs::TransactionMut;

use crate::agent::actions::common::{
    edit_shapes, ids_schema, num_schema, number, schema, shape_list, transform_origin,
};
use crate::agent::actions::{ActionCtx, ActionError, CanvasAction, Fields, Parsed};
use crate::canvas::Shape;
use crate::canvas::geometry::rotate_point;
use crate::canvas::shape::ShapeProps;
use crate::ids::ShapeId;

/// The `rotate` action.
pub struct Rotate;

/// The arguments of `rotate`.
#[derive(Debug, Clone, PartialEq)]
pub struct RotateArgs {
    /// The shapes rotated.
    pub shapes: Vec<ShapeId>,
    /// Clockwise, in `[0, 360)`.
    pub degrees: f64,
    /// The fixed point in page px (the model's, or the centre of the shapes).
    pub origin: (f64, f64),
}

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

    fn parse(
        &self,
        txn: &TransactionMut<'_>,
        o: &Fields,
        ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError> {
        let (shapes, notes) = shape_list(txn, o, ctx)?;
        let degrees = number(o, "degrees", ctx)?.rem_euclid(360.0);
        let origin = transform_origin(txn, o, ctx, &shapes, |b| (b.center_x(), b.center_y()))?;
        Ok(Parsed {
            args: RotateArgs {
                shapes,
                degrees,
                origin,
            }
            .into(),
            notes,
        })
    }
}

/// Applies `rotate`.
pub fn apply(
    txn: &mut TransactionMut<'_>,
    args: &RotateArgs,
    _ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    let angle = args.degrees.to_radians();
    let (ox, oy) = args.origin;
    edit_shapes(txn, &args.shapes, |shapes| {
        for s in shapes {
            rotate_shape(s, ox, oy, angle);
        }
    })
}

#[cfg(test)]
mod tests {
    use crate::agent::actions::canvas::test_util::*;
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
