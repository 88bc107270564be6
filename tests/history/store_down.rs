//! A node that loses its store: `/healthz` answers 503 naming the store, and a room whose
//! updates cannot be made durable closes its sockets with 1011 instead of showing peers state
//! it could not keep (docs/storage.md, "Durable before visible").

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use fairyring::config::ServeConfig;
use fairyring::ids::RoomName;
use fairyring::room::RoomConfig;
use fairyring::store::keyed::{SideTables, Table};
use fairyring::store::memory::MemoryStore;
use fairyring::store::{LogRow, Logged, Store, StoreError, StoredRoom};
use support::{Client, put_shape, shape_count};

/// A memory store that can be switched off: every call then fails.
#[derive(Default)]
struct Switchable {
    inner: MemoryStore,
    down: AtomicBool,
}

impl Switchable {
    fn check(&self) -> Result<(), StoreError> {
        if self.down.load(Ordering::SeqCst) {
            Err(StoreError::Database(sqlx::Error::PoolTimedOut))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl Store for Switchable {
    fn outbox(&self) -> &dyn fairyring::store::outbox::Outbox {
        self.inner.outbox()
    }
    fn side(&self) -> &dyn SideTables {
        self
    }
    async fn load(&self, room: &RoomName) -> Result<StoredRoom, StoreError> {
        self.check()?;
        self.inner.load(room).await
    }
    async fn append_logged(
        &self,
        room: &RoomName,
        updates: Vec<Logged>,
    ) -> Result<u64, StoreError> {
        self.check()?;
        self.inner.append_logged(room, updates).await
    }
    async fn compact(&self, room: &RoomName, snapshot: Bytes, upto: u64) -> Result<(), StoreError> {
        self.check()?;
        self.inner.compact(room, snapshot, upto).await
    }
    async fn newest_checkpoint(&self, room: &RoomName) -> Result<Option<u64>, StoreError> {
        self.check()?;
        self.inner.newest_checkpoint(room).await
    }
    async fn add_checkpoint(
        &self,
        room: &RoomName,
        checkpoint: fairyring::store::Checkpoint,
    ) -> Result<bool, StoreError> {
        self.check()?;
        self.inner.add_checkpoint(room, checkpoint).await
    }
    async fn history(
        &self,
        room: &RoomName,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LogRow>, StoreError> {
        self.check()?;
        self.inner.history(room, after, limit).await
    }
    async fn load_version(
        &self,
        room: &RoomName,
        seq: u64,
    ) -> Result<Option<fairyring::store::StoredVersion>, StoreError> {
        self.check()?;
        self.inner.load_version(room, seq).await
    }
    async fn seq_at(&self, room: &RoomName, at: u64) -> Result<Option<u64>, StoreError> {
        self.check()?;
        self.inner.seq_at(room, at).await
    }
    async fn prune_history(&self, before: u64) -> Result<u64, StoreError> {
        self.check()?;
        self.inner.prune_history(before).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.check()
    }
}

/// The side tables fail like the rest while the store is down.
#[async_trait]
impl SideTables for Switchable {
    async fn get(
        &self,
        table: Table,
        room: &RoomName,
        key: &str,
    ) -> Result<Option<Bytes>, StoreError> {
        self.check()?;
        self.inner.side().get(table, room, key).await
    }
    async fn list(&self, table: Table, room: &RoomName) -> Result<Vec<Bytes>, StoreError> {
        self.check()?;
        self.inner.side().list(table, room).await
    }
    async fn put(
        &self,
        table: Table,
        room: &RoomName,
        key: &str,
        value: Bytes,
        fence: Option<u64>,
    ) -> Result<(), StoreError> {
        self.check()?;
        self.inner.side().put(table, room, key, value, fence).await
    }
    async fn delete(&self, table: Table, room: &RoomName, key: &str) -> Result<(), StoreError> {
        self.check()?;
        self.inner.side().delete(table, room, key).await
    }
}

async fn health(http: &str) -> (u16, serde_json::Value) {
    let response = reqwest::get(format!("{http}/healthz"))
        .await
        .expect("healthz");
    let status = response.status().as_u16();
    (status, response.json().await.expect("json body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_store_means_503_and_1011() {
    let store = Arc::new(Switchable::default());
    let server = fairyring::server::start_with(
        ServeConfig::for_test(),
        RoomConfig::from_serve,
        store.clone(),
    )
    .await
    .expect("server");
    let http = format!("http://{}", server.addr());
    let base = format!("ws://{}", server.addr());
    let (status, body) = health(&http).await;
    assert_eq!(status, 200);
    assert_eq!(body["status"], "ok");
    assert_eq!(body["store"], "ok");
    assert_eq!(body["pubsub"], "off");

    let mut writer = Client::connect(&base, "down").await;
    let mut watcher = Client::connect(&base, "down").await;
    writer.edit(|txn| put_shape(txn, "kept", 1.0)).await;
    watcher
        .until("the first shape", |c| shape_count(c) == 1)
        .await;

    store.down.store(true, Ordering::SeqCst);
    let (status, body) = health(&http).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "unavailable");
    assert_eq!(body["store"], "unreachable");

    // A write the store cannot take closes the room's peers with 1011, and the watcher never
    // sees the update that was not made durable.
    writer.edit(|txn| put_shape(txn, "lost", 2.0)).await;
    assert_eq!(watcher.until_closed().await, Some(1011));
    assert_eq!(writer.until_closed().await, Some(1011));
    assert_eq!(shape_count(&watcher), 1, "nothing undurable was shown");
    server.shutdown().await;
}
