//! Fan-out between the nodes of a scale-out deployment (`--pubsub redis://…`; docs/scaling.md).
//!
//! Owns the node's identity, the per-room subscriptions rooms take before they load, the
//! dispatch of what other nodes publish to those subscriptions, node liveness (heartbeats, and
//! the nodes presumed dead when theirs stop), and the bounded outbound queue to the transport
//! ([`redis`]). It carries speed only: the store carries truth, so anything lost here (a Redis
//! restart, a dropped subscription, a full queue) is noticed by the rooms and caught up from the
//! store. It knows nothing of documents, peers or sockets: rooms decide what the messages mean.
//!
//! # Layout
//! - [`wire`]: the binary messages.
//! - [`redis`]: the Redis transport (publisher, subscriber, heartbeats, reconnection).
//! - [`lease`]: which node hosts each fairy (leases in Redis).

pub mod lease;
pub mod redis;
pub mod wire;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

pub use wire::{Envelope, NodeId};

use crate::room::RoomName;

/// Messages queued for one room before it counts as a slow consumer (and catches up).
const ROOM_QUEUE: usize = 1024;
/// Messages queued for the transport before new ones are dropped (and counted).
const OUT_QUEUE: usize = 8192;
/// How often a node says it is alive.
pub const HEARTBEAT_EVERY: Duration = Duration::from_millis(1000);
/// A node not heard from for this long is presumed dead: its peers' states are removed.
pub const NODE_TIMEOUT: Duration = Duration::from_millis(3500);

/// Errors of the pub/sub layer.
#[derive(Debug, thiserror::Error)]
pub enum PubSubError {
    /// The `--pubsub` URL is not one this build understands.
    #[error("unsupported pubsub url {0:?}: expected redis://HOST:PORT")]
    UnsupportedUrl(String),
    /// The `--pubsub-prefix` is not `[A-Za-z0-9._-]+`.
    #[error("invalid pubsub prefix {0:?}: expected 1-64 of [A-Za-z0-9._-]")]
    InvalidPrefix(String),
    /// Redis refused or failed.
    #[error("redis: {0}")]
    Redis(#[from] ::redis::RedisError),
}

/// The key and channel prefix of one deployment: `[A-Za-z0-9._-]{1,64}` (no glob characters,
/// since subscriptions are patterns under it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefix(String);

impl Prefix {
    /// Validates a prefix.
    pub fn parse(text: &str) -> Result<Self, PubSubError> {
        let ok = !text.is_empty()
            && text.len() <= 64
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if ok {
            Ok(Prefix(text.to_owned()))
        } else {
            Err(PubSubError::InvalidPrefix(text.to_owned()))
        }
    }

    /// The channel of a room's messages.
    pub fn room_channel(&self, room: &RoomName) -> String {
        format!("{}:room:{}", self.0, room.as_str())
    }

    /// The pattern matching every room channel.
    pub fn room_pattern(&self) -> String {
        format!("{}:room:*", self.0)
    }

    /// The channel of heartbeats.
    pub fn nodes_channel(&self) -> String {
        format!("{}:nodes", self.0)
    }

    /// The room a channel belongs to, if it is one of this prefix's room channels.
    pub fn room_of(&self, channel: &str) -> Option<RoomName> {
        let name = channel.strip_prefix(&self.0)?.strip_prefix(":room:")?;
        RoomName::parse(name).ok()
    }

    /// The prefix.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a room hears from the other nodes.
#[derive(Debug)]
pub enum Inbound {
    /// Updates another node made durable (sequence numbers `first..=last`).
    Update {
        first_seq: u64,
        last_seq: u64,
        updates: Vec<Bytes>,
    },
    /// An awareness update from another node's peers.
    Awareness { node: NodeId, update: Bytes },
    /// Another node asks for this node's peers' awareness states.
    AwarenessQuery,
    /// A node stopped (or stopped beating): its peers' states must go.
    NodeGone(NodeId),
    /// Messages may have been missed (a dropped subscription, a full queue): catch up from the
    /// store and ask for awareness again.
    Lagged,
}

/// Counts pub/sub messages in `/metrics` by direction (`in`, `out`, `dropped`).
fn count(direction: &str, n: u64) {
    let metrics = crate::metrics::global();
    crate::metrics::Metrics::count(&metrics.pubsub_messages, direction, n);
}

struct RoomSub {
    id: u64,
    tx: mpsc::Sender<Inbound>,
    lag: Arc<Lag>,
}

#[derive(Default)]
struct Lag {
    flag: AtomicBool,
    notify: Notify,
}

impl Lag {
    fn raise(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }
}

/// The node's fan-out: subscriptions by room, liveness of other nodes, the outbound queue.
pub struct Fanout {
    node: NodeId,
    prefix: Prefix,
    rooms: Mutex<HashMap<RoomName, Vec<RoomSub>>>,
    nodes: Mutex<HashMap<NodeId, Instant>>,
    next_sub: AtomicU64,
    out: mpsc::Sender<(String, Bytes)>,
    connected: AtomicBool,
}

impl Fanout {
    /// A fan-out with its outbound queue (drained by the transport).
    fn new(node: NodeId, prefix: Prefix) -> (Arc<Self>, mpsc::Receiver<(String, Bytes)>) {
        let (out, rx) = mpsc::channel(OUT_QUEUE);
        let fanout = Arc::new(Fanout {
            node,
            prefix,
            rooms: Mutex::new(HashMap::new()),
            nodes: Mutex::new(HashMap::new()),
            next_sub: AtomicU64::new(1),
            out,
            connected: AtomicBool::new(false),
        });
        (fanout, rx)
    }

    /// This node's id.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// Whether the subscription to the other nodes is up (for `/healthz`).
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }

    fn lock_rooms(&self) -> MutexGuard<'_, HashMap<RoomName, Vec<RoomSub>>> {
        self.rooms.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_nodes(&self) -> MutexGuard<'_, HashMap<NodeId, Instant>> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Subscribes to a room's messages from the other nodes. Taken before the room loads from
    /// the store, so nothing published meanwhile is missed: the room skips what its load
    /// already contained.
    pub fn subscribe(self: &Arc<Self>, room: &RoomName) -> Subscription {
        let (tx, rx) = mpsc::channel(ROOM_QUEUE);
        let lag = Arc::new(Lag::default());
        let id = self.next_sub.fetch_add(1, Ordering::Relaxed);
        self.lock_rooms()
            .entry(room.clone())
            .or_default()
            .push(RoomSub {
                id,
                tx,
                lag: lag.clone(),
            });
        Subscription {
            fanout: self.clone(),
            room: room.clone(),
            id,
            rx,
            lag,
        }
    }

    /// Publishes a message about a room to the other nodes. Never waits: when the transport is
    /// behind, the message is dropped and counted (the other nodes notice the gap).
    pub fn publish(&self, room: &RoomName, envelope: &Envelope) {
        self.send(self.prefix.room_channel(room), envelope);
    }

    fn send(&self, channel: String, envelope: &Envelope) {
        match self.out.try_send((channel, envelope.encode())) {
            Ok(()) => {}
            Err(_) => count("dropped", 1),
        }
    }

    /// Hands a message received on a room channel to the room's subscriptions.
    fn dispatch_room(&self, room: &RoomName, envelope: Envelope) {
        let node = envelope.node();
        if node == self.node {
            return;
        }
        count("in", 1);
        self.saw(node);
        let inbound = match envelope {
            Envelope::Update {
                first_seq,
                last_seq,
                updates,
                ..
            } => Inbound::Update {
                first_seq,
                last_seq,
                updates,
            },
            Envelope::Awareness { node, update } => Inbound::Awareness { node, update },
            Envelope::AwarenessQuery { .. } => Inbound::AwarenessQuery,
            Envelope::Heartbeat { .. } | Envelope::Leaving { .. } => return,
        };
        let rooms = self.lock_rooms();
        let Some(subs) = rooms.get(room) else {
            return;
        };
        match subs.as_slice() {
            [] => {}
            [only] => deliver(only, inbound),
            // A room reloading while its previous instance flushes: both hear it (clone the
            // update; awareness goes to the newest).
            [rest @ .., newest] => {
                if let Inbound::Update {
                    first_seq,
                    last_seq,
                    updates,
                } = &inbound
                {
                    for sub in rest {
                        deliver(
                            sub,
                            Inbound::Update {
                                first_seq: *first_seq,
                                last_seq: *last_seq,
                                updates: updates.clone(),
                            },
                        );
                    }
                }
                deliver(newest, inbound);
            }
        }
    }

    /// Handles a message on the nodes channel.
    fn dispatch_node(&self, envelope: Envelope) {
        match envelope {
            Envelope::Heartbeat { node } if node != self.node => self.saw(node),
            Envelope::Leaving { node } if node != self.node => {
                self.lock_nodes().remove(&node);
                self.tell_all(|| Inbound::NodeGone(node));
            }
            _ => {}
        }
    }

    fn saw(&self, node: NodeId) {
        self.lock_nodes().insert(node, Instant::now());
    }

    /// Forgets nodes not heard from within [`NODE_TIMEOUT`] before `now`, and tells every
    /// room.
    fn sweep_nodes(&self, now: Instant) {
        let dead: Vec<NodeId> = {
            let mut nodes = self.lock_nodes();
            let dead: Vec<NodeId> = nodes
                .iter()
                .filter(|(_, seen)| now.saturating_duration_since(**seen) >= NODE_TIMEOUT)
                .map(|(node, _)| *node)
                .collect();
            for node in &dead {
                nodes.remove(node);
            }
            dead
        };
        for node in dead {
            tracing::info!(%node, "node presumed dead: its peers' awareness states are removed");
            self.tell_all(|| Inbound::NodeGone(node));
        }
    }

    /// Tells every subscribed room something (a full queue raises its lag flag instead).
    fn tell_all(&self, inbound: impl Fn() -> Inbound) {
        let rooms = self.lock_rooms();
        for sub in rooms.values().flatten() {
            deliver(sub, inbound());
        }
    }

    /// Marks every subscription lagged (the transport reconnected: anything may be missing).
    fn lag_all(&self) {
        let rooms = self.lock_rooms();
        for sub in rooms.values().flatten() {
            sub.lag.raise();
        }
    }

    fn unsubscribe(&self, room: &RoomName, id: u64) {
        let mut rooms = self.lock_rooms();
        if let Some(subs) = rooms.get_mut(room) {
            subs.retain(|sub| sub.id != id);
            if subs.is_empty() {
                rooms.remove(room);
            }
        }
    }
}

fn deliver(sub: &RoomSub, inbound: Inbound) {
    if sub.tx.try_send(inbound).is_err() {
        // A slow room: it catches up from the store instead of reading a backlog.
        sub.lag.raise();
    }
}

/// A room's subscription to the other nodes; dropping it unsubscribes.
pub struct Subscription {
    fanout: Arc<Fanout>,
    room: RoomName,
    id: u64,
    rx: mpsc::Receiver<Inbound>,
    lag: Arc<Lag>,
}

impl Subscription {
    /// The next message; [`Inbound::Lagged`] first when messages may have been missed.
    /// Cancel-safe (for `select!`).
    pub async fn recv(&mut self) -> Inbound {
        loop {
            if self.lag.flag.swap(false, Ordering::SeqCst) {
                // What is still queued is older than the catch-up that follows: drop it.
                while self.rx.try_recv().is_ok() {}
                return Inbound::Lagged;
            }
            tokio::select! {
                biased;
                _ = self.lag.notify.notified() => {}
                message = self.rx.recv() => match message {
                    Some(message) => return message,
                    // The fan-out is gone (shutdown): nothing more will come.
                    None => std::future::pending::<()>().await,
                },
            }
        }
    }

    /// The fan-out this subscription belongs to (to publish the room's own messages).
    pub fn fanout(&self) -> &Arc<Fanout> {
        &self.fanout
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.fanout.unsubscribe(&self.room, self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(name: &str) -> RoomName {
        RoomName::parse(name).unwrap()
    }

    #[test]
    fn prefixes_are_checked_and_name_channels() {
        let prefix = Prefix::parse("dep-1").unwrap();
        assert_eq!(prefix.room_channel(&room("r.1")), "dep-1:room:r.1");
        assert_eq!(prefix.room_of("dep-1:room:r.1"), Some(room("r.1")));
        assert_eq!(prefix.room_of("dep-2:room:r.1"), None);
        assert_eq!(prefix.room_pattern(), "dep-1:room:*");
        for bad in ["", "a*", "a b", "a:b", "[x]"] {
            assert!(Prefix::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn rooms_hear_other_nodes_not_themselves_and_lag_when_full() {
        let (fanout, mut out) = Fanout::new(NodeId(1), Prefix::parse("p").unwrap());
        let mut sub = fanout.subscribe(&room("a"));
        let update = |node| Envelope::Update {
            node: NodeId(node),
            first_seq: 1,
            last_seq: 1,
            updates: vec![Bytes::from_static(b"u")],
        };
        // Its own messages come back through the pattern subscription and are ignored.
        fanout.dispatch_room(&room("a"), update(1));
        fanout.dispatch_room(&room("a"), update(2));
        assert!(matches!(
            sub.recv().await,
            Inbound::Update { first_seq: 1, .. }
        ));
        // Other rooms' messages do not reach it.
        fanout.dispatch_room(&room("b"), update(2));
        for _ in 0..ROOM_QUEUE + 1 {
            fanout.dispatch_room(&room("a"), update(2));
        }
        assert!(matches!(sub.recv().await, Inbound::Lagged));
        // The backlog was dropped with the lag: the next message is a new one.
        fanout.dispatch_room(&room("a"), Envelope::AwarenessQuery { node: NodeId(3) });
        assert!(matches!(sub.recv().await, Inbound::AwarenessQuery));
        // Publishing queues for the transport.
        fanout.publish(&room("a"), &update(1));
        let (channel, bytes) = out.recv().await.unwrap();
        assert_eq!(channel, "p:room:a");
        assert_eq!(Envelope::decode(bytes).unwrap(), update(1));
        drop(sub);
        assert!(fanout.lock_rooms().is_empty(), "dropping unsubscribes");
    }

    #[tokio::test]
    async fn silent_and_leaving_nodes_are_announced_gone() {
        let (fanout, _out) = Fanout::new(NodeId(1), Prefix::parse("p").unwrap());
        let mut sub = fanout.subscribe(&room("a"));
        fanout.dispatch_node(Envelope::Heartbeat { node: NodeId(2) });
        let two_seen = Instant::now();
        fanout.sweep_nodes(two_seen + NODE_TIMEOUT / 2);
        assert!(sub.rx.try_recv().is_err(), "not gone before the timeout");
        fanout.dispatch_node(Envelope::Heartbeat { node: NodeId(3) });
        // Node 2 is silent past the timeout; node 3 beat half a timeout later.
        fanout
            .lock_nodes()
            .insert(NodeId(3), two_seen + NODE_TIMEOUT / 2);
        fanout.sweep_nodes(two_seen + NODE_TIMEOUT + Duration::from_millis(1));
        assert!(matches!(sub.recv().await, Inbound::NodeGone(NodeId(2))));
        assert!(sub.rx.try_recv().is_err(), "node 3 is alive");
        fanout.dispatch_node(Envelope::Leaving { node: NodeId(3) });
        assert!(matches!(sub.recv().await, Inbound::NodeGone(NodeId(3))));
        // Its own heartbeats and leaving are not about another node.
        fanout.dispatch_node(Envelope::Heartbeat { node: NodeId(1) });
        fanout.dispatch_node(Envelope::Leaving { node: NodeId(1) });
        fanout.sweep_nodes(Instant::now() + NODE_TIMEOUT * 2);
        assert!(sub.rx.try_recv().is_err(), "nothing about itself");
    }
}
