//! The SQL store, written once for SQLite and PostgreSQL (docs/storage.md "Layout of the
//! store").
//!
//! Owns [`SqlStore`]: the one implementation of the room log's reads, history pruning, the byte
//! cap, the server's secrets and the keyed side tables over a [`Dialect`], with the writes that
//! must be durable before a room broadcasts going through the group-commit writer
//! ([`super::writer`]). What truly differs between the backends is each backend's [`Backend`]:
//! how it opens (connections, migrations, `--store-schema`), the group-commit transactions
//! (SQLite's cached sequence numbers and multi-row inserts; PostgreSQL's per-room counters and
//! fences), and the few calls only one of them answers (PostgreSQL's writer client ids and
//! fencing tokens, SQLite's free disk space). The webhook outbox on the same pool is
//! [`super::outbox::sql`].
//!
//! Layout: `mod.rs` the store, [`dialect`] what the dialects spell differently and typed
//! access, [`text`] the SQL texts both take, [`writes`] the writes both backends' batches share,
//! [`migrations`] the schema migrations both open with (embedded by `build.rs`).
//! It knows nothing of sockets, peers or Yjs.

pub mod dialect;
pub(crate) mod migrations;
pub(crate) mod text;
pub(crate) mod writes;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use sqlx::{Executor, Pool, Transaction};

pub use dialect::Dialect;
use dialect::{Bind, Read, Statement, query};

use super::checkpoints::{
    assemble_version, choose_base, newest_chain, prune_chain, squash_off_thread,
};
use super::keyed::{self, SideTables, Table};
use super::outbox::sql::SqlOutbox;
use super::writer::{Writer, to_i64, to_u64};
use super::{
    Checkpoint, Fence, LogRow, Logged, OverCap, Store, StoreError, StoredRoom, StoredVersion,
    fitting,
};
use crate::ids::RoomName;

/// What a SQL backend does its own way beside the shared [`SqlStore`]: a value the store keeps
/// (SQLite's database directory), the dialect it speaks, and the calls that differ.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The dialect and driver.
    type Db: Dialect;

    /// Whether the store takes fencing tokens ([`Store::next_fence`]): a store shared by nodes.
    /// A fenced append or side-table write of a store that takes none writes unchecked.
    const FENCES: bool;

    /// Whether [`Store::release_memory`] closes the idle connections and has the writer drop
    /// its connection and caches (an embedded database whose connections hold page caches);
    /// a server's connections are kept.
    const RELEASES_CONNECTIONS: bool;

    /// [`Store::writer_client_id`]; the default answers 1 (a store of one node).
    async fn writer_client_id(&self, pool: &Pool<Self::Db>) -> Result<u64, StoreError> {
        let _ = pool;
        Ok(1)
    }

    /// [`Store::next_fence`]; the default takes none.
    async fn next_fence(
        &self,
        pool: &Pool<Self::Db>,
        room: &RoomName,
        fairy: &str,
    ) -> Result<Option<u64>, StoreError> {
        let _ = (pool, room, fairy);
        Ok(None)
    }

    /// [`Store::ping`]; the default answers (an embedded file).
    async fn ping(&self, pool: &Pool<Self::Db>) -> Result<(), StoreError> {
        let _ = pool;
        Ok(())
    }

    /// [`Store::has_space`]; the default cannot tell and answers `true`.
    async fn has_space(&self) -> Result<bool, StoreError> {
        Ok(true)
    }
}

/// A SQL store: its pool (reads and rare writes), its group-commit writer, its outbox and what
/// its backend keeps.
pub struct SqlStore<B: Backend> {
    pool: Pool<B::Db>,
    writer: Writer,
    outbox: SqlOutbox<B::Db>,
    backend: B,
}

/// The dialect of backend `B`.
type Db<B> = <B as Backend>::Db;

impl<B: Backend> SqlStore<B> {
    /// A store over an opened, migrated `pool` and the writer the backend started.
    pub(crate) fn new(pool: Pool<B::Db>, writer: Writer, backend: B) -> Self {
        SqlStore {
            outbox: SqlOutbox::new(pool.clone()),
            pool,
            writer,
            backend,
        }
    }

    /// The read pool (tests).
    #[cfg(test)]
    pub(crate) fn pool(&self) -> &Pool<B::Db> {
        &self.pool
    }

    /// A transaction whose reads see one state of the database.
    async fn begin_read(&self) -> Result<Transaction<'static, B::Db>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        if let Some(text) = <Db<B>>::READ_SNAPSHOT {
            query::<Db<B>>(text).execute(<Db<B>>::on(&mut tx)).await?;
        }
        Ok(tx)
    }

    /// The log rows `statement` selects (`seq, at, actor, update_data`), on the pool.
    async fn log_rows(&self, statement: Statement<Db<B>>) -> Result<Vec<LogRow>, StoreError> {
        let rows = statement.fetch_all(<Db<B>>::pool(&self.pool)).await?;
        Ok(rows.iter().map(log_row).collect::<Result<_, _>>()?)
    }

    /// Drops a room's history up to the newest checkpoint at or below both `old` and the
    /// room's `snapshot` (read in `tx`, which this commits), making it full first when it was a
    /// delta (read, squashed off the async threads, written); how many updates went.
    async fn prune_room(
        &self,
        mut tx: Transaction<'static, B::Db>,
        room: &str,
        old: Option<u64>,
        snapshot: Option<u64>,
    ) -> Result<u64, StoreError> {
        let meta = checkpoint_meta::<Db<B>>(&mut tx, room, i64::MAX).await?;
        let Some(chain) = prune_chain(&meta, old, snapshot) else {
            return Ok(0);
        };
        let Some(&keep) = chain.last() else {
            return Ok(0);
        };
        let states = checkpoint_data::<Db<B>>(&mut tx, room, &chain).await?;
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
            query::<Db<B>>(text::SQUASH_CHECKPOINT)
                .bytes(&full)
                .text(room)
                .int(to_i64(keep))
                .execute(<Db<B>>::on(&mut tx))
                .await?;
        }
        let dropped = query::<Db<B>>(text::PRUNE_UPDATES)
            .text(room)
            .int(to_i64(keep))
            .execute(<Db<B>>::on(&mut tx))
            .await?;
        query::<Db<B>>(text::PRUNE_CHECKPOINTS)
            .text(room)
            .int(to_i64(keep))
            .execute(<Db<B>>::on(&mut tx))
            .await?;
        tx.commit().await?;
        Ok(<Db<B>>::rows_affected(&dropped))
    }
}

#[async_trait]
impl<B: Backend> Store for SqlStore<B> {
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
        // One state of the database: a compaction committing in between cannot make the
        // snapshot and the log disagree.
        let mut tx = self.begin_read().await?;
        let snapshot = query::<Db<B>>(text::SNAPSHOT)
            .text(room.as_str())
            .fetch_optional(<Db<B>>::on(&mut tx))
            .await?;
        let (from_seq, snapshot) = match snapshot {
            // A full load (`after_seq` 0) takes the snapshot whatever it covers.
            Some(row) if after_seq == 0 || to_u64(row.int(0)?) > after_seq => {
                (row.int(0)?, Some(Bytes::from(row.bytes(1)?)))
            }
            _ => (to_i64(after_seq), None),
        };
        let rows = query::<Db<B>>(text::UPDATES_AFTER)
            .text(room.as_str())
            .int(from_seq)
            .fetch_all(<Db<B>>::on(&mut tx))
            .await?;
        tx.commit().await?;
        let mut last_seq = from_seq;
        let mut updates = Vec::with_capacity(rows.len());
        for row in rows {
            last_seq = row.int(0)?;
            updates.push(Bytes::from(row.bytes(1)?));
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
        self.backend.writer_client_id(&self.pool).await
    }

    async fn dev_secret(&self, candidate: &[u8]) -> Result<Vec<u8>, StoreError> {
        query::<Db<B>>(text::KEEP_SECRET)
            .text(text::DEV_SECRET_NAME)
            .bytes(candidate)
            .execute(<Db<B>>::pool(&self.pool))
            .await?;
        let row = query::<Db<B>>(text::SECRET)
            .text(text::DEV_SECRET_NAME)
            .fetch_one(<Db<B>>::pool(&self.pool))
            .await?;
        Ok(row.bytes(0)?)
    }

    async fn next_fence(&self, room: &RoomName, fairy: &str) -> Result<Option<u64>, StoreError> {
        self.backend.next_fence(&self.pool, room, fairy).await
    }

    async fn append_fenced(
        &self,
        room: &RoomName,
        updates: Vec<Logged>,
        fences: Vec<Fence>,
    ) -> Result<u64, StoreError> {
        let fences = if B::FENCES { fences } else { Vec::new() };
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
        let row = query::<Db<B>>(text::NEWEST_CHECKPOINT)
            .text(room.as_str())
            .fetch_one(<Db<B>>::pool(&self.pool))
            .await?;
        Ok(row.opt_int(0)?.map(to_u64))
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
        self.log_rows(
            query::<Db<B>>(text::HISTORY)
                .text(room.as_str())
                .int(to_i64(after))
                .int(i64::try_from(limit).unwrap_or(i64::MAX)),
        )
        .await
    }

    async fn load_version(
        &self,
        room: &RoomName,
        seq: u64,
    ) -> Result<Option<StoredVersion>, StoreError> {
        // One state of the database: a compaction or a pruning in between cannot split the
        // base from its updates.
        let mut tx = self.begin_read().await?;
        let upto = to_i64(seq);
        let chain = chain_below::<Db<B>>(&mut tx, room.as_str(), upto).await?;
        let snapshot = snapshot_at_most::<Db<B>>(&mut tx, room.as_str(), upto).await?;
        let from = chain.as_ref().map_or(0, |(head, _)| *head);
        let rows = query::<Db<B>>(text::UPDATES_BETWEEN)
            .text(room.as_str())
            .int(to_i64(from))
            .int(upto)
            .fetch_all(<Db<B>>::on(&mut tx))
            .await?;
        tx.commit().await?;
        let rows = rows
            .iter()
            .map(|row| Ok((to_u64(row.int(0)?), Bytes::from(row.bytes(1)?))))
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
        let sizes = query::<Db<B>>(text::LOG_SIZES)
            .text(room.as_str())
            .int(to_i64(after))
            .int(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(<Db<B>>::pool(&self.pool))
            .await?
            .iter()
            .map(|row| Ok((to_u64(row.int(0)?), to_u64(row.opt_int(1)?.unwrap_or(0)))))
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        let fit = fitting(sizes.iter().map(|(_, bytes)| *bytes), max_bytes);
        let Some(&(upto, _)) = sizes.get(fit.saturating_sub(1)) else {
            return Ok(Vec::new());
        };
        self.log_rows(
            query::<Db<B>>(text::HISTORY_BETWEEN)
                .text(room.as_str())
                .int(to_i64(after))
                .int(to_i64(upto)),
        )
        .await
    }

    async fn version_base(
        &self,
        room: &RoomName,
        seq: u64,
    ) -> Result<Option<StoredVersion>, StoreError> {
        // Only the base is read here: the updates after it follow in bounded batches.
        let mut tx = self.begin_read().await?;
        let upto = to_i64(seq);
        let chain = chain_below::<Db<B>>(&mut tx, room.as_str(), upto).await?;
        let first_kept = query::<Db<B>>(text::FIRST_KEPT)
            .text(room.as_str())
            .fetch_one(<Db<B>>::on(&mut tx))
            .await?
            .opt_int(0)?
            .map(to_u64);
        let newest_base = chain.as_ref().map_or(0, |(head, _)| *head);
        // The snapshot's data only when it is nearer than the chain (it is the whole room).
        let snapshot_seq = snapshot_seq(<Db<B>>::on(&mut tx), room.as_str())
            .await?
            .filter(|at| *at <= seq && *at > newest_base);
        let snapshot = match snapshot_seq {
            Some(_) => snapshot_at_most::<Db<B>>(&mut tx, room.as_str(), upto).await?,
            None => None,
        };
        tx.commit().await?;
        Ok(choose_base(seq, chain, snapshot, first_kept))
    }

    async fn last_seq(&self, room: &RoomName) -> Result<u64, StoreError> {
        let row = query::<Db<B>>(text::LAST_SEQ)
            .text(room.as_str())
            .fetch_one(<Db<B>>::pool(&self.pool))
            .await?;
        Ok(row.opt_int(0)?.map_or(0, to_u64))
    }

    async fn logs_over(&self, max_bytes: u64) -> Result<Vec<OverCap>, StoreError> {
        let rooms: Vec<String> = query::<Db<B>>(text::LOGS_OVER)
            .int(to_i64(max_bytes))
            .fetch_all(<Db<B>>::pool(&self.pool))
            .await?
            .iter()
            .map(|row| row.text(0))
            .collect::<Result<_, _>>()?;
        let mut over = Vec::with_capacity(rooms.len());
        for room in rooms {
            let Ok(name) = RoomName::parse(&room) else {
                continue;
            };
            let cut = query::<Db<B>>(text::LOG_CUT)
                .text(&room)
                .int(to_i64(max_bytes))
                .fetch_one(<Db<B>>::pool(&self.pool))
                .await?
                .opt_int(0)?;
            let snapshot = snapshot_seq(<Db<B>>::pool(&self.pool), &room).await?;
            if let Some(cut) = cut {
                over.push(OverCap {
                    room: name,
                    cut: to_u64(cut),
                    snapshot,
                });
            }
        }
        Ok(over)
    }

    async fn prune_log_to(&self, room: &RoomName, upto: u64) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin().await?;
        let snapshot = snapshot_seq(<Db<B>>::on(&mut tx), room.as_str()).await?;
        self.prune_room(tx, room.as_str(), Some(upto), snapshot)
            .await
    }

    async fn seq_at(&self, room: &RoomName, at: u64) -> Result<Option<u64>, StoreError> {
        let row = query::<Db<B>>(text::SEQ_AT)
            .text(room.as_str())
            .int(to_i64(at))
            .fetch_one(<Db<B>>::pool(&self.pool))
            .await?;
        Ok(row.opt_int(0)?.map(to_u64))
    }

    /// Room by room, each in its own short transactions outside the group-commit writer; safe
    /// beside other nodes (it deletes only what a kept checkpoint and the snapshot cover).
    async fn prune_history(&self, before: u64) -> Result<u64, StoreError> {
        let rooms: Vec<String> = query::<Db<B>>(text::ROOMS_WITH_CHECKPOINTS)
            .fetch_all(<Db<B>>::pool(&self.pool))
            .await?
            .iter()
            .map(|row| row.text(0))
            .collect::<Result<_, _>>()?;
        let mut dropped = 0;
        for room in rooms {
            let mut tx = self.pool.begin().await?;
            let row = query::<Db<B>>(text::PRUNE_BOUNDS)
                .text(&room)
                .int(to_i64(before))
                .fetch_one(<Db<B>>::on(&mut tx))
                .await?;
            let old = row.opt_int(0)?.map(to_u64);
            let snapshot = row.opt_int(1)?.map(to_u64);
            dropped += self.prune_room(tx, &room, old, snapshot).await?;
        }
        Ok(dropped)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.backend.ping(&self.pool).await
    }

    async fn has_space(&self) -> Result<bool, StoreError> {
        self.backend.has_space().await
    }

    /// With [`Backend::RELEASES_CONNECTIONS`]: closes the idle read connections (each holds a
    /// page cache and prepared statements) and has the writer drop its connection and caches.
    async fn release_memory(&self) {
        if !B::RELEASES_CONNECTIONS {
            return;
        }
        while let Some(conn) = self.pool.try_acquire() {
            if let Err(error) = conn.close().await {
                tracing::debug!(%error, "closing an idle store connection failed");
            }
        }
        self.writer.release_memory();
    }

    async fn close(&self) {
        self.writer.release_memory();
        self.pool.close().await;
    }
}

/// The side tables: reads on the pool; writes of a table written by group commit (fairy states)
/// and fenced writes through the writer, where a fence is checked in the transaction that
/// writes ([`Backend::FENCES`]; a store that takes no fences writes unchecked); the other
/// tables' rare writes on the pool (SQLite serialises them with the writer's transactions).
#[async_trait]
impl<B: Backend> SideTables for SqlStore<B> {
    async fn get(
        &self,
        table: Table,
        room: &RoomName,
        key: &str,
    ) -> Result<Option<Bytes>, StoreError> {
        let row = keyed::sql::get::<Db<B>>(table, room.as_str(), key)
            .fetch_optional(<Db<B>>::pool(&self.pool))
            .await?;
        Ok(row.map(|row| keyed::sql::value(table, &row)).transpose()?)
    }

    async fn list(&self, table: Table, room: &RoomName) -> Result<Vec<Bytes>, StoreError> {
        let rows = keyed::sql::list::<Db<B>>(table, room.as_str())
            .fetch_all(<Db<B>>::pool(&self.pool))
            .await?;
        Ok(rows
            .iter()
            .map(|row| keyed::sql::value(table, row))
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
        let fence = fence.filter(|_| B::FENCES);
        if table.group_commit() || fence.is_some() {
            return self.writer.put(table, room, key, value, fence).await;
        }
        keyed::sql::upsert::<Db<B>>(table, room.as_str(), key, &value)?
            .execute(<Db<B>>::pool(&self.pool))
            .await?;
        Ok(())
    }

    async fn delete(&self, table: Table, room: &RoomName, key: &str) -> Result<(), StoreError> {
        if table.group_commit() {
            return self.writer.delete(table, room, key).await;
        }
        keyed::sql::delete::<Db<B>>(table, room.as_str(), key)
            .execute(<Db<B>>::pool(&self.pool))
            .await?;
        Ok(())
    }
}

/// One row of the log as the history reads select it: `seq, at, actor, update_data`.
fn log_row(row: &impl Read) -> Result<LogRow, sqlx::Error> {
    Ok(LogRow {
        seq: to_u64(row.int(0)?),
        at: row.opt_int(1)?.map(to_u64),
        actor: row.opt_text(2)?.map(Arc::from),
        update: Bytes::from(row.bytes(3)?),
    })
}

/// A room's snapshot's sequence number.
async fn snapshot_seq<'e, D: Dialect>(
    on: impl Executor<'e, Database = D>,
    room: &str,
) -> Result<Option<u64>, sqlx::Error> {
    let row = query::<D>(text::SNAPSHOT_SEQ)
        .text(room)
        .fetch_optional(on)
        .await?;
    Ok(row.map(|row| row.int(0)).transpose()?.map(to_u64))
}

/// A room's snapshot, if it covers no more than `upto`: its sequence number and data.
async fn snapshot_at_most<D: Dialect>(
    conn: &mut D::Connection,
    room: &str,
    upto: i64,
) -> Result<Option<(u64, Bytes)>, sqlx::Error> {
    query::<D>(text::SNAPSHOT_AT_MOST)
        .text(room)
        .int(upto)
        .fetch_optional(D::on(conn))
        .await?
        .map(|row| Ok((to_u64(row.int(0)?), Bytes::from(row.bytes(1)?))))
        .transpose()
}

/// The newest usable checkpoint chain of a room at or below `upto`
/// ([`newest_chain`]): its head and its states, oldest first; `None` when there is none.
async fn chain_below<D: Dialect>(
    conn: &mut D::Connection,
    room: &str,
    upto: i64,
) -> Result<Option<(u64, Vec<Bytes>)>, sqlx::Error> {
    let meta = checkpoint_meta::<D>(conn, room, upto).await?;
    let chain = newest_chain(&meta);
    match chain.last() {
        Some(head) => Ok(Some((
            *head,
            checkpoint_data::<D>(conn, room, &chain).await?,
        ))),
        None => Ok(None),
    }
}

/// `(seq, base)` of a room's checkpoints at or below `upto`.
async fn checkpoint_meta<D: Dialect>(
    conn: &mut D::Connection,
    room: &str,
    upto: i64,
) -> Result<Vec<(u64, Option<u64>)>, sqlx::Error> {
    query::<D>(text::CHECKPOINT_META)
        .text(room)
        .int(upto)
        .fetch_all(D::on(conn))
        .await?
        .iter()
        .map(|row| Ok((to_u64(row.int(0)?), row.opt_int(1)?.map(to_u64))))
        .collect()
}

/// The data of a room's checkpoints `chain` (ascending sequence numbers), in that order: the
/// checkpoints from its first to its last, those of the chain kept (a broken branch between
/// them is read and left).
async fn checkpoint_data<D: Dialect>(
    conn: &mut D::Connection,
    room: &str,
    chain: &[u64],
) -> Result<Vec<Bytes>, sqlx::Error> {
    let (Some(first), Some(last)) = (chain.first(), chain.last()) else {
        return Ok(Vec::new());
    };
    let rows = query::<D>(text::CHECKPOINTS_BETWEEN)
        .text(room)
        .int(to_i64(*first))
        .int(to_i64(*last))
        .fetch_all(D::on(conn))
        .await?;
    let mut data = Vec::with_capacity(chain.len());
    for row in rows {
        if chain.contains(&to_u64(row.int(0)?)) {
            data.push(Bytes::from(row.bytes(1)?));
        }
    }
    Ok(data)
}
