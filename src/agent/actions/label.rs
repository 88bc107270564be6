//! `label` `{shapeId, text}`: sets the text of a shape that has one (not pen strokes).

use serde_json::{Value, json};
use yrs::TransactionMut;

use super::common::{get_str, load, missing, obj, obj_ref, schema, shape_ref};
use super::{ActionCtx, ActionError, CanvasAction, Sanitized};
use crate::canvas::coerce::string_field;
use crate::canvas::shape::write_shape;

/// The `label` action.
pub struct Label;

impl CanvasAction for Label {
    fn name(&self) -> &'static str {
        "label"
    }

    fn schema(&self) -> Value {
        schema(
            "label",
            "Set the text of a shape.",
            json!({"shapeId": {"type": "string"}, "text": {"type": "string"}}),
            &["shapeId", "text"],
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
        string_field(o, "text")?.ok_or_else(|| missing(ctx, "text"))?;
        if load(txn, &id)?.text().is_none() {
            return Err(ActionError::Invalid(format!(
                "shape '{id}' cannot hold text"
            )));
        }
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
        if !shape.set_text(get_str(o, "text").to_owned()) {
            return Err(ActionError::Invalid("this shape cannot hold text".into()));
        }
        write_shape(txn, &shape);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use serde_json::json;

    #[test]
    fn labels_and_refuses_pen() {
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 10.0, 10.0);
        assert!(run(&doc, json!({"_type": "label", "shapeId": "a", "text": 42})).is_ok());
        assert_eq!(get(&doc, "a").text(), Some("42"));
        put(
            &doc,
            json!({"_type": "pen", "shapeId": "p", "points": [{"x": 0, "y": 0}, {"x": 5, "y": 5}]}),
        );
        assert!(run(&doc, json!({"_type": "label", "shapeId": "p", "text": "x"})).is_err());
    }
}
