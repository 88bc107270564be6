//! Shared helpers of the `llm_*` integration tests: a model over the mock server with an
//! injected clock, and a collector that splits what a stream delivered.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use fairyring::clock::ManualClock;
use fairyring::llm::anthropic::AnthropicProvider;
use fairyring::llm::mock::{MockResponse, MockScript, MockServer};
use fairyring::llm::openai::OpenAiProvider;
use fairyring::llm::{
    ChatMessage, FailoverConfig, FailoverModel, LlmError, Model, ModelEvent, ModelRequest, Profile,
    Provider,
};
use futures_util::StreamExt;

/// Upper bound for any single test stream.
pub const TEST_DEADLINE: Duration = Duration::from_secs(20);

/// The wire format under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Anthropic,
    OpenAi,
}

pub const BOTH: [Format; 2] = [Format::Anthropic, Format::OpenAi];

/// An answer with escapes, unicode and multi-byte characters, as a model would write it.
pub const ANSWER: &str = r#"{"actions": [{"_type": "message", "text": "Héllo \"wörld\" — ✓ 🧚"}, {"_type": "create", "intent": "a box", "shape": {"_type": "rectangle", "shapeId": "box1", "note": "", "x": 10, "y": -20.5, "w": 100, "h": 50, "color": "blue", "fill": "semi", "text": "a\\nb", "textAlign": "middle"}}]}"#;

pub fn request() -> ModelRequest {
    ModelRequest {
        system: "You are a fairy.".into(),
        messages: vec![ChatMessage::user("draw a box")],
        max_tokens: 512,
        temperature: Some(0.3),
        ..Default::default()
    }
}

pub fn ok(text: &str) -> MockResponse {
    MockResponse {
        text: text.into(),
        ..MockResponse::default()
    }
}

pub fn script(responses: Vec<MockResponse>) -> MockScript {
    MockScript { responses }
}

pub struct Setup {
    pub server: MockServer,
    pub model: FailoverModel,
    pub clock: ManualClock,
}

/// A mock server serving `script` and a failover model over it with one profile per key.
pub async fn setup(format: Format, script: MockScript, keys: &[&str], max_retries: u32) -> Setup {
    setup_with(
        format,
        script,
        keys,
        max_retries,
        "test-model",
        Duration::from_secs(5),
    )
    .await
}

pub async fn setup_with(
    format: Format,
    script: MockScript,
    keys: &[&str],
    max_retries: u32,
    model_name: &str,
    idle: Duration,
) -> Setup {
    let server = MockServer::start(script).await.expect("mock server starts");
    let http = reqwest::Client::new();
    let provider: Arc<dyn Provider> = match format {
        Format::Anthropic => Arc::new(AnthropicProvider::new(http, model_name, idle)),
        Format::OpenAi => Arc::new(OpenAiProvider::new(http, model_name, idle)),
    };
    let profiles = keys
        .iter()
        .map(|k| Profile::new(*k, &server.base_url(), Some((*k).to_owned())))
        .collect();
    let clock = ManualClock::new();
    let model = FailoverModel::new(
        provider,
        profiles,
        Arc::new(clock.clone()),
        FailoverConfig { max_retries },
    )
    .expect("profiles given");
    Setup {
        server,
        model,
        clock,
    }
}

/// Everything one stream delivered.
#[derive(Debug)]
pub struct Outcome {
    pub items: Vec<Result<ModelEvent, LlmError>>,
}

impl Outcome {
    /// The text a caller keeps: deltas after the last `Retry` with `discard`.
    pub fn kept_text(&self) -> String {
        let mut text = String::new();
        for item in &self.items {
            match item {
                Ok(ModelEvent::TextDelta(t)) => text.push_str(t),
                Ok(ModelEvent::Retry { discard: true, .. }) => text.clear(),
                _ => {}
            }
        }
        text
    }

    /// Every delta, retries or not.
    pub fn all_text(&self) -> String {
        self.items
            .iter()
            .filter_map(|i| match i {
                Ok(ModelEvent::TextDelta(t)) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn deltas(&self) -> usize {
        self.items
            .iter()
            .filter(|i| matches!(i, Ok(ModelEvent::TextDelta(_))))
            .count()
    }

    pub fn retries(&self) -> Vec<(u32, LlmError, bool, Duration)> {
        self.items
            .iter()
            .filter_map(|i| match i {
                Ok(ModelEvent::Retry {
                    attempt,
                    error,
                    discard,
                    wait,
                }) => Some((*attempt, error.clone(), *discard, *wait)),
                _ => None,
            })
            .collect()
    }

    pub fn done(&self) -> bool {
        matches!(self.items.last(), Some(Ok(ModelEvent::Done { .. })))
    }

    pub fn error(&self) -> Option<&LlmError> {
        match self.items.last() {
            Some(Err(e)) => Some(e),
            _ => None,
        }
    }

    pub fn last_usage(&self) -> Option<fairyring::llm::Usage> {
        self.items.iter().rev().find_map(|i| match i {
            Ok(ModelEvent::Usage(u)) => Some(*u),
            _ => None,
        })
    }
}

/// Runs a stream to its end (bounded by [`TEST_DEADLINE`]).
pub async fn collect(model: &dyn Model, request: ModelRequest) -> Outcome {
    let stream = model.stream(request);
    let items = tokio::time::timeout(TEST_DEADLINE, stream.collect::<Vec<_>>())
        .await
        .expect("stream finishes in time");
    Outcome { items }
}

/// The API keys the mock saw, in order.
pub fn keys_seen(server: &MockServer) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .map(|r| r.api_key.unwrap_or_default())
        .collect()
}
