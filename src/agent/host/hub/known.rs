//! Read-your-writes across nodes (docs/scaling.md "Fairies across nodes"): a fairy named in a
//! request that this node's copy of the room does not show may have been invited a moment ago
//! on another node, whose update has not reached this node yet. Before such a fairy is called
//! unknown (`404 fairy_not_found`), the store is asked: a fairy whose private state is stored
//! was invited (its state is stored, durably, before its entity appears in the document), and
//! the room's log is then read from the store into this node's document until the entity
//! shows, for [`CATCH_UP_FOR`] at most (past it: `503 fairy_moving`, retry). Neither check reads
//! anything a peer could write: the private state is the server's, and the `fairies` root of
//! the log is written by the server only.
//!
//! Owns that check; takes no lease, starts no fairy, writes nothing.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::agent::host::hub::{FairyHub, HubError};
use crate::agent::state::fairy::list_fairies;
use crate::ids::FairyId;
use crate::room::Room;

/// Longest wait for a stored fairy's entity to reach this node's document.
const CATCH_UP_FOR: Duration = Duration::from_secs(5);
/// Pause between two reads of the room's log while waiting.
const CATCH_UP_POLL: Duration = Duration::from_millis(25);

impl FairyHub {
    /// Whether `room` has fairy `id`, as this node shows it or, scaled out, as the store does
    /// (see the module docs). `Moving` when the store has the fairy but its entity did not reach
    /// this node in time.
    pub(super) async fn knows(&self, room: &Arc<Room>, id: &FairyId) -> Result<bool, HubError> {
        let shown = || list_fairies(room.doc()).iter().any(|e| e.id == *id);
        if shown() {
            return Ok(true);
        }
        if self.inner.leases.is_none() {
            // A single node: its document is the room's whole truth.
            return Ok(false);
        }
        let stored = room
            .store()
            .side()
            .load_fairy_state(room.name(), id.as_str())
            .await?;
        if stored.is_none() {
            return Ok(false);
        }
        let deadline = Instant::now() + CATCH_UP_FOR;
        loop {
            let log = room
                .store()
                .load_since(room.name(), room.committed_seq())
                .await?;
            // Applying again what the document holds changes nothing.
            room.apply_remote(log.snapshot.into_iter().chain(log.updates));
            if shown() {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Err(HubError::Moving);
            }
            tokio::time::sleep(CATCH_UP_POLL).await;
        }
    }
}
