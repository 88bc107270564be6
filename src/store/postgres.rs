//! The shared PostgreSQL [`Store`] of the scale-out mode (docs/storage.md, "PostgreSQL").
//!
//! Owns the connection pool, the migrations under `migrations/postgres` (run at open, under
//! sqlx's advisory lock, so nodes starting together migrate once), and the SQL of the
//! transactions of the group-commit writer ([`super::writer`]): every write request queued while
//! a commit is in flight joins the next transaction, across rooms, and returns only after it
//! committed (`synchronous_commit` as configured on the server: `on` by default, durable).
//!
//! Several nodes append to the same room: the `rooms` row of a room holds its sequence counter
//! and is locked by every append (rows are taken in room order inside a batch, so two nodes'
//! batches cannot deadlock), which hands out gap-free sequence numbers that become visible in
//! order. Compaction never moves a snapshot backwards and deletes nothing (the log is history,
//! docs/storage.md "History"), so it is safe while other nodes append; a checkpoint is kept only
//! while none newer than the state it extends exists (nodes never fork the chain); pruning old
//! history only deletes what a kept checkpoint and the snapshot cover. A fairy's fencing token
//! (`fairy_fences`) is taken in its own statement and checked, share-locked, inside the append
//! that carries it (docs/scaling.md "Fencing"). Tables live in one schema
//! (`--store-schema`), set as the connections' `search_path`.
//!
//! The keyed side tables ([`super::keyed`]) are `fairy_states`, `projects` and
//! `room_instructions`; the SQL both dialects share is in [`super::sql`] and
//! [`super::keyed::sql`], this file keeps the PostgreSQL-only SQL (the writer's appends and
//! fences, snapshot and checkpoint writes). This module knows nothing of sockets, peers or Yjs;
//! it must not be used by anything but the store's callers through the [`Store`] trait, and it
//! must not touch the outbox's table (in [`super::outbox::postgres`]).

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Row, Transaction};

use super::checkpoints::{
    assemble_version, choose_base, newest_chain, prune_chain, squash_off_thread,
};
use super::keyed::{self, SideTables, Table};
use super::sql;
use super::writer::{Batch, WriteOp, WriteReq, Writer, Written, known_actor, to_i64, to_u64};
use super::{Checkpoint, Fence, LogRow, Logged, Store, StoreError, StoredRoom, StoredVersion};
use crate::ids::RoomName;
/// How many writer client ids nodes take turns with (`2..=65536`, see
/// [`Store::writer_client_id`]).
const WRITER_CLIENT_IDS: u64 = 65_535;
/// How long a connection attempt may take before the store counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The schema holding a deployment's tables: a lower-case SQL identifier (`[a-z_][a-z0-9_]*`,
/// at most 63 bytes), so it can be named in `search_path` without quoting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaName(String);

impl SchemaName {
    /// Validates a schema name.
    pub fn parse(name: &str) -> Result<Self, StoreError> {
        let mut chars = name.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
        let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if first_ok && rest_ok && name.len() <= 63 {
            Ok(SchemaName(name.to_owned()))
        } else {
            Err(StoreError::InvalidSchema(name.to_owned()))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for SchemaName {
    fn default() -> Self {
        SchemaName("fairyring".to_owned())
    }
}

/// PostgreSQL-backed store with a group-committing writer task.
pub struct PostgresStore {
    pool: PgPool,
    writer: Writer,
    /// The webhook outbox (its own table, shared by every node).
    outbox: super::outbox::postgres::PgOutbox,
}

impl PostgresStore {
    /// Connects to `url` (`postgres://USER@HOST:PORT/DB`), creates `schema` if needed and runs
    /// the migrations in it.
    pub async fn open(url: &str, schema: &SchemaName) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)?
            .application_name("fairyring")
            .options([("search_path", schema.as_str())]);
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(CONNECT_TIMEOUT)
            .connect_with(options)
            .await?;
        let mut migrator = sqlx::migrate!("migrations/postgres");
        migrator.create_schema(schema.as_str().to_owned());
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
        let outbox = super::outbox::postgres::PgOutbox::new(pool.clone());
        Ok(PostgresStore {
            pool,
            writer,
            outbox,
        })
    }
}

#[async_trait]
impl Store for PostgresStore {
    fn outbox(&self) -> &dyn super::outbox::Outbox {
        &self.outbox
    }

    fn side(&self) -> &dyn SideTables {
        self
    }

    async fn load(&self, room: &RoomName) -> Result<StoredRoom, StoreError> {
        self.load_since(room, 0).await
    }

    async fn load_since(&self, room: &RoomName, after_seq: u64) -> Result<StoredRoom, StoreError> {
        // One snapshot of the database: a compaction committing in between cannot make the
        // snapshot and the log disagree.
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .execute(&mut *tx)
            .await?;
        let snapshot = sqlx::query(sql::SNAPSHOT)
            .bind(room.as_str())
            .fetch_optional(&mut *tx)
            .await?;
        let (from_seq, snapshot) = match snapshot {
            // A full load (`after_seq` 0) takes the snapshot whatever it covers.
            Some(row) if after_seq == 0 || to_u64(row.try_get::<i64, _>(0)?) > after_seq => (
                row.try_get::<i64, _>(0)?,
                Some(Bytes::from(row.try_get::<Vec<u8>, _>(1)?)),
            ),
            _ => (to_i64(after_seq), None),
        };
        let rows = sqlx::query(sql::UPDATES_AFTER)
            .bind(room.as_str())
            .bind(from_seq)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        let mut last_seq = from_seq;
        let mut updates = Vec::with_capacity(rows.len());
        for row in rows {
            last_seq = row.try_get::<i64, _>(0)?;
            updates.push(Bytes::from(row.try_get::<Vec<u8>, _>(1)?));
        }
        Ok(StoredRoom {
            snapshot,
            updates,
            last_seq: to_u64(last_seq),
        })
    }

    async fn append_logged(
        &self,
        room: &RoomName,
        updates: Vec<Logged>,
    ) -> Result<u64, StoreError> {
        self.writer.append(room, updates, Vec::new()).await
    }

    async fn writer_client_id(&self) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT nextval('writer_client_ids')")
            .fetch_one(&self.pool)
            .await?;
        let taken = to_u64(row.try_get::<i64, _>(0)?).max(1);
        Ok(2 + (taken - 1) % WRITER_CLIENT_IDS)
    }

    async fn next_fence(&self, room: &RoomName, fairy: &str) -> Result<Option<u64>, StoreError> {
        let row = sqlx::query(
            "INSERT INTO fairy_fences (room, fairy, generation) VALUES ($1, $2, 1)
             ON CONFLICT (room, fairy) DO UPDATE SET generation = fairy_fences.generation + 1
             RETURNING generation",
        )
        .bind(room.as_str())
        .bind(fairy)
        .fetch_one(&self.pool)
        .await?;
        Ok(Some(to_u64(row.try_get::<i64, _>(0)?)))
    }

    async fn append_fenced(
        &self,
        room: &RoomName,
        updates: Vec<Logged>,
        fences: Vec<Fence>,
    ) -> Result<u64, StoreError> {
        self.writer.append(room, updates, fences).await
    }

    async fn compact(
        &self,
        room: &RoomName,
        snapshot: Bytes,
        upto_seq: u64,
    ) -> Result<(), StoreError> {
        self.writer.compact(room, snapshot, upto_seq).await
    }

    async fn newest_checkpoint(&self, room: &RoomName) -> Result<Option<u64>, StoreError> {
        let row = sqlx::query(sql::NEWEST_CHECKPOINT)
            .bind(room.as_str())
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<Option<i64>, _>(0)?.map(to_u64))
    }

    async fn add_checkpoint(
        &self,
        room: &RoomName,
        checkpoint: Checkpoint,
    ) -> Result<bool, StoreError> {
        self.writer.add_checkpoint(room, checkpoint).await
    }

    async fn history(
        &self,
        room: &RoomName,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LogRow>, StoreError> {
        let rows = sqlx::query(sql::HISTORY)
            .bind(room.as_str())
            .bind(to_i64(after))
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(log_row).collect::<Result<_, _>>()?)
    }

    async fn load_version(
        &self,
        room: &RoomName,
        seq: u64,
    ) -> Result<Option<StoredVersion>, StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .execute(&mut *tx)
            .await?;
        let upto = to_i64(seq);
        let meta = checkpoint_meta(&mut tx, room.as_str(), upto).await?;
        let chain = newest_chain(&meta);
        let chain = match chain.last() {
            Some(head) => Some((
                *head,
                checkpoint_data(&mut tx, room.as_str(), &chain).await?,
            )),
            None => None,
        };
        let snapshot = sqlx::query(sql::SNAPSHOT_AT_MOST)
            .bind(room.as_str())
            .bind(upto)
            .fetch_optional(&mut *tx)
            .await?
            .map(|row| {
                Ok::<_, sqlx::Error>((
                    to_u64(row.try_get::<i64, _>(0)?),
                    Bytes::from(row.try_get::<Vec<u8>, _>(1)?),
                ))
            })
            .transpose()?;
        let from = chain.as_ref().map_or(0, |(head, _)| *head);
        let rows = sqlx::query(sql::UPDATES_BETWEEN)
            .bind(room.as_str())
            .bind(to_i64(from))
            .bind(upto)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        let rows = rows
            .iter()
            .map(|row| {
                Ok((
                    to_u64(row.try_get::<i64, _>(0)?),
                    Bytes::from(row.try_get::<Vec<u8>, _>(1)?),
                ))
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        Ok(assemble_version(seq, chain, snapshot, rows))
    }

    async fn history_bounded(
        &self,
        room: &RoomName,
        after: u64,
        limit: usize,
        max_bytes: u64,
    ) -> Result<Vec<LogRow>, StoreError> {
        // The sizes first (no blob is read), then only the rows that fit.
        let sizes = sqlx::query(sql::LOG_SIZES)
            .bind(room.as_str())
            .bind(to_i64(after))
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| {
                Ok((
                    to_u64(row.try_get::<i64, _>(0)?),
                    to_u64(row.try_get::<Option<i64>, _>(1)?.unwrap_or(0)),
                ))
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        let fit = super::fitting(sizes.iter().map(|(_, bytes)| *bytes), max_bytes);
        let Some(&(upto, _)) = sizes.get(fit.saturating_sub(1)) else {
            return Ok(Vec::new());
        };
        let rows = sqlx::query(sql::HISTORY_BETWEEN)
            .bind(room.as_str())
            .bind(to_i64(after))
            .bind(to_i64(upto))
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(log_row).collect::<Result<_, _>>()?)
    }

    async fn version_base(
        &self,
        room: &RoomName,
        seq: u64,
    ) -> Result<Option<StoredVersion>, StoreError> {
        // Only the base is read here: the updates after it follow in bounded batches.
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .execute(&mut *tx)
            .await?;
        let upto = to_i64(seq);
        let meta = checkpoint_meta(&mut tx, room.as_str(), upto).await?;
        let chain = newest_chain(&meta);
        let chain = match chain.last() {
            Some(head) => Some((
                *head,
                checkpoint_data(&mut tx, room.as_str(), &chain).await?,
            )),
            None => None,
        };
        let first_kept = sqlx::query(sql::FIRST_KEPT)
            .bind(room.as_str())
            .fetch_one(&mut *tx)
            .await?
            .try_get::<Option<i64>, _>(0)?
            .map(to_u64);
        let newest_base = chain.as_ref().map_or(0, |(head, _)| *head);
        // The snapshot's data only when it is nearer than the chain (it is the whole room).
        let snapshot_seq = sqlx::query(sql::SNAPSHOT_SEQ)
            .bind(room.as_str())
            .fetch_optional(&mut *tx)
            .await?
            .map(|row| row.try_get::<i64, _>(0))
            .transpose()?
            .map(to_u64)
            .filter(|at| *at <= seq && *at > newest_base);
        let snapshot = match snapshot_seq {
            Some(_) => sqlx::query(sql::SNAPSHOT_AT_MOST)
                .bind(room.as_str())
                .bind(upto)
                .fetch_optional(&mut *tx)
                .await?
                .map(|row| {
                    Ok::<_, sqlx::Error>((
                        to_u64(row.try_get::<i64, _>(0)?),
                        Bytes::from(row.try_get::<Vec<u8>, _>(1)?),
                    ))
                })
                .transpose()?,
            None => None,
        };
        tx.commit().await?;
        Ok(choose_base(seq, chain, snapshot, first_kept))
    }

    async fn last_seq(&self, room: &RoomName) -> Result<u64, StoreError> {
        let row = sqlx::query(sql::LAST_SEQ)
            .bind(room.as_str())
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<Option<i64>, _>(0)?.map_or(0, to_u64))
    }

    async fn logs_over(&self, max_bytes: u64) -> Result<Vec<super::OverCap>, StoreError> {
        let rooms: Vec<String> = sqlx::query(sql::LOGS_OVER)
            .bind(to_i64(max_bytes))
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| row.try_get::<String, _>(0))
            .collect::<Result<_, _>>()?;
        let mut over = Vec::with_capacity(rooms.len());
        for room in rooms {
            let Ok(name) = RoomName::parse(&room) else {
                continue;
            };
            let cut = sqlx::query(sql::LOG_CUT)
                .bind(&room)
                .bind(to_i64(max_bytes))
                .fetch_one(&self.pool)
                .await?
                .try_get::<Option<i64>, _>(0)?;
            let snapshot = sqlx::query(sql::SNAPSHOT_SEQ)
                .bind(&room)
                .fetch_optional(&self.pool)
                .await?
                .map(|row| row.try_get::<i64, _>(0))
                .transpose()?
                .map(to_u64);
            if let Some(cut) = cut {
                over.push(super::OverCap {
                    room: name,
                    cut: to_u64(cut),
                    snapshot,
                });
            }
        }
        Ok(over)
    }

    async fn prune_log_to(&self, room: &RoomName, upto: u64) -> Result<u64, StoreError> {
        let room = room.as_str();
        let mut tx = self.pool.begin().await?;
        let snapshot = sqlx::query(sql::SNAPSHOT_SEQ)
            .bind(room)
            .fetch_optional(&mut *tx)
            .await?
            .map(|row| row.try_get::<i64, _>(0))
            .transpose()?
            .map(to_u64);
        let meta = checkpoint_meta(&mut tx, room, i64::MAX).await?;
        let Some(chain) = prune_chain(&meta, Some(upto), snapshot) else {
            return Ok(0);
        };
        let Some(&keep) = chain.last() else {
            return Ok(0);
        };
        let states = checkpoint_data(&mut tx, room, &chain).await?;
        tx.commit().await?;
        let full = if chain.len() > 1 {
            match squash_off_thread(states).await {
                Some(full) => Some(full),
                None => return Ok(0),
            }
        } else {
            None
        };
        let mut tx = self.pool.begin().await?;
        if let Some(full) = full {
            sqlx::query(sql::SQUASH_CHECKPOINT)
                .bind(full.as_ref())
                .bind(room)
                .bind(to_i64(keep))
                .execute(&mut *tx)
                .await?;
        }
        let dropped = sqlx::query(sql::PRUNE_UPDATES)
            .bind(room)
            .bind(to_i64(keep))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query(sql::PRUNE_CHECKPOINTS)
            .bind(room)
            .bind(to_i64(keep))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(dropped)
    }

    async fn dev_secret(&self, candidate: &[u8]) -> Result<Vec<u8>, StoreError> {
        sqlx::query(sql::KEEP_SECRET)
            .bind(sql::DEV_SECRET_NAME)
            .bind(candidate)
            .execute(&self.pool)
            .await?;
        let row = sqlx::query(sql::SECRET)
            .bind(sql::DEV_SECRET_NAME)
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<Vec<u8>, _>(0)?)
    }

    async fn seq_at(&self, room: &RoomName, at: u64) -> Result<Option<u64>, StoreError> {
        let row = sqlx::query(sql::SEQ_AT)
            .bind(room.as_str())
            .bind(to_i64(at))
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<Option<i64>, _>(0)?.map(to_u64))
    }

    /// Room by room, each in its own transactions outside the group-commit writer; safe beside
    /// other nodes (it deletes only what a kept checkpoint and the snapshot cover). A kept
    /// delta checkpoint is made full (read, squashed off the async threads, written) before
    /// anything below it goes.
    async fn prune_history(&self, before: u64) -> Result<u64, StoreError> {
        let rooms: Vec<String> = sqlx::query(sql::ROOMS_WITH_CHECKPOINTS)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| row.try_get::<String, _>(0))
            .collect::<Result<_, _>>()?;
        let mut dropped = 0;
        for room in rooms {
            let mut tx = self.pool.begin().await?;
            let row = sqlx::query(sql::PRUNE_BOUNDS)
                .bind(&room)
                .bind(to_i64(before))
                .fetch_one(&mut *tx)
                .await?;
            let old = row.try_get::<Option<i64>, _>(0)?.map(to_u64);
            let snapshot = row.try_get::<Option<i64>, _>(1)?.map(to_u64);
            let meta = checkpoint_meta(&mut tx, &room, i64::MAX).await?;
            let Some(chain) = prune_chain(&meta, old, snapshot) else {
                continue;
            };
            let Some(&keep) = chain.last() else {
                continue;
            };
            let states = checkpoint_data(&mut tx, &room, &chain).await?;
            tx.commit().await?;
            let full = if chain.len() > 1 {
                match squash_off_thread(states).await {
                    Some(full) => Some(full),
                    None => continue,
                }
            } else {
                None
            };
            let mut tx = self.pool.begin().await?;
            if let Some(full) = full {
                sqlx::query(sql::SQUASH_CHECKPOINT)
                    .bind(full.as_ref())
                    .bind(&room)
                    .bind(to_i64(keep))
                    .execute(&mut *tx)
                    .await?;
            }
            dropped += sqlx::query(sql::PRUNE_UPDATES)
                .bind(&room)
                .bind(to_i64(keep))
                .execute(&mut *tx)
                .await?
                .rows_affected();
            sqlx::query(sql::PRUNE_CHECKPOINTS)
                .bind(&room)
                .bind(to_i64(keep))
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        }
        Ok(dropped)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

/// The side tables: reads on the pool; writes of a table written by group commit (fairy states)
/// through the writer, where a fenced put is checked in the transaction that writes it
/// ([`stale_fence`]); the others' rare writes on the pool.
#[async_trait]
impl SideTables for PostgresStore {
    async fn get(
        &self,
        table: Table,
        room: &RoomName,
        key: &str,
    ) -> Result<Option<Bytes>, StoreError> {
        let row = keyed::sql::get::<Postgres>(table, room.as_str(), key)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row
            .map(|row| keyed::sql::value::<Postgres>(table, &row))
            .transpose()?)
    }

    async fn list(&self, table: Table, room: &RoomName) -> Result<Vec<Bytes>, StoreError> {
        let rows = keyed::sql::list::<Postgres>(table, room.as_str())
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .iter()
            .map(|row| keyed::sql::value::<Postgres>(table, row))
            .collect::<Result<_, _>>()?)
    }

    async fn put(
        &self,
        table: Table,
        room: &RoomName,
        key: &str,
        value: Bytes,
        fence: Option<u64>,
    ) -> Result<(), StoreError> {
        if table.group_commit() || fence.is_some() {
            return self.writer.put(table, room, key, value, fence).await;
        }
        keyed::sql::upsert::<Postgres>(table, room.as_str(), key, &value)?
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn delete(&self, table: Table, room: &RoomName, key: &str) -> Result<(), StoreError> {
        if table.group_commit() {
            return self.writer.delete(table, room, key).await;
        }
        keyed::sql::delete::<Postgres>(table, room.as_str(), key)
            .execute(&self.pool)
            .await?;
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
        self.actors.extend(interned);
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

/// One row of the log as the history reads select it: `seq, at, actor, update_data`.
fn log_row(row: &sqlx::postgres::PgRow) -> Result<LogRow, sqlx::Error> {
    Ok(LogRow {
        seq: to_u64(row.try_get::<i64, _>(0)?),
        at: row.try_get::<Option<i64>, _>(1)?.map(to_u64),
        actor: row.try_get::<Option<String>, _>(2)?.map(Arc::from),
        update: Bytes::from(row.try_get::<Vec<u8>, _>(3)?),
    })
}

/// `(seq, base)` of a room's checkpoints at or below `upto`.
async fn checkpoint_meta(
    tx: &mut Transaction<'_, Postgres>,
    room: &str,
    upto: i64,
) -> Result<Vec<(u64, Option<u64>)>, sqlx::Error> {
    sqlx::query(sql::CHECKPOINT_META)
        .bind(room)
        .bind(upto)
        .fetch_all(&mut **tx)
        .await?
        .iter()
        .map(|row| {
            Ok((
                to_u64(row.try_get::<i64, _>(0)?),
                row.try_get::<Option<i64>, _>(1)?.map(to_u64),
            ))
        })
        .collect()
}

/// The data of a room's checkpoints `chain` (ascending sequence numbers), in that order.
async fn checkpoint_data(
    tx: &mut Transaction<'_, Postgres>,
    room: &str,
    chain: &[u64],
) -> Result<Vec<Bytes>, sqlx::Error> {
    let seqs: Vec<i64> = chain.iter().map(|seq| to_i64(*seq)).collect();
    sqlx::query("SELECT data FROM checkpoints WHERE room = $1 AND seq = ANY($2) ORDER BY seq")
        .bind(room)
        .bind(&seqs)
        .fetch_all(&mut **tx)
        .await?
        .iter()
        .map(|row| Ok(Bytes::from(row.try_get::<Vec<u8>, _>(0)?)))
        .collect()
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
                // A snapshot never replaces a newer one (another node compacted further).
                sqlx::query(
                    "INSERT INTO snapshots (room, seq, data) VALUES ($1, $2, $3)
                     ON CONFLICT (room) DO UPDATE SET seq = excluded.seq, data = excluded.data
                     WHERE snapshots.seq < excluded.seq",
                )
                .bind(room)
                .bind(to_i64(*upto_seq))
                .bind(snapshot.as_ref())
                .execute(&mut *tx)
                .await?;
                *upto_seq
            }
            WriteOp::Checkpoint { room, checkpoint } => sqlx::query(
                "INSERT INTO checkpoints (room, seq, base, data)
                     SELECT $1, $2, $3, $4 WHERE NOT EXISTS (
                         SELECT 1 FROM checkpoints WHERE room = $1 AND (seq > $5 OR seq >= $2))
                     ON CONFLICT (room, seq) DO NOTHING",
            )
            .bind(room)
            .bind(to_i64(checkpoint.seq))
            .bind(checkpoint.base.map(to_i64))
            .bind(checkpoint.data.as_ref())
            .bind(to_i64(checkpoint.extends))
            .execute(&mut *tx)
            .await?
            .rows_affected(),
            WriteOp::Put {
                table,
                room,
                key,
                value,
                fence,
            } => {
                if let Some(generation) = fence {
                    let fence = Fence {
                        fairy: key.clone(),
                        generation: *generation,
                    };
                    if let Some(fairy) = stale_fence(&mut tx, room, &[fence]).await? {
                        seqs.push(Written::Fenced(fairy));
                        continue;
                    }
                }
                keyed::sql::upsert::<Postgres>(*table, room, key, value)?
                    .execute(&mut *tx)
                    .await?;
                0
            }
            WriteOp::Delete { table, room, key } => {
                keyed::sql::delete::<Postgres>(*table, room, key)
                    .execute(&mut *tx)
                    .await?;
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
    tx: &mut Transaction<'static, Postgres>,
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
    .fetch_one(&mut **tx)
    .await?;
    let last: i64 = row.try_get(0)?;
    let first = last - count + 1;
    let seqs: Vec<i64> = (first..=last).collect();
    let data: Vec<&[u8]> = updates.iter().map(|u| u.update.as_ref()).collect();
    let at: Vec<i64> = updates.iter().map(|u| to_i64(u.at)).collect();
    let mut ids: Vec<Option<i64>> = Vec::with_capacity(updates.len());
    for logged in updates {
        ids.push(match &logged.actor {
            Some(actor) => Some(actor_id(tx, actors, interned, actor).await?),
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
    .execute(&mut **tx)
    .await?;
    Ok(to_u64(last))
}

/// The first of `fences` older than its fairy's newest token, if any (docs/scaling.md
/// "Fencing"). The rows read stay share-locked until the transaction ends, so a token taken
/// meanwhile ([`Store::next_fence`], which updates the row) waits for this append to commit and
/// is ordered after it.
async fn stale_fence(
    tx: &mut Transaction<'static, Postgres>,
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
    .fetch_all(&mut **tx)
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

/// The number of an actor's JSON in `actors`, added when new (`interned` collects the numbers
/// this transaction learnt, kept by the caller only once it committed).
async fn actor_id(
    tx: &mut Transaction<'static, Postgres>,
    known: &HashMap<Arc<str>, i64>,
    interned: &mut Vec<(Arc<str>, i64)>,
    actor: &Arc<str>,
) -> Result<i64, sqlx::Error> {
    if let Some(id) = known_actor(known, interned, actor) {
        return Ok(id);
    }
    sqlx::query(sql::ADD_ACTOR)
        .bind(actor.as_ref())
        .execute(&mut **tx)
        .await?;
    let id: i64 = sqlx::query(sql::ACTOR_ID)
        .bind(actor.as_ref())
        .fetch_one(&mut **tx)
        .await?
        .try_get(0)?;
    interned.push((actor.clone(), id));
    Ok(id)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use super::*;

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
            schema.as_str()
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

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(SchemaName::parse("fairyring").is_ok());
        assert!(SchemaName::parse("t_01").is_ok());
        assert!(SchemaName::parse("_x").is_ok());
        for bad in ["", "1a", "Caps", "a-b", "a;drop", "x\"y", &"a".repeat(64)] {
            assert!(SchemaName::parse(bad).is_err(), "{bad:?}");
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
            let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", schema.as_str());
            let _ = sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&pool).await;
            pool.close().await;
        }
    }
}
