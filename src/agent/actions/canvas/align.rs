//! `align` `{shapeIds, alignment}`: lines shapes up on the edge or centre of their common
//! bounds (`top, bottom, left, right, center-horizontal` = same x centre,
//! `center-vertical` = same y centre).

use serde_json::{Value, json};
use yrs::TransactionMut;

use crate::agent::actions::common::{
    choice, closed_schema, closed_set, edit_shapes, ids_schema, schema, shape_list,
};
use crate::agent::actions::{ActionCtx, ActionError, CanvasAction, Fields, Parsed};
use crate::canvas::geometry::{shape_bounds, union_bounds};
use crate::ids::ShapeId;

/// The `align` action.
pub struct Align;

closed_set!(
    /// Which edge or centre line the shapes share.
    pub Alignment {
        /// Same top edge.
        Top = "top",
        /// Same bottom edge.
        Bottom = "bottom",
        /// Same left edge.
        Left = "left",
        /// Same right edge.
        Right = "right",
        /// Same x centre.
        CenterHorizontal = "center-horizontal",
        /// Same y centre.
        CenterVertical = "center-vertical",
    }
);

/// The arguments of `align`.
#[derive(Debug, Clone, PartialEq)]
pub struct AlignArgs {
    /// The shapes lined up (at least one).
    pub shapes: Vec<ShapeId>,
    /// How.
    pub alignment: Alignment,
}

impl CanvasAction for Align {
    fn name(&self) -> &'static str {
        "align"
    }

    fn schema(&self) -> Value {
        schema(
            "align",
            "Align shapes to each other.",
            json!({"shapeIds": ids_schema(), "alignment": closed_schema::<Alignment>()}),
            &["shapeIds", "alignment"],
        )
    }

    fn parse(
        &self,
        txn: &TransactionMut<'_>,
        o: &Fields,
        ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError> {
        let (shapes, notes) = shape_list(txn, o, ctx)?;
        let alignment = choice(o, "alignment", None, ctx)?;
        Ok(Parsed {
            args: AlignArgs { shapes, alignment }.into(),
            notes,
        })
    }
}

/// Applies `align`.
pub fn apply(
    txn: &mut TransactionMut<'_>,
    args: &AlignArgs,
    _ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    edit_shapes(txn, &args.shapes, |shapes| {
        let Some(all) = union_bounds(shapes.iter()) else {
            return;
        };
        for s in shapes {
            let b = shape_bounds(s);
            let (dx, dy) = match args.alignment {
                Alignment::Top => (0.0, all.y - b.y),
                Alignment::Bottom => (0.0, all.max_y() - b.max_y()),
                Alignment::Left => (all.x - b.x, 0.0),
                Alignment::Right => (all.max_x() - b.max_x(), 0.0),
                Alignment::CenterHorizontal => (all.center_x() - b.center_x(), 0.0),
                Alignment::CenterVertical => (0.0, all.center_y() - b.center_y()),
            };
            s.translate(dx, dy);
        }
    })
}

#[cfg(test)]
mod tests {
    use crate::agent::actions::canvas::test_util::*;
    use serde_json::json;

    #[test]
    fn aligns_edges_and_centres() {
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 10.0, 10.0);
        rect(&doc, "b", 50.0, 30.0, 30.0, 20.0);
        assert!(
            run(
                &doc,
                json!({"_type": "align", "shapeIds": ["a", "b"], "alignment": "right"})
            )
            .is_ok()
        );
        approx(bounds(&doc, "a").max_x(), 80.0);
        approx(bounds(&doc, "b").max_x(), 80.0);
        assert!(
            run(
                &doc,
                json!({"_type": "align", "shapeIds": ["a", "b"], "alignment": "center-vertical"})
            )
            .is_ok()
        );
        // Union y-range is 0..50: both centres at 25.
        approx(bounds(&doc, "a").center_y(), 25.0);
        approx(bounds(&doc, "b").center_y(), 25.0);
        assert!(
            run(
                &doc,
                json!({"_type": "align", "shapeIds": ["a", "b"], "alignment": "top"})
            )
            .is_ok()
        );
        approx(bounds(&doc, "b").y, bounds(&doc, "a").y);
    }

    #[test]
    fn missing_shapes_are_dropped_with_a_note() {
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 10.0, 10.0);
        let r = run(
            &doc,
            json!({"_type": "align", "shapeIds": ["a", "ghost"], "alignment": "left"}),
        );
        assert!(matches!(&r, Ok(s) if s.notes.len() == 1), "{r:?}");
        assert!(
            run(
                &doc,
                json!({"_type": "align", "shapeIds": ["ghost"], "alignment": "left"})
            )
            .is_err()
        );
    }
}
