//! Writes: what changes a room's document, and who each change is logged as.
//!
//! # Layout
//! - `apply`: a writer's update (a peer's, a REST write's) vetted against the room
//!   ([`crate::room::vet`]), admitted (store full, `--max-doc-bytes`) and integrated.
//! - `write`: writes the server makes on a person's behalf (REST, restore, rollback), each
//!   logged with that person and answered with its sequence number.
//! - [`write_budget`]: the budget of the fairies' writes (`--fairy-writes-per-sec`).
//! - `actors`: the actor and fencing token logged with each origin's updates.
//! - this file: the room's naming of actors and fences, and its waits for sequence numbers.
//!
//! Writes go through the document: what they change reaches the store and the peers through
//! the commit pipeline (`room::commit`), never from here.

pub(crate) mod actors;
mod apply;
mod write;
pub mod write_budget;

use crate::origin::TxnOrigin;
use crate::room::{Room, RoomError};

impl Room {
    /// Names the actor logged with every update written with `origin` from now on (a fairy's
    /// request — its own origin and its undo manager's, which reverts its tentative versions —
    /// a server action on a person's behalf; peers are named when they join).
    pub fn name_actor(&self, origin: impl Into<yrs::Origin>, actor: &crate::actor::Actor) {
        let origin = origin.into();
        self.actors.set(origin.as_ref(), actor.to_json());
        // A fairy's own writes (not a person's acceptance of its suggestion) carry its fence.
        if let crate::actor::Actor::Fairy {
            id,
            accepted_by: None,
            ..
        } = actor
        {
            self.actors.fence_origin_for(origin.as_ref(), id);
        }
    }

    /// Scaled out, by the node that just took fairy `fairy`'s lease, before it hosts the
    /// fairy: takes the fairy's next fencing token from the store, carried from now on with
    /// every write of the fairy here (docs/scaling.md "Fencing"), so that once another node
    /// takes the fairy over, whatever this node still writes for it is refused by the store.
    /// Nothing on a store that takes no fences (a single node).
    pub async fn take_fence(&self, fairy: &str) -> Result<(), RoomError> {
        match self.store.next_fence(&self.name, fairy).await {
            Ok(Some(generation)) => {
                let origin = yrs::Origin::from(&TxnOrigin::fairy(fairy));
                self.actors.fence_fairy(fairy, generation, origin.as_ref());
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(error) => {
                tracing::warn!(room = %self.name, fairy, %error, "could not take a fairy's fencing token");
                Err(RoomError::Store)
            }
        }
    }

    /// The fencing token fairy `fairy`'s writes carry here, if any.
    pub fn fence_of(&self, fairy: &str) -> Option<u64> {
        self.actors.fence_of_fairy(fairy)
    }

    /// Fairy `fairy`'s hosting here ended: its writes carry no fence any more.
    pub fn drop_fence(&self, fairy: &str) {
        self.actors.unfence_fairy(fairy);
    }

    /// Forgets the actor of `origin` (its updates are logged without one from now on).
    pub fn forget_actor(&self, origin: impl Into<yrs::Origin>) {
        self.actors.remove(origin.into().as_ref());
    }

    /// Waits for the sequence number under which the next update written with connection id
    /// `conn` is logged (a server action writing as a connection of its own). Call
    /// [`Room::forget_seq`] if the write turned out to change nothing.
    pub fn wait_seq(&self, conn: u64) -> tokio::sync::oneshot::Receiver<u64> {
        self.actors.wait_seq(conn)
    }

    /// Stops waiting for the update of `conn`.
    pub fn forget_seq(&self, conn: u64) {
        self.actors.forget_seq(conn);
    }

    /// The budget of the room's fairy writes (docs/fairies.md "People and fairies in one room").
    pub fn fairy_writes(&self) -> &write_budget::WriteBudget {
        &self.fairy_writes
    }
}
