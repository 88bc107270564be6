//! The first-byte timeout (`--llm-first-byte-timeout`, docs/llm.md "Flags"), apart from the
//! idle timeout, through the real provider clients and the mock model server: a model that
//! reads its prompt for longer than the idle timeout before its first byte is not stalled; a
//! silence after the first byte is bounded by the idle timeout; a first byte later than the
//! first-byte timeout fails the attempt.

use std::time::Duration;

use crate::support::llm::{Format, request};
use fairyring::llm::anthropic::AnthropicProvider;
use fairyring::llm::mock::{Fault, MockResponse, MockScript, MockServer};
use fairyring::llm::openai::OpenAiProvider;
use fairyring::llm::{LlmError, ModelEvent, Profile, Provider};
use futures_util::StreamExt;

const ANSWER: &str = r#"{"actions": [{"_type": "message", "text": "late"}]}"#;
const IDLE: Duration = Duration::from_millis(300);

async fn attempt(format: Format, response: MockResponse, first_byte: Duration) -> Vec<ModelEvent> {
    let server = MockServer::start(MockScript {
        responses: vec![response],
    })
    .await
    .expect("mock");
    let http = reqwest::Client::new();
    let provider: Box<dyn Provider> = match format {
        Format::Anthropic => Box::new(
            AnthropicProvider::new(http, "claude-sonnet-4-5", IDLE)
                .with_first_byte_timeout(first_byte),
        ),
        Format::OpenAi => {
            Box::new(OpenAiProvider::new(http, "local", IDLE).with_first_byte_timeout(first_byte))
        }
    };
    let profile = Profile::new("mock", &server.base_url(), None);
    let mut stream = provider.attempt(&profile, &request());
    let mut events = Vec::new();
    while let Some(item) = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("bounded")
    {
        match item {
            Ok(e) => events.push(e),
            Err(e) => {
                events.push(ModelEvent::Retry {
                    attempt: 0,
                    error: e,
                    discard: false,
                    wait: Duration::ZERO,
                });
                break;
            }
        }
    }
    events
}

fn error(events: &[ModelEvent]) -> Option<&LlmError> {
    events.iter().find_map(|e| match e {
        ModelEvent::Retry { error, .. } => Some(error),
        _ => None,
    })
}

/// The whole answer after `ms` of silence (one write: nothing before it).
fn slow_first_byte(ms: u64) -> MockResponse {
    MockResponse {
        text: ANSWER.into(),
        delay_ms: ms,
        ..MockResponse::default()
    }
}

#[tokio::test]
async fn a_slow_prompt_read_is_not_a_stall() {
    for format in [Format::OpenAi, Format::Anthropic] {
        let events = attempt(format, slow_first_byte(900), Duration::from_secs(3)).await;
        assert_eq!(error(&events), None, "{format:?}");
        assert!(
            matches!(events.last(), Some(ModelEvent::Done { .. })),
            "{format:?}: {events:?}"
        );
    }
}

#[tokio::test]
async fn a_first_byte_later_than_its_timeout_fails_the_attempt() {
    for format in [Format::OpenAi, Format::Anthropic] {
        let events = attempt(format, slow_first_byte(1500), Duration::from_millis(600)).await;
        assert_eq!(
            error(&events),
            Some(&LlmError::Timeout(Duration::from_millis(600))),
            "{format:?}"
        );
    }
}

#[tokio::test]
async fn silence_after_the_first_byte_is_bounded_by_the_idle_timeout() {
    for format in [Format::OpenAi, Format::Anthropic] {
        let pause = MockResponse {
            text: ANSWER.into(),
            fault: Some(Fault::Pause {
                after_chars: 10,
                ms: 1200,
            }),
            ..MockResponse::default()
        };
        let events = attempt(format, pause, Duration::from_secs(5)).await;
        assert_eq!(error(&events), Some(&LlmError::Timeout(IDLE)), "{format:?}");
    }
}
