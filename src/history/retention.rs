//! The byte cap on a room's kept log (`--history-max-bytes`; docs/history.md "What is kept"):
//! a room whose log holds more than the cap loses its oldest updates, and a checkpoint at the
//! cut keeps every later moment readable.
//!
//! Owns the cap's pass over the store (which rooms are over, where each is cut, the checkpoint
//! and snapshot written at the cut before anything goes); the time-based retention is the
//! store's [`Store::prune_history`]. Writes only through the [`Store`] trait; must not touch a
//! live room, sockets or HTTP.

use std::sync::Arc;

use crate::store::{Store, StoreError, VersionBase};

/// Brings every room's kept log within `max_bytes` of updates, as far as a checkpoint allows:
/// for each room over it, a checkpoint is taken at the cut (the newest update that must go;
/// [`super::checkpoint::take`]), the room's snapshot is brought up to the cut when it lies
/// below (a room loads from its snapshot and the updates after it, so none of those may go),
/// then the log up to the checkpoint is dropped ([`Store::prune_log_to`]). Returns how many
/// updates were dropped. A room whose checkpoint could not be taken keeps its log until the
/// next pass (logged).
pub async fn enforce_cap(store: &Arc<dyn Store>, max_bytes: u64) -> Result<u64, StoreError> {
    let mut dropped = 0;
    for over in store.logs_over(max_bytes).await? {
        let room = &over.room;
        let cut = over.cut;
        // A checkpoint at the cut, unless one at or past it exists already.
        super::checkpoint::take(store, room, cut, 1).await;
        if over.snapshot.is_none_or(|at| at < cut) {
            let Some(base) = store.version_base(room, cut).await? else {
                tracing::warn!(%room, cut, "no version at the history cap's cut; kept");
                continue;
            };
            if base.base != VersionBase::Checkpoint(cut) {
                tracing::warn!(%room, cut, "no checkpoint at the history cap's cut; kept");
                continue;
            }
            let Some(full) = crate::store::checkpoints::squash_off_thread(base.states).await else {
                tracing::warn!(%room, cut, "the checkpoint at the cut does not merge; kept");
                continue;
            };
            store.compact(room, full, cut).await?;
        }
        let gone = store.prune_log_to(room, cut).await?;
        if gone > 0 {
            tracing::info!(%room, dropped = gone, cut, "history over --history-max-bytes dropped");
        }
        dropped += gone;
    }
    Ok(dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::RoomName;
    use crate::store::memory::MemoryStore;
    use yrs::{Map, Transact};

    /// Logs `n` updates that each overwrite one key with `size` bytes.
    async fn log_big(
        store: &Arc<dyn Store>,
        room: &RoomName,
        doc: &yrs::Doc,
        n: usize,
        size: usize,
    ) {
        let shapes = doc.get_or_insert_map("shapes");
        for i in 0..n {
            let update = {
                let mut txn = doc.transact_mut();
                shapes.insert(&mut txn, "big", format!("{i:0>size$}"));
                txn.encode_update_v1()
            };
            store.append(room, vec![update.into()]).await.unwrap();
        }
    }

    fn big_of(version: &crate::store::StoredVersion) -> Option<String> {
        let doc = yrs::Doc::new();
        super::super::replay::apply_all(&doc, version.all()).unwrap();
        let shapes = doc.get_or_insert_map("shapes");
        match shapes.get(&doc.transact(), "big") {
            Some(yrs::Out::Any(yrs::Any::String(s))) => Some(s.to_string()),
            _ => None,
        }
    }

    #[tokio::test]
    async fn a_log_over_the_cap_is_cut_at_a_checkpoint_and_stays_readable() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let room = RoomName::parse("capped").unwrap();
        let doc = yrs::Doc::new();
        // 40 updates of ~10 KB: ~400 KB of log, with no checkpoint and no snapshot.
        log_big(&store, &room, &doc, 40, 10_000).await;
        let cap = 100_000;
        let dropped = enforce_cap(&store, cap).await.unwrap();
        assert!(dropped >= 30, "dropped {dropped}");
        let kept: u64 = store
            .history(&room, 0, 1_000)
            .await
            .unwrap()
            .iter()
            .map(|row| row.update.len() as u64)
            .sum();
        assert!(kept <= cap, "kept {kept} bytes");
        // Within the cap now: another pass drops nothing.
        assert_eq!(enforce_cap(&store, cap).await.unwrap(), 0);
        // The room still loads, and every moment after the cut reads back as it was.
        let last = store.last_seq(&room).await.unwrap();
        assert_eq!(last, 40);
        let first_kept = store.history(&room, 0, 1).await.unwrap()[0].seq;
        for seq in [first_kept - 1, first_kept, 40] {
            let version = store.load_version(&room, seq).await.unwrap().expect("kept");
            assert_eq!(
                big_of(&version),
                Some(format!("{:0>10000}", seq - 1)),
                "version {seq}"
            );
        }
        assert!(store.load_version(&room, 2).await.unwrap().is_none());
        let loaded = store.load(&room).await.unwrap();
        let live = yrs::Doc::new();
        super::super::replay::apply_all(
            &live,
            loaded
                .snapshot
                .iter()
                .chain(loaded.updates.iter())
                .map(|b| b.as_ref()),
        )
        .unwrap();
        let shapes = live.get_or_insert_map("shapes");
        assert_eq!(
            shapes
                .get(&live.transact(), "big")
                .map(|v| v.to_string(&live.transact())),
            Some(format!("{:0>10000}", 39))
        );
    }
}
