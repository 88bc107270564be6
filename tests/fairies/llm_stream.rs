//! Both wire formats stream correctly over real loopback HTTP against the mock model server:
//! 1-byte and large chunks, reasoning ignored, garbage lines ignored, usage and requests right.

use crate::support::llm::*;
use fairyring::llm::mock::{Fault, MockResponse};
use fairyring::llm::{ModelEvent, Usage};

fn usage() -> Usage {
    Usage {
        input_tokens: 120,
        output_tokens: 45,
        cache_read_input_tokens: 900,
        cache_creation_input_tokens: 0,
    }
}

async fn streams_intact(format: Format, chunk_size: usize, delta_chars: usize) {
    let resp = MockResponse {
        text: ANSWER.into(),
        chunk_size,
        delta_chars,
        usage: usage(),
        reasoning: "secret thoughts".into(),
        ..MockResponse::default()
    };
    let s = setup(format, script(vec![resp]), &["k1"], 0).await;
    let out = collect(&s.model, request()).await;
    assert!(out.done(), "{format:?}/{chunk_size}: {:?}", out.items);
    assert_eq!(out.all_text(), ANSWER, "{format:?} chunk {chunk_size}");
    assert!(out.retries().is_empty());
    assert_eq!(out.last_usage(), Some(usage()), "{format:?}");
    let expected_deltas = ANSWER.chars().count().div_ceil(delta_chars);
    assert_eq!(out.deltas(), expected_deltas, "{format:?}");
    assert_eq!(s.server.requests().len(), 1);
    assert_eq!(s.server.completed(), 1);
    let ledger = s.model.usage();
    assert_eq!((ledger.calls, ledger.total_input_tokens), (1, 120));
    assert_eq!(ledger.last, Some(usage()));
}

#[tokio::test]
async fn anthropic_one_byte_chunks() {
    streams_intact(Format::Anthropic, 1, 3).await;
}

#[tokio::test]
async fn anthropic_large_chunks() {
    streams_intact(Format::Anthropic, 0, 10_000).await;
}

#[tokio::test]
async fn openai_one_byte_chunks() {
    streams_intact(Format::OpenAi, 1, 3).await;
}

#[tokio::test]
async fn openai_large_chunks() {
    streams_intact(Format::OpenAi, 0, 10_000).await;
}

#[tokio::test]
async fn garbage_lines_are_ignored_in_both_formats() {
    for format in BOTH {
        let resp = MockResponse {
            text: ANSWER.into(),
            chunk_size: 7,
            fault: Some(Fault::Garbage),
            ..MockResponse::default()
        };
        let s = setup(format, script(vec![resp]), &["k1"], 0).await;
        let out = collect(&s.model, request()).await;
        assert!(out.done(), "{format:?}: {:?}", out.items);
        assert_eq!(out.all_text(), ANSWER);
        assert_eq!(s.server.requests().len(), 1);
    }
}

#[tokio::test]
async fn anthropic_request_has_headers_cached_system_and_no_rejected_prefill() {
    let s = setup_with(
        Format::Anthropic,
        script(vec![ok(ANSWER)]),
        &["sk-ant-1"],
        0,
        "claude-opus-4-6",
        std::time::Duration::from_secs(5),
    )
    .await;
    let mut req = request();
    req.prefill = Some("{\"actions\": [".into());
    let out = collect(&s.model, req).await;
    assert_eq!(
        out.all_text(),
        ANSWER,
        "no prefill echo for a model without prefill"
    );
    let r = &s.server.requests()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.api_key.as_deref(), Some("sk-ant-1"));
    assert_eq!(r.anthropic_version.as_deref(), Some("2023-06-01"));
    assert_eq!(r.body["stream"], true);
    assert_eq!(r.body["model"], "claude-opus-4-6");
    assert_eq!(r.body["system"][0]["text"], "You are a fairy.");
    assert_eq!(r.body["system"][0]["cache_control"]["type"], "ephemeral");
    assert_eq!(r.body["messages"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn anthropic_prefill_is_sent_and_echoed_where_supported() {
    let prefill = "{\"actions\": [";
    let rest = &ANSWER[prefill.len()..];
    let s = setup_with(
        Format::Anthropic,
        script(vec![ok(rest)]),
        &["k"],
        0,
        "claude-3-5-haiku-latest",
        std::time::Duration::from_secs(5),
    )
    .await;
    let mut req = request();
    req.prefill = Some(prefill.into());
    let out = collect(&s.model, req).await;
    assert_eq!(out.all_text(), ANSWER, "the caller sees the whole document");
    assert!(matches!(out.items.first(), Some(Ok(ModelEvent::TextDelta(t))) if t == prefill));
    let body = &s.server.requests()[0].body;
    assert_eq!(body["messages"][1]["role"], "assistant");
    assert_eq!(body["messages"][1]["content"][0]["text"], prefill);
}

#[tokio::test]
async fn openai_request_shape() {
    let s = setup_with(
        Format::OpenAi,
        script(vec![ok(ANSWER)]),
        &["sk-1"],
        0,
        "o4-mini",
        std::time::Duration::from_secs(5),
    )
    .await;
    let out = collect(&s.model, request()).await;
    assert!(out.done());
    let r = &s.server.requests()[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.api_key.as_deref(), Some("sk-1"));
    assert_eq!(r.body["stream"], true);
    assert_eq!(r.body["stream_options"]["include_usage"], true);
    assert_eq!(r.body["messages"][0]["role"], "system");
    assert!(
        r.body.get("temperature").is_none(),
        "o-series rejects temperature"
    );
    assert_eq!(r.body["max_completion_tokens"], 512);
}
