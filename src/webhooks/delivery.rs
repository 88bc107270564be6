//! Delivery of the outbox's events to `--webhook-url`, at least once.
//!
//! Owns the delivery task: it claims due events from the store's outbox with a lease (so that
//! scaled out each event is sent by one node at a time, and one whose node died is sent again
//! once the lease ends), POSTs each signed, at most [`IN_FLIGHT`] at once, and records the
//! outcome: a 2xx answer deletes the event; a non-2xx answer, a timeout ([`TIMEOUT`]) or a
//! connection that fails schedules the next attempt after [`backoff`]; the last allowed attempt
//! keeps it as a dead letter. The receiver's answer is read at most [`ANSWER_CAP`] bytes
//! (for the log). Every [`UPKEEP_EVERY`] it keeps the outbox's bounds ([`super::bound`]).
//! Errors it logs or keeps as `last_error` never quote the URL's user, password or query
//! ([`crate::redact`]). It must not touch rooms, nor decode what it sends.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, USER_AGENT};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::signing::{EVENT_ID_HEADER, SIGNATURE_HEADER, sign};
use super::{WebhookError, WebhookSettings};
use crate::store::outbox::Claimed;
use crate::store::{Store, now_millis};

/// How long one attempt may take, from connecting to the end of the answer's head.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// How long a claim keeps other nodes off an event: longer than an attempt can take.
const LEASE: Duration = Duration::from_secs(60);
/// Attempts in flight at once (a slow receiver holds at most this many).
const IN_FLIGHT: usize = 8;
/// How often the outbox is looked at when nothing is due (events other nodes recorded, claims
/// of a dead node that ended).
const POLL: Duration = Duration::from_secs(1);
/// Bytes of the receiver's answer read (into the log) at most.
pub const ANSWER_CAP: usize = 1024;
/// How long an attempt in flight at shutdown may still take before it is abandoned (its
/// claim given back): a receiver that answers at once is not sent the event again.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// How often the outbox's bounds are kept ([`super::bound::upkeep`]).
const UPKEEP_EVERY: Duration = Duration::from_secs(5);
/// The longest wait between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// Why an attempt failed.
#[derive(Debug, thiserror::Error)]
enum AttemptError {
    /// No answer: refused, reset, timed out.
    #[error("no answer: {0}")]
    Send(String),
    /// An answer that is not 2xx.
    #[error("answered {status}: {excerpt}")]
    Status {
        /// Its status code.
        status: u16,
        /// The start of its body.
        excerpt: String,
    },
}

/// The wait before attempt `attempt + 1` after `attempt` failed attempts (1-based): `base`
/// doubled for each earlier failure, at most [`MAX_BACKOFF`], of which the upper half is
/// scaled by `jitter` (0..1): "equal jitter", so that receivers that come back are not hit by
/// every node's retries at once, and no retry comes sooner than half the exponential wait.
pub fn backoff(base: Duration, attempt: u32, jitter: f64) -> Duration {
    let doublings = attempt.saturating_sub(1).min(30);
    let wait = base.saturating_mul(1u32 << doublings).min(MAX_BACKOFF);
    let half = wait / 2;
    half + half.mul_f64(jitter.clamp(0.0, 1.0))
}

/// The delivery task's settings and client.
pub(crate) struct Delivery {
    client: reqwest::Client,
    url: reqwest::Url,
    secret: Arc<[u8]>,
    max_attempts: u32,
    backoff: Duration,
    store: Arc<dyn Store>,
    wake: Arc<Notify>,
    max_pending: u64,
    dead_retention: Option<Duration>,
}

impl Delivery {
    pub fn new(settings: &WebhookSettings, store: Arc<dyn Store>) -> Result<Self, WebhookError> {
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            // A receiver's redirect is not followed: events go to the configured URL only.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Delivery {
            client,
            url: settings.url.clone(),
            secret: settings.secret.clone(),
            max_attempts: settings.max_attempts,
            backoff: settings.backoff,
            store,
            wake: Arc::new(Notify::new()),
            max_pending: settings.max_pending,
            dead_retention: settings.dead_retention,
        })
    }

    /// What the recorder notifies when it wrote an event.
    pub fn wake(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Delivers until `stop`; attempts in flight then finish within [`SHUTDOWN_GRACE`] or
    /// give their claims back.
    pub async fn run(self, stop: CancellationToken) {
        let this = Arc::new(self);
        let mut in_flight: JoinSet<()> = JoinSet::new();
        let mut next_upkeep = tokio::time::Instant::now();
        loop {
            if tokio::time::Instant::now() >= next_upkeep {
                next_upkeep = tokio::time::Instant::now() + UPKEEP_EVERY;
                if let Err(error) =
                    super::bound::upkeep(&this.store, this.max_pending, this.dead_retention).await
                {
                    tracing::warn!(%error, "webhook outbox upkeep failed; will retry");
                }
            }
            let free = IN_FLIGHT.saturating_sub(in_flight.len());
            let mut full = free == 0;
            if free > 0 {
                let now = now_millis();
                let lease_ms = u64::try_from(LEASE.as_millis()).unwrap_or(u64::MAX);
                match this.store.outbox().claim(now, now + lease_ms, free).await {
                    Ok(claimed) => {
                        full = claimed.len() == free;
                        for event in claimed {
                            in_flight.spawn(this.clone().attempt(event, stop.clone()));
                        }
                    }
                    Err(error) => tracing::warn!(%error, "webhook outbox not readable; retrying"),
                }
            }
            let wait = if full { POLL } else { this.until_due().await };
            tokio::select! {
                _ = stop.cancelled() => break,
                Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
                _ = this.wake.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
        while in_flight.join_next().await.is_some() {}
    }

    /// How long until the next event is due (at most [`POLL`], at least a few milliseconds).
    async fn until_due(&self) -> Duration {
        match self.store.outbox().next_due().await {
            Ok(Some(due)) => Duration::from_millis(due.saturating_sub(now_millis())),
            Ok(None) | Err(_) => POLL,
        }
        .clamp(Duration::from_millis(5), POLL)
    }

    /// One attempt at one event, and its outcome recorded.
    async fn attempt(self: Arc<Self>, event: Claimed, stop: CancellationToken) {
        let shutdown = async {
            stop.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        };
        let outcome = tokio::select! {
            outcome = self.post(&event) => outcome,
            _ = shutdown => {
                // Shutdown: the claim goes back at once (a restarted node sends it again).
                if let Err(error) = self
                    .store
                    .outbox()
                    .retry_at(&event.id, event.attempts, now_millis(), "shutdown")
                    .await
                {
                    tracing::debug!(id = %event.id, %error, "webhook claim not released; it ends with its lease");
                }
                return;
            }
        };
        let attempts = event.attempts.saturating_add(1);
        let outbox = self.store.outbox();
        // What is logged and kept as `last_error` never quotes the URL's secrets.
        let outcome =
            outcome.map_err(|error| crate::redact::text(&error.to_string(), self.url.as_str()));
        let recorded = match outcome {
            Ok(()) => {
                count("ok");
                tracing::debug!(id = %event.id, attempts, "webhook delivered");
                outbox.delivered(&event.id).await
            }
            Err(error) if attempts >= self.max_attempts => {
                count("dead");
                tracing::warn!(id = %event.id, attempts, %error, "webhook dead-lettered after its last attempt");
                outbox.dead(&event.id, attempts, now_millis(), &error).await
            }
            Err(error) => {
                count("retry");
                let wait = backoff(self.backoff, attempts, rand::random::<f64>());
                tracing::info!(id = %event.id, attempts, %error, retry_in_ms = wait.as_millis() as u64, "webhook attempt failed; will retry");
                let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                outbox
                    .retry_at(
                        &event.id,
                        attempts,
                        now_millis().saturating_add(wait_ms),
                        &error,
                    )
                    .await
            }
        };
        if let Err(error) = recorded {
            // The event stays claimed until its lease ends, then is sent again (at least once).
            tracing::warn!(id = %event.id, %error, "webhook outcome not recorded");
        }
    }

    /// POSTs one event, signed now.
    async fn post(&self, event: &Claimed) -> Result<(), AttemptError> {
        let t = now_millis() / 1000;
        let answer = self
            .client
            .post(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(
                USER_AGENT,
                concat!("fairyring-webhooks/", env!("CARGO_PKG_VERSION")),
            )
            .header(EVENT_ID_HEADER, &event.id)
            .header(SIGNATURE_HEADER, sign(&self.secret, t, &event.body))
            .body(event.body.clone())
            .send()
            .await
            .map_err(|error| {
                let chain = error_chain(&error.without_url());
                AttemptError::Send(crate::redact::text(&chain, self.url.as_str()))
            })?;
        let status = answer.status();
        if status.is_success() {
            return Ok(());
        }
        Err(AttemptError::Status {
            status: status.as_u16(),
            excerpt: excerpt(answer).await,
        })
    }
}

/// The start of an answer's body (at most [`ANSWER_CAP`] bytes read), as text.
async fn excerpt(mut answer: reqwest::Response) -> String {
    let mut read = Vec::new();
    while read.len() < ANSWER_CAP {
        match answer.chunk().await {
            Ok(Some(chunk)) => {
                let take = chunk.len().min(ANSWER_CAP - read.len());
                read.extend_from_slice(&chunk[..take]);
            }
            Ok(None) | Err(_) => break,
        }
    }
    String::from_utf8_lossy(&read).chars().take(200).collect()
}

/// An error with its causes (reqwest's own message says little: "error sending request").
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn count(reason: &str) {
    crate::metrics::Metrics::count(&crate::metrics::global().webhook_deliveries, reason, 1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_equal_jitter_and_a_cap() {
        let base = Duration::from_secs(1);
        assert_eq!(backoff(base, 1, 0.0), Duration::from_millis(500));
        assert_eq!(backoff(base, 1, 1.0), Duration::from_secs(1));
        assert_eq!(backoff(base, 2, 0.0), Duration::from_secs(1));
        assert_eq!(backoff(base, 4, 1.0), Duration::from_secs(8));
        for attempt in 1..12 {
            let low = backoff(base, attempt, 0.0);
            let high = backoff(base, attempt, 1.0);
            assert!(low <= high && high <= MAX_BACKOFF);
            assert!(
                backoff(base, attempt + 1, 0.0) >= low,
                "never shorter than before"
            );
            let some = backoff(base, attempt, 0.37);
            assert!(low <= some && some <= high);
        }
        assert_eq!(backoff(base, 1_000, 1.0), MAX_BACKOFF);
        assert_eq!(backoff(base, 0, 1.0), base, "attempt 0 reads as the first");
        assert_eq!(
            backoff(base, 3, 7.0),
            backoff(base, 3, 1.0),
            "jitter clamped"
        );
    }
}
