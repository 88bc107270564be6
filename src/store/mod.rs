//! Durable storage of room documents.
//!
//! Owns the narrow async [`Store`] trait (an append-only update log per room plus a compacted
//! snapshot) and its implementations: [`sqlite::SqliteStore`] (the embedded default, WAL, group
//! commit across rooms) and [`memory::MemoryStore`] (tests and `--store memory:`). Only this
//! module touches databases; it knows nothing about sockets, peers or the Yjs protocol.

pub mod memory;
pub mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::room::RoomName;

/// Errors of the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The `--store` URL is not one this build understands.
    #[error("unsupported store url {0:?}: expected sqlite:PATH or memory:")]
    UnsupportedUrl(String),
    /// The database reported an error.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// The store's writer task is gone (the server is shutting down).
    #[error("store writer stopped")]
    WriterStopped,
}

/// What is kept of one room: a snapshot (if compacted) and the updates logged after it.
#[derive(Debug, Default, Clone)]
pub struct StoredRoom {
    /// A full-state v1 update covering every logged update up to `snapshot_seq`.
    pub snapshot: Option<Bytes>,
    /// The v1 updates logged after the snapshot, oldest first.
    pub updates: Vec<Bytes>,
    /// The sequence number of the last logged update (0 when none).
    pub last_seq: u64,
}

/// The storage contract rooms rely on. Implementations must make [`Store::append`] durable
/// before returning: rooms broadcast an update only after it returns.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Loads everything stored for a room (empty for a new room).
    async fn load(&self, room: &RoomName) -> Result<StoredRoom, StoreError>;

    /// Appends v1 updates to a room's log, durably; returns the sequence number of the last one.
    async fn append(&self, room: &RoomName, updates: Vec<Bytes>) -> Result<u64, StoreError>;

    /// Replaces the snapshot and every logged update with a sequence number `<= upto_seq` by
    /// `snapshot` (which must contain all of them), atomically.
    async fn compact(
        &self,
        room: &RoomName,
        snapshot: Bytes,
        upto_seq: u64,
    ) -> Result<(), StoreError>;

    /// Flushes and closes the store (called once at shutdown).
    async fn close(&self) {}
}

/// Opens the store named by a `--store` URL: `sqlite:PATH` or `memory:`.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    if let Some(path) = url.strip_prefix("sqlite:") {
        let path = path.strip_prefix("//").unwrap_or(path);
        Ok(Arc::new(sqlite::SqliteStore::open(path).await?))
    } else if url == "memory:" || url == "memory" {
        Ok(Arc::new(memory::MemoryStore::default()))
    } else {
        Err(StoreError::UnsupportedUrl(url.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the same contract test against every backend (zed's `test_both_dbs!` habit).
    async fn contract(store: Arc<dyn Store>) {
        let room = RoomName::parse("contract").unwrap();
        let empty = store.load(&room).await.unwrap();
        assert!(empty.snapshot.is_none() && empty.updates.is_empty());
        let s1 = store
            .append(
                &room,
                vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")],
            )
            .await;
        let s1 = s1.unwrap();
        let s2 = store
            .append(&room, vec![Bytes::from_static(b"c")])
            .await
            .unwrap();
        assert!(s2 > s1);
        let loaded = store.load(&room).await.unwrap();
        assert_eq!(loaded.updates, vec![&b"a"[..], &b"b"[..], &b"c"[..]]);
        assert_eq!(loaded.last_seq, s2);
        store
            .compact(&room, Bytes::from_static(b"snap"), s1)
            .await
            .unwrap();
        let loaded = store.load(&room).await.unwrap();
        assert_eq!(loaded.snapshot.as_deref(), Some(&b"snap"[..]));
        assert_eq!(loaded.updates, vec![&b"c"[..]]);
        let other = RoomName::parse("other").unwrap();
        assert!(store.load(&other).await.unwrap().updates.is_empty());
    }

    #[tokio::test]
    async fn memory_store_meets_contract() {
        contract(Arc::new(memory::MemoryStore::default())).await;
    }

    #[tokio::test]
    async fn sqlite_store_meets_contract() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let store = open(&format!("sqlite:{}", path.display())).await.unwrap();
        contract(store.clone()).await;
        store.close().await;
        // Reopening sees the same data.
        let store = open(&format!("sqlite:{}", path.display())).await.unwrap();
        let room = RoomName::parse("contract").unwrap();
        assert_eq!(store.load(&room).await.unwrap().updates.len(), 1);
    }

    #[test]
    fn unknown_urls_are_refused() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert!(matches!(
            rt.block_on(open("redis://x")),
            Err(StoreError::UnsupportedUrl(_))
        ));
    }
}
