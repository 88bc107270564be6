//! Fairy test helpers: the server with the offline or the mock model, the fairy HTTP API,
//! and what a yrs client sees of fairies (document roots, awareness).

use fairyring::config::{LlmProvider, ServeConfig};
use fairyring::llm::mock::{Fault, MockResponse, MockRoute, MockScript, MockServer};
use fairyring::server::ServerHandle;
use serde_json::{Value, json};
use yrs::Transact;
use yrs::types::ToJson;

use super::Client;
use super::server::TestServer;

/// A server from `config` ([`TestServer::start`]): its handle, `ws://` and `http://` bases.
pub async fn start(config: ServeConfig) -> (ServerHandle, String, String) {
    TestServer::start(config).await.into_parts()
}

/// The test config checking tokens (HS256, a fixed secret), and a minter of 10-minute tokens
/// for `alice` in every room with the given scope words (`"read fairies"`).
pub fn with_auth(mut config: ServeConfig) -> (ServeConfig, impl Fn(&str) -> String) {
    use fairyring::auth::{Authenticator, MintRequest, Scopes, unix_now};
    config.insecure_no_auth = false;
    config.jwt_secret = Some("a-test-secret-of-at-least-32-bytes!!".into());
    let auth = Authenticator::from_config(&config).expect("auth");
    let mint = move |scope: &str| {
        let request = MintRequest {
            sub: "alice".into(),
            name: None,
            rooms: vec!["*".into()],
            scope: Scopes::from_words(scope.split(' ')),
            ttl: std::time::Duration::from_secs(600),
        };
        auth.mint(request, unix_now()).expect("mint")
    };
    (config, mint)
}

pub fn mock_config(mock: &MockServer) -> ServeConfig {
    let mut config = ServeConfig::for_test();
    config.llm = LlmProvider::Openai;
    config.llm_base_url = Some(mock.base_url());
    config.llm_model = Some("mock".into());
    config.llm_max_retries = 2;
    // Show every streamed version, so that locked shapes are seen while streaming.
    config.fairy_apply_interval_ms = 0;
    config
}

pub async fn post(url: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .expect("request sent");
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body)
}

pub async fn invite(http: &str, room: &str, name: &str) -> String {
    let (status, body) = post(
        &format!("{http}/rooms/{room}/fairies"),
        json!({"name": name}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().expect("id").to_owned()
}

pub async fn prompt(http: &str, room: &str, id: &str, message: &str) {
    let (status, body) = post(
        &format!("{http}/rooms/{room}/fairies/{id}/prompt"),
        json!({"message": message, "bounds": {"x": 0, "y": 0, "w": 800, "h": 600}}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
}

/// `GET …/fairies/{id}/history` (no token: the test servers run without auth).
pub async fn history(http: &str, room: &str, id: &str) -> Value {
    reqwest::get(format!("{http}/rooms/{room}/fairies/{id}/history"))
        .await
        .expect("history")
        .json()
        .await
        .expect("json")
}

pub fn root_json(c: &Client, root: &str) -> Value {
    let map = c.doc.get_or_insert_map(root);
    let any = map.to_json(&c.doc.transact());
    let mut text = String::new();
    any.to_json(&mut text);
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

pub fn shapes(c: &Client) -> Value {
    root_json(c, "shapes")
}

pub fn locked_count(c: &Client) -> usize {
    shapes(c)
        .as_object()
        .map(|m| m.values().filter(|s| s["locked"] == json!(true)).count())
        .unwrap_or(0)
}

pub fn chat_texts(c: &Client, id: &str) -> Vec<String> {
    root_json(c, "fairies")[id]["chat"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["text"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

pub fn fairy_presence(c: &Client, id: &str) -> Option<Value> {
    c.awareness.iter().find_map(|(_, state)| {
        let v: Value = serde_json::from_str(state.data.as_deref()?).ok()?;
        (v["fairy"]["id"] == json!(id)).then_some(v)
    })
}

/// A response streamed slowly enough to be seen while streaming.
pub fn slow(text: &str) -> MockResponse {
    MockResponse {
        text: text.into(),
        delta_chars: 6,
        chunk_size: 64,
        delay_ms: 10,
        ..MockResponse::default()
    }
}

/// A mock answer with `text`, streamed the default way.
pub fn ok(text: &str) -> MockResponse {
    MockResponse {
        text: text.into(),
        ..MockResponse::default()
    }
}

/// A mock model serving `responses` in order (the last repeats).
pub async fn mock_server(responses: Vec<MockResponse>) -> MockServer {
    MockServer::start(MockScript { responses })
        .await
        .expect("mock")
}

/// Waits until the mock has received `n` requests (or the test timeout).
pub async fn wait_requests(mock: &MockServer, n: usize) {
    let deadline = tokio::time::Instant::now() + super::TIMEOUT;
    while mock.requests().len() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "mock got {} requests",
            mock.requests().len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The fairy's event stream (subscribe before prompting).
pub async fn events(http: &str, room: &str, id: &str) -> reqwest::Response {
    let response = reqwest::get(format!("{http}/rooms/{room}/fairies/{id}/events"))
        .await
        .expect("events");
    assert_eq!(response.status().as_u16(), 200);
    response
}

/// Reads the SSE stream until `until` was seen (or panics at the test timeout); returns what
/// was read.
pub async fn read_events(response: &mut reqwest::Response, until: &str) -> String {
    read_events_until(response, until, |seen| seen.contains(until)).await
}

/// Reads the SSE stream until `done` holds for what was read (or panics at the test timeout).
pub async fn read_events_until(
    response: &mut reqwest::Response,
    what: &str,
    done: impl Fn(&str) -> bool,
) -> String {
    let mut seen = String::new();
    let read = tokio::time::timeout(super::TIMEOUT, async {
        while !done(&seen) {
            match response.chunk().await {
                Ok(Some(bytes)) => seen.push_str(&String::from_utf8_lossy(&bytes)),
                _ => break,
            }
        }
    })
    .await;
    assert!(read.is_ok() && done(&seen), "no {what}: {seen}");
    seen
}

/// A route for the fairy `name` in `mode`.
pub fn route(name: &str, mode: &str, responses: Vec<MockResponse>) -> MockRoute {
    MockRoute {
        when: vec![
            format!("You are {name},"),
            format!("You are in mode `{mode}`"),
        ],
        responses,
    }
}

/// A mock answer made of `list` actions.
pub fn actions(list: Vec<Value>) -> MockResponse {
    ok(&json!({ "actions": list }).to_string())
}

/// A `create` action of a blue rectangle.
pub fn rect(id: &str, x: i64, y: i64, w: i64, h: i64) -> Value {
    json!({"_type": "create", "intent": id, "shape": {"_type": "rectangle", "shapeId": id,
        "note": "", "x": x, "y": y, "w": w, "h": h, "color": "blue"}})
}

/// A `create-project-task` action of a 400 × 400 task at `x`.
pub fn task(id: &str, title: &str, x: i64) -> Value {
    json!({"_type": "create-project-task", "taskId": id, "title": title,
        "text": format!("Draw {title} in your bounds."), "x": x, "y": 0, "w": 400, "h": 400})
}

/// A mock model that creates `a`, then stalls in the middle of `b` (`b` stays half-drawn).
pub async fn stalling_in_b() -> fairyring::llm::mock::MockServer {
    let text = r#"{"actions": [{"_type": "create", "intent": "a", "shape": {"_type": "rectangle", "shapeId": "a", "note": "", "x": 0, "y": 0, "w": 50, "h": 50}}, {"_type": "create", "intent": "b", "shape": {"_type": "rectangle", "shapeId": "b", "note": "", "x": 100, "y": 0, "w": 50, "h": 50, "color": "red"}}]}"#;
    let stall = text.find("\"color\": \"red\"").expect("marker");
    mock_server(vec![MockResponse {
        fault: Some(Fault::Stall { after_chars: stall }),
        ..ok(text)
    }])
    .await
}

/// The mock's script of a three-fairy project: Orla plans "House and tree" (tasks `t-house` at
/// x 0 and `t-tree` at x 500, 400 × 400), directs `dart` and `echo` and awaits them, then ends
/// it; Dart draws `walls` in its task and `stray` outside it (refused), then marks its task
/// done; Echo draws `oak` (model x 100, page x 600) and marks its task done.
pub fn house_and_tree(mock: &MockServer, dart: &str, echo: &str) {
    mock.add_route(route(
        "Orla",
        "orchestrating-active",
        vec![
            actions(vec![
                json!({"_type": "start-project", "title": "House and tree",
                       "description": "a house beside a tree", "plan": "house left, tree right, in parallel"}),
                task("t-house", "a house", 0),
                task("t-tree", "a tree", 500),
                json!({"_type": "direct-to-start-project-task", "taskId": "t-house", "fairyId": dart}),
                json!({"_type": "direct-to-start-project-task", "taskId": "t-tree", "fairyId": echo}),
                json!({"_type": "await-tasks-completion", "taskIds": ["t-house", "t-tree"]}),
            ]),
            actions(vec![json!({"_type": "end-project", "summary": "A house and a tree."})]),
        ],
    ));
    mock.add_route(route(
        "Dart",
        "working-drone",
        vec![
            // The second shape is outside the task's bounds: refused with a correction.
            actions(vec![
                rect("walls", 50, 100, 200, 150),
                rect("stray", 600, 50, 50, 50),
            ]),
            actions(vec![json!({"_type": "mark-drone-task-done"})]),
        ],
    ));
    mock.add_route(route(
        "Echo",
        "working-drone",
        vec![actions(vec![
            rect("oak", 100, 100, 100, 150),
            json!({"_type": "mark-drone-task-done"}),
        ])],
    ));
}
