//! What the committer does with the other nodes of a scale-out deployment (docs/scaling.md):
//! acts on their messages (their durable updates, awareness, a node gone, a lag) and catches up
//! from the store when some sequence numbers never arrived ("Redis carries speed, the store
//! carries truth"). Applying their updates and relaying awareness is the room's
//! ([`crate::room::peers::remote`]); this only decides when, and counts what the document holds.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::log::LogState;
use crate::pubsub::Inbound;
use crate::room::Room;

/// How long a gap in the sequence numbers heard from other nodes may last before the room
/// catches up from the store (messages of two nodes may arrive out of order).
const GAP_GRACE: Duration = Duration::from_millis(150);
/// Delay before a failed catch-up is tried again.
const CATCHUP_RETRY: Duration = Duration::from_secs(1);

/// Acts on a message from the other nodes.
pub(super) fn on_inbound(room: &Room, log: &mut LogState, inbound: Inbound) {
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
pub(super) async fn catch_up(room: &Room, log: &mut LogState) {
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
