//! The room registry: loads each room once (however many peers connect at once), hands out
//! rooms, unloads idle ones, and flushes every room at shutdown. A [`LoadHook`] given to the
//! registry runs on every load before anyone can use the room (content migrations); a
//! [`Rooms::when_loaded`] listener is told of every room once it is loaded (the fairy hub hosts
//! the room's fairies then).
//!
//! Reads that need no room ([`Rooms::read`], for exports) do not load one: a loaded room is
//! read as it is, anything else straight from the store into a document of the reader's own
//! ([`ReadSource`]), so a read neither creates a room nor writes anything, nor holds a place
//! under `--max-rooms` past its own end.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::commit::{self, LogState, Stop};
use super::{Room, RoomConfig, RoomError};
use crate::ids::RoomName;
use crate::store::{Store, StoreError};

/// Work done on every load of a room, after its stored document is applied and before any peer
/// or other caller gets the room (a migration of the document's content, for example). Its
/// document writes are persisted and broadcast like any other. When it fails, the load fails
/// (callers see [`RoomError::Store`]) and nothing it wrote to the document is kept.
#[async_trait]
pub trait LoadHook: Send + Sync + 'static {
    /// Runs once per load of `room`, with the store the room lives in.
    async fn on_load(&self, room: &Arc<Room>, store: &Arc<dyn Store>) -> Result<(), StoreError>;
}

type Slot = Arc<OnceCell<Arc<Room>>>;

/// A caller's hold on a room's slot while it loads or gets the room: when the caller goes away
/// (its future dropped mid-load), the slot is forgotten unless another caller waits on it.
struct HeldSlot<'a> {
    rooms: &'a Rooms,
    name: &'a RoomName,
    slot: Slot,
}

impl Drop for HeldSlot<'_> {
    fn drop(&mut self) {
        self.rooms.forget_abandoned(self.name, &self.slot);
    }
}

/// A listener told of each room the registry has loaded ([`Rooms::when_loaded`]).
type Loaded = Arc<dyn Fn(&Arc<Room>) + Send + Sync>;

/// What a read of a room reads: the loaded room's document, or what the store holds of a room
/// not loaded here. Turning it into a document ([`ReadSource::into_doc`]) may take time
/// (decoding every stored update): do it off the async workers.
pub enum ReadSource {
    /// The room is loaded: its live document (read it in a short transaction).
    Loaded(yrs::Doc),
    /// The room is not loaded: its stored state, never empty.
    Stored(crate::store::StoredRoom),
}

impl ReadSource {
    /// The document to read: the live one, or a private one built from the store (entries that
    /// cannot be decoded are skipped, as a load skips them; the load hook's migrations are not
    /// run, nothing is written).
    pub fn into_doc(self) -> yrs::Doc {
        match self {
            ReadSource::Loaded(doc) => doc,
            ReadSource::Stored(stored) => super::vet::decode::doc_from_stored(&stored),
        }
    }
}

struct Inner {
    slots: Mutex<HashMap<RoomName, Slot>>,
    store: Arc<dyn Store>,
    config: RoomConfig,
    max_rooms: usize,
    on_load: Option<Arc<dyn LoadHook>>,
    /// Told of every load, after the load hook and the committer's start.
    loaded: Mutex<Vec<Loaded>>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    /// Cancelled per room when its committer stopped (so waiting joiners can reload it).
    unloaded: Mutex<HashMap<RoomName, CancellationToken>>,
}

/// All rooms of the process.
#[derive(Clone)]
pub struct Rooms {
    inner: Arc<Inner>,
}

impl Rooms {
    /// A registry over a store.
    pub fn new(store: Arc<dyn Store>, config: RoomConfig, max_rooms: usize) -> Self {
        Self::with_load_hook(store, config, max_rooms, None)
    }

    /// A registry over a store that runs `on_load` on every room it loads.
    pub fn with_load_hook(
        store: Arc<dyn Store>,
        config: RoomConfig,
        max_rooms: usize,
        on_load: Option<Arc<dyn LoadHook>>,
    ) -> Self {
        Rooms {
            inner: Arc::new(Inner {
                slots: Mutex::new(HashMap::new()),
                store,
                config,
                max_rooms,
                on_load,
                loaded: Mutex::new(Vec::new()),
                shutdown: CancellationToken::new(),
                tracker: TaskTracker::new(),
                unloaded: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The loaded room, loading it from the store first if needed (once, for all callers).
    pub async fn get(&self, name: &RoomName) -> Result<Arc<Room>, RoomError> {
        loop {
            let held = HeldSlot {
                rooms: self,
                name,
                slot: self.slot(name)?,
            };
            let loaded = held.slot.get_or_try_init(|| self.load(name)).await;
            let room = match loaded {
                Ok(room) => room.clone(),
                Err(error) => {
                    self.forget(name, &held.slot);
                    return Err(error);
                }
            };
            drop(held);
            if !room.is_closing() {
                return Ok(room);
            }
            // The room is unloading: wait until its last flush is done, then load it again.
            let done = self.unload_token(name);
            done.cancelled().await;
        }
    }

    /// What a read of `name` reads, without loading the room: `None` when the room has never
    /// been written (nothing stored, nothing loaded).
    pub async fn read(&self, name: &RoomName) -> Result<Option<ReadSource>, RoomError> {
        if self.inner.shutdown.is_cancelled() {
            return Err(RoomError::Closed);
        }
        // A room still flushing as it unloads is read too: its document is whole (unless the
        // store refused some of it).
        if let Some(room) = self.get_loaded(name)
            && !room.is_fenced()
        {
            return Ok(Some(ReadSource::Loaded(room.doc().clone())));
        }
        let stored = self.inner.store.load(name).await.map_err(|error| {
            tracing::error!(room = %name, %error, "reading room failed");
            RoomError::Store
        })?;
        if stored.snapshot.is_none() && stored.updates.is_empty() {
            return Ok(None);
        }
        Ok(Some(ReadSource::Stored(stored)))
    }

    /// The rooms' clock ([`RoomConfig::clock`]), which the fairies and their budget share.
    pub fn clock(&self) -> &crate::clock::SharedClock {
        &self.inner.config.clock
    }

    /// Where rooms and fairies report events (`--webhook-url`), if anywhere.
    pub fn webhooks(&self) -> Option<&crate::webhooks::Webhooks> {
        self.inner.config.webhooks.as_ref()
    }

    /// The store rooms are kept in (for what sits beside documents, such as room instructions).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// Calls `listener` with every room this registry loads from now on, once it is loaded (its
    /// load hook run, its committer started) and before the caller that loaded it gets it. The
    /// listener runs on the loading task: it must not wait (spawn what takes time), nor load a
    /// room. Rooms loaded before the call are not told of: register before the first load.
    pub fn when_loaded(&self, listener: impl Fn(&Arc<Room>) + Send + Sync + 'static) {
        self.inner
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::new(listener));
    }

    /// Rooms currently loaded.
    pub fn loaded(&self) -> Vec<Arc<Room>> {
        let slots = self.inner.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .values()
            .filter_map(|slot| slot.get().cloned())
            .collect()
    }

    /// A room if it is loaded, without loading it.
    pub fn get_loaded(&self, name: &RoomName) -> Option<Arc<Room>> {
        let slots = self.inner.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.get(name).and_then(|slot| slot.get().cloned())
    }

    /// Resolves once the room is not loaded (at once if it is not loaded now).
    pub async fn wait_unloaded(&self, name: &RoomName) {
        let done = self.unload_token(name);
        if self.get_loaded(name).is_none() {
            // Do not leave a token behind for a room that is not loaded; waking any other
            // waiter early is harmless (`get` re-checks in a loop).
            self.release_unload_token(name);
            return;
        }
        done.cancelled().await;
    }

    /// Stops every room: each flushes its queue and compacts, then this returns.
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        self.inner.tracker.close();
        self.inner.tracker.wait().await;
        // The rooms' last commits are reported before the store closes.
        if let Some(webhooks) = &self.inner.config.webhooks {
            webhooks.finish().await;
        }
        self.inner.store.close().await;
    }

    fn slot(&self, name: &RoomName) -> Result<Slot, RoomError> {
        if self.inner.shutdown.is_cancelled() {
            return Err(RoomError::Closed);
        }
        let mut slots = self.inner.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = slots.get(name) {
            return Ok(slot.clone());
        }
        if slots.len() >= self.inner.max_rooms {
            return Err(RoomError::TooManyRooms);
        }
        let slot = Slot::default();
        slots.insert(name.clone(), slot.clone());
        Ok(slot)
    }

    /// Forgets `slot` when its load never ended and nobody else waits on it: the one caller
    /// that held it went away mid-load (an HTTP request dropped, a timeout). Otherwise the empty
    /// slot would stay for good, counted against `--max-rooms` and as a loaded room.
    fn forget_abandoned(&self, name: &RoomName, slot: &Slot) {
        let mut slots = self.inner.slots.lock().unwrap_or_else(|p| p.into_inner());
        // Clones of a slot are made only under this lock: the map's and the caller's are all.
        let abandoned = slot.get().is_none() && Arc::strong_count(slot) == 2;
        if abandoned && slots.get(name).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            slots.remove(name);
        }
    }

    fn forget(&self, name: &RoomName, slot: &Slot) {
        let mut slots = self.inner.slots.lock().unwrap_or_else(|p| p.into_inner());
        if slots.get(name).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            slots.remove(name);
        }
    }

    fn unload_token(&self, name: &RoomName) -> CancellationToken {
        let mut tokens = self
            .inner
            .unloaded
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        tokens.entry(name.clone()).or_default().clone()
    }

    async fn load(&self, name: &RoomName) -> Result<Arc<Room>, RoomError> {
        // Subscribed before loading: what other nodes publish meanwhile waits in the
        // subscription, and what the load already holds is skipped by sequence number.
        let subscription = match &self.inner.config.fanout {
            Some(fanout) => Some(fanout.subscribe(name).await),
            None => None,
        };
        let stored = self.inner.store.load(name).await.map_err(|error| {
            tracing::error!(room = %name, %error, "loading room failed");
            RoomError::Store
        })?;
        let now = tokio::time::Instant::from_std(self.inner.config.clock.now());
        let mut log = LogState::new(stored.last_seq, stored.updates.len() as u64, now);
        log.loaded_snapshot_bytes = stored.snapshot.as_ref().map_or(0, |s| s.len() as u64);
        let room = Room::new(
            name.clone(),
            stored,
            self.inner.store.clone(),
            self.inner.config.clone(),
        )?;
        // Before the committer starts: if the hook fails, the room is dropped with whatever the
        // hook queued, and the stored room stays as it was.
        if let Some(hook) = &self.inner.on_load {
            hook.on_load(&room, &self.inner.store)
                .await
                .map_err(|error| {
                    tracing::error!(room = %name, %error, "room load hook failed");
                    RoomError::Store
                })?;
        }
        crate::metrics::global().rooms_loaded.inc();
        tracing::info!(room = %name, "room loaded");
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let task_room = room.clone();
        let shutdown = self.inner.shutdown.clone();
        self.inner.tracker.spawn(async move {
            let stop = commit::run(task_room.clone(), log, shutdown, subscription).await;
            let idle = matches!(stop, Stop::Idle);
            let reason = match stop {
                Stop::Idle => "idle",
                Stop::Shutdown => "shutdown",
                Stop::StoreFailed => "store failure",
                Stop::Fenced => "fenced",
            };
            tracing::info!(room = %task_room.name, reason, "room unloaded");
            crate::metrics::global().rooms_loaded.dec();
            if let Some(inner) = weak.upgrade() {
                let rooms = Rooms { inner };
                // Before waking joiners, so that a reload finds the store settled.
                if idle && rooms.is_only_room(&task_room.name) {
                    rooms.inner.store.release_memory().await;
                }
                rooms.finish_unload(&task_room);
            }
            drop(task_room);
            if idle {
                super::reclaim::schedule();
            }
        });
        let listeners = self
            .inner
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for listener in listeners {
            listener(&room);
        }
        Ok(room)
    }

    /// Whether `name` is the only room loaded or loading.
    fn is_only_room(&self, name: &RoomName) -> bool {
        let slots = self.inner.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.len() == 1 && slots.contains_key(name)
    }

    fn finish_unload(&self, room: &Arc<Room>) {
        {
            let mut slots = self.inner.slots.lock().unwrap_or_else(|p| p.into_inner());
            let same = slots
                .get(&room.name)
                .and_then(|slot| slot.get())
                .is_some_and(|loaded| Arc::ptr_eq(loaded, room));
            if same {
                slots.remove(&room.name);
            }
        }
        self.release_unload_token(&room.name);
    }

    /// Wakes everyone waiting for `name` to unload and forgets the token.
    fn release_unload_token(&self, name: &RoomName) {
        let token = {
            let mut tokens = self
                .inner
                .unloaded
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            tokens.remove(name)
        };
        if let Some(token) = token {
            token.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;

    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::store::wrapper::StoreWrapper;
    use crate::store::{StoreError, StoredRoom};

    /// A store that counts loads and makes each one slow enough for callers to pile up.
    #[derive(Default)]
    struct CountingStore {
        inner: MemoryStore,
        loads: AtomicUsize,
        releases: AtomicUsize,
    }

    /// Every other call goes to the memory store; the release is only counted.
    #[async_trait]
    impl StoreWrapper for CountingStore {
        fn inner(&self) -> &dyn Store {
            &self.inner
        }
        async fn load(&self, room: &RoomName) -> Result<StoredRoom, StoreError> {
            self.loads.fetch_add(1, Ordering::SeqCst);
            tokio::task::yield_now().await;
            self.inner.load(room).await
        }
        async fn release_memory(&self) {
            self.releases.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A store whose loads wait until the test lets them go (each says it started).
    struct GatedStore {
        inner: MemoryStore,
        started: tokio::sync::mpsc::UnboundedSender<RoomName>,
        gate: tokio::sync::Semaphore,
    }

    #[async_trait]
    impl StoreWrapper for GatedStore {
        fn inner(&self) -> &dyn Store {
            &self.inner
        }
        async fn load(&self, room: &RoomName) -> Result<StoredRoom, StoreError> {
            let _ = self.started.send(room.clone());
            let _pass = self.gate.acquire().await;
            self.inner.load(room).await
        }
    }

    /// A caller that goes away while its room loads (an HTTP request dropped, a timeout) leaves
    /// nothing behind: the empty slot used to stay for good, counted against `--max-rooms`.
    #[tokio::test]
    async fn a_get_dropped_mid_load_leaves_no_slot_behind() {
        let (started, mut loads) = tokio::sync::mpsc::unbounded_channel();
        let store = Arc::new(GatedStore {
            inner: MemoryStore::default(),
            started,
            gate: tokio::sync::Semaphore::new(0),
        });
        let config = RoomConfig::from_serve(&crate::config::ServeConfig::for_test());
        let rooms = Rooms::new(store.clone(), config, 3);
        for i in 0..3 {
            let name = RoomName::parse(&format!("gone-{i}")).unwrap();
            let getting = tokio::spawn({
                let rooms = rooms.clone();
                async move { rooms.get(&name).await.map(|_| ()) }
            });
            assert!(loads.recv().await.is_some(), "the load started");
            getting.abort();
            assert!(getting.await.is_err_and(|e| e.is_cancelled()));
        }
        assert!(rooms.loaded().is_empty());
        assert!(
            rooms.inner.slots.lock().unwrap().is_empty(),
            "no slot of an abandoned load is left"
        );
        // Two joiners of one room, the first going away: the second still gets the room.
        let name = RoomName::parse("kept").unwrap();
        let first = tokio::spawn({
            let (rooms, name) = (rooms.clone(), name.clone());
            async move { rooms.get(&name).await.map(|_| ()) }
        });
        assert!(loads.recv().await.is_some());
        let second = tokio::spawn({
            let (rooms, name) = (rooms.clone(), name.clone());
            async move { rooms.get(&name).await.map(|r| r.name().clone()) }
        });
        tokio::task::yield_now().await;
        first.abort();
        let _ = first.await;
        store.gate.add_permits(100);
        assert_eq!(second.await.unwrap().unwrap(), name);
        // Within `--max-rooms` (3): two more rooms load beside it.
        assert!(rooms.get(&RoomName::parse("third").unwrap()).await.is_ok());
        let other = RoomName::parse("other").unwrap();
        assert!(rooms.get(&other).await.is_ok());
        rooms.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_simultaneous_joiners_load_a_room_once() {
        let store = Arc::new(CountingStore::default());
        let config = RoomConfig::from_serve(&crate::config::ServeConfig::for_test());
        let rooms = Rooms::new(store.clone(), config, 10);
        let name = RoomName::parse("crowd").unwrap();
        let gets: Vec<_> = (0..32)
            .map(|_| {
                let rooms = rooms.clone();
                let name = name.clone();
                tokio::spawn(
                    async move { rooms.get(&name).await.map(|r| Arc::as_ptr(&r) as usize) },
                )
            })
            .collect();
        let mut ptrs = Vec::new();
        for get in gets {
            ptrs.push(get.await.unwrap().unwrap());
        }
        ptrs.dedup();
        assert_eq!(ptrs.len(), 1, "every caller got the same room");
        assert_eq!(store.loads.load(Ordering::SeqCst), 1);
        rooms.shutdown().await;
    }

    /// A room that no peer ever joined and no lease holds unloads after the grace and the idle
    /// time (it used to stay loaded for good); one a lease holds stays until the lease ends.
    #[tokio::test]
    async fn a_room_nobody_joins_unloads_and_a_lease_keeps_it() {
        let clock = Arc::new(crate::clock::ManualClock::new());
        let mut config = RoomConfig::from_serve(&crate::config::ServeConfig::for_test());
        config.idle_unload = std::time::Duration::from_secs(1);
        config.sweep_every = std::time::Duration::from_millis(5);
        config.clock = clock.clone();
        let rooms = Rooms::new(Arc::new(CountingStore::default()), config, 10);
        let (a, b) = (RoomName::parse("a").unwrap(), RoomName::parse("b").unwrap());
        let room_a = rooms.get(&a).await.unwrap();
        let lease = rooms.get(&b).await.unwrap().lease().expect("lease");
        // Within the grace for the first peer, nothing unloads.
        clock.advance(std::time::Duration::from_secs(4));
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        assert!(rooms.get_loaded(&a).is_some());
        clock.advance(std::time::Duration::from_secs(3));
        rooms.wait_unloaded(&a).await;
        assert!(room_a.is_closing());
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        assert!(rooms.get_loaded(&b).is_some(), "the lease keeps b");
        drop(lease);
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        assert!(
            rooms.get_loaded(&b).is_some(),
            "b's idle time starts at the lease's end"
        );
        clock.advance(std::time::Duration::from_secs(2));
        rooms.wait_unloaded(&b).await;
        rooms.shutdown().await;
    }

    /// With no idle time at all (`--idle-unload 0`), a room nobody joined yet still waits out
    /// the grace for its first peer (it used to unload at once: the grace's end, an instant in
    /// the future, counted as idle for zero seconds already).
    #[tokio::test]
    async fn no_idle_time_keeps_the_grace_for_the_first_peer() {
        let clock = Arc::new(crate::clock::ManualClock::new());
        let mut config = RoomConfig::from_serve(&crate::config::ServeConfig::for_test());
        config.idle_unload = std::time::Duration::ZERO;
        config.sweep_every = std::time::Duration::from_millis(5);
        config.clock = clock.clone();
        let rooms = Rooms::new(Arc::new(CountingStore::default()), config, 10);
        let a = RoomName::parse("a").unwrap();
        let room = rooms.get(&a).await.unwrap();
        // Several sweeps within the grace: still loaded.
        clock.advance(std::time::Duration::from_secs(4));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(rooms.get_loaded(&a).is_some(), "loaded within the grace");
        assert!(!room.is_closing());
        clock.advance(std::time::Duration::from_secs(2));
        rooms.wait_unloaded(&a).await;
        rooms.shutdown().await;
    }

    /// The store's memory is released when the last loaded room unloads, not before.
    #[tokio::test]
    async fn the_last_unload_releases_the_stores_memory() {
        let store = Arc::new(CountingStore::default());
        let mut config = RoomConfig::from_serve(&crate::config::ServeConfig::for_test());
        config.idle_unload = std::time::Duration::ZERO;
        config.sweep_every = std::time::Duration::from_millis(5);
        let rooms = Rooms::new(store.clone(), config, 10);
        let (a, b) = (RoomName::parse("a").unwrap(), RoomName::parse("b").unwrap());
        // A room unloads once its last peer left.
        let visit = |conn| super::super::PeerInfo {
            conn,
            name: None,
            sub: "test".into(),
            can_write: true,
        };
        let (peer_a, _rx_a) = rooms.get(&a).await.unwrap().join(visit(1)).unwrap();
        let (peer_b, _rx_b) = rooms.get(&b).await.unwrap().join(visit(2)).unwrap();
        drop(peer_a);
        rooms.wait_unloaded(&a).await;
        assert_eq!(
            store.releases.load(Ordering::SeqCst),
            0,
            "b is still loaded"
        );
        drop(peer_b);
        rooms.wait_unloaded(&b).await;
        assert_eq!(store.releases.load(Ordering::SeqCst), 1);
        rooms.shutdown().await;
    }
}
