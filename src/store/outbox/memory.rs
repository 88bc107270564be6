//! The webhook outbox of the in-memory store: a map, nothing survives the process. For tests
//! and `--store memory:`. Owns only its map.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use bytes::Bytes;

use super::{Claimed, DeadLetter, Outbox, OutboxEvent};
use crate::store::StoreError;

struct Row {
    body: Bytes,
    attempts: u32,
    next_at: u64,
    claimed_until: u64,
    dead_at: Option<u64>,
    last_error: String,
}

/// The outbox of a memory store.
#[derive(Default)]
pub struct MemoryOutbox {
    rows: Mutex<BTreeMap<String, Row>>,
}

impl MemoryOutbox {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Row>> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl Outbox for MemoryOutbox {
    async fn push(&self, event: OutboxEvent) -> Result<(), StoreError> {
        self.lock().entry(event.id).or_insert(Row {
            body: event.body,
            attempts: 0,
            next_at: event.created_at,
            claimed_until: 0,
            dead_at: None,
            last_error: String::new(),
        });
        Ok(())
    }

    async fn claim(
        &self,
        now: u64,
        lease_until: u64,
        limit: usize,
    ) -> Result<Vec<Claimed>, StoreError> {
        let mut rows = self.lock();
        let mut due: Vec<(u64, String)> = rows
            .iter()
            .filter(|(_, r)| r.dead_at.is_none() && r.next_at <= now && r.claimed_until <= now)
            .map(|(id, r)| (r.next_at, id.clone()))
            .collect();
        due.sort();
        due.truncate(limit);
        Ok(due
            .into_iter()
            .filter_map(|(_, id)| {
                let row = rows.get_mut(&id)?;
                row.claimed_until = lease_until;
                Some(Claimed {
                    body: row.body.clone(),
                    attempts: row.attempts,
                    id,
                })
            })
            .collect())
    }

    async fn delivered(&self, id: &str) -> Result<(), StoreError> {
        self.lock().remove(id);
        Ok(())
    }

    async fn retry_at(
        &self,
        id: &str,
        attempts: u32,
        next_at: u64,
        error: &str,
    ) -> Result<(), StoreError> {
        if let Some(row) = self.lock().get_mut(id) {
            row.attempts = attempts;
            row.next_at = next_at;
            row.claimed_until = 0;
            row.last_error = error.to_owned();
        }
        Ok(())
    }

    async fn dead(&self, id: &str, attempts: u32, at: u64, error: &str) -> Result<(), StoreError> {
        if let Some(row) = self.lock().get_mut(id) {
            row.attempts = attempts;
            row.dead_at = Some(at);
            row.claimed_until = 0;
            row.last_error = error.to_owned();
        }
        Ok(())
    }

    async fn next_due(&self) -> Result<Option<u64>, StoreError> {
        Ok(self
            .lock()
            .values()
            .filter(|r| r.dead_at.is_none())
            .map(|r| r.next_at.max(r.claimed_until))
            .min())
    }

    async fn pending(&self) -> Result<u64, StoreError> {
        Ok(self.lock().values().filter(|r| r.dead_at.is_none()).count() as u64)
    }

    async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        let rows = self.lock();
        let mut dead: Vec<DeadLetter> = rows
            .iter()
            .filter_map(|(id, r)| {
                Some(DeadLetter {
                    id: id.clone(),
                    body: r.body.clone(),
                    attempts: r.attempts,
                    error: r.last_error.clone(),
                    dead_at: r.dead_at?,
                })
            })
            .collect();
        dead.sort_by(|a, b| b.dead_at.cmp(&a.dead_at).then_with(|| a.id.cmp(&b.id)));
        dead.truncate(limit);
        Ok(dead)
    }

    async fn dead_count(&self) -> Result<u64, StoreError> {
        Ok(self.lock().values().filter(|r| r.dead_at.is_some()).count() as u64)
    }

    async fn prune_dead(&self, before: u64) -> Result<u64, StoreError> {
        let mut rows = self.lock();
        let len = rows.len();
        rows.retain(|_, r| r.dead_at.is_none_or(|at| at >= before));
        Ok((len - rows.len()) as u64)
    }

    async fn fresh(&self, now: u64, limit: usize) -> Result<Vec<OutboxEvent>, StoreError> {
        let rows = self.lock();
        let mut fresh: Vec<OutboxEvent> = rows
            .iter()
            .filter(|(_, r)| r.dead_at.is_none() && r.attempts == 0 && r.claimed_until <= now)
            .map(|(id, r)| OutboxEvent {
                id: id.clone(),
                body: r.body.clone(),
                // A never-attempted event is due at its creation.
                created_at: r.next_at,
            })
            .collect();
        fresh.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        fresh.truncate(limit);
        Ok(fresh)
    }

    async fn replace(
        &self,
        now: u64,
        ids: &[String],
        merged: Option<OutboxEvent>,
    ) -> Result<bool, StoreError> {
        let mut rows = self.lock();
        let all_fresh = ids.iter().all(|id| {
            rows.get(id)
                .is_some_and(|r| r.dead_at.is_none() && r.attempts == 0 && r.claimed_until <= now)
        });
        if !all_fresh {
            return Ok(false);
        }
        for id in ids {
            rows.remove(id);
        }
        if let Some(event) = merged {
            rows.entry(event.id).or_insert(Row {
                body: event.body,
                attempts: 0,
                next_at: event.created_at,
                claimed_until: 0,
                dead_at: None,
                last_error: String::new(),
            });
        }
        Ok(true)
    }
}
