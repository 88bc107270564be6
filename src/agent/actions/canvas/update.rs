//! `update` `{update: SimpleShape}`: changes the given fields of an existing shape (same id).
//! Only the keys whose value changes are written, so a user's concurrent edit of another
//! property is untouched.

use serde_json::{Value, json};
use yrs::TransactionMut;

use crate::agent::actions::common::{editable_id, load, missing, schema};
use crate::agent::actions::{ActionCtx, ActionError, CanvasAction, Fields, Note, Parsed};
use crate::canvas::Shape;
use crate::canvas::coerce::coerce_string;
use crate::canvas::format::merge_simple;
use crate::canvas::shape::write_shape;

/// The `update` action.
pub struct Update;

/// The arguments of `update`: the shape as the update leaves it, merged when parsed with the
/// shape as the document held it then (parse and apply run in one transaction). Writing it
/// changes only the keys whose value differs, so a user's concurrent edit of another property
/// stays.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateArgs {
    /// The updated shape.
    pub shape: Shape,
}

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

    fn parse(
        &self,
        txn: &TransactionMut<'_>,
        o: &Fields,
        ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError> {
        let mut notes = Vec::new();
        let mut update = o
            .get("update")
            .ok_or_else(|| missing(ctx, "update"))?
            .as_object()
            .cloned()
            .ok_or_else(|| ActionError::Invalid("'update' must be a JSON object".into()))?;
        let raw = update
            .get("shapeId")
            .and_then(coerce_string)
            .ok_or_else(|| missing(ctx, "update.shapeId"))?;
        ctx.transform.shape_from_model(&mut update);
        let id = editable_id(txn, &raw, ctx)?;
        for binding in ["fromId", "toId"] {
            let Some(target) = update
                .get(binding)
                .and_then(Value::as_str)
                .map(str::to_owned)
            else {
                continue;
            };
            if let Ok(resolved) = editable_id(txn, &target, ctx) {
                update.insert(binding.into(), Value::String(resolved.into_string()));
            } else {
                notes.push(Note::BindingDropped { binding, target });
                update.remove(binding);
            }
        }
        let existing = load(txn, &id)?;
        let shape = merge_simple(&existing, &Value::Object(update))?;
        Ok(Parsed {
            args: UpdateArgs { shape }.into(),
            notes,
        })
    }
}

/// Applies `update`.
pub fn apply(
    txn: &mut TransactionMut<'_>,
    args: &UpdateArgs,
    _ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    write_shape(txn, &args.shape);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::agent::actions::canvas::test_util::*;
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
