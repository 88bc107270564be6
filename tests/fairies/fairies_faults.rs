//! Model faults during a fairy's request (mock model server over HTTP, real server, yrs
//! client): whatever fails, the document ends exactly as if only the completed actions had
//! been applied, once; no shape stays locked.

use crate::support;

use fairyring::llm::mock::{Fault, MockResponse, MockScript, MockServer};
use serde_json::json;
use support::Client;
use support::fairy_http::*;

const TWO: &str = r#"{"actions": [{"_type": "create", "intent": "a", "shape": {"_type": "rectangle", "shapeId": "a", "note": "", "x": 0, "y": 0, "w": 50, "h": 50}}, {"_type": "create", "intent": "b", "shape": {"_type": "rectangle", "shapeId": "b", "note": "", "x": 100, "y": 0, "w": 50, "h": 50, "text": "a long label for b so that it streams for a while"}}, {"_type": "message", "text": "ok"}]}"#;

/// Characters of [`TWO`] up to the middle of its second action (the first is complete).
fn mid_second() -> usize {
    TWO.find("a long label").unwrap_or(0)
}

fn full() -> MockResponse {
    slow(TWO)
}

fn faulty(fault: Fault) -> MockResponse {
    MockResponse {
        fault: Some(fault),
        ..slow(TWO)
    }
}

/// Runs "two boxes" against `responses`; returns the client once `done` holds.
async fn scenario(
    room: &str,
    responses: Vec<MockResponse>,
    mut done: impl FnMut(&Client, &str) -> bool,
) -> (Client, MockServer, String) {
    let mock = MockServer::start(MockScript { responses })
        .await
        .expect("mock");
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, room).await;
    let id = invite(&http, room, "Pip").await;
    prompt(&http, room, &id, "two boxes").await;
    client
        .until("the request to end", |c| {
            done(c, &id)
                && fairy_presence(c, &id).is_some_and(|p| p["fairy"]["mode"] == json!("idling"))
        })
        .await;
    server.shutdown().await;
    (client, mock, id)
}

fn keys(c: &Client) -> Vec<String> {
    let mut k: Vec<String> = shapes(c)
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    k.sort();
    k
}

fn said(c: &Client, id: &str, text: &str) -> bool {
    chat_texts(c, id).iter().any(|t| t.contains(text))
}

async fn assert_recovers(room: &str, first: MockResponse) {
    let (client, mock, id) = scenario(room, vec![first, full()], |c, id| {
        let s = shapes(c);
        s["b"]["locked"] == json!(false) && said(c, id, "ok")
    })
    .await;
    assert_eq!(
        keys(&client),
        ["a", "b"],
        "{room}: each action applied once"
    );
    assert_eq!(locked_count(&client), 0);
    assert_eq!(
        chat_texts(&client, &id)
            .iter()
            .filter(|t| *t == "ok")
            .count(),
        1
    );
    assert!(mock.requests().len() >= 2, "{room}: retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_then_success() {
    assert_recovers(
        "rate-limited",
        faulty(Fault::Http {
            status: 429,
            body: r#"{"error": {"message": "slow down"}}"#.into(),
            retry_after: Some("0".into()),
        }),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_event_mid_stream_then_success() {
    assert_recovers(
        "error-event",
        faulty(Fault::ErrorEvent {
            after_chars: mid_second(),
            error_type: "overloaded_error".into(),
            message: "Overloaded".into(),
        }),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_connection_then_success() {
    assert_recovers(
        "cut",
        faulty(Fault::Cut {
            after_chars: mid_second(),
        }),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_lines_are_ignored() {
    let (client, _mock, id) = scenario("garbage", vec![faulty(Fault::Garbage)], |c, id| {
        shapes(c)["b"]["locked"] == json!(false) && said(c, id, "ok")
    })
    .await;
    assert_eq!(keys(&client), ["a", "b"]);
    assert!(chat_texts(&client, &id).contains(&"ok".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_exhausted_keep_only_the_completed_action() {
    let cut = || {
        faulty(Fault::Cut {
            after_chars: mid_second(),
        })
    };
    let (client, mock, id) = scenario("exhausted", vec![cut()], |c, id| {
        said(c, id, "could not finish")
    })
    .await;
    assert_eq!(keys(&client), ["a"], "only the completed action stays");
    assert_eq!(locked_count(&client), 0);
    assert!(
        chat_texts(&client, &id)
            .iter()
            .any(|t| t.contains("could not finish"))
    );
    assert_eq!(mock.requests().len(), 3, "first attempt and two retries");
}
