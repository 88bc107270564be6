//! Shape patches: `{"create": [shape…], "update": [{"id", …keys}], "delete": [id…]}`, the body
//! of `PATCH /rooms/{room}/shapes` (docs/rest.md), in the document schema's JSON form
//! (docs/document-schema.md: `id`, `type`, `pageId`, `x`, … `points` as a flat array relative
//! to `x, y`).
//!
//! Owns the validation of a whole patch against a document ([`plan`], which writes nothing)
//! and its application as one transaction ([`apply`]). The rules are the fairies' actions'
//! (schema v1's types, tldraw's colours and fills, finite numbers clamped to the canvas, shape
//! ids as [`crate::ids::ShapeId`] takes them, pen strokes capped, no binding to a missing shape,
//! only the keys that change written), but nothing is coerced silently: an unknown key, colour
//! or type, a number that is not one, a page or bound shape that does not exist refuses the
//! item, and any refused item refuses the whole patch. Takes a transaction, never a socket or
//! a store.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use yrs::{ReadTxn, TransactionMut};

use super::coerce::{clamp_coord, coerce_number};
use super::format::{MAX_PEN_POINTS, ShapeBase, from_simple};
use super::ids::normalize_id;
use super::page::{list_pages, page_exists};
use super::schema::{MAIN_PAGE, ShapeType, normalize_color, normalize_fill, normalize_text_align};
use super::shape::{
    Connector, Prop, Shape, ShapeProps, delete_shapes_and_unbind, page_indexes, read_shape,
    write_shape,
};
use super::zorder::index_above;

/// Most items (creates, updates and deletes together) one patch may hold.
pub const MAX_ITEMS: usize = 1_000;
/// Longest `index`, `createdBy` or `note`/`text` accepted, in characters: z-order keys and
/// authors are short; texts are bounded by the request body anyway.
const MAX_KEY_CHARS: usize = 256;

/// A shape patch as sent; each item stays JSON until it is validated, so that every bad item
/// can be named.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShapePatch {
    /// New shapes, in the document schema's JSON form (`id`, `type`, `x`, `y`, … as in
    /// docs/document-schema.md; `pageId` defaults to the first page, `index` to the top).
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub create: Vec<Value>,
    /// Changes: `{"id", …keys}`, each key set to its new value.
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub update: Vec<Value>,
    /// Ids of shapes to remove.
    #[serde(default)]
    #[schema(value_type = Vec<String>)]
    pub delete: Vec<Value>,
}

/// The part of a patch an item is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Section {
    /// `create`.
    Create,
    /// `update`.
    Update,
    /// `delete`.
    Delete,
}

/// A refused item of a patch.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ItemError {
    /// Its section.
    pub op: Section,
    /// Its position in that section.
    pub index: usize,
    /// Its shape id, when it has a readable one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What is wrong with it.
    pub detail: String,
}

/// Why a patch was refused; nothing of it was applied.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatchError {
    /// Items that break the schema's rules (each named).
    #[error("{} item(s) of the patch are invalid", .0.len())]
    Invalid(Vec<ItemError>),
    /// Shapes to update or delete that the document does not hold.
    #[error("no shape with id {}", .0.join(", "))]
    NotFound(Vec<String>),
    /// More than [`MAX_ITEMS`] items.
    #[error("a patch holds at most {MAX_ITEMS} items, not {0}")]
    TooManyItems(usize),
}

/// What a patch did: the ids created, updated and deleted, in the patch's order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Applied {
    /// Ids of the shapes created (a `shape:` prefix is dropped, as for every shape id).
    pub created: Vec<String>,
    /// Ids of the shapes updated.
    pub updated: Vec<String>,
    /// Ids of the shapes deleted.
    pub deleted: Vec<String>,
}

/// A validated patch, ready to be written in the transaction it was validated in.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Shapes as they will be: created ones whole, updated ones merged.
    writes: Vec<Shape>,
    /// The answer.
    applied: Applied,
}

impl Plan {
    /// The ids the patch touches.
    pub fn applied(&self) -> &Applied {
        &self.applied
    }

    /// The most writing it can add to the document's encoding, in bytes (checked against
    /// `--max-doc-bytes` before it is written): the update's own framing (client and
    /// delete-set counts, the writer's client id and first clock, even for a patch that
    /// changes nothing); per shape written whole, every key and value plus what Yjs spends on
    /// an item's id, parent and lengths; deletes add a delete-set range.
    pub fn bound(&self) -> u64 {
        let writes: u64 = self
            .writes
            .iter()
            .map(|shape| shape_bound(shape, |_, _| true))
            .sum();
        FRAME + writes + PER_SHAPE * self.applied.deleted.len() as u64
    }

    /// The most the patch can grow the document's encoding by, given what the document holds
    /// in `txn` (the transaction it is written in), checked against `--max-doc-bytes`: a
    /// created shape counts whole, an updated one only the properties that differ from what
    /// it holds (no other is written), and deleting adds nothing (what it removes is collected
    /// when the transaction commits; the few bytes of its delete set are less than what goes),
    /// so a patch that only deletes is admitted even in a room over the cap.
    pub fn growth_bound<T: ReadTxn>(&self, txn: &T) -> u64 {
        use yrs::Map as _;
        let root = txn.get_map(super::schema::SHAPES);
        let writes: u64 = self
            .writes
            .iter()
            .map(|shape| {
                let existing = root
                    .as_ref()
                    .and_then(|root| match root.get(txn, &shape.id) {
                        Some(yrs::Out::YMap(map)) => Some(map),
                        _ => None,
                    });
                match existing {
                    Some(map) => {
                        shape_bound(shape, |key, prop| {
                            super::shape::read_prop(txn, &map, key) != *prop
                        }) - shape.id.len() as u64
                            - PER_SHAPE
                    }
                    None => shape_bound(shape, |_, _| true),
                }
            })
            .sum();
        if writes == 0 { 0 } else { FRAME + writes }
    }
}

/// Counts of clients and of delete-set entries, a client id (up to 53 bits as a varint) and a
/// clock: what an update of one writer costs before its first item.
const FRAME: u64 = 24;
/// Bytes of ids, origins, parent and lengths one map entry may cost beyond its key and value.
const PER_KEY: u64 = 32;
/// The shape's own map in `shapes`, and a delete-set range.
const PER_SHAPE: u64 = 64;

/// What writing `shape`'s properties for which `written` holds costs at most: every key and
/// value plus what Yjs spends on an item's id, parent and lengths, and the shape's own map.
fn shape_bound(shape: &Shape, written: impl Fn(&str, &Prop) -> bool) -> u64 {
    let value = |prop: &Prop| match prop {
        Prop::Str(s) => s.len() as u64,
        Prop::Points(p) => 9 * p.len() as u64,
        Prop::Num(_) => 9,
        Prop::Bool(_) | Prop::Absent => 1,
    };
    let props: u64 = shape
        .to_props()
        .iter()
        .filter(|(key, prop)| written(key, prop))
        .map(|(key, prop)| key.len() as u64 + value(prop) + PER_KEY)
        .sum();
    props + shape.id.len() as u64 + PER_SHAPE
}

/// Keys every shape may carry.
const COMMON_KEYS: &[&str] = &[
    "id",
    "type",
    "pageId",
    "x",
    "y",
    "rotation",
    "index",
    "color",
    "fill",
    "note",
    "locked",
    "createdBy",
];

/// The keys of a type family beyond [`COMMON_KEYS`] (docs/document-schema.md).
fn family_keys(family: ShapeType) -> &'static [&'static str] {
    match family {
        ShapeType::Geo => &["w", "h", "text", "textAlign"],
        ShapeType::Text => &["text", "fontSize", "maxWidth", "textAlign"],
        ShapeType::Note => &["text"],
        ShapeType::Arrow | ShapeType::Line => {
            &["x1", "y1", "x2", "y2", "fromId", "toId", "bend", "text"]
        }
        ShapeType::Draw => &["points"],
    }
}

/// Whether `key` is a key of some shape type in the schema (docs/document-schema.md "Shapes").
pub fn is_shape_key(key: &str) -> bool {
    COMMON_KEYS.contains(&key)
        || [
            ShapeType::Geo,
            ShapeType::Text,
            ShapeType::Note,
            ShapeType::Arrow,
            ShapeType::Draw,
        ]
        .into_iter()
        .any(|family| family_keys(family).contains(&key))
}

/// Validates `patch` against the document in `txn`, writing nothing. `author` is the
/// `createdBy` of created shapes that do not name one (`user:SUB`).
pub fn plan<T: ReadTxn>(txn: &T, patch: &ShapePatch, author: &str) -> Result<Plan, PatchError> {
    let total = patch.create.len() + patch.update.len() + patch.delete.len();
    if total > MAX_ITEMS {
        return Err(PatchError::TooManyItems(total));
    }
    let mut errors = Vec::new();
    let mut missing = Vec::new();
    let mut plan = Plan::default();
    let mut bad = |op, index, id: Option<&str>, detail: String| {
        errors.push(ItemError {
            op,
            index,
            id: id.map(str::to_owned),
            detail,
        })
    };

    // Deletes first: bindings must not point at a shape this patch removes.
    let mut deleted: HashSet<String> = HashSet::new();
    for (i, item) in patch.delete.iter().enumerate() {
        let Some(raw) = item.as_str() else {
            bad(
                Section::Delete,
                i,
                None,
                "must be a shape id (a string)".into(),
            );
            continue;
        };
        match normalize_id(raw) {
            Err(e) => bad(Section::Delete, i, Some(raw), e.to_string()),
            Ok(id) if deleted.contains(&id) => {
                bad(Section::Delete, i, Some(&id), "deleted twice".into())
            }
            Ok(id) => {
                if !shape_exists(txn, &id) {
                    missing.push(id.clone());
                }
                plan.applied.deleted.push(id.clone());
                deleted.insert(id);
            }
        }
    }

    // Ids the creates take, known before any binding is checked (an arrow may bind to a
    // shape created later in the same patch).
    let mut created_ids: Vec<Option<String>> = Vec::with_capacity(patch.create.len());
    let mut taken: HashSet<String> = HashSet::new();
    for (i, item) in patch.create.iter().enumerate() {
        let id = match item.as_object().map(|o| o.get("id")) {
            None => {
                bad(Section::Create, i, None, "must be a JSON object".into());
                None
            }
            Some(None | Some(Value::Null)) => Some(fresh_id(txn, &taken)),
            Some(Some(Value::String(raw))) => match normalize_id(raw) {
                Err(e) => {
                    bad(Section::Create, i, Some(raw), e.to_string());
                    None
                }
                Ok(id) if shape_exists(txn, &id) || taken.contains(&id) => {
                    bad(
                        Section::Create,
                        i,
                        Some(&id),
                        format!("a shape '{id}' exists already"),
                    );
                    None
                }
                Ok(id) => Some(id),
            },
            Some(Some(_)) => {
                bad(Section::Create, i, None, "'id' must be a string".into());
                None
            }
        };
        if let Some(id) = &id {
            taken.insert(id.clone());
        }
        created_ids.push(id);
    }
    let bindable = |id: &str| -> bool {
        !deleted.contains(id) && (taken.contains(id) || shape_exists(txn, id))
    };

    // Z-order keys: new shapes go on top of their page, in the patch's order.
    let first_page = list_pages(txn)
        .into_iter()
        .next()
        .map_or_else(|| MAIN_PAGE.to_owned(), |p| p.id);
    let mut tops: HashMap<String, String> = HashMap::new();
    for (i, (item, id)) in patch.create.iter().zip(created_ids).enumerate() {
        let (Some(obj), Some(id)) = (item.as_object(), id) else {
            continue;
        };
        match new_shape(txn, obj, &id, &first_page, author, &bindable) {
            Ok(mut shape) => {
                if !obj.contains_key("index") {
                    let top = tops.entry(shape.page_id.clone()).or_insert_with(|| {
                        let existing = page_indexes(txn, &shape.page_id);
                        index_above(existing.iter().map(|k| &**k))
                    });
                    shape.index = top.clone();
                    *top = index_above([top.as_str()]);
                }
                plan.applied.created.push(id);
                plan.writes.push(shape);
            }
            Err(detail) => bad(Section::Create, i, Some(&id), detail),
        }
    }

    let mut updated: HashSet<String> = HashSet::new();
    for (i, item) in patch.update.iter().enumerate() {
        let Some(obj) = item.as_object() else {
            bad(Section::Update, i, None, "must be a JSON object".into());
            continue;
        };
        let id = match obj.get("id").and_then(Value::as_str).map(normalize_id) {
            None => {
                bad(Section::Update, i, None, "'id' must be a shape id".into());
                continue;
            }
            Some(Err(e)) => {
                bad(Section::Update, i, None, e.to_string());
                continue;
            }
            Some(Ok(id)) => id,
        };
        if !updated.insert(id.clone()) || deleted.contains(&id) || taken.contains(&id) {
            bad(
                Section::Update,
                i,
                Some(&id),
                "the shape is named twice in the patch".into(),
            );
            continue;
        }
        let existing = match read_shape(txn, &id) {
            Ok(Some(shape)) => shape,
            Ok(None) => {
                missing.push(id);
                continue;
            }
            Err(e) => {
                bad(Section::Update, i, Some(&id), e.to_string());
                continue;
            }
        };
        match merge(txn, existing, obj, &bindable) {
            Ok(shape) => {
                plan.applied.updated.push(id);
                plan.writes.push(shape);
            }
            Err(detail) => bad(Section::Update, i, Some(&id), detail),
        }
    }

    if !errors.is_empty() {
        return Err(PatchError::Invalid(errors));
    }
    if !missing.is_empty() {
        return Err(PatchError::NotFound(missing));
    }
    Ok(plan)
}

/// Writes a validated plan (in the transaction it was validated in): creates and updates set
/// only the keys that change, then deletes remove their shapes and the bindings to them.
/// Returns whether the document changed.
pub fn apply(txn: &mut TransactionMut<'_>, plan: &Plan) -> bool {
    let mut changed = false;
    for shape in &plan.writes {
        changed |= write_shape(txn, shape);
    }
    let deleted: Vec<&str> = plan.applied.deleted.iter().map(String::as_str).collect();
    if !deleted.is_empty() {
        changed |= delete_shapes_and_unbind(txn, &deleted) > 0;
    }
    changed
}

fn shape_exists<T: ReadTxn>(txn: &T, id: &str) -> bool {
    use yrs::Map;
    txn.get_map(super::schema::SHAPES)
        .is_some_and(|shapes| shapes.contains_key(txn, id))
}

/// A fresh id for a created shape that does not name one.
fn fresh_id<T: ReadTxn>(txn: &T, taken: &HashSet<String>) -> String {
    loop {
        let id = crate::ids::random_id("shape");
        if !taken.contains(&id) && !shape_exists(txn, &id) {
            return id;
        }
    }
}

/// A new shape from its JSON: its type's defaults (those of the fairies' `create`), then each
/// key given.
fn new_shape<T: ReadTxn>(
    txn: &T,
    obj: &Map<String, Value>,
    id: &str,
    first_page: &str,
    author: &str,
    bindable: &dyn Fn(&str) -> bool,
) -> Result<Shape, String> {
    let type_name = match obj.get("type") {
        Some(Value::String(t)) if ShapeType::of(t).is_some() => t.clone(),
        Some(Value::String(t)) => return Err(format!("unknown shape type '{}'", clip(t))),
        _ => return Err("'type' is required: a shape type of the document schema".into()),
    };
    let base = ShapeBase {
        page_id: first_page.to_owned(),
        created_by: author.to_owned(),
        ..ShapeBase::default()
    };
    let defaults = from_simple(&json!({"_type": type_name, "shapeId": id}), &base)
        .map_err(|e| e.to_string())?;
    set_keys(txn, defaults, obj, bindable)
}

/// An existing shape with the keys given set; the type may change only within its family
/// (one geo kind to another), as the fairies' `update` allows.
fn merge<T: ReadTxn>(
    txn: &T,
    existing: Shape,
    obj: &Map<String, Value>,
    bindable: &dyn Fn(&str) -> bool,
) -> Result<Shape, String> {
    if let Some(t) = obj.get("type") {
        let family = t.as_str().and_then(ShapeType::of);
        if family.is_none() || family != existing.family() {
            return Err(format!(
                "'type' may only change within the shape's family ({} is a {})",
                existing.id, existing.type_name
            ));
        }
    }
    set_keys(txn, existing, obj, bindable)
}

/// Sets each key of `obj` on `shape`, validated.
fn set_keys<T: ReadTxn>(
    txn: &T,
    mut shape: Shape,
    obj: &Map<String, Value>,
    bindable: &dyn Fn(&str) -> bool,
) -> Result<Shape, String> {
    let family = shape
        .family()
        .ok_or_else(|| format!("shape '{}' has an unknown type", shape.id))?;
    let allowed = family_keys(family);
    let (x0, y0) = (shape.x, shape.y);
    let mut ends_given = false;
    for (key, value) in obj {
        let key = key.as_str();
        if !COMMON_KEYS.contains(&key) && !allowed.contains(&key) {
            return Err(format!(
                "'{}' is not a key of a {} shape",
                clip(key),
                shape.type_name
            ));
        }
        let number = || {
            coerce_number(value)
                .map(clamp_coord)
                .ok_or_else(|| format!("'{key}' must be a finite number"))
        };
        let text = || match value {
            Value::String(s) if s.chars().count() <= MAX_KEY_CHARS || key_is_text(key) => {
                Ok(s.clone())
            }
            Value::String(_) => Err(format!("'{key}' is longer than {MAX_KEY_CHARS} characters")),
            _ => Err(format!("'{key}' must be a string")),
        };
        let named = |normalize: fn(&str) -> Option<&'static str>| {
            value
                .as_str()
                .and_then(normalize)
                .map(str::to_owned)
                .ok_or_else(|| format!("'{key}' has no such value: {}", clip(&value.to_string())))
        };
        match (key, &mut shape.props) {
            ("id", _) => {}
            ("type", _) => shape.type_name = text()?,
            ("pageId", _) => {
                let page = text()?;
                if !page_exists(txn, &page) {
                    return Err(format!("page '{}' does not exist", clip(&page)));
                }
                shape.page_id = page;
            }
            ("x", _) => shape.x = number()?,
            ("y", _) => shape.y = number()?,
            ("rotation", _) => shape.rotation = number()?,
            ("index", _) => {
                let index = text()?;
                if index.is_empty() || index.chars().any(char::is_control) {
                    return Err("'index' must be a non-empty z-order key".into());
                }
                shape.index = index;
            }
            ("color", _) => shape.color = named(normalize_color)?,
            ("fill", _) => shape.fill = named(normalize_fill)?,
            ("note", _) => shape.note = text()?,
            ("locked", _) => {
                shape.locked = value
                    .as_bool()
                    .ok_or_else(|| "'locked' must be true or false".to_owned())?
            }
            ("createdBy", _) => shape.created_by = text()?,
            ("text", _) => {
                shape.set_text(text()?);
            }
            ("w", ShapeProps::Geo { w, .. }) => *w = number()?.abs(),
            ("h", ShapeProps::Geo { h, .. }) => *h = number()?.abs(),
            (
                "textAlign",
                ShapeProps::Geo { text_align, .. } | ShapeProps::Text { text_align, .. },
            ) => *text_align = named(normalize_text_align)?,
            ("fontSize", ShapeProps::Text { font_size, .. }) => {
                *font_size = number()?.abs().max(1.0)
            }
            ("maxWidth", ShapeProps::Text { max_width, .. }) => {
                *max_width = match value {
                    Value::Null => None,
                    _ => Some(number()?.abs()),
                }
            }
            ("x1" | "y1" | "x2" | "y2" | "bend", ShapeProps::Connector(c)) => {
                let n = number()?;
                ends_given |= key != "bend";
                set_connector(c, key, n);
            }
            ("fromId" | "toId", ShapeProps::Connector(c)) => {
                let target = match value {
                    Value::Null => None,
                    Value::String(raw) => {
                        let id = normalize_id(raw).map_err(|e| format!("'{key}': {e}"))?;
                        if id == shape.id || !bindable(&id) {
                            return Err(format!("'{key}': no shape '{id}' to bind to"));
                        }
                        Some(id)
                    }
                    _ => return Err(format!("'{key}' must be a shape id or null")),
                };
                if key == "fromId" {
                    c.from_id = target;
                } else {
                    c.to_id = target;
                }
            }
            ("points", ShapeProps::Draw { points }) => *points = flat_points(value)?,
            _ => return Err(format!("'{key}' does not fit a {} shape", shape.type_name)),
        }
    }
    // A connector's ends are authoritative: `x, y` given alone moves both ends.
    if let ShapeProps::Connector(_) = shape.props
        && !ends_given
        && (shape.x, shape.y) != (x0, y0)
    {
        let (dx, dy) = (shape.x - x0, shape.y - y0);
        (shape.x, shape.y) = (x0, y0);
        shape.translate(dx, dy);
    }
    shape.normalize_origin();
    Ok(shape)
}

/// Keys whose value is free text (bounded by the request body, not by [`MAX_KEY_CHARS`]).
fn key_is_text(key: &str) -> bool {
    matches!(key, "text" | "note")
}

fn set_connector(c: &mut Connector, key: &str, n: f64) {
    match key {
        "x1" => c.x1 = n,
        "y1" => c.y1 = n,
        "x2" => c.x2 = n,
        "y2" => c.y2 = n,
        _ => c.bend = n,
    }
}

/// A pen stroke's `points`: a flat array `[x0, y0, x1, y1, …]` of finite numbers.
fn flat_points(value: &Value) -> Result<Vec<(f64, f64)>, String> {
    let Some(flat) = value.as_array() else {
        return Err("'points' must be a flat array of numbers [x0, y0, x1, y1, …]".into());
    };
    if flat.len() % 2 != 0 || flat.len() > 2 * MAX_PEN_POINTS {
        return Err(format!(
            "'points' must hold pairs of numbers, at most {MAX_PEN_POINTS} points"
        ));
    }
    flat.chunks_exact(2)
        .map(
            |pair| match (coerce_number(&pair[0]), coerce_number(&pair[1])) {
                (Some(x), Some(y)) => Ok((clamp_coord(x), clamp_coord(y))),
                _ => Err("'points' must hold finite numbers".to_owned()),
            },
        )
        .collect()
}

/// At most 64 characters of an input quoted in an error.
fn clip(s: &str) -> String {
    s.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canvas::schema::init_schema;
    use yrs::{Doc, Transact};

    fn doc() -> Doc {
        let doc = Doc::new();
        init_schema(&doc, "test");
        doc
    }

    fn patch(v: Value) -> ShapePatch {
        serde_json::from_value(v).expect("patch")
    }

    fn run(doc: &Doc, v: Value) -> Result<Applied, PatchError> {
        let mut txn = doc.transact_mut();
        let plan = plan(&txn, &patch(v), "user:ada")?;
        apply(&mut txn, &plan);
        Ok(plan.applied)
    }

    fn shape(doc: &Doc, id: &str) -> Option<Shape> {
        read_shape(&doc.transact(), id).expect("readable")
    }

    #[test]
    fn creates_with_defaults_on_top_of_the_first_page() {
        let doc = doc();
        let applied = run(
            &doc,
            json!({"create": [
                {"id": "a", "type": "rectangle", "x": 10, "y": 20, "w": 30, "h": 40, "color": "red"},
                {"id": "b", "type": "ellipse"},
                {"type": "note", "text": "hi"}
            ]}),
        )
        .expect("applied");
        assert_eq!(applied.created.len(), 3);
        let (a, b) = (shape(&doc, "a").unwrap(), shape(&doc, "b").unwrap());
        assert_eq!((a.x, a.y, a.color.as_str()), (10.0, 20.0, "red"));
        assert_eq!(
            (a.page_id.as_str(), a.created_by.as_str()),
            (MAIN_PAGE, "user:ada")
        );
        assert!(b.index > a.index, "later creates go above");
        let note = shape(&doc, &applied.created[2]).unwrap();
        assert_eq!(note.text(), Some("hi"));
    }

    #[test]
    fn updates_only_the_keys_given_and_deletes_unbind() {
        let doc = doc();
        run(
            &doc,
            json!({"create": [
                {"id": "a", "type": "rectangle", "text": "keep"},
                {"id": "b", "type": "rectangle"},
                {"id": "ar", "type": "arrow", "x1": 0, "y1": 0, "x2": 50, "y2": 10, "fromId": "a", "toId": "b"}
            ]}),
        )
        .expect("created");
        let applied = run(
            &doc,
            json!({"update": [{"id": "a", "x": 99, "type": "ellipse"}], "delete": ["b"]}),
        )
        .expect("applied");
        assert_eq!(
            (applied.updated, applied.deleted),
            (vec!["a".to_owned()], vec!["b".to_owned()])
        );
        let a = shape(&doc, "a").unwrap();
        assert_eq!(
            (a.x, a.type_name.as_str(), a.text()),
            (99.0, "ellipse", Some("keep"))
        );
        assert!(shape(&doc, "b").is_none());
        let ShapeProps::Connector(c) = shape(&doc, "ar").unwrap().props else {
            panic!("arrow")
        };
        assert_eq!((c.from_id.as_deref(), c.to_id), (Some("a"), None));
    }

    #[test]
    fn a_connector_moved_by_x_y_moves_its_ends() {
        let doc = doc();
        run(&doc, json!({"create": [{"id": "l", "type": "line", "x1": 10, "y1": 10, "x2": 20, "y2": 30}]}))
            .unwrap();
        run(&doc, json!({"update": [{"id": "l", "x": 110}]})).unwrap();
        let l = shape(&doc, "l").unwrap();
        let ShapeProps::Connector(c) = &l.props else {
            panic!("line")
        };
        assert_eq!((l.x, c.x1, c.x2, c.y1), (110.0, 110.0, 120.0, 10.0));
    }

    #[test]
    fn one_bad_item_refuses_everything_and_names_each() {
        let doc = doc();
        let before = doc
            .transact()
            .encode_state_as_update_v1(&Default::default());
        let refused = run(
            &doc,
            json!({"create": [
                {"id": "ok", "type": "rectangle"},
                {"id": "x", "type": "blob"},
                {"id": "y", "type": "rectangle", "color": "mauve", "x": "NaN"},
                {"id": "z", "type": "arrow", "fromId": "ghost"},
                {"id": "p", "type": "draw", "points": [1, 2, 3]},
                {"id": "w", "type": "note", "w": 5},
                "nope"
            ]}),
        );
        let Err(PatchError::Invalid(items)) = refused else {
            panic!("{refused:?}")
        };
        let named: Vec<(usize, Option<&str>)> =
            items.iter().map(|e| (e.index, e.id.as_deref())).collect();
        assert_eq!(
            named,
            vec![
                (6, None),
                (1, Some("x")),
                (2, Some("y")),
                (3, Some("z")),
                (4, Some("p")),
                (5, Some("w"))
            ]
        );
        let after = doc
            .transact()
            .encode_state_as_update_v1(&Default::default());
        assert_eq!(before, after, "nothing applied");
    }

    #[test]
    fn missing_shapes_are_not_found_and_twice_named_ones_invalid() {
        let doc = doc();
        run(&doc, json!({"create": [{"id": "a", "type": "rectangle"}]})).unwrap();
        assert_eq!(
            run(
                &doc,
                json!({"update": [{"id": "ghost", "x": 1}], "delete": ["gone"]})
            ),
            Err(PatchError::NotFound(vec!["gone".into(), "ghost".into()]))
        );
        assert!(matches!(
            run(
                &doc,
                json!({"update": [{"id": "a", "x": 1}], "delete": ["a"]})
            ),
            Err(PatchError::Invalid(_))
        ));
        assert!(matches!(
            run(&doc, json!({"create": [{"id": "a", "type": "rectangle"}]})),
            Err(PatchError::Invalid(_))
        ));
        assert!(matches!(
            run(&doc, json!({"update": [{"id": "a", "type": "arrow"}]})),
            Err(PatchError::Invalid(_))
        ));
        let too_many = json!({"delete": vec!["a"; MAX_ITEMS + 1]});
        assert_eq!(
            run(&doc, too_many),
            Err(PatchError::TooManyItems(MAX_ITEMS + 1))
        );
    }

    #[test]
    fn an_arrow_may_bind_to_a_shape_created_in_the_same_patch() {
        let doc = doc();
        let applied = run(
            &doc,
            json!({"create": [
                {"id": "ar", "type": "arrow", "x2": 10, "toId": "later"},
                {"id": "later", "type": "rectangle"}
            ]}),
        );
        assert!(applied.is_ok(), "{applied:?}");
    }
}
