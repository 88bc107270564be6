//! `place` `{shapeId, referenceShapeId, side, sideOffset, align, alignOffset}`: puts a shape
//! next to a reference shape. `side` picks the edge, `sideOffset` the gap; `align` lines the
//! shape up with the reference along that edge (`start` = left/top edges flush, `center`,
//! `end` = right/bottom edges flush), shifted by `alignOffset` (inwards for `end`).

use serde_json::{Value, json};
use yrs::TransactionMut;

use crate::agent::actions::common::{
    choice, closed_schema, closed_set, load, num_schema, number_or, schema, shape_ref,
};
use crate::agent::actions::{ActionCtx, ActionError, CanvasAction, Fields, Parsed};
use crate::canvas::geometry::{Bounds, shape_bounds};
use crate::canvas::shape::write_shape;
use crate::ids::ShapeId;

/// The `place` action.
pub struct Place;

closed_set!(
    /// The edge of the reference shape the placed shape goes against.
    pub Side {
        /// Above.
        Top = "top",
        /// Below.
        Bottom = "bottom",
        /// To the left.
        Left = "left",
        /// To the right.
        Right = "right",
    }
);

closed_set!(
    /// How the placed shape lines up with the reference along that edge.
    pub PlaceAlign {
        /// Left/top edges flush.
        Start = "start",
        /// Centred (the default).
        Center = "center",
        /// Right/bottom edges flush.
        End = "end",
    }
);

/// The arguments of `place`.
#[derive(Debug, Clone, PartialEq)]
pub struct PlaceArgs {
    /// The shape moved.
    pub shape: ShapeId,
    /// The shape it is placed against (never `shape` itself).
    pub reference: ShapeId,
    /// Which edge of the reference.
    pub side: Side,
    /// Gap between the shapes in px.
    pub side_offset: f64,
    /// Alignment along the edge.
    pub align: PlaceAlign,
    /// Shift along the edge in px (inwards for `end`).
    pub align_offset: f64,
}

/// Where the top-left of bounds `s` goes when placed against `r` as `args` say.
pub fn placed_origin(s: &Bounds, r: &Bounds, args: &PlaceArgs) -> (f64, f64) {
    let along = |len: f64, ref_start: f64, ref_len: f64| -> f64 {
        match args.align {
            PlaceAlign::Start => ref_start + args.align_offset,
            PlaceAlign::End => ref_start + ref_len - len - args.align_offset,
            PlaceAlign::Center => ref_start + (ref_len - len) / 2.0 + args.align_offset,
        }
    };
    let gap = args.side_offset;
    match args.side {
        Side::Top => (along(s.w, r.x, r.w), r.y - gap - s.h),
        Side::Bottom => (along(s.w, r.x, r.w), r.max_y() + gap),
        Side::Left => (r.x - gap - s.w, along(s.h, r.y, r.h)),
        Side::Right => (r.max_x() + gap, along(s.h, r.y, r.h)),
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
                "side": closed_schema::<Side>(),
                "sideOffset": num_schema("gap between the shapes in px"),
                "align": closed_schema::<PlaceAlign>(),
                "alignOffset": num_schema("shift along the side in px"),
            }),
            &["shapeId", "referenceShapeId", "side"],
        )
    }

    fn parse(
        &self,
        txn: &TransactionMut<'_>,
        o: &Fields,
        ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError> {
        let shape = shape_ref(txn, o, "shapeId", ctx)?;
        let reference = shape_ref(txn, o, "referenceShapeId", ctx)?;
        if shape == reference {
            return Err(ActionError::Invalid(
                "a shape cannot be placed relative to itself".into(),
            ));
        }
        Ok(Parsed::clean(PlaceArgs {
            side: choice(o, "side", None, ctx)?,
            align: choice(o, "align", Some(PlaceAlign::Center), ctx)?,
            side_offset: number_or(o, "sideOffset", 0.0)?,
            align_offset: number_or(o, "alignOffset", 0.0)?,
            shape,
            reference,
        }))
    }
}

/// Applies `place`.
pub fn apply(
    txn: &mut TransactionMut<'_>,
    args: &PlaceArgs,
    _ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    let mut shape = load(txn, &args.shape)?;
    let reference = load(txn, &args.reference)?;
    let s = shape_bounds(&shape);
    let (x, y) = placed_origin(&s, &shape_bounds(&reference), args);
    shape.translate(x - s.x, y - s.y);
    write_shape(txn, &shape);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::agent::actions::canvas::test_util::*;
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
