//! The limits and timings of rooms ([`RoomConfig`]), taken from the server's configuration.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::SharedClock;
use crate::ids::RoomName;
use crate::room::SERVER_CLIENT_ID;
use crate::store::Store;

/// Takes a room's history checkpoints (docs/storage.md "History"): the committer says when
/// (every `--history-checkpoint-every` updates), the history says how
/// (`crate::history::checkpoint`). Given to the rooms by whoever builds them (the server
/// does, [`RoomConfig::checkpoints`]), so that the room does not depend on the history, which
/// reads rooms.
#[async_trait::async_trait]
pub trait Checkpoints: Send + Sync + 'static {
    /// Makes sure room `room` has a checkpoint at most `every` updates behind `upto` (the last
    /// update the caller knows the store holds); returns the sequence number the next
    /// checkpoint counts from.
    async fn take(&self, store: &Arc<dyn Store>, room: &RoomName, upto: u64, every: u64) -> u64;
}

/// Limits and timings of rooms (from [`crate::config::ServeConfig`]).
#[derive(Clone)]
pub struct RoomConfig {
    /// Outbound frames queued per peer before it is closed.
    pub outbound_queue: usize,
    /// Updates queued for commit before producers wait.
    pub pending_capacity: usize,
    /// Time per peer between the starts of two commits (`--coalesce-us-per-peer`; capped by
    /// [`MAX_COALESCE`](crate::room::MAX_COALESCE)); zero: commit as soon as the committer is free.
    pub coalesce_per_peer: Duration,
    /// Most peers per room.
    pub max_peers: usize,
    /// Idle time before an unused room is unloaded.
    pub idle_unload: Duration,
    /// Log length that triggers compaction into a snapshot.
    pub compact_every: u64,
    /// Awareness states not renewed for this long are removed (y-protocols: 30 s).
    pub awareness_timeout: Duration,
    /// Largest awareness state a peer may set, in bytes of its JSON.
    pub max_awareness_bytes: usize,
    /// How often the committer checks timeouts and idleness.
    pub sweep_every: Duration,
    /// The room's clock ([`crate::clock`]): awareness timestamps (its wall-clock
    /// milliseconds), the idle time before unloading and the committer's reconcile schedule
    /// (its instants); injected in tests.
    pub clock: SharedClock,
    /// The fan-out to the other nodes (`--pubsub`); `None` on a single node.
    pub fanout: Option<Arc<crate::pubsub::Fanout>>,
    /// Shape changes the fairies of one room may write per second (`--fairy-writes-per-sec`);
    /// 0: no limit.
    pub fairy_writes_per_sec: u32,
    /// Updates between two history checkpoints (`--history-checkpoint-every`; 0: none).
    pub history_checkpoint_every: u64,
    /// Who takes those checkpoints (the server gives the history's); `None`: nobody, and
    /// none are taken.
    pub checkpoints: Option<Arc<dyn Checkpoints>>,
    /// Largest encoded document a room may hold (`--max-doc-bytes`; 0: no cap).
    pub max_doc_bytes: u64,
    /// Where committed updates and fairies' events are reported (`--webhook-url`); `None`:
    /// nowhere, and nothing is recorded.
    pub webhooks: Option<crate::webhooks::Webhooks>,
    /// The yrs client id of this process's own writes into room documents
    /// ([`SERVER_CLIENT_ID`] on a single node; scaled out, one of this node's own from the
    /// store, `Store::writer_client_id`): two nodes writing one room at once must never make
    /// the same item id, or their documents would diverge.
    pub client_id: u64,
}

impl RoomConfig {
    /// Room settings from the server configuration, with the system clock.
    pub fn from_serve(config: &crate::config::ServeConfig) -> Self {
        RoomConfig {
            outbound_queue: config.outbound_queue.max(1),
            pending_capacity: 4096,
            coalesce_per_peer: Duration::from_micros(config.coalesce_us_per_peer),
            max_peers: config.max_connections_per_room,
            idle_unload: config.idle_unload_after(),
            compact_every: config.compact_every.max(1),
            awareness_timeout: Duration::from_secs(30),
            max_awareness_bytes: config.max_awareness_bytes,
            sweep_every: Duration::from_secs(1),
            clock: crate::clock::system(),
            fanout: None,
            fairy_writes_per_sec: config.fairy_writes_per_sec,
            history_checkpoint_every: config.history_checkpoint_every,
            checkpoints: None,
            max_doc_bytes: config.max_doc_bytes,
            webhooks: None,
            client_id: SERVER_CLIENT_ID,
        }
    }
}
