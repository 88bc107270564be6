//! Bounds of shapes in page coordinates (rotation, arrow bends and pen strokes included) and
//! queries by bounds. Pure functions over [`Shape`]; owns no document access.

use std::borrow::Borrow;

use serde::{Deserialize, Serialize};

use super::shape::{NOTE_SIZE, Shape, ShapeProps};

/// An axis-aligned rectangle in page px.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default, utoipa::ToSchema)]
pub struct Bounds {
    /// Left.
    pub x: f64,
    /// Top.
    pub y: f64,
    /// Width (≥ 0).
    pub w: f64,
    /// Height (≥ 0).
    pub h: f64,
}

impl Bounds {
    /// A rectangle from its left, top, width and height (negative sizes are flipped).
    pub fn new(x: f64, y: f64, w: f64, h: f64) -> Self {
        let (x, w) = if w < 0.0 { (x + w, -w) } else { (x, w) };
        let (y, h) = if h < 0.0 { (y + h, -h) } else { (y, h) };
        Bounds { x, y, w, h }
    }

    /// The smallest rectangle holding every point; `None` for no (finite) point.
    pub fn from_points(points: impl IntoIterator<Item = (f64, f64)>) -> Option<Self> {
        let mut it = points
            .into_iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite());
        let (x0, y0) = it.next()?;
        let (mut min_x, mut min_y, mut max_x, mut max_y) = (x0, y0, x0, y0);
        for (x, y) in it {
            min_x = min_x.min(x);
            min_y = min_y.min(y);
            max_x = max_x.max(x);
            max_y = max_y.max(y);
        }
        Some(Bounds::new(min_x, min_y, max_x - min_x, max_y - min_y))
    }

    /// Right edge.
    pub fn max_x(&self) -> f64 {
        self.x + self.w
    }

    /// Bottom edge.
    pub fn max_y(&self) -> f64 {
        self.y + self.h
    }

    /// Horizontal centre.
    pub fn center_x(&self) -> f64 {
        self.x + self.w / 2.0
    }

    /// Vertical centre.
    pub fn center_y(&self) -> f64 {
        self.y + self.h / 2.0
    }

    /// The smallest rectangle holding both.
    pub fn union(&self, other: &Bounds) -> Bounds {
        let x = self.x.min(other.x);
        let y = self.y.min(other.y);
        Bounds::new(
            x,
            y,
            self.max_x().max(other.max_x()) - x,
            self.max_y().max(other.max_y()) - y,
        )
    }

    /// True if the rectangles overlap or touch.
    pub fn intersects(&self, other: &Bounds) -> bool {
        self.x <= other.max_x()
            && other.x <= self.max_x()
            && self.y <= other.max_y()
            && other.y <= self.max_y()
    }

    /// True if `other` lies entirely inside.
    pub fn contains(&self, other: &Bounds) -> bool {
        other.x >= self.x
            && other.y >= self.y
            && other.max_x() <= self.max_x()
            && other.max_y() <= self.max_y()
    }

    /// Grown by `pad` on every side.
    pub fn expand(&self, pad: f64) -> Bounds {
        Bounds::new(
            self.x - pad,
            self.y - pad,
            self.w + 2.0 * pad,
            self.h + 2.0 * pad,
        )
    }
}

/// Rotates `(px, py)` by `angle` radians (clockwise in screen coordinates) about `(ox, oy)`.
pub fn rotate_point(px: f64, py: f64, ox: f64, oy: f64, angle: f64) -> (f64, f64) {
    let (s, c) = angle.sin_cos();
    let (dx, dy) = (px - ox, py - oy);
    (ox + dx * c - dy * s, oy + dx * s + dy * c)
}

/// Estimated size of a text shape: tldraw measures glyphs in the browser; the server uses an
/// average glyph width of 0.6 em and a line height of 1.35 em, wrapping at `maxWidth`.
pub fn text_size(text: &str, font_size: f64, max_width: Option<f64>) -> (f64, f64) {
    let glyph = font_size * 0.6;
    let mut lines = 0.0_f64;
    let mut widest = 0.0_f64;
    for line in text.split('\n') {
        let natural = line.chars().count() as f64 * glyph;
        match max_width {
            Some(mw) if mw > 0.0 && natural > mw => {
                lines += (natural / mw).ceil();
                widest = widest.max(mw);
            }
            _ => {
                lines += 1.0;
                widest = widest.max(natural);
            }
        }
    }
    (widest.max(glyph), lines.max(1.0) * font_size * 1.35)
}

/// The unrotated size `(w, h)` of a box-like shape (geo, text, note); `None` for connectors and
/// strokes, whose geometry is their points.
pub fn box_size(shape: &Shape) -> Option<(f64, f64)> {
    match &shape.props {
        ShapeProps::Geo { w, h, .. } => Some((*w, *h)),
        ShapeProps::Text {
            text,
            font_size,
            max_width,
            ..
        } => Some(text_size(text, *font_size, *max_width)),
        ShapeProps::Note { .. } => Some((NOTE_SIZE, NOTE_SIZE)),
        ShapeProps::Connector(_) | ShapeProps::Draw { .. } => None,
    }
}

/// The page-coordinate points that outline a shape: rotated box corners, connector ends plus
/// the bend's apex, or the stroke's points.
pub fn outline(shape: &Shape) -> Vec<(f64, f64)> {
    match &shape.props {
        ShapeProps::Connector(c) => {
            let mut pts = vec![(c.x1, c.y1), (c.x2, c.y2)];
            if c.bend != 0.0 {
                let (mx, my) = ((c.x1 + c.x2) / 2.0, (c.y1 + c.y2) / 2.0);
                let (dx, dy) = (c.x2 - c.x1, c.y2 - c.y1);
                let len = (dx * dx + dy * dy).sqrt();
                if len > 0.0 {
                    // Positive bend bows to the left of travel on screen, as the web demo
                    // draws it (see `render::svg::bend_control`).
                    pts.push((mx + dy / len * c.bend, my - dx / len * c.bend));
                }
            }
            pts
        }
        ShapeProps::Draw { points } => {
            let pts: Vec<_> = points
                .iter()
                .map(|(px, py)| {
                    rotate_point(shape.x + px, shape.y + py, shape.x, shape.y, shape.rotation)
                })
                .collect();
            if pts.is_empty() {
                vec![(shape.x, shape.y)]
            } else {
                pts
            }
        }
        _ => {
            let (w, h) = box_size(shape).unwrap_or((0.0, 0.0));
            [(0.0, 0.0), (w, 0.0), (w, h), (0.0, h)]
                .iter()
                .map(|(dx, dy)| {
                    rotate_point(shape.x + dx, shape.y + dy, shape.x, shape.y, shape.rotation)
                })
                .collect()
        }
    }
}

/// The page bounds of a shape.
pub fn shape_bounds(shape: &Shape) -> Bounds {
    Bounds::from_points(outline(shape)).unwrap_or(Bounds::new(shape.x, shape.y, 0.0, 0.0))
}

/// The largest coordinate magnitude a page's extent reaches (a billion px: far past anything
/// drawn by hand, still exact in the rasterizer's `f32`).
pub const MAX_COORD: f64 = 1e9;

/// A shape's bounds as far as they count for a page's extent: `None` when they are not finite
/// (a `NaN` or an infinity cannot be placed), clamped to ±[`MAX_COORD`] otherwise, so that one
/// absurd shape (at `1e308`) cannot make the page's area unrenderable.
pub fn extent_bounds(shape: &Shape) -> Option<Bounds> {
    let b = shape_bounds(shape);
    if ![b.x, b.y, b.w, b.h].iter().all(|v| v.is_finite()) {
        return None;
    }
    let clamp = |v: f64| v.clamp(-MAX_COORD, MAX_COORD);
    let (x, y) = (clamp(b.x), clamp(b.y));
    Some(Bounds::new(
        x,
        y,
        clamp(b.max_x()) - x,
        clamp(b.max_y()) - y,
    ))
}

/// The union of the bounds of `shapes`; `None` for an empty slice.
pub fn union_bounds<'a>(shapes: impl IntoIterator<Item = &'a Shape>) -> Option<Bounds> {
    shapes
        .into_iter()
        .map(shape_bounds)
        .reduce(|a, b| a.union(&b))
}

/// The shapes on `page_id` whose bounds intersect `area`, in the order given (owned shapes or
/// the live view's shared ones).
pub fn shapes_in_bounds<'a, S: Borrow<Shape>>(
    shapes: &'a [S],
    page_id: &str,
    area: &Bounds,
) -> Vec<&'a Shape> {
    shapes
        .iter()
        .map(Borrow::borrow)
        .filter(|s| s.page_id == page_id && shape_bounds(s).intersects(area))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canvas::shape::Connector;

    fn geo(x: f64, y: f64, w: f64, h: f64, rotation: f64) -> Shape {
        Shape {
            id: "s".into(),
            type_name: "rectangle".into(),
            page_id: "page:main".into(),
            x,
            y,
            rotation,
            index: String::new(),
            color: "black".into(),
            fill: "none".into(),
            note: String::new(),
            locked: false,
            created_by: String::new(),
            props: ShapeProps::Geo {
                w,
                h,
                text: String::new(),
                text_align: "middle".into(),
            },
        }
    }

    fn close(a: Bounds, b: Bounds) -> bool {
        (a.x - b.x).abs() < 1e-9
            && (a.y - b.y).abs() < 1e-9
            && (a.w - b.w).abs() < 1e-9
            && (a.h - b.h).abs() < 1e-9
    }

    #[test]
    fn rotated_rectangle_bounds() {
        let b = shape_bounds(&geo(0.0, 0.0, 100.0, 50.0, std::f64::consts::FRAC_PI_2));
        assert!(close(b, Bounds::new(-50.0, 0.0, 50.0, 100.0)), "{b:?}");
    }

    #[test]
    fn arrow_bounds_include_bend_and_pen_points() {
        let mut a = geo(0.0, 0.0, 0.0, 0.0, 0.0);
        a.props = ShapeProps::Connector(Connector {
            x1: 0.0,
            y1: 0.0,
            x2: 100.0,
            y2: 0.0,
            bend: 20.0,
            ..Default::default()
        });
        assert!(close(
            shape_bounds(&a),
            Bounds::new(0.0, -20.0, 100.0, 20.0)
        ));
        let mut p = geo(10.0, 10.0, 0.0, 0.0, 0.0);
        p.props = ShapeProps::Draw {
            points: vec![(0.0, 5.0), (30.0, 0.0), (10.0, 40.0)],
        };
        assert!(close(shape_bounds(&p), Bounds::new(10.0, 10.0, 30.0, 40.0)));
    }

    #[test]
    fn queries_by_bounds() {
        let shapes = vec![
            geo(0.0, 0.0, 10.0, 10.0, 0.0),
            geo(500.0, 500.0, 10.0, 10.0, 0.0),
        ];
        let area = Bounds::new(-5.0, -5.0, 20.0, 20.0);
        assert_eq!(shapes_in_bounds(&shapes, "page:main", &area).len(), 1);
        assert_eq!(shapes_in_bounds(&shapes, "page:other", &area).len(), 0);
    }

    #[test]
    fn text_wraps_at_max_width() {
        let (w, h) = text_size("aaaaaaaaaa", 10.0, Some(30.0));
        assert_eq!(w, 30.0);
        assert!((h - 2.0 * 13.5).abs() < 1e-9);
    }
}
