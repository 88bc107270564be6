//! `delete` `{shapeId}`: removes a shape. Arrows bound to it keep their ends but lose the
//! binding, so no reference points at a missing shape.

use serde_json::{Value, json};
use yrs::TransactionMut;

use crate::agent::actions::common::{schema, shape_ref};
use crate::agent::actions::{ActionCtx, ActionError, CanvasAction, Fields, Parsed};
use crate::canvas::shape::delete_shapes_and_unbind;
use crate::ids::ShapeId;

/// The `delete` action.
pub struct Delete;

/// The arguments of `delete`.
#[derive(Debug, Clone, PartialEq)]
pub struct DeleteArgs {
    /// The shape removed.
    pub shape: ShapeId,
}

impl CanvasAction for Delete {
    fn name(&self) -> &'static str {
        "delete"
    }

    fn schema(&self) -> Value {
        schema(
            "delete",
            "Delete a shape.",
            json!({"shapeId": {"type": "string"}}),
            &["shapeId"],
        )
    }

    fn parse(
        &self,
        txn: &TransactionMut<'_>,
        o: &Fields,
        ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError> {
        let shape = shape_ref(txn, o, "shapeId", ctx)?;
        Ok(Parsed::clean(DeleteArgs { shape }))
    }
}

/// Applies `delete`.
pub fn apply(
    txn: &mut TransactionMut<'_>,
    args: &DeleteArgs,
    _ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    delete_shapes_and_unbind(txn, &[args.shape.as_str()]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::agent::actions::canvas::test_util::*;
    use serde_json::json;
    use yrs::Transact;

    #[test]
    fn deletes_and_unbinds() {
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 10.0, 10.0);
        put(
            &doc,
            json!({"_type": "arrow", "shapeId": "ar", "x1": 0, "y1": 0, "x2": 50, "y2": 0, "fromId": "a"}),
        );
        assert!(run(&doc, json!({"_type": "delete", "shapeId": "a"})).is_ok());
        assert_eq!(
            crate::canvas::shape::read_shape(&doc.transact(), "a"),
            Ok(None)
        );
        assert!(!format!("{:?}", get(&doc, "ar").props).contains("Some(\"a\")"));
        assert!(run(&doc, json!({"_type": "delete", "shapeId": "a"})).is_err());
    }
}
