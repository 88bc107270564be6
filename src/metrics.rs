//! Prometheus metrics (text exposition via the `prometheus-client` crate).
//!
//! Owns the process-wide metric set and its rendering for `GET /metrics`. Other modules only
//! increment what is here; this module knows nothing about rooms or sockets.

use std::sync::OnceLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Label set naming why a connection was refused or closed, or what was dropped.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    /// A short stable snake_case reason (`malformed`, `too_big`, `slow_consumer`, …).
    pub reason: String,
}

/// What kind of write for a fairy the store refused ([`Metrics::fairy_fenced_writes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FencedWrite {
    /// A commit of the room's log holding the fairy's document updates.
    Commit,
    /// A save of the fairy's private state.
    State,
}

impl FencedWrite {
    /// The metric's `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            FencedWrite::Commit => "commit",
            FencedWrite::State => "state",
        }
    }
}

/// Every metric the server exports.
pub struct Metrics {
    registry: Registry,
    /// Rooms currently loaded in memory.
    pub rooms_loaded: Gauge,
    /// Open WebSocket connections.
    pub connections: Gauge,
    /// Document updates received from peers and applied.
    pub updates_in: Counter,
    /// Document update frames sent to peers.
    pub updates_out: Counter,
    /// WebSocket payload bytes received.
    pub bytes_in: Counter,
    /// WebSocket payload bytes sent.
    pub bytes_out: Counter,
    /// Awareness messages received.
    pub awareness_in: Counter,
    /// Seconds per store commit (one group commit).
    pub store_commit_seconds: Histogram,
    /// Connections closed by the server, by reason.
    pub closed: Family<ReasonLabel, Counter>,
    /// Connections refused before the upgrade, by reason.
    pub refused: Family<ReasonLabel, Counter>,
    /// Messages dropped without closing the connection (e.g. updates from read-only peers).
    pub dropped: Family<ReasonLabel, Counter>,
    /// Fairy requests ended, by reason (`done`, `cancelled`, `interrupted`, `error`, …).
    pub fairy_requests: Family<ReasonLabel, Counter>,
    /// Complete fairy actions, by outcome (`accepted`, `rejected`).
    pub fairy_actions: Family<ReasonLabel, Counter>,
    /// Model turns fairies ran (a request runs one or more).
    pub fairy_turns: Counter,
    /// Shapes changed by fairies' complete canvas actions (what the rooms' fairy write budgets
    /// meter; streamed versions are previews and not counted).
    pub fairy_shape_writes: Counter,
    /// Complete canvas actions fairies committed (the shapes they drew, moved, deleted…).
    pub fairy_canvas_actions: Counter,
    /// Model tokens used by fairies, by kind (`input` uncached, `output`, `cache_read`,
    /// `cache_write`).
    pub model_tokens: Family<ReasonLabel, Counter>,
    /// Fairy model calls that failed after their retries.
    pub model_errors: Counter,
    /// Room messages between nodes (updates, awareness), by direction (`in`, `out`,
    /// `dropped`).
    pub pubsub_messages: Family<ReasonLabel, Counter>,
    /// Payload bytes of room messages between nodes, by direction (`in`, `out`).
    pub pubsub_bytes: Family<ReasonLabel, Counter>,
    /// Node heartbeats (and leavings), by direction (`in`, `out`, `dropped`).
    pub pubsub_heartbeats: Family<ReasonLabel, Counter>,
    /// Catch-ups of a room from the store after missed pub/sub messages.
    pub pubsub_catchups: Counter,
    /// Fairy leases this node took over from another node (docs/scaling.md "Fairies").
    pub fairy_lease_moves: Counter,
    /// Writes for a fairy the store refused, by [`FencedWrite`]: the fairy's fencing token was
    /// stale (docs/scaling.md "Fencing").
    pub fairy_fenced_writes: Family<ReasonLabel, Counter>,
    /// Renders (exports, screenshots) ended, by outcome ([`RenderOutcome`]).
    pub renders: Family<ReasonLabel, Counter>,
    /// Wall-clock time of one render, from its start on the pool to its answer.
    pub render_seconds: Histogram,
    /// Webhook delivery attempts by outcome (`ok`, `retry`, `dead`), and events lost before
    /// the outbox took them (`dropped`).
    pub webhook_deliveries: Family<ReasonLabel, Counter>,
    /// Webhook events in the outbox by state (`pending`, `dead`), as last counted.
    pub webhook_outbox: Family<ReasonLabel, Gauge>,
    /// History replays (versions, documents, pages, restores, rollbacks) by state: `held`
    /// (a replay permit taken: replaying, building or sending an answer), `waiting` (for one).
    pub history_replays: Family<ReasonLabel, Gauge>,
}

/// How a render ended, for [`Metrics::count_render`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenderOutcome {
    /// Drawn and answered.
    Ok,
    /// No slot was free in time.
    Busy,
    /// Ran past its budget.
    TimedOut,
    /// Its caller went away or the server shut down.
    Cancelled,
    /// Failed otherwise.
    Failed,
}

impl RenderOutcome {
    /// The metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            RenderOutcome::Ok => "ok",
            RenderOutcome::Busy => "busy",
            RenderOutcome::TimedOut => "timed_out",
            RenderOutcome::Cancelled => "cancelled",
            RenderOutcome::Failed => "failed",
        }
    }
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("fairyring");
        let m = Metrics {
            rooms_loaded: Gauge::default(),
            connections: Gauge::default(),
            updates_in: Counter::default(),
            updates_out: Counter::default(),
            bytes_in: Counter::default(),
            bytes_out: Counter::default(),
            awareness_in: Counter::default(),
            store_commit_seconds: Histogram::new(exponential_buckets(0.0001, 2.0, 16)),
            closed: Family::default(),
            refused: Family::default(),
            dropped: Family::default(),
            fairy_requests: Family::default(),
            fairy_actions: Family::default(),
            fairy_turns: Counter::default(),
            fairy_shape_writes: Counter::default(),
            fairy_canvas_actions: Counter::default(),
            model_tokens: Family::default(),
            model_errors: Counter::default(),
            pubsub_messages: Family::default(),
            pubsub_bytes: Family::default(),
            pubsub_heartbeats: Family::default(),
            pubsub_catchups: Counter::default(),
            fairy_lease_moves: Counter::default(),
            fairy_fenced_writes: Family::default(),
            renders: Family::default(),
            render_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 14)),
            webhook_deliveries: Family::default(),
            webhook_outbox: Family::default(),
            history_replays: Family::default(),
            registry: Registry::default(),
        };
        registry.register(
            "rooms_loaded",
            "Rooms loaded in memory",
            m.rooms_loaded.clone(),
        );
        registry.register(
            "connections",
            "Open WebSocket connections",
            m.connections.clone(),
        );
        registry.register(
            "updates_in",
            "Document updates applied from peers",
            m.updates_in.clone(),
        );
        registry.register(
            "updates_out",
            "Document update frames sent to peers",
            m.updates_out.clone(),
        );
        registry.register(
            "bytes_in",
            "WebSocket payload bytes received",
            m.bytes_in.clone(),
        );
        registry.register(
            "bytes_out",
            "WebSocket payload bytes sent",
            m.bytes_out.clone(),
        );
        registry.register(
            "awareness_in",
            "Awareness messages received",
            m.awareness_in.clone(),
        );
        registry.register(
            "store_commit_seconds",
            "Latency of one store group commit",
            m.store_commit_seconds.clone(),
        );
        registry.register(
            "connections_closed",
            "Connections closed by the server",
            m.closed.clone(),
        );
        registry.register(
            "connections_refused",
            "Connections refused before upgrade",
            m.refused.clone(),
        );
        registry.register(
            "messages_dropped",
            "Messages dropped without closing",
            m.dropped.clone(),
        );
        registry.register(
            "fairy_requests",
            "Fairy requests ended, by reason",
            m.fairy_requests.clone(),
        );
        registry.register(
            "fairy_actions",
            "Complete fairy actions, by outcome",
            m.fairy_actions.clone(),
        );
        registry.register(
            "fairy_turns",
            "Model turns run by fairies",
            m.fairy_turns.clone(),
        );
        registry.register(
            "fairy_shape_writes",
            "Shapes changed by fairies' complete canvas actions",
            m.fairy_shape_writes.clone(),
        );
        registry.register(
            "fairy_canvas_actions",
            "Complete canvas actions committed by fairies",
            m.fairy_canvas_actions.clone(),
        );
        registry.register(
            "model_tokens",
            "Model tokens used by fairies, by kind",
            m.model_tokens.clone(),
        );
        registry.register(
            "model_errors",
            "Fairy model calls failed after retries",
            m.model_errors.clone(),
        );
        registry.register(
            "pubsub_messages",
            "Room messages between nodes (updates, awareness), by direction",
            m.pubsub_messages.clone(),
        );
        registry.register(
            "pubsub_bytes",
            "Payload bytes of room messages between nodes, by direction",
            m.pubsub_bytes.clone(),
        );
        registry.register(
            "pubsub_heartbeats",
            "Node heartbeats between nodes, by direction",
            m.pubsub_heartbeats.clone(),
        );
        registry.register(
            "pubsub_catchups",
            "Room catch-ups from the store after missed pub/sub messages",
            m.pubsub_catchups.clone(),
        );
        registry.register(
            "fairy_lease_moves",
            "Fairy leases taken over from another node",
            m.fairy_lease_moves.clone(),
        );
        registry.register(
            "fairy_fenced_writes",
            "Writes for a fairy the store refused (a stale fencing token), by kind",
            m.fairy_fenced_writes.clone(),
        );
        registry.register(
            "renders",
            "Renders (exports, fairy screenshots) ended, by outcome",
            m.renders.clone(),
        );
        registry.register(
            "render_seconds",
            "Wall-clock time of one render",
            m.render_seconds.clone(),
        );
        registry.register(
            "webhook_deliveries",
            "Webhook delivery attempts by outcome (ok, retry, dead; dropped: never recorded)",
            m.webhook_deliveries.clone(),
        );
        registry.register(
            "webhook_outbox",
            "Webhook events in the outbox (reason: pending, dead), as last counted",
            m.webhook_outbox.clone(),
        );
        registry.register(
            "history_replays",
            "History replays by state (reason: held, waiting); a held one keeps its permit until its answer is sent",
            m.history_replays.clone(),
        );
        Metrics { registry, ..m }
    }

    /// Counts one event of a labelled fairy/model counter.
    pub fn count(family: &Family<ReasonLabel, Counter>, label: &str, n: u64) {
        family
            .get_or_create(&ReasonLabel {
                reason: label.to_owned(),
            })
            .inc_by(n);
    }

    /// Counts the input and output tokens of one model call (metrics names no model type:
    /// callers pass the counts).
    pub fn count_model_tokens(&self, input: u64, output: u64) {
        Self::count(&self.model_tokens, "input", input);
        Self::count(&self.model_tokens, "output", output);
    }

    /// Counts the prompt tokens one model call read from and wrote to the provider's cache
    /// (kinds `cache_read`, `cache_write`; `input` counts the uncached ones).
    pub fn count_cache_tokens(&self, read: u64, written: u64) {
        Self::count(&self.model_tokens, "cache_read", read);
        Self::count(&self.model_tokens, "cache_write", written);
    }

    /// Counts one write for a fairy the store refused (a stale fencing token).
    pub fn count_fenced(&self, write: FencedWrite) {
        Self::count(&self.fairy_fenced_writes, write.as_str(), 1);
    }

    /// Counts one ended render and its time.
    pub fn count_render(&self, outcome: RenderOutcome, seconds: f64) {
        Self::count(&self.renders, outcome.as_str(), 1);
        if outcome != RenderOutcome::Busy {
            self.render_seconds.observe(seconds);
        }
    }

    /// The gauge of history replays in `state` (`held`, `waiting`).
    pub fn history_replays(&self, state: &str) -> Gauge {
        self.history_replays
            .get_or_create(&ReasonLabel {
                reason: state.to_owned(),
            })
            .clone()
    }

    /// Counts a server-side close.
    pub fn close(&self, reason: &str) {
        self.closed
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Counts a refusal before the upgrade.
    pub fn refuse(&self, reason: &str) {
        self.refused
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Counts a dropped message.
    pub fn drop_message(&self, reason: &str) {
        self.dropped
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Renders the Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The process-wide metrics.
pub fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

#[cfg(test)]
mod tests {
    #[test]
    fn renders_prometheus_text() {
        let m = super::global();
        m.updates_in.inc();
        m.close("malformed");
        let text = m.render();
        assert!(
            text.contains("# TYPE fairyring_updates_in counter"),
            "{text}"
        );
        assert!(
            text.contains("fairyring_connections_closed_total{reason=\"malformed\"}"),
            "{text}"
        );
        assert!(
            text.contains("fairyring_store_commit_seconds_bucket"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"));
    }
}
