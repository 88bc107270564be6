//! What a room does with the other nodes of a scale-out deployment (docs/scaling.md): applying
//! the updates they made durable, knowing which sequence numbers of its log its document holds
//! ([`SeqTracker`]), catching up from the store when some are missing, and relaying awareness
//! both ways (remote states are owned by their node and go when it goes).
//!
//! Remote updates are applied under the reserved connection id [`REMOTE_CONN`]: the document's
//! observer queues them for local delivery only, since they are already durable (never appended
//! again, never published again). This module does not talk to Redis or the store directly
//! except through the room's [`Store`](crate::store::Store) and its
//! [`Fanout`](crate::pubsub::Fanout).

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use yrs::block::ClientID;
use yrs::sync::awareness::{AwarenessUpdate, AwarenessUpdateEntry};
use yrs::updates::decoder::Decode;
use yrs::updates::encoder::Encode;

use super::presence::Owner;
use crate::origin::TxnOrigin;
use crate::protocol;
use crate::pubsub::{Envelope, NodeId};
use crate::room::Room;
use crate::room::vet::decode::decode_update;

/// The connection id of transactions that apply other nodes' updates (real connections count
/// from 1).
pub(crate) const REMOTE_CONN: u64 = 0;

/// Which sequence numbers of the room's log the document holds: all up to `contiguous`, and
/// the ranges beyond it that arrived ahead of a gap.
#[derive(Debug, Default, Clone)]
pub(crate) struct SeqTracker {
    contiguous: u64,
    /// Ranges held beyond `contiguous`, by first sequence number (they may overlap).
    ahead: BTreeMap<u64, u64>,
}

impl SeqTracker {
    /// A document built from the log up to `last_seq`.
    pub fn new(last_seq: u64) -> Self {
        SeqTracker {
            contiguous: last_seq,
            ahead: BTreeMap::new(),
        }
    }

    /// Every sequence number up to this one is in the document (safe to compact up to it).
    pub fn contiguous(&self) -> u64 {
        self.contiguous
    }

    /// Whether the document already holds `first..=last`.
    pub fn covers(&self, first: u64, last: u64) -> bool {
        last <= self.contiguous || self.ahead.range(..=first).any(|(_, end)| *end >= last)
    }

    /// Records that the document holds `first..=last`.
    pub fn mark(&mut self, first: u64, last: u64) {
        if last <= self.contiguous {
            return;
        }
        // The single-node case (and the usual one): the range follows on, nothing is ahead.
        if first <= self.contiguous + 1 && self.ahead.is_empty() {
            self.contiguous = last;
            return;
        }
        let first = first.max(self.contiguous + 1);
        let end = self.ahead.entry(first).or_insert(last);
        *end = (*end).max(last);
        while let Some((&start, &end)) = self.ahead.first_key_value() {
            if start > self.contiguous + 1 {
                break;
            }
            self.contiguous = self.contiguous.max(end);
            self.ahead.remove(&start);
        }
    }

    /// Records that the document holds everything up to `last` (after a catch-up).
    pub fn mark_through(&mut self, last: u64) {
        self.mark(1, last);
    }

    /// Whether something arrived ahead of a missing range.
    pub fn has_gap(&self) -> bool {
        !self.ahead.is_empty()
    }
}

/// The origin of transactions that apply other nodes' updates.
fn remote_origin() -> TxnOrigin {
    TxnOrigin::Client {
        conn: REMOTE_CONN,
        sub: "remote".to_owned(),
    }
}

impl Room {
    /// Applies updates another node made durable (or read back from the store); each one
    /// reaches this node's peers through the pending queue, in order, and is not stored again.
    pub(crate) fn apply_remote(&self, updates: impl IntoIterator<Item = Bytes>) {
        for bytes in updates {
            let applied = decode_update(&bytes)
                .and_then(|update| self.apply_client_update(remote_origin(), update));
            if let Err(error) = applied {
                tracing::error!(room = %self.name, %error, "could not apply another node's update");
            }
        }
    }

    /// Publishes an awareness update of this node's own peers to the other nodes.
    pub(crate) fn publish_awareness(&self, update: &AwarenessUpdate) {
        if let Some(fanout) = &self.config.fanout
            && !update.clients.is_empty()
        {
            fanout.publish(
                &self.name,
                &Envelope::Awareness {
                    node: fanout.node(),
                    update: Bytes::from(update.encode_v1()),
                },
            );
        }
    }

    /// Asks the other nodes for their peers' states (after loading, or after missing messages).
    pub(crate) fn query_remote_awareness(&self) {
        if let Some(fanout) = &self.config.fanout {
            fanout.publish(
                &self.name,
                &Envelope::AwarenessQuery {
                    node: fanout.node(),
                },
            );
        }
    }

    /// Answers another node's query with the states this node's peers and fairies own.
    pub(crate) fn publish_local_awareness(&self) {
        let local: Vec<ClientID> = {
            let peers = self.lock_peers();
            peers
                .owners
                .iter()
                .filter(|(_, owner)| matches!(owner, Owner::Conn(_) | Owner::Server))
                .map(|(id, _)| *id)
                .collect()
        };
        let update = {
            let awareness = self.lock_awareness();
            let clients: HashMap<ClientID, AwarenessUpdateEntry> = awareness
                .iter()
                .filter(|(id, _)| local.contains(id))
                .filter_map(|(id, state)| {
                    Some((
                        id,
                        AwarenessUpdateEntry {
                            clock: state.clock,
                            json: state.data.clone()?,
                        },
                    ))
                })
                .collect();
            AwarenessUpdate { clients }
        };
        self.publish_awareness(&update);
    }

    /// Applies another node's awareness update: states this node's peers or fairies own are
    /// left alone; the others become owned by that node (removed with it).
    pub(crate) fn apply_remote_awareness(&self, node: NodeId, update: &[u8]) {
        let Ok(mut update) = AwarenessUpdate::decode_v1(update) else {
            tracing::warn!(room = %self.name, %node, "unreadable awareness update from another node");
            return;
        };
        {
            let mut peers = self.lock_peers();
            update
                .clients
                .retain(|id, entry| match peers.owners.get(id) {
                    Some(Owner::Conn(_) | Owner::Server) => false,
                    _ => {
                        if &*entry.json == "null" {
                            peers.owners.remove(id);
                        } else {
                            peers.owners.insert(*id, Owner::Remote(node));
                        }
                        true
                    }
                });
        }
        if let Some(update) = self.apply_awareness(update) {
            self.broadcast(&protocol::awareness(update), None);
        }
    }

    /// Removes the states of a node that left or stopped beating.
    pub(crate) fn remove_node_awareness(&self, node: NodeId) {
        let ids: Vec<ClientID> = {
            let peers = self.lock_peers();
            peers
                .owners
                .iter()
                .filter(|(_, owner)| **owner == Owner::Remote(node))
                .map(|(id, _)| *id)
                .collect()
        };
        self.remove_awareness(ids);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracker_follows_ranges_in_any_order() {
        let mut seqs = SeqTracker::new(4);
        assert!(seqs.covers(1, 4) && !seqs.covers(5, 5));
        seqs.mark(7, 8);
        assert!(seqs.has_gap());
        assert_eq!(seqs.contiguous(), 4);
        assert!(seqs.covers(7, 8) && seqs.covers(8, 8) && !seqs.covers(6, 8));
        seqs.mark(5, 6);
        assert!(!seqs.has_gap());
        assert_eq!(seqs.contiguous(), 8);
        seqs.mark(3, 3);
        assert_eq!(seqs.contiguous(), 8);
        seqs.mark(10, 12);
        seqs.mark(11, 15);
        seqs.mark_through(9);
        assert_eq!(seqs.contiguous(), 15);
        assert!(!seqs.has_gap());
        seqs.mark(20, 20);
        seqs.mark_through(25);
        assert_eq!((seqs.contiguous(), seqs.has_gap()), (25, false));
    }
}
