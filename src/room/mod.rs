//! Rooms: one Yrs document and its awareness per room, the peers joined to it, and the
//! pipeline that makes every update durable before any peer sees it.
//!
//! # Layout
//! Folders by job; what other modules use is re-exported here (`crate::room::…`).
//! - [`vet`]: vetting a writer's update before any document sees it — `decode` (hostile
//!   encodings refused), [`roots`](vet::roots) (server-owned roots, nesting) and [`size`](vet::size) (the
//!   `--max-doc-bytes` cap and the room's estimate of its size). Pure and sans-IO: bytes in,
//!   verdicts out; the fuzz targets and property tests drive them directly.
//! - `commit`: the pipeline that makes every update durable before any peer sees it — the
//!   document's observer feeding the queue (`intake`, `pending`), the per-room committer
//!   task and its loop, one commit as named steps (`pipeline`, `append`), pacing and the
//!   server's awareness held to the tick (`pace`, `coalesce`), the log's upkeep (compaction,
//!   history checkpoints, the snapshot thread), and other nodes' updates (`inbound`).
//! - `peers`: who is joined and what they are sent — [`peer`](peers::peer) (identity, bounded outbound
//!   queue, close switch), `session` (join, a peer's frames, leave, broadcast), `sync` and
//!   `cold` (the answer to a sync step 1, ready for a peer that knows nothing), `presence`
//!   (awareness relay, ownership of client ids, timeouts) and `remote` (the other nodes of a
//!   scale-out deployment: their updates and relayed awareness).
//! - `writes`: what changes the document and who it is logged as — `apply` (a peer's or REST
//!   update vetted, admitted and integrated), `write` (the server's writes on a person's
//!   behalf: restore, rollback), [`write_budget`](writes::write_budget) (`--fairy-writes-per-sec`), `actors` (the
//!   actor and fence logged with each origin's updates).
//! - this file: the [`Room`] and its wiring; `load` (its document built from the store),
//!   `error`, `config`; [`registry`] (loading each room once, unloading idle rooms, flushing
//!   all at shutdown) and `reclaim` (giving the memory of unloaded rooms back to the system).
//!
//! Rooms never touch sockets (the server gives them frames and takes frames from a queue) nor
//! databases directly (they call the [`crate::store::Store`] trait).
//!
//! # Origins
//! Peers' updates are applied in transactions whose origin is
//! [`TxnOrigin::Client`](crate::origin::TxnOrigin) (`client:CONN:SUB`); fairies write with
//! `fairy:ID`. Any transaction on [`Room::doc`], whoever makes it, is persisted and broadcast.
//!
//! # Hostile updates
//! yrs is not hardened against hostile input, so a peer's update passes three guards before
//! it can change anything: it is decoded under [`crate::contain`] (the decoder panics on some
//! overflowing lengths); updates yrs decodes but mishandles are refused structurally before any
//! document sees them (legacy JSON content, which yrs 0.28.1 misreads; see `vet::decode`), and
//! so are writes under the server-owned roots and shared types nested too deep ([`roots`](vet::roots): `1008`
//! and `1007`); and it is integrated under [`crate::contain`]. Each refusal closes only that peer's socket
//! ([`RoomError::BadUpdate`]: close code 1007, counted as `bad_update`) and leaves the room, its
//! document and its other peers as they were. Stored updates go through the same decoding.

mod commit;
mod config;
mod error;
mod load;
pub mod peers;
pub(crate) mod reclaim;
pub mod registry;
pub mod vet;
pub mod writes;

pub use config::{Checkpoints, RoomConfig};
pub(crate) use error::Failure;
pub use error::RoomError;
pub use peers::session::Peer;
pub use reclaim::cap_arenas;

/// What `fairyring bench --history-updates` compacts by (developer tooling).
#[cfg(feature = "dev-tools")]
pub(crate) use commit::compaction_rule;
pub(crate) use commit::snapshot;
pub use peers::peer::{PeerControl, PeerInfo};
pub use registry::{LoadHook, Rooms};
use vet::size;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use yrs::Doc;
use yrs::sync::Awareness;

use crate::ids::RoomName;
use crate::store::Store;
use commit::coalesce::ServerPresence;
use commit::intake::Intake;
use commit::pending::PendingQueue;
use peers::cold::ColdCache;
use peers::presence::{self, Peers};
use writes::actors::Actors;

/// The yrs client id of every room document's own writes (schema, fairies) on a single node
/// (scaled out, each node has one of its own: [`RoomConfig::client_id`]). It is small on
/// purpose: Yjs clients draw random 32-bit ids, so in a tie between a fairy's revert and a
/// user's concurrent write of the same key, the user's value wins (see
/// [`crate::agent::apply::tentative`]). Reusing it after a restart is safe because nothing the server
/// wrote reaches a peer before it is durable, and a reloaded document continues its clock.
pub const SERVER_CLIENT_ID: u64 = 1;

/// How long a room nobody has joined yet waits before its idle time starts: the connection
/// whose handshake loaded it joins after the upgrade, which must not find it unloading.
const NEW_ROOM_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// The longest a room holds a commit back to send it together with what follows
/// ([`RoomConfig::coalesce_per_peer`]).
pub const MAX_COALESCE: Duration = Duration::from_millis(5);

/// One loaded room.
pub struct Room {
    name: RoomName,
    doc: Doc,
    awareness: Mutex<Awareness>,
    peers: Mutex<Peers>,
    pending: Arc<PendingQueue>,
    cold: Arc<ColdCache>,
    leases: AtomicUsize,
    closing: AtomicBool,
    /// Cancelled when `closing` is set ([`Room::closing_signal`]): who works in the room (a
    /// fairy's request) stops at once instead of noticing at its next look.
    closed: tokio_util::sync::CancellationToken,
    /// The store refused some of the document's writes (a stale fence): it must not be read.
    fenced: AtomicBool,
    /// Why the committer stopped after a failed commit ([`Failure`]), as its `u8`.
    failure: std::sync::atomic::AtomicU8,
    config: RoomConfig,
    store: Arc<dyn Store>,
    /// The server's awareness states waiting for the room's tick.
    server_presence: ServerPresence,
    /// The budget of its fairies' writes (`--fairy-writes-per-sec`).
    fairy_writes: writes::write_budget::WriteBudget,
    /// Where the document's items are (see [`roots`]): peers' updates are checked against it.
    roots: Arc<Mutex<vet::roots::RootIndex>>,
    /// A new room's schema, until the room's first write stores it ahead of that write.
    unwritten_schema: Mutex<Option<Bytes>>,
    /// Who writes with which origin (logged with every update).
    actors: Arc<Actors>,
    /// The sequence number of the last update this room logged or received (0: none yet).
    committed_seq: std::sync::atomic::AtomicU64,
    /// The estimate of its encoded document, against `--max-doc-bytes` (see [`size`]).
    size: Arc<size::DocSize>,
    /// When it loaded, on its clock's monotonic time: awareness states' ages count from it.
    loaded_at: std::time::Instant,
}

impl Room {
    /// Builds a room from stored state (new rooms get the schema roots; see [`load`]) and
    /// wires its parts: the document's observer feeds the commit pipeline ([`commit`]).
    pub(crate) fn new(
        name: RoomName,
        stored: crate::store::StoredRoom,
        store: Arc<dyn Store>,
        config: RoomConfig,
    ) -> Result<Arc<Self>, RoomError> {
        let load::Loaded {
            doc,
            unwritten_schema,
            size,
            cold,
            last_seq,
        } = load::Loaded::from_stored(&name, stored, &config);
        let pending = Arc::new(PendingQueue::new(config.pending_capacity));
        // Built at the first peer update (see `Room::apply_peer_update`): a room only read
        // (cold loads, exports, fairies' reads) never pays for it.
        let roots = Arc::new(Mutex::new(vet::roots::RootIndex::default()));
        let actors = Arc::new(Actors::default());
        Intake {
            pending: pending.clone(),
            size: size.clone(),
            cold: cold.clone(),
            roots: roots.clone(),
            actors: actors.clone(),
        }
        .observe(&doc)?;
        let (awareness, loaded_at) = presence::awareness_of(&doc, &config.clock);
        // Idle from the start (after a grace for the handshake that loaded it to join): a room
        // loaded for an export, the fairy API or a lost connection that never gets a peer or
        // a lease unloads like one whose last peer left.
        let peers =
            Peers::idle_from(tokio::time::Instant::from_std(config.clock.now()) + NEW_ROOM_GRACE);
        Ok(Arc::new(Room {
            name,
            doc,
            awareness: Mutex::new(awareness),
            peers: Mutex::new(peers),
            pending,
            cold,
            leases: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            closed: tokio_util::sync::CancellationToken::new(),
            fenced: AtomicBool::new(false),
            failure: std::sync::atomic::AtomicU8::new(Failure::None as u8),
            server_presence: ServerPresence::default(),
            fairy_writes: writes::write_budget::WriteBudget::new(config.fairy_writes_per_sec),
            config,
            store,
            roots,
            unwritten_schema: Mutex::new(unwritten_schema),
            actors,
            committed_seq: std::sync::atomic::AtomicU64::new(last_seq),
            size,
            loaded_at,
        }))
    }

    /// The sequence number of the last update the room logged, or heard of from another node.
    pub fn committed_seq(&self) -> u64 {
        self.committed_seq.load(Ordering::SeqCst)
    }

    /// The room's name.
    pub fn name(&self) -> &RoomName {
        &self.name
    }

    /// The room's document. Every write transaction on it is persisted and broadcast; write with
    /// an origin from [`TxnOrigin`] (`doc.transact_mut_with(TxnOrigin::fairy(id))`).
    pub fn doc(&self) -> &Doc {
        &self.doc
    }

    /// Where the room's fairies report their events (`--webhook-url`), if anywhere.
    pub fn webhooks(&self) -> Option<&crate::webhooks::Webhooks> {
        self.config.webhooks.as_ref()
    }

    /// The store the room lives in (for data kept beside the room's log, such as fairies'
    /// private state; the room's own log is written only by the room).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Number of peers joined.
    pub fn peer_count(&self) -> usize {
        self.lock_peers().links.len()
    }

    /// Keeps the room loaded while the lease lives (a working fairy holds one).
    pub fn lease(self: &Arc<Self>) -> Option<RoomLease> {
        // Under the peers lock, which the unload decision holds too: a lease is either counted
        // before the room decides to unload, or refused because it is closing.
        let _peers = self.lock_peers();
        if self.closing.load(Ordering::SeqCst) {
            return None;
        }
        self.leases.fetch_add(1, Ordering::SeqCst);
        Some(RoomLease { room: self.clone() })
    }

    /// Waits until every queued update is durable and delivered (or the room failed: see
    /// [`Room::failure`]).
    pub async fn flushed(&self) {
        self.pending.flushed().await
    }

    /// Why the room's committer stopped after a failed commit, if it did.
    pub(crate) fn failure(&self) -> Failure {
        Failure::from_u8(self.failure.load(Ordering::SeqCst))
    }

    /// Records why the committer stopped, and releases everyone who waits for it: writers
    /// waiting for their sequence number, for delivery or for space in the queue.
    pub(crate) fn record_failure(&self, failure: Failure) {
        self.failure.store(failure as u8, Ordering::SeqCst);
        self.actors.fail_waiters();
        self.pending.fail();
    }

    /// Whether a write may be applied now: not while the store's disk is known to be full
    /// (the write would enter the document and could not be kept; docs/operations.md).
    pub(crate) fn admit_store_write(&self) -> Result<(), RoomError> {
        if self.store.is_full() {
            Err(RoomError::StoreFull)
        } else {
            Ok(())
        }
    }

    /// A new room's schema, the first time its log is written (see `Room::new`).
    pub(crate) fn take_unwritten_schema(&self) -> Option<Bytes> {
        self.unwritten_schema
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    fn lock_peers(&self) -> MutexGuard<'_, Peers> {
        self.peers.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_awareness(&self) -> MutexGuard<'_, Awareness> {
        self.awareness.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Keeps a room loaded (see [`Room::lease`]).
pub struct RoomLease {
    room: Arc<Room>,
}

impl RoomLease {
    /// The leased room.
    pub fn room(&self) -> &Arc<Room> {
        &self.room
    }
}

impl Drop for RoomLease {
    fn drop(&mut self) {
        if self.room.leases.fetch_sub(1, Ordering::SeqCst) == 1 {
            // The last lease: the idle time starts now, not when the last peer left.
            let now = self.room.now();
            let mut peers = self.room.lock_peers();
            if peers.links.is_empty() {
                peers.idle_since = Some(now);
            }
        }
    }
}
