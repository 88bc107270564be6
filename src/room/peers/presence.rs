//! Awareness (presence) of a room: relaying peers' states, who owns which awareness client id,
//! removing a peer's states the moment it leaves, timing out silent ones, and the server-side
//! states of fairies (each its own awareness client id).
//!
//! Removal follows y-protocols' server semantics: a removed remote state keeps its clock and is
//! announced as `{clock, null}` (yrs's `remove_state` would bump the clock and make a client that
//! reconnects with its old clock invisible until its next change).

use std::collections::HashMap;
use std::sync::Arc;

use yrs::block::ClientID;
use yrs::sync::awareness::{AwarenessUpdate, AwarenessUpdateEntry};

use super::peer::PeerLink;
use crate::protocol;
use crate::room::{Room, RoomError};

/// Who controls an awareness client id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// A WebSocket connection.
    Conn(u64),
    /// The server (a fairy).
    Server,
    /// A peer or fairy of another node (scale-out), removed when that node goes.
    Remote(crate::pubsub::NodeId),
}

/// The peers of a room and the ownership of awareness ids, under one lock.
#[derive(Default)]
pub(crate) struct Peers {
    pub links: HashMap<u64, PeerLink>,
    pub owners: HashMap<ClientID, Owner>,
    /// Since when the room has had no peer.
    pub idle_since: Option<tokio::time::Instant>,
}

impl Peers {
    /// No peer yet, idle from `since`.
    pub(crate) fn idle_from(since: tokio::time::Instant) -> Self {
        Peers {
            idle_since: Some(since),
            ..Default::default()
        }
    }
}

/// A room's awareness over `doc`, and the monotonic instant its states' ages count from (now
/// on `clock`). Ages are durations: measured on the monotonic clock, from the room's load, so
/// that a step of the wall clock neither drops every state (forward) nor keeps silent ones for
/// good (back). Nothing of it leaves the process.
pub(crate) fn awareness_of(
    doc: &yrs::Doc,
    clock: &crate::clock::SharedClock,
) -> (yrs::sync::Awareness, std::time::Instant) {
    let clock = clock.clone();
    let loaded_at = clock.now();
    let awareness = yrs::sync::Awareness::with_clock(doc.clone(), move || {
        monotonic_millis(clock.as_ref(), loaded_at)
    });
    (awareness, loaded_at)
}

/// Milliseconds from `origin` to now on `clock`'s monotonic time (what awareness states' ages
/// are measured in).
fn monotonic_millis(clock: &dyn crate::clock::Clock, origin: std::time::Instant) -> u64 {
    u64::try_from(clock.now().saturating_duration_since(origin).as_millis()).unwrap_or(u64::MAX)
}

/// Why a peer's awareness state is refused, if it is: over `max` bytes, or not a JSON object
/// (`null`, a removal, is one too).
fn vet_state(json: &str, max: usize) -> Result<(), RoomError> {
    if json.len() > max {
        return Err(RoomError::AwarenessTooBig {
            bytes: json.len(),
            max,
        });
    }
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(serde_json::Value::Object(_) | serde_json::Value::Null) => Ok(()),
        Ok(_) => Err(RoomError::BadAwareness("not an object".into())),
        Err(error) => Err(RoomError::BadAwareness(error.to_string())),
    }
}

/// Errors of server-side presence.
#[derive(Debug, thiserror::Error)]
pub enum PresenceError {
    /// The awareness client id belongs to a connected peer.
    #[error("awareness client id {0} belongs to a peer")]
    NotOwned(u64),
}

impl Room {
    /// The full current awareness as one frame, or `None` when nobody is present. Takes the
    /// awareness lock; callers may hold the peers lock (the one allowed nesting order).
    pub(crate) fn awareness_snapshot(&self) -> Option<bytes::Bytes> {
        let awareness = self.lock_awareness();
        let update = awareness.update().ok()?;
        if update.clients.is_empty() {
            None
        } else {
            Some(protocol::awareness(update))
        }
    }

    /// Applies a peer's awareness update (only the ids it owns or newly introduces) and relays it.
    /// Refused whole, before anything is applied or relayed, when a state is larger than
    /// [`super::RoomConfig::max_awareness_bytes`] or is not a JSON object (nor `null`): every
    /// y-protocols client that receives a state that is not JSON throws, and a fairy reads
    /// peers' states.
    pub(crate) fn apply_peer_awareness(
        &self,
        conn: u64,
        mut update: AwarenessUpdate,
    ) -> Result<(), RoomError> {
        for entry in update.clients.values() {
            vet_state(&entry.json, self.config.max_awareness_bytes)?;
        }
        {
            let mut peers = self.lock_peers();
            let peers = &mut *peers;
            update.clients.retain(|id, _| match peers.owners.get(id) {
                Some(Owner::Conn(owner)) => *owner == conn,
                // y-websocket clients echo every state they hear of: a state another node
                // owns stays its own (a client that moved here is taken on once that node's
                // state of it is gone, at its next renewal).
                Some(Owner::Server | Owner::Remote(_)) => false,
                None => {
                    peers.owners.insert(*id, Owner::Conn(conn));
                    if let Some(link) = peers.links.get_mut(&conn) {
                        link.awareness_ids.insert(*id);
                    }
                    true
                }
            });
        }
        if let Some(update) = self.apply_awareness(update) {
            self.publish_awareness(&update);
            self.broadcast(&protocol::awareness(update), Some(conn));
        }
        Ok(())
    }

    /// Applies the (ownership-filtered) states of an awareness update; returns the update when
    /// it changed something, to be relayed.
    pub(crate) fn apply_awareness(&self, update: AwarenessUpdate) -> Option<AwarenessUpdate> {
        if update.clients.is_empty() {
            return None;
        }
        let mut awareness = self.lock_awareness();
        let changed = matches!(awareness.apply_update_summary(update.clone()), Ok(Some(_)));
        changed.then_some(update)
    }

    /// Removes awareness states (a peer left, or timed out) and tells everyone.
    pub(crate) fn remove_awareness(&self, ids: Vec<ClientID>) {
        if ids.is_empty() {
            return;
        }
        // Only removals of this node's own peers' states are published: other nodes' states
        // are theirs to remove (a timed-out relay must not remove a live peer elsewhere).
        let local: Vec<ClientID> = {
            let mut peers = self.lock_peers();
            ids.iter()
                .filter(|id| matches!(peers.owners.remove(id), Some(Owner::Conn(_)) | None))
                .copied()
                .collect()
        };
        let removal = {
            let mut awareness = self.lock_awareness();
            let mut clients = HashMap::new();
            for id in ids {
                if let Some((clock, _)) = awareness.meta(id) {
                    clients.insert(
                        id,
                        AwarenessUpdateEntry {
                            clock,
                            json: "null".into(),
                        },
                    );
                }
            }
            let update = AwarenessUpdate { clients };
            let _ = awareness.apply_update(update.clone());
            update
        };
        if !removal.clients.is_empty() {
            let published = AwarenessUpdate {
                clients: removal
                    .clients
                    .iter()
                    .filter(|(id, _)| local.contains(id))
                    .map(|(id, entry)| (*id, entry.clone()))
                    .collect(),
            };
            self.publish_awareness(&published);
            self.broadcast(&protocol::awareness(removal), None);
        }
    }

    /// Removes peers' states that were not renewed within the awareness timeout.
    pub(crate) fn sweep_awareness(&self) {
        // The same monotonic milliseconds the room's awareness stamps states with.
        let now = monotonic_millis(self.config.clock.as_ref(), self.loaded_at);
        let timeout = u64::try_from(self.config.awareness_timeout.as_millis()).unwrap_or(u64::MAX);
        let server_owned: Vec<ClientID> = {
            let peers = self.lock_peers();
            peers
                .owners
                .iter()
                .filter(|(_, o)| **o == Owner::Server)
                .map(|(id, _)| *id)
                .collect()
        };
        let stale: Vec<ClientID> = {
            let awareness = self.lock_awareness();
            awareness
                .iter()
                .filter(|(id, state)| {
                    state.data.is_some()
                        && !server_owned.contains(id)
                        && now.saturating_sub(state.last_updated) >= timeout
                })
                .map(|(id, _)| id)
                .collect()
        };
        if !stale.is_empty() {
            tracing::debug!(room = %self.name, count = stale.len(), "awareness states timed out");
            self.remove_awareness(stale);
        }
    }

    /// Publishes (or with `None` removes) a server-side awareness state, such as a fairy's,
    /// under its own awareness client id, and broadcasts it to every peer.
    pub fn set_presence(
        self: &Arc<Self>,
        client_id: u64,
        state: Option<&serde_json::Value>,
    ) -> Result<(), PresenceError> {
        let id = ClientID::new(client_id);
        {
            let mut peers = self.lock_peers();
            match peers.owners.get(&id) {
                Some(Owner::Conn(_)) => return Err(PresenceError::NotOwned(client_id)),
                _ if state.is_some() => {
                    peers.owners.insert(id, Owner::Server);
                }
                _ => {
                    peers.owners.remove(&id);
                }
            }
        }
        let update = {
            let mut awareness = self.lock_awareness();
            let clock = match (awareness.meta(id), state) {
                (Some((clock, _)), None) => clock,
                (Some((clock, _)), Some(_)) => clock.saturating_add(1),
                (None, _) => 1,
            };
            let json = state
                .map(|s| s.to_string())
                .unwrap_or_else(|| "null".to_owned());
            let update = AwarenessUpdate {
                clients: HashMap::from([(
                    id,
                    AwarenessUpdateEntry {
                        clock,
                        json: json.into(),
                    },
                )]),
            };
            let _ = awareness.apply_update(update.clone());
            update
        };
        // Sent with the other server states at the room's tick (`coalesce`).
        self.server_presence.queue(update);
        Ok(())
    }

    /// Sends the server's awareness states queued since the last tick, as one message.
    pub(crate) fn send_server_presence(&self) {
        if let Some(update) = self.server_presence.take() {
            // Scaled out, only the node holding a fairy's lease hosts it: its presence is
            // relayed to the other nodes, which own it by this node (docs/scaling.md "Fairies").
            self.publish_awareness(&update);
            self.broadcast(&protocol::awareness(update), None);
        }
    }

    /// Publishes a server-side state again with a new clock (other nodes time out states not
    /// renewed within the awareness timeout, as they do browsers'); nothing if there is none.
    pub fn renew_presence(self: &Arc<Self>, client_id: u64) {
        let current = {
            let awareness = self.lock_awareness();
            awareness
                .iter()
                .find(|(id, _)| id.get() == client_id)
                .and_then(|(_, state)| serde_json::from_str(state.data.as_deref()?).ok())
        };
        if let Some(state) = current {
            let _ = self.set_presence(client_id, Some(&state));
        }
    }

    /// The awareness states of this node's fairies (the ids the server owns) as JSON values by
    /// client id: what a fairy reads of the others. A peer's state is never among them, even
    /// one that calls itself a fairy (a 300 KB fake "other fairy" once reached every prompt).
    pub fn presence(&self) -> HashMap<u64, serde_json::Value> {
        let owned: Vec<ClientID> = {
            let peers = self.lock_peers();
            peers
                .owners
                .iter()
                .filter(|(_, owner)| **owner == Owner::Server)
                .map(|(id, _)| *id)
                .collect()
        };
        self.states_of(owned)
    }

    /// The awareness states of the connections authenticated as `sub` (a person's own tabs):
    /// where a fairy finds the viewport of the person who prompted it, which no other peer can
    /// publish for them. Each is at most `--max-awareness-bytes`.
    pub fn presence_of(&self, sub: &str) -> Vec<serde_json::Value> {
        let ids: Vec<ClientID> = {
            let peers = self.lock_peers();
            peers
                .links
                .values()
                .filter(|link| link.sub == sub)
                .flat_map(|link| link.awareness_ids.iter().copied())
                .collect()
        };
        self.states_of(ids).into_values().collect()
    }

    fn states_of(&self, ids: Vec<ClientID>) -> HashMap<u64, serde_json::Value> {
        let awareness = self.lock_awareness();
        ids.into_iter()
            .filter_map(|id| Some((id.get(), awareness.state(id)?)))
            .collect()
    }
}
