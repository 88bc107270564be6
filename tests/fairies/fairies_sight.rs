//! What a fairy sees (docs/fairies.md "What a fairy sees"), through the real server and the mock
//! model: with `--llm-vision on` a request over shapes carries a PNG of its bounds (OpenAI
//! `image_url` data URL through the whole server; the Anthropic `image` block through the
//! provider client), an empty area none, and `review` sends a fresh one of what it reviews.
//! The room's instructions and the prompting user's viewport reach the prompt.

use crate::support;

use base64::Engine;
use fairyring::canvas::format::{ShapeBase, from_simple};
use fairyring::canvas::geometry::Bounds;
use fairyring::canvas::schema::MAIN_PAGE;
use fairyring::canvas::shape::write_shape;
use fairyring::config::{LlmProvider, LlmVision};
use fairyring::llm::mock::MockServer;
use fairyring::llm::{ChatMessage, ModelEvent, ModelRequest};
use futures_util::StreamExt;
use resvg::tiny_skia::Pixmap;
use serde_json::{Value, json};
use support::Client;
use support::fairy_http::*;

const DONE: &str = r#"{"actions": [{"_type": "message", "text": "ok"}]}"#;

/// The image parts (`image_url` data URLs) of the n-th request, decoded.
fn images(mock: &MockServer, n: usize) -> Vec<Pixmap> {
    let body = &mock.requests()[n].body;
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|p| p["type"] == json!("image_url"))
        .map(|p| {
            let url = p["image_url"]["url"].as_str().expect("url");
            let data = url
                .strip_prefix("data:image/png;base64,")
                .expect("a PNG data URL");
            let png = base64::engine::general_purpose::STANDARD
                .decode(data)
                .expect("base64");
            Pixmap::decode_png(&png).expect("png")
        })
        .collect()
}

fn system_of(mock: &MockServer, n: usize) -> String {
    mock.requests()[n].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Draws a solid red box at (100, 100) and waits until another client sees it (so the room
/// has committed it before any fairy looks).
async fn draw_box(client: &mut Client, ws: &str, room: &str) {
    let shape = from_simple(
        &json!({"_type": "rectangle", "shapeId": "box", "x": 100, "y": 100, "w": 200, "h": 100, "color": "red", "fill": "solid", "text": "hello"}),
        &ShapeBase::default(),
    )
    .expect("shape");
    client
        .edit(|txn| {
            write_shape(txn, &shape);
        })
        .await;
    let mut observer = Client::connect(ws, room).await;
    observer
        .until("the box at another client", |c| {
            shapes(c).get("box").is_some()
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_shapes_carries_a_screenshot_the_instructions_and_the_viewport() {
    let mock = mock_server(vec![ok(DONE)]).await;
    let mut config = mock_config(&mock);
    config.llm_vision = LlmVision::On;
    let (server, ws, http) = start(config).await;
    let mut client = Client::connect(&ws, "seen").await;
    draw_box(&mut client, &ws, "seen").await;
    // The test server runs without auth: the prompting user is `anonymous`.
    client
        .set_awareness(
            json!({"user": {"id": "anonymous", "name": "Ann", "color": "#e03131"},
            "cursor": null, "selection": [], "viewport": {"x": -50, "y": 20, "w": 1280, "h": 720}}),
        )
        .await;
    let mut observer = Client::connect(&ws, "seen").await;
    observer
        .until("Ann's viewport at another client", |c| {
            c.awareness.iter().any(|(_, s)| {
                s.data
                    .as_deref()
                    .is_some_and(|d| d.contains("\"viewport\""))
            })
        })
        .await;
    let put = reqwest::Client::new()
        .put(format!("{http}/rooms/seen/instructions"))
        .body("Always answer in haiku.")
        .send()
        .await
        .expect("put");
    assert_eq!(put.status().as_u16(), 204);
    let id = invite(&http, "seen", "Iris").await;
    // The fairy's own awareness appearing means the room has the user's awareness too.
    client
        .until("the fairy", |c| fairy_presence(c, &id).is_some())
        .await;
    prompt(&http, "seen", &id, "what do you see?").await;
    wait_requests(&mock, 1).await;

    let shots = images(&mock, 0);
    assert_eq!(shots.len(), 1, "one screenshot");
    // The request bounds (0, 0, 800, 600) at 1:1; the solid red box's tint at its middle.
    assert_eq!((shots[0].width(), shots[0].height()), (800, 600));
    let c = shots[0].pixel(120, 110).expect("pixel").demultiply();
    assert_eq!((c.red(), c.green(), c.blue()), (0xf4, 0xda, 0xdb));
    let system = system_of(&mock, 0);
    assert!(
        system.contains("<room-instructions>\nAlways answer in haiku.\n</room-instructions>"),
        "{system}"
    );
    assert!(
        system.contains("The image shows the request bounds"),
        "{system}"
    );
    let context = mock.requests()[0].body["messages"][1]["content"].to_string();
    assert!(
        context.contains(r#"\"userViewportBounds\":{\"h\":720,\"w\":1280,\"x\":-50,\"y\":20}"#),
        "{context}"
    );
    assert!(
        context.contains(r#"\"pages\":[{\"id\":\"page:main\",\"name\":\"Page 1\"}]"#),
        "{context}"
    );
    assert!(
        context.contains(r#"\"modelName\":\"openai:mock\""#),
        "{context}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_area_sends_no_image_and_vision_off_sends_none() {
    for (vision, room, draw) in [
        (LlmVision::On, "empty", false),
        (LlmVision::Off, "blind", true),
    ] {
        let mock = mock_server(vec![ok(DONE)]).await;
        let mut config = mock_config(&mock);
        config.llm_vision = vision;
        let (server, ws, http) = start(config).await;
        let mut client = Client::connect(&ws, room).await;
        if draw {
            draw_box(&mut client, &ws, room).await;
        }
        let id = invite(&http, room, "Iris").await;
        client
            .until("the fairy", |c| fairy_presence(c, &id).is_some())
            .await;
        prompt(&http, room, &id, "anything there?").await;
        wait_requests(&mock, 1).await;
        assert!(images(&mock, 0).is_empty(), "{room}: no image part");
        let system = system_of(&mock, 0);
        assert!(!system.contains("The image shows"), "{room}: {system}");
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_follows_up_with_a_fresh_screenshot_of_what_it_reviews() {
    // The first answer draws a second box and reviews a 400×200 area around both.
    let first = r#"{"actions": [{"_type": "create", "intent": "b", "shape": {"_type": "rectangle", "shapeId": "b2", "note": "", "x": 400, "y": 100, "w": 100, "h": 100, "color": "blue", "fill": "solid"}}, {"_type": "review", "intent": "check both", "x": 100, "y": 50, "w": 400, "h": 200}]}"#;
    let mock = mock_server(vec![ok(first), ok(DONE)]).await;
    let mut config = mock_config(&mock);
    config.llm_vision = LlmVision::On;
    let (server, ws, http) = start(config).await;
    let mut client = Client::connect(&ws, "review").await;
    draw_box(&mut client, &ws, "review").await;
    let id = invite(&http, "review", "Iris").await;
    client
        .until("the fairy", |c| fairy_presence(c, &id).is_some())
        .await;
    prompt(&http, "review", &id, "draw another box").await;
    wait_requests(&mock, 2).await;
    let before = images(&mock, 0);
    let after = images(&mock, 1);
    assert_eq!(before.len(), 1);
    assert_eq!(after.len(), 1, "the review turn carries its own screenshot");
    // The review's bounds, in model coordinates offset to the chat origin (0, 0): 400×200 at 1:1.
    assert_eq!((after[0].width(), after[0].height()), (400, 200));
    // Fresh: the box drawn in the first turn is in it (blue's tint at page (450, 150)).
    let c = after[0].pixel(350, 100).expect("pixel").demultiply();
    assert_eq!((c.red(), c.green(), c.blue()), (0xdc, 0xe1, 0xf8));
    let context = mock.requests()[1].body["messages"][1]["content"].to_string();
    assert!(
        context.contains(r#"the request bounds {\"h\":200,\"w\":400,\"x\":100,\"y\":50}"#),
        "{context}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn the_anthropic_wire_carries_the_screenshot_as_an_image_block() {
    let mock = mock_server(vec![ok("fine")]).await;
    let mut config = fairyring::config::ServeConfig::for_test();
    config.llm = LlmProvider::Anthropic;
    config.llm_base_url = Some(mock.base_url());
    config.llm_model = Some("claude-sonnet-4-5".into());
    let model = fairyring::llm::model_with_keys(&config, Some("key")).expect("model");
    let shape = from_simple(
        &json!({"_type": "ellipse", "shapeId": "e", "x": 10, "y": 10, "w": 80, "h": 40}),
        &ShapeBase::default(),
    )
    .expect("shape");
    let shot = fairyring::agent::prompt::screenshot::take(
        &[shape],
        MAIN_PAGE,
        &Bounds::new(0.0, 0.0, 200.0, 100.0),
    )
    .expect("a shape is in view");
    let extras = fairyring::agent::prompt::parts::PromptExtras {
        screenshot: Some(shot.clone()),
        ..Default::default()
    };
    let mut message = ChatMessage::user("the JSON");
    let t = fairyring::canvas::transform::PromptTransform::new(0.0, 0.0);
    fairyring::agent::prompt::parts::attach_screenshot(&mut message, &extras, &t);
    let request = ModelRequest {
        system: "s".into(),
        messages: vec![message],
        max_tokens: 10,
        ..Default::default()
    };
    let mut stream = model.stream(request);
    while let Some(event) = stream.next().await {
        if matches!(event.expect("event"), ModelEvent::Done { .. }) {
            break;
        }
    }
    let recorded = &mock.requests()[0];
    assert_eq!(recorded.path, "/v1/messages");
    let content = &recorded.body["messages"][0]["content"];
    assert_eq!(content[0]["type"], json!("text"));
    assert_eq!(
        content[1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": shot.base64}})
    );
    assert_eq!(content[2], json!({"type": "text", "text": "the JSON"}));
    let _: &Value = content;
}
