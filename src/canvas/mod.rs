//! The typed canvas model (schema v1, docs/document-schema.md) over a room's Yrs document.
//!
//! Owns: reading and writing shapes, pages and z-order; bounds and queries; the model-facing
//! shape formats and the helpers the fairies' prompts need (offset + rounding, id renames,
//! coercion of model strings). Must not touch sockets, stores or the network: everything here
//! takes a `yrs` transaction or plain values, so it is trivially testable and fuzzable.
//!
//! # Layout
//! - [`schema`]: root names, `init_schema`, the vocabularies (shape types, colors, fills).
//! - [`shape`]: the typed [`Shape`] and its read/write/delete over a nested `Y.Map` per shape.
//! - [`live`]: one live view of a document's shapes and a feed of their changes, shared by its
//!   readers (fairies), so that they neither walk nor observe the document each.
//! - [`page`]: pages (`page:main`, create, list).
//! - [`patch`]: shape patches (the REST `PATCH …/shapes` body): validated whole, applied in
//!   one transaction.
//! - [`zorder`]: fractional `index` strings (z-order) via the `fractional_index` crate.
//! - [`geometry`]: bounds per shape (arrows and pen strokes included) and queries by bounds.
//! - [`format`]: the model-facing formats: simple (full detail), blurry, peripheral clusters.
//! - [`render`]: shapes → SVG and PNG (exports, what a fairy with vision sees).
//! - [`transform`]: offset to the chat origin and rounding that remembers its difference.
//! - [`ids`]: `ensure_shape_id_is_unique` (with a rename map) and `ensure_shape_id_exists`.
//! - [`coerce`]: numbers and booleans written as strings by a model.

pub mod coerce;
pub mod format;
pub mod geometry;
pub mod ids;
pub mod live;
pub mod page;
pub mod patch;
pub mod render;
pub mod schema;
pub mod shape;
pub mod transform;
pub mod zorder;

pub use geometry::Bounds;
pub use schema::{ShapeType, init_schema};
pub use shape::{Shape, ShapeProps};

/// Errors of the canvas model. Every message is meant to be readable by a model as a
/// corrective hint, so it names the offending value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CanvasError {
    /// The shape type is not one of schema v1's.
    #[error("unknown shape type '{0}'")]
    UnknownType(String),
    /// A required field is absent or has the wrong JSON type.
    #[error("field '{field}' is missing or invalid")]
    InvalidField {
        /// The field name as the model writes it.
        field: String,
    },
    /// A number is NaN, infinite, or could not be read from a string.
    #[error("field '{field}' is not a finite number")]
    NotFinite {
        /// The field name as the model writes it.
        field: String,
    },
    /// No shape with this id exists.
    #[error("shape '{0}' does not exist")]
    NoSuchShape(String),
    /// No page with this id exists.
    #[error("page '{0}' does not exist")]
    NoSuchPage(String),
    /// A shape id is empty, too long, or has control characters.
    #[error("invalid shape id '{0}'")]
    InvalidId(String),
    /// The document holds a value this schema cannot read (written by a foreign client).
    #[error("shape '{0}' is malformed in the document")]
    Malformed(String),
}
