//! Who writes in a room, as the room's update observer needs it to log every update with its
//! actor (docs/storage.md "History").
//!
//! Owns the room's registry from a transaction origin (its bytes, see [`crate::origin`]) to the
//! actor's logged JSON, and the waits of those who need to know the sequence number their write
//! was logged under (a restore, a rollback). Entries are set by whoever writes with an origin
//! (a peer when it joins, a fairy when it starts a request, a server action) from identities
//! the server verified; nothing here reads the document. Scaled out, it also keeps the fencing
//! token of each fairy this node hosts (docs/scaling.md "Fencing"), set by the lease keeper
//! before the fairy writes, so that the committer can have the store check it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::store::Fence;

/// The actors of a room's writers, by transaction origin.
#[derive(Default)]
pub(crate) struct Actors {
    by_origin: Mutex<HashMap<Box<[u8]>, Arc<str>>>,
    /// Connections (of a server action) waiting for the sequence number of their update.
    seq_waiters: Mutex<HashMap<u64, oneshot::Sender<u64>>>,
    /// The fencing tokens of the fairies hosted here, scaled out.
    fences: Mutex<Fences>,
    /// Whether `fences` ever held one (a single node never looks it up).
    fenced: AtomicBool,
}

/// The fencing tokens of the fairies this node hosts, by fairy and by the origins they write
/// with.
#[derive(Default)]
struct Fences {
    by_fairy: HashMap<String, Arc<Fence>>,
    by_origin: HashMap<Box<[u8]>, Arc<Fence>>,
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

    fn fences(&self) -> std::sync::MutexGuard<'_, Fences> {
        self.fences.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Carries fairy `fairy`'s fencing token `generation` with every update written with
    /// `origin` (its own) from now on, and with the other origins later named for it.
    pub fn fence_fairy(&self, fairy: &str, generation: u64, origin: &[u8]) {
        let fence = Arc::new(Fence {
            fairy: fairy.to_owned(),
            generation,
        });
        let mut fences = self.fences();
        fences.by_origin.retain(|_, f| f.fairy != fairy);
        fences.by_origin.insert(origin.into(), fence.clone());
        fences.by_fairy.insert(fairy.to_owned(), fence);
        self.fenced.store(true, Ordering::Release);
    }

    /// `origin` writes for fairy `fairy` too (its undo manager's): it carries the fairy's
    /// fencing token, if the fairy has one.
    pub fn fence_origin_for(&self, origin: &[u8], fairy: &str) {
        if !self.fenced.load(Ordering::Acquire) {
            return;
        }
        let mut fences = self.fences();
        if let Some(fence) = fences.by_fairy.get(fairy).cloned() {
            fences.by_origin.insert(origin.into(), fence);
        }
    }

    /// The fencing token of fairy `fairy`, if it has one here.
    pub fn fence_of_fairy(&self, fairy: &str) -> Option<u64> {
        if !self.fenced.load(Ordering::Acquire) {
            return None;
        }
        self.fences().by_fairy.get(fairy).map(|f| f.generation)
    }

    /// Fairy `fairy`'s writes carry no fencing token any more (its hosting here ended).
    pub fn unfence_fairy(&self, fairy: &str) {
        let mut fences = self.fences();
        fences.by_fairy.remove(fairy);
        fences.by_origin.retain(|_, f| f.fairy != fairy);
    }

    /// The fencing token of a transaction with `origin`, if it has one.
    pub fn fence_of(&self, origin: Option<&[u8]>) -> Option<Arc<Fence>> {
        if !self.fenced.load(Ordering::Acquire) {
            return None;
        }
        self.fences().by_origin.get(origin?).cloned()
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

    /// Stops every wait for a sequence number (the room failed: nothing more will be logged);
    /// the waiters see their channel closed.
    pub fn fail_waiters(&self) {
        let dropped = std::mem::take(&mut *self.waiters());
        drop(dropped);
    }

    /// Whether anybody waits for a sequence number (the committer skips the lookups if not).
    pub fn awaited(&self) -> bool {
        !self.waiters().is_empty()
    }
}
