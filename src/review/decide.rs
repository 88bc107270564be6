//! A person's decision on a suggestion, inside one transaction on the room's document:
//! accepting applies exactly the suggested keys to `shapes` (a create makes the shape with
//! `createdBy: fairy:ID`; an update sets only its keys, so a person's concurrent edit of other
//! keys stays; a delete removes the shape and unbinds arrows from it) and marks the record
//! accepted; rejecting only marks it. A decided record is never decided again.
//!
//! Owns the decision rules; the transaction, its origin and the actor logged with it are the
//! caller's ([`super::service`]). Pure document code: no room, no store.

use yrs::TransactionMut;

use super::record::{self, Op, Status, Suggestion};
use crate::canvas::shape::{
    Prop, create_from_props, delete_shapes_and_unbind, set_props, shape_exists,
};
use crate::ids::SuggestionId;

/// Why a decision was refused (mapped to HTTP once, in `server::review`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecideError {
    /// No suggestion has that id.
    #[error("no suggestion '{0}'")]
    NotFound(String),
    /// It was accepted or rejected already.
    #[error("the suggestion was {} already", .0.name())]
    AlreadyDecided(Status),
    /// Its shape was deleted since (an update or delete cannot be applied).
    #[error("the suggestion's shape '{0}' was deleted since")]
    ShapeGone(String),
    /// A shape with the id it would create exists now.
    #[error("a shape '{0}' exists already")]
    ShapeExists(String),
    /// The fairy is still streaming it: what it holds is a half-built preview (accept it once
    /// the fairy's action is complete).
    #[error("suggestion '{0}' is still being written by its fairy; accept it once it is complete")]
    Streaming(String),
}

impl DecideError {
    /// The stable code clients see (`error` in the JSON body).
    pub fn code(&self) -> &'static str {
        match self {
            DecideError::NotFound(_) => "suggestion_not_found",
            DecideError::AlreadyDecided(_) => "already_decided",
            DecideError::ShapeGone(_) => "shape_gone",
            DecideError::ShapeExists(_) => "shape_exists",
            DecideError::Streaming(_) => "suggestion_streaming",
        }
    }
}

/// The verdict a person gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Apply it.
    Accept,
    /// Turn it down.
    Reject,
}

/// The pending record `id`, or why there is none.
pub fn pending<T: yrs::ReadTxn>(txn: &T, id: &SuggestionId) -> Result<Suggestion, DecideError> {
    let record =
        record::read(txn, id.as_str()).ok_or_else(|| DecideError::NotFound(id.to_string()))?;
    if record.status != Status::Pending {
        return Err(DecideError::AlreadyDecided(record.status));
    }
    Ok(record)
}

/// Whether `record` can be applied to `shapes` as they are in `txn`.
pub fn applicable<T: yrs::ReadTxn>(txn: &T, record: &Suggestion) -> Result<(), DecideError> {
    let exists = shape_exists(txn, &record.shape_id);
    match record.op {
        Op::Create if exists => Err(DecideError::ShapeExists(record.shape_id.clone())),
        Op::Update | Op::Delete if !exists => Err(DecideError::ShapeGone(record.shape_id.clone())),
        _ => Ok(()),
    }
}

/// The keys of `record` that accepting writes: never `locked` (the scratch copy's streaming
/// marker), `createdBy` or `id` (the server sets those).
fn settable(record: &Suggestion) -> Vec<(&str, Prop)> {
    record
        .props
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "locked" | "createdBy" | "id"))
        .map(|(k, p)| (k.as_str(), p.clone()))
        .collect()
}

/// Applies `record` to `shapes` (checked with [`applicable`] first).
fn apply(txn: &mut TransactionMut<'_>, record: &Suggestion) -> Result<(), DecideError> {
    applicable(txn, record)?;
    match record.op {
        Op::Create => {
            let created_by = Prop::Str(format!("fairy:{}", record.fairy_id));
            let mut props = settable(record);
            props.extend([
                ("id", Prop::Str(record.shape_id.clone())),
                ("createdBy", created_by),
            ]);
            create_from_props(txn, &record.shape_id, &props);
        }
        Op::Update => {
            set_props(txn, &record.shape_id, &settable(record));
        }
        Op::Delete => {
            delete_shapes_and_unbind(txn, &[record.shape_id.as_str()]);
        }
    }
    Ok(())
}

/// Decides the pending suggestion `id` by `by` at `at` (Unix ms) in `txn`; the record as
/// decided. An error writes nothing.
pub fn decide_in(
    txn: &mut TransactionMut<'_>,
    id: &SuggestionId,
    verdict: Verdict,
    by: &str,
    at: f64,
) -> Result<Suggestion, DecideError> {
    let mut record = pending(txn, id)?;
    match verdict {
        Verdict::Accept if record.streaming => {
            return Err(DecideError::Streaming(id.to_string()));
        }
        Verdict::Accept => {
            apply(txn, &record)?;
            record.status = Status::Accepted;
        }
        Verdict::Reject => record.status = Status::Rejected,
    }
    record.decided_by = Some(by.to_owned());
    record.decided_at = Some(at);
    record.streaming = false;
    record::write(txn, &record);
    Ok(record)
}

/// Accepts every pending suggestion of `fairy`'s `request` in `txn` (each as
/// [`decide_in`]); one that cannot be applied is rejected instead and reported with why, so
/// nothing of the request stays pending but what the fairy is still streaming (left pending,
/// neither accepted nor a conflict: its preview is half-built). Returns the accepted ids and
/// the conflicts.
pub fn accept_all_in(
    txn: &mut TransactionMut<'_>,
    fairy: &crate::ids::FairyId,
    request: &crate::ids::RequestId,
    by: &str,
    at: f64,
) -> (Vec<SuggestionId>, Vec<(SuggestionId, DecideError)>) {
    let mut accepted = Vec::new();
    let mut conflicts = Vec::new();
    for record in record::pending_of(txn, fairy, Some(request)) {
        if record.streaming {
            continue;
        }
        match decide_in(txn, &record.id, Verdict::Accept, by, at) {
            Ok(_) => accepted.push(record.id),
            Err(conflict) => {
                // Rejecting a pending record cannot fail.
                let _ = decide_in(txn, &record.id, Verdict::Reject, by, at);
                conflicts.push((record.id, conflict));
            }
        }
    }
    (accepted, conflicts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canvas::shape::{read_shape, tests::rect, write_shape};
    use crate::review::record::{Props, write};
    use yrs::{Doc, ReadTxn, Transact};

    fn suggestion(id: &str, op: Op, shape: &str, props: &[(&str, Prop)]) -> Suggestion {
        let parse = |s: &str| SuggestionId::parse(s).unwrap_or_else(|e| panic!("{e}"));
        Suggestion {
            id: parse(id),
            fairy_id: crate::ids::FairyId::parse("f1").unwrap_or_else(|e| panic!("{e}")),
            request_id: crate::ids::RequestId::parse("r1").unwrap_or_else(|e| panic!("{e}")),
            op,
            shape_id: shape.into(),
            props: props
                .iter()
                .map(|(k, p)| ((*k).to_owned(), p.clone()))
                .collect::<Props>(),
            status: Status::Pending,
            at: 1.0,
            decided_by: None,
            decided_at: None,
            prompted_by: "ada".into(),
            model: "offline".into(),
            streaming: false,
        }
    }

    fn id(s: &str) -> SuggestionId {
        SuggestionId::parse(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn accepting_applies_exactly_the_keys_once() {
        let doc = Doc::new();
        {
            let mut txn = doc.transact_mut();
            write_shape(&mut txn, &rect("box", 0.0, 0.0, 10.0, 10.0));
            write(
                &mut txn,
                &suggestion("s-1", Op::Update, "box", &[("x", Prop::Num(50.0))]),
            );
            let mut new = rect("new", 1.0, 2.0, 3.0, 4.0);
            new.locked = true;
            let props: Vec<(&str, Prop)> = new.to_props();
            write(&mut txn, &suggestion("s-2", Op::Create, "new", &props));
            write(&mut txn, &suggestion("s-3", Op::Delete, "box", &[]));
        }
        // A person moves the box down meanwhile: the fairy's x does not undo the person's y.
        {
            let mut txn = doc.transact_mut();
            set_props(&mut txn, "box", &[("y", Prop::Num(7.0))]);
        }
        let mut txn = doc.transact_mut();
        let done = decide_in(&mut txn, &id("s-1"), Verdict::Accept, "bob", 9.0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(done.status, Status::Accepted);
        assert_eq!(done.decided_by.as_deref(), Some("bob"));
        let shape = read_shape(&txn, "box")
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("box"));
        assert_eq!((shape.x, shape.y), (50.0, 7.0));
        assert_eq!(
            decide_in(&mut txn, &id("s-1"), Verdict::Reject, "bob", 9.0),
            Err(DecideError::AlreadyDecided(Status::Accepted))
        );
        decide_in(&mut txn, &id("s-2"), Verdict::Accept, "bob", 9.0)
            .unwrap_or_else(|e| panic!("{e}"));
        let made = read_shape(&txn, "new")
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("new"));
        assert!(!made.locked);
        assert_eq!(made.created_by, "fairy:f1");
        decide_in(&mut txn, &id("s-3"), Verdict::Accept, "bob", 9.0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!shape_exists(&txn, "box"));
        assert_eq!(
            decide_in(&mut txn, &id("s-9"), Verdict::Accept, "bob", 9.0),
            Err(DecideError::NotFound("s-9".into()))
        );
    }

    #[test]
    fn a_suggestion_still_streaming_is_not_accepted_and_accept_all_leaves_it_pending() {
        let doc = Doc::new();
        {
            let mut txn = doc.transact_mut();
            let mut streaming = suggestion("s-1", Op::Create, "half", &[("x", Prop::Num(0.0))]);
            streaming.streaming = true;
            write(&mut txn, &streaming);
            write(
                &mut txn,
                &suggestion("s-2", Op::Create, "done", &[("x", Prop::Num(5.0))]),
            );
        }
        let mut txn = doc.transact_mut();
        assert_eq!(
            decide_in(&mut txn, &id("s-1"), Verdict::Accept, "bob", 9.0),
            Err(DecideError::Streaming("s-1".into()))
        );
        assert!(
            !shape_exists(&txn, "half"),
            "nothing of the preview applied"
        );
        let fairy = crate::ids::FairyId::parse("f1").unwrap_or_else(|e| panic!("{e}"));
        let request = crate::ids::RequestId::parse("r1").unwrap_or_else(|e| panic!("{e}"));
        let (accepted, conflicts) = accept_all_in(&mut txn, &fairy, &request, "bob", 9.0);
        assert_eq!(accepted, vec![id("s-2")]);
        assert!(conflicts.is_empty());
        let left = record::read(&txn, "s-1").unwrap_or_else(|| panic!("s-1"));
        assert_eq!(left.status, Status::Pending);
        assert!(!shape_exists(&txn, "half"));
    }

    #[test]
    fn a_deleted_shape_or_a_taken_id_is_a_conflict_and_writes_nothing() {
        let doc = Doc::new();
        {
            let mut txn = doc.transact_mut();
            write_shape(&mut txn, &rect("taken", 0.0, 0.0, 10.0, 10.0));
            write(
                &mut txn,
                &suggestion("s-1", Op::Update, "gone", &[("x", Prop::Num(50.0))]),
            );
            write(
                &mut txn,
                &suggestion(
                    "s-2",
                    Op::Create,
                    "taken",
                    &rect("taken", 5.0, 5.0, 1.0, 1.0).to_props(),
                ),
            );
        }
        let before = doc.transact().state_vector();
        let mut txn = doc.transact_mut();
        assert_eq!(
            decide_in(&mut txn, &id("s-1"), Verdict::Accept, "bob", 1.0),
            Err(DecideError::ShapeGone("gone".into()))
        );
        assert_eq!(
            decide_in(&mut txn, &id("s-2"), Verdict::Accept, "bob", 1.0),
            Err(DecideError::ShapeExists("taken".into()))
        );
        drop(txn);
        assert_eq!(doc.transact().state_vector(), before);
        // Rejecting is always possible.
        let mut txn = doc.transact_mut();
        let rejected = decide_in(&mut txn, &id("s-1"), Verdict::Reject, "bob", 1.0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rejected.status, Status::Rejected);
    }

    mod props {
        //! Random suggestions, people's edits, accepts, rejects and accept-alls against a model
        //! of the rules: after every step `shapes` is exactly what applying the accepted keys
        //! (and the people's edits) gives; a reject or a refused decision changes nothing;
        //! nothing of a request stays pending after its accept-all.

        use std::collections::BTreeMap;

        use proptest::prelude::*;
        use yrs::{Doc, Map, Out, ReadTxn, Transact};

        use super::super::*;
        use crate::canvas::schema::SHAPES;
        use crate::canvas::shape::read_prop;
        use crate::ids::{FairyId, RequestId};
        use crate::review::record::{Props, write};

        type Model = BTreeMap<String, BTreeMap<String, Prop>>;

        #[derive(Debug, Clone)]
        enum Step {
            Suggest {
                op: u8,
                shape: u8,
                request: u8,
                props: Vec<(u8, i8)>,
            },
            PersonSet {
                shape: u8,
                key: u8,
                value: i8,
            },
            PersonDelete {
                shape: u8,
            },
            PersonCreate {
                shape: u8,
            },
            Accept(usize),
            Reject(usize),
            AcceptAll {
                request: u8,
            },
        }

        const KEYS: [&str; 4] = ["x", "y", "color", "text"];

        fn value(key: &str, v: i8) -> Prop {
            match key {
                "x" | "y" => Prop::Num(f64::from(v)),
                _ if v < -100 => Prop::Absent,
                _ => Prop::Str(format!("v{v}")),
            }
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                3 => (0u8..3, 0u8..4, 0u8..2, prop::collection::vec((0u8..4, any::<i8>()), 0..4))
                    .prop_map(|(op, shape, request, props)| Step::Suggest { op, shape, request, props }),
                2 => (0u8..4, 0u8..4, any::<i8>())
                    .prop_map(|(shape, key, value)| Step::PersonSet { shape, key, value }),
                1 => (0u8..4).prop_map(|shape| Step::PersonDelete { shape }),
                1 => (0u8..4).prop_map(|shape| Step::PersonCreate { shape }),
                3 => any::<usize>().prop_map(Step::Accept),
                2 => any::<usize>().prop_map(Step::Reject),
                1 => (0u8..2).prop_map(|request| Step::AcceptAll { request }),
            ]
        }

        fn shapes_of(doc: &Doc) -> Model {
            let txn = doc.transact();
            let Some(root) = txn.get_map(SHAPES) else {
                return Model::new();
            };
            root.iter(&txn)
                .filter_map(|(id, v)| match v {
                    Out::YMap(m) => {
                        let keys: BTreeMap<String, Prop> = m
                            .keys(&txn)
                            .map(|k| (k.to_owned(), read_prop(&txn, &m, k)))
                            .collect();
                        Some((id.to_owned(), keys))
                    }
                    _ => None,
                })
                .collect()
        }

        /// The model's accept: `Ok` with the shapes after it, or the conflict.
        fn model_accept(model: &Model, r: &Suggestion) -> Option<Model> {
            let mut next = model.clone();
            let keys = r
                .props
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "locked" | "createdBy" | "id"));
            match r.op {
                Op::Create => {
                    if model.contains_key(&r.shape_id) {
                        return None;
                    }
                    let mut shape: BTreeMap<String, Prop> = keys
                        .filter(|(_, p)| **p != Prop::Absent)
                        .map(|(k, p)| (k.clone(), p.clone()))
                        .collect();
                    shape.insert("id".into(), Prop::Str(r.shape_id.clone()));
                    shape.insert("createdBy".into(), Prop::Str("fairy:f1".into()));
                    next.insert(r.shape_id.clone(), shape);
                }
                Op::Update => {
                    let shape = next.get_mut(&r.shape_id)?;
                    for (k, p) in keys {
                        if *p == Prop::Absent {
                            shape.remove(k);
                        } else {
                            shape.insert(k.clone(), p.clone());
                        }
                    }
                }
                Op::Delete => {
                    next.remove(&r.shape_id)?;
                }
            }
            Some(next)
        }

        fn shape_name(n: u8) -> String {
            format!("s{n}")
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(128))]
            #[test]
            fn shapes_are_the_accepted_keys_and_nothing_else(steps in prop::collection::vec(step(), 1..40)) {
                let doc = Doc::new();
                let fairy = FairyId::parse("f1").unwrap_or_else(|e| panic!("{e}"));
                let requests = [
                    RequestId::parse("r0").unwrap_or_else(|e| panic!("{e}")),
                    RequestId::parse("r1").unwrap_or_else(|e| panic!("{e}")),
                ];
                let mut model = Model::new();
                let mut ids: Vec<SuggestionId> = Vec::new();
                for (n, step) in steps.into_iter().enumerate() {
                    let mut txn = doc.transact_mut();
                    match step {
                        Step::Suggest { op, shape, request, props } => {
                            let op = [Op::Create, Op::Update, Op::Delete][usize::from(op)];
                            let mut map = Props::new();
                            if op == Op::Create {
                                map.insert("type".into(), Prop::Str("rectangle".into()));
                                map.insert("locked".into(), Prop::Bool(true));
                            }
                            if op != Op::Delete {
                                for (k, v) in props {
                                    let key = KEYS[usize::from(k)];
                                    map.insert(key.into(), value(key, v));
                                }
                            }
                            let id = SuggestionId::parse(&format!("s-{n}")).unwrap_or_else(|e| panic!("{e}"));
                            let mut record = super::suggestion(id.as_str(), op, &shape_name(shape), &[]);
                            record.props = map;
                            record.request_id = requests[usize::from(request)].clone();
                            write(&mut txn, &record);
                            ids.push(id);
                        }
                        Step::PersonSet { shape, key, value: v } => {
                            let name = shape_name(shape);
                            let key = KEYS[usize::from(key)];
                            if let Some(s) = model.get_mut(&name) {
                                let p = value(key, v);
                                set_props(&mut txn, &name, &[(key, p.clone())]);
                                if p == Prop::Absent { s.remove(key); } else { s.insert(key.into(), p); }
                            }
                        }
                        Step::PersonDelete { shape } => {
                            let name = shape_name(shape);
                            if model.remove(&name).is_some() {
                                crate::canvas::shape::delete_shape(&mut txn, &name);
                            }
                        }
                        Step::PersonCreate { shape } => {
                            let name = shape_name(shape);
                            if let std::collections::btree_map::Entry::Vacant(entry) = model.entry(name.clone()) {
                                let props = [("id", Prop::Str(name.clone())), ("type", Prop::Str("rectangle".into()))];
                                create_from_props(&mut txn, &name, &props);
                                entry.insert(props.iter().map(|(k, p)| ((*k).to_owned(), p.clone())).collect());
                            }
                        }
                        Step::Accept(i) | Step::Reject(i) if ids.is_empty() => { let _ = i; }
                        Step::Accept(i) => {
                            let id = ids[i % ids.len()].clone();
                            let before = record::read(&txn, id.as_str()).unwrap_or_else(|| panic!("record"));
                            let decided = decide_in(&mut txn, &id, Verdict::Accept, "bob", 1.0);
                            if before.status != Status::Pending {
                                prop_assert_eq!(decided, Err(DecideError::AlreadyDecided(before.status)));
                            } else {
                                match model_accept(&model, &before) {
                                    Some(next) => {
                                        prop_assert!(decided.is_ok(), "{:?}", decided);
                                        model = next;
                                    }
                                    None => prop_assert!(matches!(decided, Err(DecideError::ShapeGone(_) | DecideError::ShapeExists(_))), "{:?}", decided),
                                }
                            }
                        }
                        Step::Reject(i) => {
                            let id = ids[i % ids.len()].clone();
                            let was = record::read(&txn, id.as_str()).map(|r| r.status);
                            let decided = decide_in(&mut txn, &id, Verdict::Reject, "bob", 1.0);
                            prop_assert_eq!(decided.is_ok(), was == Some(Status::Pending));
                        }
                        Step::AcceptAll { request } => {
                            let request = &requests[usize::from(request)];
                            for r in record::pending_of(&txn, &fairy, Some(request)) {
                                if let Some(next) = model_accept(&model, &r) {
                                    model = next;
                                }
                            }
                            accept_all_in(&mut txn, &fairy, request, "bob", 1.0);
                            prop_assert!(record::pending_of(&txn, &fairy, Some(request)).is_empty());
                        }
                    }
                    drop(txn);
                    prop_assert_eq!(shapes_of(&doc), model.clone());
                }
            }
        }
    }
}
