//! Structured output (docs/llm.md "Structured output", `--llm-structured`), against the mock
//! model server through the real provider clients: OpenAI-compatible requests carry the
//! actions' schema as `response_format: json_schema`; Anthropic requests a forced tool whose
//! input is the actions list, and its streamed `input_json_delta` comes out as the answer's
//! text; a provider that refuses it (HTTP 400 naming what was asked) gets the request again
//! with the schema in the prompt (`auto`), or fails (`on`); `off` never asks.

use std::sync::Arc;

use crate::support::llm::{collect, request};
use fairyring::config::{LlmProvider, LlmStructured, ServeConfig};
use fairyring::llm::mock::{MockResponse, MockScript, MockServer};
use fairyring::llm::{LlmError, ModelRequest, ResponseSchema, model_with_keys};
use serde_json::{Value, json};

const ANSWER: &str = r#"{"actions": [{"_type": "message", "text": "structured"}]}"#;

fn schema() -> Value {
    json!({"type": "object", "required": ["actions"],
           "properties": {"actions": {"type": "array", "items": {"oneOf": [
               {"type": "object", "properties": {"_type": {"const": "message"}, "text": {"type": "string"}}}]}}}})
}

fn with_schema() -> ModelRequest {
    ModelRequest {
        response_schema: Some(ResponseSchema {
            value: Arc::new(schema()),
            text: schema().to_string().into(),
        }),
        ..request()
    }
}

async fn mock(refuse: bool) -> MockServer {
    let answer = MockResponse {
        text: ANSWER.into(),
        refuse_structured: refuse,
        ..MockResponse::default()
    };
    MockServer::start(MockScript {
        responses: vec![answer],
    })
    .await
    .expect("mock")
}

fn config(provider: LlmProvider, mock: &MockServer, mode: LlmStructured) -> ServeConfig {
    let mut config = ServeConfig::for_test();
    config.llm = provider;
    config.llm_model = Some(match provider {
        LlmProvider::Anthropic => "claude-sonnet-4-5".into(),
        _ => "gpt-4.1-mini".into(),
    });
    config.llm_base_url = Some(mock.base_url());
    config.llm_structured = mode;
    config.llm_max_retries = 0;
    config
}

fn system_of(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .or_else(|| body["system"][0]["text"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn openai_gets_the_schema_as_response_format() {
    let mock = mock(false).await;
    let model = model_with_keys(
        &config(LlmProvider::Openai, &mock, LlmStructured::Auto),
        Some("k"),
    )
    .expect("model");
    let outcome = collect(model.as_ref(), with_schema()).await;
    assert!(outcome.done(), "{:?}", outcome.error());
    assert_eq!(outcome.kept_text(), ANSWER);
    let body = &mock.requests()[0].body;
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["schema"], schema());
    // The prompt points to the API's schema instead of repeating it.
    assert!(!system_of(body).contains("```json"), "{}", system_of(body));
}

#[tokio::test]
async fn anthropic_streams_the_tools_input_as_the_answer() {
    let mock = mock(false).await;
    let model = model_with_keys(
        &config(LlmProvider::Anthropic, &mock, LlmStructured::Auto),
        Some("k"),
    )
    .expect("model");
    let outcome = collect(model.as_ref(), with_schema()).await;
    assert!(outcome.done(), "{:?}", outcome.error());
    assert_eq!(outcome.kept_text(), ANSWER, "input_json_delta as text");
    let body = &mock.requests()[0].body;
    assert_eq!(body["tools"][0]["input_schema"], schema());
    assert_eq!(
        body["tool_choice"],
        json!({"type": "tool", "name": body["tools"][0]["name"]})
    );
}

#[tokio::test]
async fn a_refusal_falls_back_to_the_prompts_schema_once_and_for_all() {
    for provider in [LlmProvider::Openai, LlmProvider::Anthropic] {
        let mock = mock(true).await;
        let model = model_with_keys(&config(provider, &mock, LlmStructured::Auto), Some("k"))
            .expect("model");
        let outcome = collect(model.as_ref(), with_schema()).await;
        assert!(outcome.done(), "{provider:?}: {:?}", outcome.error());
        assert_eq!(outcome.kept_text(), ANSWER);
        let requests = mock.requests();
        assert_eq!(requests.len(), 2, "{provider:?}: refused, then plain");
        let plain = &requests[1].body;
        assert!(plain.get("response_format").is_none() && plain.get("tools").is_none());
        assert!(
            system_of(plain).contains(&format!("```json\n{}\n```", schema())),
            "{provider:?}: the schema in the prompt: {}",
            system_of(plain)
        );
        // Remembered: the next call does not ask again.
        let again = collect(model.as_ref(), with_schema()).await;
        assert!(again.done());
        assert_eq!(mock.requests().len(), 3);
        assert!(mock.requests()[2].body.get("response_format").is_none());
        assert!(mock.requests()[2].body.get("tools").is_none());
    }
}

#[tokio::test]
async fn on_makes_a_refusal_an_error_and_off_never_asks() {
    let mock_on = mock(true).await;
    let model = model_with_keys(
        &config(LlmProvider::Openai, &mock_on, LlmStructured::On),
        Some("k"),
    )
    .expect("model");
    let outcome = collect(model.as_ref(), with_schema()).await;
    let refused = matches!(
        outcome.error(),
        Some(LlmError::BadRequest { status: 400, .. })
    ) || matches!(outcome.error(), Some(LlmError::Exhausted { last, .. }) if matches!(**last, LlmError::BadRequest { status: 400, .. }));
    assert!(refused, "{:?}", outcome.error());
    let mock_off = mock(true).await;
    let model = model_with_keys(
        &config(LlmProvider::Anthropic, &mock_off, LlmStructured::Off),
        Some("k"),
    )
    .expect("model");
    let outcome = collect(model.as_ref(), with_schema()).await;
    assert!(outcome.done(), "{:?}", outcome.error());
    assert_eq!(mock_off.requests().len(), 1);
    assert!(mock_off.requests()[0].body.get("tools").is_none());
}
