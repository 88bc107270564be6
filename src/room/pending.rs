//! The durable-then-broadcast queue of one room.
//!
//! Every transaction on the room's document (from a peer, a fairy or the server) is pushed here
//! by the document's update observer, in document order; replies that reveal document state
//! (sync step 2) are pushed behind the updates they may contain. The room's committer takes the
//! whole queue at once, makes its updates durable in the store (group commit), and only then
//! delivers every item. The queue is bounded: producers wait for space before taking more input.

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::Bytes;
use tokio::sync::{Notify, watch};

/// One queued item.
pub(crate) enum Pending {
    /// A document update (v1) and the connection it came from (not echoed back to it).
    Update { update: Bytes, from: Option<u64> },
    /// Another node's update, durable already: delivered to every peer, never stored again.
    Remote { update: Bytes },
    /// A frame for one peer that must not overtake the updates queued before it.
    Reply { conn: u64, frame: Bytes },
}

/// A bounded FIFO with wake-ups for the committer and for waiting producers.
pub(crate) struct PendingQueue {
    /// The queued items and how many were ever pushed.
    items: Mutex<(VecDeque<Pending>, u64)>,
    /// How many pushed items were delivered (or dropped with their room).
    delivered: watch::Sender<u64>,
    capacity: usize,
    /// Signalled when items arrive.
    pub arrived: Notify,
    /// Signalled when the committer took items.
    space: Notify,
}

impl PendingQueue {
    pub fn new(capacity: usize) -> Self {
        PendingQueue {
            items: Mutex::new((VecDeque::new(), 0)),
            delivered: watch::Sender::new(0),
            capacity: capacity.max(1),
            arrived: Notify::new(),
            space: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (VecDeque<Pending>, u64)> {
        self.items.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues an item. Never blocks: observers run inside yrs transactions. The bound is kept
    /// by [`PendingQueue::wait_for_space`], which producers call before taking more input.
    pub fn push(&self, item: Pending) {
        {
            let mut items = self.lock();
            items.0.push_back(item);
            items.1 += 1;
        }
        self.arrived.notify_one();
    }

    /// Takes everything queued, with the push count it brings delivery up to.
    pub fn take_all(&self) -> (Vec<Pending>, u64) {
        let taken = {
            let mut items = self.lock();
            let upto = items.1;
            (items.0.drain(..).collect(), upto)
        };
        self.space.notify_waiters();
        taken
    }

    /// Records that every item up to push count `upto` was delivered.
    pub fn mark_delivered(&self, upto: u64) {
        self.delivered.send_replace(upto);
    }

    /// Number of queued items.
    pub fn len(&self) -> usize {
        self.lock().0.len()
    }

    /// Waits until everything pushed before this call was delivered.
    pub async fn flushed(&self) {
        let target = self.lock().1;
        let mut delivered = self.delivered.subscribe();
        self.arrived.notify_one();
        // An error means the committer is gone, and nothing will be delivered any more.
        let _ = delivered.wait_for(|done| *done >= target).await;
    }

    /// Waits until the queue is below its capacity.
    pub async fn wait_for_space(&self) {
        loop {
            let notified = self.space.notified();
            if self.len() < self.capacity {
                return;
            }
            notified.await;
        }
    }
}
