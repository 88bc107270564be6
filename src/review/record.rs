//! One suggestion as the document holds it (docs/document-schema.md "Suggestions"): the typed
//! [`Suggestion`] and its `Y.Map` form under the `suggestions` root, read and written key by
//! key (a record streaming in place changes only the keys that changed).
//!
//! Owns the record's encoding only: what a suggestion does to `shapes` is [`super::decide`]'s,
//! and when a fairy writes one is the agent's. Reading is defensive (a record that does not
//! parse is skipped, and so is a prop that is no shape key of the schema), although only the
//! server writes this root.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use yrs::{Any, Map, MapPrelim, MapRef, Out, ReadTxn, TransactionMut, WriteTxn};

use crate::canvas::patch::is_shape_key;
use crate::canvas::schema::SUGGESTIONS;
use crate::canvas::shape::{Prop, any_to_prop, num_of};
use crate::ids::{FairyId, RequestId, SuggestionId};

/// What a suggestion does to its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Makes the shape (its `props` are the whole shape).
    Create,
    /// Sets the keys in `props` on the existing shape.
    Update,
    /// Removes the shape.
    Delete,
}

impl Op {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Update => "update",
            Op::Delete => "delete",
        }
    }

    fn parse(s: &str) -> Option<Op> {
        [Op::Create, Op::Update, Op::Delete]
            .into_iter()
            .find(|op| op.name() == s)
    }
}

/// Where a suggestion stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Waiting for a person.
    Pending,
    /// Applied to `shapes`.
    Accepted,
    /// Turned down; `shapes` untouched.
    Rejected,
}

impl Status {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Accepted => "accepted",
            Status::Rejected => "rejected",
        }
    }

    fn parse(s: &str) -> Option<Status> {
        [Status::Pending, Status::Accepted, Status::Rejected]
            .into_iter()
            .find(|st| st.name() == s)
    }
}

/// The shape keys a suggestion sets, by key; [`Prop::Absent`] removes the key.
pub type Props = BTreeMap<String, Prop>;

/// One suggestion record.
#[derive(Debug, Clone, PartialEq)]
pub struct Suggestion {
    /// Its id (the key under `suggestions`).
    pub id: SuggestionId,
    /// The fairy that proposed it.
    pub fairy_id: FairyId,
    /// The request it belongs to.
    pub request_id: RequestId,
    /// What it does.
    pub op: Op,
    /// The shape it is about.
    pub shape_id: String,
    /// The keys it sets (a create: the whole shape; a delete: none).
    pub props: Props,
    /// Pending, accepted or rejected.
    pub status: Status,
    /// When it was proposed or last changed (Unix ms).
    pub at: f64,
    /// Who decided (a token `sub`).
    pub decided_by: Option<String>,
    /// When it was decided (Unix ms).
    pub decided_at: Option<f64>,
    /// Who prompted the fairy (a token `sub`).
    pub prompted_by: String,
    /// The model that answered.
    pub model: String,
    /// Written by a version the fairy is still streaming (like a shape's `locked`): a record
    /// found so after a crash is removed when the fairy comes back.
    pub streaming: bool,
}

fn prop_to_any(prop: &Prop) -> Any {
    match prop {
        Prop::Num(n) => Any::from(*n),
        Prop::Str(s) => Any::from(s.as_str()),
        Prop::Bool(b) => Any::Bool(*b),
        Prop::Points(points) => Any::Array(points.iter().map(|n| Any::from(*n)).collect()),
        Prop::Absent => Any::Null,
    }
}

impl Suggestion {
    /// The record's plain fields (everything but `props`), as the document stores them.
    fn fields(&self) -> Vec<(&'static str, Any)> {
        let mut fields = vec![
            ("id", Any::from(self.id.as_str())),
            ("fairyId", Any::from(self.fairy_id.as_str())),
            ("requestId", Any::from(self.request_id.as_str())),
            ("op", Any::from(self.op.name())),
            ("shapeId", Any::from(self.shape_id.as_str())),
            ("status", Any::from(self.status.name())),
            ("at", Any::from(self.at)),
            ("promptedBy", Any::from(self.prompted_by.as_str())),
            ("model", Any::from(self.model.as_str())),
            ("streaming", Any::Bool(self.streaming)),
        ];
        if let Some(by) = &self.decided_by {
            fields.push(("decidedBy", Any::from(by.as_str())));
        }
        if let Some(at) = self.decided_at {
            fields.push(("decidedAt", Any::from(at)));
        }
        fields
    }

    /// The props as JSON (numbers, strings, booleans, arrays of numbers, `null` to remove).
    pub fn props_json(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.props
                .iter()
                .map(|(k, p)| {
                    let v = match p {
                        Prop::Num(n) => serde_json::json!(n),
                        Prop::Str(s) => serde_json::json!(s),
                        Prop::Bool(b) => serde_json::json!(b),
                        Prop::Points(points) => serde_json::json!(points),
                        Prop::Absent => serde_json::Value::Null,
                    };
                    (k.clone(), v)
                })
                .collect(),
        )
    }
}

/// The `suggestions` root, if the document has one.
fn root<T: ReadTxn>(txn: &T) -> Option<MapRef> {
    txn.get_map(SUGGESTIONS)
}

fn text<T: ReadTxn>(txn: &T, map: &MapRef, key: &str) -> Option<String> {
    match map.get(txn, key) {
        Some(Out::Any(Any::String(s))) => Some(s.to_string()),
        _ => None,
    }
}

fn num<T: ReadTxn>(txn: &T, map: &MapRef, key: &str) -> Option<f64> {
    match map.get(txn, key) {
        Some(Out::Any(any)) => num_of(&any),
        _ => None,
    }
}

/// Reads the record in `map` stored under `key`; `None` if it does not parse.
fn from_map<T: ReadTxn>(txn: &T, key: &str, map: &MapRef) -> Option<Suggestion> {
    let id = SuggestionId::parse(key).ok()?;
    let mut props = Props::new();
    if let Some(Out::YMap(p)) = map.get(txn, "props") {
        for (k, v) in p.iter(txn) {
            if !is_shape_key(k) {
                continue;
            }
            if let Out::Any(any) = v {
                props.insert(k.to_owned(), any_to_prop(&any));
            }
        }
    }
    Some(Suggestion {
        id,
        fairy_id: FairyId::parse(&text(txn, map, "fairyId")?).ok()?,
        request_id: RequestId::parse(&text(txn, map, "requestId")?).ok()?,
        op: Op::parse(&text(txn, map, "op")?)?,
        shape_id: text(txn, map, "shapeId")?,
        props,
        status: Status::parse(&text(txn, map, "status")?)?,
        at: num(txn, map, "at").unwrap_or(0.0),
        decided_by: text(txn, map, "decidedBy"),
        decided_at: num(txn, map, "decidedAt"),
        prompted_by: text(txn, map, "promptedBy").unwrap_or_default(),
        model: text(txn, map, "model").unwrap_or_default(),
        streaming: matches!(map.get(txn, "streaming"), Some(Out::Any(Any::Bool(true)))),
    })
}

/// The record `id`, if there is one that parses.
pub fn read<T: ReadTxn>(txn: &T, id: &str) -> Option<Suggestion> {
    match root(txn)?.get(txn, id)? {
        Out::YMap(map) => from_map(txn, id, &map),
        _ => None,
    }
}

/// Every record that parses, in no particular order.
pub fn list<T: ReadTxn>(txn: &T) -> Vec<Suggestion> {
    let Some(root) = root(txn) else {
        return Vec::new();
    };
    root.iter(txn)
        .filter_map(|(key, value)| match value {
            Out::YMap(map) => from_map(txn, key, &map),
            _ => None,
        })
        .collect()
}

/// The pending records of `fairy` (of its `request` only, when given).
pub fn pending_of<T: ReadTxn>(
    txn: &T,
    fairy: &FairyId,
    request: Option<&RequestId>,
) -> Vec<Suggestion> {
    list(txn)
        .into_iter()
        .filter(|s| {
            s.status == Status::Pending
                && &s.fairy_id == fairy
                && request.is_none_or(|r| &s.request_id == r)
        })
        .collect()
}

/// Writes `record` under its id: a new map, or only the keys that changed in the existing one
/// (its props key by key). Returns whether anything changed.
pub fn write(txn: &mut TransactionMut<'_>, record: &Suggestion) -> bool {
    let root = txn.get_or_insert_map(SUGGESTIONS);
    let existing = match root.get(txn, record.id.as_str()) {
        Some(Out::YMap(m)) => Some(m),
        _ => None,
    };
    let Some(map) = existing else {
        let mut prelim: MapPrelim = record
            .fields()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), yrs::In::Any(v)))
            .collect();
        let props: MapPrelim = record
            .props
            .iter()
            .map(|(k, p)| (k.clone(), yrs::In::Any(prop_to_any(p))))
            .collect();
        prelim.insert("props".into(), yrs::In::Map(props));
        root.insert(txn, record.id.as_str(), prelim);
        return true;
    };
    let mut changed = false;
    for (key, value) in record.fields() {
        let same = matches!(map.get(txn, key), Some(Out::Any(ref old)) if *old == value);
        if !same {
            map.insert(txn, key, value);
            changed = true;
        }
    }
    let props = match map.get(txn, "props") {
        Some(Out::YMap(p)) => p,
        _ => {
            changed = true;
            map.insert(txn, "props", MapPrelim::default())
        }
    };
    let stale: Vec<String> = props
        .keys(txn)
        .filter(|k| !record.props.contains_key(*k))
        .map(str::to_owned)
        .collect();
    for key in stale {
        props.remove(txn, &key);
        changed = true;
    }
    for (key, prop) in &record.props {
        let value = prop_to_any(prop);
        let same = matches!(props.get(txn, key), Some(Out::Any(ref old)) if *old == value);
        if !same {
            props.insert(txn, key.as_str(), value);
            changed = true;
        }
    }
    changed
}

/// Removes the record `id`; whether there was one.
pub fn remove(txn: &mut TransactionMut<'_>, id: &SuggestionId) -> bool {
    let root = txn.get_or_insert_map(SUGGESTIONS);
    root.remove(txn, id.as_str()).is_some()
}

/// Removes every record (a room loaded from before `suggestions` was server-owned); how many.
pub fn clear(txn: &mut TransactionMut<'_>) -> usize {
    let root = txn.get_or_insert_map(SUGGESTIONS);
    let keys: Vec<String> = root.keys(txn).map(str::to_owned).collect();
    for key in &keys {
        root.remove(txn, key);
    }
    keys.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use yrs::{Doc, Transact};

    pub(crate) fn sample(id: &str, op: Op) -> Suggestion {
        let mut props = Props::new();
        props.insert("x".into(), Prop::Num(10.0));
        props.insert("text".into(), Prop::Str("hi".into()));
        props.insert("points".into(), Prop::Points(vec![0.0, 1.0, 2.0, 3.0]));
        props.insert("fromId".into(), Prop::Absent);
        Suggestion {
            id: SuggestionId::parse(id).unwrap_or_else(|e| panic!("{e}")),
            fairy_id: FairyId::parse("f1").unwrap_or_else(|e| panic!("{e}")),
            request_id: RequestId::parse("r1").unwrap_or_else(|e| panic!("{e}")),
            op,
            shape_id: "box1".into(),
            props,
            status: Status::Pending,
            at: 5.0,
            decided_by: None,
            decided_at: None,
            prompted_by: "ada".into(),
            model: "offline".into(),
            streaming: false,
        }
    }

    #[test]
    fn a_record_round_trips_and_updates_in_place() {
        let doc = Doc::new();
        let mut record = sample("s-1", Op::Update);
        assert!(write(&mut doc.transact_mut(), &record));
        assert_eq!(read(&doc.transact(), "s-1"), Some(record.clone()));
        assert!(!write(&mut doc.transact_mut(), &record), "same record");
        record.props.remove("text");
        record.props.insert("y".into(), Prop::Num(3.0));
        record.status = Status::Accepted;
        record.decided_by = Some("bob".into());
        assert!(write(&mut doc.transact_mut(), &record));
        assert_eq!(read(&doc.transact(), "s-1"), Some(record.clone()));
        let fairy = FairyId::parse("f1").unwrap_or_else(|e| panic!("{e}"));
        assert!(pending_of(&doc.transact(), &fairy, None).is_empty());
        assert!(remove(&mut doc.transact_mut(), &record.id));
        assert_eq!(list(&doc.transact()), Vec::new());
    }

    #[test]
    fn malformed_records_and_unknown_keys_are_skipped() {
        let doc = Doc::new();
        {
            let mut txn = doc.transact_mut();
            let root = txn.get_or_insert_map(SUGGESTIONS);
            root.insert(&mut txn, "s-bad", "not a map");
            let m = root.insert(&mut txn, "s-2", MapPrelim::default());
            m.insert(&mut txn, "op", "explode");
        }
        let mut record = sample("s-3", Op::Create);
        {
            let mut txn = doc.transact_mut();
            write(&mut txn, &record);
            let root = txn.get_or_insert_map(SUGGESTIONS);
            if let Some(Out::YMap(m)) = root.get(&txn, "s-3")
                && let Some(Out::YMap(p)) = m.get(&txn, "props")
            {
                p.insert(&mut txn, "evil", "x");
            }
        }
        let all = list(&doc.transact());
        assert_eq!(all.len(), 1);
        record.props.remove("evil");
        assert_eq!(all[0], record);
        assert_eq!(clear(&mut doc.transact_mut()), 3);
    }
}
