//! `resize` `{shapeIds, scaleX, scaleY, originX, originY}`: scales shapes about an origin
//! (default: the top-left of their common bounds). Positions scale about the origin; geo sizes,
//! text wrap widths, arrow ends and stroke points scale too; notes keep their fixed size.
//! Scale factors are limited to ±1000 and must not be 0.

use serde_json::{Value, json};
use yrs::TransactionMut;

use crate::agent::actions::common::{
    edit_shapes, ids_schema, num_schema, number_or, schema, shape_list, transform_origin,
};
use crate::agent::actions::{ActionCtx, ActionError, CanvasAction, Fields, Parsed};
use crate::canvas::Shape;
use crate::canvas::shape::ShapeProps;
use crate::ids::ShapeId;

/// The `resize` action.
pub struct Resize;

/// The arguments of `resize`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResizeArgs {
    /// The shapes scaled.
    pub shapes: Vec<ShapeId>,
    /// Horizontal factor: non-zero, within ±[`MAX_SCALE`] (the schema's default: 1).
    pub scale_x: f64,
    /// Vertical factor, likewise.
    pub scale_y: f64,
    /// The fixed point in page px (the model's, or the top-left of the shapes).
    pub origin: (f64, f64),
}

/// Largest scale factor accepted.
pub const MAX_SCALE: f64 = 1000.0;

/// Scales one shape about `(ox, oy)`.
pub fn resize_shape(s: &mut Shape, ox: f64, oy: f64, sx: f64, sy: f64) {
    let scale_x = |v: f64| ox + (v - ox) * sx;
    let scale_y = |v: f64| oy + (v - oy) * sy;
    match &mut s.props {
        ShapeProps::Geo { w, h, .. } => {
            let (x0, x1) = (scale_x(s.x), scale_x(s.x + *w));
            let (y0, y1) = (scale_y(s.y), scale_y(s.y + *h));
            if s.rotation == 0.0 {
                s.x = x0.min(x1);
                s.y = y0.min(y1);
            } else {
                s.x = x0;
                s.y = y0;
            }
            *w = (x1 - x0).abs();
            *h = (y1 - y0).abs();
        }
        ShapeProps::Text { max_width, .. } => {
            s.x = scale_x(s.x);
            s.y = scale_y(s.y);
            if let Some(mw) = max_width {
                *mw = (*mw * sx).abs();
            }
        }
        ShapeProps::Note { .. } => {
            s.x = scale_x(s.x);
            s.y = scale_y(s.y);
        }
        ShapeProps::Connector(c) => {
            c.x1 = scale_x(c.x1);
            c.x2 = scale_x(c.x2);
            c.y1 = scale_y(c.y1);
            c.y2 = scale_y(c.y2);
            s.normalize_origin();
        }
        ShapeProps::Draw { points } => {
            for p in points.iter_mut() {
                p.0 = scale_x(s.x + p.0) - s.x;
                p.1 = scale_y(s.y + p.1) - s.y;
            }
            s.normalize_origin();
        }
    }
}

impl CanvasAction for Resize {
    fn name(&self) -> &'static str {
        "resize"
    }

    fn schema(&self) -> Value {
        schema(
            "resize",
            "Scale shapes about an origin point.",
            json!({
                "shapeIds": ids_schema(),
                "scaleX": num_schema("horizontal factor, 1 = unchanged"),
                "scaleY": num_schema("vertical factor, 1 = unchanged"),
                "originX": num_schema("fixed point x (default: left of the shapes)"),
                "originY": num_schema("fixed point y (default: top of the shapes)"),
            }),
            &["shapeIds"],
        )
    }

    fn parse(
        &self,
        txn: &TransactionMut<'_>,
        o: &Fields,
        ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError> {
        let (shapes, notes) = shape_list(txn, o, ctx)?;
        let factor = |axis: &str| {
            let s = number_or(o, axis, 1.0)?;
            if s == 0.0 {
                return Err(ActionError::Invalid(format!("'{axis}' must not be 0")));
            }
            Ok(s.clamp(-MAX_SCALE, MAX_SCALE))
        };
        let (scale_x, scale_y) = (factor("scaleX")?, factor("scaleY")?);
        let origin = transform_origin(txn, o, ctx, &shapes, |b| (b.x, b.y))?;
        Ok(Parsed {
            args: ResizeArgs {
                shapes,
                scale_x,
                scale_y,
                origin,
            }
            .into(),
            notes,
        })
    }
}

/// Applies `resize`.
pub fn apply(
    txn: &mut TransactionMut<'_>,
    args: &ResizeArgs,
    _ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    let (ox, oy) = args.origin;
    edit_shapes(txn, &args.shapes, |shapes| {
        for s in shapes {
            resize_shape(s, ox, oy, args.scale_x, args.scale_y);
        }
    })
}

#[cfg(test)]
mod tests {
    use crate::agent::actions::canvas::test_util::*;
    use serde_json::json;

    #[test]
    fn scales_about_origin() {
        let doc = doc();
        rect(&doc, "a", 10.0, 10.0, 20.0, 10.0);
        rect(&doc, "b", 50.0, 10.0, 10.0, 10.0);
        assert!(
            run(
                &doc,
                json!({"_type": "resize", "shapeIds": ["a", "b"], "scaleX": 2, "scaleY": "0.5"})
            )
            .is_ok()
        );
        // Default origin: top-left of the union (10, 10).
        let a = bounds(&doc, "a");
        approx(a.x, 10.0);
        approx(a.w, 40.0);
        approx(a.h, 5.0);
        let b = bounds(&doc, "b");
        approx(b.x, 90.0);
        approx(b.w, 20.0);
    }

    #[test]
    fn mirrors_with_negative_scale_and_scales_strokes() {
        let doc = doc();
        rect(&doc, "a", 10.0, 0.0, 20.0, 10.0);
        assert!(run(&doc, json!({"_type": "resize", "shapeIds": ["a"], "scaleX": -1, "originX": 0, "originY": 0})).is_ok());
        let a = bounds(&doc, "a");
        approx(a.x, -30.0);
        approx(a.w, 20.0);
        put(
            &doc,
            json!({"_type": "pen", "shapeId": "p", "points": [{"x": 0, "y": 0}, {"x": 10, "y": 20}]}),
        );
        assert!(
            run(
                &doc,
                json!({"_type": "resize", "shapeIds": ["p"], "scaleX": 3, "scaleY": 3})
            )
            .is_ok()
        );
        let p = bounds(&doc, "p");
        approx(p.w, 30.0);
        approx(p.h, 60.0);
        assert!(
            run(
                &doc,
                json!({"_type": "resize", "shapeIds": ["p"], "scaleX": 0})
            )
            .is_err()
        );
    }
}
