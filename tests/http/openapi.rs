//! `GET /openapi.json` (issue 29) against the real server: an OpenAPI 3.1 description that is the
//! one `fairyring openapi` prints and the web demo's API types are generated from
//! (`clients/js/openapi.json`); every operation in it is served (never the router's 404 fallback
//! nor a 405); no path in it takes a method it does not describe; and no route of the server is
//! registered outside `utoipa_axum::routes!`, the one way that serves and describes a route
//! together.

use std::path::{Path, PathBuf};

use crate::support::server::TestServer;
use fairyring::config::ServeConfig;
use fairyring::server::{self, ServerHandle};
use serde_json::Value;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// A server with auth on and `--dev` (so that `/auth/dev-token` is served, as in the
/// description `fairyring openapi` prints).
async fn start() -> (ServerHandle, String) {
    let mut config = ServeConfig::for_test();
    config.insecure_no_auth = false;
    config.dev = true;
    config.jwt_secret = Some("an-openapi-test-secret-of-at-least-32-bytes".into());
    let server = TestServer::start(config).await;
    (server.handle, server.http)
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

async fn described(http: &str) -> Value {
    let response = reqwest::get(format!("{http}/openapi.json"))
        .await
        .expect("GET /openapi.json");
    assert_eq!(response.status(), 200);
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/json")
    );
    response.json().await.expect("the description is JSON")
}

#[tokio::test]
async fn the_served_description_is_openapi_3_1_and_the_one_the_web_demo_uses() {
    let (handle, http) = start().await;
    let served = described(&http).await;
    assert!(
        served["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1")),
        "not OpenAPI 3.1: {}",
        served["openapi"]
    );
    let printed =
        serde_json::to_value(server::openapi_description()).expect("the description serializes");
    assert_eq!(
        served, printed,
        "/openapi.json differs from `fairyring openapi`"
    );
    let committed_path = root().join("clients/js/openapi.json");
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(&committed_path).expect("clients/js/openapi.json is committed"),
    )
    .expect("clients/js/openapi.json is JSON");
    assert!(
        served == committed,
        "clients/js/openapi.json is not what the server describes: run \
         `cargo run -- openapi > clients/js/openapi.json && npm run api-types --prefix clients/js` \
         and commit both"
    );
    // Every operation names its responses, and every room route its scope.
    let paths = served["paths"].as_object().expect("paths");
    assert!(paths.len() >= 25, "only {} paths described", paths.len());
    for (path, item) in paths {
        for (method, op) in item.as_object().expect("path item") {
            assert!(
                op["responses"].as_object().is_some_and(|r| !r.is_empty()),
                "{method} {path} describes no response"
            );
            if path.starts_with("/rooms/") {
                assert!(
                    op["security"].as_array().is_some_and(|s| !s.is_empty()),
                    "{method} {path} names no scope"
                );
            }
        }
    }
    // The handlers' body and answer types are in the description.
    let schemas = served["components"]["schemas"]
        .as_object()
        .expect("schemas");
    for name in [
        "ErrorBody",
        "PromptBody",
        "PromptAccepted",
        "FairyView",
        "GroupPromptBody",
        "ProjectStarted",
        "RevertAnswer",
        "DecisionAnswer",
        "ShapePatch",
        "PatchAnswer",
        "HistoryPage",
        "DocAnswer",
    ] {
        assert!(schemas.contains_key(name), "no schema {name}");
    }
    handle.shutdown().await;
}

/// `path` with its parameters filled with values of the right form.
fn concrete(path: &str) -> String {
    path.replace("{room}", "openapi-room")
        .replace("{id}", "fairy-0000000000")
        .replace("{request}", "req-0000000000")
        .replace("{project}", "project-0000000000")
        .replace("{seq}", "1")
}

/// True when the answer is the router's own refusal of a route it does not serve.
async fn unrouted(response: reqwest::Response) -> Option<String> {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let code = body["error"].as_str().unwrap_or("").to_owned();
    match (status, code.as_str()) {
        (404, "not_found") | (405, _) => Some(format!("{status} {code}")),
        _ => None,
    }
}

#[tokio::test]
async fn every_described_operation_is_served_and_no_other_method_of_its_path() {
    let (handle, http) = start().await;
    let served = described(&http).await;
    let client = reqwest::Client::new();
    // A token for every room (`read write fairies`): the probes reach the routes' own answers,
    // past admission (the fairy routes admit before their method is matched).
    let token: Value = client
        .post(format!("{http}/auth/dev-token"))
        .json(&serde_json::json!({"name": "OpenAPI"}))
        .send()
        .await
        .expect("dev token")
        .json()
        .await
        .expect("dev token JSON");
    let token = token["token"].as_str().expect("token").to_owned();
    let mut checked = 0;
    for (path, item) in served["paths"].as_object().expect("paths") {
        let url = format!("{http}{}", concrete(path));
        let item = item.as_object().expect("path item");
        for method in METHODS {
            let verb =
                reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
            let response = client
                .request(verb, &url)
                .bearer_auth(&token)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
            let status = response.status().as_u16();
            if item.contains_key(method) {
                if let Some(refusal) = unrouted(response).await {
                    panic!("{method} {path} is described but not served ({refusal})");
                }
                checked += 1;
            } else {
                assert_eq!(
                    status, 405,
                    "{method} {path} is not described, yet the server answers {status}"
                );
            }
        }
    }
    assert!(checked >= 25, "only {checked} operations checked");
    handle.shutdown().await;
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

#[test]
fn no_route_is_registered_outside_the_described_api() {
    // A route added with axum's `.route(…)` would be served and not described. Two are allowed:
    // the web demo's static files (not API) and the `--metrics-listen` listener's `/metrics`
    // (the same handler, described, on a listener of its own).
    let allowed = [
        root().join("src/server/web_demo.rs"),
        root().join("src/server/mod.rs"),
    ];
    let mut files = Vec::new();
    sources(&root().join("src/server"), &mut files);
    let mut offenders = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read source");
        let count = text.matches(".route(").count() + text.matches(".route_service(").count();
        let budget = if file == allowed[0] {
            2
        } else if file == allowed[1] {
            1
        } else {
            0
        };
        if count > budget {
            offenders.push(format!("{} ({count})", file.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "routes registered outside `utoipa_axum::routes!` (served but not in /openapi.json): {offenders:?}"
    );
}

/// `--cors-origins` (issue 44): a page of a listed origin may call the API from a browser. A
/// preflight for a `PATCH` with `authorization` is answered (before auth and the limits) with
/// that origin, the methods and headers; an unlisted origin gets no CORS header; a real answer,
/// a refusal included, carries the origin and exposes the headers clients read; without the
/// flag no CORS header is sent at all; `*` allows any origin.
#[tokio::test]
async fn cors_answers_preflights_and_requests_of_the_configured_origins_only() {
    use fairyring::config::CorsOrigins;
    const ALLOWED: &str = "http://draw.example.test:5173";
    let start_with = |origins: Option<CorsOrigins>| async move {
        let mut config = ServeConfig::for_test();
        config.insecure_no_auth = false;
        config.jwt_secret = Some("a-cors-test-secret-of-at-least-32-bytes!!".into());
        config.cors_origins = origins;
        let handle = TestServer::start(config).await.handle;
        let http = format!("http://{}", handle.addr());
        (handle, http)
    };
    let client = reqwest::Client::new();
    let preflight = |http: String, origin: &'static str| {
        client
            .request(
                reqwest::Method::OPTIONS,
                format!("{http}/rooms/r1/shapes/s1"),
            )
            .header("origin", origin)
            .header("access-control-request-method", "PATCH")
            .header(
                "access-control-request-headers",
                "authorization,content-type",
            )
            .send()
    };
    let header = |r: &reqwest::Response, name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_ascii_lowercase)
    };

    let (listed, http) = start_with(Some(CorsOrigins::List(vec![ALLOWED.into()]))).await;
    let ok = preflight(http.clone(), ALLOWED).await.expect("preflight");
    assert!(ok.status().is_success(), "preflight: {}", ok.status());
    assert_eq!(
        header(&ok, "access-control-allow-origin").as_deref(),
        Some(ALLOWED)
    );
    let methods = header(&ok, "access-control-allow-methods").unwrap_or_default();
    assert!(
        methods.contains("patch") && methods.contains("delete"),
        "{methods}"
    );
    let headers = header(&ok, "access-control-allow-headers").unwrap_or_default();
    assert!(
        headers.contains("authorization") && headers.contains("content-type"),
        "{headers}"
    );
    assert_eq!(header(&ok, "access-control-allow-credentials"), None);

    let other = preflight(http.clone(), "http://evil.example.test")
        .await
        .expect("preflight");
    assert_eq!(header(&other, "access-control-allow-origin"), None);

    // A refusal (no token) still names the origin, so the page can read the JSON error.
    let refused = client
        .get(format!("{http}/rooms/r1/doc"))
        .header("origin", ALLOWED)
        .send()
        .await
        .expect("GET");
    assert_eq!(refused.status(), 401);
    assert_eq!(
        header(&refused, "access-control-allow-origin").as_deref(),
        Some(ALLOWED)
    );
    let exposed = header(&refused, "access-control-expose-headers").unwrap_or_default();
    assert!(
        exposed.contains("retry-after") && exposed.contains("x-fairyring-seq"),
        "{exposed}"
    );
    listed.shutdown().await;

    let (off, http) = start_with(None).await;
    let none = preflight(http.clone(), ALLOWED).await.expect("preflight");
    assert_eq!(header(&none, "access-control-allow-origin"), None);
    let plain = client
        .get(format!("{http}/healthz"))
        .header("origin", ALLOWED)
        .send()
        .await
        .expect("GET");
    assert_eq!(header(&plain, "access-control-allow-origin"), None);
    off.shutdown().await;

    let (any, http) = start_with(Some(CorsOrigins::Any)).await;
    let star = preflight(http, "http://anywhere.example.test")
        .await
        .expect("preflight");
    assert_eq!(
        header(&star, "access-control-allow-origin").as_deref(),
        Some("*")
    );
    any.shutdown().await;
}
