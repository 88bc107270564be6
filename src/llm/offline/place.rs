//! Where the offline model puts a drawing: in free space inside the request's bounds, as near
//! the centre of the person's view as it can, never over a shape the request's context lists.
//!
//! Reads only the context part the server wrote for the model (`bounds`, `userViewportBounds`,
//! `blurryShapes`, `clustersInBounds`, `peripheralClusters`, `selectedShapes` and review mode's
//! `pendingSuggestions`), in model coordinates, exactly as a real model would; never the
//! document. Owns the search (a grid around the view's centre, nearest free spot first, ties
//! broken by position so that the same context always gives the same place) and no pattern
//! matching or shapes (those are [`super`]'s). No I/O.

use serde_json::Value;

/// Space kept between a drawing and every shape around it, in px.
pub const GAP: f64 = 24.0;
/// Most grid positions tried along one side of the searched area (so a search costs at most
/// `MAX_STEPS²` candidates whatever the bounds).
const MAX_STEPS: f64 = 64.0;
/// Finest grid step, in px.
const MIN_STEP: f64 = 20.0;
/// How far past the bounds, in bounds sizes on each side, the search goes when nothing fits
/// inside them.
const WIDEN: f64 = 1.0;
/// Most obstacles read from a context (the prompt lists at most 300 shapes and a few hundred
/// clusters).
const MAX_OBSTACLES: usize = 2048;

/// A rectangle in model coordinates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Area {
    /// Left.
    pub x: f64,
    /// Top.
    pub y: f64,
    /// Width.
    pub w: f64,
    /// Height.
    pub h: f64,
}

impl Area {
    /// An area, or `None` unless every number is finite and the size not negative.
    pub fn new(x: f64, y: f64, w: f64, h: f64) -> Option<Area> {
        let ok = [x, y, w, h].iter().all(|v| v.is_finite()) && w >= 0.0 && h >= 0.0;
        ok.then_some(Area { x, y, w, h })
    }

    fn right(&self) -> f64 {
        self.x + self.w
    }

    fn bottom(&self) -> f64 {
        self.y + self.h
    }

    fn centre(&self) -> (f64, f64) {
        (self.x + self.w / 2.0, self.y + self.h / 2.0)
    }

    /// Whether the two overlap once `self` is grown by `pad` on every side (touching at
    /// exactly `pad` is not an overlap).
    fn near(&self, other: &Area, pad: f64) -> bool {
        self.x - pad < other.right()
            && other.x < self.right() + pad
            && self.y - pad < other.bottom()
            && other.y < self.bottom() + pad
    }

    /// Whether `inner` lies wholly inside `self`.
    fn holds(&self, inner: &Area) -> bool {
        inner.x >= self.x
            && inner.y >= self.y
            && inner.right() <= self.right()
            && inner.bottom() <= self.bottom()
    }

    fn from_json(v: &Value) -> Option<Area> {
        let n = |k: &str| v.get(k).and_then(Value::as_f64);
        Area::new(n("x")?, n("y")?, n("w")?, n("h")?)
    }
}

/// The space a request draws in: its bounds, the person's view, and what is there already.
#[derive(Debug, Clone, PartialEq)]
pub struct Space {
    /// The request's bounds (a drawing goes inside them when it fits).
    pub bounds: Area,
    /// Where the drawing is centred first: the centre of the person's view when it meets the
    /// bounds, else of the bounds.
    pub centre: (f64, f64),
    /// What a drawing must not cover: the shapes and clusters listed, and what this answer
    /// drew already.
    pub taken: Vec<Area>,
}

/// The areas of the rows of a `{columns, rows}` table with `x, y, w, h` columns.
fn table_areas(table: &Value, out: &mut Vec<Area>) {
    let Some(columns) = table.get("columns").and_then(Value::as_array) else {
        return;
    };
    let index = |name: &str| columns.iter().position(|c| c.as_str() == Some(name));
    let (Some(ix), Some(iy), Some(iw), Some(ih)) = (index("x"), index("y"), index("w"), index("h"))
    else {
        return;
    };
    for row in table
        .get("rows")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(area) = row_area(row, [ix, iy, iw, ih]) {
            out.push(area);
        }
    }
}

/// The area in columns `[x, y, w, h]` of a table row.
fn row_area(row: &Value, [ix, iy, iw, ih]: [usize; 4]) -> Option<Area> {
    let n = |i: usize| row.get(i).and_then(Value::as_f64);
    Area::new(n(ix)?, n(iy)?, n(iw)?, n(ih)?)
}

/// The area of a shape in the simple format (`x, y, w, h`; a note is 200 × 200 without a size;
/// a line or an arrow spans its ends).
fn simple_area(shape: &Value) -> Option<Area> {
    let n = |k: &str| shape.get(k).and_then(Value::as_f64);
    if let (Some(x1), Some(y1), Some(x2), Some(y2)) = (n("x1"), n("y1"), n("x2"), n("y2")) {
        return Area::new(x1.min(x2), y1.min(y2), (x2 - x1).abs(), (y2 - y1).abs());
    }
    let side = if shape.get("_type").and_then(Value::as_str) == Some("note") {
        200.0
    } else {
        0.0
    };
    Area::new(
        n("x")?,
        n("y")?,
        n("w").unwrap_or(side),
        n("h").unwrap_or(side),
    )
}

impl Space {
    /// The space of a request's context (see the module docs); a context without `bounds` is
    /// taken as a 1280 × 720 view at the origin.
    pub fn from_context(ctx: &Value) -> Space {
        let bounds = Area::from_json(&ctx["bounds"])
            .filter(|b| b.w >= 1.0 && b.h >= 1.0)
            .unwrap_or(Area {
                x: 0.0,
                y: 0.0,
                w: 1280.0,
                h: 720.0,
            });
        let centre = Area::from_json(&ctx["userViewportBounds"])
            .filter(|v| v.near(&bounds, 0.0))
            .map_or(bounds.centre(), |v| v.centre());
        let mut taken = Vec::new();
        for key in ["blurryShapes", "clustersInBounds", "peripheralClusters"] {
            table_areas(&ctx[key], &mut taken);
        }
        let selected = ctx["selectedShapes"].as_array().into_iter().flatten();
        taken.extend(selected.filter_map(simple_area));
        let pending = ctx["reviewMode"]["pendingSuggestions"]
            .as_array()
            .into_iter()
            .flatten();
        taken.extend(pending.filter_map(|s| simple_area(&s["props"])));
        taken.truncate(MAX_OBSTACLES);
        Space {
            bounds,
            centre,
            taken,
        }
    }

    /// Whether `area` keeps [`GAP`] from everything taken.
    pub fn is_free(&self, area: &Area) -> bool {
        !self.taken.iter().any(|t| area.near(t, GAP))
    }

    /// The top-left of a free `w` × `h` place, nearest the centre (see the module docs), and
    /// marks it taken. Searched inside the bounds first, then around them; when even that is
    /// full, it goes right of everything taken, at the centre's height.
    pub fn place(&mut self, w: f64, h: f64) -> (f64, f64) {
        let (w, h) = (w.max(1.0), h.max(1.0));
        let found = self
            .search(&self.bounds, w, h)
            .or_else(|| {
                let b = self.bounds;
                let wide = Area {
                    x: b.x - b.w * WIDEN,
                    y: b.y - b.h * WIDEN,
                    w: b.w * (1.0 + 2.0 * WIDEN),
                    h: b.h * (1.0 + 2.0 * WIDEN),
                };
                self.search(&wide, w, h)
            })
            .unwrap_or_else(|| {
                let right = self
                    .taken
                    .iter()
                    .map(Area::right)
                    .fold(self.bounds.x, f64::max);
                ((right + GAP).round(), (self.centre.1 - h / 2.0).round())
            });
        self.taken.push(Area {
            x: found.0,
            y: found.1,
            w,
            h,
        });
        found
    }

    /// The free place inside `within` whose centre is nearest [`Space::centre`] on a grid
    /// through it (ties: higher first, then further left), or `None`.
    fn search(&self, within: &Area, w: f64, h: f64) -> Option<(f64, f64)> {
        if w > within.w || h > within.h {
            return None;
        }
        let step = (within.w.max(within.h) / MAX_STEPS).max(MIN_STEP);
        // The grid goes through the spot centred on the view, clamped into `within`.
        let clamp = |v: f64, lo: f64, hi: f64| v.max(lo).min(hi);
        let x0 = clamp(self.centre.0 - w / 2.0, within.x, within.right() - w);
        let y0 = clamp(self.centre.1 - h / 2.0, within.y, within.bottom() - h);
        let offsets = |from: f64, lo: f64, hi: f64| -> Vec<f64> {
            let below = ((from - lo) / step).floor() as i64;
            let above = ((hi - from) / step).floor() as i64;
            (-below..=above).map(|i| from + i as f64 * step).collect()
        };
        let xs = offsets(x0, within.x, within.right() - w);
        let ys = offsets(y0, within.y, within.bottom() - h);
        let mut best: Option<(f64, f64, f64)> = None;
        for &y in &ys {
            for &x in &xs {
                let (x, y) = (x.round(), y.round());
                let area = Area { x, y, w, h };
                if !within.holds(&area) || !self.is_free(&area) {
                    continue;
                }
                let (cx, cy) = area.centre();
                let d = (cx - self.centre.0).powi(2) + (cy - self.centre.1).powi(2);
                let better = match best {
                    None => true,
                    Some((bd, bx, by)) => d < bd || (d == bd && (y, x) < (by, bx)),
                };
                if better {
                    best = Some((d, x, y));
                }
            }
        }
        best.map(|(_, x, y)| (x, y))
    }
}

/// A number as JSON: a whole one as an integer (as the templates write them).
fn number(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        Value::from(v as i64)
    } else {
        Value::from(v)
    }
}

/// Moves the shapes that `actions` create, together as one drawing, to a free place of `space`
/// ([`Space::place`] of their joint bounding box), and marks it taken. Actions that create
/// nothing are left as they are.
pub fn place_drawing(space: &mut Space, mut actions: Vec<Value>) -> Vec<Value> {
    let areas: Vec<Area> = actions
        .iter()
        .filter_map(|a| simple_area(a.get("shape")?))
        .collect();
    let Some(first) = areas.first() else {
        return actions;
    };
    let (mut x0, mut y0, mut x1, mut y1) = (first.x, first.y, first.right(), first.bottom());
    for a in &areas {
        x0 = x0.min(a.x);
        y0 = y0.min(a.y);
        x1 = x1.max(a.right());
        y1 = y1.max(a.bottom());
    }
    let (x, y) = space.place(x1 - x0, y1 - y0);
    let (dx, dy) = (x - x0, y - y0);
    for action in &mut actions {
        let Some(shape) = action.get_mut("shape").and_then(Value::as_object_mut) else {
            continue;
        };
        for (key, d) in [
            ("x", dx),
            ("y", dy),
            ("x1", dx),
            ("y1", dy),
            ("x2", dx),
            ("y2", dy),
        ] {
            if let Some(v) = shape.get(key).and_then(Value::as_f64) {
                shape.insert(key.into(), number(v + d));
            }
        }
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn space(shapes: &[[f64; 4]]) -> Space {
        let rows: Vec<Value> = shapes
            .iter()
            .enumerate()
            .map(|(i, [x, y, w, h])| json!([format!("s{i}"), "rectangle", x, y, w, h]))
            .collect();
        let blurry = if rows.is_empty() {
            json!([])
        } else {
            json!({"columns": ["shapeId", "type", "x", "y", "w", "h", "text"], "rows": rows})
        };
        Space::from_context(&json!({
            "bounds": {"x": 0, "y": 0, "w": 1400, "h": 900},
            "blurryShapes": blurry,
        }))
    }

    fn inside(b: &Area, x: f64, y: f64, w: f64, h: f64) -> bool {
        b.holds(&Area { x, y, w, h })
    }

    #[test]
    fn an_empty_view_gets_the_drawing_at_its_centre() {
        let mut s = space(&[]);
        assert_eq!(s.place(200.0, 100.0), (600.0, 400.0));
    }

    #[test]
    fn the_persons_view_decides_the_centre_when_it_meets_the_bounds() {
        let ctx = json!({"bounds": {"x": 0, "y": 0, "w": 2000, "h": 2000},
            "userViewportBounds": {"x": 1000, "y": 1000, "w": 800, "h": 600}});
        assert_eq!(
            Space::from_context(&ctx).place(100.0, 100.0),
            (1350.0, 1250.0)
        );
        let away = json!({"bounds": {"x": 0, "y": 0, "w": 400, "h": 400},
            "userViewportBounds": {"x": 5000, "y": 5000, "w": 800, "h": 600}});
        assert_eq!(
            Space::from_context(&away).place(100.0, 100.0),
            (150.0, 150.0)
        );
    }

    #[test]
    fn a_drawing_never_covers_a_listed_shape_and_stays_in_the_bounds() {
        // A person's rectangle right where the centre is.
        let mut s = space(&[[500.0, 300.0, 400.0, 300.0]]);
        let (x, y) = s.place(240.0, 250.0);
        let area = Area {
            x,
            y,
            w: 240.0,
            h: 250.0,
        };
        assert!(!area.near(&s.taken[0], GAP - 0.5), "{area:?}");
        assert!(inside(&s.bounds, x, y, 240.0, 250.0), "{area:?}");
    }

    #[test]
    fn repeats_are_offset_and_deterministic() {
        let mut s = space(&[]);
        let first = s.place(240.0, 250.0);
        let second = s.place(240.0, 250.0);
        let third = s.place(240.0, 250.0);
        assert_ne!(first, second);
        let a = |(x, y): (f64, f64)| Area {
            x,
            y,
            w: 240.0,
            h: 250.0,
        };
        assert!(!a(first).near(&a(second), GAP - 0.5));
        assert!(!a(third).near(&a(second), GAP - 0.5) && !a(third).near(&a(first), GAP - 0.5));
        let mut again = space(&[]);
        assert_eq!(
            [again.place(240.0, 250.0), again.place(240.0, 250.0)],
            [first, second]
        );
    }

    #[test]
    fn a_full_view_sends_the_drawing_beside_it_not_over_it() {
        let mut s = space(&[[0.0, 0.0, 1400.0, 900.0]]);
        let (x, y) = s.place(200.0, 200.0);
        let area = Area {
            x,
            y,
            w: 200.0,
            h: 200.0,
        };
        assert!(!area.near(&s.taken[0], GAP - 0.5), "{area:?}");
    }

    #[test]
    fn clusters_selected_shapes_and_suggestions_count_as_taken() {
        let ctx = json!({
            "bounds": {"x": 0, "y": 0, "w": 1000, "h": 1000},
            "clustersInBounds": {"columns": ["x", "y", "w", "h", "numberOfShapes"],
                "rows": [[100, 100, 50, 50, 3]]},
            "selectedShapes": [{"_type": "note", "shapeId": "n", "x": 400, "y": 400}],
            "reviewMode": {"pendingSuggestions": [{"id": "s1", "op": "create", "shapeId": "a",
                "props": {"_type": "arrow", "x1": 0, "y1": 0, "x2": 30, "y2": 40}}]},
        });
        let s = Space::from_context(&ctx);
        assert_eq!(
            s.taken,
            vec![
                Area {
                    x: 100.0,
                    y: 100.0,
                    w: 50.0,
                    h: 50.0
                },
                Area {
                    x: 400.0,
                    y: 400.0,
                    w: 200.0,
                    h: 200.0
                },
                Area {
                    x: 0.0,
                    y: 0.0,
                    w: 30.0,
                    h: 40.0
                },
            ]
        );
        // Garbage is skipped, never a panic.
        let odd = json!({"bounds": {"x": "a"}, "blurryShapes": {"columns": ["x"], "rows": [[1]]},
            "selectedShapes": [{"x": "1"}], "reviewMode": 3});
        let mut s = Space::from_context(&odd);
        assert!(s.taken.is_empty());
        let (x, y) = s.place(f64::NAN, 10.0);
        assert!(x.is_finite() && y.is_finite());
    }
}
