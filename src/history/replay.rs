//! Replaying a room's stored log in a private document, and what can be computed from it.
//!
//! Owns [`Replay`]: a `yrs::Doc` of its own, rebuilt from a checkpoint (a full-state v1 update)
//! and the logged updates after it, and from that replay:
//! 1. what each logged update did to the `shapes` root ([`Replay::apply`], [`ShapeChanges`]);
//! 2. a room's content as JSON ([`Replay::to_json`], depth-bounded);
//! 3. the edits that restore a past version ([`restore`]) or take back one actor's changes
//!    ([`Rollback`], deciding with [`crate::history::undo`]'s rule) in a live document,
//!    written into a transaction the caller opened.
//!
//! Must not touch: a live room's document other than through the transaction it is handed
//! (never reads a room to replay it), the store, the network; no I/O, no async, no clocks.
//! Never writes a server-owned root (`fairies`, `projects`, `tasks`, `meta`,
//! [`crate::room::vet::roots::ServerRoot`]): restore and rollback only write the people-writable
//! roots `shapes` and `pages`.
//!
//! Cost: one update costs what it touches, not what the document holds: a deep observer on
//! `shapes` and `pages` collects the entries an update touched, and only those are read.
//! A [`Rollback`] keeps a second private document one update behind the first, so that the
//! values an update overwrote can be read from it (yrs drops a deleted map's contents from
//! view, and an array event does not say what it deleted).
//!
//! Bad input never panics: undecodable bytes are [`ReplayError::Decode`]; yrs's decoder and
//! integration run under [`crate::contain`], and a replay whose integration panicked refuses
//! further updates ([`ReplayError::Poisoned`]).

use crate::contain::contain;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard};

use base64::Engine as _;
use yrs::types::{EntryChange, Event, PathSegment};
use yrs::updates::decoder::Decode;
use yrs::{
    Any, Array, ArrayPrelim, BranchID, DeepObservable, Doc, GetString, In, Map, MapPrelim, MapRef,
    Number, Out, ReadTxn, StateVector, TextPrelim, Transact, TransactionMut, Update, WriteTxn,
};

use crate::canvas::schema::{PAGES, SHAPES};
use crate::history::undo::{ActorChange, Buried, Keyed, LOCKED, TakeBack};

/// Deepest nesting [`Replay::to_json`] (and every owned [`Value`]) keeps: a root's map is
/// level 1, each value inside a level-`n` container is level `n + 1`; anything deeper is `null`.
pub const MAX_JSON_DEPTH: usize = 32;

/// The roots people (and fairies) write; the only roots [`restore`] and [`Rollback`] touch.
pub const PEOPLE_ROOTS: [&str; 2] = [SHAPES, PAGES];

/// The key of this module's deep observers on a replay's roots.
const OBSERVER_KEY: &str = "fairyring.history.replay";

use crate::actor::ActorKey;

/// Why a replay could not go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// The bytes are not a Yjs v1 update.
    #[error("undecodable update: {0}")]
    Decode(String),
    /// yrs refused (or panicked on) the update.
    #[error("update could not be applied: {0}")]
    Apply(String),
    /// An earlier update panicked inside yrs: the private document may be inconsistent.
    #[error("the replay stopped at an update yrs could not integrate")]
    Poisoned,
}

/// What one update did to the `shapes` root: ids sorted, each id in at most one list.
///
/// `added`: the key did not exist before and exists after; `removed`: existed before, not
/// after; `updated`: exists before and after and something under it changed (a property at
/// any depth, or the whole value replaced by a new map).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct ShapeChanges {
    /// Ids that appeared.
    pub added: Vec<String>,
    /// Ids changed in place or replaced.
    pub updated: Vec<String>,
    /// Ids that disappeared.
    pub removed: Vec<String>,
}

/// One id's change, as whether it existed before and after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    before: bool,
    after: bool,
}

impl ShapeChanges {
    /// Combines `self` with the changes of the update that came right after it, so that the
    /// result relates the state before the earlier update to the state after the later one:
    /// an id is `added` when it did not exist before the earlier update and exists after the
    /// later one, `removed` when it existed before and not after, `updated` when it existed
    /// at both ends. So added + updated = added, added + removed = in no list (it came and
    /// went), updated + removed = removed, removed + added = updated (replaced).
    pub fn merge(&mut self, later: &ShapeChanges) {
        let mut spans = self.spans();
        for (id, span) in later.spans() {
            spans
                .entry(id)
                .and_modify(|earlier| earlier.after = span.after)
                .or_insert(span);
        }
        *self = ShapeChanges::from_spans(spans);
    }

    /// True when no id changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.updated.is_empty() && self.removed.is_empty()
    }

    fn spans(&self) -> BTreeMap<String, Span> {
        let mut spans = BTreeMap::new();
        let lists = [
            (&self.added, false, true),
            (&self.updated, true, true),
            (&self.removed, true, false),
        ];
        for (ids, before, after) in lists {
            for id in ids {
                spans.insert(id.clone(), Span { before, after });
            }
        }
        spans
    }

    fn from_spans(spans: BTreeMap<String, Span>) -> ShapeChanges {
        let mut out = ShapeChanges::default();
        for (id, span) in spans {
            match (span.before, span.after) {
                (false, true) => out.added.push(id),
                (true, true) => out.updated.push(id),
                (true, false) => out.removed.push(id),
                (false, false) => {}
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Owned values

/// An owned copy of a document value, for comparing and for writing into another document.
///
/// Shared types keep their kind: a `Y.Map` is [`Value::Map`], a `Y.Array` [`Value::Array`], a
/// `Y.Text` [`Value::Text`] (its plain string; formatting is dropped). XML types, sub-documents
/// and undefined references are `Any::Null`. Nesting deeper than [`MAX_JSON_DEPTH`] is
/// `Any::Null` too.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A plain value (JSON-like, with binary).
    Any(Any),
    /// A `Y.Map`.
    Map(BTreeMap<String, Value>),
    /// A `Y.Array`.
    Array(Vec<Value>),
    /// A `Y.Text`.
    Text(String),
}

impl Value {
    /// Reads `out` at nesting level `level` (a root's entry is level 2).
    pub fn from_out<T: ReadTxn>(txn: &T, out: Out, level: usize) -> Value {
        if level > MAX_JSON_DEPTH {
            return Value::Any(Any::Null);
        }
        match out {
            Out::Any(any) => Value::Any(any),
            Out::YMap(map) => Value::Map(map_values(txn, &map, level + 1)),
            Out::YArray(array) => Value::Array(
                array
                    .iter(txn)
                    .map(|item| Value::from_out(txn, item, level + 1))
                    .collect(),
            ),
            Out::YText(text) => Value::Text(text.get_string(txn)),
            // XML (whose string form yrs builds by unbounded recursion), sub-documents and
            // undefined references are not part of the schema.
            _ => Value::Any(Any::Null),
        }
    }

    /// The value as JSON at nesting level `level` (deeper than [`MAX_JSON_DEPTH`]: `null`).
    pub fn to_json(&self, level: usize) -> serde_json::Value {
        if level > MAX_JSON_DEPTH {
            return serde_json::Value::Null;
        }
        match self {
            Value::Any(any) => any_to_json(any, level),
            Value::Map(map) => serde_json::Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), v.to_json(level + 1)))
                    .collect(),
            ),
            Value::Array(items) => {
                serde_json::Value::Array(items.iter().map(|v| v.to_json(level + 1)).collect())
            }
            Value::Text(text) => serde_json::Value::String(text.clone()),
        }
    }

    /// What writes the value as the same kind of shared type (or as an `Any`).
    pub fn to_in(&self) -> In {
        match self {
            Value::Any(any) => In::Any(any.clone()),
            Value::Map(map) => In::Map(
                map.iter()
                    .map(|(k, v)| (k.as_str(), v.to_in()))
                    .collect::<MapPrelim>(),
            ),
            Value::Array(items) => {
                In::Array(items.iter().map(Value::to_in).collect::<ArrayPrelim>())
            }
            Value::Text(text) => In::from(TextPrelim::new(text.as_str())),
        }
    }

    fn as_map(&self) -> Option<&BTreeMap<String, Value>> {
        match self {
            Value::Map(map) => Some(map),
            _ => None,
        }
    }
}

fn map_values<T: ReadTxn>(txn: &T, map: &MapRef, level: usize) -> BTreeMap<String, Value> {
    map.iter(txn)
        .map(|(k, v)| (k.to_owned(), Value::from_out(txn, v, level)))
        .collect()
}

/// `Any` as JSON: numbers that JSON cannot hold (NaN, infinities) and `undefined` are `null`;
/// binary is a base64 string (standard alphabet, padded).
fn any_to_json(any: &Any, level: usize) -> serde_json::Value {
    use serde_json::Value as J;
    if level > MAX_JSON_DEPTH {
        return J::Null;
    }
    match any {
        Any::Null | Any::Undefined => J::Null,
        Any::Bool(b) => J::Bool(*b),
        Any::Number(Number::Int(i)) => J::from(*i),
        Any::Number(Number::Float(f)) => {
            serde_json::Number::from_f64(*f).map_or(J::Null, J::Number)
        }
        Any::String(s) => J::String(s.to_string()),
        Any::Buffer(bytes) => J::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
        Any::Array(items) => J::Array(items.iter().map(|v| any_to_json(v, level + 1)).collect()),
        Any::Map(map) => {
            let sorted: BTreeMap<&String, &Any> = map.iter().collect();
            J::Object(
                sorted
                    .into_iter()
                    .map(|(k, v)| (k.clone(), any_to_json(v, level + 1)))
                    .collect(),
            )
        }
    }
}

/// Every non-empty root of `txn`'s document, read as a map, as JSON. A root with no entries
/// (never written, or emptied) is left out, so that the replay's own (observed, empty) roots
/// and a fresh document's agree.
fn doc_json<T: ReadTxn>(txn: &T) -> serde_json::Map<String, serde_json::Value> {
    let names: BTreeSet<String> = txn.root_refs().map(|(name, _)| name.to_owned()).collect();
    let mut out = serde_json::Map::new();
    for name in names {
        let Some(root) = txn.get_map(name.as_str()) else {
            continue;
        };
        if root.len(txn) == 0 {
            continue;
        }
        let value = Value::Map(map_values(txn, &root, 2));
        out.insert(name, value.to_json(1));
    }
    out
}

/// `"key":` as serde_json writes an object's key.
fn write_key(out: &mut Vec<u8>, key: &str) {
    // Writing JSON into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, key);
    out.push(b':');
}

// ---------------------------------------------------------------------------------------------
// Replay

/// Which entries of the observed roots one update touched.
#[derive(Debug, Default)]
struct TouchLog {
    /// Per root (index into [`PEOPLE_ROOTS`]), per entry key: how the root's own map saw the
    /// key change (`None`: only something inside the entry changed).
    roots: [BTreeMap<String, Option<KeyChange>>; 2],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyChange {
    Inserted,
    Updated,
    Removed,
}

fn lock(log: &Mutex<TouchLog>) -> MutexGuard<'_, TouchLog> {
    log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A private document rebuilt from a checkpoint (a full-state v1 update) and the updates
/// after it.
pub struct Replay {
    doc: Doc,
    /// `shapes` and `pages` of `doc`, each with this module's deep observer.
    roots: [MapRef; 2],
    touched: Arc<Mutex<TouchLog>>,
    poisoned: bool,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay")
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

impl Drop for Replay {
    fn drop(&mut self) {
        for root in &self.roots {
            root.unobserve_deep(OBSERVER_KEY);
        }
    }
}

/// Decodes a v1 update without letting yrs's decoder panic through.
fn decode(bytes: &[u8]) -> Result<Update, ReplayError> {
    match contain(|| Update::decode_v1(bytes)) {
        Ok(Ok(update)) => Ok(update),
        Ok(Err(error)) => Err(ReplayError::Decode(error.to_string())),
        Err(_) => Err(ReplayError::Decode("malformed update".into())),
    }
}

/// Applies `bytes` to `doc` in one transaction. `Err(None)` when yrs panicked (the document
/// may be inconsistent), `Err(Some(_))` when it refused the update.
fn apply_to(doc: &Doc, bytes: &[u8]) -> Result<(), ReplayError> {
    let update = decode(bytes)?;
    let applied = contain(AssertUnwindSafe(|| {
        let mut txn = doc.transact_mut();
        txn.apply_update(update)
    }));
    match applied {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(ReplayError::Apply(error.to_string())),
        Err(_) => Err(ReplayError::Poisoned),
    }
}

/// Applies `updates` to `doc` in order, in one transaction: a transaction's commit (its
/// delete set, its cleanup) is most of what applying a small update costs.
pub(crate) fn apply_all<'a>(
    doc: &Doc,
    updates: impl IntoIterator<Item = &'a [u8]>,
) -> Result<(), ReplayError> {
    let decoded = updates
        .into_iter()
        .map(decode)
        .collect::<Result<Vec<_>, _>>()?;
    let applied = contain(AssertUnwindSafe(|| {
        let mut txn = doc.transact_mut();
        for update in decoded {
            txn.apply_update(update)?;
        }
        Ok::<(), yrs::error::UpdateError>(())
    }));
    match applied {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(ReplayError::Apply(error.to_string())),
        Err(_) => Err(ReplayError::Poisoned),
    }
}

impl Replay {
    /// Starts from `checkpoint` (None: an empty document) then applies `updates` in order,
    /// unobserved.
    pub fn new<'a>(
        checkpoint: Option<&'a [u8]>,
        updates: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Replay, ReplayError> {
        let doc = Doc::new();
        let roots = PEOPLE_ROOTS.map(|name| doc.get_or_insert_map(name));
        apply_all(&doc, checkpoint.into_iter().chain(updates))?;
        let touched = Arc::new(Mutex::new(TouchLog::default()));
        for (index, root) in roots.iter().enumerate() {
            let log = Arc::clone(&touched);
            root.observe_deep(OBSERVER_KEY, move |txn, events| {
                let mut log = lock(&log);
                for event in events.iter() {
                    let path = event.path();
                    match path.front() {
                        None => {
                            if let Event::Map(event) = event {
                                for (key, change) in event.keys(txn) {
                                    let change = match change {
                                        EntryChange::Inserted(_) => KeyChange::Inserted,
                                        EntryChange::Updated(_, _) => KeyChange::Updated,
                                        EntryChange::Removed(_) => KeyChange::Removed,
                                    };
                                    log.roots[index].insert(key.to_string(), Some(change));
                                }
                            }
                        }
                        Some(PathSegment::Key(key)) => {
                            log.roots[index].entry(key.to_string()).or_insert(None);
                        }
                        Some(PathSegment::Index(_)) => {}
                    }
                }
            });
        }
        Ok(Replay {
            doc,
            roots,
            touched,
            poisoned: false,
        })
    }

    /// Applies one logged update (v1) and says what it did to `shapes`: a key of `shapes`
    /// that appears = added, one that disappears = removed, any change inside an existing
    /// shape's map (any depth, e.g. pen `points`) or a replaced shape map = updated.
    pub fn apply(&mut self, update: &[u8]) -> Result<ShapeChanges, ReplayError> {
        self.apply_touching(update).map(|log| shape_changes(&log))
    }

    fn apply_touching(&mut self, update: &[u8]) -> Result<TouchLog, ReplayError> {
        if self.poisoned {
            return Err(ReplayError::Poisoned);
        }
        *lock(&self.touched) = TouchLog::default();
        let applied = apply_to(&self.doc, update);
        let log = std::mem::take(&mut *lock(&self.touched));
        match applied {
            Ok(()) => Ok(log),
            Err(ReplayError::Poisoned) => {
                self.poisoned = true;
                Err(ReplayError::Poisoned)
            }
            Err(error) => Err(error),
        }
    }

    /// Applies more logged updates in order, in one transaction, without saying what they did
    /// (a version read from the store in batches).
    pub fn extend<'a>(
        &mut self,
        updates: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<(), ReplayError> {
        if self.poisoned {
            return Err(ReplayError::Poisoned);
        }
        let applied = apply_all(&self.doc, updates);
        *lock(&self.touched) = TouchLog::default();
        if let Err(ReplayError::Poisoned) = applied {
            self.poisoned = true;
        }
        applied
    }

    /// Every non-empty root map of the document as JSON: `{"shapes": {...}, "pages": {...},
    /// "fairies": {...}, "projects": {...}, "tasks": {...}, "meta": {...}}` (a root with no
    /// entries is left out). Y.Map → object (keys sorted), Y.Array → array, Y.Text → string,
    /// Any → its JSON, binary as a base64 string, NaN/infinity/undefined as `null`; XML types
    /// and sub-documents are `null`. A root's map is level 1; a value nested deeper than
    /// [`MAX_JSON_DEPTH`] levels is `null` (depth-limited recursion).
    pub fn to_json(&self) -> serde_json::Map<String, serde_json::Value> {
        doc_json(&self.doc.transact())
    }

    /// Writes the document as JSON, the same bytes as `serde_json::to_vec(&self.to_json())`,
    /// one root entry at a time: appends to `out` and hands it to `emit` whenever it holds at
    /// least `chunk` bytes, so that no more than a chunk and one entry's JSON are held besides
    /// the document. Returns `false` when `emit` refused a chunk (the reader left); what is
    /// left in `out` at the end is the caller's.
    pub fn write_json(
        &self,
        out: &mut Vec<u8>,
        chunk: usize,
        emit: &mut dyn FnMut(Vec<u8>) -> bool,
    ) -> bool {
        let txn = self.doc.transact();
        let names: BTreeSet<String> = txn.root_refs().map(|(name, _)| name.to_owned()).collect();
        out.push(b'{');
        let mut roots = 0usize;
        for name in names {
            let Some(root) = txn.get_map(name.as_str()) else {
                continue;
            };
            if root.len(&txn) == 0 {
                continue;
            }
            if roots > 0 {
                out.push(b',');
            }
            roots += 1;
            write_key(out, &name);
            out.push(b'{');
            let mut keys: Vec<String> = root.keys(&txn).map(str::to_owned).collect();
            keys.sort_unstable();
            let mut entries = 0usize;
            for key in keys {
                let Some(value) = root.get(&txn, &key) else {
                    continue;
                };
                if entries > 0 {
                    out.push(b',');
                }
                entries += 1;
                write_key(out, &key);
                // Writing JSON into a Vec cannot fail.
                let _ =
                    serde_json::to_writer(&mut *out, &Value::from_out(&txn, value, 2).to_json(2));
                if out.len() >= chunk && !emit(std::mem::take(out)) {
                    return false;
                }
            }
            out.push(b'}');
        }
        out.push(b'}');
        true
    }

    /// The whole state as one Yjs v1 update.
    pub fn encode_v1(&self) -> Vec<u8> {
        self.doc
            .transact()
            .encode_state_as_update_v1(&StateVector::default())
    }

    /// The private document (the server's renderer reads shapes from it).
    pub fn doc(&self) -> &Doc {
        &self.doc
    }
}

fn shape_changes(log: &TouchLog) -> ShapeChanges {
    let mut out = ShapeChanges::default();
    for (id, change) in &log.roots[0] {
        match change {
            Some(KeyChange::Inserted) => out.added.push(id.clone()),
            Some(KeyChange::Removed) => out.removed.push(id.clone()),
            Some(KeyChange::Updated) | None => out.updated.push(id.clone()),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Restore

/// One entry of a root, read for comparison: its value and, for a `Y.Map`, the map's identity.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    ident: Option<BranchID>,
    value: Value,
}

fn read_entry<T: ReadTxn>(txn: &T, root: &str, key: &str) -> Option<Entry> {
    let out = txn.get_map(root)?.get(txn, key)?;
    let ident = match &out {
        Out::YMap(map) => Some(map.as_ref().id()),
        _ => None,
    };
    Some(Entry {
        ident,
        value: Value::from_out(txn, out, 2),
    })
}

// A shape's streaming marker ([`LOCKED`]): a fairy sets it while it streams a shape. A restore
// never writes it (a version taken mid-stream would bring back a shape locked for good) and
// leaves the live one as it is.

/// Makes the live `map`'s entries equal to `wanted`, key by key, but for the keys `untouched`
/// (neither written nor removed); true when it wrote anything.
fn sync_props(
    txn: &mut TransactionMut<'_>,
    map: &MapRef,
    wanted: &BTreeMap<String, Value>,
    untouched: &[&str],
) -> bool {
    let current = map_values(&*txn, map, 3);
    let mut changed = false;
    for (key, value) in wanted {
        if untouched.contains(&key.as_str()) {
            continue;
        }
        if current.get(key) != Some(value) {
            map.insert(txn, key.as_str(), value.to_in());
            changed = true;
        }
    }
    for key in current.keys() {
        if !wanted.contains_key(key) && !untouched.contains(&key.as_str()) {
            map.remove(txn, key);
            changed = true;
        }
    }
    changed
}

/// Writes `wanted` as the entry `key` of the live root `root`: an existing map keeps its
/// identity and gets only the differing properties; anything else is inserted whole. True
/// when it wrote anything.
fn write_entry(txn: &mut TransactionMut<'_>, root: &MapRef, key: &str, wanted: &Value) -> bool {
    match (root.get(&*txn, key), wanted) {
        (Some(Out::YMap(map)), Value::Map(props)) => sync_props(txn, &map, props, &[]),
        (Some(out), _) if Value::from_out(&*txn, out.clone(), 2) == *wanted => false,
        _ => {
            root.insert(txn, key, wanted.to_in());
            true
        }
    }
}

/// Restore: makes the people-writable roots (`shapes`, `pages`) of the live document `txn`
/// equal to those of `version`, key by key and property by property (a shape present in both
/// gets only its differing properties set and its extra properties removed, so the shape's
/// Y.Map identity stays; a shape missing in the live doc is created as a Y.Map with the
/// version's properties; a shape absent from the version is removed). Nested shared types (a
/// pen stroke's `points` Y.Array) are copied as the same kind of shared type, Any values as
/// Any; a property that differs is replaced whole. Server roots are never touched. Returns how
/// many (root, key) entries it changed. Reads both roots whole: a restore costs the size of
/// the room.
pub fn restore(txn: &mut TransactionMut<'_>, version: &Replay) -> usize {
    let vtxn = version.doc.transact();
    let mut changed = 0;
    for name in PEOPLE_ROOTS {
        let mut wanted: BTreeMap<String, Value> = match vtxn.get_map(name) {
            Some(root) => map_values(&vtxn, &root, 2),
            None => BTreeMap::new(),
        };
        if name == SHAPES {
            for shape in wanted.values_mut() {
                if let Value::Map(props) = shape {
                    props.remove(LOCKED);
                }
            }
        }
        let live = match txn.get_map(name) {
            Some(root) => root,
            None if wanted.is_empty() => continue,
            None => txn.get_or_insert_map(name),
        };
        let live_keys: Vec<String> = live.keys(&*txn).map(str::to_owned).collect();
        for key in live_keys {
            if !wanted.contains_key(&key) {
                live.remove(txn, &key);
                changed += 1;
            }
        }
        for (key, value) in &wanted {
            let wrote = match (name == SHAPES, live.get(&*txn, key), value) {
                // A shape's streaming marker is left as it is live.
                (true, Some(Out::YMap(map)), Value::Map(props)) => {
                    sync_props(txn, &map, props, &[LOCKED])
                }
                _ => write_entry(txn, &live, key, value),
            };
            if wrote {
                changed += 1;
            }
        }
    }
    changed
}

// ---------------------------------------------------------------------------------------------
// Rollback

/// An interned actor.
type ActorIx = u32;

/// The last creation or deletion of an entry in the recorded log.
#[derive(Debug, Clone)]
enum Existence {
    /// `by` created the entry's current incarnation (or replaced the previous one).
    /// `restore`: what the entry should be if the creation is taken back (`None`: absent).
    Created { by: ActorIx, restore: Option<Value> },
    /// `by` deleted the entry. `restore`: what it comes back as if the deletion is taken
    /// back (`None`: nothing, e.g. the deleter had created it).
    Deleted { by: ActorIx, restore: Option<Value> },
}

/// The recorded history of one property of one entry, compacted to what rollback needs.
#[derive(Debug, Clone)]
struct PropLog {
    /// Who changed it last.
    last: ActorIx,
    /// Its value just before `last`'s run of consecutive changes (`None`: absent).
    run_before: Option<Value>,
    /// Whether the target ever changed it (in this incarnation).
    target_changed: bool,
    /// The run `last`'s took over from: a restore that writes back the value that run left
    /// gives the property back to its writer (see [`Rollback::record_restore`]).
    superseded: Option<Box<Superseded>>,
}

/// A writer's run of changes to a property that someone else's changes took over.
#[derive(Debug, Clone)]
struct Superseded {
    /// Who made the run.
    by: ActorIx,
    /// The value before the run.
    run_before: Option<Value>,
    /// The value the run left.
    left: Option<Value>,
}

/// The recorded history of one entry of `shapes` or `pages`.
#[derive(Debug, Clone, Default)]
struct EntryLog {
    existence: Option<Existence>,
    /// Someone other than the current incarnation's creator changed it since its creation.
    touched_by_others: bool,
    props: BTreeMap<String, PropLog>,
    /// The incarnation the last deletion removed, with its content then: a restore that
    /// brings exactly that content back brings back its history (creator, writers) too.
    buried: Option<Box<Buried<Value, EntryLog>>>,
}

/// Rollback: takes back one actor's changes made after a base version, property by
/// property, keeping what others changed afterwards.
///
/// Recording keeps, per (root ∈ {`shapes`, `pages`}, entry, property), who changed it last and
/// the value before that actor's last run of consecutive changes, plus each entry's last
/// creation or deletion: memory grows with what the log touched, not with the room.
pub struct Rollback {
    /// The room after every recorded update (observed).
    after: Replay,
    /// The room one update behind `after` while recording (unobserved): where the values an
    /// update overwrote are read.
    before: Doc,
    /// Set when `before` could not follow `after`: nothing more is recorded, nothing applied.
    broken: Option<ReplayError>,
    target: ActorIx,
    actors: HashMap<ActorKey, ActorIx>,
    entries: [BTreeMap<String, EntryLog>; 2],
}

impl std::fmt::Debug for Rollback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rollback")
            .field("broken", &self.broken)
            .field("entries", &(self.entries[0].len() + self.entries[1].len()))
            .finish_non_exhaustive()
    }
}

/// What a rollback wrote and what it left alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RollbackOutcome {
    /// (entry, property) values written, plus entries removed or re-created whole.
    pub reverted: u64,
    /// Changes of the target left as they are because someone changed the same thing after
    /// it (in the log or in the live document since).
    pub kept: u64,
}

impl Rollback {
    /// Starts tracking from `base` (the room as it was just after `sinceSeq`), for `target`.
    /// Copies `base` once (the copy trails the replay by one update while recording).
    pub fn new(base: Replay, target: ActorKey) -> Rollback {
        let before = Doc::new();
        let broken = if base.poisoned {
            Some(ReplayError::Poisoned)
        } else {
            apply_to(&before, &base.encode_v1()).err()
        };
        let mut actors = HashMap::new();
        actors.insert(target, 0);
        Rollback {
            after: base,
            before,
            broken,
            target: 0,
            actors,
            entries: Default::default(),
        }
    }

    fn intern(&mut self, actor: &ActorKey) -> ActorIx {
        let next = ActorIx::try_from(self.actors.len()).unwrap_or(ActorIx::MAX);
        *self.actors.entry(actor.clone()).or_insert(next)
    }

    /// Applies the next logged update, written by `actor`, and records what it changed: per
    /// (root ∈ {shapes, pages}, entry id, property key) the value before and after, and who
    /// wrote it. Also returns the update's [`ShapeChanges`]. An update that does not decode is
    /// an error and changes nothing (the caller may skip it); after an update yrs refused or
    /// could not integrate, every later call fails and [`Rollback::apply`] writes nothing.
    pub fn record(&mut self, update: &[u8], actor: &ActorKey) -> Result<ShapeChanges, ReplayError> {
        self.record_as(update, actor, false)
    }

    /// [`Rollback::record`] for a restore's update (`POST …/restore`, written for `actor`): a
    /// restore keeps the original actors of the content it brings back (docs/history.md
    /// "Restore and rollback"). An entry it re-creates exactly as the last deletion removed it
    /// (a shape's `locked` marker aside) gets back that incarnation's creator and writers, and
    /// a property it sets back to the value the previous writer's run left goes back to that
    /// writer; whatever else it writes is `actor`'s. So a fairy's drawing that a restore of an
    /// earlier version removed and a restore of a later one brought back is still the fairy's
    /// to take back.
    pub fn record_restore(
        &mut self,
        update: &[u8],
        actor: &ActorKey,
    ) -> Result<ShapeChanges, ReplayError> {
        self.record_as(update, actor, true)
    }

    fn record_as(
        &mut self,
        update: &[u8],
        actor: &ActorKey,
        restore: bool,
    ) -> Result<ShapeChanges, ReplayError> {
        if let Some(error) = &self.broken {
            return Err(error.clone());
        }
        let log = match self.after.apply_touching(update) {
            Ok(log) => log,
            Err(error) => {
                // Undecodable bytes changed nothing; anything else may have changed the
                // replay, which `before` could then no longer follow.
                if !matches!(error, ReplayError::Decode(_)) {
                    self.broken = Some(error.clone());
                }
                return Err(error);
            }
        };
        let who = self.intern(actor);
        {
            let before = self.before.transact();
            let after = self.after.doc.transact();
            for (index, root) in PEOPLE_ROOTS.iter().enumerate() {
                for key in log.roots[index].keys() {
                    let old = read_entry(&before, root, key);
                    let new = read_entry(&after, root, key);
                    let entry = self.entries[index].entry(key.clone()).or_default();
                    record_entry(entry, Writer { who, restore }, self.target, old, new);
                }
            }
        }
        if let Err(error) = apply_to(&self.before, update) {
            self.broken = Some(error.clone());
            return Err(error);
        }
        Ok(shape_changes(&log))
    }

    /// Writes, into the live document's transaction, the values that take back the target's
    /// changes: for each (root, entry, property) whose last change in the recorded log is the
    /// target's, the value it had just before the target's last run of consecutive changes to
    /// it (absent → remove the key); an entry the target created and nobody else touched
    /// afterwards is removed whole (or, if it replaced an entry, that entry's properties come
    /// back); an entry the target deleted (nobody re-created it) comes back with the
    /// properties it had before (the target's own earlier edits of it taken back too). A
    /// property is kept (counted in `kept`, not written) when another actor changed it after
    /// the target did, or when the live document's current value differs from the replay's
    /// final value (someone wrote it after the log was read); the same live check guards
    /// whole-entry removals and re-creations. A shape the target created but others changed
    /// afterwards stays (kept; the target's later edits of its properties are still taken
    /// back). Never touches server roots.
    pub fn apply(&self, txn: &mut TransactionMut<'_>) -> RollbackOutcome {
        let mut outcome = RollbackOutcome::default();
        if self.broken.is_some() {
            return outcome;
        }
        let target = self.target;
        let final_txn = self.after.doc.transact();
        for (index, root_name) in PEOPLE_ROOTS.iter().enumerate() {
            if self.entries[index].is_empty() {
                continue;
            }
            let live_root = match txn.get_map(*root_name) {
                Some(root) => root,
                None => txn.get_or_insert_map(*root_name),
            };
            for (key, log) in &self.entries[index] {
                let final_entry = read_entry(&final_txn, root_name, key);
                let live_entry = read_entry(&*txn, root_name, key);
                match &log.existence {
                    Some(Existence::Created { by, restore }) if *by == target => {
                        if log.touched_by_others {
                            outcome.kept += 1;
                            revert_props(
                                txn,
                                &live_root,
                                key,
                                log,
                                target,
                                &final_entry,
                                &mut outcome,
                            );
                        } else {
                            let creation = ActorChange {
                                before: restore.as_ref(),
                                left: final_entry.as_ref().map(|e| &e.value),
                                changed_after: false,
                            };
                            match creation.take_back(&live_entry.as_ref().map(|e| &e.value)) {
                                TakeBack::Keep => outcome.kept += 1,
                                // `Nothing`: it replaced an entry of the same content, whose
                                // identity comes back all the same.
                                TakeBack::Restore(_) | TakeBack::Nothing => {
                                    match restore {
                                        None => {
                                            live_root.remove(txn, key);
                                        }
                                        Some(value) => {
                                            write_entry(txn, &live_root, key, value);
                                        }
                                    }
                                    outcome.reverted += 1;
                                }
                            }
                        }
                    }
                    Some(Existence::Deleted { by, restore }) if *by == target => {
                        let deletion = ActorChange {
                            before: restore.as_ref(),
                            left: None,
                            changed_after: false,
                        };
                        match deletion.take_back(&live_entry.as_ref().map(|e| &e.value)) {
                            TakeBack::Restore(Some(value)) => {
                                live_root.insert(txn, key.as_str(), value.to_in());
                                outcome.reverted += 1;
                            }
                            TakeBack::Keep if restore.is_some() => outcome.kept += 1,
                            _ => {}
                        }
                    }
                    Some(Existence::Deleted { .. }) => {
                        // Someone else deleted it after whatever the target did to it.
                        outcome.kept += count(log.props.values().filter(|p| p.target_changed));
                    }
                    Some(Existence::Created { .. }) | None => {
                        revert_props(
                            txn,
                            &live_root,
                            key,
                            log,
                            target,
                            &final_entry,
                            &mut outcome,
                        );
                    }
                }
            }
        }
        outcome
    }
}

impl Rollback {
    /// What applying this rollback to the room as it was logged (the replay it recorded up to)
    /// changes the size of its encoding by, in bytes (negative: it shrinks the room): measured
    /// on a private copy, so that the live room admits it against `--max-doc-bytes` by its net
    /// growth before anything is written (docs/protocol.md "Document size").
    pub fn growth(&self) -> Result<i64, ReplayError> {
        if let Some(error) = &self.broken {
            return Err(error.clone());
        }
        net_growth(&self.after.doc, |txn| {
            self.apply(txn);
        })
    }
}

/// What `edit` changes the size of `doc`'s full-state encoding by, measured on a private copy of
/// `doc` (the edit's transaction committed there, so what it deletes is collected first).
pub fn net_growth(
    doc: &Doc,
    edit: impl FnOnce(&mut TransactionMut<'_>),
) -> Result<i64, ReplayError> {
    let state = doc
        .transact()
        .encode_state_as_update_v1(&StateVector::default());
    let copy = Doc::new();
    apply_to(&copy, &state)?;
    let before = copy
        .transact()
        .encode_state_as_update_v1(&StateVector::default());
    let edited = contain(AssertUnwindSafe(|| {
        let mut txn = copy.transact_mut();
        edit(&mut txn);
    }));
    if edited.is_err() {
        return Err(ReplayError::Poisoned);
    }
    let after = copy
        .transact()
        .encode_state_as_update_v1(&StateVector::default());
    let size = |bytes: &[u8]| i64::try_from(bytes.len()).unwrap_or(i64::MAX);
    Ok(size(&after) - size(&before))
}

/// What [`restore`] of `version` over `now` (the room as logged) changes the size of its
/// encoding by (negative: it shrinks the room), measured on a private copy of `now`.
pub fn restore_growth(now: &Replay, version: &Replay) -> Result<i64, ReplayError> {
    net_growth(&now.doc, |txn| {
        restore(txn, version);
    })
}

fn count<I: Iterator>(iter: I) -> u64 {
    u64::try_from(iter.count()).unwrap_or(u64::MAX)
}

/// Per-property revert of one entry that still exists in the replay.
fn revert_props(
    txn: &mut TransactionMut<'_>,
    live_root: &MapRef,
    key: &str,
    log: &EntryLog,
    target: ActorIx,
    final_entry: &Option<Entry>,
    outcome: &mut RollbackOutcome,
) {
    let final_props = final_entry.as_ref().and_then(|e| e.value.as_map());
    let live_map = match live_root.get(&*txn, key) {
        Some(Out::YMap(map)) => Some(map),
        _ => None,
    };
    for (prop, plog) in &log.props {
        if plog.last != target {
            if plog.target_changed {
                outcome.kept += 1;
            }
            continue;
        }
        let (Some(final_props), Some(live_map)) = (final_props, &live_map) else {
            // The entry is gone (or no longer a map) in the replay or the live document.
            outcome.kept += 1;
            continue;
        };
        let live_value = live_map
            .get(&*txn, prop)
            .map(|out| Value::from_out(&*txn, out, 3));
        let change = ActorChange {
            before: plog.run_before.as_ref(),
            left: final_props.get(prop),
            changed_after: false,
        };
        match change.take_back(&live_value.as_ref()) {
            TakeBack::Keep => outcome.kept += 1,
            TakeBack::Nothing => {}
            TakeBack::Restore(before) => {
                match before {
                    Some(value) => {
                        live_map.insert(txn, prop.as_str(), value.to_in());
                    }
                    None => {
                        live_map.remove(txn, prop);
                    }
                }
                outcome.reverted += 1;
            }
        }
    }
}

/// The entry `before` with the target's own property changes taken back.
fn without_targets_edits(before: Value, log: &EntryLog, target: ActorIx) -> Value {
    let Value::Map(mut props) = before else {
        return before;
    };
    for (prop, plog) in &log.props {
        if plog.last != target {
            continue;
        }
        match &plog.run_before {
            Some(value) => {
                props.insert(prop.clone(), value.clone());
            }
            None => {
                props.remove(prop);
            }
        }
    }
    Value::Map(props)
}

/// Who wrote an update, as recording needs it: the actor, and whether it is a restore.
#[derive(Debug, Clone, Copy)]
struct Writer {
    who: ActorIx,
    restore: bool,
}

/// Records what one update by `by` did to one entry, `old` and `new` being the entry before
/// and after it.
fn record_entry(
    entry: &mut EntryLog,
    by: Writer,
    target: ActorIx,
    old: Option<Entry>,
    new: Option<Entry>,
) {
    let replaced = match (&old, &new) {
        (None, None) => return,
        (Some(a), Some(b)) => a.ident != b.ident || (a.ident.is_none() && a.value != b.value),
        _ => false,
    };
    match (old, new) {
        (Some(old), Some(new)) if !replaced => {
            record_props(entry, by, target, &old.value, &new.value);
        }
        (old, new) => {
            if let Some(old) = old {
                record_delete(entry, by.who, target, old.value);
            }
            if let Some(new) = new {
                record_create(entry, by, &new.value);
            }
        }
    }
}

fn record_delete(entry: &mut EntryLog, who: ActorIx, target: ActorIx, old: Value) {
    let restore = match &entry.existence {
        // The deleter had created this incarnation and nobody else touched it: taking back
        // both leaves what was there before the creation.
        Some(Existence::Created { by, restore }) if *by == who && !entry.touched_by_others => {
            restore.clone()
        }
        _ if who == target => Some(without_targets_edits(old.clone(), entry, target)),
        // Only the target's deletions are ever taken back.
        _ => None,
    };
    // Its props stay: what the target did to it still counts when someone else deleted it.
    entry.buried = None;
    let record = entry.clone();
    entry.buried = Some(Box::new(Buried {
        content: old,
        record,
    }));
    entry.existence = Some(Existence::Deleted { by: who, restore });
}

/// An entry's content without one key (a shape's streaming marker, which a restore never
/// writes: see [`Buried`]).
impl Keyed for Value {
    fn without(&self, key: &str) -> Value {
        match self {
            Value::Map(props) => Value::Map(props.without(key)),
            other => other.clone(),
        }
    }
}

fn record_create(entry: &mut EntryLog, by: Writer, new: &Value) {
    if by.restore
        && let Some(buried) = entry.buried.take()
        && let Some(log) = buried.bring_back(new)
    {
        // The restore brought the deleted incarnation back as it was: its history too.
        *entry = log;
        return;
    }
    let who = by.who;
    let restore = match &entry.existence {
        // The same actor deleted (or replaced) it just before: taking back the creation means
        // taking back the deletion too.
        Some(Existence::Deleted { by, restore }) if *by == who => restore.clone(),
        _ => None,
    };
    entry.existence = Some(Existence::Created { by: who, restore });
    entry.touched_by_others = false;
    entry.props.clear();
    entry.buried = None;
}

fn record_props(entry: &mut EntryLog, by: Writer, target: ActorIx, old: &Value, new: &Value) {
    let who = by.who;
    let empty = BTreeMap::new();
    let old_props = old.as_map().unwrap_or(&empty);
    let new_props = new.as_map().unwrap_or(&empty);
    let keys: BTreeSet<&String> = old_props.keys().chain(new_props.keys()).collect();
    let mut any = false;
    for key in keys {
        let before = old_props.get(key);
        let after = new_props.get(key);
        if before == after {
            continue;
        }
        any = true;
        // The first change after the creation takes over from the creator's value.
        let creator = match &entry.existence {
            Some(Existence::Created { by, .. }) if *by != who => Some(*by),
            _ => None,
        };
        let plog = entry.props.entry(key.clone()).or_insert_with(|| PropLog {
            last: who,
            run_before: before.cloned(),
            target_changed: false,
            superseded: creator.map(|by| {
                Box::new(Superseded {
                    by,
                    run_before: before.cloned(),
                    left: before.cloned(),
                })
            }),
        });
        // A restore writing back what the previous writer's run left gives it back to them.
        if by.restore
            && plog
                .superseded
                .as_ref()
                .is_some_and(|p| p.left.as_ref() == after)
            && let Some(previous) = plog.superseded.take()
        {
            // The run it replaces is kept in turn: restoring back and forth between two
            // versions hands the property back and forth between their writers.
            plog.superseded = Some(Box::new(Superseded {
                by: plog.last,
                run_before: plog.run_before.take(),
                left: before.cloned(),
            }));
            plog.last = previous.by;
            plog.run_before = previous.run_before;
            continue;
        }
        if plog.last != who {
            plog.superseded = Some(Box::new(Superseded {
                by: plog.last,
                run_before: plog.run_before.take(),
                left: before.cloned(),
            }));
            plog.last = who;
            plog.run_before = before.cloned();
        }
        if who == target {
            plog.target_changed = true;
        }
    }
    let Some(Existence::Created { by: creator, .. }) = entry.existence else {
        return;
    };
    if by.restore {
        // What the restore left decides: the entry is touched by others only where a property's
        // last writer is not its creator.
        entry.touched_by_others = entry.props.values().any(|p| p.last != creator);
    } else if any && creator != who {
        entry.touched_by_others = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actor::ActorKind;
    use proptest::prelude::*;
    use yrs::ArrayRef;

    fn user(id: &str) -> ActorKey {
        ActorKey {
            kind: ActorKind::User,
            id: id.into(),
        }
    }

    fn fairy(id: &str) -> ActorKey {
        ActorKey {
            kind: ActorKind::Fairy,
            id: id.into(),
        }
    }

    /// Writers with a document each, synced after every edit; the log in order.
    /// Records `log` into `rollback` as a history rollback reads it: the entries for which
    /// `is_restore` holds as restores (their original actors kept), the others as plain edits.
    fn record_log(
        rollback: &mut Rollback,
        log: &[(usize, Vec<u8>)],
        actors: &[ActorKey],
        is_restore: impl Fn(usize) -> bool,
    ) {
        for (i, (writer, update)) in log.iter().enumerate() {
            if is_restore(i) {
                rollback.record_restore(update, &actors[*writer])
            } else {
                rollback.record(update, &actors[*writer])
            }
            .expect("record");
        }
    }

    struct Room {
        docs: Vec<Doc>,
        log: Vec<(usize, Vec<u8>)>,
    }

    impl Room {
        fn new(writers: usize) -> Room {
            Room {
                docs: (0..writers)
                    .map(|i| Doc::with_client_id(i as u64 + 1))
                    .collect(),
                log: Vec::new(),
            }
        }

        /// Runs `f` as `writer`, syncs the others, logs and returns the update.
        fn edit(
            &mut self,
            writer: usize,
            f: impl FnOnce(&mut TransactionMut<'_>, &MapRef, &MapRef),
        ) -> Vec<u8> {
            let doc = &self.docs[writer];
            let before = doc.transact().state_vector();
            {
                let mut txn = doc.transact_mut();
                let shapes = txn.get_or_insert_map(SHAPES);
                let pages = txn.get_or_insert_map(PAGES);
                f(&mut txn, &shapes, &pages);
            }
            let update = doc.transact().encode_state_as_update_v1(&before);
            for (i, other) in self.docs.iter().enumerate() {
                if i != writer {
                    apply_to(other, &update).expect("sync");
                }
            }
            self.log.push((writer, update.clone()));
            update
        }

        fn json(&self) -> serde_json::Map<String, serde_json::Value> {
            doc_json(&self.docs[0].transact())
        }

        fn updates(&self, range: std::ops::Range<usize>) -> Vec<&[u8]> {
            self.log[range].iter().map(|(_, u)| u.as_slice()).collect()
        }
    }

    fn rect(x: f64, color: &str) -> MapPrelim {
        MapPrelim::from([
            ("type", In::from("rectangle")),
            ("x", In::from(x)),
            ("y", In::from(0.0)),
            ("color", In::from(color)),
        ])
    }

    fn pen(points: &[f64]) -> MapPrelim {
        MapPrelim::from([
            ("type", In::from("draw")),
            ("x", In::from(0.0)),
            ("points", In::Array(ArrayPrelim::from(points.to_vec()))),
        ])
    }

    fn shape_map<T: ReadTxn>(txn: &T, id: &str) -> MapRef {
        match txn.get_map(SHAPES).and_then(|s| s.get(txn, id)) {
            Some(Out::YMap(m)) => m,
            other => panic!("no shape map {id}: {other:?}"),
        }
    }

    fn points_of(txn: &TransactionMut<'_>, shape: &MapRef) -> ArrayRef {
        match shape.get(txn, "points") {
            Some(Out::YArray(a)) => a,
            other => panic!("no points: {other:?}"),
        }
    }

    fn changes(added: &[&str], updated: &[&str], removed: &[&str]) -> ShapeChanges {
        let own = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect();
        ShapeChanges {
            added: own(added),
            updated: own(updated),
            removed: own(removed),
        }
    }

    #[test]
    fn shape_changes_of_add_update_points_delete_replace() {
        let mut room = Room::new(1);
        let mut replay = Replay::new(None, []).expect("empty replay");

        let u = room.edit(0, |txn, shapes, _| {
            shapes.insert(txn, "a", rect(1.0, "black"));
            shapes.insert(txn, "p", pen(&[0.0, 0.0]));
        });
        assert_eq!(replay.apply(&u).ok(), Some(changes(&["a", "p"], &[], &[])));

        let u = room.edit(0, |txn, _, _| {
            shape_map(txn, "a").insert(txn, "x", 5.0);
        });
        assert_eq!(replay.apply(&u).ok(), Some(changes(&[], &["a"], &[])));

        let u = room.edit(0, |txn, _, _| {
            let p = shape_map(txn, "p");
            let points = points_of(txn, &p);
            points.push_back(txn, 3.0);
            points.push_back(txn, 4.0);
        });
        assert_eq!(replay.apply(&u).ok(), Some(changes(&[], &["p"], &[])));

        let u = room.edit(0, |txn, shapes, _| {
            shapes.insert(txn, "a", rect(9.0, "red"));
        });
        assert_eq!(replay.apply(&u).ok(), Some(changes(&[], &["a"], &[])));

        let u = room.edit(0, |txn, shapes, pages| {
            shapes.remove(txn, "p");
            pages.insert(txn, "page:main", MapPrelim::from([("name", "Main")]));
        });
        assert_eq!(replay.apply(&u).ok(), Some(changes(&[], &[], &["p"])));

        let u = room.edit(0, |txn, _, pages| {
            pages.insert(txn, "page:2", MapPrelim::from([("name", "Two")]));
        });
        assert!(replay.apply(&u).is_ok_and(|c| c.is_empty()));
        assert_eq!(replay.to_json(), room.json());
    }

    #[test]
    fn merge_relates_the_first_state_to_the_last() {
        let mut merged = changes(&["a", "b"], &["c", "d"], &["e"]);
        merged.merge(&changes(&["e"], &["a"], &["b", "c"]));
        assert_eq!(merged, changes(&["a"], &["d", "e"], &["c"]));
        let mut empty = ShapeChanges::default();
        empty.merge(&changes(&["x"], &[], &[]));
        assert_eq!(empty, changes(&["x"], &[], &[]));
        assert!(!empty.is_empty());
    }

    #[test]
    fn bad_bytes_are_errors_not_panics() {
        let garbage: &[u8] = &[0xff, 0xff, 0xff, 0x01, 0x02];
        assert!(matches!(
            Replay::new(Some(garbage), []),
            Err(ReplayError::Decode(_))
        ));
        let mut replay = Replay::new(None, []).expect("empty replay");
        assert!(replay.apply(garbage).is_err());
        assert!(replay.apply(&[]).is_err());
        assert!(replay.to_json().is_empty());
        let mut rollback = Rollback::new(replay, fairy("f"));
        assert!(rollback.record(garbage, &fairy("f")).is_err());
        let doc = Doc::new();
        let outcome = rollback.apply(&mut doc.transact_mut());
        assert_eq!(outcome, RollbackOutcome::default());
    }

    #[test]
    fn to_json_nested_text_binary_and_server_roots() {
        let mut room = Room::new(1);
        room.edit(0, |txn, shapes, _| {
            shapes.insert(
                txn,
                "t",
                MapPrelim::from([
                    ("label", In::from(TextPrelim::new("hello"))),
                    ("blob", In::Any(Any::Buffer(vec![1u8, 2, 3].into()))),
                    ("nan", In::from(f64::NAN)),
                    ("n", In::from(7i64)),
                    (
                        "nested",
                        In::Map(MapPrelim::from([(
                            "list",
                            In::Array(ArrayPrelim::from([
                                In::from(1.5),
                                In::Map(MapPrelim::from([("k", "v")])),
                            ])),
                        )])),
                    ),
                ]),
            );
            let meta = txn.get_or_insert_map("meta");
            meta.insert(txn, "schemaVersion", 1i64);
        });
        let replay = Replay::new(None, room.updates(0..1)).expect("replay");
        let json = serde_json::Value::Object(replay.to_json());
        assert_eq!(
            json,
            serde_json::json!({
                "shapes": {"t": {
                    "label": "hello",
                    "blob": "AQID",
                    "nan": null,
                    "n": 7,
                    "nested": {"list": [1.5, {"k": "v"}]},
                }},
                "meta": {"schemaVersion": 1},
            })
        );
    }

    #[test]
    fn written_json_is_the_serialised_json_whatever_the_chunk() {
        let mut room = Room::new(1);
        room.edit(0, |txn, shapes, _| {
            for i in 0..40 {
                shapes.insert(
                    txn,
                    format!("s\"{i}"),
                    MapPrelim::from([
                        ("label", In::from(TextPrelim::new(format!("ü{i}\n")))),
                        ("n", In::from(i as i64)),
                        ("nan", In::from(f64::NAN)),
                    ]),
                );
            }
        });
        let replay = Replay::new(None, room.updates(0..1)).expect("replay");
        let whole = serde_json::to_vec(&replay.to_json()).expect("json");
        for chunk in [1, 100, usize::MAX] {
            let mut chunks = Vec::new();
            let mut out = Vec::new();
            assert!(replay.write_json(&mut out, chunk, &mut |c| {
                chunks.push(c);
                true
            }));
            if chunk == 1 {
                assert!(chunks.len() >= 40, "{} chunks", chunks.len());
            }
            chunks.push(out);
            assert_eq!(chunks.concat(), whole, "chunk {chunk}");
        }
        let mut calls = 0;
        assert!(!replay.write_json(&mut Vec::new(), 1, &mut |_| {
            calls += 1;
            false
        }));
        assert_eq!(calls, 1, "stops at the first refusal");
    }

    #[test]
    fn to_json_cuts_nesting_deeper_than_the_bound() {
        let mut room = Room::new(1);
        room.edit(0, |txn, shapes, _| {
            let mut deep = MapPrelim::from([("leaf", In::from(true))]);
            for _ in 0..40 {
                deep = MapPrelim::from([("n", In::Map(deep))]);
            }
            shapes.insert(txn, "deep", deep);
        });
        let replay = Replay::new(None, room.updates(0..1)).expect("replay");
        let json = replay.to_json();
        // `shapes` is level 1, `deep` level 2, each `n` one more.
        let mut level = 2;
        let mut node = &json["shapes"]["deep"];
        while let Some(next) = node.get("n") {
            level += 1;
            node = next;
        }
        assert!(node.is_null(), "the cut value is null: {node}");
        assert_eq!(level, MAX_JSON_DEPTH + 1);
    }

    #[test]
    fn encode_v1_round_trips() {
        let mut room = Room::new(2);
        room.edit(0, |txn, shapes, pages| {
            shapes.insert(txn, "a", rect(1.0, "black"));
            pages.insert(txn, "page:main", MapPrelim::from([("name", "Main")]));
        });
        room.edit(1, |txn, shapes, _| {
            shapes.insert(txn, "p", pen(&[1.0, 2.0]));
            shape_map(txn, "a").insert(txn, "x", 3.0);
        });
        let replay = Replay::new(None, room.updates(0..2)).expect("replay");
        let copy = Replay::new(Some(&replay.encode_v1()), []).expect("copy");
        assert_eq!(copy.to_json(), replay.to_json());
        assert_eq!(copy.to_json(), room.json());
        let half = Replay::new(None, room.updates(0..1)).expect("half");
        let resumed = Replay::new(Some(&half.encode_v1()), room.updates(1..2)).expect("resumed");
        assert_eq!(resumed.to_json(), room.json());
    }

    fn people_json(
        json: &serde_json::Map<String, serde_json::Value>,
    ) -> (Option<serde_json::Value>, Option<serde_json::Value>) {
        (json.get(SHAPES).cloned(), json.get(PAGES).cloned())
    }

    fn server_json(
        json: &serde_json::Map<String, serde_json::Value>,
    ) -> serde_json::Map<String, serde_json::Value> {
        json.iter()
            .filter(|(k, _)| !PEOPLE_ROOTS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    #[test]
    fn people_roots_are_not_server_roots() {
        for name in PEOPLE_ROOTS {
            assert_eq!(crate::room::vet::roots::ServerRoot::of(name), None);
        }
    }

    #[test]
    fn restore_never_brings_back_a_streaming_lock_and_leaves_the_live_one() {
        let mut room = Room::new(1);
        room.edit(0, |txn, shapes, _| {
            shapes.insert(
                txn,
                "half",
                MapPrelim::from([("x", yrs::Any::from(0.0)), ("locked", yrs::Any::from(true))]),
            );
            shapes.insert(
                txn,
                "kept",
                MapPrelim::from([
                    ("x", yrs::Any::from(1.0)),
                    ("locked", yrs::Any::from(false)),
                ]),
            );
        });
        let mid_stream = Replay::new(None, room.updates(0..1)).expect("version");
        room.edit(0, |txn, shapes, _| {
            shapes.remove(txn, "half");
            let kept = shape_map(txn, "kept");
            kept.insert(txn, "x", 9.0);
            kept.insert(txn, "locked", true);
        });
        let live = &room.docs[0];
        restore(&mut live.transact_mut(), &mid_stream);
        let txn = live.transact();
        let any = |map: &MapRef, key: &str| match map.get(&txn, key) {
            Some(Out::Any(any)) => Some(any),
            _ => None,
        };
        let half = shape_map(&txn, "half");
        assert_eq!(
            any(&half, "locked"),
            None,
            "a restored shape is never locked"
        );
        assert_eq!(any(&half, "x"), Some(Any::from(0.0)));
        let kept = shape_map(&txn, "kept");
        assert_eq!(any(&kept, "x"), Some(Any::from(1.0)));
        assert_eq!(
            any(&kept, "locked"),
            Some(Any::from(true)),
            "the live lock stays"
        );
    }

    #[test]
    fn restore_brings_back_a_version_keeping_map_identity() {
        let mut room = Room::new(1);
        room.edit(0, |txn, shapes, pages| {
            shapes.insert(txn, "a", rect(1.0, "black"));
            shapes.insert(txn, "b", rect(2.0, "red"));
            shapes.insert(txn, "p", pen(&[0.0, 0.0, 1.0, 1.0]));
            pages.insert(txn, "page:main", MapPrelim::from([("name", "Main")]));
            pages.insert(txn, "page:2", MapPrelim::from([("name", "Two")]));
            let fairies = txn.get_or_insert_map("fairies");
            fairies.insert(txn, "f1", MapPrelim::from([("name", "Fern")]));
            let meta = txn.get_or_insert_map("meta");
            meta.insert(txn, "schemaVersion", 1i64);
        });
        let version = Replay::new(None, room.updates(0..1)).expect("version");
        room.edit(0, |txn, shapes, pages| {
            shapes.insert(txn, "c", rect(3.0, "green"));
            shapes.remove(txn, "b");
            let a = shape_map(txn, "a");
            a.insert(txn, "x", 50.0);
            a.insert(txn, "extra", "yes");
            let p = shape_map(txn, "p");
            points_of(txn, &p).push_back(txn, 9.0);
            let main = match pages.get(txn, "page:main") {
                Some(Out::YMap(m)) => m,
                other => panic!("{other:?}"),
            };
            main.insert(txn, "name", "Renamed");
            pages.remove(txn, "page:2");
            let fairies = txn.get_or_insert_map("fairies");
            fairies.insert(txn, "f2", MapPrelim::from([("name", "Moss")]));
        });
        let live = &room.docs[0];
        let (a_id, p_id) = {
            let txn = live.transact();
            (
                shape_map(&txn, "a").as_ref().id(),
                shape_map(&txn, "p").as_ref().id(),
            )
        };
        let server_before = server_json(&room.json());
        let changed = restore(&mut live.transact_mut(), &version);
        assert_eq!(changed, 6, "a, b, c, p; page:main, page:2");
        let after = room.json();
        assert_eq!(people_json(&after), people_json(&version.to_json()));
        assert_eq!(server_json(&after), server_before, "server roots untouched");
        let txn = live.transact();
        assert_eq!(shape_map(&txn, "a").as_ref().id(), a_id);
        assert_eq!(shape_map(&txn, "p").as_ref().id(), p_id);
        assert!(matches!(
            shape_map(&txn, "p").get(&txn, "points"),
            Some(Out::YArray(_))
        ));
        drop(txn);
        assert_eq!(restore(&mut live.transact_mut(), &version), 0, "idempotent");
    }

    #[test]
    fn rollback_takes_back_one_fairy_keeping_what_people_did() {
        const A: usize = 0;
        const F: usize = 1;
        let actors = [user("a"), fairy("f")];
        let mut room = Room::new(2);
        room.edit(A, |txn, shapes, _| {
            shapes.insert(txn, "a1", rect(10.0, "black"));
            shapes.insert(txn, "b1", rect(20.0, "grey"));
        });
        let cut = room.log.len();
        room.edit(F, |txn, shapes, _| {
            shapes.insert(txn, "f1", rect(0.0, "violet"));
        });
        room.edit(A, |txn, _, _| {
            shape_map(txn, "f1").insert(txn, "x", 50.0);
        });
        room.edit(F, |txn, _, _| {
            shape_map(txn, "a1").insert(txn, "x", 99.0);
        });
        room.edit(A, |txn, shapes, _| {
            shapes.insert(txn, "a2", rect(5.0, "black"));
        });
        room.edit(F, |txn, shapes, _| {
            shape_map(txn, "b1").insert(txn, "y", 3.0);
            shapes.remove(txn, "b1");
        });
        room.edit(F, |txn, _, _| {
            shape_map(txn, "a1").insert(txn, "color", "red");
        });
        room.edit(A, |txn, _, _| {
            shape_map(txn, "a1").insert(txn, "color", "blue");
            shape_map(txn, "a2").insert(txn, "y", 7.0);
        });
        room.edit(F, |txn, shapes, _| {
            shapes.insert(txn, "f2", rect(1.0, "red"));
        });

        let at_cut = Replay::new(None, room.updates(0..cut))
            .expect("base")
            .to_json();
        let base = Replay::new(None, room.updates(0..cut)).expect("base");
        let mut rollback = Rollback::new(base, fairy("f"));
        let mut all = ShapeChanges::default();
        for (writer, update) in &room.log[cut..] {
            let c = rollback.record(update, &actors[*writer]).expect("record");
            all.merge(&c);
        }
        assert_eq!(all, changes(&["a2", "f1", "f2"], &["a1"], &["b1"]));
        let live = &room.docs[0];
        let outcome = rollback.apply(&mut live.transact_mut());
        assert_eq!(
            outcome,
            RollbackOutcome {
                reverted: 3,
                kept: 2
            }
        );
        let json = room.json();
        let shapes = &json["shapes"];
        assert_eq!(shapes["f1"]["x"], 50.0, "F's shape A moved stays");
        assert_eq!(
            shapes["a1"]["x"], 10.0,
            "F's move of A's shape is taken back"
        );
        assert_eq!(shapes["a1"]["color"], "blue", "A's later colour stays");
        assert_eq!(
            shapes["b1"], at_cut["shapes"]["b1"],
            "F's delete is taken back"
        );
        assert_eq!(shapes["a2"]["y"], 7.0, "A's own edits stay");
        assert!(shapes.get("f2").is_none(), "F's untouched shape is removed");
    }

    #[test]
    fn a_restore_keeps_the_original_actors_of_what_it_brings_back() {
        const A: usize = 0;
        const F: usize = 1;
        let actors = [user("a"), fairy("f")];
        let mut room = Room::new(2);
        room.edit(A, |txn, shapes, _| {
            shapes.insert(txn, "a1", rect(10.0, "black"));
        });
        room.edit(F, |txn, shapes, _| {
            shapes.insert(txn, "f1", rect(0.0, "violet"));
            shapes.insert(txn, "f2", rect(5.0, "red"));
            shape_map(txn, "a1").insert(txn, "x", 99.0);
        });
        // A restores the room before the fairy's work, then after it: both are A's updates.
        let before = Replay::new(None, room.updates(0..1)).expect("before");
        room.edit(A, |txn, _, _| {
            restore(txn, &before);
        });
        let after = Replay::new(None, room.updates(0..2)).expect("after");
        room.edit(A, |txn, _, _| {
            restore(txn, &after);
        });
        assert!(room.json()["shapes"].get("f1").is_some(), "brought back");
        let take_back = |restores_keep_actors: bool| {
            let base = Replay::new(None, room.updates(0..1)).expect("base");
            let mut rollback = Rollback::new(base, fairy("f"));
            record_log(&mut rollback, &room.log[1..], &actors, |i| {
                i >= 1 && restores_keep_actors
            });
            let doc = Doc::new();
            let now = room.docs[0]
                .transact()
                .encode_state_as_update_v1(&StateVector::default());
            apply_to(&doc, &now).expect("copy");
            let outcome = rollback.apply(&mut doc.transact_mut());
            (outcome, doc_json(&doc.transact()))
        };
        // Read as plain writes, the restores made everything A's: nothing of F's is left.
        let (outcome, _) = take_back(false);
        assert_eq!(outcome.reverted, 0, "{outcome:?}");
        // Read as restores, the fairy's shapes and move are still the fairy's.
        let (outcome, json) = take_back(true);
        assert_eq!(
            outcome,
            RollbackOutcome {
                reverted: 3,
                kept: 0
            }
        );
        let shapes = &json["shapes"];
        assert!(
            shapes.get("f1").is_none() && shapes.get("f2").is_none(),
            "{json:?}"
        );
        assert_eq!(shapes["a1"]["x"], 10.0, "the fairy's move is taken back");
    }

    #[test]
    fn a_restore_gives_a_property_back_to_its_writer_in_that_version_only() {
        let actors = [user("a"), fairy("f")];
        let mut room = Room::new(2);
        room.edit(1, |txn, shapes, _| {
            shapes.insert(txn, "f1", rect(0.0, "violet"));
        });
        room.edit(0, |txn, _, _| {
            shape_map(txn, "f1").insert(txn, "color", "blue");
        });
        let violet = Replay::new(None, room.updates(0..1)).expect("violet");
        room.edit(0, |txn, _, _| {
            restore(txn, &violet);
        });
        let mut rollback = Rollback::new(Replay::new(None, []).expect("empty"), fairy("f"));
        record_log(&mut rollback, &room.log, &actors, |i| i == 2);
        // The restore made f1 what the fairy made it: it is the fairy's again, whole.
        let outcome = rollback.apply(&mut room.docs[0].transact_mut());
        assert_eq!(outcome.reverted, 1, "{outcome:?}");
        let json = room.json();
        assert!(
            json.get("shapes").and_then(|s| s.get("f1")).is_none(),
            "{json:?}"
        );

        // A restore of A's own blue, over A's green, leaves the colour A's: f1 stays.
        let mut room = Room::new(2);
        room.edit(1, |txn, shapes, _| {
            shapes.insert(txn, "f1", rect(0.0, "violet"));
        });
        room.edit(0, |txn, _, _| {
            shape_map(txn, "f1").insert(txn, "color", "blue");
        });
        room.edit(0, |txn, _, _| {
            shape_map(txn, "f1").insert(txn, "color", "green");
        });
        let blue = Replay::new(None, room.updates(0..2)).expect("blue");
        room.edit(0, |txn, _, _| {
            restore(txn, &blue);
        });
        let mut rollback = Rollback::new(Replay::new(None, []).expect("empty"), fairy("f"));
        record_log(&mut rollback, &room.log, &actors, |i| i == 3);
        let outcome = rollback.apply(&mut room.docs[0].transact_mut());
        assert_eq!(
            outcome,
            RollbackOutcome {
                reverted: 0,
                kept: 1
            }
        );
        assert_eq!(room.json()["shapes"]["f1"]["color"], "blue");
    }

    #[test]
    fn rollback_keeps_what_the_live_document_changed_since() {
        let mut room = Room::new(2);
        room.edit(0, |txn, shapes, _| {
            shapes.insert(txn, "s", rect(1.0, "black"));
        });
        room.edit(1, |txn, shapes, _| {
            shape_map(txn, "s").insert(txn, "x", 2.0);
            shape_map(txn, "s").insert(txn, "color", "red");
            shapes.insert(txn, "g", rect(0.0, "green"));
        });
        let base = Replay::new(None, room.updates(0..1)).expect("base");
        let mut rollback = Rollback::new(base, fairy("f"));
        rollback
            .record(&room.log[1].1, &fairy("f"))
            .expect("record");
        // After the log was read, a person moves `s` and recolours `g`.
        room.edit(0, |txn, _, _| {
            shape_map(txn, "s").insert(txn, "x", 3.0);
            shape_map(txn, "g").insert(txn, "color", "blue");
        });
        let outcome = rollback.apply(&mut room.docs[0].transact_mut());
        assert_eq!(
            outcome,
            RollbackOutcome {
                reverted: 1,
                kept: 2
            }
        );
        let json = room.json();
        assert_eq!(json["shapes"]["s"]["x"], 3.0);
        assert_eq!(json["shapes"]["s"]["color"], "black");
        assert_eq!(json["shapes"]["g"]["color"], "blue");
    }

    #[test]
    fn replay_and_rollback_are_send() {
        fn send<T: Send>() {}
        send::<Replay>();
        send::<Rollback>();
    }

    // -----------------------------------------------------------------------------------------
    // Random interleavings

    const IDS: [&str; 4] = ["s0", "s1", "s2", "s3"];
    const KEYS: [&str; 4] = ["x", "y", "color", "points"];
    const COLORS: [&str; 3] = ["black", "red", "blue"];

    #[derive(Debug, Clone)]
    enum Op {
        Create { id: usize, x: i32, pen: bool },
        Set { id: usize, key: usize, value: i32 },
        Append { id: usize, value: i32 },
        Delete { id: usize },
        Page { id: usize, name: i32 },
    }

    fn op() -> impl Strategy<Value = (usize, Op)> {
        let op = prop_oneof![
            (0..4usize, -50..50i32, any::<bool>()).prop_map(|(id, x, pen)| Op::Create {
                id,
                x,
                pen
            }),
            (0..4usize, 0..3usize, -50..50i32).prop_map(|(id, key, value)| Op::Set {
                id,
                key,
                value
            }),
            (0..4usize, -50..50i32).prop_map(|(id, value)| Op::Append { id, value }),
            (0..4usize).prop_map(|id| Op::Delete { id }),
            (0..2usize, 0..9i32).prop_map(|(id, name)| Op::Page { id, name }),
        ];
        (0..3usize, op)
    }

    fn value_of(key: usize, value: i32) -> Any {
        if key == 2 {
            Any::from(COLORS[value.unsigned_abs() as usize % COLORS.len()])
        } else {
            Any::from(f64::from(value))
        }
    }

    /// The plain value under `key` of the entry `id` of `root`, as `writer` sees it.
    fn current(room: &Room, writer: usize, root: &str, id: &str, key: &str) -> Option<Any> {
        let txn = room.docs[writer].transact();
        match txn.get_map(root)?.get(&txn, id)? {
            Out::YMap(map) => match map.get(&txn, key)? {
                Out::Any(any) => Some(any),
                _ => None,
            },
            _ => None,
        }
    }

    /// What one op wrote: (root, id, key).
    type Written = Vec<(usize, String, &'static str)>;

    /// Runs `op` as `writer` if it applies; what it did to `shapes` and the (root, id, keys)
    /// it wrote.
    fn run(room: &mut Room, writer: usize, op: &Op) -> Option<(ShapeChanges, Written)> {
        let exists = |room: &Room, root: &str, id: &str| {
            let txn = room.docs[writer].transact();
            txn.get_map(root).and_then(|r| r.get(&txn, id))
        };
        let all_keys = |id: &str| {
            KEYS.iter()
                .map(|k| (0, id.to_string(), *k))
                .collect::<Vec<_>>()
        };
        match op.clone() {
            Op::Create { id, x, pen } => {
                let id = IDS[id];
                let existed = exists(room, SHAPES, id).is_some();
                room.edit(writer, |txn, shapes, _| {
                    let mut map = rect(f64::from(x), "black");
                    if pen {
                        map.insert(
                            "points".into(),
                            In::Array(ArrayPrelim::from([f64::from(x)])),
                        );
                    }
                    shapes.insert(txn, id, map);
                });
                let c = if existed {
                    changes(&[], &[id], &[])
                } else {
                    changes(&[id], &[], &[])
                };
                Some((c, all_keys(id)))
            }
            Op::Set { id, key, value } => {
                let id = IDS[id];
                let Some(Out::YMap(_)) = exists(room, SHAPES, id) else {
                    return None;
                };
                // Writers set only the keys whose value changes (docs/document-schema.md).
                let value = value_of(key, value);
                if current(room, writer, SHAPES, id, KEYS[key]) == Some(value.clone()) {
                    return None;
                }
                room.edit(writer, |txn, _, _| {
                    shape_map(txn, id).insert(txn, KEYS[key], value);
                });
                Some((
                    changes(&[], &[id], &[]),
                    vec![(0, id.to_string(), KEYS[key])],
                ))
            }
            Op::Append { id, value } => {
                let id = IDS[id];
                let Some(Out::YMap(_)) = exists(room, SHAPES, id) else {
                    return None;
                };
                room.edit(writer, |txn, _, _| {
                    let shape = shape_map(txn, id);
                    match shape.get(txn, "points") {
                        Some(Out::YArray(points)) => {
                            points.push_back(txn, f64::from(value));
                        }
                        _ => {
                            shape.insert(txn, "points", ArrayPrelim::from([f64::from(value)]));
                        }
                    }
                });
                Some((
                    changes(&[], &[id], &[]),
                    vec![(0, id.to_string(), "points")],
                ))
            }
            Op::Delete { id } => {
                let id = IDS[id];
                exists(room, SHAPES, id)?;
                room.edit(writer, |txn, shapes, _| {
                    shapes.remove(txn, id);
                });
                Some((changes(&[], &[], &[id]), all_keys(id)))
            }
            Op::Page { id, name } => {
                let id = ["page:main", "page:2"][id];
                if current(room, writer, PAGES, id, "name") == Some(Any::from(f64::from(name))) {
                    return None;
                }
                let existing = exists(room, PAGES, id);
                room.edit(writer, |txn, _, pages| match existing {
                    Some(Out::YMap(page)) => {
                        page.insert(txn, "name", f64::from(name));
                    }
                    _ => {
                        pages.insert(txn, id, MapPrelim::from([("name", f64::from(name))]));
                    }
                });
                Some((ShapeChanges::default(), vec![(1, id.to_string(), "name")]))
            }
        }
    }

    fn prop_at<'a>(
        json: &'a serde_json::Map<String, serde_json::Value>,
        root: usize,
        id: &str,
        key: &str,
    ) -> Option<&'a serde_json::Value> {
        json.get(PEOPLE_ROOTS[root])?.get(id)?.get(key)
    }

    fn entry_at<'a>(
        json: &'a serde_json::Map<String, serde_json::Value>,
        root: usize,
        id: &str,
    ) -> Option<&'a serde_json::Value> {
        json.get(PEOPLE_ROOTS[root])?.get(id)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn replay_restore_and_rollback_agree_with_the_log(
            writers in 2..=3usize,
            ops in prop::collection::vec(op(), 1..40),
            cut in any::<prop::sample::Index>(),
            target in 0..3usize,
        ) {
            let actors = [user("a"), fairy("f"), user("b")];
            let target = target % writers;
            let mut room = Room::new(writers);
            let mut effects = Vec::new();
            for (writer, op) in &ops {
                if let Some(effect) = run(&mut room, writer % writers, op) {
                    effects.push(effect);
                }
            }
            let cut = cut.index(room.log.len() + 1);
            let full = room.json();

            // Replay up to the cut = a fresh document with those updates.
            let version = Replay::new(None, room.updates(0..cut)).expect("replay");
            let fresh = Doc::new();
            for u in room.updates(0..cut) {
                apply_to(&fresh, u).expect("fresh");
            }
            let at_cut = doc_json(&fresh.transact());
            prop_assert_eq!(&version.to_json(), &at_cut);

            // Shape changes, one update at a time.
            let mut stepped = Replay::new(None, room.updates(0..cut)).expect("replay");
            for (i, u) in room.updates(cut..room.log.len()).into_iter().enumerate() {
                let c = stepped.apply(u).expect("apply");
                prop_assert_eq!(&c, &effects[cut + i].0);
            }
            prop_assert_eq!(&stepped.to_json(), &full);

            // Restore into a document holding every update.
            let live = Doc::new();
            for u in room.updates(0..room.log.len()) {
                apply_to(&live, u).expect("live");
            }
            restore(&mut live.transact_mut(), &version);
            prop_assert_eq!(people_json(&doc_json(&live.transact())), people_json(&at_cut));

            // Rollback of `target` since the cut.
            let live = Doc::new();
            for u in room.updates(0..room.log.len()) {
                apply_to(&live, u).expect("live");
            }
            let base = Replay::new(None, room.updates(0..cut)).expect("base");
            let mut rollback = Rollback::new(base, actors[target].clone());
            let mut last = BTreeMap::new();
            let mut touched: BTreeMap<(usize, String), BTreeSet<usize>> = BTreeMap::new();
            for (i, (writer, u)) in room.log[cut..].iter().enumerate() {
                rollback.record(u, &actors[*writer]).expect("record");
                for (root, id, key) in &effects[cut + i].1 {
                    last.insert((*root, id.clone(), *key), *writer);
                    touched.entry((*root, id.clone())).or_default().insert(*writer);
                }
            }
            rollback.apply(&mut live.transact_mut());
            let after = doc_json(&live.transact());
            for ((root, id, key), writer) in &last {
                if *writer != target {
                    prop_assert_eq!(
                        prop_at(&after, *root, id, key),
                        prop_at(&full, *root, id, key),
                        "{}/{}/{} last written by {}", PEOPLE_ROOTS[*root], id, key, writer
                    );
                }
            }
            for ((root, id), writers) in &touched {
                if writers.iter().all(|w| *w == target) {
                    prop_assert_eq!(
                        entry_at(&after, *root, id),
                        entry_at(&at_cut, *root, id),
                        "{}/{} touched by the target only", PEOPLE_ROOTS[*root], id
                    );
                }
            }
            prop_assert_eq!(server_json(&after), server_json(&full));
        }
    }
}
