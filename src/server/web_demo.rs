//! The browser demo's static files, embedded in the binary.
//!
//! Owns serving `web-demo/dist/` (built by `npm run build` in `web-demo/` and committed, so a
//! fresh clone runs the server without Node): `/` answers `index.html`, and every other built
//! file is served at `/{name}` with its content type. It must not touch rooms, auth or the
//! document: the page talks to the server only through the WebSocket and HTTP APIs.
//!
//! Release builds embed the files at compile time (`rust-embed`); debug builds read them from
//! `web-demo/dist/` on disk at request time, so a rebuilt dist shows without recompiling Rust.
//! Routes are registered per file (no catch-all), so merging this router never shadows an API
//! route or turns an unknown API path into an HTML page.

use std::borrow::Cow;

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rust_embed::RustEmbed;

/// The built demo (`web-demo/dist`, relative to the crate root).
#[derive(RustEmbed)]
#[folder = "web-demo/dist/"]
struct Assets;

/// The page served at `/`.
const INDEX: &str = "index.html";

/// Errors of this module (only reachable if the embedded set changes under a running server).
#[derive(Debug, thiserror::Error)]
pub enum WebDemoError {
    /// A route was registered for a file that the asset set no longer holds.
    #[error("web demo asset not found: {0}")]
    Missing(String),
}

impl IntoResponse for WebDemoError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": "not_found", "detail": self.to_string() });
        (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
    }
}

/// The names of every built file (`index.html`, `app.js`, …), sorted.
pub fn asset_names() -> Vec<String> {
    let mut names: Vec<String> = Assets::iter().map(Cow::into_owned).collect();
    names.sort();
    names
}

/// The content type served for a file name (`text/html; charset=utf-8` for HTML, and so on).
pub fn content_type(name: &str) -> String {
    let mime = mime_guess::from_path(name).first_or_octet_stream();
    let essence = mime.essence_str();
    if mime.type_() == mime_guess::mime::TEXT || essence == "application/javascript" {
        format!("{essence}; charset=utf-8")
    } else {
        essence.to_owned()
    }
}

fn serve(name: &str) -> Result<Response, WebDemoError> {
    let file = Assets::get(name).ok_or_else(|| WebDemoError::Missing(name.to_owned()))?;
    let mut response = file.data.into_owned().into_response();
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&content_type(name)) {
        headers.insert(header::CONTENT_TYPE, v);
    }
    // File names carry no content hash, so browsers must revalidate to pick up a new build.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Ok(response)
}

/// Routes serving the web demo: `/` (the page) and one route per built file. The server merges
/// this router beside its API routes.
pub fn routes() -> Router {
    let mut router = Router::new().route("/", get(|| async { serve(INDEX) }));
    for name in asset_names() {
        // Only plain names are routable; anything else in dist/ is not served rather than
        // risking an odd route pattern.
        if name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
        {
            let path = format!("/{name}");
            router = router.route(&path, get(move || async move { serve(&name) }));
        }
    }
    router
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn spawn() -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        tokio::spawn(async move { axum::serve(listener, routes()).await });
        addr
    }

    async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String, String, Vec<u8>) {
        let res = reqwest::get(format!("http://{addr}{path}"))
            .await
            .expect("request");
        let status = res.status().as_u16();
        let header = |name: header::HeaderName| {
            res.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        let ct = header(header::CONTENT_TYPE);
        let cache = header(header::CACHE_CONTROL);
        let body = res.bytes().await.expect("body").to_vec();
        (status, ct, cache, body)
    }

    #[test]
    fn the_built_demo_is_embedded() {
        let names = asset_names();
        for needed in ["index.html", "app.js", "app.css"] {
            assert!(names.iter().any(|n| n == needed), "{needed} in {names:?}");
        }
    }

    #[test]
    fn content_types_match_the_files() {
        assert_eq!(content_type("index.html"), "text/html; charset=utf-8");
        // mime_guess names `.js` `text/javascript` (RFC 9239); older tables say `application/…`.
        let js = content_type("app.js");
        assert!(
            js.contains("javascript") && js.ends_with("; charset=utf-8"),
            "{js}"
        );
        assert_eq!(content_type("app.css"), "text/css; charset=utf-8");
        assert_eq!(content_type("logo.png"), "image/png");
        assert_eq!(content_type("noext"), "application/octet-stream");
    }

    #[tokio::test]
    async fn root_serves_the_page_and_assets_have_their_types() {
        let addr = spawn().await;
        let (status, ct, cache, body) = get(addr, "/").await;
        assert_eq!(status, 200);
        assert_eq!(ct, "text/html; charset=utf-8");
        assert_eq!(cache, "no-cache");
        let page = String::from_utf8(body).expect("utf-8 page");
        assert!(page.contains("<svg id=\"canvas\""), "the canvas page");
        assert!(page.contains("./app.js"), "links the bundle");

        let (status, ct, _, body) = get(addr, "/app.js").await;
        assert_eq!(status, 200);
        assert!(ct.contains("javascript"), "{ct}");
        assert!(body.len() > 1000, "the minified bundle");

        let (status, ct, _, _) = get(addr, "/app.css").await;
        assert_eq!(status, 200);
        assert_eq!(ct, "text/css; charset=utf-8");

        let (status, _, _, _) = get(addr, "/index.html").await;
        assert_eq!(status, 200);
    }

    #[tokio::test]
    async fn unknown_and_traversal_paths_are_not_served() {
        let addr = spawn().await;
        for path in [
            "/nope.js",
            "/../Cargo.toml",
            "/%2e%2e/Cargo.toml",
            "/app.js/x",
            "/rooms/demo",
        ] {
            let (status, _, _, _) = get(addr, path).await;
            assert_eq!(status, 404, "{path}");
        }
    }
}
