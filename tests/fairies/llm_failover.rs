//! The fault matrix: every injected fault of the mock model server, over real loopback HTTP,
//! produces the documented behaviour (rotation, cooldown timings on an injected clock, errors
//! surfaced, nothing delivered twice without a `Retry { discard: true }` before it).

use std::time::Duration;

use crate::support::llm::*;
use fairyring::llm::LlmError;
use fairyring::llm::mock::{Fault, MockResponse};

fn http(status: u16, body: &str, retry_after: Option<&str>) -> MockResponse {
    MockResponse {
        fault: Some(Fault::Http {
            status,
            body: body.into(),
            retry_after: retry_after.map(str::to_owned),
        }),
        ..MockResponse::default()
    }
}

fn faulty(fault: Fault) -> MockResponse {
    MockResponse {
        text: ANSWER.into(),
        delta_chars: 5,
        chunk_size: 16,
        fault: Some(fault),
        ..MockResponse::default()
    }
}

const S1: Duration = Duration::from_secs(1);

#[tokio::test]
async fn http_429_rotates_and_honours_retry_after() {
    let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
    let s = setup(
        Format::Anthropic,
        script(vec![http(429, body, Some("7")), ok(ANSWER)]),
        &["k1", "k2"],
        3,
    )
    .await;
    let out = collect(&s.model, request()).await;
    assert!(out.done());
    assert_eq!(out.kept_text(), ANSWER);
    let retries = out.retries();
    assert_eq!(retries.len(), 1);
    let (attempt, error, discard, wait) = &retries[0];
    assert_eq!(*attempt, 2);
    assert!(!discard, "nothing had been streamed");
    assert_eq!(*wait, Duration::ZERO, "k2 was ready");
    assert_eq!(
        error,
        &LlmError::RateLimited {
            message: "slow down".into(),
            retry_after: Some(Duration::from_secs(7))
        }
    );
    assert_eq!(keys_seen(&s.server), ["k1", "k2"]);
    assert_eq!(s.model.failures(), [1, 0]);
    // 6 s later k1 is still cooling (retry-after 7 s, not the 1 s base): k2 serves again.
    s.clock.advance(Duration::from_secs(6));
    let out = collect(&s.model, request()).await;
    assert!(out.done());
    assert_eq!(keys_seen(&s.server), ["k1", "k2", "k2"]);
    // After 7 s k1 is first in priority again.
    s.clock.advance(S1);
    collect(&s.model, request()).await;
    assert_eq!(keys_seen(&s.server), ["k1", "k2", "k2", "k1"]);
    assert!(s.clock.sleeps().is_empty());
}

#[tokio::test]
async fn http_500_and_529_rotate_through_profiles() {
    for format in BOTH {
        let s = setup(
            format,
            script(vec![
                http(500, "internal", None),
                http(
                    529,
                    r#"{"error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                    None,
                ),
                ok(ANSWER),
            ]),
            &["k1", "k2", "k3"],
            3,
        )
        .await;
        let out = collect(&s.model, request()).await;
        assert!(out.done(), "{format:?}");
        assert_eq!(out.all_text(), ANSWER);
        let errs: Vec<LlmError> = out.retries().into_iter().map(|r| r.1).collect();
        assert!(matches!(errs[0], LlmError::Overloaded { status: 500, .. }));
        assert!(
            matches!(&errs[1], LlmError::Overloaded { status: 529, message, .. } if message == "Overloaded")
        );
        assert_eq!(keys_seen(&s.server), ["k1", "k2", "k3"]);
        assert!(s.clock.sleeps().is_empty());
    }
}

#[tokio::test]
async fn auth_and_billing_failures_rotate() {
    let s = setup(
        Format::OpenAi,
        script(vec![
            http(401, r#"{"error":{"message":"Incorrect API key"}}"#, None),
            http(403, "forbidden", None),
            http(402, "pay up", None),
            ok(ANSWER),
        ]),
        &["bad", "forbidden", "broke", "good"],
        3,
    )
    .await;
    let out = collect(&s.model, request()).await;
    assert!(out.done());
    let errs: Vec<LlmError> = out.retries().into_iter().map(|r| r.1).collect();
    assert!(matches!(errs[0], LlmError::Auth { status: 401, .. }));
    assert!(matches!(errs[1], LlmError::Auth { status: 403, .. }));
    assert!(matches!(errs[2], LlmError::Billing { .. }));
    assert_eq!(keys_seen(&s.server), ["bad", "forbidden", "broke", "good"]);
}

#[tokio::test]
async fn when_all_profiles_cool_the_shortest_is_awaited() {
    let s = setup(
        Format::Anthropic,
        script(vec![
            http(500, "a", None),
            http(429, "{}", Some("5")),
            ok(ANSWER),
        ]),
        &["k1", "k2"],
        3,
    )
    .await;
    let out = collect(&s.model, request()).await;
    assert!(out.done());
    let waits: Vec<Duration> = out.retries().into_iter().map(|r| r.3).collect();
    assert_eq!(
        waits,
        [Duration::ZERO, S1],
        "k1 (1 s) recovers before k2 (5 s)"
    );
    assert_eq!(s.clock.sleeps(), [S1]);
    assert_eq!(keys_seen(&s.server), ["k1", "k2", "k1"]);
}

#[tokio::test]
async fn cooldown_doubles_and_resets_on_success() {
    let s = setup(
        Format::OpenAi,
        script(vec![
            http(503, "down", None),
            http(503, "down", None),
            http(503, "down", None),
            ok(ANSWER),
            http(503, "down", None),
            ok(ANSWER),
        ]),
        &["only"],
        5,
    )
    .await;
    let out = collect(&s.model, request()).await;
    assert!(out.done());
    assert_eq!(s.clock.sleeps(), [S1, 2 * S1, 4 * S1]);
    assert_eq!(s.model.failures(), [0], "success resets the profile");
    let out = collect(&s.model, request()).await;
    assert!(out.done());
    assert_eq!(
        s.clock.sleeps(),
        [S1, 2 * S1, 4 * S1, S1],
        "back to 1 s after a success"
    );
}

#[tokio::test]
async fn retries_are_bounded_and_exhaustion_is_surfaced() {
    let s = setup(
        Format::Anthropic,
        script(vec![http(500, "x", None)]),
        &["k1"],
        2,
    )
    .await;
    let out = collect(&s.model, request()).await;
    assert_eq!(s.server.requests().len(), 3);
    assert_eq!(s.clock.sleeps(), [S1, 2 * S1]);
    match out.error() {
        Some(LlmError::Exhausted { attempts: 3, last }) => {
            assert!(matches!(**last, LlmError::Overloaded { status: 500, .. }))
        }
        other => panic!("expected exhaustion, got {other:?}"),
    }
}

#[tokio::test]
async fn context_overflow_and_quota_are_not_retried() {
    let overflow = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
    let quota = r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
    for (format, resp, check) in [
        (Format::Anthropic, http(400, overflow, None), "context"),
        (Format::OpenAi, http(429, quota, None), "quota"),
        (
            Format::OpenAi,
            http(
                400,
                r#"{"error":{"message":"Unsupported parameter: 'temperature'"}}"#,
                None,
            ),
            "bad",
        ),
    ] {
        let s = setup(format, script(vec![resp, ok(ANSWER)]), &["k1", "k2"], 3).await;
        let out = collect(&s.model, request()).await;
        assert!(out.retries().is_empty(), "{check}");
        assert_eq!(s.server.requests().len(), 1, "{check}: one request only");
        let e = out.error().cloned();
        match check {
            "context" => assert!(matches!(e, Some(LlmError::ContextOverflow { .. })), "{e:?}"),
            "quota" => assert!(matches!(e, Some(LlmError::Quota { .. })), "{e:?}"),
            _ => assert!(
                matches!(e, Some(LlmError::BadRequest { status: 400, .. })),
                "{e:?}"
            ),
        }
        assert!(!e.is_some_and(|e| e.is_retriable()));
    }
}

/// A fault after some text: the text streamed before it is announced as discarded, and the
/// retry streams the answer once, from the start.
async fn mid_stream_fault_is_retried_with_discard(format: Format, fault: Fault, idle: Duration) {
    let mut first = faulty(fault.clone());
    if matches!(fault, Fault::Cut { .. }) {
        // Paced writes, so the text before the cut has surely left the server when it cuts.
        first.delay_ms = 1;
    }
    let s = setup_with(
        format,
        script(vec![first, ok(ANSWER)]),
        &["k1", "k2"],
        3,
        "test-model",
        idle,
    )
    .await;
    let out = collect(&s.model, request()).await;
    assert!(out.done(), "{format:?} {fault:?}: {:?}", out.items);
    let retries = out.retries();
    assert_eq!(retries.len(), 1, "{format:?} {fault:?}");
    assert!(
        retries[0].2,
        "text had been delivered, so the caller must discard it"
    );
    // Everything streamed before the fault arrived (a cut may lose the last bytes in flight),
    // then the whole answer once.
    let all = out.all_text();
    let before = all
        .strip_suffix(ANSWER)
        .expect("the retry streams the whole answer");
    let sent: String = ANSWER.chars().take(30).collect();
    assert!(
        !before.is_empty() && sent.starts_with(before),
        "{format:?} {fault:?}: {before:?}"
    );
    assert_eq!(
        out.kept_text(),
        ANSWER,
        "nothing duplicated after the discard"
    );
    assert_eq!(keys_seen(&s.server), ["k1", "k2"]);
    assert_eq!(s.model.failures(), [1, 0]);
}

#[tokio::test]
async fn mid_stream_error_event() {
    for format in BOTH {
        let fault = Fault::ErrorEvent {
            after_chars: 30,
            error_type: "overloaded_error".into(),
            message: "Overloaded".into(),
        };
        mid_stream_fault_is_retried_with_discard(format, fault, Duration::from_secs(5)).await;
    }
}

#[tokio::test]
async fn mid_stream_invalid_request_error_is_surfaced_not_retried() {
    let fault = Fault::ErrorEvent {
        after_chars: 10,
        error_type: "invalid_request_error".into(),
        message: "bad".into(),
    };
    let s = setup(
        Format::Anthropic,
        script(vec![faulty(fault), ok(ANSWER)]),
        &["k1", "k2"],
        3,
    )
    .await;
    let out = collect(&s.model, request()).await;
    assert!(
        matches!(out.error(), Some(LlmError::StreamError { kind, .. }) if kind == "invalid_request_error")
    );
    assert_eq!(s.server.requests().len(), 1);
}

#[tokio::test]
async fn connection_cut_mid_stream() {
    for format in BOTH {
        let fault = Fault::Cut { after_chars: 30 };
        mid_stream_fault_is_retried_with_discard(format, fault, Duration::from_secs(5)).await;
    }
}

#[tokio::test]
async fn stall_mid_stream_times_out_and_the_request_is_abandoned() {
    for format in BOTH {
        let fault = Fault::Stall { after_chars: 30 };
        let idle = Duration::from_millis(500);
        let s = setup_with(
            format,
            script(vec![faulty(fault), ok(ANSWER)]),
            &["k1", "k2"],
            3,
            "m",
            idle,
        )
        .await;
        let out = collect(&s.model, request()).await;
        assert!(out.done(), "{format:?}");
        assert_eq!(out.retries()[0].1, LlmError::Timeout(idle));
        assert_eq!(out.kept_text(), ANSWER);
        assert!(
            s.server.wait_disconnects(1, Duration::from_secs(5)).await,
            "{format:?}: the stalled request was closed by the client"
        );
    }
}

#[tokio::test]
async fn stall_before_headers_times_out() {
    // A server that accepts the connection but never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    let idle = Duration::from_millis(200);
    let provider = std::sync::Arc::new(fairyring::llm::anthropic::AnthropicProvider::new(
        reqwest::Client::new(),
        "m",
        idle,
    ));
    let model = fairyring::llm::FailoverModel::new(
        provider,
        vec![fairyring::llm::Profile::new(
            "p",
            &format!("http://{addr}"),
            Some("k".into()),
        )],
        std::sync::Arc::new(fairyring::clock::ManualClock::new()),
        fairyring::llm::FailoverConfig { max_retries: 1 },
    )
    .unwrap();
    let out = collect(&model, request()).await;
    assert!(
        matches!(out.error(), Some(LlmError::Exhausted { attempts: 2, last }) if **last == LlmError::Timeout(idle))
    );
    hold.abort();
}

#[tokio::test]
async fn connection_refused_is_retriable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let provider = std::sync::Arc::new(fairyring::llm::openai::OpenAiProvider::new(
        reqwest::Client::new(),
        "m",
        Duration::from_secs(2),
    ));
    let model = fairyring::llm::FailoverModel::new(
        provider,
        vec![fairyring::llm::Profile::new(
            "p",
            &format!("http://{addr}"),
            None,
        )],
        std::sync::Arc::new(fairyring::clock::ManualClock::new()),
        fairyring::llm::FailoverConfig { max_retries: 0 },
    )
    .unwrap();
    let out = collect(&model, request()).await;
    assert!(
        matches!(out.error(), Some(LlmError::Exhausted { attempts: 1, last }) if matches!(**last, LlmError::Connection(_))),
        "{:?}",
        out.items
    );
}

#[tokio::test]
async fn fixture_fault_script_on_one_profile() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/models/faults.json");
    let script = fairyring::llm::mock::MockScript::load(&path).expect("fixture loads");
    let s = setup(Format::Anthropic, script, &["only"], 6).await;
    let out = collect(&s.model, request()).await;
    assert!(out.done(), "{:?}", out.items);
    let kinds: Vec<&'static str> = out
        .retries()
        .iter()
        .map(|r| match r.1 {
            LlmError::RateLimited { .. } => "429",
            LlmError::Overloaded { status: 529, .. } => "529",
            LlmError::Overloaded { status: 500, .. } => "500",
            LlmError::StreamError { .. } => "error-event",
            LlmError::Connection(_) => "cut",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["429", "529", "500", "error-event", "cut"]);
    assert_eq!(
        out.kept_text(),
        r#"{"actions": [{"_type": "message", "text": "garbage around me"}]}"#
    );
    // One profile: retry-after 2 s beats the 1 s base, then 2, 4, 8, 16 s.
    assert_eq!(s.clock.sleeps(), [2, 2, 4, 8, 16].map(|n| n * S1));
    assert_eq!(s.model.failures(), [0]);
}
