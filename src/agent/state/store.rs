//! A fairy's private state in the store: its [`FairyState`] (mode, model-facing history, todo,
//! tasks, position) as JSON in the store's fairy-state table, keyed by room and fairy id, and
//! what each of its recent requests changed (its ledger's records) as one row per request in
//! the fairy-requests table (docs/storage.md "Fairy state"). Never written into the room
//! document, so peers never receive it and no writer can change it.
//!
//! Saved incrementally: the state's row holds everything but the ledger's records, and how
//! many there are (`ledgerRows`, from the ledger's `first` number on); each record has its own
//! row, `FAIRY/NUMBER`, written only when it changed since this saver last wrote it (mostly
//! the request that just ended). A request's end writes the small state row and one record,
//! not the whole ledger of [`crate::agent::apply::ledger::MAX_REQUESTS`] requests. Records
//! are written before the state row that counts them, and a forgotten record's row deleted
//! after it, so a crash between two writes leaves a state that loads. A state saved whole (the
//! layout before, or [`save`]'s) keeps its records inline and loads as it is.
//!
//! A node of a release before the rows reads only the state's row: a state saved in rows
//! loads there with an empty ledger, and what it saves then drops the rows' records for good.
//! For a rolling upgrade from such a release a saver writes states whole instead
//! ([`FairyStateLayout::Whole`], `--fairy-state-layout whole`; docs/operations.md
//! "Upgrades"), which both releases read completely.
//!
//! Owns the encoding, loading ([`load`]) and the per-fairy [`StateSaver`]: the runtime hands it
//! each new state without waiting (its calls are synchronous), and one background task writes
//! the latest one durably, coalescing states that arrive while a write is in flight (one slot:
//! bounded by construction). [`StateSync`] lets a reader wait until what was handed over is
//! stored. Talks to the store only through the [`Store`] trait; knows nothing of documents.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::agent::apply::ledger::{MAX_REQUESTS, RequestRecord};
use crate::agent::state::FairyState;
use crate::config::FairyStateLayout;
use crate::ids::FairyId;
use crate::ids::RoomName;
use crate::store::{Store, StoreError};

/// The stored form of a state saved whole, its records inline (JSON).
pub fn encode(state: &FairyState) -> Result<Bytes, serde_json::Error> {
    serde_json::to_vec(state).map(Bytes::from)
}

/// A state in its incremental stored form: the state's row and its records' rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// The state without its ledger's records, with `"ledgerRows": N`.
    pub head: Bytes,
    /// Each record's number and JSON, oldest first.
    pub records: Vec<(u64, Bytes)>,
    /// The number of the oldest record (the ledger's `first`).
    pub first: u64,
}

/// `state` in the incremental form ([`Split`]). The records are lent out of `state` while
/// its head is written, and put back.
pub fn encode_split(state: &mut FairyState) -> Result<Split, serde_json::Error> {
    let records = std::mem::take(&mut state.requests.records);
    let head = serde_json::to_vec(&*state);
    state.requests.records = records;
    let mut head = head?;
    // A state is a non-empty JSON object: its closing brace gives way to the count.
    if head.last() == Some(&b'}') {
        head.pop();
        let count = state.requests.records.len();
        head.extend_from_slice(format!(",\"ledgerRows\":{count}}}").as_bytes());
    }
    let first = state.requests.first;
    let records = state
        .requests
        .records
        .iter()
        .zip(first..)
        .map(|(record, number)| Ok((number, Bytes::from(serde_json::to_vec(record)?))))
        .collect::<Result<_, serde_json::Error>>()?;
    Ok(Split {
        head: Bytes::from(head),
        records,
        first,
    })
}

/// What the state's row says of its layout.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Layout {
    /// Records stored in rows of their own (from the ledger's `first` on); absent: inline.
    #[serde(default)]
    ledger_rows: Option<u64>,
}

/// A state's row: the state, and how many of its records have rows of their own (`None`: the
/// records are inline, the layout of a state saved whole); `None` (logged) when it does not
/// parse.
pub fn decode(fairy: &FairyId, bytes: &[u8]) -> Option<(FairyState, Option<u64>)> {
    let parsed = serde_json::from_slice::<FairyState>(bytes)
        .and_then(|state| Ok((state, serde_json::from_slice::<Layout>(bytes)?.ledger_rows)));
    match parsed {
        Ok(read) => Some(read),
        Err(error) => {
            tracing::warn!(%fairy, %error, "stored fairy state unreadable; starting afresh");
            None
        }
    }
}

/// The fairy's stored state, if any (and readable), its ledger's records read from their rows
/// when it was saved incrementally (a missing or unreadable record is left out, logged).
pub async fn load(
    store: &dyn Store,
    room: &RoomName,
    fairy: &FairyId,
) -> Result<Option<FairyState>, StoreError> {
    let side = store.side();
    let Some(bytes) = side.load_fairy_state(room, fairy.as_str()).await? else {
        return Ok(None);
    };
    let Some((mut state, rows)) = decode(fairy, &bytes) else {
        return Ok(None);
    };
    let Some(rows) = rows else {
        return Ok(Some(state));
    };
    let first = state.requests.first;
    let rows = rows.min(MAX_REQUESTS as u64);
    state.requests.records.clear();
    for number in first..first.saturating_add(rows) {
        let stored = side
            .load_fairy_request(room, fairy.as_str(), number)
            .await?;
        match stored.map(|b| serde_json::from_slice::<RequestRecord>(&b)) {
            Some(Ok(record)) => state.requests.records.push_back(record),
            Some(Err(error)) => {
                tracing::warn!(%fairy, number, %error, "stored request record unreadable; left out");
            }
            None => tracing::warn!(%fairy, number, "stored request record missing; left out"),
        }
    }
    Ok(Some(state))
}

/// Stores `state` now, whole (waiting for it to be durable): for a new fairy, before it is
/// visible.
pub async fn save(
    store: &dyn Store,
    room: &RoomName,
    fairy: &FairyId,
    state: &FairyState,
) -> Result<(), StoreError> {
    let bytes = encode(state).map_err(|e| StoreError::Encoding(e.to_string()))?;
    store
        .side()
        .save_fairy_state(room, fairy.as_str(), bytes)
        .await
}

/// What the saver writes next.
enum Write {
    Save(Split),
    /// The state whole ([`FairyStateLayout::Whole`]): its bytes.
    Whole(Bytes),
    Delete,
}

#[derive(Default)]
struct Slot {
    /// The write not started yet (a newer one replaces it).
    next: Option<Write>,
    /// Version of the latest write handed over.
    requested: u64,
    /// No more writes: the task ends once `next` is done.
    closed: bool,
}

struct Shared {
    slot: Mutex<Slot>,
    wake: Notify,
    /// Version of the latest write carried out (stored, or given up after an error).
    done: watch::Sender<u64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn hand_over(&self, write: Write) {
        {
            let mut slot = self.lock();
            if slot.closed {
                return;
            }
            slot.requested += 1;
            slot.next = Some(write);
        }
        self.wake.notify_one();
    }

    fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_one();
    }
}

/// One fairy's background writer of its private state.
pub struct StateSaver {
    shared: Arc<Shared>,
    fairy: FairyId,
    task: Option<JoinHandle<()>>,
    layout: FairyStateLayout,
}

impl StateSaver {
    /// Starts the writer for `fairy` of `room` (needs a Tokio runtime).
    pub fn spawn(store: Arc<dyn Store>, room: RoomName, fairy: FairyId) -> Self {
        Self::spawn_fenced(store, room, fairy, None)
    }

    /// [`StateSaver::spawn`] for a host holding fencing token `fence` of the fairy
    /// (docs/scaling.md "Fencing"): once another node took the fairy over, what this one still
    /// saves is refused by the store.
    pub fn spawn_fenced(
        store: Arc<dyn Store>,
        room: RoomName,
        fairy: FairyId,
        fence: Option<u64>,
    ) -> Self {
        let shared = Arc::new(Shared {
            slot: Mutex::new(Slot::default()),
            wake: Notify::new(),
            done: watch::channel(0).0,
        });
        let task = tokio::spawn(write_loop(
            shared.clone(),
            store,
            Target {
                room,
                fairy: fairy.clone(),
                fence,
            },
        ));
        StateSaver {
            shared,
            fairy,
            task: Some(task),
            layout: FairyStateLayout::Rows,
        }
    }

    /// This saver writing states in `layout` from now on (the default: rows).
    #[must_use]
    pub fn with_layout(mut self, layout: FairyStateLayout) -> Self {
        self.layout = layout;
        self
    }

    /// Hands over a new state; it replaces one not written yet. Its ledger's records are lent
    /// out while it is encoded, and put back.
    pub fn save(&self, state: &mut FairyState) {
        let write = match self.layout {
            FairyStateLayout::Rows => encode_split(state).map(Write::Save),
            FairyStateLayout::Whole => encode(state).map(Write::Whole),
        };
        match write {
            Ok(write) => self.shared.hand_over(write),
            Err(error) => tracing::error!(fairy = %self.fairy, %error, "fairy state not saved"),
        }
    }

    /// Deletes the stored state (the fairy was dismissed); replaces a save not written yet.
    pub fn delete(&self) {
        self.shared.hand_over(Write::Delete);
    }

    /// A handle to wait for the writes handed over so far.
    pub fn sync(&self) -> StateSync {
        StateSync {
            shared: self.shared.clone(),
        }
    }

    /// Writes what is pending, then stops the writer. Later saves are not written.
    pub async fn close(&mut self) {
        self.shared.close();
        if let Some(task) = self.task.take()
            && let Err(error) = task.await
        {
            tracing::error!(fairy = %self.fairy, %error, "fairy state writer failed");
        }
    }
}

impl Drop for StateSaver {
    fn drop(&mut self) {
        // The task writes what is pending and ends on its own.
        self.shared.close();
    }
}

/// Waits for a fairy's handed-over writes (for reads that must see the latest state).
#[derive(Clone)]
pub struct StateSync {
    shared: Arc<Shared>,
}

impl StateSync {
    /// Resolves once every write handed over before this call was carried out.
    pub async fn caught_up(&self) {
        let wanted = self.shared.lock().requested;
        let mut done = self.shared.done.subscribe();
        // The sender lives in `shared`, which we hold: this cannot fail.
        let _ = done.wait_for(|v| *v >= wanted).await;
    }
}

/// Whose state a saver writes, and the fencing token it writes under.
struct Target {
    room: RoomName,
    fairy: FairyId,
    fence: Option<u64>,
}

/// What one record's row holds, as far as the saver needs to know: its length and hash.
type Written = (usize, u64);

fn fingerprint(bytes: &[u8]) -> Written {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    (bytes.len(), hasher.finish())
}

/// What a saver knows it stored: each record row it wrote, by number, and whether it knows
/// every row there is (after its first complete save; before it, rows a previous host wrote
/// may be left below the ledger's `first`).
#[derive(Default)]
struct Stored {
    rows: HashMap<u64, Written>,
    complete: bool,
}

impl Target {
    /// Writes `split`: the records whose rows differ from what this saver last wrote, then the
    /// state's row, then deletes the rows of records the ledger forgot.
    async fn save(
        &self,
        store: &dyn Store,
        split: Split,
        stored: &mut Stored,
    ) -> Result<(), StoreError> {
        let side = store.side();
        let fairy = self.fairy.as_str();
        let mut wrote = Vec::new();
        for (number, bytes) in split.records {
            let print = fingerprint(&bytes);
            if stored.rows.get(&number) == Some(&print) {
                continue;
            }
            side.save_fairy_request(&self.room, fairy, number, bytes, self.fence)
                .await?;
            wrote.push((number, print));
        }
        stored.rows.extend(wrote);
        self.write_state_row(store, split.head).await?;
        let mut forgotten: Vec<u64> = stored
            .rows
            .keys()
            .copied()
            .filter(|number| *number < split.first)
            .collect();
        if !stored.complete {
            // Rows a previous host wrote, forgotten since it stopped (at most a ledger's worth).
            forgotten.extend(split.first.saturating_sub(MAX_REQUESTS as u64)..split.first);
            forgotten.sort_unstable();
            forgotten.dedup();
        }
        for number in forgotten {
            side.delete_fairy_request(&self.room, fairy, number).await?;
            stored.rows.remove(&number);
        }
        stored.complete = true;
        Ok(())
    }

    /// Writes the state's own row, fenced when this host holds a fence.
    async fn write_state_row(&self, store: &dyn Store, bytes: Bytes) -> Result<(), StoreError> {
        let side = store.side();
        match self.fence {
            Some(fence) => {
                side.save_fairy_state_fenced(&self.room, self.fairy.as_str(), bytes, fence)
                    .await
            }
            None => {
                side.save_fairy_state(&self.room, self.fairy.as_str(), bytes)
                    .await
            }
        }
    }

    /// Writes a state whole (its records inline): the state's row, then, the first time, the
    /// record rows the row it replaced counted (a host saving in rows wrote them), which no
    /// state counts any more.
    async fn save_whole(
        &self,
        store: &dyn Store,
        bytes: Bytes,
        stored: &mut Stored,
    ) -> Result<(), StoreError> {
        let side = store.side();
        let fairy = self.fairy.as_str();
        let mut numbers: Vec<u64> = stored.rows.keys().copied().collect();
        if !stored.complete {
            numbers.extend(self.counted_rows(store).await?);
        }
        self.write_state_row(store, bytes).await?;
        numbers.sort_unstable();
        numbers.dedup();
        for number in numbers {
            side.delete_fairy_request(&self.room, fairy, number).await?;
        }
        *stored = Stored {
            rows: HashMap::new(),
            complete: true,
        };
        Ok(())
    }

    /// The numbers of the record rows the stored state's row counts, with those a host may
    /// have left below them (none for a state saved whole, or none stored).
    async fn counted_rows(&self, store: &dyn Store) -> Result<Vec<u64>, StoreError> {
        let stored = store
            .side()
            .load_fairy_state(&self.room, self.fairy.as_str())
            .await?;
        if let Some(bytes) = stored
            && let Some((state, Some(rows))) = decode(&self.fairy, &bytes)
        {
            let first = state.requests.first;
            return Ok((first.saturating_sub(MAX_REQUESTS as u64)
                ..first.saturating_add(rows.min(MAX_REQUESTS as u64)))
                .collect());
        }
        Ok(Vec::new())
    }

    /// Deletes the state's row and every record row it counts or this saver wrote.
    async fn delete(&self, store: &dyn Store, stored: &mut Stored) -> Result<(), StoreError> {
        let side = store.side();
        let fairy = self.fairy.as_str();
        let mut numbers: Vec<u64> = stored.rows.keys().copied().collect();
        numbers.extend(self.counted_rows(store).await?);
        numbers.sort_unstable();
        numbers.dedup();
        side.delete_fairy_state(&self.room, fairy).await?;
        for number in numbers {
            side.delete_fairy_request(&self.room, fairy, number).await?;
        }
        *stored = Stored::default();
        Ok(())
    }
}

async fn write_loop(shared: Arc<Shared>, store: Arc<dyn Store>, target: Target) {
    let mut stored = Stored::default();
    loop {
        let (next, version, closed) = {
            let mut slot = shared.lock();
            (slot.next.take(), slot.requested, slot.closed)
        };
        let Some(write) = next else {
            if closed {
                return;
            }
            shared.wake.notified().await;
            continue;
        };
        let written = match write {
            Write::Save(split) => target.save(store.as_ref(), split, &mut stored).await,
            Write::Whole(bytes) => target.save_whole(store.as_ref(), bytes, &mut stored).await,
            Write::Delete => target.delete(store.as_ref(), &mut stored).await,
        };
        let (room, fairy) = (&target.room, &target.fairy);
        if let Err(StoreError::Fenced { .. }) = written {
            crate::metrics::global().count_fenced(crate::metrics::FencedWrite::State);
            tracing::warn!(room = %room, %fairy, "fairy state not stored: another node hosts the fairy now");
        } else if let Err(error) = written {
            // The next state handed over is written in full; nothing is half-stored.
            stored = Stored::default();
            tracing::error!(room = %room, %fairy, %error, "fairy state not stored");
        }
        shared.done.send_replace(version);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::modes::Mode;
    use crate::store::memory::MemoryStore;

    fn ids() -> (RoomName, FairyId) {
        (
            RoomName::parse("saver").unwrap_or_else(|e| panic!("{e}")),
            FairyId::parse("f-1").unwrap_or_else(|e| panic!("{e}")),
        )
    }

    #[tokio::test]
    async fn the_latest_state_is_stored_and_a_delete_removes_it() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let (room, fairy) = ids();
        let mut saver = StateSaver::spawn(store.clone(), room.clone(), fairy.clone());
        let sync = saver.sync();
        for mode in [Mode::Soloing, Mode::StandingBy, Mode::WorkingSolo] {
            saver.save(&mut FairyState {
                mode,
                ..FairyState::default()
            });
        }
        sync.caught_up().await;
        let stored = load(store.as_ref(), &room, &fairy).await;
        assert_eq!(
            stored.ok().flatten().map(|s| s.mode),
            Some(Mode::WorkingSolo)
        );
        saver.save(&mut FairyState::default());
        saver.delete();
        saver.close().await;
        assert!(matches!(
            load(store.as_ref(), &room, &fairy).await,
            Ok(None)
        ));
        // After close nothing is written, and waiting for it does not hang.
        saver.save(&mut FairyState::default());
        sync.caught_up().await;
        assert!(matches!(
            load(store.as_ref(), &room, &fairy).await,
            Ok(None)
        ));
    }

    #[tokio::test]
    async fn closing_writes_what_is_pending() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let (room, fairy) = ids();
        let mut saver = StateSaver::spawn(store.clone(), room.clone(), fairy.clone());
        saver.save(&mut FairyState {
            working: true,
            ..FairyState::default()
        });
        saver.close().await;
        let stored = load(store.as_ref(), &room, &fairy).await;
        assert_eq!(stored.ok().flatten().map(|s| s.working), Some(true));
    }

    /// A ledger of `n` requests, each having created one shape.
    fn ledger_of(n: usize) -> crate::agent::apply::ledger::RequestLedger {
        use crate::agent::apply::ledger::{RequestLedger, ShapeDiff};
        use crate::ids::RequestId;
        let mut ledger = RequestLedger::default();
        for k in 0..n {
            let id = RequestId::parse(&format!("r-{k}")).unwrap_or_else(|e| panic!("{e}"));
            ledger.open(&[id], "a box");
            let diff = ShapeDiff {
                exists: Some((false, true)),
                props: vec![(
                    "x".into(),
                    crate::canvas::shape::Prop::Absent,
                    crate::canvas::shape::Prop::Num(k as f64),
                )],
            };
            ledger.observe(&format!("s{k}"), &diff, true);
            ledger.close();
        }
        ledger
    }

    fn row(store: &MemoryStore, number: u64) -> Option<Bytes> {
        let (room, fairy) = ids();
        futures_util::FutureExt::now_or_never(store.side().load_fairy_request(
            &room,
            fairy.as_str(),
            number,
        ))
        .and_then(Result::ok)
        .flatten()
    }

    #[tokio::test]
    async fn a_state_is_saved_a_row_per_request_and_only_changed_rows_are_written_again() {
        let memory = Arc::new(MemoryStore::default());
        let store: Arc<dyn Store> = memory.clone();
        let (room, fairy) = ids();
        let mut saver = StateSaver::spawn(store.clone(), room.clone(), fairy.clone());
        let sync = saver.sync();
        let mut state = FairyState {
            requests: ledger_of(3),
            ..FairyState::default()
        };
        saver.save(&mut state);
        assert_eq!(state.requests.records.len(), 3, "the records are put back");
        sync.caught_up().await;
        let head = store.side().load_fairy_state(&room, fairy.as_str()).await;
        let head = head.ok().flatten().unwrap_or_default();
        let head = String::from_utf8_lossy(&head).into_owned();
        assert!(head.ends_with(",\"ledgerRows\":3}"), "{head}");
        assert!(!head.contains("r-0"), "no record inline: {head}");
        assert!(row(&memory, 2).is_some() && row(&memory, 3).is_none());
        // A row this saver wrote and that did not change is not written again (the mark
        // stays); the request that changed is.
        let marked = Bytes::from_static(b"marked");
        let put = store
            .side()
            .save_fairy_request(&room, fairy.as_str(), 0, marked.clone(), None);
        assert!(put.await.is_ok());
        state.requests.open(&[], "more");
        let diff = crate::agent::apply::ledger::ShapeDiff {
            exists: Some((false, true)),
            props: Vec::new(),
        };
        state.requests.observe("s9", &diff, true);
        saver.save(&mut state);
        sync.caught_up().await;
        assert_eq!(row(&memory, 0), Some(marked));
        assert!(row(&memory, 3).is_some_and(|b| b.windows(2).any(|w| w == b"s9")));
        let loaded = load(store.as_ref(), &room, &fairy).await.ok().flatten();
        let loaded = loaded.map(|s| s.requests.records.len());
        assert_eq!(loaded, Some(3), "row 0 is unreadable now: left out");
        // Records the ledger forgets lose their rows.
        for _ in 0..MAX_REQUESTS {
            state.requests.open(&[], "again");
        }
        saver.save(&mut state);
        sync.caught_up().await;
        let first = state.requests.first;
        assert_eq!(first, 4);
        assert!((0..first).all(|n| row(&memory, n).is_none()));
        let loaded = load(store.as_ref(), &room, &fairy).await.ok().flatten();
        assert_eq!(loaded.map(|s| s.requests), Some(state.requests.clone()));
        // A dismissed fairy leaves no row behind.
        saver.delete();
        saver.close().await;
        assert!((0..first + MAX_REQUESTS as u64).all(|n| row(&memory, n).is_none()));
        assert!(matches!(
            load(store.as_ref(), &room, &fairy).await,
            Ok(None)
        ));
    }

    #[tokio::test]
    async fn a_new_saver_deletes_the_rows_a_previous_host_left_below_the_ledger() {
        let memory = Arc::new(MemoryStore::default());
        let store: Arc<dyn Store> = memory.clone();
        let (room, fairy) = ids();
        let mut state = FairyState {
            requests: ledger_of(2),
            ..FairyState::default()
        };
        let mut saver = StateSaver::spawn(store.clone(), room.clone(), fairy.clone());
        saver.save(&mut state);
        saver.close().await;
        // The next host forgets the oldest record before its first save.
        state.requests = ledger_of(MAX_REQUESTS + 1);
        let mut saver = StateSaver::spawn(store.clone(), room.clone(), fairy.clone());
        saver.save(&mut state);
        saver.close().await;
        assert!(row(&memory, 0).is_none());
        assert!(row(&memory, MAX_REQUESTS as u64).is_some());
        let loaded = load(store.as_ref(), &room, &fairy).await.ok().flatten();
        assert_eq!(loaded.map(|s| s.requests), Some(state.requests));
    }

    /// A state stored in the layout before rows per request (its whole ledger inline, as
    /// `tests/fixtures/state/inline-ledger.json` keeps one) loads as it was, and the next save
    /// moves its records into rows.
    #[tokio::test]
    async fn a_state_saved_whole_in_the_layout_before_still_loads() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let (room, fairy) = ids();
        let fixture = include_bytes!("../../../tests/fixtures/state/inline-ledger.json");
        let put = store
            .side()
            .save_fairy_state(&room, fairy.as_str(), Bytes::from_static(fixture));
        assert!(put.await.is_ok());
        let loaded = load(store.as_ref(), &room, &fairy).await.ok().flatten();
        let Some(mut state) = loaded else {
            panic!("the fixture does not load");
        };
        assert_eq!(state.history.len(), 3);
        assert_eq!(state.requests.first, 0);
        let records = &state.requests.records;
        assert_eq!(records.len(), 2);
        assert!(records[0].shapes.contains_key("walls"));
        assert!(records[1].rejected.is_some());
        assert!(records[1].shapes["walls"].props["color"].changed_after);
        let mut saver = StateSaver::spawn(store.clone(), room.clone(), fairy.clone());
        let before = state.clone();
        saver.save(&mut state);
        saver.close().await;
        let again = load(store.as_ref(), &room, &fairy).await.ok().flatten();
        assert_eq!(again, Some(before));
    }

    /// What a node of the release before the rows (7a81d19) makes of a state's row: its
    /// `decode` parsed the row as a `FairyState`, whose only field missing there is the
    /// ledger's `first`, and ignored what it did not know (`ledgerRows`, `first`).
    fn previous_release_reads(bytes: &[u8]) -> FairyState {
        let mut state: FairyState = serde_json::from_slice(bytes)
            .unwrap_or_else(|e| panic!("the previous release refuses it ({e}): it starts afresh"));
        state.requests.first = 0;
        state
    }

    async fn head(store: &dyn Store) -> Bytes {
        let (room, fairy) = ids();
        let head = store.side().load_fairy_state(&room, fairy.as_str()).await;
        head.ok().flatten().unwrap_or_default()
    }

    /// Rolling upgrade (docs/operations.md "Upgrades"): a state saved in rows reaches a node
    /// of the previous release without its ledger, and what that node saves then loses the
    /// records here too (the rows are not read again); a state saved whole reaches it whole.
    #[tokio::test]
    async fn the_previous_release_reads_whole_states_complete_and_rows_without_ledger() {
        let memory = Arc::new(MemoryStore::default());
        let store: Arc<dyn Store> = memory.clone();
        let (room, fairy) = ids();
        let mut state = FairyState {
            requests: ledger_of(MAX_REQUESTS + 2),
            ..FairyState::default()
        };
        assert_eq!(state.requests.first, 2);
        let mut saver = StateSaver::spawn(store.clone(), room.clone(), fairy.clone());
        saver.save(&mut state);
        saver.close().await;
        let old = previous_release_reads(&head(store.as_ref()).await);
        assert!(old.requests.records.is_empty(), "rows: no ledger there");
        // What the old node saves of it (whole, no `first`) is what loads here afterwards:
        // its rows are not read again, and a later save in rows numbers them anew.
        let put = store.side().save_fairy_state(
            &room,
            fairy.as_str(),
            encode(&old).unwrap_or_else(|e| panic!("{e}")),
        );
        assert!(put.await.is_ok());
        let loaded = load(store.as_ref(), &room, &fairy).await.ok().flatten();
        assert_eq!(loaded.map(|s| s.requests.records.len()), Some(0));

        // Whole: the previous release reads every record, and the rows the state's row
        // counted before are deleted.
        let mut saver = StateSaver::spawn(store.clone(), room.clone(), fairy.clone());
        saver.save(&mut state);
        saver.close().await;
        assert!(row(&memory, 2).is_some());
        let mut saver = StateSaver::spawn(store.clone(), room.clone(), fairy.clone())
            .with_layout(FairyStateLayout::Whole);
        saver.save(&mut state);
        saver.close().await;
        let whole = head(store.as_ref()).await;
        assert!(!String::from_utf8_lossy(&whole).contains("ledgerRows"));
        let old = previous_release_reads(&whole);
        assert_eq!(old.requests.records, state.requests.records);
        assert!(
            (0..2 * MAX_REQUESTS as u64 + 2).all(|n| row(&memory, n).is_none()),
            "no row left behind"
        );
        let loaded = load(store.as_ref(), &room, &fairy).await.ok().flatten();
        assert_eq!(loaded.as_ref(), Some(&state), "this release reads it whole");
        // And a saver in rows takes it over from there.
        let mut saver = StateSaver::spawn(store.clone(), room.clone(), fairy.clone());
        saver.save(&mut state);
        saver.close().await;
        let loaded = load(store.as_ref(), &room, &fairy).await.ok().flatten();
        assert_eq!(loaded, Some(state));
    }

    #[tokio::test]
    async fn unreadable_stored_state_loads_as_none() {
        let store = MemoryStore::default();
        let (room, fairy) = ids();
        store
            .side()
            .save_fairy_state(&room, fairy.as_str(), Bytes::from_static(b"not json"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(load(&store, &room, &fairy).await, Ok(None)));
    }
}
