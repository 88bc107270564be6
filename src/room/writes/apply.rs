//! A writer's update applied as a peer's (a REST write goes through here too): vetted against
//! the room ([`crate::room::vet`]: hostile encodings, server-owned roots, nesting, the
//! server's client id), admitted (not while the store's disk is full, nor past
//! `--max-doc-bytes`) and integrated under [`crate::contain`]. Also the size admission of the
//! server's own writes ([`Room::admit_write`]).
//!
//! Owns the order of the checks and the lock order (the document, then the root index); the
//! checks themselves are the vetting's. Touches no socket or store.

use yrs::{Doc, ReadTxn, StateVector, Transact, Update};

use crate::origin::TxnOrigin;
use crate::room::vet::decode::{decode_peer_update, walk_emitted};
use crate::room::vet::size;
use crate::room::{Room, RoomError};

impl Room {
    /// Vets and applies a writer's v1 update exactly as a peer's (a REST write goes through
    /// here too): decoded and checked against the room ([`decode_peer_update`]: server-owned
    /// roots, nesting, hostile encodings), refused when it carries the server's own client id
    /// beyond what the room has or would take the document past `--max-doc-bytes`, then
    /// integrated with `origin`. Returns whether the document changed (an update that repeats
    /// what the room has changes nothing and emits nothing).
    pub(crate) fn apply_peer_update(
        &self,
        origin: TxnOrigin,
        update: &[u8],
    ) -> Result<bool, RoomError> {
        // Lock order: the document, then the index (the update observer, inside a write
        // transaction, takes the index too). The read transaction keeps the document as
        // the index and the state vector describe it until the update is vetted.
        let (decoded, server_end, room_state) = {
            let txn = self.doc.transact();
            let room_state = txn.state_vector();
            let mut index = self.roots.lock().unwrap_or_else(|p| p.into_inner());
            if !index.is_built() {
                let full = txn.encode_state_as_update_v1(&StateVector::default());
                if let Some(walked) = walk_emitted(&full) {
                    walked.record_in(&mut index);
                }
                index.mark_built();
            }
            let (decoded, server_end) =
                decode_peer_update(update, &room_state, &index, self.config.client_id)?;
            (decoded, server_end, room_state)
        };
        // Only the server writes as its own client id: a peer's update may repeat
        // server blocks the room has, never add some (see `decode_peer_update`).
        let server = self.config.client_id;
        let known = room_state.get(&yrs::block::ClientID::new(server));
        if server_end > known {
            return Err(RoomError::BadUpdate(format!(
                "update carries blocks of the server's client id {server} up to clock {server_end}; the room has {known}"
            )));
        }
        // While the store's disk is full, an update that would change the document is refused
        // before it is applied (one that repeats what the room has, a reconnecting reader's
        // sync step 2, passes).
        if self.store.is_full() && adds_to(&decoded, &room_state, &self.doc) {
            return Err(RoomError::StoreFull);
        }
        // An update adds at most its own length to the encoding; near the cap, only what the
        // room lacks of it counts (a sync step 2 may repeat what the room has), and one that
        // adds no content (it only deletes) adds nothing: deleting is always possible.
        self.size.admit_refined(
            update.len() as u64,
            || self.measure(),
            || {
                let sv = yrs::updates::encoder::Encode::encode_v1(&room_state);
                crate::contain::contain(|| {
                    let diff = yrs::diff_updates_v1(update, &sv).ok()?;
                    let adds = <yrs::Update as yrs::updates::decoder::Decode>::decode_v1(&diff)
                        .ok()?
                        .state_vector();
                    Some(if adds.is_empty() {
                        0
                    } else {
                        diff.len() as u64
                    })
                })
                .ok()
                .flatten()
                .unwrap_or(update.len() as u64)
            },
        )?;
        self.apply_client_update(origin, decoded)
    }

    /// The exact size of the document's full-state encoding.
    pub(crate) fn measure(&self) -> u64 {
        let txn = self.doc.transact();
        txn.encode_state_as_update_v1(&StateVector::default()).len() as u64
    }

    /// Whether a server write that adds at most `bound` bytes keeps the document within
    /// `--max-doc-bytes` (a fairy's action, checked before its transaction; see [`size`] and,
    /// inside a transaction, [`Room::admit_in`]).
    pub fn admit_write(&self, bound: u64) -> Result<(), size::TooLarge> {
        self.size.admit(bound, || self.measure())
    }

    /// Applies a peer's decoded update. yrs is not panic-free on hostile input; a panic while
    /// integrating is contained here, logged and answered like any invalid update.
    /// Returns whether the document changed.
    pub(crate) fn apply_client_update(
        &self,
        origin: TxnOrigin,
        update: Update,
    ) -> Result<bool, RoomError> {
        let applied = crate::contain::contain(std::panic::AssertUnwindSafe(|| {
            let mut txn = self.doc.transact_mut_with(origin);
            txn.apply_update(update).map(|()| txn.has_changes())
        }));
        match applied {
            Ok(Ok(changed)) => Ok(changed),
            Ok(Err(error)) => Err(RoomError::BadUpdate(error.to_string())),
            Err(panic) => {
                tracing::error!(room = %self.name, %panic, "yrs panicked while applying a peer's update");
                Err(RoomError::BadUpdate(
                    "update could not be integrated".into(),
                ))
            }
        }
    }
}

/// Whether `update` would change a document whose state vector is `room_state`: blocks past
/// it, or deletions the document has not made (checked only while the store is full).
fn adds_to(update: &yrs::Update, room_state: &StateVector, doc: &Doc) -> bool {
    let theirs = update.state_vector();
    if theirs
        .iter()
        .any(|(client, clock)| *clock > room_state.get(client))
    {
        return true;
    }
    let deletes = update.delete_set();
    if deletes.is_empty() {
        return false;
    }
    let deleted = doc.transact().snapshot().delete_set;
    deletes.iter().any(|(client, ranges)| {
        let Some((_, made)) = deleted.iter().find(|(c, _)| *c == client) else {
            return true;
        };
        // The document's ranges are merged: a deletion it made lies within one of them.
        ranges.iter().any(|range| {
            !made
                .iter()
                .any(|done| done.start <= range.start && range.end <= done.end)
        })
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::ids::RoomName;
    use crate::protocol;
    use crate::room::vet::decode::tests::{FUZZ_FIND, json_updates};
    use crate::room::{PeerInfo, RoomConfig, Rooms};
    use crate::store::Store;
    use yrs::{Array, WriteTxn};

    /// Through the real apply path: the writer is refused, the room is untouched, the other
    /// peer hears nothing and stays joined, and the document still encodes and reloads.
    #[tokio::test]
    async fn refused_json_update_leaves_the_room_untouched() {
        let store: Arc<dyn Store> = Arc::new(crate::store::memory::MemoryStore::default());
        let config = RoomConfig::from_serve(&crate::config::ServeConfig::for_test());
        let rooms = Rooms::new(store, config, 4);
        let room = rooms
            .get(&RoomName::parse("json").expect("name"))
            .await
            .expect("room");
        let info = |conn, can_write| PeerInfo {
            conn,
            name: None,
            sub: format!("u{conn}"),
            can_write,
        };
        let (reader, mut reader_rx) = room.join(info(1, false)).expect("join");
        room.flushed().await;
        while reader_rx.try_recv().is_ok() {}
        let before = room
            .doc()
            .transact()
            .encode_state_as_update_v1(&StateVector::default());
        let mut frames: Vec<Vec<u8>> = vec![FUZZ_FIND.to_vec()];
        frames.extend(
            json_updates()
                .into_iter()
                .map(|(_, update)| protocol::update(update).to_vec()),
        );
        for (i, frame) in frames.iter().enumerate() {
            let (writer, _rx) = room.join(info(10 + i as u64, true)).expect("join");
            let error = writer.handle(frame).await.expect_err("refused");
            let (code, metric, reason) = crate::server::error::close_for(&error);
            assert_eq!((code, metric), (1007, "bad_update"), "frame {i}");
            assert!(reason.contains("ContentJSON"), "frame {i}: {reason}");
        }
        room.flushed().await;
        assert!(reader_rx.try_recv().is_err(), "the reader heard nothing");
        assert!(reader.control().reason().is_none(), "the reader stays");
        let after = room
            .doc()
            .transact()
            .encode_state_as_update_v1(&StateVector::default());
        assert_eq!(before, after, "the document is untouched");
        // A legitimate update still goes through and reaches the reader.
        let other = Doc::new();
        let mut txn = other.transact_mut();
        txn.get_or_insert_array("t").insert(&mut txn, 0, "ok");
        let good = protocol::update(txn.encode_update_v1());
        drop(txn);
        let (writer, _rx) = room.join(info(99, true)).expect("join");
        writer.handle(&good).await.expect("accepted");
        room.flushed().await;
        assert!(
            reader_rx.try_recv().is_ok(),
            "the reader got the good update"
        );
        drop((writer, reader));
        rooms.shutdown().await;
    }
}
