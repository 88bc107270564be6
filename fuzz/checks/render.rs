//! Fuzz check for `render` (shared by the cargo-fuzz target and `tests/sync/fuzz_corpus.rs`): builds
//! a room from arbitrary shapes — every kind, with numbers taken raw from the input (NaN,
//! infinities, `1e308`, negative sizes) written past `write_shape`'s clamps as a hostile peer
//! can, labels long or made of many lines, strokes of many points — reads them back as the
//! server does ([`list_shapes`]) and renders the page whole and an area of it, to SVG and PNG,
//! within a small budget.
//!
//! Invariants: nothing panics; a render ends with an image, or with `TimedOut` once the budget
//! is spent, and never runs much past it (one step of the renderer's loops).

#![allow(dead_code)]

use std::time::{Duration, Instant};

use fairyring::canvas::format::{ShapeBase, from_simple};
use fairyring::canvas::geometry::Bounds;
use fairyring::canvas::render::{self, Budget, Caps, RenderError, View};
use fairyring::canvas::schema::{GEO_KINDS, MAIN_PAGE};
use fairyring::canvas::shape::{list_shapes, write_shape};
use serde_json::json;
use yrs::{Doc, Map, Transact, WriteTxn};

/// The budget of each render.
pub const BUDGET: Duration = Duration::from_millis(300);
/// How far past the budget a render may end (one step of its loops, on a slow debug build). A
/// step can be one shape filled over a whole 32-megapixel image: instrumented for fuzzing
/// (ASAN, coverage on every comparison, unoptimised as `.ci/run`'s smoke runs build it) that
/// alone took 6.2 s, and 13.5 s on a CI machine slowed 3-4x by its host; ~0.2 s in release. The
/// bound is for a render that ignores its budget (minutes, or never), not for a slow machine.
pub const OVERRUN: Duration = if cfg!(fuzzing) {
    Duration::from_secs(45)
} else {
    Duration::from_secs(3)
};
/// Most shapes built from one input.
const MAX_SHAPES: usize = 64;

/// Reads the input front to back; zeros once it runs out.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    /// A number: small and plain most of the time, else any f64 bit pattern.
    fn number(&mut self) -> f64 {
        match self.byte() % 8 {
            0 => {
                let mut b = [0u8; 8];
                b.iter_mut().for_each(|x| *x = self.byte());
                f64::from_le_bytes(b)
            }
            1 => [f64::NAN, f64::INFINITY, -1e308, 1e308, 0.0, -0.0, 1e-300]
                [self.byte() as usize % 7],
            _ => f64::from(self.u16() as i16) * f64::from(self.byte().max(1)) / 4.0,
        }
    }

    /// A label: a pattern repeated, up to hundreds of KB, with or without spaces and newlines.
    fn text(&mut self) -> String {
        let unit = [
            "W",
            "ab ",
            "x\n",
            "\u{1F600}",
            "<&>\"",
            "\u{0}\u{7}",
            " ",
            "mot long ",
        ][self.byte() as usize % 8];
        let reps = usize::from(self.u16()) * usize::from(self.byte() % 8 + 1);
        unit.repeat(reps.min(200_000))
    }
}

const NUMERIC_KEYS: &[&str] = &[
    "x", "y", "w", "h", "rotation", "fontSize", "maxWidth", "x1", "y1", "x2", "y2", "bend",
];

/// The shapes `data` describes, written into a document as a hostile peer could.
pub fn room(data: &[u8]) -> Doc {
    let mut input = Input(data);
    let doc = Doc::new();
    let n = usize::from(input.byte()) % MAX_SHAPES + 1;
    let mut txn = doc.transact_mut();
    for i in 0..n {
        let id = format!("s{i}");
        let kind = input.byte() % 8;
        let v = match kind {
            0 => json!({"_type": "text", "shapeId": id, "x": 0, "y": 0, "text": "t"}),
            1 => json!({"_type": "note", "shapeId": id, "x": 0, "y": 0, "text": "n"}),
            2 => {
                json!({"_type": "arrow", "shapeId": id, "x1": 0, "y1": 0, "x2": 10, "y2": 10, "text": "a"})
            }
            3 => json!({"_type": "line", "shapeId": id, "x1": 0, "y1": 0, "x2": 10, "y2": 10}),
            4 => {
                let count = usize::from(input.u16()) * 4;
                let (a, b) = (f64::from(input.byte()), f64::from(input.byte()));
                let points: Vec<_> = (0..count.max(1))
                    .map(|k| json!({"x": (k as f64 * a) % 5000.0, "y": (k as f64 * b) % 3000.0}))
                    .collect();
                json!({"_type": "pen", "shapeId": id, "points": points})
            }
            _ => {
                let geo = GEO_KINDS[input.byte() as usize % GEO_KINDS.len()];
                let fill = ["none", "semi", "solid", "pattern"][input.byte() as usize % 4];
                json!({"_type": geo, "shapeId": id, "x": 0, "y": 0, "w": 100, "h": 50, "text": "g", "fill": fill})
            }
        };
        let base = ShapeBase {
            index: format!("a{i:04}"),
            ..ShapeBase::default()
        };
        let Ok(mut shape) = from_simple(&v, &base) else {
            continue;
        };
        if input.byte() % 2 == 0 {
            shape.set_text(input.text());
        }
        write_shape(&mut txn, &shape);
        let root = txn.get_or_insert_map("shapes");
        let Some(yrs::Out::YMap(map)) = root.get(&txn, &id) else {
            continue;
        };
        for _ in 0..input.byte() % 6 {
            let key = NUMERIC_KEYS[input.byte() as usize % NUMERIC_KEYS.len()];
            let value = input.number();
            map.insert(&mut txn, key, yrs::Any::from(value));
        }
    }
    drop(txn);
    doc
}

fn within(what: &str, f: impl FnOnce(&Budget) -> Result<(), RenderError>) {
    let budget = Budget::within(BUDGET);
    let started = Instant::now();
    match f(&budget) {
        Ok(()) | Err(RenderError::TimedOut) => {}
        // The whole page of a room of absurd shapes may leave nothing to show.
        Err(RenderError::EmptyPage(_) | RenderError::InvalidArea { .. }) => {}
        Err(other) => panic!("{what}: {other}"),
    }
    let took = started.elapsed();
    assert!(took < BUDGET + OVERRUN, "{what} took {took:?}");
}

/// The check: render the room whole and in an area, to SVG and PNG, within the budget.
pub fn check(data: &[u8]) {
    let doc = room(data);
    let shapes = list_shapes(&doc.transact());
    let mut tail = Input(data.get(data.len().saturating_sub(8)..).unwrap_or_default());
    let scale = f64::from(tail.byte() % 16 + 1) / 2.0;
    within("whole page", |budget| {
        let view = View::content(&shapes, MAIN_PAGE, scale, Caps::default())?;
        render::svg_within(&shapes, MAIN_PAGE, &view, budget)?;
        render::png_within(&shapes, MAIN_PAGE, &view, render::PngEffort::Fast, budget)?;
        Ok(())
    });
    within("an area", |budget| {
        let area = Bounds::new(
            f64::from(tail.u16() as i16),
            f64::from(tail.u16() as i16),
            f64::from(tail.u16().max(1)),
            f64::from(tail.u16().max(1)),
        );
        let view = View::fit(
            area,
            scale,
            Caps {
                max_side: 1600,
                max_pixels: 1_000_000,
            },
        )?;
        render::png_within(&shapes, MAIN_PAGE, &view, render::PngEffort::Fast, budget)?;
        Ok(())
    });
}
