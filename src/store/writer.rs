//! Group commit, shared by the SQL stores (docs/storage.md, "Group commit").
//!
//! Owns the write requests ([`WriteReq`]), the bounded queue to one writer task and that task:
//! every request queued while a commit is in flight joins the next transaction, across rooms,
//! and is answered only after that transaction committed. What a transaction does is the
//! backend's ([`Batch`]); this module knows no SQL dialect.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::{Notify, mpsc, oneshot};

use super::keyed::Table;
use super::{Checkpoint, Fence, Logged, StoreError};
use crate::ids::RoomName;

/// Most requests the writer folds into one transaction.
const MAX_GROUP: usize = 256;
/// Requests queued for the writer before writers wait (backpressure).
const WRITER_QUEUE: usize = 1024;
/// Attempts of one batch the backend calls retryable (a deadlock, a serialization failure).
const BATCH_ATTEMPTS: usize = 3;

/// One write, with the channel its outcome goes back on: for appends the last sequence number
/// written, for the others 0.
pub(crate) struct WriteReq {
    pub op: WriteOp,
    done: oneshot::Sender<Result<u64, StoreError>>,
}

/// What a write does.
pub(crate) enum WriteOp {
    /// Appends updates, with their actors and times, to a room's log, unless one of `fences`
    /// is stale (see [`super::Store::append_fenced`]; empty: no check).
    Append {
        room: String,
        updates: Vec<Logged>,
        fences: Vec<Fence>,
    },
    /// Replaces the room's snapshot (see [`super::Store::compact`]).
    Compact {
        room: String,
        snapshot: Bytes,
        upto_seq: u64,
    },
    /// Keeps a history checkpoint (see [`super::Store::add_checkpoint`]); answers 1 when kept.
    Checkpoint {
        room: String,
        checkpoint: Checkpoint,
    },
    /// Replaces a row of a keyed side table (a fairy's private state), unless `fence` (the
    /// writer's token of fairy `key`) is stale (see [`super::keyed::SideTables::put`]).
    Put {
        table: Table,
        room: String,
        key: String,
        value: Bytes,
        fence: Option<u64>,
    },
    /// Deletes a row of a keyed side table.
    Delete {
        table: Table,
        room: String,
        key: String,
    },
}

impl WriteOp {
    /// Whether nobody waits for it to broadcast: a compaction or a side table's row (a
    /// fairy's state; not an append, which a peer's update waits for).
    pub fn is_background(&self) -> bool {
        !matches!(self, WriteOp::Append { .. })
    }

    /// The order in which a batch may take its locks: appends by room, then compactions and
    /// checkpoints by room, then side tables' rows by (table, room, key) (fairy states by
    /// (room, fairy)). A stable sort keeps one key's writes in order.
    pub fn lock_key(&self) -> (u8, &str, &str) {
        match self {
            WriteOp::Append { room, .. } => (0, room, ""),
            WriteOp::Compact { room, .. } | WriteOp::Checkpoint { room, .. } => (1, room, ""),
            WriteOp::Put {
                table, room, key, ..
            }
            | WriteOp::Delete { table, room, key } => (2 + *table as u8, room, key),
        }
    }
}

/// A sequence number as the SQL stores keep it (`i64`; past `i64::MAX`, which no log reaches,
/// the largest).
pub(crate) fn to_i64(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

/// A sequence number read back from the SQL stores (a negative one, never written, as 0).
pub(crate) fn to_u64(seq: i64) -> u64 {
    u64::try_from(seq).unwrap_or(0)
}

/// Most entries a SQL group-commit writer's caches keep (actors' numbers; SQLite's rooms' last
/// sequence numbers): past it a cache starts again (a miss costs one lookup). Every fairy
/// request logs under an actor of its own and rooms come and go, so without a bound the caches
/// of a server running for days grew by an entry per request and per room; they were emptied
/// only when the last loaded room unloaded, which a busy server never sees.
pub(crate) const CACHED_MAX: usize = 4096;

/// Keeps the actors' numbers a committed transaction learnt in the writer's cache `known`,
/// emptied first when it would hold more than [`CACHED_MAX`].
pub(crate) fn remember_actors(known: &mut HashMap<Arc<str>, i64>, learnt: Vec<(Arc<str>, i64)>) {
    if known.len() + learnt.len() > CACHED_MAX {
        *known = HashMap::new();
    }
    known.extend(learnt);
}

/// The number of an actor's JSON in the SQL stores' `actors` table when already known: from
/// the writer's cache of committed ones (`known`), or added earlier in the same transaction
/// (`interned`). `None`: the backend must look it up (and add it).
pub(crate) fn known_actor(
    known: &HashMap<Arc<str>, i64>,
    interned: &[(Arc<str>, i64)],
    actor: &Arc<str>,
) -> Option<i64> {
    known
        .get(actor)
        .copied()
        .or_else(|| interned.iter().find(|(a, _)| a == actor).map(|(_, id)| *id))
}

/// What one write of a committed batch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Written {
    /// Written; its outcome number (an append's last sequence number, a kept checkpoint's 1).
    Done(u64),
    /// An append refused, nothing of it written: the fence of this fairy was stale.
    Fenced(String),
}

/// A backend's transaction over a batch of writes.
#[async_trait]
pub(crate) trait Batch: Send + 'static {
    /// Commits every write in one transaction; returns, per write, what it did.
    async fn commit(&mut self, batch: &[WriteReq]) -> Result<Vec<Written>, sqlx::Error>;

    /// Frees what the backend keeps in memory between commits (its connection, caches); called
    /// between batches when [`Writer::release_memory`] asked for it.
    async fn release_memory(&mut self) {}

    /// Whether a failed batch may succeed if tried again at once.
    fn retryable(&self, _error: &sqlx::Error) -> bool {
        false
    }

    /// Whether the writer sorts a batch by [`WriteOp::lock_key`] before committing it.
    fn sorted(&self) -> bool {
        false
    }
}

/// The sending side of the writer task.
pub(crate) struct Writer {
    requests: mpsc::Sender<WriteReq>,
    release: Arc<Notify>,
}

impl Writer {
    /// Starts the writer task over a backend.
    pub fn start(backend: impl Batch) -> Self {
        let (requests, rx) = mpsc::channel(WRITER_QUEUE);
        let release = Arc::new(Notify::new());
        tokio::spawn(write_loop(backend, rx, release.clone()));
        Writer { requests, release }
    }

    /// Asks the writer task to free its backend's memory between two batches (no room is
    /// loaded); does not wait for it.
    pub fn release_memory(&self) {
        self.release.notify_one();
    }

    /// Queues a write and waits until its transaction committed.
    pub async fn write(&self, op: WriteOp) -> Result<u64, StoreError> {
        let (done, result) = oneshot::channel();
        self.requests
            .send(WriteReq { op, done })
            .await
            .map_err(|_| StoreError::WriterStopped)?;
        result.await.map_err(|_| StoreError::WriterStopped)?
    }

    /// Appends updates to a room's log unless one of `fences` is stale (empty: no check);
    /// returns the last sequence number.
    pub async fn append(
        &self,
        room: &RoomName,
        updates: Vec<Logged>,
        fences: Vec<Fence>,
    ) -> Result<u64, StoreError> {
        let room = room.as_str().to_owned();
        self.write(WriteOp::Append {
            room,
            updates,
            fences,
        })
        .await
    }

    /// Replaces a room's snapshot by `snapshot` (see [`super::Store::compact`]).
    pub async fn compact(
        &self,
        room: &RoomName,
        snapshot: Bytes,
        upto_seq: u64,
    ) -> Result<(), StoreError> {
        let room = room.as_str().to_owned();
        self.write(WriteOp::Compact {
            room,
            snapshot,
            upto_seq,
        })
        .await
        .map(|_| ())
    }

    /// Keeps a history checkpoint (see [`super::Store::add_checkpoint`]); whether it was kept.
    pub async fn add_checkpoint(
        &self,
        room: &RoomName,
        checkpoint: Checkpoint,
    ) -> Result<bool, StoreError> {
        let room = room.as_str().to_owned();
        self.write(WriteOp::Checkpoint { room, checkpoint })
            .await
            .map(|kept| kept == 1)
    }

    /// Replaces a row of a keyed side table, unless `fence` is stale (`None`: no check).
    pub async fn put(
        &self,
        table: Table,
        room: &RoomName,
        key: &str,
        value: Bytes,
        fence: Option<u64>,
    ) -> Result<(), StoreError> {
        let (room, key) = (room.as_str().to_owned(), key.to_owned());
        self.write(WriteOp::Put {
            table,
            room,
            key,
            value,
            fence,
        })
        .await
        .map(|_| ())
    }

    /// Deletes a row of a keyed side table.
    pub async fn delete(&self, table: Table, room: &RoomName, key: &str) -> Result<(), StoreError> {
        let (room, key) = (room.as_str().to_owned(), key.to_owned());
        self.write(WriteOp::Delete { table, room, key })
            .await
            .map(|_| ())
    }
}

/// The writer task: takes every queued request, commits the appends of them in one
/// transaction and answers those, then the rest (compactions, side tables' rows such as fairy
/// states) in another; between
/// batches, frees the backend's memory when asked.
///
/// Two transactions, appends first: a snapshot is the whole document and a fairy's state its
/// whole history and ledger (megabytes and hundreds of kilobytes), and in one transaction with
/// people's updates they made every person's update wait for those blobs to reach the disk
/// (docs/fairies.md "People and fairies in one room").
async fn write_loop(
    mut backend: impl Batch,
    mut requests: mpsc::Receiver<WriteReq>,
    release: Arc<Notify>,
) {
    let mut batch = Vec::with_capacity(MAX_GROUP);
    loop {
        // `recv_many` is cancel safe: a request is either in `batch` or still queued.
        let received = tokio::select! {
            received = requests.recv_many(&mut batch, MAX_GROUP) => received,
            _ = release.notified() => {
                backend.release_memory().await;
                continue;
            }
        };
        if received == 0 {
            break;
        }
        let mut background: Vec<WriteReq> =
            batch.extract_if(.., |r| r.op.is_background()).collect();
        for group in [&mut batch, &mut background] {
            if !group.is_empty() {
                commit_and_answer(&mut backend, group).await;
            }
        }
    }
}

/// Commits `batch` in one transaction (retried while the backend says it may succeed) and
/// answers every request of it with the outcome.
async fn commit_and_answer(backend: &mut impl Batch, batch: &mut Vec<WriteReq>) {
    if backend.sorted() {
        batch.sort_by(|a, b| a.op.lock_key().cmp(&b.op.lock_key()));
    }
    let started = Instant::now();
    let mut outcome = backend.commit(batch).await;
    for _ in 1..BATCH_ATTEMPTS {
        match &outcome {
            Err(error) if backend.retryable(error) => {
                tracing::debug!(%error, "store batch aborted by the database; retrying");
                outcome = backend.commit(batch).await;
            }
            _ => break,
        }
    }
    crate::metrics::global()
        .store_commit_seconds
        .observe(started.elapsed().as_secs_f64());
    match outcome {
        Ok(written) => {
            for (req, written) in batch.drain(..).zip(written) {
                let _ = req.done.send(match written {
                    Written::Done(seq) => Ok(seq),
                    Written::Fenced(fairy) => Err(StoreError::Fenced { fairy }),
                });
            }
        }
        Err(err) => {
            tracing::error!(error = %err, requests = batch.len(), "store commit failed");
            // A full disk stays a full disk for every request of the batch: writers are told
            // `store_full`, not a database error.
            let full = super::is_disk_full(&err);
            let text = err.to_string();
            for req in batch.drain(..) {
                let _ = req.done.send(Err(if full {
                    StoreError::Full
                } else {
                    StoreError::Database(sqlx::Error::Protocol(text.clone()))
                }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One actor per fairy request, for days: the cache stays within its bound.
    #[test]
    fn the_actor_cache_stays_bounded() {
        let mut known = HashMap::new();
        for i in 0..3 * CACHED_MAX as i64 {
            remember_actors(
                &mut known,
                vec![(Arc::from(format!("{{\"request\":{i}}}")), i)],
            );
            assert!(known.len() <= CACHED_MAX);
        }
        let last = Arc::from(format!("{{\"request\":{}}}", 3 * CACHED_MAX - 1));
        assert_eq!(
            known_actor(&known, &[], &last),
            Some(3 * CACHED_MAX as i64 - 1)
        );
    }
}
