//! A room's history as the HTTP routes serve it (docs/storage.md "History"): pages of attributed
//! entries, versions, and the restore and rollback that write a past back into the live room.
//!
//! Owns the [`History`] reader (its bound on concurrent replays, which run on blocking threads,
//! never on the async workers), the grouping of logged updates into [`Entry`]s, and the two
//! writes into a live room, each as one transaction under an origin of its own, logged with the
//! person who asked. Reads the store through the [`Store`] trait only; never touches HTTP.

use std::sync::Arc;

use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::BATCH_BYTES;
use super::replay::{Replay, ReplayError, Rollback, RollbackOutcome, ShapeChanges};
use crate::actor::{Actor, ActorKey, Via};
use crate::ids::RoomName;
use crate::room::{Room, RoomError};
use crate::store::{LogRow, Store, StoreError, StoredVersion};

/// Consecutive updates of one actor merge into one entry while each follows the previous one
/// within this many milliseconds.
pub const MERGE_WITHIN_MS: u64 = 5_000;
/// Most entries one history page holds.
pub const MAX_PAGE: usize = 200;
/// Most logged updates read from the store at a time.
const ROWS_PER_READ: usize = 1_024;
/// Replays running at once (each holds one private document of the room).
const MAX_REPLAYS: usize = 2;

/// Why a history read or write failed.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The room was never written.
    #[error("room '{0}' has no history")]
    RoomNotFound(String),
    /// The version asked for is past the room's last update or older than what is kept.
    #[error("the room has not reached update {0} or no longer keeps it")]
    NotKept(u64),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stored log could not be replayed.
    #[error("the room's stored log could not be replayed: {0}")]
    Replay(#[from] ReplayError),
    /// The room could not be written (closing, store failure).
    #[error("the room is not available: {0}")]
    Room(String),
    /// The write would take the room's document past `--max-doc-bytes`.
    #[error(transparent)]
    DocTooLarge(crate::room::vet::size::TooLarge),
}

impl From<RoomError> for HistoryError {
    fn from(error: RoomError) -> Self {
        match error {
            RoomError::DocTooLarge(too_large) => HistoryError::DocTooLarge(too_large),
            other => HistoryError::Room(other.to_string()),
        }
    }
}

/// One entry of a room's history: consecutive updates of one actor.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Its first update's sequence number.
    pub from_seq: u64,
    /// Its last update's sequence number.
    pub to_seq: u64,
    /// When its first update was logged (ms since the epoch; 0: before times were kept).
    pub at: u64,
    /// When its last update was logged.
    pub until: u64,
    /// Who wrote it.
    pub actor: Actor,
    /// What it did to shapes.
    pub shapes: ShapeChanges,
}

/// One page of history.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = HistoryPage)]
pub struct Page {
    /// Entries, oldest first.
    pub entries: Vec<Entry>,
    /// The `after` of the next page; `None` when this page reaches the room's last update.
    pub next: Option<u64>,
}

/// The history reader of a server.
pub struct History {
    store: Arc<dyn Store>,
    replays: Arc<Semaphore>,
}

/// One of the [`MAX_REPLAYS`] replay permits, counted in `fairyring_history_replays{reason="held"}`
/// until it is dropped.
pub struct ReplayPermit {
    _permit: OwnedSemaphorePermit,
}

impl Drop for ReplayPermit {
    fn drop(&mut self) {
        crate::metrics::global().history_replays("held").dec();
    }
}

impl std::fmt::Debug for ReplayPermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayPermit").finish_non_exhaustive()
    }
}

/// Counts a wait for a replay permit in `fairyring_history_replays{reason="waiting"}` while it
/// lasts (also when the waiting request is dropped).
struct Waiting;

impl Waiting {
    fn start() -> Waiting {
        crate::metrics::global().history_replays("waiting").inc();
        Waiting
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        crate::metrics::global().history_replays("waiting").dec();
    }
}

/// A replayed room held with its replay permit: what the caller builds from it (JSON, a Yjs
/// update, an image) is built, and sent, before the permit goes, so no more than
/// [`MAX_REPLAYS`] rooms or answers are held in memory by history reads at once.
pub struct Held {
    /// The replayed room.
    pub replay: Replay,
    permit: ReplayPermit,
}

impl Held {
    /// The permit alone (the replayed room dropped): what keeps an answer built from the room
    /// counted among the [`MAX_REPLAYS`] while it is sent.
    pub fn into_permit(self) -> ReplayPermit {
        self.permit
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held").finish_non_exhaustive()
    }
}

/// The actor of a logged row (the server when none was logged).
fn actor_of(row: &LogRow) -> Actor {
    row.actor
        .as_deref()
        .and_then(Actor::from_json)
        .unwrap_or_else(Actor::server)
}

/// Runs `work` on a blocking thread (the caller holds a replay permit).
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, HistoryError> + Send + 'static,
) -> Result<T, HistoryError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| HistoryError::Room(format!("replay task failed: {e}")))?
}

/// Checks that `rows` continue the log right after `cursor` (none missing: the log was not
/// pruned under the read) and returns the last one's sequence number.
fn continues(rows: &[LogRow], cursor: u64, seq: u64) -> Result<u64, HistoryError> {
    let consecutive = rows
        .iter()
        .enumerate()
        .all(|(i, row)| row.seq == cursor + 1 + i as u64);
    match rows.last() {
        Some(last) if consecutive => Ok(last.seq),
        _ => Err(HistoryError::NotKept(seq)),
    }
}

impl History {
    /// A reader of `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        History {
            store,
            replays: Arc::new(Semaphore::new(MAX_REPLAYS)),
        }
    }

    /// One of the [`MAX_REPLAYS`] replay permits, taken before anything of the log is read.
    async fn permit(&self) -> Result<ReplayPermit, HistoryError> {
        let waiting = Waiting::start();
        let permit = Arc::clone(&self.replays)
            .acquire_owned()
            .await
            .map_err(|_| HistoryError::Room("shutting down".into()))?;
        drop(waiting);
        crate::metrics::global().history_replays("held").inc();
        Ok(ReplayPermit { _permit: permit })
    }

    /// The sequence number history can start from at or after `after`: `after` itself, or just
    /// before the oldest kept update when older ones were dropped.
    async fn start(&self, room: &RoomName, after: u64) -> Result<Option<u64>, HistoryError> {
        let first = self.store.history_bounded(room, after, 1, 0).await?;
        Ok(first.first().map(|row| after.max(row.seq - 1)))
    }

    /// The room just after update `seq` (0: the empty room) replayed, read from the store in
    /// batches of at most [`BATCH_BYTES`] (the caller holds a replay permit).
    async fn replay_version(&self, room: &RoomName, seq: u64) -> Result<Replay, HistoryError> {
        if seq == 0 {
            return blocking(|| Ok(Replay::new(None, [])?)).await;
        }
        let base = self
            .store
            .version_base(room, seq)
            .await?
            .ok_or(HistoryError::NotKept(seq))?;
        let mut cursor = base.base.seq();
        let mut replay = blocking(move || Ok(version_of(&base)?)).await?;
        while cursor < seq {
            let want = usize::try_from(seq - cursor)
                .unwrap_or(usize::MAX)
                .min(ROWS_PER_READ);
            let rows = self
                .store
                .history_bounded(room, cursor, want, BATCH_BYTES)
                .await?;
            cursor = continues(&rows, cursor, seq)?;
            replay = blocking(move || {
                replay.extend(rows.iter().map(|row| row.update.as_ref()))?;
                Ok(replay)
            })
            .await?;
        }
        Ok(replay)
    }

    /// A page of at most `limit` entries after update `after`.
    pub async fn page(
        &self,
        room: &RoomName,
        after: u64,
        limit: usize,
    ) -> Result<Page, HistoryError> {
        let limit = limit.clamp(1, MAX_PAGE);
        let _permit = self.permit().await?;
        let Some(start) = self.start(room, after).await? else {
            return Ok(Page {
                entries: Vec::new(),
                next: None,
            });
        };
        let mut replay = self.replay_version(room, start).await?;
        let mut entries: Vec<Entry> = Vec::new();
        let mut cursor = start;
        loop {
            let rows = self
                .store
                .history_bounded(room, cursor, ROWS_PER_READ, BATCH_BYTES)
                .await?;
            let Some(last) = rows.last().map(|row| row.seq) else {
                return Ok(Page {
                    entries,
                    next: None,
                });
            };
            // The page so far goes with the rows: the first row may continue its last entry,
            // and the limit counts every entry of the page.
            let (back, grouped, outcome) = blocking(move || {
                let outcome = group(&mut replay, rows, &mut entries, limit);
                Ok((replay, entries, outcome))
            })
            .await?;
            (replay, entries) = (back, grouped);
            if let Grouped::Full = outcome? {
                let next = entries.last().map(|e| e.to_seq);
                return Ok(Page { entries, next });
            }
            cursor = last;
        }
    }

    /// The room now: its last logged update's number and its replay, held under a replay
    /// permit.
    pub async fn current(&self, room: &RoomName) -> Result<(u64, Held), HistoryError> {
        let permit = self.permit().await?;
        let seq = self.store.last_seq(room).await?;
        if seq == 0 {
            return Err(HistoryError::RoomNotFound(room.to_string()));
        }
        let replay = self.replay_version(room, seq).await?;
        Ok((seq, Held { replay, permit }))
    }

    /// The room just after update `seq`, held under a replay permit.
    pub async fn version(&self, room: &RoomName, seq: u64) -> Result<Held, HistoryError> {
        if seq == 0 {
            return Err(HistoryError::NotKept(0));
        }
        let permit = self.permit().await?;
        let replay = self.replay_version(room, seq).await?;
        Ok(Held { replay, permit })
    }

    /// `Ok` when the room was ever written, else [`HistoryError::RoomNotFound`] (checked before
    /// a restore or a rollback loads the room, which would write its schema).
    pub async fn written(&self, room: &RoomName) -> Result<(), HistoryError> {
        if self.store.last_seq(room).await? == 0 {
            return Err(HistoryError::RoomNotFound(room.to_string()));
        }
        Ok(())
    }

    /// The last update logged at or before `at` (ms since the epoch).
    pub async fn seq_at(&self, room: &RoomName, at: u64) -> Result<u64, HistoryError> {
        self.store
            .seq_at(room, at)
            .await?
            .ok_or(HistoryError::NotKept(0))
    }

    /// Makes the live room's shapes and pages what they were just after update `seq`, as one
    /// update logged with `by` (via `restore`); returns its sequence number (the room's last
    /// one when nothing differed).
    pub async fn restore(
        &self,
        room: &Arc<Room>,
        seq: u64,
        by: Actor,
    ) -> Result<u64, HistoryError> {
        if seq == 0 {
            return Err(HistoryError::NotKept(0));
        }
        let permit = self.permit().await?;
        let name = room.name().clone();
        let version = self.replay_version(&name, seq).await?;
        // Admitted by its net growth, measured on the room as logged: a restore that shrinks
        // the room (or keeps its size) is admitted even in a room over `--max-doc-bytes`.
        let now_seq = self.store.last_seq(&name).await?;
        let now = self.replay_version(&name, now_seq).await?;
        let (version, growth) = blocking(move || {
            let growth = super::replay::restore_growth(&now, &version)?;
            Ok((version, growth))
        })
        .await?;
        drop(permit);
        let seq = room
            .write_as(&by.via(Via::Restore), |txn| {
                room.admit_growth_in(txn, growth)?;
                Ok(super::replay::restore(txn, &version) > 0)
            })
            .await?;
        Ok(seq)
    }

    /// Takes back what `target` changed after update `since` (default: from the oldest kept
    /// update), keeping what others changed afterwards; one update logged with `by` (via
    /// `rollback`). Returns what was taken back and kept, and the update's sequence number.
    pub async fn rollback(
        &self,
        room: &Arc<Room>,
        target: ActorKey,
        since: Option<u64>,
        by: Actor,
    ) -> Result<(RollbackOutcome, u64), HistoryError> {
        let name = room.name().clone();
        let permit = self.permit().await?;
        let since = match since {
            Some(since) => since,
            None => self.start(&name, 0).await?.unwrap_or(0),
        };
        let base = self.replay_version(&name, since).await?;
        let mut rollback = blocking(move || Ok(Rollback::new(base, target))).await?;
        let mut cursor = since;
        loop {
            let rows = self
                .store
                .history_bounded(&name, cursor, ROWS_PER_READ, BATCH_BYTES)
                .await?;
            let Some(last) = rows.last().map(|r| r.seq) else {
                break;
            };
            rollback = blocking(move || {
                for row in &rows {
                    let actor = actor_of(row);
                    if actor.is_restore() {
                        rollback.record_restore(&row.update, &actor.key())?;
                    } else {
                        rollback.record(&row.update, &actor.key())?;
                    }
                }
                Ok(rollback)
            })
            .await?;
            cursor = last;
        }
        // Admitted by its net growth (docs/protocol.md "Document size"): taking back what an
        // actor added shrinks the room and is always admitted, which is how a room at its cap
        // is brought back; bringing back what an actor deleted counts what it brings back.
        let (rollback, growth) = blocking(move || {
            let growth = rollback.growth()?;
            Ok((rollback, growth))
        })
        .await?;
        drop(permit);
        let mut outcome = RollbackOutcome::default();
        let seq = room
            .write_as(&by.via(Via::Rollback), |txn| {
                room.admit_growth_in(txn, growth)?;
                outcome = rollback.apply(txn);
                Ok(outcome.reverted > 0)
            })
            .await?;
        Ok((outcome, seq))
    }
}

/// Replays a stored room in a private document.
/// A replay of a stored version: its base's states, then its updates.
pub fn version_of(stored: &StoredVersion) -> Result<Replay, ReplayError> {
    Replay::new(None, stored.all())
}

/// How far grouping went.
enum Grouped {
    /// A page's worth of entries is complete (one more entry was started after them).
    Full,
    /// Every row given was grouped.
    Read,
}

/// Groups `rows` into `entries` (continuing its last entry), replaying each; stops once
/// `limit` entries are complete, which shows when a row starts entry `limit + 1` (kept, so the
/// caller knows where the next page starts).
fn group(
    replay: &mut Replay,
    rows: Vec<LogRow>,
    entries: &mut Vec<Entry>,
    limit: usize,
) -> Result<Grouped, HistoryError> {
    for row in rows {
        let changes = replay.apply(&row.update)?;
        let actor = actor_of(&row);
        let at = row.at.unwrap_or(0);
        match entries.last_mut() {
            Some(entry)
                if entry.actor.same_author(&actor)
                    && at.saturating_sub(entry.until) <= MERGE_WITHIN_MS =>
            {
                entry.to_seq = row.seq;
                entry.until = entry.until.max(at);
                entry.shapes.merge(&changes);
            }
            _ => {
                if entries.len() == limit {
                    return Ok(Grouped::Full);
                }
                entries.push(Entry {
                    from_seq: row.seq,
                    to_seq: row.seq,
                    at,
                    until: at,
                    actor,
                    shapes: changes,
                });
            }
        }
    }
    Ok(Grouped::Read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Logged;
    use crate::store::memory::MemoryStore;
    use yrs::{Map, Transact, WriteTxn};

    /// Logs runs of updates, one run per (person, count), each update setting a shape's `x`.
    async fn log_runs(store: &MemoryStore, room: &RoomName, runs: &[(&str, usize)]) {
        let doc = yrs::Doc::new();
        for (who, count) in runs {
            let actor = Actor::user(*who, None).to_json();
            let mut logged = Vec::with_capacity(*count);
            for i in 0..*count {
                let update = {
                    let mut txn = doc.transact_mut();
                    let shapes = txn.get_or_insert_map("shapes");
                    shapes.insert(&mut txn, format!("{who}-shape"), i as f64);
                    txn.encode_update_v1()
                };
                logged.push(Logged {
                    update: update.into(),
                    actor: Some(actor.clone()),
                    at: 1_000,
                });
            }
            store.append_logged(room, logged).await.unwrap();
        }
    }

    /// Pages whose entries span more than one read of the log ([`ROWS_PER_READ`] rows) hold
    /// `limit` entries each, and the next page starts right after the last one: no entry is
    /// skipped.
    #[tokio::test]
    async fn pages_across_reads_of_the_log_skip_no_entry() {
        let store = Arc::new(MemoryStore::default());
        let room = RoomName::parse("paged").unwrap();
        let runs = [("a", 500), ("b", 1000), ("c", 10), ("d", 10), ("e", 10)];
        log_runs(&store, &room, &runs).await;
        let history = History::new(store);
        let mut seen = Vec::new();
        let mut after = 0;
        loop {
            let page = history.page(&room, after, 2).await.unwrap();
            assert!(page.entries.len() <= 2);
            for entry in &page.entries {
                assert_eq!(entry.from_seq, after + 1, "{entry:?}");
                after = entry.to_seq;
                seen.push((
                    entry.actor.id().to_owned(),
                    entry.to_seq - entry.from_seq + 1,
                ));
            }
            match page.next {
                Some(next) => assert_eq!(next, after),
                None => break,
            }
        }
        let expected: Vec<(String, u64)> = runs
            .iter()
            .map(|(who, n)| ((*who).to_owned(), *n as u64))
            .collect();
        assert_eq!(seen, expected);
    }
}
