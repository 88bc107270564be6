//! The Redis transport of the fan-out (the `redis` crate, tokio, RESP3), on one Redis or on a
//! Redis Cluster ([`Target`]).
//!
//! Owns three tasks: the publisher (drains the fan-out's bounded queue into pipelined
//! `PUBLISH`es, or `SPUBLISH`es in [`Mode::Sharded`], over an auto-reconnecting connection, and
//! publishes this node's heartbeat; on a cluster one pipeline per hash slot, sent to the slot's
//! master, so a room's messages keep their order), the subscriber (one connection named
//! `PREFIX:sub:NODE`, subscribed to the nodes channel and to the channel of each room loaded
//! here, kept in step with the fan-out's [`Plan`](super::Plan) as rooms load and unload; when it
//! drops it reconnects, subscribes to every loaded room's channel again, and each room catches
//! up from the store once its channel is back; when its push queue overflows every room catches
//! up; on a cluster, a node connection that drops counts as the whole subscription dropping, and
//! a channel whose slot moved to another shard is subscribed again there), and the node
//! sweeper. It decodes messages and hands them to [`Fanout`]; it knows nothing of rooms'
//! contents.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use redis::cluster_routing::Slot;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::target::{Commands, Subscriber};
use super::{Envelope, Fanout, HEARTBEAT_EVERY, Mode, NodeId, Prefix, PubSubError, Target};
use crate::ids::RoomName;

/// Push messages queued from the subscriber connection before it counts as overflowing.
const PUSH_QUEUE: usize = 16 * 1024;
/// Messages published in one pipeline.
const PUBLISH_BATCH: usize = 256;
/// Room channel (un)subscriptions in flight at once on the subscriber connection.
const SUBSCRIBE_CONCURRENCY: usize = 64;
/// How often the subscriber retries (un)subscriptions that failed, when rooms change nothing.
const RESUBSCRIBE_EVERY: Duration = Duration::from_secs(1);
/// Delays between reconnection attempts of the subscriber.
const RECONNECT_DELAYS: [Duration; 4] = [
    Duration::from_millis(50),
    Duration::from_millis(200),
    Duration::from_millis(500),
    Duration::from_secs(1),
];

/// A running Redis fan-out: the [`Fanout`] rooms use, and the switch that stops its tasks.
pub struct RedisFanout {
    fanout: Arc<Fanout>,
    publisher: Commands,
    target: Target,
    stop: CancellationToken,
}

impl RedisFanout {
    /// Connects to `target`, starts the tasks and returns at once the fan-out (its
    /// subscription comes up in the background; rooms catch up when it does). `mode` says how
    /// room channels are carried: sharded on a cluster, where plain is refused. The nodes
    /// channel is plain on one Redis and sharded on a cluster.
    pub async fn start(target: &Target, prefix: Prefix, mode: Mode) -> Result<Self, PubSubError> {
        if target.is_cluster() && mode == Mode::Plain {
            return Err(PubSubError::PlainOnCluster);
        }
        let publisher = target.commands().await?;
        let node = NodeId::random();
        let (fanout, out) = Fanout::new(node, prefix, mode);
        let stop = CancellationToken::new();
        tokio::spawn(publish_loop(
            fanout.clone(),
            publisher.clone(),
            target.own_publish_command(),
            out,
            stop.clone(),
        ));
        tokio::spawn(subscribe_loop(fanout.clone(), target.clone(), stop.clone()));
        tokio::spawn(sweep_loop(fanout.clone(), stop.clone()));
        tracing::info!(
            %node, prefix = fanout.prefix.as_str(), ?mode, cluster = target.is_cluster(),
            "pub/sub fan-out started"
        );
        Ok(RedisFanout {
            fanout,
            publisher,
            target: target.clone(),
            stop,
        })
    }

    /// The fan-out rooms subscribe and publish through.
    pub fn fanout(&self) -> &Arc<Fanout> {
        &self.fanout
    }

    /// This node's fairy leases, advertising `addr` as where its fairies' API calls go.
    pub fn leases(&self, addr: String) -> super::lease::RedisLeases {
        super::lease::RedisLeases::new(
            self.publisher.clone(),
            self.fanout.prefix.clone(),
            self.fanout.node,
            addr,
        )
    }

    /// Tells the other nodes this one is leaving and stops the tasks.
    pub async fn stop(&self) {
        let leaving = Envelope::Leaving {
            node: self.fanout.node,
        };
        let mut publisher = self.publisher.clone();
        let sent = tokio::time::timeout(
            Duration::from_secs(1),
            redis::cmd(self.target.own_publish_command())
                .arg(self.fanout.prefix.nodes_channel())
                .arg(leaving.encode().as_ref())
                .query_async::<i64>(&mut publisher),
        )
        .await;
        if !matches!(sent, Ok(Ok(_))) {
            tracing::debug!("could not announce this node's leaving");
        }
        self.stop.cancel();
    }
}

/// Waits before the next reconnection attempt (longer after each of `failures` in a row);
/// false when `stop` came first.
pub(super) async fn back_off(failures: &mut usize, stop: &CancellationToken) -> bool {
    let delay = RECONNECT_DELAYS[(*failures).min(RECONNECT_DELAYS.len() - 1)];
    *failures += 1;
    tokio::select! {
        _ = stop.cancelled() => false,
        _ = tokio::time::sleep(delay) => true,
    }
}

/// Drains the outbound queue into pipelined `PUBLISH`es (`SPUBLISH`es when sharded);
/// publishes heartbeats (with `beat_command`).
async fn publish_loop(
    fanout: Arc<Fanout>,
    publisher: Commands,
    beat_command: &'static str,
    mut out: mpsc::Receiver<(String, Bytes)>,
    stop: CancellationToken,
) {
    let mut heartbeat = tokio::time::interval(HEARTBEAT_EVERY);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let beat = Envelope::Heartbeat { node: fanout.node }.encode();
    let nodes_channel = fanout.prefix.nodes_channel();
    let publish = fanout.mode.publish_command();
    let by_slot = matches!(publisher, Commands::Cluster(_));
    let mut batch = Vec::with_capacity(PUBLISH_BATCH);
    loop {
        let mut beating = false;
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = heartbeat.tick() => beating = true,
            taken = out.recv_many(&mut batch, PUBLISH_BATCH) => {
                if taken == 0 {
                    return;
                }
            }
        }
        let mut groups = Groups::new(by_slot);
        if beating {
            groups.add(beat_command, &nodes_channel, &beat, true);
        }
        for (channel, payload) in &batch {
            groups.add(publish, channel, payload, false);
        }
        let sent = futures_util::future::join_all(groups.groups.into_iter().map(|group| {
            let mut publisher = publisher.clone();
            async move {
                let done = group.pipe.query_async::<()>(&mut publisher).await;
                (group.count, group.bytes, group.beats, done)
            }
        }))
        .await;
        for (count, bytes, beats, done) in sent {
            match done {
                Ok(()) => {
                    super::count("out", count, bytes);
                    super::count_heartbeats("out", beats);
                }
                Err(error) => {
                    // Lost messages are caught up by the other nodes from the store.
                    tracing::warn!(%error, count, beats, "publishing to redis failed; dropped");
                    super::count("dropped", count, 0);
                    super::count_heartbeats("dropped", beats);
                }
            }
        }
        batch.clear();
    }
}

/// One pipeline of a batch, and what it carries (for the counts).
struct Group {
    pipe: redis::Pipeline,
    count: u64,
    bytes: u64,
    beats: u64,
}

/// A batch's pipelines: one on a single Redis; on a cluster one per hash slot (a cluster
/// pipeline goes to one node), each keeping the order of its messages.
struct Groups {
    by_slot: bool,
    index: HashMap<Option<Slot>, usize>,
    groups: Vec<Group>,
}

impl Groups {
    fn new(by_slot: bool) -> Self {
        Groups {
            by_slot,
            index: HashMap::new(),
            groups: Vec::new(),
        }
    }

    /// Adds `command CHANNEL PAYLOAD` (a heartbeat when `beat`).
    fn add(&mut self, command: &'static str, channel: &str, payload: &[u8], beat: bool) {
        let key = self.by_slot.then(|| Slot::for_key(channel));
        let groups = &mut self.groups;
        let at = *self.index.entry(key).or_insert_with(|| {
            groups.push(Group {
                pipe: redis::pipe(),
                count: 0,
                bytes: 0,
                beats: 0,
            });
            groups.len() - 1
        });
        let Some(group) = self.groups.get_mut(at) else {
            return;
        };
        group.pipe.cmd(command).arg(channel).arg(payload).ignore();
        if beat {
            group.beats += 1;
        } else {
            group.count += 1;
            group.bytes += payload.len() as u64;
        }
    }
}

/// Keeps the subscription up: connects, subscribes to the nodes channel and to the loaded
/// rooms' channels, follows rooms loading and unloading, reads until it drops, and again.
async fn subscribe_loop(fanout: Arc<Fanout>, target: Target, stop: CancellationToken) {
    let mut failures = 0usize;
    loop {
        let (tx, mut rx) = mpsc::channel::<PushInfo>(PUSH_QUEUE);
        let overflow = Arc::new(AtomicBool::new(false));
        let overflowed = overflow.clone();
        let sender = move |info: PushInfo| {
            if tx.try_send(info).is_err() {
                overflowed.store(true, Ordering::SeqCst);
            }
            Ok::<(), std::convert::Infallible>(())
        };
        let connected = tokio::select! {
            _ = stop.cancelled() => return,
            c = subscribe(&fanout, &target, sender) => c,
        };
        match connected {
            Ok(connection) => {
                failures = 0;
                // Every loaded room's channel first: each room catches up from the store once
                // its channel is confirmed (what was published while it was down is missing).
                let mut rooms = HashSet::new();
                sync_rooms(&fanout, &connection, &mut rooms).await;
                fanout.connected.store(true, Ordering::SeqCst);
                tracing::info!(rooms = rooms.len(), "pub/sub subscription up");
                let mut retry = tokio::time::interval(RESUBSCRIBE_EVERY);
                retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    let info = tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = fanout.rooms_changed() => {
                            sync_rooms(&fanout, &connection, &mut rooms).await;
                            continue;
                        }
                        _ = retry.tick() => {
                            sync_rooms(&fanout, &connection, &mut rooms).await;
                            continue;
                        }
                        info = rx.recv() => info,
                    };
                    if overflow.swap(false, Ordering::SeqCst) {
                        tracing::warn!("pub/sub push queue overflowed; rooms catch up");
                        fanout.lag_all();
                    }
                    let Some(info) = info else { break };
                    match info.kind {
                        PushKind::Disconnection => break,
                        PushKind::Message | PushKind::SMessage => handle_push(&fanout, info.data),
                        // Only a cluster unsubscribes a sharded channel on its own (its slot
                        // moved); this node's own unsubscriptions are of rooms gone from
                        // `rooms` by the time their confirmation is read.
                        PushKind::SUnsubscribe if target.is_cluster() => {
                            if !channel_lost(&fanout, &mut rooms, &info.data) {
                                break;
                            }
                            sync_rooms(&fanout, &connection, &mut rooms).await;
                        }
                        _ => {}
                    }
                }
                fanout.disconnected();
                tracing::warn!("pub/sub subscription dropped; reconnecting");
            }
            Err(error) => {
                fanout.disconnected();
                tracing::warn!(%error, "pub/sub subscription failed; retrying");
            }
        }
        if !back_off(&mut failures, &stop).await {
            return;
        }
    }
}

/// Brings the connection's room channels (`subscribed`) in step with the rooms loaded here.
/// A command that fails is logged and tried again at the next change or retry tick (each one
/// is bounded by the connection's response timeout); a broken connection shows up as its
/// disconnection.
async fn sync_rooms(fanout: &Fanout, connection: &Subscriber, subscribed: &mut HashSet<RoomName>) {
    let plan = fanout.plan(subscribed);
    if plan.is_empty() {
        return;
    }
    let mode = fanout.mode;
    let mut failed = Vec::new();
    let unsubscribed = each_room(
        connection,
        &fanout.prefix,
        mode.unsubscribe_command(),
        plan.unsubscribe,
    );
    for (room, done) in unsubscribed.await {
        match done {
            Ok(_) => {
                subscribed.remove(&room);
            }
            Err(error) => failed.push((room, error)),
        }
    }
    let subscribed_now = each_room(
        connection,
        &fanout.prefix,
        mode.subscribe_command(),
        plan.subscribe,
    );
    for (room, done) in subscribed_now.await {
        match done {
            Ok(_) => {
                fanout.confirmed(&room);
                subscribed.insert(room);
            }
            Err(error) => failed.push((room, error)),
        }
    }
    if let Some((room, error)) = failed.first() {
        tracing::warn!(
            %room, %error, failed = failed.len(),
            "changing room channel subscriptions failed; retrying"
        );
    }
}

/// Sends `command ROOM-CHANNEL` for each room, [`SUBSCRIBE_CONCURRENCY`] at once (one channel
/// per command: the client matches one confirmation to each).
async fn each_room(
    connection: &Subscriber,
    prefix: &Prefix,
    command: &'static str,
    rooms: Vec<RoomName>,
) -> Vec<(RoomName, redis::RedisResult<()>)> {
    futures_util::stream::iter(rooms)
        .map(|room| {
            let channel = prefix.room_channel(&room);
            async move {
                let done = connection.change(command, channel).await;
                (room, done)
            }
        })
        .buffer_unordered(SUBSCRIBE_CONCURRENCY)
        .collect()
        .await
}

/// Opens the subscriber connection (its pushes to `push`), names it and subscribes to the
/// nodes channel.
async fn subscribe(
    fanout: &Fanout,
    target: &Target,
    push: impl redis::aio::AsyncPushSender,
) -> Result<Subscriber, PubSubError> {
    let name = format!("{}:sub:{}", fanout.prefix.as_str(), fanout.node);
    let connection = target.subscriber(push, &name).await?;
    connection
        .subscribe_own(fanout.prefix.nodes_channel())
        .await?;
    Ok(connection)
}

/// A cluster unsubscribed a channel (`data`: `channel, count`) on its own. A loaded room's
/// channel is forgotten, to be subscribed again (and the room caught up once it is); false
/// when it was the nodes channel (the whole subscription starts again).
fn channel_lost(fanout: &Fanout, subscribed: &mut HashSet<RoomName>, data: &[Value]) -> bool {
    let Some(Value::BulkString(channel)) = data.first() else {
        return true;
    };
    let Ok(channel) = std::str::from_utf8(channel) else {
        return true;
    };
    if channel == fanout.prefix.nodes_channel() {
        tracing::warn!(
            channel,
            "redis cluster dropped the nodes channel; subscribing again"
        );
        return false;
    }
    if let Some(room) = fanout.prefix.room_of(channel)
        && subscribed.remove(&room)
    {
        tracing::info!(%room, "redis cluster moved a room channel; subscribing again");
        fanout.channel_lost(&room);
    }
    true
}

/// Decodes one pushed message (`channel, payload`) and dispatches it.
fn handle_push(fanout: &Fanout, data: Vec<Value>) {
    let mut strings = data.into_iter().filter_map(|value| match value {
        Value::BulkString(bytes) => Some(bytes),
        _ => None,
    });
    let (Some(channel), Some(payload)) = (strings.next(), strings.next()) else {
        return;
    };
    let Ok(channel) = String::from_utf8(channel) else {
        return;
    };
    let bytes = payload.len();
    let envelope = match Envelope::decode(Bytes::from(payload)) {
        Ok(envelope) => envelope,
        Err(error) => {
            tracing::warn!(%error, channel, "unreadable pub/sub message dropped");
            super::count("dropped", 1, 0);
            return;
        }
    };
    if channel == fanout.prefix.nodes_channel() {
        fanout.dispatch_node(envelope);
    } else if let Some(room) = fanout.prefix.room_of(&channel) {
        fanout.dispatch_room(&room, envelope, bytes);
    }
}

/// Forgets silent nodes twice per heartbeat interval.
async fn sweep_loop(fanout: Arc<Fanout>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(HEARTBEAT_EVERY / 2);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => fanout.sweep_nodes(tokio::time::Instant::now()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The channels of a group's pipeline, in order.
    fn channels(group: &Group) -> Vec<String> {
        group
            .pipe
            .cmd_iter()
            .filter_map(|cmd| cmd.args_iter().nth(1))
            .filter_map(|arg| match arg {
                redis::Arg::Simple(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_cluster_batch_is_one_pipeline_per_slot_in_order() {
        // Two channels of one slot (a hash tag), one of another.
        let (x, y, z) = ("p:room:{a}1", "p:room:{a}2", "p:room:b");
        assert_eq!(Slot::for_key(x), Slot::for_key(y));
        assert_ne!(Slot::for_key(x), Slot::for_key(z));
        let mut groups = Groups::new(true);
        groups.add("SPUBLISH", "p:nodes", b"beat", true);
        for (channel, payload) in [(x, "1"), (z, "2"), (y, "3"), (x, "4")] {
            groups.add("SPUBLISH", channel, payload.as_bytes(), false);
        }
        let slots: Vec<Vec<String>> = groups.groups.iter().map(channels).collect();
        let expected: Vec<Vec<String>> = vec![
            vec!["p:nodes".into()],
            vec![x.into(), y.into(), x.into()],
            vec![z.into()],
        ];
        assert_eq!(slots, expected);
        let counts: Vec<(u64, u64, u64)> = groups
            .groups
            .iter()
            .map(|g| (g.count, g.bytes, g.beats))
            .collect();
        assert_eq!(counts, vec![(0, 0, 1), (3, 3, 0), (1, 1, 0)]);
        // One Redis: one pipeline, in order.
        let mut single = Groups::new(false);
        for channel in [x, z, y] {
            single.add("PUBLISH", channel, b"m", false);
        }
        assert_eq!(single.groups.len(), 1);
        assert_eq!(channels(&single.groups[0]), vec![x, z, y]);
    }
}
