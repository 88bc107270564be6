//! The committer of one room: a task that makes queued updates durable (group commit), then
//! delivers them, compacts the log, sweeps awareness timeouts, and unloads the room when idle.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::pending::Pending;
use super::{Room, RoomError};

/// Delays between attempts to append to the store before the room gives up.
const STORE_RETRIES: [Duration; 3] = [
    Duration::from_millis(50),
    Duration::from_millis(250),
    Duration::from_secs(1),
];

/// Consecutive committed updates are merged into one frame up to this size.
const MAX_GROUP_BYTES: usize = 512 * 1024;

/// Committed updates waiting to go out as one merged frame.
#[derive(Default)]
struct Group {
    updates: Vec<Bytes>,
    bytes: usize,
    /// The connection every update came from, when they all came from the same one.
    common_origin: Option<Option<u64>>,
}

impl Group {
    fn push(&mut self, update: Bytes, from: Option<u64>) {
        self.bytes += update.len();
        self.common_origin = match self.common_origin {
            None => Some(from),
            Some(same) if same == from => Some(same),
            Some(_) => Some(None),
        };
        self.updates.push(update);
    }

    /// Sends the group to every peer but its common origin: one frame per burst, so a burst
    /// that was committed together costs each peer one queue slot, not one per update.
    fn flush(&mut self, room: &Room) {
        let group = std::mem::take(self);
        let except = group.common_origin.flatten();
        let frames: Vec<Bytes> = match group.updates.len() {
            0 => return,
            1 => group.updates,
            _ => match yrs::merge_updates_v1(&group.updates) {
                Ok(merged) => vec![Bytes::from(merged)],
                Err(error) => {
                    tracing::warn!(%error, "could not merge updates; sending them one by one");
                    group.updates
                }
            },
        };
        for update in frames {
            crate::metrics::global().updates_out.inc();
            room.broadcast(&crate::protocol::update(update.to_vec()), except);
        }
    }
}

/// Why the committer stopped.
pub(crate) enum Stop {
    /// Idle for the configured time: unloaded.
    Idle,
    /// Server shutdown: flushed.
    Shutdown,
    /// The store failed: peers were closed so they resync elsewhere or later.
    StoreFailed,
}

/// Where the committer is in the room's update log.
pub(crate) struct LogState {
    /// Sequence number of the last durable update.
    pub last_seq: u64,
    /// Updates logged since the last snapshot.
    pub since_snapshot: u64,
}

/// Runs until the room unloads, the server shuts down or the store fails.
pub(crate) async fn run(room: Arc<Room>, mut log: LogState, shutdown: CancellationToken) -> Stop {
    let mut sweep = tokio::time::interval(room.config.sweep_every);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = room.pending.arrived.notified() => {
                if commit(&room, &mut log).await.is_err() {
                    return fail(&room);
                }
            }
            _ = sweep.tick() => {
                room.sweep_awareness();
                if room.try_begin_unload() {
                    return finish(&room, &mut log, Stop::Idle).await;
                }
            }
            _ = shutdown.cancelled() => {
                room.closing.store(true, Ordering::SeqCst);
                return finish(&room, &mut log, Stop::Shutdown).await;
            }
        }
    }
}

/// Final flush and compaction before the room goes away.
async fn finish(room: &Arc<Room>, log: &mut LogState, stop: Stop) -> Stop {
    if commit(room, log).await.is_err() {
        return fail(room);
    }
    if log.since_snapshot > 0 {
        compact(room, log).await;
    }
    stop
}

fn fail(room: &Arc<Room>) -> Stop {
    room.closing.store(true, Ordering::SeqCst);
    let peers = std::mem::take(&mut room.lock_peers().links);
    for link in peers.values() {
        link.control.kick(RoomError::Store);
    }
    Stop::StoreFailed
}

/// Appends everything queued in one store call, then delivers it in order.
async fn commit(room: &Arc<Room>, log: &mut LogState) -> Result<(), RoomError> {
    let (items, upto) = room.pending.take_all();
    if items.is_empty() {
        room.pending.mark_delivered(upto);
        return Ok(());
    }
    let updates: Vec<Bytes> = items
        .iter()
        .filter_map(|item| match item {
            Pending::Update { update, .. } => Some(update.clone()),
            Pending::Reply { .. } => None,
        })
        .collect();
    if !updates.is_empty() {
        let count = updates.len() as u64;
        log.last_seq = append_with_retry(room, updates).await?;
        log.since_snapshot += count;
    }
    let mut group = Group::default();
    for item in items {
        match item {
            Pending::Update { update, from } => {
                if group.bytes + update.len() > MAX_GROUP_BYTES {
                    group.flush(room);
                }
                group.push(update, from);
            }
            Pending::Reply { conn, frame } => {
                group.flush(room);
                room.send_to(conn, frame);
            }
        }
    }
    group.flush(room);
    room.pending.mark_delivered(upto);
    if log.since_snapshot >= room.config.compact_every {
        compact(room, log).await;
    }
    Ok(())
}

async fn append_with_retry(room: &Arc<Room>, updates: Vec<Bytes>) -> Result<u64, RoomError> {
    let mut attempt = 0;
    loop {
        match room.store.append(&room.name, updates.clone()).await {
            Ok(seq) => return Ok(seq),
            Err(error) => {
                let Some(delay) = STORE_RETRIES.get(attempt) else {
                    tracing::error!(room = %room.name, %error, "store append failed; closing room");
                    return Err(RoomError::Store);
                };
                tracing::warn!(room = %room.name, %error, attempt, "store append failed; retrying");
                tokio::time::sleep(*delay).await;
                attempt += 1;
            }
        }
    }
}

/// Replaces the logged updates by one snapshot of the whole document.
async fn compact(room: &Arc<Room>, log: &mut LogState) {
    // The same encoding becomes the room's cold-load answer.
    let snapshot = room.encode_and_install_cold();
    match room.store.compact(&room.name, snapshot, log.last_seq).await {
        Ok(()) => {
            tracing::debug!(room = %room.name, upto = log.last_seq, "compacted update log");
            log.since_snapshot = 0;
        }
        Err(error) => {
            tracing::warn!(room = %room.name, %error, "compaction failed; will retry later")
        }
    }
}

impl Room {
    /// Marks the room closing if it has been unused for the idle time (no peer, no lease).
    fn try_begin_unload(&self) -> bool {
        let peers = self.lock_peers();
        let idle = peers.links.is_empty()
            && self.leases.load(Ordering::SeqCst) == 0
            && peers
                .idle_since
                .is_some_and(|since| since.elapsed() >= self.config.idle_unload);
        if idle {
            self.closing.store(true, Ordering::SeqCst);
        }
        idle
    }

    /// True once the room stopped accepting peers (unloading or shutting down).
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }
}
