//! A node that loses its store: `/healthz` answers 503 naming the store, and a room whose
//! updates cannot be made durable closes its sockets with 1011 instead of showing peers state
//! it could not keep (docs/storage.md, "Durable before visible").

use crate::support;
use crate::support::server::TestServer;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use fairyring::config::ServeConfig;
use fairyring::store::memory::MemoryStore;
use fairyring::store::wrapper::StoreWrapper;
use fairyring::store::{Store, StoreError};
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

/// Every call of the store and its side tables checks first (the outbox is the inner store's).
#[async_trait]
impl StoreWrapper for Switchable {
    fn inner(&self) -> &dyn Store {
        &self.inner
    }
    async fn before(&self, _call: &'static str) -> Result<(), StoreError> {
        self.check()
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
    let server = TestServer::builder(ServeConfig::for_test())
        .on(store.clone())
        .start()
        .await
        .handle;
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
