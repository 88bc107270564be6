//! Fairy request flows end to end (real server, yrs client, mock model over HTTP): users'
//! changes reach the next prompt, multi-turn todo lists, disallowed actions answered with a
//! correction, the event stream, the `fairies` scope, and state surviving a restart.

use crate::support;

use std::time::Duration;

use fairyring::config::ServeConfig;
use fairyring::llm::mock::{MockScript, MockServer};
use serde_json::{Value, json};
use support::Client;
use support::fairy_http::*;
use yrs::{Map, Out, ReadTxn};

const TWO_BOXES: &str = r#"{"actions": [{"_type": "create", "intent": "a", "shape": {"_type": "rectangle", "shapeId": "a", "note": "", "x": 0, "y": 0, "w": 50, "h": 50, "color": "blue"}}, {"_type": "create", "intent": "b", "shape": {"_type": "rectangle", "shapeId": "b", "note": "", "x": 100, "y": 0, "w": 50, "h": 50, "color": "blue"}}]}"#;
const DONE: &str = r#"{"actions": [{"_type": "message", "text": "ok"}]}"#;

/// The text of the first user turn (the context parts) of the n-th model request.
fn context_of(mock: &MockServer, n: usize) -> String {
    let body = &mock.requests()[n].body;
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == json!("user")))
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

fn idle(c: &Client, id: &str) -> bool {
    fairy_presence(c, id).is_some_and(|p| p["fairy"]["mode"] == json!("idling"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_prompt_lists_the_users_changes_not_the_fairys() {
    let mock = mock_server(vec![ok(TWO_BOXES), ok(DONE)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "changes").await;
    let id = invite(&http, "changes", "Clover").await;
    prompt(&http, "changes", &id, "two boxes").await;
    client
        .until("both boxes settled and the fairy idle", |c| {
            let s = shapes(c);
            s["a"]["locked"] == json!(false) && s["b"]["locked"] == json!(false) && idle(c, &id)
        })
        .await;
    // The user moves one box and recolors the other.
    client
        .edit(|txn| {
            let root = txn.get_map("shapes").expect("shapes");
            if let Some(Out::YMap(a)) = root.get(txn, "a") {
                a.insert(txn, "x", 300.0);
            }
            if let Some(Out::YMap(b)) = root.get(txn, "b") {
                b.insert(txn, "color", "red");
            }
        })
        .await;
    // The edit has reached the server's document once another peer receives it (the room
    // broadcasts a committed update): only then is the next prompt sure to see it.
    let mut watcher = Client::connect(&ws, "changes").await;
    watcher
        .until("the user's edit at the server", |c| {
            let s = shapes(c);
            s["a"]["x"].as_f64() == Some(300.0) && s["b"]["color"] == json!("red")
        })
        .await;
    watcher.close().await;
    let (status, body) = post(
        &format!("{http}/rooms/changes/fairies/{id}/prompt"),
        json!({"message": "what changed?", "bounds": {"x": 0, "y": 0, "w": 800, "h": 600},
               "selectedShapeIds": ["b"]}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    wait_requests(&mock, 2).await;
    let first = context_of(&mock, 0);
    let second = context_of(&mock, 1);
    assert!(!first.contains("changesSinceLastRequest"), "{first}");
    assert!(second.contains("changesSinceLastRequest"), "{second}");
    assert!(second.contains("300"), "{second}");
    assert!(second.contains("red"), "{second}");
    let selected = second
        .split("selectedShapes")
        .nth(1)
        .unwrap_or_default()
        .split(']')
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(
        selected.contains("\\\"shapeId\\\":\\\"b\\\""),
        "b in full detail: {selected}"
    );
    assert!(selected.contains("color"), "full detail: {selected}");
    assert!(
        !second.contains("\\\"added\\\""),
        "the fairy's own creations are not listed: {second}"
    );
    client.until("the fairy idle again", |c| idle(c, &id)).await;
    let s = shapes(&client);
    assert_eq!(s["a"]["x"].as_f64(), Some(300.0));
    assert_eq!(s["b"]["color"], json!("red"));
    client.close().await;
    server.shutdown().await;
}

fn todo(items: &[(&str, &str)]) -> String {
    let actions: Vec<Value> = items
        .iter()
        .map(|(id, status)| json!({"_type": "upsert-personal-todo", "id": id, "text": format!("step {id}"), "status": status}))
        .collect();
    json!({ "actions": actions }).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_todo_list_continues_on_its_own_and_stops_when_done() {
    let mock = mock_server(vec![
        ok(&todo(&[("1", "todo"), ("2", "todo")])),
        ok(&todo(&[("1", "done")])),
        ok(&todo(&[("2", "done")])),
        ok(DONE),
    ])
    .await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "todo").await;
    let id = invite(&http, "todo", "Fennel").await;
    prompt(&http, "todo", &id, "a plan in steps").await;
    // The fairy's awareness goes out once per room tick, so the moment its last item was done
    // and the moment it went idle (which clears the list) may reach peers as one state.
    client
        .until("the fairy idle after its turns", |c| {
            idle(c, &id) && mock.requests().len() >= 3
        })
        .await;
    assert_eq!(mock.requests().len(), 3, "three turns, then it stopped");
    // Each follow-up saw the list as the turn before left it.
    let third = context_of(&mock, 2);
    assert!(
        third.contains("step 1") && third.contains("step 2"),
        "{third}"
    );
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disallowed_action_is_answered_with_a_correction() {
    let mock = mock_server(vec![
        ok(r#"{"actions": [{"_type": "mark-solo-task-done"}, {"_type": "nonsense"}]}"#),
        ok(DONE),
    ])
    .await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "rules").await;
    let id = invite(&http, "rules", "Sorrel").await;
    prompt(&http, "rules", &id, "finish").await;
    wait_requests(&mock, 2).await;
    let second = context_of(&mock, 1);
    assert!(
        second.contains("is not allowed in mode soloing"),
        "{second}"
    );
    assert!(second.contains("nonsense"), "{second}");
    client.until("the fairy idle", |c| idle(c, &id)).await;
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_reports_a_request() {
    let (server, _ws, http) = start(ServeConfig::for_test()).await;
    let id = invite(&http, "events", "Thistle").await;
    let mut response = reqwest::get(format!("{http}/rooms/events/fairies/{id}/events"))
        .await
        .expect("events");
    assert_eq!(response.status().as_u16(), 200);
    prompt(&http, "events", &id, "three boxes in a row").await;
    let mut seen = String::new();
    let read = tokio::time::timeout(support::TIMEOUT, async {
        while !seen.contains("event: request-ended") {
            match response.chunk().await {
                Ok(Some(bytes)) => seen.push_str(&String::from_utf8_lossy(&bytes)),
                _ => break,
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no request-ended event: {seen}");
    for name in ["request-started", "mode-changed", "action", "request-ended"] {
        assert!(
            seen.contains(&format!("event: {name}")),
            "{name} missing: {seen}"
        );
    }
    assert!(seen.contains(r#""complete":true"#), "{seen}");
    assert!(seen.contains(r#""complete":false"#), "{seen}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fairy_routes_need_the_fairies_scope() {
    let (config, mint) = with_auth(ServeConfig::for_test());
    let (server, _ws, http) = start(config).await;
    let url = format!("{http}/rooms/scoped/fairies");
    let http_client = reqwest::Client::new();
    let none = http_client
        .post(&url)
        .json(&json!({}))
        .send()
        .await
        .expect("post");
    assert_eq!(none.status().as_u16(), 401);
    let writer = http_client
        .post(&url)
        .bearer_auth(mint("read write"))
        .json(&json!({}))
        .send()
        .await
        .expect("post");
    assert_eq!(writer.status().as_u16(), 403);
    let body: Value = writer.json().await.expect("json");
    assert_eq!(body["error"], json!("insufficient_scope"));
    let fairy = http_client
        .post(&url)
        .bearer_auth(mint("read fairies"))
        .json(&json!({"name": "Pip"}))
        .send()
        .await
        .expect("post");
    assert_eq!(fairy.status().as_u16(), 201);
    let body: Value = fairy.json().await.expect("json");
    assert_eq!(body["createdBy"], json!("user:alice"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fairy_state_survives_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = ServeConfig::for_test();
    config.store = format!("sqlite:{}", dir.path().join("fairies.db").display());
    let (server, ws, http) = start(config.clone()).await;
    let mut client = Client::connect(&ws, "persist").await;
    let id = invite(&http, "persist", "Juniper").await;
    prompt(&http, "persist", &id, "draw a house").await;
    client
        .until("the house settled and the fairy idle", |c| {
            shapes(c)["roof"]["locked"] == json!(false) && idle(c, &id)
        })
        .await;
    client.close().await;
    server.shutdown().await;

    let (server, ws, http) = start(config).await;
    let mut client = Client::connect(&ws, "persist").await;
    client
        .until("the fairy back as an awareness peer", |c| {
            fairy_presence(c, &id).is_some()
        })
        .await;
    let history: Value = history(&http, "persist", &id).await;
    assert_eq!(history["mode"], json!("idling"));
    let items = history["history"].as_array().cloned().unwrap_or_default();
    assert!(
        items
            .iter()
            .any(|i| i["agentFacingMessage"] == json!("draw a house")),
        "{history}"
    );
    client
        .until("the chat restored with the document", |c| {
            chat_texts(c, &id)
                .iter()
                .any(|t| t.starts_with("Drew a house"))
        })
        .await;
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fairy_stopped_mid_request_comes_back_idle_and_says_so() {
    let long_text = "x".repeat(3000);
    let first = format!(
        r#"{{"actions": [{{"_type": "create", "intent": "long", "shape": {{"_type": "rectangle", "shapeId": "slow", "note": "", "x": 0, "y": 0, "w": 10, "h": 10, "text": "{long_text}"}}}}]}}"#
    );
    let mock = mock_server(vec![slow(&first)]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = mock_config(&mock);
    config.store = format!("sqlite:{}", dir.path().join("fairies.db").display());
    let (server, ws, http) = start(config.clone()).await;
    let mut client = Client::connect(&ws, "crash").await;
    let id = invite(&http, "crash", "Bramble").await;
    prompt(&http, "crash", &id, "a slow one").await;
    client
        .until("the slow shape streaming", |c| {
            shapes(c)["slow"]["locked"] == json!(true)
        })
        .await;
    server.shutdown().await;

    let (server, ws, _http) = start(config).await;
    let mut client = Client::connect(&ws, "crash").await;
    client
        .until(
            "the fairy back, idle, saying its work was interrupted",
            |c| idle(c, &id) && chat_texts(c, &id).iter().any(|t| t.contains("interrupted")),
        )
        .await;
    assert!(shapes(&client).get("slow").is_none());
    assert_eq!(locked_count(&client), 0);
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sanitizing_renames_coerces_and_drops_end_to_end() {
    let first = r#"{"actions": [{"_type": "create", "intent": "a box", "shape": {"_type": "rectangle", "shapeId": "box1", "note": "", "x": 0, "y": 0, "w": 40, "h": 40}}]}"#;
    let second = r#"{"actions": [{"_type": "create", "intent": "another", "shape": {"_type": "rectangle", "shapeId": "box1", "note": "", "x": "12", "y": 0, "w": 40, "h": 40}}, {"_type": "move", "intent": "move it", "shapeId": "box1", "x": 500, "y": 0}, {"_type": "delete", "intent": "remove", "shapeId": "ghost"}]}"#;
    let mock = mock_server(vec![ok(first), ok(second), ok(DONE)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "sanitize").await;
    let id = invite(&http, "sanitize", "Wren").await;
    prompt(&http, "sanitize", &id, "a box").await;
    client
        .until("box1 settled, fairy idle", |c| {
            shapes(c)["box1"]["locked"] == json!(false) && idle(c, &id)
        })
        .await;
    prompt(&http, "sanitize", &id, "another box, moved").await;
    wait_requests(&mock, 3).await;
    client
        .until("the renamed box moved", |c| {
            shapes(c)["box1-1"]["x"].as_f64() == Some(500.0) && idle(c, &id)
        })
        .await;
    let s = shapes(&client);
    assert_eq!(s["box1"]["x"].as_f64(), Some(0.0), "the first box stays");
    let third = context_of(&mock, 2);
    assert!(third.contains("box1-1"), "the rename is told: {third}");
    assert!(
        third.contains("ghost"),
        "the dropped reference is told: {third}"
    );
    client.close().await;
    server.shutdown().await;
}

const TASKS: &str = r#"{"actions": [{"_type": "create-solo-task", "taskId": "t1", "title": "a box", "x": 0, "y": 0, "w": 200, "h": 200}, {"_type": "start-solo-task", "taskId": "t1"}]}"#;
const WORK: &str = r#"{"actions": [{"_type": "create", "intent": "box", "shape": {"_type": "rectangle", "shapeId": "t1box", "note": "", "x": 10, "y": 10, "w": 40, "h": 40}}, {"_type": "mark-solo-task-done"}]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn solo_tasks_switch_to_working_solo_and_back() {
    let mock = mock_server(vec![ok(TASKS), ok(WORK), ok(DONE)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "tasks").await;
    let id = invite(&http, "tasks", "Moss").await;
    prompt(&http, "tasks", &id, "plan and do it").await;
    client
        .until("the task done and the fairy idle", |c| {
            fairy_presence(c, &id).is_some_and(|p| {
                p["fairy"]["tasks"][0]["status"] == json!("done")
                    && p["fairy"]["mode"] == json!("idling")
            }) && shapes(c)["t1box"]["locked"] == json!(false)
        })
        .await;
    assert_eq!(mock.requests().len(), 3);
    let key = format!("{id}/t1");
    client
        .until("the task done in the document's tasks", |c| {
            let task = &root_json(c, "tasks")[&key];
            task["status"] == json!("done") && task["assignedTo"] == json!(id)
        })
        .await;
    let second = mock.requests()[1].body.to_string();
    assert!(
        second.contains("working-solo"),
        "the task turn runs in working-solo"
    );
    let third = context_of(&mock, 2);
    assert!(third.contains("I completed the solo task 't1'."), "{third}");
    let history: Value = history(&http, "tasks", &id).await;
    let items = history["history"].as_array().cloned().unwrap_or_default();
    assert!(
        items
            .iter()
            .any(|i| i["type"] == json!("memory-transition"))
    );
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overlong_history_is_summarised_by_the_model() {
    let long = format!(
        r#"{{"actions": [{{"_type": "message", "text": "{}"}}]}}"#,
        "la ".repeat(700)
    );
    let mock = mock_server(vec![
        ok(&long),
        ok("The user asked for a long song; I sang it."),
        ok(DONE),
    ])
    .await;
    let mut config = mock_config(&mock);
    config.fairy_history_chars = 1000;
    let (server, ws, http) = start(config).await;
    let mut client = Client::connect(&ws, "compact").await;
    let id = invite(&http, "compact", "Pip").await;
    prompt(&http, "compact", &id, "sing").await;
    client
        .until("the song in the chat", |c| {
            chat_texts(c, &id).iter().any(|t| t.starts_with("la la")) && idle(c, &id)
        })
        .await;
    prompt(&http, "compact", &id, "again?").await;
    wait_requests(&mock, 3).await;
    let summary_request = &mock.requests()[1].body;
    assert!(
        summary_request.to_string().contains("summarise"),
        "{summary_request}"
    );
    let third = context_of(&mock, 2);
    assert!(third.contains("I sang it"), "{third}");
    assert!(
        !third.contains("la la la"),
        "the old items are gone: {third}"
    );
    client.until("idle", |c| idle(c, &id)).await;
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_edits_survive_a_fairys_streaming_update() {
    let long = "and so on ".repeat(30);
    let second = format!(
        r#"{{"actions": [{{"_type": "update", "update": {{"shapeId": "a", "color": "green"}}, "intent": "{long}"}}, {{"_type": "update", "update": {{"shapeId": "b", "x": 999}}, "intent": "{long}"}}, {{"_type": "message", "text": "ok"}}]}}"#
    );
    let mock = mock_server(vec![ok(TWO_BOXES), slow(&second), ok(DONE)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "concurrent").await;
    let id = invite(&http, "concurrent", "Clover").await;
    prompt(&http, "concurrent", &id, "two boxes").await;
    client
        .until("both boxes settled and the fairy idle", |c| {
            let s = shapes(c);
            s["a"]["locked"] == json!(false) && s["b"]["locked"] == json!(false) && idle(c, &id)
        })
        .await;
    prompt(&http, "concurrent", &id, "recolor a, move b").await;
    client
        .until("a turning green while streaming", |c| {
            shapes(c)["a"]["color"] == json!("green")
        })
        .await;
    client
        .edit(|txn| {
            let root = txn.get_map("shapes").expect("shapes");
            if let Some(Out::YMap(a)) = root.get(txn, "a") {
                a.insert(txn, "x", 300.0);
            }
        })
        .await;
    client
        .until("b moving while streaming", |c| {
            shapes(c)["b"]["x"].as_f64() == Some(999.0)
        })
        .await;
    client
        .edit(|txn| {
            let root = txn.get_map("shapes").expect("shapes");
            if let Some(Out::YMap(b)) = root.get(txn, "b") {
                b.insert(txn, "color", "red");
            }
        })
        .await;
    client
        .until("the fairy done", |c| {
            chat_texts(c, &id).contains(&"ok".to_owned()) && idle(c, &id)
        })
        .await;
    client.drain(Duration::from_millis(200)).await;
    let s = shapes(&client);
    assert_eq!(
        s["a"]["x"].as_f64(),
        Some(300.0),
        "the user's move survives"
    );
    assert_eq!(s["a"]["color"], json!("green"), "the fairy's recolor stays");
    assert_eq!(s["b"]["color"], json!("red"), "the user's recolor survives");
    assert_eq!(s["b"]["x"].as_f64(), Some(999.0), "the fairy's move stays");
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fairy_comes_back_when_its_room_reloads() {
    let (server, ws, http) = start(fairyring::config::ServeConfig::for_test()).await;
    let client = Client::connect(&ws, "reload").await;
    let id = invite(&http, "reload", "Pip").await;
    client.close().await;
    let name = fairyring::ids::RoomName::parse("reload").expect("name");
    tokio::time::timeout(support::TIMEOUT, server.rooms().wait_unloaded(&name))
        .await
        .expect("the idle room unloads (an idle fairy does not keep it loaded)");
    let mut client = Client::connect(&ws, "reload").await;
    client
        .until("the fairy's presence in the reloaded room", |c| {
            fairy_presence(c, &id).is_some()
        })
        .await;
    prompt(&http, "reload", &id, "draw a house").await;
    client
        .until("the house", |c| {
            shapes(c)["walls"]["locked"] == json!(false)
        })
        .await;
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prose_and_a_code_fence_before_the_json_work_without_prefill() {
    let text =
        std::fs::read_to_string("tests/fixtures/models/prose_then_json.json").expect("fixture");
    let script = MockScript::from_json(&text, "prose_then_json.json").expect("script");
    let mock = MockServer::start(script).await.expect("mock");
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "prose").await;
    let id = invite(&http, "prose", "Pip").await;
    prompt(&http, "prose", &id, "three boxes").await;
    client
        .until("box1 settled", |c| {
            shapes(c)["box1"]["locked"] == json!(false)
        })
        .await;
    client.until("the fairy idle", |c| idle(c, &id)).await;
    let body = &mock.requests()[0].body;
    assert!(
        body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .is_some_and(|m| m["role"] == json!("user")),
        "no assistant prefill sent to this model: {body}"
    );
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_fairys_changes_are_listed_apart_from_the_users() {
    let mock = mock_server(vec![ok(TWO_BOXES), ok(DONE)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "pair").await;
    let first = invite(&http, "pair", "Clover").await;
    let second = invite(&http, "pair", "Wren").await;
    prompt(&http, "pair", &first, "two boxes").await;
    client
        .until("the first fairy done", |c| {
            shapes(c)["b"]["locked"] == json!(false) && idle(c, &first)
        })
        .await;
    prompt(&http, "pair", &second, "what did the other fairy do?").await;
    wait_requests(&mock, 2).await;
    let context = context_of(&mock, 1);
    let changes = context
        .split("changesSinceLastRequest")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    assert!(changes.contains("\\\"users\\\":[]"), "{changes}");
    assert!(
        changes.contains("\\\"change\\\":\\\"added\\\""),
        "{changes}"
    );
    assert!(context.contains("otherFairies"), "{context}");
    assert!(
        context.contains("Clover"),
        "the other fairy is listed: {context}"
    );
    client
        .until("the second fairy idle", |c| idle(c, &second))
        .await;
    client.close().await;
    server.shutdown().await;
}
