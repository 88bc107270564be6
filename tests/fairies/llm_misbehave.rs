//! Models that misbehave, end to end (real server, yrs client, mock model over HTTP): an inline
//! `<think>` block holding JSON is skipped; a context overflow is recovered (compaction, then
//! retry) or reported (chat message and `error` event); failover retries and token usage are
//! told on the event stream; and the model stream is dropped as soon as the actions array
//! closed or broke (the mock sees the client leave early), its usage then estimated rather than
//! lost; a turn ends at its action and time caps (`--fairy-turn-max-actions`, `-secs`).

use crate::support;

use std::time::Duration;

use fairyring::llm::Usage;
use fairyring::llm::mock::{Fault, MockResponse, MockServer};
use serde_json::{Value, json};
use support::Client;
use support::fairy_http::*;

const DONE: &str = r#"{"actions": [{"_type": "message", "text": "ok"}]}"#;

fn rectangle(id: &str) -> String {
    format!(
        r#"{{"actions": [{{"_type": "create", "intent": "a box", "shape": {{"_type": "rectangle", "shapeId": "{id}", "x": 0, "y": 0, "w": 80, "h": 40, "color": "red", "note": ""}}}}]}}"#
    )
}

fn overflow() -> MockResponse {
    MockResponse {
        fault: Some(Fault::Http {
            status: 400,
            body: r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9001 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#.into(),
            retry_after: None,
        }),
        ..MockResponse::default()
    }
}

/// Starts a server on `responses`, invites a fairy into `room`, subscribes to its events and
/// prompts it; returns what the test needs.
async fn prompted(
    room: &str,
    responses: Vec<MockResponse>,
) -> (
    MockServer,
    fairyring::server::ServerHandle,
    Client,
    String,
    reqwest::Response,
) {
    prompted_with(room, responses, |_| {}).await
}

/// [`prompted`] with the server's configuration changed by `tweak`.
async fn prompted_with(
    room: &str,
    responses: Vec<MockResponse>,
    tweak: impl FnOnce(&mut fairyring::config::ServeConfig),
) -> (
    MockServer,
    fairyring::server::ServerHandle,
    Client,
    String,
    reqwest::Response,
) {
    let mock = mock_server(responses).await;
    let mut config = mock_config(&mock);
    tweak(&mut config);
    let (server, ws, http) = start(config).await;
    let client = Client::connect(&ws, room).await;
    let id = invite(&http, room, "Sorrel").await;
    let events = events(&http, room, &id).await;
    prompt(&http, room, &id, "a box").await;
    (mock, server, client, id, events)
}

/// The data of every SSE event named `name`.
fn events_named(seen: &str, name: &str) -> Vec<Value> {
    seen.split("\n\n")
        .filter(|block| block.lines().any(|l| l == format!("event: {name}")))
        .filter_map(|block| {
            let data = block.lines().find_map(|l| l.strip_prefix("data: "))?;
            serde_json::from_str(data).ok()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_think_block_holding_actions_is_skipped() {
    let text = format!(
        "<think>The user wants a box. I could answer {}, or maybe {{\"x\": 1}}... no, red.</think>\n\n{}",
        rectangle("decoy"),
        rectangle("real")
    );
    // Three characters per event: both tags arrive split across chunks.
    let thinking = MockResponse {
        text,
        delta_chars: 3,
        ..MockResponse::default()
    };
    let (_mock, server, mut client, _id, mut events) =
        prompted("think", vec![thinking, ok(DONE)]).await;
    let seen = read_events(&mut events, "event: request-ended").await;
    client
        .until("the real box", |c| {
            shapes(c)["real"]["locked"] == json!(false)
        })
        .await;
    assert!(
        shapes(&client).get("decoy").is_none(),
        "{}",
        shapes(&client)
    );
    assert!(!seen.contains("decoy"), "the think block leaked: {seen}");
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_overflow_is_compacted_and_retried() {
    let (mock, server, mut client, id, mut events) = prompted(
        "overflow-ok",
        vec![overflow(), ok(&rectangle("fits")), ok(DONE)],
    )
    .await;
    let seen = read_events(&mut events, "event: request-ended").await;
    client
        .until("the box", |c| shapes(c)["fits"]["locked"] == json!(false))
        .await;
    let compactions = events_named(&seen, "compaction");
    assert!(
        compactions
            .iter()
            .any(|c| c["reason"] == json!("context-overflow")),
        "{seen}"
    );
    assert!(events_named(&seen, "error").is_empty(), "{seen}");
    assert!(
        seen.contains(r#""reason":"done""#),
        "the request succeeded: {seen}"
    );
    assert!(
        chat_texts(&client, &id)
            .iter()
            .all(|t| !t.contains("Sorry")),
        "{:?}",
        chat_texts(&client, &id)
    );
    assert!(mock.requests().len() >= 2);
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_overflow_that_persists_is_reported() {
    let (mock, server, mut client, id, mut events) =
        prompted("overflow-bad", vec![overflow()]).await;
    let seen = read_events(&mut events, "event: request-ended").await;
    let errors = events_named(&seen, "error");
    assert_eq!(errors.len(), 1, "{seen}");
    assert!(
        errors[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("context")),
        "{seen}"
    );
    let levels: Vec<Value> = events_named(&seen, "compaction")
        .iter()
        .map(|c| c["level"].clone())
        .collect();
    assert!(levels.contains(&json!("truncate")), "{seen}");
    assert!(seen.contains(r#""reason":"error""#), "{seen}");
    client
        .until("the chat says why", |c| {
            chat_texts(c, &id)
                .iter()
                .any(|t| t.contains("no longer fits"))
        })
        .await;
    // The first call, then one retry per recovery level (the fresh fairy has nothing older to
    // summarise, so that level goes straight on to truncation).
    assert_eq!(mock.requests().len(), 2, "{:?}", mock.requests().len());
    // A refused call counts what the provider reported (nothing), not an estimate of its prompt.
    let usage = events_named(&seen, "usage");
    assert!(!usage.is_empty(), "{seen}");
    for u in &usage {
        assert_eq!(
            (&u["inputTokens"], &u["estimated"]),
            (&json!(0), &json!(false)),
            "{seen}"
        );
    }
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_and_usage_are_events() {
    let refused = MockResponse {
        fault: Some(Fault::Http {
            status: 503,
            body: r#"{"error":{"message":"busy"}}"#.into(),
            retry_after: Some("0".into()),
        }),
        ..MockResponse::default()
    };
    let counted = MockResponse {
        usage: Usage {
            input_tokens: 321,
            output_tokens: 12,
            ..Usage::default()
        },
        ..ok(DONE)
    };
    let (_mock, server, client, _id, mut events) = prompted("usage", vec![refused, counted]).await;
    let seen = read_events(&mut events, "event: request-ended").await;
    let retries = events_named(&seen, "retry");
    assert_eq!(retries.len(), 1, "{seen}");
    assert_eq!(retries[0]["attempt"], json!(2));
    assert!(
        retries[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("503")),
        "{seen}"
    );
    let usage = events_named(&seen, "usage");
    assert!(
        usage.iter().any(|u| u["inputTokens"] == json!(321)
            && u["outputTokens"] == json!(12)
            && u["attempts"] == json!(2)
            && u["purpose"] == json!("turn")),
        "{seen}"
    );
    client.close().await;
    server.shutdown().await;
}

/// A response whose actions end early, followed by a long tail streamed slowly.
fn with_slow_tail(head: &str) -> MockResponse {
    MockResponse {
        text: format!("{head}{}", " and then a lot more prose".repeat(200)),
        delta_chars: 20,
        chunk_size: 256,
        delay_ms: 5,
        ..MockResponse::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_stream_is_dropped_once_the_actions_closed_or_broke() {
    let closed = with_slow_tail(&rectangle("early"));
    let broken = with_slow_tail(
        r#"{"actions": [{"_type": "message", "text": "hi"}, {"_type": "create", "shape": tru"#,
    );
    let (mock, server, mut client, _id, mut events) =
        prompted("early", vec![broken, closed, ok(DONE)]).await;
    let seen = read_events(&mut events, "event: request-ended").await;
    client
        .until("the box", |c| shapes(c)["early"]["locked"] == json!(false))
        .await;
    assert!(
        mock.wait_disconnects(2, Duration::from_secs(5)).await,
        "disconnects: {}, completed: {} ({seen})",
        mock.disconnects(),
        mock.completed()
    );
    // What another process would see too.
    let stats: Value = reqwest::get(format!("{}/_mock/stats", mock.base_url()))
        .await
        .expect("stats")
        .json()
        .await
        .expect("json");
    assert!(stats["disconnects"].as_u64() >= Some(2), "{stats}");
    // The broken answer earns a correction and a follow-up turn, which gets the closed one.
    assert!(mock.requests().len() >= 2, "{}", mock.requests().len());
    let second = mock.requests()[1].body.to_string();
    assert!(second.contains("JSON was invalid"), "{second}");
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_overflow_first_summarises_the_older_history() {
    let summary = "Earlier the user asked for a box and I drew box 'first'.";
    let mock = mock_server(vec![
        ok(&rectangle("first")),
        overflow(),
        ok(summary),
        ok(&rectangle("second")),
        ok(DONE),
    ])
    .await;
    let mut config = mock_config(&mock);
    // Small enough that the first request's items are "older history" after an overflow, large
    // enough that the budget alone does not summarise them.
    config.fairy_history_chars = 1000;
    let (server, ws, http) = start(config).await;
    let mut client = Client::connect(&ws, "overflow-summary").await;
    let id = invite(&http, "overflow-summary", "Yarrow").await;
    // The first request's end, from the event stream: the fairy's awareness may still read
    // `idling` from before that request when its box arrives.
    let mut events = events(&http, "overflow-summary", &id).await;
    prompt(&http, "overflow-summary", &id, "a box").await;
    read_events(&mut events, "event: request-ended").await;
    client
        .until("the first box, the fairy idle", |c| {
            shapes(c)["first"]["locked"] == json!(false)
                && fairy_presence(c, &id).is_some_and(|p| p["fairy"]["mode"] == json!("idling"))
        })
        .await;
    let before = mock.requests().len();
    prompt(&http, "overflow-summary", &id, "another box").await;
    let seen = read_events(&mut events, "event: request-ended").await;
    client
        .until("the second box", |c| {
            shapes(c)["second"]["locked"] == json!(false)
        })
        .await;
    let compactions = events_named(&seen, "compaction");
    assert!(
        compactions.iter().any(|c| c["level"] == json!("summary")
            && c["reason"] == json!("context-overflow")
            && c["items"].as_u64().is_some_and(|n| n >= 1)),
        "{seen}"
    );
    assert!(
        !compactions.iter().any(|c| c["level"] == json!("truncate")),
        "the first level was enough: {seen}"
    );
    assert!(
        events_named(&seen, "usage")
            .iter()
            .any(|u| u["purpose"] == json!("summary")),
        "{seen}"
    );
    // The overflowing call, the summary, the retried call.
    assert!(mock.requests().len() >= before + 3);
    let history = history(&http, "overflow-summary", &id).await.to_string();
    assert!(history.contains(summary), "{history}");
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_before_its_usage_report_is_counted_by_estimate() {
    // The OpenAI-compatible usage comes in the last chunk, which the dropped stream never
    // reads (issue 45: a slow model's report came after the tail wait).
    let head = rectangle("counted");
    let cut = MockResponse {
        usage: Usage {
            input_tokens: 4000,
            output_tokens: 900,
            ..Usage::default()
        },
        ..with_slow_tail(&head)
    };
    let mock = mock_server(vec![cut, ok(DONE)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "estimate").await;
    let id = invite(&http, "estimate", "Sorrel").await;
    let mut events = events(&http, "estimate", &id).await;
    prompt(&http, "estimate", &id, "a box").await;
    let seen = read_events(&mut events, "event: request-ended").await;
    assert!(
        mock.wait_disconnects(1, Duration::from_secs(5)).await,
        "{seen}"
    );
    let usage = events_named(&seen, "usage");
    let [first] = &usage[..] else {
        panic!("one call's usage: {seen}");
    };
    let output = first["outputTokens"].as_u64().unwrap_or(0);
    let input = first["inputTokens"].as_u64().unwrap_or(0);
    // At 3 characters a token: the answer's head and the tail read after it.
    assert!(output as usize >= head.len() / 3, "{first}");
    assert!(output < 900, "the report never arrived: {first}");
    // The system prompt alone is thousands of characters.
    assert!(input > 1000, "{first}");
    // The event says so (a call that ends with its report says `false`: fairies_budget.rs).
    assert_eq!(first["estimated"], json!(true), "{first}");

    // The budgets and `/usage` count what the event says (the metering wrapper estimates the
    // dropped attempt by the same rule), and say how many calls were estimated.
    let answer: Value = reqwest::get(format!("{http}/rooms/estimate/usage"))
        .await
        .expect("usage")
        .json()
        .await
        .expect("json");
    let total = &answer["hour"]["total"];
    assert_eq!(total["calls"], json!(1), "{answer}");
    assert_eq!(total["estimatedCalls"], json!(1), "{answer}");
    assert_eq!(total["inputTokens"], first["inputTokens"], "{answer}");
    assert_eq!(total["outputTokens"], first["outputTokens"], "{answer}");

    // So does the request's chat item.
    client
        .until("the request's usage in the chat", |c| {
            root_json(c, "fairies")[&id]["chat"]
                .as_array()
                .and_then(|a| a.last().cloned())
                .is_some_and(|last| last["usage"]["estimated"] == json!(true))
        })
        .await;
    client.close().await;
    server.shutdown().await;
}

/// `n` complete rectangles `b0`, `b1` … in one answer.
fn rectangles(n: usize) -> String {
    let shapes: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"_type": "create", "intent": "a box", "shape": {{"_type": "rectangle", "shapeId": "b{i}", "x": {}, "y": 0, "w": 80, "h": 40, "color": "red", "note": ""}}}}"#,
                i * 100
            )
        })
        .collect();
    format!(r#"{{"actions": [{}]}}"#, shapes.join(", "))
}

/// The `reason` of the request's end.
fn end_reason(seen: &str) -> Value {
    events_named(seen, "request-ended")
        .first()
        .map(|e| e["reason"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_ends_at_its_action_cap() {
    let (mock, server, mut client, id, mut events) =
        prompted_with("action-cap", vec![ok(&rectangles(5)), ok(DONE)], |c| {
            c.fairy_turn_max_actions = 3;
        })
        .await;
    let seen = read_events(&mut events, "event: request-ended").await;
    assert_eq!(end_reason(&seen), json!("max-iterations"), "{seen}");
    client
        .until("the cap in the chat", |c| {
            chat_texts(c, &id)
                .iter()
                .any(|t| t.starts_with("I stopped: one answer went past the 3 actions"))
        })
        .await;
    let s = shapes(&client);
    for kept in ["b0", "b1", "b2"] {
        assert_eq!(s[kept]["locked"], json!(false), "{kept}: {s}");
    }
    assert!(s.get("b3").is_none() && s.get("b4").is_none(), "{s}");
    assert_eq!(locked_count(&client), 0);
    assert_eq!(mock.requests().len(), 1, "no turn after the cap");
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_ends_at_its_time_cap() {
    // About 15 s of streaming at this pace; the cap cuts it after 1 s.
    let slow = MockResponse {
        text: rectangles(40),
        delta_chars: 20,
        chunk_size: 64,
        delay_ms: 20,
        ..MockResponse::default()
    };
    let (mock, server, mut client, id, mut events) =
        prompted_with("time-cap", vec![slow, ok(DONE)], |c| {
            c.fairy_turn_max_secs = 1;
        })
        .await;
    let seen = read_events(&mut events, "event: request-ended").await;
    assert_eq!(end_reason(&seen), json!("max-iterations"), "{seen}");
    assert!(
        mock.wait_disconnects(1, Duration::from_secs(5)).await,
        "{seen}"
    );
    client
        .until("the cap in the chat", |c| {
            chat_texts(c, &id)
                .iter()
                .any(|t| t.starts_with("I stopped: one answer streamed for longer than the 1 s"))
        })
        .await;
    assert!(shapes(&client).get("b39").is_none());
    assert_eq!(locked_count(&client), 0);
    assert_eq!(mock.requests().len(), 1, "no turn after the cap");
    client.close().await;
    server.shutdown().await;
}
