//! Typed shapes over the document: one nested `Y.Map` per shape in the `shapes` root, keyed by
//! the shape's plain id, so concurrent edits of different properties of one shape merge.
//!
//! Owns the mapping between [`Shape`] and the map's keys (docs/document-schema.md), and the primitive reads and
//! writes. Writes are minimal: [`write_shape`] only sets the keys whose value changed, which is
//! what keeps concurrent edits (and a fairy's revert) from touching each other's properties.
//! Reading is lenient: a property a foreign client left out reads as its default; a shape whose
//! `type` is unknown is reported as [`CanvasError::Malformed`] and skipped by listings.

use yrs::{Any, Array, ArrayPrelim, Map, MapPrelim, MapRef, Out, ReadTxn, TransactionMut};

use super::CanvasError;
use super::schema::{SHAPES, ShapeType};

/// A shape as schema v1 stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// Plain id, equal to the shape's key in `shapes`.
    pub id: String,
    /// Document `type`: a geo kind, `text`, `note`, `arrow`, `line` or `draw`.
    pub type_name: String,
    /// Page the shape is on.
    pub page_id: String,
    /// Top-left x in page px.
    pub x: f64,
    /// Top-left y in page px.
    pub y: f64,
    /// Radians, clockwise, about `(x, y)`.
    pub rotation: f64,
    /// Fractional z-order key.
    pub index: String,
    /// tldraw color name.
    pub color: String,
    /// tldraw fill name.
    pub fill: String,
    /// A free note the model may keep on a shape (not rendered).
    pub note: String,
    /// Clients do not let people edit a locked shape (set while a fairy's action streams).
    pub locked: bool,
    /// `user:SUB` or `fairy:ID`.
    pub created_by: String,
    /// Type-specific properties.
    pub props: ShapeProps,
}

/// The properties that depend on a shape's type family.
#[derive(Debug, Clone, PartialEq)]
pub enum ShapeProps {
    /// Geo kinds.
    Geo {
        /// Width in px.
        w: f64,
        /// Height in px.
        h: f64,
        /// Label.
        text: String,
        /// `start`, `middle`, `end`.
        text_align: String,
    },
    /// Free text.
    Text {
        /// Content.
        text: String,
        /// Font size in px.
        font_size: f64,
        /// Wrap width in px; `None` means no wrapping.
        max_width: Option<f64>,
        /// `start`, `middle`, `end`.
        text_align: String,
    },
    /// Sticky note (fixed 200×200).
    Note {
        /// Content.
        text: String,
    },
    /// Arrow or line: both ends in page coordinates.
    Connector(Connector),
    /// Freehand stroke: points relative to the shape's `(x, y)`.
    Draw {
        /// `(x, y)` pairs relative to the shape's position.
        points: Vec<(f64, f64)>,
    },
}

/// The geometry and bindings of an arrow or a line.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Connector {
    /// Start x (page px).
    pub x1: f64,
    /// Start y (page px).
    pub y1: f64,
    /// End x (page px).
    pub x2: f64,
    /// End y (page px).
    pub y2: f64,
    /// Shape the start is bound to.
    pub from_id: Option<String>,
    /// Shape the end is bound to.
    pub to_id: Option<String>,
    /// Perpendicular offset of the midpoint in px (0 = straight).
    pub bend: f64,
    /// Label.
    pub text: String,
}

/// Width and height of a sticky note, as tldraw draws them.
pub const NOTE_SIZE: f64 = 200.0;

/// One stored property value; `Absent` removes the key (and is the default: no value).
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub enum Prop {
    /// A number.
    Num(f64),
    /// A string.
    Str(String),
    /// A boolean.
    Bool(bool),
    /// A flat `Y.Array` of numbers.
    Points(Vec<f64>),
    /// The key is not set.
    #[default]
    Absent,
}

impl Shape {
    /// The type family (never fails for a shape built by this module).
    pub fn family(&self) -> Option<ShapeType> {
        ShapeType::of(&self.type_name)
    }

    /// Every stored key with its value, in a stable order.
    pub fn to_props(&self) -> Vec<(&'static str, Prop)> {
        let out = vec![
            ("id", Prop::Str(self.id.clone())),
            ("type", Prop::Str(self.type_name.clone())),
            ("pageId", Prop::Str(self.page_id.clone())),
            ("x", Prop::Num(self.x)),
            ("y", Prop::Num(self.y)),
            ("rotation", Prop::Num(self.rotation)),
            ("index", Prop::Str(self.index.clone())),
            ("color", Prop::Str(self.color.clone())),
            ("fill", Prop::Str(self.fill.clone())),
            ("note", Prop::Str(self.note.clone())),
            ("locked", Prop::Bool(self.locked)),
            ("createdBy", Prop::Str(self.created_by.clone())),
        ];
        let opt_str = |v: &Option<String>| v.clone().map_or(Prop::Absent, Prop::Str);
        let mut out: Vec<(&'static str, Prop)> = out
            .into_iter()
            .map(|(k, p)| match p {
                Prop::Num(n) => (k, Prop::Num(stored_number(n))),
                other => (k, other),
            })
            .collect();
        match &self.props {
            ShapeProps::Geo {
                w,
                h,
                text,
                text_align,
            } => out.extend([
                ("w", Prop::Num(stored_number(*w))),
                ("h", Prop::Num(stored_number(*h))),
                ("text", Prop::Str(text.clone())),
                ("textAlign", Prop::Str(text_align.clone())),
            ]),
            ShapeProps::Text {
                text,
                font_size,
                max_width,
                text_align,
            } => out.extend([
                ("text", Prop::Str(text.clone())),
                ("fontSize", Prop::Num(stored_number(*font_size))),
                (
                    "maxWidth",
                    max_width.map_or(Prop::Absent, |m| Prop::Num(stored_number(m))),
                ),
                ("textAlign", Prop::Str(text_align.clone())),
            ]),
            ShapeProps::Note { text } => out.push(("text", Prop::Str(text.clone()))),
            ShapeProps::Connector(c) => out.extend([
                ("x1", Prop::Num(stored_number(c.x1))),
                ("y1", Prop::Num(stored_number(c.y1))),
                ("x2", Prop::Num(stored_number(c.x2))),
                ("y2", Prop::Num(stored_number(c.y2))),
                ("fromId", opt_str(&c.from_id)),
                ("toId", opt_str(&c.to_id)),
                ("bend", Prop::Num(stored_number(c.bend))),
                ("text", Prop::Str(c.text.clone())),
            ]),
            ShapeProps::Draw { points } => out.push((
                "points",
                Prop::Points(
                    points
                        .iter()
                        .flat_map(|(x, y)| [stored_number(*x), stored_number(*y)])
                        .collect(),
                ),
            )),
        }
        out
    }

    /// Moves the shape by `(dx, dy)`, keeping `x, y` and connector ends consistent.
    pub fn translate(&mut self, dx: f64, dy: f64) {
        self.x += dx;
        self.y += dy;
        if let ShapeProps::Connector(c) = &mut self.props {
            c.x1 += dx;
            c.x2 += dx;
            c.y1 += dy;
            c.y2 += dy;
        }
    }

    /// Re-derives `x, y` of a connector from its ends (its top-left), and of a stroke from its
    /// points (so the points start at the origin); no-op for other families.
    pub fn normalize_origin(&mut self) {
        match &mut self.props {
            ShapeProps::Connector(c) => {
                self.x = c.x1.min(c.x2);
                self.y = c.y1.min(c.y2);
            }
            ShapeProps::Draw { points } => {
                let min_x = points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
                let min_y = points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
                if min_x.is_finite() && min_y.is_finite() {
                    for p in points.iter_mut() {
                        p.0 -= min_x;
                        p.1 -= min_y;
                    }
                    self.x += min_x;
                    self.y += min_y;
                }
            }
            _ => {}
        }
    }

    /// The shape's label text, if its family has one.
    pub fn text(&self) -> Option<&str> {
        match &self.props {
            ShapeProps::Geo { text, .. }
            | ShapeProps::Text { text, .. }
            | ShapeProps::Note { text } => Some(text),
            ShapeProps::Connector(c) => Some(&c.text),
            ShapeProps::Draw { .. } => None,
        }
    }

    /// Sets the label; `false` for a family without one (pen strokes).
    pub fn set_text(&mut self, new: String) -> bool {
        match &mut self.props {
            ShapeProps::Geo { text, .. }
            | ShapeProps::Text { text, .. }
            | ShapeProps::Note { text } => *text = new,
            ShapeProps::Connector(c) => c.text = new,
            ShapeProps::Draw { .. } => return false,
        }
        true
    }
}

/// The `shapes` root map, created if missing.
pub fn shapes_root(txn: &mut TransactionMut<'_>) -> MapRef {
    use yrs::WriteTxn;
    txn.get_or_insert_map(SHAPES)
}

fn shape_map<T: ReadTxn>(txn: &T, id: &str) -> Option<MapRef> {
    let root = txn.get_map(SHAPES)?;
    match root.get(txn, id)? {
        Out::YMap(m) => Some(m),
        _ => None,
    }
}

pub(crate) fn read_prop<T: ReadTxn>(txn: &T, map: &MapRef, key: &str) -> Prop {
    match map.get(txn, key) {
        Some(Out::Any(any)) => any_to_prop(&any),
        Some(Out::YArray(arr)) => Prop::Points(
            arr.iter(txn)
                .filter_map(|v| match v {
                    Out::Any(a) => num_of(&a),
                    _ => None,
                })
                .collect(),
        ),
        _ => Prop::Absent,
    }
}

/// A finite number stored as either of Yjs's number kinds.
pub(crate) fn num_of(any: &Any) -> Option<f64> {
    match any {
        Any::Number(yrs::Number::Float(n)) if n.is_finite() => Some(*n),
        Any::Number(yrs::Number::Int(i)) => Some(*i as f64),
        _ => None,
    }
}

/// A plain stored value as a [`Prop`] (an array of numbers: points; anything else unreadable:
/// absent).
pub(crate) fn any_to_prop(any: &Any) -> Prop {
    match any {
        Any::Bool(b) => Prop::Bool(*b),
        Any::String(s) => Prop::Str(s.to_string()),
        Any::Array(items) => Prop::Points(items.iter().filter_map(num_of).collect()),
        other => num_of(other).map_or(Prop::Absent, Prop::Num),
    }
}

/// Every number stored is finite and within ±`COORD_LIMIT`, whatever the arithmetic before
/// (repeated resizes could otherwise grow a coordinate to infinity).
fn stored_number(n: f64) -> f64 {
    if n.is_finite() {
        super::coerce::clamp_coord(n)
    } else {
        0.0
    }
}

fn prop_to_any(prop: &Prop) -> Option<Any> {
    match prop {
        Prop::Num(n) => Some(Any::from(stored_number(*n))),
        Prop::Str(s) => Some(Any::from(s.as_str())),
        Prop::Bool(b) => Some(Any::Bool(*b)),
        Prop::Points(_) | Prop::Absent => None,
    }
}

/// Reads the shape stored under `id`; `Ok(None)` if there is none.
pub fn read_shape<T: ReadTxn>(txn: &T, id: &str) -> Result<Option<Shape>, CanvasError> {
    match shape_map(txn, id) {
        Some(map) => shape_from_map(txn, id, &map).map(Some),
        None => Ok(None),
    }
}

fn shape_from_map<T: ReadTxn>(txn: &T, id: &str, map: &MapRef) -> Result<Shape, CanvasError> {
    let get = |k: &str| read_prop(txn, map, k);
    let num = |k: &str, d: f64| match get(k) {
        Prop::Num(n) => n,
        _ => d,
    };
    let string = |k: &str, d: &str| match get(k) {
        Prop::Str(s) => s,
        _ => d.to_owned(),
    };
    let opt_str = |k: &str| match get(k) {
        Prop::Str(s) if !s.is_empty() => Some(s),
        _ => None,
    };
    let type_name = string("type", "");
    let family = ShapeType::of(&type_name).ok_or_else(|| CanvasError::Malformed(id.into()))?;
    let props = match family {
        ShapeType::Geo => ShapeProps::Geo {
            w: num("w", 100.0),
            h: num("h", 100.0),
            text: string("text", ""),
            text_align: string("textAlign", "middle"),
        },
        ShapeType::Text => ShapeProps::Text {
            text: string("text", ""),
            font_size: num("fontSize", 24.0),
            max_width: match get("maxWidth") {
                Prop::Num(n) => Some(n),
                _ => None,
            },
            text_align: string("textAlign", "start"),
        },
        ShapeType::Note => ShapeProps::Note {
            text: string("text", ""),
        },
        ShapeType::Arrow | ShapeType::Line => ShapeProps::Connector(Connector {
            x1: num("x1", 0.0),
            y1: num("y1", 0.0),
            x2: num("x2", 0.0),
            y2: num("y2", 0.0),
            from_id: opt_str("fromId"),
            to_id: opt_str("toId"),
            bend: num("bend", 0.0),
            text: string("text", ""),
        }),
        ShapeType::Draw => ShapeProps::Draw {
            points: match get("points") {
                Prop::Points(flat) => flat.chunks_exact(2).map(|c| (c[0], c[1])).collect(),
                _ => Vec::new(),
            },
        },
    };
    Ok(Shape {
        id: id.to_owned(),
        type_name,
        page_id: string("pageId", super::schema::MAIN_PAGE),
        x: num("x", 0.0),
        y: num("y", 0.0),
        rotation: num("rotation", 0.0),
        index: string("index", ""),
        color: string("color", "black"),
        fill: string("fill", "none"),
        note: string("note", ""),
        locked: matches!(get("locked"), Prop::Bool(true)),
        created_by: string("createdBy", ""),
        props,
    })
}

/// Paint order (docs/document-schema.md): ascending `index`, then id for ties, so every peer
/// agrees.
pub fn paint_order(a: &Shape, b: &Shape) -> std::cmp::Ordering {
    a.index.cmp(&b.index).then_with(|| a.id.cmp(&b.id))
}

/// Every readable shape, in z-order ([`paint_order`]).
pub fn list_shapes<T: ReadTxn>(txn: &T) -> Vec<Shape> {
    let Some(root) = txn.get_map(SHAPES) else {
        return Vec::new();
    };
    let mut shapes: Vec<Shape> = root
        .iter(txn)
        .filter_map(|(id, v)| match v {
            Out::YMap(m) => shape_from_map(txn, id, &m).ok(),
            _ => None,
        })
        .collect();
    shapes.sort_by(paint_order);
    shapes
}

/// The z-order keys (`index`) of the shapes on page `page_id`, reading nothing else: placing a
/// new shape on top must not read every property of every shape while its transaction holds
/// the document (a fairy creates shapes while people write; see docs/fairies.md "People and
/// fairies in one room").
pub fn page_indexes<T: ReadTxn>(txn: &T, page_id: &str) -> Vec<std::sync::Arc<str>> {
    let Some(root) = txn.get_map(SHAPES) else {
        return Vec::new();
    };
    let text = |m: &MapRef, key: &str| match m.get(txn, key) {
        Some(Out::Any(Any::String(s))) => Some(s),
        _ => None,
    };
    root.iter(txn)
        .filter_map(|(_, v)| match v {
            Out::YMap(m) => {
                let page = text(&m, "pageId");
                let on_page = page.as_deref().unwrap_or(super::schema::MAIN_PAGE) == page_id;
                on_page.then(|| text(&m, "index")).flatten()
            }
            _ => None,
        })
        .collect()
}

/// A new shape's map holding `props` (points as a `Y.Array`; absent keys left out).
fn prelim_of(props: &[(&str, Prop)]) -> MapPrelim {
    let mut prelim = MapPrelim::default();
    for (key, prop) in props {
        match prop {
            Prop::Points(flat) => {
                prelim.insert((*key).into(), ArrayPrelim::from(flat.clone()).into());
            }
            other => {
                if let Some(any) = prop_to_any(other) {
                    prelim.insert((*key).into(), any.into());
                }
            }
        }
    }
    prelim
}

/// Writes `shape` under its id: inserts a new map, or sets only the keys whose value differs
/// from what is stored (so untouched keys keep their authors). Returns true if anything changed.
pub fn write_shape(txn: &mut TransactionMut<'_>, shape: &Shape) -> bool {
    let root = shapes_root(txn);
    let existing = match root.get(txn, &shape.id) {
        Some(Out::YMap(m)) => Some(m),
        _ => None,
    };
    let Some(map) = existing else {
        let props = shape.to_props();
        root.insert(txn, shape.id.as_str(), prelim_of(&props));
        return true;
    };
    let mut changed = false;
    for (key, prop) in shape.to_props() {
        if read_prop(txn, &map, key) == prop {
            continue;
        }
        changed = true;
        match prop {
            Prop::Absent => {
                map.remove(txn, key);
            }
            Prop::Points(flat) => {
                map.insert(txn, key, ArrayPrelim::from(flat));
            }
            other => {
                if let Some(any) = prop_to_any(&other) {
                    map.insert(txn, key, any);
                }
            }
        }
    }
    changed
}

/// Sets the given keys of an existing shape, leaving every other key alone (what a client
/// editing one property does). False if the shape is missing or nothing changed.
pub fn set_props(txn: &mut TransactionMut<'_>, id: &str, props: &[(&str, Prop)]) -> bool {
    let Some(map) = shape_map(txn, id) else {
        return false;
    };
    let mut changed = false;
    for (key, prop) in props {
        if read_prop(txn, &map, key) == *prop {
            continue;
        }
        changed = true;
        match prop {
            Prop::Absent => {
                map.remove(txn, key);
            }
            Prop::Points(flat) => {
                map.insert(txn, *key, ArrayPrelim::from(flat.clone()));
            }
            other => {
                if let Some(any) = prop_to_any(other) {
                    map.insert(txn, *key, any);
                }
            }
        }
    }
    changed
}

/// Makes the shape `id` from exactly `props` (a suggestion's create; absent keys are left out).
/// False if a shape `id` exists already (nothing is written then).
pub fn create_from_props(txn: &mut TransactionMut<'_>, id: &str, props: &[(&str, Prop)]) -> bool {
    let root = shapes_root(txn);
    if root.get(txn, id).is_some() {
        return false;
    }
    root.insert(txn, id, prelim_of(props));
    true
}

/// Whether the shape `id` exists (as a map).
pub fn shape_exists<T: ReadTxn>(txn: &T, id: &str) -> bool {
    shape_map(txn, id).is_some()
}

/// Sets one boolean key of a shape (used for `locked`); false if the shape is missing.
pub fn set_locked(txn: &mut TransactionMut<'_>, id: &str, locked: bool) -> bool {
    match shape_map(txn, id) {
        Some(map) if read_prop(txn, &map, "locked") != Prop::Bool(locked) => {
            map.insert(txn, "locked", Any::Bool(locked));
            true
        }
        _ => false,
    }
}

/// Removes the shape; false if there was none.
pub fn delete_shape(txn: &mut TransactionMut<'_>, id: &str) -> bool {
    let root = shapes_root(txn);
    root.remove(txn, id).is_some()
}

/// Removes the shapes `ids` and the bindings of arrows and lines to them (their ends stay
/// where they are), so that no reference points at a missing shape; one pass over the other
/// shapes however many are removed. Returns how many shapes were removed.
pub fn delete_shapes_and_unbind(txn: &mut TransactionMut<'_>, ids: &[&str]) -> usize {
    let removed = ids.iter().filter(|id| delete_shape(txn, id)).count();
    for mut s in list_shapes(txn) {
        if let ShapeProps::Connector(c) = &mut s.props {
            let mut changed = false;
            for end in [&mut c.from_id, &mut c.to_id] {
                if end.as_deref().is_some_and(|bound| ids.contains(&bound)) {
                    *end = None;
                    changed = true;
                }
            }
            if changed {
                write_shape(txn, &s);
            }
        }
    }
    removed
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use yrs::{Doc, Transact};

    pub(crate) fn rect(id: &str, x: f64, y: f64, w: f64, h: f64) -> Shape {
        Shape {
            id: id.into(),
            type_name: "rectangle".into(),
            page_id: "page:main".into(),
            x,
            y,
            rotation: 0.0,
            index: crate::canvas::zorder::first_index(),
            color: "black".into(),
            fill: "none".into(),
            note: String::new(),
            locked: false,
            created_by: "user:a".into(),
            props: ShapeProps::Geo {
                w,
                h,
                text: String::new(),
                text_align: "middle".into(),
            },
        }
    }

    #[test]
    fn write_read_round_trip_for_every_family() {
        let doc = Doc::new();
        let mut shapes = vec![rect("r", 1.0, 2.0, 3.0, 4.0)];
        let mut arrow = rect("a", 0.0, 0.0, 0.0, 0.0);
        arrow.type_name = "arrow".into();
        arrow.props = ShapeProps::Connector(Connector {
            x1: 5.0,
            y1: 6.0,
            x2: 1.0,
            y2: 9.0,
            from_id: Some("r".into()),
            to_id: None,
            bend: 2.0,
            text: "go".into(),
        });
        arrow.normalize_origin();
        shapes.push(arrow);
        let mut pen = rect("p", 10.0, 10.0, 0.0, 0.0);
        pen.type_name = "draw".into();
        pen.props = ShapeProps::Draw {
            points: vec![(0.0, 0.0), (3.5, 4.0)],
        };
        shapes.push(pen);
        let mut text = rect("t", 0.0, 0.0, 0.0, 0.0);
        text.type_name = "text".into();
        text.props = ShapeProps::Text {
            text: "hi".into(),
            font_size: 20.0,
            max_width: None,
            text_align: "start".into(),
        };
        shapes.push(text);
        for s in &shapes {
            assert!(write_shape(&mut doc.transact_mut(), s));
        }
        let txn = doc.transact();
        for s in &shapes {
            assert_eq!(read_shape(&txn, &s.id).ok().flatten().as_ref(), Some(s));
        }
        assert_eq!(list_shapes(&txn).len(), 4);
    }

    #[test]
    fn rewrite_only_touches_changed_keys() {
        let doc = Doc::new();
        let mut s = rect("r", 0.0, 0.0, 10.0, 10.0);
        write_shape(&mut doc.transact_mut(), &s);
        assert!(
            !write_shape(&mut doc.transact_mut(), &s),
            "no-op write changed something"
        );
        let before = doc.transact().state_vector();
        s.x = 5.0;
        assert!(write_shape(&mut doc.transact_mut(), &s));
        let update = doc.transact().encode_state_as_update_v1(&before);
        assert!(
            update.len() < 40,
            "a one-key change encoded {} bytes",
            update.len()
        );
    }

    #[test]
    fn foreign_values_read_leniently() {
        let doc = Doc::new();
        {
            let mut txn = doc.transact_mut();
            let root = shapes_root(&mut txn);
            root.insert(
                &mut txn,
                "odd",
                MapPrelim::from([("type", Any::from("rectangle"))]),
            );
            root.insert(
                &mut txn,
                "bad",
                MapPrelim::from([("type", Any::from("blob"))]),
            );
            root.insert(&mut txn, "scalar", Any::from(3.0));
        }
        let txn = doc.transact();
        let odd = read_shape(&txn, "odd").ok().flatten();
        assert!(matches!(odd, Some(Shape { x: 0.0, .. })));
        assert_eq!(
            read_shape(&txn, "bad"),
            Err(CanvasError::Malformed("bad".into()))
        );
        assert_eq!(read_shape(&txn, "scalar"), Ok(None));
        assert_eq!(list_shapes(&txn).len(), 1);
        assert_eq!(txn.get_map(SHAPES).map(|root| root.len(&txn)), Some(3));
    }
}
