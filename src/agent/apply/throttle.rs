//! The streamed-application throttle: applying every chunk of a streaming action as a
//! tentative change would fill the document with tombstones (every version is applied, then
//! reverted). A new incomplete version is applied at once if nothing of this action is shown
//! yet, if at least `min_interval` passed since the last *applied* one, if the shown version had
//! no geometry and this one has some, or if its geometry moved "meaningfully" (a coordinate or
//! size changed by at least `min_geometry_delta` px); otherwise
//! it is held back until the interval ends ([`Decision::Hold`]), and the caller applies the
//! newest held version then even if no new text arrived (the trailing edge).
//!
//! Only versions that were actually applied count ([`StreamThrottle::applied`]): a version the
//! canvas could not apply yet (a shape without its type) never starts the interval, so the first
//! applicable version appears at once, unless it creates a shape whose position has not
//! arrived yet ([`ThrottleConfig::hold_unplaced`]): that one waits up to one interval for it
//! (from the first such version), and is shown at once when its position arrives, or when the
//! interval ends without it. A preview at the default place (page 0, 0) that moves a moment
//! later is no use to anyone, and what it wrote and the complete version wrote over stays in the
//! document for good (docs/benchmarks.md, "2026-11-28 — s54-size": about 50 B per shape the
//! offline model draws, its coordinates coming last).
//!
//! Time is passed in (no clock is read here), so the policy is deterministic and testable.
//! Owns only the decision; the turn (`runtime/turn/`) calls it per parsed version, keeps the
//! held version and its timer, and resets it per action.

use std::cell::Cell;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::canvas::coerce::coerce_number;

/// Default minimum time between two applied versions of one streaming action.
pub const DEFAULT_MIN_INTERVAL: Duration = Duration::from_millis(250);
/// Default geometry change that triggers an application regardless of time, in px.
pub const DEFAULT_MIN_GEOMETRY_DELTA: f64 = 64.0;

/// The throttle's settings (from `--fairy-apply-interval-ms` and `--fairy-apply-min-move`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThrottleConfig {
    /// Minimum time between two applied versions.
    pub min_interval: Duration,
    /// Geometry change that is worth showing at once, in px.
    pub min_geometry_delta: f64,
    /// Whether the first version of a `create` whose shape has no position yet
    /// ([`creates_unplaced`]: a geo shape, text or note without `x` and `y`, an arrow or line
    /// without its four ends, a stroke without points) waits up to `min_interval` for it
    /// instead of being shown at once.
    pub hold_unplaced: bool,
}

impl ThrottleConfig {
    /// The settings of `fairyring serve` (`--fairy-apply-interval-ms`, `--fairy-apply-min-move`).
    pub fn from_serve(config: &crate::config::ServeConfig) -> Self {
        let min_move = config.fairy_apply_min_move;
        ThrottleConfig {
            min_interval: Duration::from_millis(config.fairy_apply_interval_ms),
            min_geometry_delta: if min_move.is_finite() && min_move > 0.0 {
                min_move
            } else {
                DEFAULT_MIN_GEOMETRY_DELTA
            },
            hold_unplaced: true,
        }
    }
}

impl Default for ThrottleConfig {
    fn default() -> Self {
        ThrottleConfig {
            min_interval: DEFAULT_MIN_INTERVAL,
            min_geometry_delta: DEFAULT_MIN_GEOMETRY_DELTA,
            hold_unplaced: true,
        }
    }
}

/// What to do with one incomplete version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Apply it now (and report it with [`StreamThrottle::applied`] if that worked).
    Apply,
    /// Keep it; apply the newest kept version at this instant unless a newer one is applied
    /// first.
    Hold {
        /// When the interval since the last applied version ends.
        until: Instant,
    },
}

/// Decides, version by version, whether a streaming action should be re-applied.
#[derive(Debug, Clone)]
pub struct StreamThrottle {
    config: ThrottleConfig,
    last_at: Option<Instant>,
    last_geometry: Vec<(String, f64)>,
    /// When the first version of this action without its position was seen, while nothing of
    /// it is shown ([`ThrottleConfig::hold_unplaced`]).
    unplaced_since: Cell<Option<Instant>>,
}

const GEOMETRY_KEYS: &[&str] = &[
    "x",
    "y",
    "w",
    "h",
    "x1",
    "y1",
    "x2",
    "y2",
    "degrees",
    "scaleX",
    "scaleY",
    "originX",
    "originY",
    "sideOffset",
    "alignOffset",
    "gap",
    "fontSize",
    "maxWidth",
    "bend",
];

fn collect(path: &str, v: &Value, out: &mut Vec<(String, f64)>) {
    match v {
        Value::Object(o) => {
            for (k, child) in o {
                if k == "points" {
                    summarize_points(&format!("{path}/points"), child, out);
                } else if GEOMETRY_KEYS.contains(&k.as_str()) {
                    if let Some(n) = coerce_number(child) {
                        out.push((format!("{path}/{k}"), n));
                    }
                } else if matches!(child, Value::Object(_) | Value::Array(_)) {
                    collect(&format!("{path}/{k}"), child, out);
                }
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                collect(&format!("{path}/{i}"), child, out);
            }
        }
        _ => {}
    }
}

/// A stroke's extent (not every point: a new point inside the extent is no news).
fn summarize_points(path: &str, v: &Value, out: &mut Vec<(String, f64)>) {
    let Value::Array(items) = v else { return };
    let pts = items.iter().filter_map(|p| {
        Some((
            p.get("x").and_then(coerce_number)?,
            p.get("y").and_then(coerce_number)?,
        ))
    });
    if let Some(b) = crate::canvas::Bounds::from_points(pts) {
        out.push((format!("{path}/minX"), b.x));
        out.push((format!("{path}/minY"), b.y));
        out.push((format!("{path}/maxX"), b.max_x()));
        out.push((format!("{path}/maxY"), b.max_y()));
    }
}

/// Whether `action` creates a shape whose position has not arrived: a `create` of a known
/// shape type without the keys that place it (`x` and `y`; an arrow's or line's four ends; a
/// stroke's points). Other actions, and shapes of no known type yet, count as placed.
pub fn creates_unplaced(action: &Value) -> bool {
    lacks_place(action, false)
}

/// [`creates_unplaced`], or a geo shape without its `w` and `h` yet: shown, it is drawn at the
/// default size, and its area (`agent::projects::guard::action_area`) is its corner.
pub fn creates_unsized(action: &Value) -> bool {
    lacks_place(action, true)
}

fn lacks_place(action: &Value, with_size: bool) -> bool {
    use crate::canvas::schema::ShapeType;
    if action.get("_type").and_then(Value::as_str) != Some("create") {
        return false;
    }
    let Some(shape) = action.get("shape").and_then(Value::as_object) else {
        return false;
    };
    let family = shape
        .get("_type")
        .and_then(Value::as_str)
        .and_then(|t| crate::canvas::format::document_type(t).ok())
        .and_then(|t| ShapeType::of(&t));
    let lacks = |keys: &[&str]| {
        !keys
            .iter()
            .all(|k| shape.get(*k).and_then(coerce_number).is_some())
    };
    match family {
        None => false,
        Some(ShapeType::Arrow | ShapeType::Line) => lacks(&["x1", "y1", "x2", "y2"]),
        Some(ShapeType::Draw) => shape
            .get("points")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty),
        Some(ShapeType::Geo) if with_size => lacks(&["x", "y", "w", "h"]),
        Some(_) => lacks(&["x", "y"]),
    }
}

/// The geometric numbers of an action, keyed by their JSON path.
pub fn geometry_of(action: &Value) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    collect("", action, &mut out);
    out
}

impl StreamThrottle {
    /// A throttle for one streaming action.
    pub fn new(config: ThrottleConfig) -> Self {
        StreamThrottle {
            config,
            last_at: None,
            last_geometry: Vec::new(),
            unplaced_since: Cell::new(None),
        }
    }

    /// Forgets the previous action (call when a new action starts streaming).
    pub fn reset(&mut self) {
        self.last_at = None;
        self.last_geometry.clear();
        self.unplaced_since.set(None);
    }

    fn geometry_changed(&self, now: &[(String, f64)]) -> bool {
        // Fields that just appeared wait for the interval: while a plan streams, `x`, `y`,
        // `w`, `h` arrive one after another within milliseconds.
        now.iter().any(|(path, n)| {
            self.last_geometry
                .iter()
                .find(|(p, _)| p == path)
                .is_some_and(|(_, before)| (n - before).abs() >= self.config.min_geometry_delta)
        })
    }

    /// Whether this version should be applied now or held back. Records nothing but when the
    /// first version without its position was seen ([`ThrottleConfig::hold_unplaced`]).
    pub fn decide(&self, now: Instant, action: &Value) -> Decision {
        let Some(at) = self.last_at else {
            // Nothing shown yet: at once, unless a new shape's position is still to come.
            if !(self.config.hold_unplaced && creates_unplaced(action)) {
                return Decision::Apply;
            }
            let since = self.unplaced_since.get().unwrap_or(now);
            self.unplaced_since.set(Some(since));
            let until = since + self.config.min_interval;
            return if now >= until {
                Decision::Apply
            } else {
                Decision::Hold { until }
            };
        };
        let until = at + self.config.min_interval;
        let geometry = geometry_of(action);
        // The shown version had no geometry at all (a shape at its default place): its first
        // coordinates are worth showing at once.
        let placed = self.last_geometry.is_empty() && !geometry.is_empty();
        if now >= until || placed || self.geometry_changed(&geometry) {
            Decision::Apply
        } else {
            Decision::Hold { until }
        }
    }

    /// Records that `action` was applied at `now`: the interval starts again.
    pub fn applied(&mut self, now: Instant, action: &Value) {
        self.last_at = Some(now);
        self.last_geometry = geometry_of(action);
    }

    /// [`StreamThrottle::decide`], recording the version as applied when it says
    /// [`Decision::Apply`]. For callers whose applications cannot fail.
    pub fn should_apply(&mut self, now: Instant, action: &Value) -> bool {
        match self.decide(now, action) {
            Decision::Apply => {
                self.applied(now, action);
                true
            }
            Decision::Hold { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn time_and_geometry_gate_applications() {
        let t0 = Instant::now();
        let mut th = StreamThrottle::new(ThrottleConfig::default());
        let v = |x: f64, text: &str| json!({"_type": "create", "shape": {"shapeId": "a", "x": x, "text": text}});
        assert!(th.should_apply(t0, &v(10.0, "")), "first version applies");
        assert!(
            !th.should_apply(t0 + Duration::from_millis(10), &v(10.0, "h")),
            "text only, too soon"
        );
        assert!(
            !th.should_apply(t0 + Duration::from_millis(20), &v(12.0, "he")),
            "small move"
        );
        assert!(
            th.should_apply(t0 + Duration::from_millis(30), &v(100.0, "he")),
            "big move"
        );
        assert!(
            th.should_apply(t0 + Duration::from_millis(300), &v(100.0, "hello")),
            "interval elapsed"
        );
        let with_y = json!({"_type": "create", "shape": {"shapeId": "a", "x": 100.0, "y": 1, "text": "hello"}});
        assert!(
            !th.should_apply(t0 + Duration::from_millis(301), &with_y),
            "a new field waits"
        );
        th.reset();
        assert!(
            th.should_apply(t0 + Duration::from_millis(302), &with_y),
            "first after reset"
        );
    }

    #[test]
    fn versions_that_were_not_applied_do_not_start_the_interval() {
        let t0 = Instant::now();
        let mut th = StreamThrottle::new(ThrottleConfig::default());
        let v = |w: f64| json!({"_type": "create", "shape": {"shapeId": "a", "x": 0, "w": w}});
        // The canvas refused the first versions (not applicable yet): nothing was recorded.
        assert_eq!(th.decide(t0, &v(1.0)), Decision::Apply);
        assert_eq!(
            th.decide(t0 + Duration::from_millis(5), &v(2.0)),
            Decision::Apply,
            "still nothing shown: apply at once"
        );
        th.applied(t0 + Duration::from_millis(5), &v(2.0));
        let until = t0 + Duration::from_millis(5) + DEFAULT_MIN_INTERVAL;
        assert_eq!(
            th.decide(t0 + Duration::from_millis(6), &v(3.0)),
            Decision::Hold { until },
            "held until the interval ends"
        );
        assert_eq!(th.decide(until, &v(3.0)), Decision::Apply, "trailing edge");
    }

    #[test]
    fn the_first_coordinates_of_a_shown_shape_apply_at_once() {
        let t0 = Instant::now();
        let mut th = StreamThrottle::new(ThrottleConfig::default());
        let bare = json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "a"}});
        th.applied(t0, &bare);
        let placed =
            json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "a", "x": 5}});
        assert_eq!(th.decide(t0, &placed), Decision::Apply);
        th.applied(t0, &placed);
        let more = json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "a", "x": 5, "y": 6}});
        assert!(
            matches!(th.decide(t0, &more), Decision::Hold { .. }),
            "later fields wait"
        );
    }

    #[test]
    fn a_new_shape_waits_one_interval_for_its_position() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let until = t0 + DEFAULT_MIN_INTERVAL;
        let th = StreamThrottle::new(ThrottleConfig::default());
        let rect = |extra: Value| {
            let mut shape = json!({"_type": "rectangle", "shapeId": "a", "h": 80, "text": "S"});
            if let (Some(shape), Value::Object(extra)) = (shape.as_object_mut(), extra) {
                shape.extend(extra);
            }
            json!({"_type": "create", "shape": shape})
        };
        assert_eq!(th.decide(t0, &rect(json!({}))), Decision::Hold { until });
        assert_eq!(
            th.decide(ms(100), &rect(json!({"w": 160, "x": 240}))),
            Decision::Hold { until },
            "from the first version seen, an x alone does not place it"
        );
        let corner = rect(json!({"x": 240, "y": 0}));
        assert_eq!(
            th.decide(ms(120), &corner),
            Decision::Apply,
            "placed: at once"
        );
        assert!(creates_unsized(&corner) && !creates_unplaced(&corner));
        assert!(!creates_unsized(&rect(json!({"w": 1, "x": 2, "y": 3}))));
        let note =
            json!({"_type": "create", "shape": {"_type": "note", "shapeId": "n", "x": 1, "y": 2}});
        assert_eq!(th.decide(ms(130), &note), Decision::Apply);
        assert_eq!(
            th.decide(until, &rect(json!({}))),
            Decision::Apply,
            "no position within the interval: shown where it is"
        );
        let mut th = StreamThrottle::new(ThrottleConfig::default());
        let arrow = |ends: Value| json!({"_type": "create", "shape": {"_type": "arrow", "shapeId": "r", "x1": 0, "x2": 9, "y1": 4, "y2": ends}});
        assert!(matches!(
            th.decide(t0, &arrow(Value::Null)),
            Decision::Hold { .. }
        ));
        assert_eq!(th.decide(ms(10), &arrow(json!(4))), Decision::Apply);
        th.reset();
        let pen =
            json!({"_type": "create", "shape": {"_type": "pen", "shapeId": "p", "points": []}});
        assert!(matches!(th.decide(ms(20), &pen), Decision::Hold { .. }));
        // Other actions, shapes of no known type yet, and the old policy: at once.
        let th = StreamThrottle::new(ThrottleConfig::default());
        let mv = json!({"_type": "move", "shapeId": "a"});
        let untyped = json!({"_type": "create", "shape": {"shapeId": "a"}});
        assert_eq!(th.decide(t0, &mv), Decision::Apply);
        assert_eq!(th.decide(t0, &untyped), Decision::Apply);
        for config in [
            ThrottleConfig {
                hold_unplaced: false,
                ..ThrottleConfig::default()
            },
            ThrottleConfig {
                min_interval: Duration::ZERO,
                ..ThrottleConfig::default()
            },
        ] {
            let th = StreamThrottle::new(config);
            assert_eq!(
                th.decide(t0, &rect(json!({}))),
                Decision::Apply,
                "{config:?}"
            );
        }
    }

    #[test]
    fn serve_flags_map_to_the_defaults() {
        let cfg = ThrottleConfig::from_serve(&crate::config::ServeConfig::for_test());
        assert_eq!(cfg, ThrottleConfig::default());
    }

    #[test]
    fn pen_points_count_as_geometry() {
        let g = geometry_of(&json!({"points": [{"x": 1, "y": 2}, {"x": "3", "y": 4}]}));
        assert_eq!(g.len(), 4);
        assert!(g.contains(&("/points/maxX".to_string(), 3.0)));
        let t0 = Instant::now();
        let mut th = StreamThrottle::new(ThrottleConfig::default());
        let pen = |n: usize| json!({"points": (0..n).map(|i| json!({"x": i * 10, "y": 0})).collect::<Vec<_>>()});
        assert!(th.should_apply(t0, &pen(2)));
        assert!(!th.should_apply(t0, &pen(3)), "the extent grew by 10 px");
        assert!(th.should_apply(t0, &pen(9)), "the extent grew by 70 px");
    }
}
