//! Shapes → SVG text, drawn as the web demo draws them (`web-demo/src/render.ts`): geo outlines
//! with their fill and label, sticky notes with a shadow, free text, arrows and lines (bent
//! through a quadratic curve, arrowheads as filled triangles so every renderer draws them the
//! same), and pen strokes. Each shape is one `<g data-shape-id data-type>` in z-order; box
//! shapes and strokes carry `translate(x,y) rotate(deg)` (rotation about the top-left, as
//! tldraw does), connectors are in page coordinates.
//!
//! Every shape is drawn within bounds whatever a peer wrote (docs/document-schema.md: the
//! document is untrusted): text is laid out only where the view can see it (lines above or
//! below the area are skipped, an over-long line keeps only the glyphs over the area, at most
//! [`MAX_SHAPE_GLYPHS`] a shape, and text smaller than [`MIN_TEXT_PX`] on the image is drawn
//! as a faint bar), a pen stroke keeps at most [`MAX_POINTS`] points (those closer than half
//! an image pixel merge first), and a whole document stops growing at [`MAX_SVG_BYTES`] (the
//! shapes after it are left out). The [`Budget`] is checked per shape, per text line and per
//! batch of points.
//!
//! Owns the SVG vocabulary only; which shapes and which area come from [`super`].

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::budget::Budget;
use super::geo::{geo_marks, geo_path};
use super::palette::{LABEL_INK, Paint, fill_paint, known_color, swatch};
use super::text::{GLYPH_EM, LINE_EM, wrap};
use super::{RenderError, View, num};
use crate::canvas::geometry::{Bounds, rotate_point, text_size};
use crate::canvas::shape::{Connector, NOTE_SIZE, Shape, ShapeProps};

/// Most glyphs drawn of one shape's text; the lines past it are left out.
pub const MAX_SHAPE_GLYPHS: usize = 20_000;
/// Most glyphs of one line laid out as written; a longer line keeps only the glyphs over the
/// area, placed by the estimated glyph width.
pub const MAX_LINE_GLYPHS: usize = 1_000;
/// Text whose size on the image is below this many pixels is not read by anyone (nor by a
/// model): it is "greeked", drawn as a faint bar over its estimated extent instead of glyphs,
/// as design tools draw text when zoomed far out. Shaping and filling the glyphs of thousands
/// of such labels was most of the time of a whole-page export of a large room
/// (docs/benchmarks.md).
pub const MIN_TEXT_PX: f64 = 8.0;
/// Side of the hatch pattern's cell in page px.
const HATCH_PX: f64 = 8.0;
/// A hatch whose cell is smaller than this many image pixels is drawn as its tint.
const MIN_HATCH_PX: f64 = 4.0;
/// Most points of one pen stroke that are drawn.
pub const MAX_POINTS: usize = 2_000;
/// Most bytes of one SVG document; the shapes past it are left out.
pub const MAX_SVG_BYTES: usize = 24 * 1024 * 1024;
/// Points of a stroke walked between two checks of the budget.
const POINT_BATCH: usize = 4_096;

/// Stroke width of outlines, connectors and pen strokes (the demo's).
pub const STROKE_WIDTH: f64 = 3.5;
/// The font every text is drawn with (shipped in the binary for rasterizing).
pub const FONT_FAMILY: &str = "DejaVu Sans";
/// Label size on geo shapes.
const GEO_LABEL_PX: f64 = 22.0;
/// Text size on sticky notes.
const NOTE_TEXT_PX: f64 = 20.0;
/// Label size on arrows and lines.
const LINK_LABEL_PX: f64 = 18.0;
/// Length of an arrowhead along the arrow (the demo's marker: 5 stroke widths).
const ARROWHEAD_PX: f64 = STROKE_WIDTH * 5.0;
/// The page background.
pub const BACKGROUND: &str = "#ffffff";

/// XML-escapes text for content and attribute values.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 forbids most control characters, even escaped.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

/// Appends `<name a="v" …/>` (or an opening tag when `open`).
fn tag(out: &mut String, name: &str, attrs: &[(&str, String)], open: bool) {
    out.push('<');
    out.push_str(name);
    for (k, v) in attrs {
        let _ = write!(out, " {k}=\"{}\"", esc(v));
    }
    out.push_str(if open { ">" } else { "/>" });
}

fn s(v: &str) -> String {
    v.to_owned()
}

/// A whole SVG document of `shapes` (already filtered, in z-order) for `view`, with its
/// background; the shapes past [`MAX_SVG_BYTES`] are left out.
pub fn document(shapes: &[&Shape], view: &View, budget: &Budget) -> Result<String, RenderError> {
    let mut out = String::with_capacity(256 + shapes.len().min(100_000) * 320);
    open(&mut out, shapes, view);
    background(&mut out, view);
    let mut left_out = 0usize;
    for (i, shape) in shapes.iter().enumerate() {
        budget.check()?;
        if out.len() >= MAX_SVG_BYTES {
            left_out = shapes.len() - i;
            break;
        }
        render_shape(&mut out, shape, view, budget)?;
    }
    if left_out > 0 {
        tracing::warn!(
            left_out,
            max_bytes = MAX_SVG_BYTES,
            "render: the SVG reached its size cap; the shapes after it are left out"
        );
    }
    close(&mut out);
    Ok(out)
}

/// Opens an SVG document for `view` (the `<svg>` tag and the patterns `shapes` use).
pub fn open(out: &mut String, shapes: &[&Shape], view: &View) {
    let a = view.area;
    tag(
        out,
        "svg",
        &[
            ("xmlns", s("http://www.w3.org/2000/svg")),
            ("width", view.width.to_string()),
            ("height", view.height.to_string()),
            (
                "viewBox",
                format!("{} {} {} {}", num(a.x), num(a.y), num(a.w), num(a.h)),
            ),
        ],
        true,
    );
    defs(out, shapes);
}

/// Closes a document [`open`] started.
pub fn close(out: &mut String) {
    out.push_str("</svg>");
}

/// The page background over the whole view.
fn background(out: &mut String, view: &View) {
    let a = view.area;
    tag(
        out,
        "rect",
        &[
            ("data-role", s("background")),
            ("x", num(a.x)),
            ("y", num(a.y)),
            ("width", num(a.w)),
            ("height", num(a.h)),
            ("fill", s(BACKGROUND)),
        ],
        false,
    );
}

/// One hatch pattern per colour that a `pattern` fill uses.
fn defs(out: &mut String, shapes: &[&Shape]) {
    let hatched: BTreeSet<&str> = shapes
        .iter()
        .filter(|s| s.fill == "pattern" && matches!(s.props, ShapeProps::Geo { .. }))
        .map(|s| known_color(&s.color))
        .collect();
    if hatched.is_empty() {
        return;
    }
    out.push_str("<defs>");
    for color in hatched {
        let sw = swatch(color);
        tag(
            out,
            "pattern",
            &[
                ("id", format!("pattern-{color}")),
                ("width", s("8")),
                ("height", s("8")),
                ("patternUnits", s("userSpaceOnUse")),
                ("patternTransform", s("rotate(45)")),
            ],
            true,
        );
        tag(
            out,
            "rect",
            &[("width", s("8")), ("height", s("8")), ("fill", s(sw.semi))],
            false,
        );
        tag(
            out,
            "line",
            &[
                ("x1", s("0")),
                ("y1", s("0")),
                ("x2", s("0")),
                ("y2", s("8")),
                ("stroke", s(sw.pattern)),
                ("stroke-width", s("3")),
            ],
            false,
        );
        out.push_str("</pattern>");
    }
    out.push_str("</defs>");
}

/// The page area `view` shows, in the coordinates of `shape`'s own drawing (translated to its
/// origin and turned back by its rotation; connectors draw in page coordinates).
fn local_area(shape: &Shape, view: &View) -> Bounds {
    let a = view.area;
    if matches!(shape.props, ShapeProps::Connector(_)) {
        return a;
    }
    let rotation = if shape.rotation.is_finite() {
        shape.rotation
    } else {
        0.0
    };
    let corners = [
        (a.x, a.y),
        (a.max_x(), a.y),
        (a.max_x(), a.max_y()),
        (a.x, a.max_y()),
    ]
    .map(|(px, py)| {
        let (rx, ry) = rotate_point(px, py, shape.x, shape.y, -rotation);
        (rx - shape.x, ry - shape.y)
    });
    Bounds::from_points(corners).unwrap_or(a)
}

/// Appends one shape's `<g>`: everything it draws, bounded as the module says.
pub fn render_shape(
    out: &mut String,
    shape: &Shape,
    view: &View,
    budget: &Budget,
) -> Result<(), RenderError> {
    let mut label = TextCtx {
        view,
        budget,
        local: local_area(shape, view),
        glyphs_left: MAX_SHAPE_GLYPHS,
    };
    let mut attrs = vec![
        ("data-shape-id", shape.id.clone()),
        ("data-type", shape.type_name.clone()),
    ];
    if !matches!(shape.props, ShapeProps::Connector(_)) {
        let mut t = format!("translate({},{})", num(shape.x), num(shape.y));
        if shape.rotation != 0.0 && shape.rotation.is_finite() {
            let _ = write!(t, " rotate({})", num(shape.rotation.to_degrees()));
        }
        attrs.push(("transform", t));
    }
    tag(out, "g", &attrs, true);
    let ink = swatch(known_color(&shape.color));
    match &shape.props {
        ShapeProps::Geo {
            w,
            h,
            text,
            text_align,
        } => {
            let mut body = vec![("d", geo_path(&shape.type_name, *w, *h))];
            match fill_paint(&shape.color, &shape.fill) {
                Paint::None => body.push(("fill", s("none"))),
                Paint::Flat(c, opacity) => {
                    body.push(("fill", s(c)));
                    if opacity < 1.0 {
                        body.push(("fill-opacity", num(opacity)));
                    }
                }
                // A hatch finer than a few image pixels is a blur that costs a sampled
                // pattern per pixel: its tint says the same.
                Paint::Hatch(color) if view.scale * HATCH_PX < MIN_HATCH_PX => {
                    body.push(("fill", s(swatch(&color).semi)));
                }
                Paint::Hatch(color) => body.push(("fill", format!("url(#pattern-{color})"))),
            }
            body.extend(stroke(ink.solid));
            body.push(("stroke-linejoin", s("round")));
            tag(out, "path", &body, false);
            if let Some(marks) = geo_marks(&shape.type_name, *w, *h) {
                let mut m = vec![("d", marks), ("fill", s("none"))];
                m.extend(stroke(ink.solid));
                m.push(("stroke-linejoin", s("round")));
                tag(out, "path", &m, false);
            }
            if !text.is_empty() {
                let lines = wrap(text, GEO_LABEL_PX, Some((w - 16.0).max(GEO_LABEL_PX)));
                let anchor = anchor(text_align);
                let x = match anchor {
                    "start" => 8.0,
                    "end" => w - 8.0,
                    _ => w / 2.0,
                };
                let y = h / 2.0 - lines.len() as f64 * GEO_LABEL_PX * LINE_EM / 2.0;
                label.lines(out, &lines, (x, y), GEO_LABEL_PX, anchor, LABEL_INK)?;
            }
        }
        ShapeProps::Note { text } => {
            let paper = |x: &str, y: &str, fill: &str| {
                vec![
                    ("x", s(x)),
                    ("y", s(y)),
                    ("width", num(NOTE_SIZE)),
                    ("height", num(NOTE_SIZE)),
                    ("rx", s("4")),
                    ("fill", s(fill)),
                ]
            };
            let mut shadow = paper("2", "4", "#000000");
            shadow.push(("fill-opacity", s("0.12")));
            tag(out, "rect", &shadow, false);
            tag(out, "rect", &paper("0", "0", ink.note), false);
            let lines = wrap(text, NOTE_TEXT_PX, Some(NOTE_SIZE - 24.0));
            let y = (NOTE_SIZE / 2.0 - lines.len() as f64 * NOTE_TEXT_PX * LINE_EM / 2.0).max(12.0);
            label.lines(
                out,
                &lines,
                (NOTE_SIZE / 2.0, y),
                NOTE_TEXT_PX,
                "middle",
                LABEL_INK,
            )?;
        }
        ShapeProps::Text {
            text,
            font_size,
            max_width,
            text_align,
        } => {
            let lines = wrap(text, *font_size, *max_width);
            let (w, _) = text_size(text, *font_size, *max_width);
            let anchor = anchor(text_align);
            let x = match anchor {
                "start" => 0.0,
                "end" => w,
                _ => w / 2.0,
            };
            label.lines(out, &lines, (x, 0.0), *font_size, anchor, ink.solid)?;
        }
        ShapeProps::Connector(c) => {
            let mut body = vec![("d", link_path(c)), ("fill", s("none"))];
            body.extend(stroke(ink.solid));
            tag(out, "path", &body, false);
            if shape.type_name == "arrow" {
                tag(
                    out,
                    "path",
                    &[
                        ("data-role", s("arrowhead")),
                        ("d", arrowhead(c)),
                        ("fill", s(ink.solid)),
                    ],
                    false,
                );
            }
            if !c.text.is_empty() {
                let (mx, my) = bend_apex(c);
                let lines = wrap(&c.text, LINK_LABEL_PX, Some(240.0));
                label.lines(
                    out,
                    &lines,
                    (mx, my - 12.0),
                    LINK_LABEL_PX,
                    "middle",
                    LABEL_INK,
                )?;
            }
        }
        ShapeProps::Draw { points } => {
            let tolerance = 0.5 / view.scale;
            let d = draw_path(&thin_points(points, tolerance, budget)?);
            let mut body = vec![("d", d), ("fill", s("none"))];
            body.extend(stroke(ink.solid));
            body.push(("stroke-linejoin", s("round")));
            tag(out, "path", &body, false);
        }
    }
    out.push_str("</g>");
    Ok(())
}

fn stroke(color: &str) -> [(&'static str, String); 3] {
    [
        ("stroke", s(color)),
        ("stroke-width", num(STROKE_WIDTH)),
        ("stroke-linecap", s("round")),
    ]
}

fn anchor(align: &str) -> &'static str {
    match align {
        "start" | "left" => "start",
        "end" | "right" => "end",
        _ => "middle",
    }
}

/// What bounds the text of one shape: the view, the budget, the area in the shape's
/// coordinates and the glyphs it may still draw.
struct TextCtx<'a> {
    view: &'a View,
    budget: &'a Budget,
    local: Bounds,
    glyphs_left: usize,
}

impl TextCtx<'_> {
    /// Lines of text whose first baseline is one em below `y`; only the lines and glyphs over
    /// the area are laid out.
    fn lines(
        &mut self,
        out: &mut String,
        lines: &[String],
        (x, y): (f64, f64),
        size: f64,
        anchor: &str,
        fill: &str,
    ) -> Result<(), RenderError> {
        if !(size > 0.0 && size.is_finite() && x.is_finite() && y.is_finite()) || lines.is_empty() {
            return Ok(());
        }
        let step = size * LINE_EM;
        let local = self.local;
        // The baseline of line i is y + size + i·step; a line shows when its glyphs (one em
        // above the baseline, a third below) meet the area.
        let first = ((local.y - y - size * 1.4) / step).floor().max(0.0);
        let last = ((local.max_y() - y) / step).ceil().max(0.0);
        if first >= lines.len() as f64 || !first.is_finite() || !last.is_finite() {
            return Ok(());
        }
        let (first, last) = (first as usize, (last as usize).min(lines.len() - 1));
        if first > last {
            return Ok(());
        }
        if size * self.view.scale < MIN_TEXT_PX {
            self.bar(
                out,
                &lines[first..=last],
                (x, y + first as f64 * step),
                size,
                anchor,
                fill,
            );
            return Ok(());
        }
        tag(
            out,
            "text",
            &[
                ("x", num(x)),
                ("y", num(y)),
                ("font-size", num(size)),
                ("font-family", s(FONT_FAMILY)),
                ("fill", s(fill)),
                ("text-anchor", s(anchor)),
            ],
            true,
        );
        let mut baseline = y;
        for (i, line) in lines.iter().enumerate().take(last + 1).skip(first) {
            self.budget.check()?;
            if self.glyphs_left == 0 {
                break;
            }
            let target = y + size + i as f64 * step;
            let dy = target - baseline;
            baseline = target;
            let count = line.chars().count();
            if count <= MAX_LINE_GLYPHS.min(self.glyphs_left) {
                self.glyphs_left -= count;
                tag(out, "tspan", &[("x", num(x)), ("dy", num(dy))], true);
                // An empty line still advances (a space keeps the tspan).
                out.push_str(&esc(if line.is_empty() { " " } else { line }));
            } else {
                // Too long to lay out whole: the glyphs over the area, placed by the estimated
                // width from where the whole line would start.
                let glyph = size * GLYPH_EM;
                let width = count as f64 * glyph;
                let start = match anchor {
                    "start" => x,
                    "end" => x - width,
                    _ => x - width / 2.0,
                };
                let from = ((local.x - start) / glyph).floor() - 2.0;
                let to = ((local.max_x() - start) / glyph).ceil() + 2.0;
                let from = from.clamp(0.0, count as f64) as usize;
                let to = (to.clamp(0.0, count as f64) as usize)
                    .min(from + MAX_LINE_GLYPHS.min(self.glyphs_left));
                self.glyphs_left -= to - from;
                let shown: String = line.chars().skip(from).take(to - from).collect();
                tag(
                    out,
                    "tspan",
                    &[
                        ("x", num(start + from as f64 * glyph)),
                        ("dy", num(dy)),
                        ("text-anchor", s("start")),
                    ],
                    true,
                );
                out.push_str(&esc(if shown.is_empty() { " " } else { &shown }));
            }
            out.push_str("</tspan>");
        }
        out.push_str("</text>");
        Ok(())
    }

    /// Text too small to read: one faint bar over the estimated extent of `lines`, whose
    /// first line's top is `y`.
    fn bar(
        &self,
        out: &mut String,
        lines: &[String],
        (x, y): (f64, f64),
        size: f64,
        anchor: &str,
        fill: &str,
    ) {
        let widest = lines
            .iter()
            .map(|l| l.len())
            .max()
            .unwrap_or(0)
            .min(1 << 24) as f64
            * size
            * GLYPH_EM;
        let left = match anchor {
            "start" => x,
            "end" => x - widest,
            _ => x - widest / 2.0,
        };
        let height = lines.len() as f64 * size * LINE_EM;
        tag(
            out,
            "rect",
            &[
                ("data-role", s("text-bar")),
                ("x", num(left)),
                ("y", num(y)),
                ("width", num(widest)),
                ("height", num(height)),
                ("fill", s(fill)),
                ("fill-opacity", s("0.25")),
            ],
            false,
        );
    }
}

/// The points of a stroke worth drawing: finite ones, each at least `tolerance` from the last
/// kept (the last point always kept), then every n-th so that at most [`MAX_POINTS`] remain.
fn thin_points(
    points: &[(f64, f64)],
    tolerance: f64,
    budget: &Budget,
) -> Result<Vec<(f64, f64)>, RenderError> {
    let tolerance = if tolerance.is_finite() {
        tolerance
    } else {
        0.0
    };
    let mut kept: Vec<(f64, f64)> = Vec::with_capacity(points.len().min(MAX_POINTS * 2));
    for (i, &(x, y)) in points.iter().enumerate() {
        if i % POINT_BATCH == 0 {
            budget.check()?;
        }
        if !(x.is_finite() && y.is_finite()) {
            continue;
        }
        let far = kept
            .last()
            .is_none_or(|&(lx, ly)| (x - lx).abs().max((y - ly).abs()) >= tolerance);
        if far || i + 1 == points.len() {
            kept.push((x, y));
        }
    }
    if kept.len() > MAX_POINTS {
        let stride = kept.len().div_ceil(MAX_POINTS);
        let last = kept[kept.len() - 1];
        kept = kept.into_iter().step_by(stride).collect();
        if kept.last() != Some(&last) {
            kept.push(last);
        }
    }
    Ok(kept)
}

/// The control point of a bent connector: the curve passes `bend` px off the midpoint, to the
/// left of the direction of travel on screen (positive bend bows an arrow that points right
/// upwards), so the control sits at twice that.
pub fn bend_control(c: &Connector) -> (f64, f64) {
    let (mx, my) = ((c.x1 + c.x2) / 2.0, (c.y1 + c.y2) / 2.0);
    let (dx, dy) = (c.x2 - c.x1, c.y2 - c.y1);
    let len = dx.hypot(dy);
    if len == 0.0 || c.bend == 0.0 {
        return (mx, my);
    }
    (mx + dy / len * c.bend * 2.0, my - dx / len * c.bend * 2.0)
}

/// The point the bent curve passes through halfway (where labels sit).
pub fn bend_apex(c: &Connector) -> (f64, f64) {
    let (cx, cy) = bend_control(c);
    let (mx, my) = ((c.x1 + c.x2) / 2.0, (c.y1 + c.y2) / 2.0);
    (mx + (cx - mx) / 2.0, my + (cy - my) / 2.0)
}

/// The path of an arrow or a line: straight, or a quadratic curve through [`bend_apex`].
pub fn link_path(c: &Connector) -> String {
    if c.bend == 0.0 {
        return format!("M{},{} L{},{}", num(c.x1), num(c.y1), num(c.x2), num(c.y2));
    }
    let (cx, cy) = bend_control(c);
    format!(
        "M{},{} Q{},{} {},{}",
        num(c.x1),
        num(c.y1),
        num(cx),
        num(cy),
        num(c.x2),
        num(c.y2)
    )
}

/// A filled triangle whose tip is the arrow's end, along the curve's tangent there.
fn arrowhead(c: &Connector) -> String {
    let (fx, fy) = if c.bend == 0.0 {
        (c.x1, c.y1)
    } else {
        bend_control(c)
    };
    let (dx, dy) = (c.x2 - fx, c.y2 - fy);
    let len = dx.hypot(dy);
    let (ux, uy) = if len > 0.0 {
        (dx / len, dy / len)
    } else {
        (1.0, 0.0)
    };
    let (bx, by) = (c.x2 - ux * ARROWHEAD_PX, c.y2 - uy * ARROWHEAD_PX);
    let half = ARROWHEAD_PX / 2.0;
    format!(
        "M{},{} L{},{} L{},{} Z",
        num(c.x2),
        num(c.y2),
        num(bx - uy * half),
        num(by + ux * half),
        num(bx + uy * half),
        num(by - ux * half)
    )
}

/// The path through a pen stroke's points (relative to the shape's origin); one point is a dot.
pub fn draw_path(points: &[(f64, f64)]) -> String {
    let mut d = String::new();
    for (i, (x, y)) in points.iter().enumerate() {
        let _ = write!(
            d,
            "{}{},{}",
            if i == 0 { "M" } else { " L" },
            num(*x),
            num(*y)
        );
    }
    if let [(x, y)] = points {
        let _ = write!(d, " L{},{}", num(x + 0.1), num(*y));
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(bend: f64) -> Connector {
        Connector {
            x1: 0.0,
            y1: 0.0,
            x2: 100.0,
            y2: 0.0,
            bend,
            ..Default::default()
        }
    }

    #[test]
    fn positive_bend_bows_a_rightward_arrow_upwards() {
        assert_eq!(bend_apex(&link(20.0)), (50.0, -20.0));
        assert_eq!(link_path(&link(20.0)), "M0,0 Q50,-40 100,0");
        assert_eq!(link_path(&link(0.0)), "M0,0 L100,0");
        // The head of a straight arrow points along it: its tip is the end.
        assert_eq!(arrowhead(&link(0.0)), "M100,0 L82.5,8.75 L82.5,-8.75 Z");
    }

    #[test]
    fn text_is_escaped_and_strokes_have_dots() {
        assert_eq!(esc("a<b & \"c\"\u{1}"), "a&lt;b &amp; &quot;c&quot;");
        assert_eq!(draw_path(&[(1.0, 2.0)]), "M1,2 L1.1,2");
        assert_eq!(draw_path(&[(0.0, 0.0), (3.0, 4.0)]), "M0,0 L3,4");
    }
}
