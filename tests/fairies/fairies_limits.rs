//! Bounds on fairies through real HTTP: the per-room cap (409 `too_many_fairies`), the
//! per-token rate on calls that start or stop work (429 `rate_limited` with `retry-after`),
//! the per-room hourly model-token budget (the request ends before its model call, with a
//! chat message and an `error` event, nothing applied), and request-body limits (413
//! `body_too_large`, 400 `invalid_json`, never axum's plain-text refusals).

use crate::support;

use std::time::Duration;

use fairyring::config::ServeConfig;
use fairyring::llm::Usage;
use fairyring::llm::mock::{MockResponse, MockScript, MockServer};
use serde_json::{Value, json};
use support::Client;
use support::fairy_http::*;

const SECRET: &str = "fairy-limits-secret-0123456789abcdef";

fn token(sub: &str) -> String {
    let now = fairyring::auth::unix_now();
    let claims = json!({
        "sub": sub, "exp": now + 3600, "rooms": ["*"], "scope": "read write fairies"
    });
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .expect("token")
}

async fn send(request: reqwest::RequestBuilder) -> (u16, reqwest::header::HeaderMap, Value) {
    let response = request.send().await.expect("request sent");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.expect("body");
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("status {status}: body is not JSON ({e}): {text:?}"));
    (status, headers, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_holds_at_most_max_fairies_per_room() {
    let mut config = ServeConfig::for_test();
    config.max_fairies_per_room = 3;
    let (server, _ws, http) = start(config).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(invite(&http, "crowd", &format!("F{i}")).await);
    }
    let (status, body) = post(&format!("{http}/rooms/crowd/fairies"), json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"], json!("too_many_fairies"));
    assert!(body["detail"].as_str().is_some_and(|d| d.contains('3')));
    // Another room has its own cap; a dismissal frees a place.
    invite(&http, "other", "Elsewhere").await;
    let dismissed = reqwest::Client::new()
        .delete(format!("{http}/rooms/crowd/fairies/{}", ids[0]))
        .send()
        .await
        .expect("dismiss");
    assert_eq!(dismissed.status().as_u16(), 204);
    invite(&http, "crowd", "Again").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_that_start_work_are_rate_limited_per_token() {
    let mut config = ServeConfig::for_test();
    config.jwt_secret = Some(SECRET.into());
    config.insecure_no_auth = false;
    config.fairy_api_rate_per_min = 4;
    let (server, _ws, http) = start(config).await;
    let client = reqwest::Client::new();
    let alice = token("alice");
    let invite_as = |t: &str| {
        client
            .post(format!("{http}/rooms/rate/fairies"))
            .bearer_auth(t)
            .json(&json!({}))
    };
    let (status, _, body) = send(invite_as(&alice)).await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().expect("id").to_owned();
    for _ in 0..2 {
        let (status, _, body) = send(
            client
                .post(format!("{http}/rooms/rate/fairies/{id}/prompt"))
                .bearer_auth(&alice)
                .json(&json!({"message": "hi"})),
        )
        .await;
        assert_eq!(status, 202, "{body}");
    }
    let (status, _, body) = send(
        client
            .post(format!("{http}/rooms/rate/fairies/{id}/cancel"))
            .bearer_auth(&alice),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    // The fifth call in the minute is refused, with a JSON error and `retry-after`.
    let (status, headers, body) = send(invite_as(&alice)).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"], json!("rate_limited"));
    let retry: u64 = headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("a retry-after header in seconds");
    assert!((1..=60).contains(&retry), "retry-after {retry}");
    // Reads are not limited, and another token has its own allowance.
    let (status, _, body) = send(
        client
            .get(format!("{http}/rooms/rate/fairies/{id}/history"))
            .bearer_auth(&alice),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = send(invite_as(&token("bob"))).await;
    assert_eq!(status, 201, "{body}");
    server.shutdown().await;
}

const BOX: &str = r#"{"actions": [{"_type": "upsert-personal-todo", "id": "t1", "text": "two boxes", "status": "todo"}, {"_type": "create", "intent": "a box", "shape": {"_type": "rectangle", "shapeId": "box1", "note": "", "x": 10, "y": 20, "w": 100, "h": 50, "color": "blue", "fill": "solid", "text": "", "textAlign": "middle"}}, {"_type": "message", "text": "Drew a box."}]}"#;
const BOX2: &str = r#"{"actions": [{"_type": "create", "intent": "another", "shape": {"_type": "rectangle", "shapeId": "box2", "note": "", "x": 300, "y": 20, "w": 100, "h": 50, "color": "red", "fill": "solid", "text": "", "textAlign": "middle"}}, {"_type": "message", "text": "Drew another."}]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_token_budget_ends_the_request_before_the_model_is_called() {
    let usage = Usage {
        input_tokens: 900,
        output_tokens: 200,
        ..Usage::default()
    };
    let mock = MockServer::start(MockScript {
        responses: vec![
            MockResponse {
                text: BOX.into(),
                usage,
                ..MockResponse::default()
            },
            MockResponse {
                text: BOX2.into(),
                usage,
                ..MockResponse::default()
            },
        ],
    })
    .await
    .expect("mock");
    let mut config = mock_config(&mock);
    config.fairy_token_budget = 1000;
    let (server, ws, http) = start(config).await;
    let mut client = Client::connect(&ws, "budget").await;
    let id = invite(&http, "budget", "Penny").await;
    let mut events = reqwest::get(format!("{http}/rooms/budget/fairies/{id}/events"))
        .await
        .expect("events");
    assert_eq!(events.status().as_u16(), 200);

    // The bucket is full: the request runs; its first turn costs more than the budget and
    // leaves a todo item open, so it wants another turn.
    prompt(&http, "budget", &id, "a box").await;
    client
        .until("box1 drawn", |c| {
            shapes(c)["box1"]["locked"] == json!(false)
        })
        .await;

    // The next turn ends before its model call: an error event, a chat message, nothing drawn.
    let second = read_events(&mut events, "event: request-ended").await;
    assert!(second.contains("event: error"), "{second}");
    assert!(second.contains("model-token budget"), "{second}");
    client
        .until("the budget message in the chat", |c| {
            chat_texts(c, &id).last().is_some_and(|t| {
                t.starts_with("I stopped: this room has used its model-token budget")
            })
        })
        .await;
    client.drain(Duration::from_millis(200)).await;
    assert_eq!(mock.requests().len(), 1, "the model was not called again");
    assert!(shapes(&client).get("box2").is_none());
    assert_eq!(locked_count(&client), 0);
    // A prompt that finds the budget spent is refused before anything of it is written.
    let (status, body) = post(
        &format!("{http}/rooms/budget/fairies/{id}/prompt"),
        json!({"message": "another box"}),
    )
    .await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"], json!("budget_exhausted"));
    assert_eq!(body["budget"], json!("room"));
    assert!(body["retryAfter"].as_u64().is_some_and(|s| s > 0), "{body}");
    client.drain(Duration::from_millis(200)).await;
    assert!(
        !chat_texts(&client, &id).iter().any(|t| t == "another box"),
        "nothing of the refused prompt is written"
    );
    assert_eq!(mock.requests().len(), 1);
    let history = history(&http, "budget", &id).await;
    assert_eq!(history["mode"], json!("idling"));
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_one_mib_are_413_and_bad_json_is_400_never_plain_text() {
    let (server, _ws, http) = start(ServeConfig::for_test()).await;
    let id = invite(&http, "bodies", "Bea").await;
    let client = reqwest::Client::new();
    let prompt_url = format!("{http}/rooms/bodies/fairies/{id}/prompt");

    // A 5 MB prompt: over the 1 MiB limit, so 413 whatever it holds.
    let huge = json!({"message": "x".repeat(5 * 1024 * 1024)}).to_string();
    let (status, _, body) = send(
        client
            .post(&prompt_url)
            .header("content-type", "application/json")
            .body(huge),
    )
    .await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"], json!("body_too_large"));
    // The same through the routes that read raw bytes (invite, cancel), and chunked (no
    // content-length), and on the dev-token route.
    let (status, _, body) = send(
        client
            .post(format!("{http}/rooms/bodies/fairies"))
            .body(vec![b' '; 2 * 1024 * 1024]),
    )
    .await;
    assert_eq!(
        (status, body["error"].clone()),
        (413, json!("body_too_large"))
    );
    let chunks =
        futures_util::stream::iter((0..40).map(|_| Ok::<_, std::io::Error>(vec![b' '; 64 * 1024])));
    let (status, _, body) = send(
        client
            .post(format!("{http}/rooms/bodies/fairies/{id}/cancel"))
            .body(reqwest::Body::wrap_stream(chunks)),
    )
    .await;
    assert_eq!(
        (status, body["error"].clone()),
        (413, json!("body_too_large"))
    );

    // Under the limit but not the JSON expected: 400 invalid_json.
    let (status, _, body) = send(
        client
            .post(&prompt_url)
            .header("content-type", "application/json")
            .body(format!("{{\"message\": \"{}", "y".repeat(500_000))),
    )
    .await;
    assert_eq!(
        (status, body["error"].clone()),
        (400, json!("invalid_json"))
    );
    let (status, _, body) = send(client.post(&prompt_url).body("{\"message\": \"hi\"}")).await;
    assert_eq!(
        (status, body["error"].clone()),
        (400, json!("invalid_json")),
        "no content-type"
    );
    // A method a route does not take: JSON too.
    let (status, _, body) = send(client.put(format!("{http}/rooms/bodies/fairies"))).await;
    assert_eq!(
        (status, body["error"].clone()),
        (405, json!("method_not_allowed"))
    );
    server.shutdown().await;
}
