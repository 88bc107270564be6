//! `create` `{shape: SimpleShape}`: adds a shape on the fairy's page, on top of the z-order.
//! A colliding id is renamed (`box` → `box-1`) and later references follow; arrow bindings to
//! missing shapes are dropped. While the action streams, the shape is `locked`.

use serde_json::{Value, json};
use yrs::TransactionMut;

use super::common::{all_ids, editable_id, obj, obj_ref, schema};
use super::{ActionCtx, ActionError, CanvasAction, Sanitized};
use crate::canvas::format::{ShapeBase, document_type, from_simple};
use crate::canvas::ids::ensure_shape_id_is_unique;
use crate::canvas::shape::{list_shapes, write_shape};
use crate::canvas::zorder::index_above;

/// The `create` action.
pub struct Create;

/// Sanitizes a simple shape that will be created: type, unique id, coordinates, bindings.
pub(crate) fn sanitize_new_shape(
    txn: &TransactionMut<'_>,
    shape: &mut Value,
    ctx: &mut ActionCtx,
    notes: &mut Vec<String>,
) -> Result<String, ActionError> {
    let o = obj(shape)?;
    let model_type = o
        .get("_type")
        .and_then(Value::as_str)
        .ok_or_else(|| super::common::missing(ctx, "shape._type"))?
        .to_owned();
    let doc_type = document_type(&model_type)?;
    let raw_id = match o
        .get("shapeId")
        .and_then(crate::canvas::coerce::coerce_string)
    {
        Some(id) => id,
        None if ctx.complete => doc_type.clone(),
        None => return Err(super::common::missing(ctx, "shape.shapeId")),
    };
    // Coordinates come back relative to the chat origin, rounded: restore them first, keyed by
    // the id the model used.
    o.insert("shapeId".into(), Value::String(raw_id.clone()));
    ctx.transform.shape_from_model(o);
    let ids = all_ids(txn);
    let id = ensure_shape_id_is_unique(&raw_id, |i| ids.contains(i), &mut ctx.renames)?;
    if id != raw_id {
        notes.push(format!(
            "shape id '{raw_id}' was taken: the new shape is '{id}'"
        ));
    }
    o.insert("shapeId".into(), Value::String(id.clone()));
    for binding in ["fromId", "toId"] {
        let Some(target) = o.get(binding).and_then(Value::as_str).map(str::to_owned) else {
            continue;
        };
        match editable_id(txn, &target, ctx) {
            Ok(resolved) => {
                o.insert(binding.into(), Value::String(resolved));
            }
            Err(_) => {
                notes.push(format!("'{binding}' '{target}' does not exist: dropped"));
                o.insert(binding.into(), Value::Null);
            }
        }
    }
    // Validate the whole shape now, so that apply cannot fail half-way.
    from_simple(shape, &ShapeBase::default())?;
    Ok(id)
}

/// Writes a sanitized simple shape as a new fairy shape on top of the fairy's page.
pub(crate) fn create_shape(
    txn: &mut TransactionMut<'_>,
    simple: &Value,
    ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    let existing = list_shapes(txn);
    let index = index_above(
        existing
            .iter()
            .filter(|s| s.page_id == ctx.page_id)
            .map(|s| s.index.as_str()),
    );
    let base = ShapeBase {
        page_id: ctx.page_id.clone(),
        index,
        rotation: 0.0,
        locked: !ctx.complete,
        created_by: ctx.author(),
    };
    let shape = from_simple(simple, &base)?;
    write_shape(txn, &shape);
    ctx.created.push(shape.id);
    Ok(())
}

impl CanvasAction for Create {
    fn name(&self) -> &'static str {
        "create"
    }

    fn schema(&self) -> Value {
        schema(
            "create",
            "Create a shape. Coordinates are page px relative to the chat origin.",
            json!({"shape": {"type": "object", "description": "a SimpleShape: _type, shapeId, note and the type's fields"}}),
            &["shape"],
        )
    }

    fn sanitize(
        &self,
        txn: &TransactionMut<'_>,
        action: &mut Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        let mut notes = Vec::new();
        let shape = obj(action)?
            .get_mut("shape")
            .ok_or_else(|| super::common::missing(ctx, "shape"))?;
        sanitize_new_shape(txn, shape, ctx, &mut notes)?;
        Ok(Sanitized { notes })
    }

    fn apply(
        &self,
        txn: &mut TransactionMut<'_>,
        action: &Value,
        ctx: &mut ActionCtx,
    ) -> Result<(), ActionError> {
        let shape = obj_ref(action)?
            .get("shape")
            .ok_or_else(|| ActionError::Invalid("'shape' is required".into()))?;
        create_shape(txn, shape, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::super::{ActionCtx, ActionError, Registry};
    use serde_json::json;

    #[test]
    fn creates_on_top_with_author() {
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 10.0, 10.0);
        let r = run(
            &doc,
            json!({"_type": "create", "shape": {"_type": "ellipse", "shapeId": "b", "x": "12", "y": 3, "w": 5, "h": 5}}),
        );
        assert!(r.is_ok(), "{r:?}");
        let b = get(&doc, "b");
        assert_eq!((b.x, b.y, b.locked), (12.0, 3.0, false));
        assert_eq!(b.created_by, "fairy:f1");
        assert!(b.index > get(&doc, "a").index);
    }

    #[test]
    fn duplicate_ids_are_renamed_and_followed() {
        let doc = doc();
        rect(&doc, "box", 0.0, 0.0, 10.0, 10.0);
        let registry = Registry::canvas();
        let mut ctx = ActionCtx::new("f1");
        let create = json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "box", "x": 100, "y": 0}});
        let notes = registry.apply(&doc, &create, &mut ctx);
        assert!(matches!(&notes, Ok(n) if n.notes.len() == 1), "{notes:?}");
        assert_eq!(get(&doc, "box").x, 0.0);
        assert_eq!(get(&doc, "box-1").x, 100.0);
        // A later reference to "box" in the same request means the renamed shape.
        let mv = json!({"_type": "move", "shapeId": "box", "x": 500, "y": 0});
        assert!(registry.apply(&doc, &mv, &mut ctx).is_ok());
        assert_eq!(get(&doc, "box-1").x, 500.0);
        assert_eq!(get(&doc, "box").x, 0.0);
    }

    #[test]
    fn bad_creates_have_clear_errors() {
        let doc = doc();
        let unknown = run(
            &doc,
            json!({"_type": "create", "shape": {"_type": "blob", "shapeId": "x"}}),
        );
        assert!(
            matches!(unknown, Err(ActionError::Canvas(_))),
            "{unknown:?}"
        );
        let nan = run(
            &doc,
            json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "x", "x": "NaN"}}),
        );
        assert!(nan.is_err());
        let huge = run(
            &doc,
            json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "h", "x": 1e300, "y": -1e300}}),
        );
        assert!(huge.is_ok());
        assert_eq!(get(&doc, "h").x, crate::canvas::coerce::COORD_LIMIT);
        let dangling = run(
            &doc,
            json!({"_type": "create", "shape": {"_type": "arrow", "shapeId": "a", "x1": 0, "y1": 0, "x2": 5, "y2": 5, "fromId": "ghost"}}),
        );
        assert!(
            matches!(&dangling, Ok(s) if s.notes.len() == 1),
            "{dangling:?}"
        );
        assert!(!format!("{:?}", get(&doc, "a").props).contains("ghost"));
    }

    #[test]
    fn incomplete_create_is_locked() {
        let doc = doc();
        let mut ctx = ActionCtx::new("f1");
        ctx.complete = false;
        let partial =
            json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "p", "x": 1}});
        assert!(Registry::canvas().apply(&doc, &partial, &mut ctx).is_ok());
        assert!(get(&doc, "p").locked);
        assert_eq!(ctx.created, vec!["p".to_string()]);
        let no_id = json!({"_type": "create", "shape": {"_type": "rectangle"}});
        assert!(matches!(
            Registry::canvas().apply(&doc, &no_id, &mut ctx),
            Err(ActionError::Incomplete(_))
        ));
    }
}
