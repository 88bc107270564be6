//! `label` `{shapeId, text}`: sets the text of a shape that has one (not pen strokes).

use serde_json::{Value, json};
use yrs::TransactionMut;

use crate::agent::actions::common::{load, schema, shape_ref, string};
use crate::agent::actions::{ActionCtx, ActionError, CanvasAction, Fields, Parsed};
use crate::canvas::shape::write_shape;
use crate::ids::ShapeId;

/// The `label` action.
pub struct Label;

/// The arguments of `label`.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelArgs {
    /// A shape that holds text.
    pub shape: ShapeId,
    /// Its new text.
    pub text: String,
}

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

    fn parse(
        &self,
        txn: &TransactionMut<'_>,
        o: &Fields,
        ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError> {
        let shape = shape_ref(txn, o, "shapeId", ctx)?;
        let text = string(o, "text", ctx)?;
        if load(txn, &shape)?.text().is_none() {
            return Err(ActionError::Invalid(format!(
                "shape '{shape}' cannot hold text"
            )));
        }
        Ok(Parsed::clean(LabelArgs { shape, text }))
    }
}

/// Applies `label`.
pub fn apply(
    txn: &mut TransactionMut<'_>,
    args: &LabelArgs,
    _ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    let mut shape = load(txn, &args.shape)?;
    if !shape.set_text(args.text.clone()) {
        return Err(ActionError::Invalid("this shape cannot hold text".into()));
    }
    write_shape(txn, &shape);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::agent::actions::canvas::test_util::*;
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
