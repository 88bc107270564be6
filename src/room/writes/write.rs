//! Writes the server makes into a live room on a person's behalf — a REST write, a restore, a
//! rollback — each as one transaction under an origin of its own (a fresh connection id),
//! logged with the person's [`Actor`] and answered with the sequence number it was logged under
//! (docs/storage.md "History").
//!
//! Owns only the naming of the writer, the wait for its sequence number and the document size
//! admission of edits built by the server; the vetting of an update is the peer path's
//! ([`Room::apply_peer_update`]) and the edit itself the caller's. Touches no socket or store.

use std::sync::Arc;

use yrs::{ReadTxn, StateVector, Transact};

use crate::actor::Actor;
use crate::origin::TxnOrigin;
use crate::room::{Room, RoomError};

/// How long a server write waits for its update to be logged before it answers with the
/// room's last sequence number instead.
const LOGGED_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

impl Room {
    /// Writes `edit` into the room as one transaction logged with `actor`; returns the
    /// update's sequence number, or the room's last one when `edit` changed nothing (it says
    /// whether it wrote). An edit that can grow the document checks `--max-doc-bytes` first,
    /// inside its transaction, with [`Room::admit_in`] (a restore and a rollback by their net
    /// growth, [`Room::admit_growth_in`]); an error writes nothing.
    pub async fn write_as(
        self: &Arc<Self>,
        actor: &Actor,
        edit: impl FnOnce(&mut yrs::TransactionMut<'_>) -> Result<bool, RoomError>,
    ) -> Result<u64, RoomError> {
        self.logged_write(actor, |origin| {
            let mut txn = self.doc.transact_mut_with(origin);
            edit(&mut txn)
        })
        .await
    }

    /// Whether a server write that adds at most `bound` bytes keeps the document within
    /// `--max-doc-bytes`, checked inside the write's transaction `txn` before it writes
    /// anything (see [`crate::room::vet::size`]).
    pub fn admit_in(&self, txn: &impl ReadTxn, bound: u64) -> Result<(), RoomError> {
        self.size
            .admit(bound, || {
                txn.encode_state_as_update_v1(&StateVector::default()).len() as u64
            })
            .map_err(RoomError::from)
    }

    /// Whether a server write whose net effect on the document's encoding is `growth` bytes
    /// (negative: it shrinks it; a restore's or a rollback's, measured beforehand on a copy)
    /// keeps the document within `--max-doc-bytes`: one that does not grow the room is always
    /// admitted, even in a room over the cap (docs/protocol.md "Document size").
    pub fn admit_growth_in(&self, txn: &impl ReadTxn, growth: i64) -> Result<(), RoomError> {
        match u64::try_from(growth) {
            Ok(grows) if grows > 0 => self.admit_in(txn, grows),
            _ => Ok(()),
        }
    }

    /// Applies a Yjs v1 update sent through the HTTP API exactly as a peer's (the same vetting
    /// and refusals, [`Room::apply_peer_update`]), logged with `actor`; returns its sequence
    /// number, or the room's last one when the update repeated what the room has.
    pub async fn apply_update_as(
        self: &Arc<Self>,
        actor: &Actor,
        update: &[u8],
    ) -> Result<u64, RoomError> {
        self.logged_write(actor, |origin| {
            self.apply_peer_update(origin.clone(), update)
        })
        .await
    }

    /// Runs `write` (true when it changed the document) under a fresh origin named `actor`, and
    /// waits until its update is durable and logged.
    async fn logged_write(
        self: &Arc<Self>,
        actor: &Actor,
        write: impl FnOnce(&TxnOrigin) -> Result<bool, RoomError>,
    ) -> Result<u64, RoomError> {
        if self.is_closing() {
            return Err(self.failure().error().unwrap_or(RoomError::Closed));
        }
        // Not while the store's disk is full: the write would enter the document unkept.
        self.admit_store_write()?;
        let _lease = self.lease();
        // A producer like a peer: it takes no more input while the room's queue is full.
        self.pending.wait_for_space().await;
        if let Some(error) = self.failure().error() {
            return Err(error);
        }
        let conn = crate::room::peers::peer::next_conn_id();
        let origin = TxnOrigin::Client {
            conn,
            sub: actor.id().to_owned(),
        };
        self.name_actor(&origin, actor);
        let logged = self.wait_seq(conn);
        let wrote = write(&origin);
        self.forget_actor(&origin);
        if !matches!(wrote, Ok(true)) {
            self.forget_seq(conn);
            wrote?;
            // A write that changed nothing: once what is queued went out, the room's last
            // sequence number answers.
            self.flushed().await;
            return Ok(self.committed_seq());
        }
        match tokio::time::timeout(LOGGED_WITHIN, logged).await {
            Ok(Ok(seq)) => Ok(seq),
            // The committer stopped before the update was stored (a failed commit: why).
            Ok(Err(_)) => Err(self.failure().error().unwrap_or(RoomError::Store)),
            Err(_) => {
                // The transaction turned out to emit no update after all.
                self.forget_seq(conn);
                self.flushed().await;
                match self.failure().error() {
                    Some(error) => Err(error),
                    None => Ok(self.committed_seq()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServeConfig;
    use crate::ids::RoomName;
    use crate::room::{RoomConfig, Rooms};
    use crate::store::Store;
    use crate::store::memory::MemoryStore;
    use yrs::{Doc, Map, WriteTxn};

    fn update_setting(root: &str, key: &str, value: &str) -> Vec<u8> {
        let doc = Doc::new();
        let mut txn = doc.transact_mut();
        txn.get_or_insert_map(root).insert(&mut txn, key, value);
        txn.encode_update_v1()
    }

    /// An API update is logged once with its person via `api`; repeating it changes nothing
    /// and answers the same sequence number; one a peer would be refused, or one past the
    /// size cap, is refused the same way and logs nothing.
    #[tokio::test]
    async fn api_updates_are_logged_via_api_and_refused_like_a_peers() {
        let store = Arc::new(MemoryStore::default());
        let config = RoomConfig {
            max_doc_bytes: 4_096,
            ..RoomConfig::from_serve(&ServeConfig::for_test())
        };
        let rooms = Rooms::new(store.clone() as Arc<dyn Store>, config, 4);
        let name = RoomName::parse("api").expect("name");
        let room = rooms.get(&name).await.expect("room");
        let ada = Actor::user("ada", None).via(crate::actor::Via::Api);
        let update = update_setting("shapes", "s1", "hello");
        let seq = room.apply_update_as(&ada, &update).await.expect("applied");
        assert_eq!(
            room.apply_update_as(&ada, &update).await.expect("again"),
            seq
        );
        let refused = room
            .apply_update_as(&ada, &update_setting("meta", "schemaVersion", "9"))
            .await;
        assert!(
            matches!(refused, Err(RoomError::ServerOwned(_))),
            "{refused:?}"
        );
        let big = update_setting("shapes", "s2", &"x".repeat(8_192));
        let refused = room.apply_update_as(&ada, &big).await;
        assert!(
            matches!(refused, Err(RoomError::DocTooLarge(_))),
            "{refused:?}"
        );
        let rows = store.history(&name, 0, 100).await.expect("history");
        let last = rows.last().expect("logged");
        assert_eq!(last.seq, seq);
        assert_eq!(
            last.actor.as_deref(),
            Some(r#"{"kind":"user","id":"ada","via":"api"}"#)
        );
        assert_eq!(rows.iter().filter(|r| r.actor.is_some()).count(), 1);
        rooms.shutdown().await;
    }
}
