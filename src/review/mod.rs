//! Review mode (README "Review mode", docs/document-schema.md "Suggestions"): a fairy working
//! with `apply: "suggest"` leaves `shapes` alone and proposes each shape change as a record in
//! the server-owned `suggestions` root; people accept or reject them one by one or per request.
//!
//! # Layout
//! - this file: [`ApplyMode`] (how a fairy's canvas actions land) and the load-time
//!   [`migrate`] of rooms stored before `suggestions` was server-owned;
//! - [`record`]: one suggestion and its `Y.Map` form;
//! - [`decide`]: accepting and rejecting inside a transaction (pure document code);
//! - [`service`]: decisions written into a live room, logged with their actor.
//!
//! Owns the `suggestions` root and the rules of deciding. Must not touch the agent (the fairy
//! writes its records through [`record`] from `agent::suggest`), sockets or the store.

pub mod decide;
pub mod record;
pub mod service;

use serde::{Deserialize, Serialize};
use yrs::{Any, Doc, Map, Out, ReadTxn, Transact, WriteTxn};

use crate::canvas::schema::{META, SCHEMA_VERSION};
use crate::origin::TxnOrigin;

/// How a fairy's canvas actions land: on `shapes` (`direct`, the default) or as suggestions
/// people decide on (`suggest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ApplyMode {
    /// Straight onto the canvas.
    #[default]
    Direct,
    /// As suggestions in the `suggestions` root.
    Suggest,
}

impl ApplyMode {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            ApplyMode::Direct => "direct",
            ApplyMode::Suggest => "suggest",
        }
    }

    /// Whether this is the default (left out of stored state).
    pub fn is_direct(&self) -> bool {
        *self == ApplyMode::Direct
    }
}

/// Brings a loaded room to schema version 2: a room stored at version 1 had no server-owned
/// `suggestions` root, so whatever is there was written by a peer and is removed unread before
/// any peer or fairy sees the room. Runs in one transaction with the system origin; a room at
/// version 2 is left alone. Returns how many records were removed.
pub fn migrate(doc: &Doc) -> usize {
    let meta = doc.get_or_insert_map(META);
    let version = match meta.get(&doc.transact(), "schemaVersion") {
        Some(Out::Any(Any::Number(yrs::Number::Float(v)))) => v,
        Some(Out::Any(Any::Number(yrs::Number::Int(v)))) => v as f64,
        _ => 0.0,
    };
    if version >= SCHEMA_VERSION as f64 {
        return 0;
    }
    let mut txn = doc.transact_mut_with(TxnOrigin::System);
    let removed = match txn.get_map(crate::canvas::schema::SUGGESTIONS) {
        Some(_) => record::clear(&mut txn),
        None => 0,
    };
    txn.get_or_insert_map(crate::canvas::schema::SUGGESTIONS);
    meta.insert(&mut txn, "schemaVersion", Any::from(SCHEMA_VERSION as f64));
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_1_room_loses_peer_written_suggestions_once() {
        let doc = Doc::new();
        {
            let mut txn = doc.transact_mut();
            txn.get_or_insert_map(META)
                .insert(&mut txn, "schemaVersion", 1.0);
            let root = txn.get_or_insert_map(crate::canvas::schema::SUGGESTIONS);
            root.insert(&mut txn, "s-forged", yrs::MapPrelim::default());
        }
        assert_eq!(migrate(&doc), 1);
        let before = doc.transact().state_vector();
        assert_eq!(migrate(&doc), 0);
        assert_eq!(doc.transact().state_vector(), before, "ran twice");
        let fresh = Doc::new();
        crate::canvas::schema::init_schema(&fresh, "system");
        let before = fresh.transact().state_vector();
        assert_eq!(migrate(&fresh), 0);
        assert_eq!(
            fresh.transact().state_vector(),
            before,
            "a new room is at v2"
        );
    }
}
