//! What a fairy's model request costs (docs/fairies.md "What the model sees", docs/llm.md
//! "Prompt caching"), measured on the request body the mock model receives through the real
//! server: a first request on an empty canvas is at most 12 KB and at least 90 % of it is a
//! prefix of the same fairy's next request; 1,000 small shapes in view make at most 40 KB and
//! every one of them is listed or counted in a cluster; on Anthropic, a follow-up turn sends at
//! most 4 KB beside what the previous turn added outside the prefixes it cached.

use crate::support;

use fairyring::canvas::format::{ShapeBase, from_simple};
use fairyring::canvas::shape::write_shape;
use fairyring::config::{LlmProvider, LlmVision};
use fairyring::llm::mock::MockServer;
use serde_json::{Value, json};
use support::Client;
use support::fairy_http::*;

const DONE: &str = r#"{"actions": [{"_type": "message", "text": "ok"}]}"#;

/// The bounds the issue measured with.
fn view() -> Value {
    json!({"x": 0, "y": 0, "w": 1200, "h": 800})
}

async fn prompt_in_view(http: &str, room: &str, id: &str, message: &str) {
    let (status, body) = post(
        &format!("{http}/rooms/{room}/fairies/{id}/prompt"),
        json!({"message": message, "bounds": view()}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
}

/// The n-th request's body as it went over the wire (compact JSON).
fn body_text(mock: &MockServer, n: usize) -> String {
    mock.requests()[n].body.to_string()
}

/// The JSON objects on the lines of the n-th request's context turn (OpenAI wire).
fn context_objects(mock: &MockServer, n: usize) -> Vec<Value> {
    let body = &mock.requests()[n].body;
    let text = body["messages"][1]["content"].as_str().unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(Value::is_object)
        .collect()
}

fn canvas_block(mock: &MockServer, n: usize) -> Value {
    context_objects(mock, n)
        .into_iter()
        .find(|o| o.get("blurryShapes").is_some())
        .expect("a canvas block")
}

/// Writes `n` rectangles of 24 × 24 on a 30 px grid from (0, 0), 40 to a row, and waits until
/// another client sees them.
async fn draw_grid(ws: &str, room: &str, n: usize) {
    let mut client = Client::connect(ws, room).await;
    let shapes: Vec<_> = (0..n)
        .map(|i| {
            from_simple(
                &json!({"_type": "rectangle", "shapeId": format!("s{i}"),
                        "x": (i % 40) * 30, "y": (i / 40) * 30, "w": 24, "h": 24}),
                &ShapeBase::default(),
            )
            .expect("shape")
        })
        .collect();
    client
        .edit(|txn| {
            for s in &shapes {
                write_shape(txn, s);
            }
        })
        .await;
    let mut observer = Client::connect(ws, room).await;
    observer
        .until("every shape at another client", |c| shapes_count(c) >= n)
        .await;
}

fn shapes_count(c: &Client) -> usize {
    shapes(c).as_object().map_or(0, |m| m.len())
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

/// The n-th request's prompt in the order the provider reads it: the structured-output
/// schema (OpenAI: "the structured output schema serves as a prefix to the system message"),
/// then each message's content.
fn prompt_text(mock: &MockServer, n: usize) -> String {
    let body = &mock.requests()[n].body;
    let mut text = body["response_format"].to_string();
    for m in body["messages"].as_array().into_iter().flatten() {
        text.push_str(&m["content"].to_string());
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_canvas_costs_at_most_12_kb_and_most_of_it_is_the_next_requests_prefix() {
    let mock = mock_server(vec![
        actions(vec![rect("box", 100, 100, 200, 100)]),
        ok(DONE),
    ])
    .await;
    let mut config = mock_config(&mock);
    config.llm_vision = LlmVision::Off;
    let (server, _ws, http) = start(config).await;
    let id = invite(&http, "lean", "Pip").await;
    let mut events = events(&http, "lean", &id).await;
    prompt_in_view(&http, "lean", &id, "draw a box").await;
    read_events(&mut events, "request-ended").await;
    prompt_in_view(&http, "lean", &id, "now say ok").await;
    wait_requests(&mock, 2).await;

    let first = body_text(&mock, 0);
    let (prompt, next) = (prompt_text(&mock, 0), prompt_text(&mock, 1));
    let shared = common_prefix(&prompt, &next);
    eprintln!(
        "empty canvas: first request {} bytes (system prompt {}, schema {}), {shared} of its {} prompt bytes a prefix of the next request's",
        first.len(),
        mock.requests()[0].body["messages"][0]["content"]
            .as_str()
            .map_or(0, str::len),
        mock.requests()[0].body["response_format"].to_string().len(),
        prompt.len(),
    );
    assert!(first.len() <= 12 * 1024, "{} bytes: {first}", first.len());
    let share = shared as f64 / prompt.len() as f64;
    assert!(share >= 0.9, "{:.1} % shared", share * 100.0);
    // The schema is compact: no indentation anywhere.
    assert!(
        mock.requests()[0].body["response_format"]["json_schema"]["schema"]["properties"]
            ["actions"]
            .is_object()
    );
    assert!(
        !first.contains("\\n  ") && !first.contains("\n  "),
        "{first}"
    );
    // Every call of the fairy goes to the same provider cache.
    let key = format!("fairy-{id}");
    assert_eq!(mock.requests()[0].body["prompt_cache_key"], json!(key));
    assert_eq!(mock.requests()[1].body["prompt_cache_key"], json!(key));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_shapes_in_view_cost_at_most_40_kb_and_all_are_accounted_for() {
    let mock = mock_server(vec![ok(DONE)]).await;
    let mut config = mock_config(&mock);
    config.llm_vision = LlmVision::Off;
    let (server, ws, http) = start(config).await;
    draw_grid(&ws, "crowd", 1000).await;
    let id = invite(&http, "crowd", "Pip").await;
    prompt_in_view(&http, "crowd", &id, "tidy this up").await;
    wait_requests(&mock, 1).await;

    let body = body_text(&mock, 0);
    eprintln!("1,000 shapes in view: {} bytes", body.len());
    assert!(body.len() <= 40 * 1024, "{} bytes", body.len());
    let canvas = canvas_block(&mock, 0);
    assert_eq!(canvas["shapesInBounds"], json!(1000));
    assert_eq!(
        canvas["blurryShapes"]["columns"],
        json!(["shapeId", "type", "x", "y", "w", "h", "text"])
    );
    let rows = canvas["blurryShapes"]["rows"].as_array().expect("rows");
    assert!(!rows.is_empty());
    let clustered: u64 = canvas["clustersInBounds"]["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r[4].as_u64())
        .sum();
    assert_eq!(rows.len() as u64 + clustered, 1000, "listed + clustered");
    // Listed nearest to the centre first: the shape at the middle of the view is listed.
    let centre_id = format!("s{}", (400 / 30) * 40 + 600 / 30);
    assert!(
        rows.iter().any(|r| r[0] == json!(centre_id)),
        "{centre_id} listed"
    );
    // Every listed id once, no key repeated per shape.
    let mut ids: Vec<&str> = rows.iter().filter_map(|r| r[0].as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), rows.len());
    assert!(!body.contains(r#"\"shapeId\":\"s1\""#), "no keyed shapes");
    // The system prompt tells how to read the tables and the clusters.
    let system = mock.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(system.contains("`clustersInBounds`"), "{system}");
    server.shutdown().await;
}

/// One content block of an Anthropic body, as its cache sees it: where it is and what it holds
/// (its `cache_control` aside), its bytes, and whether a breakpoint ends it.
#[derive(Debug, PartialEq)]
struct Block {
    key: String,
    bytes: usize,
    breakpoint: bool,
}

fn blocks(body: &Value) -> Vec<Block> {
    let mut out = Vec::new();
    let mut push = |place: String, block: &Value| {
        let mut plain = block.clone();
        let breakpoint = plain
            .as_object_mut()
            .and_then(|o| o.remove("cache_control"))
            .is_some();
        let bytes = plain["text"].as_str().map_or_else(
            || plain["source"]["data"].as_str().map_or(0, str::len),
            str::len,
        );
        out.push(Block {
            key: format!("{place}:{plain}"),
            bytes,
            breakpoint,
        });
    };
    for b in body["system"].as_array().into_iter().flatten() {
        push("system".into(), b);
    }
    for (i, m) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for b in m["content"].as_array().into_iter().flatten() {
            push(format!("{i}/{}", m["role"]), b);
        }
    }
    out
}

/// Bytes of `next` outside every prefix `previous` cached: after the longest run of blocks
/// both share that ends on one of `previous`'s breakpoints (and lies within the 20 blocks
/// Anthropic looks back from one of `next`'s breakpoints).
fn uncached_bytes(previous: &[Block], next: &[Block]) -> usize {
    let same = previous
        .iter()
        .zip(next)
        .take_while(|(a, b)| a.key == b.key)
        .count();
    let cached = (0..same)
        .rev()
        .find(|&i| {
            previous[i].breakpoint
                && next
                    .iter()
                    .enumerate()
                    .any(|(j, b)| b.breakpoint && j >= i && j - i <= 20)
        })
        .map_or(0, |i| i + 1);
    next[cached..].iter().map(|b| b.bytes).sum()
}

/// Bytes of the history items (`- {…}` lines) in a body's first user turn.
fn history_bytes(body: &Value) -> usize {
    body["messages"][0]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .flat_map(str::lines)
        .filter(|l| l.starts_with("- {"))
        .map(|l| l.len() + 1)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_follow_up_turn_sends_little_outside_its_cached_prefixes() {
    // Turn 1 draws three boxes and leaves a todo item open (so a turn 2 follows); turn 2
    // closes it.
    let mock = mock_server(vec![
        ok(DONE),
        actions(vec![
            json!({"_type": "upsert-personal-todo", "id": "t1", "text": "three boxes", "status": "todo"}),
            rect("a", 100, 100, 80, 60),
            rect("b", 200, 100, 80, 60),
            rect("c", 300, 100, 80, 60),
        ]),
        actions(vec![
            json!({"_type": "upsert-personal-todo", "id": "t1", "text": "three boxes", "status": "done"}),
            json!({"_type": "message", "text": "done"}),
        ]),
        ok(DONE),
    ])
    .await;
    let mut config = mock_config(&mock);
    config.llm = LlmProvider::Anthropic;
    config.llm_model = Some("claude-sonnet-4-5".into());
    config.llm_vision = LlmVision::Off;
    let (server, ws, http) = start(config).await;
    draw_grid(&ws, "cached", 40).await;
    let id = invite(&http, "cached", "Pip").await;
    let mut events = events(&http, "cached", &id).await;
    // An earlier request, so the history is not empty.
    prompt_in_view(&http, "cached", &id, "hello").await;
    read_events(&mut events, "request-ended").await;
    let before = mock.requests().len();
    prompt_in_view(&http, "cached", &id, "draw three boxes").await;
    wait_requests(&mock, before + 2).await;

    let requests = mock.requests();
    let (turn1, turn2) = (&requests[before].body, &requests[before + 1].body);
    assert_eq!(requests[before].path, "/v1/messages");
    let marked = blocks(turn1).iter().filter(|b| b.breakpoint).count();
    assert!((2..=4).contains(&marked), "{marked} breakpoints: {turn1}");
    let uncached = uncached_bytes(&blocks(turn1), &blocks(turn2));
    let added = history_bytes(turn2).saturating_sub(history_bytes(turn1));
    eprintln!(
        "anthropic follow-up turn: {uncached} bytes outside the cached prefixes, {added} of them the previous turn's history"
    );
    assert!(added > 0, "turn 1 added to the history");
    assert!(
        uncached <= 4096 + added,
        "{uncached} bytes uncached, {added} added by turn 1"
    );
    server.shutdown().await;
}
