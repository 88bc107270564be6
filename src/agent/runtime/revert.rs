//! Taking back one of a fairy's requests (docs/fairies.md "Overrule"): shapes it created are
//! removed, properties it set are restored, shapes it deleted come back, except where someone
//! else changed the same thing afterwards, which stays.
//!
//! [`take_back`] decides shape by shape inside one write transaction, with history's rule of
//! undoing an actor ([`crate::history::undo`], which rollback uses too), from the request's
//! [`RequestRecord`] (see [`crate::agent::apply::ledger`]) and the document as it is now:
//! - a shape the request created is removed, unless someone changed it since (then it stays
//!   whole: deleting it would take their edit with it);
//! - a shape the request deleted comes back with the properties it had, unless someone made a
//!   shape with that id again;
//! - otherwise each property the request changed gets its value to restore, unless someone
//!   wrote it after the fairy did, or it no longer holds the fairy's value (a later request of
//!   the same fairy changed it; after a restart this comparison is what remains).
//!
//! [`FairyRuntime::reject_request`] carries a rejection out on the runtime: the revert, the
//! request's history item marked `acceptance: "rejected"`, a note the model reads at its next
//! prompt, a chat item every browser shows, an event. Owns no I/O beyond the document.

use std::collections::BTreeMap;

use yrs::{Map, MapPrelim, Origin, Transact, TransactionMut};

use crate::agent::apply::ledger::{Change, RequestRecord, RevertOutcome, ShapeRecord};
use crate::agent::runtime::FairyRuntime;
use crate::agent::runtime::events::AgentEvent;
use crate::agent::state::fairy::{ChatItem, append_chat};
use crate::agent::state::memory::{Acceptance, HistoryItem};
use crate::canvas::shape::{Prop, delete_shape, read_shape, set_props, shapes_root};
use crate::history::undo::{ActorChange, TakeBack};
use crate::ids::RequestId;
use crate::origin::TxnOrigin;

/// Why a request could not be taken back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevertError {
    /// No recent request of this fairy has that id.
    #[error(
        "no request '{0}' of this fairy is known (the last {max} requests can be taken back)",
        max = crate::agent::apply::ledger::MAX_REQUESTS
    )]
    UnknownRequest(String),
}

/// What became of one shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Reverted,
    Kept,
    Nothing,
}

/// Takes back what `record` says its request changed, in `txn` (see the module docs).
pub fn take_back(txn: &mut TransactionMut<'_>, record: &RequestRecord) -> RevertOutcome {
    let mut outcome = RevertOutcome::default();
    for (id, shape) in &record.shapes {
        match take_back_shape(txn, id, shape) {
            Verdict::Reverted => outcome.reverted += 1,
            Verdict::Kept => outcome.kept += 1,
            Verdict::Nothing => {}
        }
    }
    outcome
}

/// The shape's stored keys now: `Ok(None)` absent, `Err(())` present but unreadable.
fn current(txn: &TransactionMut<'_>, id: &str) -> Result<Option<BTreeMap<String, Prop>>, ()> {
    match read_shape(txn, id) {
        Ok(shape) => Ok(shape.map(|s| {
            s.to_props()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect()
        })),
        Err(_) => Err(()),
    }
}

fn value<'a>(props: &'a BTreeMap<String, Prop>, key: &str) -> &'a Prop {
    props.get(key).unwrap_or(&Prop::Absent)
}

/// The recorded keys of a shape as `pick` reads them from each recorded change: the shape as
/// a whole, for the rule on its existence.
fn recorded<'a>(
    changes: &[(&'a String, &'a Change<Prop>)],
    pick: impl Fn(&'a Change<Prop>) -> &'a Prop,
) -> BTreeMap<&'a str, &'a Prop> {
    changes.iter().map(|(k, c)| (k.as_str(), pick(c))).collect()
}

fn take_back_shape(txn: &mut TransactionMut<'_>, id: &str, shape: &ShapeRecord) -> Verdict {
    let all: Vec<_> = shape.props.iter().collect();
    let changes: Vec<_> = all.iter().copied().filter(|(_, c)| !c.is_noop()).collect();
    let exists = shape.exists.as_ref().filter(|c| !c.is_noop());
    if exists.is_none() && changes.is_empty() {
        return Verdict::Nothing;
    }
    let Ok(now) = current(txn, id) else {
        // Someone rewrote it into something this server cannot read: theirs now.
        return Verdict::Kept;
    };
    let Some(existence) = exists else {
        // Changed by the request, since deleted by someone: as others left it.
        let Some(now) = now else {
            return Verdict::Kept;
        };
        let mut kept = false;
        let mut restore = Vec::new();
        for (key, c) in changes {
            let change = ActorChange {
                before: &c.restore,
                left: &c.fairy,
                changed_after: c.changed_after,
            };
            match change.take_back(&value(&now, key)) {
                TakeBack::Restore(before) => restore.push((key.as_str(), before.clone())),
                TakeBack::Keep => kept = true,
                TakeBack::Nothing => {}
            }
        }
        set_props(txn, id, &restore);
        return if kept {
            Verdict::Kept
        } else {
            Verdict::Reverted
        };
    };
    // Created or deleted by the request: the shape as a whole, over the keys it recorded.
    let (before, left, changed_after) = if existence.fairy {
        let made = recorded(&changes, |c| &c.fairy);
        (None, Some(made), shape.changed_after())
    } else {
        let gone = recorded(&all, |c| &c.restore);
        (Some(gone), None, existence.changed_after)
    };
    let live = now.as_ref().map(|now| {
        let keys = left.as_ref().or(before.as_ref());
        keys.into_iter()
            .flat_map(|m| m.keys())
            .map(|k| (*k, value(now, k)))
            .collect::<BTreeMap<&str, &Prop>>()
    });
    let whole = ActorChange {
        before,
        left,
        changed_after,
    };
    match whole.take_back(&live) {
        TakeBack::Restore(None) => {
            delete_shape(txn, id);
            Verdict::Reverted
        }
        TakeBack::Restore(Some(props)) => {
            shapes_root(txn).insert(txn, id, MapPrelim::default());
            let props: Vec<(&str, Prop)> = props.into_iter().map(|(k, v)| (k, v.clone())).collect();
            set_props(txn, id, &props);
            Verdict::Reverted
        }
        TakeBack::Keep | TakeBack::Nothing => Verdict::Kept,
    }
}

impl FairyRuntime {
    /// Rejects request `id` of this fairy, which is not running (its host interrupted it):
    /// takes back what it changed (see the module docs), marks its history item rejected,
    /// tells the model at its next prompt, shows the rejection in the chat and stores the
    /// state. Rejecting a request again answers the first outcome and changes nothing.
    pub fn reject_request(&mut self, id: &RequestId) -> Result<RevertOutcome, RevertError> {
        let record = self
            .tracker
            .request(id)
            .ok_or_else(|| RevertError::UnknownRequest(id.to_string()))?;
        if let Some(outcome) = record.rejected {
            return Ok(outcome);
        }
        let outcome = {
            let origin = Origin::from(&TxnOrigin::fairy(self.entity.id.as_str()));
            let mut txn = self.room.doc().transact_mut_with(origin);
            take_back(&mut txn, &record)
        };
        self.tracker.mark_rejected(id, outcome);
        for item in &mut self.state.history {
            if let HistoryItem::Prompt {
                request_id: Some(r),
                acceptance,
                ..
            } = item
                && record.answers_to(r)
            {
                *acceptance = Some(Acceptance::Rejected);
            }
        }
        let kept = match outcome.kept {
            0 => String::new(),
            n => {
                format!(" {n} shape(s) stayed as they are because someone changed them after you.")
            }
        };
        // A review-mode request: its suggestions still waiting are rejected by the caller
        // right after this (`FairyHub::revert`).
        let waiting = crate::review::record::pending_of(
            &yrs::Transact::transact(self.room.doc()),
            &self.entity.id,
            Some(id),
        )
        .len();
        let suggestions = match waiting {
            0 => String::new(),
            n => format!(" Its {n} suggestion(s) still waiting were rejected."),
        };
        self.state.history.push(HistoryItem::Prompt {
            source: "system".into(),
            agent_facing_message: format!(
                "The user rejected your work for request {id} (\"{}\"): what you changed for it was taken back ({} shape(s)).{kept}{suggestions} Do not redo it unless you are asked again.",
                record.summary, outcome.reverted
            ),
            memory_level: self.modes.mode().memory_level(),
            request_id: Some(id.clone()),
            acceptance: Some(Acceptance::Rejected),
        });
        let text = if waiting > 0 && outcome.reverted == 0 && outcome.kept == 0 {
            format!("Rejected: my {waiting} suggestion(s) for this request are turned down.")
        } else {
            format!(
                "Rejected: I took back what I did for this request ({} shape(s)).{}{}",
                outcome.reverted,
                match outcome.kept {
                    0 => String::new(),
                    n => format!(" {n} shape(s) stayed because someone changed them since."),
                },
                match waiting {
                    0 => String::new(),
                    n => format!(" {n} suggestion(s) still waiting are turned down."),
                }
            )
        };
        let item = ChatItem {
            from: format!("fairy:{}", self.entity.id),
            role: "fairy".into(),
            text: text.clone(),
            at: self.clock.unix_millis() as f64,
            request_id: Some(id.clone()),
            acceptance: Some(Acceptance::Rejected),
        };
        if let Err(error) = append_chat(self.room.doc(), &self.entity.id, &item) {
            tracing::warn!(fairy = %self.entity.id, %error, "rejection chat item lost");
        }
        self.beacon.update(|p| p.last_message = Some(text));
        self.out.emit(AgentEvent::RequestRejected {
            request_id: id.clone(),
            reverted: outcome.reverted,
            kept: outcome.kept,
        });
        self.persist();
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::apply::changes::ChangeTracker;
    use crate::canvas::shape::{Shape, ShapeProps, list_shapes, write_shape};
    use proptest::prelude::*;
    use yrs::Doc;

    const FAIRY: &str = "fairy:f1";
    const USER: &str = "client:1:alice";
    const OTHER_FAIRY: &str = "fairy:f2";

    fn rect(id: &str, x: f64, color: &str, by: &str) -> Shape {
        Shape {
            id: id.into(),
            type_name: "rectangle".into(),
            page_id: "page:main".into(),
            x,
            y: 0.0,
            rotation: 0.0,
            index: "a0".into(),
            color: color.into(),
            fill: "none".into(),
            note: String::new(),
            locked: false,
            created_by: by.into(),
            props: ShapeProps::Geo {
                w: 10.0,
                h: 10.0,
                text: String::new(),
                text_align: "middle".into(),
            },
        }
    }

    fn put(doc: &Doc, origin: &str, shape: &Shape) {
        write_shape(&mut doc.transact_mut_with(origin), shape);
    }

    /// A document with a person's rectangle `a`, watched by fairy `f1`'s tracker.
    fn watched() -> (Doc, ChangeTracker) {
        let doc = Doc::new();
        put(&doc, USER, &rect("a", 0.0, "black", "user:alice"));
        let tracker = ChangeTracker::new(&doc, "f1", &[]);
        (doc, tracker)
    }

    fn snapshot(doc: &Doc) -> BTreeMap<String, Shape> {
        list_shapes(&doc.transact())
            .into_iter()
            .map(|s| (s.id.clone(), s))
            .collect()
    }

    fn request(tracker: &ChangeTracker) -> RequestId {
        let id = RequestId::random();
        tracker.open_request(std::slice::from_ref(&id), "test");
        id
    }

    fn revert(doc: &Doc, tracker: &ChangeTracker, id: &RequestId) -> RevertOutcome {
        let record = tracker.request(id).unwrap_or_default();
        let mut txn = doc.transact_mut_with(FAIRY);
        take_back(&mut txn, &record)
    }

    fn set(doc: &Doc, origin: &str, id: &str, key: &str, prop: Prop) -> bool {
        set_props(&mut doc.transact_mut_with(origin), id, &[(key, prop)])
    }

    #[test]
    fn created_shapes_go_set_properties_return_deleted_shapes_come_back() {
        let (doc, _) = watched();
        put(&doc, USER, &rect("b", 5.0, "black", "user:alice"));
        let before = snapshot(&doc);
        let tracker = ChangeTracker::new(&doc, "f1", &[]);
        let id = request(&tracker);
        put(&doc, FAIRY, &rect("new", 1.0, "blue", FAIRY));
        set(&doc, FAIRY, "a", "color", Prop::Str("red".into()));
        delete_shape(&mut doc.transact_mut_with(FAIRY), "b");
        tracker.close_request();
        let outcome = revert(&doc, &tracker, &id);
        assert_eq!(
            outcome,
            RevertOutcome {
                reverted: 3,
                kept: 0
            }
        );
        assert_eq!(snapshot(&doc), before);
    }

    #[test]
    fn what_a_person_changed_afterwards_stays() {
        let (doc, tracker) = watched();
        let id = request(&tracker);
        put(&doc, FAIRY, &rect("new", 1.0, "blue", FAIRY));
        set(&doc, FAIRY, "a", "color", Prop::Str("red".into()));
        set(&doc, FAIRY, "a", "x", Prop::Num(50.0));
        tracker.close_request();
        // A person adopts the fairy's shape and recolours the one it moved.
        set(&doc, USER, "new", "text", Prop::Str("mine".into()));
        set(&doc, USER, "a", "color", Prop::Str("green".into()));
        let outcome = revert(&doc, &tracker, &id);
        assert_eq!(
            outcome,
            RevertOutcome {
                reverted: 0,
                kept: 2
            }
        );
        let now = snapshot(&doc);
        assert_eq!(now["a"].color, "green", "the person's colour stays");
        assert_eq!(now["a"].x, 0.0, "the fairy's move is taken back");
        assert!(now.contains_key("new"), "an adopted shape stays whole");
    }

    #[test]
    fn a_later_request_of_the_same_fairy_is_a_change_afterwards() {
        let (doc, tracker) = watched();
        let first = request(&tracker);
        set(&doc, FAIRY, "a", "x", Prop::Num(10.0));
        let second = request(&tracker);
        set(&doc, FAIRY, "a", "x", Prop::Num(30.0));
        tracker.close_request();
        assert_eq!(revert(&doc, &tracker, &first).kept, 1);
        assert_eq!(snapshot(&doc)["a"].x, 30.0);
        // Newest first, both come back.
        assert_eq!(revert(&doc, &tracker, &second).reverted, 1);
        assert_eq!(revert(&doc, &tracker, &first).reverted, 1);
        assert_eq!(snapshot(&doc)["a"].x, 0.0);
    }

    /// One step of an interleaving: who acts, and what.
    #[derive(Debug, Clone)]
    enum Step {
        /// The fairy (`by_fairy`) or a person / another fairy sets a key of shape `target`
        /// (an index into the shapes that exist) to the `value`-th value of their domain.
        Set {
            by_fairy: bool,
            other_fairy: bool,
            target: usize,
            key: usize,
            value: usize,
        },
        /// Creates a shape with a fresh id.
        Create { by_fairy: bool },
        /// Deletes shape `target`.
        Delete { by_fairy: bool, target: usize },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            5 => (any::<bool>(), any::<bool>(), 0..16usize, 0..3usize, 0..4usize).prop_map(
                |(by_fairy, other_fairy, target, key, value)| Step::Set { by_fairy, other_fairy, target, key, value }
            ),
            1 => any::<bool>().prop_map(|by_fairy| Step::Create { by_fairy }),
            1 => (any::<bool>(), 0..16usize).prop_map(|(by_fairy, target)| Step::Delete { by_fairy, target }),
        ]
    }

    /// A key's value in the fairy's domain or the people's: never equal, so every write of a
    /// person is a change the document can see (a person writing exactly the fairy's value
    /// leaves no trace in a CRDT).
    fn value_of(key: usize, value: usize, by_fairy: bool) -> (&'static str, Prop) {
        match key {
            0 => (
                "x",
                Prop::Num(if by_fairy { 1000.0 } else { 0.0 } + value as f64 * 7.0),
            ),
            1 => (
                "color",
                Prop::Str(
                    if by_fairy {
                        ["red", "green", "blue", "violet"]
                    } else {
                        ["black", "grey", "orange", "yellow"]
                    }[value % 4]
                        .into(),
                ),
            ),
            _ => (
                "text",
                Prop::Str(format!("{}{value}", if by_fairy { "f" } else { "u" })),
            ),
        }
    }

    /// The `n`-th (modulo) shape an author may act on: the fairy any, people those that exist
    /// without the fairy (its own shapes are not in the world of "their edits alone").
    fn pick(
        existing: &[String],
        fairy_made: &[String],
        by_fairy: bool,
        n: usize,
    ) -> Option<String> {
        let pool: Vec<&String> = existing
            .iter()
            .filter(|s| by_fairy || !fairy_made.contains(s))
            .collect();
        pool.get(n % pool.len().max(1)).map(|s| (*s).clone())
    }

    /// Runs `pre` shapes then `steps` (the first `during` inside the fairy's request, the rest
    /// after it) on a document observed by the fairy's tracker, reverts the request, and
    /// returns the document and the same people's edits applied alone to the pre-request state.
    fn run(
        pre: usize,
        steps: &[Step],
        during: usize,
    ) -> (BTreeMap<String, Shape>, BTreeMap<String, Shape>) {
        let real = Doc::new();
        let alone = Doc::new();
        for i in 0..pre {
            let s = rect(&format!("p{i}"), i as f64, "black", "user:alice");
            put(&real, USER, &s);
            put(&alone, USER, &s);
        }
        let tracker = ChangeTracker::new(&real, "f1", &[]);
        let id = request(&tracker);
        let mut fairy_made: Vec<String> = Vec::new();
        for (n, step) in steps.iter().enumerate() {
            if n == during {
                tracker.close_request();
            }
            // The fairy acts only during its request; people at any time.
            let fairy_acts = n < during;
            let existing: Vec<String> = snapshot(&real).into_keys().collect();
            match step {
                Step::Set {
                    by_fairy,
                    other_fairy,
                    target,
                    key,
                    value,
                } => {
                    let by_fairy = *by_fairy && fairy_acts;
                    let Some(target) = pick(&existing, &fairy_made, by_fairy, *target) else {
                        continue;
                    };
                    let (key, prop) = value_of(*key, *value, by_fairy);
                    let origin = if by_fairy {
                        FAIRY
                    } else if *other_fairy {
                        OTHER_FAIRY
                    } else {
                        USER
                    };
                    if set(&real, origin, &target, key, prop.clone()) && !by_fairy {
                        set(&alone, origin, &target, key, prop);
                    }
                }
                Step::Create { by_fairy } => {
                    let by_fairy = *by_fairy && fairy_acts;
                    let sid = format!("n{n}");
                    let (origin, by) = if by_fairy {
                        (FAIRY, FAIRY)
                    } else {
                        (USER, "user:alice")
                    };
                    let s = rect(&sid, n as f64, "black", by);
                    put(&real, origin, &s);
                    if by_fairy {
                        fairy_made.push(sid);
                    } else {
                        put(&alone, origin, &s);
                    }
                }
                Step::Delete { by_fairy, target } => {
                    let by_fairy = *by_fairy && fairy_acts;
                    let Some(target) = pick(&existing, &fairy_made, by_fairy, *target) else {
                        continue;
                    };
                    let origin = if by_fairy { FAIRY } else { USER };
                    if delete_shape(&mut real.transact_mut_with(origin), &target) && !by_fairy {
                        delete_shape(&mut alone.transact_mut_with(origin), &target);
                    }
                }
            }
        }
        tracker.close_request();
        revert(&real, &tracker, &id);
        (snapshot(&real), snapshot(&alone))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Random interleavings of a fairy's request and people's (and another fairy's) edits,
        /// during and after the request, then a revert: the document is the people's edits
        /// applied alone to the pre-request state.
        #[test]
        fn a_revert_leaves_the_peoples_edits_alone_on_the_pre_request_state(
            pre in 1..5usize,
            steps in proptest::collection::vec(step(), 0..40),
            during in 0..40usize,
        ) {
            let (real, alone) = run(pre, &steps, during.min(steps.len()));
            prop_assert_eq!(real, alone);
        }
    }
}
