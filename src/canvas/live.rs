//! A live view of one document's shapes, shared by every reader of that document: the
//! current shapes, kept up to date by ONE deep observer of the `shapes` root, and a bounded
//! feed of their changes, each with its transaction's origin (docs/fairies.md "People and
//! fairies in one room").
//!
//! Fairies read the canvas for every prompt and track every change others make. Each fairy
//! walking the document, or observing it, costs the people of the room: a walk holds the
//! document's lock (their updates wait), and an observer per fairy runs inside every person's
//! transaction. Here the cost of an update is one read of the shapes it touched, however many
//! readers there are; readers take [`LiveShapes::shapes`] (pointers, under a short lock of this
//! view, never the document's) and drain the feed from their own cursor
//! ([`LiveShapes::read_since`]) when they need it.
//!
//! The feed keeps what its slowest reader has not read, up to [`MAX_BACKLOG`] entries; a reader
//! left further behind is told it lagged and must treat what it missed as unknown.
//!
//! One view per document ([`LiveShapes::of`]): it lives while a reader holds it, and stops
//! observing when the last one lets go. Owns no I/O; knows nothing of fairies.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use yrs::types::{Event, PathSegment};
use yrs::{DeepObservable, Doc, MapRef, Origin, Transact, TransactionMut};

use super::schema::SHAPES;
use super::shape::{Shape, list_shapes, read_shape};

/// Most feed entries kept for readers that have not read them.
pub const MAX_BACKLOG: usize = 65_536;

/// Feed entries beyond which the readers' cursors are checked to drop what all have read.
const TRIM_AT: usize = 1024;

/// One shape's change in one transaction.
#[derive(Debug, Clone)]
pub struct Change {
    /// The transaction's origin (`None`: a transaction without one).
    pub origin: Option<Origin>,
    /// The shape's id.
    pub id: Arc<str>,
    /// The shape before the transaction (`None`: it did not exist or was unreadable).
    pub before: Option<Arc<Shape>>,
    /// The shape after it (`None`: deleted or unreadable).
    pub after: Option<Arc<Shape>>,
}

/// What a reader got from [`LiveShapes::read_since`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// Every change since the cursor.
    Complete,
    /// Changes were dropped before the reader read them: only the later ones were given.
    Lagged,
}

#[derive(Default)]
struct View {
    shapes: HashMap<Arc<str>, Arc<Shape>>,
    /// Each page's z-order keys (`index`), with how many shapes hold each.
    z: HashMap<String, BTreeMap<String, u32>>,
    /// The feed; `feed[0]` has sequence number `first_seq`.
    feed: VecDeque<Change>,
    first_seq: u64,
    /// The readers' cursors (the next sequence number each will read).
    readers: Vec<Weak<AtomicU64>>,
}

impl View {
    /// Records `shape` as `id`'s current state (`None`: gone); returns the previous one.
    fn set(&mut self, id: &Arc<str>, shape: Option<Arc<Shape>>) -> Option<Arc<Shape>> {
        if let Some(new) = &shape {
            let keys = self.z.entry(new.page_id.clone()).or_default();
            *keys.entry(new.index.clone()).or_default() += 1;
        }
        let old = match shape {
            Some(new) => self.shapes.insert(id.clone(), new),
            None => self.shapes.remove(id),
        };
        if let Some(old) = &old
            && let Some(keys) = self.z.get_mut(&old.page_id)
            && let Some(n) = keys.get_mut(&old.index)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                keys.remove(&old.index);
            }
        }
        old
    }

    fn next_seq(&self) -> u64 {
        self.first_seq + self.feed.len() as u64
    }

    fn push(&mut self, change: Change) {
        self.feed.push_back(change);
        if self.feed.len() < TRIM_AT {
            return;
        }
        self.readers.retain(|r| r.strong_count() > 0);
        let slowest = self
            .readers
            .iter()
            .filter_map(Weak::upgrade)
            .map(|c| c.load(Ordering::Acquire))
            .min()
            .unwrap_or_else(|| self.next_seq());
        let mut drop_upto = slowest.max(self.first_seq);
        // A reader that stopped reading must not make the feed grow without bound.
        let hard = self.next_seq().saturating_sub(MAX_BACKLOG as u64);
        drop_upto = drop_upto.max(hard);
        let n = usize::try_from(drop_upto - self.first_seq).unwrap_or(usize::MAX);
        self.feed.drain(..n.min(self.feed.len()));
        self.first_seq = drop_upto;
    }
}

/// The live view of one document's shapes (see the module documentation).
pub struct LiveShapes {
    doc: Doc,
    root: MapRef,
    key: Origin,
    view: Arc<Mutex<View>>,
}

fn lock(view: &Mutex<View>) -> MutexGuard<'_, View> {
    // Every update of the view leaves it consistent before the next statement can panic.
    view.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn touched_ids(txn: &TransactionMut<'_>, event: &Event) -> Vec<Arc<str>> {
    let path = event.path();
    match path.front() {
        Some(PathSegment::Key(id)) => vec![id.clone()],
        Some(PathSegment::Index(_)) => Vec::new(),
        None => match event {
            Event::Map(e) => e.keys(txn).keys().cloned().collect(),
            _ => Vec::new(),
        },
    }
}

/// The live views by document (its guid; a view holds its document, this list must not), so
/// that every reader of a document shares one.
static VIEWS: Mutex<Vec<(Arc<str>, Weak<LiveShapes>)>> = Mutex::new(Vec::new());

/// The live view of the document `guid` among `views`, if it is alive.
fn find(views: &[(Arc<str>, Weak<LiveShapes>)], guid: &Arc<str>) -> Option<Arc<LiveShapes>> {
    views
        .iter()
        .filter(|(g, _)| g == guid)
        .find_map(|(_, v)| v.upgrade())
}

static OBSERVER_IDS: AtomicU64 = AtomicU64::new(0);

impl LiveShapes {
    /// The live view of `doc`'s shapes, made (one walk of the document) if none is alive.
    /// Must not be called while a transaction is open on `doc` on this thread.
    pub fn of(doc: &Doc) -> Arc<LiveShapes> {
        let mut views = VIEWS.lock().unwrap_or_else(|p| p.into_inner());
        views.retain(|(_, v)| v.strong_count() > 0);
        let guid = doc.guid();
        if let Some(view) = find(&views, &guid) {
            return view;
        }
        let made = Arc::new(LiveShapes::new(doc));
        views.push((guid, Arc::downgrade(&made)));
        made
    }

    fn new(doc: &Doc) -> Self {
        let root = doc.get_or_insert_map(SHAPES);
        let n = OBSERVER_IDS.fetch_add(1, Ordering::Relaxed);
        let key = Origin::from(format!("live-shapes:{n}").as_str());
        let registering = Registration::begin(doc);
        let mut initial = View::default();
        for shape in list_shapes(&registering.readers) {
            initial.set(&Arc::from(shape.id.as_str()), Some(Arc::new(shape)));
        }
        let view = Arc::new(Mutex::new(initial));
        let observed = Arc::clone(&view);
        root.observe_deep(key.clone(), move |txn, events| {
            let mut ids: Vec<Arc<str>> = events.iter().flat_map(|e| touched_ids(txn, e)).collect();
            ids.sort();
            ids.dedup();
            let origin = txn.origin().cloned();
            let mut view = lock(&observed);
            for id in ids {
                let after = read_shape(txn, &id).ok().flatten().map(Arc::new);
                let before = view.set(&id, after.clone());
                if before.is_none() && after.is_none() {
                    continue;
                }
                view.push(Change {
                    origin: origin.clone(),
                    id,
                    before,
                    after,
                });
            }
        });
        drop(registering);
        LiveShapes {
            doc: doc.clone(),
            root,
            key,
            view,
        }
    }

    /// Every readable shape, without holding the document, in no particular order: readers
    /// pick a few and put those in z-order ([`crate::canvas::shape::paint_order`]), instead of
    /// sorting the whole canvas for every prompt.
    pub fn shapes(&self) -> Vec<Arc<Shape>> {
        lock(&self.view).shapes.values().cloned().collect()
    }

    /// The shape `id` now, if it exists and is readable.
    pub fn get(&self, id: &str) -> Option<Arc<Shape>> {
        lock(&self.view).shapes.get(id).cloned()
    }

    /// The `n` highest z-order keys on page `page_id`, highest first: a new shape goes above
    /// the first of them that parses, without reading the document.
    pub fn top_indexes(&self, page_id: &str, n: usize) -> Vec<String> {
        lock(&self.view)
            .z
            .get(page_id)
            .map(|keys| keys.keys().rev().take(n).cloned().collect())
            .unwrap_or_default()
    }

    /// The live view of `doc` if one is alive; never makes one (callable inside a
    /// transaction on `doc`).
    pub fn existing(doc: &Doc) -> Option<Arc<LiveShapes>> {
        find(
            &VIEWS.lock().unwrap_or_else(|p| p.into_inner()),
            &doc.guid(),
        )
    }

    /// A reader's cursor, at the end of the feed (it reads changes made from now on).
    pub fn subscribe(&self) -> Arc<AtomicU64> {
        let mut view = lock(&self.view);
        let cursor = Arc::new(AtomicU64::new(view.next_seq()));
        view.readers.push(Arc::downgrade(&cursor));
        cursor
    }

    /// Hands `each` the changes after `cursor`, in order, and moves the cursor past them.
    pub fn read_since(&self, cursor: &AtomicU64, mut each: impl FnMut(&Change)) -> Read {
        let view = lock(&self.view);
        let from = cursor.load(Ordering::Acquire);
        let read = if from < view.first_seq {
            Read::Lagged
        } else {
            Read::Complete
        };
        let skip = usize::try_from(from.saturating_sub(view.first_seq)).unwrap_or(usize::MAX);
        for change in view.feed.iter().skip(skip) {
            each(change);
        }
        cursor.store(view.next_seq(), Ordering::Release);
        read
    }
}

impl Drop for LiveShapes {
    fn drop(&mut self) {
        let _registering = Registration::begin(&self.doc);
        self.root.unobserve_deep(self.key.clone());
    }
}

/// Serialises observer (un)registration on a shared document. yrs 0.28 adds and removes a
/// branch's deep observers through a raw pointer without any lock, while a write transaction
/// on another thread may be iterating (and pruning) the same observer map: a data race that
/// corrupted memory when fairies of one room were dropped while peers wrote (seen in the fairy
/// integration tests). Holding a read transaction keeps writers (and so observer triggers)
/// out; the process-wide mutex keeps two registrations from racing each other.
struct Registration<'doc> {
    _serial: MutexGuard<'static, ()>,
    readers: yrs::Transaction<'doc>,
}

static REGISTRATION: Mutex<()> = Mutex::new(());

impl<'doc> Registration<'doc> {
    fn begin(doc: &'doc Doc) -> Self {
        let serial = REGISTRATION.lock().unwrap_or_else(|p| p.into_inner());
        Registration {
            _serial: serial,
            readers: doc.transact(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canvas::shape::{delete_shape, write_shape};

    fn rect(id: &str, x: f64) -> Shape {
        crate::canvas::shape::tests::rect(id, x, 0.0, 10.0, 10.0)
    }

    #[test]
    fn one_view_per_document_kept_up_to_date() {
        let doc = Doc::new();
        write_shape(&mut doc.transact_mut_with("client:1:a"), &rect("a", 1.0));
        let view = LiveShapes::of(&doc);
        assert!(Arc::ptr_eq(&view, &LiveShapes::of(&doc)));
        assert_eq!(view.shapes().len(), 1);
        let cursor = view.subscribe();
        write_shape(&mut doc.transact_mut_with("client:1:a"), &rect("b", 2.0));
        write_shape(&mut doc.transact_mut_with("fairy:f1"), &rect("a", 5.0));
        delete_shape(&mut doc.transact_mut_with("client:2:b"), "b");
        assert_eq!(view.shapes().len(), 1);
        assert_eq!(view.shapes()[0].x, 5.0);
        let mut seen = Vec::new();
        let read = view.read_since(&cursor, |c| {
            seen.push((
                c.id.to_string(),
                c.before.as_ref().map(|s| s.x),
                c.after.as_ref().map(|s| s.x),
            ))
        });
        assert_eq!(read, Read::Complete);
        assert_eq!(
            seen,
            vec![
                ("b".into(), None, Some(2.0)),
                ("a".into(), Some(1.0), Some(5.0)),
                ("b".into(), Some(2.0), None),
            ]
        );
        // Read once.
        assert_eq!(
            view.read_since(&cursor, |_| panic!("read twice")),
            Read::Complete
        );
    }

    #[test]
    fn keeps_each_pages_top_z_order_keys() {
        let doc = Doc::new();
        let view = LiveShapes::of(&doc);
        let mut a = rect("a", 0.0);
        a.index = "a1".into();
        let mut b = rect("b", 0.0);
        b.index = "a3".into();
        let mut c = rect("c", 0.0);
        c.index = "a2".into();
        c.page_id = "page:other".into();
        for s in [&a, &b, &c] {
            write_shape(&mut doc.transact_mut_with("client:1:a"), s);
        }
        assert_eq!(view.top_indexes("page:main", 8), vec!["a3", "a1"]);
        assert_eq!(view.top_indexes("page:other", 8), vec!["a2"]);
        delete_shape(&mut doc.transact_mut_with("client:1:a"), "b");
        assert_eq!(view.top_indexes("page:main", 8), vec!["a1"]);
        b.index = "a0".into();
        b.page_id = "page:other".into();
        write_shape(&mut doc.transact_mut_with("client:1:a"), &b);
        assert_eq!(view.top_indexes("page:other", 1), vec!["a2"]);
        assert!(LiveShapes::existing(&doc).is_some());
        assert!(LiveShapes::existing(&Doc::new()).is_none());
    }

    #[test]
    fn a_reader_left_behind_is_told_it_lagged() {
        let doc = Doc::new();
        let view = LiveShapes::of(&doc);
        let slow = view.subscribe();
        for i in 0..(MAX_BACKLOG + 2 * TRIM_AT) {
            write_shape(
                &mut doc.transact_mut_with("client:1:a"),
                &rect("a", i as f64),
            );
        }
        let mut last = None;
        let read = view.read_since(&slow, |c| last = c.after.as_ref().map(|s| s.x));
        assert_eq!(read, Read::Lagged);
        assert_eq!(last, Some((MAX_BACKLOG + 2 * TRIM_AT - 1) as f64));
        assert!(lock(&view.view).feed.len() <= MAX_BACKLOG + TRIM_AT);
    }

    #[test]
    fn the_feed_keeps_only_what_readers_have_not_read() {
        let doc = Doc::new();
        let view = LiveShapes::of(&doc);
        let reader = view.subscribe();
        for i in 0..(3 * TRIM_AT) {
            write_shape(
                &mut doc.transact_mut_with("client:1:a"),
                &rect("a", i as f64),
            );
            if i % 100 == 0 {
                view.read_since(&reader, |_| {});
            }
        }
        assert!(lock(&view.view).feed.len() <= TRIM_AT + 100);
        drop(reader);
        for i in 0..TRIM_AT {
            write_shape(
                &mut doc.transact_mut_with("client:1:a"),
                &rect("a", i as f64),
            );
        }
        assert!(lock(&view.view).feed.len() <= TRIM_AT);
    }
}
