//! Messages addressed to one node (docs/scaling.md "Projects across nodes"): each node listens
//! on its own channel, `PREFIX:node:NODE` (`NODE` as fairy leases name it), over a connection
//! of its own named `PREFIX:direct:NODE`, and any node publishes to it. Used by the fairy hub
//! to reach fairies hosted elsewhere; this module carries opaque, bounded payloads only.
//!
//! Owns that subscriber connection (reconnecting as the room subscriber does, while the node
//! runs), the bounded queue of payloads it received, and the publishing of payloads to another
//! node's channel, which answers whether a subscriber of that channel received it (Redis
//! `PUBLISH`'s count: 0 when the node is gone or not yet subscribed). On a Redis Cluster the
//! channels are sharded (`SSUBSCRIBE`/`SPUBLISH`): a channel lives on the shard owning its slot,
//! so `SPUBLISH`'s count is every receiver's, where a plain `PUBLISH` would count only those of
//! the cluster node that ran it. Must not know what the payloads mean, nor touch room channels
//! ([`super::redis`]) or leases ([`super::lease`]).

use std::sync::Arc;

use bytes::Bytes;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::target::{Commands, Subscriber};
use super::{NodeId, Prefix, PubSubError, Target};

/// Payloads received and not yet handled before new ones are dropped.
const INBOUND_QUEUE: usize = 1024;
/// Largest payload sent or accepted.
pub const MAX_PAYLOAD: usize = 256 * 1024;

/// This node's handle on the per-node channels of its deployment.
#[derive(Clone)]
pub struct DirectChannel {
    publisher: Commands,
    /// `PUBLISH`, or `SPUBLISH` on a cluster.
    publish: &'static str,
    prefix: Prefix,
    node: NodeId,
}

/// The channel of the node named `node` (as leases name it).
fn node_channel(prefix: &Prefix, node: &str) -> String {
    format!("{}:node:{node}", prefix.as_str())
}

impl DirectChannel {
    /// Connects to `target` as node `node` and starts listening on its channel until `stop`;
    /// the channel, and the payloads it receives.
    pub async fn start(
        target: &Target,
        prefix: Prefix,
        node: NodeId,
        stop: CancellationToken,
    ) -> Result<(Self, mpsc::Receiver<Bytes>), PubSubError> {
        let publisher = target.commands().await?;
        let (tx, rx) = mpsc::channel(INBOUND_QUEUE);
        let channel = DirectChannel {
            publisher,
            publish: target.own_publish_command(),
            prefix,
            node,
        };
        tokio::spawn(listen_loop(channel.clone(), target.clone(), tx, stop));
        Ok((channel, rx))
    }

    /// This node's name, as leases give it.
    pub fn node(&self) -> String {
        self.node.to_string()
    }

    /// Publishes `payload` to node `node`'s channel; whether a subscriber received it.
    pub async fn send(&self, node: &str, payload: Bytes) -> Result<bool, PubSubError> {
        if payload.len() > MAX_PAYLOAD {
            return Ok(false);
        }
        let received: i64 = redis::cmd(self.publish)
            .arg(node_channel(&self.prefix, node))
            .arg(payload.as_ref())
            .query_async(&mut self.publisher.clone())
            .await?;
        Ok(received > 0)
    }
}

/// Keeps this node's channel subscribed and hands what arrives to `tx` (dropping, with a
/// warning, what does not fit).
async fn listen_loop(
    channel: DirectChannel,
    target: Target,
    tx: mpsc::Sender<Bytes>,
    stop: CancellationToken,
) {
    let mut failures = 0usize;
    let name = node_channel(&channel.prefix, &channel.node());
    loop {
        let dropped = Arc::new(Notify::new());
        let (to_room, gone) = (tx.clone(), dropped.clone());
        let sender = move |info: PushInfo| {
            match info.kind {
                // A cluster unsubscribes a sharded channel whose slot moved: this node only
                // ever subscribes, so it is the subscription gone.
                PushKind::Disconnection | PushKind::SUnsubscribe => gone.notify_one(),
                PushKind::Message | PushKind::SMessage => {
                    if let Some(payload) = payload_of(info.data)
                        && to_room.try_send(payload).is_err()
                    {
                        tracing::warn!("node channel queue full; a message dropped");
                    }
                }
                _ => {}
            }
            Ok::<(), std::convert::Infallible>(())
        };
        let connected = tokio::select! {
            _ = stop.cancelled() => return,
            c = subscribe(&target, sender, &channel, &name) => c,
        };
        match connected {
            Ok(_connection) => {
                failures = 0;
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = dropped.notified() => {}
                }
                tracing::warn!("node channel subscription dropped; reconnecting");
            }
            Err(error) => tracing::warn!(%error, "node channel subscription failed; retrying"),
        }
        if !super::redis::back_off(&mut failures, &stop).await {
            return;
        }
    }
}

async fn subscribe(
    target: &Target,
    push: impl redis::aio::AsyncPushSender,
    channel: &DirectChannel,
    name: &str,
) -> Result<Subscriber, PubSubError> {
    let connection_name = format!("{}:direct:{}", channel.prefix.as_str(), channel.node());
    let connection = target.subscriber(push, &connection_name).await?;
    connection.subscribe_own(name.to_owned()).await?;
    Ok(connection)
}

/// The payload of a pushed message (`channel, payload`), if readable and not too large.
fn payload_of(data: Vec<Value>) -> Option<Bytes> {
    let payload = data
        .into_iter()
        .filter_map(|value| match value {
            Value::BulkString(bytes) => Some(bytes),
            _ => None,
        })
        .nth(1)?;
    (payload.len() <= MAX_PAYLOAD).then(|| Bytes::from(payload))
}
