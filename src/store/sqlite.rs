//! The embedded SQLite backend of the SQL store: one file, WAL journal, `synchronous=FULL`.
//!
//! Tables: the room log (`updates`, each room's log, every update with its time and actor;
//! `actors`, each distinct actor's JSON once, named by number from `updates`; `snapshots`, the
//! state a room loads from; `checkpoints`, the history's states, a chain of deltas,
//! docs/storage.md "History"), the keyed side tables of [`super::keyed`] (`fairy_states`,
//! `projects`, `room_instructions`), `server_secrets` and `webhook_outbox`. The schema is the
//! migrations' under `migrations/sqlite`, run when the store opens; a database made before them
//! (tables created in code) first gets the columns it may lack ([`ADDED_COLUMNS`]), then
//! converges through the first migration, whose statements are all `IF NOT EXISTS`.
//!
//! The store itself is the shared [`SqlStore`]; this file owns only what SQLite does its own
//! way: opening the file, its [`Dialect`], the free space of its disk ([`super::Store::has_space`]),
//! and the group-commit writer's transactions ([`super::writer`]): every write request (log
//! appends, compactions, fairy-state saves and deletes) that arrives while a commit is in flight
//! joins the next transaction, across all rooms, so one fsync serves many of them, on a
//! connection of the writer's own that remembers each room's last sequence number and writes a
//! batch's log rows with multi-row `INSERT`s. A write returns only after its transaction
//! committed. Only this process writes the file, so it takes no fences.
//!
//! The WAL is checkpointed (its pages copied into the database file, which is then synced)
//! by a background task on a connection of its own ([`checkpoint_wal`], every
//! [`CHECKPOINT_EVERY`] after the writer committed), never by the writer's own commits:
//! SQLite's automatic checkpoint runs inside the commit that crosses its 1,000-page threshold,
//! so every write queued behind that commit waited for a copy and an fsync of the whole WAL
//! (seconds on a busy disk, past `--store-timeout-ms`). A passive checkpoint takes no lock a
//! writer waits for.

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, Connection, Row, Sqlite, SqliteConnection, SqlitePool};

use super::StoreError;
use super::sql::dialect::typed_access;
use super::sql::{Backend, Dialect, SqlStore, writes};
use super::writer::{
    Batch, CACHED_MAX, WriteOp, WriteReq, Writer, Written, remember_actors, to_i64, to_u64,
};

/// Columns added to tables of the first releases, before migrations, as (table, column,
/// declaration). A database made then, whose table lacks one, gets it when it opens, before
/// the migrations run: `CREATE TABLE IF NOT EXISTS` in the first migration leaves an existing
/// table as it is, and every later migration must find the first one's schema. Old `updates`
/// rows have neither a time nor a known actor; old checkpoints have no `base` (they are full
/// states). A table the database lacks altogether is created by the first migration.
const ADDED_COLUMNS: [(&str, &str, &str); 3] = [
    ("updates", "at", "INTEGER"),
    ("updates", "actor", "INTEGER"),
    ("checkpoints", "base", "INTEGER"),
];

/// Rows of one multi-row `INSERT` into the log: a batch's rows go out in chunks of these sizes
/// (largest first), so a batch of any size costs a few statements, and only these few statement
/// texts are ever prepared and cached.
const INSERT_CHUNKS: [usize; 4] = [128, 32, 8, 1];

/// The SQLite store: the shared SQL store on a SQLite file.
pub type SqliteStore = SqlStore<SqliteBackend>;

/// What a SQLite store keeps beside the shared parts: the directory of the database file,
/// whose filesystem's free space says whether writes may resume after a full disk
/// ([`super::Store::has_space`]).
pub struct SqliteBackend {
    dir: std::path::PathBuf,
    /// The background checkpointer's task, ended with the store.
    checkpointer: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for SqliteBackend {
    fn drop(&mut self) {
        if let Some(task) = self.checkpointer.take() {
            task.abort();
        }
    }
}

/// How often the background checkpointer looks whether the writer committed since its last
/// checkpoint, and checkpoints the WAL if so: the WAL holds at most about this long of writes
/// beyond what readers still use.
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Copies the WAL's committed pages into the database file (`PRAGMA wal_checkpoint(PASSIVE)`:
/// as far as no reader still needs them, without waiting for any lock a writer holds); the
/// WAL's pages and those copied, as SQLite reports them.
pub(crate) async fn checkpoint_wal(conn: &mut SqliteConnection) -> Result<(i64, i64), sqlx::Error> {
    let row = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(&mut *conn)
        .await?;
    Ok((row.try_get(1)?, row.try_get(2)?))
}

/// The background checkpointer: every `every`, checkpoints the WAL on a connection of its own
/// if the writer committed since the last look (`commits` counts its commits). Idle, it closes
/// that connection (its page cache and thread go with it); it ends when the store closes (its
/// read pool `pool` closed).
async fn checkpoint_loop(
    options: SqliteConnectOptions,
    pool: SqlitePool,
    commits: Arc<AtomicU64>,
    every: Duration,
) {
    let mut conn: Option<SqliteConnection> = None;
    let mut seen = commits.load(Ordering::Relaxed);
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let now = commits.load(Ordering::Relaxed);
        if now == seen || pool.is_closed() {
            if let Some(idle) = conn.take()
                && let Err(error) = idle.close().await
            {
                tracing::debug!(%error, "closing the SQLite checkpointer's connection failed");
            }
            if pool.is_closed() {
                return;
            }
            continue;
        }
        let connection = match &mut conn {
            Some(connection) => connection,
            None => match options.connect().await {
                Ok(opened) => conn.insert(opened),
                Err(error) => {
                    tracing::debug!(%error, "the SQLite checkpointer could not connect");
                    continue;
                }
            },
        };
        match checkpoint_wal(connection).await {
            Ok(_) => seen = now,
            // Tried again at the next tick (a full disk, say) on a fresh connection.
            Err(error) => {
                conn = None;
                tracing::debug!(%error, "checkpointing the SQLite WAL failed");
            }
        }
    }
}

/// Free bytes the database's filesystem must have before writes resume after a full disk:
/// enough for a burst of group commits and their WAL frames.
const SPACE_TO_RESUME: u64 = 1024 * 1024;

/// Bytes free for an unprivileged writer on the filesystem holding `dir`.
fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is a NUL-terminated string that outlives the call, and `stat` points to
    // writable memory of the right type, which statvfs fills when it returns 0.
    let rc = unsafe { libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it initialised `stat`.
    let stat = unsafe { stat.assume_init() };
    // Both are 64-bit here; on 32-bit targets `f_frsize` is a 32-bit `c_ulong`.
    #[allow(clippy::useless_conversion)]
    let (blocks, size) = (u64::from(stat.f_bavail), u64::from(stat.f_frsize));
    Ok(blocks.saturating_mul(size))
}

impl SqlStore<SqliteBackend> {
    /// Opens (creating if needed) the database file at `path`.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_checkpointing(path, Some(CHECKPOINT_EVERY)).await
    }

    /// [`Self::open`] with the background checkpointer looking every `every` (`None`: no
    /// checkpointer, for tests that checkpoint by hand).
    pub(crate) async fn open_checkpointing(
        path: impl AsRef<Path>,
        every: Option<Duration>,
    ) -> Result<Self, StoreError> {
        let url = format!("sqlite://{}", path.as_ref().display());
        let options = SqliteConnectOptions::from_str(&url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(std::time::Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .min_connections(0)
            .connect_with(options.clone())
            .await?;
        add_missing_columns(&pool).await?;
        super::sql::migrations::sqlite()
            .run(&pool)
            .await
            .map_err(|e| StoreError::Migration(e.to_string()))?;
        let commits = Arc::new(AtomicU64::new(0));
        let checkpointer_options = options.clone();
        let writer = Writer::start(SqliteBatch {
            // The writer never checkpoints within its commits (the module's documentation).
            options: options.pragma("wal_autocheckpoint", "0"),
            conn: None,
            last_seq: HashMap::new(),
            actors: HashMap::new(),
            commits: commits.clone(),
        });
        let dir = match path.as_ref().parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        let checkpointer = every.map(|every| {
            tokio::spawn(checkpoint_loop(
                checkpointer_options,
                pool.clone(),
                commits,
                every,
            ))
        });
        Ok(SqlStore::new(
            pool,
            writer,
            SqliteBackend { dir, checkpointer },
        ))
    }

    /// Connections the read pool holds open now (tests).
    #[cfg(test)]
    fn pooled_connections(&self) -> u32 {
        self.pool().size()
    }
}

/// Adds [`ADDED_COLUMNS`] to the tables of a database made before migrations that lack them
/// (a table that does not exist is left to the migrations).
async fn add_missing_columns(pool: &SqlitePool) -> Result<(), StoreError> {
    for (table, column, declaration) in ADDED_COLUMNS {
        let row = sqlx::query(
            "SELECT COUNT(*), COUNT(CASE WHEN name = $2 THEN 1 END) FROM pragma_table_info($1)",
        )
        .bind(table)
        .bind(column)
        .fetch_one(pool)
        .await?;
        let (columns, present): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
        if columns > 0 && present == 0 {
            let alter = format!("ALTER TABLE {table} ADD COLUMN {column} {declaration}");
            sqlx::query(sqlx::AssertSqlSafe(alter))
                .execute(pool)
                .await?;
        }
    }
    Ok(())
}

/// SQLite's spelling of what the dialects write differently.
impl Dialect for Sqlite {
    /// A deferred transaction reads one snapshot of the WAL from its first read on.
    const READ_SNAPSHOT: Option<&'static str> = None;

    /// One node writes the file: a compaction at the same sequence number replaces the data.
    const KEEP_SNAPSHOT: &'static str =
        "INSERT INTO snapshots (room, seq, data) VALUES ($1, $2, $3)
         ON CONFLICT (room) DO UPDATE SET seq = excluded.seq, data = excluded.data
         WHERE snapshots.seq <= excluded.seq";

    /// One statement: SQLite has one writer at a time, so no other claim interleaves.
    const CLAIM: &'static str = "UPDATE webhook_outbox SET claimed_until = $1
         WHERE id IN (SELECT id FROM webhook_outbox
                      WHERE dead_at IS NULL AND next_at <= $2 AND claimed_until <= $2
                      ORDER BY next_at, id LIMIT $3)
         RETURNING id, body, attempts, next_at";

    /// SQLite's two-argument `MAX` is PostgreSQL's `GREATEST`.
    const NEXT_DUE: &'static str =
        "SELECT MIN(MAX(next_at, claimed_until)) FROM webhook_outbox WHERE dead_at IS NULL";

    typed_access!(count: i64);
}

typed_access!(row: sqlx::sqlite::SqliteRow, count: i64);

#[async_trait]
impl Backend for SqliteBackend {
    type Db = Sqlite;
    const FENCES: bool = false;
    const RELEASES_CONNECTIONS: bool = true;

    async fn has_space(&self) -> Result<bool, StoreError> {
        let dir = self.dir.clone();
        let free = tokio::task::spawn_blocking(move || free_bytes(&dir))
            .await
            .map_err(|e| StoreError::Encoding(e.to_string()))?
            .map_err(|e| StoreError::Database(sqlx::Error::Io(e)))?;
        Ok(free >= SPACE_TO_RESUME)
    }
}

/// SQLite transactions of the group-commit writer, on a connection of its own: its page cache
/// stays warm (a connection from the pool would find its cache stale after another one wrote).
struct SqliteBatch {
    options: SqliteConnectOptions,
    /// Opened on the first commit; dropped after a failure and on [`Batch::release_memory`].
    conn: Option<SqliteConnection>,
    /// Last sequence number of each room this writer appended to. Only this process writes the
    /// file and compactions never raise it, so a room costs one `SELECT MAX` per writer
    /// connection; cleared after a failed commit (whose outcome is unknown), and past
    /// [`CACHED_MAX`] rooms.
    last_seq: HashMap<String, i64>,
    /// The number of each actor's JSON in `actors` (only committed ones).
    actors: HashMap<Arc<str>, i64>,
    /// Transactions committed, for the background checkpointer.
    commits: Arc<AtomicU64>,
}

#[async_trait]
impl Batch for SqliteBatch {
    async fn commit(&mut self, batch: &[WriteReq]) -> Result<Vec<Written>, sqlx::Error> {
        let conn = match &mut self.conn {
            Some(conn) => conn,
            None => self.conn.insert(self.options.connect().await?),
        };
        let mut interned = Vec::new();
        match commit_batch(conn, &self.last_seq, &self.actors, &mut interned, batch).await {
            Ok((seqs, last)) => {
                if self.last_seq.len() + last.len() > CACHED_MAX {
                    self.last_seq = HashMap::new();
                }
                for (room, seq) in last {
                    self.last_seq.insert(room.to_owned(), seq);
                }
                remember_actors(&mut self.actors, interned);
                self.commits.fetch_add(1, Ordering::Relaxed);
                // A SQLite store serves one node: it takes no fences (`Store::next_fence`).
                Ok(seqs.into_iter().map(Written::Done).collect())
            }
            Err(error) => {
                self.conn = None;
                self.last_seq.clear();
                Err(error)
            }
        }
    }

    async fn release_memory(&mut self) {
        self.last_seq = HashMap::new();
        self.actors = HashMap::new();
        if let Some(conn) = self.conn.take()
            && let Err(error) = conn.close().await
        {
            tracing::debug!(%error, "closing the SQLite writer connection failed");
        }
    }
}

/// One row of the log waiting for its `INSERT`: room, seq, update, time, actor number.
type PendingRow<'a> = (&'a str, i64, &'a Bytes, i64, Option<i64>);

/// Commits a batch in one transaction; returns, per request, the last sequence number written,
/// and the rooms' new last sequence numbers (valid once the transaction committed).
async fn commit_batch<'a>(
    conn: &mut SqliteConnection,
    known: &HashMap<String, i64>,
    actors: &HashMap<Arc<str>, i64>,
    interned: &mut Vec<(Arc<str>, i64)>,
    batch: &'a [WriteReq],
) -> Result<(Vec<u64>, HashMap<&'a str, i64>), sqlx::Error> {
    let mut tx = conn.begin().await?;
    let mut seqs = Vec::with_capacity(batch.len());
    let mut last: HashMap<&str, i64> = HashMap::new();
    let mut rows: Vec<PendingRow> = Vec::new();
    for req in batch {
        let seq = match &req.op {
            WriteOp::Append { room, updates, .. } => {
                let mut seq = match last.get(room.as_str()).or_else(|| known.get(room)) {
                    Some(seq) => *seq,
                    None => max_seq(&mut tx, room).await?,
                };
                for logged in updates {
                    seq += 1;
                    let actor = match &logged.actor {
                        Some(actor) => Some(
                            writes::actor_id::<Sqlite>(&mut tx, actors, interned, actor).await?,
                        ),
                        None => None,
                    };
                    rows.push((room.as_str(), seq, &logged.update, to_i64(logged.at), actor));
                }
                last.insert(room.as_str(), seq);
                to_u64(seq)
            }
            WriteOp::Compact {
                room,
                snapshot,
                upto_seq,
            } => {
                // The log rows before it in the batch go in first: the snapshot covers them.
                insert_rows(&mut tx, &mut rows).await?;
                writes::keep_snapshot::<Sqlite>(&mut tx, room, snapshot, *upto_seq).await?;
                *upto_seq
            }
            WriteOp::Checkpoint { room, checkpoint } => {
                writes::add_checkpoint::<Sqlite>(&mut tx, room, checkpoint).await?
            }
            WriteOp::Put {
                table,
                room,
                key,
                value,
                ..
            } => {
                writes::put_row::<Sqlite>(&mut tx, *table, room, key, value).await?;
                0
            }
            WriteOp::Delete { table, room, key } => {
                writes::delete_row::<Sqlite>(&mut tx, *table, room, key).await?;
                0
            }
        };
        seqs.push(seq);
    }
    insert_rows(&mut tx, &mut rows).await?;
    tx.commit().await?;
    Ok((seqs, last))
}

/// The last sequence number of a room's log (its snapshot's when every update was compacted).
async fn max_seq(conn: &mut SqliteConnection, room: &str) -> Result<i64, sqlx::Error> {
    let row = sqlx::query(super::sql::text::LAST_SEQ)
        .bind(room)
        .fetch_one(&mut *conn)
        .await?;
    Ok(row.try_get::<Option<i64>, _>(0)?.unwrap_or(0))
}

/// Inserts the waiting log rows with multi-row `INSERT`s (one round trip to SQLite's thread
/// per chunk, not per row) and empties `rows`.
async fn insert_rows(
    conn: &mut SqliteConnection,
    rows: &mut Vec<PendingRow<'_>>,
) -> Result<(), sqlx::Error> {
    let mut rest = rows.as_slice();
    while !rest.is_empty() {
        let size = INSERT_CHUNKS
            .into_iter()
            .find(|&n| n <= rest.len())
            .unwrap_or(1);
        let (chunk, tail) = rest.split_at(size);
        let mut query = sqlx::query(sqlx::AssertSqlSafe(insert_sql(size)));
        for (room, seq, data, at, actor) in chunk {
            query = query
                .bind(*room)
                .bind(*seq)
                .bind(data.as_ref())
                .bind(*at)
                .bind(*actor);
        }
        query.execute(&mut *conn).await?;
        rest = tail;
    }
    rows.clear();
    Ok(())
}

/// `INSERT INTO updates … VALUES (?, ?, ?), …` for `rows` rows.
fn insert_sql(rows: usize) -> String {
    let mut sql =
        String::from("INSERT INTO updates (room, seq, data, at, actor) VALUES (?, ?, ?, ?, ?)");
    for _ in 1..rows {
        sql.push_str(", (?, ?, ?, ?, ?)");
    }
    sql
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::ids::RoomName;
    use crate::store::Store;
    use crate::store::sql::migrations;

    fn room(name: &str) -> RoomName {
        RoomName::parse(name).unwrap()
    }

    fn updates(tag: &str, n: usize) -> Vec<Bytes> {
        (0..n).map(|i| Bytes::from(format!("{tag}-{i}"))).collect()
    }

    /// Rooms appending at once share batches, and runs of updates span several multi-row
    /// `INSERT` sizes: each room's sequence numbers stay consecutive and its log in order,
    /// across a compaction and a reopen (whose writer knows no sequence number yet).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn batched_appends_keep_every_rooms_log_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("batch.db");
        let store = Arc::new(SqliteStore::open(&path).await.unwrap());
        let sizes = [1, 173, 40, 9];
        let tasks: Vec<_> = (0..6)
            .map(|r| {
                let store = store.clone();
                tokio::spawn(async move {
                    let name = room(&format!("r{r}"));
                    let mut total = 0;
                    for (round, n) in sizes.into_iter().enumerate() {
                        let seq = store
                            .append(&name, updates(&format!("{r}/{round}"), n))
                            .await
                            .unwrap();
                        total += n as u64;
                        assert_eq!(seq, total, "room r{r} round {round}");
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let expected: Vec<Bytes> = sizes
            .into_iter()
            .enumerate()
            .flat_map(|(round, n)| updates(&format!("2/{round}"), n))
            .collect();
        assert_eq!(store.load(&room("r2")).await.unwrap().updates, expected);
        store
            .compact(&room("r2"), Bytes::from_static(b"snap"), 223)
            .await
            .unwrap();
        store.close().await;
        drop(store);
        let store = SqliteStore::open(&path).await.unwrap();
        assert_eq!(
            store
                .append(&room("r2"), updates("after", 2))
                .await
                .unwrap(),
            225
        );
        let loaded = store.load(&room("r2")).await.unwrap();
        assert_eq!(loaded.snapshot.as_deref(), Some(&b"snap"[..]));
        assert_eq!(loaded.updates.len(), 225 - 223);
        assert_eq!(loaded.last_seq, 225);
        store.close().await;
    }

    /// Releasing memory closes the idle read connections and the writer's; the store then
    /// works as before, its sequence numbers continuing.
    #[tokio::test]
    async fn releasing_memory_closes_connections_and_keeps_the_store_usable() {
        let dir = tempfile::tempdir().unwrap();
        // No background checkpointer: it would take a read connection of its own.
        let store = SqliteStore::open_checkpointing(dir.path().join("release.db"), None)
            .await
            .unwrap();
        let name = room("release");
        assert_eq!(store.append(&name, updates("a", 3)).await.unwrap(), 3);
        store.load(&name).await.unwrap();
        assert!(store.pooled_connections() > 0);
        // A connection goes back to the pool in a task of its own after its query.
        while store.pool().num_idle() < store.pooled_connections() as usize {
            tokio::task::yield_now().await;
        }
        store.release_memory().await;
        assert_eq!(
            store.pooled_connections(),
            0,
            "idle read connections closed"
        );
        assert_eq!(store.append(&name, updates("b", 2)).await.unwrap(), 5);
        assert_eq!(store.load(&name).await.unwrap().updates.len(), 5);
        store.close().await;
    }

    /// The schema before migrations, exactly as the store created it in code (its `SCHEMA`,
    /// then its `ADDED_COLUMNS`, then the outbox's table and index).
    const PREVIOUS_LAYOUT: &[&str] = &[
        "CREATE TABLE IF NOT EXISTS updates (
        room TEXT NOT NULL,
        seq INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (room, seq)
    ) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS snapshots (
        room TEXT PRIMARY KEY NOT NULL,
        seq INTEGER NOT NULL,
        data BLOB NOT NULL
    )",
        "CREATE TABLE IF NOT EXISTS fairy_states (
        room TEXT NOT NULL,
        fairy TEXT NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (room, fairy)
    ) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS room_instructions (
        room TEXT PRIMARY KEY NOT NULL,
        text TEXT NOT NULL
    )",
        "CREATE TABLE IF NOT EXISTS projects (
        room TEXT NOT NULL,
        project TEXT NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (room, project)
    ) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS actors (
        id INTEGER PRIMARY KEY,
        data TEXT NOT NULL UNIQUE
    )",
        "CREATE TABLE IF NOT EXISTS checkpoints (
        room TEXT NOT NULL,
        seq INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (room, seq)
    ) WITHOUT ROWID",
        "ALTER TABLE updates ADD COLUMN at INTEGER",
        "ALTER TABLE updates ADD COLUMN actor INTEGER",
        "ALTER TABLE checkpoints ADD COLUMN base INTEGER",
        "CREATE TABLE IF NOT EXISTS webhook_outbox (
        id TEXT PRIMARY KEY NOT NULL,
        body BLOB NOT NULL,
        created_at INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at INTEGER NOT NULL,
        claimed_until INTEGER NOT NULL DEFAULT 0,
        dead_at INTEGER,
        last_error TEXT
    )",
        "CREATE INDEX IF NOT EXISTS webhook_outbox_due ON webhook_outbox (next_at)
        WHERE dead_at IS NULL",
    ];

    /// Runs statements on a database file outside the store.
    async fn run_sql(path: &Path, statements: &[&str]) {
        let url = format!("sqlite://{}?mode=rwc", path.display());
        let pool = SqlitePool::connect(&url).await.unwrap();
        for statement in statements {
            sqlx::query(sqlx::AssertSqlSafe(*statement))
                .execute(&pool)
                .await
                .unwrap();
        }
        pool.close().await;
    }

    /// Every table, index and column of a database file (migrations' bookkeeping left out).
    async fn layout(path: &Path) -> Vec<String> {
        let url = format!("sqlite://{}", path.display());
        let pool = SqlitePool::connect(&url).await.unwrap();
        let rows = sqlx::query(
            "SELECT m.type, m.name, p.name, p.type, p.\"notnull\", p.pk, p.dflt_value
             FROM sqlite_master m LEFT JOIN pragma_table_info(m.name) p
             WHERE m.name NOT LIKE '_sqlx%' AND m.name NOT LIKE 'sqlite_%'
             ORDER BY m.name, p.cid",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        pool.close().await;
        rows.iter()
            .map(|row| {
                format!(
                    "{} {} {:?} {:?} {:?} {:?} {:?}",
                    row.get::<String, _>(0),
                    row.get::<String, _>(1),
                    row.get::<Option<String>, _>(2),
                    row.get::<Option<String>, _>(3),
                    row.get::<Option<i64>, _>(4),
                    row.get::<Option<i64>, _>(5),
                    row.get::<Option<String>, _>(6),
                )
            })
            .collect()
    }

    /// A database made by the previous layout (tables created in code, no migrations table)
    /// opens, keeps its rows, and ends with the very layout of a new database; so does one of
    /// the first release (two tables, no history columns).
    #[tokio::test]
    async fn databases_of_the_previous_layouts_open_and_keep_their_rows() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = dir.path().join("fresh.db");
        SqliteStore::open(&fresh).await.unwrap().close().await;
        let expected = layout(&fresh).await;
        for table in [
            "updates",
            "snapshots",
            "checkpoints",
            "actors",
            "fairy_states",
        ] {
            assert!(
                expected
                    .iter()
                    .any(|line| line.starts_with(&format!("table {table} "))),
                "{table} in {expected:?}"
            );
        }

        let previous = dir.path().join("previous.db");
        let mut statements = PREVIOUS_LAYOUT.to_vec();
        statements.extend([
            "INSERT INTO actors (id, data) VALUES (1, '{\"user\":\"ann\"}')",
            "INSERT INTO updates (room, seq, data, at, actor) VALUES ('old', 1, x'01', 10, 1)",
            "INSERT INTO updates (room, seq, data, at, actor) VALUES ('old', 2, x'02', 20, NULL)",
            "INSERT INTO snapshots (room, seq, data) VALUES ('old', 1, x'0a')",
            "INSERT INTO checkpoints (room, seq, data, base) VALUES ('old', 1, x'0b', NULL)",
            "INSERT INTO fairy_states (room, fairy, data) VALUES ('old', 'f-1', x'7b7d')",
            "INSERT INTO projects (room, project, data) VALUES ('old', 'p-1', x'70')",
            "INSERT INTO room_instructions (room, text) VALUES ('old', 'Use blue.')",
            "INSERT INTO webhook_outbox (id, body, created_at, next_at) VALUES ('e-1', x'65', 5, 5)",
        ]);
        run_sql(&previous, &statements).await;
        let store = SqliteStore::open(&previous).await.unwrap();
        let old = room("old");
        let loaded = store.load(&old).await.unwrap();
        assert_eq!(loaded.snapshot.as_deref(), Some(&[0x0a][..]));
        assert_eq!(loaded.updates, vec![Bytes::from_static(&[2])]);
        assert_eq!(loaded.last_seq, 2);
        let history = store.history(&old, 0, 10).await.unwrap();
        assert_eq!(history.len(), 2);
        assert_eq!(history[0].actor.as_deref(), Some("{\"user\":\"ann\"}"));
        assert_eq!(history[1].at, Some(20));
        assert_eq!(store.newest_checkpoint(&old).await.unwrap(), Some(1));
        let side = store.side();
        assert_eq!(
            side.load_fairy_state(&old, "f-1").await.unwrap().as_deref(),
            Some(&b"{}"[..])
        );
        assert_eq!(
            side.load_projects(&old).await.unwrap(),
            vec![Bytes::from_static(b"p")]
        );
        assert_eq!(
            side.load_instructions(&old).await.unwrap().as_deref(),
            Some("Use blue.")
        );
        let claimed = store.outbox().claim(10, 100, 10).await.unwrap();
        assert_eq!(claimed.len(), 1);
        assert_eq!(store.append(&old, updates("new", 1)).await.unwrap(), 3);
        store.close().await;
        drop(store);
        assert_eq!(
            layout(&previous).await,
            expected,
            "the previous layout converges"
        );
        // Reopening (migrations applied) changes nothing.
        let store = SqliteStore::open(&previous).await.unwrap();
        assert_eq!(store.load(&old).await.unwrap().last_seq, 3);
        store.close().await;

        // The first release: the log and the snapshots only, without times nor actors.
        let first = dir.path().join("first.db");
        run_sql(
            &first,
            &[
                PREVIOUS_LAYOUT[0],
                PREVIOUS_LAYOUT[1],
                "INSERT INTO updates (room, seq, data) VALUES ('old', 1, x'00')",
            ],
        )
        .await;
        let store = SqliteStore::open(&first).await.unwrap();
        let history = store.history(&old, 0, 10).await.unwrap();
        assert_eq!((history.len(), history[0].at), (1, None));
        store.close().await;
        drop(store);
        assert_eq!(layout(&first).await, expected, "the first layout converges");
    }

    /// A database of the layout before the fairies' request rows (migration 3, issue 49),
    /// made by the migrations before it, opens: the new table is added, every row is kept, and
    /// the fairy state it holds (its ledger inline, the fixture of that layout) reads back
    /// byte for byte, for `agent::state::store::load` to load as it is.
    #[tokio::test]
    async fn a_database_from_before_the_request_rows_opens_and_keeps_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = dir.path().join("fresh.db");
        SqliteStore::open(&fresh).await.unwrap().close().await;
        let expected = layout(&fresh).await;

        let before = dir.path().join("before-0003.db");
        let url = format!("sqlite://{}?mode=rwc", before.display());
        let pool = SqlitePool::connect(&url).await.unwrap();
        migrations::before(migrations::sqlite(), 3)
            .run(&pool)
            .await
            .unwrap();
        pool.close().await;
        assert_ne!(layout(&before).await, expected, "a layout of its own");
        let fixture = include_str!("../../tests/fixtures/state/inline-ledger.json");
        let state_row = format!(
            "INSERT INTO fairy_states (room, fairy, data) VALUES ('old', 'f-1', CAST('{}' AS BLOB))",
            fixture.trim_end().replace('\'', "''")
        );
        run_sql(
            &before,
            &[
                "INSERT INTO actors (id, data) VALUES (1, '{\"user\":\"ann\"}')",
                "INSERT INTO updates (room, seq, data, at, actor) VALUES ('old', 1, x'01', 10, 1)",
                "INSERT INTO snapshots (room, seq, data) VALUES ('old', 1, x'0a')",
                "INSERT INTO projects (room, project, data) VALUES ('old', 'p-1', x'70')",
                &state_row,
            ],
        )
        .await;

        let store = SqliteStore::open(&before).await.unwrap();
        let old = room("old");
        let loaded = store.load(&old).await.unwrap();
        assert_eq!(loaded.snapshot.as_deref(), Some(&[0x0a][..]));
        assert_eq!(loaded.last_seq, 1);
        let side = store.side();
        assert_eq!(
            side.load_fairy_state(&old, "f-1").await.unwrap().as_deref(),
            Some(fixture.trim_end().as_bytes()),
            "the state as the layout before wrote it"
        );
        assert_eq!(
            side.load_projects(&old).await.unwrap(),
            vec![Bytes::from_static(b"p")]
        );
        // The new table takes rows.
        side.save_fairy_request(&old, "f-1", 0, Bytes::from_static(b"{}"), None)
            .await
            .unwrap();
        assert!(
            side.load_fairy_request(&old, "f-1", 0)
                .await
                .unwrap()
                .is_some()
        );
        assert_eq!(store.append(&old, updates("new", 1)).await.unwrap(), 2);
        store.close().await;
        drop(store);
        assert_eq!(layout(&before).await, expected, "it converges");
        // The previous release's migrator (migrations 1 and 2, no `set_ignore_missing`)
        // refuses the migrated database: going back means a restored copy
        // (docs/operations.md "Upgrades").
        let pool = SqlitePool::connect(&url).await.unwrap();
        let refused = migrations::before(migrations::sqlite(), 3).run(&pool).await;
        assert!(refused.is_err(), "{refused:?}");
        pool.close().await;
    }

    fn file_len(path: &Path) -> u64 {
        std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
    }

    /// `n` updates of 64 KiB.
    fn big(n: usize) -> Vec<Bytes> {
        vec![Bytes::from(vec![7u8; 64 * 1024]); n]
    }

    /// The group-commit writer never checkpoints the WAL inside its commits (SQLite's automatic
    /// checkpoint would, in the commit that crosses 1,000 pages, and every write queued behind
    /// that commit would wait for it): 10 MiB of appends leave the database file as it was, all
    /// of it in the WAL, until a checkpoint copies it; the WAL is then written from its start
    /// again, so it does not grow with the log. (Before: the database file grew at the second
    /// append.)
    #[tokio::test]
    async fn the_writer_leaves_the_wal_to_the_checkpointer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.db");
        let wal = dir.path().join("wal.db-wal");
        let store = SqliteStore::open_checkpointing(&path, None).await.unwrap();
        let name = room("big");
        store.append(&name, updates("first", 1)).await.unwrap();
        let before = file_len(&path);
        for _ in 0..5 {
            // 2 MiB a commit: past 1,000 pages of 4 KiB at the second.
            store.append(&name, big(32)).await.unwrap();
        }
        assert_eq!(file_len(&path), before, "the writer copied nothing");
        let grown = file_len(&wal);
        assert!(grown > 8 << 20, "the WAL holds it: {grown}");
        let mut conn = store.pool().acquire().await.unwrap();
        let (pages, copied) = checkpoint_wal(&mut conn).await.unwrap();
        drop(conn);
        assert!(pages > 2_000 && copied == pages, "{pages} {copied}");
        assert!(file_len(&path) > before + (8 << 20));
        for _ in 0..5 {
            store.append(&name, big(32)).await.unwrap();
        }
        assert!(
            file_len(&wal) <= grown + (1 << 20),
            "the WAL is written from its start again: {} after {grown}",
            file_len(&wal)
        );
        assert_eq!(store.load(&name).await.unwrap().last_seq, 321);
        store.close().await;
    }

    /// The background checkpointer copies what the writer committed into the database file.
    #[tokio::test]
    async fn the_checkpointer_copies_the_wal_in_the_background() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bg.db");
        let every = Duration::from_millis(50);
        let store = SqliteStore::open_checkpointing(&path, Some(every))
            .await
            .unwrap();
        let name = room("big");
        store.append(&name, updates("first", 1)).await.unwrap();
        let before = file_len(&path);
        store.append(&name, big(32)).await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while file_len(&path) < before + (2 << 20) {
            assert!(std::time::Instant::now() < deadline, "never checkpointed");
            tokio::time::sleep(every).await;
        }
        store.close().await;
    }
}
