//! The store as the server uses it: any [`Store`] wrapped with a deadline on every call and
//! with what the store's last writes said about its disk (docs/operations.md "What happens
//! when …").
//!
//! Owns [`Guarded`]: a call that does not answer within `--store-timeout-ms` fails with
//! [`StoreError::TimedOut`], so a stalled database or network (a TCP connection that stays open
//! and carries nothing) fails writers as if the store were down instead of hanging a room's
//! committer, its REST writers and its sockets. And once a write met a full disk
//! ([`StoreError::Full`]) the store says so ([`Store::is_full`]) until a probe finds space again
//! ([`Store::has_space`]) or a write succeeds, so rooms refuse writes before applying them and
//! readers carry on. The webhook outbox is under the same deadline: a stalled store fails the
//! outbox writer's pushes (which it retries, then counts as `dropped`) and the delivery's claims
//! instead of holding them until TCP gives up. It knows no SQL and nothing of rooms.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use super::keyed::{SideTables, Table};
use super::outbox::{Claimed, DeadLetter, Outbox, OutboxEvent};
use super::{Checkpoint, Fence, LogRow, Logged, Store, StoreError, StoredRoom, StoredVersion};
use crate::ids::RoomName;

/// How often a store whose disk was found full is asked whether it has space again.
const FULL_PROBE_EVERY: Duration = Duration::from_millis(250);

/// A store with a deadline on every call and a memory of a full disk.
pub struct Guarded {
    inner: Arc<dyn Store>,
    limit: Duration,
    full: Arc<FullState>,
}

/// Whether the disk was found full, and whether a probe task watches for space.
#[derive(Default)]
struct FullState {
    full: AtomicBool,
    probing: AtomicBool,
}

impl Guarded {
    /// Wraps `inner`: every call that takes longer than `limit` fails with
    /// [`StoreError::TimedOut`] (except [`Store::prune_history`], an hourly background sweep
    /// over every room, and [`Store::release_memory`], which waits for nothing).
    pub fn wrap(inner: Arc<dyn Store>, limit: Duration) -> Arc<dyn Store> {
        Arc::new(Guarded {
            inner,
            limit: limit.max(Duration::from_millis(1)),
            full: Arc::new(FullState::default()),
        })
    }

    /// Runs a call under the deadline.
    async fn timed<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.limit, call).await {
            Ok(result) => result,
            Err(_) => {
                tracing::warn!(limit = ?self.limit, "a store call did not answer in time");
                Err(StoreError::TimedOut(self.limit))
            }
        }
    }

    /// Runs a write under the deadline and learns from its outcome whether the disk is full.
    async fn write<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let result = self.timed(call).await;
        match &result {
            Ok(_) => self.full.full.store(false, Ordering::SeqCst),
            Err(StoreError::Full) => self.found_full(),
            Err(_) => {}
        }
        result
    }

    /// Marks the disk full and starts the probe that clears it, unless one runs.
    fn found_full(&self) {
        if !self.full.full.swap(true, Ordering::SeqCst) {
            tracing::error!("the store's disk is full: writes are refused until space returns");
        }
        if self.full.probing.swap(true, Ordering::SeqCst) {
            return;
        }
        let (inner, full, limit) = (self.inner.clone(), self.full.clone(), self.limit);
        tokio::spawn(async move {
            loop {
                while full.full.load(Ordering::SeqCst) {
                    tokio::time::sleep(FULL_PROBE_EVERY).await;
                    if let Ok(Ok(true)) = tokio::time::timeout(limit, inner.has_space()).await {
                        full.full.store(false, Ordering::SeqCst);
                        tracing::info!("the store's disk has space again: writes resume");
                    }
                }
                full.probing.store(false, Ordering::SeqCst);
                // Found full again between the last check and now: probe on, unless another
                // probe started meanwhile.
                if !full.full.load(Ordering::SeqCst) || full.probing.swap(true, Ordering::SeqCst) {
                    return;
                }
            }
        });
    }
}

#[async_trait]
impl Store for Guarded {
    async fn load(&self, room: &RoomName) -> Result<StoredRoom, StoreError> {
        self.timed(self.inner.load(room)).await
    }

    async fn load_since(&self, room: &RoomName, after_seq: u64) -> Result<StoredRoom, StoreError> {
        self.timed(self.inner.load_since(room, after_seq)).await
    }

    async fn append_logged(
        &self,
        room: &RoomName,
        updates: Vec<Logged>,
    ) -> Result<u64, StoreError> {
        self.write(self.inner.append_logged(room, updates)).await
    }

    async fn writer_client_id(&self) -> Result<u64, StoreError> {
        self.timed(self.inner.writer_client_id()).await
    }

    async fn dev_secret(&self, candidate: &[u8]) -> Result<Vec<u8>, StoreError> {
        self.timed(self.inner.dev_secret(candidate)).await
    }

    async fn next_fence(&self, room: &RoomName, fairy: &str) -> Result<Option<u64>, StoreError> {
        self.timed(self.inner.next_fence(room, fairy)).await
    }

    async fn append_fenced(
        &self,
        room: &RoomName,
        updates: Vec<Logged>,
        fences: Vec<Fence>,
    ) -> Result<u64, StoreError> {
        self.write(self.inner.append_fenced(room, updates, fences))
            .await
    }

    async fn compact(
        &self,
        room: &RoomName,
        snapshot: Bytes,
        upto_seq: u64,
    ) -> Result<(), StoreError> {
        self.write(self.inner.compact(room, snapshot, upto_seq))
            .await
    }

    async fn newest_checkpoint(&self, room: &RoomName) -> Result<Option<u64>, StoreError> {
        self.timed(self.inner.newest_checkpoint(room)).await
    }

    async fn add_checkpoint(
        &self,
        room: &RoomName,
        checkpoint: Checkpoint,
    ) -> Result<bool, StoreError> {
        self.write(self.inner.add_checkpoint(room, checkpoint))
            .await
    }

    async fn history(
        &self,
        room: &RoomName,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LogRow>, StoreError> {
        self.timed(self.inner.history(room, after, limit)).await
    }

    async fn load_version(
        &self,
        room: &RoomName,
        seq: u64,
    ) -> Result<Option<StoredVersion>, StoreError> {
        self.timed(self.inner.load_version(room, seq)).await
    }

    async fn seq_at(&self, room: &RoomName, at: u64) -> Result<Option<u64>, StoreError> {
        self.timed(self.inner.seq_at(room, at)).await
    }

    async fn history_bounded(
        &self,
        room: &RoomName,
        after: u64,
        limit: usize,
        max_bytes: u64,
    ) -> Result<Vec<LogRow>, StoreError> {
        self.timed(self.inner.history_bounded(room, after, limit, max_bytes))
            .await
    }

    async fn version_base(
        &self,
        room: &RoomName,
        seq: u64,
    ) -> Result<Option<StoredVersion>, StoreError> {
        self.timed(self.inner.version_base(room, seq)).await
    }

    async fn last_seq(&self, room: &RoomName) -> Result<u64, StoreError> {
        self.timed(self.inner.last_seq(room)).await
    }

    async fn logs_over(&self, max_bytes: u64) -> Result<Vec<super::OverCap>, StoreError> {
        // The minutely `--history-max-bytes` sweep, which nobody waits for: no deadline.
        self.inner.logs_over(max_bytes).await
    }

    async fn prune_log_to(&self, room: &RoomName, upto: u64) -> Result<u64, StoreError> {
        // Part of the same sweep: no deadline, as `prune_history`.
        self.inner.prune_log_to(room, upto).await
    }

    async fn prune_history(&self, before: u64) -> Result<u64, StoreError> {
        // An hourly sweep over every room, which nobody waits for: no deadline.
        self.inner.prune_history(before).await
    }

    fn side(&self) -> &dyn SideTables {
        self
    }

    fn outbox(&self) -> &dyn Outbox {
        self
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.timed(self.inner.ping()).await
    }

    async fn has_space(&self) -> Result<bool, StoreError> {
        self.timed(self.inner.has_space()).await
    }

    fn is_full(&self) -> bool {
        self.full.full.load(Ordering::SeqCst) || self.inner.is_full()
    }

    async fn release_memory(&self) {
        self.inner.release_memory().await
    }

    async fn close(&self) {
        if tokio::time::timeout(self.limit, self.inner.close())
            .await
            .is_err()
        {
            tracing::warn!(limit = ?self.limit, "the store did not close in time");
        }
    }
}

#[async_trait]
impl SideTables for Guarded {
    async fn get(
        &self,
        table: Table,
        room: &RoomName,
        key: &str,
    ) -> Result<Option<Bytes>, StoreError> {
        self.timed(self.inner.side().get(table, room, key)).await
    }

    async fn list(&self, table: Table, room: &RoomName) -> Result<Vec<Bytes>, StoreError> {
        self.timed(self.inner.side().list(table, room)).await
    }

    async fn put(
        &self,
        table: Table,
        room: &RoomName,
        key: &str,
        value: Bytes,
        fence: Option<u64>,
    ) -> Result<(), StoreError> {
        self.write(self.inner.side().put(table, room, key, value, fence))
            .await
    }

    async fn delete(&self, table: Table, room: &RoomName, key: &str) -> Result<(), StoreError> {
        self.write(self.inner.side().delete(table, room, key)).await
    }
}

#[async_trait]
impl Outbox for Guarded {
    async fn push(&self, event: OutboxEvent) -> Result<(), StoreError> {
        self.write(self.inner.outbox().push(event)).await
    }

    async fn claim(
        &self,
        now: u64,
        lease_until: u64,
        limit: usize,
    ) -> Result<Vec<Claimed>, StoreError> {
        self.timed(self.inner.outbox().claim(now, lease_until, limit))
            .await
    }

    async fn delivered(&self, id: &str) -> Result<(), StoreError> {
        self.timed(self.inner.outbox().delivered(id)).await
    }

    async fn retry_at(
        &self,
        id: &str,
        attempts: u32,
        next_at: u64,
        error: &str,
    ) -> Result<(), StoreError> {
        self.timed(self.inner.outbox().retry_at(id, attempts, next_at, error))
            .await
    }

    async fn dead(&self, id: &str, attempts: u32, at: u64, error: &str) -> Result<(), StoreError> {
        self.timed(self.inner.outbox().dead(id, attempts, at, error))
            .await
    }

    async fn next_due(&self) -> Result<Option<u64>, StoreError> {
        self.timed(self.inner.outbox().next_due()).await
    }

    async fn pending(&self) -> Result<u64, StoreError> {
        self.timed(self.inner.outbox().pending()).await
    }

    async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        self.timed(self.inner.outbox().dead_letters(limit)).await
    }

    async fn dead_count(&self) -> Result<u64, StoreError> {
        self.timed(self.inner.outbox().dead_count()).await
    }

    async fn prune_dead(&self, before: u64) -> Result<u64, StoreError> {
        self.timed(self.inner.outbox().prune_dead(before)).await
    }

    async fn fresh(&self, now: u64, limit: usize) -> Result<Vec<OutboxEvent>, StoreError> {
        self.timed(self.inner.outbox().fresh(now, limit)).await
    }

    async fn replace(
        &self,
        now: u64,
        ids: &[String],
        merged: Option<OutboxEvent>,
    ) -> Result<bool, StoreError> {
        self.timed(self.inner.outbox().replace(now, ids, merged))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::store::wrapper::StoreWrapper;
    use std::sync::atomic::AtomicU8;

    /// A memory store whose appends hang, fail with a full disk, or pass; `has_space` says
    /// whether the "disk" has room again.
    #[derive(Default)]
    struct Faulty {
        inner: MemoryStore,
        /// 0: pass, 1: hang, 2: full.
        mode: AtomicU8,
        space: AtomicBool,
    }

    #[async_trait]
    impl StoreWrapper for Faulty {
        fn inner(&self) -> &dyn Store {
            &self.inner
        }
        async fn append_logged(
            &self,
            room: &RoomName,
            updates: Vec<Logged>,
        ) -> Result<u64, StoreError> {
            match self.mode.load(Ordering::SeqCst) {
                1 => std::future::pending().await,
                2 => Err(StoreError::Full),
                _ => self.inner.append_logged(room, updates).await,
            }
        }
        async fn has_space(&self) -> Result<bool, StoreError> {
            Ok(self.space.load(Ordering::SeqCst))
        }
    }

    fn update() -> Vec<Bytes> {
        vec![Bytes::from_static(b"u")]
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_call_fails_at_the_deadline() {
        let faulty = Arc::new(Faulty::default());
        let store = Guarded::wrap(faulty.clone(), Duration::from_millis(800));
        let room = RoomName::parse("r").unwrap();
        faulty.mode.store(1, Ordering::SeqCst);
        let started = tokio::time::Instant::now();
        let result = store.append(&room, update()).await;
        assert!(matches!(result, Err(StoreError::TimedOut(_))), "{result:?}");
        assert_eq!(started.elapsed(), Duration::from_millis(800));
        faulty.mode.store(0, Ordering::SeqCst);
        assert_eq!(store.append(&room, update()).await.unwrap(), 1);
        assert!(!store.is_full(), "a stall is not a full disk");
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_disk_is_remembered_until_the_probe_finds_space() {
        let faulty = Arc::new(Faulty::default());
        let store = Guarded::wrap(faulty.clone(), Duration::from_secs(5));
        let room = RoomName::parse("r").unwrap();
        faulty.mode.store(2, Ordering::SeqCst);
        assert!(matches!(
            store.append(&room, update()).await,
            Err(StoreError::Full)
        ));
        assert!(store.is_full());
        // Reads go on; no space yet: still full after several probes.
        assert!(store.load(&room).await.is_ok());
        tokio::time::sleep(FULL_PROBE_EVERY * 4).await;
        assert!(store.is_full());
        // Space returns: the next probe clears it, and writes pass.
        faulty.space.store(true, Ordering::SeqCst);
        faulty.mode.store(0, Ordering::SeqCst);
        tokio::time::sleep(FULL_PROBE_EVERY * 2).await;
        assert!(!store.is_full());
        assert_eq!(store.append(&room, update()).await.unwrap(), 1);
        // Full again later: a new probe watches again.
        faulty.mode.store(2, Ordering::SeqCst);
        faulty.space.store(false, Ordering::SeqCst);
        assert!(store.append(&room, update()).await.is_err());
        assert!(store.is_full());
        faulty.space.store(true, Ordering::SeqCst);
        tokio::time::sleep(FULL_PROBE_EVERY * 2).await;
        assert!(!store.is_full());
    }
}
