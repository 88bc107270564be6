//! `send-to-back` `{shapeIds}`: gives the shapes new z-order keys below every shape on their
//! page, keeping their relative order.

use serde_json::{Value, json};
use yrs::TransactionMut;

use super::bring_to_front::restack;
use super::common::{get_ids, ids_schema, obj, obj_ref, schema, shape_refs};
use super::{ActionCtx, ActionError, CanvasAction, Sanitized};

/// The `send-to-back` action.
pub struct SendToBack;

impl CanvasAction for SendToBack {
    fn name(&self) -> &'static str {
        "send-to-back"
    }

    fn schema(&self) -> Value {
        schema(
            "send-to-back",
            "Move shapes below all others.",
            json!({"shapeIds": ids_schema()}),
            &["shapeIds"],
        )
    }

    fn sanitize(
        &self,
        txn: &TransactionMut<'_>,
        action: &mut Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        let mut notes = Vec::new();
        shape_refs(txn, obj(action)?, "shapeIds", ctx, &mut notes)?;
        Ok(Sanitized { notes })
    }

    fn apply(
        &self,
        txn: &mut TransactionMut<'_>,
        action: &Value,
        _ctx: &mut ActionCtx,
    ) -> Result<(), ActionError> {
        restack(txn, &get_ids(obj_ref(action)?, "shapeIds"), false)
    }
}
