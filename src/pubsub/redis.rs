//! The Redis transport of the fan-out (the `redis` crate, tokio, RESP3).
//!
//! Owns three tasks: the publisher (drains the fan-out's bounded queue into pipelined
//! `PUBLISH`es, or `SPUBLISH`es in [`Mode::Sharded`], over an auto-reconnecting connection, and
//! publishes this node's heartbeat), the subscriber (one connection named `PREFIX:sub:NODE`,
//! subscribed to the nodes channel and to the channel of each room loaded here, kept in step
//! with the fan-out's [`Plan`](super::Plan) as rooms load and unload; when it drops it
//! reconnects, subscribes to every loaded room's channel again, and each room catches up from
//! the store once its channel is back; when its push queue overflows every room catches up),
//! and the node sweeper. It decodes messages and hands them to [`Fanout`]; it knows nothing of
//! rooms' contents.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use redis::aio::{ConnectionManager, MultiplexedConnection};
use redis::{
    AsyncConnectionConfig, Client, IntoConnectionInfo, ProtocolVersion, PushInfo, PushKind, Value,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Envelope, Fanout, HEARTBEAT_EVERY, Mode, NodeId, Prefix, PubSubError};
use crate::room::RoomName;

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
    publisher: ConnectionManager,
    stop: CancellationToken,
}

impl RedisFanout {
    /// Connects to `url` (`redis://HOST:PORT`), starts the tasks and returns at once the
    /// fan-out (its subscription comes up in the background; rooms catch up when it does).
    /// `mode` says how room channels are carried (the nodes channel is always plain).
    pub async fn start(url: &str, prefix: Prefix, mode: Mode) -> Result<Self, PubSubError> {
        let client = client(url)?;
        let publisher = client.get_connection_manager().await?;
        let node = NodeId::random();
        let (fanout, out) = Fanout::new(node, prefix, mode);
        let stop = CancellationToken::new();
        tokio::spawn(publish_loop(
            fanout.clone(),
            publisher.clone(),
            out,
            stop.clone(),
        ));
        tokio::spawn(subscribe_loop(fanout.clone(), client, stop.clone()));
        tokio::spawn(sweep_loop(fanout.clone(), stop.clone()));
        tracing::info!(%node, prefix = fanout.prefix.as_str(), ?mode, "pub/sub fan-out started");
        Ok(RedisFanout {
            fanout,
            publisher,
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
            redis::cmd("PUBLISH")
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

/// A RESP3 client of `url` (`redis://HOST:PORT` or `rediss://…`).
pub(super) fn client(url: &str) -> Result<Client, PubSubError> {
    if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
        return Err(PubSubError::UnsupportedUrl(url.to_owned()));
    }
    let info = url.into_connection_info()?;
    let resp3 = info
        .redis_settings()
        .clone()
        .set_protocol(ProtocolVersion::RESP3);
    Ok(Client::open(info.set_redis_settings(resp3))?)
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
/// publishes heartbeats.
async fn publish_loop(
    fanout: Arc<Fanout>,
    mut publisher: ConnectionManager,
    mut out: mpsc::Receiver<(String, Bytes)>,
    stop: CancellationToken,
) {
    let mut heartbeat = tokio::time::interval(HEARTBEAT_EVERY);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let beat = Envelope::Heartbeat { node: fanout.node }.encode();
    let publish = fanout.mode.publish_command();
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
        let mut pipe = redis::pipe();
        if beating {
            pipe.cmd("PUBLISH")
                .arg(fanout.prefix.nodes_channel())
                .arg(beat.as_ref())
                .ignore();
        }
        for (channel, payload) in &batch {
            pipe.cmd(publish)
                .arg(channel)
                .arg(payload.as_ref())
                .ignore();
        }
        let count = batch.len() as u64;
        let bytes: u64 = batch.iter().map(|(_, payload)| payload.len() as u64).sum();
        let beats = u64::from(beating);
        match pipe.query_async::<()>(&mut publisher).await {
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
        batch.clear();
    }
}

/// Keeps the subscription up: connects, subscribes to the nodes channel and to the loaded
/// rooms' channels, follows rooms loading and unloading, reads until it drops, and again.
async fn subscribe_loop(fanout: Arc<Fanout>, client: Client, stop: CancellationToken) {
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
        let config = AsyncConnectionConfig::new().set_push_sender(sender);
        let connected = tokio::select! {
            _ = stop.cancelled() => return,
            c = subscribe(&fanout, &client, config) => c,
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
async fn sync_rooms(
    fanout: &Fanout,
    connection: &MultiplexedConnection,
    subscribed: &mut HashSet<RoomName>,
) {
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
    connection: &MultiplexedConnection,
    prefix: &Prefix,
    command: &'static str,
    rooms: Vec<RoomName>,
) -> Vec<(RoomName, redis::RedisResult<Value>)> {
    futures_util::stream::iter(rooms)
        .map(|room| {
            let mut connection = connection.clone();
            let channel = prefix.room_channel(&room);
            async move {
                let done = redis::cmd(command)
                    .arg(channel)
                    .query_async::<Value>(&mut connection)
                    .await;
                (room, done)
            }
        })
        .buffer_unordered(SUBSCRIBE_CONCURRENCY)
        .collect()
        .await
}

/// Opens the subscriber connection, names it and subscribes to the nodes channel.
async fn subscribe(
    fanout: &Fanout,
    client: &Client,
    config: AsyncConnectionConfig,
) -> Result<MultiplexedConnection, PubSubError> {
    let mut connection = client
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    let name = format!("{}:sub:{}", fanout.prefix.as_str(), fanout.node);
    redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg(&name)
        .query_async::<()>(&mut connection)
        .await?;
    connection.subscribe(fanout.prefix.nodes_channel()).await?;
    Ok(connection)
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
