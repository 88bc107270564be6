//! Schema v1 of a room document (docs/document-schema.md): root names, the new-room initialisation, and the
//! vocabularies a shape may use (types, tldraw colors and fills, text alignments).
//!
//! Owns only names and the idempotent [`init_schema`]; the typed shape access is in
//! [`super::shape`]. Coordinates conventions of v1, shared with the browser demo:
//! - `x, y` is the shape's top-left in page pixels; `rotation` is in radians, clockwise,
//!   about `(x, y)` (as tldraw does);
//! - `arrow`/`line`: `x1, y1, x2, y2` are page coordinates of the two ends and `x, y` is kept
//!   equal to their top-left (`min`), so the ends are authoritative;
//! - `draw`: `points` is a flat `Y.Array` `[x0, y0, x1, y1, …]` relative to `(x, y)`.

use yrs::{Any, Doc, Map, MapPrelim, Transact, TransactionMut, WriteTxn};

/// Root map of shapes: id → `Y.Map` of properties.
pub const SHAPES: &str = "shapes";
/// Root map of pages: id → `Y.Map {name, index}`.
pub const PAGES: &str = "pages";
/// Root map of persistent fairy entities (owned by the agent runtime).
pub const FAIRIES: &str = "fairies";
/// Root map of projects (owned by the agent runtime).
pub const PROJECTS: &str = "projects";
/// Root map of tasks (owned by the agent runtime).
pub const TASKS: &str = "tasks";
/// Root map of a fairy's suggestions in review mode (owned by [`crate::review`]).
pub const SUGGESTIONS: &str = "suggestions";
/// Root map of document metadata.
pub const META: &str = "meta";
/// The page every new room has.
pub const MAIN_PAGE: &str = "page:main";
/// The schema version this code writes: 2 added the server-owned `suggestions` root (a room
/// loaded at version 1 loses what a peer may have written there; see
/// [`crate::review::migrate`]).
pub const SCHEMA_VERSION: i64 = 2;

/// tldraw's color names, the only colors a shape may carry.
pub const COLORS: &[&str] = &[
    "black",
    "grey",
    "red",
    "light-red",
    "green",
    "light-green",
    "blue",
    "light-blue",
    "orange",
    "yellow",
    "violet",
    "light-violet",
    "white",
];
/// tldraw's fill names.
pub const FILLS: &[&str] = &["none", "semi", "solid", "pattern"];
/// Text alignments.
pub const TEXT_ALIGNS: &[&str] = &["start", "middle", "end"];
/// Geo kinds: each is a shape `type` of its own in v1.
pub const GEO_KINDS: &[&str] = &[
    "rectangle",
    "ellipse",
    "triangle",
    "diamond",
    "hexagon",
    "pentagon",
    "octagon",
    "star",
    "cloud",
    "heart",
    "rhombus",
    "trapezoid",
    "oval",
    "x-box",
    "check-box",
    "arrow-left",
    "arrow-right",
    "arrow-up",
    "arrow-down",
];

/// The family a shape `type` belongs to; decides which properties it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShapeType {
    /// A geometric shape (`rectangle`, `ellipse`, …): `w, h, text, textAlign`.
    Geo,
    /// Free text: `text, fontSize, maxWidth, textAlign`.
    Text,
    /// A sticky note: `text`.
    Note,
    /// An arrow between two points or shapes.
    Arrow,
    /// A straight or bent line.
    Line,
    /// A freehand stroke (`pen` for the model).
    Draw,
}

impl ShapeType {
    /// The family of a document `type` string; `None` for types v1 does not know.
    pub fn of(type_name: &str) -> Option<Self> {
        match type_name {
            "text" => Some(Self::Text),
            "note" => Some(Self::Note),
            "arrow" => Some(Self::Arrow),
            "line" => Some(Self::Line),
            "draw" => Some(Self::Draw),
            geo if GEO_KINDS.contains(&geo) => Some(Self::Geo),
            _ => None,
        }
    }
}

/// Normalises a color name from a model (case, spaces, `gray`); `None` if unknown.
pub fn normalize_color(s: &str) -> Option<&'static str> {
    let lowered = s.trim().to_ascii_lowercase().replace([' ', '_'], "-");
    let name = match lowered.as_str() {
        "gray" => "grey",
        "purple" => "violet",
        "light-purple" => "light-violet",
        other => other,
    };
    COLORS.iter().copied().find(|c| *c == name)
}

/// Normalises a fill name; `None` if unknown.
pub fn normalize_fill(s: &str) -> Option<&'static str> {
    let lowered = s.trim().to_ascii_lowercase();
    FILLS.iter().copied().find(|f| *f == lowered)
}

/// Normalises a text alignment (`left`/`center`/`right` accepted as synonyms).
pub fn normalize_text_align(s: &str) -> Option<&'static str> {
    match s.trim().to_ascii_lowercase().as_str() {
        "start" | "left" => Some("start"),
        "middle" | "center" => Some("middle"),
        "end" | "right" => Some("end"),
        _ => None,
    }
}

/// Creates whatever schema v1 root content is missing: the `page:main` page and
/// `meta.schemaVersion`. Idempotent; never overwrites existing values, so calling it on a
/// loaded document is harmless. The room calls it with its `system` origin on a new document.
/// Deterministic: on an empty document with a given client id it writes the same update
/// every time.
pub fn init_schema(doc: &Doc, origin: impl Into<yrs::Origin>) {
    let mut txn = doc.transact_mut_with(origin.into());
    init_schema_in(&mut txn);
}

/// [`init_schema`] inside an existing transaction.
pub fn init_schema_in(txn: &mut TransactionMut<'_>) {
    // Root types exist as soon as they are named; creating them costs nothing in the update.
    for root in [SHAPES, FAIRIES, PROJECTS, TASKS, SUGGESTIONS] {
        txn.get_or_insert_map(root);
    }
    let pages = txn.get_or_insert_map(PAGES);
    if pages.len(txn) == 0 {
        // Key by key in a fixed order (a `MapPrelim` of several keys inserts them in hash
        // order): on a fresh document the schema is then the same items, with the same ids,
        // every time, so a room whose schema was never stored can be built again identically
        // (`room::Room::new`).
        let page = pages.insert(txn, MAIN_PAGE, MapPrelim::default());
        page.insert(txn, "name", Any::from("Page 1"));
        page.insert(
            txn,
            "index",
            Any::from(crate::canvas::zorder::first_index()),
        );
    }
    let meta = txn.get_or_insert_map(META);
    if meta.get(txn, "schemaVersion").is_none() {
        meta.insert(txn, "schemaVersion", Any::from(SCHEMA_VERSION as f64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use yrs::ReadTxn;
    use yrs::types::ToJson;

    #[test]
    fn init_is_idempotent_and_creates_main_page() {
        let doc = Doc::new();
        init_schema(&doc, "system");
        let sv1 = doc.transact().state_vector();
        init_schema(&doc, "system");
        assert_eq!(
            doc.transact().state_vector(),
            sv1,
            "second init wrote something"
        );
        let txn = doc.transact();
        let pages = txn.get_map(PAGES).map(|m| m.to_json(&txn));
        let text = format!("{pages:?}");
        assert!(text.contains(MAIN_PAGE), "{text}");
    }

    #[test]
    fn types_and_vocabularies() {
        assert_eq!(ShapeType::of("rectangle"), Some(ShapeType::Geo));
        assert_eq!(ShapeType::of("draw"), Some(ShapeType::Draw));
        assert_eq!(ShapeType::of("pen"), None);
        assert_eq!(normalize_color("Light Blue"), Some("light-blue"));
        assert_eq!(normalize_color("gray"), Some("grey"));
        assert_eq!(normalize_color("magenta"), None);
        assert_eq!(normalize_text_align("center"), Some("middle"));
    }
}
