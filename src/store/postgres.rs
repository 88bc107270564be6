//! The PostgreSQL backend of the SQL store, the shared store of the scale-out mode
//! (docs/storage.md, "PostgreSQL").
//!
//! The store itself is the shared [`SqlStore`]; this file owns only what PostgreSQL does its own
//! way: the connection pool and the schema (`--store-schema`, [`SchemaName`], quoted wherever
//! it is named and set as the connections' `search_path`), the migrations under
//! `migrations/postgres` (run at open, under sqlx's advisory lock, so nodes starting together
//! migrate once), its [`Dialect`], the calls only a store shared by nodes answers (writer client
//! ids, fencing tokens) and the transactions of the group-commit writer ([`super::writer`]):
//! every write request queued while a commit is in flight joins the next transaction, across
//! rooms, and returns only after it committed (`synchronous_commit` as configured on the
//! server: `on` by default, durable).
//!
//! Several nodes append to the same room: the `rooms` row of a room holds its sequence counter
//! and is locked by every append (rows are taken in room order inside a batch, so two nodes'
//! batches cannot deadlock), which hands out gap-free sequence numbers that become visible in
//! order. Compaction never moves a snapshot backwards and deletes nothing (the log is history,
//! docs/storage.md "History"), so it is safe while other nodes append; a checkpoint is kept only
//! while none newer than the state it extends exists (nodes never fork the chain); pruning old
//! history only deletes what a kept checkpoint and the snapshot cover. A fairy's fencing token
//! (`fairy_fences`) is taken in its own statement and checked, share-locked, inside the append
//! that carries it (docs/scaling.md "Fencing"). This module knows nothing of sockets, peers or
//! Yjs.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgConnection, PgPool, Postgres, Row};

use super::sql::dialect::typed_access;
use super::sql::{Backend, Dialect, SqlStore, writes};
use super::writer::{Batch, WriteOp, WriteReq, Writer, Written, to_i64, to_u64};
use super::{Fence, Logged, StoreError};
use crate::ids::RoomName;

/// How many writer client ids nodes take turns with (`2..=65536`, see
/// [`super::Store::writer_client_id`]).
const WRITER_CLIENT_IDS: u64 = 65_535;
/// How long a connection attempt may take before the store counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// PostgreSQL keeps the first 63 bytes of an identifier (`NAMEDATALEN - 1`): a longer schema
/// name would silently name another schema.
const MAX_SCHEMA_BYTES: usize = 63;

/// The schema holding a deployment's tables (`--store-schema`), named exactly as given: upper
/// case, SQL keywords and punctuation included, since it is always quoted where SQL names it
/// ([`SchemaName::quoted`]). Refused: an empty name, one over 63 bytes, one with a control
/// character, and one starting with `pg_` (PostgreSQL's own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaName(String);

impl SchemaName {
    /// Validates a schema name.
    pub fn parse(name: &str) -> Result<Self, StoreError> {
        let fits = !name.is_empty() && name.len() <= MAX_SCHEMA_BYTES;
        if fits && !name.chars().any(char::is_control) && !name.starts_with("pg_") {
            Ok(SchemaName(name.to_owned()))
        } else {
            Err(StoreError::InvalidSchema(name.to_owned()))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as a quoted SQL identifier (`"name"`, each `"` in it doubled): what SQL and
    /// `search_path` are given, so that no name is folded to lower case or read as a keyword.
    pub fn quoted(&self) -> String {
        format!("\"{}\"", self.0.replace('"', "\"\""))
    }
}

impl Default for SchemaName {
    fn default() -> Self {
        SchemaName("fairyring".to_owned())
    }
}

/// The PostgreSQL store: the shared SQL store on a PostgreSQL schema.
pub type PostgresStore = SqlStore<PgBackend>;

/// A PostgreSQL store keeps nothing beside the shared parts; its own calls run on the pool.
pub struct PgBackend;

impl SqlStore<PgBackend> {
    /// Connects to `url` (`postgres://USER@HOST:PORT/DB`), creates `schema` if needed and runs
    /// the migrations in it.
    pub async fn open(url: &str, schema: &SchemaName) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)?
            .application_name("fairyring")
            .options([("search_path", schema.quoted())]);
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(CONNECT_TIMEOUT)
            .connect_with(options)
            .await?;
        let mut migrator = super::sql::migrations::postgres();
        // sqlx writes the name into `CREATE SCHEMA IF NOT EXISTS {name}` as given.
        migrator.create_schema(schema.quoted());
        // Rolling upgrades (docs/operations.md "Upgrades"): a node of this release starts
        // against a schema a newer node already migrated. Its own migrations are still checked
        // (a changed one is refused); the newer ones it does not know are left alone, which
        // holds because migrations only add (tables, nullable or defaulted columns).
        migrator.set_ignore_missing(true);
        migrator
            .run(&pool)
            .await
            .map_err(|e| StoreError::Migration(e.to_string()))?;
        let writer = Writer::start(PgBatch {
            pool: pool.clone(),
            actors: HashMap::new(),
        });
        Ok(SqlStore::new(pool, writer, PgBackend))
    }
}

/// PostgreSQL's spelling of what the dialects write differently.
impl Dialect for Postgres {
    /// Each statement of a transaction would otherwise see the state committed when it began.
    const READ_SNAPSHOT: Option<&'static str> =
        Some("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY");

    /// A snapshot never replaces one as new or newer (another node compacted as far or
    /// further).
    const KEEP_SNAPSHOT: &'static str =
        "INSERT INTO snapshots (room, seq, data) VALUES ($1, $2, $3)
         ON CONFLICT (room) DO UPDATE SET seq = excluded.seq, data = excluded.data
         WHERE snapshots.seq < excluded.seq";

    /// Nodes share the table: due rows are taken with `FOR UPDATE SKIP LOCKED` and their lease
    /// set in the same statement, so two nodes never claim one event while its lease runs.
    const CLAIM: &'static str = "WITH due AS (
             SELECT id FROM webhook_outbox
             WHERE dead_at IS NULL AND next_at <= $2 AND claimed_until <= $2
             ORDER BY next_at, id LIMIT $3
             FOR UPDATE SKIP LOCKED
         )
         UPDATE webhook_outbox o SET claimed_until = $1 FROM due WHERE o.id = due.id
         RETURNING o.id, o.body, o.attempts, o.next_at";

    const NEXT_DUE: &'static str =
        "SELECT MIN(GREATEST(next_at, claimed_until)) FROM webhook_outbox
         WHERE dead_at IS NULL";

    typed_access!(count: i32);
}

typed_access!(row: sqlx::postgres::PgRow, count: i32);

#[async_trait]
impl Backend for PgBackend {
    type Db = Postgres;
    const FENCES: bool = true;
    const RELEASES_CONNECTIONS: bool = false;

    async fn writer_client_id(&self, pool: &PgPool) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT nextval('writer_client_ids')")
            .fetch_one(pool)
            .await?;
        let taken = to_u64(row.try_get::<i64, _>(0)?).max(1);
        Ok(2 + (taken - 1) % WRITER_CLIENT_IDS)
    }

    async fn next_fence(
        &self,
        pool: &PgPool,
        room: &RoomName,
        fairy: &str,
    ) -> Result<Option<u64>, StoreError> {
        let row = sqlx::query(
            "INSERT INTO fairy_fences (room, fairy, generation) VALUES ($1, $2, 1)
             ON CONFLICT (room, fairy) DO UPDATE SET generation = fairy_fences.generation + 1
             RETURNING generation",
        )
        .bind(room.as_str())
        .bind(fairy)
        .fetch_one(pool)
        .await?;
        Ok(Some(to_u64(row.try_get::<i64, _>(0)?)))
    }

    async fn ping(&self, pool: &PgPool) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(pool).await?;
        Ok(())
    }
}

/// PostgreSQL transactions of the group-commit writer: lock-ordered, retried when PostgreSQL
/// aborts one as a deadlock or serialization failure.
struct PgBatch {
    pool: PgPool,
    /// The number of each actor's JSON in `actors` (only committed ones).
    actors: HashMap<Arc<str>, i64>,
}

#[async_trait]
impl Batch for PgBatch {
    async fn commit(&mut self, batch: &[WriteReq]) -> Result<Vec<Written>, sqlx::Error> {
        let mut interned = Vec::new();
        let seqs = commit_batch(&self.pool, &self.actors, &mut interned, batch).await?;
        crate::store::writer::remember_actors(&mut self.actors, interned);
        Ok(seqs)
    }

    async fn release_memory(&mut self) {
        self.actors = HashMap::new();
    }

    fn retryable(&self, error: &sqlx::Error) -> bool {
        matches!(error, sqlx::Error::Database(e) if matches!(e.code().as_deref(), Some("40P01" | "40001")))
    }

    fn sorted(&self) -> bool {
        true
    }
}

/// Commits a (lock-ordered) batch in one transaction; returns, per request, what it did: the
/// last sequence number written (appends), 0, or a fenced append that wrote nothing.
async fn commit_batch(
    pool: &PgPool,
    actors: &HashMap<Arc<str>, i64>,
    interned: &mut Vec<(Arc<str>, i64)>,
    batch: &[WriteReq],
) -> Result<Vec<Written>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let mut seqs = Vec::with_capacity(batch.len());
    for req in batch {
        let seq = match &req.op {
            WriteOp::Append {
                room,
                updates,
                fences,
            } => {
                if let Some(fairy) = stale_fence(&mut tx, room, fences).await? {
                    seqs.push(Written::Fenced(fairy));
                    continue;
                }
                append(&mut tx, room, updates, actors, interned).await?
            }
            WriteOp::Compact {
                room,
                snapshot,
                upto_seq,
            } => {
                writes::keep_snapshot::<Postgres>(&mut tx, room, snapshot, *upto_seq).await?;
                *upto_seq
            }
            WriteOp::Checkpoint { room, checkpoint } => {
                writes::add_checkpoint::<Postgres>(&mut tx, room, checkpoint).await?
            }
            WriteOp::Put {
                table,
                room,
                key,
                value,
                fence,
            } => {
                if let Some(generation) = fence {
                    let fence = Fence {
                        fairy: table.fenced_fairy(key).to_owned(),
                        generation: *generation,
                    };
                    if let Some(fairy) = stale_fence(&mut tx, room, &[fence]).await? {
                        seqs.push(Written::Fenced(fairy));
                        continue;
                    }
                }
                writes::put_row::<Postgres>(&mut tx, *table, room, key, value).await?;
                0
            }
            WriteOp::Delete { table, room, key } => {
                writes::delete_row::<Postgres>(&mut tx, *table, room, key).await?;
                0
            }
        };
        seqs.push(Written::Done(seq));
    }
    tx.commit().await?;
    Ok(seqs)
}

/// Appends a room's updates: bumps (and locks) its counter row, then inserts the updates under
/// the sequence numbers it handed out. Returns the last one.
async fn append(
    conn: &mut PgConnection,
    room: &str,
    updates: &[Logged],
    actors: &HashMap<Arc<str>, i64>,
    interned: &mut Vec<(Arc<str>, i64)>,
) -> Result<u64, sqlx::Error> {
    let count = i64::try_from(updates.len()).unwrap_or(i64::MAX);
    let row = sqlx::query(
        "INSERT INTO rooms (room, last_seq) VALUES ($1, $2)
         ON CONFLICT (room) DO UPDATE SET last_seq = rooms.last_seq + excluded.last_seq
         RETURNING last_seq",
    )
    .bind(room)
    .bind(count)
    .fetch_one(&mut *conn)
    .await?;
    let last: i64 = row.try_get(0)?;
    let first = last - count + 1;
    let seqs: Vec<i64> = (first..=last).collect();
    let data: Vec<&[u8]> = updates.iter().map(|u| u.update.as_ref()).collect();
    let at: Vec<i64> = updates.iter().map(|u| to_i64(u.at)).collect();
    let mut ids: Vec<Option<i64>> = Vec::with_capacity(updates.len());
    for logged in updates {
        ids.push(match &logged.actor {
            Some(actor) => {
                Some(writes::actor_id::<Postgres>(&mut *conn, actors, interned, actor).await?)
            }
            None => None,
        });
    }
    sqlx::query(
        "INSERT INTO updates (room, seq, data, at, actor)
         SELECT $1, s, d, t, a FROM UNNEST($2::BIGINT[], $3::BYTEA[], $4::BIGINT[], $5::BIGINT[]) AS u(s, d, t, a)",
    )
    .bind(room)
    .bind(&seqs)
    .bind(&data)
    .bind(&at)
    .bind(&ids)
    .execute(&mut *conn)
    .await?;
    Ok(to_u64(last))
}

/// The first of `fences` older than its fairy's newest token, if any (docs/scaling.md
/// "Fencing"). The rows read stay share-locked until the transaction ends, so a token taken
/// meanwhile ([`super::Store::next_fence`], which updates the row) waits for this append to
/// commit and is ordered after it.
async fn stale_fence(
    conn: &mut PgConnection,
    room: &str,
    fences: &[Fence],
) -> Result<Option<String>, sqlx::Error> {
    if fences.is_empty() {
        return Ok(None);
    }
    let fairies: Vec<&str> = fences.iter().map(|f| f.fairy.as_str()).collect();
    let rows = sqlx::query(
        "SELECT fairy, generation FROM fairy_fences WHERE room = $1 AND fairy = ANY($2) FOR SHARE",
    )
    .bind(room)
    .bind(&fairies)
    .fetch_all(&mut *conn)
    .await?;
    for row in rows {
        let fairy: String = row.try_get(0)?;
        let newest = to_u64(row.try_get::<i64, _>(1)?);
        if fences
            .iter()
            .any(|f| f.fairy == fairy && f.generation < newest)
        {
            return Ok(Some(fairy));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use bytes::Bytes;

    use super::*;
    use crate::store::Store;
    use crate::store::sql::migrations;

    /// Two nodes (two stores on one schema) append to one room at once while one of them
    /// compacts: every append gets its own gap-free range, nothing is lost, and a catch-up from
    /// any point returns exactly what came after it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_nodes_append_and_compact_one_room() {
        let Some(schema) = test_db::fresh_schema("nodes").await else {
            return;
        };
        let a = Arc::new(PostgresStore::open(&test_db::url(), &schema).await.unwrap());
        let b = Arc::new(PostgresStore::open(&test_db::url(), &schema).await.unwrap());
        let room = RoomName::parse("shared").unwrap();
        let mut tasks = Vec::new();
        for (node, store) in [(0u8, a.clone()), (1u8, b.clone())] {
            for i in 0..20u8 {
                let store = store.clone();
                let room = room.clone();
                tasks.push(tokio::spawn(async move {
                    let updates =
                        vec![Bytes::from(vec![node, i, 0]), Bytes::from(vec![node, i, 1])];
                    store.append(&room, updates).await.unwrap()
                }));
            }
        }
        let compactor = {
            let a = a.clone();
            let room = room.clone();
            tokio::spawn(async move {
                // Compacts what it has loaded, while appends go on.
                let seen = a.load(&room).await.unwrap();
                a.compact(&room, Bytes::from_static(b"snap"), seen.last_seq)
                    .await
                    .unwrap();
                seen.last_seq
            })
        };
        let mut ends = BTreeSet::new();
        for task in tasks {
            assert!(
                ends.insert(task.await.unwrap()),
                "each append has its own range"
            );
        }
        let compacted = compactor.await.unwrap();
        assert_eq!(ends.iter().max(), Some(&80));
        assert!(
            ends.iter().all(|end| end % 2 == 0),
            "ranges are not interleaved"
        );
        let loaded = b.load(&room).await.unwrap();
        assert_eq!(loaded.last_seq, 80);
        if compacted > 0 {
            assert_eq!(loaded.snapshot.as_deref(), Some(&b"snap"[..]));
        }
        assert_eq!(loaded.updates.len() as u64, 80 - compacted);
        // Each update is one of the two of its append, in order.
        for pair in loaded.updates.chunks(2) {
            if let [first, second] = pair {
                assert_eq!((first[0], first[1], first[2]), (second[0], second[1], 0));
                assert_eq!(second[2], 1);
            }
        }
        // Catch-up from a point after the snapshot: only the updates after it.
        let since = a.load_since(&room, 70).await.unwrap();
        assert!(since.snapshot.is_none() || compacted > 70);
        if compacted <= 70 {
            assert_eq!(since.updates.len(), 10);
            assert_eq!(since.updates, loaded.updates[loaded.updates.len() - 10..]);
        }
        assert_eq!(since.last_seq, 80);
        // An older snapshot never replaces a newer one.
        a.compact(&room, Bytes::from_static(b"newer"), 80)
            .await
            .unwrap();
        b.compact(&room, Bytes::from_static(b"older"), 40)
            .await
            .unwrap();
        let loaded = b.load(&room).await.unwrap();
        assert_eq!(loaded.snapshot.as_deref(), Some(&b"newer"[..]));
        assert!(loaded.updates.is_empty());
        assert_eq!(loaded.last_seq, 80);
        assert_eq!(
            a.append(&room, vec![Bytes::from_static(b"n")])
                .await
                .unwrap(),
            81
        );
        let since = b.load_since(&room, 80).await.unwrap();
        assert!(since.snapshot.is_none());
        assert_eq!((since.updates.len(), since.last_seq), (1, 81));
        a.close().await;
        b.close().await;
        test_db::drop_schema(&schema).await;
    }

    /// A rolling upgrade: a node starts against a schema that a newer node has migrated
    /// further (a migration this build does not know), and still reads and writes.
    #[tokio::test]
    async fn a_node_starts_against_a_schema_a_newer_node_migrated() {
        let Some(schema) = test_db::fresh_schema("newer").await else {
            return;
        };
        let first = PostgresStore::open(&test_db::url(), &schema).await.unwrap();
        let room = RoomName::parse("upgraded").unwrap();
        first
            .append(&room, vec![Bytes::from_static(b"a")])
            .await
            .unwrap();
        first.close().await;
        // What the next release's migrator leaves behind: one more applied migration.
        let pool = sqlx::PgPool::connect(&test_db::url()).await.unwrap();
        let sql = format!(
            "INSERT INTO {}._sqlx_migrations \
             (version, description, success, checksum, execution_time) \
             VALUES (999999, 'from a newer release', true, '\\x00', 0)",
            schema.quoted()
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
        let older = PostgresStore::open(&test_db::url(), &schema)
            .await
            .expect("a node of the previous release starts against the newer schema");
        older
            .append(&room, vec![Bytes::from_static(b"b")])
            .await
            .unwrap();
        assert_eq!(older.load(&room).await.unwrap().last_seq, 2);
        older.close().await;
        test_db::drop_schema(&schema).await;
    }

    /// A one-connection pool whose search path is `schema`.
    async fn pool_in(schema: &SchemaName) -> sqlx::PgPool {
        let options = PgConnectOptions::from_str(&test_db::url())
            .unwrap()
            .options([("search_path", schema.quoted())]);
        PgPoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .unwrap()
    }

    /// A schema of the layout before the fairies' request rows (migration 10, issue 49),
    /// made by the migrations before it, is brought forward when a node of this release
    /// opens it: the new table is added, and the rows, a fairy state in the inline layout of
    /// then among them (the fixture of that layout), stay byte for byte. (A node of the
    /// previous release starts against the migrated schema:
    /// `a_node_starts_against_a_schema_a_newer_node_migrated`.)
    #[tokio::test]
    async fn a_schema_from_before_the_request_rows_is_migrated_and_keeps_its_rows() {
        let Some(schema) = test_db::fresh_schema("before10").await else {
            return;
        };
        let pool = pool_in(&schema).await;
        let mut before = migrations::before(migrations::postgres(), 10);
        before.create_schema(schema.quoted());
        before.run(&pool).await.unwrap();
        let fixture = include_bytes!("../../tests/fixtures/state/inline-ledger.json");
        sqlx::query("INSERT INTO fairy_states (room, fairy, data) VALUES ('old', 'f-1', $1)")
            .bind(&fixture[..])
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;

        let store = PostgresStore::open(&test_db::url(), &schema).await.unwrap();
        let old = RoomName::parse("old").unwrap();
        let side = store.side();
        assert_eq!(
            side.load_fairy_state(&old, "f-1").await.unwrap().as_deref(),
            Some(&fixture[..]),
            "the state as the layout before wrote it"
        );
        side.save_fairy_request(&old, "f-1", 0, Bytes::from_static(b"{}"), None)
            .await
            .unwrap();
        assert!(
            side.load_fairy_request(&old, "f-1", 0)
                .await
                .unwrap()
                .is_some()
        );
        assert_eq!(
            store
                .append(&old, vec![Bytes::from_static(b"a")])
                .await
                .unwrap(),
            1
        );
        store.close().await;
        // A node of the previous release starts against it: its migrator (the same nine
        // migrations, `set_ignore_missing`) leaves the tenth alone.
        let pool = pool_in(&schema).await;
        let mut previous = migrations::before(migrations::postgres(), 10);
        previous.create_schema(schema.quoted());
        previous.set_ignore_missing(true);
        previous
            .run(&pool)
            .await
            .expect("the previous release starts against the migrated schema");
        pool.close().await;
        test_db::drop_schema(&schema).await;
    }

    #[test]
    fn schema_names_are_taken_whole_and_quoted() {
        for good in [
            "fairyring",
            "t_01",
            "_x",
            "1a",
            "Caps",
            "select",
            "a-b",
            "a;drop",
            "x\"y",
        ] {
            assert!(SchemaName::parse(good).is_ok(), "{good:?}");
        }
        assert!(SchemaName::parse(&"a".repeat(63)).is_ok());
        for bad in ["", "pg_catalog", "a\nb", "a\0b", &"a".repeat(64)] {
            assert!(SchemaName::parse(bad).is_err(), "{bad:?}");
        }
        let quoted = |name: &str| SchemaName::parse(name).unwrap().quoted();
        assert_eq!(quoted("fairyring"), "\"fairyring\"");
        assert_eq!(quoted("Select"), "\"Select\"");
        assert_eq!(quoted("x\"y"), "\"x\"\"y\"");
    }

    /// A schema whose name is an SQL keyword, or has upper case, is created, migrated and used
    /// under exactly that name (it was written into SQL unquoted: `user` failed to parse and
    /// `Caps` named `caps`).
    #[tokio::test]
    async fn a_schema_named_like_a_keyword_or_in_upper_case_is_used_as_named() {
        let Some(fresh) = test_db::fresh_schema("kw").await else {
            return;
        };
        let suffix = fresh.as_str().trim_start_matches("t_kw_");
        for name in ["user".to_owned(), format!("Order By-{suffix}")] {
            let schema = SchemaName::parse(&name).unwrap();
            test_db::drop_schema(&schema).await;
            let store = PostgresStore::open(&test_db::url(), &schema).await.unwrap();
            let room = RoomName::parse("named").unwrap();
            store
                .append(&room, vec![Bytes::from_static(b"a")])
                .await
                .unwrap();
            store.close().await;
            let pool = sqlx::PgPool::connect(&test_db::url()).await.unwrap();
            let tables: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = $1",
            )
            .bind(&name)
            .fetch_one(&pool)
            .await
            .unwrap();
            pool.close().await;
            assert!(tables > 5, "{name:?} holds the tables: {tables}");
            let store = PostgresStore::open(&test_db::url(), &schema).await.unwrap();
            assert_eq!(store.load(&room).await.unwrap().last_seq, 1, "{name:?}");
            store.close().await;
            test_db::drop_schema(&schema).await;
        }
    }
}

/// The test database (`FAIRYRING_TEST_PG_URL`, default the CI machine's) and a fresh schema per
/// test; tests skip with a printed reason when it is unreachable, unless
/// `FAIRYRING_REQUIRE_SERVICES=1` makes that a failure.
#[cfg(test)]
pub(crate) mod test_db {
    use super::SchemaName;

    /// The test database's URL.
    pub fn url() -> String {
        std::env::var("FAIRYRING_TEST_PG_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
    }

    /// A fresh schema for one test, or `None` (after saying why) when PostgreSQL is down.
    pub async fn fresh_schema(tag: &str) -> Option<SchemaName> {
        let url = url();
        match sqlx::PgPool::connect(&url).await {
            Ok(pool) => pool.close().await,
            Err(error) => {
                let required = std::env::var("FAIRYRING_REQUIRE_SERVICES").as_deref() == Ok("1");
                assert!(
                    !required,
                    "PostgreSQL required but unreachable at {url}: {error}"
                );
                eprintln!("skipping: PostgreSQL unreachable at {url}: {error}");
                return None;
            }
        }
        let name = format!("t_{tag}_{:08x}", rand::random::<u32>());
        Some(SchemaName::parse(&name).expect("a valid schema name"))
    }

    /// Drops a test's schema.
    pub async fn drop_schema(schema: &SchemaName) {
        if let Ok(pool) = sqlx::PgPool::connect(&url()).await {
            let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", schema.quoted());
            let _ = sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&pool).await;
            pool.close().await;
        }
    }
}
