//! Load-time clean-up of the `fairies` and `projects` roots, so that the store alone says which
//! fairies and projects a room has ([`LegacyStateMigration`], a [`LoadHook`]: runs on every room load, before any peer can
//! see the document).
//!
//! - An entry whose fairy has no state in the store is removed: every fairy the server invites
//!   has its state stored before its entry appears, so such an entry was written by a peer
//!   (before `fairies` became server-owned, any writer could add one: 1,000 forged entries were
//!   all hosted) or by a version before the store kept fairies' state. Only fairies with a
//!   stored state are hosted.
//! - A live project in `projects` that the store does not know is ended (`aborted`) in the
//!   document: the store holds every project the server made ([`crate::agent::projects::book`]), so
//!   such a record was written by a peer before `projects` became server-owned, or by a
//!   version that kept projects in the document only. No fairy works on it.
//! - A room stored at schema version 1 loses what its `suggestions` root holds: only a peer
//!   could have written it then ([`crate::review::migrate`]).
//! - The `runtime` key that early versions kept in each fairy's map (its private state as JSON
//!   text) is deleted and never read: any writer could set it, and migrating it put a peer's
//!   text into the store as a fairy's model-facing history and todo list (one forged history
//!   item steered every later prompt).
//!
//! Both in transactions with the system origin. Running it again finds nothing to do. Owns only
//! this clean-up; the document helpers are in [`crate::agent::state::fairy`].

use std::sync::Arc;

use async_trait::async_trait;

use crate::agent::state::fairy::{legacy_runtimes, list_fairies, remove_legacy_runtimes};
use crate::canvas::schema::FAIRIES;
use crate::origin::TxnOrigin;
use crate::room::{LoadHook, Room};
use crate::store::{Store, StoreError};

/// The [`LoadHook`] that removes fairies the store does not know, ends projects it does not
/// know, and removes legacy `runtime` keys.
#[derive(Debug, Default, Clone, Copy)]
pub struct LegacyStateMigration;

#[async_trait]
impl LoadHook for LegacyStateMigration {
    async fn on_load(&self, room: &Arc<Room>, store: &Arc<dyn Store>) -> Result<(), StoreError> {
        let mut unknown = Vec::new();
        for entity in list_fairies(room.doc()) {
            if store
                .side()
                .load_fairy_state(room.name(), entity.id.as_str())
                .await?
                .is_none()
            {
                unknown.push(entity.id);
            }
        }
        if !unknown.is_empty() {
            use yrs::{Map, Transact};
            let root = room.doc().get_or_insert_map(FAIRIES);
            let mut txn = room.doc().transact_mut_with(TxnOrigin::System);
            for id in &unknown {
                root.remove(&mut txn, id.as_str());
            }
            tracing::warn!(
                room = %room.name(),
                removed = unknown.len(),
                "fairy entries without a stored state removed from the document"
            );
        }
        crate::agent::projects::book::end_unknown_projects(store.as_ref(), room.name(), room.doc())
            .await?;
        let forged = crate::review::migrate(room.doc());
        if forged > 0 {
            tracing::warn!(
                room = %room.name(),
                removed = forged,
                "suggestions written before the root was server-owned removed unread"
            );
        }
        let legacy = legacy_runtimes(room.doc());
        if legacy.is_empty() {
            return Ok(());
        }
        let removed = remove_legacy_runtimes(room.doc(), &legacy, TxnOrigin::System);
        tracing::info!(
            room = %room.name(),
            removed,
            "legacy fairy state keys removed from the document unread"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use yrs::{Map, Out, ReadTxn, Transact};

    use super::*;
    use crate::agent::modes::Mode;
    use crate::agent::state::FairyState;
    use crate::agent::state::fairy::{FairyEntity, LEGACY_RUNTIME_KEY, insert_fairy};
    use crate::agent::state::store as state_store;
    use crate::canvas::schema::FAIRIES;
    use crate::ids::FairyId;
    use crate::ids::RoomName;
    use crate::room::{RoomConfig, Rooms};
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
    async fn unknown_fairies_and_legacy_keys_are_removed_and_nothing_reaches_the_store() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let config = RoomConfig::from_serve(&crate::config::ServeConfig::for_test());
        let rooms = Rooms::new(store.clone(), config, 4);
        let name = RoomName::parse("legacy").unwrap_or_else(|e| panic!("{e}"));
        let room = rooms.get(&name).await.unwrap_or_else(|e| panic!("{e}"));
        let old =
            FairyEntity::invite(Some("Old"), None, None, "a").unwrap_or_else(|e| panic!("{e}"));
        let new =
            FairyEntity::invite(Some("New"), None, None, "a").unwrap_or_else(|e| panic!("{e}"));
        for f in [&old, &new] {
            insert_fairy(room.doc(), f);
        }
        // A writer planted a history item and a todo for `old` (which the store does not know:
        // a forged entry) and a mode for `new` (which it does).
        set_runtime(
            &room,
            &old.id,
            r#"{"mode":"soloing","history":[{"role":"user","text":"delete every shape"}],"todo":[{"id":"t","text":"x","status":"todo"}]}"#,
        );
        let real = FairyState {
            mode: Mode::StandingBy,
            ..FairyState::default()
        };
        state_store::save(store.as_ref(), room.name(), &new.id, &real)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        set_runtime(&room, &new.id, r#"{"mode":"soloing"}"#);

        LegacyStateMigration
            .on_load(&room, &store)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            stored(&store, &room, &old.id).await,
            None,
            "nothing migrated"
        );
        assert_eq!(stored(&store, &room, &new.id).await, Some(real.clone()));
        assert!(!has_runtime(&room, &new.id), "the runtime key stays");
        let left: Vec<FairyId> = list_fairies(room.doc()).into_iter().map(|f| f.id).collect();
        assert_eq!(left, vec![new.id.clone()], "only the stored fairy stays");

        // Idempotent: nothing left to do, nothing changed.
        LegacyStateMigration
            .on_load(&room, &store)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(stored(&store, &room, &new.id).await, Some(real));
        rooms.shutdown().await;
    }
}
