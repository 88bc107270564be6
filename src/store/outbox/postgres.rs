//! The webhook outbox in the PostgreSQL store: the table `webhook_outbox` of
//! `migrations/postgres/0005_webhooks.sql` and its SQL.
//!
//! Several nodes share the table: a claim takes due rows with `FOR UPDATE SKIP LOCKED` and
//! sets their lease in the same statement, so two nodes never claim the same event while its
//! lease runs. Owns only that table; it must not touch the rooms' tables nor go through the
//! group-commit writer.

use async_trait::async_trait;
use bytes::Bytes;
use sqlx::{PgPool, Row};

use super::{Claimed, DeadLetter, Outbox, OutboxEvent, attempts_from, in_due_order};
use crate::store::StoreError;
use crate::store::writer::{to_i64, to_u64};

/// The outbox of a PostgreSQL store.
pub struct PgOutbox {
    pool: PgPool,
}

impl PgOutbox {
    /// The outbox over `pool` (its table is made by the store's migrations).
    pub fn new(pool: PgPool) -> Self {
        PgOutbox { pool }
    }
}

/// Records a failed attempt: due again at `$3` (next_at).
const RETRY: &str = "UPDATE webhook_outbox SET attempts = $2, next_at = $3, claimed_until = 0,
                 last_error = $4
             WHERE id = $1";
/// Records the last failed attempt: dead at `$3` (dead_at).
const DEAD: &str = "UPDATE webhook_outbox SET attempts = $2, dead_at = $3, claimed_until = 0,
                 last_error = $4
             WHERE id = $1";

impl PgOutbox {
    /// Runs [`RETRY`] or [`DEAD`] for one event.
    async fn outcome(
        &self,
        sql: &'static str,
        id: &str,
        attempts: u32,
        at: u64,
        error: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(sql)
            .bind(id)
            .bind(i32::try_from(attempts).unwrap_or(i32::MAX))
            .bind(to_i64(at))
            .bind(error)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

#[async_trait]
impl Outbox for PgOutbox {
    async fn push(&self, event: OutboxEvent) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO webhook_outbox (id, body, created_at, next_at) VALUES ($1, $2, $3, $3)
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(&event.id)
        .bind(event.body.as_ref())
        .bind(to_i64(event.created_at))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn claim(
        &self,
        now: u64,
        lease_until: u64,
        limit: usize,
    ) -> Result<Vec<Claimed>, StoreError> {
        let rows = sqlx::query(
            "WITH due AS (
                 SELECT id FROM webhook_outbox
                 WHERE dead_at IS NULL AND next_at <= $2 AND claimed_until <= $2
                 ORDER BY next_at, id LIMIT $3
                 FOR UPDATE SKIP LOCKED
             )
             UPDATE webhook_outbox o SET claimed_until = $1 FROM due WHERE o.id = due.id
             RETURNING o.id, o.body, o.attempts, o.next_at",
        )
        .bind(to_i64(lease_until))
        .bind(to_i64(now))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        let claimed = rows
            .iter()
            .map(|row| {
                Ok((
                    row.try_get::<i64, _>(3)?,
                    Claimed {
                        id: row.try_get(0)?,
                        body: Bytes::from(row.try_get::<Vec<u8>, _>(1)?),
                        attempts: attempts_from(i64::from(row.try_get::<i32, _>(2)?)),
                    },
                ))
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        Ok(in_due_order(claimed))
    }

    async fn delivered(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM webhook_outbox WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
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
        let due: Option<i64> = sqlx::query_scalar(
            "SELECT MIN(GREATEST(next_at, claimed_until)) FROM webhook_outbox
             WHERE dead_at IS NULL",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(due.map(to_u64))
    }

    async fn pending(&self) -> Result<u64, StoreError> {
        let count: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM webhook_outbox WHERE dead_at IS NULL")
                .fetch_one(&self.pool)
                .await?;
        Ok(to_u64(count))
    }

    async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, body, attempts, COALESCE(last_error, ''), dead_at FROM webhook_outbox
             WHERE dead_at IS NOT NULL ORDER BY dead_at DESC, id LIMIT $1",
        )
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(DeadLetter {
                    id: row.try_get(0)?,
                    body: Bytes::from(row.try_get::<Vec<u8>, _>(1)?),
                    attempts: attempts_from(i64::from(row.try_get::<i32, _>(2)?)),
                    error: row.try_get(3)?,
                    dead_at: to_u64(row.try_get(4)?),
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    async fn dead_count(&self) -> Result<u64, StoreError> {
        let count: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM webhook_outbox WHERE dead_at IS NOT NULL")
                .fetch_one(&self.pool)
                .await?;
        Ok(to_u64(count))
    }

    async fn prune_dead(&self, before: u64) -> Result<u64, StoreError> {
        let done =
            sqlx::query("DELETE FROM webhook_outbox WHERE dead_at IS NOT NULL AND dead_at < $1")
                .bind(to_i64(before))
                .execute(&self.pool)
                .await?;
        Ok(done.rows_affected())
    }

    async fn fresh(&self, now: u64, limit: usize) -> Result<Vec<OutboxEvent>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, body, created_at FROM webhook_outbox
             WHERE dead_at IS NULL AND attempts = 0 AND claimed_until <= $1
             ORDER BY created_at, id LIMIT $2",
        )
        .bind(to_i64(now))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(OutboxEvent {
                    id: row.try_get(0)?,
                    body: Bytes::from(row.try_get::<Vec<u8>, _>(1)?),
                    created_at: to_u64(row.try_get(2)?),
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
            removed += sqlx::query(
                "DELETE FROM webhook_outbox
                 WHERE id = $1 AND dead_at IS NULL AND attempts = 0 AND claimed_until <= $2",
            )
            .bind(id)
            .bind(to_i64(now))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        if removed != ids.len() as u64 {
            tx.rollback().await?;
            return Ok(false);
        }
        if let Some(event) = merged {
            sqlx::query(
                "INSERT INTO webhook_outbox (id, body, created_at, next_at) VALUES ($1, $2, $3, $3)
                 ON CONFLICT (id) DO NOTHING",
            )
            .bind(&event.id)
            .bind(event.body.as_ref())
            .bind(to_i64(event.created_at))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }
}
