//! The rate limit on REST writes (docs/rest.md "Rate limits", docs/limits.md): a token's writes
//! through the HTTP API — `POST …/update`, `PATCH …/shapes`, `POST …/restore`,
//! `POST …/rollback`, accepting and rejecting suggestions — are metered per token `sub`, by
//! requests and by bytes, with the socket's flags (`--rate-per-sec` and `--rate-burst`,
//! `--rate-bytes-per-sec`): what a socket may send per connection, a token may write per `sub`
//! over HTTP. Over either, `429 {"error":"rate_limited","retryAfter":SECONDS}` with a
//! `retry-after` header, and nothing is written.
//!
//! Owns the two keyed token buckets and the cost of each write; the routes call
//! [`WriteRate::check`] after admission and before any work. Touches no room and no store.

use std::num::NonZeroU32;

use axum::http::StatusCode;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use super::error::ApiError;
use crate::config::ServeConfig;

/// Rate-limiter keys kept before idle ones are forgotten.
const KEYS_PRUNE_ABOVE: usize = 10_000;

/// Requests a restore or a rollback counts as: each replays the room's log and rewrites the
/// room, so with the default 200 requests per second a token sustains 4 of them a second (a
/// burst of 20).
pub const HISTORY_WRITE_COST: u32 = 50;

/// What one write costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteCost {
    /// An update or a shape patch: one request and its body's bytes.
    Body(usize),
    /// A restore or a rollback: [`HISTORY_WRITE_COST`] requests.
    History,
    /// Accepting or rejecting suggestions: one request.
    Decision,
}

/// The per-`sub` buckets of REST writes.
pub struct WriteRate {
    requests: DefaultKeyedRateLimiter<String>,
    bytes: DefaultKeyedRateLimiter<String>,
    per_sec: u32,
    bytes_per_sec: u32,
}

impl std::fmt::Debug for WriteRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteRate")
            .field("per_sec", &self.per_sec)
            .field("bytes_per_sec", &self.bytes_per_sec)
            .finish_non_exhaustive()
    }
}

impl WriteRate {
    /// The buckets of `config`'s socket rates: `--rate-per-sec` requests a second with a burst
    /// of `--rate-burst`, and `--rate-bytes-per-sec` bytes a second with a burst of the larger
    /// of that and `--max-message-bytes` (one write of the largest size is never refused by
    /// the byte bucket alone).
    pub fn from_config(config: &ServeConfig) -> Self {
        let rate = NonZeroU32::new(config.rate_per_sec).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(config.rate_burst)
            .unwrap_or(rate)
            .max(NonZeroU32::new(HISTORY_WRITE_COST).unwrap_or(NonZeroU32::MIN));
        let byte_rate = NonZeroU32::new(config.rate_bytes_per_sec).unwrap_or(NonZeroU32::MIN);
        let byte_burst = u32::try_from(config.max_message_bytes.max(super::error::MAX_BODY_BYTES))
            .ok()
            .and_then(NonZeroU32::new)
            .map_or(byte_rate, |max| max.max(byte_rate));
        WriteRate {
            requests: DefaultKeyedRateLimiter::keyed(Quota::per_second(rate).allow_burst(burst)),
            bytes: DefaultKeyedRateLimiter::keyed(
                Quota::per_second(byte_rate).allow_burst(byte_burst),
            ),
            per_sec: rate.get(),
            bytes_per_sec: byte_rate.get(),
        }
    }

    /// Counts one write of `sub` costing `cost`; `429 rate_limited` (nothing counted in the
    /// bucket that refused) when over either bucket.
    pub fn check(&self, sub: &str, cost: WriteCost) -> Result<(), ApiError> {
        if self.requests.len() > KEYS_PRUNE_ABOVE {
            self.requests.retain_recent();
            self.bytes.retain_recent();
        }
        let key = sub.to_owned();
        let (cells, bytes) = match cost {
            WriteCost::Body(bytes) => (1, bytes),
            WriteCost::History => (HISTORY_WRITE_COST, 0),
            WriteCost::Decision => (1, 0),
        };
        let now = DefaultClock::default().now();
        let refuse = |wait: std::time::Duration, what: String| {
            let seconds = wait.as_secs_f64().ceil().max(1.0) as u64;
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!("{what}; retry in {} ms", wait.as_millis()),
            )
            .with_field("retryAfter", serde_json::json!(seconds))
            .with_retry_after(seconds)
        };
        let requests = NonZeroU32::new(cells).unwrap_or(NonZeroU32::MIN);
        match self.requests.check_key_n(&key, requests) {
            Ok(Ok(())) => {}
            Ok(Err(not_until)) => {
                return Err(refuse(
                    not_until.wait_time_from(now),
                    format!(
                        "too many writes for this token (--rate-per-sec {})",
                        self.per_sec
                    ),
                ));
            }
            // Never: the burst holds a history write's cost.
            Err(_) => {
                return Err(refuse(
                    std::time::Duration::from_secs(1),
                    "too many writes".into(),
                ));
            }
        }
        let Some(bytes) = u32::try_from(bytes).ok().and_then(NonZeroU32::new) else {
            return Ok(());
        };
        match self.bytes.check_key_n(&key, bytes) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => Err(refuse(
                not_until.wait_time_from(now),
                format!(
                    "too many bytes written for this token (--rate-bytes-per-sec {})",
                    self.bytes_per_sec
                ),
            )),
            // Never: bodies are capped below the burst.
            Err(_) => Err(refuse(
                std::time::Duration::from_secs(1),
                "a write larger than the byte bucket".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(per_sec: u32, burst: u32, bytes_per_sec: u32) -> ServeConfig {
        ServeConfig {
            rate_per_sec: per_sec,
            rate_burst: burst,
            rate_bytes_per_sec: bytes_per_sec,
            max_message_bytes: 1024,
            ..ServeConfig::for_test()
        }
    }

    #[test]
    fn requests_are_metered_per_sub() {
        let rate = WriteRate::from_config(&config(1, 60, 1 << 20));
        for _ in 0..60 {
            rate.check("ada", WriteCost::Decision).unwrap();
        }
        let refused = rate.check("ada", WriteCost::Decision).unwrap_err();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.code(), "rate_limited");
        // Another token has its own bucket.
        rate.check("bob", WriteCost::Decision).unwrap();
    }

    #[test]
    fn history_writes_cost_more_and_bytes_are_metered() {
        let rate = WriteRate::from_config(&config(1, 100, 1));
        rate.check("ada", WriteCost::History).unwrap();
        rate.check("ada", WriteCost::History).unwrap();
        assert!(rate.check("ada", WriteCost::History).is_err());
        // The byte bucket holds one body of the largest size, then refuses.
        rate.check("bob", WriteCost::Body(super::super::error::MAX_BODY_BYTES))
            .unwrap();
        assert!(rate.check("bob", WriteCost::Body(10)).is_err());
    }
}
