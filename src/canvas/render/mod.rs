//! Server-side rendering of a page of the canvas (schema v1, docs/document-schema.md) to SVG and
//! PNG: what exports send and what a fairy with vision sees (docs/fairies.md "What a fairy
//! sees").
//!
//! Owns: the view (which page area, at which scale, within the pixel caps), the SVG of every
//! shape kind the web demo draws — in the demo's palette and fills, in z-order, rotated — and its
//! rasterizing through resvg with a font shipped in the binary, so a render is the same on every
//! machine. Must not touch documents, sockets or stores: it takes shapes and returns bytes.
//!
//! # Layout
//! - [`palette`]: tldraw's colours and what each fill paints.
//! - [`geo`]: the outline of each geo kind.
//! - [`svg`]: shapes → SVG text.
//! - [`raster`]: SVG → PNG (resvg/tiny-skia, the shipped DejaVu Sans).
//! - [`text`]: word wrapping as the demo does it.
//! - [`budget`]: a render's deadline and cancellation, checked inside the loops.
//! - [`pool`]: where renders run: off the async workers, a bounded number at a time, within
//!   the budget, stopped when their caller goes away.
//!
//! Whatever a peer wrote, a render degrades rather than fails: a shape that cannot be drawn is
//! left out, text and strokes are drawn within the caps of [`svg`], and a shape with
//! non-finite or absurd coordinates stays out of the page's extent
//! ([`crate::canvas::geometry::extent_bounds`]).

pub mod budget;
pub mod geo;
pub mod palette;
pub mod pool;
pub mod raster;
pub mod svg;
pub mod text;

pub use budget::{Budget, CancelFlag};
pub use raster::PngEffort;

use super::geometry::{Bounds, extent_bounds, shape_bounds};
use super::shape::Shape;

/// Longest side of a render in pixels (the design's screenshot cap).
pub const MAX_SIDE_PX: u32 = 8000;
/// Most pixels of one render (RGBA: 4 bytes each while rasterizing): beyond it the scale is
/// lowered, so one export cannot take more than ~128 MB of memory.
pub const MAX_PIXELS: u64 = 32_000_000;
/// Largest scale a caller may ask for.
pub const MAX_SCALE: f64 = 8.0;
/// Margin around the shapes when the area is the page's content.
pub const CONTENT_PADDING: f64 = 32.0;

/// Errors of rendering. Messages name the offending value, for the HTTP edge to pass on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RenderError {
    /// The area is empty, negative or not finite.
    #[error("area {w}x{h} at ({x}, {y}) is not a finite, non-empty rectangle")]
    InvalidArea {
        /// Left.
        x: f64,
        /// Top.
        y: f64,
        /// Width.
        w: f64,
        /// Height.
        h: f64,
    },
    /// The scale is not in `(0, MAX_SCALE]`.
    #[error("scale {0} is not in (0, 8]")]
    InvalidScale(f64),
    /// No area was given and the page has no shape.
    #[error("page '{0}' has no shapes to render")]
    EmptyPage(String),
    /// The rasterizer refused the SVG (a bug: the SVG is ours).
    #[error("could not rasterize: {0}")]
    Raster(String),
    /// The render ran past its budget ([`Budget`]).
    #[error("the render ran past its time budget")]
    TimedOut,
    /// The render was stopped: its caller went away or the server is shutting down.
    #[error("the render was cancelled")]
    Cancelled,
}

/// The limits a view must fit in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Caps {
    /// Longest side in pixels.
    pub max_side: u32,
    /// Most pixels.
    pub max_pixels: u64,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            max_side: MAX_SIDE_PX,
            max_pixels: MAX_PIXELS,
        }
    }
}

/// What a render shows: a page area drawn at a scale, and the image size that makes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct View {
    /// The page area, in page px.
    pub area: Bounds,
    /// Image pixels per page px (the asked scale, lowered to fit the caps).
    pub scale: f64,
    /// Image width in pixels (≥ 1).
    pub width: u32,
    /// Image height in pixels (≥ 1).
    pub height: u32,
}

impl View {
    /// The view of `area` at `scale`, the scale lowered until the image fits `caps`.
    pub fn fit(area: Bounds, scale: f64, caps: Caps) -> Result<View, RenderError> {
        let finite = [area.x, area.y, area.w, area.h]
            .iter()
            .all(|v| v.is_finite());
        if !finite || area.w <= 0.0 || area.h <= 0.0 {
            return Err(RenderError::InvalidArea {
                x: area.x,
                y: area.y,
                w: area.w,
                h: area.h,
            });
        }
        if !(scale > 0.0 && scale <= MAX_SCALE) {
            return Err(RenderError::InvalidScale(scale));
        }
        let side = f64::from(caps.max_side.max(1)) / area.w.max(area.h);
        let pixels = (caps.max_pixels.max(1) as f64 / (area.w * area.h)).sqrt();
        let scale = scale.min(side).min(pixels);
        // Rounding up may pass a cap by one pixel; clamp the sides instead.
        let px = |len: f64| ((len * scale).round().max(1.0) as u32).min(caps.max_side.max(1));
        Ok(View {
            area,
            scale,
            width: px(area.w),
            height: px(area.h),
        })
    }

    /// The view of everything on `page` (padded by [`CONTENT_PADDING`]) at `scale`.
    pub fn content(
        shapes: &[Shape],
        page: &str,
        scale: f64,
        caps: Caps,
    ) -> Result<View, RenderError> {
        let area = shapes
            .iter()
            .filter(|s| s.page_id == page)
            .filter_map(extent_bounds)
            .reduce(|a, b| a.union(&b))
            .ok_or_else(|| RenderError::EmptyPage(page.to_owned()))?;
        // A lone point or a flat line still gets an area.
        View::fit(area.expand(CONTENT_PADDING), scale, caps)
    }
}

/// The shapes of `page` a view can show, in z-order (`shapes` must be in z-order, as
/// [`crate::canvas::shape::list_shapes`] returns them): those whose bounds meet the area, grown
/// by a stroke's width so that edges on the border are drawn. A shape whose bounds are not
/// finite cannot be placed and is left out.
pub fn visible<'a, S: std::borrow::Borrow<Shape>>(
    shapes: &'a [S],
    page: &str,
    area: &Bounds,
) -> Vec<&'a Shape> {
    let grown = area.expand(svg::STROKE_WIDTH * 4.0);
    shapes
        .iter()
        .map(std::borrow::Borrow::borrow)
        .filter(|s| s.page_id == page)
        .filter(|s| {
            let b = shape_bounds(s);
            [b.x, b.y, b.w, b.h].iter().all(|v| v.is_finite()) && b.intersects(&grown)
        })
        .collect()
}

/// SVG of what `view` shows of `page`, without a time budget (the caps of [`svg`] still
/// bound it): for tests and benches; the server renders through [`pool`].
pub fn render_svg(shapes: &[Shape], page: &str, view: &View) -> String {
    svg_within(shapes, page, view, &Budget::unlimited()).unwrap_or_default()
}

/// PNG of what `view` shows of `page`, on a white background, without a time budget.
pub fn render_png(shapes: &[Shape], page: &str, view: &View) -> Result<Vec<u8>, RenderError> {
    png_within(shapes, page, view, PngEffort::Fast, &Budget::unlimited())
}

/// JPEG of what `view` shows of `page`, on a white background, without a time budget.
pub fn render_jpeg(shapes: &[Shape], page: &str, view: &View) -> Result<Vec<u8>, RenderError> {
    jpeg_within(shapes, page, view, &Budget::unlimited())
}

/// SVG of what `view` shows of `page`, within `budget`.
pub fn svg_within(
    shapes: &[Shape],
    page: &str,
    view: &View,
    budget: &Budget,
) -> Result<String, RenderError> {
    svg::document(&visible(shapes, page, &view.area), view, budget)
}

/// PNG of what `view` shows of `page`, on a white background, within `budget`.
pub fn png_within(
    shapes: &[Shape],
    page: &str,
    view: &View,
    effort: PngEffort,
    budget: &Budget,
) -> Result<Vec<u8>, RenderError> {
    let pixmap = raster::pixmap(&visible(shapes, page, &view.area), view, budget)?;
    raster::encode_png_within(&pixmap, effort, budget)
}

/// JPEG of what `view` shows of `page`, on a white background, within `budget`.
pub fn jpeg_within(
    shapes: &[Shape],
    page: &str,
    view: &View,
    budget: &Budget,
) -> Result<Vec<u8>, RenderError> {
    let pixmap = raster::pixmap(&visible(shapes, page, &view.area), view, budget)?;
    budget.check()?;
    raster::encode_jpeg(&pixmap)
}

/// A number as SVG writes it: at most two decimals, no trailing zeros, never `-0`.
/// Magnitudes past [`crate::canvas::geometry::MAX_COORD`] are written as that bound (a
/// finite `1e300` would otherwise be 300 digits, and no rasterizer draws it anyway).
pub(crate) fn num(n: f64) -> String {
    let max = super::geometry::MAX_COORD;
    let r = (n * 100.0).round() / 100.0;
    if r == 0.0 || !r.is_finite() {
        "0".to_owned()
    } else {
        format!("{}", r.clamp(-max, max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short() {
        assert_eq!(num(10.0), "10");
        assert_eq!(num(-0.001), "0");
        assert_eq!(num(1.23456), "1.23");
        assert_eq!(num(f64::NAN), "0");
    }

    #[test]
    fn views_fit_the_caps() {
        let v = View::fit(Bounds::new(0.0, 0.0, 200.0, 100.0), 2.0, Caps::default()).unwrap();
        assert_eq!((v.width, v.height, v.scale), (400, 200, 2.0));
        // The design's cap: the longest side is at most 8000 px.
        let v = View::fit(Bounds::new(0.0, 0.0, 16_000.0, 100.0), 1.0, Caps::default()).unwrap();
        assert_eq!((v.width, v.height), (8000, 50));
        assert!((v.scale - 0.5).abs() < 1e-12);
        // The pixel cap lowers the scale of a big square.
        let v = View::fit(Bounds::new(0.0, 0.0, 8000.0, 8000.0), 1.0, Caps::default()).unwrap();
        assert!(u64::from(v.width) * u64::from(v.height) <= MAX_PIXELS + 16_000);
        assert!(v.width < 8000);
        for bad in [0.0, -1.0, f64::NAN, 9.0] {
            assert!(matches!(
                View::fit(Bounds::new(0.0, 0.0, 1.0, 1.0), bad, Caps::default()),
                Err(RenderError::InvalidScale(_))
            ));
        }
        assert!(matches!(
            View::fit(
                Bounds {
                    x: 0.0,
                    y: 0.0,
                    w: 0.0,
                    h: 5.0
                },
                1.0,
                Caps::default()
            ),
            Err(RenderError::InvalidArea { .. })
        ));
    }
}
