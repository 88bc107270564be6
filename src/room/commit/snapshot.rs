//! Building a room's snapshot off its live document (docs/storage.md "Compaction"): from what
//! the store holds, in a private document, on one thread of the process's own at background
//! priority ([`crate::priority`]). People's updates never wait for it; the fairies' threads and
//! this one share what people leave.
//!
//! One thread for every room: snapshots are built one at a time, and the memory a build takes
//! (the document, once more) is reused by the next build instead of each build leaving it in
//! an allocator arena of its own (a thread per build took RSS from 166 to 416 MB).
//!
//! The same thread builds the history's checkpoints ([`run`], from `history::checkpoint`):
//! the same kind of work, one at a time beside snapshots.
//!
//! Owns the thread and its queue; knows nothing of logs or sequence numbers.

use std::sync::{OnceLock, mpsc};

use bytes::Bytes;
use yrs::{ReadTxn, StateVector, Transact};

use crate::store::StoredRoom;

/// A build for the thread (it sends its outcome back itself).
type Job = Box<dyn FnOnce() + Send>;

static QUEUE: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();

fn start() -> Option<mpsc::Sender<Job>> {
    let (tx, rx) = mpsc::channel::<Job>();
    let spawned = std::thread::Builder::new()
        .name("snapshots".into())
        .spawn(move || {
            crate::priority::lower_current_thread();
            for job in rx {
                job();
            }
        });
    match spawned {
        Ok(_) => Some(tx),
        Err(error) => {
            tracing::warn!(%error, "no snapshot thread: live rooms are not compacted");
            None
        }
    }
}

/// A full-state v1 update of everything `stored` holds (entries that cannot be decoded are
/// skipped, as a load skips them).
fn build_now(stored: StoredRoom) -> Bytes {
    let doc = crate::room::vet::decode::doc_from_stored(&stored);
    drop(stored);
    let txn = doc.transact();
    Bytes::from(txn.encode_state_as_update_v1(&StateVector::default()))
}

/// [`build_now`] on the snapshot thread; `None` if there is no such thread.
pub async fn build(stored: StoredRoom) -> Option<Bytes> {
    run(move || build_now(stored)).await
}

/// Runs `work` on the snapshot thread, after the builds queued before it; `None` if there is
/// no such thread (or `work` panicked).
pub(crate) async fn run<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let queue = QUEUE.get_or_init(start).as_ref()?;
    let (done, built) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        // The caller may have stopped waiting (the process is ending): nothing to do.
        match crate::contain::contain(std::panic::AssertUnwindSafe(work)) {
            Ok(outcome) => {
                let _ = done.send(outcome);
            }
            Err(panic) => tracing::error!(%panic, "a snapshot build panicked"),
        }
    });
    queue.send(job).ok()?;
    built.await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use yrs::{Doc, GetString, Text, Update, updates::decoder::Decode};

    #[tokio::test]
    async fn a_snapshot_holds_the_stored_snapshot_and_updates() {
        let doc = Doc::new();
        let text = doc.get_or_insert_text("t");
        let first = {
            let mut txn = doc.transact_mut();
            text.insert(&mut txn, 0, "hello");
            txn.encode_update_v1()
        };
        let second = {
            let mut txn = doc.transact_mut();
            text.insert(&mut txn, 5, " world");
            txn.encode_update_v1()
        };
        let stored = StoredRoom {
            snapshot: Some(Bytes::from(first)),
            updates: vec![Bytes::from(second)],
            last_seq: 2,
        };
        let snapshot = build(stored).await.unwrap_or_default();
        let rebuilt = Doc::new();
        let update = Update::decode_v1(&snapshot).unwrap_or_else(|e| panic!("{e}"));
        rebuilt
            .transact_mut()
            .apply_update(update)
            .unwrap_or_else(|e| panic!("{e}"));
        let t = rebuilt.get_or_insert_text("t");
        assert_eq!(t.get_string(&rebuilt.transact()), "hello world");
    }
}
