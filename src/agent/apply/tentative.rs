//! Tentative application of a still-streaming fairy action (docs/fairies.md "Tentative
//! application"): each incomplete version is applied at once in a transaction with the fairy's
//! origin; when a newer version arrives the previous one is reverted first; when the action
//! completes its final version stays. A complete action whose last tentative version already
//! equals it, on a document nobody else changed since, is committed in place (its created
//! shapes unlocked, nothing reverted or applied again): no update at all for an edit, one for a
//! creation, instead of a revert and a fresh apply (two updates, each a durable log entry and a
//! broadcast; `tests/sync/canvas_stream_size.rs` measures it). A complete `create` whose shown
//! version created the same shape (same shape type, same id) is written over that shape instead,
//! whatever else changed in the document meanwhile ([`Completion::WrittenOver`]): parsed against
//! the document as it is now, the shown shape's id counted free ([`ActionCtx::preview`]), then
//! only the keys that differ written, `locked: false` among them, in one update. Reverting the
//! shown shape would leave a deleted copy of it in the document for good (a tombstone per
//! completed creation: `fairyring bench --fairies` reports the bytes per shape).
//!
//! Mechanism: a yrs [`UndoManager`] scoped to the `shapes` and `pages` roots and tracking only
//! the fairy's origin, with a capture timeout of 0 so each tentative transaction is exactly one
//! stack item. The stack holds at most the one pending tentative change: it is cleared after
//! every revert and every commit, so an undo can never reach an older (committed) change.
//!
//! Invariant: a revert never removes or overwrites a change that a user or another fairy made
//! meanwhile (i.e. that this document integrated before the revert). yrs guarantees it per map
//! key: undoing the fairy's write of a key that someone else has written since leaves their
//! value. Nested content of a shape the fairy created tentatively is the exception (undoing
//! the creation removes the whole map), which is why such shapes carry `locked: true` until
//! their action completes, and clients do not edit locked shapes.
//!
//! That holds for every change the document has integrated. For a user's edit still in flight
//! when the revert happens (concurrent with both the fairy's write and its revert), YATA's
//! tie-break decides, by client id: the user's value wins if the server document's client id is
//! lower than the user's. `tests/sync/canvas_merge.rs` proves the property with server client ids in
//! `1..=16` and shows it fails with a high one, so the room document should use a small
//! client id ([`MAX_SERVER_CLIENT_ID`]; Yjs clients draw random 32-bit ids). [`Tentative::new`]
//! logs a warning otherwise.
//!
//! All of the fairy's canvas writes should go through one [`Tentative`]; methods open their own
//! transactions, so none may be called while a transaction on the document is open (and the
//! value must be dropped outside one too: the undo manager unregisters its observers then).

use std::time::Duration;

use serde_json::Value;
use yrs::undo::Options;
use yrs::{Doc, Origin, ReadTxn, StateVector, Transact, UndoManager};

use crate::agent::actions::{ActionCtx, ActionError, CanvasArgs, Parsed, Registry, Sanitized};
use crate::canvas::schema::{PAGES, SHAPES};
use crate::canvas::shape::{read_shape, set_locked};
use crate::origin::TxnOrigin;

/// Largest client id for which a room document lets users win ties against fairies (see the
/// module documentation).
pub const MAX_SERVER_CLIENT_ID: u64 = 1 << 16;

/// Attempts at creating a fairy's undo manager that only yield before the next one; later
/// attempts sleep a millisecond.
const QUIET_SPINS: usize = 100;

/// How long a fairy waits for its room's document to be quiet enough to create its undo
/// manager before its hosting fails.
pub const QUIET_PATIENCE: Duration = Duration::from_secs(5);

/// Why a fairy's [`Tentative`] could not be created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TentativeError {
    /// The document was never free of other transactions long enough.
    #[error(
        "the room's document stayed busy through {attempts} attempts to set up the fairy's undo manager"
    )]
    Busy {
        /// Attempts made.
        attempts: usize,
    },
}

/// One fairy's revertible application of streaming actions on one document.
pub struct Tentative {
    doc: Doc,
    origin: TxnOrigin,
    undo: UndoManager,
    pending: Option<Pending>,
    last_completion: Option<Completion>,
}

/// The change currently applied tentatively.
#[derive(Debug, Clone, Default)]
struct Pending {
    /// Shapes it created (locked until commit).
    created: Vec<String>,
    /// Whether it changed anything (pushed an undo item).
    captured: bool,
    /// The version applied, as received and as parsed; `None` when it failed.
    applied: Option<(Value, Parsed)>,
    /// The document's state vector right after it was applied.
    state: StateVector,
}

/// How [`Tentative::apply_complete`] finished an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// The last tentative version was the complete action: kept as it was.
    InPlace,
    /// The shown version was a creation of the same shape: the complete action was written
    /// over it, only the keys that differ (`locked` among them), nothing reverted.
    WrittenOver,
    /// The tentative version (if any) was reverted and the complete action applied.
    Reapplied,
}

/// What [`Tentative::write_over_shown`] did.
enum Kept {
    /// Written over the shown shape; what the model is told.
    Done(Sanitized),
    /// The complete version is refused; nothing of it is written.
    Refused(ActionError),
    /// It creates another shape than the one shown: nothing written, it takes the usual path.
    Elsewhere,
}

impl Tentative {
    /// A tentative applier for fairy `fairy_id` on `doc` (a cheap clone of the room's document).
    pub fn new(doc: &Doc, fairy_id: &str) -> Self {
        let origin = TxnOrigin::fairy(fairy_id);
        let client = doc.client_id();
        if client.get() > MAX_SERVER_CLIENT_ID {
            tracing::warn!(
                fairy = fairy_id,
                client = client.get(),
                "room document client id is high: a user's edit in flight during a fairy's revert may lose the tie"
            );
        }
        let mut undo = UndoManager::with_options(Options {
            capture_timeout_millis: 0,
            ..Options::default()
        });
        let shapes = doc.get_or_insert_map(SHAPES);
        let pages = doc.get_or_insert_map(PAGES);
        undo.expand_scope(doc, &shapes);
        undo.expand_scope(doc, &pages);
        undo.include_origin(Origin::from(&origin));
        Tentative {
            doc: doc.clone(),
            origin,
            undo,
            pending: None,
            last_completion: None,
        }
    }

    /// Creates the fairy's [`Tentative`] at a quiet moment of the document. yrs 0.28's undo
    /// manager registers its document observers with `try_transact_mut().unwrap()`, which panics
    /// when any other thread holds a transaction on the document at that instant. Waiting until a
    /// transaction can be taken (and retrying a panic, which happens before anything is
    /// registered when it is the first registration that fails) makes that practically
    /// impossible; see `agent::hub` for the matching rule when dropping it. When the second
    /// registration loses the race, the first (a destroy observer) stays behind: it runs only
    /// on `Doc::destroy`, which nothing calls on a room's document. The panic is caught by
    /// [`crate::contain`], so a lost race prints nothing and symbolizes no backtrace.
    ///
    /// Runs in the fairy's own task (never under the hub's lock): between attempts it yields,
    /// then sleeps a millisecond, so the writers it waits for can finish. A document that stays
    /// busy for `patience` is an error ([`TentativeError::Busy`]), never a panic.
    pub async fn new_when_quiet(
        doc: &Doc,
        fairy_id: &str,
        patience: Duration,
    ) -> Result<Tentative, TentativeError> {
        let deadline = tokio::time::Instant::now() + patience;
        let mut attempts = 0usize;
        loop {
            attempts += 1;
            let quiet = doc.try_transact_mut().is_ok();
            if quiet {
                // Contained: no report on stderr and no backtrace symbolized per lost race.
                let made = crate::contain::contain(std::panic::AssertUnwindSafe(|| {
                    Tentative::new(doc, fairy_id)
                }));
                match made {
                    Ok(tentative) => return Ok(tentative),
                    Err(panic) => tracing::debug!(
                        fairy = fairy_id,
                        %panic,
                        "document busy while creating the undo manager; retrying"
                    ),
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(TentativeError::Busy { attempts });
            }
            if attempts < QUIET_SPINS {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }

    /// The origin of the undo manager's own transactions (reverts): a change tracker must count
    /// it as the fairy's own, like the fairy's origin.
    pub fn revert_origin(&self) -> Origin {
        self.undo.as_origin()
    }

    /// True while an incomplete version is applied.
    pub fn is_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Reverts the previous tentative version, then applies `action` (incomplete: shapes it
    /// creates are locked). On error nothing of this version stays applied; the previous one is
    /// reverted either way.
    pub fn apply_tentative(
        &mut self,
        registry: &Registry,
        action: &Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        self.revert_tentative();
        ctx.complete = false;
        let before = self.undo.undo_stack().len();
        let result = {
            let mut txn = self.doc.transact_mut_with(Origin::from(&self.origin));
            registry.apply_in(&mut txn, action, ctx)
        };
        let captured = self.undo.undo_stack().len() > before;
        match result {
            Ok(parsed) => {
                let told = Sanitized::from(parsed.notes.as_slice());
                self.pending = Some(Pending {
                    created: ctx.created.clone(),
                    captured,
                    applied: Some((action.clone(), parsed)),
                    state: self.doc.transact().state_vector(),
                });
                Ok(told)
            }
            Err(e) => {
                self.pending = Some(Pending {
                    created: Vec::new(),
                    captured,
                    applied: None,
                    state: StateVector::default(),
                });
                self.revert_tentative();
                Err(e)
            }
        }
    }

    /// The pending version, parsed, if it is `action` applied to the document as it is now.
    ///
    /// The gate is the received JSON, not the parsed arguments: parsing reads the document
    /// (is a new shape's id free? where are the shapes whose centre is a rotation's default
    /// origin?), and the document the complete version would be parsed against now is the one
    /// the tentative version changed (the id it created is taken, the shapes it moved are
    /// elsewhere), so parsing it again here gives different arguments for the same action.
    /// The same JSON on the same document with the same request state parses to the same
    /// arguments, which is what the in-place commit relies on.
    fn same_as_pending(&self, action: &Value) -> Option<&Parsed> {
        let pending = self.pending.as_ref()?;
        let (applied, parsed) = pending.applied.as_ref()?;
        (applied == action && self.doc.transact().state_vector() == pending.state).then_some(parsed)
    }

    /// The shape the pending version created, when `action` is the complete version of that
    /// creation: a `create` of the same shape type and id as the version shown, whose shape is
    /// still there, locked, the fairy's. Its complete version is then written over it
    /// ([`Tentative::write_over_shown`]) whatever else changed in the document meanwhile.
    fn shown_creation_of(&self, action: &Value, ctx: &ActionCtx) -> Option<String> {
        let pending = self.pending.as_ref()?;
        let (shown, _) = pending.applied.as_ref()?;
        let [id] = pending.created.as_slice() else {
            return None;
        };
        let create = Some(&Value::String("create".into()));
        let same = |pointer: &str| shown.pointer(pointer) == action.pointer(pointer);
        if action.get("_type") != create
            || shown.get("_type") != create
            || !same("/shape/_type")
            || !same("/shape/shapeId")
        {
            return None;
        }
        let txn = self.doc.transact();
        let on_canvas = read_shape(&txn, id).ok().flatten()?;
        (on_canvas.locked && on_canvas.created_by == ctx.author()).then(|| id.clone())
    }

    /// Writes the complete `action` over the shape `id` its shown version created, in one
    /// transaction: parsed against the document as it is now (the shown shape's id counted
    /// free, [`ActionCtx::preview`]), then only the keys that differ written, `locked` among
    /// them. Nothing is reverted: no deleted copy of the shape stays in the document.
    fn write_over_shown(
        &mut self,
        registry: &Registry,
        action: &Value,
        ctx: &mut ActionCtx,
        id: &str,
    ) -> Kept {
        ctx.complete = true;
        ctx.created.clear();
        ctx.preview = Some(id.to_owned());
        let written = {
            let mut txn = self.doc.transact_mut_with(Origin::from(&self.origin));
            match registry.parse(&txn, action, ctx) {
                Ok(parsed) => match &parsed.args {
                    CanvasArgs::Create(create) if create.shape.id == id => {
                        Some(match parsed.args.apply(&mut txn, ctx) {
                            Ok(()) => Ok(parsed),
                            Err(error) => Err((error, true)),
                        })
                    }
                    // Not the shown shape after all (nothing written yet).
                    _ => None,
                },
                Err(error) => Some(Err((error, false))),
            }
        };
        ctx.preview = None;
        match written {
            None => Kept::Elsewhere,
            Some(Err((error, false))) => Kept::Refused(error),
            Some(Err((error, true))) => {
                // Written in part: the stack holds the shown version and this write only
                // (it is cleared after every commit and revert): both are taken back.
                while self.undo.undo_blocking() {}
                self.pending = None;
                self.undo.clear_all();
                Kept::Refused(error)
            }
            Some(Ok(parsed)) => {
                let overwritten = self
                    .undo
                    .undo_stack()
                    .last()
                    .map(|item| item.deletions().clone());
                self.pending = None;
                self.undo.clear_all();
                if let Some(overwritten) = overwritten {
                    // The values written over are gone for good: their content need not stay.
                    let mut txn = self.doc.transact_mut_with(self.undo.as_origin());
                    txn.gc(Some(&overwritten));
                }
                Kept::Done(Sanitized::from(parsed.notes.as_slice()))
            }
        }
    }

    /// Undoes the pending tentative version, if any; true if something was reverted.
    /// Keys that someone else wrote meanwhile keep their value.
    pub fn revert_tentative(&mut self) -> bool {
        let Some(pending) = self.pending.take() else {
            return false;
        };
        let inserted = self
            .undo
            .undo_stack()
            .last()
            .map(|item| item.insertions().clone());
        let reverted = pending.captured && self.undo.undo_blocking();
        self.undo.clear_all();
        if let Some(inserted) = inserted {
            self.collect_garbage(&inserted);
        }
        reverted
    }

    /// Garbage-collects what a reverted version inserted: the undo manager keeps deleted items
    /// alive while they are on its stacks, and the transaction that deleted them has already
    /// run its collection, so without this every reverted version would stay in the document
    /// with its full content (see `tests/sync/canvas_stream_size.rs`). Only this fairy's own,
    /// now-deleted insertions are collected; the GC transaction changes no content.
    fn collect_garbage(&self, inserted: &yrs::IdSet) {
        let mut txn = self.doc.transact_mut_with(self.undo.as_origin());
        txn.gc(Some(inserted));
    }

    /// Keeps the pending version as final: its shapes are unlocked. No-op without one.
    pub fn commit(&mut self) {
        if let Some(pending) = self.pending.take()
            && !pending.created.is_empty()
        {
            let mut txn = self.doc.transact_mut_with(Origin::from(&self.origin));
            for id in &pending.created {
                set_locked(&mut txn, id, false);
            }
        }
        self.undo.clear_all();
    }

    /// How the last [`Tentative::apply_complete`] finished (`None` before the first).
    pub fn last_completion(&self) -> Option<Completion> {
        self.last_completion
    }

    /// Replaces the pending version (if any) by the complete `action` and keeps it. When the
    /// pending version is `action` itself and the document is as that version left it, it is
    /// committed in place instead ([`Completion::InPlace`]): a successful incomplete version
    /// that equals the complete action gives the same result (parsing differs between the
    /// two only where a field is missing, which fails the incomplete version), except for the
    /// `locked` flag that [`Tentative::commit`] clears; a document changed meanwhile (a user,
    /// another fairy) might parse differently, so it takes the revert-and-apply path, unless
    /// the action creates the very shape its shown version created: then it is written over
    /// that shape ([`Completion::WrittenOver`]). A complete version that is refused takes the
    /// shown one back.
    pub fn apply_complete(
        &mut self,
        registry: &Registry,
        action: &Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        if let Some(parsed) = self.same_as_pending(action) {
            let notes = Sanitized::from(parsed.notes.as_slice());
            ctx.complete = true;
            ctx.created = self
                .pending
                .as_ref()
                .map(|p| p.created.clone())
                .unwrap_or_default();
            self.commit();
            self.last_completion = Some(Completion::InPlace);
            return Ok(notes);
        }
        if let Some(id) = self.shown_creation_of(action, ctx) {
            match self.write_over_shown(registry, action, ctx, &id) {
                Kept::Done(told) => {
                    self.last_completion = Some(Completion::WrittenOver);
                    return Ok(told);
                }
                Kept::Refused(error) => {
                    self.last_completion = Some(Completion::Reapplied);
                    self.revert_tentative();
                    return Err(error);
                }
                Kept::Elsewhere => {}
            }
        }
        self.last_completion = Some(Completion::Reapplied);
        self.revert_tentative();
        ctx.complete = true;
        let result = {
            let mut txn = self.doc.transact_mut_with(Origin::from(&self.origin));
            registry.apply_in(&mut txn, action, ctx)
        };
        self.undo.clear_all();
        result.map(|parsed| Sanitized::from(parsed.notes.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::actions::canvas::test_util::{doc, get, rect};
    use crate::canvas::shape::{read_shape, write_shape};
    use serde_json::json;
    use yrs::ReadTxn;

    fn user_move(doc: &Doc, id: &str, x: Option<f64>, color: Option<&str>) {
        let mut s = get(doc, id);
        if let Some(x) = x {
            s.x = x;
        }
        if let Some(c) = color {
            s.color = c.into();
        }
        write_shape(&mut doc.transact_mut_with("client:9:alice"), &s);
    }

    #[test]
    fn streaming_create_is_locked_then_replaced_then_committed() {
        let doc = doc();
        let registry = Registry::canvas();
        let mut ctx = ActionCtx::new("f1");
        let mut t = Tentative::new(&doc, "f1");
        let v1 =
            json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "b", "x": 1}});
        assert!(t.apply_tentative(&registry, &v1, &mut ctx).is_ok());
        assert!(get(&doc, "b").locked);
        let v2 = json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "b", "x": 1, "y": 5, "w": 50}});
        assert!(t.apply_tentative(&registry, &v2, &mut ctx).is_ok());
        let b = get(&doc, "b");
        assert_eq!((b.y, b.locked), (5.0, true));
        // The id did not get renamed because of the previous version of the same action.
        assert!(ctx.renames.is_empty());
        assert!(t.apply_complete(&registry, &v2, &mut ctx).is_ok());
        assert!(!get(&doc, "b").locked);
        assert!(!t.revert_tentative(), "nothing pending after completion");
        assert!(read_shape(&doc.transact(), "b").ok().flatten().is_some());
    }

    /// Counts the updates the document emits.
    fn update_counter(doc: &Doc) -> std::sync::Arc<std::sync::atomic::AtomicUsize> {
        let n = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = n.clone();
        let observed = doc.observe_update_v1(
            "count",
            move |_: &yrs::TransactionMut, _: &yrs::UpdateEvent| {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            },
        );
        assert!(observed.is_ok());
        n
    }

    #[test]
    fn a_complete_action_equal_to_its_last_version_is_committed_in_place() {
        use std::sync::atomic::Ordering::Relaxed;
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 10.0, 10.0);
        let registry = Registry::canvas();
        let mut ctx = ActionCtx::new("f1");
        let mut t = Tentative::new(&doc, "f1");
        let updates = update_counter(&doc);
        // An edit: no update at all when it completes.
        let mv = json!({"_type": "move", "shapeId": "a", "x": 100, "y": 5});
        assert!(t.apply_tentative(&registry, &mv, &mut ctx).is_ok());
        let before = updates.load(Relaxed);
        assert!(t.apply_complete(&registry, &mv, &mut ctx).is_ok());
        assert_eq!(t.last_completion(), Some(Completion::InPlace));
        assert_eq!(updates.load(Relaxed), before);
        assert_eq!((get(&doc, "a").x, get(&doc, "a").y), (100.0, 5.0));
        assert!(!t.revert_tentative(), "committed");
        // A different complete version: reverted and applied again.
        let v1 = json!({"_type": "move", "shapeId": "a", "x": 1, "y": 5});
        let v2 = json!({"_type": "move", "shapeId": "a", "x": 12, "y": 5});
        assert!(t.apply_tentative(&registry, &v1, &mut ctx).is_ok());
        assert!(t.apply_complete(&registry, &v2, &mut ctx).is_ok());
        assert_eq!(t.last_completion(), Some(Completion::Reapplied));
        assert_eq!(get(&doc, "a").x, 12.0);
        // The same version after someone else changed the document: applied again, so it is
        // sanitized against the document as it is now; the other change stays.
        assert!(t.apply_tentative(&registry, &v1, &mut ctx).is_ok());
        user_move(&doc, "a", None, Some("red"));
        assert!(t.apply_complete(&registry, &v1, &mut ctx).is_ok());
        assert_eq!(t.last_completion(), Some(Completion::Reapplied));
        let a = get(&doc, "a");
        assert_eq!((a.x, a.color.as_str()), (1.0, "red"));
        // A creation: one update (the unlock), the renaming note kept (later references to
        // "a" now mean the new shape).
        let mk =
            json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "a", "x": 3}});
        let notes = t.apply_tentative(&registry, &mk, &mut ctx).map(|n| n.notes);
        let before = updates.load(Relaxed);
        let done = t.apply_complete(&registry, &mk, &mut ctx).map(|n| n.notes);
        assert_eq!(t.last_completion(), Some(Completion::InPlace));
        assert_eq!(done, notes);
        assert!(done.is_ok_and(|n| n.len() == 1));
        assert_eq!(updates.load(Relaxed), before + 1);
        assert_eq!(ctx.created.len(), 1);
        let created = ctx.created.first().cloned().unwrap_or_default();
        assert!(!get(&doc, &created).locked);
    }

    /// The document's encoded size.
    fn encoded(doc: &Doc) -> usize {
        doc.transact()
            .encode_state_as_update_v1(&StateVector::default())
            .len()
    }

    #[test]
    fn a_complete_creation_is_written_over_its_shown_version() {
        use std::sync::atomic::Ordering::Relaxed;
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 10.0, 10.0);
        let registry = Registry::canvas();
        let mut ctx = ActionCtx::new("f1");
        let mut t = Tentative::new(&doc, "f1");
        let updates = update_counter(&doc);
        let shown = json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "b", "x": 1, "y": 2}});
        let done = json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "b", "x": 1, "y": 2, "w": 40, "h": 30, "text": "hi"}});
        assert!(t.apply_tentative(&registry, &shown, &mut ctx).is_ok());
        let index = get(&doc, "b").index;
        // Someone else writes meanwhile: the shown version is kept all the same.
        user_move(&doc, "a", Some(5.0), None);
        let before = (updates.load(Relaxed), encoded(&doc));
        assert!(t.apply_complete(&registry, &done, &mut ctx).is_ok());
        assert_eq!(t.last_completion(), Some(Completion::WrittenOver));
        assert_eq!(updates.load(Relaxed), before.0 + 1, "one update");
        let b = get(&doc, "b");
        let w = match &b.props {
            crate::canvas::shape::ShapeProps::Geo { w, .. } => Some(*w),
            _ => None,
        };
        assert_eq!(
            (b.x, b.y, w, b.text(), b.locked),
            (1.0, 2.0, Some(40.0), Some("hi"), false)
        );
        assert_eq!(b.index, index, "still on top: its z-order key is kept");
        assert_eq!(ctx.created, vec!["b".to_owned()]);
        assert!(ctx.preview.is_none());
        assert!(!t.revert_tentative(), "nothing pending");
        assert_eq!(get(&doc, "a").x, 5.0);
        // Only the keys that differ were written: a few values, not a second copy of the shape.
        let grown = encoded(&doc) - before.1;
        assert!(grown < 60, "the document grew by {grown} bytes");
    }

    /// What completing a streamed flowchart costs: the document's encoded size after, and the
    /// updates (each a durable log entry and a broadcast) and their bytes emitted while the
    /// actions complete.
    #[derive(Debug, Default)]
    struct Costs {
        encoded: usize,
        updates: usize,
        update_bytes: usize,
    }

    /// How [`flowchart_run`] completes each action.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Path {
        /// Nothing shown: only the complete action is applied (the floor).
        CompleteOnly,
        /// Shown, then taken back before the complete action (the path before written-over).
        Reverted,
        /// Shown, then completed through [`Tentative::apply_complete`].
        Shown,
    }

    /// Streams `steps` flowchart steps and arrows as the offline model writes them (keys in
    /// order, coordinates last), each shown once before it completes, with another writer's
    /// edit between the shown and the complete version; `revert` takes the shown version back
    /// first (the path before written-over).
    fn flowchart_costs(steps: usize, revert: bool) -> Costs {
        let path = if revert { Path::Reverted } else { Path::Shown };
        flowchart_run(doc(), steps, path).0
    }

    /// [`flowchart_costs`] on `doc` by `path`, with the document's whole state (a Yjs v1
    /// update).
    fn flowchart_run(doc: Doc, steps: usize, path: Path) -> (Costs, Vec<u8>) {
        use std::sync::{Arc, Mutex};
        let registry = Registry::canvas();
        let mut ctx = ActionCtx::new("f1");
        let mut t = Tentative::new(&doc, "f1");
        rect(&doc, "person", 0.0, 900.0, 10.0, 10.0);
        let emitted = Arc::new(Mutex::new((false, 0usize, 0usize)));
        let counter = emitted.clone();
        let observed = doc.observe_update_v1("cost", move |_, update| {
            let mut seen = counter.lock().unwrap_or_else(|p| p.into_inner());
            if seen.0 {
                seen.1 += 1;
                seen.2 += update.update.len();
            }
        });
        assert!(observed.is_ok());
        let counting = |on: bool| emitted.lock().unwrap_or_else(|p| p.into_inner()).0 = on;
        let step = |i: usize, done: bool| {
            let mut shape = json!({"_type": "rectangle", "color": "blue", "fill": "none", "h": 80,
                "note": "", "shapeId": format!("step{i}"), "text": format!("S{i}"), "textAlign": "middle"});
            if done {
                shape["w"] = json!(160);
                shape["x"] = json!(i * 240);
                shape["y"] = json!(0);
            }
            json!({"_type": "create", "intent": "a step", "shape": shape})
        };
        let arrow = |i: usize, done: bool| {
            let mut shape = json!({"_type": "arrow", "bend": 0, "color": "black",
                "fromId": format!("step{i}"), "note": "", "shapeId": format!("arrow{i}"), "text": "",
                "toId": format!("step{}", i + 1)});
            if done {
                shape["x1"] = json!(i * 240 - 80);
                shape["x2"] = json!(i * 240);
                shape["y1"] = json!(40);
                shape["y2"] = json!(40);
            }
            json!({"_type": "create", "intent": "an arrow", "shape": shape})
        };
        let actions = (1..=steps)
            .map(|i| (step(i, false), step(i, true)))
            .chain((1..steps).map(|i| (arrow(i, false), arrow(i, true))));
        for (k, (shown, done)) in actions.enumerate() {
            if path != Path::CompleteOnly {
                assert!(
                    t.apply_tentative(&registry, &shown, &mut ctx).is_ok(),
                    "{shown}"
                );
            }
            user_move(&doc, "person", Some(k as f64), None);
            counting(true);
            if path == Path::Reverted {
                t.revert_tentative();
            }
            assert!(
                t.apply_complete(&registry, &done, &mut ctx).is_ok(),
                "{done}"
            );
            counting(false);
        }
        let (_, updates, update_bytes) = *emitted.lock().unwrap_or_else(|p| p.into_inner());
        let costs = Costs {
            encoded: encoded(&doc),
            updates,
            update_bytes,
        };
        let state = doc
            .transact()
            .encode_state_as_update_v1(&StateVector::default());
        (costs, state)
    }

    /// Where the flowchart's bytes are, by path (`--nocapture` prints the parts; the figures
    /// are in docs/benchmarks.md, 2026-11-28 s54-size).
    #[test]
    fn where_a_flowcharts_bytes_are() {
        use crate::bench::weight::Breakdown;
        // The room's own client id (a room document writes with it; `doc()` draws a random
        // 32-bit one, which every item naming its parent repeats: about 4 B more per key).
        let room_doc = || {
            let doc = Doc::with_client_id(crate::room::SERVER_CLIENT_ID);
            crate::canvas::init_schema(&doc, "system");
            doc
        };
        let mut weights = Vec::new();
        for path in [Path::CompleteOnly, Path::Reverted, Path::Shown] {
            let (costs, state) = flowchart_run(room_doc(), 12, path);
            let parts = Breakdown::of_update(&state);
            assert!(parts.is_ok(), "{parts:?}");
            let parts = parts.unwrap_or_default();
            eprintln!("--- {path:?}: {costs:?}\n{}", parts.table());
            let sum: usize = parts.parts.values().map(|p| p.bytes).sum();
            assert_eq!(sum, state.len());
            assert_eq!(parts.fairy_shapes, 23);
            weights.push((costs, parts));
        }
    }

    /// Written over, a completion is one small update instead of a revert and a whole shape
    /// (what the log stores and every peer receives); the document itself keeps a tombstone
    /// per value written over instead of one per reverted shape, which weighs about as much
    /// (docs/benchmarks.md, 2026-11-28 s53-savings). Run with `--nocapture` for the figures.
    #[test]
    fn written_over_sends_one_small_update_per_completion() {
        let (reverted, written_over) = (flowchart_costs(12, true), flowchart_costs(12, false));
        eprintln!(
            "12-step flowchart (23 creations), each shown once, a person writing between: reverted and applied anew {reverted:?}, written over {written_over:?}"
        );
        assert!(reverted.updates >= 2 * 23, "{reverted:?}");
        assert_eq!(written_over.updates, 23, "{written_over:?}");
        assert!(
            written_over.update_bytes * 3 < reverted.update_bytes,
            "{written_over:?} against {reverted:?}"
        );
        assert!(
            written_over.encoded * 4 < reverted.encoded * 5,
            "{written_over:?} against {reverted:?}"
        );
    }

    #[test]
    fn written_over_keeps_the_renamed_id_and_moves_above_newer_shapes() {
        let doc = doc();
        rect(&doc, "box", 0.0, 0.0, 10.0, 10.0);
        let registry = Registry::canvas();
        let mut ctx = ActionCtx::new("f1");
        let mut t = Tentative::new(&doc, "f1");
        let shown =
            json!({"_type": "create", "shape": {"_type": "note", "shapeId": "box", "x": 1}});
        let done = json!({"_type": "create", "shape": {"_type": "note", "shapeId": "box", "x": 1, "text": "yes"}});
        let told = t
            .apply_tentative(&registry, &shown, &mut ctx)
            .map(|s| s.notes);
        assert!(told.as_ref().is_ok_and(|n| n.len() == 1), "{told:?}");
        // Another fairy's shape lands on top meanwhile.
        let mut other = ActionCtx::new("f2");
        let above =
            json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "z", "x": 9}});
        assert!(registry.apply(&doc, &above, &mut other).is_ok());
        let done = t
            .apply_complete(&registry, &done, &mut ctx)
            .map(|s| s.notes);
        assert_eq!(t.last_completion(), Some(Completion::WrittenOver));
        assert_eq!(done, told, "the same rename is told");
        let kept = get(&doc, "box-1");
        assert_eq!((kept.text(), kept.locked), (Some("yes"), false));
        assert!(
            kept.index > get(&doc, "z").index,
            "on top, as a fresh apply puts it"
        );
        assert!(
            read_shape(&doc.transact(), "box-2")
                .ok()
                .flatten()
                .is_none()
        );
    }

    #[test]
    fn another_shape_or_a_refused_complete_version_is_not_written_over() {
        let doc = doc();
        let registry = Registry::canvas();
        let mut ctx = ActionCtx::new("f1");
        let mut t = Tentative::new(&doc, "f1");
        let shown =
            json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "b", "x": 1}});
        // Another kind: reverted and applied anew.
        let ellipse =
            json!({"_type": "create", "shape": {"_type": "ellipse", "shapeId": "b", "x": 1}});
        assert!(t.apply_tentative(&registry, &shown, &mut ctx).is_ok());
        assert!(t.apply_complete(&registry, &ellipse, &mut ctx).is_ok());
        assert_eq!(t.last_completion(), Some(Completion::Reapplied));
        assert!(!get(&doc, "b").locked);
        // A complete version that does not parse: the shown one goes, nothing stays.
        let before = doc.transact().state_vector();
        let shown =
            json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "c", "x": 1}});
        let bad =
            json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "c", "x": "NaN"}});
        assert!(t.apply_tentative(&registry, &shown, &mut ctx).is_ok());
        assert!(t.apply_complete(&registry, &bad, &mut ctx).is_err());
        assert_eq!(t.last_completion(), Some(Completion::Reapplied));
        assert!(read_shape(&doc.transact(), "c").ok().flatten().is_none());
        assert!(!t.is_pending());
        assert!(ctx.preview.is_none());
        let after = doc.transact().state_vector();
        assert!(after != before, "the shown version came and went");
        // A person deleted the shown shape meanwhile: created anew.
        assert!(t.apply_tentative(&registry, &shown, &mut ctx).is_ok());
        crate::canvas::shape::delete_shape(&mut doc.transact_mut_with("client:9:alice"), "c");
        let done =
            json!({"_type": "create", "shape": {"_type": "rectangle", "shapeId": "c", "x": 3}});
        assert!(t.apply_complete(&registry, &done, &mut ctx).is_ok());
        assert_eq!(t.last_completion(), Some(Completion::Reapplied));
        assert_eq!(get(&doc, "c").x, 3.0);
    }

    #[test]
    fn commit_keeps_the_tentative_version_unlocked() {
        let doc = doc();
        let registry = Registry::canvas();
        let mut ctx = ActionCtx::new("f1");
        let mut t = Tentative::new(&doc, "f1");
        let v =
            json!({"_type": "create", "shape": {"_type": "note", "shapeId": "n", "text": "hi"}});
        assert!(t.apply_tentative(&registry, &v, &mut ctx).is_ok());
        t.commit();
        assert!(!get(&doc, "n").locked);
        assert!(!t.revert_tentative());
        assert_eq!(get(&doc, "n").text(), Some("hi"));
    }

    #[test]
    fn revert_keeps_a_concurrent_user_edit_of_another_key() {
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 10.0, 10.0);
        let registry = Registry::canvas();
        let mut ctx = ActionCtx::new("f1");
        let mut t = Tentative::new(&doc, "f1");
        let mv = json!({"_type": "move", "shapeId": "a", "x": 100, "y": 0});
        assert!(t.apply_tentative(&registry, &mv, &mut ctx).is_ok());
        user_move(&doc, "a", None, Some("red"));
        assert!(t.revert_tentative());
        let a = get(&doc, "a");
        assert_eq!((a.x, a.color.as_str()), (0.0, "red"));
    }

    #[test]
    fn revert_never_overwrites_a_user_write_of_the_same_key() {
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 10.0, 10.0);
        let registry = Registry::canvas();
        let mut ctx = ActionCtx::new("f1");
        let mut t = Tentative::new(&doc, "f1");
        let mv = json!({"_type": "move", "shapeId": "a", "x": 100, "y": 0});
        assert!(t.apply_tentative(&registry, &mv, &mut ctx).is_ok());
        user_move(&doc, "a", Some(42.0), None);
        t.revert_tentative();
        assert_eq!(get(&doc, "a").x, 42.0);
    }

    #[test]
    fn revert_of_a_delete_restores_the_shape_and_committed_work_is_never_undone() {
        let doc = doc();
        rect(&doc, "a", 3.0, 4.0, 10.0, 10.0);
        let registry = Registry::canvas();
        let mut ctx = ActionCtx::new("f1");
        let mut t = Tentative::new(&doc, "f1");
        let mv = json!({"_type": "move", "shapeId": "a", "x": 50, "y": 50});
        assert!(t.apply_complete(&registry, &mv, &mut ctx).is_ok());
        let del = json!({"_type": "delete", "shapeId": "a"});
        assert!(t.apply_tentative(&registry, &del, &mut ctx).is_ok());
        assert!(read_shape(&doc.transact(), "a").ok().flatten().is_none());
        assert!(t.revert_tentative());
        let a = get(&doc, "a");
        assert_eq!((a.x, a.y), (50.0, 50.0));
        assert!(!t.revert_tentative());
        assert_eq!(get(&doc, "a").x, 50.0);
    }

    #[test]
    fn another_fairys_writes_are_out_of_scope() {
        let doc = doc();
        rect(&doc, "a", 0.0, 0.0, 10.0, 10.0);
        let registry = Registry::canvas();
        let (mut c1, mut c2) = (ActionCtx::new("f1"), ActionCtx::new("f2"));
        let mut t1 = Tentative::new(&doc, "f1");
        let mut t2 = Tentative::new(&doc, "f2");
        let mv1 = json!({"_type": "move", "shapeId": "a", "x": 100, "y": 0});
        let lbl = json!({"_type": "label", "shapeId": "a", "text": "f2 was here"});
        assert!(t1.apply_tentative(&registry, &mv1, &mut c1).is_ok());
        assert!(t2.apply_complete(&registry, &lbl, &mut c2).is_ok());
        t1.revert_tentative();
        let a = get(&doc, "a");
        assert_eq!((a.x, a.text()), (0.0, Some("f2 was here")));
    }

    #[tokio::test]
    async fn a_document_that_never_gets_quiet_is_an_error_not_a_panic() {
        let doc = doc();
        let busy = doc.transact_mut();
        let made = Tentative::new_when_quiet(&doc, "f1", Duration::from_millis(50)).await;
        assert!(matches!(made, Err(TentativeError::Busy { attempts }) if attempts > 1));
        drop(busy);
        let made = Tentative::new_when_quiet(&doc, "f1", Duration::from_millis(50)).await;
        assert!(
            made.is_ok(),
            "a quiet document gets its undo manager at once"
        );
    }

    #[test]
    fn failed_versions_leave_nothing_behind() {
        let doc = doc();
        let registry = Registry::canvas();
        let mut ctx = ActionCtx::new("f1");
        let mut t = Tentative::new(&doc, "f1");
        let before = doc.transact().state_vector();
        let bad = json!({"_type": "move", "shapeId": "ghost", "x": 1, "y": 1});
        assert!(t.apply_tentative(&registry, &bad, &mut ctx).is_err());
        assert!(!t.is_pending());
        assert_eq!(doc.transact().state_vector(), before);
    }
}
