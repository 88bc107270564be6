//! The pipeline's intake: the step after a transaction is applied to the room's document.
//! The document's update observer hands every update it emits, whoever wrote it, to the
//! room's queue ([`PendingQueue`]) — to be logged with its actor and fence, or, when another
//! node made it durable already, only delivered — and keeps in step with the document what
//! the room derives from it: its size estimate ([`DocSize`]), the tail of its cold-load answer
//! ([`ColdCache`]) and, once built, its root index ([`RootIndex`]).
//!
//! Runs inside the document's write transaction (yrs calls the observer there): it takes the
//! root index's lock after the document's, as every other taker does, and does no I/O.

use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::pending::{Pending, PendingQueue};
use crate::origin::TxnOrigin;
use crate::room::RoomError;
use crate::room::peers::cold::ColdCache;
use crate::room::peers::remote::REMOTE_CONN;
use crate::room::vet::decode::walk_emitted;
use crate::room::vet::roots::RootIndex;
use crate::room::vet::size::DocSize;
use crate::room::writes::actors::Actors;

/// What the observer feeds: shared with the room, which keeps its own handles.
pub(crate) struct Intake {
    /// The durable-then-broadcast queue.
    pub pending: Arc<PendingQueue>,
    /// The document's size estimate, grown by every update.
    pub size: Arc<DocSize>,
    /// The cold-load answer, whose tail every update extends.
    pub cold: Arc<ColdCache>,
    /// Where the document's items are, fed once built (at the first peer update).
    pub roots: Arc<Mutex<RootIndex>>,
    /// Who writes with which origin, logged with every update.
    pub actors: Arc<Actors>,
}

impl Intake {
    /// Observes `doc` for as long as it lives.
    pub(crate) fn observe(self, doc: &yrs::Doc) -> Result<(), RoomError> {
        doc.observe_update_v1(
            "fairyring-room",
            move |txn: &yrs::TransactionMut, event: &yrs::UpdateEvent| {
                self.on_update(txn.origin(), Bytes::from(event.update.clone()));
            },
        )
        .map_err(|_| RoomError::Closed)
    }

    /// One update the document emitted, in a transaction of `origin`.
    fn on_update(&self, origin: Option<&yrs::Origin>, update: Bytes) {
        let from = match origin.and_then(TxnOrigin::parse) {
            Some(TxnOrigin::Client { conn, .. }) => Some(conn),
            _ => None,
        };
        self.size.grow(update.len() as u64);
        self.cold.extend(&update);
        let mut index = self.roots.lock().unwrap_or_else(|p| p.into_inner());
        if index.is_built()
            && let Some(walked) = walk_emitted(&update)
        {
            walked.record_in(&mut index);
        }
        if from == Some(REMOTE_CONN) {
            // Another node's update, durable already: delivered, not stored again.
            self.pending.push(Pending::Remote { update });
        } else {
            let origin = origin.map(|o| o.as_ref());
            self.pending.push(Pending::Update {
                update,
                from,
                actor: self.actors.of(origin),
                fence: self.actors.fence_of(origin),
            });
        }
    }
}
