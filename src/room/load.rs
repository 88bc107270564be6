//! A room's document built from what the store holds (docs/storage.md): the stored snapshot
//! and log replayed into a fresh document, a new room's schema, and what the room derives
//! from them at load — its size estimate (see [`crate::room::vet::size`]) and the cold-load answer
//! (see [`ColdCache`]) — before anything observes the document.
//!
//! Owns the load only: no I/O (the registry read the store), no peer, no queue.

use std::sync::Arc;

use bytes::Bytes;
use yrs::{Doc, ReadTxn, Transact};

use super::RoomConfig;
use super::peers::cold::ColdCache;
use super::vet::decode::decode_update;
use super::vet::size::DocSize;
use crate::ids::RoomName;
use crate::origin::TxnOrigin;
use crate::store::StoredRoom;

/// A room's document as loaded, with what the room starts from.
pub(super) struct Loaded {
    pub doc: Doc,
    /// A new room's schema, stored only with the room's first real write.
    pub unwritten_schema: Option<Bytes>,
    pub size: Arc<DocSize>,
    pub cold: Arc<ColdCache>,
    /// The sequence number of the last stored update.
    pub last_seq: u64,
}

impl Loaded {
    /// The document of room `name` built from `stored`; new rooms get the schema roots.
    pub(super) fn from_stored(name: &RoomName, stored: StoredRoom, config: &RoomConfig) -> Self {
        let doc = Doc::with_client_id(config.client_id);
        let is_new = stored.snapshot.is_none() && stored.updates.is_empty();
        // What it was built from bounds its encoding (see `size`); the schema is added below.
        let stored_bytes: u64 = stored
            .snapshot
            .iter()
            .chain(stored.updates.iter())
            .map(|b| b.len() as u64)
            .sum();
        let all_applied = replay(name, &doc, &stored);
        warn_of_subdocuments(name, &doc);
        // A room never written gets the schema (docs/document-schema.md) now, so that its
        // first peers see the page, but it is stored only with the room's first real write
        // (`commit`): a join or a read of a room that nobody writes leaves nothing behind. The
        // schema is deterministic, so building it again on the next load gives the very items
        // a peer may already hold.
        let unwritten_schema = is_new.then(|| {
            let mut txn = doc.transact_mut_with(TxnOrigin::System);
            crate::canvas::schema::init_schema_in(&mut txn);
            Bytes::from(txn.encode_update_v1())
        });
        let size = Arc::new(DocSize::new(
            config.max_doc_bytes,
            stored_bytes + unwritten_schema.as_ref().map_or(0, |s| s.len() as u64),
        ));
        let cold = Arc::new(ColdCache::default());
        // The cold-load answer starts as what the document was built from: the stored snapshot
        // (a full-state encoding) and the log after it, with no re-encoding of the document.
        // An unreadable entry leaves it empty, to be rebuilt from the document when needed.
        if all_applied {
            const EMPTY_DOC: &[u8] = &[0, 0];
            let base = stored.snapshot.as_deref().unwrap_or(EMPTY_DOC);
            let log = match &unwritten_schema {
                Some(schema) => vec![schema.clone()],
                None => stored.updates,
            };
            cold.install(base.to_vec(), log);
        }
        Loaded {
            doc,
            unwritten_schema,
            size,
            cold,
            last_seq: stored.last_seq,
        }
    }
}

/// Applies the stored snapshot and log to `doc` in one transaction, skipping (and logging)
/// what cannot be read; whether every entry was applied.
fn replay(name: &RoomName, doc: &Doc, stored: &StoredRoom) -> bool {
    let mut all_applied = true;
    let mut txn = doc.transact_mut_with(TxnOrigin::System);
    for (i, bytes) in stored
        .snapshot
        .iter()
        .chain(stored.updates.iter())
        .enumerate()
    {
        let applied = decode_update(bytes)
            .map_err(|e| e.to_string())
            .and_then(|u| txn.apply_update(u).map_err(|e| e.to_string()));
        if let Err(error) = applied {
            all_applied = false;
            tracing::error!(room = %name, entry = i, %error, "skipping unreadable stored update");
        }
    }
    all_applied
}

/// Peers' subdocuments are refused (`Refusal::Subdocument`), but a room stored before that may
/// hold some: yrs 0.28.1 keeps such a document alive through a reference cycle, so this room's
/// memory is not given back when it unloads.
fn warn_of_subdocuments(name: &RoomName, doc: &Doc) {
    let subdocs = doc.transact().subdoc_guids().count();
    if subdocs > 0 {
        tracing::warn!(room = %name, subdocs, "room holds subdocuments; its memory is not freed when it unloads (yrs 0.28 leaks documents with subdocuments)");
    }
}
