//! The one error type of the `llm` module and its classification (retriable or not), from HTTP
//! statuses, provider error bodies and transport failures.
//!
//! Owns: turning a provider's refusal into a typed [`LlmError`]. Must not decide *what to do*
//! with an error (that is [`super::failover`]'s job) nor perform I/O.

use std::time::Duration;

/// Everything that can go wrong when asking a language model for a completion.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// 401/403: the key is missing, wrong or revoked (retriable on another profile).
    #[error("authentication failed (http {status}): {message}")]
    Auth { status: u16, message: String },
    /// 402: the account behind the key cannot pay (retriable on another profile).
    #[error("billing problem (http 402): {message}")]
    Billing { message: String },
    /// 429: too many requests; `retry_after` from the provider's header when given.
    #[error("rate limited: {message}")]
    RateLimited {
        message: String,
        retry_after: Option<Duration>,
    },
    /// 408, 5xx or 529: the provider is down, overloaded or too slow to take the request.
    #[error("provider unavailable (http {status}): {message}")]
    Overloaded {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// The prompt does not fit the model's context window: no profile can help.
    #[error("context window exceeded: {message}")]
    ContextOverflow { message: String },
    /// The account's quota is exhausted: no retry will help until someone pays.
    #[error("quota exhausted: {message}")]
    Quota { message: String },
    /// Any other 4xx: the request itself is wrong (bad model name, rejected parameter).
    #[error("request rejected (http {status}): {message}")]
    BadRequest { status: u16, message: String },
    /// No byte arrived within the idle timeout.
    #[error("no data from the model for {0:?}")]
    Timeout(Duration),
    /// The connection failed or was cut.
    #[error("connection failed: {0}")]
    Connection(String),
    /// The provider reported an error inside the stream (`error` event or `{"error": …}` chunk).
    #[error("provider stream error ({kind}): {message}")]
    StreamError { kind: String, message: String },
    /// The stream was not what the wire format promises (bad JSON in a known event, bad UTF-8).
    #[error("malformed model stream: {0}")]
    Protocol(String),
    /// The stream ended before its terminal event (`message_stop` / `[DONE]`).
    #[error("model stream ended before it was complete")]
    Truncated,
    /// The configuration cannot produce a model (missing key, bad URL).
    #[error("invalid model configuration: {0}")]
    Config(String),
    /// Every allowed attempt failed; `last` is the final failure.
    #[error("gave up after {attempts} attempts: {last}")]
    Exhausted { attempts: u32, last: Box<LlmError> },
    /// A model-token budget is spent (the room's per hour, `--fairy-token-budget`; the
    /// person's or the project's per day); the call was not made.
    #[error("{}", budget_text(*budget, *limit, *retry_in_secs))]
    BudgetExhausted {
        budget: BudgetScope,
        limit: u64,
        retry_in_secs: u64,
    },
}

/// Whose model-token budget a refusal names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BudgetScope {
    /// The room's, per hour (`--fairy-token-budget`).
    Room,
    /// The person's who asked (their token `sub`), per day (`--fairy-token-budget-person`).
    Person,
    /// The project's, per day (`--fairy-token-budget-project`).
    Project,
}

impl BudgetScope {
    /// `room`, `person` or `project`.
    pub fn name(self) -> &'static str {
        match self {
            BudgetScope::Room => "room",
            BudgetScope::Person => "person",
            BudgetScope::Project => "project",
        }
    }
}

fn budget_text(budget: BudgetScope, limit: u64, retry_in_secs: u64) -> String {
    let (whose, per) = match budget {
        BudgetScope::Room => ("this room has used its", "hour"),
        BudgetScope::Person => ("you have used your", "day"),
        BudgetScope::Project => ("this project has used its", "day"),
    };
    format!(
        "{whose} model-token budget ({limit} tokens per {per}); try again in about {retry_in_secs} s"
    )
}

impl LlmError {
    /// Whether another attempt (usually on another profile) may succeed.
    pub fn is_retriable(&self) -> bool {
        match self {
            LlmError::Auth { .. }
            | LlmError::Billing { .. }
            | LlmError::RateLimited { .. }
            | LlmError::Overloaded { .. }
            | LlmError::Timeout(_)
            | LlmError::Connection(_)
            | LlmError::Protocol(_)
            | LlmError::Truncated => true,
            LlmError::StreamError { kind, .. } => {
                !self.is_context_overflow()
                    && !matches!(
                        kind.as_str(),
                        "invalid_request_error" | "authentication_error" | "permission_error"
                    )
            }
            LlmError::ContextOverflow { .. }
            | LlmError::Quota { .. }
            | LlmError::BadRequest { .. }
            | LlmError::Config(_)
            | LlmError::Exhausted { .. }
            | LlmError::BudgetExhausted { .. } => false,
        }
    }

    /// Whether the provider said the prompt does not fit the model's context window: an HTTP
    /// refusal classified so, an in-stream error with such a kind or wording, or the last
    /// failure of an exhausted failover.
    pub fn is_context_overflow(&self) -> bool {
        match self {
            LlmError::ContextOverflow { .. } => true,
            LlmError::StreamError { kind, message } => {
                is_context_overflow(&format!("{kind} {message}").to_lowercase())
            }
            LlmError::Exhausted { last, .. } => last.is_context_overflow(),
            _ => false,
        }
    }

    /// The wait the provider asked for, if any (`retry-after`).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::RateLimited { retry_after, .. }
            | LlmError::Overloaded { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// Longest `retry-after` honoured; a provider asking for more is waited on for this long.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// Parses `retry-after` (seconds, possibly fractional) or `retry-after-ms`; HTTP dates are ignored.
pub fn parse_retry_after(seconds: Option<&str>, millis: Option<&str>) -> Option<Duration> {
    let from_ms = millis
        .and_then(|m| m.trim().parse::<f64>().ok())
        .filter(|m| m.is_finite() && *m >= 0.0)
        .map(|m| m / 1000.0);
    let from_s = seconds
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0);
    from_ms
        .or(from_s)
        .map(|s| Duration::from_secs_f64(s.min(MAX_RETRY_AFTER.as_secs_f64())))
}

/// Most bytes of an error body kept in a message.
const MAX_MESSAGE_CHARS: usize = 300;

/// Extracts a readable message from a provider error body: `error.message` (both Anthropic
/// and OpenAI shapes), `message`, or the raw body, shortened.
pub fn body_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error"))
            .and_then(|m| m.as_str())
            .map(str::to_owned)
    });
    let text = message.unwrap_or_else(|| body.trim().to_owned());
    text.chars().take(MAX_MESSAGE_CHARS).collect()
}

/// The `error.type` / `error.code` of a provider error body, if present.
fn body_kind(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    parsed
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/code")
                .and_then(|c| c.as_str())
                .or_else(|| v.pointer("/error/type").and_then(|c| c.as_str()))
        })
        .unwrap_or_default()
        .to_owned()
}

/// Classifies a non-success HTTP answer from a provider.
pub fn classify_http(status: u16, retry_after: Option<Duration>, body: &str) -> LlmError {
    let message = body_message(body);
    let kind = body_kind(body);
    let lower = format!("{} {}", kind, message).to_lowercase();
    // An exhausted account (OpenAI sends it as a 429): waiting or rotating will not help.
    // Per-minute "quota" wordings of rate limits stay retriable.
    if status < 500
        && (lower.contains("insufficient_quota") || lower.contains("exceeded your current quota"))
    {
        return LlmError::Quota { message };
    }
    match status {
        401 | 403 => LlmError::Auth { status, message },
        402 => LlmError::Billing { message },
        429 => LlmError::RateLimited {
            message,
            retry_after,
        },
        400 | 413 if is_context_overflow(&lower) => LlmError::ContextOverflow { message },
        408 | 500..=599 => LlmError::Overloaded {
            status,
            message,
            retry_after,
        },
        _ => LlmError::BadRequest { status, message },
    }
}

/// Whether a 400's text says the prompt is too long (wordings of Anthropic, OpenAI, vLLM, llama.cpp).
fn is_context_overflow(lower: &str) -> bool {
    [
        "context_length_exceeded",
        "context length",
        "context window",
        "prompt is too long",
        "maximum context",
        "too many tokens",
        "exceeds the context",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

/// Classifies a transport failure from `reqwest`.
pub fn classify_transport(err: &reqwest::Error, idle: Duration) -> LlmError {
    if err.is_timeout() {
        return LlmError::Timeout(idle);
    }
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    LlmError::Connection(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified() {
        assert!(matches!(
            classify_http(401, None, ""),
            LlmError::Auth { .. }
        ));
        assert!(matches!(
            classify_http(403, None, ""),
            LlmError::Auth { .. }
        ));
        assert!(matches!(
            classify_http(402, None, ""),
            LlmError::Billing { .. }
        ));
        let rl = classify_http(429, Some(Duration::from_secs(3)), "{}");
        assert_eq!(rl.retry_after(), Some(Duration::from_secs(3)));
        assert!(rl.is_retriable());
        assert!(matches!(
            classify_http(529, None, ""),
            LlmError::Overloaded { status: 529, .. }
        ));
        assert!(matches!(
            classify_http(503, None, ""),
            LlmError::Overloaded { .. }
        ));
        assert!(matches!(
            classify_http(404, None, ""),
            LlmError::BadRequest { .. }
        ));
    }

    #[test]
    fn context_overflow_and_quota_are_not_retriable() {
        let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum"}}"#;
        let e = classify_http(400, None, body);
        assert!(matches!(e, LlmError::ContextOverflow { .. }), "{e:?}");
        assert!(!e.is_retriable());
        let quota = r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
        let e = classify_http(429, None, quota);
        assert!(matches!(e, LlmError::Quota { .. }), "{e:?}");
        assert!(!e.is_retriable());
        assert!(!classify_http(400, None, "bad").is_retriable());
        let per_minute = r#"{"error":{"message":"Quota exceeded for requests per minute"}}"#;
        assert!(classify_http(429, None, per_minute).is_retriable());
        assert!(classify_http(408, None, "").is_retriable());
    }

    #[test]
    fn messages_come_from_either_body_shape() {
        assert_eq!(
            body_message(r#"{"error":{"message":"slow down"}}"#),
            "slow down"
        );
        assert_eq!(body_message(r#"{"error":"nope"}"#), "nope");
        assert_eq!(body_message("  plain text "), "plain text");
        assert_eq!(body_message(&"x".repeat(1000)).len(), MAX_MESSAGE_CHARS);
    }

    #[test]
    fn retry_after_parsing() {
        assert_eq!(
            parse_retry_after(Some("2"), None),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            parse_retry_after(Some("0.5"), None),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            parse_retry_after(Some("2"), Some("1500")),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after(Some("Wed, 21 Oct 2015 07:28:00 GMT"), None),
            None
        );
        assert_eq!(parse_retry_after(Some("-1"), None), None);
        assert_eq!(parse_retry_after(Some("1e9"), None), Some(MAX_RETRY_AFTER));
        assert_eq!(parse_retry_after(Some("NaN"), None), None);
    }

    #[test]
    fn context_overflow_is_recognised_wherever_it_surfaces() {
        let body = r#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#;
        assert!(classify_http(400, None, body).is_context_overflow());
        let in_stream = LlmError::StreamError {
            kind: "context_length_exceeded".into(),
            message: "too long".into(),
        };
        assert!(in_stream.is_context_overflow());
        let exhausted = LlmError::Exhausted {
            attempts: 3,
            last: Box::new(LlmError::ContextOverflow {
                message: "x".into(),
            }),
        };
        assert!(exhausted.is_context_overflow());
        assert!(!LlmError::Truncated.is_context_overflow());
        assert!(!classify_http(400, None, "bad model").is_context_overflow());
    }

    #[test]
    fn mid_stream_errors_depend_on_kind() {
        let over = LlmError::StreamError {
            kind: "overloaded_error".into(),
            message: "Overloaded".into(),
        };
        assert!(over.is_retriable());
        let bad = LlmError::StreamError {
            kind: "invalid_request_error".into(),
            message: "x".into(),
        };
        assert!(!bad.is_retriable());
    }
}
