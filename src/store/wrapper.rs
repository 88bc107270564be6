//! Forwarding one [`Store`] to another, for stores that wrap a store to change a few calls
//! (tests injecting faults, counting calls, switching a store off).
//!
//! Owns [`StoreWrapper`]: a wrapper names its inner store and overrides only what it changes;
//! every other call of [`Store`] and of its side tables ([`SideTables`]) goes to the inner
//! store, after [`StoreWrapper::before`], one place to fail or slow every call. Each call is
//! listed once, in [`forwarded!`], which writes both the wrapper's default and the [`Store`]
//! implementation that routes to it, so a call added to [`Store`] and to that list reaches every
//! wrapper. It knows no backend and no SQL; [`super::guarded::Guarded`], which puts a deadline
//! around every call rather than before it, is written out.

use async_trait::async_trait;
use bytes::Bytes;

use super::keyed::{SideTables, Table};
use super::outbox::Outbox;
use super::{
    Checkpoint, Fence, LogRow, Logged, OverCap, Store, StoreError, StoredRoom, StoredVersion,
};
use crate::ids::RoomName;

/// Writes [`StoreWrapper`] with a forwarding default for each listed call of [`Store`], and the
/// [`Store`] implementation of every wrapper that routes each of them to the wrapper's method.
macro_rules! forwarded {
    ($(async fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty;)*) => {
        /// A store that wraps another: it names its inner store ([`StoreWrapper::inner`]) and
        /// overrides what it changes; it is a [`Store`] (and its own [`SideTables`]) whose every
        /// other call runs [`StoreWrapper::before`], then the inner store's. Its outbox is the
        /// inner store's.
        ///
        /// ```ignore
        /// struct Counting { inner: MemoryStore, loads: AtomicUsize }
        /// #[async_trait]
        /// impl StoreWrapper for Counting {
        ///     fn inner(&self) -> &dyn Store { &self.inner }
        ///     async fn load(&self, room: &RoomName) -> Result<StoredRoom, StoreError> {
        ///         self.loads.fetch_add(1, Ordering::SeqCst);
        ///         self.inner.load(room).await
        ///     }
        /// }
        /// ```
        #[async_trait]
        pub trait StoreWrapper: Send + Sync + 'static {
            /// The wrapped store.
            fn inner(&self) -> &dyn Store;

            /// Runs before every forwarded call that answers a `Result` (side tables'
            /// included; `call` names it, as `load` or `side.put`): an error fails the call
            /// without reaching the inner store, and a wait delays it. The default lets every
            /// call through at once.
            async fn before(&self, call: &'static str) -> Result<(), StoreError> {
                let _ = call;
                Ok(())
            }

            $(
                #[doc = concat!("[`Store::", stringify!($name), "`]: by default, ")]
                #[doc = "[`StoreWrapper::before`], then the inner store's."]
                async fn $name(&self $(, $arg: $ty)*) -> $ret {
                    self.before(stringify!($name)).await?;
                    self.inner().$name($($arg),*).await
                }
            )*

            /// [`Store::outbox`]: the inner store's.
            fn outbox(&self) -> &dyn Outbox {
                self.inner().outbox()
            }

            /// [`Store::is_full`]: the inner store's.
            fn is_full(&self) -> bool {
                self.inner().is_full()
            }

            /// [`Store::release_memory`]: the inner store's.
            async fn release_memory(&self) {
                self.inner().release_memory().await
            }

            /// [`Store::close`]: the inner store's.
            async fn close(&self) {
                self.inner().close().await
            }
        }

        #[async_trait]
        impl<W: StoreWrapper> Store for W {
            $(
                async fn $name(&self $(, $arg: $ty)*) -> $ret {
                    StoreWrapper::$name(self $(, $arg)*).await
                }
            )*

            fn side(&self) -> &dyn SideTables {
                self
            }

            fn outbox(&self) -> &dyn Outbox {
                StoreWrapper::outbox(self)
            }

            fn is_full(&self) -> bool {
                StoreWrapper::is_full(self)
            }

            async fn release_memory(&self) {
                StoreWrapper::release_memory(self).await
            }

            async fn close(&self) {
                StoreWrapper::close(self).await
            }
        }
    };
}

forwarded! {
    async fn load(&self, room: &RoomName) -> Result<StoredRoom, StoreError>;
    async fn load_since(&self, room: &RoomName, after_seq: u64) -> Result<StoredRoom, StoreError>;
    async fn append_logged(&self, room: &RoomName, updates: Vec<Logged>) -> Result<u64, StoreError>;
    async fn writer_client_id(&self) -> Result<u64, StoreError>;
    async fn dev_secret(&self, candidate: &[u8]) -> Result<Vec<u8>, StoreError>;
    async fn next_fence(&self, room: &RoomName, fairy: &str) -> Result<Option<u64>, StoreError>;
    async fn append_fenced(
        &self,
        room: &RoomName,
        updates: Vec<Logged>,
        fences: Vec<Fence>
    ) -> Result<u64, StoreError>;
    async fn compact(&self, room: &RoomName, snapshot: Bytes, upto_seq: u64) -> Result<(), StoreError>;
    async fn newest_checkpoint(&self, room: &RoomName) -> Result<Option<u64>, StoreError>;
    async fn add_checkpoint(&self, room: &RoomName, checkpoint: Checkpoint) -> Result<bool, StoreError>;
    async fn history(&self, room: &RoomName, after: u64, limit: usize) -> Result<Vec<LogRow>, StoreError>;
    async fn load_version(&self, room: &RoomName, seq: u64) -> Result<Option<StoredVersion>, StoreError>;
    async fn history_bounded(
        &self,
        room: &RoomName,
        after: u64,
        limit: usize,
        max_bytes: u64
    ) -> Result<Vec<LogRow>, StoreError>;
    async fn version_base(&self, room: &RoomName, seq: u64) -> Result<Option<StoredVersion>, StoreError>;
    async fn last_seq(&self, room: &RoomName) -> Result<u64, StoreError>;
    async fn logs_over(&self, max_bytes: u64) -> Result<Vec<OverCap>, StoreError>;
    async fn prune_log_to(&self, room: &RoomName, upto: u64) -> Result<u64, StoreError>;
    async fn seq_at(&self, room: &RoomName, at: u64) -> Result<Option<u64>, StoreError>;
    async fn prune_history(&self, before: u64) -> Result<u64, StoreError>;
    async fn ping(&self) -> Result<(), StoreError>;
    async fn has_space(&self) -> Result<bool, StoreError>;
}

/// A wrapper's side tables: each call runs [`StoreWrapper::before`] (named `side.get`, …),
/// then the inner store's.
#[async_trait]
impl<W: StoreWrapper> SideTables for W {
    async fn get(
        &self,
        table: Table,
        room: &RoomName,
        key: &str,
    ) -> Result<Option<Bytes>, StoreError> {
        self.before("side.get").await?;
        self.inner().side().get(table, room, key).await
    }

    async fn list(&self, table: Table, room: &RoomName) -> Result<Vec<Bytes>, StoreError> {
        self.before("side.list").await?;
        self.inner().side().list(table, room).await
    }

    async fn put(
        &self,
        table: Table,
        room: &RoomName,
        key: &str,
        value: Bytes,
        fence: Option<u64>,
    ) -> Result<(), StoreError> {
        self.before("side.put").await?;
        self.inner()
            .side()
            .put(table, room, key, value, fence)
            .await
    }

    async fn delete(&self, table: Table, room: &RoomName, key: &str) -> Result<(), StoreError> {
        self.before("side.delete").await?;
        self.inner().side().delete(table, room, key).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::store::memory::MemoryStore;

    /// Records the calls it lets through and refuses appends.
    #[derive(Default)]
    struct Recording {
        inner: MemoryStore,
        calls: Mutex<Vec<&'static str>>,
    }

    #[async_trait]
    impl StoreWrapper for Recording {
        fn inner(&self) -> &dyn Store {
            &self.inner
        }

        async fn before(&self, call: &'static str) -> Result<(), StoreError> {
            self.calls.lock().unwrap().push(call);
            Ok(())
        }

        async fn append_logged(&self, _: &RoomName, _: Vec<Logged>) -> Result<u64, StoreError> {
            Err(StoreError::WriterStopped)
        }
    }

    /// Every call not overridden reaches the inner store after `before`; an overridden one
    /// does not; derived calls (`append`) go through the overridden one.
    #[tokio::test]
    async fn a_wrapper_forwards_what_it_does_not_override() {
        let wrapper = Recording::default();
        let room = RoomName::parse("wrapped").unwrap();
        wrapper
            .inner
            .append(&room, vec![Bytes::from_static(b"a")])
            .await
            .unwrap();
        let store: &dyn Store = &wrapper;
        assert_eq!(store.load(&room).await.unwrap().last_seq, 1);
        assert_eq!(store.last_seq(&room).await.unwrap(), 1);
        assert!(matches!(
            store.append(&room, vec![Bytes::from_static(b"b")]).await,
            Err(StoreError::WriterStopped)
        ));
        store
            .side()
            .save_fairy_state(&room, "f-1", Bytes::from_static(b"{}"))
            .await
            .unwrap();
        assert!(
            wrapper
                .inner
                .side()
                .load_fairy_state(&room, "f-1")
                .await
                .unwrap()
                .is_some()
        );
        assert_eq!(
            *wrapper.calls.lock().unwrap(),
            vec!["load", "last_seq", "side.put"]
        );
    }
}
