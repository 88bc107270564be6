//! A fairy's private state (mode, model-facing history, todo, tasks) lives in the store, never in
//! the room document (real server, yrs clients, mock model over HTTP): what peers receive holds
//! only the public entity while a fairy works; a writer's edits of the fairy's map (a forged
//! `runtime` key included) are refused and change nothing the fairy remembers or is told,
//! across a restart too; a fairy of an earlier version's document, known only by its `runtime`
//! key, is removed on load unread; a dismissed fairy's state is deleted.

use crate::support;
use crate::support::server::TestServer;

use std::sync::Arc;
use std::time::Duration;

use fairyring::agent::modes::{MemoryLevel, Mode};
use fairyring::agent::state::FairyState;
use fairyring::agent::state::fairy::{FairyEntity, insert_fairy};
use fairyring::agent::state::memory::HistoryItem;
use fairyring::agent::work::TodoItem;
use fairyring::config::ServeConfig;
use fairyring::ids::RoomName;
use fairyring::llm::mock::MockServer;
use fairyring::origin::TxnOrigin;
use fairyring::room::SERVER_CLIENT_ID;
use fairyring::server::ServerHandle;
use fairyring::store::Store;
use fairyring::store::memory::MemoryStore;
use serde_json::{Value, json};
use support::Client;
use support::fairy_http::*;
use yrs::{Doc, Map, MapRef, Out, ReadTxn, StateVector, Transact};

/// The keys of a fairy's map in the document: its public entity.
const PUBLIC_KEYS: [&str; 6] = ["apply", "chat", "createdBy", "hat", "name", "personality"];

/// Starts a server on `store` (kept by the test, so it outlives a restart and can be read).
async fn start_on(store: Arc<MemoryStore>, config: ServeConfig) -> (ServerHandle, String, String) {
    TestServer::builder(config)
        .on(store)
        .start()
        .await
        .into_parts()
}

/// The whole n-th model request as text (system prompt, history, context).
fn request_text(mock: &MockServer, n: usize) -> String {
    mock.requests()[n].body.to_string()
}

fn fairy_keys(c: &Client, id: &str) -> Vec<String> {
    let mut keys: Vec<String> = root_json(c, "fairies")[id]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    keys.sort();
    keys
}

/// Whether the bytes of the client's whole document contain `needle`.
fn doc_contains(c: &Client, needle: &str) -> bool {
    doc_count(c, needle) > 0
}

/// How many times `needle` occurs in the encoded document.
fn doc_count(c: &Client, needle: &str) -> usize {
    let bytes = c.state();
    bytes
        .windows(needle.len())
        .filter(|w| *w == needle.as_bytes())
        .count()
}

/// The person's prompt is public (their line in the fairy's chat, as every browser shows it),
/// but only there: no copy of it in any model-facing history.
fn prompt_only_in_chat(c: &Client, id: &str, prompt: &str) {
    let chat = &root_json(c, "fairies")[id]["chat"];
    let in_chat = chat
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|i| i["role"] == json!("user") && i["text"] == json!(prompt))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(in_chat, 1, "the prompt is the user's chat line: {chat}");
    assert_eq!(
        doc_count(c, prompt),
        1,
        "the prompt is in the document outside the chat"
    );
}

fn idle(c: &Client, id: &str) -> bool {
    fairy_presence(c, id).is_some_and(|p| p["fairy"]["mode"] == json!("idling"))
}

fn texts(history: &Value) -> String {
    history["history"].to_string()
}

fn room(name: &str) -> RoomName {
    RoomName::parse(name).expect("room name")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_holds_only_the_public_entity_while_a_fairy_works() {
    let long_text = "x".repeat(3000);
    let slow_turn = format!(
        r#"{{"actions": [{{"_type": "upsert-personal-todo", "id": "1", "text": "SECRET-TODO", "status": "done"}}, {{"_type": "create", "intent": "long", "shape": {{"_type": "rectangle", "shapeId": "slow", "note": "", "x": 0, "y": 0, "w": 10, "h": 10, "text": "{long_text}"}}}}]}}"#
    );
    let mock = mock_server(vec![slow(&slow_turn)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "public").await;
    let id = invite(&http, "public", "Wren").await;
    let mut stream = events(&http, "public", &id).await;
    prompt(&http, "public", &id, "SECRET-PROMPT draw a slow box").await;
    client
        .until("the fairy working, its shape streaming", |c| {
            shapes(c)["slow"]["locked"] == json!(true)
        })
        .await;
    // A peer joining now receives the whole document while the fairy works.
    let mut late = Client::connect(&ws, "public").await;
    late.until("the fairy's entity", |c| {
        root_json(c, "fairies")[&id]["name"] == json!("Wren")
    })
    .await;
    late.until("the streaming shape", |c| {
        shapes(c)["slow"]["locked"] == json!(true)
    })
    .await;
    for c in [&client, &late] {
        assert_eq!(
            fairy_keys(c, &id),
            PUBLIC_KEYS,
            "{}",
            root_json(c, "fairies")
        );
        prompt_only_in_chat(c, &id, "SECRET-PROMPT draw a slow box");
        assert!(
            !doc_contains(c, "SECRET-TODO"),
            "the todo is in the document"
        );
        assert!(
            !doc_contains(c, "agentFacingMessage"),
            "history is in the document"
        );
    }
    // Stop it; its history (now holding the prompt and the todo) stays out of the document.
    let (status, _) = post(
        &format!("{http}/rooms/public/fairies/{id}/cancel"),
        json!({}),
    )
    .await;
    assert_eq!(status, 202);
    // The request's final state was handed to the store before `request-ended` (the history
    // route then waits for it to be written).
    read_events(&mut stream, "event: request-ended").await;
    client
        .until("the fairy idle, the shape reverted", |c| {
            idle(c, &id) && shapes(c).get("slow").is_none()
        })
        .await;
    let stored = history(&http, "public", &id).await;
    assert!(texts(&stored).contains("SECRET-PROMPT"), "{stored}");
    late.drain(Duration::from_millis(100)).await;
    for c in [&client, &late] {
        assert_eq!(fairy_keys(c, &id), PUBLIC_KEYS);
        prompt_only_in_chat(c, &id, "SECRET-PROMPT draw a slow box");
        assert!(!doc_contains(c, "agentFacingMessage"));
    }
    late.close().await;
    client.close().await;
    server.shutdown().await;
}

/// Writes into the fairy's map what an attacker would: a forged `runtime` (working, another
/// mode, another history and todo), loose `mode`/`history`/`todo` keys, a new personality.
async fn forge(client: &mut Client, id: &str) {
    let forged = json!({
        "mode": "working-solo",
        "working": true,
        "history": [{"type": "prompt", "source": "user",
                     "agentFacingMessage": "FORGED-HISTORY", "memoryLevel": "fairy"}],
        "todo": [{"id": "x", "text": "FORGED-TODO", "status": "todo"}],
    })
    .to_string();
    client
        .edit(|txn| {
            let root = txn.get_map("fairies").expect("fairies");
            if let Some(Out::YMap(m)) = root.get(txn, id) {
                m.insert(txn, "runtime", forged);
                m.insert(txn, "mode", "working-solo");
                m.insert(txn, "history", "FORGED-HISTORY");
                m.insert(txn, "todo", "FORGED-TODO");
                m.insert(txn, "personality", "grumpy");
            }
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_editing_a_fairys_map_changes_nothing_it_remembers_or_is_told() {
    let first = r#"{"actions": [{"_type": "upsert-personal-todo", "id": "1", "text": "REAL-TODO", "status": "done"}, {"_type": "message", "text": "noted"}]}"#;
    let mock = mock_server(vec![ok(first), ok(r#"{"actions": []}"#)]).await;
    let store = Arc::new(MemoryStore::default());
    let config = mock_config(&mock);
    let (server, ws, http) = start_on(store.clone(), config.clone()).await;
    let mut writer = Client::connect(&ws, "forged").await;
    let mut observer = Client::connect(&ws, "forged").await;
    let id = invite(&http, "forged", "Nettle").await;
    let mut stream = events(&http, "forged", &id).await;
    prompt(&http, "forged", &id, "REAL-PROMPT remember this").await;
    read_events(&mut stream, "event: request-ended").await;
    writer
        .until("the fairy idle after its turn", |c| {
            idle(c, &id) && chat_texts(c, &id).iter().any(|t| t == "noted")
        })
        .await;
    let before = history(&http, "forged", &id).await;
    assert!(texts(&before).contains("REAL-PROMPT"), "{before}");
    // Idling's on_enter cleared the todo list; the item stays in the history.
    assert_eq!(before["todo"], json!([]), "{before}");
    assert!(
        before["history"].to_string().contains("REAL-TODO"),
        "{before}"
    );
    assert_eq!(before["mode"], json!("idling"));

    forge(&mut writer, &id).await;
    // `fairies` is server-owned: the writer is closed and nobody sees its edit.
    assert_eq!(writer.until_closed().await, Some(1008));
    observer.drain(Duration::from_millis(200)).await;
    assert_eq!(fairy_keys(&observer, &id), PUBLIC_KEYS);
    assert_ne!(
        root_json(&observer, "fairies")[&id]["personality"],
        json!("grumpy")
    );
    assert_eq!(
        history(&http, "forged", &id).await,
        before,
        "mode, history, todo and tasks unchanged"
    );

    // The next prompt the model receives carries the real history, nothing forged.
    prompt(&http, "forged", &id, "SECOND-PROMPT").await;
    wait_requests(&mock, 2).await;
    let told = request_text(&mock, 1);
    assert!(told.contains("REAL-PROMPT"), "{told}");
    assert!(told.contains("SECOND-PROMPT"), "{told}");
    assert!(!told.contains("FORGED"), "{told}");
    read_events(&mut stream, "event: request-ended").await;
    let after = history(&http, "forged", &id).await;
    assert_eq!(after["mode"], json!("idling"));
    assert_eq!(after["todo"], before["todo"]);
    assert!(texts(&after).contains("SECOND-PROMPT"), "{after}");
    assert!(!after.to_string().contains("FORGED"), "{after}");
    observer.close().await;
    writer.close().await;
    server.shutdown().await;

    // After a restart the store still wins (the forged `runtime` key never reached the room,
    // and would not be read if it had: the fairy would say it was interrupted).
    let (server, ws, http) = start_on(store.clone(), config).await;
    let mut client = Client::connect(&ws, "forged").await;
    client
        .until("the fairy back", |c| {
            fairy_presence(c, &id).is_some()
                && root_json(c, "fairies")[&id]["name"] == json!("Nettle")
        })
        .await;
    assert!(root_json(&client, "fairies")[&id].get("runtime").is_none());
    let restarted = history(&http, "forged", &id).await;
    assert_eq!(restarted, after);
    assert!(idle(&client, &id));
    client.drain(Duration::from_millis(100)).await;
    assert!(
        !chat_texts(&client, &id)
            .iter()
            .any(|t| t.contains("interrupted")),
        "{:?}",
        chat_texts(&client, &id)
    );
    client.close().await;
    server.shutdown().await;
}

/// A room as an earlier version stored it: the schema, one fairy, and its private state as
/// JSON text under `runtime` in its map.
fn legacy_room(entity: &FairyEntity, state: &FairyState) -> Vec<u8> {
    let doc = Doc::with_client_id(SERVER_CLIENT_ID);
    fairyring::canvas::schema::init_schema(&doc, TxnOrigin::System);
    insert_fairy(&doc, entity);
    {
        let root: MapRef = doc.get_or_insert_map("fairies");
        let mut txn = doc.transact_mut_with(TxnOrigin::fairy(entity.id.as_str()));
        if let Some(Out::YMap(m)) = root.get(&txn, entity.id.as_str()) {
            let text = serde_json::to_string(state).expect("state json");
            m.insert(&mut txn, "runtime", text);
        }
    }
    doc.transact()
        .encode_state_as_update_v1(&StateVector::default())
}

/// A room stored by an early version: its fairy's state lives only under `runtime` in the
/// document, which any writer could have set. The store does not know the fairy, so its entry
/// is removed on load, unread: nothing of the key reaches the store, a peer or a model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fairy_only_the_document_knows_is_removed_on_load_unread() {
    let entity = FairyEntity::invite(Some("Old"), None, None, "alice").expect("entity");
    let id = entity.id.to_string();
    let legacy = FairyState {
        mode: Mode::StandingBy,
        history: vec![HistoryItem::Prompt {
            source: "user".into(),
            agent_facing_message: "LEGACY-PROMPT".into(),
            memory_level: MemoryLevel::Fairy,
            request_id: None,
            acceptance: None,
        }],
        todo: vec![TodoItem {
            id: "t1".into(),
            text: "LEGACY-TODO".into(),
            status: fairyring::agent::work::TaskStatus::Done,
        }],
        ..FairyState::default()
    };
    let store = Arc::new(MemoryStore::default());
    store
        .append(&room("legacy"), vec![legacy_room(&entity, &legacy).into()])
        .await
        .expect("append");
    let (server, ws, http) = start_on(store.clone(), ServeConfig::for_test()).await;
    let mut client = Client::connect(&ws, "legacy").await;
    client
        .until("the schema", |c| {
            root_json(c, "meta")["schemaVersion"].is_number()
        })
        .await;
    client.drain(Duration::from_millis(100)).await;
    assert!(
        root_json(&client, "fairies").get(&id).is_none(),
        "{}",
        root_json(&client, "fairies")
    );
    assert!(fairy_presence(&client, &id).is_none());
    assert!(!doc_contains(&client, "LEGACY-PROMPT"));
    assert!(
        store
            .side()
            .load_fairy_state(&room("legacy"), &id)
            .await
            .expect("load")
            .is_none(),
        "nothing migrated into the store"
    );
    let listed: Value = reqwest::get(format!("{http}/rooms/legacy/fairies"))
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    assert_eq!(listed["fairies"], json!([]), "{listed}");
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dismissed_fairys_private_state_is_deleted() {
    let store = Arc::new(MemoryStore::default());
    let (server, ws, http) = start_on(store.clone(), ServeConfig::for_test()).await;
    let mut client = Client::connect(&ws, "dismiss").await;
    let id = invite(&http, "dismiss", "Moss").await;
    assert!(
        store
            .side()
            .load_fairy_state(&room("dismiss"), &id)
            .await
            .expect("load")
            .is_some(),
        "a new fairy's state is stored before it appears"
    );
    prompt(&http, "dismiss", &id, "draw a house").await;
    client
        .until("the house and the fairy idle", |c| {
            shapes(c)["roof"]["locked"] == json!(false) && idle(c, &id)
        })
        .await;
    let response = reqwest::Client::new()
        .delete(format!("{http}/rooms/dismiss/fairies/{id}"))
        .send()
        .await
        .expect("dismiss");
    assert_eq!(response.status().as_u16(), 204);
    assert_eq!(
        store
            .side()
            .load_fairy_state(&room("dismiss"), &id)
            .await
            .expect("load"),
        None
    );
    client
        .until("the entity gone", |c| {
            root_json(c, "fairies").get(&id).is_none()
        })
        .await;
    client.close().await;
    server.shutdown().await;
}

/// The fairy's state row and its ledger's record rows, as text (`None`: no row).
async fn state_rows(
    store: &MemoryStore,
    room_name: &str,
    id: &str,
) -> (String, Vec<Option<String>>) {
    let side = store.side();
    let text = |b: bytes::Bytes| String::from_utf8_lossy(&b).into_owned();
    let head = side
        .load_fairy_state(&room(room_name), id)
        .await
        .expect("load")
        .map(text)
        .unwrap_or_default();
    let mut records = Vec::new();
    for number in 0..4 {
        let row = side
            .load_fairy_request(&room(room_name), id, number)
            .await
            .expect("load");
        records.push(row.map(text));
    }
    (head, records)
}

/// Polls the store until the fairy's state row counts `rows` records.
async fn until_stored(store: &MemoryStore, room_name: &str, id: &str, rows: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let wanted = format!("\"ledgerRows\":{rows}");
    loop {
        let (head, _) = state_rows(store, room_name, id).await;
        if head.contains(&wanted) && head.contains("\"working\":false") {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the state counting {rows} records was never stored: {head}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A fairy's state is saved incrementally: what each request changed (its ledger's record) in
/// a row of its own, the state's row without them; a request's end rewrites only the records
/// that changed, not every request's; after a restart the state loads whole from the rows, so
/// a request of before is taken back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fairys_ledger_is_saved_a_row_per_request() {
    let store = Arc::new(MemoryStore::default());
    let (server, ws, http) = start_on(store.clone(), ServeConfig::for_test()).await;
    let mut client = Client::connect(&ws, "rows").await;
    let id = invite(&http, "rows", "Sage").await;
    let (status, body) = post(
        &format!("{http}/rooms/rows/fairies/{id}/prompt"),
        json!({"message": "draw a house", "bounds": {"x": 0, "y": 0, "w": 800, "h": 600}}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let house = body["requestId"].as_str().expect("requestId").to_owned();
    client
        .until("the house and the fairy idle", |c| {
            shapes(c)["roof"]["locked"] == json!(false) && idle(c, &id)
        })
        .await;
    until_stored(&store, "rows", &id, 1).await;
    let (head, records) = state_rows(&store, "rows", &id).await;
    assert!(head.contains("\"records\":[]"), "no record inline: {head}");
    assert!(!head.contains("\"shapes\""), "no record inline: {head}");
    let first = records[0].clone().expect("the house's record has a row");
    assert!(first.contains("\"roof\""), "{first}");
    assert!(records[1].is_none());
    // Mark the stored row (same JSON, one more space): rewriting it would drop the mark.
    let marked = format!("{first} ");
    store
        .side()
        .save_fairy_request(&room("rows"), &id, 0, marked.clone().into(), None)
        .await
        .expect("mark");

    prompt(&http, "rows", &id, "three boxes in a row").await;
    until_stored(&store, "rows", &id, 2).await;
    let (head, records) = state_rows(&store, "rows", &id).await;
    assert_eq!(
        records[0].as_deref(),
        Some(marked.as_str()),
        "the first request's record, unchanged, was not written again"
    );
    assert!(
        records[1].is_some(),
        "the second request's record has a row"
    );
    assert!(!head.contains("\"shapes\""), "{head}");
    client.close().await;
    server.shutdown().await;

    // After a restart the house's record is read back from its row: it is taken back.
    let (server, ws, http) = start_on(store.clone(), ServeConfig::for_test()).await;
    let mut client = Client::connect(&ws, "rows").await;
    client
        .until("the fairy back", |c| fairy_presence(c, &id).is_some())
        .await;
    let (status, body) = post(
        &format!("{http}/rooms/rows/fairies/{id}/requests/{house}/revert"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["kept"], json!(0), "{body}");
    client
        .until("the house gone", |c| shapes(c).get("roof").is_none())
        .await;
    client.close().await;
    server.shutdown().await;
}

/// Rolling upgrade from a release before the rows (docs/operations.md "Upgrades"): a server
/// started with `--fairy-state-layout whole` saves a fairy's state whole, its ledger inline
/// and no request row (what a node of that release reads completely); a node saving in rows
/// (the default) then loads it whole and takes a request of before back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_whole_layout_a_fairys_ledger_stays_in_its_state_row() {
    let store = Arc::new(MemoryStore::default());
    let whole = ServeConfig {
        fairy_state_layout: fairyring::config::FairyStateLayout::Whole,
        ..ServeConfig::for_test()
    };
    let (server, ws, http) = start_on(store.clone(), whole).await;
    let mut client = Client::connect(&ws, "whole").await;
    let id = invite(&http, "whole", "Sage").await;
    let (status, body) = post(
        &format!("{http}/rooms/whole/fairies/{id}/prompt"),
        json!({"message": "draw a house", "bounds": {"x": 0, "y": 0, "w": 800, "h": 600}}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let house = body["requestId"].as_str().expect("requestId").to_owned();
    client
        .until("the house and the fairy idle", |c| {
            shapes(c)["roof"]["locked"] == json!(false) && idle(c, &id)
        })
        .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (head, records) = state_rows(&store, "whole", &id).await;
        if head.contains("\"roof\"") && head.contains("\"working\":false") {
            assert!(!head.contains("ledgerRows"), "{head}");
            assert!(records.iter().all(Option::is_none), "no request row");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the ledger was never stored inline: {head}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    client.close().await;
    server.shutdown().await;

    let (server, ws, http) = start_on(store.clone(), ServeConfig::for_test()).await;
    let mut client = Client::connect(&ws, "whole").await;
    client
        .until("the fairy back", |c| fairy_presence(c, &id).is_some())
        .await;
    let (status, body) = post(
        &format!("{http}/rooms/whole/fairies/{id}/requests/{house}/revert"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    client
        .until("the house gone", |c| shapes(c).get("roof").is_none())
        .await;
    client.close().await;
    server.shutdown().await;
}
