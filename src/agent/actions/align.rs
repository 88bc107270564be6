//! `align` `{shapeIds, alignment}`: lines shapes up on the edge or centre of their common
//! bounds (`top, bottom, left, right, center-horizontal` = same x centre,
//! `center-vertical` = same y centre).

use serde_json::{Value, json};
use yrs::TransactionMut;

use super::common::{
    ShapeList, edit_shape_list, enum_schema, get_str, ids_schema, one_of, schema, shape_list,
};
use super::{ActionCtx, ActionError, CanvasAction, Sanitized};
use crate::canvas::geometry::{shape_bounds, union_bounds};

/// The `align` action.
pub struct Align;

const ALIGNMENTS: &[&str] = &[
    "top",
    "bottom",
    "left",
    "right",
    "center-horizontal",
    "center-vertical",
];

impl CanvasAction for Align {
    fn name(&self) -> &'static str {
        "align"
    }

    fn schema(&self) -> Value {
        schema(
            "align",
            "Align shapes to each other.",
            json!({"shapeIds": ids_schema(), "alignment": enum_schema(ALIGNMENTS)}),
            &["shapeIds", "alignment"],
        )
    }

    fn sanitize(
        &self,
        txn: &TransactionMut<'_>,
        action: &mut Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        let ShapeList {
            fields: o, notes, ..
        } = shape_list(txn, action, ctx)?;
        one_of(o, "alignment", ALIGNMENTS, None, ctx)?;
        Ok(Sanitized { notes })
    }

    fn apply(
        &self,
        txn: &mut TransactionMut<'_>,
        action: &Value,
        _ctx: &mut ActionCtx,
    ) -> Result<(), ActionError> {
        edit_shape_list(txn, action, |o, shapes| {
            let Some(all) = union_bounds(shapes.iter()) else {
                return;
            };
            let alignment = get_str(o, "alignment");
            for s in shapes {
                let b = shape_bounds(s);
                let (dx, dy) = match alignment {
                    "top" => (0.0, all.y - b.y),
                    "bottom" => (0.0, all.max_y() - b.max_y()),
                    "left" => (all.x - b.x, 0.0),
                    "right" => (all.max_x() - b.max_x(), 0.0),
                    "center-horizontal" => (all.center_x() - b.center_x(), 0.0),
                    _ => (0.0, all.center_y() - b.center_y()),
                };
                s.translate(dx, dy);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
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
