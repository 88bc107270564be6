//! The token matrix through the real server over WebSockets (docs/protocol.md "Admission"), plus what only a live
//! session shows: read-only peers, expiry mid-session (close 4401), the `Authorization: Bearer`
//! header, and `POST /auth/dev-token` existing only with `--dev`.
//!
//! Refused upgrades come back as `tungstenite::Error::Http(response)` with a JSON body
//! `{"error": CODE, "detail": TEXT}`; accepted ones start with the server's y-sync message.

use crate::support::server::TestServer;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use crate::support::token_matrix::{Expect, Verifier, cases, reader_token, writer_token};
use fairyring::auth::{CLOSE_TOKEN_EXPIRED, unix_now};
use fairyring::config::ServeConfig;
use fairyring::server::ServerHandle;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{self, Message as Frame};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};
use yrs::sync::{Awareness, Message, SyncMessage};
use yrs::updates::decoder::Decode;
use yrs::updates::encoder::Encode;
use yrs::{Doc, GetString, ReadTxn, StateVector, Text, Transact, Update};

/// Upper bound for any single awaited event; generous for a loaded CI machine.
const STEP: Duration = Duration::from_secs(10);

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

async fn start(config: ServeConfig) -> ServerHandle {
    TestServer::start(config).await.handle
}

/// The result of one upgrade attempt.
enum Outcome {
    /// Upgraded; holds the socket and the first binary frame the server sent.
    Accepted(Box<Ws>, Vec<u8>),
    /// Refused before the upgrade.
    Refused { status: u16, body: Value },
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Accepted(_, first) => write!(f, "Accepted(first frame {first:?})"),
            Outcome::Refused { status, body } => write!(f, "Refused({status}, {body})"),
        }
    }
}

/// How to present the token.
#[derive(Clone, Copy)]
enum Via {
    Query,
    Bearer,
}

async fn connect(addr: SocketAddr, room: &str, token: &str, via: Via) -> Outcome {
    let mut url = format!("ws://{addr}/rooms/{room}");
    if matches!(via, Via::Query) && !token.is_empty() {
        url.push_str("?token=");
        url.push_str(token);
    }
    let mut request = match url.as_str().into_client_request() {
        Ok(request) => request,
        Err(e) => panic!("bad url {url}: {e}"),
    };
    if matches!(via, Via::Bearer) {
        let value = HeaderValue::from_str(&format!("Bearer {token}"));
        let Ok(value) = value else {
            panic!("bad header value");
        };
        request.headers_mut().insert("authorization", value);
    }
    match timeout(STEP, connect_async(request)).await {
        Err(_) => panic!("upgrade of {url} timed out"),
        Ok(Ok((mut ws, _response))) => {
            let first = next_binary(&mut ws).await;
            Outcome::Accepted(Box::new(ws), first)
        }
        Ok(Err(tungstenite::Error::Http(response))) => {
            let status = response.status().as_u16();
            let bytes = response.body().clone().unwrap_or_default();
            let body = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                panic!(
                    "refusal {status} body is not JSON ({e}): {:?}",
                    String::from_utf8_lossy(&bytes)
                )
            });
            Outcome::Refused { status, body }
        }
        Ok(Err(e)) => panic!("upgrade of {url} failed without an HTTP response: {e}"),
    }
}

/// The next binary frame (pings and pongs skipped); panics on close, end or timeout.
async fn next_binary(ws: &mut Ws) -> Vec<u8> {
    loop {
        match timeout(STEP, ws.next()).await {
            Err(_) => panic!("no frame within {STEP:?}"),
            Ok(None) => panic!("socket ended"),
            Ok(Some(Err(e))) => panic!("socket error: {e}"),
            Ok(Some(Ok(Frame::Binary(bytes)))) => return bytes.to_vec(),
            Ok(Some(Ok(Frame::Ping(_) | Frame::Pong(_)))) => {}
            Ok(Some(Ok(other))) => panic!("unexpected frame {other:?}"),
        }
    }
}

/// Reads frames until `pick` returns `Some`; every y-sync document update seen on the way is
/// applied to `doc`, so the caller can check what this peer was sent.
async fn read_until<T>(ws: &mut Ws, doc: &Doc, mut pick: impl FnMut(&Message) -> Option<T>) -> T {
    loop {
        let bytes = next_binary(ws).await;
        let message = match Message::decode_v1(&bytes) {
            Ok(message) => message,
            Err(e) => panic!("server sent an undecodable frame {bytes:?}: {e}"),
        };
        if let Message::Sync(SyncMessage::SyncStep2(update) | SyncMessage::Update(update)) =
            &message
        {
            apply(doc, update);
        }
        if let Some(found) = pick(&message) {
            return found;
        }
    }
}

fn apply(doc: &Doc, update: &[u8]) {
    let update = match Update::decode_v1(update) {
        Ok(update) => update,
        Err(e) => panic!("bad update from server: {e}"),
    };
    if let Err(e) = doc.transact_mut().apply_update(update) {
        panic!("update does not apply: {e}");
    }
}

async fn send(ws: &mut Ws, message: Message) {
    let sent = timeout(STEP, ws.send(Frame::Binary(message.encode_v1().into()))).await;
    assert!(matches!(sent, Ok(Ok(()))), "send failed: {sent:?}");
}

/// A document update that writes `text` into the root text `probe`.
fn text_update(text: &str) -> Vec<u8> {
    let doc = Doc::new();
    let root = doc.get_or_insert_text("probe");
    root.insert(&mut doc.transact_mut(), 0, text);
    doc.transact()
        .encode_state_as_update_v1(&StateVector::default())
}

fn probe_text(doc: &Doc) -> String {
    let root = doc.get_or_insert_text("probe");
    root.get_string(&doc.transact())
}

fn assert_refused(outcome: &Outcome, status: u16, code: &str, what: &str) {
    let Outcome::Refused { status: got, body } = outcome else {
        panic!("{what}: expected {status} {code}, got {outcome:?}");
    };
    assert_eq!(
        (*got, body["error"].as_str()),
        (status, Some(code)),
        "{what}: {body}"
    );
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(!detail.is_empty(), "{what}: no detail in {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_matrix_over_websockets() {
    let mut servers = HashMap::new();
    for verifier in Verifier::ALL {
        servers.insert(verifier, start(verifier.config()).await);
    }
    let mut failures = Vec::new();
    for case in cases(unix_now()) {
        let Some(server) = servers.get(&case.verifier) else {
            panic!("no server for {:?}", case.verifier);
        };
        let outcome = connect(server.addr(), case.room, &case.token, Via::Query).await;
        let ok = match (&outcome, case.expect) {
            (Outcome::Accepted(_, first), Expect::Accept { .. }) => first.first() == Some(&0),
            (Outcome::Refused { status, body }, Expect::Refuse { status: s, code }) => {
                *status == s
                    && body["error"].as_str() == Some(code)
                    && body["detail"].as_str().is_some_and(|d| !d.is_empty())
            }
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "{}: expected {:?}, got {outcome:?}",
                case.name, case.expect
            ));
        }
    }
    for (_, server) in servers {
        server.shutdown().await;
    }
    assert!(
        failures.is_empty(),
        "matrix failures:\n{}",
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_header_and_bad_room_names() {
    let server = start(Verifier::Hs.config()).await;
    let addr = server.addr();
    let token = writer_token("alpha", unix_now() + 3600);

    let by_header = connect(addr, "alpha", &token, Via::Bearer).await;
    assert!(
        matches!(&by_header, Outcome::Accepted(_, first) if first.first() == Some(&0)),
        "bearer: {by_header:?}"
    );
    let other_room = connect(addr, "beta", &token, Via::Bearer).await;
    assert_refused(&other_room, 403, "room_not_granted", "bearer, other room");

    let bad_name = connect(addr, "bad%20name!", &token, Via::Query).await;
    let Outcome::Refused { status, body } = &bad_name else {
        panic!("invalid room name accepted: {bad_name:?}");
    };
    assert_eq!(*status, 400, "{body}");
    assert!(
        body["error"].is_string() && body["detail"].is_string(),
        "{body}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_peer_cannot_write_but_is_heard() {
    let server = start(Verifier::Hs.config()).await;
    let addr = server.addr();
    let room = "ro-room";
    let exp = unix_now() + 3600;
    let Outcome::Accepted(mut writer, _) =
        connect(addr, room, &writer_token(room, exp), Via::Query).await
    else {
        panic!("writer refused");
    };
    let Outcome::Accepted(mut reader, _) =
        connect(addr, room, &reader_token(room, exp), Via::Query).await
    else {
        panic!("reader refused");
    };
    let writer_doc = Doc::new();
    let reader_doc = Doc::new();

    // The reader tries to write: it is told "permission denied" (y-protocols auth message).
    send(
        &mut reader,
        Message::Sync(SyncMessage::Update(text_update("from-reader"))),
    )
    .await;
    let reason = read_until(&mut reader, &reader_doc, |m| match m {
        Message::Auth(reason) => Some(reason.clone()),
        _ => None,
    })
    .await;
    assert!(
        reason.is_some_and(|r| !r.is_empty()),
        "denial without a reason"
    );

    // Its awareness is still relayed to the writer.
    let mut awareness = Awareness::new(Doc::new());
    let reader_client = awareness.client_id();
    if let Err(e) = awareness.set_local_state(json!({"user": {"id": "reader", "name": "R"}})) {
        panic!("awareness state: {e}");
    }
    let update = match awareness.update() {
        Ok(update) => update,
        Err(e) => panic!("awareness update: {e}"),
    };
    send(&mut reader, Message::Awareness(update)).await;
    read_until(&mut writer, &writer_doc, |m| match m {
        Message::Awareness(u) if u.clients.contains_key(&reader_client) => Some(()),
        _ => None,
    })
    .await;

    // The writer asks for the full state: the reader's text is not in the room's document.
    send(
        &mut writer,
        Message::Sync(SyncMessage::SyncStep1(writer_doc.transact().state_vector())),
    )
    .await;
    read_until(&mut writer, &writer_doc, |m| {
        matches!(m, Message::Sync(SyncMessage::SyncStep2(_))).then_some(())
    })
    .await;
    assert!(
        !probe_text(&writer_doc).contains("from-reader"),
        "read-only update was applied"
    );

    // Positive control: the writer's update does reach the reader.
    send(
        &mut writer,
        Message::Sync(SyncMessage::Update(text_update("from-writer"))),
    )
    .await;
    read_until(&mut reader, &reader_doc, |_| {
        probe_text(&reader_doc)
            .contains("from-writer")
            .then_some(())
    })
    .await;
    assert!(!probe_text(&reader_doc).contains("from-reader"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_mid_session_closes_with_4401() {
    let mut config = Verifier::Hs.config();
    config.jwt_leeway = 0;
    let server = start(config).await;
    let room = "short-lived";
    let token = writer_token(room, unix_now() + 2);
    let Outcome::Accepted(mut ws, _) = connect(server.addr(), room, &token, Via::Query).await
    else {
        panic!("short-lived token refused at connect");
    };
    let close = timeout(STEP, async {
        loop {
            match ws.next().await {
                Some(Ok(Frame::Close(frame))) => return frame,
                Some(Ok(_)) => {}
                Some(Err(e)) => panic!("socket error before the close frame: {e}"),
                None => panic!("socket ended without a close frame"),
            }
        }
    })
    .await;
    let Ok(Some(frame)) = close else {
        panic!("no close frame within {STEP:?}: {close:?}");
    };
    assert_eq!(u16::from(frame.code), CLOSE_TOKEN_EXPIRED, "{frame:?}");
    assert!(!frame.reason.is_empty(), "close without a reason");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_tokens_only_in_dev_mode() {
    let http = reqwest::Client::new();

    let mut dev_config = ServeConfig::for_test();
    dev_config.dev = true;
    let dev = start(dev_config).await;
    let url = format!("http://{}/auth/dev-token", dev.addr());
    let response = timeout(STEP, http.post(&url).json(&json!({"name": "Ada"})).send()).await;
    let Ok(Ok(response)) = response else {
        panic!("dev-token request failed: {response:?}");
    };
    assert_eq!(response.status().as_u16(), 200);
    let cookie = response
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body: Value = match response.json().await {
        Ok(body) => body,
        Err(e) => panic!("dev-token body: {e}"),
    };
    let token = body["token"].as_str().unwrap_or_default().to_owned();
    assert!(
        body["sub"].as_str().is_some_and(|s| s.starts_with("dev-")),
        "{body}"
    );
    // One sub per browser: a request carrying the cookie the first answer set keeps it (the
    // per-sub limits bind); one without it is another browser.
    let set_cookie = cookie.clone();
    assert!(
        set_cookie.starts_with("fairyring_dev_browser="),
        "{set_cookie}"
    );
    let pair = set_cookie.split(';').next().unwrap_or_default().to_owned();
    let sub_with = |cookie: Option<String>| {
        let http = http.clone();
        let url = url.clone();
        async move {
            let mut request = http.post(&url).json(&json!({"name": "Someone else"}));
            if let Some(cookie) = cookie {
                request = request.header("cookie", cookie);
            }
            let body: Value = request
                .send()
                .await
                .expect("dev token")
                .json()
                .await
                .expect("json");
            body["sub"].as_str().unwrap_or_default().to_owned()
        }
    };
    assert_eq!(
        sub_with(Some(pair)).await,
        body["sub"].as_str().unwrap_or_default()
    );
    assert_ne!(
        sub_with(None).await,
        body["sub"].as_str().unwrap_or_default()
    );
    assert_eq!(body["name"], "Ada");
    assert!(
        body["expires_at"].as_u64().is_some_and(|e| e > unix_now()),
        "{body}"
    );
    let opened = connect(dev.addr(), "any-room-at-all", &token, Via::Query).await;
    assert!(
        matches!(opened, Outcome::Accepted(..)),
        "dev token refused: {opened:?}"
    );

    let empty = timeout(STEP, http.post(&url).json(&json!({"name": ""})).send()).await;
    assert!(
        matches!(&empty, Ok(Ok(r)) if r.status().as_u16() == 400),
        "empty name: {empty:?}"
    );
    dev.shutdown().await;

    let prod = start(Verifier::Hs.config()).await;
    let url = format!("http://{}/auth/dev-token", prod.addr());
    let response = timeout(STEP, http.post(&url).json(&json!({"name": "Ada"})).send()).await;
    assert!(
        matches!(&response, Ok(Ok(r)) if r.status().as_u16() == 404),
        "without --dev the route must not exist: {response:?}"
    );
    prod.shutdown().await;
}
