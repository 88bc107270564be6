//! The committer of one room: a task that makes queued updates durable (group commit), then
//! delivers them (and, in a scale-out deployment, publishes them to the other nodes), compacts
//! the log, sweeps awareness timeouts, applies what the other nodes publish, catches up from
//! the store when some of it is missing, and unloads the room when idle.
//!
//! People first (docs/fairies.md "People and fairies in one room"): a peer's update, or a
//! reply to a peer, is committed as soon as the committer is free, and another node's update
//! (already durable) delivered as soon as it arrives; in a busy room, at most once per
//! [`coalesce_gap`] after the previous commit began, so that what arrived meanwhile goes out
//! as one frame per peer. What the server and its
//! fairies write alone (streamed versions, chat, tasks) waits for the room's [`TICK`] and then
//! goes out as one commit and one frame per peer, however many fairies wrote; it is committed
//! earlier, together, when a peer's update arrives behind it. The fairies' awareness states are
//! sent the same way, at most once a tick, all changed states in one message.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::pending::Pending;
use super::remote::SeqTracker;
use super::{Failure, Room, RoomError};
use crate::pubsub::{Envelope, Inbound, Subscription};
use crate::store::{Fence, Logged, StoreError};

/// How long a gap in the sequence numbers heard from other nodes may last before the room
/// catches up from the store (messages of two nodes may arrive out of order).
const GAP_GRACE: Duration = Duration::from_millis(150);
/// How often a room of a scale-out deployment checks the store for updates it never heard
/// of (the last message before a silent spell may have been lost).
const RECONCILE_EVERY: Duration = Duration::from_secs(3);
/// Delay before a failed catch-up is tried again.
const CATCHUP_RETRY: Duration = Duration::from_secs(1);

/// Delays between attempts to append to the store before the room gives up.
const STORE_RETRIES: [Duration; 3] = [
    Duration::from_millis(50),
    Duration::from_millis(250),
    Duration::from_secs(1),
];

/// How long what the server and its fairies write alone may wait to be committed and sent
/// together (and how often their awareness goes out).
pub(crate) const TICK: Duration = Duration::from_millis(50);

/// Consecutive committed updates are merged into one frame up to this size.
const MAX_GROUP_BYTES: usize = 512 * 1024;

/// Committed updates waiting to go out as one merged frame.
#[derive(Default)]
struct Group {
    updates: Vec<Bytes>,
    bytes: usize,
    /// The connection every update came from, when they all came from the same one.
    common_origin: Option<Option<u64>>,
}

impl Group {
    fn push(&mut self, update: Bytes, from: Option<u64>) {
        self.bytes += update.len();
        self.common_origin = match self.common_origin {
            None => Some(from),
            Some(same) if same == from => Some(same),
            Some(_) => Some(None),
        };
        self.updates.push(update);
    }

    /// Sends the group to every peer but its common origin: one frame per burst, so a burst
    /// that was committed together costs each peer one queue slot, not one per update.
    fn flush(&mut self, room: &Room) {
        let group = std::mem::take(self);
        let except = group.common_origin.flatten();
        let frames: Vec<Bytes> = match group.updates.len() {
            0 => return,
            1 => group.updates,
            _ => match yrs::merge_updates_v1(&group.updates) {
                Ok(merged) => vec![Bytes::from(merged)],
                Err(error) => {
                    tracing::warn!(%error, "could not merge updates; sending them one by one");
                    group.updates
                }
            },
        };
        for update in frames {
            crate::metrics::global().updates_out.inc();
            room.broadcast(&crate::protocol::update(update.to_vec()), except);
        }
    }
}

/// Why the committer stopped.
pub(crate) enum Stop {
    /// Idle for the configured time: unloaded.
    Idle,
    /// Server shutdown: flushed.
    Shutdown,
    /// The store failed: peers were closed so they resync elsewhere or later.
    StoreFailed,
    /// The store refused a write of a fairy another node took over while this one stalled
    /// (docs/scaling.md "Fencing"): the document holds what the log does not, so the room
    /// reloads; peers were closed so they resync.
    Fenced,
}

/// Where the committer is in the room's update log.
pub(crate) struct LogState {
    /// Which sequence numbers the document holds.
    pub seqs: SeqTracker,
    /// Updates logged since the last snapshot.
    pub since_snapshot: u64,
    /// Bytes of those updates.
    pub bytes_since_snapshot: u64,
    /// Bytes of the last snapshot this committer wrote (0: none yet).
    pub snapshot_bytes: u64,
    /// Bytes of the snapshot the room was loaded from (0: none).
    pub loaded_snapshot_bytes: u64,
    /// When a catch-up from the store is due (scale-out only).
    pub catchup_at: Option<Instant>,
    /// The compaction running beside the committer, if any (see [`start_compaction`]).
    compacting: Option<Compaction>,
    /// When the room last checked the store for missed updates.
    pub reconciled: Instant,
    /// The history checkpoint being taken beside the committer, if any (see
    /// [`start_checkpoint`]).
    checkpointing: Option<tokio::task::JoinHandle<u64>>,
    /// The sequence number the next checkpoint counts from (0 until the first check tells).
    checkpoint_from: u64,
}

impl LogState {
    /// The log of a room loaded up to `last_seq` at `now`, with `since_snapshot` updates after
    /// its snapshot.
    pub fn new(last_seq: u64, since_snapshot: u64, now: Instant) -> Self {
        LogState {
            seqs: SeqTracker::new(last_seq),
            since_snapshot,
            bytes_since_snapshot: 0,
            snapshot_bytes: 0,
            loaded_snapshot_bytes: 0,
            catchup_at: None,
            compacting: None,
            reconciled: now,
            checkpointing: None,
            checkpoint_from: 0,
        }
    }

    fn catch_up_by(&mut self, at: Instant) {
        self.catchup_at = Some(self.catchup_at.map_or(at, |due| due.min(at)));
    }
}

/// The next message from the other nodes; never resolves on a single node.
async fn next_inbound(subscription: &mut Option<Subscription>) -> Inbound {
    match subscription {
        Some(subscription) => subscription.recv().await,
        None => std::future::pending().await,
    }
}

/// Resolves at `at` (a catch-up, a tick); never without one.
async fn deadline(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Window over which a room's rate of updates is measured.
const RATE_WINDOW: Duration = Duration::from_millis(100);
/// A room holds a commit back only when, at its recent rate, at least this many updates are
/// expected within the gap: below it, holding costs latency and saves few frames.
const COALESCE_MIN_UPDATES: f64 = 3.0;

/// A room's recent rate of updates delivered, and whether it is busy enough to hold a commit
/// back (see [`coalesce_gap`]).
struct Pace {
    since: Instant,
    updates: usize,
    per_sec: f64,
}

impl Pace {
    fn new(now: Instant) -> Self {
        Pace {
            since: now,
            updates: 0,
            per_sec: 0.0,
        }
    }

    /// Counts a commit of `updates` ending at `now`.
    fn committed(&mut self, updates: usize, now: Instant) {
        self.updates += updates;
        let elapsed = now.saturating_duration_since(self.since);
        if elapsed >= RATE_WINDOW {
            self.per_sec = self.updates as f64 / elapsed.as_secs_f64();
            (self.since, self.updates) = (now, 0);
        }
    }

    /// When the next commit may start, if it must wait: only while the room's rate brings at
    /// least [`COALESCE_MIN_UPDATES`] within `gap`, and until `gap` after the last commit began.
    fn hold_until(
        &self,
        last_commit: Option<Instant>,
        gap: Duration,
        now: Instant,
    ) -> Option<Instant> {
        if self.per_sec * gap.as_secs_f64() < COALESCE_MIN_UPDATES {
            return None;
        }
        last_commit.map(|at| at + gap).filter(|due| *due > now)
    }
}

/// How long after the start of a busy room's last commit the next may start: each commit is
/// one frame to every peer, and a frame costs each peer a socket write whether it carries one
/// update or ten, so a busy room sends what arrived meanwhile together. The gap grows with the
/// peers (`--coalesce-us-per-peer`: 5 ms for 100 at the default) up to [`MAX_COALESCE`]. Busy:
/// at the rate of its last [`RATE_WINDOW`], at least [`COALESCE_MIN_UPDATES`] updates fall in
/// the gap (100 peers: 600 updates/s); a slower room holds nothing, and an update that arrives
/// after the gap has passed goes at once. Durability still comes first: a held update is
/// committed, then sent.
///
/// [`MAX_COALESCE`]: super::MAX_COALESCE
fn coalesce_gap(room: &Room) -> Duration {
    let per_peer = room.config.coalesce_per_peer;
    if per_peer.is_zero() {
        return Duration::ZERO;
    }
    let peers = u32::try_from(room.peer_count()).unwrap_or(u32::MAX);
    per_peer.saturating_mul(peers).min(super::MAX_COALESCE)
}

/// Runs until the room unloads, the server shuts down or the store fails.
pub(crate) async fn run(
    room: Arc<Room>,
    mut log: LogState,
    shutdown: CancellationToken,
    mut subscription: Option<Subscription>,
) -> Stop {
    let mut sweep = tokio::time::interval(room.config.sweep_every);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    if subscription.is_some() {
        room.query_remote_awareness();
    }
    // When the server's own writes waiting alone, and its awareness states, go out.
    let mut writes_due: Option<Instant> = None;
    let mut presence_due: Option<Instant> = None;
    // When the last commit started, the room's rate of updates, and when a peer's update held
    // back to coalesce with what follows goes (see [`coalesce_gap`]).
    let mut last_commit: Option<Instant> = None;
    let mut pace = Pace::new(Instant::now());
    let mut held_until: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = room.pending.arrived.notified() => {
                if room.pending.is_urgent() {
                    writes_due = None;
                    let now = Instant::now();
                    let hold = pace.hold_until(last_commit, coalesce_gap(&room), now);
                    match hold {
                        Some(due) => held_until = Some(held_until.map_or(due, |held| held.min(due))),
                        None => {
                            held_until = None;
                            if let Err(error) = commit_paced(&room, &mut log, &mut pace, &mut last_commit).await {
                                return fail(&room, error);
                            }
                        }
                    }
                } else if writes_due.is_none() && held_until.is_none() {
                    writes_due = Some(Instant::now() + TICK);
                }
            }
            _ = deadline(held_until) => {
                (held_until, writes_due) = (None, None);
                if let Err(error) = commit_paced(&room, &mut log, &mut pace, &mut last_commit).await {
                    return fail(&room, error);
                }
            }
            _ = deadline(writes_due) => {
                writes_due = None;
                if let Err(error) = commit_paced(&room, &mut log, &mut pace, &mut last_commit).await {
                    return fail(&room, error);
                }
            }
            _ = room.server_presence.queued.notified(), if presence_due.is_none() => {
                presence_due = Some(Instant::now() + TICK);
            }
            _ = deadline(presence_due) => {
                presence_due = None;
                room.send_server_presence();
            }
            inbound = next_inbound(&mut subscription) => {
                on_inbound(&room, &mut log, inbound);
            }
            _ = deadline(log.catchup_at) => {
                catch_up(&room, &mut log).await;
            }
            snapshot = compaction_done(&mut log.compacting) => {
                compacted(&room, &mut log, snapshot);
            }
            from = checkpoint_done(&mut log.checkpointing) => {
                log.checkpoint_from = from;
            }
            _ = sweep.tick() => {
                room.sweep_awareness();
                let now = room.now();
                if subscription.is_some()
                    && now.saturating_duration_since(log.reconciled) >= RECONCILE_EVERY
                {
                    log.catch_up_by(now);
                }
                if room.try_begin_unload() {
                    return finish(&room, &mut log, Stop::Idle).await;
                }
            }
            _ = shutdown.cancelled() => {
                room.closing.store(true, Ordering::SeqCst);
                return finish(&room, &mut log, Stop::Shutdown).await;
            }
        }
    }
}

/// Final flush and compaction before the room goes away (from the live document: nobody
/// waits for it any more).
async fn finish(room: &Arc<Room>, log: &mut LogState, stop: Stop) -> Stop {
    room.send_server_presence();
    if let Err(error) = commit(room, log).await {
        return fail(room, error);
    }
    if log.compacting.is_some() {
        let snapshot = compaction_done(&mut log.compacting).await;
        compacted(room, log, snapshot);
    }
    if log.checkpointing.is_some() {
        log.checkpoint_from = checkpoint_done(&mut log.checkpointing).await;
    }
    if log.since_snapshot > 0 {
        compact(room, log).await;
    }
    stop
}

/// Closes the room after a failed commit (`error`: [`RoomError::Fenced`],
/// [`RoomError::StoreFull`] or [`RoomError::Store`]); its peers resync when they reconnect,
/// and whoever waits for a write of the room is answered `error` at once.
fn fail(room: &Arc<Room>, error: RoomError) -> Stop {
    let failure = match error {
        RoomError::Fenced => Failure::Fenced,
        RoomError::StoreFull => Failure::Full,
        _ => Failure::Store,
    };
    let fenced = failure == Failure::Fenced;
    room.fenced.store(fenced, Ordering::SeqCst);
    room.closing.store(true, Ordering::SeqCst);
    let peers = std::mem::take(&mut room.lock_peers().links);
    for link in peers.values() {
        if let Some(error) = failure.error() {
            link.control.kick(error);
        }
    }
    room.record_failure(failure);
    if fenced {
        Stop::Fenced
    } else {
        Stop::StoreFailed
    }
}

/// What a room's writers are told of a store error.
fn room_error(error: &StoreError) -> RoomError {
    match error {
        StoreError::Full => RoomError::StoreFull,
        StoreError::Fenced { .. } => RoomError::Fenced,
        _ => RoomError::Store,
    }
}

/// [`commit`], noting when it started (`last_commit`) and what it delivered in the room's
/// [`Pace`]: every commit of the room loop goes through here.
async fn commit_paced(
    room: &Arc<Room>,
    log: &mut LogState,
    pace: &mut Pace,
    last_commit: &mut Option<Instant>,
) -> Result<(), RoomError> {
    *last_commit = Some(Instant::now());
    let updates = commit(room, log).await?;
    pace.committed(updates, Instant::now());
    Ok(())
}

/// Appends everything queued in one store call, then delivers it in order; returns how many
/// updates (the room's own and other nodes') it delivered.
async fn commit(room: &Arc<Room>, log: &mut LogState) -> Result<usize, RoomError> {
    let (items, upto) = room.pending.take_all();
    if items.is_empty() {
        room.pending.mark_delivered(upto);
        return Ok(0);
    }
    let delivered = items
        .iter()
        .filter(|item| !matches!(item, Pending::Reply { .. }))
        .count();
    // One time for the whole commit: the updates of one commit are logged together.
    let at = room.config.clock.unix_millis();
    // What the webhooks hear of this commit once it is delivered (sequence numbers, actors).
    let mut reported = None;
    // Beside each update, the fencing token of the fairy that wrote it (scaled out).
    let mut fences: Vec<Option<Arc<Fence>>> = Vec::new();
    let mut updates: Vec<Logged> = items
        .iter()
        .filter_map(|item| match item {
            Pending::Update {
                update,
                actor,
                fence,
                ..
            } => {
                fences.push(fence.clone());
                Some(Logged {
                    update: update.clone(),
                    actor: actor.clone(),
                    at,
                })
            }
            Pending::Remote { .. } | Pending::Reply { .. } => None,
        })
        .collect();
    if !updates.is_empty() {
        let schema = room.take_unwritten_schema();
        if let Some(schema) = &schema {
            updates.insert(0, Logged::unattributed(schema.clone(), at));
            fences.insert(0, None);
        }
        log.bytes_since_snapshot += updates.iter().map(|u| u.update.len() as u64).sum::<u64>();
        let published = room
            .config
            .fanout
            .as_ref()
            .map(|_| updates.iter().map(|u| u.update.clone()).collect());
        // Only with webhooks on: the commit's distinct actors, for its `room.updated`.
        let actors = room
            .config
            .webhooks
            .as_ref()
            .map(|_| distinct_actors(&updates));
        let appended = append_fenced(room, updates, fences).await?;
        let (last_seq, count) = (appended.last_seq, appended.count());
        let first_seq = last_seq.saturating_sub(count - 1).max(1);
        reported = actors.map(|actors| (first_seq, last_seq, actors));
        log.seqs.mark(first_seq, last_seq);
        log.since_snapshot += count;
        room.committed_seq.fetch_max(last_seq, Ordering::SeqCst);
        if room.actors.awaited() {
            let mut seq = first_seq + u64::from(schema.is_some());
            let mut kept = appended.kept.iter().skip(usize::from(schema.is_some()));
            for item in &items {
                if let Pending::Update { from, .. } = item {
                    if !kept.next().copied().unwrap_or(true) {
                        continue;
                    }
                    if let Some(conn) = from {
                        room.actors.logged(*conn, seq);
                    }
                    seq += 1;
                }
            }
        }
        if appended.refused() {
            // The document holds writes the log refused: nothing of this commit goes out, the
            // room reloads (its peers resync from the store, other nodes catch up from it).
            return Err(RoomError::Fenced);
        }
        if let (Some(fanout), Some(updates)) = (&room.config.fanout, published) {
            fanout.publish(
                &room.name,
                &Envelope::Update {
                    node: fanout.node(),
                    first_seq,
                    last_seq,
                    updates,
                },
            );
        }
    }
    let mut group = Group::default();
    for item in items {
        match item {
            Pending::Update { update, from, .. } => {
                if group.bytes + update.len() > MAX_GROUP_BYTES {
                    group.flush(room);
                }
                group.push(update, from);
            }
            Pending::Remote { update } => {
                if group.bytes + update.len() > MAX_GROUP_BYTES {
                    group.flush(room);
                }
                group.push(update, None);
            }
            Pending::Reply { conn, frame } => {
                group.flush(room);
                room.send_to(conn, frame);
            }
        }
    }
    group.flush(room);
    room.pending.mark_delivered(upto);
    if let (Some(webhooks), Some((first_seq, last_seq, actors))) = (&room.config.webhooks, reported)
    {
        webhooks.room_committed(
            &room.name,
            first_seq,
            last_seq,
            actors.iter().map(Option::as_ref),
        );
    }
    if log.compacting.is_none() && compaction_due(log, room.config.compact_every) {
        start_compaction(room, log);
    }
    start_checkpoint(room, log);
    Ok(delivered)
}

/// Starts taking a history checkpoint beside the committer when none runs and the log is
/// `--history-checkpoint-every` updates past the last one (docs/storage.md "History"): built
/// from the store on the snapshot thread, never from the live document
/// ([`crate::history::checkpoint`]). Only up to what the document is known to hold, as a
/// compaction.
fn start_checkpoint(room: &Arc<Room>, log: &mut LogState) {
    let every = room.config.history_checkpoint_every;
    let upto = log.seqs.contiguous();
    if every == 0 || log.checkpointing.is_some() || upto < log.checkpoint_from.saturating_add(every)
    {
        return;
    }
    let (store, name) = (room.store.clone(), room.name.clone());
    log.checkpointing = Some(tokio::spawn(async move {
        crate::history::checkpoint::take(&store, &name, upto, every).await
    }));
}

/// Resolves when the running checkpoint ends (never while none runs) with the sequence number
/// the next one counts from; takes it.
async fn checkpoint_done(checkpointing: &mut Option<tokio::task::JoinHandle<u64>>) -> u64 {
    let Some(running) = checkpointing.as_mut() else {
        return std::future::pending().await;
    };
    let from = running.await.unwrap_or(0);
    *checkpointing = None;
    from
}

/// The distinct actors of a commit's updates (few: one per writer in the commit).
fn distinct_actors(updates: &[Logged]) -> Vec<Option<Arc<str>>> {
    let mut actors: Vec<Option<Arc<str>>> = Vec::new();
    for update in updates {
        let known = actors.iter().any(|a| match (a, &update.actor) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
            _ => false,
        });
        if !known && actors.len() < crate::webhooks::MAX_ACTORS {
            actors.push(update.actor.clone());
        }
    }
    actors
}

/// What [`append_fenced`] appended of a commit.
struct Appended {
    /// The sequence number of the last update appended.
    last_seq: u64,
    /// Per update of the commit, whether it was appended (`false`: its fairy's fence was stale).
    kept: Vec<bool>,
}

impl Appended {
    fn count(&self) -> u64 {
        self.kept.iter().filter(|kept| **kept).count() as u64
    }

    fn refused(&self) -> bool {
        self.kept.contains(&false)
    }
}

/// Appends a commit's `updates`, each with the fencing token of the fairy that wrote it
/// (`fences`, one per update; docs/scaling.md "Fencing"). A stale token (its fairy was taken
/// over by another node while this one stalled) drops that fairy's updates from the commit and
/// the rest (people's updates above all) is appended: the caller then fails the room with
/// [`RoomError::Fenced`], since its document holds writes its log refused. When nothing is
/// left to append, that error at once.
async fn append_fenced(
    room: &Arc<Room>,
    updates: Vec<Logged>,
    fences: Vec<Option<Arc<Fence>>>,
) -> Result<Appended, RoomError> {
    let mut kept = vec![true; updates.len()];
    if fences.iter().all(Option::is_none) {
        // No fairy hosted here under a fence wrote in this commit (always so on one node).
        let last_seq = append_with_retry(room, updates, Vec::new())
            .await
            .map_err(|error| room_error(&error))?;
        return Ok(Appended { last_seq, kept });
    }
    loop {
        let kept_ones = || {
            updates
                .iter()
                .zip(&fences)
                .zip(&kept)
                .filter(|(_, kept)| **kept)
        };
        let batch: Vec<Logged> = kept_ones().map(|((update, _), _)| update.clone()).collect();
        let mut distinct: Vec<Fence> = Vec::new();
        for fence in kept_ones().filter_map(|((_, fence), _)| fence.as_deref()) {
            if !distinct.contains(fence) {
                distinct.push(fence.clone());
            }
        }
        match append_with_retry(room, batch, distinct).await {
            Ok(last_seq) => return Ok(Appended { last_seq, kept }),
            Err(StoreError::Fenced { fairy }) => {
                tracing::warn!(room = %room.name, %fairy, "the store refused a fairy's writes: another node hosts it now; the room reloads");
                crate::metrics::global().count_fenced(crate::metrics::FencedWrite::Commit);
                for (kept, fence) in kept.iter_mut().zip(&fences) {
                    if fence.as_ref().is_some_and(|f| f.fairy == fairy) {
                        *kept = false;
                    }
                }
                if !kept.contains(&true) {
                    return Err(RoomError::Fenced);
                }
            }
            Err(error) => return Err(room_error(&error)),
        }
    }
}

/// Appends, retrying a failing store a few times; a refused fence, a full disk and a store
/// that did not answer within its deadline are not retried (the deadline bounds how long a
/// writer waits: retried, a stalled store would keep it four times as long).
async fn append_with_retry(
    room: &Arc<Room>,
    updates: Vec<Logged>,
    fences: Vec<Fence>,
) -> Result<u64, StoreError> {
    let mut attempt = 0;
    loop {
        match room
            .store
            .append_fenced(&room.name, updates.clone(), fences.clone())
            .await
        {
            Ok(seq) => return Ok(seq),
            Err(
                error @ (StoreError::Fenced { .. } | StoreError::Full | StoreError::TimedOut(_)),
            ) => {
                if !matches!(error, StoreError::Fenced { .. }) {
                    tracing::error!(room = %room.name, %error, "store append failed; closing room");
                }
                return Err(error);
            }
            Err(error) => {
                let Some(delay) = STORE_RETRIES.get(attempt) else {
                    tracing::error!(room = %room.name, %error, "store append failed; closing room");
                    return Err(error);
                };
                tracing::warn!(room = %room.name, %error, attempt, "store append failed; retrying");
                tokio::time::sleep(*delay).await;
                attempt += 1;
            }
        }
    }
}

/// Whether the log is worth compacting: `compact_every` updates logged, and at least a quarter
/// of the last snapshot's size in bytes (a snapshot is the whole document, encoded or rebuilt
/// from the store: in a large room, thousands of small updates do not pay for it); never more
/// than 16 × `compact_every` updates, which bounds a load's replay.
fn compaction_due(log: &LogState, compact_every: u64) -> bool {
    compaction_rule(
        log.since_snapshot,
        log.bytes_since_snapshot,
        log.snapshot_bytes,
        compact_every,
    )
}

/// [`compaction_due`] on plain figures: `since` updates of `bytes` logged after a snapshot of
/// `snapshot_bytes` (also what `fairyring bench --history-updates` compacts by).
pub(crate) fn compaction_rule(
    since: u64,
    bytes: u64,
    snapshot_bytes: u64,
    compact_every: u64,
) -> bool {
    since >= compact_every
        && (bytes.saturating_mul(4) >= snapshot_bytes || since >= compact_every.saturating_mul(16))
}

/// A compaction running beside the committer: its task, and the updates and bytes the log
/// held since the last snapshot when it started (all of them are in the snapshot it writes).
struct Compaction {
    task: tokio::task::JoinHandle<Option<u64>>,
    covered: u64,
    covered_bytes: u64,
    /// The room's document size estimate when it started (see [`super::size`]).
    size_mark: u64,
}

/// Snapshots below this size are encoded from the live document (a millisecond or two under
/// its lock); larger ones are built from the store ([`compact_from_store`]).
const LIVE_ENCODE_MAX: u64 = 256 * 1024;

/// Starts compacting the room's log beside the committer, which goes on committing while the
/// snapshot is written. A small room's snapshot is encoded from the live document at once. A
/// larger room's is built from the store, never from the live document: in a private document
/// on the snapshot thread ([`super::snapshot`]), so no update of the room waits for it.
/// Encoding the live document held its lock for tens of milliseconds in a room of thousands of
/// shapes: people's p99 beside 16 drawing fairies went from 9–10 to 16–29 ms, their worst from
/// 15–22 to 50–72 ms (docs/storage.md "Compaction"). The price is memory: while it runs, the
/// room's document exists twice (one room at a time: the snapshot thread builds one).
fn start_compaction(room: &Arc<Room>, log: &mut LogState) {
    let size_mark = room.size.mark();
    let task = if log.snapshot_bytes.max(log.loaded_snapshot_bytes) < LIVE_ENCODE_MAX {
        // Only up to what the document is known to hold: with several nodes appending, a
        // later sequence number of this node's may lie beyond one it has not received yet.
        let upto = log.seqs.contiguous();
        if upto == 0 {
            return;
        }
        // The same encoding becomes the room's cold-load answer.
        let snapshot = room.encode_and_install_cold();
        let room = room.clone();
        tokio::spawn(async move { write_snapshot(&room, snapshot, upto).await })
    } else {
        tokio::spawn(compact_from_store(room.clone()))
    };
    log.compacting = Some(Compaction {
        task,
        covered: log.since_snapshot,
        covered_bytes: log.bytes_since_snapshot,
        size_mark,
    });
}

/// Builds a snapshot of everything stored for the room and replaces the log up to the last
/// sequence number it holds (every node's updates up to it); the snapshot's size, or `None`
/// when nothing was compacted.
async fn compact_from_store(room: Arc<Room>) -> Option<u64> {
    let stored = match room.store.load(&room.name).await {
        Ok(stored) => stored,
        Err(error) => {
            tracing::warn!(room = %room.name, %error, "compaction could not read the log; will retry later");
            return None;
        }
    };
    let upto = stored.last_seq;
    if upto == 0 {
        return None;
    }
    let Some(snapshot) = super::snapshot::build(stored).await else {
        tracing::warn!(room = %room.name, "no snapshot built; will retry later");
        return None;
    };
    write_snapshot(&room, snapshot, upto).await
}

/// Replaces the room's log up to `upto` by `snapshot`; the snapshot's size, or `None` when the
/// store failed.
async fn write_snapshot(room: &Room, snapshot: Bytes, upto: u64) -> Option<u64> {
    let bytes = snapshot.len() as u64;
    match room.store.compact(&room.name, snapshot, upto).await {
        Ok(()) => {
            tracing::debug!(room = %room.name, upto, "compacted update log");
            Some(bytes)
        }
        Err(error) => {
            tracing::warn!(room = %room.name, %error, "compaction failed; will retry later");
            None
        }
    }
}

/// Resolves when the running compaction ends (never while none runs); takes it.
async fn compaction_done(compacting: &mut Option<Compaction>) -> (Option<u64>, u64, u64, u64) {
    let Some(running) = compacting.as_mut() else {
        return std::future::pending().await;
    };
    let snapshot = (&mut running.task).await.ok().flatten();
    let (covered, covered_bytes) = (running.covered, running.covered_bytes);
    let size_mark = running.size_mark;
    *compacting = None;
    (snapshot, covered, covered_bytes, size_mark)
}

/// Counts what a finished compaction took out of the log, and rebases the room's document
/// size estimate on the snapshot (see [`super::size`]).
fn compacted(
    room: &Room,
    log: &mut LogState,
    (snapshot, covered, bytes, size_mark): (Option<u64>, u64, u64, u64),
) {
    let Some(snapshot_bytes) = snapshot else {
        return;
    };
    room.size.rebase(snapshot_bytes, size_mark);
    log.since_snapshot = log.since_snapshot.saturating_sub(covered);
    log.bytes_since_snapshot = log.bytes_since_snapshot.saturating_sub(bytes);
    log.snapshot_bytes = snapshot_bytes;
    tracing::trace!(room = %room.name, snapshot_bytes, "compaction counted");
}

/// Replaces the logged updates by one snapshot of the whole document, encoded from the live
/// document (the room is going away: nobody waits for it).
async fn compact(room: &Arc<Room>, log: &mut LogState) {
    // Only up to what the document is known to hold: with several nodes appending, a later
    // sequence number of this node's may lie beyond one it has not received yet.
    let upto = log.seqs.contiguous();
    if upto == 0 {
        // Nothing the document is known to hold yet (a gap from the first update on).
        return;
    }
    let snapshot = room.encode_and_install_cold();
    if let Some(snapshot_bytes) = write_snapshot(room, snapshot, upto).await {
        log.since_snapshot = 0;
        log.bytes_since_snapshot = 0;
        log.snapshot_bytes = snapshot_bytes;
    }
}

/// Acts on a message from the other nodes.
fn on_inbound(room: &Room, log: &mut LogState, inbound: Inbound) {
    match inbound {
        Inbound::Update {
            first_seq,
            last_seq,
            updates,
        } => {
            if log.seqs.covers(first_seq, last_seq) {
                return;
            }
            room.apply_remote(updates);
            log.seqs.mark(first_seq, last_seq);
            room.committed_seq.fetch_max(last_seq, Ordering::SeqCst);
            if log.seqs.has_gap() {
                log.catch_up_by(room.now() + GAP_GRACE);
            }
        }
        Inbound::Awareness { node, update } => room.apply_remote_awareness(node, &update),
        Inbound::AwarenessQuery => room.publish_local_awareness(),
        Inbound::NodeGone(node) => room.remove_node_awareness(node),
        Inbound::Lagged => {
            log.catch_up_by(room.now());
            room.query_remote_awareness();
        }
    }
}

/// Reads from the store what the document lacks and applies it ("Redis carries speed, the
/// store carries truth").
async fn catch_up(room: &Room, log: &mut LogState) {
    log.catchup_at = None;
    log.reconciled = room.now();
    let after = log.seqs.contiguous();
    match room.store.load_since(&room.name, after).await {
        Ok(stored) => {
            if stored.last_seq > after {
                let missing = stored.last_seq - after;
                tracing::info!(room = %room.name, after, upto = stored.last_seq, missing, "caught up from the store");
                crate::metrics::global().pubsub_catchups.inc();
                room.apply_remote(stored.snapshot.into_iter().chain(stored.updates));
            }
            log.seqs.mark_through(stored.last_seq);
            room.committed_seq
                .fetch_max(stored.last_seq, Ordering::SeqCst);
        }
        Err(error) => {
            tracing::warn!(room = %room.name, %error, "catch-up from the store failed; retrying");
            log.catch_up_by(room.now() + CATCHUP_RETRY);
        }
    }
}

impl Room {
    /// Now on the room's clock, as a tokio instant (the committer sleeps until such instants).
    pub(crate) fn now(&self) -> Instant {
        Instant::from_std(self.config.clock.now())
    }

    /// Marks the room closing if it has been unused for the idle time (no peer, no lease).
    fn try_begin_unload(&self) -> bool {
        let peers = self.lock_peers();
        let idle = peers.links.is_empty()
            && self.leases.load(Ordering::SeqCst) == 0
            && peers.idle_since.is_some_and(|since| {
                self.now().saturating_duration_since(since) >= self.config.idle_unload
            });
        if idle {
            self.closing.store(true, Ordering::SeqCst);
        }
        idle
    }

    /// True once the room stopped accepting peers (unloading or shutting down).
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }

    /// True once the store refused some of the document's writes (docs/scaling.md "Fencing"):
    /// the room is unloading, and its document, holding what the log does not, is not read.
    pub fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(since: u64, bytes: u64, snapshot: u64) -> LogState {
        LogState {
            since_snapshot: since,
            bytes_since_snapshot: bytes,
            snapshot_bytes: snapshot,
            ..LogState::new(0, 0, Instant::now())
        }
    }

    #[test]
    fn compaction_waits_for_a_quarter_of_the_snapshot_in_bytes() {
        assert!(!compaction_due(&log(499, 1 << 20, 0), 500));
        assert!(compaction_due(&log(500, 100, 0), 500));
        // A 4 MB room: 500 small updates are not worth a whole-document encode...
        assert!(!compaction_due(&log(500, 25_000, 4 << 20), 500));
        // ...a megabyte of them is, and so are 8,000 of any size.
        assert!(compaction_due(&log(2_000, 1 << 20, 4 << 20), 500));
        assert!(compaction_due(&log(8_000, 400_000, 4 << 20), 500));
    }

    /// The numbers in `doc`'s list "list", in order.
    fn numbers(doc: &yrs::Doc) -> Vec<f64> {
        use yrs::{Array, Transact, WriteTxn};
        let mut txn = doc.transact_mut();
        let list = txn.get_or_insert_array("list");
        list.iter(&txn)
            .filter_map(|value| match value {
                yrs::Out::Any(yrs::Any::Number(n)) => n.as_f64(),
                _ => None,
            })
            .collect()
    }

    /// Applies the update frames `rx` receives to `doc` until its list holds `want` numbers;
    /// returns how many update frames that took.
    async fn receive_until(
        rx: &mut tokio::sync::mpsc::Receiver<Bytes>,
        doc: &yrs::Doc,
        want: usize,
    ) -> usize {
        use yrs::sync::{Message, SyncMessage};
        use yrs::{Transact, Update, updates::decoder::Decode};
        let mut frames = 0;
        while numbers(doc).len() < want {
            let frame = tokio::time::timeout(Duration::from_secs(1), rx.recv())
                .await
                .expect("delivered in time")
                .expect("queue open");
            if let Ok(Message::Sync(SyncMessage::Update(update))) = crate::protocol::decode(&frame)
            {
                frames += 1;
                let update = Update::decode_v1(&update).expect("an update");
                doc.transact_mut().apply_update(update).expect("applied");
            }
        }
        frames
    }

    /// A busy room holds a peer's updates back until the coalesce gap after its last commit
    /// has passed and sends them to each peer as one frame, in order; an update after a quiet
    /// spell goes at once.
    #[tokio::test(start_paused = true)]
    async fn a_busy_room_sends_what_arrives_within_the_gap_as_one_frame() {
        use crate::config::ServeConfig;
        use crate::ids::RoomName;
        use crate::room::{PeerInfo, RoomConfig, Rooms};
        use crate::store::Store;
        use crate::store::memory::MemoryStore;
        use yrs::{Array, Doc, Transact, WriteTxn};

        let config = RoomConfig {
            coalesce_per_peer: Duration::from_millis(2),
            ..RoomConfig::from_serve(&ServeConfig::for_test())
        };
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let rooms = Rooms::new(store, config, 4);
        let room = rooms
            .get(&RoomName::parse("busy").expect("name"))
            .await
            .expect("room");
        let info = |conn| PeerInfo {
            conn,
            name: None,
            sub: format!("u{conn}"),
            can_write: true,
        };
        let (writer, _writer_rx) = room.join(info(1)).expect("join");
        let (_reader, mut reader_rx) = room.join(info(2)).expect("join");
        room.flushed().await;
        while reader_rx.try_recv().is_ok() {}
        // Two peers: a gap of 4 ms. The writer appends 0, 1, … to a list, 0.2 ms apart.
        let source = Doc::with_client_id(77);
        let append = |i: u32| {
            let mut txn = source.transact_mut();
            let list = txn.get_or_insert_array("list");
            let len = list.len(&txn);
            list.insert(&mut txn, len, f64::from(i));
            crate::protocol::update(txn.encode_update_v1())
        };
        let seen = Doc::new();
        // 1,000 updates/s for 120 ms: at least 3 expected within the 4 ms gap of two peers.
        for i in 0..120 {
            writer.handle(&append(i)).await.expect("handled");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        receive_until(&mut reader_rx, &seen, 120).await;
        // Five updates 0.2 ms apart: held, and sent together.
        for i in 120..125 {
            writer.handle(&append(i)).await.expect("handled");
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        let frames = receive_until(&mut reader_rx, &seen, 125).await;
        let expected: Vec<f64> = (0..125).map(f64::from).collect();
        assert_eq!(numbers(&seen), expected, "every update, in order");
        assert!(frames <= 2, "{frames} frames for 5 updates of a busy room");
        // A quiet spell: the next update is not held, nor, the room's rate now low, the one
        // 0.2 ms after it.
        tokio::time::sleep(Duration::from_millis(300)).await;
        for i in 125..127 {
            let sent = Instant::now();
            writer.handle(&append(i)).await.expect("handled");
            assert_eq!(
                receive_until(&mut reader_rx, &seen, i as usize + 1).await,
                1
            );
            assert!(
                sent.elapsed() < Duration::from_millis(1),
                "update {i} held {:?}",
                sent.elapsed()
            );
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        rooms.shutdown().await;
    }

    /// A fairy's write under a stale fence (another node took the fairy over) is refused by
    /// the store; a person's write of the same commit is logged and told its sequence number;
    /// the room unloads, is not read meanwhile, and loads again without the refused write.
    #[tokio::test]
    async fn a_stale_fence_drops_the_fairys_writes_keeps_the_persons_and_reloads() {
        use crate::config::ServeConfig;
        use crate::history::actor::{Actor, Via};
        use crate::ids::RoomName;
        use crate::origin::TxnOrigin;
        use crate::room::registry::ReadSource;
        use crate::room::{RoomConfig, Rooms};
        use crate::store::Store;
        use crate::store::memory::MemoryStore;
        use yrs::{Doc, Map, ReadTxn, Transact, Update, WriteTxn, updates::decoder::Decode};

        let keys = |doc: &Doc| {
            let txn = doc.transact();
            let mut keys: Vec<String> = txn
                .get_map("shapes")
                .map(|m| m.keys(&txn).map(str::to_owned).collect())
                .unwrap_or_default();
            keys.sort();
            keys
        };
        let store = Arc::new(MemoryStore::default());
        let config = RoomConfig::from_serve(&ServeConfig::for_test());
        let rooms = Rooms::new(store.clone() as Arc<dyn Store>, config, 4);
        let name = RoomName::parse("fenced").expect("name");
        let room = rooms.get(&name).await.expect("room");
        room.take_fence("f-1").await.expect("fence");
        // Another node takes the fairy over while this one's fairy goes on writing.
        assert_eq!(store.next_fence(&name, "f-1").await.expect("next"), Some(2));
        {
            let mut txn = room.doc().transact_mut_with(TxnOrigin::fairy("f-1"));
            let shapes = txn.get_or_insert_map("shapes");
            shapes.insert(&mut txn, "stale", "by the old host");
        }
        let mine = {
            let doc = Doc::new();
            let mut txn = doc.transact_mut();
            txn.get_or_insert_map("shapes")
                .insert(&mut txn, "mine", "ada's");
            txn.encode_update_v1()
        };
        let ada = Actor::user("ada", None).via(Via::Api);
        let seq = room
            .apply_update_as(&ada, &mine)
            .await
            .expect("ada's write");
        tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while !room.is_closing() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the room unloads");
        assert!(room.is_fenced());
        assert_eq!(
            keys(room.doc()),
            ["mine", "stale"],
            "the refused write is here only"
        );
        if let Ok(Some(ReadSource::Loaded(_))) = rooms.read(&name).await {
            panic!("a fenced room's document is not read");
        }
        let stored = store.load(&name).await.expect("load");
        assert_eq!(stored.last_seq, seq, "ada's write is the last logged");
        let logged = Doc::new();
        {
            let mut txn = logged.transact_mut();
            for update in &stored.updates {
                txn.apply_update(Update::decode_v1(update).expect("decode"))
                    .expect("apply");
            }
        }
        assert_eq!(keys(&logged), ["mine"]);
        let again = rooms.get(&name).await.expect("reloaded");
        assert!(!Arc::ptr_eq(&again, &room));
        assert_eq!(keys(again.doc()), ["mine"]);
    }
}
