//! A fairy's turn in review mode (README "Review mode"): its canvas actions run on a private
//! copy of the canvas, and what they change becomes suggestion records in the room's
//! `suggestions` root instead of changes to `shapes`.
//!
//! At the start of a turn the [`Suggester`] builds a scratch document from the room's shapes
//! (the live view: no walk of the room's document) and pages, then applies the fairy's own
//! pending suggestions to it: the canvas as the fairy proposes it. Streamed and complete
//! actions go through a [`Tentative`] on the scratch document exactly as they would on the
//! room's; after each step the shapes the step touched are compared with the room's shapes of
//! the turn's start (the base) and their records written: a shape new in the scratch is a
//! `create` of all its keys, one gone a `delete`, one changed an `update` of the keys that
//! differ. A record that no longer differs is removed while pending, so a reverted streamed
//! version or an interrupted request leaves no half-streamed record. One pending record per
//! shape and fairy; a record decided meanwhile is never touched again (a new one is made).
//!
//! Owns the scratch document and the fairy's record writes. The records' form is
//! [`crate::review::record`]'s; decisions are people's ([`crate::review::service`]).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use yrs::{DeepObservable, Doc, Origin, Transact};

use crate::agent::apply::tentative::Tentative;
use crate::canvas::live::touched_ids;
use crate::canvas::page::{create_page, list_pages, page_indexes};
use crate::canvas::schema::SHAPES;
use crate::canvas::shape::{
    Prop, Shape, create_from_props, delete_shape, read_shape, set_props, write_shape,
};
use crate::clock::SharedClock;
use crate::ids::{FairyId, RequestId, SuggestionId};
use crate::origin::TxnOrigin;
use crate::review::record::{self, Op, Props, Status, Suggestion};
use crate::room::Room;

/// Who proposes: the fairy and its running request, as the records name them.
#[derive(Debug, Clone)]
pub struct Author {
    /// The fairy.
    pub fairy: FairyId,
    /// Its running request.
    pub request: RequestId,
    /// Who prompted it.
    pub prompted_by: String,
    /// The model answering.
    pub model: String,
}

/// One turn's review-mode application (see the module docs).
pub struct Suggester {
    room: Arc<Room>,
    scratch: Doc,
    /// The scratch copy's tentative application (the [`super::landing::Land`] of review mode
    /// drives it).
    pub(super) tentative: Tentative,
    base: HashMap<String, Arc<Shape>>,
    touched: Arc<Mutex<BTreeSet<Arc<str>>>>,
    author: Author,
    /// The fairy's pending record per shape id.
    records: HashMap<String, SuggestionId>,
    clock: SharedClock,
}

/// The keys a suggestion never carries: `locked` is the streaming marker of the scratch copy.
fn kept(key: &str) -> bool {
    key != "locked"
}

/// Every key of `shape` with a value (a create).
fn all_props(shape: &Shape) -> Props {
    shape
        .to_props()
        .into_iter()
        .filter(|(k, p)| kept(k) && *p != Prop::Absent)
        .map(|(k, p)| (k.to_owned(), p))
        .collect()
}

/// The keys of `after` that differ from `before` (a key `after` lacks: [`Prop::Absent`]).
fn changed_props(before: &Shape, after: &Shape) -> Props {
    let old: HashMap<&str, Prop> = before.to_props().into_iter().collect();
    let new: HashMap<&str, Prop> = after.to_props().into_iter().collect();
    let mut out = Props::new();
    for (key, value) in &new {
        if kept(key) && old.get(key).unwrap_or(&Prop::Absent) != value {
            out.insert((*key).to_owned(), value.clone());
        }
    }
    for key in old.keys() {
        if kept(key) && !new.contains_key(key) {
            out.insert((*key).to_owned(), Prop::Absent);
        }
    }
    out
}

/// Applies a pending record to the scratch document (the fairy's proposal as it stands).
fn replay(txn: &mut yrs::TransactionMut<'_>, record: &Suggestion) {
    let props: Vec<(&str, Prop)> = record
        .props
        .iter()
        .map(|(k, p)| (k.as_str(), p.clone()))
        .collect();
    match record.op {
        Op::Create => {
            create_from_props(txn, &record.shape_id, &props);
        }
        Op::Update => {
            set_props(txn, &record.shape_id, &props);
        }
        Op::Delete => {
            delete_shape(txn, &record.shape_id);
        }
    }
}

impl Suggester {
    /// A turn's suggester over `shapes` (the room's, from its live view) for `author`.
    pub fn new(
        room: Arc<Room>,
        shapes: Vec<Arc<Shape>>,
        author: Author,
        clock: SharedClock,
    ) -> Self {
        // A small client id, as the room document has (see `Tentative::new`).
        let scratch = Doc::with_client_id(1);
        let (pages, indexes, pending) = {
            let txn = room.doc().transact();
            (
                list_pages(&txn),
                page_indexes(&txn),
                record::pending_of(&txn, &author.fairy, None),
            )
        };
        let mut records = HashMap::new();
        {
            let mut txn = scratch.transact_mut();
            for page in &pages {
                let index = indexes
                    .iter()
                    .find(|(id, _)| *id == page.id)
                    .map_or("", |(_, i)| i.as_str());
                create_page(&mut txn, &page.id, &page.name, index);
            }
            for shape in &shapes {
                write_shape(&mut txn, shape);
            }
            for record in &pending {
                replay(&mut txn, record);
                records.insert(record.shape_id.clone(), record.id.clone());
            }
        }
        let base = shapes.into_iter().map(|s| (s.id.clone(), s)).collect();
        let tentative = Tentative::new(&scratch, author.fairy.as_str());
        let touched: Arc<Mutex<BTreeSet<Arc<str>>>> = Arc::default();
        let seen = Arc::clone(&touched);
        scratch.get_or_insert_map(SHAPES).observe_deep(
            Origin::from("suggest"),
            move |txn, events| {
                let mut set = seen.lock().unwrap_or_else(|p| p.into_inner());
                set.extend(events.iter().flat_map(|e| touched_ids(txn, e)));
            },
        );
        Suggester {
            room,
            scratch,
            tentative,
            base,
            touched,
            author,
            records,
            clock,
        }
    }

    /// What the scratch copy proposes for shape `id`, against the base.
    fn proposal(&self, id: &str) -> Option<(Op, Props)> {
        let now = read_shape(&self.scratch.transact(), id).ok().flatten();
        match (self.base.get(id), now) {
            (None, None) => None,
            (None, Some(made)) => Some((Op::Create, all_props(&made))),
            (Some(_), None) => Some((Op::Delete, Props::new())),
            (Some(before), Some(after)) => {
                let changed = changed_props(before, &after);
                (!changed.is_empty()).then_some((Op::Update, changed))
            }
        }
    }

    /// Writes the records of the shapes touched since the last flush, in one transaction with
    /// the fairy's origin, marked `streaming` when a streamed version wrote them; how many
    /// records it wrote or removed.
    pub(super) fn flush(&mut self, streaming: bool) -> u32 {
        let touched: Vec<Arc<str>> = {
            let mut set = self.touched.lock().unwrap_or_else(|p| p.into_inner());
            let mut touched = std::mem::take(&mut *set);
            if !streaming {
                // A complete version equal to its last preview changes nothing on the scratch
                // copy: the records that preview wrote, still pending and marked streaming, are
                // written again as complete (else they could never be accepted:
                // `suggestion_streaming`).
                let txn = self.room.doc().transact();
                for (shape, id) in &self.records {
                    let still_streaming = record::read(&txn, id.as_str())
                        .is_some_and(|r| r.status == Status::Pending && r.streaming);
                    if still_streaming {
                        touched.insert(Arc::from(shape.as_str()));
                    }
                }
            }
            touched.into_iter().collect()
        };
        if touched.is_empty() {
            return 0;
        }
        let proposals: Vec<(String, Option<(Op, Props)>)> = touched
            .iter()
            .map(|id| (id.to_string(), self.proposal(id)))
            .collect();
        let at = self.clock.unix_millis() as f64;
        let mut written = 0;
        let mut txn = self
            .room
            .doc()
            .transact_mut_with(TxnOrigin::fairy(self.author.fairy.as_str()));
        for (shape_id, proposal) in proposals {
            // The record this fairy has pending for the shape, if it is still pending.
            let current = self
                .records
                .get(&shape_id)
                .and_then(|id| record::read(&txn, id.as_str()))
                .filter(|r| r.status == Status::Pending);
            match (proposal, current) {
                (Some((op, props)), current) => {
                    let unchanged = current.as_ref().is_some_and(|r| {
                        r.op == op && r.props == props && r.streaming == streaming
                    });
                    if unchanged {
                        continue;
                    }
                    let record = Suggestion {
                        id: current.map(|r| r.id).unwrap_or_else(SuggestionId::random),
                        fairy_id: self.author.fairy.clone(),
                        request_id: self.author.request.clone(),
                        op,
                        shape_id: shape_id.clone(),
                        props,
                        status: Status::Pending,
                        at,
                        decided_by: None,
                        decided_at: None,
                        prompted_by: self.author.prompted_by.clone(),
                        model: self.author.model.clone(),
                        streaming,
                    };
                    record::write(&mut txn, &record);
                    self.records.insert(shape_id, record.id);
                    written += 1;
                }
                (None, Some(stale)) => {
                    record::remove(&mut txn, &stale.id);
                    self.records.remove(&shape_id);
                    written += 1;
                }
                (None, None) => {
                    self.records.remove(&shape_id);
                }
            }
        }
        written
    }
}

/// Removes the pending records of `fairy` that a streamed version wrote (the server stopped
/// in the middle of it), in one transaction with the fairy's origin; how many.
pub fn remove_streaming(room: &Room, fairy: &FairyId) -> usize {
    let mut txn = room
        .doc()
        .transact_mut_with(TxnOrigin::fairy(fairy.as_str()));
    let stale: Vec<SuggestionId> = record::pending_of(&txn, fairy, None)
        .into_iter()
        .filter(|r| r.streaming)
        .map(|r| r.id)
        .collect();
    for id in &stale {
        record::remove(&mut txn, id);
    }
    stale.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canvas::shape::tests::rect;

    #[test]
    fn changed_props_lists_only_what_differs_and_never_locked() {
        let before = rect("a", 0.0, 0.0, 10.0, 10.0);
        let mut after = before.clone();
        after.x = 5.0;
        after.locked = true;
        let changed = changed_props(&before, &after);
        assert_eq!(changed.len(), 1);
        assert_eq!(changed.get("x"), Some(&Prop::Num(5.0)));
        let all = all_props(&after);
        assert!(!all.contains_key("locked"));
        assert_eq!(all.get("id"), Some(&Prop::Str("a".into())));
    }
}
