//! The awareness states the server publishes for its own clients (fairies), held back until
//! the room's tick so that every fairy's change of the tick goes to each peer as one message
//! (docs/fairies.md "People and fairies in one room"). The room's awareness itself is updated at
//! once (a peer joining meanwhile gets the new states); only the broadcast waits.
//!
//! Owns the queued entries (the latest per client id) and the wake-up of the committer, which
//! sends them (`commit`). Knows nothing of fairies.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::Notify;
use yrs::block::ClientID;
use yrs::sync::awareness::{AwarenessUpdate, AwarenessUpdateEntry};

/// Server awareness entries waiting for the room's tick.
#[derive(Default)]
pub(crate) struct ServerPresence {
    entries: Mutex<HashMap<ClientID, AwarenessUpdateEntry>>,
    /// Signalled when entries are queued.
    pub queued: Notify,
}

impl ServerPresence {
    /// Queues the entries of `update`, replacing older ones of the same clients.
    pub fn queue(&self, update: AwarenessUpdate) {
        self.lock().extend(update.clients);
        self.queued.notify_one();
    }

    /// Takes what is queued as one update; `None` when nothing is.
    pub fn take(&self) -> Option<AwarenessUpdate> {
        let clients = std::mem::take(&mut *self.lock());
        (!clients.is_empty()).then_some(AwarenessUpdate { clients })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ClientID, AwarenessUpdateEntry>> {
        // A map of plain values, consistent after any panic.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(clock: u32, json: &str) -> AwarenessUpdateEntry {
        AwarenessUpdateEntry {
            clock,
            json: json.into(),
        }
    }

    #[test]
    fn keeps_the_latest_state_of_each_client() {
        let out = ServerPresence::default();
        assert!(out.take().is_none());
        for (clock, x) in [(1, 1), (2, 2), (3, 3)] {
            out.queue(AwarenessUpdate {
                clients: HashMap::from([(
                    ClientID::new(7),
                    entry(clock, &format!("{{\"x\":{x}}}")),
                )]),
            });
        }
        out.queue(AwarenessUpdate {
            clients: HashMap::from([(ClientID::new(8), entry(1, "null"))]),
        });
        let update = out.take().expect("queued");
        assert_eq!(update.clients.len(), 2);
        assert_eq!(update.clients[&ClientID::new(7)].clock, 3);
        assert!(out.take().is_none());
    }
}
