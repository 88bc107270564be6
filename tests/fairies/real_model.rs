//! A fairy driven by a real language model (docs/llm.md "A real local model"), opt-in:
//!
//! ```sh
//! FAIRYRING_REAL_MODEL=http://127.0.0.1:8081 cargo test --test fairies real_model:: -- --ignored --nocapture
//! ```
//!
//! `FAIRYRING_REAL_MODEL` is an OpenAI-compatible base URL (llama.cpp, Ollama, vLLM; see
//! `scripts/real-model.sh`), `FAIRYRING_REAL_MODEL_NAME` the model name to send (`local` by
//! default). Ten requests in a row, whatever the model streams: each ends (done, or failed
//! with a chat message) within the turn cap, leaves no locked shape, and no reasoning text
//! (`<think>`) reaches the canvas. It prints the time to the first action, the output tokens
//! per second and the cached share of the prompt tokens.

use crate::support;

use std::time::{Duration, Instant};

use fairyring::config::{LlmProvider, LlmVision, ServeConfig};
use serde_json::{Value, json};
use support::Client;
use support::fairy_http::*;

const PROMPTS: [&str; 10] = [
    "draw a house",
    "draw three boxes in a row",
    "add a sticky note that says hello",
    "draw a flowchart A -> B -> C",
    "make the boxes blue",
    "write a title above everything",
    "draw a sun in the top right",
    "draw an arrow from the house to the sun",
    "delete the sticky note",
    "tidy this up",
];

/// The events of one request, until it ended (bounded by `limit`).
async fn one_request(http: &str, room: &str, id: &str, message: &str, limit: Duration) -> String {
    let mut events = events(http, room, id).await;
    let (status, body) = post(
        &format!("{http}/rooms/{room}/fairies/{id}/prompt"),
        json!({"message": message, "bounds": {"x": 0, "y": 0, "w": 1200, "h": 800}}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let mut seen = String::new();
    let read = tokio::time::timeout(limit, async {
        while !seen.contains("event: request-ended") {
            match events.chunk().await {
                Ok(Some(bytes)) => seen.push_str(&String::from_utf8_lossy(&bytes)),
                _ => break,
            }
        }
    })
    .await;
    assert!(read.is_ok(), "{message}: no end within {limit:?}: {seen}");
    seen
}

fn data_of(seen: &str, kind: &str) -> Vec<Value> {
    seen.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter(|v| v["type"] == json!(kind))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real model: FAIRYRING_REAL_MODEL=URL"]
async fn ten_requests_end_within_the_turn_cap_and_leave_nothing_locked() {
    let Ok(url) = std::env::var("FAIRYRING_REAL_MODEL") else {
        panic!("set FAIRYRING_REAL_MODEL to an OpenAI-compatible base URL");
    };
    let mut config = ServeConfig::for_test();
    config.llm = LlmProvider::Openai;
    config.llm_base_url = Some(url);
    config.llm_model =
        Some(std::env::var("FAIRYRING_REAL_MODEL_NAME").unwrap_or_else(|_| "local".into()));
    config.llm_vision = LlmVision::Off;
    config.llm_first_byte_timeout = 900;
    config.llm_timeout = 120;
    config.llm_max_retries = 1;
    config.fairy_max_iterations = 3;
    let (server, ws, http) = start(config).await;
    let id = invite(&http, "real", "Pip").await;
    let mut client = Client::connect(&ws, "real").await;
    let (mut first_action_ms, mut output, mut gen_ms, mut prompt_tokens, mut cached) =
        (Vec::new(), 0u64, 0f64, 0u64, 0u64);
    for message in PROMPTS {
        let started = Instant::now();
        let seen = one_request(&http, "real", &id, message, Duration::from_secs(1800)).await;
        let elapsed = started.elapsed();
        let ended = data_of(&seen, "request-ended");
        let reason = ended[0]["reason"].as_str().unwrap_or_default().to_owned();
        assert!(
            ["done", "error", "max-iterations"].contains(&reason.as_str()),
            "{message}: {reason}"
        );
        let turns = data_of(&seen, "turn-started").len();
        assert!(turns <= 3, "{message}: {turns} turns");
        for u in data_of(&seen, "usage") {
            output += u["outputTokens"].as_u64().unwrap_or(0);
            let input = u["inputTokens"].as_u64().unwrap_or(0);
            let read = u["cacheReadInputTokens"].as_u64().unwrap_or(0);
            prompt_tokens += input + read;
            cached += read;
        }
        if let (Some(first), Some(start)) = (
            data_of(&seen, "action")
                .first()
                .and_then(|a| a["receivedAt"].as_f64()),
            data_of(&seen, "request-started").first().map(|_| started),
        ) {
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as f64)
                .unwrap_or(0.0);
            let since_start = now_ms - start.elapsed().as_millis() as f64;
            first_action_ms.push(first - since_start);
        }
        gen_ms += elapsed.as_millis() as f64;
        client.drain(Duration::from_millis(300)).await;
        assert_eq!(locked_count(&client), 0, "{message}: a shape left locked");
        let shapes = shapes(&client).to_string();
        assert!(
            !shapes.contains("<think>"),
            "{message}: reasoning on the canvas"
        );
        if reason == "error" {
            let chat = chat_texts(&client, &id);
            assert!(
                chat.last()
                    .is_some_and(|t| t.starts_with("Sorry") || t.starts_with("I stopped")),
                "{message}: a failure says so: {chat:?}"
            );
        }
        eprintln!("{message:?}: {reason} after {elapsed:?}, {turns} turns");
    }
    first_action_ms.sort_by(f64::total_cmp);
    eprintln!(
        "time to first action (median of {}): {:.0} ms; output {output} tokens in {:.0} s of requests ({:.1} tokens/s overall); cached share of prompt tokens {:.0} %",
        first_action_ms.len(),
        first_action_ms
            .get(first_action_ms.len() / 2)
            .copied()
            .unwrap_or(0.0),
        gen_ms / 1000.0,
        output as f64 * 1000.0 / gen_ms.max(1.0),
        cached as f64 * 100.0 / prompt_tokens.max(1) as f64
    );
    server.shutdown().await;
}
