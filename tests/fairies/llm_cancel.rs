//! Dropping a model stream aborts the HTTP request at once: the mock model server sees its
//! client leave before the body was complete, in both formats, mid-text and while stalled.

use std::time::Duration;

use crate::support::llm::*;
use fairyring::llm::mock::{Fault, MockResponse};
use fairyring::llm::{Model, ModelEvent};
use futures_util::StreamExt;

#[tokio::test]
async fn dropping_mid_stream_closes_the_connection() {
    for format in BOTH {
        let slow = MockResponse {
            text: ANSWER.repeat(20),
            delta_chars: 4,
            chunk_size: 32,
            delay_ms: 5,
            ..MockResponse::default()
        };
        let s = setup(format, script(vec![slow]), &["k1"], 0).await;
        let mut stream = s.model.stream(request());
        let first = tokio::time::timeout(TEST_DEADLINE, async {
            loop {
                match stream.next().await {
                    Some(Ok(ModelEvent::TextDelta(t))) => return t,
                    Some(Ok(_)) => continue,
                    other => panic!("stream ended early: {other:?}"),
                }
            }
        })
        .await
        .expect("a first delta");
        assert!(!first.is_empty());
        assert_eq!(s.server.disconnects(), 0);
        drop(stream);
        assert!(
            s.server.wait_disconnects(1, Duration::from_secs(5)).await,
            "{format:?}: the mock saw the client leave"
        );
        assert_eq!(
            s.server.completed(),
            0,
            "{format:?}: the body was not sent to the end"
        );
    }
}

#[tokio::test]
async fn dropping_while_the_model_stalls_closes_the_connection() {
    for format in BOTH {
        let stall = MockResponse {
            text: ANSWER.into(),
            fault: Some(Fault::Stall { after_chars: 0 }),
            ..MockResponse::default()
        };
        let s = setup(format, script(vec![stall]), &["k1"], 0).await;
        let mut stream = s.model.stream(request());
        // Nothing but the opening events arrives; give up waiting after a moment.
        let waited = tokio::time::timeout(Duration::from_millis(300), async {
            while let Some(item) = stream.next().await {
                assert!(
                    !matches!(item, Ok(ModelEvent::TextDelta(_))),
                    "no text was scripted"
                );
            }
        })
        .await;
        assert!(waited.is_err(), "the stream is still open");
        assert_eq!(s.server.requests().len(), 1);
        drop(stream);
        assert!(
            s.server.wait_disconnects(1, Duration::from_secs(5)).await,
            "{format:?}: the mock saw the client leave"
        );
    }
}

#[tokio::test]
async fn an_unpolled_stream_sends_nothing() {
    let s = setup(Format::Anthropic, script(vec![ok(ANSWER)]), &["k1"], 0).await;
    let stream = s.model.stream(request());
    drop(stream);
    let out = collect(&s.model, request()).await;
    assert!(out.done());
    assert_eq!(
        s.server.requests().len(),
        1,
        "only the polled stream made a request"
    );
}
