//! Durable storage of room documents and of what is kept beside them (docs/storage.md "Layout
//! of the store").
//!
//! Owns the narrow async [`Store`] trait: the room log (an append-only update log per room,
//! each update with its actor and time, plus a compacted snapshot and the history's
//! checkpoints; docs/storage.md "History"), and, reached from it, the keyed side tables in
//! [`keyed`] (fairies' private state keyed by room and fairy id, each room's projects, each
//! room's instructions for its fairies: never part of a document nor broadcast) and the webhook
//! outbox in [`outbox`]. Its implementations: [`sql::SqlStore`], written once for both SQL
//! databases over a small [`sql::Dialect`], with what truly differs in each backend:
//! [`sqlite::SqliteStore`] (the embedded default, WAL, group commit across rooms, migrations in
//! `migrations/sqlite`) and [`postgres::PostgresStore`] (the shared store of the scale-out mode,
//! group commit, safe with several nodes appending to one room, migrations in
//! `migrations/postgres`); and [`memory::MemoryStore`] (tests and `--store memory:`).
//! [`guarded::Guarded`] puts a deadline on every call of any of them, and
//! [`wrapper::StoreWrapper`] lets a store that wraps another override only what it changes.
//! Only this module touches databases; it knows nothing about sockets, peers or the Yjs
//! protocol.

pub mod checkpoints;
pub mod guarded;
pub mod keyed;
pub mod memory;
pub mod outbox;
pub mod postgres;
pub mod sql;
pub mod sqlite;
pub mod wrapper;
mod writer;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::ids::RoomName;

pub use checkpoints::{Checkpoint, StoredVersion, VersionBase};

/// Errors of the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The `--store` URL is not one this build understands.
    #[error(
        "unsupported store url {0:?}: expected sqlite:PATH, postgres://USER@HOST:PORT/DB or memory:"
    )]
    UnsupportedUrl(String),
    /// The `--store-schema` name is not one PostgreSQL keeps whole as a schema's name.
    #[error(
        "invalid store schema {0:?}: expected 1 to 63 bytes without control characters, not starting with pg_"
    )]
    InvalidSchema(String),
    /// The store's migrations could not be applied.
    #[error("store migration failed: {0}")]
    Migration(String),
    /// The database reported an error.
    #[error("database error: {0}")]
    Database(sqlx::Error),
    /// The store's disk is full (SQLite `SQLITE_FULL`, PostgreSQL `53100 disk_full`, an I/O
    /// error "no space left on device"): nothing of the write was kept (docs/operations.md
    /// "What happens when the disk fills up").
    #[error("the store's disk is full")]
    Full,
    /// The store did not answer within `--store-timeout-ms` ([`guarded::Guarded`]): a stalled
    /// database or network. Whether a write that timed out was kept is unknown; a room treats
    /// it as a failed write.
    #[error("the store did not answer within {0:?}")]
    TimedOut(std::time::Duration),
    /// Data handed to the store could not be encoded.
    #[error("could not encode data for the store: {0}")]
    Encoding(String),
    /// The store's writer task is gone (the server is shutting down).
    #[error("store writer stopped")]
    WriterStopped,
    /// A write for a fairy carried a fencing token older than the fairy's newest: another node
    /// took the fairy over (docs/scaling.md "Fencing"); nothing of that append was written.
    #[error("fairy {fairy} is hosted by another node now: the write for it is refused")]
    Fenced {
        /// The fairy whose token was stale.
        fairy: String,
    },
}

impl From<sqlx::Error> for StoreError {
    /// A full disk is told apart from other database errors: writers are answered
    /// `store_full` for it, and the room refuses writes until space returns.
    fn from(error: sqlx::Error) -> Self {
        if is_disk_full(&error) {
            StoreError::Full
        } else {
            StoreError::Database(error)
        }
    }
}

/// Whether a database error says the disk is full: SQLite's `SQLITE_FULL` (13), PostgreSQL's
/// `53100 disk_full`, or an I/O error `ENOSPC`.
pub(crate) fn is_disk_full(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(db) => matches!(db.code().as_deref(), Some("13" | "53100")),
        sqlx::Error::Io(io) => io.kind() == std::io::ErrorKind::StorageFull,
        _ => false,
    }
}

/// A fairy's fencing token (docs/scaling.md "Fencing"): the generation of its hosting, taken
/// from the store ([`Store::next_fence`]) by the node that took its lease, before it writes
/// anything for the fairy. An append carrying an older generation than the store's newest for
/// that fairy is refused ([`Store::append_fenced`]), so a host that stalled past its lease
/// (a GC pause, SIGSTOP, a slow disk) cannot write for the fairy once another node took it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fence {
    /// The fairy's id.
    pub fairy: String,
    /// The hosting's generation (1 for the first host, one more at every take-over).
    pub generation: u64,
}

/// What is kept of one room: a snapshot (if compacted) and the updates logged after it.
#[derive(Debug, Default, Clone)]
pub struct StoredRoom {
    /// A full-state v1 update covering every logged update up to `snapshot_seq`.
    pub snapshot: Option<Bytes>,
    /// The v1 updates logged after the snapshot, oldest first.
    pub updates: Vec<Bytes>,
    /// The sequence number of the last logged update (0 when none).
    pub last_seq: u64,
}

/// One update to log, with who wrote it and when (docs/storage.md "History").
#[derive(Debug, Clone)]
pub struct Logged {
    /// The v1 update.
    pub update: Bytes,
    /// Who wrote it, as JSON text; opaque to the store, which keeps each distinct text once.
    /// `None`: not known (written before attribution, or by nobody the room could name).
    pub actor: Option<Arc<str>>,
    /// When its commit began, in milliseconds since the Unix epoch.
    pub at: u64,
}

impl Logged {
    /// An update with no known actor, logged at `at`.
    pub fn unattributed(update: Bytes, at: u64) -> Self {
        Logged {
            update,
            actor: None,
            at,
        }
    }
}

/// One logged update read back with its attribution.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRow {
    /// Its sequence number.
    pub seq: u64,
    /// When it was logged (`None` for updates logged before times were kept).
    pub at: Option<u64>,
    /// Who wrote it, as logged.
    pub actor: Option<Arc<str>>,
    /// The v1 update.
    pub update: Bytes,
}

/// Milliseconds since the Unix epoch on the system clock (0 before it).
pub fn now_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The storage contract rooms rely on: the room log, and the side tables ([`Store::side`]) and
/// the outbox ([`Store::outbox`]) kept beside it. Implementations must make [`Store::append`]
/// durable before returning: rooms broadcast an update only after it returns.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Loads everything stored for a room (empty for a new room).
    async fn load(&self, room: &RoomName) -> Result<StoredRoom, StoreError>;

    /// What was logged after sequence number `after_seq` (a node catching up on updates it
    /// missed): the snapshot only when it covers more than `after_seq`, then the updates after
    /// `max(after_seq, snapshot)`; `last_seq` as in [`Store::load`]. The updates' sequence
    /// numbers are consecutive and end at `last_seq`. The default loads everything.
    async fn load_since(&self, room: &RoomName, after_seq: u64) -> Result<StoredRoom, StoreError> {
        let _ = after_seq;
        self.load(room).await
    }

    /// Appends v1 updates with their actors and times to a room's log, durably, in one
    /// transaction; returns the sequence number of the last one.
    async fn append_logged(&self, room: &RoomName, updates: Vec<Logged>)
    -> Result<u64, StoreError>;

    /// A yrs client id for this process's own writes into room documents that no other live
    /// process of the deployment uses (docs/scaling.md "A room on a node"): a store shared by
    /// nodes hands each caller a new one, from a sequence folded into `2..=65536` (small, so
    /// that people's writes win ties with the server's; see `agent::tentative`). A store of one
    /// node answers 1, the single node's id (the default).
    async fn writer_client_id(&self) -> Result<u64, StoreError> {
        Ok(1)
    }

    /// The HS256 secret `serve --dev` signs its tokens with when no `--jwt-secret` is given
    /// (docs/auth.md "Development mode"): the first call keeps `candidate`, and every later
    /// call, a restart on the same store or another node sharing it, answers the kept secret,
    /// so tokens minted before a restart stay valid. The default keeps nothing (answers
    /// `candidate`): a store that holds nothing across restarts.
    async fn dev_secret(&self, candidate: &[u8]) -> Result<Vec<u8>, StoreError> {
        Ok(candidate.to_vec())
    }

    /// Takes the next fencing token of fairy `fairy` in `room` (a node that just took its
    /// lease, before it writes for it): from now on every append carrying an older token is
    /// refused. `None`: this store serves a single node, where no two hosts of one fairy ever
    /// coexist, and takes no fences (the default; SQLite).
    async fn next_fence(&self, room: &RoomName, fairy: &str) -> Result<Option<u64>, StoreError> {
        let _ = (room, fairy);
        Ok(None)
    }

    /// [`Store::append_logged`], unless one of `fences` is older than its fairy's newest token:
    /// then nothing is appended and [`StoreError::Fenced`] names that fairy. The check and the
    /// append are one transaction, ordered with [`Store::next_fence`]: a token taken before the
    /// append commits refuses it, one taken after it finds it written. A store that takes no
    /// fences appends (the default).
    async fn append_fenced(
        &self,
        room: &RoomName,
        updates: Vec<Logged>,
        fences: Vec<Fence>,
    ) -> Result<u64, StoreError> {
        let _ = fences;
        self.append_logged(room, updates).await
    }

    /// Appends v1 updates nobody is named for, logged now (tests, seeding, migrations).
    async fn append(&self, room: &RoomName, updates: Vec<Bytes>) -> Result<u64, StoreError> {
        let at = now_millis();
        let logged = updates
            .into_iter()
            .map(|u| Logged::unattributed(u, at))
            .collect();
        self.append_logged(room, logged).await
    }

    /// Replaces the room's snapshot by `snapshot`, which holds every update up to `upto_seq`
    /// (a room loads from it and the updates after it). The log itself is kept for history
    /// ([`Store::prune_history`] drops it).
    async fn compact(
        &self,
        room: &RoomName,
        snapshot: Bytes,
        upto_seq: u64,
    ) -> Result<(), StoreError>;

    /// The sequence number of the room's newest history checkpoint (`None`: none).
    async fn newest_checkpoint(&self, room: &RoomName) -> Result<Option<u64>, StoreError>;

    /// Keeps a history checkpoint, durably, unless the room already has a checkpoint newer
    /// than the state it extends ([`Checkpoint::extends`]: another builder got there first)
    /// or one at its sequence number; whether it was kept.
    async fn add_checkpoint(
        &self,
        room: &RoomName,
        checkpoint: Checkpoint,
    ) -> Result<bool, StoreError>;

    /// Up to `limit` logged updates after sequence number `after`, oldest first, with their
    /// actors and times.
    async fn history(
        &self,
        room: &RoomName,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LogRow>, StoreError>;

    /// The room as it was just after update `seq`: the newest checkpoint chain at or below it
    /// (else the empty document, else the snapshot) and the updates from there up to `seq`
    /// ([`checkpoints::assemble_version`]), read in one transaction. `None` when the room has
    /// not reached `seq` or no longer keeps what it takes (`seq` 0 included).
    async fn load_version(
        &self,
        room: &RoomName,
        seq: u64,
    ) -> Result<Option<StoredVersion>, StoreError>;

    /// Logged updates after `after`, oldest first, at most `limit` of them and no more than
    /// `max_bytes` of update data in all (always the first one, whatever its size): history is
    /// read in batches bounded in bytes (docs/limits.md "History"). The default reads
    /// [`Store::history`] and cuts it (a wrapping store); the backends read the sizes first and
    /// only the rows that fit.
    async fn history_bounded(
        &self,
        room: &RoomName,
        after: u64,
        limit: usize,
        max_bytes: u64,
    ) -> Result<Vec<LogRow>, StoreError> {
        let mut rows = self.history(room, after, limit).await?;
        let keep = fitting(rows.iter().map(|row| row.update.len() as u64), max_bytes);
        rows.truncate(keep);
        Ok(rows)
    }

    /// The base the room's version at `seq` starts from ([`checkpoints::choose_base`]: the
    /// usable checkpoint chain, snapshot or empty document nearest `seq`), with no updates: the
    /// caller reads the updates after it up to `seq` with [`Store::history_bounded`] and finds
    /// the version gone should one be missing (pruned meanwhile). `None` when nothing kept
    /// leads to `seq`. The default cuts [`Store::load_version`] (a wrapping store).
    async fn version_base(
        &self,
        room: &RoomName,
        seq: u64,
    ) -> Result<Option<StoredVersion>, StoreError> {
        Ok(self.load_version(room, seq).await?.map(|mut version| {
            version.updates.clear();
            version
        }))
    }

    /// The sequence number of the room's last update (its snapshot's when the log holds none
    /// after it); 0 for a room never written. The default reads [`Store::load`].
    async fn last_seq(&self, room: &RoomName) -> Result<u64, StoreError> {
        Ok(self.load(room).await?.last_seq)
    }

    /// The rooms whose kept log holds more than `max_bytes` of updates (`--history-max-bytes`;
    /// docs/history.md), each with the newest update that must go for the rest to fit. The
    /// default finds none (a wrapping store).
    async fn logs_over(&self, max_bytes: u64) -> Result<Vec<OverCap>, StoreError> {
        let _ = max_bytes;
        Ok(Vec::new())
    }

    /// Drops the room's history up to `upto` as far as a kept checkpoint allows, as
    /// [`Store::prune_history`] does for time: the newest checkpoint at or below both `upto`
    /// and the snapshot is kept (made full when it was a delta), everything below it goes.
    /// Returns how many updates were dropped. The default drops nothing (a wrapping store).
    async fn prune_log_to(&self, room: &RoomName, upto: u64) -> Result<u64, StoreError> {
        let _ = (room, upto);
        Ok(0)
    }

    /// The sequence number of the last kept update logged at or before `at` (milliseconds since
    /// the epoch); `None` when there is none.
    async fn seq_at(&self, room: &RoomName, at: u64) -> Result<Option<u64>, StoreError>;

    /// Drops, in every room, the history older than `before` (milliseconds since the epoch):
    /// the updates and checkpoints no version logged at or after `before` needs. The kept
    /// checkpoint is the newest one at or before the room's last update older than `before`
    /// and at or before its snapshot; it is made a full state ([`checkpoints::squash`]) when it
    /// was a delta, then everything below it goes. Returns how many updates were dropped.
    async fn prune_history(&self, before: u64) -> Result<u64, StoreError>;

    /// The keyed side tables kept beside the rooms (fairies' private state, projects, room
    /// instructions; [`keyed`]): a wrapping store hands out its inner store's, or its own
    /// [`keyed::SideTables`] forwarding to them.
    fn side(&self) -> &dyn keyed::SideTables;

    /// The webhook outbox kept beside the rooms (docs/webhooks.md): a wrapping store must
    /// hand out its inner store's.
    fn outbox(&self) -> &dyn outbox::Outbox;

    /// Whether the store answers (for `/healthz`).
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Whether the store's disk has room for writes again after a write met a full disk
    /// ([`StoreError::Full`]): SQLite looks at the free space of its file's filesystem. A
    /// store that cannot tell answers `true` (the default), and the next write finds out.
    async fn has_space(&self) -> Result<bool, StoreError> {
        Ok(true)
    }

    /// Whether the store is known to refuse writes now because its disk is full: rooms then
    /// refuse writes before applying them ([`guarded::Guarded`] tracks it; others answer
    /// `false`).
    fn is_full(&self) -> bool {
        false
    }

    /// Frees what the store keeps in memory for rooms that are no longer loaded (connections
    /// and their page caches, caches of its own); called when the last loaded room unloaded.
    /// The store stays usable: what was freed is rebuilt on the next use. Returns without
    /// waiting for work the store does in the background.
    async fn release_memory(&self) {}

    /// Flushes and closes the store (called once at shutdown).
    async fn close(&self) {}
}

/// A room whose kept log is over `--history-max-bytes` ([`Store::logs_over`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverCap {
    /// The room.
    pub room: RoomName,
    /// The newest update that must go for the rest of the log to fit.
    pub cut: u64,
    /// The room's snapshot's sequence number, if it has one (nothing after it may go).
    pub snapshot: Option<u64>,
}

/// How many of the leading sizes fit in `max_bytes` together: at least one (when there is one),
/// then each while the running total stays within `max_bytes`.
pub fn fitting(sizes: impl IntoIterator<Item = u64>, max_bytes: u64) -> usize {
    let mut total = 0u64;
    let mut count = 0;
    for size in sizes {
        total = total.saturating_add(size);
        if count > 0 && total > max_bytes {
            break;
        }
        count += 1;
    }
    count
}

/// Opens the store named by a `--store` URL: `sqlite:PATH`, `memory:` or
/// `postgres://…` (in the default schema).
pub async fn open(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    open_in(url, None).await
}

/// Opens the store named by a `--store` URL; a PostgreSQL store keeps its tables in `schema`
/// (`--store-schema`, default `fairyring`), which the other stores ignore.
pub async fn open_in(url: &str, schema: Option<&str>) -> Result<Arc<dyn Store>, StoreError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let schema = match schema {
            Some(name) => postgres::SchemaName::parse(name)?,
            None => postgres::SchemaName::default(),
        };
        Ok(Arc::new(postgres::PostgresStore::open(url, &schema).await?))
    } else if let Some(path) = url.strip_prefix("sqlite:") {
        let path = path.strip_prefix("//").unwrap_or(path);
        Ok(Arc::new(sqlite::SqliteStore::open(path).await?))
    } else if url == "memory:" || url == "memory" {
        Ok(Arc::new(memory::MemoryStore::default()))
    } else {
        Err(StoreError::UnsupportedUrl(url.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the same contract test against every backend (zed's `test_both_dbs!` habit).
    async fn contract(store: Arc<dyn Store>) {
        let room = RoomName::parse("contract").unwrap();
        let empty = store.load(&room).await.unwrap();
        assert!(empty.snapshot.is_none() && empty.updates.is_empty());
        let s1 = store
            .append(
                &room,
                vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")],
            )
            .await;
        let s1 = s1.unwrap();
        let s2 = store
            .append(&room, vec![Bytes::from_static(b"c")])
            .await
            .unwrap();
        assert!(s2 > s1);
        let loaded = store.load(&room).await.unwrap();
        assert_eq!(loaded.updates, vec![&b"a"[..], &b"b"[..], &b"c"[..]]);
        assert_eq!(loaded.last_seq, s2);
        store
            .compact(&room, Bytes::from_static(b"snap"), s1)
            .await
            .unwrap();
        let loaded = store.load(&room).await.unwrap();
        assert_eq!(loaded.snapshot.as_deref(), Some(&b"snap"[..]));
        assert_eq!(loaded.updates, vec![&b"c"[..]]);
        let other = RoomName::parse("other").unwrap();
        assert!(store.load(&other).await.unwrap().updates.is_empty());
        keyed::tests::fairy_state_contract(store.side(), &room, &other).await;
        keyed::tests::fairy_requests_contract(store.side(), &other).await;
        // The room's log is untouched by fairy state.
        assert_eq!(store.load(&other).await.unwrap().last_seq, 0);
        keyed::tests::instructions_contract(store.side(), &room, &other).await;
        keyed::tests::projects_contract(store.side(), &room, &other).await;
        keyed::tests::tables_are_apart(store.side()).await;
        outbox::tests::outbox_contract(store.outbox()).await;
        bounded_log_contract(store.as_ref()).await;
        // The first dev secret is kept; a later candidate does not replace it.
        let kept = store.dev_secret(b"first").await.unwrap();
        assert_eq!(kept, b"first");
        assert_eq!(store.dev_secret(b"second").await.unwrap(), b"first");
    }

    /// History read in batches bounded in bytes, a version's base, the last sequence number,
    /// and the byte cap's cut and pruning (issue 43), the same on every backend.
    async fn bounded_log_contract(store: &dyn Store) {
        let room = RoomName::parse("bounded").unwrap();
        assert_eq!(store.last_seq(&room).await.unwrap(), 0);
        let rows: Vec<Bytes> = [10usize, 20, 30, 40, 50]
            .iter()
            .map(|n| Bytes::from(vec![b'x'; *n]))
            .collect();
        let last = store.append(&room, rows).await.unwrap();
        assert_eq!(store.last_seq(&room).await.unwrap(), last);
        let first = last - 4;
        let sizes = |rows: Vec<LogRow>| rows.iter().map(|r| r.update.len()).collect::<Vec<_>>();
        // At least one row whatever its size, then while the bytes fit.
        let read = store.history_bounded(&room, 0, 100, 0).await.unwrap();
        assert_eq!(sizes(read), vec![10]);
        let read = store.history_bounded(&room, 0, 100, 60).await.unwrap();
        assert_eq!(sizes(read), vec![10, 20, 30]);
        let read = store.history_bounded(&room, first, 2, 1_000).await.unwrap();
        assert_eq!(sizes(read), vec![20, 30]);
        assert!(
            store
                .history_bounded(&room, last, 10, 10)
                .await
                .unwrap()
                .is_empty()
        );
        // A version's base without its updates: the empty document while the log is whole.
        let base = store.version_base(&room, last).await.unwrap().unwrap();
        assert_eq!(base.base, VersionBase::Empty);
        assert!(base.updates.is_empty());
        // Over a cap of 100 bytes: the tail 50 + 40 fits, 30 more does not.
        let over = store.logs_over(100).await.unwrap();
        let this = over.iter().find(|o| o.room == room).expect("over the cap");
        assert_eq!((this.cut, this.snapshot), (first + 2, None));
        assert!(
            store
                .logs_over(1_000_000)
                .await
                .unwrap()
                .iter()
                .all(|o| o.room != room)
        );
        // Pruning goes only as far as a checkpoint and the snapshot allow.
        assert_eq!(store.prune_log_to(&room, first + 2).await.unwrap(), 0);
        store
            .add_checkpoint(
                &room,
                Checkpoint {
                    seq: first + 2,
                    base: None,
                    data: Bytes::from_static(b"state"),
                    extends: 0,
                },
            )
            .await
            .unwrap();
        store
            .compact(&room, Bytes::from_static(b"snap"), first + 2)
            .await
            .unwrap();
        assert_eq!(store.prune_log_to(&room, first + 2).await.unwrap(), 3);
        let kept = store.history(&room, 0, 100).await.unwrap();
        assert_eq!(sizes(kept), vec![40, 50]);
        // The version at the cut starts from its checkpoint; one below is gone.
        let base = store.version_base(&room, first + 2).await.unwrap().unwrap();
        assert_eq!(base.base, VersionBase::Checkpoint(first + 2));
        let base = store.version_base(&room, last).await.unwrap().unwrap();
        assert_eq!(base.base.seq(), first + 2);
        assert!(store.version_base(&room, first).await.unwrap().is_none());
        assert_eq!(store.last_seq(&room).await.unwrap(), last);
    }

    /// Fences (a store shared by nodes): each token taken is one more than the last; an append
    /// carrying an older one writes nothing and names its fairy; fences of one fairy do not
    /// touch another fairy's, nor another room's.
    async fn fences_contract(store: &dyn Store) {
        let room = RoomName::parse("fenced").unwrap();
        let other = RoomName::parse("fenced-other").unwrap();
        let fence = |fairy: &str, generation| Fence {
            fairy: fairy.into(),
            generation,
        };
        assert_eq!(store.next_fence(&room, "f-1").await.unwrap(), Some(1));
        let seq = store
            .append_fenced(&room, vec![logged(b"one")], vec![fence("f-1", 1)])
            .await
            .unwrap();
        assert_eq!(store.next_fence(&room, "f-1").await.unwrap(), Some(2));
        match store
            .append_fenced(
                &room,
                vec![logged(b"stale"), logged(b"person")],
                vec![fence("f-2", 7), fence("f-1", 1)],
            )
            .await
        {
            Err(StoreError::Fenced { fairy }) => assert_eq!(fairy, "f-1"),
            other => panic!("a stale fence must be refused, got {other:?}"),
        }
        let loaded = store.load(&room).await.unwrap();
        assert_eq!(
            loaded.last_seq, seq,
            "nothing of a refused append is written"
        );
        assert_eq!(loaded.updates, vec![&b"one"[..]]);
        // The current token, a fairy never fenced, and another room's same fairy pass.
        store
            .append_fenced(
                &room,
                vec![logged(b"two")],
                vec![fence("f-1", 2), fence("f-9", 1)],
            )
            .await
            .unwrap();
        assert_eq!(store.next_fence(&other, "f-1").await.unwrap(), Some(1));
        store
            .append_fenced(&other, vec![logged(b"x")], vec![fence("f-1", 1)])
            .await
            .unwrap();
        // A fairy's private state, saved under a stale fence, is refused.
        store
            .side()
            .save_fairy_state_fenced(&room, "f-1", Bytes::from_static(b"new host"), 2)
            .await
            .unwrap();
        assert!(matches!(
            store
                .side()
                .save_fairy_state_fenced(&room, "f-1", Bytes::from_static(b"old host"), 1)
                .await,
            Err(StoreError::Fenced { .. })
        ));
        assert_eq!(
            store
                .side()
                .load_fairy_state(&room, "f-1")
                .await
                .unwrap()
                .as_deref(),
            Some(&b"new host"[..])
        );
        // So is a record of its ledger, checked against the same fairy's token.
        let side = store.side();
        side.save_fairy_request(&room, "f-1", 3, Bytes::from_static(b"new"), Some(2))
            .await
            .unwrap();
        assert!(matches!(
            side.save_fairy_request(&room, "f-1", 3, Bytes::from_static(b"old"), Some(1))
                .await,
            Err(StoreError::Fenced { fairy }) if fairy == "f-1"
        ));
        assert_eq!(
            side.load_fairy_request(&room, "f-1", 3)
                .await
                .unwrap()
                .as_deref(),
            Some(&b"new"[..])
        );
        // Plain appends are never fenced.
        store
            .append(&room, vec![Bytes::from_static(b"three")])
            .await
            .unwrap();
        assert_eq!(store.load(&room).await.unwrap().updates.len(), 3);
    }

    fn logged(update: &'static [u8]) -> Logged {
        Logged::unattributed(Bytes::from_static(update), 1)
    }

    #[tokio::test]
    async fn memory_store_meets_contract() {
        contract(Arc::new(memory::MemoryStore::default())).await;
        fences_contract(&memory::MemoryStore::default()).await;
    }

    #[tokio::test]
    async fn postgres_store_meets_contract() {
        use postgres::test_db;
        let Some(schema) = test_db::fresh_schema("contract").await else {
            return;
        };
        let store = open_in(&test_db::url(), Some(schema.as_str()))
            .await
            .unwrap();
        contract(store.clone()).await;
        fences_contract(store.as_ref()).await;
        store.close().await;
        // Reopening (migrations already applied) sees the same data.
        let store = open_in(&test_db::url(), Some(schema.as_str()))
            .await
            .unwrap();
        let room = RoomName::parse("contract").unwrap();
        assert_eq!(store.load(&room).await.unwrap().updates.len(), 1);
        assert!(store.ping().await.is_ok());
        store.close().await;
        test_db::drop_schema(&schema).await;
    }

    #[tokio::test]
    async fn sqlite_store_meets_contract() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let store = open(&format!("sqlite:{}", path.display())).await.unwrap();
        contract(store.clone()).await;
        assert_eq!(
            store
                .next_fence(&RoomName::parse("contract").unwrap(), "f-1")
                .await
                .unwrap(),
            None,
            "a store of one node takes no fences"
        );
        store.close().await;
        // Reopening sees the same data.
        let store = open(&format!("sqlite:{}", path.display())).await.unwrap();
        let room = RoomName::parse("contract").unwrap();
        assert_eq!(store.load(&room).await.unwrap().updates.len(), 1);
        assert_eq!(
            store
                .side()
                .load_fairy_state(&room, "f-2")
                .await
                .unwrap()
                .as_deref(),
            Some(&b"two"[..]),
            "fairy state survives a reopen"
        );
        assert_eq!(
            store
                .side()
                .load_instructions(&room)
                .await
                .unwrap()
                .as_deref(),
            Some("Use red, é ✓."),
            "instructions survive a reopen"
        );
    }

    #[tokio::test]
    async fn sqlite_adds_the_fairy_state_table_to_an_existing_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        // A database created before fairy state had its own table.
        {
            let url = format!("sqlite://{}?mode=rwc", path.display());
            let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
            for statement in [
                "CREATE TABLE updates (room TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (room, seq)) WITHOUT ROWID",
                "CREATE TABLE snapshots (room TEXT PRIMARY KEY NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL)",
                "INSERT INTO updates (room, seq, data) VALUES ('old', 1, x'00')",
            ] {
                sqlx::query(sqlx::AssertSqlSafe(statement))
                    .execute(&pool)
                    .await
                    .unwrap();
            }
            pool.close().await;
        }
        let store = open(&format!("sqlite:{}", path.display())).await.unwrap();
        let room = RoomName::parse("old").unwrap();
        assert_eq!(store.load(&room).await.unwrap().last_seq, 1);
        store
            .side()
            .save_fairy_state(&room, "f-1", Bytes::from_static(b"{}"))
            .await
            .unwrap();
        assert!(
            store
                .side()
                .load_fairy_state(&room, "f-1")
                .await
                .unwrap()
                .is_some()
        );
        store.close().await;
    }

    #[test]
    fn unknown_urls_are_refused() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert!(matches!(
            rt.block_on(open("redis://x")),
            Err(StoreError::UnsupportedUrl(_))
        ));
    }
}
