//! Scaled out: each fairy hosted by exactly one node, the holder of its lease
//! (docs/scaling.md "Fairies across nodes"; the leases themselves are
//! [`crate::pubsub::lease`]).
//!
//! Owns the lease keepers: for every fairy of a loaded room that this node does not host, one
//! keeper tries to take its lease; having it, the keeper hosts the fairy (its task as on a
//! single node), renews the lease, republishes the fairy's presence so other nodes keep it, and
//! gives the lease up when the hosting ends (room unloaded, fairy dismissed, shutdown). A
//! renewal refused (another node holds it) or failing for most of a lease's life stops the
//! hosting as a shutdown does: the running request is reverted, nothing stays locked, and the
//! next host says the work was interrupted. Before hosting, the keeper takes the fairy's next
//! fencing token from the store (docs/scaling.md "Fencing"): a host that stalled past its lease
//! and wakes up after another node took the fairy over finds its writes refused by the store.
//! A sweeper re-examines every loaded room each
//! second, so that the fairies of a dead node move to a node with their room loaded once their
//! leases expire. Also answers where a fairy is hosted, for forwarding its API calls.
//!
//! Must not touch the runtime's internals: it starts and stops hostings through the hub.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::agent::host::hub::{FairyHub, FairyView, HubError};
use crate::agent::host::inbox::Inbox;
use crate::agent::presence::beacon::Beacon;
use crate::agent::state::fairy::{FairyEntity, list_fairies};
use crate::ids::FairyId;
use crate::ids::RoomName;
use crate::pubsub::lease::{LEASE_RENEW, LEASE_TTL, RedisLeases, Taken};
use crate::room::Room;

/// How often every loaded room's fairies are looked at for leases to take.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// Every this many renewals the host republishes a fairy's presence (other nodes time out
/// states not renewed for 30 s; see docs/protocol.md "Awareness").
const PRESENCE_EVERY_RENEWALS: u32 = 6;
/// A holder that could not renew for this long stops hosting before its lease may expire.
const GIVE_UP_AFTER: Duration = LEASE_TTL.saturating_sub(Duration::from_secs(2));
/// How often an invitation looks whether its fairy is hosted yet.
const INVITE_POLL: Duration = Duration::from_millis(20);

/// Ids of lease keepers (to tell a keeper's entry from a later one's).
static NEXT_KEEPER: AtomicU64 = AtomicU64::new(1);

/// Where a fairy's API calls are served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// On this node (single node, hosted here, or no such fairy: the route answers).
    Here,
    /// On the node at this HTTP address (`HOST:PORT`), which holds its lease.
    At(String),
}

impl FairyHub {
    fn leases(&self) -> Option<&Arc<RedisLeases>> {
        self.inner.leases.as_ref()
    }

    /// Starts a lease keeper for every fairy of `room` that this node neither hosts nor
    /// already keeps (lock order: the hub's map, then the keepers).
    pub(super) fn keep_leases(&self, room: &Arc<Room>, entities: Vec<FairyEntity>) {
        let Some(leases) = self.leases().cloned() else {
            return;
        };
        let map = self.lock();
        let mut keepers = self.inner.keepers.lock().unwrap_or_else(|p| p.into_inner());
        for entity in entities {
            let key = (room.name().clone(), entity.id.clone());
            if map.contains_key(&key) || keepers.contains_key(&key) {
                continue;
            }
            let keeper = NEXT_KEEPER.fetch_add(1, Ordering::Relaxed);
            keepers.insert(key, keeper);
            let hub = self.clone();
            let room = room.clone();
            let leases = leases.clone();
            self.inner.tracker.spawn(async move {
                hub.keep(&leases, &room, entity.clone()).await;
                hub.forget_keeper(&(room.name().clone(), entity.id), keeper);
            });
        }
    }

    fn forget_keeper(&self, key: &(RoomName, FairyId), keeper: u64) {
        let mut keepers = self.inner.keepers.lock().unwrap_or_else(|p| p.into_inner());
        if keepers.get(key) == Some(&keeper) {
            keepers.remove(key);
        }
    }

    /// One keeper: takes the lease if free, hosts the fairy while it holds it, gives it up.
    async fn keep(&self, leases: &RedisLeases, room: &Arc<Room>, entity: FairyEntity) {
        let client_id = Beacon::draw_client_id();
        let (name, id) = (room.name().clone(), entity.id.clone());
        match leases.acquire(&name, id.as_str(), client_id).await {
            Ok(Taken::Held) => return,
            Ok(Taken::Fresh) => {}
            Ok(Taken::Moved) => {
                tracing::info!(room = %name, fairy = %id, "fairy lease taken over from another node");
                crate::metrics::global().fairy_lease_moves.inc();
            }
            Err(error) => {
                tracing::warn!(room = %name, fairy = %id, %error, "could not take a fairy lease");
                return;
            }
        }
        let present = list_fairies(room.doc()).iter().any(|e| e.id == id);
        // Before the fairy writes anything here: its new fencing token, so that whatever a
        // former host still writes for it is refused (docs/scaling.md "Fencing").
        if present && room.take_fence(id.as_str()).await.is_err() {
            let _ = leases.release(&name, id.as_str(), client_id, false).await;
            return;
        }
        let stop = self.inner.shutdown.child_token();
        let inbox = if present && !room.is_closing() && !stop.is_cancelled() {
            let mut map = self.lock();
            self.host(&mut map, room, entity, stop.clone(), Some(client_id));
            map.get(&(name.clone(), id.clone()))
                .map(|(hosted, _)| hosted.inbox.clone())
        } else {
            None
        };
        let Some(inbox) = inbox else {
            room.drop_fence(id.as_str());
            let _ = leases
                .release(&name, id.as_str(), client_id, !present)
                .await;
            return;
        };
        let lost = renew_while_hosted(leases, room, &id, &inbox, client_id).await;
        if lost {
            tracing::warn!(room = %name, fairy = %id, "fairy lease lost: its hosting here stops");
            stop.cancel();
            inbox.ended().await;
            // Every write of the hosting carried its fence already (taken when written).
            room.drop_fence(id.as_str());
        } else {
            room.drop_fence(id.as_str());
            // Dismissed: its record goes too; otherwise the next host counts a move.
            let gone = !list_fairies(room.doc()).iter().any(|e| e.id == id);
            if let Err(error) = leases.release(&name, id.as_str(), client_id, gone).await {
                tracing::warn!(room = %name, fairy = %id, %error, "could not give a fairy lease up; it expires");
            }
        }
    }

    /// Looks at every loaded room each [`SWEEP_EVERY`] for fairies whose lease is free.
    pub(super) fn spawn_lease_sweeper(&self) {
        let hub = self.clone();
        let shutdown: CancellationToken = self.inner.shutdown.clone();
        self.inner.tracker.spawn(async move {
            let mut tick = tokio::time::interval(SWEEP_EVERY);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tick.tick() => {}
                }
                for room in hub.inner.rooms.loaded() {
                    if !room.is_closing() {
                        hub.ensure_hosted(&room);
                    }
                }
            }
        });
    }

    /// Scaled out, after an invitation inserted `entity`: waits until a node hosts it (this
    /// one, normally) and answers its view.
    pub(super) async fn invited_leased(
        &self,
        room: &Arc<Room>,
        entity: FairyEntity,
    ) -> Result<FairyView, HubError> {
        let deadline = Instant::now() + crate::agent::host::hub::START_TIMEOUT;
        let key = (room.name().clone(), entity.id.clone());
        loop {
            if self.lock().contains_key(&key) {
                if let Err(error) = self.started(room, &entity.id).await {
                    crate::agent::state::fairy::remove_fairy(room.doc(), &entity.id);
                    return Err(error);
                }
                let view = self.view(room, entity);
                return Ok(self.view_anywhere(room, view).await);
            }
            // Another node took it first (it had the room loaded): hosted there.
            if let Some(leases) = self.leases()
                && let Ok(Some(holder)) = leases.holder(room.name(), entity.id.as_str()).await
                && holder.node != leases.node()
            {
                return Ok(FairyView {
                    client_id: Some(holder.client_id),
                    host: Some(holder.addr),
                    ..self.view(room, entity)
                });
            }
            if Instant::now() >= deadline {
                crate::agent::state::fairy::remove_fairy(room.doc(), &entity.id);
                return Err(HubError::NotStarted("no node took its lease".into()));
            }
            self.ensure_hosted(room);
            tokio::time::sleep(INVITE_POLL).await;
        }
    }

    /// Scaled out, a view names the fairy's host, and the client id it has there.
    pub(super) async fn view_anywhere(&self, room: &Arc<Room>, view: FairyView) -> FairyView {
        let Some(leases) = self.leases() else {
            return view;
        };
        match leases.holder(room.name(), view.entity.id.as_str()).await {
            Ok(Some(holder)) => FairyView {
                client_id: Some(holder.client_id),
                host: Some(holder.addr),
                ..view
            },
            _ => view,
        }
    }

    /// Where the API calls of fairy `id` are served: here, or on the node holding its lease.
    /// [`HubError::Moving`] while no node hosts it (its last host died, its lease not yet
    /// expired or not yet taken).
    pub async fn placement(&self, room: &RoomName, id: &FairyId) -> Result<Placement, HubError> {
        let Some(leases) = self.leases().cloned() else {
            return Ok(Placement::Here);
        };
        let loaded = self.room(room).await?;
        let key = (room.clone(), id.clone());
        if self.lock().contains_key(&key) {
            return Ok(Placement::Here);
        }
        // A fairy invited a moment ago on another node is looked up in the store.
        if !self.knows(&loaded, id).await? {
            return Ok(Placement::Here);
        }
        match leases.holder(room, id.as_str()).await? {
            Some(holder) if holder.node != leases.node() => Ok(Placement::At(holder.addr)),
            // Nobody, or this node between taking the lease and hosting.
            _ => Err(HubError::Moving),
        }
    }
}

/// Renews the lease of `fairy` until its hosting ends (`false`) or the lease is lost (`true`).
async fn renew_while_hosted(
    leases: &RedisLeases,
    room: &Arc<Room>,
    fairy: &FairyId,
    inbox: &Inbox,
    client_id: u64,
) -> bool {
    let mut renewed_at = Instant::now();
    let mut renewals = 0u32;
    let mut tick = tokio::time::interval_at(Instant::now() + LEASE_RENEW, LEASE_RENEW);
    loop {
        tokio::select! {
            _ = inbox.ended() => return false,
            _ = tick.tick() => {}
        }
        let renewal = tokio::time::timeout(
            LEASE_RENEW,
            leases.renew(room.name(), fairy.as_str(), client_id),
        )
        .await;
        match renewal {
            Ok(Ok(true)) => {
                renewed_at = Instant::now();
                renewals = renewals.wrapping_add(1);
                if renewals.is_multiple_of(PRESENCE_EVERY_RENEWALS) {
                    room.renew_presence(client_id);
                }
            }
            Ok(Ok(false)) => return true,
            Ok(Err(_)) | Err(_) => {
                if renewed_at.elapsed() >= GIVE_UP_AFTER {
                    return true;
                }
            }
        }
    }
}
