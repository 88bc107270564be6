//! `update` `{update: SimpleShape}`: changes the given fields of an existing shape (same id).
//! Only the keys whose value changes are written, so a user's concurrent edit of another
//! property is untouched.

use serde_json::{Value, json};
use yrs::TransactionMut;

use super::common::{editable_id, load, missing, obj, obj_ref, schema};
use super::{ActionCtx, ActionError, CanvasAction, Sanitized};
use crate::canvas::format::merge_simple;
use crate::canvas::shape::write_shape;

/// The `update` action.
pub struct Update;

impl CanvasAction for Update {
    fn name(&self) -> &'static str {
        "update"
    }

    fn schema(&self) -> Value {
        schema(
            "update",
            "Change fields of an existing shape; give its shapeId and only the changed fields.",
            json!({"update": {"type": "object", "description": "a partial SimpleShape with shapeId"}}),
            &["update"],
        )
    }

    fn sanitize(
        &self,
        txn: &TransactionMut<'_>,
        action: &mut Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        let mut notes = Vec::new();
        let update = obj(action)?
            .get_mut("update")
            .ok_or_else(|| missing(ctx, "update"))?;
        let o = obj(update)?;
        let raw = o
            .get("shapeId")
            .and_then(crate::canvas::coerce::coerce_string)
            .ok_or_else(|| missing(ctx, "update.shapeId"))?;
        ctx.transform.shape_from_model(o);
        let id = editable_id(txn, &raw, ctx)?;
        o.insert("shapeId".into(), Value::String(id.clone()));
        for binding in ["fromId", "toId"] {
            let Some(target) = o.get(binding).and_then(Value::as_str).map(str::to_owned) else {
                continue;
            };
            if let Ok(resolved) = editable_id(txn, &target, ctx) {
                o.insert(binding.into(), Value::String(resolved));
            } else {
                notes.push(format!("'{binding}' '{target}' does not exist: dropped"));
                o.remove(binding);
            }
        }
        let existing = load(txn, &id)?;
        merge_simple(&existing, update)?;
        Ok(Sanitized { notes })
    }

    fn apply(
        &self,
        txn: &mut TransactionMut<'_>,
        action: &Value,
        _ctx: &mut ActionCtx,
    ) -> Result<(), ActionError> {
        let update = obj_ref(action)?
            .get("update")
            .ok_or_else(|| ActionError::Invalid("'update' is required".into()))?;
        let id = update
            .get("shapeId")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let existing = load(txn, id)?;
        let merged = merge_simple(&existing, update)?;
        write_shape(txn, &merged);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use serde_json::json;

    #[test]
    fn updates_only_given_fields() {
        let doc = doc();
        put(
            &doc,
            json!({"_type": "rectangle", "shapeId": "a", "x": 1, "y": 2, "w": 3, "h": 4, "text": "t", "color": "red"}),
        );
        let r = run(
            &doc,
            json!({"_type": "update", "update": {"shapeId": "a", "_type": "ellipse", "w": "30", "color": "blue"}}),
        );
        assert!(r.is_ok(), "{r:?}");
        let a = get(&doc, "a");
        assert_eq!(
            (a.type_name.as_str(), a.color.as_str(), a.x),
            ("ellipse", "blue", 1.0)
        );
        assert_eq!(a.text(), Some("t"));
        assert_eq!(bounds(&doc, "a").w, 30.0);
    }

    #[test]
    fn missing_or_incompatible_updates_fail() {
        let doc = doc();
        put(&doc, json!({"_type": "rectangle", "shapeId": "a"}));
        assert!(
            run(
                &doc,
                json!({"_type": "update", "update": {"shapeId": "ghost", "x": 1}})
            )
            .is_err()
        );
        assert!(
            run(
                &doc,
                json!({"_type": "update", "update": {"shapeId": "a", "_type": "arrow"}})
            )
            .is_err()
        );
        assert!(
            run(
                &doc,
                json!({"_type": "update", "update": {"shapeId": "a", "x": "inf"}})
            )
            .is_err()
        );
        assert_eq!(get(&doc, "a").x, 0.0);
    }
}
