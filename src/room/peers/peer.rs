//! A peer as the room sees it: its identity, its bounded outbound queue, and the switch the
//! room uses to close it (with a reason the network edge turns into a close code).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use yrs::block::ClientID;

use crate::room::RoomError;

static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

/// A new process-unique connection id (a WebSocket peer, or a server action writing on a
/// person's behalf, which writes as a connection of its own).
pub fn next_conn_id() -> u64 {
    NEXT_CONN.fetch_add(1, Ordering::Relaxed)
}

/// Who a connection is, as established by the network edge before it joins a room.
#[derive(Debug, Clone)]
pub struct PeerInfo {
    /// Process-unique connection id ([`next_conn_id`]).
    pub conn: u64,
    /// The user's `sub` claim (`anonymous` when auth is off).
    pub sub: String,
    /// The user's `name` claim, when the token has one (logged with their updates).
    pub name: Option<String>,
    /// False for read-only peers: their document updates are dropped.
    pub can_write: bool,
}

/// Shared between the room and the connection: closing it ends the connection.
#[derive(Debug, Default)]
pub struct PeerControl {
    cancel: CancellationToken,
    reason: OnceLock<RoomError>,
}

impl PeerControl {
    /// Asks the connection to close; the first reason given wins.
    pub fn kick(&self, reason: RoomError) {
        let _ = self.reason.set(reason);
        self.cancel.cancel();
    }

    /// Resolves when the room asked this peer to close.
    pub async fn kicked(&self) {
        self.cancel.cancelled().await
    }

    /// Why the room closed this peer, once it did.
    pub fn reason(&self) -> Option<&RoomError> {
        self.reason.get()
    }
}

/// The room's record of a joined peer.
pub(crate) struct PeerLink {
    pub tx: mpsc::Sender<Bytes>,
    pub control: Arc<PeerControl>,
    /// Awareness client ids this connection introduced (removed when it leaves).
    pub awareness_ids: HashSet<ClientID>,
    /// The token subject of the connection (whose awareness a fairy may read for its prompt).
    pub sub: String,
}

impl PeerLink {
    /// Queues a frame; a full queue closes the peer (it will resync on reconnect) rather than
    /// silently dropping a CRDT update. Returns false when the peer must be removed.
    pub fn send(&self, frame: Bytes) -> bool {
        let len = frame.len() as u64;
        match self.tx.try_send(frame) {
            Ok(()) => {
                crate::metrics::global().bytes_out.inc_by(len);
                true
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.control.kick(RoomError::SlowConsumer);
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }
}
