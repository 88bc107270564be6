//! Cold load: a peer that knows nothing of a room (sync step 1 with an empty state vector, or
//! one naming only clients the room never saw) gets the room's ready answer — the snapshot the
//! room was built from or last compacted to, then the updates committed since — instead of a
//! fresh encoding of the whole document. Whatever its shape, applying it to a fresh document
//! must give exactly the room's document: after a mix of updates, across compactions, after a
//! reload from a snapshot and a log, and while the room keeps changing.

use crate::support;
use crate::support::server::TestServer;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fairyring::config::ServeConfig;
use fairyring::ids::RoomName;
use fairyring::server::ServerHandle;
use fairyring::store::Store;
use futures_util::{SinkExt, StreamExt};
use support::{Client, TIMEOUT, put_shape};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use yrs::sync::{Message, SyncMessage};
use yrs::types::ToJson;
use yrs::updates::decoder::Decode;
use yrs::updates::encoder::Encode;
use yrs::{Doc, GetString, Map, ReadTxn, Snapshot, StateVector, Text, Transact, Update, WriteTxn};

/// What two documents must share to be the same document.
#[derive(Debug, PartialEq)]
struct State {
    snapshot: Snapshot,
    shapes: Option<yrs::Any>,
    notes: String,
}

fn state_of(doc: &Doc) -> State {
    let txn = doc.transact();
    State {
        snapshot: txn.snapshot(),
        shapes: txn.get_map("shapes").map(|m| m.to_json(&txn)),
        notes: txn
            .get_text("notes")
            .map(|t| t.get_string(&txn))
            .unwrap_or_default(),
    }
}

fn has_shape(state: &State, id: &str) -> bool {
    matches!(&state.shapes, Some(yrs::Any::Map(shapes)) if shapes.contains_key(id))
}

/// The state the server holds for `room`, through its own full encoding.
async fn server_state(server: &ServerHandle, room: &str) -> State {
    let room = server
        .rooms()
        .get(&RoomName::parse(room).expect("name"))
        .await
        .expect("room");
    let full = room
        .doc()
        .transact()
        .encode_state_as_update_v1(&StateVector::default());
    // Everything in that state was queued before it: once delivered, no broadcast of it can
    // reach a peer that joins afterwards ahead of that peer's own sync step 2.
    room.flushed().await;
    let doc = Doc::new();
    doc.transact_mut()
        .apply_update(Update::decode_v1(&full).expect("decodes"))
        .expect("applies");
    state_of(&doc)
}

/// Polls the server's state until it holds shape `id` (the writer's frames are in flight).
async fn server_state_with(server: &ServerHandle, room: &str, id: &str) -> State {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let state = server_state(server, room).await;
        if has_shape(&state, id) {
            return state;
        }
        assert!(tokio::time::Instant::now() < deadline, "{id} never arrived");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Connects a raw socket, sends sync step 1 with `sv`, and applies only the sync step 2 and
/// update frames that follow to a fresh document until it equals `expected` (or times out).
/// Returns the number of such frames and whether the first was a sync step 2.
async fn cold_load(base: &str, room: &str, sv: StateVector, expected: &State) -> (usize, bool) {
    let url = format!("{base}/rooms/{room}");
    let (mut ws, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .expect("connect");
    let step1 = Message::Sync(SyncMessage::SyncStep1(sv)).encode_v1();
    ws.send(WsMessage::Binary(step1.into()))
        .await
        .expect("send");
    let doc = Doc::new();
    let mut frames = 0;
    let mut first_is_step2 = None;
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while state_of(&doc) != *expected {
        let next = tokio::time::timeout_at(deadline, ws.next())
            .await
            .unwrap_or_else(|_| panic!("cold load incomplete after {frames} frames"));
        let Some(Ok(WsMessage::Binary(bytes))) = next else {
            panic!("socket ended: {next:?}");
        };
        let update = match Message::decode_v1(&bytes).expect("message") {
            Message::Sync(SyncMessage::SyncStep2(u)) => {
                first_is_step2.get_or_insert(true);
                u
            }
            Message::Sync(SyncMessage::Update(u)) => {
                first_is_step2.get_or_insert(false);
                u
            }
            _ => continue,
        };
        frames += 1;
        doc.transact_mut()
            .apply_update(Update::decode_v1(&update).expect("update decodes"))
            .expect("update applies");
    }
    let _ = ws.close(None).await;
    (frames, first_is_step2 == Some(true))
}

/// A mix of edits: shapes created, moved and deleted, text typed and cut.
async fn mixed_edits(writer: &mut Client, round: usize) {
    for i in 0..6 {
        writer
            .edit(|txn| put_shape(txn, &format!("s{round}-{i}"), (round * 10 + i) as f64))
            .await;
    }
    writer
        .edit(|txn| {
            let shapes = txn.get_or_insert_map("shapes");
            shapes.remove(txn, &format!("s{round}-1"));
            if let Some(yrs::Out::YMap(s)) = shapes.get(txn, &format!("s{round}-2")) {
                s.insert(txn, "x", -1.0);
            }
        })
        .await;
    writer
        .edit(|txn| {
            let notes = txn.get_or_insert_text("notes");
            let len = notes.len(txn);
            notes.insert(txn, len, &format!("round {round}; "));
            if len > 4 {
                notes.remove_range(txn, 0, 3);
            }
        })
        .await;
}

fn config() -> ServeConfig {
    ServeConfig {
        // Compaction every few updates, so the answer is rebuilt and extended many times.
        compact_every: 7,
        idle_unload: 3600,
        ..ServeConfig::for_test()
    }
}

async fn start(store: Arc<dyn Store>) -> (ServerHandle, String) {
    let server = TestServer::builder(config()).on(store).start().await;
    (server.handle, server.ws)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_answers_equal_the_document_through_edits_and_reloads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite:{}", dir.path().join("cold.db").display());
    let store = fairyring::store::open(&url).await.expect("store");
    let (server, base) = start(store.clone()).await;
    let mut writer = Client::connect(&base, "cold").await;
    for round in 0..5 {
        mixed_edits(&mut writer, round).await;
        // The text edit comes last; its shape is the marker that the round arrived.
        writer
            .edit(|txn| put_shape(txn, &format!("done-{round}"), 0.0))
            .await;
        let expected = server_state_with(&server, "cold", &format!("done-{round}")).await;
        let (frames, step2_first) =
            cold_load(&base, "cold", StateVector::default(), &expected).await;
        assert!(
            step2_first,
            "round {round}: the answer opens with sync step 2"
        );
        assert_eq!(frames, 1, "round {round}: one sync step 2");
    }
    // A state vector naming only a client the room never saw is a cold load too.
    let stranger = Doc::with_client_id(424_242);
    stranger
        .get_or_insert_map("local")
        .insert(&mut stranger.transact_mut(), "k", 1);
    let sv = stranger.transact().state_vector();
    let expected = server_state(&server, "cold").await;
    cold_load(&base, "cold", sv, &expected).await;
    writer.close().await;
    server.shutdown().await;

    // Reloaded (shutdown compacted it): the answer is the stored snapshot.
    let store = fairyring::store::open(&url).await.expect("store");
    let (server, base) = start(store).await;
    let reloaded = server_state(&server, "cold").await;
    assert_eq!(reloaded, expected, "the reload is the same document");
    let (frames, _) = cold_load(&base, "cold", StateVector::default(), &expected).await;
    assert_eq!(frames, 1, "just the snapshot");
    // More edits on the reloaded room: base plus tail.
    let mut writer = Client::connect(&base, "cold").await;
    writer
        .until("synced", |c| state_of(&c.doc) == expected)
        .await;
    mixed_edits(&mut writer, 9).await;
    writer.edit(|txn| put_shape(txn, "done-9", 0.0)).await;
    let expected = server_state_with(&server, "cold", "done-9").await;
    cold_load(&base, "cold", StateVector::default(), &expected).await;
    writer.close().await;
    server.shutdown().await;
}

/// A room loaded from a snapshot and a log after it (as after a crash between compactions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_answer_of_a_room_loaded_from_snapshot_and_log() {
    let source = Doc::with_client_id(77);
    let edit = |f: &dyn Fn(&mut yrs::TransactionMut)| {
        let mut txn = source.transact_mut();
        f(&mut txn);
        Bytes::from(txn.encode_update_v1())
    };
    let first = edit(&|txn| {
        for i in 0..20 {
            put_shape(txn, &format!("a{i}"), i as f64);
        }
    });
    let store: Arc<dyn Store> = Arc::new(fairyring::store::memory::MemoryStore::default());
    let name = RoomName::parse("logged").expect("name");
    let seq = store.append(&name, vec![first]).await.expect("append");
    let snapshot = Bytes::from(
        source
            .transact()
            .encode_state_as_update_v1(&StateVector::default()),
    );
    store.compact(&name, snapshot, seq).await.expect("compact");
    let log = vec![
        edit(&|txn| {
            txn.get_or_insert_map("shapes").remove(txn, "a3");
        }),
        edit(&|txn| put_shape(txn, "b", 5.0)),
        edit(&|txn| txn.get_or_insert_text("notes").insert(txn, 0, "logged")),
    ];
    store.append(&name, log).await.expect("append");
    let (server, base) = start(store).await;
    let expected = server_state(&server, "logged").await;
    assert!(has_shape(&expected, "b") && !has_shape(&expected, "a3"));
    assert_eq!(expected.notes, "logged");
    let (frames, step2_first) = cold_load(&base, "logged", StateVector::default(), &expected).await;
    assert!(step2_first);
    assert_eq!(
        frames, 1,
        "one sync step 2: the snapshot and the log, encoded afresh"
    );
    server.shutdown().await;
}
