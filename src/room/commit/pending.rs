//! The durable-then-broadcast queue of one room.
//!
//! Every transaction on the room's document (from a peer, a fairy or the server) is pushed here
//! by the document's update observer, in document order; replies that reveal document state
//! (sync step 2) are pushed behind the updates they may contain. The room's committer takes the
//! whole queue at once, makes its updates durable in the store (group commit), and only then
//! delivers every item. The queue is bounded: producers wait for space before taking more input.
//!
//! People first: the queue knows whether it holds anything from a peer (an update or a reply,
//! or another node's update). Only then is the committer in a hurry; what the server and its fairies write alone waits for
//! the room's tick, so that all of it goes out as one commit and one frame per peer (see
//! `commit`).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use tokio::sync::{Notify, watch};

/// One queued item.
pub(crate) enum Pending {
    /// A document update (v1), the connection it came from (not echoed back to it) and its
    /// actor's JSON, logged with it.
    Update {
        update: Bytes,
        from: Option<u64>,
        actor: Option<std::sync::Arc<str>>,
        /// The fencing token of the fairy that wrote it, scaled out (docs/scaling.md "Fencing").
        fence: Option<std::sync::Arc<crate::store::Fence>>,
    },
    /// Another node's update, durable already: delivered to every peer, never stored again.
    Remote { update: Bytes },
    /// A frame for one peer that must not overtake the updates queued before it.
    Reply { conn: u64, frame: Bytes },
}

impl Pending {
    /// Whether a peer is waiting for this item (its update, its reply, or another node's
    /// update, which may be a person's on that node: held for the tick it reached this node's
    /// peers 50 ms after the same-node ones; the other node already sends its own server and
    /// fairy writes at most once a tick, so delivering them at once adds no frames).
    fn awaited_by_peer(&self) -> bool {
        match self {
            Pending::Update { from, .. } => from.is_some(),
            Pending::Remote { .. } | Pending::Reply { .. } => true,
        }
    }
}

/// The queued items, how many were ever pushed, and how many of those queued are a peer's.
#[derive(Default)]
struct Queue {
    items: VecDeque<Pending>,
    pushed: u64,
    from_peers: usize,
    /// Someone waits for everything queued to be delivered ([`PendingQueue::flushed`]).
    urgent: bool,
}

/// A bounded FIFO with wake-ups for the committer and for waiting producers.
pub(crate) struct PendingQueue {
    items: Mutex<Queue>,
    /// How many pushed items were delivered (or dropped with their room).
    delivered: watch::Sender<u64>,
    capacity: usize,
    /// Signalled when items arrive.
    pub arrived: Notify,
    /// Signalled when the committer took items.
    space: Notify,
    /// The committer stopped after a failed commit: nothing queued will be delivered, and
    /// nobody waits for it ([`PendingQueue::fail`]).
    failed: AtomicBool,
}

impl PendingQueue {
    pub fn new(capacity: usize) -> Self {
        PendingQueue {
            items: Mutex::new(Queue::default()),
            delivered: watch::Sender::new(0),
            capacity: capacity.max(1),
            arrived: Notify::new(),
            space: Notify::new(),
            failed: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.items.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues an item. Never blocks: observers run inside yrs transactions. The bound is kept
    /// by [`PendingQueue::wait_for_space`], which producers call before taking more input.
    pub fn push(&self, item: Pending) {
        {
            let mut queue = self.lock();
            queue.from_peers += usize::from(item.awaited_by_peer());
            queue.items.push_back(item);
            queue.pushed += 1;
        }
        self.arrived.notify_one();
    }

    /// Takes everything queued, with the push count it brings delivery up to.
    pub fn take_all(&self) -> (Vec<Pending>, u64) {
        let taken = {
            let mut queue = self.lock();
            queue.from_peers = 0;
            queue.urgent = false;
            (queue.items.drain(..).collect(), queue.pushed)
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
        self.lock().items.len()
    }

    /// Whether a queued item is a peer's (its update, a reply to it) or someone waits for the
    /// queue to be delivered: then the committer commits at once instead of waiting for the
    /// room's tick.
    pub fn is_urgent(&self) -> bool {
        let queue = self.lock();
        queue.from_peers > 0 || queue.urgent
    }

    /// Waits until everything pushed before this call was delivered.
    pub async fn flushed(&self) {
        let target = {
            let mut queue = self.lock();
            queue.urgent = true;
            queue.pushed
        };
        let mut delivered = self.delivered.subscribe();
        self.arrived.notify_one();
        // An error means the committer is gone, and nothing will be delivered any more; so
        // does a failed commit (the room stays alive while its writers hold it).
        let _ = delivered
            .wait_for(|done| *done >= target || self.failed.load(Ordering::SeqCst))
            .await;
    }

    /// Waits until the queue is below its capacity (or the room failed).
    pub async fn wait_for_space(&self) {
        loop {
            let notified = self.space.notified();
            if self.len() < self.capacity || self.failed.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }

    /// The committer stopped after a failed commit: whoever waits for delivery or for space
    /// stops waiting, and nothing queued is delivered.
    pub fn fail(&self) {
        self.failed.store(true, Ordering::SeqCst);
        self.delivered.send_modify(|_| {});
        self.space.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_write() -> Pending {
        Pending::Update {
            update: Bytes::from_static(&[0, 0]),
            from: None,
            actor: None,
            fence: None,
        }
    }

    #[test]
    fn what_the_server_writes_alone_waits_for_the_tick_and_peers_do_not() {
        let queue = PendingQueue::new(8);
        queue.push(server_write());
        assert!(
            !queue.is_urgent(),
            "a fairy's write alone waits for the tick"
        );
        queue.push(Pending::Reply {
            conn: 1,
            frame: Bytes::new(),
        });
        assert!(queue.is_urgent());
        let _ = queue.take_all();
        assert!(!queue.is_urgent());
    }

    /// A failed room's writers stop waiting: for delivery and for space.
    #[tokio::test]
    async fn a_failed_queue_releases_its_waiters() {
        let queue = std::sync::Arc::new(PendingQueue::new(1));
        queue.push(server_write());
        let flushed = tokio::spawn({
            let queue = queue.clone();
            async move { queue.flushed().await }
        });
        let space = tokio::spawn({
            let queue = queue.clone();
            async move { queue.wait_for_space().await }
        });
        tokio::task::yield_now().await;
        assert!(!flushed.is_finished() && !space.is_finished());
        queue.fail();
        let both = async { (flushed.await, space.await) };
        let (a, b) = tokio::time::timeout(std::time::Duration::from_secs(5), both)
            .await
            .expect("the waiters return");
        assert!(a.is_ok() && b.is_ok());
    }

    #[test]
    fn another_nodes_update_is_delivered_at_once() {
        // A person's edit on another node reaches this node's peers without waiting for the
        // room's tick (it did: cross-node deliveries were 50 ms behind same-node ones).
        let queue = PendingQueue::new(8);
        queue.push(server_write());
        queue.push(Pending::Remote {
            update: Bytes::from_static(&[0, 0]),
        });
        assert!(queue.is_urgent());
    }
}
