//! Test support, shared by every integration test binary (`tests/*/main.rs`): a real y-sync
//! WebSocket client (tokio-tungstenite + yrs), the one way to start a server
//! ([`server::TestServer`]), and helpers by concern. Each binary uses a subset, hence
//! `dead_code`.
//!
//! Layout: `server` (an in-process server from a config), `services` (PostgreSQL, Redis, the
//! shipped binary as a child process), `cluster` and `pg_cluster` (Redis and PostgreSQL of a
//! test's own), `relay` (a TCP relay that stalls or cuts), `fairy_http` (the fairy HTTP API and
//! what a client sees of fairies), `llm` (model clients over the mock model server), `export`
//! (servers with a short render budget), `render` (the fixture room), `token_matrix` (the
//! auth tests' table), `npm` (Node packages), `alone` (one test in a process of its own).
#![allow(dead_code)]

pub mod alone;
pub mod cluster;
pub mod export;
pub mod fairy_http;
pub mod llm;
pub mod npm;
pub mod pg_cluster;
pub mod relay;
pub mod render;
pub mod server;
pub mod services;
pub mod token_matrix;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use yrs::sync::{Awareness, AwarenessUpdate, Message, SyncMessage};
use yrs::updates::decoder::Decode;
use yrs::updates::encoder::Encode;
use yrs::{Doc, ReadTxn, StateVector, Transact, Update};

pub const TIMEOUT: Duration = Duration::from_secs(10);

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A y-websocket-like client: a yrs doc and awareness synced with one room.
pub struct Client {
    pub doc: Doc,
    pub awareness: Awareness,
    ws: Ws,
    pub closed: Option<Option<CloseFrame>>,
}

impl Client {
    /// Connects and sends sync step 1 (like `WebsocketProvider`).
    pub async fn connect(base: &str, room: &str) -> Client {
        Self::connect_url(&format!("{base}/rooms/{room}")).await
    }

    /// [`Client::connect`], or `None` when the server refuses or cannot be reached in time
    /// (a room that cannot load while its store is down).
    pub async fn try_connect(base: &str, room: &str) -> Option<Client> {
        let url = format!("{base}/rooms/{room}");
        let (ws, _) = tokio::time::timeout(TIMEOUT, tokio_tungstenite::connect_async(url))
            .await
            .ok()?
            .ok()?;
        let doc = Doc::new();
        let awareness = Awareness::new(doc.clone());
        let mut client = Client {
            doc,
            awareness,
            ws,
            closed: None,
        };
        let sv = client.doc.transact().state_vector();
        client
            .send_msg(Message::Sync(SyncMessage::SyncStep1(sv)))
            .await;
        Some(client)
    }

    pub async fn connect_url(url: &str) -> Client {
        let (ws, _) = tokio::time::timeout(TIMEOUT, tokio_tungstenite::connect_async(url))
            .await
            .expect("connect timed out")
            .expect("connect failed");
        let doc = Doc::new();
        let awareness = Awareness::new(doc.clone());
        let mut client = Client {
            doc,
            awareness,
            ws,
            closed: None,
        };
        let sv = client.doc.transact().state_vector();
        client
            .send_msg(Message::Sync(SyncMessage::SyncStep1(sv)))
            .await;
        client
    }

    pub async fn send_msg(&mut self, msg: Message) {
        self.send_raw(msg.encode_v1()).await;
    }

    pub async fn send_raw(&mut self, bytes: Vec<u8>) {
        self.ws
            .send(WsMessage::Binary(bytes.into()))
            .await
            .expect("send");
    }

    pub async fn send_ws(&mut self, msg: WsMessage) {
        let _ = self.ws.send(msg).await;
    }

    /// Applies a local change and sends the update to the server.
    pub async fn edit(&mut self, f: impl FnOnce(&mut yrs::TransactionMut)) {
        let before = self.doc.transact().state_vector();
        {
            let mut txn = self.doc.transact_mut();
            f(&mut txn);
        }
        let update = self.doc.transact().encode_diff_v1(&before);
        self.send_msg(Message::Sync(SyncMessage::Update(update)))
            .await;
    }

    /// Sets the local awareness state and sends it.
    pub async fn set_awareness(&mut self, state: serde_json::Value) {
        self.awareness
            .set_local_state(state)
            .expect("awareness state");
        let update = self
            .awareness
            .update_with_clients([self.doc.client_id()])
            .expect("update");
        self.send_msg(Message::Awareness(update)).await;
    }

    /// Handles one incoming frame; returns false when the socket ended.
    pub async fn pump_once(&mut self, wait: Duration) -> bool {
        if self.closed.is_some() {
            return false;
        }
        let next = match tokio::time::timeout(wait, self.ws.next()).await {
            Err(_) => return true,
            Ok(next) => next,
        };
        match next {
            None | Some(Err(_)) => {
                self.closed.get_or_insert(None);
                false
            }
            Some(Ok(WsMessage::Close(frame))) => {
                self.closed = Some(frame);
                false
            }
            Some(Ok(WsMessage::Binary(bytes))) => {
                self.handle(&bytes).await;
                true
            }
            Some(Ok(_)) => true,
        }
    }

    async fn handle(&mut self, bytes: &[u8]) {
        match Message::decode_v1(bytes).expect("server sent a malformed message") {
            Message::Sync(SyncMessage::SyncStep1(sv)) => {
                let diff = self.doc.transact().encode_diff_v1(&sv);
                self.send_msg(Message::Sync(SyncMessage::SyncStep2(diff)))
                    .await;
            }
            Message::Sync(SyncMessage::SyncStep2(u) | SyncMessage::Update(u)) => {
                let update = Update::decode_v1(&u).expect("server update decodes");
                self.doc
                    .transact_mut()
                    .apply_update(update)
                    .expect("server update applies");
            }
            Message::Awareness(update) => {
                self.awareness
                    .apply_update(update)
                    .expect("awareness applies");
            }
            _ => {}
        }
    }

    /// Pumps frames until `cond` holds, panicking after [`TIMEOUT`].
    pub async fn until(&mut self, what: &str, mut cond: impl FnMut(&Client) -> bool) {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        while !cond(self) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}"
            );
            if !self.pump_once(Duration::from_millis(50)).await && !cond(self) {
                panic!("socket closed ({:?}) while waiting for {what}", self.closed);
            }
        }
    }

    /// Pumps until the server closes the socket; returns the close code.
    pub async fn until_closed(&mut self) -> Option<u16> {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        while self.pump_once(Duration::from_millis(50)).await {
            assert!(
                tokio::time::Instant::now() < deadline,
                "socket not closed in time"
            );
        }
        self.closed.clone().flatten().map(|f| u16::from(f.code))
    }

    /// Pumps briefly, handling whatever arrives.
    pub async fn drain(&mut self, wait: Duration) {
        let deadline = tokio::time::Instant::now() + wait;
        while tokio::time::Instant::now() < deadline {
            if !self.pump_once(Duration::from_millis(20)).await {
                break;
            }
        }
    }

    pub fn state(&self) -> Vec<u8> {
        self.doc
            .transact()
            .encode_state_as_update_v1(&StateVector::default())
    }

    pub fn peers_present(&self) -> usize {
        self.awareness
            .iter()
            .filter(|(id, s)| s.data.is_some() && *id != self.doc.client_id())
            .count()
    }

    /// Closes the socket and waits for the server's close reply (ignoring frames in flight).
    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
        let _ = tokio::time::timeout(TIMEOUT, async {
            while let Some(Ok(_)) = self.ws.next().await {}
        })
        .await;
    }
}

/// The server's `/metrics` text.
pub async fn metrics_text(http: &str) -> String {
    reqwest::get(format!("{http}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics body")
}

/// A fresh document built from `doc`'s full-state encoding: what a store or a new peer would
/// make of it (for round-trip checks).
pub fn fresh_copy(doc: &Doc) -> Doc {
    let state = doc
        .transact()
        .encode_state_as_update_v1(&StateVector::default());
    let copy = Doc::new();
    copy.transact_mut()
        .apply_update(Update::decode_v1(&state).expect("state decodes"))
        .expect("state applies");
    copy
}

/// A shape map's `x` as seen by a client.
/// The ids of the shapes a client holds, sorted.
pub fn shape_ids(client: &Client) -> Vec<String> {
    use yrs::Map;
    let shapes = client.doc.get_or_insert_map("shapes");
    let txn = client.doc.transact();
    let mut ids: Vec<String> = shapes.keys(&txn).map(str::to_owned).collect();
    ids.sort();
    ids
}

/// How many shapes a client holds.
pub fn shape_count(client: &Client) -> u32 {
    use yrs::Map;
    client
        .doc
        .get_or_insert_map("shapes")
        .len(&client.doc.transact())
}

/// Installs the pinned npm packages once (what `.ci/run` also does).
pub fn ensure_npm_packages(dir: &std::path::Path) {
    // Tests of one binary run at once: one `npm ci` at a time (a second then finds the packages).
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if dir.join("node_modules/y-websocket").exists() {
        return;
    }
    let status = std::process::Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .status()
        .expect("npm is required for the interop tests (install Node.js 20+)");
    assert!(status.success(), "npm ci failed in {}", dir.display());
}

pub fn shape_x(doc: &Doc, id: &str) -> Option<f64> {
    use yrs::{Map, Out};
    let shapes = doc.get_or_insert_map("shapes");
    let txn = doc.transact();
    match shapes.get(&txn, id)? {
        Out::YMap(shape) => match shape.get(&txn, "x")? {
            Out::Any(yrs::Any::Number(n)) => n.as_f64(),
            _ => None,
        },
        _ => None,
    }
}

/// Inserts a shape map `{id, x}` (what a canvas client would write).
pub fn put_shape(txn: &mut yrs::TransactionMut, id: &str, x: f64) {
    use yrs::{Map, MapPrelim, WriteTxn};
    let shapes = txn.get_or_insert_map("shapes");
    shapes.insert(
        txn,
        id,
        MapPrelim::from([("id", yrs::Any::from(id)), ("x", yrs::Any::from(x))]),
    );
}

pub fn awareness_of(update: AwarenessUpdate) -> Message {
    Message::Awareness(update)
}
