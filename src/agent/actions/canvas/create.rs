//! `create` `{shape: SimpleShape}`: adds a shape on the fairy's page, on top of the z-order.
//! A colliding id is renamed (`box` → `box-1`) and later references follow; arrow bindings to
//! missing shapes are dropped. While the action streams, the shape is `locked`.

use serde_json::{Value, json};
use yrs::TransactionMut;

use crate::agent::actions::common::{editable_id, id_taken, missing, schema};
use crate::agent::actions::{ActionCtx, ActionError, CanvasAction, Fields, Note, Parsed};
use crate::canvas::Shape;
use crate::canvas::coerce::coerce_string;
use crate::canvas::format::{ShapeBase, document_type, from_simple};
use crate::canvas::ids::ensure_shape_id_is_unique;
use crate::canvas::live::LiveShapes;
use crate::canvas::shape::{page_indexes, read_shape, write_shape};
use crate::canvas::zorder::{index_above, is_index};

/// The `create` action.
pub struct Create;

/// The arguments of `create`: the new shape, in page coordinates, with its final id and
/// bindings to existing shapes only. Its page, z-order key, lock and author are the fairy's
/// and are set when it is applied.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateArgs {
    /// The shape written.
    pub shape: Shape,
}

/// Parses a simple shape that will be created: type, unique id, coordinates, bindings.
pub(crate) fn parse_new_shape(
    txn: &TransactionMut<'_>,
    simple: &Value,
    ctx: &mut ActionCtx,
    notes: &mut Vec<Note>,
) -> Result<Shape, ActionError> {
    let mut o = simple
        .as_object()
        .cloned()
        .ok_or_else(|| ActionError::Invalid("'shape' must be a JSON object".into()))?;
    let model_type = o
        .get("_type")
        .and_then(Value::as_str)
        .ok_or_else(|| missing(ctx, "shape._type"))?;
    let doc_type = document_type(model_type)?;
    let raw_id = match o.get("shapeId").and_then(coerce_string) {
        Some(id) => id,
        None if ctx.complete => doc_type,
        None => return Err(missing(ctx, "shape.shapeId")),
    };
    // Coordinates come back relative to the chat origin, rounded: restore them first, keyed by
    // the id the model used.
    o.insert("shapeId".into(), Value::String(raw_id.clone()));
    ctx.transform.shape_from_model(&mut o);
    // The action's own shown version holds its id: not taken for the complete version.
    let own = ctx.preview.as_deref();
    let id = ensure_shape_id_is_unique(
        &raw_id,
        |i| id_taken(txn, i) && own != Some(i),
        &mut ctx.renames,
    )?;
    if id.as_str() != raw_id {
        notes.push(Note::IdTaken {
            wanted: raw_id,
            got: id.clone(),
        });
    }
    o.insert("shapeId".into(), Value::String(id.into_string()));
    for binding in ["fromId", "toId"] {
        let Some(target) = o.get(binding).and_then(Value::as_str).map(str::to_owned) else {
            continue;
        };
        let resolved = match editable_id(txn, &target, ctx) {
            Ok(resolved) => Value::String(resolved.into_string()),
            Err(_) => {
                notes.push(Note::BindingDropped { binding, target });
                Value::Null
            }
        };
        o.insert(binding.into(), resolved);
    }
    Ok(from_simple(&Value::Object(o), &ShapeBase::default())?)
}

/// A z-order key above every shape of page `page_id`: from the room's live view when it has one
/// (the fairies' rooms do), without reading the document inside the writing transaction;
/// otherwise from the shapes' keys.
fn top_index(txn: &TransactionMut<'_>, page_id: &str) -> String {
    /// Keys tried from the top; more only if all of them are foreign ones that do not parse.
    const TOP_KEYS: usize = 8;
    if let Some(view) = LiveShapes::existing(txn.doc()) {
        let top = view.top_indexes(page_id, TOP_KEYS);
        if top.len() < TOP_KEYS || top.iter().any(|k| is_index(k)) {
            return index_above(top.iter().map(String::as_str));
        }
    }
    let existing = page_indexes(txn, page_id);
    index_above(existing.iter().map(|i| &**i))
}

/// The z-order key of the action's own shown version of `id` ([`ActionCtx::preview`]) while
/// it is still the top of the fairy's page: the complete version keeps it (a new key would be
/// above it, with nobody else's shape between them).
fn preview_index(txn: &TransactionMut<'_>, id: &str, ctx: &ActionCtx) -> Option<String> {
    if ctx.preview.as_deref() != Some(id) {
        return None;
    }
    let shown = read_shape(txn, id).ok().flatten()?;
    if shown.page_id != ctx.page_id {
        return None;
    }
    let top = match LiveShapes::existing(txn.doc()) {
        Some(view) => view.top_indexes(&ctx.page_id, 1).into_iter().next(),
        None => page_indexes(txn, &ctx.page_id)
            .iter()
            .max()
            .map(|key| key.to_string()),
    };
    (top.as_deref() == Some(shown.index.as_str())).then_some(shown.index)
}

/// Writes a parsed new shape as the fairy's, on top of the fairy's page (locked while the
/// action streams). Over the action's own shown version ([`ActionCtx::preview`]) only the keys
/// that differ are written ([`write_shape`]).
pub(crate) fn create_shape(
    txn: &mut TransactionMut<'_>,
    shape: &Shape,
    ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    let index = preview_index(txn, &shape.id, ctx).unwrap_or_else(|| top_index(txn, &ctx.page_id));
    let shape = Shape {
        page_id: ctx.page_id.clone(),
        index,
        rotation: 0.0,
        locked: !ctx.complete,
        created_by: ctx.author(),
        ..shape.clone()
    };
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

    fn parse(
        &self,
        txn: &TransactionMut<'_>,
        o: &Fields,
        ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError> {
        let mut notes = Vec::new();
        let simple = o.get("shape").ok_or_else(|| missing(ctx, "shape"))?;
        let shape = parse_new_shape(txn, simple, ctx, &mut notes)?;
        Ok(Parsed {
            args: CreateArgs { shape }.into(),
            notes,
        })
    }
}

/// Applies `create`.
pub fn apply(
    txn: &mut TransactionMut<'_>,
    args: &CreateArgs,
    ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    create_shape(txn, &args.shape, ctx)
}

#[cfg(test)]
mod tests {
    use crate::agent::actions::canvas::test_util::*;
    use crate::agent::actions::{ActionCtx, ActionError, Registry};
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
