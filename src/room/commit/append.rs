//! Appending a commit to the room's log (docs/storage.md): one store call for the whole
//! commit, each update with the fencing token of the fairy that wrote it (docs/scaling.md
//! "Fencing"), a failing store retried a few times. Owns the retry policy and the dropping of
//! a fenced fairy's updates from a commit; what a commit is, is the pipeline's.

use std::sync::Arc;
use std::time::Duration;

use crate::room::{Room, RoomError};
use crate::store::{Fence, Logged, StoreError};

/// Delays between attempts to append to the store before the room gives up.
const STORE_RETRIES: [Duration; 3] = [
    Duration::from_millis(50),
    Duration::from_millis(250),
    Duration::from_secs(1),
];

/// What [`append_fenced`] appended of a commit.
pub(super) struct Appended {
    /// The sequence number of the last update appended.
    pub(super) last_seq: u64,
    /// Per update of the commit, whether it was appended (`false`: its fairy's fence was stale).
    pub(super) kept: Vec<bool>,
}

impl Appended {
    pub(super) fn count(&self) -> u64 {
        self.kept.iter().filter(|kept| **kept).count() as u64
    }

    pub(super) fn refused(&self) -> bool {
        self.kept.contains(&false)
    }
}

/// Appends a commit's `updates`, each with the fencing token of the fairy that wrote it
/// (`fences`, one per update; docs/scaling.md "Fencing"). A stale token (its fairy was taken
/// over by another node while this one stalled) drops that fairy's updates from the commit and
/// the rest (people's updates above all) is appended: the caller then fails the room with
/// [`RoomError::Fenced`], since its document holds writes its log refused. When nothing is
/// left to append, that error at once.
pub(super) async fn append_fenced(
    room: &Arc<Room>,
    updates: Vec<Logged>,
    fences: Vec<Option<Arc<Fence>>>,
) -> Result<Appended, RoomError> {
    let mut kept = vec![true; updates.len()];
    if fences.iter().all(Option::is_none) {
        // No fairy hosted here under a fence wrote in this commit (always so on one node).
        let last_seq = append_with_retry(room, updates, Vec::new())
            .await
            .map_err(|error| room_error(&error))?;
        return Ok(Appended { last_seq, kept });
    }
    loop {
        let kept_ones = || {
            updates
                .iter()
                .zip(&fences)
                .zip(&kept)
                .filter(|(_, kept)| **kept)
        };
        let batch: Vec<Logged> = kept_ones().map(|((update, _), _)| update.clone()).collect();
        let mut distinct: Vec<Fence> = Vec::new();
        for fence in kept_ones().filter_map(|((_, fence), _)| fence.as_deref()) {
            if !distinct.contains(fence) {
                distinct.push(fence.clone());
            }
        }
        match append_with_retry(room, batch, distinct).await {
            Ok(last_seq) => return Ok(Appended { last_seq, kept }),
            Err(StoreError::Fenced { fairy }) => {
                tracing::warn!(room = %room.name, %fairy, "the store refused a fairy's writes: another node hosts it now; the room reloads");
                crate::metrics::global().count_fenced(crate::metrics::FencedWrite::Commit);
                for (kept, fence) in kept.iter_mut().zip(&fences) {
                    if fence.as_ref().is_some_and(|f| f.fairy == fairy) {
                        *kept = false;
                    }
                }
                if !kept.contains(&true) {
                    return Err(RoomError::Fenced);
                }
            }
            Err(error) => return Err(room_error(&error)),
        }
    }
}

/// Appends, retrying a failing store a few times; a refused fence, a full disk and a store
/// that did not answer within its deadline are not retried (the deadline bounds how long a
/// writer waits: retried, a stalled store would keep it four times as long).
async fn append_with_retry(
    room: &Arc<Room>,
    updates: Vec<Logged>,
    fences: Vec<Fence>,
) -> Result<u64, StoreError> {
    let mut attempt = 0;
    loop {
        match room
            .store
            .append_fenced(&room.name, updates.clone(), fences.clone())
            .await
        {
            Ok(seq) => return Ok(seq),
            Err(
                error @ (StoreError::Fenced { .. } | StoreError::Full | StoreError::TimedOut(_)),
            ) => {
                if !matches!(error, StoreError::Fenced { .. }) {
                    tracing::error!(room = %room.name, %error, "store append failed; closing room");
                }
                return Err(error);
            }
            Err(error) => {
                let Some(delay) = STORE_RETRIES.get(attempt) else {
                    tracing::error!(room = %room.name, %error, "store append failed; closing room");
                    return Err(error);
                };
                tracing::warn!(room = %room.name, %error, attempt, "store append failed; retrying");
                tokio::time::sleep(*delay).await;
                attempt += 1;
            }
        }
    }
}

/// What a room's writers are told of a store error.
fn room_error(error: &StoreError) -> RoomError {
    match error {
        StoreError::Full => RoomError::StoreFull,
        StoreError::Fenced { .. } => RoomError::Fenced,
        _ => RoomError::Store,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fairy's write under a stale fence (another node took the fairy over) is refused by
    /// the store; a person's write of the same commit is logged and told its sequence number;
    /// the room unloads, is not read meanwhile, and loads again without the refused write.
    #[tokio::test]
    async fn a_stale_fence_drops_the_fairys_writes_keeps_the_persons_and_reloads() {
        use crate::actor::{Actor, Via};
        use crate::config::ServeConfig;
        use crate::ids::RoomName;
        use crate::origin::TxnOrigin;
        use crate::room::registry::ReadSource;
        use crate::room::{RoomConfig, Rooms};
        use crate::store::Store;
        use crate::store::memory::MemoryStore;
        use yrs::{Doc, Map, ReadTxn, Transact, Update, WriteTxn, updates::decoder::Decode};

        let keys = |doc: &Doc| {
            let txn = doc.transact();
            let mut keys: Vec<String> = txn
                .get_map("shapes")
                .map(|m| m.keys(&txn).map(str::to_owned).collect())
                .unwrap_or_default();
            keys.sort();
            keys
        };
        let store = Arc::new(MemoryStore::default());
        let config = RoomConfig::from_serve(&ServeConfig::for_test());
        let rooms = Rooms::new(store.clone() as Arc<dyn Store>, config, 4);
        let name = RoomName::parse("fenced").expect("name");
        let room = rooms.get(&name).await.expect("room");
        room.take_fence("f-1").await.expect("fence");
        // Another node takes the fairy over while this one's fairy goes on writing.
        assert_eq!(store.next_fence(&name, "f-1").await.expect("next"), Some(2));
        {
            let mut txn = room.doc().transact_mut_with(TxnOrigin::fairy("f-1"));
            let shapes = txn.get_or_insert_map("shapes");
            shapes.insert(&mut txn, "stale", "by the old host");
        }
        let mine = {
            let doc = Doc::new();
            let mut txn = doc.transact_mut();
            txn.get_or_insert_map("shapes")
                .insert(&mut txn, "mine", "ada's");
            txn.encode_update_v1()
        };
        let ada = Actor::user("ada", None).via(Via::Api);
        let seq = room
            .apply_update_as(&ada, &mine)
            .await
            .expect("ada's write");
        tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while !room.is_closing() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the room unloads");
        assert!(room.is_fenced());
        assert_eq!(
            keys(room.doc()),
            ["mine", "stale"],
            "the refused write is here only"
        );
        if let Ok(Some(ReadSource::Loaded(_))) = rooms.read(&name).await {
            panic!("a fenced room's document is not read");
        }
        let stored = store.load(&name).await.expect("load");
        assert_eq!(stored.last_seq, seq, "ada's write is the last logged");
        let logged = Doc::new();
        {
            let mut txn = logged.transact_mut();
            for update in &stored.updates {
                txn.apply_update(Update::decode_v1(update).expect("decode"))
                    .expect("apply");
            }
        }
        assert_eq!(keys(&logged), ["mine"]);
        let again = rooms.get(&name).await.expect("reloaded");
        assert!(!Arc::ptr_eq(&again, &room));
        assert_eq!(keys(again.doc()), ["mine"]);
    }
}
