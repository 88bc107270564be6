//! Review mode over HTTP (real server, yrs client, mock model): a fairy invited with
//! `"apply": "suggest"` proposes its canvas changes as records in `suggestions` and leaves
//! `shapes` alone; people accept (the exact keys reach `shapes`, a person's concurrent edit of
//! another key stays) or reject them one by one or per request; a deleted shape is a conflict;
//! a second decision is refused; a revert rejects what is pending; an interrupted request
//! leaves no half-streamed record; the model is told its pending suggestions and people's
//! decisions; history names the fairy with `acceptedBy`; scopes are checked.

use crate::support;

use std::time::Duration;

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

fn suggestions(c: &Client) -> Value {
    root_json(c, "suggestions")
}

/// The records of `request` on `shape`.
fn record_of<'a>(all: &'a Value, request: &str, shape: &str) -> Option<&'a Value> {
    all.as_object()?
        .values()
        .find(|r| r["requestId"] == json!(request) && r["shapeId"] == json!(shape))
}

fn pending_count(c: &Client, request: &str) -> usize {
    suggestions(c).as_object().map_or(0, |m| {
        m.values()
            .filter(|r| r["requestId"] == json!(request) && r["status"] == json!("pending"))
            .count()
    })
}

async fn invite_suggesting(http: &str, room: &str, name: &str) -> String {
    let (status, body) = post(
        &format!("{http}/rooms/{room}/fairies"),
        json!({"name": name, "apply": "suggest"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["apply"], json!("suggest"), "{body}");
    body["id"].as_str().expect("id").to_owned()
}

async fn prompt_id(http: &str, room: &str, id: &str, message: &str) -> String {
    let (status, body) = post(
        &format!("{http}/rooms/{room}/fairies/{id}/prompt"),
        json!({"message": message, "bounds": {"x": 0, "y": 0, "w": 800, "h": 600}}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    body["requestId"].as_str().expect("requestId").to_owned()
}

async fn decide(http: &str, room: &str, id: &str, verdict: &str) -> (u16, Value) {
    post(
        &format!("{http}/rooms/{room}/suggestions/{id}/{verdict}"),
        json!({}),
    )
    .await
}

fn remove_shape(txn: &mut yrs::TransactionMut, shape: &str) {
    if let Some(root) = txn.get_map("shapes") {
        root.remove(txn, shape);
    }
}

fn set_key(txn: &mut yrs::TransactionMut, shape: &str, key: &str, value: yrs::Any) {
    let root = txn.get_map("shapes").expect("shapes");
    if let Some(Out::YMap(m)) = root.get(txn, shape) {
        m.insert(txn, key, value);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suggesting_fairy_proposes_and_people_decide() {
    let mock = mock_server(vec![ok(TWO_BOXES), ok(REWORK), ok(DONE)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "review").await;
    let id = invite_suggesting(&http, "review", "Clover").await;
    let first = prompt_id(&http, "review", &id, "two boxes").await;
    client
        .until("two pending creates and the fairy idle", |c| {
            pending_count(c, &first) == 2 && idle(c, &id)
        })
        .await;
    assert_eq!(shapes(&client), json!({}), "shapes untouched");
    let all = suggestions(&client);
    let a = record_of(&all, &first, "a").expect("a's record");
    assert_eq!(a["op"], json!("create"));
    assert_eq!(a["fairyId"], json!(id));
    assert_eq!(a["status"], json!("pending"));
    assert_eq!(a["props"]["color"], json!("blue"));
    assert!(a["props"].get("locked").is_none(), "{a}");
    // The whole request at once.
    let (status, body) = post(
        &format!("{http}/rooms/review/fairies/{id}/requests/{first}/accept"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["accepted"].as_array().map(Vec::len), Some(2), "{body}");
    assert_eq!(body["conflicts"], json!([]));
    client
        .until("a and b on the canvas", |c| {
            let s = shapes(c);
            s["a"]["createdBy"] == json!(format!("fairy:{id}"))
                && s["b"]["x"].as_f64() == Some(100.0)
        })
        .await;
    assert_eq!(pending_count(&client, &first), 0);

    let second = prompt_id(&http, "review", &id, "rework them").await;
    client
        .until("three pending suggestions", |c| {
            pending_count(c, &second) == 3 && idle(c, &id)
        })
        .await;
    assert_eq!(shapes(&client)["a"]["color"], json!("blue"), "not applied");
    let all = suggestions(&client);
    let update = record_of(&all, &second, "a").expect("update a")["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let delete = record_of(&all, &second, "b").expect("delete b").clone();
    assert_eq!(delete["op"], json!("delete"));
    let create = record_of(&all, &second, "c").expect("create c")["id"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(
        record_of(&all, &second, "a").expect("a")["props"],
        json!({"color": "green"})
    );
    // The model was told: review mode, its decisions.
    let seen = mock.requests()[1].body.to_string();
    assert!(seen.contains("## Review mode"), "{seen}");
    assert!(
        seen.contains("reviewMode") && seen.contains("accepted"),
        "{seen}"
    );
    // Its next prompt lists its proposals still waiting.
    prompt_id(&http, "review", &id, "and now?").await;
    wait_requests(&mock, 3).await;
    let next = mock.requests()[2].body.to_string();
    assert!(
        next.contains("pendingSuggestions") && next.contains(&update) && next.contains(&create),
        "{next}"
    );
    // The decisions it was told in the second prompt are not told again.
    assert!(next.contains(r#"\"decisions\":[]"#), "{next}");

    // A person moves `a` meanwhile: accepting the recolour keeps the move.
    client
        .edit(|txn| set_key(txn, "a", "x", 300.0.into()))
        .await;
    client.drain(Duration::from_millis(100)).await;
    let (status, body) = decide(&http, "review", &update, "accept").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], json!("accepted"));
    assert!(body["seq"].as_u64().is_some(), "{body}");
    client
        .until("a green", |c| shapes(c)["a"]["color"] == json!("green"))
        .await;
    assert_eq!(shapes(&client)["a"]["x"].as_f64(), Some(300.0));
    let (status, body) = decide(&http, "review", &update, "reject").await;
    assert_eq!(
        (status, body["error"].clone()),
        (409, json!("already_decided"))
    );

    // A person deletes `b`: the fairy's delete of it is a conflict.
    client.edit(|txn| remove_shape(txn, "b")).await;
    client.drain(Duration::from_millis(100)).await;
    let (status, body) = decide(
        &http,
        "review",
        delete["id"].as_str().expect("id"),
        "accept",
    )
    .await;
    assert_eq!((status, body["error"].clone()), (409, json!("shape_gone")));

    let (status, body) = decide(&http, "review", &create, "reject").await;
    assert_eq!((status, body["status"].clone()), (200, json!("rejected")));
    client
        .until("c rejected", |c| {
            record_of(&suggestions(c), &second, "c")
                .is_some_and(|r| r["status"] == json!("rejected"))
        })
        .await;
    assert!(shapes(&client).get("c").is_none());

    // Taking the request back rejects what is still pending (the delete of b).
    let (status, body) = post(
        &format!("{http}/rooms/review/fairies/{id}/requests/{second}/revert"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["rejectedSuggestions"], json!([delete["id"]]), "{body}");
    client
        .until("nothing pending", |c| pending_count(c, &second) == 0)
        .await;

    let (status, body) = decide(&http, "review", "s-unknown", "accept").await;
    assert_eq!(
        (status, body["error"].clone()),
        (404, json!("suggestion_not_found"))
    );

    // History: the accepted recolour is the fairy's, accepted by the person.
    let history: Value = reqwest::get(format!("{http}/rooms/review/history?limit=100"))
        .await
        .expect("history")
        .json()
        .await
        .expect("json");
    let entries = history["entries"].as_array().cloned().unwrap_or_default();
    assert!(
        entries.iter().any(|e| e["actor"]["kind"] == json!("fairy")
            && e["actor"]["id"] == json!(id)
            && e["actor"]["acceptedBy"].is_string()),
        "{history}"
    );
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_suggesting_request_leaves_no_half_streamed_record() {
    let mock = stalling_in_b().await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "halfway").await;
    // A fairy that draws directly by default, asked to suggest for this one prompt.
    let id = invite(&http, "halfway", "Moss").await;
    let (status, body) = post(
        &format!("{http}/rooms/halfway/fairies/{id}/prompt"),
        json!({"message": "two boxes", "apply": "suggest", "bounds": {"x": 0, "y": 0, "w": 800, "h": 600}}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let request = body["requestId"].as_str().expect("id").to_owned();
    client
        .until("a complete and b streaming as suggestions", |c| {
            let all = suggestions(c);
            record_of(&all, &request, "a").is_some() && record_of(&all, &request, "b").is_some()
        })
        .await;
    assert_eq!(shapes(&client), json!({}));
    let (status, body) = post(
        &format!("{http}/rooms/halfway/fairies/{id}/cancel"),
        json!({}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    client
        .until("b's half-streamed record gone, a's kept", |c| {
            let all = suggestions(c);
            record_of(&all, &request, "b").is_none()
                && record_of(&all, &request, "a").is_some_and(|r| r["status"] == json!("pending"))
        })
        .await;
    assert_eq!(shapes(&client), json!({}));
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_need_the_write_scope_and_peers_cannot_forge_suggestions() {
    let mock = mock_server(vec![ok(TWO_BOXES), ok(DONE)]).await;
    let (config, mint) = with_auth(mock_config(&mock));
    let (server, ws, http) = start(config).await;
    let all = mint("read write fairies");
    let read_only = mint("read fairies");
    let (status, body) = post(
        &format!("{http}/rooms/scoped/fairies?token={all}"),
        json!({"apply": "suggest"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().expect("id").to_owned();
    let (status, body) = post(
        &format!("{http}/rooms/scoped/fairies/{id}/prompt?token={all}"),
        json!({"message": "two boxes"}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let request = body["requestId"].as_str().expect("id").to_owned();
    let mut client = Client::connect(&ws, &format!("scoped?token={all}")).await;
    client
        .until("two pending", |c| pending_count(c, &request) == 2)
        .await;
    let one = record_of(&suggestions(&client), &request, "a").expect("a")["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let (status, _) = post(
        &format!("{http}/rooms/scoped/suggestions/{one}/accept?token={read_only}"),
        json!({}),
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = post(
        &format!("{http}/rooms/scoped/suggestions/{one}/accept"),
        json!({}),
    )
    .await;
    assert_eq!(status, 401);
    let (status, body) = post(
        &format!("{http}/rooms/scoped/suggestions/{one}/accept?token={all}"),
        json!({}),
    )
    .await;
    assert_eq!((status, body["status"].clone()), (200, json!("accepted")));
    // A peer that writes a suggestion of its own is refused and closed.
    client
        .edit(|txn| {
            let root = yrs::WriteTxn::get_or_insert_map(txn, "suggestions");
            root.insert(txn, "s-forged", yrs::MapPrelim::default());
        })
        .await;
    assert_eq!(client.until_closed().await, Some(1008));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_in_review_mode_suggests_inside_each_task() {
    let mock = mock_server(vec![ok(r#"{"actions": []}"#)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let room = "review-project";
    let mut client = Client::connect(&ws, room).await;
    let orla = invite(&http, room, "Orla").await;
    let dart = invite(&http, room, "Dart").await;
    let echo = invite(&http, room, "Echo").await;
    house_and_tree(&mock, &dart, &echo);
    let (status, started) = post(
        &format!("{http}/rooms/{room}/group-prompt"),
        json!({"message": "a house and a tree", "fairyIds": [orla, dart, echo], "apply": "suggest",
               "bounds": {"x": 0, "y": 0, "w": 1000, "h": 500}}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let project = started["projectId"].as_str().expect("projectId").to_owned();
    client
        .until("the project done and everyone idle", |c| {
            root_json(c, "projects")[&project]["status"] == json!("done")
                && [&orla, &dart, &echo].iter().all(|id| idle(c, id))
        })
        .await;
    assert_eq!(shapes(&client), json!({}), "nothing drawn directly");
    let all = suggestions(&client);
    let by_shape = |shape: &str| {
        all.as_object()
            .and_then(|m| m.values().find(|r| r["shapeId"] == json!(shape)))
            .cloned()
    };
    let walls = by_shape("walls").expect("walls suggested");
    assert_eq!(walls["fairyId"], json!(dart));
    assert_eq!(walls["props"]["x"].as_f64(), Some(50.0), "{walls}");
    let oak = by_shape("oak").expect("oak suggested");
    assert_eq!(oak["fairyId"], json!(echo));
    // Inside the tree's task (x 500..900).
    let x = oak["props"]["x"].as_f64().expect("x");
    assert!((500.0..=900.0).contains(&x), "{oak}");
    assert!(by_shape("stray").is_none(), "{all}");
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_kill_9_mid_stream_the_half_streamed_suggestion_is_removed() {
    use support::services::Node;
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
    let id = invite_suggesting(&node.http(), "crash", "Fern").await;
    let request = prompt_id(&node.http(), "crash", &id, "two boxes, slowly").await;
    client
        .until("a suggested and b streaming", |c| {
            let all = suggestions(c);
            record_of(&all, &request, "a").is_some_and(|r| r["streaming"] == json!(false))
                && record_of(&all, &request, "b").is_some_and(|r| r["streaming"] == json!(true))
        })
        .await;
    node.kill();
    client.close().await;

    let node = Node::spawn(&args);
    let mut client = Client::connect(&node.ws(), "crash").await;
    client
        .until(
            "the fairy back, b's half-streamed record gone, a's kept",
            |c| {
                let all = suggestions(c);
                fairy_presence(c, &id).is_some()
                    && record_of(&all, &request, "b").is_none()
                    && record_of(&all, &request, "a")
                        .is_some_and(|r| r["status"] == json!("pending"))
            },
        )
        .await;
    assert_eq!(shapes(&client), json!({}));
    client.close().await;
}

async fn patch(url: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .patch(url)
        .json(&body)
        .send()
        .await
        .expect("request sent");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fairys_default_is_changed_for_everyone_and_its_next_request_follows_it() {
    let mock = mock_server(vec![ok(TWO_BOXES)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "toggle").await;
    let id = invite(&http, "toggle", "Pip").await;
    let (status, body) = patch(
        &format!("{http}/rooms/toggle/fairies/{id}"),
        json!({"apply": "suggest"}),
    )
    .await;
    assert_eq!(
        (status, body["apply"].clone()),
        (200, json!("suggest")),
        "{body}"
    );
    client
        .until("the entity says suggest", |c| {
            root_json(c, "fairies")[&id]["apply"] == json!("suggest")
        })
        .await;
    let request = prompt_id(&http, "toggle", &id, "two boxes").await;
    client
        .until("two pending suggestions", |c| {
            pending_count(c, &request) == 2 && idle(c, &id)
        })
        .await;
    assert_eq!(shapes(&client), json!({}));
    let (status, _) = patch(
        &format!("{http}/rooms/toggle/fairies/{id}"),
        json!({"apply": "direct"}),
    )
    .await;
    assert_eq!(status, 200);
    prompt_id(&http, "toggle", &id, "two boxes").await;
    client
        .until("drawn directly", |c| {
            let s = shapes(c);
            s["a"]["locked"] == json!(false) && s["b"]["locked"] == json!(false)
        })
        .await;
    let (status, body) = patch(
        &format!("{http}/rooms/toggle/fairies/f-unknown"),
        json!({"apply": "direct"}),
    )
    .await;
    assert_eq!(
        (status, body["error"].clone()),
        (404, json!("fairy_not_found"))
    );
    let (status, _) = patch(
        &format!("{http}/rooms/toggle/fairies/{id}"),
        json!({"apply": "sideways"}),
    )
    .await;
    assert_eq!(status, 400);
    client.close().await;
    server.shutdown().await;
}

/// Issue 43 (finding 7): accepting a suggestion its fairy is still streaming would apply a
/// half-built preview (a shape at 0,0 without its keys) and leave duplicate pending records
/// behind; it is refused with `409 suggestion_streaming`, and accepting the whole request leaves
/// it pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suggestion_still_streaming_is_not_accepted() {
    let mock = stalling_in_b().await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "midstream").await;
    let id = invite_suggesting(&http, "midstream", "Fern").await;
    let request = prompt_id(&http, "midstream", &id, "two boxes").await;
    client
        .until("a complete and b streaming", |c| {
            let all = suggestions(c);
            record_of(&all, &request, "a").is_some_and(|r| r["streaming"] == json!(false))
                && record_of(&all, &request, "b").is_some_and(|r| r["streaming"] == json!(true))
        })
        .await;
    let b = record_of(&suggestions(&client), &request, "b").expect("b")["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let (status, body) = decide(&http, "midstream", &b, "accept").await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"], json!("suggestion_streaming"), "{body}");
    let (status, body) = post(
        &format!("{http}/rooms/midstream/fairies/{id}/requests/{request}/accept"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["conflicts"], json!([]), "{body}");
    assert_eq!(
        body["accepted"].as_array().map(Vec::len),
        Some(1),
        "only a: {body}"
    );
    client
        .until("a applied, b still a pending preview", |c| {
            let all = suggestions(c);
            shapes(c).get("a").is_some()
                && shapes(c).get("b").is_none()
                && record_of(&all, &request, "b").is_some_and(|r| r["status"] == json!("pending"))
        })
        .await;
    // One record per shape: nothing duplicated.
    let all = suggestions(&client);
    let of_b = all.as_object().map_or(0, |m| {
        m.values().filter(|r| r["shapeId"] == json!("b")).count()
    });
    assert_eq!(of_b, 1, "{all}");
    client.close().await;
    server.shutdown().await;
}

/// Issue 43 (finding 9): a `read fairies` token rejected suggestions through a revert, while
/// rejecting one needs `write`; now the revert answers `403 insufficient_scope` and leaves them
/// pending. Accepting a request with another room's fairy id is `404 fairy_not_found`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reverting_pending_suggestions_needs_write_and_fairies_belong_to_their_room() {
    let mock = mock_server(vec![ok(TWO_BOXES), ok(DONE)]).await;
    let (config, mint) = with_auth(mock_config(&mock));
    let (server, ws, http) = start(config).await;
    let all = mint("read write fairies");
    let no_write = mint("read fairies");
    let (status, body) = post(
        &format!("{http}/rooms/scoped2/fairies?token={all}"),
        json!({"apply": "suggest"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().expect("id").to_owned();
    let (status, body) = post(
        &format!("{http}/rooms/scoped2/fairies/{id}/prompt?token={all}"),
        json!({"message": "two boxes"}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let request = body["requestId"].as_str().expect("id").to_owned();
    let mut client = Client::connect(&ws, &format!("scoped2?token={all}")).await;
    client
        .until("two pending", |c| pending_count(c, &request) == 2)
        .await;
    let revert = format!("{http}/rooms/scoped2/fairies/{id}/requests/{request}/revert");
    let (status, body) = post(&format!("{revert}?token={no_write}"), json!({})).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"], json!("insufficient_scope"), "{body}");
    assert_eq!(pending_count(&client, &request), 2);
    // Another room: this fairy is not one of its fairies.
    let (status, body) = post(
        &format!("{http}/rooms/elsewhere/fairies/{id}/requests/{request}/accept?token={all}"),
        json!({}),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"], json!("fairy_not_found"), "{body}");
    let (status, body) = post(&format!("{revert}?token={all}"), json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["rejectedSuggestions"].as_array().map(Vec::len),
        Some(2),
        "{body}"
    );
    client.close().await;
    server.shutdown().await;
}
