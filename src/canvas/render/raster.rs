//! SVG → PNG through resvg (usvg parses, tiny-skia paints), with DejaVu Sans shipped in the
//! binary (`assets/fonts/`, licence beside it) as the only font: a bare server has no system
//! fonts, and the same font everywhere makes renders identical across machines.

use std::sync::{Arc, LazyLock};

use resvg::tiny_skia;
use resvg::usvg;

use super::svg::FONT_FAMILY;
use super::{RenderError, View};

/// The shipped font (Bitstream Vera licence: `assets/fonts/DejaVuSans-LICENSE.txt`).
static FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

/// The font database, built once: only the shipped font, which is also every generic family.
static FONTS: LazyLock<Arc<usvg::fontdb::Database>> = LazyLock::new(|| {
    let mut db = usvg::fontdb::Database::new();
    db.load_font_data(FONT.to_vec());
    db.set_sans_serif_family(FONT_FAMILY);
    db.set_serif_family(FONT_FAMILY);
    db.set_monospace_family(FONT_FAMILY);
    Arc::new(db)
});

/// Rasterizes an SVG made by [`super::svg::document`] for `view` to PNG bytes.
pub fn png(svg: &str, view: &View) -> Result<Vec<u8>, RenderError> {
    pixmap(svg, view)?
        .encode_png()
        .map_err(|e| RenderError::Raster(e.to_string()))
}

/// JPEG quality of [`jpeg`]: text and thin strokes stay legible.
pub const JPEG_QUALITY: u8 = 85;

/// Rasterizes an SVG made by [`super::svg::document`] for `view` to JPEG bytes (baseline,
/// [`JPEG_QUALITY`]): several times smaller than PNG for pen strokes and fills, lossy at edges.
/// The page background is opaque, so the pixmap's premultiplied colours are the plain ones.
pub fn jpeg(svg: &str, view: &View) -> Result<Vec<u8>, RenderError> {
    let pixmap = pixmap(svg, view)?;
    let (width, height) = (
        u16::try_from(pixmap.width()),
        u16::try_from(pixmap.height()),
    );
    let (Ok(width), Ok(height)) = (width, height) else {
        return Err(RenderError::Raster(format!(
            "{}x{} is larger than JPEG allows (65535 a side)",
            pixmap.width(),
            pixmap.height()
        )));
    };
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, JPEG_QUALITY)
        .encode(pixmap.data(), width, height, jpeg_encoder::ColorType::Rgba)
        .map_err(|e| RenderError::Raster(e.to_string()))?;
    Ok(out)
}

/// Rasterizes to a pixmap of `view.width × view.height` on the page background.
pub fn pixmap(svg: &str, view: &View) -> Result<tiny_skia::Pixmap, RenderError> {
    let options = usvg::Options {
        font_family: FONT_FAMILY.to_owned(),
        fontdb: FONTS.clone(),
        ..usvg::Options::default()
    };
    let tree =
        usvg::Tree::from_str(svg, &options).map_err(|e| RenderError::Raster(e.to_string()))?;
    let mut pixmap = tiny_skia::Pixmap::new(view.width, view.height)
        .ok_or_else(|| RenderError::Raster(format!("no {}x{} pixmap", view.width, view.height)))?;
    // The SVG paints its background too; filling first also covers rounding at the edges.
    pixmap.fill(tiny_skia::Color::WHITE);
    // The SVG's own size is the view's, so the tree maps onto the pixmap one to one.
    let size = tree.size();
    let transform = tiny_skia::Transform::from_scale(
        view.width as f32 / size.width(),
        view.height as f32 / size.height(),
    );
    resvg::render(&tree, transform, &mut pixmap.as_mut());
    Ok(pixmap)
}
