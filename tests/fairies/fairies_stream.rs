//! Streaming that shows what it has (real server, yrs client, mock model over HTTP, the default
//! 250 ms apply interval): a rectangle streamed faster than the interval shows as a locked shape
//! before its action completes (versions that could not be applied do not start the interval),
//! and a model pausing mid-action shows the version it held back when the interval ends, with no
//! new text (the throttle's trailing edge); a completed creation stays the very shape that was
//! shown (written over, not deleted and created again), even when a person wrote meanwhile, and
//! is still taken back with its request.

use crate::support;

use std::time::Duration;

use fairyring::llm::mock::wire::{Segment, WireFormat, render};
use fairyring::llm::mock::{Fault, MockResponse, MockServer};
use serde_json::{Value, json};
use support::Client;
use support::fairy_http::*;

const DONE: &str = r#"{"actions": [{"_type": "message", "text": "ok"}]}"#;

fn rectangle(id: &str) -> String {
    format!(
        r#"{{"actions": [{{"_type": "create", "intent": "a box", "shape": {{"_type": "rectangle", "shapeId": "{id}", "x": 40, "y": 60, "w": 200, "h": 120, "color": "blue", "note": ""}}}}]}}"#
    )
}

async fn server_with(
    responses: Vec<MockResponse>,
) -> (MockServer, fairyring::server::ServerHandle, String, String) {
    let mock = mock_server(responses).await;
    let mut config = mock_config(&mock);
    // The default interval, which the slow stream below fits inside.
    config.fairy_apply_interval_ms = 250;
    let (server, ws, http) = start(config).await;
    (mock, server, ws, http)
}

fn shape(c: &Client, id: &str) -> Value {
    shapes(c)[id].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rectangle_streamed_within_one_interval_shows_locked_before_it_completes() {
    let text = rectangle("slow");
    // ~750 characters a second: three characters (one SSE event) every 4 ms, so the whole
    // action streams in about a quarter of a second, about one apply interval.
    let mut slow = MockResponse {
        text: text.clone(),
        delta_chars: 3,
        delay_ms: 4,
        ..MockResponse::default()
    };
    slow.chunk_size = bytes_per_event(&slow);
    let (_mock, server, ws, http) = server_with(vec![slow, ok(DONE)]).await;
    let mut client = Client::connect(&ws, "stream-fast").await;
    let id = invite(&http, "stream-fast", "Bramble").await;
    prompt(&http, "stream-fast", &id, "a box").await;
    client
        .until("a shape appears", |c| {
            shapes(c).as_object().is_some_and(|m| !m.is_empty())
        })
        .await;
    // The first applicable version may carry a prefix of the id (a string still streaming is
    // shown as far as it arrived); it is reverted and replaced as the action grows.
    assert_eq!(
        locked_count(&client),
        1,
        "first seen while streaming: {}",
        shapes(&client)
    );
    client
        .until("the rectangle completes", |c| {
            shape(c, "slow")["locked"] == json!(false)
        })
        .await;
    let s = shape(&client, "slow");
    assert_eq!(
        (s["w"].as_f64(), s["h"].as_f64()),
        (Some(200.0), Some(120.0))
    );
    assert_eq!(locked_count(&client), 0, "{}", shapes(&client));
    assert_eq!(shapes(&client).as_object().map(|m| m.len()), Some(1));
    client.close().await;
    server.shutdown().await;
}

/// The mean size of one text event of `resp` in the OpenAI wire format, in bytes.
fn bytes_per_event(resp: &MockResponse) -> usize {
    let body: usize = render(WireFormat::OpenAi, resp, "mock")
        .iter()
        .map(|seg| match seg {
            Segment::Bytes(b) => b.len(),
            _ => 0,
        })
        .sum();
    let events = resp.text.chars().count().div_ceil(resp.delta_chars.max(1));
    (body / events.max(1)).max(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_pausing_mid_action_shows_the_held_version_during_the_pause() {
    let text = rectangle("paused");
    // Pause right after `"h": 120,`: x, y, w and h have all arrived.
    let after = text.find(r#""h": 120,"#).expect("h") + r#""h": 120,"#.len();
    let pausing = MockResponse {
        text: text.clone(),
        delta_chars: 2,
        chunk_size: 0,
        delay_ms: 0,
        fault: Some(Fault::Pause {
            after_chars: after,
            ms: 3000,
        }),
        ..MockResponse::default()
    };
    let (_mock, server, ws, http) = server_with(vec![pausing, ok(DONE)]).await;
    let mut client = Client::connect(&ws, "stream-pause").await;
    let id = invite(&http, "stream-pause", "Nettle").await;
    prompt(&http, "stream-pause", &id, "a box").await;
    // The text before the pause arrives in one burst: the first applicable version is shown at
    // once, the later ones (with w and h) are held back by the interval, and the newest of them
    // is shown when the interval ends, well inside the 3 s pause.
    let deadline = tokio::time::Instant::now() + Duration::from_millis(2500);
    loop {
        let s = shape(&client, "paused");
        if s["locked"] == json!(true) && s["h"].as_f64() == Some(120.0) {
            assert_eq!(s["w"].as_f64(), Some(200.0), "{s}");
            break;
        }
        assert!(
            s["locked"] != json!(false),
            "the action completed before its held version was shown: {s}"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "the held version was not shown during the pause: {s}"
        );
        client.pump_once(Duration::from_millis(20)).await;
    }
    client
        .until("the rectangle completes after the pause", |c| {
            shape(c, "paused")["locked"] == json!(false)
        })
        .await;
    client.close().await;
    server.shutdown().await;
}

/// The fairy's awareness clock as `c` last saw it (each publication increments it by one).
fn fairy_clock(c: &Client, id: &str) -> Option<u32> {
    c.awareness.iter().find_map(|(_, state)| {
        let v: Value = serde_json::from_str(state.data.as_deref()?).ok()?;
        (v["fairy"]["id"] == json!(id)).then_some(state.clock)
    })
}

/// Awareness publications per streamed action: streaming three rectangles slowly (about eight
/// 250 ms intervals, each showing a tentative version) re-publishes the fairy's awareness only
/// when it changes (the working pose once, not at every version). Before that change this run
/// published 45 times (15 per action), after it 13 (4.3 per action: poses, flights to the
/// shapes, the message). Run with `--nocapture` for the figure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_versions_republish_awareness_only_when_it_changes() {
    let boxes: Vec<String> = ["b1", "b2", "b3"]
        .iter()
        .map(|id| {
            format!(
                r#"{{"_type": "create", "intent": "a box", "shape": {{"_type": "rectangle", "shapeId": "{id}", "x": 40, "y": 60, "w": 200, "h": 120, "color": "blue"}}}}"#
            )
        })
        .collect();
    let text = format!(
        r#"{{"actions": [{}, {{"_type": "message", "text": "drawn"}}]}}"#,
        boxes.join(", ")
    );
    // 3 characters every 15 ms: about 2 s for the three boxes, eight 250 ms intervals.
    let mut slow = MockResponse {
        text,
        delta_chars: 3,
        delay_ms: 15,
        ..MockResponse::default()
    };
    slow.chunk_size = bytes_per_event(&slow);
    let (_mock, server, ws, http) = server_with(vec![slow, ok(DONE)]).await;
    let mut client = Client::connect(&ws, "stream-awareness").await;
    let id = invite(&http, "stream-awareness", "Sorrel").await;
    client
        .until("the fairy's awareness", |c| fairy_clock(c, &id).is_some())
        .await;
    let before = fairy_clock(&client, &id).unwrap_or_default();
    prompt(&http, "stream-awareness", &id, "three boxes").await;
    let mut shown = 0usize;
    let mut last = Value::Null;
    while !chat_texts(&client, &id).iter().any(|t| t == "drawn") {
        client.pump_once(Duration::from_millis(20)).await;
        let now = shapes(&client);
        if now != last && locked_count(&client) > 0 {
            shown += 1;
        }
        last = now;
    }
    client.drain(Duration::from_millis(100)).await;
    let after = fairy_clock(&client, &id).unwrap_or_default();
    let published = after.saturating_sub(before);
    eprintln!(
        "awareness publications while streaming 3 actions ({shown} tentative states seen): {published} ({:.1} per action)",
        published as f64 / 3.0
    );
    assert!(
        shown >= 3,
        "the stream was too fast to show versions: {shown}"
    );
    assert!(
        published <= 20,
        "{published} publications for 3 streamed actions ({shown} tentative states seen)"
    );
    client.close().await;
    server.shutdown().await;
}

/// The document item holding shape `id` in `c`'s document, as text: a shape deleted and created
/// again under the same id is held by another item.
fn shape_item(c: &Client, id: &str) -> Option<String> {
    use yrs::{Map, Out, Transact};
    let txn = c.doc.transact();
    let root = yrs::ReadTxn::get_map(&txn, "shapes")?;
    match root.get(&txn, id)? {
        Out::YMap(map) => {
            let branch: &yrs::branch::Branch = map.as_ref();
            Some(format!("{:?}", branch.id()))
        }
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_creation_is_the_shape_shown_even_after_a_persons_write() {
    let text = rectangle("kept");
    // Pause after the last field: the held version, every field of the action, shows during
    // the pause; then only the closing brackets arrive.
    let after = text.find(r#""note": """#).expect("note") + r#""note": """#.len();
    let pausing = MockResponse {
        text: text.clone(),
        delta_chars: 2,
        chunk_size: 0,
        delay_ms: 0,
        fault: Some(Fault::Pause {
            after_chars: after,
            ms: 1500,
        }),
        ..MockResponse::default()
    };
    let (_mock, server, ws, http) = server_with(vec![pausing, ok(DONE)]).await;
    let mut client = Client::connect(&ws, "stream-kept").await;
    let id = invite(&http, "stream-kept", "Yarrow").await;
    let (status, body) = post(
        &format!("{http}/rooms/stream-kept/fairies/{id}/prompt"),
        json!({"message": "a box", "bounds": {"x": 0, "y": 0, "w": 800, "h": 600}}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let request = body["requestId"].as_str().expect("requestId").to_owned();
    client
        .until("the whole box shown, locked", |c| {
            let s = shape(c, "kept");
            s["locked"] == json!(true) && s["note"] == json!("") && s["h"].as_f64() == Some(120.0)
        })
        .await;
    let shown = shape_item(&client, "kept");
    // A person draws meanwhile: the document is no longer the one the shown version left.
    client
        .edit(|txn| support::put_shape(txn, "person", 900.0))
        .await;
    client
        .until("the box completes", |c| {
            shape(c, "kept")["locked"] == json!(false)
        })
        .await;
    assert!(shown.is_some());
    assert_eq!(
        shape_item(&client, "kept"),
        shown,
        "the completed box is the shape shown, not a new copy of it"
    );
    let s = shape(&client, "kept");
    assert_eq!(
        (s["w"].as_f64(), s["color"].clone()),
        (Some(200.0), json!("blue"))
    );
    assert_eq!(shape(&client, "person")["x"].as_f64(), Some(900.0));
    // The fairy's ledger still holds the shape: taking the request back removes it.
    client
        .until("the fairy idle", |c| {
            fairy_presence(c, &id).is_some_and(|p| p["fairy"]["mode"] == json!("idling"))
        })
        .await;
    let (status, body) = post(
        &format!("{http}/rooms/stream-kept/fairies/{id}/requests/{request}/revert"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"reverted": 1, "kept": 0}));
    client
        .until("the box taken back", |c| shapes(c).get("kept").is_none())
        .await;
    assert_eq!(shape(&client, "person")["x"].as_f64(), Some(900.0));
    client.close().await;
    server.shutdown().await;
}
