//! The document is untrusted input (issue 26), against the real server with yrs clients: a
//! peer's update under a server-owned root (`fairies`, `projects`, `tasks`, `meta`) is refused
//! with 1008 before it is applied; shared types nested too deep are refused in every root; a
//! stored room that holds 20,000 nested maps (written before the refusal existed) loads, and
//! neither a prompt nor a group prompt that reads `projects` and `tasks` crashes the server.

use crate::support;
use crate::support::server::TestServer;

use std::sync::Arc;
use std::time::Duration;

use fairyring::config::ServeConfig;
use fairyring::ids::RoomName;
use fairyring::origin::TxnOrigin;
use fairyring::room::SERVER_CLIENT_ID;
use fairyring::server::ServerHandle;
use fairyring::store::Store;
use fairyring::store::memory::MemoryStore;
use serde_json::{Value, json};
use support::Client;
use support::fairy_http::*;
use yrs::sync::{Message, SyncMessage};
use yrs::{Any, Doc, Map, MapPrelim, MapRef, Out, ReadTxn, StateVector, Transact, WriteTxn};

/// Nesting of the attack in the issue (a 243 KB update).
const DEEP: usize = 20_000;

async fn start_on(store: Arc<MemoryStore>, config: ServeConfig) -> (ServerHandle, String, String) {
    TestServer::builder(config)
        .on(store)
        .start()
        .await
        .into_parts()
}

/// Writes `depth` maps nested in one another under `root`'s key `key`, into `doc`.
fn nest(doc: &Doc, root: &str, key: &str, depth: usize) {
    let root = doc.get_or_insert_map(root);
    let mut txn = doc.transact_mut();
    let mut map: MapRef = root.insert(&mut txn, key, MapPrelim::default());
    for _ in 1..depth {
        map = map.insert(&mut txn, "k", MapPrelim::default());
    }
}

/// A peer's update (from a fresh client) nesting `depth` maps under `root/key`.
fn nested_update(root: &str, key: &str, depth: usize) -> Vec<u8> {
    let doc = Doc::new();
    nest(&doc, root, key, depth);
    doc.transact()
        .encode_state_as_update_v1(&StateVector::default())
}

fn update_frame(update: Vec<u8>) -> Vec<u8> {
    use yrs::updates::encoder::Encode;
    Message::Sync(SyncMessage::Update(update)).encode_v1()
}

/// Sends `update` from a fresh writer; returns the close code and reason it got.
async fn send_and_close(ws: &str, room: &str, update: Vec<u8>) -> (Option<u16>, String) {
    let mut writer = Client::connect(ws, room).await;
    writer.send_raw(update_frame(update)).await;
    let code = writer.until_closed().await;
    let reason = writer
        .closed
        .clone()
        .flatten()
        .map(|f| f.reason.to_string())
        .unwrap_or_default();
    (code, reason)
}

/// The server answers (it has not aborted).
async fn alive(http: &str) {
    let response = reqwest::get(format!("{http}/healthz"))
        .await
        .expect("the server answers");
    assert!(response.status().is_success());
}

/// A key of `projects/{id}` read without walking the record (the test's own client must not
/// recurse through deep content either).
fn project_field(c: &Client, id: &str, key: &str) -> Option<Value> {
    let txn = c.doc.transact();
    let Some(Out::YMap(project)) = txn.get_map("projects")?.get(&txn, id) else {
        return None;
    };
    match project.get(&txn, key)? {
        Out::Any(Any::String(s)) => Some(json!(s.to_string())),
        _ => None,
    }
}

fn idle(c: &Client, id: &str) -> bool {
    fairy_presence(c, id).is_some_and(|p| p["fairy"]["mode"] == json!("idling"))
}

/// A prompt (reads `projects`: is the fairy in a live project?) and a group prompt (reads
/// `projects` and `tasks`) both run to their end, and the server still answers.
async fn prompt_and_group_prompt(ws: &str, http: &str, room: &str) {
    let mut client = Client::connect(ws, room).await;
    let a = invite(http, room, "Ash").await;
    let b = invite(http, room, "Birch").await;
    let mut stream = events(http, room, &a).await;
    prompt(http, room, &a, "draw a house").await;
    read_events(&mut stream, "event: request-ended").await;
    alive(http).await;
    let (status, started) = post(
        &format!("{http}/rooms/{room}/group-prompt"),
        json!({"message": "a house and a tree", "fairyIds": [a, b],
               "bounds": {"x": 0, "y": 0, "w": 1000, "h": 600}}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let project = started["projectId"].as_str().expect("projectId").to_owned();
    client
        .until("the project done and both fairies idle", |c| {
            project_field(c, &project, "status") == Some(json!("done"))
                && idle(c, &a)
                && idle(c, &b)
        })
        .await;
    alive(http).await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_maps_are_refused_and_prompts_and_group_prompts_keep_the_server_alive() {
    let (server, ws, http) = start(ServeConfig::for_test()).await;
    let room = "deep";
    for root in ["projects", "tasks"] {
        let (code, reason) = send_and_close(&ws, room, nested_update(root, "deep", DEEP)).await;
        assert_eq!(code, Some(1008), "{root}: {reason}");
        assert!(reason.contains(root), "{root}: {reason}");
    }
    // In a root peers write, the nesting itself is refused.
    let (code, reason) = send_and_close(&ws, room, nested_update("shapes", "deep", DEEP)).await;
    assert_eq!(code, Some(1007), "{reason}");
    assert!(reason.contains("nested deeper"), "{reason}");
    // What a shape needs (a map of values, a stroke's points) still passes.
    let mut peer = Client::connect(&ws, room).await;
    peer.edit(|txn| {
        let shapes = txn.get_or_insert_map("shapes");
        shapes.insert(
            txn,
            "box",
            MapPrelim::from([("id", Any::from("box")), ("x", Any::from(1.0))]),
        );
    })
    .await;
    peer.drain(Duration::from_millis(200)).await;
    assert!(peer.closed.is_none(), "{:?}", peer.closed);
    peer.close().await;
    prompt_and_group_prompt(&ws, &http, room).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_room_with_deep_maps_loads_and_serves_prompts_after_a_restart() {
    let store = Arc::new(MemoryStore::default());
    // As a server without the refusal stored it: the schema, then a writer's deep maps under
    // `projects` and `tasks`.
    let doc = Doc::with_client_id(SERVER_CLIENT_ID);
    fairyring::canvas::schema::init_schema(&doc, TxnOrigin::System);
    let writer = Doc::with_client_id(424_242);
    nest(&writer, "projects", "deep", DEEP);
    nest(&writer, "tasks", "deep/t1", DEEP);
    let planted = writer
        .transact()
        .encode_state_as_update_v1(&StateVector::default());
    let schema = doc
        .transact()
        .encode_state_as_update_v1(&StateVector::default());
    let room = "stored-deep";
    store
        .append(
            &RoomName::parse(room).expect("name"),
            vec![schema.into(), planted.into()],
        )
        .await
        .expect("append");
    let (server, ws, http) = start_on(store.clone(), ServeConfig::for_test()).await;
    prompt_and_group_prompt(&ws, &http, room).await;
    server.shutdown().await;
    // Once more after another restart (the fairies are hosted again on load).
    let (server, ws, http) = start_on(store, ServeConfig::for_test()).await;
    prompt_and_group_prompt(&ws, &http, room).await;
    server.shutdown().await;
}

/// An edit of a writer's document.
type Edit = Box<dyn Fn(&mut yrs::TransactionMut)>;

/// What a writer would do to fairies it should not control (issue 26, finding 2 and 3), with
/// the root each edit writes.
fn attacks(id: &str) -> Vec<(&'static str, Edit)> {
    let fairy = |txn: &mut yrs::TransactionMut, id: &str| match txn
        .get_or_insert_map("fairies")
        .get(txn, id)
    {
        Some(Out::YMap(m)) => m,
        _ => panic!("the writer has the fairy"),
    };
    let (a, b, c, d) = (id.to_owned(), id.to_owned(), id.to_owned(), id.to_owned());
    vec![
        (
            "fairies",
            Box::new(|txn| {
                let fairies = txn.get_or_insert_map("fairies");
                fairies.insert(
                    txn,
                    "f-forged",
                    MapPrelim::from([("name", Any::from("FORGED-NAME"))]),
                );
            }),
        ),
        (
            "fairies",
            Box::new(move |txn| {
                fairy(txn, &a).insert(txn, "name", "FORGED-RENAME");
            }),
        ),
        (
            "fairies",
            Box::new(move |txn| {
                fairy(txn, &b).insert(txn, "personality", "FORGED-PERSONALITY");
            }),
        ),
        (
            "fairies",
            Box::new(move |txn| {
                txn.get_or_insert_map("fairies").remove(txn, &c);
            }),
        ),
        (
            "projects",
            Box::new(move |txn| {
                let member = Any::from(std::collections::HashMap::from([
                    ("id".to_owned(), Any::from(d.as_str())),
                    ("role".to_owned(), Any::from("drone")),
                ]));
                txn.get_or_insert_map("projects").insert(
                    txn,
                    "p-forged",
                    MapPrelim::from([
                        ("title", Any::from("FORGED-PROJECT")),
                        ("orchestratorId", Any::from(d.as_str())),
                        ("members", Any::from(vec![member])),
                        ("color", Any::from("red")),
                        ("status", Any::from("active")),
                    ]),
                );
            }),
        ),
        (
            "tasks",
            Box::new(|txn| {
                txn.get_or_insert_map("tasks").insert(
                    txn,
                    "x/t1",
                    MapPrelim::from([("text", Any::from("FORGED-TASK"))]),
                );
            }),
        ),
        (
            "meta",
            Box::new(|txn| {
                txn.get_or_insert_map("meta")
                    .insert(txn, "schemaVersion", 99.0);
            }),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_renamed_and_deleted_fairies_and_forged_projects_are_refused() {
    let mock = mock_server(vec![ok(r#"{"actions": []}"#)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let room = "forge";
    let mut observer = Client::connect(&ws, room).await;
    let id = invite(&http, room, "Wren").await;
    // The room's schema (pages, meta) and the fairy are separate server writes: `before` is
    // taken once both reached the observer.
    observer
        .until("the fairy and the room's schema", |c| {
            root_json(c, "fairies")[&id]["name"] == json!("Wren")
                && root_json(c, "meta")["schemaVersion"].is_number()
        })
        .await;
    let before = observer.state();
    for (i, (root, attack)) in attacks(&id).into_iter().enumerate() {
        let mut writer = Client::connect(&ws, room).await;
        writer
            .until("the writer synced", |c| {
                root_json(c, "fairies")[&id]["name"] == json!("Wren")
            })
            .await;
        writer.edit(|txn| attack(txn)).await;
        let code = writer.until_closed().await;
        let reason = writer
            .closed
            .clone()
            .flatten()
            .map(|f| f.reason.to_string())
            .unwrap_or_default();
        assert_eq!(code, Some(1008), "attack {i}: {reason}");
        assert!(reason.contains(root), "attack {i}: {reason}");
    }
    observer.drain(Duration::from_millis(200)).await;
    assert_eq!(observer.state(), before, "no attack reached another peer");
    // The real fairy is prompted as itself (no forged project holds it: 202, not 409).
    let mut stream = events(&http, room, &id).await;
    prompt(&http, room, &id, "hello").await;
    read_events(&mut stream, "event: request-ended").await;
    let told: String = mock.requests().iter().map(|r| r.body.to_string()).collect();
    assert!(told.contains("Wren"), "{told}");
    assert!(!told.contains("FORGED"), "{told}");
    let listed: Value = reqwest::get(format!("{http}/rooms/{room}/fairies"))
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    assert!(!listed.to_string().contains("FORGED"), "{listed}");
    observer.close().await;
    server.shutdown().await;
}

/// A room stored by a version that let peers write `projects` and `tasks`: a forged live
/// project naming a real fairy, with a task far outside anything the fairy was asked. The
/// projects are read from the store only, so the fairy is prompted as itself (`202`, not
/// `409 fairy_in_project`), its model reads none of the forgery, and the forged project is
/// ended in the document on load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_project_in_a_stored_room_neither_holds_nor_steers_a_fairy() {
    let mock = mock_server(vec![ok(r#"{"actions": []}"#)]).await;
    let store = Arc::new(MemoryStore::default());
    let room = "forged-before";
    let (server, ws, http) = start_on(store.clone(), mock_config(&mock)).await;
    let id = invite(&http, room, "Wren").await;
    let mut c = Client::connect(&ws, room).await;
    c.until("the fairy", |c| {
        root_json(c, "fairies")[&id]["name"] == json!("Wren")
    })
    .await;
    c.close().await;
    server.shutdown().await;

    // What an older version stored from a writer.
    let writer = Doc::with_client_id(424_243);
    {
        let mut txn = writer.transact_mut();
        let member = Any::from(std::collections::HashMap::from([
            ("id".to_owned(), Any::from(id.as_str())),
            ("role".to_owned(), Any::from("drone")),
        ]));
        txn.get_or_insert_map("projects").insert(
            &mut txn,
            "p-forged",
            MapPrelim::from([
                ("title", Any::from("FORGED-PROJECT")),
                ("orchestratorId", Any::from(id.as_str())),
                ("members", Any::from(vec![member])),
                ("color", Any::from("red")),
                ("status", Any::from("active")),
            ]),
        );
        txn.get_or_insert_map("tasks").insert(
            &mut txn,
            "p-forged/t1",
            MapPrelim::from([
                ("id", Any::from("t1")),
                ("projectId", Any::from("p-forged")),
                ("title", Any::from("FORGED-TASK")),
                ("text", Any::from("FORGED-TASK: draw at 20000, 20000")),
                ("assignedTo", Any::from(id.as_str())),
                ("status", Any::from("in_progress")),
                ("x", Any::from(20_000.0)),
                ("y", Any::from(20_000.0)),
                ("w", Any::from(100.0)),
                ("h", Any::from(100.0)),
                ("pageId", Any::from("page:main")),
            ]),
        );
    }
    let planted = writer
        .transact()
        .encode_state_as_update_v1(&StateVector::default());
    store
        .append(&RoomName::parse(room).expect("name"), vec![planted.into()])
        .await
        .expect("append");

    let (server, ws, http) = start_on(store, mock_config(&mock)).await;
    let mut c = Client::connect(&ws, room).await;
    let mut stream = events(&http, room, &id).await;
    prompt(&http, room, &id, "hello").await;
    read_events(&mut stream, "event: request-ended").await;
    let told: String = mock.requests().iter().map(|r| r.body.to_string()).collect();
    assert!(told.contains("hello"), "{told}");
    assert!(!told.contains("FORGED"), "{told}");
    c.until("the forged project ended in the document", |c| {
        project_field(c, "p-forged", "status") == Some(json!("aborted"))
    })
    .await;
    c.close().await;
    server.shutdown().await;
}
