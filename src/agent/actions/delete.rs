//! `delete` `{shapeId}`: removes a shape. Arrows bound to it keep their ends but lose the
//! binding, so no reference points at a missing shape.

use serde_json::{Value, json};
use yrs::TransactionMut;

use super::common::{get_str, obj, obj_ref, schema, shape_ref};
use super::{ActionCtx, ActionError, CanvasAction, Sanitized};
use crate::canvas::shape::{ShapeProps, delete_shape, list_shapes, write_shape};

/// The `delete` action.
pub struct Delete;

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

    fn sanitize(
        &self,
        txn: &TransactionMut<'_>,
        action: &mut Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        shape_ref(txn, obj(action)?, "shapeId", ctx)?;
        Ok(Sanitized::default())
    }

    fn apply(
        &self,
        txn: &mut TransactionMut<'_>,
        action: &Value,
        _ctx: &mut ActionCtx,
    ) -> Result<(), ActionError> {
        let id = get_str(obj_ref(action)?, "shapeId").to_owned();
        delete_shape(txn, &id);
        for mut s in list_shapes(txn) {
            if let ShapeProps::Connector(c) = &mut s.props {
                let mut changed = false;
                for end in [&mut c.from_id, &mut c.to_id] {
                    if end.as_deref() == Some(id.as_str()) {
                        *end = None;
                        changed = true;
                    }
                }
                if changed {
                    write_shape(txn, &s);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
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
