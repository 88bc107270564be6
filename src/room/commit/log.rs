//! Where the committer is in the room's update log ([`LogState`]: the sequence numbers the
//! document holds, what was logged since the last snapshot), and the log's upkeep beside the
//! committer: compaction into a snapshot (docs/storage.md "Compaction") and the history's
//! checkpoints (docs/storage.md "History"), each run as a task of its own so that the
//! committer goes on committing meanwhile.
//!
//! Owns the decisions of when to compact and checkpoint and the counting of what a finished
//! compaction took out of the log; the builds themselves run on the snapshot thread
//! ([`super::snapshot`]) or in the history (`crate::history::checkpoint`, given as [`crate::room::Checkpoints`]). Touches the store
//! through the room's [`Store`](crate::store::Store) only.

use std::sync::Arc;

use bytes::Bytes;
use tokio::time::Instant;

use crate::room::Room;
use crate::room::peers::remote::SeqTracker;

/// Where the committer is in the room's update log.
pub(crate) struct LogState {
    /// Which sequence numbers the document holds.
    pub seqs: SeqTracker,
    /// Updates logged since the last snapshot.
    pub since_snapshot: u64,
    /// Bytes of those updates.
    pub bytes_since_snapshot: u64,
    /// Bytes of the last snapshot this committer wrote (0: none yet).
    pub snapshot_bytes: u64,
    /// Bytes of the snapshot the room was loaded from (0: none).
    pub loaded_snapshot_bytes: u64,
    /// When a catch-up from the store is due (scale-out only).
    pub catchup_at: Option<Instant>,
    /// The compaction running beside the committer, if any (see [`start_compaction`]).
    pub(super) compacting: Option<Compaction>,
    /// When the room last checked the store for missed updates.
    pub reconciled: Instant,
    /// The history checkpoint being taken beside the committer, if any (see
    /// [`start_checkpoint`]).
    pub(super) checkpointing: Option<tokio::task::JoinHandle<u64>>,
    /// The sequence number the next checkpoint counts from (0 until the first check tells).
    pub(super) checkpoint_from: u64,
}

impl LogState {
    /// The log of a room loaded up to `last_seq` at `now`, with `since_snapshot` updates after
    /// its snapshot.
    pub fn new(last_seq: u64, since_snapshot: u64, now: Instant) -> Self {
        LogState {
            seqs: SeqTracker::new(last_seq),
            since_snapshot,
            bytes_since_snapshot: 0,
            snapshot_bytes: 0,
            loaded_snapshot_bytes: 0,
            catchup_at: None,
            compacting: None,
            reconciled: now,
            checkpointing: None,
            checkpoint_from: 0,
        }
    }

    pub(super) fn catch_up_by(&mut self, at: Instant) {
        self.catchup_at = Some(self.catchup_at.map_or(at, |due| due.min(at)));
    }
}

/// Whether the log is worth compacting: `compact_every` updates logged, and at least a quarter
/// of the last snapshot's size in bytes (a snapshot is the whole document, encoded or rebuilt
/// from the store: in a large room, thousands of small updates do not pay for it); never more
/// than 16 × `compact_every` updates, which bounds a load's replay.
pub(super) fn compaction_due(log: &LogState, compact_every: u64) -> bool {
    compaction_rule(
        log.since_snapshot,
        log.bytes_since_snapshot,
        log.snapshot_bytes,
        compact_every,
    )
}

/// [`compaction_due`] on plain figures: `since` updates of `bytes` logged after a snapshot of
/// `snapshot_bytes` (also what `fairyring bench --history-updates` compacts by).
pub(crate) fn compaction_rule(
    since: u64,
    bytes: u64,
    snapshot_bytes: u64,
    compact_every: u64,
) -> bool {
    since >= compact_every
        && (bytes.saturating_mul(4) >= snapshot_bytes || since >= compact_every.saturating_mul(16))
}

/// A compaction running beside the committer: its task, and the updates and bytes the log
/// held since the last snapshot when it started (all of them are in the snapshot it writes).
pub(super) struct Compaction {
    task: tokio::task::JoinHandle<Option<u64>>,
    covered: u64,
    covered_bytes: u64,
    /// The room's document size estimate when it started (see [`crate::room::vet::size`]).
    size_mark: u64,
}

/// Snapshots below this size are encoded from the live document (a millisecond or two under
/// its lock); larger ones are built from the store ([`compact_from_store`]).
const LIVE_ENCODE_MAX: u64 = 256 * 1024;

/// Starts compacting the room's log beside the committer, which goes on committing while the
/// snapshot is written. A small room's snapshot is encoded from the live document at once. A
/// larger room's is built from the store, never from the live document: in a private document
/// on the snapshot thread ([`super::snapshot`]), so no update of the room waits for it.
/// Encoding the live document held its lock for tens of milliseconds in a room of thousands of
/// shapes: people's p99 beside 16 drawing fairies went from 9–10 to 16–29 ms, their worst from
/// 15–22 to 50–72 ms (docs/storage.md "Compaction"). The price is memory: while it runs, the
/// room's document exists twice (one room at a time: the snapshot thread builds one).
pub(super) fn start_compaction(room: &Arc<Room>, log: &mut LogState) {
    let size_mark = room.size.mark();
    let task = if log.snapshot_bytes.max(log.loaded_snapshot_bytes) < LIVE_ENCODE_MAX {
        // Only up to what the document is known to hold: with several nodes appending, a
        // later sequence number of this node's may lie beyond one it has not received yet.
        let upto = log.seqs.contiguous();
        if upto == 0 {
            return;
        }
        // The same encoding becomes the room's cold-load answer.
        let snapshot = room.encode_and_install_cold();
        let room = room.clone();
        tokio::spawn(async move { write_snapshot(&room, snapshot, upto).await })
    } else {
        tokio::spawn(compact_from_store(room.clone()))
    };
    log.compacting = Some(Compaction {
        task,
        covered: log.since_snapshot,
        covered_bytes: log.bytes_since_snapshot,
        size_mark,
    });
}

/// Builds a snapshot of everything stored for the room and replaces the log up to the last
/// sequence number it holds (every node's updates up to it); the snapshot's size, or `None`
/// when nothing was compacted.
async fn compact_from_store(room: Arc<Room>) -> Option<u64> {
    let stored = match room.store.load(&room.name).await {
        Ok(stored) => stored,
        Err(error) => {
            tracing::warn!(room = %room.name, %error, "compaction could not read the log; will retry later");
            return None;
        }
    };
    let upto = stored.last_seq;
    if upto == 0 {
        return None;
    }
    let Some(snapshot) = super::snapshot::build(stored).await else {
        tracing::warn!(room = %room.name, "no snapshot built; will retry later");
        return None;
    };
    write_snapshot(&room, snapshot, upto).await
}

/// Replaces the room's log up to `upto` by `snapshot`; the snapshot's size, or `None` when the
/// store failed.
async fn write_snapshot(room: &Room, snapshot: Bytes, upto: u64) -> Option<u64> {
    let bytes = snapshot.len() as u64;
    match room.store.compact(&room.name, snapshot, upto).await {
        Ok(()) => {
            tracing::debug!(room = %room.name, upto, "compacted update log");
            Some(bytes)
        }
        Err(error) => {
            tracing::warn!(room = %room.name, %error, "compaction failed; will retry later");
            None
        }
    }
}

/// Resolves when the running compaction ends (never while none runs); takes it.
pub(super) async fn compaction_done(
    compacting: &mut Option<Compaction>,
) -> (Option<u64>, u64, u64, u64) {
    let Some(running) = compacting.as_mut() else {
        return std::future::pending().await;
    };
    let snapshot = (&mut running.task).await.ok().flatten();
    let (covered, covered_bytes) = (running.covered, running.covered_bytes);
    let size_mark = running.size_mark;
    *compacting = None;
    (snapshot, covered, covered_bytes, size_mark)
}

/// Counts what a finished compaction took out of the log, and rebases the room's document
/// size estimate on the snapshot (see [`crate::room::vet::size`]).
pub(super) fn compacted(
    room: &Room,
    log: &mut LogState,
    (snapshot, covered, bytes, size_mark): (Option<u64>, u64, u64, u64),
) {
    let Some(snapshot_bytes) = snapshot else {
        return;
    };
    room.size.rebase(snapshot_bytes, size_mark);
    log.since_snapshot = log.since_snapshot.saturating_sub(covered);
    log.bytes_since_snapshot = log.bytes_since_snapshot.saturating_sub(bytes);
    log.snapshot_bytes = snapshot_bytes;
    tracing::trace!(room = %room.name, snapshot_bytes, "compaction counted");
}

/// Replaces the logged updates by one snapshot of the whole document, encoded from the live
/// document (the room is going away: nobody waits for it).
pub(super) async fn compact(room: &Arc<Room>, log: &mut LogState) {
    // Only up to what the document is known to hold: with several nodes appending, a later
    // sequence number of this node's may lie beyond one it has not received yet.
    let upto = log.seqs.contiguous();
    if upto == 0 {
        // Nothing the document is known to hold yet (a gap from the first update on).
        return;
    }
    let snapshot = room.encode_and_install_cold();
    if let Some(snapshot_bytes) = write_snapshot(room, snapshot, upto).await {
        log.since_snapshot = 0;
        log.bytes_since_snapshot = 0;
        log.snapshot_bytes = snapshot_bytes;
    }
}

/// Starts taking a history checkpoint beside the committer when none runs and the log is
/// `--history-checkpoint-every` updates past the last one (docs/storage.md "History"): built
/// from the store on the snapshot thread, never from the live document
/// (`crate::history::checkpoint`, given as [`crate::room::Checkpoints`]). Only up to what the document is known to hold, as a
/// compaction.
pub(super) fn start_checkpoint(room: &Arc<Room>, log: &mut LogState) {
    let every = room.config.history_checkpoint_every;
    let upto = log.seqs.contiguous();
    let Some(checkpoints) = room.config.checkpoints.clone() else {
        return;
    };
    if every == 0 || log.checkpointing.is_some() || upto < log.checkpoint_from.saturating_add(every)
    {
        return;
    }
    let (store, name) = (room.store.clone(), room.name.clone());
    log.checkpointing = Some(tokio::spawn(async move {
        checkpoints.take(&store, &name, upto, every).await
    }));
}

/// Resolves when the running checkpoint ends (never while none runs) with the sequence number
/// the next one counts from; takes it.
pub(super) async fn checkpoint_done(
    checkpointing: &mut Option<tokio::task::JoinHandle<u64>>,
) -> u64 {
    let Some(running) = checkpointing.as_mut() else {
        return std::future::pending().await;
    };
    let from = running.await.unwrap_or(0);
    *checkpointing = None;
    from
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(since: u64, bytes: u64, snapshot: u64) -> LogState {
        LogState {
            since_snapshot: since,
            bytes_since_snapshot: bytes,
            snapshot_bytes: snapshot,
            ..LogState::new(0, 0, Instant::now())
        }
    }

    #[test]
    fn compaction_waits_for_a_quarter_of_the_snapshot_in_bytes() {
        assert!(!compaction_due(&log(499, 1 << 20, 0), 500));
        assert!(compaction_due(&log(500, 100, 0), 500));
        // A 4 MB room: 500 small updates are not worth a whole-document encode...
        assert!(!compaction_due(&log(500, 25_000, 4 << 20), 500));
        // ...a megabyte of them is, and so are 8,000 of any size.
        assert!(compaction_due(&log(2_000, 1 << 20, 4 << 20), 500));
        assert!(compaction_due(&log(8_000, 400_000, 4 << 20), 500));
    }
}
