//! `place` `{shapeId, referenceShapeId, side, sideOffset, align, alignOffset}`: puts a shape
//! next to a reference shape. `side` picks the edge, `sideOffset` the gap; `align` lines the
//! shape up with the reference along that edge (`start` = left/top edges flush, `center`,
//! `end` = right/bottom edges flush), shifted by `alignOffset` (inwards for `end`).

use serde_json::{Value, json};
use yrs::TransactionMut;

use super::common::{
    enum_schema, get_num, get_str, load, num_schema, number_or, obj, obj_ref, one_of, schema,
    shape_ref,
};
use super::{ActionCtx, ActionError, CanvasAction, Sanitized};
use crate::canvas::geometry::{Bounds, shape_bounds};
use crate::canvas::shape::write_shape;

/// The `place` action.
pub struct Place;

const SIDES: &[&str] = &["top", "bottom", "left", "right"];
const ALIGNS: &[&str] = &["start", "center", "end"];

/// Where the top-left of bounds `s` goes when placed against `r`.
pub fn placed_origin(
    s: &Bounds,
    r: &Bounds,
    side: &str,
    side_offset: f64,
    align: &str,
    align_offset: f64,
) -> (f64, f64) {
    let along = |start: f64, len: f64, ref_start: f64, ref_len: f64| -> f64 {
        let _ = start;
        match align {
            "start" => ref_start + align_offset,
            "end" => ref_start + ref_len - len - align_offset,
            _ => ref_start + (ref_len - len) / 2.0 + align_offset,
        }
    };
    match side {
        "top" => (along(s.x, s.w, r.x, r.w), r.y - side_offset - s.h),
        "bottom" => (along(s.x, s.w, r.x, r.w), r.max_y() + side_offset),
        "left" => (r.x - side_offset - s.w, along(s.y, s.h, r.y, r.h)),
        _ => (r.max_x() + side_offset, along(s.y, s.h, r.y, r.h)),
    }
}

impl CanvasAction for Place {
    fn name(&self) -> &'static str {
        "place"
    }

    fn schema(&self) -> Value {
        schema(
            "place",
            "Place a shape next to a reference shape.",
            json!({
                "shapeId": {"type": "string"},
                "referenceShapeId": {"type": "string"},
                "side": enum_schema(SIDES),
                "sideOffset": num_schema("gap between the shapes in px"),
                "align": enum_schema(ALIGNS),
                "alignOffset": num_schema("shift along the side in px"),
            }),
            &["shapeId", "referenceShapeId", "side"],
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
        let reference = shape_ref(txn, o, "referenceShapeId", ctx)?;
        if id == reference {
            return Err(ActionError::Invalid(
                "a shape cannot be placed relative to itself".into(),
            ));
        }
        one_of(o, "side", SIDES, None, ctx)?;
        one_of(o, "align", ALIGNS, Some("center"), ctx)?;
        number_or(o, "sideOffset", 0.0)?;
        number_or(o, "alignOffset", 0.0)?;
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
        let reference = load(txn, get_str(o, "referenceShapeId"))?;
        let s = shape_bounds(&shape);
        let (x, y) = placed_origin(
            &s,
            &shape_bounds(&reference),
            get_str(o, "side"),
            get_num(o, "sideOffset"),
            get_str(o, "align"),
            get_num(o, "alignOffset"),
        );
        shape.translate(x - s.x, y - s.y);
        write_shape(txn, &shape);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use serde_json::json;

    #[test]
    fn places_on_each_side() {
        let doc = doc();
        rect(&doc, "ref", 100.0, 100.0, 100.0, 50.0);
        rect(&doc, "s", 0.0, 0.0, 20.0, 10.0);
        let cases = [
            ("right", "start", 0.0, (210.0, 100.0)),
            ("left", "center", 0.0, (70.0, 120.0)),
            ("top", "end", 5.0, (175.0, 80.0)),
            ("bottom", "center", 0.0, (140.0, 160.0)),
        ];
        for (side, align, align_offset, (ex, ey)) in cases {
            let r = run(
                &doc,
                json!({"_type": "place", "shapeId": "s", "referenceShapeId": "ref", "side": side, "sideOffset": 10, "align": align, "alignOffset": align_offset}),
            );
            assert!(r.is_ok(), "{r:?}");
            let b = bounds(&doc, "s");
            approx(b.x, ex);
            approx(b.y, ey);
        }
        assert!(
            run(
                &doc,
                json!({"_type": "place", "shapeId": "s", "referenceShapeId": "s", "side": "top"})
            )
            .is_err()
        );
        assert!(run(&doc, json!({"_type": "place", "shapeId": "s", "referenceShapeId": "ghost", "side": "top"})).is_err());
    }
}
