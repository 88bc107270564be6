//! Test helpers for the action unit tests: a document with the schema, shapes created from
//! simple JSON, and one-call parse + apply.

use serde_json::Value;
use yrs::{Doc, Transact};

use crate::agent::actions::{ActionCtx, ActionError, Registry, Sanitized};
use crate::canvas::format::{ShapeBase, from_simple};
use crate::canvas::geometry::{Bounds, shape_bounds};
use crate::canvas::shape::{Shape, read_shape, write_shape};

/// A new document with schema v1.
pub fn doc() -> Doc {
    let doc = Doc::new();
    crate::canvas::init_schema(&doc, "system");
    doc
}

/// Writes a user shape from simple JSON.
pub fn put(doc: &Doc, simple: Value) {
    let base = ShapeBase {
        created_by: "user:u".into(),
        ..ShapeBase::default()
    };
    match from_simple(&simple, &base) {
        Ok(s) => {
            write_shape(&mut doc.transact_mut_with("client:1:u"), &s);
        }
        Err(e) => panic!("bad test shape: {e}"),
    }
}

/// Writes a user rectangle.
pub fn rect(doc: &Doc, id: &str, x: f64, y: f64, w: f64, h: f64) {
    put(
        doc,
        serde_json::json!({"_type": "rectangle", "shapeId": id, "x": x, "y": y, "w": w, "h": h}),
    );
}

/// Parses and applies as fairy `f1` (complete).
pub fn run(doc: &Doc, action: Value) -> Result<Sanitized, ActionError> {
    let mut ctx = ActionCtx::new("f1");
    Registry::canvas().apply(doc, &action, &mut ctx)
}

/// Reads a shape that must exist.
pub fn get(doc: &Doc, id: &str) -> Shape {
    match read_shape(&doc.transact(), id) {
        Ok(Some(s)) => s,
        other => panic!("shape {id}: {other:?}"),
    }
}

/// The bounds of a shape that must exist.
pub fn bounds(doc: &Doc, id: &str) -> Bounds {
    shape_bounds(&get(doc, id))
}

/// Asserts two numbers are within 1e-6.
pub fn approx(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-6, "{a} != {b}");
}
