//! SVG → PNG and JPEG through resvg (usvg parses, tiny-skia paints), with DejaVu Sans shipped
//! in the binary (`assets/fonts/`, licence beside it) as the only font: a bare server has no
//! system fonts, and the same font everywhere makes renders identical across machines. Shapes
//! are painted in chunks ([`CHUNK_BYTES`]) so that the budget is checked between them.

use std::sync::{Arc, LazyLock};

use resvg::tiny_skia;
use resvg::usvg;

use super::budget::Budget;
use super::svg::{self, FONT_FAMILY};
use super::{RenderError, View};
use crate::canvas::shape::Shape;

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

/// Most SVG bytes parsed and painted at once: shapes are rasterized in chunks of about this
/// size, one after the other onto the same pixmap (painting in order, so the picture is the
/// one the whole document gives), with the budget checked between chunks. A chunk stays far
/// below the parser's node limit, and a render stops within one chunk's time.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// How hard PNG encoding works on compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PngEffort {
    /// `fdeflate` with the `Up` filter: several times faster than the default on large images,
    /// for larger files (exports, where the time is the client's wait).
    Fast,
    /// png's default (balanced deflate, adaptive filters): smaller files, for small images sent
    /// again and again (a fairy's screenshot rides along with every model turn).
    Small,
}

/// PNG bytes of a pixmap. The page background is opaque, so the pixmap's premultiplied colours
/// are the plain ones and are written as they are.
pub fn encode_png(pixmap: &tiny_skia::Pixmap, effort: PngEffort) -> Result<Vec<u8>, RenderError> {
    encode_png_within(pixmap, effort, &Budget::unlimited())
}

/// Pixel bytes encoded between two checks of the budget (1 MiB: a few milliseconds).
const ENCODE_BAND_BYTES: usize = 1 << 20;

/// [`encode_png`] within `budget`, checked between bands of [`ENCODE_BAND_BYTES`]: encoding a
/// 32-megapixel image is one long step otherwise.
pub fn encode_png_within(
    pixmap: &tiny_skia::Pixmap,
    effort: PngEffort,
    budget: &Budget,
) -> Result<Vec<u8>, RenderError> {
    use std::io::Write;
    let failed = |e: png::EncodingError| RenderError::Raster(e.to_string());
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, pixmap.width(), pixmap.height());
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    if effort == PngEffort::Fast {
        encoder.set_compression(png::Compression::Fast);
        encoder.set_filter(png::Filter::Up);
    }
    let mut writer = encoder.write_header().map_err(failed)?;
    {
        let mut stream = writer.stream_writer().map_err(failed)?;
        for band in pixmap.data().chunks(ENCODE_BAND_BYTES) {
            budget.check()?;
            stream
                .write_all(band)
                .map_err(|e| RenderError::Raster(e.to_string()))?;
        }
        stream.finish().map_err(failed)?;
    }
    writer.finish().map_err(failed)?;
    Ok(out)
}

/// Rasterizes a whole SVG document for `view` (one made by [`super::svg::document`], without
/// a budget: for tests and tools).
pub fn svg_pixmap(svg: &str, view: &View) -> Result<tiny_skia::Pixmap, RenderError> {
    let mut pixmap = blank(view)?;
    paint(svg, &mut pixmap)?;
    Ok(pixmap)
}

/// JPEG quality of [`encode_jpeg`]: text and thin strokes stay legible.
pub const JPEG_QUALITY: u8 = 85;

/// JPEG bytes (baseline, [`JPEG_QUALITY`]) of a pixmap: several times smaller than PNG for pen
/// strokes and fills, lossy at edges. The page background is opaque, so the pixmap's
/// premultiplied colours are the plain ones.
pub fn encode_jpeg(pixmap: &tiny_skia::Pixmap) -> Result<Vec<u8>, RenderError> {
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

/// A white pixmap of `view.width × view.height`.
fn blank(view: &View) -> Result<tiny_skia::Pixmap, RenderError> {
    let mut pixmap = tiny_skia::Pixmap::new(view.width, view.height)
        .ok_or_else(|| RenderError::Raster(format!("no {}x{} pixmap", view.width, view.height)))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    Ok(pixmap)
}

/// Parses one SVG document whose size is the pixmap's and paints it over the pixmap.
fn paint(svg: &str, pixmap: &mut tiny_skia::Pixmap) -> Result<(), RenderError> {
    let options = usvg::Options {
        font_family: FONT_FAMILY.to_owned(),
        fontdb: FONTS.clone(),
        ..usvg::Options::default()
    };
    let tree =
        usvg::Tree::from_str(svg, &options).map_err(|e| RenderError::Raster(e.to_string()))?;
    // The SVG's own size is the view's, so the tree maps onto the pixmap one to one.
    let size = tree.size();
    let transform = tiny_skia::Transform::from_scale(
        pixmap.width() as f32 / size.width(),
        pixmap.height() as f32 / size.height(),
    );
    resvg::render(&tree, transform, &mut pixmap.as_mut());
    Ok(())
}

/// A run of shapes drawn as one document.
struct Chunk<'a> {
    shapes: Vec<&'a Shape>,
    body: String,
}

impl<'a> Chunk<'a> {
    fn new() -> Self {
        Chunk {
            shapes: Vec::new(),
            body: String::with_capacity(CHUNK_BYTES + 4096),
        }
    }

    /// Paints the chunk; when its document is refused, each shape alone, leaving out those
    /// refused (a shape that cannot be drawn must not cost the others).
    fn paint(
        &mut self,
        pixmap: &mut tiny_skia::Pixmap,
        view: &View,
        budget: &Budget,
    ) -> Result<(), RenderError> {
        if self.shapes.is_empty() {
            return Ok(());
        }
        budget.check()?;
        let mut doc = String::with_capacity(self.body.len() + 1024);
        svg::open(&mut doc, &self.shapes, view);
        doc.push_str(&self.body);
        svg::close(&mut doc);
        if let Err(error) = paint(&doc, pixmap) {
            tracing::warn!(%error, shapes = self.shapes.len(), "render: a chunk was refused; drawing its shapes one by one");
            for shape in &self.shapes {
                budget.check()?;
                let mut one = String::new();
                svg::open(&mut one, &[shape], view);
                svg::render_shape(&mut one, shape, view, budget)?;
                svg::close(&mut one);
                if let Err(error) = paint(&one, pixmap) {
                    tracing::warn!(%error, shape = %shape.id, "render: a shape could not be drawn and is left out");
                }
            }
        }
        self.shapes.clear();
        self.body.clear();
        Ok(())
    }
}

/// Rasterizes `shapes` (already filtered, in z-order) for `view` on the page background,
/// chunk by chunk ([`CHUNK_BYTES`]) within `budget`.
pub fn pixmap(
    shapes: &[&Shape],
    view: &View,
    budget: &Budget,
) -> Result<tiny_skia::Pixmap, RenderError> {
    let mut pixmap = blank(view)?;
    let mut chunk = Chunk::new();
    for shape in shapes {
        budget.check()?;
        svg::render_shape(&mut chunk.body, shape, view, budget)?;
        chunk.shapes.push(shape);
        if chunk.body.len() >= CHUNK_BYTES {
            chunk.paint(&mut pixmap, view, budget)?;
        }
    }
    chunk.paint(&mut pixmap, view, budget)?;
    Ok(pixmap)
}
