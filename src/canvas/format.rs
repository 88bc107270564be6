//! The model-facing shape formats of the seed:
//! - *simple* (full detail, also what `create`/`update` actions carry): see the shared
//!   contract — geo `x, y, w, h, color, fill, text, textAlign`; `text` `x, y, text, fontSize,
//!   maxWidth, textAlign, color`; `note` `x, y, text, color`; `arrow`/`line` `x1, y1, x2, y2,
//!   fromId, toId, bend, text, color`; `pen` `points: [{x, y}], color` (page coordinates);
//! - *blurry*: `{shapeId, type, text, x, y, w, h}` from the bounds;
//! - *peripheral clusters*: shapes outside the request bounds grouped by overlap after 75 px
//!   padding, as `{bounds, numberOfShapes}`; [`clusters_at_most`] groups coarser (the padding
//!   doubled) until a bounded number of clusters holds every shape;
//! - *tables*: a list of blurry shapes or clusters as `{columns, rows}`, each row the values
//!   in the columns' order, so that no key is repeated per shape ([`blurry_row`],
//!   [`cluster_row`]).
//!
//! Owns the conversions between [`Shape`] and those JSON shapes; never reads the document.

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::CanvasError;
use super::coerce::{clamp_coord, coerce_number, coerce_string, number_value};
use super::geometry::{Bounds, shape_bounds};
use super::ids::normalize_id;
use super::schema::{
    GEO_KINDS, MAIN_PAGE, ShapeType, normalize_color, normalize_fill, normalize_text_align,
};
use super::shape::{Connector, Shape, ShapeProps};

/// Padding around each shape when grouping peripheral shapes into clusters.
pub const CLUSTER_PADDING: f64 = 75.0;

/// Most points a pen stroke keeps (the rest are dropped): bounds the document's growth.
pub const MAX_PEN_POINTS: usize = 2000;

/// The model-facing `_type` of a shape (`draw` is `pen` for the model).
pub fn model_type(shape: &Shape) -> &str {
    if shape.type_name == "draw" {
        "pen"
    } else {
        &shape.type_name
    }
}

/// The simple (full-detail) format, in page coordinates.
pub fn to_simple(shape: &Shape) -> Value {
    let mut v = json!({
        "_type": model_type(shape),
        "shapeId": shape.id,
        "note": shape.note,
        "color": shape.color,
    });
    let Some(obj) = v.as_object_mut() else {
        return v;
    };
    let mut put = |k: &str, val: Value| {
        obj.insert(k.into(), val);
    };
    match &shape.props {
        ShapeProps::Geo {
            w,
            h,
            text,
            text_align,
        } => {
            put("x", number_value(shape.x));
            put("y", number_value(shape.y));
            put("w", number_value(*w));
            put("h", number_value(*h));
            put("fill", json!(shape.fill));
            put("text", json!(text));
            put("textAlign", json!(text_align));
        }
        ShapeProps::Text {
            text,
            font_size,
            max_width,
            text_align,
        } => {
            put("x", number_value(shape.x));
            put("y", number_value(shape.y));
            put("text", json!(text));
            put("fontSize", number_value(*font_size));
            put("maxWidth", max_width.map_or(Value::Null, number_value));
            put("textAlign", json!(text_align));
        }
        ShapeProps::Note { text } => {
            put("x", number_value(shape.x));
            put("y", number_value(shape.y));
            put("text", json!(text));
        }
        ShapeProps::Connector(c) => {
            put("x1", number_value(c.x1));
            put("y1", number_value(c.y1));
            put("x2", number_value(c.x2));
            put("y2", number_value(c.y2));
            put("fromId", json!(c.from_id));
            put("toId", json!(c.to_id));
            put("bend", number_value(c.bend));
            put("text", json!(c.text));
        }
        ShapeProps::Draw { points } => {
            let pts: Vec<Value> = points
                .iter()
                .map(|(px, py)| json!({"x": number_value(shape.x + px), "y": number_value(shape.y + py)}))
                .collect();
            put("points", Value::Array(pts));
        }
    }
    v
}

/// Document fields a simple shape does not carry; taken from the shape being created or updated.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapeBase {
    /// Page of the shape.
    pub page_id: String,
    /// Z-order key.
    pub index: String,
    /// Rotation in radians.
    pub rotation: f64,
    /// Locked flag.
    pub locked: bool,
    /// Author (`user:SUB` or `fairy:ID`).
    pub created_by: String,
}

impl Default for ShapeBase {
    fn default() -> Self {
        ShapeBase {
            page_id: MAIN_PAGE.into(),
            index: super::zorder::first_index(),
            rotation: 0.0,
            locked: false,
            created_by: String::new(),
        }
    }
}

fn num(obj: &Map<String, Value>, k: &str, default: f64) -> Result<f64, CanvasError> {
    match obj.get(k) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => coerce_number(v)
            .map(clamp_coord)
            .ok_or_else(|| CanvasError::NotFinite { field: k.into() }),
    }
}

fn text(obj: &Map<String, Value>, k: &str) -> String {
    obj.get(k).and_then(coerce_string).unwrap_or_default()
}

fn opt_id(obj: &Map<String, Value>, k: &str) -> Option<String> {
    obj.get(k)
        .and_then(Value::as_str)
        .and_then(|s| normalize_id(s).ok())
}

/// Normalises a model `_type` to a document `type` (`pen` → `draw`, `box` → `rectangle`, …).
pub fn document_type(model: &str) -> Result<String, CanvasError> {
    let t = model.trim().to_ascii_lowercase();
    let t = match t.as_str() {
        "pen" | "draw" => "draw",
        "geo" | "box" | "rect" | "square" => "rectangle",
        "circle" => "ellipse",
        "sticky" | "sticky-note" => "note",
        other => other,
    };
    match ShapeType::of(t) {
        Some(_) => Ok(t.to_owned()),
        None => Err(CanvasError::UnknownType(model.chars().take(64).collect())),
    }
}

/// Builds a shape from a simple-format object (page coordinates). Unknown colors, fills and
/// alignments fall back to defaults; a non-finite number or an unknown type is an error.
pub fn from_simple(v: &Value, base: &ShapeBase) -> Result<Shape, CanvasError> {
    let obj = v.as_object().ok_or(CanvasError::InvalidField {
        field: "shape".into(),
    })?;
    let id = obj
        .get("shapeId")
        .and_then(Value::as_str)
        .ok_or(CanvasError::InvalidField {
            field: "shapeId".into(),
        })
        .and_then(normalize_id)?;
    let model_t = obj.get("_type").and_then(Value::as_str).unwrap_or_default();
    let type_name = document_type(model_t)?;
    let color = obj
        .get("color")
        .and_then(Value::as_str)
        .and_then(normalize_color)
        .unwrap_or("black");
    let fill = obj
        .get("fill")
        .and_then(Value::as_str)
        .and_then(normalize_fill)
        .unwrap_or("none");
    let align = |default: &'static str| {
        obj.get("textAlign")
            .and_then(Value::as_str)
            .and_then(normalize_text_align)
            .unwrap_or(default)
            .to_owned()
    };
    let mut x = num(obj, "x", 0.0)?;
    let mut y = num(obj, "y", 0.0)?;
    let props = match ShapeType::of(&type_name) {
        Some(ShapeType::Geo) => ShapeProps::Geo {
            w: num(obj, "w", 100.0)?.abs(),
            h: num(obj, "h", 100.0)?.abs(),
            text: text(obj, "text"),
            text_align: align("middle"),
        },
        Some(ShapeType::Text) => ShapeProps::Text {
            text: text(obj, "text"),
            font_size: num(obj, "fontSize", 24.0)?.abs().max(1.0),
            max_width: match obj.get("maxWidth") {
                None | Some(Value::Null) => None,
                Some(_) => Some(num(obj, "maxWidth", 0.0)?.abs()),
            },
            text_align: align("start"),
        },
        Some(ShapeType::Note) => ShapeProps::Note {
            text: text(obj, "text"),
        },
        Some(ShapeType::Arrow | ShapeType::Line) => {
            let c = Connector {
                x1: num(obj, "x1", x)?,
                y1: num(obj, "y1", y)?,
                x2: num(obj, "x2", x)?,
                y2: num(obj, "y2", y)?,
                from_id: opt_id(obj, "fromId"),
                to_id: opt_id(obj, "toId"),
                bend: num(obj, "bend", 0.0)?,
                text: text(obj, "text"),
            };
            x = c.x1.min(c.x2);
            y = c.y1.min(c.y2);
            ShapeProps::Connector(c)
        }
        Some(ShapeType::Draw) => {
            let mut abs = Vec::new();
            if let Some(Value::Array(pts)) = obj.get("points") {
                for p in pts.iter().take(MAX_PEN_POINTS) {
                    let px = p.get("x").and_then(coerce_number).map(clamp_coord);
                    let py = p.get("y").and_then(coerce_number).map(clamp_coord);
                    if let (Some(px), Some(py)) = (px, py) {
                        abs.push((px, py));
                    }
                }
            }
            let b = Bounds::from_points(abs.iter().copied()).unwrap_or_default();
            x = b.x;
            y = b.y;
            ShapeProps::Draw {
                points: abs.iter().map(|(px, py)| (px - b.x, py - b.y)).collect(),
            }
        }
        None => return Err(CanvasError::UnknownType(type_name)),
    };
    Ok(Shape {
        id,
        type_name,
        page_id: base.page_id.clone(),
        x,
        y,
        rotation: base.rotation,
        index: base.index.clone(),
        color: color.into(),
        fill: fill.into(),
        note: text(obj, "note"),
        locked: base.locked,
        created_by: base.created_by.clone(),
        props,
    })
}

/// Applies a partial simple-format `update` over `existing`: fields present in the update win,
/// the others keep their value. A geo shape may change kind (`rectangle` → `ellipse`); any
/// other change of family is refused.
pub fn merge_simple(existing: &Shape, update: &Value) -> Result<Shape, CanvasError> {
    let mut merged = to_simple(existing);
    let (Some(target), Some(patch)) = (merged.as_object_mut(), update.as_object()) else {
        return Err(CanvasError::InvalidField {
            field: "update".into(),
        });
    };
    for (k, v) in patch {
        if k == "shapeId" || v.is_null() && k != "fromId" && k != "toId" {
            continue;
        }
        target.insert(k.clone(), v.clone());
    }
    let new_type = target
        .get("_type")
        .and_then(Value::as_str)
        .map(document_type)
        .transpose()?
        .unwrap_or_else(|| existing.type_name.clone());
    let same_family = ShapeType::of(&new_type) == existing.family();
    if !same_family {
        return Err(CanvasError::InvalidField {
            field: "_type".into(),
        });
    }
    let base = ShapeBase {
        page_id: existing.page_id.clone(),
        index: existing.index.clone(),
        rotation: existing.rotation,
        locked: existing.locked,
        created_by: existing.created_by.clone(),
    };
    from_simple(&merged, &base)
}

/// The blurry format: `{shapeId, type, text, x, y, w, h}` from the shape's bounds.
pub fn to_blurry(shape: &Shape) -> Value {
    let b = shape_bounds(shape);
    let mut v = json!({
        "shapeId": shape.id,
        "type": model_type(shape),
        "x": number_value(b.x),
        "y": number_value(b.y),
        "w": number_value(b.w),
        "h": number_value(b.h),
    });
    if let (Some(t), Some(obj)) = (shape.text(), v.as_object_mut())
        && !t.is_empty()
    {
        obj.insert("text".into(), json!(t));
    }
    v
}

/// A group of peripheral shapes, as the prompt shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    /// Union of the member shapes' bounds (without padding).
    pub bounds: Bounds,
    /// How many shapes the cluster holds.
    pub number_of_shapes: usize,
}

/// Groups shapes whose bounds, padded by [`CLUSTER_PADDING`], overlap (transitively); the
/// clusters are ordered by position (top, then left), whatever the order of `shapes`.
pub fn peripheral_clusters(shapes: &[&Shape]) -> Vec<Cluster> {
    clusters_with_padding(shapes, CLUSTER_PADDING)
}

fn clusters_with_padding(shapes: &[&Shape], padding: f64) -> Vec<Cluster> {
    let mut clusters: Vec<Cluster> = Vec::new();
    for shape in shapes {
        let bounds = shape_bounds(shape);
        // Most shapes lie inside a cluster already: joining it changes no bounds, so nothing
        // else can merge (one scan, no regrouping).
        if let Some(home) = clusters.iter_mut().find(|c| c.bounds.contains(&bounds)) {
            home.number_of_shapes += 1;
            continue;
        }
        let mut current = Cluster {
            bounds,
            number_of_shapes: 1,
        };
        // Absorb every cluster the padded bounds touch, until nothing more merges.
        loop {
            let padded = current.bounds.expand(padding);
            let before = clusters.len();
            let mut kept = Vec::with_capacity(clusters.len());
            for c in clusters.drain(..) {
                if c.bounds.expand(padding).intersects(&padded) {
                    current.bounds = current.bounds.union(&c.bounds);
                    current.number_of_shapes += c.number_of_shapes;
                } else {
                    kept.push(c);
                }
            }
            clusters = kept;
            if clusters.len() == before {
                break;
            }
        }
        clusters.push(current);
    }
    clusters.sort_by(|a, b| {
        (a.bounds.y, a.bounds.x, a.bounds.h, a.bounds.w)
            .partial_cmp(&(b.bounds.y, b.bounds.x, b.bounds.h, b.bounds.w))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    clusters
}

/// Groups `shapes` as [`peripheral_clusters`] does, with the padding doubled until at most
/// `max` clusters remain (at least one, when there are shapes): every shape is in exactly one
/// cluster, however many there are.
pub fn clusters_at_most(shapes: &[&Shape], max: usize) -> Vec<Cluster> {
    let mut padding = CLUSTER_PADDING;
    let mut clusters = clusters_with_padding(shapes, padding);
    // Each doubling at least keeps the count; 64 doublings cover any finite canvas.
    for _ in 0..64 {
        if clusters.len() <= max.max(1) {
            break;
        }
        padding *= 2.0;
        clusters = merge_clusters(clusters, padding);
    }
    clusters
}

/// Merges clusters whose bounds, padded by `padding`, overlap (transitively).
fn merge_clusters(clusters: Vec<Cluster>, padding: f64) -> Vec<Cluster> {
    let mut out: Vec<Cluster> = Vec::with_capacity(clusters.len());
    for mut current in clusters {
        loop {
            let padded = current.bounds.expand(padding);
            let before = out.len();
            let mut kept = Vec::with_capacity(out.len());
            for c in out.drain(..) {
                if c.bounds.expand(padding).intersects(&padded) {
                    current.bounds = current.bounds.union(&c.bounds);
                    current.number_of_shapes += c.number_of_shapes;
                } else {
                    kept.push(c);
                }
            }
            out = kept;
            if out.len() == before {
                break;
            }
        }
        out.push(current);
    }
    out
}

/// The columns of a blurry-shape row ([`blurry_row`]).
pub const BLURRY_COLUMNS: [&str; 7] = ["shapeId", "type", "x", "y", "w", "h", "text"];

/// The columns of a cluster row ([`cluster_row`]).
pub const CLUSTER_COLUMNS: [&str; 5] = ["x", "y", "w", "h", "numberOfShapes"];

/// A blurry shape's object (see [`to_blurry`], possibly offset to the model's coordinates) as
/// a row in [`BLURRY_COLUMNS`] order; a shape without text ends at `h`.
pub fn blurry_row(blurry: &Value) -> Value {
    let mut row: Vec<Value> = BLURRY_COLUMNS[..6]
        .iter()
        .map(|k| blurry.get(*k).cloned().unwrap_or(Value::Null))
        .collect();
    if let Some(text) = blurry.get("text").filter(|t| t.as_str() != Some("")) {
        row.push(text.clone());
    }
    Value::Array(row)
}

/// A cluster as a row in [`CLUSTER_COLUMNS`] order, its bounds given as the model reads them
/// (`{x, y, w, h}`).
pub fn cluster_row(bounds: &Value, number_of_shapes: usize) -> Value {
    let mut row: Vec<Value> = CLUSTER_COLUMNS[..4]
        .iter()
        .map(|k| bounds.get(*k).cloned().unwrap_or(Value::Null))
        .collect();
    row.push(json!(number_of_shapes));
    Value::Array(row)
}

/// A table `{columns, rows}`; no rows is an empty list (nothing to name columns for).
pub fn table(columns: &[&str], rows: Vec<Value>) -> Value {
    if rows.is_empty() {
        return json!([]);
    }
    json!({"columns": columns, "rows": rows})
}

/// Geo kinds, for schemas.
pub fn geo_kinds() -> &'static [&'static str] {
    GEO_KINDS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(v: Value) -> Shape {
        match from_simple(&v, &ShapeBase::default()) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn simple_round_trips_for_every_family() {
        for v in [
            json!({"_type": "ellipse", "shapeId": "e", "note": "", "color": "red", "x": 1.0, "y": 2.0, "w": 3.0, "h": 4.0, "fill": "solid", "text": "hi", "textAlign": "start"}),
            json!({"_type": "text", "shapeId": "t", "note": "", "color": "blue", "x": 1.0, "y": 2.0, "text": "a", "fontSize": 20.0, "maxWidth": null, "textAlign": "middle"}),
            json!({"_type": "note", "shapeId": "n", "note": "", "color": "yellow", "x": 1.0, "y": 2.0, "text": "n"}),
            json!({"_type": "arrow", "shapeId": "a", "note": "", "color": "black", "x1": 5.0, "y1": 6.0, "x2": 1.0, "y2": 2.0, "fromId": "e", "toId": null, "bend": 0.0, "text": ""}),
            json!({"_type": "pen", "shapeId": "p", "note": "", "color": "green", "points": [{"x": 10.0, "y": 10.0}, {"x": 20.0, "y": 5.0}]}),
        ] {
            let s = shape(v.clone());
            assert_eq!(to_simple(&s), v, "{}", s.id);
        }
    }

    #[test]
    fn bad_simple_shapes() {
        let base = ShapeBase::default();
        assert_eq!(
            from_simple(&json!({"_type": "blob", "shapeId": "b"}), &base),
            Err(CanvasError::UnknownType("blob".into()))
        );
        assert!(
            from_simple(
                &json!({"_type": "rectangle", "shapeId": "b", "x": "NaN"}),
                &base
            )
            .is_err()
        );
        assert!(from_simple(&json!({"_type": "rectangle"}), &base).is_err());
        let s = shape(
            json!({"_type": "box", "shapeId": "b", "x": "12", "w": 1e300, "color": "magenta"}),
        );
        assert_eq!(
            (s.x, s.color.as_str(), s.type_name.as_str()),
            (12.0, "black", "rectangle")
        );
        assert!(
            matches!(s.props, ShapeProps::Geo { w, .. } if w == super::super::coerce::COORD_LIMIT)
        );
    }

    #[test]
    fn merge_keeps_unmentioned_fields() {
        let s = shape(
            json!({"_type": "rectangle", "shapeId": "r", "x": 1, "y": 2, "w": 3, "h": 4, "text": "keep"}),
        );
        let m = merge_simple(&s, &json!({"_type": "ellipse", "x": 10})).ok();
        assert!(
            matches!(&m, Some(m) if m.x == 10.0 && m.y == 2.0 && m.text() == Some("keep") && m.type_name == "ellipse")
        );
        assert!(merge_simple(&s, &json!({"_type": "text"})).is_err());
    }

    #[test]
    fn clusters_merge_within_padding() {
        let a =
            shape(json!({"_type": "rectangle", "shapeId": "a", "x": 0, "y": 0, "w": 10, "h": 10}));
        let b = shape(
            json!({"_type": "rectangle", "shapeId": "b", "x": 150, "y": 0, "w": 10, "h": 10}),
        );
        let c = shape(
            json!({"_type": "rectangle", "shapeId": "c", "x": 1000, "y": 0, "w": 10, "h": 10}),
        );
        let clusters = peripheral_clusters(&[&a, &c, &b]);
        assert_eq!(clusters.len(), 2);
        let big = clusters.iter().find(|c| c.number_of_shapes == 2);
        assert_eq!(
            big.map(|c| c.bounds),
            Some(Bounds::new(0.0, 0.0, 160.0, 10.0))
        );
        let blurry = to_blurry(&a);
        assert_eq!(blurry["w"], json!(10.0));
    }

    #[test]
    fn clusters_at_most_coarsen_until_few_enough_and_keep_every_shape() {
        // 40 shapes in a row, 400 px apart: 40 clusters at the usual padding.
        let shapes: Vec<Shape> = (0..40)
            .map(|i| {
                shape(json!({"_type": "rectangle", "shapeId": format!("s{i}"), "x": i * 400, "y": 0, "w": 10, "h": 10}))
            })
            .collect();
        let refs: Vec<&Shape> = shapes.iter().collect();
        assert_eq!(peripheral_clusters(&refs).len(), 40);
        for max in [40, 10, 3, 1, 0] {
            let c = clusters_at_most(&refs, max);
            assert!(c.len() <= max.max(1), "{max}: {}", c.len());
            assert_eq!(c.iter().map(|c| c.number_of_shapes).sum::<usize>(), 40);
        }
        assert!(clusters_at_most(&[], 3).is_empty());
    }

    #[test]
    fn rows_follow_their_columns() {
        let a = shape(json!({"_type": "note", "shapeId": "n", "x": 1, "y": 2, "text": "hi"}));
        let b =
            shape(json!({"_type": "rectangle", "shapeId": "r", "x": 1, "y": 2, "w": 3, "h": 4}));
        assert_eq!(
            blurry_row(&to_blurry(&a)),
            json!(["n", "note", 1.0, 2.0, 200.0, 200.0, "hi"])
        );
        assert_eq!(
            blurry_row(&to_blurry(&b)),
            json!(["r", "rectangle", 1.0, 2.0, 3.0, 4.0])
        );
        assert_eq!(
            cluster_row(&json!({"x": 1, "y": 2, "w": 3, "h": 4}), 7),
            json!([1, 2, 3, 4, 7])
        );
        assert_eq!(
            table(&CLUSTER_COLUMNS, vec![json!([1, 2, 3, 4, 7])]),
            json!({"columns": ["x", "y", "w", "h", "numberOfShapes"], "rows": [[1, 2, 3, 4, 7]]})
        );
        assert_eq!(table(&CLUSTER_COLUMNS, vec![]), json!([]));
    }
}
