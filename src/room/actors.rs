//! Who writes in a room, as the room's update observer needs it to log every update with its
//! actor (docs/storage.md "History").
//!
//! Owns the room's registry from a transaction origin (its bytes, see [`crate::origin`]) to the
//! actor's logged JSON, and the waits of those who need to know the sequence number their write
//! was logged under (a restore, a rollback). Entries are set by whoever writes with an origin
//! (a peer when it joins, a fairy when it starts a request, a server action) from identities
//! the server verified; nothing here reads the document.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// The actors of a room's writers, by transaction origin.
#[derive(Default)]
pub(crate) struct Actors {
    by_origin: Mutex<HashMap<Box<[u8]>, Arc<str>>>,
    /// Connections (of a server action) waiting for the sequence number of their update.
    seq_waiters: Mutex<HashMap<u64, oneshot::Sender<u64>>>,
}

impl Actors {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Box<[u8]>, Arc<str>>> {
        self.by_origin.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn waiters(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<u64>>> {
        self.seq_waiters.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Names the actor of the transactions with `origin` from now on.
    pub fn set(&self, origin: &[u8], actor: Arc<str>) {
        self.lock().insert(origin.into(), actor);
    }

    /// Forgets the actor of `origin`.
    pub fn remove(&self, origin: &[u8]) {
        self.lock().remove(origin);
    }

    /// The actor of a transaction with `origin`, if one was named.
    pub fn of(&self, origin: Option<&[u8]>) -> Option<Arc<str>> {
        let origin = origin?;
        self.lock().get(origin).cloned()
    }

    /// Waits for the sequence number of the next update logged from connection `conn`.
    pub fn wait_seq(&self, conn: u64) -> oneshot::Receiver<u64> {
        let (tx, rx) = oneshot::channel();
        self.waiters().insert(conn, tx);
        rx
    }

    /// Stops waiting for `conn` (its write changed nothing).
    pub fn forget_seq(&self, conn: u64) {
        self.waiters().remove(&conn);
    }

    /// Tells whoever waits for an update of `conn` its sequence number.
    pub fn logged(&self, conn: u64, seq: u64) {
        let waiter = {
            let mut waiters = self.waiters();
            if waiters.is_empty() {
                return;
            }
            waiters.remove(&conn)
        };
        if let Some(waiter) = waiter {
            let _ = waiter.send(seq);
        }
    }

    /// Whether anybody waits for a sequence number (the committer skips the lookups if not).
    pub fn awaited(&self) -> bool {
        !self.waiters().is_empty()
    }
}
