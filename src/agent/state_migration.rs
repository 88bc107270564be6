//! Moving fairies' private state out of room documents written by earlier versions, which kept
//! it in each fairy's map under `runtime` (JSON text). Runs on every room load
//! ([`LegacyStateMigration`], a [`LoadHook`]), before any peer can see the document.
//!
//! For each fairy whose map has the key: when the store holds no state for it yet, the key's
//! state (when it parses) is saved to the store, durably; then the key is deleted from the
//! document in one transaction with the system origin. When the store already holds a state,
//! the store wins and the key (stale after an interrupted migration, or written by a client)
//! is only deleted. Running it again finds nothing to do. Owns only this migration; the
//! document helpers are in [`super::fairy`], the stored form in [`super::state_store`].

use std::sync::Arc;

use async_trait::async_trait;

use super::fairy::{legacy_runtimes, remove_legacy_runtimes};
use super::state::FairyState;
use super::state_store;
use crate::ids::FairyId;
use crate::origin::TxnOrigin;
use crate::room::{LoadHook, Room};
use crate::store::{Store, StoreError};

/// The [`LoadHook`] that migrates legacy `runtime` keys.
#[derive(Debug, Default, Clone, Copy)]
pub struct LegacyStateMigration;

#[async_trait]
impl LoadHook for LegacyStateMigration {
    async fn on_load(&self, room: &Arc<Room>, store: &Arc<dyn Store>) -> Result<(), StoreError> {
        let legacy = legacy_runtimes(room.doc());
        if legacy.is_empty() {
            return Ok(());
        }
        let mut moved = 0usize;
        let mut ids: Vec<FairyId> = Vec::with_capacity(legacy.len());
        for (id, text) in legacy {
            if store
                .load_fairy_state(room.name(), id.as_str())
                .await?
                .is_none()
            {
                let state = text.as_deref().and_then(|t| parse_legacy(&id, t));
                if let Some(state) = state {
                    state_store::save(store.as_ref(), room.name(), &id, &state).await?;
                    moved += 1;
                }
            }
            ids.push(id);
        }
        let removed = remove_legacy_runtimes(room.doc(), &ids, TxnOrigin::System);
        tracing::info!(
            room = %room.name(),
            moved,
            removed,
            "fairy state moved from the document to the store"
        );
        Ok(())
    }
}

fn parse_legacy(id: &FairyId, text: &str) -> Option<FairyState> {
    match serde_json::from_str(text) {
        Ok(state) => Some(state),
        Err(error) => {
            tracing::warn!(fairy = %id, %error, "legacy fairy state unreadable; dropped");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use yrs::{Map, Out, ReadTxn, Transact};

    use super::*;
    use crate::agent::fairy::{FairyEntity, LEGACY_RUNTIME_KEY, insert_fairy, list_fairies};
    use crate::agent::modes::Mode;
    use crate::canvas::schema::FAIRIES;
    use crate::room::{RoomConfig, RoomName, Rooms};
    use crate::store::memory::MemoryStore;

    fn set_runtime(room: &Room, id: &FairyId, text: &str) {
        let doc = room.doc();
        let root = doc.get_or_insert_map(FAIRIES);
        let mut txn = doc.transact_mut();
        if let Some(Out::YMap(m)) = root.get(&txn, id.as_str()) {
            m.insert(&mut txn, LEGACY_RUNTIME_KEY, text);
        }
    }

    fn has_runtime(room: &Room, id: &FairyId) -> bool {
        let doc = room.doc();
        let txn = doc.transact();
        match txn.get_map(FAIRIES).and_then(|r| r.get(&txn, id.as_str())) {
            Some(Out::YMap(m)) => m.get(&txn, LEGACY_RUNTIME_KEY).is_some(),
            _ => false,
        }
    }

    async fn stored(store: &Arc<dyn Store>, room: &Room, id: &FairyId) -> Option<FairyState> {
        state_store::load(store.as_ref(), room.name(), id)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[tokio::test]
    async fn legacy_state_moves_to_the_store_once_and_the_store_wins_over_a_stale_key() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let config = RoomConfig::from_serve(&crate::config::ServeConfig::for_test());
        let rooms = Rooms::new(store.clone(), config, 4);
        let name = RoomName::parse("legacy").unwrap_or_else(|e| panic!("{e}"));
        let room = rooms.get(&name).await.unwrap_or_else(|e| panic!("{e}"));
        let old =
            FairyEntity::invite(Some("Old"), None, None, "a").unwrap_or_else(|e| panic!("{e}"));
        let new =
            FairyEntity::invite(Some("New"), None, None, "a").unwrap_or_else(|e| panic!("{e}"));
        let junk =
            FairyEntity::invite(Some("Junk"), None, None, "a").unwrap_or_else(|e| panic!("{e}"));
        for f in [&old, &new, &junk] {
            insert_fairy(room.doc(), f);
        }
        // `old` was written by an earlier version; `new` already lives in the store and a
        // client wrote a `runtime` key into its map; `junk`'s key is not a state at all.
        set_runtime(
            &room,
            &old.id,
            r#"{"mode":"soloing","todo":[{"id":"t","text":"x","status":"todo"}]}"#,
        );
        let real = FairyState {
            mode: Mode::StandingBy,
            ..FairyState::default()
        };
        state_store::save(store.as_ref(), room.name(), &new.id, &real)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        set_runtime(&room, &new.id, r#"{"mode":"soloing"}"#);
        set_runtime(&room, &junk.id, "{not json");

        LegacyStateMigration
            .on_load(&room, &store)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let migrated = stored(&store, &room, &old.id).await;
        assert_eq!(migrated.as_ref().map(|s| s.mode), Some(Mode::Soloing));
        assert_eq!(migrated.map(|s| s.todo.len()), Some(1));
        assert_eq!(stored(&store, &room, &new.id).await, Some(real.clone()));
        assert_eq!(stored(&store, &room, &junk.id).await, None);
        for f in [&old, &new, &junk] {
            assert!(!has_runtime(&room, &f.id), "{} keeps a runtime key", f.name);
        }
        assert_eq!(list_fairies(room.doc()).len(), 3, "the entities stay");

        // Idempotent: nothing left to do, nothing changed.
        LegacyStateMigration
            .on_load(&room, &store)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(stored(&store, &room, &new.id).await, Some(real));
        rooms.shutdown().await;
    }
}
