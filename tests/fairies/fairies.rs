//! Fairies end to end: the real server on 127.0.0.1:0, a yrs WebSocket client watching the
//! room, the fairy HTTP API, and either the offline model or the mock model server over HTTP.

use crate::support;

use std::time::Duration;

use fairyring::config::ServeConfig;
use fairyring::llm::mock::{MockResponse, MockScript, MockServer};
use serde_json::{Value, json};
use support::fairy_http::*;
use support::{Client, metrics_text};

/// An invitation's `position` is where the sprite first appears (the demo page spreads the
/// fairies it invites); without one every fairy starts on the same spot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invited_fairy_appears_where_its_invitation_says() {
    let (server, ws, http) = start(ServeConfig::for_test()).await;
    let mut client = Client::connect(&ws, "spread").await;
    let (status, body) = post(
        &format!("{http}/rooms/spread/fairies"),
        json!({"name": "Pip", "position": {"x": 640.5, "y": -120}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().expect("id").to_owned();
    client
        .until("the fairy at its spawn point", |c| {
            fairy_presence(c, &id).is_some_and(|p| {
                p["fairy"]["x"] == json!(640.5) && p["fairy"]["y"] == json!(-120.0)
            })
        })
        .await;
    let (status, body) = post(
        &format!("{http}/rooms/spread/fairies"),
        json!({"position": {"x": "left"}}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invite_shows_a_fairy_peer_and_dismiss_removes_it() {
    let (server, ws, http) = start(ServeConfig::for_test()).await;
    let mut client = Client::connect(&ws, "garden").await;
    let id = invite(&http, "garden", "Pip").await;
    client
        .until("the fairy entity and its awareness peer", |c| {
            let f = &root_json(c, "fairies")[&id];
            f["name"] == json!("Pip") && f["chat"].is_array() && fairy_presence(c, &id).is_some()
        })
        .await;
    let presence = fairy_presence(&client, &id).expect("presence");
    assert_eq!(presence["fairy"]["mode"], json!("idling"));
    assert_eq!(presence["fairy"]["pose"], json!("idle"));
    let list: Value = reqwest::get(format!("{http}/rooms/garden/fairies"))
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    assert_eq!(list["fairies"][0]["id"], json!(id));
    assert!(list["fairies"][0]["hat"].is_string());

    let response = reqwest::Client::new()
        .delete(format!("{http}/rooms/garden/fairies/{id}"))
        .send()
        .await
        .expect("dismiss");
    assert_eq!(response.status().as_u16(), 204);
    client
        .until("the fairy gone from awareness and the document", |c| {
            fairy_presence(c, &id).is_none() && root_json(c, "fairies").get(&id).is_none()
        })
        .await;
    let missing = reqwest::Client::new()
        .post(format!("{http}/rooms/garden/fairies/{id}/prompt"))
        .json(&json!({"message": "hi"}))
        .send()
        .await
        .expect("prompt");
    assert_eq!(missing.status().as_u16(), 404);
    let body: Value = missing.json().await.expect("json");
    assert_eq!(body["error"], json!("fairy_not_found"));
    let bad = post(&format!("{http}/rooms/bad%20name/fairies"), json!({})).await;
    assert_eq!(bad.0, 400);
    assert_eq!(bad.1["error"], json!("invalid_room_name"));
    let garbled = reqwest::Client::new()
        .post(format!("{http}/rooms/garden/fairies"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("invite");
    assert_eq!(garbled.status().as_u16(), 400);
    let body: Value = garbled.json().await.expect("json error");
    assert_eq!(body["error"], json!("invalid_json"));
    let unnamed = reqwest::Client::new()
        .post(format!("{http}/rooms/garden/fairies"))
        .send()
        .await
        .expect("invite");
    assert_eq!(unnamed.status().as_u16(), 201, "no body: random traits");
    let (status, body) = post(
        &format!("{http}/rooms/garden/fairies/nope/prompt"),
        json!({"message": "x"}),
    )
    .await;
    assert_eq!(
        (status, body["error"].clone()),
        (404, json!("fairy_not_found"))
    );
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offline_model_draws_a_house() {
    let (server, ws, http) = start(ServeConfig::for_test()).await;
    let mut client = Client::connect(&ws, "house").await;
    let id = invite(&http, "house", "Wren").await;
    prompt(&http, "house", &id, "draw a house").await;
    client
        .until("walls, roof, door and window, settled", |c| {
            let s = shapes(c);
            ["walls", "roof", "door", "window"]
                .iter()
                .all(|k| s[k]["locked"] == json!(false))
        })
        .await;
    client
        .until("what it drew, said in the chat", |c| {
            chat_texts(c, &id)
                .iter()
                .any(|t| t.starts_with("Drew a house"))
        })
        .await;
    client
        .until("the fairy celebrates, then idles", |c| {
            fairy_presence(c, &id).is_some_and(|p| p["fairy"]["pose"] == json!("celebrating"))
        })
        .await;
    client
        .until("the fairy idles after celebrating", |c| {
            fairy_presence(c, &id).is_some_and(|p| p["fairy"]["pose"] == json!("idle"))
        })
        .await;
    let s = shapes(&client);
    assert_eq!(s["walls"]["createdBy"], json!(format!("fairy:{id}")));
    assert_eq!(locked_count(&client), 0);
    let history: Value = history(&http, "house", &id).await;
    let items = history["history"].as_array().cloned().unwrap_or_default();
    assert!(
        items.iter().any(|i| i["type"] == json!("prompt")),
        "{history}"
    );
    assert!(
        items
            .iter()
            .any(|i| i["type"] == json!("action") && i["acceptance"] == json!("accepted"))
    );
    let metrics = metrics_text(&http).await;
    for line in [
        r#"fairyring_fairy_actions_total{reason="accepted"}"#,
        r#"fairyring_model_tokens_total{reason="output"}"#,
    ] {
        assert!(metrics.contains(line), "{line} missing in {metrics}");
    }
    client.close().await;
    server.shutdown().await;
}

const BOX: &str = r#"{"actions": [{"_type": "think", "text": "a box"}, {"_type": "create", "intent": "a box", "shape": {"_type": "rectangle", "shapeId": "box1", "note": "", "x": 10, "y": 20, "w": 100, "h": 50, "color": "blue", "fill": "solid", "text": "hello there, this is a box", "textAlign": "middle"}}, {"_type": "message", "text": "Drew a box."}]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_shapes_are_locked_until_complete() {
    let mock = MockServer::start(MockScript {
        responses: vec![slow(BOX)],
    })
    .await
    .expect("mock");
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "stream").await;
    let id = invite(&http, "stream", "Moss").await;
    prompt(&http, "stream", &id, "a box please").await;
    client
        .until("box1 appears locked while streaming", |c| {
            shapes(c)["box1"]["locked"] == json!(true)
        })
        .await;
    client
        .until("box1 settles and the message is in the chat", |c| {
            shapes(c)["box1"]["locked"] == json!(false)
                && chat_texts(c, &id).contains(&"Drew a box.".to_owned())
        })
        .await;
    client
        .until("lastMessage in awareness", |c| {
            fairy_presence(c, &id)
                .is_some_and(|p| p["fairy"]["lastMessage"] == json!("Drew a box."))
        })
        .await;
    let s = shapes(&client);
    assert_eq!(s["box1"]["x"].as_f64(), Some(10.0));
    assert_eq!(s["box1"]["y"].as_f64(), Some(20.0));
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let body = requests[0].body.to_string();
    assert!(body.contains("a box please"));
    assert!(
        body.contains("\\\"const\\\": \\\"create\\\"") || body.contains("const"),
        "schema sent"
    );
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_prompt_interrupts_and_leaves_no_partial_shape() {
    let first = slow_shape();
    let second = r#"{"actions": [{"_type": "create", "intent": "quick", "shape": {"_type": "ellipse", "shapeId": "quick", "note": "", "x": 5, "y": 5, "w": 30, "h": 30}}]}"#;
    let mock = MockServer::start(MockScript {
        responses: vec![
            slow(&first),
            MockResponse {
                text: second.into(),
                ..MockResponse::default()
            },
        ],
    })
    .await
    .expect("mock");
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "interrupt").await;
    let id = invite(&http, "interrupt", "Pip").await;
    prompt(&http, "interrupt", &id, "a slow one").await;
    client
        .until("the slow shape streaming", |c| {
            shapes(c)["slow"]["locked"] == json!(true)
        })
        .await;
    prompt(&http, "interrupt", &id, "a quick one").await;
    let aborted = mock.wait_disconnects(1, Duration::from_secs(10)).await;
    assert!(
        aborted,
        "stream aborted; requests {}, completed {}",
        mock.requests().len(),
        mock.completed()
    );
    client
        .until("the quick shape, and the slow one gone", |c| {
            shapes(c)["quick"]["locked"] == json!(false) && shapes(c).get("slow").is_none()
        })
        .await;
    assert_eq!(locked_count(&client), 0);
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_failure_reverts_posts_a_message_and_goes_idle() {
    let text = BOX.to_owned();
    let cut = MockResponse {
        fault: Some(fairyring::llm::mock::script::Fault::Http {
            status: 400,
            body: r#"{"error": {"message": "bad request"}}"#.into(),
            retry_after: None,
        }),
        ..slow(&text)
    };
    let mock = MockServer::start(MockScript {
        responses: vec![cut],
    })
    .await
    .expect("mock");
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "failure").await;
    let id = invite(&http, "failure", "Nettle").await;
    prompt(&http, "failure", &id, "a box please").await;
    client
        .until("an error message in the chat and the fairy idle", |c| {
            chat_texts(c, &id)
                .iter()
                .any(|t| t.contains("could not finish"))
                && fairy_presence(c, &id).is_some_and(|p| p["fairy"]["mode"] == json!("idling"))
        })
        .await;
    assert_eq!(locked_count(&client), 0);
    assert!(shapes(&client).get("box1").is_none());
    client.close().await;
    server.shutdown().await;
}

fn slow_shape() -> String {
    let long_text = "x".repeat(3000);
    format!(
        r#"{{"actions": [{{"_type": "create", "intent": "long", "shape": {{"_type": "rectangle", "shapeId": "slow", "note": "", "x": 0, "y": 0, "w": 10, "h": 10, "text": "{long_text}"}}}}]}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_and_dismiss_mid_stream_leave_nothing_behind() {
    let mock = MockServer::start(MockScript {
        responses: vec![slow(&slow_shape())],
    })
    .await
    .expect("mock");
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "cancel").await;
    let id = invite(&http, "cancel", "Pip").await;
    prompt(&http, "cancel", &id, "a slow one").await;
    client
        .until("the slow shape streaming", |c| {
            shapes(c)["slow"]["locked"] == json!(true)
        })
        .await;
    let (status, _) = post(
        &format!("{http}/rooms/cancel/fairies/{id}/cancel"),
        json!({}),
    )
    .await;
    assert_eq!(status, 202);
    assert!(
        mock.wait_disconnects(1, Duration::from_secs(10)).await,
        "stream aborted"
    );
    client
        .until("the partial shape reverted and the fairy idle", |c| {
            shapes(c).get("slow").is_none()
                && fairy_presence(c, &id).is_some_and(|p| p["fairy"]["mode"] == json!("idling"))
        })
        .await;

    prompt(&http, "cancel", &id, "again").await;
    client
        .until("the slow shape streaming again", |c| {
            shapes(c)["slow"]["locked"] == json!(true)
        })
        .await;
    let response = reqwest::Client::new()
        .delete(format!("{http}/rooms/cancel/fairies/{id}"))
        .send()
        .await
        .expect("dismiss");
    assert_eq!(response.status().as_u16(), 204);
    assert!(
        mock.wait_disconnects(2, Duration::from_secs(10)).await,
        "stream aborted"
    );
    client
        .until("no partial shape, no fairy", |c| {
            shapes(c).get("slow").is_none()
                && fairy_presence(c, &id).is_none()
                && root_json(c, "fairies").get(&id).is_none()
        })
        .await;
    assert_eq!(locked_count(&client), 0);
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fairy_flies_smoothly_to_its_work() {
    let (server, ws, http) = start(ServeConfig::for_test()).await;
    let mut client = Client::connect(&ws, "flight").await;
    let id = invite(&http, "flight", "Wren").await;
    let (status, _) = post(
        &format!("{http}/rooms/flight/fairies/{id}/prompt"),
        json!({"message": "draw a house", "bounds": {"x": 3000, "y": 2000, "w": 800, "h": 600}}),
    )
    .await;
    assert_eq!(status, 202);
    // It flies to the bounds, then to each shape as it draws it (issue 47: it used to stay at
    // the bounds' centre): it ends at the centre of the window, the house's last shape.
    let mut path: Vec<(f64, f64)> = Vec::new();
    let mut window = None;
    client
        .until("the fairy at the window it drew last", |c| {
            let Some(p) = fairy_presence(c, &id) else {
                return false;
            };
            let (Some(x), Some(y)) = (p["fairy"]["x"].as_f64(), p["fairy"]["y"].as_f64()) else {
                return false;
            };
            if path.last() != Some(&(x, y)) {
                path.push((x, y));
            }
            let s = shapes(c);
            let w = &s["window"];
            if w["locked"] != json!(false) {
                return false;
            }
            let n = |k: &str| w[k].as_f64().unwrap_or(f64::NAN);
            let centre = (n("x") + n("w") / 2.0, n("y") + n("h") / 2.0);
            window = Some(centre);
            (x, y) == centre
        })
        .await;
    let window = window.unwrap_or_default();
    assert_ne!(
        window,
        (3400.0, 2300.0),
        "the window is not at the bounds' centre"
    );
    assert!(path.len() >= 4, "several intermediate positions: {path:?}");
    for pair in path.windows(2) {
        let step = (pair[1].0 - pair[0].0).hypot(pair[1].1 - pair[0].1);
        assert!(step < 3300.0 / 2.0, "no teleport: {path:?}");
    }
    client.close().await;
    server.shutdown().await;
}

/// Issue 47: fairies invited in a row appear apart (around their inviter's view, or the
/// default spot without one), not on one spot with their names over each other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fairies_invited_in_a_row_appear_apart() {
    let (server, ws, http) = start(ServeConfig::for_test()).await;
    let mut client = Client::connect(&ws, "spawn").await;
    let mut ids = Vec::new();
    for name in ["Ash", "Bea", "Cid"] {
        ids.push(invite(&http, "spawn", name).await);
    }
    client
        .until("three fairies published", |c| {
            ids.iter().all(|id| fairy_presence(c, id).is_some())
        })
        .await;
    let points: Vec<(f64, f64)> = ids
        .iter()
        .filter_map(|id| {
            let p = fairy_presence(&client, id)?;
            Some((p["fairy"]["x"].as_f64()?, p["fairy"]["y"].as_f64()?))
        })
        .collect();
    assert_eq!(points.len(), 3);
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            assert!((a.0 - b.0).hypot(a.1 - b.1) >= 80.0, "apart: {points:?}");
        }
    }
    client.close().await;
    server.shutdown().await;
}

async fn stored_mode(http: &str, room: &str, id: &str) -> Value {
    let history: Value = history(http, room, id).await;
    history["mode"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_or_a_cancel_with_a_mode_switches_it() {
    let mock = MockServer::start(MockScript {
        responses: vec![MockResponse {
            text: r#"{"actions": []}"#.into(),
            ..MockResponse::default()
        }],
    })
    .await
    .expect("mock");
    let (server, _ws, http) = start(mock_config(&mock)).await;
    let id = invite(&http, "modes", "Fern").await;
    let url = format!("{http}/rooms/modes/fairies/{id}");
    let mut events = reqwest::get(format!("{url}/events")).await.expect("events");
    // A project mode outside a project is refused (the fairy would burn every turn in it).
    let (status, body) = post(
        &format!("{url}/prompt"),
        json!({"message": "wait for the others", "mode": "standing-by"}),
    )
    .await;
    assert_eq!(
        (status, body["error"].clone()),
        (400, json!("invalid_prompt")),
        "{body}"
    );
    let (status, body) = post(
        &format!("{url}/prompt"),
        json!({"message": "draw", "mode": "soloing"}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let seen = read_events(&mut events, "event: request-ended").await;
    let switched = seen
        .find(r#""mode":"soloing""#)
        .expect("a mode-changed event to soloing");
    let started = seen.find("event: request-started").expect("started");
    assert!(switched < started, "the switch comes first: {seen}");
    assert!(seen.contains(r#""reason":"done""#), "{seen}");

    // A cancel with a mode switches too; an empty cancel body still works.
    // The request ended idle; a cancel with a mode switches too.
    assert_eq!(stored_mode(&http, "modes", &id).await, json!("idling"));
    let (status, body) = post(&format!("{url}/cancel"), json!({"mode": "soloing"})).await;
    assert_eq!(status, 202, "{body}");
    read_events(&mut events, r#""mode":"soloing""#).await;
    assert_eq!(stored_mode(&http, "modes", &id).await, json!("soloing"));
    let (status, body) = post(&format!("{url}/cancel"), json!({"mode": "standing-by"})).await;
    assert_eq!(
        (status, body["error"].clone()),
        (400, json!("invalid_mode")),
        "{body}"
    );
    let empty = reqwest::Client::new()
        .post(format!("{url}/cancel"))
        .send()
        .await
        .expect("cancel");
    assert_eq!(empty.status().as_u16(), 202);

    // Unknown modes are refused.
    let (status, body) = post(
        &format!("{url}/prompt"),
        json!({"message": "hi", "mode": "dancing"}),
    )
    .await;
    assert_eq!(
        (status, body["error"].clone()),
        (400, json!("invalid_prompt"))
    );
    let (status, body) = post(&format!("{url}/cancel"), json!({"mode": "dancing"})).await;
    assert_eq!(
        (status, body["error"].clone()),
        (400, json!("invalid_mode"))
    );
    assert_eq!(
        mock.requests().len(),
        1,
        "refused prompts never reach the model"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_prompts_is_never_refused_and_the_last_one_runs() {
    let mock = MockServer::start(MockScript {
        responses: vec![slow(r#"{"actions": [{"_type": "message", "text": "ok"}]}"#)],
    })
    .await
    .expect("mock");
    let (server, ws, http) = start(mock_config(&mock)).await;
    let mut client = Client::connect(&ws, "burst").await;
    let id = invite(&http, "burst", "Pip").await;
    let mut events = reqwest::get(format!("{http}/rooms/burst/fairies/{id}/events"))
        .await
        .expect("events");
    for i in 0..40 {
        let (status, body) = post(
            &format!("{http}/rooms/burst/fairies/{id}/prompt"),
            json!({"message": format!("burst {i}")}),
        )
        .await;
        assert_eq!(status, 202, "prompt {i}: {body}");
    }
    // The last request starts (alone, or with prompts merged before it) and ends done.
    let seen = read_events_until(&mut events, "the last request done", |seen| {
        seen.rfind("burst 39")
            .is_some_and(|at| seen[at..].contains("event: request-ended"))
    })
    .await;
    let at = seen.rfind("burst 39").unwrap_or_default();
    assert!(
        seen[..at].rfind("event: request-started") > seen[..at].rfind("event: request-ended"),
        "burst 39 is in a request-started event: {seen}"
    );
    assert!(seen[at..].contains(r#""reason":"done""#), "{seen}");
    client
        .until("the answer in the chat and the fairy idle", |c| {
            chat_texts(c, &id).contains(&"ok".to_owned())
                && fairy_presence(c, &id).is_some_and(|p| p["fairy"]["mode"] == json!("idling"))
        })
        .await;
    let last = mock.requests().last().map(|r| r.body.to_string());
    assert!(
        last.as_deref().is_some_and(|b| b.contains("burst 39")),
        "the last model request carries the last prompt: {last:?}"
    );
    assert!(mock.requests().len() <= 40);
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_writes_the_users_message_into_the_fairys_chat_first() {
    let (server, ws, http) = start(ServeConfig::for_test()).await;
    let mut client = Client::connect(&ws, "talk").await;
    let id = invite(&http, "talk", "Wren").await;
    prompt(&http, "talk", &id, "draw a house").await;
    client
        .until(
            "the user's message, then the fairy's answer, in the chat",
            |c| {
                let chat = root_json(c, "fairies")[&id]["chat"].clone();
                let items = chat.as_array().cloned().unwrap_or_default();
                items.len() >= 2
                    && items[0]["role"] == json!("user")
                    && items[0]["text"] == json!("draw a house")
                    && items[0]["from"]
                        .as_str()
                        .is_some_and(|f| f.starts_with("user:"))
                    && items[0]["at"].as_f64().is_some_and(|at| at > 0.0)
                    && items[1..].iter().any(|i| i["role"] == json!("fairy"))
            },
        )
        .await;
    client.close().await;
    server.shutdown().await;
}
