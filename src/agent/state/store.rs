//! A fairy's private state in the store: its [`FairyState`] (mode, model-facing history, todo,
//! tasks, position) as JSON in the store's fairy-state table, keyed by room and fairy id. It is
//! never written into the room document, so peers never receive it and no writer can change it.
//!
//! Owns the encoding, loading ([`load`]) and the per-fairy [`StateSaver`]: the runtime hands it
//! each new state without waiting (its calls are synchronous), and one background task writes
//! the latest one durably, coalescing states that arrive while a write is in flight (one slot:
//! bounded by construction). [`StateSync`] lets a reader wait until what was handed over is
//! stored. Talks to the store only through the [`Store`] trait; knows nothing of documents.

use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::agent::state::FairyState;
use crate::ids::FairyId;
use crate::ids::RoomName;
use crate::store::{Store, StoreError};

/// The stored form of a state (JSON).
pub fn encode(state: &FairyState) -> Result<Bytes, serde_json::Error> {
    serde_json::to_vec(state).map(Bytes::from)
}

/// A state from its stored form; `None` (logged) when it does not parse.
pub fn decode(fairy: &FairyId, bytes: &[u8]) -> Option<FairyState> {
    match serde_json::from_slice(bytes) {
        Ok(state) => Some(state),
        Err(error) => {
            tracing::warn!(%fairy, %error, "stored fairy state unreadable; starting afresh");
            None
        }
    }
}

/// The fairy's stored state, if any (and readable).
pub async fn load(
    store: &dyn Store,
    room: &RoomName,
    fairy: &FairyId,
) -> Result<Option<FairyState>, StoreError> {
    let bytes = store.side().load_fairy_state(room, fairy.as_str()).await?;
    Ok(bytes.and_then(|b| decode(fairy, &b)))
}

/// Stores `state` now (waiting for it to be durable): for a new fairy, before it is visible.
pub async fn save(
    store: &dyn Store,
    room: &RoomName,
    fairy: &FairyId,
    state: &FairyState,
) -> Result<(), StoreError> {
    let bytes = encode(state).map_err(|e| StoreError::Encoding(e.to_string()))?;
    store
        .side()
        .save_fairy_state(room, fairy.as_str(), bytes)
        .await
}

/// What the saver writes next.
enum Write {
    Save(Bytes),
    Delete,
}

#[derive(Default)]
struct Slot {
    /// The write not started yet (a newer one replaces it).
    next: Option<Write>,
    /// Version of the latest write handed over.
    requested: u64,
    /// No more writes: the task ends once `next` is done.
    closed: bool,
}

struct Shared {
    slot: Mutex<Slot>,
    wake: Notify,
    /// Version of the latest write carried out (stored, or given up after an error).
    done: watch::Sender<u64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn hand_over(&self, write: Write) {
        {
            let mut slot = self.lock();
            if slot.closed {
                return;
            }
            slot.requested += 1;
            slot.next = Some(write);
        }
        self.wake.notify_one();
    }

    fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_one();
    }
}

/// One fairy's background writer of its private state.
pub struct StateSaver {
    shared: Arc<Shared>,
    fairy: FairyId,
    task: Option<JoinHandle<()>>,
}

impl StateSaver {
    /// Starts the writer for `fairy` of `room` (needs a Tokio runtime).
    pub fn spawn(store: Arc<dyn Store>, room: RoomName, fairy: FairyId) -> Self {
        Self::spawn_fenced(store, room, fairy, None)
    }

    /// [`StateSaver::spawn`] for a host holding fencing token `fence` of the fairy
    /// (docs/scaling.md "Fencing"): once another node took the fairy over, what this one still
    /// saves is refused by the store.
    pub fn spawn_fenced(
        store: Arc<dyn Store>,
        room: RoomName,
        fairy: FairyId,
        fence: Option<u64>,
    ) -> Self {
        let shared = Arc::new(Shared {
            slot: Mutex::new(Slot::default()),
            wake: Notify::new(),
            done: watch::channel(0).0,
        });
        let task = tokio::spawn(write_loop(
            shared.clone(),
            store,
            Target {
                room,
                fairy: fairy.clone(),
                fence,
            },
        ));
        StateSaver {
            shared,
            fairy,
            task: Some(task),
        }
    }

    /// Hands over a new state; it replaces one not written yet.
    pub fn save(&self, state: &FairyState) {
        match encode(state) {
            Ok(bytes) => self.shared.hand_over(Write::Save(bytes)),
            Err(error) => tracing::error!(fairy = %self.fairy, %error, "fairy state not saved"),
        }
    }

    /// Deletes the stored state (the fairy was dismissed); replaces a save not written yet.
    pub fn delete(&self) {
        self.shared.hand_over(Write::Delete);
    }

    /// A handle to wait for the writes handed over so far.
    pub fn sync(&self) -> StateSync {
        StateSync {
            shared: self.shared.clone(),
        }
    }

    /// Writes what is pending, then stops the writer. Later saves are not written.
    pub async fn close(&mut self) {
        self.shared.close();
        if let Some(task) = self.task.take()
            && let Err(error) = task.await
        {
            tracing::error!(fairy = %self.fairy, %error, "fairy state writer failed");
        }
    }
}

impl Drop for StateSaver {
    fn drop(&mut self) {
        // The task writes what is pending and ends on its own.
        self.shared.close();
    }
}

/// Waits for a fairy's handed-over writes (for reads that must see the latest state).
#[derive(Clone)]
pub struct StateSync {
    shared: Arc<Shared>,
}

impl StateSync {
    /// Resolves once every write handed over before this call was carried out.
    pub async fn caught_up(&self) {
        let wanted = self.shared.lock().requested;
        let mut done = self.shared.done.subscribe();
        // The sender lives in `shared`, which we hold: this cannot fail.
        let _ = done.wait_for(|v| *v >= wanted).await;
    }
}

/// Whose state a saver writes, and the fencing token it writes under.
struct Target {
    room: RoomName,
    fairy: FairyId,
    fence: Option<u64>,
}

async fn write_loop(shared: Arc<Shared>, store: Arc<dyn Store>, target: Target) {
    let Target { room, fairy, fence } = target;
    loop {
        let (next, version, closed) = {
            let mut slot = shared.lock();
            (slot.next.take(), slot.requested, slot.closed)
        };
        let Some(write) = next else {
            if closed {
                return;
            }
            shared.wake.notified().await;
            continue;
        };
        let written = match (write, fence) {
            (Write::Save(bytes), Some(fence)) => {
                store
                    .side()
                    .save_fairy_state_fenced(&room, fairy.as_str(), bytes, fence)
                    .await
            }
            (Write::Save(bytes), None) => {
                store
                    .side()
                    .save_fairy_state(&room, fairy.as_str(), bytes)
                    .await
            }
            (Write::Delete, _) => store.side().delete_fairy_state(&room, fairy.as_str()).await,
        };
        if let Err(StoreError::Fenced { .. }) = written {
            crate::metrics::global().count_fenced(crate::metrics::FencedWrite::State);
            tracing::warn!(room = %room, %fairy, "fairy state not stored: another node hosts the fairy now");
        } else if let Err(error) = written {
            // The next state handed over is written in full; nothing is half-stored.
            tracing::error!(room = %room, %fairy, %error, "fairy state not stored");
        }
        shared.done.send_replace(version);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::modes::Mode;
    use crate::store::memory::MemoryStore;

    fn ids() -> (RoomName, FairyId) {
        (
            RoomName::parse("saver").unwrap_or_else(|e| panic!("{e}")),
            FairyId::parse("f-1").unwrap_or_else(|e| panic!("{e}")),
        )
    }

    #[tokio::test]
    async fn the_latest_state_is_stored_and_a_delete_removes_it() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let (room, fairy) = ids();
        let mut saver = StateSaver::spawn(store.clone(), room.clone(), fairy.clone());
        let sync = saver.sync();
        for mode in [Mode::Soloing, Mode::StandingBy, Mode::WorkingSolo] {
            saver.save(&FairyState {
                mode,
                ..FairyState::default()
            });
        }
        sync.caught_up().await;
        let stored = load(store.as_ref(), &room, &fairy).await;
        assert_eq!(
            stored.ok().flatten().map(|s| s.mode),
            Some(Mode::WorkingSolo)
        );
        saver.save(&FairyState::default());
        saver.delete();
        saver.close().await;
        assert!(matches!(
            load(store.as_ref(), &room, &fairy).await,
            Ok(None)
        ));
        // After close nothing is written, and waiting for it does not hang.
        saver.save(&FairyState::default());
        sync.caught_up().await;
        assert!(matches!(
            load(store.as_ref(), &room, &fairy).await,
            Ok(None)
        ));
    }

    #[tokio::test]
    async fn closing_writes_what_is_pending() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let (room, fairy) = ids();
        let mut saver = StateSaver::spawn(store.clone(), room.clone(), fairy.clone());
        saver.save(&FairyState {
            working: true,
            ..FairyState::default()
        });
        saver.close().await;
        let stored = load(store.as_ref(), &room, &fairy).await;
        assert_eq!(stored.ok().flatten().map(|s| s.working), Some(true));
    }

    #[tokio::test]
    async fn unreadable_stored_state_loads_as_none() {
        let store = MemoryStore::default();
        let (room, fairy) = ids();
        store
            .side()
            .save_fairy_state(&room, fairy.as_str(), Bytes::from_static(b"not json"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(load(&store, &room, &fairy).await, Ok(None)));
    }
}
