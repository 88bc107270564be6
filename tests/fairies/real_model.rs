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
//! (`<think>`) reaches the canvas. It prints, over the model turns, the time from a turn's start
//! to its first streamed action (the prompt read and the answer's first tokens: an upper bound
//! on the time to the first token), the output tokens per second while the model generates and
//! the cached share of the prompt tokens. `scripts/real-model.sh` adds llama.cpp's own timings.

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

/// One event of a request and when it arrived, counted from the prompt's POST.
struct Timed {
    at: Duration,
    data: Value,
}

/// The events of one request, each stamped when it arrived, until it ended (bounded by
/// `limit`).
async fn one_request(
    http: &str,
    room: &str,
    id: &str,
    message: &str,
    limit: Duration,
) -> Vec<Timed> {
    let mut events = events(http, room, id).await;
    let started = Instant::now();
    let (status, body) = post(
        &format!("{http}/rooms/{room}/fairies/{id}/prompt"),
        json!({"message": message, "bounds": {"x": 0, "y": 0, "w": 1200, "h": 800}}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let (mut pending, mut seen) = (String::new(), Vec::new());
    let ended = |seen: &[Timed]| seen.iter().any(|e| e.data["type"] == "request-ended");
    let read = tokio::time::timeout(limit, async {
        while !ended(&seen) {
            match events.chunk().await {
                Ok(Some(bytes)) => pending.push_str(&String::from_utf8_lossy(&bytes)),
                _ => break,
            }
            while let Some(end) = pending.find('\n') {
                let line: String = pending.drain(..=end).collect();
                if let Some(data) = line.trim_end().strip_prefix("data: ")
                    && let Ok(data) = serde_json::from_str::<Value>(data)
                {
                    seen.push(Timed {
                        at: started.elapsed(),
                        data,
                    });
                }
            }
        }
    })
    .await;
    assert!(
        read.is_ok() && ended(&seen),
        "{message}: no end within {limit:?}: {:?}",
        seen.iter().map(|e| &e.data).collect::<Vec<_>>()
    );
    seen
}

fn of_type<'a>(seen: &'a [Timed], kind: &str) -> impl Iterator<Item = &'a Timed> {
    seen.iter().filter(move |e| e.data["type"] == json!(kind))
}

/// What the ten requests measured, summed over their model turns.
#[derive(Default)]
struct Figures {
    /// Per turn: from the turn's start to its first streamed action (the prompt read, then
    /// the first tokens of the answer: an upper bound on the time to the first token).
    first_action: Vec<Duration>,
    /// Output tokens of the turns that streamed an action, and the time from each such turn's
    /// first action to its usage report (the model generating).
    generated_tokens: u64,
    generating: Duration,
    /// Prompt tokens of every call, and those the provider read from its cache.
    prompt_tokens: u64,
    cached_tokens: u64,
    output_tokens: u64,
}

impl Figures {
    fn add(&mut self, seen: &[Timed]) {
        let starts: Vec<Duration> = of_type(seen, "turn-started").map(|e| e.at).collect();
        for (i, start) in starts.iter().enumerate() {
            let end = starts.get(i + 1).copied().unwrap_or(Duration::MAX);
            let in_turn = |e: &&Timed| e.at >= *start && e.at < end;
            let first = of_type(seen, "action").find(in_turn).map(|e| e.at);
            let usage = of_type(seen, "usage").find(in_turn);
            if let Some(first) = first {
                self.first_action.push(first - *start);
                if let Some(u) = usage {
                    self.generated_tokens += u.data["outputTokens"].as_u64().unwrap_or(0);
                    self.generating += u.at.saturating_sub(first);
                }
            }
        }
        for u in of_type(seen, "usage") {
            let read = u.data["cacheReadInputTokens"].as_u64().unwrap_or(0);
            self.prompt_tokens += u.data["inputTokens"].as_u64().unwrap_or(0) + read;
            self.cached_tokens += read;
            self.output_tokens += u.data["outputTokens"].as_u64().unwrap_or(0);
        }
    }

    fn report(mut self, calls: usize, total: Duration) -> String {
        self.first_action.sort();
        let secs = |d: Option<&Duration>| d.map_or(f64::NAN, Duration::as_secs_f64);
        format!(
            "{calls} model calls in {:.0} s; time to the first action per turn: median {:.1} s, \
             min {:.1} s, max {:.1} s (over {} turns that streamed one); output {:.1} tokens/s \
             while generating ({} tokens in {:.0} s), {} output tokens in all; prompt tokens \
             {} ({:.0} per call), cached share {:.0} %",
            total.as_secs_f64(),
            secs(self.first_action.get(self.first_action.len() / 2)),
            secs(self.first_action.first()),
            secs(self.first_action.last()),
            self.first_action.len(),
            self.generated_tokens as f64 / self.generating.as_secs_f64().max(1e-3),
            self.generated_tokens,
            self.generating.as_secs_f64(),
            self.output_tokens,
            self.prompt_tokens,
            self.prompt_tokens as f64 / calls.max(1) as f64,
            self.cached_tokens as f64 * 100.0 / self.prompt_tokens.max(1) as f64
        )
    }
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
    let (mut figures, mut calls, all) = (Figures::default(), 0, Instant::now());
    for message in PROMPTS {
        let seen = one_request(&http, "real", &id, message, Duration::from_secs(1800)).await;
        let elapsed = seen.last().map_or(Duration::ZERO, |e| e.at);
        let reason = of_type(&seen, "request-ended")
            .next()
            .and_then(|e| e.data["reason"].as_str())
            .unwrap_or_default()
            .to_owned();
        assert!(
            ["done", "error", "max-iterations"].contains(&reason.as_str()),
            "{message}: {reason}"
        );
        let turns = of_type(&seen, "turn-started").count();
        assert!(turns <= 3, "{message}: {turns} turns");
        calls += of_type(&seen, "usage").count();
        figures.add(&seen);
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
        let refused = of_type(&seen, "action-rejected").count();
        let actions = of_type(&seen, "action")
            .filter(|e| e.data["complete"] == json!(true))
            .count();
        eprintln!(
            "{message:?}: {reason} after {elapsed:.1?}, {turns} turns, {actions} actions completed, {refused} rejected"
        );
    }
    eprintln!("{}", figures.report(calls, all.elapsed()));
    server.shutdown().await;
}
