//! The committer of one room: a task that makes queued updates durable (group commit), then
//! delivers them (and, in a scale-out deployment, publishes them to the other nodes), compacts
//! the log, sweeps awareness timeouts, applies what the other nodes publish, catches up from
//! the store when some of it is missing, and unloads the room when idle.
//!
//! People first (docs/fairies.md "People and fairies in one room"): a peer's update, or a
//! reply to a peer, is committed as soon as the committer is free, and another node's update
//! (already durable) delivered as soon as it arrives; in a busy room, at most once per
//! [`pace::coalesce_gap`] after the previous commit began, so that what arrived meanwhile goes out
//! as one frame per peer. What the server and its
//! fairies write alone (streamed versions, chat, tasks) waits for the room's [`TICK`] and then
//! goes out as one commit and one frame per peer, however many fairies wrote; it is committed
//! earlier, together, when a peer's update arrives behind it. The fairies' awareness states are
//! sent the same way, at most once a tick, all changed states in one message.
//!
//! # Layout
//! - this file: the committer's loop ([`run`]): when to commit, and what else it waits for.
//! - [`pending`]: the durable-then-broadcast queue the document's observer fills.
//! - [`intake`]: the step after a transaction is applied: the document's update observer,
//!   which feeds the queue (and the room's size estimate, cold-load tail and root index).
//! - [`pipeline`]: one commit, as named steps: take the queue, build the log entries, append
//!   them (noting their sequence numbers), publish them to the other nodes, deliver, report.
//! - [`append`]: the store append with fences and retries.
//! - [`pace`]: when a busy room holds a commit back to coalesce what follows.
//! - [`coalesce`]: the server's own awareness states, held to the room's tick.
//! - [`log`]: where the committer is in the room's log, and its upkeep (compaction, history
//!   checkpoints) beside the committer; [`snapshot`]: the thread those builds run on.
//! - [`inbound`]: what the other nodes publish, and catching up from the store.
//!
//! Touches the store only through the [`crate::store::Store`] trait and the other nodes only
//! through [`crate::pubsub`]; never a socket.

mod append;
pub(super) mod coalesce;
mod inbound;
pub(super) mod intake;
mod log;
mod pace;
pub(super) mod pending;
mod pipeline;
pub(crate) mod snapshot;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use self::inbound::{catch_up, on_inbound};
pub(crate) use self::log::LogState;
#[cfg(feature = "dev-tools")]
pub(crate) use self::log::compaction_rule;
use self::log::{checkpoint_done, compact, compacted, compaction_done};
use self::pace::{Pace, coalesce_gap};
use self::pipeline::commit;
use crate::pubsub::{Inbound, Subscription};
use crate::room::{Failure, Room, RoomError};

/// How often a room of a scale-out deployment checks the store for updates it never heard
/// of (the last message before a silent spell may have been lost).
const RECONCILE_EVERY: Duration = Duration::from_secs(3);

/// How long what the server and its fairies write alone may wait to be committed and sent
/// together (and how often their awareness goes out).
pub(crate) const TICK: Duration = Duration::from_millis(50);

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
    // back to coalesce with what follows goes (see [`pace::coalesce_gap`]).
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
                room.mark_closing();
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
    // Woken once the failure is recorded: they read why (`Room::failure`).
    room.mark_closing();
    if fenced {
        Stop::Fenced
    } else {
        Stop::StoreFailed
    }
}

/// [`pipeline::commit`], noting when it started (`last_commit`) and what it delivered in the room's
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
            // `since` is in the future during a new room's join grace: not idle yet, even with
            // no idle time at all (`--idle-unload 0`).
            && peers.idle_since.is_some_and(|since| {
                self.now()
                    .checked_duration_since(since)
                    .is_some_and(|idle| idle >= self.config.idle_unload)
            });
        if idle {
            self.mark_closing();
        }
        idle
    }

    /// Marks the room closing (unloading, failed or shutting down) and wakes whoever waits on
    /// [`Room::closing_signal`].
    fn mark_closing(&self) {
        self.closing.store(true, Ordering::SeqCst);
        self.closed.cancel();
    }

    /// Cancelled once the room is closing — a failed commit (its store full or failing, a
    /// stale fence), an idle unload, the shutdown: what is written into its document after
    /// that is never stored, so whoever works in it (a fairy's request) stops at once.
    pub fn closing_signal(&self) -> tokio_util::sync::CancellationToken {
        self.closed.clone()
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
