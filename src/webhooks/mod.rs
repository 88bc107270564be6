//! Signed webhooks with a durable outbox (docs/webhooks.md): `room.updated`,
//! `fairy.request.ended` and `project.ended` POSTed to `--webhook-url`, at least once.
//!
//! # Layout
//! - [`events`]: the typed events and their JSON.
//! - [`signing`]: the `fairyring-signature` header (HMAC-SHA256 of `"{t}.{body}"`).
//! - `recorder`: what rooms and fairies hand over — a per-room coalescing cell of committed
//!   sequence numbers and actors (one `room.updated` per debounce window) and a bounded queue
//!   of the other events — written to the store's outbox by one task.
//! - `delivery`: the task that claims due events from the outbox (a lease, so that scaled out
//!   each event is sent by one node), POSTs them, and records the outcome: delivered, retried
//!   with exponential backoff and jitter, or dead-lettered after `--webhook-max-attempts`.
//! - [`bound`]: the outbox's bounds, kept by the delivery task: `--webhook-max-pending`
//!   (merging each room's oldest waiting `room.updated` into one, then dropping), dead letters
//!   pruned after `--webhook-dead-retention`, the `fairyring_webhook_outbox` gauge.
//!
//! Nothing here touches rooms or documents: rooms and fairies call [`Webhooks`]' narrow,
//! non-blocking methods; the outbox lives behind [`crate::store::outbox::Outbox`].

pub mod bound;
mod delivery;
pub mod events;
mod recorder;
pub mod signing;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use delivery::backoff;
pub use events::{ActorRef, Event, EventData, RequestUsage};
pub(crate) use recorder::MAX_ACTORS;

use crate::store::Store;

/// Why the webhook configuration was refused at start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// `--webhook-url` is not a URL.
    #[error("--webhook-url {0:?} is not a valid URL")]
    BadUrl(String),
    /// `--webhook-url` is not `http` or `https`.
    #[error("--webhook-url must be http or https, not {0:?}")]
    Scheme(String),
    /// `--webhook-url` without `--webhook-secret`: events would go out unsigned.
    #[error("--webhook-url needs a non-empty --webhook-secret")]
    MissingSecret,
    /// `--webhook-max-attempts` 0.
    #[error("--webhook-max-attempts must be at least 1")]
    NoAttempts,
    /// The HTTP client could not be built.
    #[error("could not build the webhook HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// Webhook settings from the server's configuration.
#[derive(Clone)]
pub struct WebhookSettings {
    /// Where events are POSTed (`http` or `https`).
    pub url: reqwest::Url,
    /// The signatures' key.
    pub secret: Arc<[u8]>,
    /// Quiet time after which a room's `room.updated` goes out.
    pub debounce: Duration,
    /// Attempts before an event is dead-lettered.
    pub max_attempts: u32,
    /// Delay before the first retry (doubled for each later one, with jitter).
    pub backoff: Duration,
    /// Most events waiting in the outbox (`--webhook-max-pending`; [`bound`]).
    pub max_pending: u64,
    /// How long dead letters are kept (`--webhook-dead-retention`; `None`: for ever).
    pub dead_retention: Option<Duration>,
}

impl std::fmt::Debug for WebhookSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSettings")
            .field("url", &crate::redact::url(self.url.as_str()))
            .field("debounce", &self.debounce)
            .field("max_attempts", &self.max_attempts)
            .field("backoff", &self.backoff)
            .finish_non_exhaustive()
    }
}

impl WebhookSettings {
    /// The settings of `--webhook-*`; `None` without `--webhook-url` (then nothing is ever
    /// written to the outbox).
    pub fn from_serve(config: &crate::config::ServeConfig) -> Result<Option<Self>, WebhookError> {
        let Some(raw) = config.webhook_url.as_deref() else {
            return Ok(None);
        };
        let url = reqwest::Url::parse(raw).map_err(|_| WebhookError::BadUrl(raw.to_owned()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(WebhookError::Scheme(url.scheme().to_owned()));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(WebhookError::BadUrl(crate::redact::url(raw)));
        }
        let secret = match config.webhook_secret.as_deref() {
            Some(secret) if !secret.is_empty() => Arc::from(secret.as_bytes()),
            _ => return Err(WebhookError::MissingSecret),
        };
        if config.webhook_max_attempts == 0 {
            return Err(WebhookError::NoAttempts);
        }
        Ok(Some(WebhookSettings {
            url,
            secret,
            debounce: Duration::from_millis(config.webhook_debounce_ms),
            max_attempts: config.webhook_max_attempts,
            backoff: Duration::from_millis(config.webhook_backoff_ms.max(1)),
            max_pending: config.webhook_max_pending.max(1),
            dead_retention: config.webhook_dead_retention.duration(),
        }))
    }
}

/// The running webhooks: what rooms and fairies record events through, and the two tasks
/// behind it. Cheap to clone.
#[derive(Clone)]
pub struct Webhooks {
    recorder: Arc<recorder::Recorder>,
    tasks: Arc<Tasks>,
}

struct Tasks {
    stop_recording: CancellationToken,
    stop_delivering: CancellationToken,
    handles: Mutex<Option<(JoinHandle<()>, JoinHandle<()>)>>,
}

impl Webhooks {
    /// Starts recording into `store`'s outbox and delivering from it.
    pub fn start(settings: WebhookSettings, store: Arc<dyn Store>) -> Result<Self, WebhookError> {
        let deliver = delivery::Delivery::new(&settings, store.clone())?;
        let wake = deliver.wake();
        let (recorder, queue) = recorder::Recorder::new(settings.debounce);
        let recorder = Arc::new(recorder);
        let stop_recording = CancellationToken::new();
        let stop_delivering = CancellationToken::new();
        let recording = tokio::spawn(recorder::run(
            recorder.clone(),
            queue,
            store,
            wake,
            stop_recording.clone(),
        ));
        let delivering = tokio::spawn(deliver.run(stop_delivering.clone()));
        tracing::info!(url = %crate::redact::url(settings.url.as_str()), debounce_ms = settings.debounce.as_millis() as u64, max_attempts = settings.max_attempts, "webhooks on");
        Ok(Webhooks {
            recorder,
            tasks: Arc::new(Tasks {
                stop_recording,
                stop_delivering,
                handles: Mutex::new(Some((recording, delivering))),
            }),
        })
    }

    /// A room committed updates `first_seq..=last_seq` written by `actors` (in the room's
    /// committer: a short critical section, never an await).
    pub(crate) fn room_committed<'a>(
        &self,
        room: &crate::ids::RoomName,
        first_seq: u64,
        last_seq: u64,
        actors: impl IntoIterator<Item = Option<&'a Arc<str>>>,
    ) {
        self.recorder.committed(room, first_seq, last_seq, actors);
    }

    /// A fairy's request ended.
    pub(crate) fn fairy_request_ended(
        &self,
        room: &crate::ids::RoomName,
        fairy_id: &str,
        request_id: &str,
        reason: &str,
        usage: RequestUsage,
    ) {
        self.record(
            room,
            EventData::FairyRequestEnded {
                fairy_id: fairy_id.to_owned(),
                request_id: request_id.to_owned(),
                reason: reason.to_owned(),
                usage,
            },
        );
    }

    /// A fairies' project ended with `status` (`done`, `aborted`).
    pub(crate) fn project_ended(
        &self,
        room: &crate::ids::RoomName,
        project_id: &str,
        status: &str,
    ) {
        self.record(
            room,
            EventData::ProjectEnded {
                project_id: project_id.to_owned(),
                status: status.to_owned(),
            },
        );
    }

    /// Queues an event of `room` made now (never waits).
    fn record(&self, room: &crate::ids::RoomName, data: EventData) {
        let at = crate::store::now_millis();
        self.recorder.record(Event::new(room.as_str(), at, data));
    }

    /// Records every open window and queued event now, then stops both tasks (attempts in
    /// flight give their claims back). Called once the rooms have flushed and before the
    /// store closes; later calls return at once.
    pub async fn finish(&self) {
        let handles = self
            .tasks
            .handles
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let Some((recording, delivering)) = handles else {
            return;
        };
        self.tasks.stop_recording.cancel();
        let _ = recording.await;
        self.tasks.stop_delivering.cancel();
        let _ = delivering.await;
    }
}
