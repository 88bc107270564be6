//! The webhook outbox of the SQL stores, written once for SQLite and PostgreSQL: the SQL of the
//! table `webhook_outbox` (made by each store's migrations) over a
//! [`Dialect`](crate::store::sql::Dialect).
//!
//! What differs is the dialect's: the claim ([`Dialect::CLAIM`]: PostgreSQL's several nodes
//! take due rows with `FOR UPDATE SKIP LOCKED` and set their lease in the same statement, so
//! two nodes never claim one event while its lease runs; SQLite's one writer makes one
//! `UPDATE … RETURNING` enough) and the due time ([`Dialect::NEXT_DUE`]). Owns only that
//! table; it must not touch the rooms' tables nor go through the group-commit writer (an
//! outbox write is one small row a debounce window, on the store's pool).

use async_trait::async_trait;
use bytes::Bytes;
use sqlx::Pool;

use super::{Claimed, DeadLetter, Outbox, OutboxEvent, attempts_from, in_due_order};
use crate::store::StoreError;
use crate::store::sql::dialect::{Bind, Dialect, Read, Statement, query};
use crate::store::writer::{to_i64, to_u64};

/// Adds an event (`$1` id, `$2` body, `$3` created and due at) unless its id is present.
const PUSH: &str = "INSERT INTO webhook_outbox (id, body, created_at, next_at)
     VALUES ($1, $2, $3, $3) ON CONFLICT (id) DO NOTHING";
/// Records a failed attempt: due again at `$3` (next_at).
const RETRY: &str = "UPDATE webhook_outbox SET attempts = $2, next_at = $3, claimed_until = 0,
     last_error = $4 WHERE id = $1";
/// Records the last failed attempt: dead at `$3` (dead_at).
const DEAD: &str = "UPDATE webhook_outbox SET attempts = $2, dead_at = $3, claimed_until = 0,
     last_error = $4 WHERE id = $1";
/// Removes a delivered event.
const DELIVERED: &str = "DELETE FROM webhook_outbox WHERE id = $1";
/// How many events wait.
const PENDING: &str = "SELECT COUNT(*) FROM webhook_outbox WHERE dead_at IS NULL";
/// Up to `$1` dead letters, most recent first.
const DEAD_LETTERS: &str =
    "SELECT id, body, attempts, COALESCE(last_error, ''), dead_at FROM webhook_outbox
     WHERE dead_at IS NOT NULL ORDER BY dead_at DESC, id LIMIT $1";
/// How many dead letters are kept.
const DEAD_COUNT: &str = "SELECT COUNT(*) FROM webhook_outbox WHERE dead_at IS NOT NULL";
/// Drops the dead letters given up on before `$1`.
const PRUNE_DEAD: &str = "DELETE FROM webhook_outbox WHERE dead_at IS NOT NULL AND dead_at < $1";
/// Up to `$2` events never attempted nor claimed at `$1`, oldest first.
const FRESH: &str = "SELECT id, body, created_at FROM webhook_outbox
     WHERE dead_at IS NULL AND attempts = 0 AND claimed_until <= $1
     ORDER BY created_at, id LIMIT $2";
/// Removes event `$1` if it is still never attempted nor claimed at `$2`.
const REMOVE_FRESH: &str = "DELETE FROM webhook_outbox
     WHERE id = $1 AND dead_at IS NULL AND attempts = 0 AND claimed_until <= $2";

/// The outbox of a SQL store.
pub struct SqlOutbox<D: Dialect> {
    pool: Pool<D>,
}

impl<D: Dialect> SqlOutbox<D> {
    /// The outbox on the store's pool (its table is made by the store's migrations).
    pub fn new(pool: Pool<D>) -> Self {
        SqlOutbox { pool }
    }

    /// Runs [`RETRY`] or [`DEAD`] for one event.
    async fn outcome(
        &self,
        text: &'static str,
        id: &str,
        attempts: u32,
        at: u64,
        error: &str,
    ) -> Result<(), StoreError> {
        query::<D>(text)
            .text(id)
            .count(attempts)
            .int(to_i64(at))
            .text(error)
            .execute(D::pool(&self.pool))
            .await?;
        Ok(())
    }

    /// A count read with `text`.
    async fn count(&self, text: &'static str) -> Result<u64, StoreError> {
        let row = query::<D>(text).fetch_one(D::pool(&self.pool)).await?;
        Ok(to_u64(row.int(0)?))
    }
}

/// [`PUSH`] of `event`.
fn push<D: Dialect>(event: &OutboxEvent) -> Statement<D> {
    query::<D>(PUSH)
        .text(&event.id)
        .bytes(&event.body)
        .int(to_i64(event.created_at))
}

#[async_trait]
impl<D: Dialect> Outbox for SqlOutbox<D> {
    async fn push(&self, event: OutboxEvent) -> Result<(), StoreError> {
        push::<D>(&event).execute(D::pool(&self.pool)).await?;
        Ok(())
    }

    async fn claim(
        &self,
        now: u64,
        lease_until: u64,
        limit: usize,
    ) -> Result<Vec<Claimed>, StoreError> {
        let rows = query::<D>(D::CLAIM)
            .int(to_i64(lease_until))
            .int(to_i64(now))
            .int(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(D::pool(&self.pool))
            .await?;
        let claimed = rows
            .iter()
            .map(|row| {
                Ok((
                    row.int(3)?,
                    Claimed {
                        id: row.text(0)?,
                        body: Bytes::from(row.bytes(1)?),
                        attempts: attempts_from(row.count(2)?),
                    },
                ))
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        Ok(in_due_order(claimed))
    }

    async fn delivered(&self, id: &str) -> Result<(), StoreError> {
        query::<D>(DELIVERED)
            .text(id)
            .execute(D::pool(&self.pool))
            .await?;
        Ok(())
    }

    async fn retry_at(
        &self,
        id: &str,
        attempts: u32,
        next_at: u64,
        error: &str,
    ) -> Result<(), StoreError> {
        self.outcome(RETRY, id, attempts, next_at, error).await
    }

    async fn dead(&self, id: &str, attempts: u32, at: u64, error: &str) -> Result<(), StoreError> {
        self.outcome(DEAD, id, attempts, at, error).await
    }

    async fn next_due(&self) -> Result<Option<u64>, StoreError> {
        let row = query::<D>(D::NEXT_DUE)
            .fetch_one(D::pool(&self.pool))
            .await?;
        Ok(row.opt_int(0)?.map(to_u64))
    }

    async fn pending(&self) -> Result<u64, StoreError> {
        self.count(PENDING).await
    }

    async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        let rows = query::<D>(DEAD_LETTERS)
            .int(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(D::pool(&self.pool))
            .await?;
        rows.iter()
            .map(|row| {
                Ok(DeadLetter {
                    id: row.text(0)?,
                    body: Bytes::from(row.bytes(1)?),
                    attempts: attempts_from(row.count(2)?),
                    error: row.text(3)?,
                    dead_at: to_u64(row.int(4)?),
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    async fn dead_count(&self) -> Result<u64, StoreError> {
        self.count(DEAD_COUNT).await
    }

    async fn prune_dead(&self, before: u64) -> Result<u64, StoreError> {
        let done = query::<D>(PRUNE_DEAD)
            .int(to_i64(before))
            .execute(D::pool(&self.pool))
            .await?;
        Ok(D::rows_affected(&done))
    }

    async fn fresh(&self, now: u64, limit: usize) -> Result<Vec<OutboxEvent>, StoreError> {
        let rows = query::<D>(FRESH)
            .int(to_i64(now))
            .int(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(D::pool(&self.pool))
            .await?;
        rows.iter()
            .map(|row| {
                Ok(OutboxEvent {
                    id: row.text(0)?,
                    body: Bytes::from(row.bytes(1)?),
                    created_at: to_u64(row.int(2)?),
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    async fn replace(
        &self,
        now: u64,
        ids: &[String],
        merged: Option<OutboxEvent>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let mut removed = 0;
        for id in ids {
            let done = query::<D>(REMOVE_FRESH)
                .text(id)
                .int(to_i64(now))
                .execute(D::on(&mut tx))
                .await?;
            removed += D::rows_affected(&done);
        }
        if removed != ids.len() as u64 {
            tx.rollback().await?;
            return Ok(false);
        }
        if let Some(event) = merged {
            push::<D>(&event).execute(D::on(&mut tx)).await?;
        }
        tx.commit().await?;
        Ok(true)
    }
}
