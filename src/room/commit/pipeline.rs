//! One commit of a room's queue, as named steps: [`take`] the queue, build the log [`entries`],
//! [`append`] them (noting the sequence numbers they got), [`publish`] them to the other nodes,
//! [`deliver`] every item to the peers, [`report`] the commit to the webhooks, then start the
//! log's [`upkeep`]. Durable before delivered: nothing is sent before the append returned.
//!
//! Owns the steps and the merging of a commit's updates into one frame per peer ([`Group`]);
//! when a commit starts is the committer's ([`super::run`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::append::{Appended, append_fenced};
use super::log::{LogState, compaction_due, start_checkpoint, start_compaction};
use super::pending::Pending;
use crate::pubsub::Envelope;
use crate::room::{Room, RoomError};
use crate::store::{Fence, Logged};

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

/// One commit: appends everything queued in one store call, then delivers it in order;
/// returns how many updates (the room's own and other nodes') it delivered. Its steps, in
/// order: [`take`] the queue, [`entries`] to log, [`append`] them (and note their sequence
/// numbers), [`publish`] them to the other nodes, [`deliver`] every item, [`report`] the
/// commit to the webhooks, and start the log's [`upkeep`].
pub(super) async fn commit(room: &Arc<Room>, log: &mut LogState) -> Result<usize, RoomError> {
    let Some(Taken { items, upto }) = take(room) else {
        return Ok(0);
    };
    let delivered = items
        .iter()
        .filter(|item| !matches!(item, Pending::Reply { .. }))
        .count();
    // What the webhooks hear of this commit once it is delivered (sequence numbers, actors).
    let mut reported = None;
    if let Some(entries) = entries(room, &items) {
        let published = room
            .config
            .fanout
            .as_ref()
            .map(|_| entries.updates.iter().map(|u| u.update.clone()).collect());
        let logged = append(room, log, &items, entries).await?;
        if let Some(updates) = published {
            publish(room, &logged, updates);
        }
        reported = logged
            .actors
            .map(|actors| (logged.first_seq, logged.last_seq, actors));
    }
    deliver(room, items);
    room.pending.mark_delivered(upto);
    if let Some((first_seq, last_seq, actors)) = reported {
        report(room, first_seq, last_seq, &actors);
    }
    upkeep(room, log);
    Ok(delivered)
}

/// What one commit took from the room's queue.
struct Taken {
    items: Vec<Pending>,
    /// How far the queue is delivered once these items are.
    upto: u64,
}

/// Step 1: takes the whole queue; `None` when it was empty (then marked delivered at once).
fn take(room: &Room) -> Option<Taken> {
    let (items, upto) = room.pending.take_all();
    if items.is_empty() {
        room.pending.mark_delivered(upto);
        return None;
    }
    Some(Taken { items, upto })
}

/// What a commit appends to the room's log.
struct Entries {
    updates: Vec<Logged>,
    /// Beside each update, the fencing token of the fairy that wrote it (scaled out).
    fences: Vec<Option<Arc<Fence>>>,
    /// Whether the first update is a new room's schema, logged ahead of its first write.
    schema: bool,
}

/// Step 2: the log entries of the queued updates (not of other nodes' updates, already
/// durable, nor of replies), all at one time, behind a new room's schema; `None` when there
/// is nothing to log.
fn entries(room: &Room, items: &[Pending]) -> Option<Entries> {
    // One time for the whole commit: the updates of one commit are logged together.
    let at = room.config.clock.unix_millis();
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
    if updates.is_empty() {
        return None;
    }
    let schema = room.take_unwritten_schema();
    if let Some(schema) = &schema {
        updates.insert(0, Logged::unattributed(schema.clone(), at));
        fences.insert(0, None);
    }
    Some(Entries {
        updates,
        fences,
        schema: schema.is_some(),
    })
}

/// What a commit's append logged.
struct Noted {
    first_seq: u64,
    last_seq: u64,
    /// Only with webhooks on: the commit's distinct actors, for its `room.updated`.
    actors: Option<Vec<Option<Arc<str>>>>,
}

/// Step 3: appends the entries (see [`super::append`]) and notes what was logged: the
/// sequence numbers the document now holds, and the one each waiting writer's update got.
/// A write refused under a stale fence fails the commit ([`RoomError::Fenced`]) after the
/// rest is noted: nothing of it goes out.
async fn append(
    room: &Arc<Room>,
    log: &mut LogState,
    items: &[Pending],
    entries: Entries,
) -> Result<Noted, RoomError> {
    let Entries {
        updates,
        fences,
        schema,
    } = entries;
    log.bytes_since_snapshot += updates.iter().map(|u| u.update.len() as u64).sum::<u64>();
    let actors = room
        .config
        .webhooks
        .as_ref()
        .map(|_| distinct_actors(&updates));
    let appended = append_fenced(room, updates, fences).await?;
    let (last_seq, count) = (appended.last_seq, appended.count());
    let first_seq = last_seq.saturating_sub(count - 1).max(1);
    log.seqs.mark(first_seq, last_seq);
    log.since_snapshot += count;
    room.committed_seq.fetch_max(last_seq, Ordering::SeqCst);
    if room.actors.awaited() {
        tell_writers(room, items, &appended, first_seq, schema);
    }
    if appended.refused() {
        // The document holds writes the log refused: nothing of this commit goes out, the
        // room reloads (its peers resync from the store, other nodes catch up from it).
        return Err(RoomError::Fenced);
    }
    Ok(Noted {
        first_seq,
        last_seq,
        actors,
    })
}

/// Tells the writers who wait for it the sequence number their update was logged under
/// (a restore, a rollback, a REST write; `schema`: the commit's first entry is a new room's
/// schema, logged under `first_seq`).
fn tell_writers(room: &Room, items: &[Pending], appended: &Appended, first_seq: u64, schema: bool) {
    let mut seq = first_seq + u64::from(schema);
    let mut kept = appended.kept.iter().skip(usize::from(schema));
    for item in items {
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

/// Step 4, scaled out: publishes the logged `updates` to the other nodes.
fn publish(room: &Room, logged: &Noted, updates: Vec<Bytes>) {
    if let Some(fanout) = &room.config.fanout {
        fanout.publish(
            &room.name,
            &Envelope::Update {
                node: fanout.node(),
                first_seq: logged.first_seq,
                last_seq: logged.last_seq,
                updates,
            },
        );
    }
}

/// Step 5: delivers every item in order, consecutive updates merged into one frame per peer
/// ([`Group`]), a reply to its one peer.
fn deliver(room: &Room, items: Vec<Pending>) {
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
}

/// Step 6: tells the webhooks what the delivered commit logged (`room.updated`).
fn report(room: &Room, first_seq: u64, last_seq: u64, actors: &[Option<Arc<str>>]) {
    if let Some(webhooks) = &room.config.webhooks {
        webhooks.room_committed(
            &room.name,
            first_seq,
            last_seq,
            actors.iter().map(Option::as_ref),
        );
    }
}

/// Last, beside the committer: a compaction when the log is due one, a history checkpoint
/// when one is due (see [`super::log`]).
fn upkeep(room: &Arc<Room>, log: &mut LogState) {
    if log.compacting.is_none() && compaction_due(log, room.config.compact_every) {
        start_compaction(room, log);
    }
    start_checkpoint(room, log);
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
