//! The outline of each geo kind in a `w × h` box, as SVG path data: the same figures the web
//! demo draws (`web-demo/src/render.ts` `geoPath`/`geoMarks`), so an export looks like the room.
//! Pure functions over numbers.

use super::num;

/// Closed polygon through points given as fractions of the box.
fn polygon(w: f64, h: f64, pts: &[(f64, f64)]) -> String {
    let mut d = String::new();
    for (i, (px, py)) in pts.iter().enumerate() {
        let cmd = if i == 0 { "M" } else { " L" };
        d.push_str(&format!("{cmd}{},{}", num(px * w), num(py * h)));
    }
    d.push_str(" Z");
    d
}

fn regular(sides: usize, rotate: f64) -> Vec<(f64, f64)> {
    (0..sides)
        .map(|i| {
            let a = rotate - std::f64::consts::FRAC_PI_2
                + (i as f64 * 2.0 * std::f64::consts::PI) / sides as f64;
            (0.5 + 0.5 * a.cos(), 0.5 + 0.5 * a.sin())
        })
        .collect()
}

fn star(points: usize, inner: f64) -> Vec<(f64, f64)> {
    (0..points * 2)
        .map(|i| {
            let r = if i % 2 == 0 { 0.5 } else { 0.5 * inner };
            let a =
                -std::f64::consts::FRAC_PI_2 + (i as f64 * std::f64::consts::PI) / points as f64;
            (0.5 + r * a.cos(), 0.5 + r * a.sin())
        })
        .collect()
}

/// The outline path of a geo kind (an unknown kind is a rectangle).
pub fn geo_path(kind: &str, w: f64, h: f64) -> String {
    let n = num;
    match kind {
        "ellipse" | "oval" => format!(
            "M0,{h2} A{w2},{h2} 0 1 1 {w},{h2} A{w2},{h2} 0 1 1 0,{h2} Z",
            w = n(w),
            w2 = n(w / 2.0),
            h2 = n(h / 2.0)
        ),
        "triangle" => polygon(w, h, &[(0.5, 0.0), (1.0, 1.0), (0.0, 1.0)]),
        "diamond" => polygon(w, h, &[(0.5, 0.0), (1.0, 0.5), (0.5, 1.0), (0.0, 0.5)]),
        "hexagon" => polygon(
            w,
            h,
            &[
                (0.25, 0.0),
                (0.75, 0.0),
                (1.0, 0.5),
                (0.75, 1.0),
                (0.25, 1.0),
                (0.0, 0.5),
            ],
        ),
        "pentagon" => polygon(w, h, &regular(5, 0.0)),
        "octagon" => polygon(w, h, &regular(8, std::f64::consts::PI / 8.0)),
        "star" => polygon(w, h, &star(5, 0.45)),
        "rhombus" => polygon(w, h, &[(0.25, 0.0), (1.0, 0.0), (0.75, 1.0), (0.0, 1.0)]),
        "trapezoid" => polygon(w, h, &[(0.2, 0.0), (0.8, 0.0), (1.0, 1.0), (0.0, 1.0)]),
        "arrow-right" => polygon(
            w,
            h,
            &[
                (0.0, 0.25),
                (0.6, 0.25),
                (0.6, 0.0),
                (1.0, 0.5),
                (0.6, 1.0),
                (0.6, 0.75),
                (0.0, 0.75),
            ],
        ),
        "arrow-left" => polygon(
            w,
            h,
            &[
                (1.0, 0.25),
                (0.4, 0.25),
                (0.4, 0.0),
                (0.0, 0.5),
                (0.4, 1.0),
                (0.4, 0.75),
                (1.0, 0.75),
            ],
        ),
        "arrow-up" => polygon(
            w,
            h,
            &[
                (0.25, 1.0),
                (0.25, 0.4),
                (0.0, 0.4),
                (0.5, 0.0),
                (1.0, 0.4),
                (0.75, 0.4),
                (0.75, 1.0),
            ],
        ),
        "arrow-down" => polygon(
            w,
            h,
            &[
                (0.25, 0.0),
                (0.25, 0.6),
                (0.0, 0.6),
                (0.5, 1.0),
                (1.0, 0.6),
                (0.75, 0.6),
                (0.75, 0.0),
            ],
        ),
        "heart" => format!(
            "M{},{} C{},{} {},{} {},{} C{},{} {},{} {},{} Z",
            n(w / 2.0),
            n(h),
            n(-0.1 * w),
            n(0.55 * h),
            n(0.05 * w),
            n(-0.05 * h),
            n(w / 2.0),
            n(0.25 * h),
            n(0.95 * w),
            n(-0.05 * h),
            n(1.1 * w),
            n(0.55 * h),
            n(w / 2.0),
            n(h)
        ),
        "cloud" => format!(
            "M{},{} A{},{} 0 0 1 {},{} A{},{} 0 0 1 {},{} A{},{} 0 0 1 {},{} A{},{} 0 0 1 {},{} Z",
            n(0.25 * w),
            n(0.85 * h),
            n(0.18 * w),
            n(0.2 * h),
            n(0.12 * w),
            n(0.45 * h),
            n(0.2 * w),
            n(0.22 * h),
            n(0.4 * w),
            n(0.18 * h),
            n(0.22 * w),
            n(0.22 * h),
            n(0.78 * w),
            n(0.3 * h),
            n(0.16 * w),
            n(0.2 * h),
            n(0.8 * w),
            n(0.85 * h)
        ),
        _ => format!("M0,0 H{} V{} H0 Z", n(w), n(h)),
    }
}

/// Open strokes drawn over the outline and never filled: the cross of `x-box`, the tick of
/// `check-box`.
pub fn geo_marks(kind: &str, w: f64, h: f64) -> Option<String> {
    let n = num;
    match kind {
        "x-box" => Some(format!("M0,0 L{},{} M{},0 L0,{}", n(w), n(h), n(w), n(h))),
        "check-box" => Some(format!(
            "M{},{} L{},{} L{},{}",
            n(0.25 * w),
            n(0.5 * h),
            n(0.45 * w),
            n(0.72 * h),
            n(0.78 * w),
            n(0.28 * h)
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_scale_with_the_box_and_unknown_kinds_are_rectangles() {
        assert_eq!(geo_path("rectangle", 10.0, 20.0), "M0,0 H10 V20 H0 Z");
        assert_eq!(geo_path("blob", 10.0, 20.0), "M0,0 H10 V20 H0 Z");
        assert_eq!(geo_path("diamond", 10.0, 20.0), "M5,0 L10,10 L5,20 L0,10 Z");
        assert_eq!(
            geo_path("ellipse", 10.0, 20.0),
            "M0,10 A5,10 0 1 1 10,10 A5,10 0 1 1 0,10 Z"
        );
        // The star alternates outer and inner points: 10 vertices.
        assert_eq!(geo_path("star", 100.0, 100.0).matches('L').count(), 9);
        assert!(geo_marks("x-box", 4.0, 4.0).is_some());
        assert!(geo_marks("rectangle", 4.0, 4.0).is_none());
    }
}
