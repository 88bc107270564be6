//! The room's answer to a peer's sync step 1: the diff against its state vector, or, for a
//! peer that knows nothing of the document (a cold load), the ready answer of [`ColdCache`],
//! rebuilt from the document only when it was dropped.
//!
//! [`ColdCache`]: super::cold::ColdCache

use bytes::Bytes;
use yrs::{ReadTxn, StateVector, Transact};

use crate::protocol;
use crate::room::Room;

impl Room {
    /// The answer to a sync step 1: the diff against the peer's state vector or, for a peer
    /// that knows nothing of this document (a cold load), the ready full-state answer of
    /// [`cold::ColdCache`], rebuilt from the document only when it was dropped.
    pub(crate) fn sync_step2_for(&self, sv: &StateVector) -> Vec<Bytes> {
        // Held throughout: no update can commit between reading the document and the answer.
        let txn = self.doc.transact();
        let knows_nothing = sv.is_empty() || {
            let ours = txn.state_vector();
            sv.iter()
                .all(|(client, clock)| *clock == 0 || ours.get(client) == 0)
        };
        if !knows_nothing {
            return vec![protocol::sync_step2(txn.encode_diff_v1(sv))];
        }
        // Only a base with no tail is answered as it is: a sync step 2 followed by an update
        // frame would let a client (y-websocket's `synced`) see the base alone as "synced"
        // before the tail arrives. With a tail, the answer is encoded afresh and installed.
        if let Some(frames) = self.cold.frames()
            && let [only] = frames.as_slice()
        {
            return vec![only.clone()];
        }
        let full = txn.encode_state_as_update_v1(&StateVector::default());
        self.size.measured(full.len() as u64);
        vec![self.cold.install(full, Vec::new()).0]
    }

    /// Replaces the cold-load answer by a full-state encoding of the document (compaction
    /// makes one anyway); returns that encoding.
    pub(crate) fn encode_and_install_cold(&self) -> Bytes {
        let txn = self.doc.transact();
        let full = txn.encode_state_as_update_v1(&StateVector::default());
        self.size.measured(full.len() as u64);
        self.cold.install(full, Vec::new()).1
    }
}
