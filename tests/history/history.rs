//! History (issue 28) against the real server with real y-sync clients: every update is logged
//! with its author (people by token, fairies by request), history pages group them, every kept
//! moment can be read back as JSON, as a Yjs update and as an image, restored and rolled back
//! actor by actor; across compaction, a restart, SQLite and PostgreSQL, and two nodes.

use crate::support;
use crate::support::server::TestServer;

use std::collections::BTreeMap;
use std::sync::Arc;

use fairyring::auth::{Authenticator, MintRequest, Scopes, unix_now};
use fairyring::config::ServeConfig;
use fairyring::server::ServerHandle;
use serde_json::{Value, json};
use support::Client;
use support::fairy_http::read_events;
use yrs::types::ToJson;
use yrs::updates::decoder::Decode;
use yrs::{Map, Transact};

const SECRET: &str = "a-history-test-secret-of-32-bytes!!";

/// Mints tokens for any person with any scope words.
struct Tokens(Authenticator);

impl Tokens {
    fn mint(&self, sub: &str, name: Option<&str>, scope: &str) -> String {
        let request = MintRequest {
            sub: sub.into(),
            name: name.map(str::to_owned),
            rooms: vec!["*".into()],
            scope: Scopes::from_words(scope.split(' ')),
            ttl: std::time::Duration::from_secs(600),
        };
        self.0.mint(request, unix_now()).expect("mint")
    }
}

fn authed(mut config: ServeConfig) -> (ServeConfig, Tokens) {
    config.insecure_no_auth = false;
    config.jwt_secret = Some(SECRET.into());
    let auth = Authenticator::from_config(&config).expect("auth");
    (config, Tokens(auth))
}

struct Server {
    handle: ServerHandle,
    ws: String,
    http: String,
}

async fn start(config: ServeConfig) -> Server {
    let store = fairyring::store::open_in(&config.store, config.store_schema.as_deref())
        .await
        .expect("store opens");
    start_on(config, store).await
}

async fn start_on(config: ServeConfig, store: Arc<dyn fairyring::store::Store>) -> Server {
    let TestServer { handle, ws, http } = TestServer::builder(config).on(store).start().await;
    Server { handle, ws, http }
}

async fn get(url: &str, token: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn post(url: &str, token: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A person's client in `room`.
async fn person(server: &Server, room: &str, token: &str) -> Client {
    Client::connect_url(&format!("{}/rooms/{room}?token={token}", server.ws)).await
}

/// Sets `keys` of shape `id` (creating it when missing), as a canvas client would.
async fn set(client: &mut Client, id: &str, keys: &[(&str, f64)]) {
    client
        .edit(|txn| {
            use yrs::{MapPrelim, WriteTxn};
            let shapes = txn.get_or_insert_map("shapes");
            let shape = match shapes.get(txn, id) {
                Some(yrs::Out::YMap(shape)) => shape,
                _ => shapes.insert(
                    txn,
                    id,
                    MapPrelim::from([
                        ("id", yrs::Any::from(id)),
                        ("type", yrs::Any::from("rectangle")),
                    ]),
                ),
            };
            for (key, value) in keys {
                shape.insert(txn, *key, *value);
            }
        })
        .await;
}

async fn delete(client: &mut Client, id: &str) {
    client
        .edit(|txn| {
            use yrs::WriteTxn;
            txn.get_or_insert_map("shapes").remove(txn, id);
        })
        .await;
}

/// The room now, once its last logged update is at least `seq` (waits for the committer).
async fn doc_at_least(server: &Server, room: &str, token: &str, seq: u64) -> (u64, Value) {
    let deadline = tokio::time::Instant::now() + support::TIMEOUT;
    loop {
        let (status, body) = get(&format!("{}/rooms/{room}/doc", server.http), token).await;
        if status == 200 && body["seq"].as_u64().unwrap_or(0) >= seq {
            return (body["seq"].as_u64().unwrap_or(0), body["doc"].clone());
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "room never reached {seq}: {status} {body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Every entry of the room's history, page by page (`limit` entries a page).
async fn all_entries(server: &Server, room: &str, token: &str, limit: usize) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut after = 0;
    loop {
        let (status, page) = get(
            &format!(
                "{}/rooms/{room}/history?after={after}&limit={limit}",
                server.http
            ),
            token,
        )
        .await;
        assert_eq!(status, 200, "{page}");
        let got = page["entries"].as_array().cloned().unwrap_or_default();
        assert!(got.len() <= limit);
        entries.extend(got);
        match page["next"].as_u64() {
            Some(next) => after = next,
            None => return entries,
        }
    }
}

fn shapes_of(doc: &Value) -> Value {
    doc.get("shapes").cloned().unwrap_or(json!({}))
}

/// A writer logs one update per edit: it waits until a watcher saw each one (durable first).
async fn edit_and_wait(writer: &mut Client, watcher: &mut Client, id: &str, keys: &[(&str, f64)]) {
    set(writer, id, keys).await;
    let (key, value) = keys[keys.len() - 1];
    watcher
        .until("the edit", |c| {
            let shapes = c.doc.get_or_insert_map("shapes");
            let txn = c.doc.transact();
            match shapes.get(&txn, id) {
                Some(yrs::Out::YMap(shape)) => {
                    matches!(shape.get(&txn, key), Some(yrs::Out::Any(yrs::Any::Number(n))) if n.as_f64() == Some(value))
                }
                _ => false,
            }
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_and_fairies_are_named_in_history_and_the_routes_need_their_scopes() {
    let (config, tokens) = authed(ServeConfig::for_test());
    let server = start(config).await;
    let room = "attributed";
    let alice = tokens.mint("alice", Some("Alice"), "read write fairies");
    let bob = tokens.mint("bob", None, "read write");
    let reader = tokens.mint("carol", None, "read");
    let mut a = person(&server, room, &alice).await;
    let mut b = person(&server, room, &bob).await;
    edit_and_wait(&mut a, &mut b, "a1", &[("x", 10.0), ("y", 10.0)]).await;
    edit_and_wait(&mut a, &mut b, "a2", &[("x", 300.0), ("y", 10.0)]).await;
    edit_and_wait(&mut b, &mut a, "a1", &[("x", 20.0)]).await;
    // A fairy invited and prompted by Alice draws.
    let (status, body) = post(
        &format!("{}/rooms/{room}/fairies", server.http),
        &alice,
        json!({"name": "Pix"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let fairy = body["id"].as_str().expect("fairy id").to_owned();
    let mut stream = {
        let response = reqwest::Client::new()
            .get(format!(
                "{}/rooms/{room}/fairies/{fairy}/events",
                server.http
            ))
            .bearer_auth(&alice)
            .send()
            .await
            .expect("events");
        assert_eq!(response.status().as_u16(), 200);
        response
    };
    let (status, body) = post(
        &format!("{}/rooms/{room}/fairies/{fairy}/prompt", server.http),
        &alice,
        json!({"message": "draw a house", "bounds": {"x": 0, "y": 400, "w": 800, "h": 600}}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let request_id = body["requestId"].as_str().expect("request id").to_owned();
    read_events(&mut stream, "request-ended").await;
    // The fairy's last writes go out with the room's next tick: a watcher sees its shape.
    a.until("the fairy's shape", |c| support::shape_count(c) > 2)
        .await;
    let (last, _) = doc_at_least(&server, room, &reader, 1).await;
    let entries = all_entries(&server, room, &reader, 2).await;
    // Oldest first, consecutive, covering every update once.
    let mut expected_from = entries[0]["fromSeq"].as_u64().expect("fromSeq");
    for entry in &entries {
        assert_eq!(entry["fromSeq"].as_u64(), Some(expected_from), "{entry}");
        expected_from = entry["toSeq"].as_u64().expect("toSeq") + 1;
        assert!(entry["until"].as_u64() >= entry["at"].as_u64());
    }
    assert!(
        expected_from > last,
        "history reaches the room's last update {last}"
    );
    let by = |kind: &str, id: &str| -> Vec<&Value> {
        entries
            .iter()
            .filter(|e| e["actor"]["kind"] == kind && e["actor"]["id"] == id)
            .collect()
    };
    let alices = by("user", "alice");
    assert!(!alices.is_empty(), "{entries:#?}");
    assert_eq!(alices[0]["actor"]["name"], "Alice");
    let added: Vec<Value> = alices
        .iter()
        .flat_map(|e| e["shapes"]["added"].as_array().cloned().unwrap_or_default())
        .collect();
    assert!(
        added.contains(&json!("a1")) && added.contains(&json!("a2")),
        "{alices:?}"
    );
    let bobs = by("user", "bob");
    assert_eq!(bobs.len(), 1, "{entries:#?}");
    assert_eq!(bobs[0]["shapes"]["updated"], json!(["a1"]));
    assert!(bobs[0]["actor"].get("name").is_none());
    let fairies = by("fairy", &fairy);
    assert!(!fairies.is_empty(), "{entries:#?}");
    let actor = &fairies[0]["actor"];
    assert_eq!(actor["requestId"], request_id.as_str());
    assert_eq!(actor["promptedBy"], "alice");
    assert_eq!(actor["model"], "offline");
    // What the fairy streamed and took back to stream again (its undo manager's writes) is the
    // fairy's too: no shape change is the server's.
    for entry in entries.iter().filter(|e| e["actor"]["kind"] == "server") {
        for list in ["added", "updated", "removed"] {
            assert_eq!(entry["shapes"][list], json!([]), "{entry}");
        }
    }
    assert!(
        fairies
            .iter()
            .any(|e| !e["shapes"]["added"].as_array().is_none_or(Vec::is_empty)),
        "the fairy's drawing is in its entries: {fairies:#?}"
    );
    // Scopes: reading needs `read`, writing `write`; JSON errors.
    let url = |path: &str| format!("{}/rooms/{room}/{path}", server.http);
    let no_token = reqwest::get(url("history")).await.expect("request");
    assert_eq!(no_token.status().as_u16(), 401);
    let (status, body) = post(&url("restore"), &reader, json!({"seq": 1})).await;
    assert_eq!(status, 403, "{body}");
    assert!(body["error"].is_string());
    let (status, body) = post(
        &url("rollback"),
        &reader,
        json!({"actor": {"kind": "user", "id": "bob"}}),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    for path in [
        "versions/abc",
        "versions/-1",
        "history?after=x",
        "history?limit=0",
        "versions?at=soon",
    ] {
        let (status, body) = get(&url(path), &reader).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert!(body["error"].is_string(), "{path}: {body}");
    }
    for path in [format!("versions/{}", last + 1000), "versions/0".to_owned()] {
        let (status, body) = get(&url(&path), &reader).await;
        assert_eq!(status, 404, "{path}: {body}");
    }
    let (status, body) = get(&format!("{}/rooms/never-written/doc", server.http), &reader).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (404, Some("room_not_found"))
    );
    a.close().await;
    b.close().await;
    server.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_are_the_room_as_it_was_and_restore_and_rollback_write_it_back() {
    let (config, tokens) = authed(ServeConfig::for_test());
    let server = start(config).await;
    let room = "versions";
    let alice = tokens.mint("alice", Some("Alice"), "read write");
    let bob = tokens.mint("bob", Some("Bob"), "read write");
    let mut a = person(&server, room, &alice).await;
    let mut b = person(&server, room, &bob).await;
    // Each step's document and sequence number, as the server answered right after it.
    let mut seen: BTreeMap<u64, Value> = BTreeMap::new();
    let mut step = |seq_doc: (u64, Value)| {
        seen.insert(seq_doc.0, seq_doc.1);
        seq_doc.0
    };
    edit_and_wait(&mut a, &mut b, "s1", &[("x", 0.0), ("y", 0.0)]).await;
    edit_and_wait(&mut a, &mut b, "s2", &[("x", 100.0), ("y", 0.0)]).await;
    let before_bob = step(doc_at_least(&server, room, &alice, 1).await);
    edit_and_wait(&mut b, &mut a, "s1", &[("x", 50.0)]).await;
    edit_and_wait(&mut b, &mut a, "b1", &[("x", 500.0), ("y", 500.0)]).await;
    step(doc_at_least(&server, room, &alice, before_bob + 2).await);
    edit_and_wait(&mut a, &mut b, "s2", &[("y", 75.0)]).await;
    delete(&mut b, "s2").await;
    b.until("s2 deleted", |c| {
        !support::shape_ids(c).contains(&"s2".to_owned())
    })
    .await;
    a.until("s2 deleted", |c| {
        !support::shape_ids(c).contains(&"s2".to_owned())
    })
    .await;
    let last = step(doc_at_least(&server, room, &alice, before_bob + 4).await);
    // Every recorded moment reads back the same, as JSON and as a Yjs update.
    for (seq, doc) in &seen {
        let (status, body) = get(
            &format!("{}/rooms/{room}/versions/{seq}", server.http),
            &alice,
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["seq"].as_u64(), Some(*seq));
        assert_eq!(shapes_of(&body["doc"]), shapes_of(doc), "version {seq}");
        assert_eq!(body["doc"]["pages"], doc["pages"]);
        let bytes = reqwest::Client::new()
            .get(format!(
                "{}/rooms/{room}/versions/{seq}?format=yjs",
                server.http
            ))
            .bearer_auth(&alice)
            .send()
            .await
            .expect("yjs")
            .bytes()
            .await
            .expect("bytes");
        let copy = yrs::Doc::new();
        copy.transact_mut()
            .apply_update(yrs::Update::decode_v1(&bytes).expect("a v1 update"))
            .expect("applies");
        let shapes = copy.get_or_insert_map("shapes");
        let ids: Vec<String> = shapes.keys(&copy.transact()).map(str::to_owned).collect();
        let expected: Vec<String> = shapes_of(doc)
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        let mut ids = ids;
        ids.sort();
        assert_eq!(ids, expected, "yjs version {seq}");
    }
    // An image of a version.
    let svg = reqwest::Client::new()
        .get(format!(
            "{}/rooms/{room}/versions/{before_bob}?format=svg",
            server.http
        ))
        .bearer_auth(&alice)
        .send()
        .await
        .expect("svg");
    assert_eq!(svg.status().as_u16(), 200);
    assert!(svg.text().await.expect("text").contains("<svg"));
    // The version at a time.
    let (status, body) = get(
        &format!("{}/rooms/{room}/versions?at={}", server.http, u64::MAX / 2),
        &alice,
    )
    .await;
    assert_eq!((status, body["seq"].as_u64()), (200, Some(last)), "{body}");
    // Rollback of Bob since the start: his move of s1 and his b1 go, his delete of s2 is taken
    // back (s2 returns as Alice left it), Alice's edits stay.
    let (status, body) = post(
        &format!("{}/rooms/{room}/rollback", server.http),
        &alice,
        json!({"actor": {"kind": "user", "id": "bob"}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body["reverted"].as_u64() >= Some(3), "{body}");
    let rolled = body["seq"].as_u64().expect("seq");
    assert!(rolled > last);
    b.until("rollback seen", |c| {
        let ids = support::shape_ids(c);
        ids.contains(&"s2".to_owned()) && !ids.contains(&"b1".to_owned())
    })
    .await;
    assert_eq!(
        support::shape_x(&b.doc, "s1"),
        Some(0.0),
        "Bob's move taken back"
    );
    let (_, now) = doc_at_least(&server, room, &alice, rolled).await;
    assert_eq!(
        now["shapes"]["s2"]["y"],
        json!(75.0),
        "Alice's edit of s2 kept"
    );
    // Restore the moment before Bob wrote anything, then take the restore back by restoring
    // the latest version: nothing is lost.
    let (status, body) = post(
        &format!("{}/rooms/{room}/restore", server.http),
        &alice,
        json!({"seq": before_bob}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let restored = body["seq"].as_u64().expect("seq");
    let (_, now) = doc_at_least(&server, room, &alice, restored).await;
    assert_eq!(shapes_of(&now), shapes_of(&seen[&before_bob]));
    a.until("restore seen", |c| {
        let shapes = c.doc.get_or_insert_map("shapes");
        let txn = c.doc.transact();
        matches!(
            shapes.get(&txn, "s2"),
            Some(yrs::Out::YMap(s)) if s.get(&txn, "y").is_some_and(|y| y == yrs::Out::Any(yrs::Any::from(0.0)))
        )
    })
    .await;
    let (status, body) = post(
        &format!("{}/rooms/{room}/restore", server.http),
        &alice,
        json!({"seq": last}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (_, now) = doc_at_least(&server, room, &alice, body["seq"].as_u64().unwrap_or(0)).await;
    assert_eq!(shapes_of(&now), shapes_of(&seen[&last]));
    // Restore and rollback are in history, as Alice, via what she did.
    let entries = all_entries(&server, room, &alice, 50).await;
    let vias: Vec<&str> = entries
        .iter()
        .filter_map(|e| e["actor"]["via"].as_str())
        .collect();
    // The two restores, one after the other, are one entry of two updates.
    assert_eq!(vias, ["rollback", "restore"], "{entries:#?}");
    let restores = &entries[entries.len() - 1];
    assert_eq!(
        restores["toSeq"].as_u64().unwrap_or(0) - restores["fromSeq"].as_u64().unwrap_or(0),
        1,
        "{restores}"
    );
    assert!(
        entries
            .iter()
            .filter(|e| e["actor"].get("via").is_some())
            .all(|e| e["actor"]["id"] == "alice")
    );
    let (status, body) = post(
        &format!("{}/rooms/{room}/restore", server.http),
        &alice,
        json!({"seq": last + 1000}),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = post(
        &format!("{}/rooms/{room}/restore", server.http),
        &alice,
        json!({"sequence": 1}),
    )
    .await;
    assert_eq!(status, 400);
    a.close().await;
    b.close().await;
    server.handle.shutdown().await;
}

/// A room of many small updates on a store that compacts every 5 and keeps a checkpoint every
/// 10: every version reads back the same before and after a restart.
async fn compaction_and_restart(config: ServeConfig, tokens: &Tokens, room: &str) {
    let token = tokens.mint("alice", Some("Alice"), "read write");
    let server = start(config.clone()).await;
    let mut a = person(&server, room, &token).await;
    let mut watcher = person(&server, room, &token).await;
    let mut seen: BTreeMap<u64, Value> = BTreeMap::new();
    for i in 0..40 {
        let id = format!("s{}", i % 7);
        edit_and_wait(
            &mut a,
            &mut watcher,
            &id,
            &[("x", f64::from(i)), ("y", f64::from(i * 2))],
        )
        .await;
        if i % 3 == 0 {
            let (seq, doc) = doc_at_least(&server, room, &token, 1).await;
            seen.insert(seq, doc);
        }
    }
    let check = |server: &Server| {
        let (http, room, token, seen) = (
            server.http.clone(),
            room.to_owned(),
            token.clone(),
            seen.clone(),
        );
        async move {
            for (seq, doc) in &seen {
                let (status, body) =
                    get(&format!("{http}/rooms/{room}/versions/{seq}"), &token).await;
                assert_eq!(status, 200, "version {seq}: {body}");
                assert_eq!(shapes_of(&body["doc"]), shapes_of(doc), "version {seq}");
            }
        }
    };
    check(&server).await;
    a.close().await;
    watcher.close().await;
    server.handle.shutdown().await;
    let server = start(config).await;
    check(&server).await;
    let entries = all_entries(&server, room, &token, 7).await;
    assert!(
        entries
            .iter()
            .all(|e| e["actor"]["id"] == "alice" || e["actor"]["kind"] == "server"),
        "{entries:#?}"
    );
    server.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_survives_compaction_and_a_restart_on_sqlite() {
    let dir = tempfile::tempdir().expect("dir");
    let mut config = ServeConfig::for_test();
    config.store = format!("sqlite:{}", dir.path().join("history.db").display());
    config.compact_every = 5;
    config.history_checkpoint_every = 10;
    let (config, tokens) = authed(config);
    compaction_and_restart(config, &tokens, "compacted").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_survives_compaction_and_a_restart_on_postgres() {
    let Some(pg) = support::services::PgSchema::fresh("history").await else {
        return;
    };
    let mut config = ServeConfig::for_test();
    config.store = pg.url.clone();
    config.store_schema = Some(pg.schema.clone());
    config.compact_every = 5;
    config.history_checkpoint_every = 10;
    let (config, tokens) = authed(config);
    compaction_and_restart(config.clone(), &tokens, "compacted").await;
    // A second node on the same store answers the same versions.
    let token = tokens.mint("alice", None, "read");
    let one = start(config.clone()).await;
    let two = start(config).await;
    let (_, now) = doc_at_least(&one, "compacted", &token, 1).await;
    let (status, last) = get(
        &format!("{}/rooms/compacted/versions?at={}", two.http, u64::MAX / 2),
        &token,
    )
    .await;
    assert_eq!(status, 200, "{last}");
    let seq = last["seq"].as_u64().expect("seq");
    for seq in [seq / 2, seq] {
        let (_, a) = get(
            &format!("{}/rooms/compacted/versions/{seq}", one.http),
            &token,
        )
        .await;
        let (_, b) = get(
            &format!("{}/rooms/compacted/versions/{seq}", two.http),
            &token,
        )
        .await;
        assert_eq!(a, b, "version {seq} from either node");
    }
    let (_, from_two) = get(
        &format!("{}/rooms/compacted/versions/{seq}", two.http),
        &token,
    )
    .await;
    assert_eq!(shapes_of(&from_two["doc"]), shapes_of(&now));
    one.handle.shutdown().await;
    two.handle.shutdown().await;
}

#[tokio::test]
async fn old_history_is_dropped_but_every_kept_version_still_reads() {
    let dir = tempfile::tempdir().expect("dir");
    let store =
        fairyring::store::open(&format!("sqlite:{}", dir.path().join("prune.db").display()))
            .await
            .expect("store");
    pruning(store).await;
}

#[tokio::test]
async fn old_history_is_dropped_but_every_kept_version_still_reads_on_postgres() {
    let Some(pg) = support::services::PgSchema::fresh("prune").await else {
        return;
    };
    let store = fairyring::store::open_in(&pg.url, Some(&pg.schema))
        .await
        .expect("store");
    pruning(store).await;
}

/// Checkpoints as a chain of deltas, pruned twice: versions read the same before and after.
async fn pruning(store: Arc<dyn fairyring::store::Store>) {
    use fairyring::store::Logged;
    use yrs::ReadTxn;
    let room = fairyring::ids::RoomName::parse("pruned").expect("name");
    // 30 updates logged at t = 1..=30 s, a snapshot and a checkpoint every 10: the first full,
    // the others deltas on the one before.
    let doc = yrs::Doc::new();
    let shapes = doc.get_or_insert_map("shapes");
    let mut states = Vec::new();
    let mut checkpointed = yrs::StateVector::default();
    for i in 1..=30u64 {
        let update = {
            let mut txn = doc.transact_mut();
            shapes.insert(&mut txn, format!("s{i}"), i as f64);
            if i > 1 {
                // Overwritten keys leave tombstones that the deltas must carry.
                shapes.insert(&mut txn, format!("s{}", i - 1), -(i as f64));
            }
            txn.encode_update_v1()
        };
        let seq = store
            .append_logged(
                &room,
                vec![Logged {
                    update: update.into(),
                    actor: None,
                    at: i * 1000,
                }],
            )
            .await
            .expect("append");
        assert_eq!(seq, i);
        states.push(shapes.to_json(&doc.transact()));
        if i % 10 == 0 {
            let full = doc
                .transact()
                .encode_state_as_update_v1(&yrs::StateVector::default());
            store
                .compact(&room, full.clone().into(), i)
                .await
                .expect("compact");
            let (base, data) = if i == 10 {
                (None, full)
            } else {
                (Some(i - 10), doc.transact().encode_diff_v1(&checkpointed))
            };
            let kept = store
                .add_checkpoint(
                    &room,
                    fairyring::store::Checkpoint {
                        seq: i,
                        base,
                        data: data.into(),
                        extends: i.saturating_sub(10),
                    },
                )
                .await
                .expect("checkpoint");
            assert!(kept);
            checkpointed = doc.transact().state_vector();
        }
    }
    // A checkpoint that does not extend the newest one is refused (another builder won).
    let stale = fairyring::store::Checkpoint {
        seq: 25,
        base: Some(10),
        data: Vec::new().into(),
        extends: 10,
    };
    assert!(!store.add_checkpoint(&room, stale).await.expect("refused"));
    let shapes_at = |version: fairyring::store::StoredVersion| {
        let doc = yrs::Doc::new();
        let shapes = doc.get_or_insert_map("shapes");
        for update in version.all() {
            doc.transact_mut()
                .apply_update(yrs::Update::decode_v1(update).expect("decode"))
                .expect("apply");
        }
        shapes.to_json(&doc.transact())
    };
    // Older than 15 s: the newest checkpoint at or before update 14 is 10 (full already).
    let dropped = store.prune_history(15_000).await.expect("prune");
    assert_eq!(dropped, 10);
    assert!(store.load_version(&room, 9).await.expect("read").is_none());
    for seq in [10, 14, 15, 29, 30] {
        let version = store
            .load_version(&room, seq)
            .await
            .expect("read")
            .expect("kept");
        assert_eq!(version.seq, seq);
        assert_eq!(
            shapes_at(version),
            states[seq as usize - 1],
            "version {seq}"
        );
    }
    // Older than 25 s: the kept checkpoint (20) is a delta, made full before 10 goes.
    let dropped = store.prune_history(25_000).await.expect("prune");
    assert_eq!(dropped, 10);
    assert!(store.load_version(&room, 19).await.expect("read").is_none());
    for seq in [20, 21, 29, 30] {
        let version = store
            .load_version(&room, seq)
            .await
            .expect("read")
            .expect("kept");
        assert_eq!(
            shapes_at(version),
            states[seq as usize - 1],
            "version {seq}"
        );
    }
    assert_eq!(store.load(&room).await.expect("load").last_seq, 30);
    assert_eq!(store.seq_at(&room, 20_500).await.expect("seq"), None);
    assert_eq!(store.seq_at(&room, 21_500).await.expect("seq"), Some(21));
    assert_eq!(store.history(&room, 0, 5).await.expect("rows")[0].seq, 21);
    store.close().await;
}

/// The room's shapes and sequence number once `ready` holds for them (polls `/doc`: the
/// committer logs a change a tick after it is seen).
async fn doc_when(
    server: &Server,
    room: &str,
    token: &str,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> (u64, Value) {
    let deadline = tokio::time::Instant::now() + support::TIMEOUT;
    loop {
        let (status, body) = get(&format!("{}/rooms/{room}/doc", server.http), token).await;
        let shapes = shapes_of(&body["doc"]);
        if status == 200 && ready(&shapes) {
            return (body["seq"].as_u64().unwrap_or(0), shapes);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never {what}: {status} {body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// What [`draw_then_restore_twice`] leaves: the server, Alice and her connection, the room as
/// it was before the house, the fairy, the request that drew the house, and the house's shapes.
struct Restored {
    server: Server,
    room: &'static str,
    alice: String,
    person: Client,
    before: u64,
    fairy: String,
    request: String,
    house: Vec<String>,
}

impl Restored {
    fn url(&self, path: &str) -> String {
        format!("{}/rooms/{}/{path}", self.server.http, self.room)
    }

    /// Waits for the house to be taken back, checks that Alice's box stays, and stops.
    async fn house_taken_back(self) {
        let (_, now) = doc_when(
            &self.server,
            self.room,
            &self.alice,
            "the house taken back",
            |s| self.house.iter().all(|id| s.get(id).is_none()),
        )
        .await;
        assert_eq!(now["box"]["x"], json!(0.0), "Alice's box stays: {now}");
        self.person.close().await;
        self.server.handle.shutdown().await;
    }
}

/// Issue 47's scene: a fairy draws a house beside Alice's box; Alice restores the room from
/// before the house (it goes), then from after it (it comes back).
async fn draw_then_restore_twice(room: &'static str) -> Restored {
    let (config, tokens) = authed(ServeConfig::for_test());
    let server = start(config).await;
    let alice = tokens.mint("alice", Some("Alice"), "read write fairies");
    let mut a = person(&server, room, &alice).await;
    set(
        &mut a,
        "box",
        &[("x", 0.0), ("y", 0.0), ("w", 100.0), ("h", 100.0)],
    )
    .await;
    let (before, _) = doc_when(&server, room, &alice, "the box logged", |s| {
        s.get("box").is_some()
    })
    .await;
    let url = |path: &str| format!("{}/rooms/{room}/{path}", server.http);
    let (status, body) = post(&url("fairies"), &alice, json!({"name": "Echo"})).await;
    assert_eq!(status, 201, "{body}");
    let fairy = body["id"].as_str().expect("fairy id").to_owned();
    let mut stream = reqwest::Client::new()
        .get(url(&format!("fairies/{fairy}/events")))
        .bearer_auth(&alice)
        .send()
        .await
        .expect("events");
    let (status, body) = post(
        &url(&format!("fairies/{fairy}/prompt")),
        &alice,
        json!({"message": "draw a house", "bounds": {"x": 0, "y": 0, "w": 1000, "h": 700}}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let request = body["requestId"].as_str().expect("requestId").to_owned();
    read_events(&mut stream, "request-ended").await;
    let by_fairy = |s: &Value| -> Vec<String> {
        s.as_object()
            .into_iter()
            .flatten()
            .filter(|(_, v)| v["createdBy"] == json!(format!("fairy:{fairy}")))
            .map(|(k, _)| k.clone())
            .collect()
    };
    let settled = |s: &Value| {
        let house = by_fairy(s);
        house.len() == 4 && house.iter().all(|id| s[id]["locked"] != json!(true))
    };
    let (after, drawn) = doc_when(&server, room, &alice, "the house drawn", settled).await;
    let house = by_fairy(&drawn);
    for (seq, what) in [(before, "the house gone"), (after, "the house back")] {
        let (status, body) = post(&url("restore"), &alice, json!({"seq": seq})).await;
        assert_eq!(status, 200, "{body}");
        let back = seq == after;
        doc_when(&server, room, &alice, what, |s| {
            house.iter().all(|id| s.get(id).is_some() == back)
        })
        .await;
    }
    Restored {
        server,
        room,
        alice,
        person: a,
        before,
        fairy,
        request,
        house,
    }
}

/// Issue 47: a restore keeps the original actors of what it brings back. After
/// [`draw_then_restore_twice`], taking back everything the fairy did since still removes the
/// house and keeps the box. Before, the second restore made the house Alice's: "nothing of the
/// fairy's was left to take back".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taking_back_a_fairy_after_restores_still_removes_its_drawing() {
    let r = draw_then_restore_twice("restored").await;
    let (status, body) = post(
        &r.url("rollback"),
        &r.alice,
        json!({"actor": {"kind": "fairy", "id": r.fairy}, "sinceSeq": r.before}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["reverted"].as_u64() >= Some(4),
        "the fairy's house is still the fairy's to take back: {body}"
    );
    r.house_taken_back().await;
}

/// Issue 47, the fairy's own take-back (`POST …/requests/{id}/revert`): after
/// [`draw_then_restore_twice`], rejecting the request that drew the house removes the house,
/// as history's rollback does, and keeps the box. Before, the restored house counted as
/// Alice's (`{"reverted": 0, "kept": 4}`) and stayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fairys_take_back_after_restores_still_removes_its_drawing() {
    let r = draw_then_restore_twice("restored-revert").await;
    let path = format!("fairies/{}/requests/{}/revert", r.fairy, r.request);
    let (status, body) = post(&r.url(&path), &r.alice, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["reverted"].as_u64(), body["kept"].as_u64()),
        (Some(4), Some(0)),
        "the restored house is still the fairy's to take back: {body}"
    );
    r.house_taken_back().await;
}
