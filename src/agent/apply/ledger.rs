//! What each of a fairy's requests changed on the canvas, so that a person can take a request
//! back (docs/fairies.md "Overrule"): per shape, whether the request created or deleted it,
//! and per property the value to restore and the value the fairy left, with a flag set when
//! someone else (a person, another fairy, the server) wrote the same thing afterwards.
//!
//! The [`RequestLedger`] is fed by the fairy's [`crate::agent::apply::changes::ChangeTracker`], which sees
//! every transaction on the `shapes` root with the touched shapes before and after. The
//! fairy's own transactions (its actions, its tentative versions and their reverts) go into
//! the open request's record: the first "before" of a property is what the revert restores,
//! the latest value the fairy wrote is what it expects to find. Anyone else's write of a
//! recorded property marks it changed afterwards and becomes the value to restore, so a
//! person's edit made between two of the fairy's writes survives the revert too.
//!
//! Why not yrs's `UndoManager`: its stacks live in memory only (a revert must work after a
//! restart: the ledger is part of the fairy's private state in the store), and it undoes by
//! origin stack, while a revert here is decided property by property against what others did.
//!
//! A shape someone else deleted keeps its record, buried with it: bringing it back exactly as
//! it was (a restore of a later version, docs/history.md "Restore and rollback") makes it the
//! fairy's again, so that the request can still be taken back, as history's rollback does
//! (the same rule, [`crate::history::undo`]). The ledger cannot tell a restore's transaction
//! from its restorer's other writes (both carry the person's origin), so any exact
//! re-creation counts: a person undoing their own deletion of the fairy's shape gives it back
//! too, which is what a revert promises (the people's edits alone on the canvas before the
//! request). A property set back to the fairy's value by someone else stays theirs.
//!
//! Bounded: the last [`MAX_REQUESTS`] requests, each with at most [`MAX_SHAPES`] shapes (a
//! request that touched more is marked `truncated` and only its first shapes are taken back).
//! Plain data, no I/O; applying a revert is [`crate::agent::runtime::revert`]'s business.

use crate::ids::RequestId;
use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::canvas::shape::{Prop, Shape};
use crate::history::undo::Buried;

/// Requests kept revertible per fairy (the oldest is forgotten first).
pub const MAX_REQUESTS: usize = 16;
/// Shapes recorded per request.
pub const MAX_SHAPES: usize = 2000;
/// Names one record keeps (a request merged from several prompts answers to each of theirs).
pub const MAX_IDS: usize = 16;

/// One recorded value: what a revert restores, what the fairy left, and whether someone else
/// wrote it after the fairy's last write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    bound(
        serialize = "T: Serialize + Default + PartialEq",
        deserialize = "T: Deserialize<'de> + Default"
    )
)]
pub struct Change<T> {
    /// The value before the fairy's first write, or the latest value someone else wrote since.
    /// Stored only when it is not its type's default (`Absent`, `false`): in a ledger of
    /// created shapes a quarter of the stored bytes were `"restore":"Absent"`, and the
    /// fairies' states are written whenever a request ends (docs/benchmarks.md, 2026-11-26
    /// sixth session).
    #[serde(default, skip_serializing_if = "is_default")]
    pub restore: T,
    /// The fairy's latest value.
    pub fairy: T,
    /// Someone else wrote it after the fairy's latest write: it stays as they left it.
    /// Stored only when set: a third of a stored ledger was `"changedAfter":false`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub changed_after: bool,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

impl<T: PartialEq> Change<T> {
    /// True when the fairy's changes cancel out (nothing to take back).
    pub fn is_noop(&self) -> bool {
        self.restore == self.fairy
    }
}

/// What one request did to one shape.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ShapeRecord {
    /// Set when the request created (`restore: false`) or deleted (`restore: true`) it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exists: Option<Change<bool>>,
    /// Per stored key (docs/document-schema.md).
    pub props: BTreeMap<String, Change<Prop>>,
    /// Someone else deleted it: this record as it was then, with the shape's stored keys then,
    /// so that bringing the shape back exactly as it was (a restore of a later version) makes
    /// it the fairy's again, as history's rollback does ([`crate::history::undo::Buried`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buried: Option<Box<Buried<BTreeMap<String, Prop>, ShapeRecord>>>,
}

impl ShapeRecord {
    /// True when someone else changed anything recorded of the shape afterwards.
    pub fn changed_after(&self) -> bool {
        self.exists.as_ref().is_some_and(|c| c.changed_after)
            || self.props.values().any(|c| c.changed_after)
    }
}

/// How a revert went: shapes whose every change was taken back, and shapes where at least one
/// change stayed because someone changed the same thing afterwards.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RevertOutcome {
    /// Shapes taken back entirely.
    pub reverted: usize,
    /// Shapes kept, wholly or in part.
    pub kept: usize,
}

/// What one request changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RequestRecord {
    /// Its ids (the first is the request's own; others were merged into it).
    pub ids: Vec<RequestId>,
    /// The messages it started with (for the model's note when it is rejected).
    pub summary: String,
    /// Per shape id.
    pub shapes: BTreeMap<String, ShapeRecord>,
    /// It touched more than [`MAX_SHAPES`] shapes: the rest were not recorded.
    #[serde(skip_serializing_if = "is_default")]
    pub truncated: bool,
    /// Set once it was rejected (a second rejection answers the same outcome).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected: Option<RevertOutcome>,
}

impl RequestRecord {
    /// True if `id` names this request.
    pub fn answers_to(&self, id: &RequestId) -> bool {
        self.ids.contains(id)
    }
}

/// The changes of one transaction to one shape: existence and the keys whose value differs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShapeDiff {
    /// `(before, after)` when the shape appeared or disappeared.
    pub exists: Option<(bool, bool)>,
    /// `(key, before, after)` for each key whose value changed.
    pub props: Vec<(String, Prop, Prop)>,
}

impl ShapeDiff {
    /// The difference between two snapshots of a shape (`None`: absent).
    pub fn between(before: Option<&Shape>, after: Option<&Shape>) -> Self {
        let map = |s: Option<&Shape>| -> BTreeMap<&'static str, Prop> {
            s.map(|s| s.to_props().into_iter().collect())
                .unwrap_or_default()
        };
        let (b, a) = (map(before), map(after));
        let mut props = Vec::new();
        for key in b.keys().chain(a.keys().filter(|k| !b.contains_key(*k))) {
            let x = b.get(key).cloned().unwrap_or(Prop::Absent);
            let y = a.get(key).cloned().unwrap_or(Prop::Absent);
            if x != y {
                props.push(((*key).to_owned(), x, y));
            }
        }
        let exists =
            (before.is_some() != after.is_some()).then_some((before.is_some(), after.is_some()));
        ShapeDiff { exists, props }
    }

    /// True if nothing changed.
    pub fn is_empty(&self) -> bool {
        self.exists.is_none() && self.props.is_empty()
    }
}

/// The fairy's recent requests and what each changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RequestLedger {
    /// Oldest first.
    pub records: VecDeque<RequestRecord>,
    /// The newest record is still recording (its request runs).
    pub open: bool,
    /// The number of the oldest record: how many records were forgotten before it. Record
    /// `i` (oldest first) is number `first + i` for good, which names its row in the store
    /// (docs/storage.md "Fairy state").
    #[serde(skip_serializing_if = "is_default")]
    pub first: u64,
    /// The newest record was reopened for the clean-up after a restart
    /// ([`Self::reopen_latest`]): only shapes it already holds are recorded.
    #[serde(skip)]
    cleanup: bool,
}

impl RequestLedger {
    /// Starts recording a request named `ids` (the previous one, if open, is closed; the
    /// oldest record is forgotten beyond [`MAX_REQUESTS`]).
    pub fn open(&mut self, ids: &[RequestId], summary: &str) {
        if self.records.len() >= MAX_REQUESTS {
            self.records.pop_front();
            self.first += 1;
        }
        self.records.push_back(RequestRecord {
            ids: ids.iter().take(MAX_IDS).cloned().collect(),
            summary: summary.chars().take(200).collect(),
            ..RequestRecord::default()
        });
        self.open = true;
        self.cleanup = false;
    }

    /// Records the latest request again for the clean-up of a fairy restarted mid-request
    /// (its half-drawn shapes are removed). Only shapes the record already holds are recorded
    /// then: the stored record may predate the half-drawn shape, and recording its removal as
    /// new would make "it existed" the state a revert restores (a revert after a crash
    /// re-created the half-drawn shape, locked). A revert takes back what was recorded before
    /// the crash, and leaves a removed half-drawn shape removed. False without a record.
    pub fn reopen_latest(&mut self) -> bool {
        self.open = !self.records.is_empty();
        self.cleanup = self.open;
        self.open
    }

    /// Stops recording.
    pub fn close(&mut self) {
        self.open = false;
        self.cleanup = false;
    }

    /// The record named `id`.
    pub fn find(&self, id: &RequestId) -> Option<&RequestRecord> {
        self.records.iter().rev().find(|r| r.answers_to(id))
    }

    /// Marks the record named `id` rejected with `outcome`.
    pub fn mark_rejected(&mut self, id: &RequestId, outcome: RevertOutcome) {
        if let Some(r) = self.records.iter_mut().rev().find(|r| r.answers_to(id)) {
            r.rejected = Some(outcome);
        }
    }

    /// Whether a change to shape `id` (the fairy's own when `own`) would be recorded: worth
    /// computing its [`ShapeDiff`] (the tracker sees every transaction of the room).
    pub fn wants(&self, id: &str, own: bool) -> bool {
        if own {
            self.open
        } else {
            self.records.iter().any(|r| r.shapes.contains_key(id))
        }
    }

    /// One transaction's change to shape `id`; `own` when the fairy made it.
    pub fn observe(&mut self, id: &str, diff: &ShapeDiff, own: bool) {
        if diff.is_empty() {
            return;
        }
        if own {
            // Outside a request (a revert, the cleanup after a restart) the fairy's writes are
            // nobody's change: a later revert compares values, which catches them.
            if self.open
                && let Some(record) = self.records.back_mut()
                && (!self.cleanup || record.shapes.contains_key(id))
            {
                record_own(record, id, diff);
            }
            return;
        }
        for record in &mut self.records {
            record_other(record, id, diff);
        }
    }
}

fn record_own(record: &mut RequestRecord, id: &str, diff: &ShapeDiff) {
    if !record.shapes.contains_key(id) && record.shapes.len() >= MAX_SHAPES {
        record.truncated = true;
        return;
    }
    let shape = record.shapes.entry(id.to_owned()).or_default();
    if let Some((before, after)) = diff.exists {
        // The fairy made or deleted it itself: nothing buried comes back any more.
        shape.buried = None;
        match &mut shape.exists {
            Some(c) => {
                c.fairy = after;
                c.changed_after = false;
            }
            None => {
                shape.exists = Some(Change {
                    restore: before,
                    fairy: after,
                    changed_after: false,
                })
            }
        }
    }
    for (key, before, after) in &diff.props {
        match shape.props.get_mut(key) {
            Some(c) => {
                c.fairy = after.clone();
                c.changed_after = false;
            }
            None => {
                shape.props.insert(
                    key.clone(),
                    Change {
                        restore: before.clone(),
                        fairy: after.clone(),
                        changed_after: false,
                    },
                );
            }
        }
    }
}

fn record_other(record: &mut RequestRecord, id: &str, diff: &ShapeDiff) {
    let Some(shape) = record.shapes.get_mut(id) else {
        return;
    };
    // The transaction's content of the shape: what a deletion removed, what a creation made.
    let content = |pick: fn(&(String, Prop, Prop)) -> &Prop| -> BTreeMap<String, Prop> {
        diff.props
            .iter()
            .map(|change| (change.0.clone(), pick(change).clone()))
            .collect()
    };
    let buried = match diff.exists {
        // Someone else deleted it: its record is buried with it (below).
        Some((true, false)) => Some(Buried {
            content: content(|(_, before, _)| before),
            record: ShapeRecord {
                buried: None,
                ..shape.clone()
            },
        }),
        // Someone else made it again: exactly as it was deleted, it is the fairy's again.
        Some((false, true)) => {
            if let Some(record) = shape
                .buried
                .take()
                .and_then(|b| b.bring_back(&content(|(_, _, after)| after)))
            {
                *shape = record;
                return;
            }
            None
        }
        _ => None,
    };
    if let Some(buried) = buried {
        shape.buried = Some(Box::new(buried));
    }
    if let (Some((_, after)), Some(c)) = (diff.exists, shape.exists.as_mut()) {
        c.restore = after;
        c.changed_after = true;
    }
    for (key, _, after) in &diff.props {
        if let Some(c) = shape.props.get_mut(key) {
            c.restore = after.clone();
            c.changed_after = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> RequestId {
        RequestId::parse(s).unwrap_or_else(|e| panic!("{e}"))
    }

    fn diff(key: &str, before: f64, after: f64) -> ShapeDiff {
        ShapeDiff {
            exists: None,
            props: vec![(key.into(), Prop::Num(before), Prop::Num(after))],
        }
    }

    /// Kill -9 mid-request: the stored ledger holds the shape completed before the last save,
    /// not the half-drawn one. The restart's clean-up removes the half-drawn shape; the
    /// record must not learn "it existed" from that removal (a revert re-created it, locked).
    #[test]
    fn the_clean_up_after_a_restart_records_only_what_the_record_holds() {
        let created = ShapeDiff {
            exists: Some((false, true)),
            props: vec![("x".into(), Prop::Absent, Prop::Num(1.0))],
        };
        let removed = ShapeDiff {
            exists: Some((true, false)),
            props: vec![("x".into(), Prop::Num(5.0), Prop::Absent)],
        };
        let mut running = RequestLedger::default();
        running.open(&[id("r-1")], "draw");
        running.observe("done", &created, true);
        // What the store held at the crash.
        let stored: RequestLedger =
            serde_json::from_value(serde_json::to_value(&running).unwrap_or_default())
                .unwrap_or_else(|e| panic!("{e}"));
        running.observe("half", &created, true);
        let mut restarted = stored;
        assert!(restarted.reopen_latest());
        restarted.observe("half", &removed, true);
        restarted.observe("done", &removed, true);
        restarted.close();
        let record = restarted
            .find(&id("r-1"))
            .unwrap_or_else(|| panic!("the record"));
        assert!(!record.shapes.contains_key("half"), "{record:?}");
        // What it held is updated: a revert finds `done` gone as the fairy left it.
        let done = record.shapes.get("done").and_then(|s| s.exists.clone());
        assert_eq!(
            done,
            Some(Change {
                restore: false,
                fairy: false,
                changed_after: false
            })
        );
        // A new request records everything again.
        restarted.open(&[id("r-2")], "more");
        restarted.observe("new", &created, true);
        assert!(
            restarted
                .find(&id("r-2"))
                .is_some_and(|r| r.shapes.contains_key("new"))
        );
    }

    #[test]
    fn first_before_and_last_fairy_value_with_others_in_between() {
        let mut ledger = RequestLedger::default();
        ledger.open(&[id("r1")], "move it");
        ledger.observe("a", &diff("x", 0.0, 10.0), true);
        ledger.observe("a", &diff("x", 10.0, 20.0), false);
        ledger.observe("a", &diff("x", 20.0, 30.0), true);
        let c = &ledger.records[0].shapes["a"].props["x"];
        assert_eq!(
            (c.restore.clone(), c.fairy.clone(), c.changed_after),
            (Prop::Num(20.0), Prop::Num(30.0), false),
            "the person's value in between is what a revert restores"
        );
        ledger.close();
        ledger.observe("a", &diff("x", 30.0, 40.0), false);
        assert!(ledger.records[0].shapes["a"].props["x"].changed_after);
        ledger.observe("b", &diff("x", 0.0, 1.0), true);
        assert!(
            !ledger.records[0].shapes.contains_key("b"),
            "closed: the fairy's writes are not recorded"
        );
    }

    #[test]
    fn only_recordable_changes_are_wanted() {
        let mut ledger = RequestLedger::default();
        assert!(!ledger.wants("a", true) && !ledger.wants("a", false));
        ledger.open(&[id("r1")], "");
        assert!(ledger.wants("a", true));
        assert!(
            !ledger.wants("a", false),
            "nobody else's change to it matters yet"
        );
        ledger.observe("a", &diff("x", 0.0, 1.0), true);
        ledger.close();
        assert!(!ledger.wants("b", true));
        assert!(ledger.wants("a", false) && !ledger.wants("b", false));
    }

    #[test]
    fn bounded_in_requests_and_shapes() {
        let mut ledger = RequestLedger::default();
        for i in 0..MAX_REQUESTS + 3 {
            ledger.open(&[id(&format!("r{i}"))], "");
        }
        assert_eq!(ledger.records.len(), MAX_REQUESTS);
        assert!(ledger.find(&id("r0")).is_none());
        assert!(
            ledger
                .find(&id(&format!("r{}", MAX_REQUESTS + 2)))
                .is_some()
        );
        for i in 0..MAX_SHAPES + 1 {
            ledger.observe(&format!("s{i}"), &diff("x", 0.0, 1.0), true);
        }
        let last = ledger.records.back().map(|r| (r.shapes.len(), r.truncated));
        assert_eq!(last, Some((MAX_SHAPES, true)));
    }

    #[test]
    fn values_to_restore_are_stored_unless_default_and_old_states_still_read() {
        let change = Change {
            restore: Prop::Num(3.0),
            fairy: Prop::Num(4.0),
            changed_after: false,
        };
        let json = serde_json::to_value(&change).unwrap_or_default();
        assert_eq!(
            json,
            serde_json::json!({"restore": {"Num": 3.0}, "fairy": {"Num": 4.0}})
        );
        // As states stored before the defaults were left out wrote them.
        let old: Option<ShapeRecord> = serde_json::from_value(serde_json::json!({
            "exists": {"restore": false, "fairy": true},
            "props": {"type": {"restore": "Absent", "fairy": {"Str": "note"}}}
        }))
        .ok();
        let new: Option<ShapeRecord> = serde_json::from_value(serde_json::json!({
            "exists": {"fairy": true},
            "props": {"type": {"fairy": {"Str": "note"}}}
        }))
        .ok();
        assert!(old.is_some());
        assert_eq!(old, new);
        assert_eq!(
            old.and_then(|r| r.exists).map(|e| (e.restore, e.fairy)),
            Some((false, true))
        );
    }

    #[test]
    fn a_ledger_round_trips_through_json() {
        let mut ledger = RequestLedger::default();
        ledger.open(&[id("r1"), id("r2")], "hi");
        ledger.observe(
            "a",
            &ShapeDiff {
                exists: Some((false, true)),
                props: vec![("type".into(), Prop::Absent, Prop::Str("note".into()))],
            },
            true,
        );
        ledger.mark_rejected(
            &id("r2"),
            RevertOutcome {
                reverted: 1,
                kept: 0,
            },
        );
        let json = serde_json::to_string(&ledger).unwrap_or_default();
        // Default values to restore are left out, and read back as the default.
        assert!(!json.contains("\"restore\""), "{json}");
        let back: Option<RequestLedger> = serde_json::from_str(&json).ok();
        assert_eq!(back.as_ref(), Some(&ledger));
        assert_eq!(
            back.and_then(|l| l.find(&id("r1")).and_then(|r| r.rejected)),
            Some(RevertOutcome {
                reverted: 1,
                kept: 0
            })
        );
    }
}
