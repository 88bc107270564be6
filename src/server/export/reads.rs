//! What an export draws from: the page ids and shapes of a room, read inside a render slot.
//!
//! A loaded room is read from its live document in one short transaction. A room that is not
//! loaded is decoded from what the store holds, which is the costly part of an export of a
//! large room: a 50,000-shape room takes 0.5–1 s and about 300 MB of yrs items for a moment
//! (docs/benchmarks.md, "Exports beside people"). So decoding is bounded: one decode at a time
//! in the server, and its result (the page ids and shapes, about 16 MB there, not the document)
//! is kept for [`KEEP`] for the room at that sequence number, so that the concurrent exports of
//! one room share one decode. After a decode the allocator is asked to give the freed document
//! back to the system ([`crate::room::reclaim`]).
//!
//! Owns the cache only; reading rooms is [`crate::room::Rooms::read`]'s, drawing the renderer's.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use yrs::{Map, ReadTxn, Transact};

use crate::canvas::render::{Budget, RenderError};
use crate::canvas::schema::PAGES;
use crate::canvas::shape::{Shape, list_shapes};
use crate::ids::RoomName;
use crate::room::registry::ReadSource;

/// How long a decoded room serves further exports of it (unchanged: same sequence number).
pub const KEEP: Duration = Duration::from_secs(60);
/// Decoded rooms kept at most.
const MAX_KEPT: usize = 4;

/// A room's pages and shapes, as an export reads them.
#[derive(Debug, Default)]
pub struct PageShapes {
    /// Every page id.
    pub pages: HashSet<String>,
    /// Every readable shape.
    pub shapes: Vec<Shape>,
}

impl PageShapes {
    /// The pages and shapes of a document, read in `txn`.
    pub fn read<T: ReadTxn>(txn: &T) -> Self {
        let pages = txn
            .get_map(PAGES)
            .map(|p| p.keys(txn).map(str::to_owned).collect())
            .unwrap_or_default();
        PageShapes {
            pages,
            shapes: list_shapes(txn),
        }
    }
}

struct Kept {
    room: RoomName,
    seq: u64,
    read: Arc<PageShapes>,
    at: Instant,
}

/// The server's reads for exports (see the module docs).
#[derive(Default)]
pub struct ExportReads {
    /// Held while a stored room is decoded: one decode at a time.
    decoding: Mutex<()>,
    kept: Arc<Mutex<Vec<Kept>>>,
}

impl ExportReads {
    fn kept(&self) -> MutexGuard<'_, Vec<Kept>> {
        lock(&self.kept)
    }

    fn find(&self, room: &RoomName, seq: u64) -> Option<Arc<PageShapes>> {
        let mut kept = self.kept();
        kept.retain(|k| k.at.elapsed() < KEEP);
        kept.iter()
            .find(|k| &k.room == room && k.seq == seq)
            .map(|k| k.read.clone())
    }

    /// The pages and shapes of `room` from `source` (blocking: call it in the render slot).
    pub fn read(
        &self,
        room: &RoomName,
        source: ReadSource,
        budget: &Budget,
    ) -> Result<Arc<PageShapes>, RenderError> {
        let stored = match source {
            ReadSource::Loaded(doc) => return Ok(Arc::new(PageShapes::read(&doc.transact()))),
            ReadSource::Stored(stored) => stored,
        };
        let seq = stored.last_seq;
        if let Some(read) = self.find(room, seq) {
            return Ok(read);
        }
        let _decoding = self.decoding.lock().unwrap_or_else(|p| p.into_inner());
        // Another export may have decoded it while this one waited.
        if let Some(read) = self.find(room, seq) {
            return Ok(read);
        }
        budget.check()?;
        let doc = ReadSource::Stored(stored).into_doc();
        let read = Arc::new(PageShapes::read(&doc.transact()));
        drop(doc);
        crate::room::reclaim::schedule();
        let mut kept = self.kept();
        if kept.len() >= MAX_KEPT {
            kept.remove(0);
        }
        kept.push(Kept {
            room: room.clone(),
            seq,
            read: read.clone(),
            at: Instant::now(),
        });
        drop(kept);
        // Dropped when it expires, even if no export comes to find it stale, and the memory
        // given back.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let kept = self.kept.clone();
            runtime.spawn(async move {
                tokio::time::sleep(KEEP).await;
                let mut kept = lock(&kept);
                let before = kept.len();
                kept.retain(|k| k.at.elapsed() < KEEP);
                if kept.len() < before {
                    crate::room::reclaim::schedule();
                }
            });
        }
        Ok(read)
    }
}

fn lock(kept: &Mutex<Vec<Kept>>) -> MutexGuard<'_, Vec<Kept>> {
    kept.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canvas::shape::write_shape;
    use crate::store::StoredRoom;
    use yrs::{Doc, StateVector};

    fn stored(shapes: usize) -> StoredRoom {
        let doc = Doc::new();
        crate::canvas::init_schema(&doc, "system");
        {
            let mut txn = doc.transact_mut();
            for i in 0..shapes {
                let base = crate::canvas::format::ShapeBase {
                    index: format!("a{i:06}"),
                    ..Default::default()
                };
                let shape = crate::canvas::format::from_simple(
                    &serde_json::json!({"_type": "rectangle", "shapeId": format!("s{i}"),
                        "x": i as f64 * 10.0, "y": 0, "w": 5, "h": 5}),
                    &base,
                )
                .unwrap_or_else(|e| panic!("{e}"));
                write_shape(&mut txn, &shape);
            }
        }
        let update = doc
            .transact()
            .encode_state_as_update_v1(&StateVector::default());
        StoredRoom {
            snapshot: Some(update.into()),
            updates: Vec::new(),
            last_seq: 7,
        }
    }

    #[tokio::test]
    async fn concurrent_exports_of_one_stored_room_share_one_decode() {
        let reads = ExportReads::default();
        let room = RoomName::parse("r").unwrap_or_else(|e| panic!("{e}"));
        let budget = Budget::unlimited();
        let first = reads
            .read(&room, ReadSource::Stored(stored(3)), &budget)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first.shapes.len(), 3);
        assert!(first.pages.contains("page:main"));
        let again = reads
            .read(&room, ReadSource::Stored(stored(3)), &budget)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(Arc::ptr_eq(&first, &again), "decoded once");
        // A room that changed (another sequence number) is decoded again.
        let mut changed = stored(4);
        changed.last_seq = 8;
        let newer = reads
            .read(&room, ReadSource::Stored(changed), &budget)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(newer.shapes.len(), 4);
    }
}
