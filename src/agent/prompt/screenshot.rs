//! The screenshot part (docs/fairies.md "What a fairy sees"): a PNG of a request's bounds as
//! the room looks now, for models that read images (`--llm-vision`). The design's hybrid view:
//! the picture gives layout, colours and text; the JSON beside it gives exact coordinates.
//!
//! [`shoot`] reads the shapes and draws them in the process's screenshot [`pool`]: off the
//! async workers, at most [`MAX_SCREENSHOTS`] at a time, within the render budget
//! (`--render-timeout-ms`). A request never waits for one: when every slot is taken or the
//! budget runs out, it goes without a screenshot and its prompt says so ([`Skipped::note`]).
//! [`take`] is the drawing alone (shapes in, image out), for tools. None when no shape of the
//! page is in the bounds, as in the design.

use std::sync::LazyLock;
use std::time::Duration;

use base64::Engine;

use crate::canvas::geometry::Bounds;
use crate::canvas::render::pool::{PoolError, RenderPool, SlotWait};
use crate::canvas::render::{self, Budget, Caps, RenderError, View};
use crate::canvas::shape::Shape;

/// Screenshots rendering at once in the process.
pub const MAX_SCREENSHOTS: usize = 2;

/// The process's screenshot pool (its budget is set from `--render-timeout-ms` at start).
pub fn pool() -> &'static RenderPool {
    static POOL: LazyLock<RenderPool> =
        LazyLock::new(|| RenderPool::new(MAX_SCREENSHOTS, Duration::from_secs(2)));
    &POOL
}

/// Why a request went without its screenshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skipped {
    /// Every screenshot slot was taken.
    Busy,
    /// Drawing it took longer than the render budget.
    TimedOut,
    /// It could not be drawn.
    Failed,
}

impl Skipped {
    /// The line the prompt carries instead of the image.
    pub fn note(self) -> &'static str {
        match self {
            Skipped::Busy => {
                "No image of your view this turn (the server was busy drawing others); rely on the JSON."
            }
            Skipped::TimedOut => {
                "No image of your view this turn (it took too long to draw); rely on the JSON."
            }
            Skipped::Failed => {
                "No image of your view this turn (it could not be drawn); rely on the JSON."
            }
        }
    }
}

/// A screenshot of `bounds` on `page` of `shapes` (the room's, in z-order), drawn in the screenshot [`pool`]; `Ok(None)`
/// when no shape is in view.
pub async fn shoot(
    shapes: Vec<Shape>,
    page: String,
    bounds: Bounds,
) -> Result<Option<Screenshot>, Skipped> {
    let drawn = pool()
        .run(SlotWait::Never, move |budget| {
            budget.check()?;
            draw(&shapes, &page, &bounds, budget)
        })
        .await;
    match drawn {
        Ok(shot) => Ok(shot),
        Err(PoolError::Busy) => Err(Skipped::Busy),
        Err(PoolError::Render(RenderError::TimedOut | RenderError::Cancelled)) => {
            Err(Skipped::TimedOut)
        }
        Err(PoolError::Render(error)) => {
            tracing::warn!(%error, "screenshot not rendered; the request goes without one");
            Err(Skipped::Failed)
        }
    }
}

/// Longest side of a screenshot in pixels. The renderer's cap is the design's 8000 px, but
/// providers shrink larger images anyway (Anthropic to 1568 px on the long side) and bill by
/// pixel, so a screenshot is never drawn larger than what the model will read; smaller bounds
/// are drawn at 1:1.
pub const SCREENSHOT_MAX_SIDE: u32 = 1568;
/// Most pixels of a screenshot (about 1.15 megapixels, the providers' own budget).
pub const SCREENSHOT_MAX_PIXELS: u64 = 1_150_000;

/// A rendered view, ready to become an image part.
#[derive(Debug, Clone, PartialEq)]
pub struct Screenshot {
    /// The page area shown.
    pub area: Bounds,
    /// Image width in pixels.
    pub width: u32,
    /// Image height in pixels.
    pub height: u32,
    /// `image/png`.
    pub media_type: &'static str,
    /// The image, base64 (standard alphabet, padded), as both wire formats carry it.
    pub base64: String,
    /// Size of the encoded image in bytes (before base64), for metrics and logs.
    pub bytes: usize,
}

/// A screenshot of `bounds` on `page`, or `None` when no shape is in view (or the bounds are
/// empty, or rendering failed: a warning is logged). No time budget: for tools and benches.
pub fn take(shapes: &[Shape], page: &str, bounds: &Bounds) -> Option<Screenshot> {
    match draw(shapes, page, bounds, &Budget::unlimited()) {
        Ok(shot) => shot,
        Err(error) => {
            tracing::warn!(%error, "screenshot not rendered");
            None
        }
    }
}

/// Draws the screenshot within `budget`; `Ok(None)` when no shape is in view.
fn draw(
    shapes: &[Shape],
    page: &str,
    bounds: &Bounds,
    budget: &Budget,
) -> Result<Option<Screenshot>, RenderError> {
    if render::visible(shapes, page, bounds).is_empty() {
        return Ok(None);
    }
    let caps = Caps {
        max_side: SCREENSHOT_MAX_SIDE,
        max_pixels: SCREENSHOT_MAX_PIXELS,
    };
    let view = View::fit(*bounds, 1.0, caps)?;
    let png = render::png_within(shapes, page, &view, render::PngEffort::Small, budget)?;
    Ok(Some(Screenshot {
        area: view.area,
        width: view.width,
        height: view.height,
        media_type: "image/png",
        base64: base64::engine::general_purpose::STANDARD.encode(&png),
        bytes: png.len(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canvas::format::from_simple;
    use crate::canvas::schema::MAIN_PAGE;
    use serde_json::json;

    fn rect(x: f64, y: f64) -> Shape {
        from_simple(
            &json!({"_type": "rectangle", "shapeId": "r", "x": x, "y": y, "w": 100, "h": 50, "color": "red", "fill": "solid"}),
            &Default::default(),
        )
        .unwrap()
    }

    #[test]
    fn a_view_with_shapes_is_a_png_and_an_empty_one_is_nothing() {
        let shapes = vec![rect(10.0, 10.0)];
        let shot = take(&shapes, MAIN_PAGE, &Bounds::new(0.0, 0.0, 400.0, 300.0)).unwrap();
        assert_eq!(
            (shot.width, shot.height),
            (400, 300),
            "small bounds are drawn 1:1"
        );
        let png = base64::engine::general_purpose::STANDARD
            .decode(&shot.base64)
            .unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(png.len(), shot.bytes);
        assert_eq!(
            take(
                &shapes,
                MAIN_PAGE,
                &Bounds::new(1000.0, 1000.0, 400.0, 300.0)
            ),
            None
        );
        assert_eq!(
            take(&shapes, "page:other", &Bounds::new(0.0, 0.0, 400.0, 300.0)),
            None
        );
        // Large bounds are drawn within the providers' budget.
        let big = take(&shapes, MAIN_PAGE, &Bounds::new(0.0, 0.0, 4000.0, 3000.0)).unwrap();
        assert!(big.width <= SCREENSHOT_MAX_SIDE);
        assert!(u64::from(big.width) * u64::from(big.height) <= SCREENSHOT_MAX_PIXELS + 4000);
    }
}
