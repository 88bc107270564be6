//! The sync core through the real server on 127.0.0.1:0 with real WebSocket clients.

use crate::support;
use crate::support::server::TestServer;

use fairyring::clock::ManualClock;
use std::sync::Arc;
use std::time::Duration;

use fairyring::config::ServeConfig;
use fairyring::room::RoomConfig;
use fairyring::server::ServerHandle;
use support::{Client, metrics_text, put_shape, shape_x};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use yrs::types::ToJson;
use yrs::{Array, Doc, Map, ReadTxn, Transact, WriteTxn};

async fn start(config: ServeConfig) -> (ServerHandle, String) {
    let server = TestServer::start(config).await;
    (server.handle, server.ws)
}

async fn start_default() -> (ServerHandle, String) {
    start(ServeConfig::for_test()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_peers_converge_on_concurrent_edits() {
    let (server, base) = start_default().await;
    let mut peers = Vec::new();
    for _ in 0..6 {
        peers.push(Client::connect(&base, "converge").await);
    }
    for (i, peer) in peers.iter_mut().enumerate() {
        for j in 0..10 {
            let id = format!("s{i}-{j}");
            peer.edit(|txn| put_shape(txn, &id, (i * 100 + j) as f64))
                .await;
        }
    }
    for peer in peers.iter_mut() {
        peer.until("all 60 shapes", |c| {
            let shapes = c.doc.get_or_insert_map("shapes");
            shapes.len(&c.doc.transact()) == 60
        })
        .await;
    }
    let reference = peers[0]
        .doc
        .get_or_insert_map("shapes")
        .to_json(&peers[0].doc.transact());
    for peer in &peers {
        let shapes = peer.doc.get_or_insert_map("shapes");
        assert_eq!(shapes.to_json(&peer.doc.transact()), reference);
    }
    // New rooms carry the schema roots.
    let meta = peers[0].doc.get_or_insert_map("meta");
    assert!(
        meta.get(&peers[0].doc.transact(), "schemaVersion")
            .is_some()
    );
    let pages = peers[0].doc.get_or_insert_map("pages");
    assert!(pages.get(&peers[0].doc.transact(), "page:main").is_some());
    server.shutdown().await;
}

#[tokio::test]
async fn rooms_are_isolated() {
    let (server, base) = start_default().await;
    let mut a = Client::connect(&base, "iso-a").await;
    let mut b = Client::connect(&base, "iso-b").await;
    let mut a2 = Client::connect(&base, "iso-a").await;
    a.edit(|txn| put_shape(txn, "only-a", 1.0)).await;
    a2.until("a's shape", |c| shape_x(&c.doc, "only-a") == Some(1.0))
        .await;
    b.drain(Duration::from_millis(200)).await;
    assert_eq!(shape_x(&b.doc, "only-a"), None);
    server.shutdown().await;
}

#[tokio::test]
async fn awareness_is_relayed_and_removed_on_disconnect() {
    let (server, base) = start_default().await;
    let mut a = Client::connect(&base, "aw").await;
    let mut b = Client::connect(&base, "aw").await;
    a.set_awareness(serde_json::json!({"user": {"id": "a", "name": "Ann", "color": "red"}, "cursor": {"x": 1, "y": 2}}))
        .await;
    b.until("a's presence", |c| c.peers_present() == 1).await;
    a.set_awareness(serde_json::json!({"user": {"id": "a", "name": "Ann", "color": "red"}, "cursor": {"x": 5, "y": 6}}))
        .await;
    let a_id = a.doc.client_id();
    b.until("a's cursor update", |c| {
        c.awareness
            .state::<serde_json::Value>(a_id)
            .is_some_and(|s| s["cursor"]["x"] == 5)
    })
    .await;
    // A peer joining later receives the current states at once.
    let mut c = Client::connect(&base, "aw").await;
    c.until("existing presence", |c| c.peers_present() == 1)
        .await;
    a.close().await;
    b.until("a removed", |c| c.peers_present() == 0).await;
    c.until("a removed", |c| c.peers_present() == 0).await;
    server.shutdown().await;
}

#[tokio::test]
async fn silent_awareness_times_out_with_injected_clock() {
    let clock = ManualClock::at_unix_millis(1_000_000);
    let room_clock = clock.clone();
    let store = fairyring::store::open("memory:").await.expect("store");
    let server = TestServer::builder(ServeConfig::for_test())
        .on(store)
        .rooms(move |config| RoomConfig {
            sweep_every: Duration::from_millis(20),
            clock: Arc::new(room_clock.clone()),
            ..RoomConfig::from_serve(config)
        })
        .start()
        .await
        .handle;
    let base = format!("ws://{}", server.addr());
    let mut silent = Client::connect(&base, "timeout").await;
    let mut watcher = Client::connect(&base, "timeout").await;
    silent
        .set_awareness(serde_json::json!({"user": {"id": "s"}}))
        .await;
    watcher
        .until("silent's presence", |c| c.peers_present() == 1)
        .await;
    clock.advance(Duration::from_secs(29));
    watcher.drain(Duration::from_millis(150)).await;
    assert_eq!(watcher.peers_present(), 1, "still present before 30 s");
    clock.advance(Duration::from_millis(1_500));
    watcher
        .until("silent timed out", |c| c.peers_present() == 0)
        .await;
    server.shutdown().await;
}

#[tokio::test]
async fn documents_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = ServeConfig::for_test();
    config.store = format!("sqlite:{}", dir.path().join("db.sqlite").display());
    config.compact_every = 7;
    let (server, base) = start(config.clone()).await;
    let mut a = Client::connect(&base, "persist").await;
    for i in 0..20 {
        a.edit(|txn| put_shape(txn, &format!("p{i}"), i as f64))
            .await;
    }
    let mut b = Client::connect(&base, "persist").await;
    b.until("20 shapes", |c| shape_x(&c.doc, "p19") == Some(19.0))
        .await;
    server.shutdown().await;

    let (server, base) = start(config).await;
    let mut c = Client::connect(&base, "persist").await;
    c.until("20 shapes after restart", |c| {
        (0..20).all(|i| shape_x(&c.doc, &format!("p{i}")) == Some(i as f64))
    })
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn idle_rooms_unload_and_reload() {
    let mut config = ServeConfig::for_test();
    config.idle_unload = 0;
    let (server, base) = start(config).await;
    let mut a = Client::connect(&base, "idle").await;
    a.edit(|txn| put_shape(txn, "kept", 3.0)).await;
    a.until("echo-free sync", |_| true).await;
    let mut b = Client::connect(&base, "idle").await;
    b.until("kept", |c| shape_x(&c.doc, "kept") == Some(3.0))
        .await;
    a.close().await;
    b.close().await;
    let name = fairyring::ids::RoomName::parse("idle").expect("name");
    tokio::time::timeout(support::TIMEOUT, server.rooms().wait_unloaded(&name))
        .await
        .expect("room unloads");
    assert!(server.rooms().get_loaded(&name).is_none());
    let mut c = Client::connect(&base, "idle").await;
    c.until("kept after reload", |c| {
        shape_x(&c.doc, "kept") == Some(3.0)
    })
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn malformed_frames_close_only_that_socket() {
    let (server, base) = start_default().await;
    let mut good = Client::connect(&base, "hostile").await;
    good.edit(|txn| put_shape(txn, "safe", 7.0)).await;
    let cases: Vec<(&str, WsMessage, u16)> = vec![
        (
            "truncated varint",
            WsMessage::Binary(vec![0x80].into()),
            1007,
        ),
        (
            "truncated update",
            WsMessage::Binary(vec![0, 2, 50, 1, 2].into()),
            1007,
        ),
        (
            "unknown sync step",
            WsMessage::Binary(vec![0, 9, 0].into()),
            1007,
        ),
        (
            "unknown message type",
            WsMessage::Binary(vec![42, 0].into()),
            1003,
        ),
        (
            "garbage update",
            WsMessage::Binary(vec![0, 2, 4, 0xff, 0xff, 0xff, 0xff].into()),
            1007,
        ),
        (
            "trailing bytes",
            WsMessage::Binary(vec![0, 2, 2, 0, 0, 7].into()),
            1007,
        ),
        ("text frame", WsMessage::Text("hello".into()), 1003),
        ("empty frame", WsMessage::Binary(Vec::new().into()), 1007),
        (
            // 100,000 nested one-element arrays (200 KB): decoded by recursion, they would
            // overflow the stack of the server's worker thread and abort the whole process.
            "deeply nested value",
            WsMessage::Binary(fairyring::protocol::update(any_item(&nested_arrays(
                100_000,
            )))),
            1007,
        ),
        (
            // A map claiming 2^28 entries in 5 bytes: reserved before it is read.
            "map count the bytes cannot hold",
            WsMessage::Binary(fairyring::protocol::update(any_item(&[
                118, 0x80, 0x80, 0x80, 0x80, 0x01, 1, b'k', 126,
            ]))),
            1007,
        ),
        (
            // A subdocument: yrs 0.28 would keep the room's whole document allocated after the
            // room unloads (a reference cycle through the subdocument's item).
            "subdocument",
            WsMessage::Binary(fairyring::protocol::update(subdoc_update())),
            1007,
        ),
    ];
    for (what, frame, code) in cases {
        let mut bad = Client::connect(&base, "hostile").await;
        bad.send_ws(frame).await;
        assert_eq!(bad.until_closed().await, Some(code), "{what}");
    }
    // The room, its document and the other peer are untouched.
    let mut later = Client::connect(&base, "hostile").await;
    later
        .until("safe shape", |c| shape_x(&c.doc, "safe") == Some(7.0))
        .await;
    good.edit(|txn| put_shape(txn, "after", 8.0)).await;
    later
        .until("edit after attacks", |c| {
            shape_x(&c.doc, "after") == Some(8.0)
        })
        .await;
    assert!(good.closed.is_none());
    server.shutdown().await;
}

/// A v1 update of one item of `Any` content under the root type "m", whose one value is
/// `value` (lib0 encoding).
fn any_item(value: &[u8]) -> Vec<u8> {
    let mut update = vec![1, 1, 5, 0, 8, 1, 1, b'm', 1];
    update.extend_from_slice(value);
    update.push(0);
    update
}

/// A v1 update that puts a subdocument under the root map "m".
fn subdoc_update() -> Vec<u8> {
    let doc = Doc::with_client_id(5);
    let mut txn = doc.transact_mut();
    txn.get_or_insert_map("m")
        .insert(&mut txn, "sub", Doc::new());
    txn.encode_update_v1()
}

/// `depth` one-element arrays nested in one another around a null (lib0 encoding).
fn nested_arrays(depth: usize) -> Vec<u8> {
    let mut value = [117, 1].repeat(depth);
    value.push(126);
    value
}

/// Frames carrying legacy JSON content (Yjs `ContentJSON`), which yrs 0.28.1 decodes off by one:
/// the 90-byte fuzz find (its first, writer frame; pending, its parent is unknown) and minimal
/// variants, integrated into a root and pending.
const JSON_CONTENT_FRAMES: [(&str, &[u8]); 3] = [
    (
        "fuzz find",
        &[
            0x00, 0x02, 0x19, 0x01, 0x01, 0xbd, 0xf8, 0x01, 0x61, 0x02, 0x00, 0x00, 0xb7, 0xbe,
            0xc7, 0xa3, 0x01, 0x00, 0x01, 0x26, 0x01, 0x7d, 0x01, 0x65, 0x78, 0x74, 0x01, 0x77,
        ],
    ),
    // client 5, clock 0, info 2 (JSON), named parent "t", len 0 + one string "x", no deletes.
    (
        "integrated",
        &[
            0x00, 0x02, 0x0c, 0x01, 0x01, 0x05, 0x00, 0x02, 0x01, 0x01, b't', 0x00, 0x01, b'x',
            0x00,
        ],
    ),
    // The same under an unknown parent (client 7, clock 0): it stays pending.
    (
        "pending",
        &[
            0x00, 0x02, 0x0c, 0x01, 0x01, 0x05, 0x00, 0x02, 0x00, 0x07, 0x00, 0x00, 0x01, b'x',
            0x00,
        ],
    ),
];

async fn closed_for_bad_update(http: &str) -> u64 {
    let text = metrics_text(http).await;
    text.lines()
        .find(|line| line.starts_with("fairyring_connections_closed_total{reason=\"bad_update\"}"))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn legacy_json_content_closes_with_1007_and_room_survives() {
    let mut config = ServeConfig::for_test();
    // Compact after every commit: a poisoned pending update would panic the snapshot encoder.
    config.compact_every = 1;
    let (server, base) = start(config).await;
    let http = base.replace("ws://", "http://");
    let mut good = Client::connect(&base, "json-content").await;
    let mut watcher = Client::connect(&base, "json-content").await;
    good.edit(|txn| put_shape(txn, "safe", 7.0)).await;
    watcher
        .until("safe shape", |c| shape_x(&c.doc, "safe") == Some(7.0))
        .await;
    let closed_before = closed_for_bad_update(&http).await;
    for (what, frame) in JSON_CONTENT_FRAMES {
        let mut bad = Client::connect(&base, "json-content").await;
        bad.send_raw(frame.to_vec()).await;
        assert_eq!(bad.until_closed().await, Some(1007), "{what}");
        let reason = bad.closed.clone().flatten().map(|f| f.reason.to_string());
        assert!(
            reason.as_deref().is_some_and(|r| r.contains("ContentJSON")),
            "{what}: close reason {reason:?}"
        );
    }
    assert!(closed_for_bad_update(&http).await >= closed_before + 3);
    // The room, its document and the other peers are untouched.
    good.edit(|txn| put_shape(txn, "after", 8.0)).await;
    watcher
        .until("edit after attacks", |c| {
            shape_x(&c.doc, "after") == Some(8.0)
        })
        .await;
    let mut later = Client::connect(&base, "json-content").await;
    later
        .until("both shapes", |c| {
            shape_x(&c.doc, "safe") == Some(7.0) && shape_x(&c.doc, "after") == Some(8.0)
        })
        .await;
    assert!(good.closed.is_none() && watcher.closed.is_none());
    let name = fairyring::ids::RoomName::parse("json-content").expect("name");
    let room = server.rooms().get_loaded(&name).expect("room still loaded");
    room.flushed().await;
    let copy = support::fresh_copy(room.doc());
    assert_eq!(copy.get_or_insert_array("t").len(&copy.transact()), 0);
    server.shutdown().await;
}

#[tokio::test]
async fn oversized_messages_close_with_1009() {
    let mut config = ServeConfig::for_test();
    config.max_message_bytes = 1024;
    let (server, base) = start(config).await;
    let mut big = Client::connect(&base, "big").await;
    big.edit(|txn| put_shape(txn, &"x".repeat(4096), 1.0)).await;
    assert_eq!(big.until_closed().await, Some(1009));
    let mut huge = Client::connect(&base, "big").await;
    huge.send_raw(vec![0; 200_000]).await;
    assert_eq!(huge.until_closed().await, Some(1009));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_consumer_is_closed_and_others_continue() {
    let mut config = ServeConfig::for_test();
    config.outbound_queue = 16;
    // 36 MB from one writer as fast as the reader keeps up: past the default byte rate.
    config.rate_bytes_per_sec = u32::MAX;
    let (server, base) = start(config).await;
    let mut slow = Client::connect(&base, "slow").await;
    let mut writer = Client::connect(&base, "slow").await;
    let mut reader = Client::connect(&base, "slow").await;
    // The healthy reader reports its progress; the writer never runs more than 40 updates
    // ahead of it, so only the peer that does not read at all falls behind.
    let (progress_tx, mut progress) = tokio::sync::watch::channel(0usize);
    const TOTAL: usize = 600;
    let reading = tokio::spawn(async move {
        reader
            .until("all big shapes", |c| {
                let n = c.doc.get_or_insert_map("shapes").len(&c.doc.transact()) as usize;
                progress_tx.send_replace(n);
                n == TOTAL
            })
            .await;
        reader
    });
    let payload = "y".repeat(60_000);
    for i in 0..TOTAL {
        writer
            .edit(|txn| {
                use yrs::MapPrelim;
                let shapes = txn.get_or_insert_map("shapes");
                shapes.insert(
                    txn,
                    format!("big{i}"),
                    MapPrelim::from([("text", yrs::Any::from(payload.as_str()))]),
                );
            })
            .await;
        tokio::time::timeout(support::TIMEOUT, progress.wait_for(|n| n + 40 >= i))
            .await
            .expect("reader keeps up")
            .expect("reader alive");
    }
    let reader = reading.await.expect("reader task");
    // The slow peer never read; when it does, it finds it was closed as too slow (1013).
    assert_eq!(slow.until_closed().await, Some(1013));
    assert!(reader.closed.is_none() && writer.closed.is_none());
    server.shutdown().await;
}

#[tokio::test]
async fn bad_room_names_are_refused_before_upgrade() {
    let (server, base) = start_default().await;
    let url = format!("{base}/rooms/{}", "x".repeat(129));
    match tokio_tungstenite::connect_async(url).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 400);
            let body: serde_json::Value =
                serde_json::from_slice(response.body().as_deref().unwrap_or_default())
                    .expect("json body");
            assert_eq!(body["error"], "invalid_room_name");
            assert!(body["detail"].is_string());
        }
        other => panic!("expected a 400, got {other:?}"),
    }
    server.shutdown().await;
}

#[tokio::test]
async fn healthz_and_metrics_answer() {
    let (server, base) = start_default().await;
    let http = base.replace("ws://", "http://");
    let mut a = Client::connect(&base, "metrics").await;
    a.edit(|txn| put_shape(txn, "m", 1.0)).await;
    a.drain(Duration::from_millis(100)).await;
    let health = reqwest::get(format!("{http}/healthz"))
        .await
        .expect("healthz");
    assert_eq!(health.status(), 200);
    let text = metrics_text(&http).await;
    for name in [
        "fairyring_rooms_loaded",
        "fairyring_connections",
        "fairyring_updates_in_total",
        "fairyring_updates_out_total",
        "fairyring_bytes_in_total",
        "fairyring_store_commit_seconds_bucket",
    ] {
        assert!(text.contains(name), "{name} missing from /metrics");
    }
    server.shutdown().await;
}

/// Only the server writes as its own client id (1): a peer whose update adds blocks of that
/// client is closed with 1007, and the room keeps a state that round-trips. (Found by the
/// `protocol` fuzz target: such blocks collide with the room's own clock, stay pending in the
/// room, and a fresh document integrates them.)
#[tokio::test]
async fn updates_as_the_servers_client_id_close_with_1007() {
    let (server, base) = start_default().await;
    let mut honest = Client::connect(&base, "impostor").await;
    honest.edit(|txn| put_shape(txn, "mine", 1.0)).await;
    let mut impostor = Client::connect(&base, "impostor").await;
    let forged = Doc::with_client_id(fairyring::room::SERVER_CLIENT_ID);
    let update = {
        let mut txn = forged.transact_mut();
        let forged_root = txn.get_or_insert_map("forged");
        // Past whatever the room itself wrote as client 1 (clocks it already has would be
        // skipped by yrs as duplicates).
        for i in 0..1000 {
            forged_root.insert(&mut txn, format!("k{i}"), "v");
        }
        txn.encode_update_v1()
    };
    impostor
        .send_msg(yrs::sync::Message::Sync(yrs::sync::SyncMessage::Update(
            update,
        )))
        .await;
    assert_eq!(impostor.until_closed().await, Some(1007));
    honest.edit(|txn| put_shape(txn, "still", 2.0)).await;
    let mut watcher = Client::connect(&base, "impostor").await;
    watcher
        .until("the honest edits", |c| {
            shape_x(&c.doc, "still") == Some(2.0)
        })
        .await;
    let room = server
        .rooms()
        .get(&fairyring::ids::RoomName::parse("impostor").expect("name"))
        .await
        .expect("room");
    let copy = support::fresh_copy(room.doc());
    assert_eq!(
        copy.transact().state_vector(),
        room.doc().transact().state_vector()
    );
    server.shutdown().await;
}

/// The stored snapshot of `room` in the SQLite file at `db` (read while the server runs), as a
/// document, with the sequence number it covers.
async fn stored_snapshot(db: &std::path::Path, room: &str) -> Option<(Doc, i64)> {
    use sqlx::Row;
    let url = format!("sqlite:{}?mode=ro", db.display());
    let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url)
        .await
        .ok()?;
    let row = sqlx::query("SELECT data, seq FROM snapshots WHERE room = ?")
        .bind(room)
        .fetch_optional(&mut conn)
        .await
        .ok()??;
    let bytes: Vec<u8> = row.try_get(0).ok()?;
    let seq: i64 = row.try_get(1).ok()?;
    let doc = Doc::new();
    let update = <yrs::Update as yrs::updates::decoder::Decode>::decode_v1(&bytes).ok()?;
    doc.transact_mut().apply_update(update).ok()?;
    Some((doc, seq))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_live_room_compacts_from_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("large.sqlite");
    let mut config = ServeConfig::for_test();
    config.store = format!("sqlite:{}", db.display());
    config.compact_every = 5;
    let (server, base) = start(config).await;
    let mut a = Client::connect(&base, "large").await;
    // Over the size from which snapshots are built from the store, not the live document.
    let note = "n".repeat(300 * 1024);
    a.edit(|txn| {
        use yrs::MapPrelim;
        let shapes = txn.get_or_insert_map("shapes");
        shapes.insert(
            txn,
            "big",
            MapPrelim::from([
                ("id", yrs::Any::from("big")),
                ("note", yrs::Any::from(note)),
            ]),
        );
    })
    .await;
    for i in 0..5 {
        a.edit(|txn| put_shape(txn, &format!("q{i}"), i as f64))
            .await;
    }
    // The first snapshot (encoded from the live document: the room's first) holds it.
    let deadline = tokio::time::Instant::now() + support::TIMEOUT;
    while stored_snapshot(&db, "large").await.is_none() {
        assert!(tokio::time::Instant::now() < deadline, "no first snapshot");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Past 16 × `compact_every` small updates: the next snapshot is built from the store.
    for i in 0..100 {
        a.edit(|txn| put_shape(txn, &format!("p{i}"), i as f64))
            .await;
    }
    let mut b = Client::connect(&base, "large").await;
    b.until("every edit", |c| shape_x(&c.doc, "p99") == Some(99.0))
        .await;
    // It is written beside the room, which stays loaded: the stored snapshot catches up with
    // the edits (and holds them: it was built from what the store holds).
    let deadline = tokio::time::Instant::now() + support::TIMEOUT;
    loop {
        if let Some((doc, seq)) = stored_snapshot(&db, "large").await
            && seq >= 80
        {
            assert_eq!(shape_x(&doc, "p70"), Some(70.0));
            let txn = doc.transact();
            let big = txn.get_map("shapes").and_then(|s| s.get(&txn, "big"));
            assert!(big.is_some(), "the large shape is in the snapshot");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no snapshot covering the edits while the room is live"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        server
            .rooms()
            .get_loaded(&fairyring::ids::RoomName::parse("large").expect("name"))
            .is_some()
    );
    server.shutdown().await;
}

/// A frame on which yrs's decoder panics — sync step 1 naming client 2^53, which trips a
/// debug assertion in builds with them, as this test's binary is — closes its peer with 1007
/// and prints nothing: the panic is contained (`fairyring::contain`) before std's hook would
/// print a report and, with `RUST_BACKTRACE` set, symbolize a backtrace for every such frame.
/// Only with debug assertions (`cargo test`'s profile): without them yrs truncates the id.
#[cfg(debug_assertions)]
#[tokio::test]
async fn a_frame_that_panics_the_decoder_prints_no_report_or_backtrace() {
    use support::services::Node;
    let dir = tempfile::tempdir().expect("tempdir");
    let log_path = dir.path().join("stderr.log");
    let log = std::fs::File::create(&log_path).expect("stderr log");
    let mut node = Node::spawn_with(&["--store".into(), "memory:".into()], |command| {
        command.env("RUST_BACKTRACE", "full").stderr(log);
    });
    let base = node.ws();
    let frame = vec![
        0, 0, 10, 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10, 0,
    ];
    for _ in 0..3 {
        let mut bad = Client::connect(&base, "panics").await;
        bad.send_raw(frame.clone()).await;
        assert_eq!(bad.until_closed().await, Some(1007));
    }
    let mut good = Client::connect(&base, "panics").await;
    good.edit(|txn| put_shape(txn, "after", 3.0)).await;
    let mut watcher = Client::connect(&base, "panics").await;
    watcher
        .until("the good peer's shape", |c| {
            shape_x(&c.doc, "after") == Some(3.0)
        })
        .await;
    node.kill();
    let printed = std::fs::read_to_string(&log_path).expect("read stderr");
    assert!(
        !printed.contains("panicked at") && !printed.contains("stack backtrace"),
        "the server printed a panic report:\n{printed}"
    );
}
