//! The fixture room of the render tests: one shape of every kind the web demo draws (every geo
//! kind, text, a note, straight and bent arrows, a bent line, pen strokes), every fill, a
//! rotated shape and two overlapping ones, in a known z-order.
#![allow(dead_code)]

use fairyring::canvas::format::{ShapeBase, from_simple};
use fairyring::canvas::schema::{COLORS, FILLS, GEO_KINDS, MAIN_PAGE};
use fairyring::canvas::shape::Shape;
use serde_json::{Value, json};

/// The z-order key of the `n`th shape (fixed-width, so keys sort as numbers do).
fn key(n: usize) -> String {
    format!("a{n:04}")
}

fn shape(n: usize, v: Value, rotation: f64) -> Shape {
    let base = ShapeBase {
        page_id: MAIN_PAGE.into(),
        index: key(n),
        rotation,
        locked: false,
        created_by: "user:test".into(),
    };
    from_simple(&v, &base).unwrap_or_else(|e| panic!("fixture shape {v}: {e}"))
}

/// Id of the rotated rectangle: 200×100 at (1000, 40), turned 30° about its top-left.
pub const ROTATED: &str = "rotated";
/// The blue square under the red one (both solid, overlapping at (1100..1150, 400..450)).
pub const UNDER: &str = "under";
/// The red square over the blue one.
pub const OVER: &str = "over";
/// The arrow from (100, 700) to (500, 700) bent by 60: it passes (300, 640).
pub const BENT: &str = "bent-arrow";

/// Every shape of the fixture, in z-order.
pub fn shapes() -> Vec<Shape> {
    // White is left out of the geo shapes: white on the white page shows nothing.
    let colors: Vec<&str> = COLORS.iter().copied().filter(|c| *c != "white").collect();
    let fills = FILLS;
    let mut out = Vec::new();
    for (i, kind) in GEO_KINDS.iter().enumerate() {
        let (col, row) = (i % 5, i / 5);
        let label = if i % 3 == 0 {
            (*kind).to_owned()
        } else {
            String::new()
        };
        out.push(json!({
            "_type": kind, "shapeId": format!("geo-{kind}"),
            "x": 20 + col * 180, "y": 20 + row * 140, "w": 150, "h": 110,
            "color": colors[i % colors.len()], "fill": fills[i % fills.len()], "text": label,
        }));
    }
    out.push(json!({"_type": "rectangle", "shapeId": UNDER, "x": 1050, "y": 350, "w": 100, "h": 100, "color": "blue", "fill": "solid"}));
    out.push(json!({"_type": "rectangle", "shapeId": OVER, "x": 1100, "y": 400, "w": 100, "h": 100, "color": "red", "fill": "solid"}));
    out.push(json!({"_type": "text", "shapeId": "title", "x": 20, "y": 600, "text": "Fairies that see", "fontSize": 32, "color": "violet"}));
    out.push(json!({"_type": "text", "shapeId": "wrapped", "x": 600, "y": 600, "text": "a paragraph that wraps at its maximum width", "fontSize": 18, "maxWidth": 200, "textAlign": "middle", "color": "black"}));
    out.push(json!({"_type": "note", "shapeId": "note", "x": 850, "y": 560, "text": "A sticky note with a few words", "color": "yellow"}));
    out.push(json!({"_type": "arrow", "shapeId": "straight-arrow", "x1": 100, "y1": 820, "x2": 500, "y2": 820, "color": "black", "text": "straight"}));
    out.push(json!({"_type": "arrow", "shapeId": BENT, "x1": 100, "y1": 700, "x2": 500, "y2": 700, "bend": 60, "color": "blue", "text": "bent"}));
    out.push(json!({"_type": "line", "shapeId": "line", "x1": 550, "y1": 850, "x2": 800, "y2": 750, "bend": -30, "color": "green"}));
    out.push(json!({"_type": "pen", "shapeId": "squiggle", "points": [{"x": 1000, "y": 700}, {"x": 1030, "y": 660}, {"x": 1060, "y": 720}, {"x": 1090, "y": 650}, {"x": 1120, "y": 710}], "color": "orange"}));
    out.push(json!({"_type": "pen", "shapeId": "dot", "points": [{"x": 1180, "y": 700}], "color": "red"}));
    let mut shapes: Vec<Shape> = out
        .into_iter()
        .enumerate()
        .map(|(n, v)| shape(n, v, 0.0))
        .collect();
    shapes.push(shape(
        shapes.len(),
        json!({"_type": "rectangle", "shapeId": ROTATED, "x": 1000, "y": 40, "w": 200, "h": 100, "color": "green", "fill": "semi", "text": "turned"}),
        std::f64::consts::PI / 6.0,
    ));
    shapes
}
