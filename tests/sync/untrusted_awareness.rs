//! Awareness is untrusted input (issue 26), against the real server with yrs clients: a state
//! over `--max-awareness-bytes` closes its peer with 1009 and a state that is not a JSON object
//! with 1007, neither relayed (read-only peers included); a fairy's prompt reads no peer's
//! state as another fairy; and a fairy's `/events` stream ends when its token expires.

use crate::support;

use std::time::Duration;

use fairyring::config::ServeConfig;
use serde_json::json;
use support::fairy_http::*;
use support::{Client, awareness_of};
use yrs::block::ClientID;
use yrs::sync::awareness::{AwarenessUpdate, AwarenessUpdateEntry};

/// An awareness update setting client `id`'s state to the raw text `json`.
fn raw_state(id: u64, json: &str) -> yrs::sync::Message {
    awareness_of(AwarenessUpdate {
        clients: [(
            ClientID::new(id),
            AwarenessUpdateEntry {
                clock: 1,
                json: json.into(),
            },
        )]
        .into(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_non_object_awareness_states_close_the_peer_and_are_not_relayed() {
    let (server, ws, _http) = start(ServeConfig::for_test()).await;
    let room = "aware";
    let mut watcher = Client::connect(&ws, room).await;
    watcher.drain(Duration::from_millis(100)).await;
    let big = json!({"user": {"name": "x".repeat(500 * 1024)}}).to_string();
    let cases = [
        (big.as_str(), 1009u16),
        ("not json", 1007),
        ("[1, 2, 3]", 1007),
        ("\"a string\"", 1007),
    ];
    for (i, (state, code)) in cases.into_iter().enumerate() {
        let mut peer = Client::connect(&ws, room).await;
        peer.send_msg(raw_state(1000 + i as u64, state)).await;
        assert_eq!(peer.until_closed().await, Some(code), "case {i}");
    }
    // A state that is an object passes and reaches the watcher; none of the others did.
    let mut fine = Client::connect(&ws, room).await;
    fine.send_msg(raw_state(2000, r#"{"user": {"name": "ok"}}"#))
        .await;
    watcher
        .until("the good state", |c| {
            c.awareness.iter().any(|(id, _)| id == ClientID::new(2000))
        })
        .await;
    for i in 0..4u64 {
        assert!(
            !watcher
                .awareness
                .iter()
                .any(|(id, _)| id == ClientID::new(1000 + i)),
            "case {i} was relayed"
        );
    }
    fine.close().await;
    watcher.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_peer_is_held_to_the_byte_rate() {
    let mut config = ServeConfig::for_test();
    config.rate_bytes_per_sec = 64 * 1024;
    config.max_message_bytes = 64 * 1024;
    let (config, mint) = with_auth(config);
    let (server, ws, _http) = start(config).await;
    let token = mint("read");
    let mut reader = Client::connect_url(&format!("{ws}/rooms/rate?token={token}")).await;
    // 15 KB states (under the state cap), as fast as it can: past the 64 KiB burst and rate.
    let state = json!({"user": {"name": "y".repeat(15 * 1024)}}).to_string();
    let mut code = None;
    for clock in 1..200u32 {
        let update = AwarenessUpdate {
            clients: [(
                ClientID::new(77),
                AwarenessUpdateEntry {
                    clock,
                    json: state.as_str().into(),
                },
            )]
            .into(),
        };
        reader.send_msg(awareness_of(update)).await;
        if !reader.pump_once(Duration::from_millis(1)).await {
            code = reader.closed.clone().flatten().map(|f| u16::from(f.code));
            break;
        }
    }
    if code.is_none() {
        code = reader.until_closed().await;
    }
    assert_eq!(code, Some(1008));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_calling_itself_a_fairy_never_reaches_a_prompt() {
    let mock = mock_server(vec![ok(r#"{"actions": []}"#)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let room = "fake-fairy";
    let mut peer = Client::connect(&ws, room).await;
    peer.set_awareness(
        json!({"fairy": {"id": "f-fake", "name": "FAKE-FAIRY", "x": 1, "y": 2,
        "mode": "FAKE-MODE"}}),
    )
    .await;
    let id = invite(&http, room, "Wren").await;
    let mut stream = events(&http, room, &id).await;
    prompt(&http, room, &id, "hello").await;
    read_events(&mut stream, "event: request-ended").await;
    let told: String = mock.requests().iter().map(|r| r.body.to_string()).collect();
    assert!(told.contains("Wren"), "{told}");
    assert!(!told.contains("FAKE"), "{told}");
    peer.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fairys_event_stream_ends_when_its_token_expires() {
    use fairyring::auth::{Authenticator, MintRequest, Scopes, unix_now};
    let (config, mint) = with_auth(ServeConfig::for_test());
    let auth = Authenticator::from_config(&config).expect("auth");
    let (server, ws, http) = start(config).await;
    let long = mint("read write fairies");
    // A person in the room keeps it loaded (an idle room unloads, and its fairies' streams end).
    let mut person = Client::connect_url(&format!("{ws}/rooms/expiry?token={long}")).await;
    person.drain(Duration::from_millis(50)).await;
    let (status, body) = {
        let response = reqwest::Client::new()
            .post(format!("{http}/rooms/expiry/fairies"))
            .bearer_auth(&long)
            .json(&json!({"name": "Wren"}))
            .send()
            .await
            .expect("invite");
        let status = response.status().as_u16();
        (
            status,
            response.json::<serde_json::Value>().await.expect("json"),
        )
    };
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().expect("id").to_owned();
    let short = auth
        .mint(
            MintRequest {
                sub: "alice".into(),
                name: None,
                rooms: vec!["*".into()],
                scope: Scopes::from_words(["read", "fairies"]),
                ttl: Duration::from_secs(2),
            },
            unix_now(),
        )
        .expect("mint");
    let mut stream = reqwest::Client::new()
        .get(format!("{http}/rooms/expiry/fairies/{id}/events"))
        .bearer_auth(&short)
        .send()
        .await
        .expect("events");
    assert_eq!(stream.status().as_u16(), 200);
    let seen = read_events(&mut stream, "event: auth-expired").await;
    assert!(seen.contains("token_expired"), "{seen}");
    let rest = tokio::time::timeout(support::TIMEOUT, stream.chunk())
        .await
        .expect("the stream ends");
    assert!(matches!(rest, Ok(None)), "{rest:?}");
    person.close().await;
    server.shutdown().await;
}
