//! The cold-load answer of one room: what a peer that knows nothing of the document (sync step
//! 1 with an empty state vector) receives, kept ready so that the room does not walk and
//! re-encode the whole document for every such peer.
//!
//! The answer is a base — a sync step 2 frame holding a full-state encoding (the stored
//! snapshot the room was loaded from, or `encode_state_as_update_v1` at the last compaction or
//! cold load) — plus the tail: every update committed to the document since, in order, as
//! the document's update observer saw them (the same updates the room's log stores). Applying
//! the base and then the tail gives exactly the document's state, as replaying the store does
//! on reload. The tail goes out merged into one update frame after the base.
//!
//! Consistency rests on one rule, kept by the room: the tail is extended inside the document's
//! write transactions (the observer), and the base is replaced only while a read transaction is
//! held, so no update can fall between a full encoding and its installation. The tail is
//! bounded; past the bound the answer is dropped and rebuilt by the next cold load.
//!
//! Owns no document and no I/O: it is given bytes and hands out frames.

use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;

/// Most updates kept in the tail before the answer is dropped.
const MAX_TAIL_UPDATES: usize = 4096;
/// Most tail bytes kept before the answer is dropped.
const MAX_TAIL_BYTES: usize = 8 * 1024 * 1024;

/// A ready answer.
struct Answer {
    /// Sync step 2 frame of a full-state encoding.
    base: Bytes,
    /// Updates committed since `base`, in order.
    tail: Vec<Bytes>,
    tail_bytes: usize,
    /// The tail merged into one update frame, built on first use.
    tail_frame: Option<Bytes>,
}

/// The cold-load answer of a room, or nothing until the next cold load rebuilds it.
#[derive(Default)]
pub(crate) struct ColdCache {
    answer: Mutex<Option<Answer>>,
}

impl ColdCache {
    fn lock(&self) -> MutexGuard<'_, Option<Answer>> {
        self.answer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An answer made of a full-state encoding and the updates committed after it. Call it only
    /// when no transaction can commit in between (the room's constructor, or under a read
    /// transaction). Returns the base frame and the encoding inside it (both share one buffer).
    pub fn install(&self, full_state: Vec<u8>, tail: Vec<Bytes>) -> (Bytes, Bytes) {
        let state_len = full_state.len();
        let base = crate::protocol::sync_step2(full_state);
        let tail_bytes = tail.iter().map(Bytes::len).sum();
        let answer = Answer {
            base: base.clone(),
            tail,
            tail_bytes,
            tail_frame: None,
        };
        let fits = answer.tail.len() <= MAX_TAIL_UPDATES && tail_bytes <= MAX_TAIL_BYTES;
        *self.lock() = fits.then_some(answer);
        // The frame is its header followed by the encoding.
        let update = base.slice(base.len() - state_len..);
        (base, update)
    }

    /// Drops the answer (the next cold load rebuilds it).
    pub fn clear(&self) {
        *self.lock() = None;
    }

    /// Appends a committed update to the tail; called by the document's update observer.
    pub fn extend(&self, update: &Bytes) {
        let mut guard = self.lock();
        let Some(answer) = guard.as_mut() else {
            return;
        };
        if answer.tail.len() >= MAX_TAIL_UPDATES
            || answer.tail_bytes + update.len() > MAX_TAIL_BYTES
        {
            *guard = None;
            return;
        }
        answer.tail_bytes += update.len();
        answer.tail.push(update.clone());
        answer.tail_frame = None;
    }

    /// The frames of the answer — the base, then the merged tail if any — or `None` when it
    /// must be rebuilt. Call it under a read transaction, so the tail cannot move meanwhile.
    pub fn frames(&self) -> Option<Vec<Bytes>> {
        let (base, tail) = {
            let guard = self.lock();
            let answer = guard.as_ref()?;
            if answer.tail.is_empty() {
                return Some(vec![answer.base.clone()]);
            }
            if let Some(frame) = &answer.tail_frame {
                return Some(vec![answer.base.clone(), frame.clone()]);
            }
            (answer.base.clone(), answer.tail.clone())
        };
        // Merged outside the lock; the caller's read transaction keeps the tail as it is.
        let merged = match tail.as_slice() {
            [one] => one.to_vec(),
            many => match yrs::merge_updates_v1(many) {
                Ok(merged) => merged,
                Err(error) => {
                    tracing::warn!(%error, "could not merge the cold-load tail; rebuilding");
                    self.clear();
                    return None;
                }
            },
        };
        let frame = crate::protocol::update(merged);
        let mut guard = self.lock();
        if let Some(answer) = guard.as_mut()
            && answer.tail.len() == tail.len()
        {
            answer.tail_frame = Some(frame.clone());
        }
        Some(vec![base, frame])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use yrs::types::ToJson;
    use yrs::updates::decoder::Decode;
    use yrs::{Doc, GetString, Map, ReadTxn, StateVector, Text, Transact, Update, WriteTxn};

    fn edit<R>(doc: &Doc, f: impl FnOnce(&mut yrs::TransactionMut) -> R) -> Bytes {
        let mut txn = doc.transact_mut();
        let _ = f(&mut txn);
        Bytes::from(txn.encode_update_v1())
    }

    /// Applies the answer's frames to a fresh document.
    fn replay(frames: &[Bytes]) -> Doc {
        let doc = Doc::new();
        for frame in frames {
            match yrs::sync::Message::decode_v1(frame) {
                Ok(yrs::sync::Message::Sync(
                    yrs::sync::SyncMessage::SyncStep2(u) | yrs::sync::SyncMessage::Update(u),
                )) => {
                    let update = Update::decode_v1(&u).expect("update");
                    doc.transact_mut().apply_update(update).expect("apply");
                }
                other => panic!("unexpected frame {other:?}"),
            }
        }
        doc
    }

    fn state(doc: &Doc) -> (yrs::Snapshot, Option<yrs::Any>, String) {
        let txn = doc.transact();
        let map = txn.get_map("m").map(|m| m.to_json(&txn));
        let text = txn.get_text("t").map(|t| t.get_string(&txn));
        (txn.snapshot(), map, text.unwrap_or_default())
    }

    #[test]
    fn base_and_tail_replay_to_the_document() {
        let doc = Doc::with_client_id(7);
        edit(&doc, |txn| {
            txn.get_or_insert_map("m").insert(txn, "a", 1);
            txn.get_or_insert_text("t").insert(txn, 0, "hello world");
        });
        let cache = ColdCache::default();
        let full = doc
            .transact()
            .encode_state_as_update_v1(&StateVector::default());
        let (frame, base) = cache.install(full.clone(), Vec::new());
        assert_eq!(base.as_ref(), full.as_slice());
        assert_eq!(frame, crate::protocol::sync_step2(full.clone()));
        assert_eq!(cache.frames().map(|f| f.len()), Some(1));
        // Updates, a deletion, a text edit: the tail follows.
        for update in [
            edit(&doc, |txn| {
                txn.get_or_insert_map("m").insert(txn, "b", "two")
            }),
            edit(&doc, |txn| {
                txn.get_or_insert_map("m").remove(txn, "a");
            }),
            edit(&doc, |txn| {
                txn.get_or_insert_text("t").remove_range(txn, 0, 6)
            }),
        ] {
            cache.extend(&update);
        }
        let frames = cache.frames().expect("answer");
        assert_eq!(frames.len(), 2, "base and merged tail");
        assert_eq!(state(&replay(&frames)), state(&doc));
        // The merged tail is kept until the next update.
        assert_eq!(cache.frames(), Some(frames));
        cache.extend(&edit(&doc, |txn| {
            txn.get_or_insert_map("m").insert(txn, "c", 3)
        }));
        assert_eq!(
            state(&replay(&cache.frames().expect("answer"))),
            state(&doc)
        );
    }

    #[test]
    fn the_tail_is_bounded() {
        let doc = Doc::with_client_id(9);
        let cache = ColdCache::default();
        cache.install(
            doc.transact()
                .encode_state_as_update_v1(&StateVector::default()),
            Vec::new(),
        );
        for i in 0..MAX_TAIL_UPDATES {
            cache.extend(&edit(&doc, |txn| {
                txn.get_or_insert_map("m").insert(txn, "k", i as u32)
            }));
        }
        assert!(cache.frames().is_some());
        cache.extend(&edit(&doc, |txn| {
            txn.get_or_insert_map("m").insert(txn, "k", 0)
        }));
        assert!(cache.frames().is_none(), "dropped past the bound");
        // Extending nothing keeps nothing.
        cache.extend(&Bytes::from_static(&[0, 0]));
        assert!(cache.frames().is_none());
        // An install over the bound keeps nothing either.
        let tail = vec![Bytes::from_static(&[0, 0]); MAX_TAIL_UPDATES + 1];
        cache.install(vec![0, 0], tail);
        assert!(cache.frames().is_none());
    }
}
