//! `pen` `{points: [{x, y}…], style: smooth|straight, closed, color, fill}`: draws a freehand
//! stroke through the points, interpolated every [`STEP`] px: straight segments, or a
//! Catmull-Rom curve for `smooth`; `closed` joins the end to the start. The stroke is a `draw`
//! shape with a generated id (`pen`, `pen-1`, …), capped at `MAX_PEN_POINTS` points.

use serde_json::{Value, json};
use yrs::TransactionMut;

use crate::agent::actions::canvas::create::create_shape;
use crate::agent::actions::common::{
    ClosedSet, choice, closed_schema, closed_set, id_taken, missing, opt_bool, schema,
};
use crate::agent::actions::{ActionCtx, ActionError, CanvasAction, Fields, Parsed};
use crate::canvas::Shape;
use crate::canvas::coerce::{clamp_coord, coerce_number};
use crate::canvas::format::MAX_PEN_POINTS;
use crate::canvas::geometry::Bounds;
use crate::canvas::ids::{IdRenames, ensure_shape_id_is_unique};
use crate::canvas::schema::{normalize_color, normalize_fill};
use crate::canvas::shape::ShapeProps;
use crate::ids::ShapeId;

/// The `pen` action.
pub struct Pen;

closed_set!(
    /// How the stroke joins its points.
    pub PenStyle {
        /// A Catmull-Rom curve (the default).
        Smooth = "smooth",
        /// Straight segments.
        Straight = "straight",
    }
);

closed_set!(
    /// A shape's fill (the document's fill names).
    pub Fill {
        /// No fill.
        Unfilled = "none",
        /// Translucent.
        Semi = "semi",
        /// Opaque.
        Solid = "solid",
        /// Hatched.
        Pattern = "pattern",
    }
);

/// The arguments of `pen`.
#[derive(Debug, Clone, PartialEq)]
pub struct PenArgs {
    /// The stroke's generated id (`pen`, `pen-1`, …).
    pub id: ShapeId,
    /// The points given, in page px (at least 2, at most `MAX_PEN_POINTS`).
    pub points: Vec<(f64, f64)>,
    /// How they are joined.
    pub style: PenStyle,
    /// Whether the end joins the start.
    pub closed: bool,
    /// A known color name; unknown or absent: the document's default.
    pub color: Option<&'static str>,
    /// A known fill; unknown or absent: none.
    pub fill: Option<Fill>,
}

/// Distance between interpolated points, in px.
pub const STEP: f64 = 10.0;

fn segments_for(a: (f64, f64), b: (f64, f64)) -> usize {
    let len = ((b.0 - a.0).powi(2) + (b.1 - a.1).powi(2)).sqrt();
    // Bounded: coordinates are clamped, and the total is capped below anyway.
    ((len / STEP).ceil() as usize).clamp(1, MAX_PEN_POINTS)
}

/// The interpolated stroke through `points`.
pub fn interpolate(points: &[(f64, f64)], smooth: bool, closed: bool) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = points.to_vec();
    if closed && let Some(first) = points.first() {
        pts.push(*first);
    }
    let Some(&first) = pts.first() else {
        return Vec::new();
    };
    let mut out = vec![first];
    for i in 0..pts.len().saturating_sub(1) {
        let (p1, p2) = (pts[i], pts[i + 1]);
        let p0 = if i > 0 {
            pts[i - 1]
        } else if closed && pts.len() > 2 {
            pts[pts.len() - 2]
        } else {
            p1
        };
        let p3 = if i + 2 < pts.len() {
            pts[i + 2]
        } else if closed && pts.len() > 2 {
            pts[1]
        } else {
            p2
        };
        let n = segments_for(p1, p2);
        for k in 1..=n {
            let t = k as f64 / n as f64;
            let p = if smooth {
                catmull_rom(p0, p1, p2, p3, t)
            } else {
                (p1.0 + (p2.0 - p1.0) * t, p1.1 + (p2.1 - p1.1) * t)
            };
            out.push(p);
        }
        if out.len() > 4 * MAX_PEN_POINTS {
            break;
        }
    }
    decimate(out, MAX_PEN_POINTS)
}

fn catmull_rom(
    p0: (f64, f64),
    p1: (f64, f64),
    p2: (f64, f64),
    p3: (f64, f64),
    t: f64,
) -> (f64, f64) {
    let (t2, t3) = (t * t, t * t * t);
    let f = |a: f64, b: f64, c: f64, d: f64| {
        0.5 * (2.0 * b
            + (c - a) * t
            + (2.0 * a - 5.0 * b + 4.0 * c - d) * t2
            + (3.0 * b - a - 3.0 * c + d) * t3)
    };
    (f(p0.0, p1.0, p2.0, p3.0), f(p0.1, p1.1, p2.1, p3.1))
}

fn decimate(points: Vec<(f64, f64)>, max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max || max < 2 {
        return points;
    }
    let last = points.len() - 1;
    (0..max)
        .filter_map(|i| points.get(i * last / (max - 1)).copied())
        .collect()
}

fn read_points(o: &Fields) -> Vec<(f64, f64)> {
    let Some(Value::Array(items)) = o.get("points") else {
        return Vec::new();
    };
    items
        .iter()
        .take(MAX_PEN_POINTS)
        .filter_map(|p| {
            let x = p.get("x").and_then(coerce_number)?;
            let y = p.get("y").and_then(coerce_number)?;
            Some((clamp_coord(x), clamp_coord(y)))
        })
        .collect()
}

impl CanvasAction for Pen {
    fn name(&self) -> &'static str {
        "pen"
    }

    fn schema(&self) -> Value {
        schema(
            "pen",
            "Draw a freehand stroke through points.",
            json!({
                "points": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}, "minItems": 2},
                "style": closed_schema::<PenStyle>(),
                "closed": {"type": "boolean"},
                "color": {"type": "string"},
                "fill": closed_schema::<Fill>(),
            }),
            &["points"],
        )
    }

    fn parse(
        &self,
        txn: &TransactionMut<'_>,
        o: &Fields,
        ctx: &mut ActionCtx,
    ) -> Result<Parsed, ActionError> {
        let mut page = o.clone();
        ctx.transform.shape_from_model(&mut page);
        let points = read_points(&page);
        if points.len() < 2 {
            return Err(if ctx.complete {
                ActionError::Invalid(
                    "a pen stroke needs at least 2 points with finite x and y".into(),
                )
            } else {
                missing(ctx, "points")
            });
        }
        let style = choice(o, "style", Some(PenStyle::Smooth), ctx)?;
        let closed = opt_bool(o, "closed")?.unwrap_or(false);
        let id = ensure_shape_id_is_unique("pen", |i| id_taken(txn, i), &mut IdRenames::default())?;
        let name = |field: &str| o.get(field).and_then(Value::as_str);
        Ok(Parsed::clean(PenArgs {
            id,
            points,
            style,
            closed,
            color: name("color").and_then(normalize_color),
            fill: name("fill")
                .and_then(normalize_fill)
                .and_then(Fill::from_name),
        }))
    }
}

/// The `draw` shape of a stroke through `points` (page px), clamped to the canvas.
fn stroke_shape(args: &PenArgs, points: &[(f64, f64)]) -> Shape {
    let abs: Vec<(f64, f64)> = points
        .iter()
        .map(|&(x, y)| (clamp_coord(x), clamp_coord(y)))
        .collect();
    let b = Bounds::from_points(abs.iter().copied()).unwrap_or_default();
    Shape {
        id: args.id.as_str().to_owned(),
        type_name: "draw".into(),
        page_id: String::new(),
        x: b.x,
        y: b.y,
        rotation: 0.0,
        index: String::new(),
        color: args.color.unwrap_or("black").into(),
        fill: args.fill.unwrap_or(Fill::Unfilled).name().into(),
        note: String::new(),
        locked: false,
        created_by: String::new(),
        props: ShapeProps::Draw {
            points: abs.iter().map(|(x, y)| (x - b.x, y - b.y)).collect(),
        },
    }
}

/// Applies `pen`: interpolates the stroke and creates it as a new fairy shape.
pub fn apply(
    txn: &mut TransactionMut<'_>,
    args: &PenArgs,
    ctx: &mut ActionCtx,
) -> Result<(), ActionError> {
    let stroke = interpolate(&args.points, args.style == PenStyle::Smooth, args.closed);
    create_shape(txn, &stroke_shape(args, &stroke), ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::actions::canvas::test_util::*;

    #[test]
    fn straight_strokes_pass_through_points_every_step() {
        let s = interpolate(&[(0.0, 0.0), (100.0, 0.0)], false, false);
        assert_eq!(s.len(), 11);
        assert!(s.windows(2).all(|w| (w[1].0 - w[0].0 - 10.0).abs() < 1e-9));
        let closed = interpolate(&[(0.0, 0.0), (30.0, 0.0), (0.0, 40.0)], true, true);
        assert_eq!(closed.first(), closed.last());
    }

    #[test]
    fn smooth_strokes_hit_control_points() {
        let pts = [(0.0, 0.0), (50.0, 50.0), (100.0, 0.0)];
        let s = interpolate(&pts, true, false);
        for p in pts {
            assert!(
                s.iter()
                    .any(|q| (q.0 - p.0).abs() < 1e-9 && (q.1 - p.1).abs() < 1e-9)
            );
        }
        let huge = interpolate(&[(-1e7, -1e7), (1e7, 1e7)], true, false);
        assert!(huge.len() <= MAX_PEN_POINTS);
    }

    #[test]
    fn pen_creates_a_draw_shape() {
        let doc = doc();
        let r = run(
            &doc,
            json!({"_type": "pen", "points": [{"x": 10, "y": "10"}, {"x": 40, "y": 10}], "style": "straight", "closed": "false"}),
        );
        assert!(r.is_ok(), "{r:?}");
        let b = bounds(&doc, "pen");
        approx(b.x, 10.0);
        approx(b.w, 30.0);
        assert_eq!(get(&doc, "pen").type_name, "draw");
        assert!(run(&doc, json!({"_type": "pen", "points": [{"x": 1, "y": 1}]})).is_err());
        assert!(
            run(
                &doc,
                json!({"_type": "pen", "points": [{"x": 1, "y": 1}, {"x": 2, "y": 2}]})
            )
            .is_ok()
        );
        assert_eq!(get(&doc, "pen-1").type_name, "draw");
    }
}
