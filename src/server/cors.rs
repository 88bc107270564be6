//! CORS for the HTTP API (`--cors-origins`): which other origins' pages may call it from a
//! browser. Owns only the layer built from the configured origins; it does not authenticate
//! (a preflight is answered before any route, and the real request still needs its token) and
//! does not touch the WebSocket (browsers apply no CORS to it).

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, Method, header};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::config::CorsOrigins;

/// How long a browser may keep a preflight's answer.
const MAX_AGE: Duration = Duration::from_secs(600);

/// The CORS layer for `origins`: the API's methods, the `authorization` and `content-type`
/// request headers, and the headers a client reads exposed (`retry-after`, `x-fairyring-seq`,
/// `x-fairyring-scale`). No credentials: tokens travel in `Authorization`, never in cookies.
/// An origin that is not a valid header value is left out (the config parser already refuses
/// anything but `scheme://host[:port]`).
pub fn layer(origins: &CorsOrigins) -> CorsLayer {
    let allow = match origins {
        CorsOrigins::Any => AllowOrigin::any(),
        CorsOrigins::List(list) => AllowOrigin::list(
            list.iter()
                .filter_map(|o| HeaderValue::from_str(o).ok())
                .collect::<Vec<_>>(),
        ),
    };
    CorsLayer::new()
        .allow_origin(allow)
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
        ])
        .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE])
        .expose_headers([
            header::RETRY_AFTER,
            HeaderName::from_static("x-fairyring-seq"),
            HeaderName::from_static("x-fairyring-scale"),
        ])
        .max_age(MAX_AGE)
}
