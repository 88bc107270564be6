//! A peer's session in a room: joining (greeted with the server's sync step 1 and the
//! awareness states), each inbound frame handled, leaving (its awareness states removed), and
//! the frames the room sends to one peer or all of them ([`Room::broadcast`], closing a peer
//! whose queue is full). The [`Peer`] handle leaves when dropped.
//!
//! Owns no socket: the server hands frames in and drains each peer's queue.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use tokio::sync::mpsc;
use yrs::sync::{Message, SyncMessage};
use yrs::{ReadTxn, Transact};

use super::peer::{PeerControl, PeerInfo, PeerLink};
use crate::origin::TxnOrigin;
use crate::protocol::{self, ProtocolError};
use crate::room::commit::pending::Pending;
use crate::room::{Room, RoomError};

impl Room {
    /// Joins a peer: returns its handle and the receiving end of its outbound queue, already
    /// holding the server's sync step 1 and the current awareness states.
    pub fn join(
        self: &Arc<Self>,
        info: PeerInfo,
    ) -> Result<(Peer, mpsc::Receiver<Bytes>), RoomError> {
        let (tx, rx) = mpsc::channel(self.config.outbound_queue.max(2));
        let control = Arc::new(PeerControl::default());
        let link = PeerLink {
            tx,
            control: control.clone(),
            awareness_ids: Default::default(),
            sub: info.sub.clone(),
        };
        {
            // Registered and greeted under the peers lock, so no awareness change can fall
            // between the snapshot it receives and the first broadcast it is part of. (A
            // document update in that gap reaches it through its own sync step 1.)
            let mut peers = self.lock_peers();
            if self.closing.load(Ordering::SeqCst) {
                return Err(RoomError::Closed);
            }
            if peers.links.len() >= self.config.max_peers {
                return Err(RoomError::RoomFull);
            }
            link.send(protocol::sync_step1(self.doc.transact().state_vector()));
            if let Some(states) = self.awareness_snapshot() {
                link.send(states);
            }
            peers.links.insert(info.conn, link);
            peers.idle_since = None;
        }
        let origin = TxnOrigin::Client {
            conn: info.conn,
            sub: info.sub.clone(),
        };
        let actor = crate::actor::Actor::user(info.sub.clone(), info.name.clone());
        self.name_actor(&origin, &actor);
        crate::metrics::global().connections.inc();
        Ok((
            Peer {
                room: self.clone(),
                info,
                control,
            },
            rx,
        ))
    }

    pub(crate) fn leave(&self, conn: u64) {
        let removed = {
            let mut peers = self.lock_peers();
            let link = peers.links.remove(&conn);
            if peers.links.is_empty() {
                peers.idle_since = Some(self.now());
            }
            link
        };
        if let Some(link) = removed {
            self.forget_actor(&TxnOrigin::Client {
                conn,
                sub: link.sub.clone(),
            });
            crate::metrics::global().connections.dec();
            self.remove_awareness(link.awareness_ids.into_iter().collect());
        }
    }

    /// Sends a frame to every peer except `except`, closing peers whose queue is full.
    pub(crate) fn broadcast(&self, frame: &Bytes, except: Option<u64>) {
        let mut peers = self.lock_peers();
        peers
            .links
            .retain(|conn, link| Some(*conn) == except || link.send(frame.clone()));
    }

    /// Sends a frame to one peer.
    pub(crate) fn send_to(&self, conn: u64, frame: Bytes) {
        let mut peers = self.lock_peers();
        let keep = peers.links.get(&conn).map(|link| link.send(frame));
        if keep == Some(false) {
            peers.links.remove(&conn);
        }
    }

    /// Handles one inbound frame from a peer.
    pub(crate) async fn handle(&self, info: &PeerInfo, frame: &[u8]) -> Result<(), RoomError> {
        self.pending.wait_for_space().await;
        crate::metrics::global().bytes_in.inc_by(frame.len() as u64);
        match protocol::decode(frame)? {
            Message::Sync(SyncMessage::SyncStep1(sv)) => {
                // Behind every update already queued: nothing reaches a peer before it is durable.
                for frame in self.sync_step2_for(&sv) {
                    self.pending.push(Pending::Reply {
                        conn: info.conn,
                        frame,
                    });
                }
            }
            Message::Sync(SyncMessage::SyncStep2(update) | SyncMessage::Update(update)) => {
                if !info.can_write {
                    crate::metrics::global().drop_message("read_only_update");
                    self.send_to(
                        info.conn,
                        protocol::permission_denied("read-only: document updates are not accepted"),
                    );
                    return Ok(());
                }
                let origin = TxnOrigin::Client {
                    conn: info.conn,
                    sub: info.sub.clone(),
                };
                self.apply_peer_update(origin, &update)?;
                crate::metrics::global().updates_in.inc();
            }
            Message::Awareness(update) => {
                crate::metrics::global().awareness_in.inc();
                self.apply_peer_awareness(info.conn, update)?;
            }
            Message::AwarenessQuery => {
                if let Some(states) = self.awareness_snapshot() {
                    self.send_to(info.conn, states);
                }
            }
            // Clients do not send auth messages; y-websocket ignores them too.
            Message::Auth(_) => {}
            Message::Custom(tag, _) => return Err(ProtocolError::UnknownType(tag).into()),
        }
        Ok(())
    }
}

/// A joined peer's handle; dropping it leaves the room (and removes its awareness states).
pub struct Peer {
    room: Arc<Room>,
    info: PeerInfo,
    control: Arc<PeerControl>,
}

impl Peer {
    /// Handles one inbound binary frame. An error means the connection must be closed.
    pub async fn handle(&self, frame: &[u8]) -> Result<(), RoomError> {
        self.room.handle(&self.info, frame).await
    }

    /// The switch the room uses to close this peer.
    pub fn control(&self) -> &Arc<PeerControl> {
        &self.control
    }

    /// The room joined.
    pub fn room(&self) -> &Arc<Room> {
        &self.room
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.room.leave(self.info.conn);
    }
}
