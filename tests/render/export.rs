//! `GET /rooms/{room}/export.svg|png` and `PUT/GET /rooms/{room}/instructions` through the real
//! server with JWT auth: scopes (401/403), pages, areas, scales and the pixel cap, bad queries
//! (400 JSON), and instructions kept per room.

use crate::support;
use crate::support::server::TestServer;

use crate::support::token_matrix::{Verifier, claims, hs};
use fairyring::auth::unix_now;
use fairyring::canvas::render::{Caps, View};
use fairyring::canvas::schema::MAIN_PAGE;
use fairyring::canvas::shape::write_shape;
use fairyring::server::ServerHandle;
use resvg::tiny_skia::Pixmap;
use serde_json::{Value, json};
use support::Client;

const ROOM: &str = "alpha";

fn token(rooms: Value, scope: &str) -> String {
    hs(&claims(unix_now(), rooms, json!(scope)))
}

async fn start() -> (ServerHandle, String) {
    let server = TestServer::start(Verifier::Hs.config()).await;
    (server.handle, server.http)
}

/// Writes the fixture into `room` as a writer and waits until a reader sees all of it (so the
/// server has committed every shape).
async fn draw_fixture(server: &ServerHandle, room: &str) {
    let base = format!("ws://{}/rooms/{room}", server.addr());
    let rw = token(json!([room]), "read write");
    let mut writer = Client::connect_url(&format!("{base}?token={rw}")).await;
    let shapes = support::render::shapes();
    writer
        .edit(|txn| {
            for s in &shapes {
                write_shape(txn, s);
            }
        })
        .await;
    let ro = token(json!([room]), "read");
    let mut reader = Client::connect_url(&format!("{base}?token={ro}")).await;
    let n = shapes.len();
    reader
        .until("the fixture at the reader", |c| {
            use yrs::Transact;
            fairyring::canvas::shape::list_shapes(&c.doc.transact()).len() == n
        })
        .await;
}

async fn get(url: &str) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let r = reqwest::get(url).await.expect("request");
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.bytes().await.expect("body").to_vec())
}

fn error_code(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    v["error"].as_str().unwrap_or("<not json>").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_draw_the_room_for_readers_only() {
    let (server, http) = start().await;
    draw_fixture(&server, ROOM).await;
    let read = token(json!([ROOM]), "read");

    // SVG: every shape, in z-order.
    let (status, headers, body) =
        get(&format!("{http}/rooms/{ROOM}/export.svg?token={read}")).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(headers["content-type"], "image/svg+xml");
    let svg = String::from_utf8(body).expect("utf-8");
    let doc = roxmltree::Document::parse(&svg).expect("svg parses");
    let ids: Vec<&str> = doc
        .descendants()
        .filter_map(|n| n.attribute("data-shape-id"))
        .collect();
    let expected: Vec<String> = support::render::shapes()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, expected);

    // PNG of the content: the size of the content view.
    let (status, headers, body) =
        get(&format!("{http}/rooms/{ROOM}/export.png?token={read}")).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "image/png");
    let png = Pixmap::decode_png(&body).expect("png decodes");
    let view =
        View::content(&support::render::shapes(), MAIN_PAGE, 1.0, Caps::default()).expect("view");
    assert_eq!((png.width(), png.height()), (view.width, view.height));

    // JPEG of the same view: a baseline JPEG of the same size.
    let (status, headers, body) =
        get(&format!("{http}/rooms/{ROOM}/export.jpg?token={read}")).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "image/jpeg");
    assert_eq!(jpeg_size(&body), Some((view.width, view.height)));

    // An area at scale 2, through the Authorization header; the blue square under the red one.
    let (status, headers, body) = reqwest::Client::new()
        .get(format!(
            "{http}/rooms/{ROOM}/export.png?x=1050&y=350&w=100&h=50&scale=2"
        ))
        .bearer_auth(&read)
        .send()
        .await
        .map(|r| (r.status().as_u16(), r.headers().clone(), r))
        .expect("request");
    assert_eq!(status, 200);
    assert_eq!(headers["x-fairyring-scale"], "2");
    let png = Pixmap::decode_png(&body.bytes().await.expect("body")).expect("png");
    assert_eq!((png.width(), png.height()), (200, 100));
    let c = png.pixel(40, 60).expect("pixel").demultiply();
    assert_eq!(
        (c.red(), c.green(), c.blue()),
        (0xdc, 0xe1, 0xf8),
        "blue's tint"
    );

    // The cap: a very wide area is drawn 8000 px wide, at the scale that takes.
    let (status, headers, body) = get(&format!(
        "{http}/rooms/{ROOM}/export.png?x=0&y=0&w=80000&h=100&token={read}"
    ))
    .await;
    assert_eq!(status, 200);
    assert_eq!(headers["x-fairyring-scale"], "0.1");
    let png = Pixmap::decode_png(&body).expect("png");
    assert_eq!((png.width(), png.height()), (8000, 10));

    // Refusals, all JSON.
    let cases = [
        (
            format!("{http}/rooms/{ROOM}/export.png"),
            401,
            "missing_token",
        ),
        (
            format!("{http}/rooms/{ROOM}/export.svg?token=not.a.jwt"),
            401,
            "malformed_token",
        ),
        (
            format!(
                "{http}/rooms/{ROOM}/export.png?token={}",
                token(json!(["other"]), "read")
            ),
            403,
            "room_not_granted",
        ),
        (
            format!(
                "{http}/rooms/{ROOM}/export.png?token={}",
                token(json!([ROOM]), "fairies")
            ),
            403,
            "insufficient_scope",
        ),
        (
            format!("{http}/rooms/bad%20name/export.png?token={read}"),
            400,
            "invalid_room_name",
        ),
        (
            format!("{http}/rooms/{ROOM}/export.png?token={read}&x=1"),
            400,
            "invalid_query",
        ),
        (
            format!("{http}/rooms/{ROOM}/export.png?token={read}&scale=20"),
            400,
            "invalid_query",
        ),
        (
            format!("{http}/rooms/{ROOM}/export.svg?token={read}&x=0&y=0&w=-5&h=5"),
            400,
            "invalid_query",
        ),
        (
            format!("{http}/rooms/{ROOM}/export.svg?token={read}&page=page:none"),
            404,
            "page_not_found",
        ),
        (
            format!(
                "{http}/rooms/never/export.svg?token={}",
                token(json!(["never"]), "read")
            ),
            404,
            "room_not_found",
        ),
        (
            format!(
                "{http}/rooms/empty/export.svg?token={}",
                token(json!(["empty"]), "read")
            ),
            404,
            "empty_page",
        ),
    ];
    // A room someone joined has its pages, and nothing drawn on them.
    let _joined = Client::connect_url(&format!(
        "ws://{}/rooms/empty?token={}",
        server.addr(),
        token(json!(["empty"]), "read write")
    ))
    .await;
    for (url, status, code) in cases {
        let (got, headers, body) = get(&url).await;
        assert_eq!((got, error_code(&body).as_str()), (status, code), "{url}");
        assert_eq!(headers["content-type"], "application/json", "{url}");
    }
    server.shutdown().await;
}

async fn put(url: &str, token: Option<&str>, body: String) -> (u16, String) {
    let mut request = reqwest::Client::new().put(url).body(body);
    if let Some(t) = token {
        request = request.bearer_auth(t);
    }
    let r = request.send().await.expect("request");
    (r.status().as_u16(), r.text().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instructions_are_written_by_admins_and_read_with_fairies_scope() {
    let (server, http) = start().await;
    let url = format!("{http}/rooms/{ROOM}/instructions");
    let admin = token(json!([ROOM]), "admin");
    let fairies = token(json!([ROOM]), "read write fairies");
    let text = "Draw everything in blue.\nLabel every box.".to_owned();

    let (status, body) = put(&url, Some(&admin), text.clone()).await;
    assert_eq!(status, 204, "{body}");
    let read = |t: &str| {
        let url = url.clone();
        let t = t.to_owned();
        async move {
            let r = reqwest::Client::new()
                .get(&url)
                .bearer_auth(t)
                .send()
                .await
                .expect("get");
            (r.status().as_u16(), r.text().await.unwrap_or_default())
        }
    };
    assert_eq!(read(&fairies).await, (200, text.clone()));
    assert_eq!(read(&admin).await, (200, text.clone()));

    // Scopes: fairies may not write, readers may not read them, nobody without a token.
    let (status, body) = put(&url, Some(&fairies), "mine now".into()).await;
    assert_eq!(
        (status, error_code(body.as_bytes()).as_str()),
        (403, "insufficient_scope")
    );
    let (status, body) = read(&token(json!([ROOM]), "read write")).await;
    assert_eq!(
        (status, error_code(body.as_bytes()).as_str()),
        (403, "insufficient_scope")
    );
    let (status, body) = put(&url, None, "anon".into()).await;
    assert_eq!(
        (status, error_code(body.as_bytes()).as_str()),
        (401, "missing_token")
    );
    let other = token(json!(["other"]), "admin");
    let (status, _) = put(&url, Some(&other), "elsewhere".into()).await;
    assert_eq!(status, 403);
    assert_eq!(
        read(&fairies).await,
        (200, text),
        "refused writes changed nothing"
    );

    // Limits: 50,000 characters; an empty body removes them.
    let (status, body) = put(&url, Some(&admin), "x".repeat(50_001)).await;
    assert_eq!(
        (status, error_code(body.as_bytes()).as_str()),
        (413, "instructions_too_long")
    );
    let (status, _) = put(&url, Some(&admin), "é".repeat(50_000)).await;
    assert_eq!(status, 204);
    let (status, _) = put(&url, Some(&admin), String::new()).await;
    assert_eq!(status, 204);
    assert_eq!(read(&fairies).await, (200, String::new()));
    server.shutdown().await;
}

/// The size in a JPEG's baseline frame header (SOF0), after checking the start and end markers.
fn jpeg_size(bytes: &[u8]) -> Option<(u32, u32)> {
    if !bytes.starts_with(&[0xff, 0xd8]) || !bytes.ends_with(&[0xff, 0xd9]) {
        return None;
    }
    let mut at = 2;
    while at + 4 <= bytes.len() {
        let (marker, len) = (
            bytes[at + 1],
            u16::from_be_bytes([bytes[at + 2], bytes[at + 3]]),
        );
        if bytes[at] != 0xff {
            return None;
        }
        if marker == 0xc0 {
            let h = u16::from_be_bytes([*bytes.get(at + 5)?, *bytes.get(at + 6)?]);
            let w = u16::from_be_bytes([*bytes.get(at + 7)?, *bytes.get(at + 8)?]);
            return Some((u32::from(w), u32::from(h)));
        }
        at += 2 + usize::from(len);
    }
    None
}
