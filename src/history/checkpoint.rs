//! Taking the history's checkpoints (docs/storage.md "History"): every
//! `--history-checkpoint-every` updates a room's committer asks for one, and this builds it
//! from the store — never from the live document — on the snapshot thread at background
//! priority (`room::snapshot`), so no update of the room waits for it.
//!
//! A checkpoint is the room just after update `seq`, built from the version the store would
//! serve for `seq` (the newest checkpoint chain and the updates after it): a delta (everything
//! gained since the chain's head, [`yrs::ReadTxn::encode_diff_v1`]) when that version starts
//! from a checkpoint, else a full state. The deltas add up to about one encoded document, so
//! history costs about one document more than its log, however long it runs. A delta carries
//! only the deletions made since its base ([`delta`]): yrs's own diff repeats the document's
//! whole delete set, and applying that again for every delta of a chain walked every deleted
//! item of the room once per delta (versions took longer the more checkpoints a room had).
//!
//! Owns no state; writes only through [`Store::add_checkpoint`]; must not touch a live room.

use std::sync::Arc;

use yrs::updates::encoder::{Encode, Encoder, EncoderV1};
use yrs::{Doc, IdSet, ReadTxn, StateVector, Transact};

use super::replay::apply_all;
use crate::ids::RoomName;
use crate::store::{Checkpoint, Store, StoredVersion, VersionBase};

/// The history's checkpoints as the rooms take them ([`crate::room::Checkpoints`]; the server
/// gives them to its rooms): [`take`].
pub struct HistoryCheckpoints;

#[async_trait::async_trait]
impl crate::room::Checkpoints for HistoryCheckpoints {
    async fn take(&self, store: &Arc<dyn Store>, room: &RoomName, upto: u64, every: u64) -> u64 {
        take(store, room, upto, every).await
    }
}

/// Makes sure the room has a checkpoint at most `every` updates behind `upto` (the last update
/// the caller knows the store holds): builds and keeps one at `upto` when the newest is
/// further behind. Returns the sequence number the next checkpoint counts from: the newest
/// checkpoint's, or `upto` once one was tried there (kept, lost to another node's, or failed:
/// a failure is logged and tried again `every` updates later, never in a loop).
pub async fn take(store: &Arc<dyn Store>, room: &RoomName, upto: u64, every: u64) -> u64 {
    match store.newest_checkpoint(room).await {
        Ok(Some(newest)) if upto < newest.saturating_add(every) => return newest,
        Ok(_) => {}
        Err(error) => {
            tracing::warn!(%room, %error, "could not read the newest checkpoint; will retry later");
            return upto;
        }
    }
    let checkpoint = match build_streamed(store, room, upto).await {
        Ok(Some(checkpoint)) => checkpoint,
        Ok(None) => {
            tracing::warn!(%room, upto, "no checkpoint built; will retry later");
            return upto;
        }
        Err(error) => {
            tracing::warn!(%room, %error, "could not read the version to checkpoint; will retry later");
            return upto;
        }
    };
    match store.add_checkpoint(room, checkpoint).await {
        Ok(kept) => tracing::debug!(%room, upto, kept, "history checkpoint"),
        Err(error) => {
            tracing::warn!(%room, %error, "could not keep a checkpoint; will retry later")
        }
    }
    upto
}

/// The checkpoint at `upto`, built on the snapshot thread from the version's base and the
/// updates after it, read from the store in batches of at most [`super::BATCH_BYTES`] (a log of
/// 1 MB updates is never held whole); `None` when the store keeps no complete version at
/// `upto` or a stored update cannot be applied.
async fn build_streamed(
    store: &Arc<dyn Store>,
    room: &RoomName,
    upto: u64,
) -> Result<Option<Checkpoint>, crate::store::StoreError> {
    let Some(base) = store.version_base(room, upto).await? else {
        return Ok(None);
    };
    let from = base.base;
    let started = crate::room::snapshot::run(move || {
        let doc = Doc::new();
        apply_all(&doc, base.states.iter().map(|s| s.as_ref())).ok()?;
        let before = doc.transact().snapshot();
        Some((doc, before))
    })
    .await
    .flatten();
    let Some((mut doc, before)) = started else {
        return Ok(None);
    };
    let mut cursor = from.seq();
    while cursor < upto {
        let want = usize::try_from(upto - cursor)
            .unwrap_or(usize::MAX)
            .min(1_024);
        let rows = store
            .history_bounded(room, cursor, want, super::BATCH_BYTES)
            .await?;
        let consecutive = rows
            .iter()
            .enumerate()
            .all(|(i, row)| row.seq == cursor + 1 + i as u64);
        let Some(last) = rows.last().map(|row| row.seq).filter(|_| consecutive) else {
            return Ok(None);
        };
        cursor = last;
        let applied = crate::room::snapshot::run(move || {
            apply_all(&doc, rows.iter().map(|row| row.update.as_ref())).ok()?;
            Some(doc)
        })
        .await
        .flatten();
        let Some(next) = applied else {
            return Ok(None);
        };
        doc = next;
    }
    Ok(crate::room::snapshot::run(move || finish(&doc, &before, from, upto)).await)
}

/// The checkpoint of `version`: a delta on its base checkpoint, or a full state when it starts
/// from the empty document or a snapshot; `None` when a stored update cannot be applied.
pub fn build(version: &StoredVersion) -> Option<Checkpoint> {
    let doc = Doc::new();
    // Each part in a transaction of its own: what the updates delete is collected (its
    // content dropped) when their transaction commits, so the delta carries no dead content.
    apply_all(&doc, version.states.iter().map(|s| s.as_ref())).ok()?;
    let before = doc.transact().snapshot();
    apply_all(&doc, version.updates.iter().map(|u| u.as_ref())).ok()?;
    Some(finish(&doc, &before, version.base, version.seq))
}

/// The checkpoint at `seq` of `doc`, built from `base` whose state was `before`: a delta on a
/// base checkpoint, else a full state.
fn finish(doc: &Doc, before: &yrs::Snapshot, base: VersionBase, seq: u64) -> Checkpoint {
    let txn = doc.transact();
    let (base_seq, data) = match base {
        VersionBase::Checkpoint(at) => {
            (Some(at), delta(&txn, &before.state_map, &before.delete_set))
        }
        VersionBase::Empty | VersionBase::Snapshot(_) => {
            (None, txn.encode_state_as_update_v1(&StateVector::default()))
        }
    };
    Checkpoint {
        seq,
        base: base_seq,
        data: data.into(),
        extends: base.seq(),
    }
}

/// What the document of `txn` gained since the state with state vector `known` and delete set
/// `deleted_before`, as one v1 update: yrs's diff (the blocks `known` lacks, then the whole
/// delete set) with its delete set replaced by only the deletions made since. The delete set is
/// the last part of a v1 update, encoded from the same ordered set [`ReadTxn::snapshot`]
/// gives; should that ever not be the diff's suffix, the diff is kept whole (correct, slower).
fn delta<T: ReadTxn>(txn: &T, known: &StateVector, deleted_before: &IdSet) -> Vec<u8> {
    let diff = txn.encode_diff_v1(known);
    let deleted = txn.snapshot().delete_set;
    let encode = |set: &IdSet| {
        let mut encoder = EncoderV1::new();
        set.encode(&mut encoder);
        encoder.to_vec()
    };
    let Some(blocks) = diff.strip_suffix(encode(&deleted).as_slice()) else {
        tracing::debug!("the diff does not end with the document's delete set; kept whole");
        return diff;
    };
    let mut data = blocks.to_vec();
    data.extend_from_slice(&encode(&deleted.diff(deleted_before)));
    data
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;
    use yrs::{Map, Out};

    /// Logs `n` updates that each move one of three shapes (overwriting its keys).
    async fn log(store: &Arc<dyn Store>, room: &RoomName, doc: &Doc, from: u64, n: u64) {
        let shapes = doc.get_or_insert_map("shapes");
        for i in from..from + n {
            let update = {
                let mut txn = doc.transact_mut();
                shapes.insert(&mut txn, format!("s{}", i % 3), i as f64);
                txn.encode_update_v1()
            };
            store.append(room, vec![update.into()]).await.unwrap();
        }
    }

    fn x_of(version: &StoredVersion, key: &str) -> Option<f64> {
        let doc = Doc::new();
        apply_all(&doc, version.all()).unwrap();
        let shapes = doc.get_or_insert_map("shapes");
        match shapes.get(&doc.transact(), key) {
            Some(Out::Any(yrs::Any::Number(x))) => x.as_f64(),
            _ => None,
        }
    }

    #[tokio::test]
    async fn checkpoints_chain_as_deltas_and_versions_read_through_them() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let room = RoomName::parse("deltas").unwrap();
        let doc = Doc::new();
        log(&store, &room, &doc, 0, 10).await;
        // Nothing yet: a full checkpoint at 10 from the empty document.
        assert_eq!(take(&store, &room, 10, 10).await, 10);
        // Not due: the newest is counted from.
        log(&store, &room, &doc, 10, 5).await;
        assert_eq!(take(&store, &room, 15, 10).await, 10);
        log(&store, &room, &doc, 15, 15).await;
        assert_eq!(take(&store, &room, 20, 10).await, 20);
        assert_eq!(take(&store, &room, 30, 10).await, 30);
        let v30 = store.load_version(&room, 30).await.unwrap().unwrap();
        assert_eq!(v30.base, VersionBase::Checkpoint(30));
        assert_eq!(v30.states.len(), 3, "full, delta, delta");
        assert!(v30.updates.is_empty());
        // A delta holds what changed since its base, not the document again, and only the
        // deletions made since (this workload deletes on every update).
        assert!(v30.states[2].len() < v30.states[0].len() + 64);
        let deleted_at_20 = {
            let doc = Doc::new();
            apply_all(&doc, v30.states[..2].iter().map(|s| s.as_ref())).unwrap();
            doc.transact().snapshot().delete_set
        };
        let delta =
            <yrs::Update as yrs::updates::decoder::Decode>::decode_v1(&v30.states[2]).unwrap();
        assert!(!delta.delete_set().is_empty());
        assert!(
            delta.delete_set().intersect(&deleted_at_20).is_empty(),
            "the delta repeats deletions its base holds"
        );
        for (seq, key, x) in [
            (30, "s2", 29.0),
            (25, "s1", 22.0),
            (21, "s2", 20.0),
            (7, "s0", 6.0),
        ] {
            let version = store.load_version(&room, seq).await.unwrap().unwrap();
            assert_eq!(x_of(&version, key), Some(x), "version {seq}");
        }
    }

    /// One edit of the random logs: which writer, which key, set or delete.
    #[derive(Debug, Clone)]
    struct Edit {
        writer: usize,
        key: u8,
        value: Option<i32>,
        /// Whether the writer first catches up with everything logged so far (else it edits
        /// concurrently with what it has not seen).
        synced: bool,
    }

    fn edits() -> impl proptest::strategy::Strategy<Value = Vec<Edit>> {
        use proptest::prelude::*;
        proptest::collection::vec(
            (
                0..3usize,
                0..5u8,
                proptest::option::weighted(0.8, -50..50i32),
                any::<bool>(),
            )
                .prop_map(|(writer, key, value, synced)| Edit {
                    writer,
                    key,
                    value,
                    synced,
                }),
            1..80,
        )
    }

    fn shapes_json(doc: &Doc) -> yrs::Any {
        use yrs::types::ToJson;
        let shapes = doc.get_or_insert_map("shapes");
        shapes.to_json(&doc.transact())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 128, ..Default::default() })]
        /// Whatever the interleaving of writers and wherever checkpoints fall, every version
        /// read through the checkpoint chain is the log replayed up to it.
        #[test]
        fn every_version_through_the_chain_is_the_log_replayed(
            edits in edits(),
            every in 2..12u64,
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
                let room = RoomName::parse("chains").unwrap();
                let writers: Vec<Doc> = (0..3).map(|i| Doc::with_client_id(10 + i)).collect();
                let server = Doc::new();
                let mut log: Vec<Vec<u8>> = Vec::new();
                let mut from = 0;
                for edit in &edits {
                    let doc = &writers[edit.writer];
                    if edit.synced {
                        let sv = doc.transact().state_vector();
                        let missing = server.transact().encode_diff_v1(&sv);
                        apply_all(doc, [missing.as_slice()]).unwrap();
                    }
                    let update = {
                        let shapes = doc.get_or_insert_map("shapes");
                        let mut txn = doc.transact_mut();
                        let key = format!("k{}", edit.key);
                        match edit.value {
                            Some(v) => {
                                shapes.insert(&mut txn, key, f64::from(v));
                            }
                            None => {
                                shapes.remove(&mut txn, &key);
                            }
                        }
                        txn.encode_update_v1()
                    };
                    apply_all(&server, [update.as_slice()]).unwrap();
                    log.push(update.clone());
                    let seq = store.append(&room, vec![update.into()]).await.unwrap();
                    if seq >= from + every {
                        from = take(&store, &room, seq, every).await;
                    }
                }
                for seq in 1..=log.len() as u64 {
                    let version = store.load_version(&room, seq).await.unwrap().unwrap();
                    let through_chain = Doc::new();
                    apply_all(&through_chain, version.all()).unwrap();
                    let replayed = Doc::new();
                    apply_all(&replayed, log[..seq as usize].iter().map(|u| u.as_slice())).unwrap();
                    assert_eq!(shapes_json(&through_chain), shapes_json(&replayed), "version {seq}");
                }
            });
        }
    }
}
