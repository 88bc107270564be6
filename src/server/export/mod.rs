//! Export of a room's page as an image: `GET /rooms/{room}/export.svg`,
//! `GET /rooms/{room}/export.png` and `GET /rooms/{room}/export.jpg` (scope `read`). Query: `page` (default `page:main`), an
//! optional area `x, y, w, h` (all four or none; none: the page's content with a margin), and
//! `scale` (default 1, at most 8; lowered so the image fits 8000 px a side and 32 M pixels — the
//! scale used is in the `x-fairyring-scale` header). Errors are JSON like every route: 400
//! `invalid_query` for a bad query, 404 `room_not_found` (a room never written: reading it
//! creates nothing) / `page_not_found` / `empty_page`, 503 `busy` when the renders in flight
//! are at their bound, 503 `render_timeout` past `--render-timeout-ms`.
//!
//! Owns only the admission, the query and the response. Everything that reads the room — the
//! store read (inside a render slot, so that exports waiting for a slot hold nothing), the
//! document walk ([`reads`]: one decode of a stored room serves its concurrent exports), the
//! page check, the view, the drawing ([`crate::canvas::render`]) — runs with a slot of the
//! server's [`RenderPool`]: off the async workers, at most [`MAX_RENDERS`] at a time, within
//! the budget, stopped when the client goes away.

pub mod reads;

use std::collections::HashMap;
use std::time::Duration;

use super::AppState;
use super::access::{Admitted, ReadScope};
use super::error::{ApiError, ErrorBody};
use super::openapi::{RoomPath, TokenRefusals};
use crate::canvas::geometry::Bounds;
use crate::canvas::render::pool::{PoolError, RenderPool, SlotWait};
use crate::canvas::render::{self, Budget, Caps, RenderError, View};
use crate::canvas::schema::MAIN_PAGE;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Renders running at once (each may hold ~128 MB while rasterizing).
pub const MAX_RENDERS: usize = 2;
/// Longest wait for a render slot before 503 `busy`.
const SLOT_WAIT: Duration = Duration::from_secs(10);

/// The export render pool of a server: [`MAX_RENDERS`] slots, `budget` each.
pub fn render_pool(budget: Duration) -> RenderPool {
    RenderPool::new(MAX_RENDERS, budget)
}

/// The image formats of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `image/svg+xml`.
    Svg,
    /// `image/png`.
    Png,
    /// `image/jpeg`.
    Jpeg,
}

/// A parsed export query.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportQuery {
    /// The page.
    pub page: String,
    /// The area; `None`: the page's content.
    pub area: Option<Bounds>,
    /// The asked scale.
    pub scale: f64,
}

fn invalid(detail: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", detail)
}

impl ExportQuery {
    /// Reads the query; unknown keys (such as `token`) are ignored.
    pub fn parse(query: &HashMap<String, String>) -> Result<Self, ApiError> {
        let number = |key: &str| -> Result<Option<f64>, ApiError> {
            query
                .get(key)
                .map(|raw| {
                    raw.trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|n| n.is_finite())
                        .ok_or_else(|| {
                            invalid(format!("'{key}' must be a finite number, not '{raw}'"))
                        })
                })
                .transpose()
        };
        let area = match (number("x")?, number("y")?, number("w")?, number("h")?) {
            (None, None, None, None) => None,
            (Some(x), Some(y), Some(w), Some(h)) if w > 0.0 && h > 0.0 => {
                Some(Bounds::new(x, y, w, h))
            }
            (Some(_), Some(_), Some(_), Some(_)) => {
                return Err(invalid("'w' and 'h' must be greater than 0"));
            }
            _ => return Err(invalid("give all of 'x', 'y', 'w', 'h' or none of them")),
        };
        let scale = number("scale")?.unwrap_or(1.0);
        if !(scale > 0.0 && scale <= render::MAX_SCALE) {
            return Err(invalid(format!(
                "'scale' must be greater than 0 and at most {}",
                render::MAX_SCALE
            )));
        }
        let page = query
            .get("page")
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| MAIN_PAGE.to_owned());
        Ok(ExportQuery { page, area, scale })
    }
}

/// The export routes, described.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(export_svg))
        .routes(routes!(export_png))
        .routes(routes!(export_jpg))
}

/// The query of an export, as described ([`ExportQuery::parse`] reads it, so that a bad value
/// is named in a 400 `invalid_query`); unknown keys (such as `token`) are ignored.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExportParams {
    /// The page (default `page:main`).
    pub page: Option<String>,
    /// Left of the area, in page coordinates (`x`, `y`, `w`, `h`: all four or none; none: the
    /// page's content with a margin).
    pub x: Option<f64>,
    /// Top of the area.
    pub y: Option<f64>,
    /// Width of the area (> 0).
    pub w: Option<f64>,
    /// Height of the area (> 0).
    pub h: Option<f64>,
    /// Pixels per page unit (default 1, at most 8; lowered so the image fits 8000 px a side and
    /// 32 M pixels).
    pub scale: Option<f64>,
}

/// One export route per image format: the same handler and description, its own path and
/// content type.
macro_rules! export_route {
    ($handler:ident, $id:literal, $path:literal, $content_type:literal, $summary:literal, $format:expr) => {
        #[doc = $summary]
        #[utoipa::path(
            get,
            operation_id = $id,
            summary = $summary,
            path = $path,
            tag = "exports",
            params(RoomPath, ExportParams),
            security(("bearer" = ["read"]), ("token" = ["read"])),
            responses(
                (status = 200, description = "The image (the scale used in `x-fairyring-scale`)", content_type = $content_type, body = Vec<u8>),
                (status = 400, description = "`invalid_query`, `invalid_room_name`", body = ErrorBody),
                TokenRefusals,
                (status = 404, description = "`room_not_found`, `page_not_found`, `empty_page`", body = ErrorBody),
                (status = 503, description = "`busy` (`retry-after`), `render_timeout`, `store_unavailable`", body = ErrorBody),
            ),
        )]
        async fn $handler(
            state: State<AppState>,
            query: Query<HashMap<String, String>>,
            access: Admitted<ReadScope>,
        ) -> Result<Response, ApiError> {
            export(state, query, access, $format).await
        }
    };
}

export_route!(
    export_svg,
    "exportSvg",
    "/rooms/{room}/export.svg",
    "image/svg+xml",
    "A page drawn as SVG.",
    Format::Svg
);
export_route!(
    export_png,
    "exportPng",
    "/rooms/{room}/export.png",
    "image/png",
    "A page drawn as PNG.",
    Format::Png
);
export_route!(
    export_jpg,
    "exportJpg",
    "/rooms/{room}/export.jpg",
    "image/jpeg",
    "A page drawn as JPEG.",
    Format::Jpeg
);

impl From<RenderError> for ApiError {
    fn from(error: RenderError) -> Self {
        match error {
            RenderError::InvalidArea { .. } | RenderError::InvalidScale(_) => {
                invalid(error.to_string())
            }
            RenderError::EmptyPage(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "empty_page", error.to_string())
            }
            RenderError::Raster(_) => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "render_failed",
                error.to_string(),
            ),
            RenderError::TimedOut => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "render_timeout",
                "the export took longer than the server's render budget; ask for a smaller area or scale",
            ),
            // Only seen by a client still there when the server shuts down.
            RenderError::Cancelled => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting_down",
                "the server is shutting down",
            ),
        }
    }
}

impl From<PoolError> for ApiError {
    fn from(error: PoolError) -> Self {
        match error {
            PoolError::Busy => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "busy",
                "too many exports are rendering; try again shortly",
            )
            .with_retry_after(1),
            PoolError::Render(error) => error.into(),
        }
    }
}

/// What the render pool gives back: an image, or no such page.
enum Drawn {
    Image { bytes: Vec<u8>, scale: f64 },
    NoPage,
}

/// Reads the page's shapes from `doc` (in one read transaction) and draws them: the whole
/// export's work, run on the render pool.
fn draw(
    read: &reads::PageShapes,
    q: &ExportQuery,
    format: Format,
    budget: &Budget,
) -> Result<Drawn, RenderError> {
    if !read.pages.contains(&q.page) {
        return Ok(Drawn::NoPage);
    }
    let shapes = &read.shapes;
    budget.check()?;
    let view = match q.area {
        Some(area) => View::fit(area, q.scale, Caps::default())?,
        None => View::content(shapes, &q.page, q.scale, Caps::default())?,
    };
    let bytes = match format {
        Format::Svg => render::svg_within(shapes, &q.page, &view, budget)?.into_bytes(),
        Format::Png => render::png_within(shapes, &q.page, &view, render::PngEffort::Fast, budget)?,
        Format::Jpeg => render::jpeg_within(shapes, &q.page, &view, budget)?,
    };
    Ok(Drawn::Image {
        bytes,
        scale: view.scale,
    })
}

async fn export(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
    Admitted { room: name, .. }: Admitted<ReadScope>,
    format: Format,
) -> Result<Response, ApiError> {
    let q = ExportQuery::parse(&query)?;
    let slot = state.renders.acquire(SlotWait::Upto(SLOT_WAIT)).await?;
    let source = state.rooms.read(&name).await?.ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "room_not_found",
            format!("no room '{name}' has been written"),
        )
    })?;
    let page = q.page.clone();
    let reads = state.export_reads.clone();
    let drawn = slot
        .run(move |budget| {
            let read = reads.read(&name, source, budget)?;
            budget.check()?;
            draw(&read, &q, format, budget)
        })
        .await?;
    respond(drawn, &page, format)
}

/// Draws the page of a document that is not a live room's (a version of the room's history,
/// `GET /rooms/{room}/versions/{seq}?format=svg|png`), in a render slot like an export.
pub async fn draw_document(
    state: &AppState,
    query: &HashMap<String, String>,
    doc: yrs::Doc,
    format: Format,
) -> Result<Response, ApiError> {
    let q = ExportQuery::parse(query)?;
    let slot = state.renders.acquire(SlotWait::Upto(SLOT_WAIT)).await?;
    let page = q.page.clone();
    let drawn = slot
        .run(move |budget| {
            use yrs::Transact;
            let read = reads::PageShapes::read(&doc.transact());
            budget.check()?;
            draw(&read, &q, format, budget)
        })
        .await?;
    respond(drawn, &page, format)
}

/// The response for what was drawn.
fn respond(drawn: Drawn, page: &str, format: Format) -> Result<Response, ApiError> {
    let (rendered, scale) = match drawn {
        Drawn::Image { bytes, scale } => (bytes, scale),
        Drawn::NoPage => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "page_not_found",
                format!("no page '{page}' in this room"),
            ));
        }
    };
    let content_type = match format {
        Format::Svg => "image/svg+xml",
        Format::Png => "image/png",
        Format::Jpeg => "image/jpeg",
    };
    let mut response = (StatusCode::OK, rendered).into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(v) = HeaderValue::from_str(&render::num(scale)) {
        h.insert("x-fairyring-scale", v);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Result<ExportQuery, ApiError> {
        ExportQuery::parse(
            &pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn queries_parse_or_say_why_not() {
        let d = q(&[("token", "t")]).unwrap();
        assert_eq!((d.page.as_str(), d.area, d.scale), (MAIN_PAGE, None, 1.0));
        let a = q(&[
            ("x", "-5"),
            ("y", "0"),
            ("w", "10"),
            ("h", "20"),
            ("scale", "2"),
            ("page", "page:2"),
        ])
        .unwrap();
        assert_eq!(a.area, Some(Bounds::new(-5.0, 0.0, 10.0, 20.0)));
        assert_eq!((a.page.as_str(), a.scale), ("page:2", 2.0));
        for bad in [
            vec![("x", "1")],
            vec![("x", "1"), ("y", "1"), ("w", "0"), ("h", "1")],
            vec![("scale", "0")],
            vec![("scale", "9")],
            vec![("scale", "NaN")],
            vec![("x", "a"), ("y", "1"), ("w", "1"), ("h", "1")],
        ] {
            let e = q(&bad).unwrap_err();
            assert_eq!(
                (e.status(), e.code()),
                (StatusCode::BAD_REQUEST, "invalid_query"),
                "{bad:?}"
            );
        }
    }
}
