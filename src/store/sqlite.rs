//! The embedded SQLite [`Store`]: one file, WAL journal, `synchronous=FULL`.
//!
//! Tables: `updates` and `snapshots` (each room's log), `fairy_states` (each fairy's private
//! state, keyed by room and fairy id) and `room_instructions` (a room's text for its fairies). The schema is created, or completed for a database made
//! by an earlier version, when the store opens.
//!
//! Writes go through the group-commit writer ([`super::writer`]): every write request (log
//! appends, compactions, fairy-state saves and deletes) that arrives while a commit is in flight
//! joins the next transaction, across all rooms, so one fsync serves many of them. A write
//! returns only after its transaction committed. This file owns the SQL of those transactions.

use std::path::Path;
use std::str::FromStr;

use async_trait::async_trait;
use bytes::Bytes;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};

use super::writer::{Batch, WriteOp, WriteReq, Writer};
use super::{Store, StoreError, StoredRoom};
use crate::ids::RoomName;

const SCHEMA: &[&str] = &[
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
    // Added after the first release: `IF NOT EXISTS` completes older databases on open.
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
];

/// SQLite-backed store with a group-committing writer task.
pub struct SqliteStore {
    pool: SqlitePool,
    writer: Writer,
}

impl SqliteStore {
    /// Opens (creating if needed) the database file at `path`.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let url = format!("sqlite://{}", path.as_ref().display());
        let options = SqliteConnectOptions::from_str(&url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(std::time::Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await?;
        for statement in SCHEMA {
            sqlx::query(sqlx::AssertSqlSafe(*statement))
                .execute(&pool)
                .await?;
        }
        let writer = Writer::start(SqliteBatch(pool.clone()));
        Ok(SqliteStore { pool, writer })
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn load(&self, room: &RoomName) -> Result<StoredRoom, StoreError> {
        let snapshot = sqlx::query("SELECT seq, data FROM snapshots WHERE room = ?")
            .bind(room.as_str())
            .fetch_optional(&self.pool)
            .await?;
        let (snapshot_seq, snapshot) = match snapshot {
            Some(row) => (
                row.try_get::<i64, _>(0)?,
                Some(Bytes::from(row.try_get::<Vec<u8>, _>(1)?)),
            ),
            None => (0, None),
        };
        let rows =
            sqlx::query("SELECT seq, data FROM updates WHERE room = ? AND seq > ? ORDER BY seq")
                .bind(room.as_str())
                .bind(snapshot_seq)
                .fetch_all(&self.pool)
                .await?;
        let mut last_seq = snapshot_seq;
        let mut updates = Vec::with_capacity(rows.len());
        for row in rows {
            last_seq = row.try_get::<i64, _>(0)?;
            updates.push(Bytes::from(row.try_get::<Vec<u8>, _>(1)?));
        }
        Ok(StoredRoom {
            snapshot,
            updates,
            last_seq: u64::try_from(last_seq).unwrap_or(0),
        })
    }

    async fn append(&self, room: &RoomName, updates: Vec<Bytes>) -> Result<u64, StoreError> {
        self.writer.append(room, updates).await
    }

    async fn compact(
        &self,
        room: &RoomName,
        snapshot: Bytes,
        upto_seq: u64,
    ) -> Result<(), StoreError> {
        self.writer.compact(room, snapshot, upto_seq).await
    }

    async fn load_fairy_state(
        &self,
        room: &RoomName,
        fairy: &str,
    ) -> Result<Option<Bytes>, StoreError> {
        let row = sqlx::query("SELECT data FROM fairy_states WHERE room = ? AND fairy = ?")
            .bind(room.as_str())
            .bind(fairy)
            .fetch_optional(&self.pool)
            .await?;
        match row {
            Some(row) => Ok(Some(Bytes::from(row.try_get::<Vec<u8>, _>(0)?))),
            None => Ok(None),
        }
    }

    async fn save_fairy_state(
        &self,
        room: &RoomName,
        fairy: &str,
        state: Bytes,
    ) -> Result<(), StoreError> {
        self.writer.save_fairy(room, fairy, state).await
    }

    async fn delete_fairy_state(&self, room: &RoomName, fairy: &str) -> Result<(), StoreError> {
        self.writer.delete_fairy(room, fairy).await
    }

    async fn load_instructions(&self, room: &RoomName) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT text FROM room_instructions WHERE room = ?")
            .bind(room.as_str())
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get::<String, _>(0)).transpose()?)
    }

    /// Written outside the group-commit writer: an admin's rare edit needs no batching, and
    /// SQLite serialises it with the writer's transactions (busy timeout).
    async fn save_instructions(&self, room: &RoomName, text: &str) -> Result<(), StoreError> {
        let query = if text.is_empty() {
            sqlx::query("DELETE FROM room_instructions WHERE room = ?1").bind(room.as_str())
        } else {
            sqlx::query(
                "INSERT INTO room_instructions (room, text) VALUES (?1, ?2)
                 ON CONFLICT(room) DO UPDATE SET text = excluded.text",
            )
            .bind(room.as_str())
            .bind(text)
        };
        query.execute(&self.pool).await?;
        Ok(())
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

/// SQLite transactions of the group-commit writer.
struct SqliteBatch(SqlitePool);

#[async_trait]
impl Batch for SqliteBatch {
    async fn commit(&self, batch: &[WriteReq]) -> Result<Vec<u64>, sqlx::Error> {
        commit_batch(&self.0, batch).await
    }
}

/// Commits a batch in one transaction; returns, per request, the last sequence number written.
async fn commit_batch(pool: &SqlitePool, batch: &[WriteReq]) -> Result<Vec<u64>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let mut seqs = Vec::with_capacity(batch.len());
    for req in batch {
        match &req.op {
            WriteOp::Append { room, updates } => {
                let row = sqlx::query(
                    "SELECT MAX(m) FROM (SELECT MAX(seq) AS m FROM updates WHERE room = ?1
                     UNION ALL SELECT seq FROM snapshots WHERE room = ?1)",
                )
                .bind(room)
                .fetch_one(&mut *tx)
                .await?;
                let mut seq: i64 = row.try_get::<Option<i64>, _>(0)?.unwrap_or(0);
                for update in updates {
                    seq += 1;
                    sqlx::query("INSERT INTO updates (room, seq, data) VALUES (?, ?, ?)")
                        .bind(room)
                        .bind(seq)
                        .bind(update.as_ref())
                        .execute(&mut *tx)
                        .await?;
                }
                seqs.push(u64::try_from(seq).unwrap_or(0));
            }
            WriteOp::Compact {
                room,
                snapshot,
                upto_seq,
            } => {
                let upto = i64::try_from(*upto_seq).unwrap_or(i64::MAX);
                sqlx::query(
                    "INSERT INTO snapshots (room, seq, data) VALUES (?1, ?2, ?3)
                     ON CONFLICT(room) DO UPDATE SET seq = excluded.seq, data = excluded.data",
                )
                .bind(room)
                .bind(upto)
                .bind(snapshot.as_ref())
                .execute(&mut *tx)
                .await?;
                sqlx::query("DELETE FROM updates WHERE room = ? AND seq <= ?")
                    .bind(room)
                    .bind(upto)
                    .execute(&mut *tx)
                    .await?;
                seqs.push(*upto_seq);
            }
            WriteOp::SaveFairy { room, fairy, state } => {
                sqlx::query(
                    "INSERT INTO fairy_states (room, fairy, data) VALUES (?1, ?2, ?3)
                     ON CONFLICT(room, fairy) DO UPDATE SET data = excluded.data",
                )
                .bind(room)
                .bind(fairy)
                .bind(state.as_ref())
                .execute(&mut *tx)
                .await?;
                seqs.push(0);
            }
            WriteOp::DeleteFairy { room, fairy } => {
                sqlx::query("DELETE FROM fairy_states WHERE room = ? AND fairy = ?")
                    .bind(room)
                    .bind(fairy)
                    .execute(&mut *tx)
                    .await?;
                seqs.push(0);
            }
        }
    }
    tx.commit().await?;
    Ok(seqs)
}
