//! Per-fairy tracking of the canvas changes that were not the fairy's own (docs/fairies.md), for the
//! "users' changes since the last request" part of its next prompt.
//!
//! A [`ChangeTracker`] reads its room's [`LiveShapes`] feed (one observer of the `shapes` root
//! per document, whatever the number of fairies: see docs/fairies.md "People and fairies in
//! one room") from its own cursor, whenever the fairy asks it something. For every change whose
//! origin is not the fairy's (its `fairy:ID` origin, or its tentative reverts), it keeps the
//! touched shape's state before and after, split into users' changes (`client:…` origins) and
//! other fairies' changes (`fairy:OTHER`, and foreign origins such as other fairies' undo
//! managers). Records are squashed per shape: the first "before" and the latest "after" are
//! kept, so a shape created then deleted vanishes, and one moved away and back is unchanged.
//! `start_request` clears the records. Owns no I/O; the report is offset and rounded like the
//! prompt's shapes.
//!
//! The same feed fills the fairy's [`RequestLedger`] (what each of its requests changed, for
//! taking a request back): the fairy's own changes go into the open request's record,
//! everyone else's (the server's included) mark what they overwrote. Every method reads the
//! feed first, so the ledger sees changes in document order relative to the request's start
//! and end.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;
use serde_json::{Map, Value};
use yrs::{Doc, Origin};

use crate::agent::apply::ledger::{RequestLedger, RequestRecord, RevertOutcome, ShapeDiff};
use crate::canvas::format::{model_type, to_simple};
use crate::canvas::live::{Change, LiveShapes, Read};
use crate::canvas::shape::Shape;
use crate::canvas::transform::PromptTransform;
use crate::ids::RequestId;
use crate::origin::TxnOrigin;

/// One change as the prompt shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "change", rename_all = "camelCase")]
pub enum ChangeRecord {
    /// A shape appeared.
    #[serde(rename_all = "camelCase")]
    Added {
        /// Its id.
        shape_id: String,
        /// Its model-facing type.
        #[serde(rename = "type")]
        shape_type: String,
    },
    /// A shape disappeared.
    #[serde(rename_all = "camelCase")]
    Removed {
        /// Its id.
        shape_id: String,
        /// Its model-facing type.
        #[serde(rename = "type")]
        shape_type: String,
    },
    /// A shape changed: simple-format objects with `shapeId`, `_type` and only the properties
    /// that differ.
    Updated {
        /// The changed properties before.
        before: Value,
        /// The changed properties after.
        after: Value,
    },
}

/// The changes since the fairy's last request.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ChangeReport {
    /// Changes made by people.
    pub users: Vec<ChangeRecord>,
    /// Changes made by other fairies.
    pub fairies: Vec<ChangeRecord>,
}

impl ChangeReport {
    /// True if nothing changed.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty() && self.fairies.is_empty()
    }
}

#[derive(Debug, Clone)]
struct Delta {
    before: Option<Arc<Shape>>,
    after: Option<Arc<Shape>>,
}

#[derive(Debug, Default)]
struct State {
    fairy_id: String,
    own: Vec<Origin>,
    users: BTreeMap<Arc<str>, Delta>,
    fairies: BTreeMap<Arc<str>, Delta>,
    ledger: RequestLedger,
    /// Shapes the fairy's own transactions changed since [`ChangeTracker::take_own_writes`].
    own_writes: BTreeSet<Arc<str>>,
}

enum Author {
    Own,
    /// The server itself: not reported, but a change the fairy did not make.
    System,
    User,
    Fairy,
}

impl State {
    fn author(&self, origin: Option<&Origin>) -> Author {
        let Some(origin) = origin else {
            // Transactions without an origin come from code paths outside the protocol
            // (tests, tools): count them as a user's.
            return Author::User;
        };
        if self.own.contains(origin) {
            return Author::Own;
        }
        match TxnOrigin::parse(origin) {
            Some(TxnOrigin::Client { .. }) => Author::User,
            Some(TxnOrigin::Fairy { id }) if id == self.fairy_id => Author::Own,
            Some(TxnOrigin::System) => Author::System,
            // Other fairies, and their undo managers' reverts (whose origin is opaque).
            _ => Author::Fairy,
        }
    }

    /// Takes one change of the feed into account.
    fn take(&mut self, change: &Change) {
        let author = self.author(change.origin.as_ref());
        let own = matches!(author, Author::Own);
        if own {
            self.own_writes.insert(change.id.clone());
        }
        if self.ledger.wants(&change.id, own) {
            let diff = ShapeDiff::between(change.before.as_deref(), change.after.as_deref());
            self.ledger.observe(&change.id, &diff, own);
        }
        let bucket = match author {
            Author::Own | Author::System => return,
            Author::User => &mut self.users,
            Author::Fairy => &mut self.fairies,
        };
        bucket
            .entry(change.id.clone())
            .and_modify(|d| d.after = change.after.clone())
            .or_insert(Delta {
                before: change.before.clone(),
                after: change.after.clone(),
            });
    }
}

/// Tracks the shape changes not made by one fairy. Dropping it stops reading the feed (and,
/// with the last reader of the document, the feed itself).
pub struct ChangeTracker {
    live: Arc<LiveShapes>,
    cursor: Arc<AtomicU64>,
    state: Mutex<State>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic while holding the lock cannot leave the maps half-updated in a way that matters:
    // keep going with what is there rather than propagating the poison.
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ChangeTracker {
    /// Starts tracking on `doc` for fairy `fairy_id`; `extra_own` lists further origins that
    /// are the fairy's own (its [`crate::agent::apply::tentative::Tentative::revert_origin`]). Must not be
    /// called while a transaction is open on `doc`.
    pub fn new(doc: &Doc, fairy_id: &str, extra_own: &[Origin]) -> Self {
        let live = LiveShapes::of(doc);
        let cursor = live.subscribe();
        let mut own = vec![Origin::from(&TxnOrigin::fairy(fairy_id))];
        own.extend_from_slice(extra_own);
        ChangeTracker {
            live,
            cursor,
            state: Mutex::new(State {
                fairy_id: fairy_id.to_owned(),
                own,
                ..State::default()
            }),
        }
    }

    /// The state with every change of the feed so far taken into account.
    fn synced(&self) -> MutexGuard<'_, State> {
        let mut st = lock(&self.state);
        let read = self.live.read_since(&self.cursor, |change| st.take(change));
        if read == Read::Lagged {
            tracing::warn!(
                fairy = %st.fairy_id,
                "a fairy fell behind its room's changes; some are missing from its next prompt"
            );
        }
        st
    }

    /// Reads what changed since the last call (a fairy's idle host calls this now and then, so
    /// that the room's feed never has to keep much for it).
    pub fn catch_up(&self) {
        drop(self.synced());
    }

    /// The room's shapes now, in no particular order, read from the live view rather than the
    /// document.
    pub fn shapes(&self) -> Vec<Arc<Shape>> {
        self.live.shapes()
    }

    /// The shape `id` now, from the room's live view.
    pub fn shape(&self, id: &str) -> Option<Arc<Shape>> {
        self.live.get(id)
    }

    /// Adds an origin to count as the fairy's own.
    pub fn add_own_origin(&self, origin: Origin) {
        self.synced().own.push(origin);
    }

    /// How many shapes the fairy's own transactions changed since the last call (a shape
    /// written several times, as a reverted and re-applied action does, counts once).
    pub fn take_own_writes(&self) -> u32 {
        let touched = std::mem::take(&mut self.synced().own_writes);
        u32::try_from(touched.len()).unwrap_or(u32::MAX)
    }

    /// Forgets the recorded changes: called when a request starts.
    pub fn start_request(&self) {
        let mut st = self.synced();
        st.users.clear();
        st.fairies.clear();
    }

    /// Starts recording what the fairy's request named `ids` changes (see [`RequestLedger`]).
    pub fn open_request(&self, ids: &[RequestId], summary: &str) {
        self.synced().ledger.open(ids, summary);
    }

    /// Stops recording the fairy's changes (its request ended).
    pub fn close_request(&self) {
        self.synced().ledger.close();
    }

    /// Records into the latest request again (cleaning up after a restart mid-request).
    pub fn reopen_latest_request(&self) -> bool {
        self.synced().ledger.reopen_latest()
    }

    /// What the request named `id` changed, if it is among the recent ones.
    pub fn request(&self, id: &RequestId) -> Option<RequestRecord> {
        self.synced().ledger.find(id).cloned()
    }

    /// Marks the request named `id` rejected.
    pub fn mark_rejected(&self, id: &RequestId, outcome: RevertOutcome) {
        self.synced().ledger.mark_rejected(id, outcome);
    }

    /// Runs `f` with the ledger (stored with the fairy's private state) lent to it, never
    /// copied: the state is stored after drawn actions, and a copy of sixteen requests' records
    /// each time was a twentieth of a drawing fairy's work.
    pub fn lend_ledger<R>(&self, f: impl FnOnce(&mut RequestLedger) -> R) -> R {
        f(&mut self.synced().ledger)
    }

    /// Replaces the ledger with a stored one (after a restart).
    pub fn restore_ledger(&self, ledger: RequestLedger) {
        self.synced().ledger = ledger;
    }

    /// The squashed changes since the last `start_request`, offset and rounded by `transform`.
    pub fn report(&self, transform: &mut PromptTransform) -> ChangeReport {
        let st = self.synced();
        let records = |deltas: &BTreeMap<Arc<str>, Delta>, t: &mut PromptTransform| {
            deltas
                .values()
                .filter_map(|d| record(d, t))
                .collect::<Vec<_>>()
        };
        ChangeReport {
            users: records(&st.users, transform),
            fairies: records(&st.fairies, transform),
        }
    }
}

fn model_json(shape: &Shape, t: &mut PromptTransform) -> Map<String, Value> {
    let mut v = to_simple(shape);
    match v.as_object_mut() {
        Some(o) => {
            t.shape_to_model(o);
            std::mem::take(o)
        }
        None => Map::new(),
    }
}

fn record(d: &Delta, t: &mut PromptTransform) -> Option<ChangeRecord> {
    match (&d.before, &d.after) {
        (None, None) => None,
        (None, Some(a)) => Some(ChangeRecord::Added {
            shape_id: a.id.clone(),
            shape_type: model_type(a).to_owned(),
        }),
        (Some(b), None) => Some(ChangeRecord::Removed {
            shape_id: b.id.clone(),
            shape_type: model_type(b).to_owned(),
        }),
        (Some(b), Some(a)) => {
            let (before, after) = (model_json(b, t), model_json(a, t));
            let mut changed_before = Map::new();
            let mut changed_after = Map::new();
            for key in before.keys().chain(after.keys()) {
                let (x, y) = (before.get(key), after.get(key));
                if x != y {
                    changed_before.insert(key.clone(), x.cloned().unwrap_or(Value::Null));
                    changed_after.insert(key.clone(), y.cloned().unwrap_or(Value::Null));
                }
            }
            if changed_after.is_empty() {
                return None;
            }
            for key in ["shapeId", "_type"] {
                for (side, src) in [(&mut changed_before, &before), (&mut changed_after, &after)] {
                    if let Some(v) = src.get(key) {
                        side.entry(key.to_owned()).or_insert_with(|| v.clone());
                    }
                }
            }
            Some(ChangeRecord::Updated {
                before: Value::Object(changed_before),
                after: Value::Object(changed_after),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::actions::canvas::test_util::{doc, get, rect};
    use crate::agent::actions::{ActionCtx, Registry};
    use crate::agent::apply::tentative::Tentative;
    use crate::canvas::shape::{delete_shape, write_shape};
    use serde_json::json;
    use yrs::Transact;

    fn user_write(doc: &Doc, s: &Shape) {
        write_shape(&mut doc.transact_mut_with("client:1:alice"), s);
    }

    #[test]
    fn splits_users_from_other_fairies_and_ignores_own() {
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 10.0, 10.0);
        let tracker = ChangeTracker::new(&doc, "f1", &[]);
        let registry = Registry::canvas();
        let mut own = ActionCtx::new("f1");
        let mut other = ActionCtx::new("f2");
        let own_create =
            json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "mine"}});
        assert!(registry.apply(&doc, &own_create, &mut own).is_ok());
        let f2_create =
            json!({"_type": "create", "shape": {"_type": "ellipse", "shapeId": "theirs"}});
        assert!(registry.apply(&doc, &f2_create, &mut other).is_ok());
        let mut a = get(&doc, "a");
        a.x = 40.4;
        a.color = "red".into();
        user_write(&doc, &a);
        let report = tracker.report(&mut PromptTransform::new(10.0, 0.0));
        assert_eq!(
            report.fairies,
            vec![ChangeRecord::Added {
                shape_id: "theirs".into(),
                shape_type: "ellipse".into()
            }]
        );
        assert_eq!(
            report.users,
            vec![ChangeRecord::Updated {
                before: json!({"shapeId": "a", "_type": "rectangle", "x": -10.0, "color": "black"}),
                after: json!({"shapeId": "a", "_type": "rectangle", "x": 30.0, "color": "red"}),
            }]
        );
        tracker.start_request();
        assert!(tracker.report(&mut PromptTransform::default()).is_empty());
    }

    #[test]
    fn squashes_create_then_delete_and_back_and_forth() {
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 10.0, 10.0);
        let tracker = ChangeTracker::new(&doc, "f1", &[]);
        rect(&doc, "tmp", 0.0, 0.0, 1.0, 1.0);
        delete_shape(&mut doc.transact_mut_with("client:1:alice"), "tmp");
        let mut a = get(&doc, "a");
        a.x = 99.0;
        user_write(&doc, &a);
        a.x = 0.0;
        user_write(&doc, &a);
        delete_shape(&mut doc.transact_mut_with("client:2:bob"), "a");
        let report = tracker.report(&mut PromptTransform::default());
        assert_eq!(
            report.users,
            vec![ChangeRecord::Removed {
                shape_id: "a".into(),
                shape_type: "rectangle".into()
            }]
        );
        let text = serde_json::to_value(&report.users).unwrap_or_default();
        assert_eq!(text[0]["change"], json!("removed"));
    }

    #[test]
    fn own_tentative_reverts_are_not_reported() {
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 10.0, 10.0);
        let registry = Registry::canvas();
        let mut ctx = ActionCtx::new("f1");
        let mut t = Tentative::new(&doc, "f1");
        let tracker = ChangeTracker::new(&doc, "f1", &[t.revert_origin()]);
        let mv = json!({"_type": "move", "shapeId": "a", "x": 100, "y": 0});
        assert!(t.apply_tentative(&registry, &mv, &mut ctx).is_ok());
        assert!(t.revert_tentative());
        assert!(tracker.report(&mut PromptTransform::default()).is_empty());
        // Another fairy's revert counts as that fairy's change.
        let mut t2 = Tentative::new(&doc, "f2");
        let mut ctx2 = ActionCtx::new("f2");
        assert!(t2.apply_tentative(&registry, &mv, &mut ctx2).is_ok());
        assert!(t2.revert_tentative());
        let report = tracker.report(&mut PromptTransform::default());
        assert!(
            report.users.is_empty() && report.fairies.is_empty(),
            "{report:?}"
        );
    }
}
