//! Helpers shared by the action files: reading fields of an action object with the model's
//! typical mistakes coerced, resolving shape ids (renames, missing, locked), loading and saving
//! shapes, and building JSON schemas. Owns no action semantics of its own.

use serde_json::{Map, Value, json};
use yrs::TransactionMut;

use super::{ActionCtx, ActionError};
use crate::canvas::coerce;
use crate::canvas::ids::ensure_shape_id_exists;
use crate::canvas::shape::{Shape, read_shape, shape_ids, write_shape};

/// The action as a JSON object.
pub fn obj(action: &mut Value) -> Result<&mut Map<String, Value>, ActionError> {
    action
        .as_object_mut()
        .ok_or_else(|| ActionError::Invalid("an action must be a JSON object".into()))
}

/// The action as a JSON object (read-only, for `apply`).
pub fn obj_ref(action: &Value) -> Result<&Map<String, Value>, ActionError> {
    action
        .as_object()
        .ok_or_else(|| ActionError::Invalid("an action must be a JSON object".into()))
}

/// The error for a missing field: `Incomplete` while streaming, `Invalid` once complete.
pub fn missing(ctx: &ActionCtx, field: &str) -> ActionError {
    if ctx.complete {
        ActionError::Invalid(format!("'{field}' is required"))
    } else {
        ActionError::Incomplete(format!("'{field}' not received yet"))
    }
}

/// A required number field, coerced and clamped in place.
pub fn number(
    o: &mut Map<String, Value>,
    field: &str,
    ctx: &ActionCtx,
) -> Result<f64, ActionError> {
    coerce::number_field(o, field)?.ok_or_else(|| missing(ctx, field))
}

/// An optional number field with a default, coerced and clamped in place.
pub fn number_or(
    o: &mut Map<String, Value>,
    field: &str,
    default: f64,
) -> Result<f64, ActionError> {
    let n = coerce::number_field(o, field)?.unwrap_or(default);
    o.insert(field.into(), coerce::number_value(n));
    Ok(n)
}

/// A number field of a sanitized action (defaults to 0 if somehow absent).
pub fn get_num(o: &Map<String, Value>, field: &str) -> f64 {
    o.get(field).and_then(coerce::coerce_number).unwrap_or(0.0)
}

/// A string field of a sanitized action.
pub fn get_str<'a>(o: &'a Map<String, Value>, field: &str) -> &'a str {
    o.get(field).and_then(Value::as_str).unwrap_or_default()
}

/// An enum field: normalised to one of `allowed` (case-insensitive), or `default` if absent.
pub fn one_of(
    o: &mut Map<String, Value>,
    field: &str,
    allowed: &[&str],
    default: Option<&str>,
    ctx: &ActionCtx,
) -> Result<String, ActionError> {
    let value = match o.get(field).and_then(Value::as_str) {
        Some(s) => s.trim().to_ascii_lowercase(),
        None => match default {
            Some(d) => d.to_owned(),
            None => return Err(missing(ctx, field)),
        },
    };
    if !allowed.contains(&value.as_str()) {
        return Err(ActionError::Invalid(format!(
            "'{field}' must be one of {}",
            allowed.join(", ")
        )));
    }
    o.insert(field.into(), Value::String(value.clone()));
    Ok(value)
}

/// True if `id` is a key of `shapes`.
pub fn exists(txn: &TransactionMut<'_>, id: &str) -> bool {
    read_shape(txn, id).map(|s| s.is_some()).unwrap_or(true)
}

/// The ids of every entry in `shapes` (readable or not).
pub fn all_ids(txn: &TransactionMut<'_>) -> std::collections::HashSet<String> {
    shape_ids(txn).into_iter().collect()
}

/// Resolves a reference to an existing shape the fairy may edit: follows renames, refuses a
/// shape that is missing, on another page, or locked by someone else's streaming action.
pub fn editable_id(
    txn: &TransactionMut<'_>,
    raw: &str,
    ctx: &ActionCtx,
) -> Result<String, ActionError> {
    let ids = all_ids(txn);
    let id = ensure_shape_id_exists(raw, |i| ids.contains(i), &ctx.renames).ok_or_else(|| {
        ActionError::Invalid(format!(
            "shape '{}' does not exist",
            raw.chars().take(64).collect::<String>()
        ))
    })?;
    let shape = load(txn, &id)?;
    if shape.locked && shape.created_by != ctx.author() {
        return Err(ActionError::Invalid(format!(
            "shape '{id}' is locked while another fairy creates it"
        )));
    }
    Ok(id)
}

/// A required single shape reference, resolved and written back.
pub fn shape_ref(
    txn: &TransactionMut<'_>,
    o: &mut Map<String, Value>,
    field: &str,
    ctx: &ActionCtx,
) -> Result<String, ActionError> {
    let raw = o
        .get(field)
        .and_then(coerce::coerce_string)
        .ok_or_else(|| missing(ctx, field))?;
    let id = editable_id(txn, &raw, ctx)?;
    o.insert(field.into(), Value::String(id.clone()));
    Ok(id)
}

/// A list of shape references: missing ones are dropped with a note; an empty result is an
/// error (there is nothing to act on).
pub fn shape_refs(
    txn: &TransactionMut<'_>,
    o: &mut Map<String, Value>,
    field: &str,
    ctx: &ActionCtx,
    notes: &mut Vec<String>,
) -> Result<Vec<String>, ActionError> {
    let raw: Vec<String> = match o.get(field) {
        Some(Value::Array(items)) => items.iter().filter_map(coerce::coerce_string).collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => return Err(missing(ctx, field)),
    };
    let mut ids = Vec::new();
    for r in raw {
        match editable_id(txn, &r, ctx) {
            Ok(id) if !ids.contains(&id) => ids.push(id),
            Ok(_) => {}
            Err(e) => notes.push(format!("ignored '{r}': {e}")),
        }
    }
    if ids.is_empty() {
        return Err(if ctx.complete {
            ActionError::Invalid(format!("none of the shapes in '{field}' exist"))
        } else {
            ActionError::Incomplete(format!("no existing shape in '{field}' yet"))
        });
    }
    o.insert(field.into(), json!(ids));
    Ok(ids)
}

/// What [`shape_list`] read.
pub struct ShapeList<'a> {
    /// The action object, for its other fields.
    pub fields: &'a mut Map<String, Value>,
    /// The resolved `shapeIds`.
    pub ids: Vec<String>,
    /// The notes so far (dropped references).
    pub notes: Vec<String>,
}

/// The shared sanitize preamble of the actions on a list of shapes (align, distribute, stack,
/// resize, restack): the action object, its `shapeIds` resolved (missing ones dropped with a
/// note, see [`shape_refs`]) and the notes so far.
pub fn shape_list<'a>(
    txn: &TransactionMut<'_>,
    action: &'a mut Value,
    ctx: &ActionCtx,
) -> Result<ShapeList<'a>, ActionError> {
    let mut notes = Vec::new();
    let fields = obj(action)?;
    let ids = shape_refs(txn, fields, "shapeIds", ctx, &mut notes)?;
    Ok(ShapeList { fields, ids, notes })
}

/// The shared apply frame of the actions on a list of shapes: loads the sanitized action's
/// `shapeIds`, lets `edit` change them (with the action's fields), writes back what changed.
pub fn edit_shape_list(
    txn: &mut TransactionMut<'_>,
    action: &Value,
    edit: impl FnOnce(&Map<String, Value>, &mut Vec<Shape>),
) -> Result<(), ActionError> {
    let o = obj_ref(action)?;
    let mut shapes = load_all(txn, &get_ids(o, "shapeIds"))?;
    edit(o, &mut shapes);
    save_all(txn, &shapes);
    Ok(())
}

/// The shape ids of a sanitized action's list field.
pub fn get_ids(o: &Map<String, Value>, field: &str) -> Vec<String> {
    match o.get(field) {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// Reads a shape that must exist.
pub fn load(txn: &TransactionMut<'_>, id: &str) -> Result<Shape, ActionError> {
    read_shape(txn, id)?.ok_or_else(|| ActionError::Invalid(format!("shape '{id}' does not exist")))
}

/// Reads several shapes that must exist, in the given order.
pub fn load_all(txn: &TransactionMut<'_>, ids: &[String]) -> Result<Vec<Shape>, ActionError> {
    ids.iter().map(|id| load(txn, id)).collect()
}

/// Writes shapes back (only changed keys).
pub fn save_all(txn: &mut TransactionMut<'_>, shapes: &[Shape]) {
    for s in shapes {
        write_shape(txn, s);
    }
}

/// An optional origin point written in model coordinates, converted to page coordinates.
pub fn origin_point(
    o: &mut Map<String, Value>,
    ctx: &ActionCtx,
) -> Result<Option<(f64, f64)>, ActionError> {
    let x = coerce::number_field(o, "originX")?;
    let y = coerce::number_field(o, "originY")?;
    Ok(match (x, y) {
        (Some(x), Some(y)) => {
            let (px, py) = ctx.transform.point_from_model(x, y);
            o.insert("originX".into(), coerce::number_value(px));
            o.insert("originY".into(), coerce::number_value(py));
            Some((px, py))
        }
        _ => None,
    })
}

/// `base` with `extra`'s keys added (both JSON objects; otherwise `base` is returned as is).
pub fn with_props(mut base: Value, extra: Value) -> Value {
    if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    base
}

/// JSON Schema of an action object: the `_type` const and `props`; `_type` and `required`
/// are required.
pub fn bare_schema(name: &str, description: &str, props: Value, required: &[&str]) -> Value {
    let properties = with_props(json!({"_type": {"type": "string", "const": name}}), props);
    let mut req = vec!["_type"];
    req.extend_from_slice(required);
    json!({
        "type": "object",
        "description": description,
        "properties": properties,
        "required": req,
    })
}

/// JSON Schema of a canvas action object: [`bare_schema`] plus an `intent` string.
pub fn schema(name: &str, description: &str, props: Value, required: &[&str]) -> Value {
    let intent = json!({
        "intent": {"type": "string", "description": "one short sentence shown to users"},
    });
    bare_schema(name, description, with_props(intent, props), required)
}

/// Schema of a list of shape ids.
pub fn ids_schema() -> Value {
    json!({"type": "array", "items": {"type": "string"}, "minItems": 1})
}

/// Schema of a number.
pub fn num_schema(description: &str) -> Value {
    json!({"type": "number", "description": description})
}

/// Schema of a string enum.
pub fn enum_schema(values: &[&str]) -> Value {
    json!({"type": "string", "enum": values})
}
