//! `pen` `{points: [{x, y}…], style: smooth|straight, closed, color, fill}`: draws a freehand
//! stroke through the points, interpolated every [`STEP`] px: straight segments, or a
//! Catmull-Rom curve for `smooth`; `closed` joins the end to the start. The stroke is a `draw`
//! shape with a generated id (`pen`, `pen-1`, …), capped at `MAX_PEN_POINTS` points.

use serde_json::{Value, json};
use yrs::TransactionMut;

use super::common::{all_ids, enum_schema, get_str, missing, obj, obj_ref, one_of, schema};
use super::create::create_shape;
use super::{ActionCtx, ActionError, CanvasAction, Sanitized};
use crate::canvas::coerce::{bool_field, clamp_coord, coerce_number, number_value};
use crate::canvas::format::MAX_PEN_POINTS;
use crate::canvas::ids::{IdRenames, ensure_shape_id_is_unique};

/// The `pen` action.
pub struct Pen;

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

fn read_points(o: &serde_json::Map<String, Value>) -> Vec<(f64, f64)> {
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
                "style": enum_schema(&["smooth", "straight"]),
                "closed": {"type": "boolean"},
                "color": {"type": "string"},
                "fill": enum_schema(crate::canvas::schema::FILLS),
            }),
            &["points"],
        )
    }

    fn sanitize(
        &self,
        txn: &TransactionMut<'_>,
        action: &mut Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        let o = obj(action)?;
        ctx.transform.shape_from_model(o);
        let points = read_points(o);
        if points.len() < 2 {
            return Err(if ctx.complete {
                ActionError::Invalid(
                    "a pen stroke needs at least 2 points with finite x and y".into(),
                )
            } else {
                missing(ctx, "points")
            });
        }
        o.insert(
            "points".into(),
            Value::Array(
                points
                    .iter()
                    .map(|(x, y)| json!({"x": number_value(*x), "y": number_value(*y)}))
                    .collect(),
            ),
        );
        one_of(o, "style", &["smooth", "straight"], Some("smooth"), ctx)?;
        let closed = bool_field(o, "closed")?.unwrap_or(false);
        o.insert("closed".into(), Value::Bool(closed));
        let ids = all_ids(txn);
        let id = ensure_shape_id_is_unique("pen", |i| ids.contains(i), &mut IdRenames::default())?;
        o.insert("shapeId".into(), Value::String(id));
        Ok(Sanitized::default())
    }

    fn apply(
        &self,
        txn: &mut TransactionMut<'_>,
        action: &Value,
        ctx: &mut ActionCtx,
    ) -> Result<(), ActionError> {
        let o = obj_ref(action)?;
        let stroke = interpolate(
            &read_points(o),
            get_str(o, "style") != "straight",
            o.get("closed").and_then(Value::as_bool).unwrap_or(false),
        );
        let simple = json!({
            "_type": "pen",
            "shapeId": get_str(o, "shapeId"),
            "color": o.get("color").cloned().unwrap_or(Value::Null),
            "fill": o.get("fill").cloned().unwrap_or(Value::Null),
            "points": stroke.iter().map(|(x, y)| json!({"x": number_value(*x), "y": number_value(*y)})).collect::<Vec<_>>(),
        });
        create_shape(txn, &simple, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;

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
