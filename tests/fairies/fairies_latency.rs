//! Server overhead from model token to peer receipt: the mock model streams 30 `create`
//! actions over HTTP; for each, the time from the fairy runtime receiving the text that
//! completed it (`receivedAt` of its complete `action` event) to a yrs WebSocket client seeing
//! the shape settled (`locked: false`). Same machine, same clock.
//! `cargo test --test fairies fairies_latency:: -- --nocapture` prints the percentiles.

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fairyring::llm::mock::{MockResponse, MockScript, MockServer};
use serde_json::{Value, json};
use support::Client;
use support::fairy_http::*;

const SHAPES: usize = 30;

fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

fn answer() -> String {
    let actions: Vec<Value> = (0..SHAPES)
        .map(|i| {
            json!({"_type": "create", "intent": format!("box {i}"), "shape": {
                "_type": "rectangle", "shapeId": format!("s{i}"), "note": "",
                "x": (i % 6) * 120, "y": (i / 6) * 120, "w": 100, "h": 100, "color": "blue"}})
        })
        .collect();
    json!({ "actions": actions }).to_string()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_token_to_peer_receipt() {
    let mock = MockServer::start(MockScript {
        responses: vec![MockResponse {
            text: answer(),
            delta_chars: 24,
            chunk_size: 256,
            delay_ms: 15,
            ..MockResponse::default()
        }],
    })
    .await
    .expect("mock");
    let mut config = mock_config(&mock);
    config.fairy_apply_interval_ms = 250;
    let (server, ws, http) = start(config).await;
    let mut client = Client::connect(&ws, "latency").await;
    let id = invite(&http, "latency", "Pip").await;

    let completed: Arc<Mutex<HashMap<String, f64>>> = Arc::default();
    let mut events = reqwest::get(format!("{http}/rooms/latency/fairies/{id}/events"))
        .await
        .expect("events");
    let sink = completed.clone();
    let reader = tokio::spawn(async move {
        let mut buffer = String::new();
        while let Ok(Some(bytes)) = events.chunk().await {
            buffer.push_str(&String::from_utf8_lossy(&bytes));
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) else {
                    continue;
                };
                let Ok(event) = serde_json::from_str::<Value>(data) else {
                    continue;
                };
                if event["type"] == json!("request-ended") {
                    return;
                }
                if event["type"] == json!("action") && event["complete"] == json!(true) {
                    let shape = event["action"]["shape"]["shapeId"]
                        .as_str()
                        .unwrap_or_default();
                    let at = event["receivedAt"].as_f64().unwrap_or_default();
                    sink.lock().expect("lock").insert(shape.to_owned(), at);
                }
            }
        }
    });

    prompt(&http, "latency", &id, "thirty boxes").await;
    let mut seen: HashMap<String, f64> = HashMap::new();
    let deadline = tokio::time::Instant::now() + support::TIMEOUT;
    while seen.len() < SHAPES {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} shapes settled",
            seen.len()
        );
        client.pump_once(Duration::from_millis(5)).await;
        let now = now_ms();
        if let Some(all) = shapes(&client).as_object() {
            for (k, v) in all {
                if v["locked"] == json!(false) && !seen.contains_key(k) {
                    seen.insert(k.clone(), now);
                }
            }
        }
    }
    let _ = tokio::time::timeout(support::TIMEOUT, reader).await;
    let received = completed.lock().expect("lock").clone();
    let mut latencies: Vec<f64> = seen
        .iter()
        .filter_map(|(k, at)| Some(at - received.get(k)?))
        .collect();
    assert_eq!(latencies.len(), SHAPES, "every action's event was seen");
    latencies.sort_by(f64::total_cmp);
    let (p50, p90, p99, max) = (
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.9),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0),
    );
    eprintln!(
        "model token -> peer receipt over {SHAPES} actions: p50 {p50:.2} ms, p90 {p90:.2} ms, p99 {p99:.2} ms, max {max:.2} ms"
    );
    assert!(p99 < 1000.0, "p99 {p99} ms");
    client.close().await;
    server.shutdown().await;
}
