//! Taking back a fairy's request over HTTP (real server, yrs client, mock or offline model):
//! after it is done, while it runs, after a restart; a person's later edit stays; unknown
//! requests are 404, a token without the `fairies` scope 403; the rejection is in the
//! document's chat, the fairy's history and the model's next prompt.

use crate::support;

use std::time::Duration;

use fairyring::config::ServeConfig;
use serde_json::{Value, json};
use support::Client;
use support::fairy_http::*;
use yrs::{Map, Out, ReadTxn};

const TWO_BOXES: &str = r#"{"actions": [{"_type": "create", "intent": "a", "shape": {"_type": "rectangle", "shapeId": "a", "note": "", "x": 0, "y": 0, "w": 50, "h": 50, "color": "blue"}}, {"_type": "create", "intent": "b", "shape": {"_type": "rectangle", "shapeId": "b", "note": "", "x": 100, "y": 0, "w": 50, "h": 50, "color": "blue"}}]}"#;
/// Recolours `a`, deletes `b`, creates `c`.
const REWORK: &str = r#"{"actions": [{"_type": "update", "intent": "green", "update": {"shapeId": "a", "color": "green"}}, {"_type": "delete", "intent": "away", "shapeId": "b"}, {"_type": "create", "intent": "c", "shape": {"_type": "ellipse", "shapeId": "c", "note": "", "x": 200, "y": 0, "w": 50, "h": 50}}, {"_type": "message", "text": "reworked"}]}"#;
const DONE: &str = r#"{"actions": [{"_type": "message", "text": "ok"}]}"#;

fn idle(c: &Client, id: &str) -> bool {
    fairy_presence(c, id).is_some_and(|p| p["fairy"]["mode"] == json!("idling"))
}

/// Prompts and returns the request id the route answers.
async fn prompt_id(http: &str, room: &str, id: &str, message: &str) -> String {
    let (status, body) = post(
        &format!("{http}/rooms/{room}/fairies/{id}/prompt"),
        json!({"message": message, "bounds": {"x": 0, "y": 0, "w": 800, "h": 600}}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    body["requestId"].as_str().expect("requestId").to_owned()
}

async fn revert(http: &str, room: &str, id: &str, request: &str) -> (u16, Value) {
    post(
        &format!("{http}/rooms/{room}/fairies/{id}/requests/{request}/revert"),
        json!({}),
    )
    .await
}

fn chat(c: &Client, id: &str) -> Vec<Value> {
    root_json(c, "fairies")[id]["chat"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn set_key(c: &mut yrs::TransactionMut, shape: &str, key: &str, value: yrs::Any) {
    let root = c.get_map("shapes").expect("shapes");
    if let Some(Out::YMap(m)) = root.get(c, shape) {
        m.insert(c, key, value);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_done_request_is_taken_back_except_what_a_person_changed_since() {
    let mock = mock_server(vec![ok(TWO_BOXES), ok(REWORK), ok(DONE)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "undo").await;
    let id = invite(&http, "undo", "Clover").await;
    let mut events = events(&http, "undo", &id).await;
    let first = prompt_id(&http, "undo", &id, "two boxes").await;
    client
        .until("both boxes settled and the fairy idle", |c| {
            let s = shapes(c);
            s["a"]["locked"] == json!(false) && s["b"]["locked"] == json!(false) && idle(c, &id)
        })
        .await;
    let started = read_events(&mut events, "request-ended").await;
    assert!(
        started.contains(&format!("\"requestId\":\"{first}\"")),
        "{started}"
    );
    let second = prompt_id(&http, "undo", &id, "rework them").await;
    assert_ne!(first, second);
    client
        .until("the rework done", |c| {
            let s = shapes(c);
            s["a"]["color"] == json!("green")
                && s.get("b").is_none()
                && s["c"]["locked"] == json!(false)
                && idle(c, &id)
        })
        .await;
    // A person moves `a` (a key the fairy did not touch) and writes in `c` (the fairy's shape).
    client
        .edit(|txn| {
            set_key(txn, "a", "x", 300.0.into());
            set_key(txn, "c", "text", "mine".into());
        })
        .await;
    client.drain(Duration::from_millis(100)).await;
    let (status, body) = revert(&http, "undo", &id, &second).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"reverted": 2, "kept": 1}));
    client
        .until("b back and a blue again", |c| {
            let s = shapes(c);
            s["a"]["color"] == json!("blue") && s["b"]["color"] == json!("blue")
        })
        .await;
    let s = shapes(&client);
    assert_eq!(s["a"]["x"].as_f64(), Some(300.0), "the person's move stays");
    assert_eq!(
        s["c"]["text"],
        json!("mine"),
        "the shape the person wrote in stays"
    );
    // The first request's work is untouched.
    assert_eq!(s["b"]["x"].as_f64(), Some(100.0));
    // Every browser reads the rejection from the chat.
    client
        .until("the rejection in the chat", |c| {
            chat(c, &id)
                .iter()
                .any(|i| i["requestId"] == json!(second) && i["acceptance"] == json!("rejected"))
        })
        .await;
    let items = chat(&client, &id);
    assert!(
        items
            .iter()
            .any(|i| i["role"] == json!("user") && i["requestId"] == json!(second)),
        "the person's prompt carries its request id: {items:?}"
    );
    assert!(
        items
            .iter()
            .any(|i| i["text"] == json!("reworked") && i["requestId"] == json!(second)),
        "the fairy's message carries its request id: {items:?}"
    );
    let state = history(&http, "undo", &id).await;
    let prompts: Vec<&Value> = state["history"]
        .as_array()
        .map(|h| h.iter().filter(|i| i["type"] == json!("prompt")).collect())
        .unwrap_or_default();
    assert!(
        prompts
            .iter()
            .any(|i| i["agentFacingMessage"] == json!("rework them")
                && i["requestId"] == json!(second)
                && i["acceptance"] == json!("rejected")),
        "{prompts:?}"
    );
    assert!(
        prompts
            .iter()
            .all(|i| i["requestId"] != json!(first) || i.get("acceptance").is_none()),
        "only the rejected request is marked: {prompts:?}"
    );
    let ended = read_events(&mut events, "request-rejected").await;
    assert!(ended.contains("\"reverted\":2"), "{ended}");
    // Rejecting it again changes nothing and answers the same.
    let (status, again) = revert(&http, "undo", &id, &second).await;
    assert_eq!((status, again), (200, json!({"reverted": 2, "kept": 1})));
    // The model hears of it at the next prompt.
    prompt_id(&http, "undo", &id, "and now?").await;
    wait_requests(&mock, 3).await;
    let next = mock.requests()[2].body.to_string();
    assert!(
        next.contains("The user rejected your work for request") && next.contains("rework them"),
        "{next}"
    );
    client.until("the fairy idle again", |c| idle(c, &id)).await;
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_request_is_interrupted_then_taken_back() {
    // The request runs until something stops it.
    let mock = stalling_in_b().await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "running").await;
    let id = invite(&http, "running", "Moss").await;
    let mut events = events(&http, "running", &id).await;
    let request = prompt_id(&http, "running", &id, "two boxes, slowly").await;
    client
        .until("a done and b streaming", |c| {
            let s = shapes(c);
            s["a"]["locked"] == json!(false) && s["b"]["locked"] == json!(true)
        })
        .await;
    let (status, body) = revert(&http, "running", &id, &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"reverted": 1, "kept": 0}));
    client
        .until("both gone and the fairy idle", |c| {
            let s = shapes(c);
            s.get("a").is_none() && s.get("b").is_none() && idle(c, &id)
        })
        .await;
    let seen = read_events(&mut events, "request-rejected").await;
    assert!(seen.contains("\"reason\":\"rejected\""), "{seen}");
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_requests_are_404_and_the_route_needs_the_fairies_scope() {
    let (config, mint) = with_auth(ServeConfig::for_test());
    let (server, _ws, http) = start(config).await;
    let client = reqwest::Client::new();
    let fairies = mint("read write fairies");
    let invited: Value = client
        .post(format!("{http}/rooms/overrule/fairies"))
        .bearer_auth(&fairies)
        .json(&json!({"name": "Pip"}))
        .send()
        .await
        .expect("invite")
        .json()
        .await
        .expect("json");
    let id = invited["id"].as_str().expect("id");
    let call = |token: String, request: &str| {
        client
            .post(format!(
                "{http}/rooms/overrule/fairies/{id}/requests/{request}/revert"
            ))
            .bearer_auth(token)
            .send()
    };
    for request in ["r-000000000000", "not%20an%20id"] {
        let response = call(fairies.clone(), request).await.expect("revert");
        assert_eq!(response.status().as_u16(), 404, "{request}");
        let body: Value = response.json().await.expect("json");
        assert_eq!(body["error"], json!("request_not_found"), "{body}");
        assert!(body["detail"].as_str().is_some_and(|d| !d.is_empty()));
    }
    let response = call(mint("read write"), "r-000000000000")
        .await
        .expect("revert");
    assert_eq!(response.status().as_u16(), 403);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"], json!("insufficient_scope"));
    let response = client
        .post(format!(
            "{http}/rooms/overrule/fairies/f-nobody/requests/r-1/revert"
        ))
        .bearer_auth(&fairies)
        .send()
        .await
        .expect("revert");
    assert_eq!(response.status().as_u16(), 404);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"], json!("fairy_not_found"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_can_be_taken_back_after_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = ServeConfig::for_test();
    config.store = format!("sqlite:{}", dir.path().join("fairies.db").display());
    let (server, ws, http) = start(config.clone()).await;
    let mut client = Client::connect(&ws, "later").await;
    let id = invite(&http, "later", "Juniper").await;
    // The request's end, from the event stream: the fairy's awareness may still read `idle`
    // from before the request when its first shapes arrive.
    let mut events = events(&http, "later", &id).await;
    let request = prompt_id(&http, "later", &id, "draw a house").await;
    read_events(&mut events, "request-ended").await;
    // The peer receives the shapes after their durable commit, which may come after the event.
    client
        .until("the whole house settled and the fairy idle", |c| {
            let all = shapes(c);
            let drawn = all.as_object().map_or(0, |m| m.len());
            drawn >= 4
                && all["roof"]["locked"] == json!(false)
                && all
                    .as_object()
                    .is_some_and(|m| m.values().all(|s| s["locked"] != json!(true)))
                && idle(c, &id)
        })
        .await;
    let drawn = shapes(&client).as_object().map_or(0, |m| m.len());
    client.close().await;
    server.shutdown().await;

    let (server, ws, http) = start(config).await;
    let mut client = Client::connect(&ws, "later").await;
    client
        .until("the fairy back", |c| fairy_presence(c, &id).is_some())
        .await;
    let (status, body) = revert(&http, "later", &id, &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"reverted": drawn, "kept": 0}));
    client
        .until("the house gone", |c| {
            shapes(c).as_object().is_none_or(|m| m.is_empty())
        })
        .await;
    client.close().await;
    server.shutdown().await;
}

/// The stored state of every fairy of the SQLite file at `db`, its ledgers' rows included, as
/// text.
async fn stored_states(db: &std::path::Path) -> String {
    use sqlx::Row;
    let url = format!("sqlite:{}?mode=ro", db.display());
    let Ok(mut conn) = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url).await else {
        return String::new();
    };
    // The state's row and, saved incrementally, its ledger's rows.
    let rows =
        sqlx::query("SELECT data FROM fairy_states UNION ALL SELECT data FROM fairy_requests")
            .fetch_all(&mut conn)
            .await
            .unwrap_or_default();
    rows.iter()
        .filter_map(|r| r.try_get::<Vec<u8>, _>(0).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_kill_9_mid_request_a_revert_restores_the_canvas_before_it() {
    use support::services::Node;
    // The process is killed while the model is silent.
    let mock = stalling_in_b().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("killed.db");
    let args: Vec<String> = [
        "--store",
        &format!("sqlite:{}", db.display()),
        "--llm",
        "openai",
        "--llm-base-url",
        &mock.base_url(),
        "--llm-model",
        "mock",
        "--fairy-apply-interval-ms",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut node = Node::spawn(&args);
    let mut client = Client::connect(&node.ws(), "crash").await;
    client
        .edit(|txn| support::put_shape(txn, "mine", 10.0))
        .await;
    let id = invite(&node.http(), "crash", "Fern").await;
    let request = prompt_id(&node.http(), "crash", &id, "two boxes, slowly").await;
    client
        .until("a done and b streaming", |c| {
            let s = shapes(c);
            s["a"]["locked"] == json!(false) && s["b"]["locked"] == json!(true)
        })
        .await;
    // The ledger that holds `a` reaches the store within half a second, though the model is
    // silent; nothing after that is needed for the revert.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !stored_states(&db).await.contains("\"shapes\":{\"a\"") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the ledger holding `a` was never stored"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    node.kill();
    client.close().await;

    let node = Node::spawn(&args);
    let mut client = Client::connect(&node.ws(), "crash").await;
    client
        .until("the fairy back, its half-drawn shape gone", |c| {
            let s = shapes(c);
            fairy_presence(c, &id).is_some()
                && s.get("b").is_none()
                && s["a"]["locked"] == json!(false)
        })
        .await;
    let (status, body) = revert(&node.http(), "crash", &id, &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["kept"], json!(0), "{body}");
    client
        .until("only the person's shape left, nothing re-created", |c| {
            let s = shapes(c);
            s.as_object()
                .is_some_and(|m| m.len() == 1 && m.contains_key("mine"))
        })
        .await;
    client.close().await;
}
