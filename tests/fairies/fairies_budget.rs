//! Money and budgets (docs/fairies.md "Usage and budgets"), through the real server and the
//! mock model: each call's cost in its `usage` event; `GET /rooms/{room}/usage` per fairy,
//! person and project; a person's daily budget refusing a prompt with `429 budget_exhausted`
//! (`budget`, `retryAfter`) before anything of it is written, and ending a request that spent
//! it mid-way before its next model call, with a chat message and nothing of a refused turn
//! applied; the same for a project's budget, which ends (aborts) the project.

use crate::support;

use fairyring::llm::Usage;
use fairyring::llm::mock::MockResponse;
use serde_json::{Value, json};
use support::Client;
use support::fairy_http::*;

/// An answer that reports `usage`.
fn costing(text: &str, usage: Usage) -> MockResponse {
    MockResponse { usage, ..ok(text) }
}

fn used(input: u64, output: u64, cached: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_input_tokens: cached,
        cache_creation_input_tokens: 0,
    }
}

const DONE: &str = r#"{"actions": [{"_type": "message", "text": "ok"}]}"#;

async fn usage_of(http: &str, room: &str) -> Value {
    reqwest::get(format!("{http}/rooms/{room}/usage"))
        .await
        .expect("usage")
        .json()
        .await
        .expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_call_is_priced_in_its_event_and_the_rooms_usage() {
    let mock = mock_server(vec![costing(DONE, used(1000, 100, 5000))]).await;
    let mut config = mock_config(&mock);
    // The mock answers any model name; this one has a built-in price.
    config.llm_model = Some("gpt-4.1-mini".into());
    let (server, ws, http) = start(config).await;
    let mut client = Client::connect(&ws, "priced").await;
    let id = invite(&http, "priced", "Pip").await;
    let mut events = events(&http, "priced", &id).await;
    prompt(&http, "priced", &id, "say ok").await;
    let seen = read_events(&mut events, "request-ended").await;
    // 1,000 input at $0.40, 5,000 cached at $0.10, 100 output at $1.60 per million.
    let expected = (1000.0 * 0.4 + 5000.0 * 0.1 + 100.0 * 1.6) / 1e6;
    let usage_event: Value = seen
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|v| v["type"] == json!("usage"))
        .expect("a usage event");
    assert_eq!(usage_event["cacheReadInputTokens"], json!(5000));
    assert_eq!(
        usage_event["estimated"],
        json!(false),
        "the stream ended with its report"
    );
    let cost = usage_event["costUsd"].as_f64().expect("costUsd");
    assert!((cost - expected).abs() < 1e-12, "{cost}");

    let usage = usage_of(&http, "priced").await;
    for window in ["hour", "day"] {
        let total = &usage[window]["total"];
        assert_eq!(total["calls"], json!(1), "{usage}");
        assert_eq!(total["inputTokens"], json!(1000));
        assert_eq!(total["cacheReadInputTokens"], json!(5000));
        assert_eq!(total["estimatedCalls"], json!(0));
        assert!((total["costUsd"].as_f64().unwrap_or(0.0) - expected).abs() < 1e-12);
        assert_eq!(usage[window]["fairies"][&id]["outputTokens"], json!(100));
        // The test server runs without auth: the prompting person is `anonymous`.
        assert_eq!(usage[window]["people"]["anonymous"]["calls"], json!(1));
    }
    assert_eq!(usage["you"]["calls"], json!(1));
    assert_eq!(usage["budgets"]["roomPerHour"], json!(1_000_000));

    // The request's last chat item (the fairy's "ok") carries what the request used, with the
    // names of the `/usage` totals, for every browser's chat.
    let chat_of = |c: &Client| root_json(c, "fairies")[&id]["chat"].clone();
    client
        .until("the usage on the request's last chat item", |c| {
            chat_of(c)
                .as_array()
                .and_then(|a| a.last().cloned())
                .is_some_and(|last| last["usage"].is_object())
        })
        .await;
    let chat = chat_of(&client).as_array().cloned().unwrap_or_default();
    let last = chat.last().expect("an item");
    assert_eq!(last["role"], json!("fairy"), "{chat:?}");
    assert_eq!(last["text"], json!("ok"));
    let u = &last["usage"];
    let n = |k: &str| u[k].as_f64().unwrap_or(-1.0);
    assert_eq!(n("calls"), 1.0, "{u}");
    assert_eq!(n("inputTokens"), 1000.0);
    assert_eq!(n("outputTokens"), 100.0);
    assert_eq!(n("cacheReadInputTokens"), 5000.0);
    assert_eq!(n("cacheCreationInputTokens"), 0.0);
    assert!((n("costUsd") - expected).abs() < 1e-12, "{u}");
    assert_eq!(u["estimated"], json!(false), "{u}");
    // The person's prompt of the same request carries none.
    assert!(chat[0]["usage"].is_null(), "{chat:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_person_budget_refuses_the_prompt_before_anything_is_written() {
    let mock = mock_server(vec![costing(DONE, used(900, 200, 0))]).await;
    let mut config = mock_config(&mock);
    config.fairy_token_budget_person = 1000;
    let (server, ws, http) = start(config).await;
    let id = invite(&http, "spent", "Pip").await;
    let mut events = events(&http, "spent", &id).await;
    prompt(&http, "spent", &id, "say ok").await;
    read_events(&mut events, "request-ended").await;
    // 1,100 tokens of a 1,000-token day: the next prompt is refused.
    let (status, body) = post(
        &format!("{http}/rooms/spent/fairies/{id}/prompt"),
        json!({"message": "again"}),
    )
    .await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"], json!("budget_exhausted"));
    assert_eq!(body["budget"], json!("person"));
    let retry = body["retryAfter"].as_u64().expect("retryAfter");
    // 100 tokens of debt plus one, at 1,000 tokens a day.
    assert!((8700..=8800).contains(&retry), "{retry}");
    // Nothing of the refused prompt: no chat item, no model call.
    let mut client = Client::connect(&ws, "spent").await;
    client
        .until("the fairy's chat", |c| chat_texts(c, &id).len() >= 2)
        .await;
    let chat = chat_texts(&client, &id);
    assert!(!chat.iter().any(|t| t == "again"), "{chat:?}");
    assert_eq!(mock.requests().len(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_spends_the_budget_ends_before_its_next_call() {
    // Turn 1 draws a box and opens a todo item, so a turn 2 would follow; it spends the
    // person's whole day.
    let turn1 = json!({"actions": [
        {"_type": "upsert-personal-todo", "id": "t1", "text": "two boxes", "status": "todo"},
        {"_type": "create", "intent": "a", "shape": {"_type": "rectangle", "shapeId": "a", "note": "", "x": 0, "y": 0, "w": 50, "h": 50}},
    ]});
    let turn2 = json!({"actions": [
        {"_type": "create", "intent": "b", "shape": {"_type": "rectangle", "shapeId": "b", "note": "", "x": 100, "y": 0, "w": 50, "h": 50}},
    ]});
    let mock = mock_server(vec![
        costing(&turn1.to_string(), used(5000, 100, 0)),
        ok(&turn2.to_string()),
    ])
    .await;
    let mut config = mock_config(&mock);
    config.fairy_token_budget_person = 1000;
    let (server, ws, http) = start(config).await;
    let id = invite(&http, "midway", "Pip").await;
    let mut events = events(&http, "midway", &id).await;
    prompt(&http, "midway", &id, "two boxes").await;
    let seen = read_events(&mut events, "request-ended").await;
    assert!(seen.contains("\"reason\":\"error\""), "{seen}");
    let mut client = Client::connect(&ws, "midway").await;
    client
        .until("the fairy's message", |c| {
            chat_texts(c, &id)
                .iter()
                .any(|t| t.starts_with("I stopped: you have used your model-token budget"))
        })
        .await;
    // The second call was never made: box `b` is nowhere, `a` stays, and the refused call
    // counts nothing (no estimate of a prompt that was never sent).
    assert_eq!(mock.requests().len(), 1);
    let input: Vec<u64> = seen
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter(|v| v["type"] == json!("usage"))
        .map(|v| v["inputTokens"].as_u64().unwrap_or(u64::MAX))
        .collect();
    assert_eq!(input.iter().sum::<u64>(), 5000, "{seen}");
    assert_eq!(
        usage_of(&http, "midway").await["day"]["total"]["inputTokens"],
        json!(5000)
    );
    let shapes = shapes(&client);
    assert!(shapes.get("b").is_none(), "{shapes}");
    assert!(shapes.get("a").is_some(), "{shapes}");
    assert_eq!(locked_count(&client), 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_that_spends_its_budget_ends_before_its_next_call() {
    // The project's budget (`--fairy-token-budget-project`, per project per day). A duo: the
    // leader's first turn plans two tasks and starts its own (so its next call would draw
    // `left`); that turn spends the project's whole day. Its partner is only standing by, so
    // the leader's next call is the first one after the spend.
    let mock = mock_server(vec![ok(r#"{"actions": []}"#)]).await;
    let mut config = mock_config(&mock);
    config.fairy_token_budget_project = 1000;
    let (server, ws, http) = start(config).await;
    let room = "projectspent";
    let mut client = Client::connect(&ws, room).await;
    let lead = invite(&http, room, "Lark").await;
    let pal = invite(&http, room, "Pell").await;
    let plan = actions(vec![
        json!({"_type": "start-duo-project", "title": "Two boxes", "description": "", "plan": "one each"}),
        json!({"_type": "create-duo-task", "taskId": "a", "title": "left box", "text": "a box", "x": 0, "y": 0, "w": 300, "h": 300}),
        json!({"_type": "create-duo-task", "taskId": "b", "title": "right box", "text": "a box", "x": 400, "y": 0, "w": 300, "h": 300}),
        json!({"_type": "start-duo-task", "taskId": "a"}),
    ]);
    mock.add_route(route(
        "Lark",
        "duo-orchestrating-active",
        vec![MockResponse {
            usage: used(5000, 100, 0),
            ..plan
        }],
    ));
    mock.add_route(route(
        "Lark",
        "working-orchestrator",
        vec![actions(vec![
            rect("left", 20, 20, 100, 100),
            json!({"_type": "mark-duo-task-done"}),
        ])],
    ));
    let mut events = events(&http, room, &lead).await;
    let (status, started) = post(
        &format!("{http}/rooms/{room}/group-prompt"),
        json!({"message": "two boxes", "fairyIds": [lead, pal],
               "bounds": {"x": 0, "y": 0, "w": 800, "h": 400}}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let project = started["projectId"].as_str().expect("projectId").to_owned();
    let seen = read_events(&mut events, "request-ended").await;
    assert!(seen.contains("\"reason\":\"error\""), "{seen}");
    client
        .until("the leader's message", |c| {
            chat_texts(c, &lead)
                .iter()
                .any(|t| t.starts_with("I stopped: this project has used its model-token budget"))
        })
        .await;
    // The second call was never made: the planned task is there, `left` is nowhere.
    assert_eq!(mock.requests().len(), 1);
    let tasks = root_json(&client, "tasks");
    assert!(tasks.get(format!("{project}/a")).is_some(), "{tasks}");
    let shapes = shapes(&client);
    assert!(shapes.get("left").is_none(), "{shapes}");
    assert_eq!(locked_count(&client), 0);
    // The project ends with its leader's request: aborted, the partner never called.
    client
        .until("the project aborted", |c| {
            root_json(c, "projects")[&project]["status"] == json!("aborted")
        })
        .await;
    assert_eq!(mock.requests().len(), 1);
    client.close().await;
    server.shutdown().await;
}
