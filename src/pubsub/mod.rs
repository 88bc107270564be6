//! Fan-out between the nodes of a scale-out deployment (`--pubsub redis://…`; docs/scaling.md).
//!
//! Owns the node's identity, the per-room subscriptions rooms take before they load (and the
//! book of which room channels the transport must subscribe to: exactly the rooms loaded here,
//! one channel subscription however many instances of a room share it), the dispatch of what
//! other nodes publish to those subscriptions, node liveness (heartbeats, and the nodes presumed
//! dead when theirs stop), and the bounded outbound queue to the transport ([`redis`]). It
//! carries speed only: the store carries truth, so anything lost here (a Redis restart, a
//! dropped or late subscription, a full queue) is noticed by the rooms and caught up from the
//! store. It knows nothing of documents, peers or sockets: rooms decide what the messages mean.
//!
//! # Layout
//! - [`wire`]: the binary messages.
//! - [`redis`]: the Redis transport (publisher, subscriber, heartbeats, reconnection).
//! - [`target`]: where Redis is (one server, or a Redis Cluster) and the connections to it.
//! - [`lease`]: which node hosts each fairy (leases in Redis).
//! - [`direct`]: messages addressed to one node (its own channel).

pub mod direct;
pub mod lease;
pub mod redis;
pub mod target;
pub mod wire;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;

pub use target::{Servers, Target};
pub use wire::{Envelope, NodeId};

use crate::ids::RoomName;

/// Messages queued for one room before it counts as a slow consumer (and catches up).
const ROOM_QUEUE: usize = 1024;
/// Messages queued for the transport before new ones are dropped (and counted).
const OUT_QUEUE: usize = 8192;
/// How often a node says it is alive.
pub const HEARTBEAT_EVERY: Duration = Duration::from_millis(1000);
/// A node not heard from for this long is presumed dead: its peers' states are removed.
pub const NODE_TIMEOUT: Duration = Duration::from_millis(3500);
/// How long a room's load waits for Redis to confirm its channel subscription. Past it the
/// room loads anyway and catches up from the store once the subscription is confirmed.
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(1);

/// How room channels are carried (`--pubsub-sharded`; always sharded on a Redis Cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// `SUBSCRIBE`/`PUBLISH`: any Redis.
    #[default]
    Plain,
    /// Sharded pub/sub, `SSUBSCRIBE`/`SPUBLISH` (Redis ≥ 7): in a Redis Cluster a room's
    /// messages stay on the shard owning its channel instead of being broadcast to every shard.
    Sharded,
}

impl Mode {
    /// The command publishing a room message.
    pub fn publish_command(self) -> &'static str {
        match self {
            Mode::Plain => "PUBLISH",
            Mode::Sharded => "SPUBLISH",
        }
    }

    /// The command subscribing to a room channel.
    pub fn subscribe_command(self) -> &'static str {
        match self {
            Mode::Plain => "SUBSCRIBE",
            Mode::Sharded => "SSUBSCRIBE",
        }
    }

    /// The command unsubscribing from a room channel.
    pub fn unsubscribe_command(self) -> &'static str {
        match self {
            Mode::Plain => "UNSUBSCRIBE",
            Mode::Sharded => "SUNSUBSCRIBE",
        }
    }
}

/// Errors of the pub/sub layer.
#[derive(Debug, thiserror::Error)]
pub enum PubSubError {
    /// The `--pubsub` URL is not one this build understands.
    #[error("unsupported pubsub url {0:?}: expected redis://HOST:PORT")]
    UnsupportedUrl(String),
    /// Several `--pubsub` addresses, which only a Redis Cluster's seeds may be.
    #[error(
        "--pubsub names {0} addresses: several are the seeds of a Redis Cluster and need \
         --pubsub-cluster; a single Redis takes one"
    )]
    SeedsWithoutCluster(usize),
    /// A single `--pubsub` Redis that is a cluster node.
    #[error(
        "the Redis at {0} is a Redis Cluster node: start the node with --pubsub-cluster \
         (env FAIRYRING_PUBSUB_CLUSTER=true)"
    )]
    ClusterNode(String),
    /// `--pubsub-cluster` and a Redis Cluster that could not be reached or is none.
    #[error(
        "could not reach a Redis Cluster through {seeds} (--pubsub-cluster needs the address \
         of at least one node of a cluster with every slot served): {error}"
    )]
    Cluster {
        seeds: String,
        error: ::redis::RedisError,
    },
    /// `--pubsub-cluster` without `--pubsub`.
    #[error("--pubsub-cluster needs --pubsub, the address of one or more of the cluster's nodes")]
    ClusterWithoutSeeds,
    /// Plain room channels asked for on a Redis Cluster.
    #[error("room channels on a Redis Cluster are sharded (SSUBSCRIBE/SPUBLISH), not plain")]
    PlainOnCluster,
    /// The `--pubsub-prefix` is not `[A-Za-z0-9._-]+`.
    #[error("invalid pubsub prefix {0:?}: expected 1-64 of [A-Za-z0-9._-]")]
    InvalidPrefix(String),
    /// Redis refused or failed.
    #[error("redis: {0}")]
    Redis(#[from] ::redis::RedisError),
}

/// The key and channel prefix of one deployment: `[A-Za-z0-9._-]{1,64}` (no glob characters,
/// so that a channel name never reads as a pattern).
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

/// Counts room messages (updates, awareness, awareness queries) in `/metrics` by direction
/// (`in`, `out`, `dropped`), and their payload bytes (`in`, `out`).
fn count(direction: &str, n: u64, bytes: u64) {
    let metrics = crate::metrics::global();
    crate::metrics::Metrics::count(&metrics.pubsub_messages, direction, n);
    if bytes > 0 {
        crate::metrics::Metrics::count(&metrics.pubsub_bytes, direction, bytes);
    }
}

/// Counts node messages (heartbeats, leaving) in `/metrics` by direction (`in`, `out`,
/// `dropped`).
fn count_heartbeats(direction: &str, n: u64) {
    let metrics = crate::metrics::global();
    crate::metrics::Metrics::count(&metrics.pubsub_heartbeats, direction, n);
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

/// One room loaded here (once, or twice while a reload overlaps the previous instance's
/// flush): its subscriptions, and whether the transport holds its channel subscription.
struct RoomEntry {
    subs: Vec<RoomSub>,
    /// Whether Redis confirmed the room channel's subscription on the current connection.
    live: watch::Sender<bool>,
    /// Messages may have been missed before the channel's subscription is confirmed (the load
    /// did not wait for it, or the connection dropped): the room catches up when it is.
    catch_up_when_live: bool,
}

/// What the transport must change on its subscriber connection to hear exactly the rooms
/// loaded here ([`Fanout::plan`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Rooms loaded here whose channel is not subscribed.
    pub subscribe: Vec<RoomName>,
    /// Channels subscribed of rooms no longer loaded here.
    pub unsubscribe: Vec<RoomName>,
}

impl Plan {
    /// Whether the subscriptions match the rooms.
    pub fn is_empty(&self) -> bool {
        self.subscribe.is_empty() && self.unsubscribe.is_empty()
    }
}

/// The node's fan-out: subscriptions by room, liveness of other nodes, the outbound queue.
pub struct Fanout {
    node: NodeId,
    prefix: Prefix,
    mode: Mode,
    rooms: Mutex<HashMap<RoomName, RoomEntry>>,
    nodes: Mutex<HashMap<NodeId, Instant>>,
    next_sub: AtomicU64,
    out: mpsc::Sender<(String, Bytes)>,
    connected: AtomicBool,
    /// Woken when a room is loaded or unloaded (the transport changes its subscriptions).
    rooms_changed: Notify,
}

impl Fanout {
    /// A fan-out with its outbound queue (drained by the transport).
    fn new(
        node: NodeId,
        prefix: Prefix,
        mode: Mode,
    ) -> (Arc<Self>, mpsc::Receiver<(String, Bytes)>) {
        let (out, rx) = mpsc::channel(OUT_QUEUE);
        let fanout = Arc::new(Fanout {
            node,
            prefix,
            mode,
            rooms: Mutex::new(HashMap::new()),
            nodes: Mutex::new(HashMap::new()),
            next_sub: AtomicU64::new(1),
            out,
            connected: AtomicBool::new(false),
            rooms_changed: Notify::new(),
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

    fn lock_rooms(&self) -> MutexGuard<'_, HashMap<RoomName, RoomEntry>> {
        self.rooms.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_nodes(&self) -> MutexGuard<'_, HashMap<NodeId, Instant>> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Subscribes to a room's messages from the other nodes. Taken before the room loads from
    /// the store, so nothing published meanwhile is missed: the room skips what its load
    /// already contained.
    ///
    /// The first subscription of a room has the transport subscribe to its channel, and waits
    /// for Redis to confirm it, [`SUBSCRIBE_WAIT`] at most. A load that stops waiting (a slow
    /// Redis), or that starts while Redis is unreachable, goes on at once: its room is told
    /// [`Inbound::Lagged`] once the channel's subscription is confirmed, and catches up from
    /// the store then.
    pub async fn subscribe(self: &Arc<Self>, room: &RoomName) -> Subscription {
        let (subscription, live) = self.register(room);
        let Some(mut live) = live else {
            return subscription;
        };
        let confirmed = tokio::time::timeout(SUBSCRIBE_WAIT, live.wait_for(|live| *live)).await;
        if !matches!(confirmed, Ok(Ok(_))) {
            tracing::warn!(
                room = %room,
                "redis has not confirmed the room's subscription; it loads now and catches up \
                 from the store when the subscription is confirmed"
            );
            self.catch_up_when_live(room);
        }
        subscription
    }

    /// Adds a subscription for `room`; the channel subscription to wait for, if the load
    /// should wait (the room's first subscription while the transport is connected).
    fn register(
        self: &Arc<Self>,
        room: &RoomName,
    ) -> (Subscription, Option<watch::Receiver<bool>>) {
        let (tx, rx) = mpsc::channel(ROOM_QUEUE);
        let lag = Arc::new(Lag::default());
        let id = self.next_sub.fetch_add(1, Ordering::Relaxed);
        let connected = self.is_connected();
        let live = {
            let mut rooms = self.lock_rooms();
            let entry = rooms.entry(room.clone()).or_insert_with(|| RoomEntry {
                subs: Vec::new(),
                live: watch::Sender::new(false),
                // Not connected: nothing to wait for; it catches up when the channel is
                // subscribed.
                catch_up_when_live: !connected,
            });
            entry.subs.push(RoomSub {
                id,
                tx,
                lag: lag.clone(),
            });
            (!*entry.live.borrow() && connected).then(|| entry.live.subscribe())
        };
        self.rooms_changed.notify_one();
        let subscription = Subscription {
            fanout: self.clone(),
            room: room.clone(),
            id,
            rx,
            lag,
        };
        (subscription, live)
    }

    /// The room's load stopped waiting for its channel: it catches up once it is subscribed
    /// (at once if the confirmation came meanwhile).
    fn catch_up_when_live(&self, room: &RoomName) {
        let mut rooms = self.lock_rooms();
        if let Some(entry) = rooms.get_mut(room) {
            if *entry.live.borrow() {
                entry.subs.iter().for_each(|sub| sub.lag.raise());
            } else {
                entry.catch_up_when_live = true;
            }
        }
    }

    /// What the transport must subscribe and unsubscribe, given the room channels it holds;
    /// rooms whose channel it already holds are marked live.
    pub(crate) fn plan(&self, subscribed: &HashSet<RoomName>) -> Plan {
        let mut rooms = self.lock_rooms();
        let mut plan = Plan::default();
        for (room, entry) in rooms.iter_mut() {
            if !subscribed.contains(room) {
                plan.subscribe.push(room.clone());
            } else if !*entry.live.borrow() {
                // Unloaded and loaded again before the transport unsubscribed: still held.
                Self::mark_live(entry);
            }
        }
        plan.unsubscribe = subscribed
            .iter()
            .filter(|room| !rooms.contains_key(*room))
            .cloned()
            .collect();
        plan
    }

    /// Redis confirmed the subscription of `room`'s channel on the current connection.
    pub(crate) fn confirmed(&self, room: &RoomName) {
        if let Some(entry) = self.lock_rooms().get_mut(room) {
            Self::mark_live(entry);
        }
    }

    /// Marks a room's channel live: a waiting load goes on, and a room that may have missed
    /// messages (it did not wait, or the connection dropped) catches up from the store now
    /// that nothing more can be missed.
    fn mark_live(entry: &mut RoomEntry) {
        entry.live.send_replace(true);
        if std::mem::take(&mut entry.catch_up_when_live) {
            entry.subs.iter().for_each(|sub| sub.lag.raise());
        }
    }

    /// The transport lost the subscription of `room`'s channel while the connection stayed (a
    /// cluster moved the channel's slot to another shard): the room catches up once its
    /// channel is subscribed again.
    pub(crate) fn channel_lost(&self, room: &RoomName) {
        if let Some(entry) = self.lock_rooms().get_mut(room) {
            entry.live.send_replace(false);
            entry.catch_up_when_live = true;
        }
    }

    /// The subscriber connection dropped: no room channel is subscribed any more, and every
    /// room catches up once its channel is subscribed again.
    pub(crate) fn disconnected(&self) {
        self.connected.store(false, Ordering::SeqCst);
        let mut rooms = self.lock_rooms();
        for entry in rooms.values_mut() {
            entry.live.send_replace(false);
            entry.catch_up_when_live = true;
        }
    }

    /// Resolves when a room was loaded or unloaded since the last call (the transport then
    /// asks for a [`Fanout::plan`]).
    pub(crate) async fn rooms_changed(&self) {
        self.rooms_changed.notified().await;
    }

    /// Publishes a message about a room to the other nodes. Never waits: when the transport is
    /// behind, the message is dropped and counted (the other nodes notice the gap).
    pub fn publish(&self, room: &RoomName, envelope: &Envelope) {
        self.send(self.prefix.room_channel(room), envelope);
    }

    fn send(&self, channel: String, envelope: &Envelope) {
        match self.out.try_send((channel, envelope.encode())) {
            Ok(()) => {}
            Err(_) => count("dropped", 1, 0),
        }
    }

    /// Hands a message received on a room channel (`bytes` long) to the room's subscriptions.
    fn dispatch_room(&self, room: &RoomName, envelope: Envelope, bytes: usize) {
        let node = envelope.node();
        if node == self.node {
            return;
        }
        count("in", 1, bytes as u64);
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
        let Some(entry) = rooms.get(room) else {
            return;
        };
        match entry.subs.as_slice() {
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
        if envelope.node() != self.node {
            count_heartbeats("in", 1);
        }
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
        for sub in rooms.values().flat_map(|entry| &entry.subs) {
            deliver(sub, inbound());
        }
    }

    /// Marks every subscription lagged (messages were lost on the way in: anything may be
    /// missing).
    fn lag_all(&self) {
        let rooms = self.lock_rooms();
        for sub in rooms.values().flat_map(|entry| &entry.subs) {
            sub.lag.raise();
        }
    }

    /// Drops a subscription; the room's channel is unsubscribed when it was the last one.
    fn unsubscribe(&self, room: &RoomName, id: u64) {
        let last = {
            let mut rooms = self.lock_rooms();
            let last = rooms.get_mut(room).is_some_and(|entry| {
                entry.subs.retain(|sub| sub.id != id);
                entry.subs.is_empty()
            });
            if last {
                rooms.remove(room);
            }
            last
        };
        if last {
            self.rooms_changed.notify_one();
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

    fn fanout() -> (Arc<Fanout>, mpsc::Receiver<(String, Bytes)>) {
        Fanout::new(NodeId(1), Prefix::parse("p").unwrap(), Mode::Plain)
    }

    fn rooms(names: &[&str]) -> Vec<RoomName> {
        names.iter().map(|name| room(name)).collect()
    }

    /// The transport's side of the book: applies a plan as if Redis confirmed every command.
    fn apply(fanout: &Fanout, subscribed: &mut HashSet<RoomName>) -> Plan {
        let mut plan = fanout.plan(subscribed);
        plan.subscribe.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        plan.unsubscribe.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        for gone in &plan.unsubscribe {
            subscribed.remove(gone);
        }
        for new in &plan.subscribe {
            subscribed.insert(new.clone());
            fanout.confirmed(new);
        }
        plan
    }

    #[tokio::test]
    async fn one_channel_per_loaded_room_until_its_last_subscription_goes() {
        let (fanout, _out) = fanout();
        let mut subscribed = HashSet::new();
        assert!(
            apply(&fanout, &mut subscribed).is_empty(),
            "no room, no channel"
        );
        // Two loads of one room (a reload overlapping the flush of the previous instance) and
        // another room: one channel each.
        let a1 = fanout.subscribe(&room("a")).await;
        let a2 = fanout.subscribe(&room("a")).await;
        let b = fanout.subscribe(&room("b")).await;
        let plan = apply(&fanout, &mut subscribed);
        assert_eq!(plan.subscribe, rooms(&["a", "b"]));
        assert!(plan.unsubscribe.is_empty());
        assert!(
            apply(&fanout, &mut subscribed).is_empty(),
            "nothing more to do"
        );
        // The first of room a's subscriptions goes: its channel stays.
        drop(a1);
        assert!(
            apply(&fanout, &mut subscribed).is_empty(),
            "a is still loaded"
        );
        // The last goes: its channel goes, b's stays.
        drop(a2);
        let plan = apply(&fanout, &mut subscribed);
        assert_eq!((plan.subscribe, plan.unsubscribe), (vec![], rooms(&["a"])));
        drop(b);
        let plan = apply(&fanout, &mut subscribed);
        assert_eq!(plan.unsubscribe, rooms(&["b"]));
        assert!(subscribed.is_empty() && fanout.lock_rooms().is_empty());
    }

    #[tokio::test]
    async fn a_room_whose_channel_came_late_or_came_back_catches_up() {
        let (fanout, _out) = fanout();
        let mut subscribed = HashSet::new();
        // Loaded while the transport is not connected: it does not wait, and catches up once
        // its channel is confirmed (not before: it could miss what comes in between).
        let mut sub = fanout.subscribe(&room("a")).await;
        assert!(
            !sub.lag.flag.load(Ordering::SeqCst),
            "no catch-up before the channel"
        );
        apply(&fanout, &mut subscribed);
        assert!(matches!(sub.recv().await, Inbound::Lagged));
        fanout.connected.store(true, Ordering::SeqCst);
        // A load that waits for its channel goes on when it is confirmed, without a catch-up.
        let waiting = tokio::spawn({
            let fanout = fanout.clone();
            async move { fanout.subscribe(&room("b")).await }
        });
        tokio::task::yield_now().await;
        let plan = loop {
            let plan = apply(&fanout, &mut subscribed);
            if !plan.is_empty() {
                break plan;
            }
            tokio::task::yield_now().await;
        };
        assert_eq!(plan.subscribe, rooms(&["b"]));
        let b = waiting.await.unwrap();
        assert!(
            !b.lag.flag.load(Ordering::SeqCst),
            "confirmed in time: no catch-up"
        );
        // The connection drops: every room catches up once its channel is back.
        fanout.disconnected();
        subscribed.clear();
        assert!(!sub.lag.flag.load(Ordering::SeqCst));
        let plan = apply(&fanout, &mut subscribed);
        assert_eq!(plan.subscribe, rooms(&["a", "b"]));
        assert!(matches!(sub.recv().await, Inbound::Lagged));
        assert!(b.lag.flag.load(Ordering::SeqCst));
        // Unloaded and loaded again before the transport unsubscribed: the channel is kept
        // and the new load does not wait.
        drop(sub);
        fanout.connected.store(true, Ordering::SeqCst);
        let (_reloaded, live) = fanout.register(&room("a"));
        assert!(
            fanout.plan(&subscribed).is_empty(),
            "a's channel is still held"
        );
        assert!(
            live.is_some_and(|live| *live.borrow()),
            "marked live: the load goes on"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_load_waits_for_a_slow_redis_a_bounded_time_then_catches_up() {
        let (fanout, _out) = fanout();
        fanout.connected.store(true, Ordering::SeqCst);
        let started = Instant::now();
        let mut sub = fanout.subscribe(&room("a")).await;
        assert!(
            started.elapsed() >= SUBSCRIBE_WAIT,
            "waited, a bounded time"
        );
        let mut subscribed = HashSet::new();
        apply(&fanout, &mut subscribed);
        assert!(
            matches!(sub.recv().await, Inbound::Lagged),
            "caught up when confirmed"
        );
    }

    #[test]
    fn prefixes_are_checked_and_name_channels() {
        let prefix = Prefix::parse("dep-1").unwrap();
        assert_eq!(prefix.room_channel(&room("r.1")), "dep-1:room:r.1");
        assert_eq!(prefix.room_of("dep-1:room:r.1"), Some(room("r.1")));
        assert_eq!(prefix.room_of("dep-2:room:r.1"), None);
        for bad in ["", "a*", "a b", "a:b", "[x]"] {
            assert!(Prefix::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn rooms_hear_other_nodes_not_themselves_and_lag_when_full() {
        let (fanout, mut out) = fanout();
        let mut sub = fanout.subscribe(&room("a")).await;
        let update = |node| Envelope::Update {
            node: NodeId(node),
            first_seq: 1,
            last_seq: 1,
            updates: vec![Bytes::from_static(b"u")],
        };
        // Its own messages come back through the room's channel and are ignored.
        fanout.dispatch_room(&room("a"), update(1), 1);
        fanout.dispatch_room(&room("a"), update(2), 1);
        assert!(matches!(
            sub.recv().await,
            Inbound::Update { first_seq: 1, .. }
        ));
        // Other rooms' messages do not reach it.
        fanout.dispatch_room(&room("b"), update(2), 1);
        for _ in 0..ROOM_QUEUE + 1 {
            fanout.dispatch_room(&room("a"), update(2), 1);
        }
        assert!(matches!(sub.recv().await, Inbound::Lagged));
        // The backlog was dropped with the lag: the next message is a new one.
        fanout.dispatch_room(&room("a"), Envelope::AwarenessQuery { node: NodeId(3) }, 1);
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
        let (fanout, _out) = fanout();
        let mut sub = fanout.subscribe(&room("a")).await;
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
