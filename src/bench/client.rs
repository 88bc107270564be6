//! One bench client: a WebSocket (TCP_NODELAY) to one room, a tiny document holding only the
//! client's own shape, a send loop that moves that shape at a fixed rate with a send stamp, and
//! a receive loop that finds the other clients' stamps in the frames it gets (see
//! [`super::wire::stamps`]) and records their latency. It applies received updates to its
//! document only with `--apply`, so that a cheap client measures the server, not itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_util::sync::CancellationToken;
use yrs::updates::decoder::Decode;
use yrs::updates::encoder::Encode;
use yrs::{Doc, Map, MapPrelim, Out, ReadTxn, StateVector, Transact, Update, WriteTxn};

use super::nodes::Placement;
use super::stats::Shards;
use super::wire::{Inbound, Wire, stamp, stamps};

/// What every client shares: the clock, the measurement window and the histograms.
pub struct Shared {
    /// Micros are counted from here (one clock for senders and receivers).
    pub epoch: Instant,
    /// Micros between the run's epoch and [`Shared::epoch`]: 0 in the coordinating process;
    /// in a client process (`--client-procs`), how long after the coordinator's epoch this
    /// process started counting, so that every process stamps and measures on one clock.
    offset: u64,
    /// The run's epoch as micros since the Unix epoch (what client processes are given).
    pub epoch_unix_micros: u64,
    /// Updates sent at or after this many micros are measured (`u64::MAX` until set).
    pub window_start: AtomicU64,
    /// Updates sent before this many micros are measured.
    pub window_end: AtomicU64,
    /// Latencies of measured deliveries.
    pub latencies: Shards,
    /// Latencies of measured deliveries between clients on different nodes.
    pub cross_node: Shards,
    /// Latencies of measured deliveries between clients on the same node (with several nodes).
    pub same_node: Shards,
    /// Which node each client is on.
    placement: Placement,
    /// Updates sent inside the window.
    pub sent_in_window: AtomicU64,
}

impl Shared {
    /// A shared state with no window yet.
    pub fn new(shards: usize) -> Self {
        Shared {
            epoch: Instant::now(),
            offset: 0,
            epoch_unix_micros: unix_micros(),
            window_start: AtomicU64::new(u64::MAX),
            window_end: AtomicU64::new(u64::MAX),
            latencies: Shards::new(shards),
            cross_node: Shards::new(shards),
            same_node: Shards::new(shards),
            sent_in_window: AtomicU64::new(0),
            placement: Placement::single(),
        }
    }

    /// The same, counting from the coordinator's epoch `epoch_unix_micros` (a client process
    /// of `--client-procs`: the processes of one machine share its wall clock).
    pub fn joining(self, epoch_unix_micros: u64) -> Self {
        let epoch = Instant::now();
        Shared {
            epoch,
            offset: unix_micros().saturating_sub(epoch_unix_micros),
            epoch_unix_micros,
            ..self
        }
    }

    /// The same, for clients placed on nodes by `placement`.
    pub fn on_nodes(self, placement: Placement) -> Self {
        Shared { placement, ..self }
    }

    /// The node client `client` connects to (see [`Placement`]).
    pub fn node_of(&self, client: usize) -> usize {
        self.placement.node_of(client)
    }

    /// Micros since the epoch.
    pub fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros())
            .unwrap_or(u64::MAX)
            .saturating_add(self.offset)
    }

    fn in_window(&self, sent: u64) -> bool {
        sent >= self.window_start.load(Ordering::Relaxed)
            && sent < self.window_end.load(Ordering::Relaxed)
    }
}

/// Micros since the Unix epoch (0 before it).
fn unix_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// One client's settings.
pub struct Client {
    /// Index of the client (its stamps carry it).
    pub id: usize,
    /// WebSocket URL of its room.
    pub url: String,
    /// Framing of the server under test.
    pub wire: Wire,
    /// Token for protocols that send one in a message (Hocuspocus).
    pub token: String,
    /// Updates per second.
    pub rate: f64,
    /// Apply received updates to the client's document.
    pub apply: bool,
    /// Shared clock, window and histograms.
    pub shared: Arc<Shared>,
}

/// The signals a client obeys.
pub struct Signals {
    /// Stop sending (the load is over; keep the socket open for the after-load RSS sample).
    pub quiet: CancellationToken,
    /// Close the socket and return.
    pub stop: CancellationToken,
    /// Told once the client is connected and its shape created.
    pub ready: tokio::sync::oneshot::Sender<()>,
}

/// Sends one binary frame.
async fn send<S>(sink: &mut S, frame: Vec<u8>) -> anyhow::Result<()>
where
    S: futures_util::Sink<WsMessage, Error = tokio_tungstenite::tungstenite::Error> + Unpin,
{
    sink.send(WsMessage::Binary(frame.into()))
        .await
        .context("send")
}

impl Client {
    /// Connects (at most `connecting` handshakes at once), syncs, then sends until told to
    /// stop; returns the number of updates sent.
    pub async fn run(
        self,
        connecting: Arc<tokio::sync::Semaphore>,
        signals: Signals,
    ) -> anyhow::Result<u64> {
        let ws = {
            let _permit = connecting.acquire().await.context("connect limiter")?;
            // `true`: TCP_NODELAY, so small frames leave at once (no Nagle / delayed-ACK stall).
            let (ws, _) = tokio_tungstenite::connect_async_with_config(&self.url, None, true)
                .await
                .with_context(|| format!("client {} connecting to {}", self.id, self.url))?;
            ws
        };
        let (mut sink, mut stream) = ws.split();
        // A fresh random client id per run, as Yjs clients draw one: a server that keeps the
        // room between runs would otherwise take this run's updates for ones it already has.
        let client_id = rand::random::<u32>();
        let doc = Doc::with_client_id(u64::from(client_id));
        // A key of its own per connection: a client that reconnects (the soak) inserts its shape
        // without having loaded the room, so under its old key the insert would race the
        // previous connection's and lose to a higher client id half the time, its moves then
        // landing in a deleted map that nobody is sent.
        let own = format!("bench-{}-{client_id:x}", self.id);
        for frame in self.wire.hello(&self.token) {
            send(&mut sink, frame).await?;
        }
        let sv = doc.transact().state_vector().encode_v1();
        send(&mut sink, self.wire.step1(&sv)).await?;
        let create = {
            let mut txn = doc.transact_mut();
            let shapes = txn.get_or_insert_map("shapes");
            shapes.insert(
                &mut txn,
                own.as_str(),
                MapPrelim::from([
                    ("id", yrs::Any::from(own.as_str())),
                    ("type", yrs::Any::from("rectangle")),
                ]),
            );
            txn.encode_update_v1()
        };
        send(&mut sink, self.wire.update(&create)).await?;
        let _ = signals.ready.send(());
        let period = Duration::from_secs_f64(1.0 / self.rate);
        // Spread clients over the period so they do not all send at once.
        let offset = period.mul_f64(self.id as f64 / 97.0 % 1.0);
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + offset, period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut sent = 0u64;
        let mut sending = true;
        loop {
            tokio::select! {
                _ = signals.stop.cancelled() => break,
                _ = signals.quiet.cancelled(), if sending => sending = false,
                _ = tick.tick(), if sending => {
                    let now = self.shared.now();
                    let update = {
                        let mut txn = doc.transact_mut();
                        let shapes = txn.get_or_insert_map("shapes");
                        if let Some(Out::YMap(shape)) = shapes.get(&txn, own.as_str()) {
                            shape.insert(&mut txn, "x", (sent % 1000) as f64);
                            shape.insert(&mut txn, "sentAt", stamp(self.id, now));
                        }
                        txn.encode_update_v1()
                    };
                    send(&mut sink, self.wire.update(&update)).await?;
                    if self.shared.in_window(now) {
                        self.shared.sent_in_window.fetch_add(1, Ordering::Relaxed);
                    }
                    sent += 1;
                }
                frame = stream.next() => {
                    let bytes = match frame {
                        Some(Ok(WsMessage::Binary(bytes))) => bytes,
                        Some(Ok(WsMessage::Close(_))) | Some(Err(_)) | None => {
                            anyhow::bail!("client {} disconnected: {frame:?}", self.id);
                        }
                        Some(Ok(_)) => continue,
                    };
                    let received = self.shared.now();
                    match self.wire.inbound(&bytes) {
                        Inbound::Step1(sv) => {
                            let sv = StateVector::decode_v1(sv).unwrap_or_default();
                            let diff = doc.transact().encode_diff_v1(&sv);
                            send(&mut sink, self.wire.step2(&diff)).await?;
                        }
                        Inbound::Update(update) => {
                            self.record(update, received);
                            if self.apply {
                                apply(&doc, update);
                            }
                        }
                        Inbound::Step2(update) => {
                            if self.apply {
                                apply(&doc, update);
                            }
                        }
                        Inbound::Other => {}
                    }
                }
            }
        }
        // The shape leaves with the connection, so a reconnecting client does not grow the room.
        let remove = {
            let mut txn = doc.transact_mut();
            let shapes = txn.get_or_insert_map("shapes");
            shapes.remove(&mut txn, own.as_str());
            txn.encode_update_v1()
        };
        let _ = send(&mut sink, self.wire.update(&remove)).await;
        let _ = sink.send(WsMessage::Close(None)).await;
        Ok(sent)
    }

    /// Records the latency of every other client's stamp in `update` sent inside the window.
    fn record(&self, update: &[u8], received: u64) {
        let mut measured = stamps(update)
            .filter(|(client, sent)| *client != self.id && self.shared.in_window(*sent))
            .peekable();
        if measured.peek().is_none() {
            return;
        }
        let node = self.shared.node_of(self.id);
        let mut crossed = Vec::new();
        let mut same = Vec::new();
        {
            let mut shard = self.shared.latencies.shard(self.id);
            for (client, sent) in measured {
                let latency = received.saturating_sub(sent);
                shard.record(latency);
                if self.shared.node_of(client) != node {
                    crossed.push(latency);
                } else {
                    same.push(latency);
                }
            }
        }
        // With one node every delivery is a same-node one: the overall histogram says it all.
        if self.shared.placement.nodes() > 1 {
            record_all(&self.shared.cross_node, self.id, crossed);
            record_all(&self.shared.same_node, self.id, same);
        }
    }
}

fn record_all(shards: &Shards, client: usize, latencies: Vec<u64>) {
    if !latencies.is_empty() {
        let mut shard = shards.shard(client);
        for latency in latencies {
            shard.record(latency);
        }
    }
}

fn apply(doc: &Doc, update: &[u8]) {
    if let Ok(update) = Update::decode_v1(update) {
        let _ = doc.transact_mut().apply_update(update);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_follow_the_placement() {
        let placement = Placement::new(2, 3, None).unwrap_or_else(|e| panic!("{e}"));
        let shared = Shared::new(1).on_nodes(placement);
        let nodes: Vec<usize> = (0..7).map(|i| shared.node_of(i)).collect();
        assert_eq!(nodes, [0, 0, 0, 1, 1, 1, 0]);
        assert_eq!(Shared::new(1).node_of(5), 0, "one node by default");
    }
}
