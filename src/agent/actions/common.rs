//! Helpers shared by the action parsers: reading fields of an action object with the model's
//! typical mistakes coerced (numbers as strings, case in closed sets), resolving shape ids
//! (renames, missing, locked) into [`ShapeId`]s, the preamble and apply frame of the actions
//! on a list of shapes, loading and saving shapes, and building JSON schemas. Owns no action
//! semantics of its own; reads the action's JSON but never writes it.

use serde_json::{Value, json};
use yrs::{Map, ReadTxn, TransactionMut};

use super::{ActionCtx, ActionError, Fields, Note};
use crate::canvas::CanvasError;
use crate::canvas::coerce::{clamp_coord, coerce_bool, coerce_number, coerce_string};
use crate::canvas::geometry::{Bounds, union_bounds};
use crate::canvas::ids::ensure_shape_id_exists;
use crate::canvas::schema::SHAPES;
use crate::canvas::shape::{Shape, read_shape, write_shape};
use crate::ids::ShapeId;

/// The error for a missing field: `Incomplete` while streaming, `Invalid` once complete.
pub fn missing(ctx: &ActionCtx, field: &str) -> ActionError {
    if ctx.complete {
        ActionError::Invalid(format!("'{field}' is required"))
    } else {
        ActionError::Incomplete(format!("'{field}' not received yet"))
    }
}

/// An optional number field, coerced (`"12"`, `"12px"`) and clamped to the canvas; an error if
/// present but not a finite number.
pub fn opt_number(o: &Fields, field: &str) -> Result<Option<f64>, ActionError> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => coerce_number(v)
            .map(|n| Some(clamp_coord(n)))
            .ok_or_else(|| {
                CanvasError::NotFinite {
                    field: field.into(),
                }
                .into()
            }),
    }
}

/// A required number field (see [`opt_number`]).
pub fn number(o: &Fields, field: &str, ctx: &ActionCtx) -> Result<f64, ActionError> {
    opt_number(o, field)?.ok_or_else(|| missing(ctx, field))
}

/// An optional number field with the default its schema documents.
pub fn number_or(o: &Fields, field: &str, default: f64) -> Result<f64, ActionError> {
    Ok(opt_number(o, field)?.unwrap_or(default))
}

/// An optional field read by `coerce`; an error if present but not readable so.
fn opt_field<T>(
    o: &Fields,
    field: &str,
    coerce: fn(&Value) -> Option<T>,
) -> Result<Option<T>, ActionError> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => coerce(v).map(Some).ok_or_else(|| {
            CanvasError::InvalidField {
                field: field.into(),
            }
            .into()
        }),
    }
}

/// An optional string field (numbers and booleans are written as text).
pub fn opt_string(o: &Fields, field: &str) -> Result<Option<String>, ActionError> {
    opt_field(o, field, coerce_string)
}

/// A required string field (see [`opt_string`]).
pub fn string(o: &Fields, field: &str, ctx: &ActionCtx) -> Result<String, ActionError> {
    opt_string(o, field)?.ok_or_else(|| missing(ctx, field))
}

/// An optional boolean field (`"false"`, `0`, `"yes"` accepted).
pub fn opt_bool(o: &Fields, field: &str) -> Result<Option<bool>, ActionError> {
    opt_field(o, field, coerce_bool)
}

/// A closed set of names an action field takes (its schema is a string `enum`); made by
/// [`closed_set!`](crate::agent::actions::common::closed_set).
pub trait ClosedSet: Copy + 'static {
    /// Every name, in schema order.
    const NAMES: &'static [&'static str];
    /// The value a (lowercase, trimmed) name stands for.
    fn from_name(name: &str) -> Option<Self>;
    /// The value's name, as the schema writes it.
    fn name(self) -> &'static str;
}

/// Declares a [`ClosedSet`] enum: `closed_set!(/// doc Anchor { /// doc TopLeft = "top-left", … })`.
macro_rules! closed_set {
    ($(#[$meta:meta])* $vis:vis $name:ident {
        $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $crate::agent::actions::common::ClosedSet for $name {
            const NAMES: &'static [&'static str] = &[$($text),+];

            fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($text => Some(Self::$variant),)+
                    _ => None,
                }
            }

            fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }
        }
    };
}
pub(crate) use closed_set;

/// A closed-set field, case-insensitive; `default` when absent (a missing field without
/// default is [`missing`]).
pub fn choice<E: ClosedSet>(
    o: &Fields,
    field: &str,
    default: Option<E>,
    ctx: &ActionCtx,
) -> Result<E, ActionError> {
    let Some(raw) = o.get(field).and_then(Value::as_str) else {
        return default.ok_or_else(|| missing(ctx, field));
    };
    E::from_name(&raw.trim().to_ascii_lowercase()).ok_or_else(|| {
        ActionError::Invalid(format!("'{field}' must be one of {}", E::NAMES.join(", ")))
    })
}

/// Schema of a closed-set field.
pub fn closed_schema<E: ClosedSet>() -> Value {
    enum_schema(E::NAMES)
}

/// Whether `id` is an entry of `shapes` (readable or not): one lookup, not a read of every id
/// (a fairy's create checks its id inside its write transaction, beside thousands of shapes).
pub fn id_taken(txn: &TransactionMut<'_>, id: &str) -> bool {
    txn.get_map(SHAPES)
        .is_some_and(|root| root.contains_key(txn, id))
}

/// Resolves a reference to an existing shape the fairy may edit: follows renames, refuses a
/// shape that is missing, on another page, or locked by someone else's streaming action.
pub fn editable_id(
    txn: &TransactionMut<'_>,
    raw: &str,
    ctx: &ActionCtx,
) -> Result<ShapeId, ActionError> {
    let id = ensure_shape_id_exists(raw, |i| id_taken(txn, i), &ctx.renames).ok_or_else(|| {
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

/// A required single shape reference, resolved.
pub fn shape_ref(
    txn: &TransactionMut<'_>,
    o: &Fields,
    field: &str,
    ctx: &ActionCtx,
) -> Result<ShapeId, ActionError> {
    let raw = o
        .get(field)
        .and_then(coerce_string)
        .ok_or_else(|| missing(ctx, field))?;
    editable_id(txn, &raw, ctx)
}

/// A list of shape references: missing ones are dropped with a note; an empty result is an
/// error (there is nothing to act on).
pub fn shape_refs(
    txn: &TransactionMut<'_>,
    o: &Fields,
    field: &str,
    ctx: &ActionCtx,
    notes: &mut Vec<Note>,
) -> Result<Vec<ShapeId>, ActionError> {
    let raw: Vec<String> = match o.get(field) {
        Some(Value::Array(items)) => items.iter().filter_map(coerce_string).collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => return Err(missing(ctx, field)),
    };
    let mut ids = Vec::new();
    for reference in raw {
        match editable_id(txn, &reference, ctx) {
            Ok(id) if !ids.contains(&id) => ids.push(id),
            Ok(_) => {}
            Err(why) => notes.push(Note::Ignored { reference, why }),
        }
    }
    if ids.is_empty() {
        return Err(if ctx.complete {
            ActionError::Invalid(format!("none of the shapes in '{field}' exist"))
        } else {
            ActionError::Incomplete(format!("no existing shape in '{field}' yet"))
        });
    }
    Ok(ids)
}

/// The shared parse preamble of the actions on a list of shapes (align, distribute, stack,
/// rotate, resize, restack): their `shapeIds` resolved, missing ones dropped with a note (see
/// [`shape_refs`]), and the notes so far.
pub fn shape_list(
    txn: &TransactionMut<'_>,
    o: &Fields,
    ctx: &ActionCtx,
) -> Result<(Vec<ShapeId>, Vec<Note>), ActionError> {
    let mut notes = Vec::new();
    let ids = shape_refs(txn, o, "shapeIds", ctx, &mut notes)?;
    Ok((ids, notes))
}

/// The origin point of a transform of `shapes` (rotate, resize): `originX`/`originY` written in
/// model coordinates, converted to page coordinates, or, when the model gave none, the point
/// `default` picks on the shapes' common bounds.
pub fn transform_origin(
    txn: &TransactionMut<'_>,
    o: &Fields,
    ctx: &ActionCtx,
    shapes: &[ShapeId],
    default: fn(&Bounds) -> (f64, f64),
) -> Result<(f64, f64), ActionError> {
    if let (Some(x), Some(y)) = (opt_number(o, "originX")?, opt_number(o, "originY")?) {
        return Ok(ctx.transform.point_from_model(x, y));
    }
    let bounds = union_bounds(&load_all(txn, shapes)?)
        .ok_or_else(|| ActionError::Invalid("the shapes have no bounds".into()))?;
    Ok(default(&bounds))
}

/// The shared apply frame of the actions on a list of shapes: loads `ids`, lets `edit` change
/// them, writes back what changed.
pub fn edit_shapes(
    txn: &mut TransactionMut<'_>,
    ids: &[ShapeId],
    edit: impl FnOnce(&mut Vec<Shape>),
) -> Result<(), ActionError> {
    let mut shapes = load_all(txn, ids)?;
    edit(&mut shapes);
    save_all(txn, &shapes);
    Ok(())
}

/// Reads a shape that must exist.
pub fn load(txn: &TransactionMut<'_>, id: &ShapeId) -> Result<Shape, ActionError> {
    read_shape(txn, id.as_str())?
        .ok_or_else(|| ActionError::Invalid(format!("shape '{id}' does not exist")))
}

/// Reads several shapes that must exist, in the given order.
pub fn load_all(txn: &TransactionMut<'_>, ids: &[ShapeId]) -> Result<Vec<Shape>, ActionError> {
    ids.iter().map(|id| load(txn, id)).collect()
}

/// Writes shapes back (only changed keys).
pub fn save_all(txn: &mut TransactionMut<'_>, shapes: &[Shape]) {
    for s in shapes {
        write_shape(txn, s);
    }
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

/// JSON Schema of a runtime action object (solo and project actions): [`bare_schema`] with a
/// `title`.
pub fn runtime_schema(name: &str, description: &str, props: Value, required: &[&str]) -> Value {
    with_props(
        bare_schema(name, description, props, required),
        json!({"title": name}),
    )
}

/// The properties of model-space bounds `{x, y, w, h}`.
pub fn bounds_props() -> Value {
    json!({
        "x": {"type": "number"}, "y": {"type": "number"},
        "w": {"type": "number"}, "h": {"type": "number"},
    })
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
