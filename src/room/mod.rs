//! Rooms: one Yrs document and its awareness per room, the peers joined to it, and the
//! pipeline that makes every update durable before any peer sees it.
//!
//! # Layout
//! - [`crate::ids`] (re-exported here): validated room names.
//! - [`peer`]: a joined peer (identity, bounded outbound queue, close switch).
//! - `pending`: the durable-then-broadcast queue fed by the document's update observer.
//! - `cold`: the ready answer to a peer that knows nothing of the document (cold load).
//! - `commit`: the per-room committer task (group commit, broadcast, compaction, idle unload).
//! - `presence`: awareness relay, ownership of client ids, timeouts.
//! - `remote`: the other nodes of a scale-out deployment (their updates, catch-up from the
//!   store, relayed awareness).
//! - [`roots`]: the server-owned roots and where each item of the document lives (root,
//!   nesting), against which peers' updates are checked.
//! - [`registry`]: loading each room once, unloading idle rooms, flushing all at shutdown.
//! - [`size`]: the document size cap (`--max-doc-bytes`) and the room's estimate of its size.
//! - `write`: writes the server makes on a person's behalf (REST, restore, rollback), each
//!   logged with that person and answered with its sequence number.
//! - `reclaim`: giving the memory of unloaded rooms back to the operating system.
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
//! document sees them (legacy JSON content, which yrs 0.28.1 misreads; see `decode`), and so
//! are writes under the server-owned roots and shared types nested too deep ([`roots`]: `1008`
//! and `1007`); and it is integrated under [`crate::contain`]. Each refusal closes only that peer's socket
//! ([`RoomError::BadUpdate`]: close code 1007, counted as `bad_update`) and leaves the room, its
//! document and its other peers as they were. Stored updates go through the same decoding.

mod actors;
mod coalesce;
mod cold;
mod commit;
mod decode;
pub mod peer;
mod pending;
mod presence;
pub(crate) mod reclaim;
pub use reclaim::cap_arenas;
pub mod registry;
mod remote;
pub mod roots;
pub mod size;
pub(crate) mod snapshot;
mod write;
pub mod write_budget;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use yrs::sync::{Awareness, Message, SyncMessage};
use yrs::{Doc, ReadTxn, StateVector, Transact, Update};

use crate::ids::RoomName;
pub(crate) use commit::compaction_rule;
pub use peer::{PeerControl, PeerInfo};
pub use registry::{LoadHook, Rooms};

use crate::clock::SharedClock;
use crate::origin::TxnOrigin;
use crate::protocol::{self, ProtocolError};
use crate::store::Store;
use decode::{decode_peer_update, decode_update};
use peer::PeerLink;
use pending::{Pending, PendingQueue};

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

/// Why a room refused or closed a peer. The server maps each to an HTTP status or close code.
#[derive(Debug, thiserror::Error)]
pub enum RoomError {
    /// The frame was not a valid y-protocols message.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// A document update yrs could not decode or apply.
    #[error("invalid document update: {0}")]
    BadUpdate(String),
    /// A peer's update writes or deletes under a root only the server writes.
    #[error("`{0}` is written by the server only")]
    ServerOwned(roots::ServerRoot),
    /// A peer's awareness state larger than `--max-awareness-bytes`.
    #[error("awareness state of {bytes} bytes exceeds the limit of {max}")]
    AwarenessTooBig {
        /// The state's size (its JSON).
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// A peer's awareness state that is not a JSON object (nor `null`, a removal).
    #[error("awareness state is not a JSON object: {0}")]
    BadAwareness(String),
    /// The peer did not read its frames fast enough; it will resync when it reconnects.
    #[error("outbound queue full: peer too slow")]
    SlowConsumer,
    /// The room has as many connections as allowed.
    #[error("room is full")]
    RoomFull,
    /// The process has as many rooms loaded as allowed.
    #[error("too many rooms loaded")]
    TooManyRooms,
    /// The store failed (or did not answer within `--store-timeout-ms`); the room is
    /// unloading and peers should reconnect.
    #[error("storage failure")]
    Store,
    /// The store's disk is full: the write was not kept (nor shown to anyone); writing
    /// resumes when space returns, reading goes on.
    #[error("the store's disk is full: writes are refused until space returns")]
    StoreFull,
    /// The room is unloading or the server shutting down.
    #[error("room closed")]
    Closed,
    /// The store refused a write of a fairy this node hosted, which another node took over
    /// while this one stalled (docs/scaling.md "Fencing"): the room reloads and peers should
    /// reconnect.
    #[error("a fairy's host was taken over by another node; the room reloads")]
    Fenced,
    /// The update would take the room's document past `--max-doc-bytes`.
    #[error(transparent)]
    DocTooLarge(#[from] size::TooLarge),
}

/// Why a room's committer stopped after a failed commit: what its waiting writers are told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Failure {
    /// It did not fail.
    None = 0,
    /// The store failed or did not answer in time ([`RoomError::Store`]).
    Store = 1,
    /// The store's disk is full ([`RoomError::StoreFull`]).
    Full = 2,
    /// A fairy's write was fenced ([`RoomError::Fenced`]).
    Fenced = 3,
}

impl Failure {
    fn from_u8(value: u8) -> Self {
        match value {
            1 => Failure::Store,
            2 => Failure::Full,
            3 => Failure::Fenced,
            _ => Failure::None,
        }
    }

    /// The error a writer of the failed room is answered (`None`: it did not fail).
    pub(crate) fn error(self) -> Option<RoomError> {
        match self {
            Failure::None => None,
            Failure::Store => Some(RoomError::Store),
            Failure::Full => Some(RoomError::StoreFull),
            Failure::Fenced => Some(RoomError::Fenced),
        }
    }
}

/// Limits and timings of rooms (from [`crate::config::ServeConfig`]).
#[derive(Clone)]
pub struct RoomConfig {
    /// Outbound frames queued per peer before it is closed.
    pub outbound_queue: usize,
    /// Updates queued for commit before producers wait.
    pub pending_capacity: usize,
    /// Time per peer between the starts of two commits (`--coalesce-us-per-peer`; capped by
    /// [`MAX_COALESCE`]); zero: commit as soon as the committer is free.
    pub coalesce_per_peer: Duration,
    /// Most peers per room.
    pub max_peers: usize,
    /// Idle time before an unused room is unloaded.
    pub idle_unload: Duration,
    /// Log length that triggers compaction into a snapshot.
    pub compact_every: u64,
    /// Awareness states not renewed for this long are removed (y-protocols: 30 s).
    pub awareness_timeout: Duration,
    /// Largest awareness state a peer may set, in bytes of its JSON.
    pub max_awareness_bytes: usize,
    /// How often the committer checks timeouts and idleness.
    pub sweep_every: Duration,
    /// The room's clock ([`crate::clock`]): awareness timestamps (its wall-clock
    /// milliseconds), the idle time before unloading and the committer's reconcile schedule
    /// (its instants); injected in tests.
    pub clock: SharedClock,
    /// The fan-out to the other nodes (`--pubsub`); `None` on a single node.
    pub fanout: Option<Arc<crate::pubsub::Fanout>>,
    /// Shape changes the fairies of one room may write per second (`--fairy-writes-per-sec`);
    /// 0: no limit.
    pub fairy_writes_per_sec: u32,
    /// Updates between two history checkpoints (`--history-checkpoint-every`; 0: none).
    pub history_checkpoint_every: u64,
    /// Largest encoded document a room may hold (`--max-doc-bytes`; 0: no cap).
    pub max_doc_bytes: u64,
    /// Where committed updates and fairies' events are reported (`--webhook-url`); `None`:
    /// nowhere, and nothing is recorded.
    pub webhooks: Option<crate::webhooks::Webhooks>,
    /// The yrs client id of this process's own writes into room documents
    /// ([`SERVER_CLIENT_ID`] on a single node; scaled out, one of this node's own from the
    /// store, `Store::writer_client_id`): two nodes writing one room at once must never make
    /// the same item id, or their documents would diverge.
    pub client_id: u64,
}

impl RoomConfig {
    /// Room settings from the server configuration, with the system clock.
    pub fn from_serve(config: &crate::config::ServeConfig) -> Self {
        RoomConfig {
            outbound_queue: config.outbound_queue.max(1),
            pending_capacity: 4096,
            coalesce_per_peer: Duration::from_micros(config.coalesce_us_per_peer),
            max_peers: config.max_connections_per_room,
            idle_unload: config.idle_unload_after(),
            compact_every: config.compact_every.max(1),
            awareness_timeout: Duration::from_secs(30),
            max_awareness_bytes: config.max_awareness_bytes,
            sweep_every: Duration::from_secs(1),
            clock: crate::clock::system(),
            fanout: None,
            fairy_writes_per_sec: config.fairy_writes_per_sec,
            history_checkpoint_every: config.history_checkpoint_every,
            max_doc_bytes: config.max_doc_bytes,
            webhooks: None,
            client_id: SERVER_CLIENT_ID,
        }
    }
}

/// One loaded room.
pub struct Room {
    name: RoomName,
    doc: Doc,
    awareness: Mutex<Awareness>,
    peers: Mutex<presence::Peers>,
    pending: Arc<PendingQueue>,
    cold: Arc<cold::ColdCache>,
    leases: AtomicUsize,
    closing: AtomicBool,
    /// The store refused some of the document's writes (a stale fence): it must not be read.
    fenced: AtomicBool,
    /// Why the committer stopped after a failed commit ([`Failure`]), as its `u8`.
    failure: std::sync::atomic::AtomicU8,
    config: RoomConfig,
    store: Arc<dyn Store>,
    /// The server's awareness states waiting for the room's tick.
    server_presence: coalesce::ServerPresence,
    /// The budget of its fairies' writes (`--fairy-writes-per-sec`).
    fairy_writes: write_budget::WriteBudget,
    /// Where the document's items are (see [`roots`]): peers' updates are checked against it.
    roots: Arc<Mutex<roots::RootIndex>>,
    /// A new room's schema, until the room's first write stores it ahead of that write.
    unwritten_schema: Mutex<Option<Bytes>>,
    /// Who writes with which origin (logged with every update).
    actors: Arc<actors::Actors>,
    /// The sequence number of the last update this room logged or received (0: none yet).
    committed_seq: std::sync::atomic::AtomicU64,
    /// The estimate of its encoded document, against `--max-doc-bytes` (see [`size`]).
    size: Arc<size::DocSize>,
    /// When it loaded, on its clock's monotonic time: awareness states' ages count from it.
    loaded_at: std::time::Instant,
}

impl Room {
    /// Builds a room from stored state; new rooms get the schema roots.
    pub(crate) fn new(
        name: RoomName,
        stored: crate::store::StoredRoom,
        store: Arc<dyn Store>,
        config: RoomConfig,
    ) -> Result<Arc<Self>, RoomError> {
        let doc = Doc::with_client_id(config.client_id);
        let is_new = stored.snapshot.is_none() && stored.updates.is_empty();
        // What it was built from bounds its encoding (see `size`); the schema is added below.
        let stored_bytes: u64 = stored
            .snapshot
            .iter()
            .chain(stored.updates.iter())
            .map(|b| b.len() as u64)
            .sum();
        let mut all_applied = true;
        {
            let mut txn = doc.transact_mut_with(TxnOrigin::System);
            for (i, bytes) in stored
                .snapshot
                .iter()
                .chain(stored.updates.iter())
                .enumerate()
            {
                let applied = decode_update(bytes)
                    .map_err(|e| e.to_string())
                    .and_then(|u| txn.apply_update(u).map_err(|e| e.to_string()));
                if let Err(error) = applied {
                    all_applied = false;
                    tracing::error!(room = %name, entry = i, %error, "skipping unreadable stored update");
                }
            }
        }
        // Peers' subdocuments are refused (`Refusal::Subdocument`), but a room stored before
        // that may hold some: yrs 0.28.1 keeps such a document alive through a reference cycle,
        // so this room's memory is not given back when it unloads.
        let subdocs = doc.transact().subdoc_guids().count();
        if subdocs > 0 {
            tracing::warn!(room = %name, subdocs, "room holds subdocuments; its memory is not freed when it unloads (yrs 0.28 leaks documents with subdocuments)");
        }
        // The cold-load answer starts as what the document was built from: the stored snapshot
        // (a full-state encoding) and the log after it, with no re-encoding of the document.
        // An unreadable entry leaves it empty, to be rebuilt from the document when needed.
        // A room never written gets the schema (docs/document-schema.md) now, so that its
        // first peers see the page, but it is stored only with the room's first real write
        // (`commit`): a join or a read of a room that nobody writes leaves nothing behind. The
        // schema is deterministic, so building it again on the next load gives the very items
        // a peer may already hold.
        let unwritten_schema = if is_new {
            let mut txn = doc.transact_mut_with(TxnOrigin::System);
            crate::canvas::schema::init_schema_in(&mut txn);
            Some(Bytes::from(txn.encode_update_v1()))
        } else {
            None
        };
        let size = Arc::new(size::DocSize::new(
            config.max_doc_bytes,
            stored_bytes + unwritten_schema.as_ref().map_or(0, |s| s.len() as u64),
        ));
        let grown = size.clone();
        let cold = Arc::new(cold::ColdCache::default());
        if all_applied {
            const EMPTY_DOC: &[u8] = &[0, 0];
            let base = stored.snapshot.as_deref().unwrap_or(EMPTY_DOC);
            let log = match &unwritten_schema {
                Some(schema) => vec![schema.clone()],
                None => stored.updates,
            };
            cold.install(base.to_vec(), log);
        }
        let pending = Arc::new(PendingQueue::new(config.pending_capacity));
        let queue = pending.clone();
        let tail = cold.clone();
        // Built at the first peer update (see `Room::handle`): a room only read (cold loads,
        // exports, fairies' reads) never pays for it.
        let index = Arc::new(Mutex::new(roots::RootIndex::default()));
        let indexed = index.clone();
        let actors = Arc::new(actors::Actors::default());
        let named = actors.clone();
        doc.observe_update_v1(
            "fairyring-room",
            move |txn: &yrs::TransactionMut, event: &yrs::UpdateEvent| {
                let from = match txn.origin().and_then(TxnOrigin::parse) {
                    Some(TxnOrigin::Client { conn, .. }) => Some(conn),
                    _ => None,
                };
                let update = Bytes::from(event.update.clone());
                grown.grow(update.len() as u64);
                tail.extend(&update);
                let mut index = indexed.lock().unwrap_or_else(|p| p.into_inner());
                if index.is_built()
                    && let Some(walked) = decode::walk_emitted(&update)
                {
                    walked.record_in(&mut index);
                }
                if from == Some(remote::REMOTE_CONN) {
                    // Another node's update, durable already: delivered, not stored again.
                    queue.push(Pending::Remote { update });
                } else {
                    let origin = txn.origin().map(|o| o.as_ref());
                    queue.push(Pending::Update {
                        update,
                        from,
                        actor: named.of(origin),
                        fence: named.fence_of(origin),
                    });
                }
            },
        )
        .map_err(|_| RoomError::Closed)?;
        // Awareness states' ages are durations: measured on the monotonic clock, from the
        // room's load, so that a step of the wall clock neither drops every state (forward)
        // nor keeps silent ones for good (back). Nothing of it leaves the process.
        let clock = config.clock.clone();
        let loaded_at = clock.now();
        let awareness = Awareness::with_clock(doc.clone(), move || {
            monotonic_millis(clock.as_ref(), loaded_at)
        });
        // Idle from the start (after a grace for the handshake that loaded it to join): a room
        // loaded for an export, the fairy API or a lost connection that never gets a peer or
        // a lease unloads like one whose last peer left.
        let peers = presence::Peers {
            idle_since: Some(tokio::time::Instant::from_std(config.clock.now()) + NEW_ROOM_GRACE),
            ..Default::default()
        };
        Ok(Arc::new(Room {
            name,
            doc,
            awareness: Mutex::new(awareness),
            peers: Mutex::new(peers),
            pending,
            cold,
            leases: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            fenced: AtomicBool::new(false),
            failure: std::sync::atomic::AtomicU8::new(Failure::None as u8),
            server_presence: coalesce::ServerPresence::default(),
            fairy_writes: write_budget::WriteBudget::new(config.fairy_writes_per_sec),
            config,
            store,
            roots: index,
            unwritten_schema: Mutex::new(unwritten_schema),
            actors,
            committed_seq: std::sync::atomic::AtomicU64::new(stored.last_seq),
            size,
            loaded_at,
        }))
    }

    /// Names the actor logged with every update written with `origin` from now on (a fairy's
    /// request — its own origin and its undo manager's, which reverts its tentative versions —
    /// a server action on a person's behalf; peers are named when they join).
    pub fn name_actor(&self, origin: impl Into<yrs::Origin>, actor: &crate::history::actor::Actor) {
        let origin = origin.into();
        self.actors.set(origin.as_ref(), actor.to_json());
        // A fairy's own writes (not a person's acceptance of its suggestion) carry its fence.
        if let crate::history::actor::Actor::Fairy {
            id,
            accepted_by: None,
            ..
        } = actor
        {
            self.actors.fence_origin_for(origin.as_ref(), id);
        }
    }

    /// Scaled out, by the node that just took fairy `fairy`'s lease, before it hosts the
    /// fairy: takes the fairy's next fencing token from the store, carried from now on with
    /// every write of the fairy here (docs/scaling.md "Fencing"), so that once another node
    /// takes the fairy over, whatever this node still writes for it is refused by the store.
    /// Nothing on a store that takes no fences (a single node).
    pub async fn take_fence(&self, fairy: &str) -> Result<(), RoomError> {
        match self.store.next_fence(&self.name, fairy).await {
            Ok(Some(generation)) => {
                let origin = yrs::Origin::from(&TxnOrigin::fairy(fairy));
                self.actors.fence_fairy(fairy, generation, origin.as_ref());
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(error) => {
                tracing::warn!(room = %self.name, fairy, %error, "could not take a fairy's fencing token");
                Err(RoomError::Store)
            }
        }
    }

    /// The fencing token fairy `fairy`'s writes carry here, if any.
    pub fn fence_of(&self, fairy: &str) -> Option<u64> {
        self.actors.fence_of_fairy(fairy)
    }

    /// Fairy `fairy`'s hosting here ended: its writes carry no fence any more.
    pub fn drop_fence(&self, fairy: &str) {
        self.actors.unfence_fairy(fairy);
    }

    /// Forgets the actor of `origin` (its updates are logged without one from now on).
    pub fn forget_actor(&self, origin: impl Into<yrs::Origin>) {
        self.actors.remove(origin.into().as_ref());
    }

    /// Waits for the sequence number under which the next update written with connection id
    /// `conn` is logged (a server action writing as a connection of its own). Call
    /// [`Room::forget_seq`] if the write turned out to change nothing.
    pub fn wait_seq(&self, conn: u64) -> tokio::sync::oneshot::Receiver<u64> {
        self.actors.wait_seq(conn)
    }

    /// Stops waiting for the update of `conn`.
    pub fn forget_seq(&self, conn: u64) {
        self.actors.forget_seq(conn);
    }

    /// The sequence number of the last update the room logged, or heard of from another node.
    pub fn committed_seq(&self) -> u64 {
        self.committed_seq.load(Ordering::SeqCst)
    }

    /// The budget of the room's fairy writes (docs/fairies.md "People and fairies in one room").
    pub fn fairy_writes(&self) -> &write_budget::WriteBudget {
        &self.fairy_writes
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

    fn lock_peers(&self) -> MutexGuard<'_, presence::Peers> {
        self.peers.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_awareness(&self) -> MutexGuard<'_, Awareness> {
        self.awareness.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Joins a peer: returns its handle and the receiving end of its outbound queue, already
    /// holding the server's sync step 1 and the current awareness states.
    pub fn join(
        self: &Arc<Self>,
        info: PeerInfo,
    ) -> Result<(Peer, mpsc::Receiver<Bytes>), RoomError> {
        let (tx, rx) = mpsc::channel(self.config.outbound_queue.max(2));
        let control = Arc::new(PeerControl::default());
        let link = PeerLink {
            tx,
            control: control.clone(),
            awareness_ids: Default::default(),
            sub: info.sub.clone(),
        };
        {
            // Registered and greeted under the peers lock, so no awareness change can fall
            // between the snapshot it receives and the first broadcast it is part of. (A
            // document update in that gap reaches it through its own sync step 1.)
            let mut peers = self.lock_peers();
            if self.closing.load(Ordering::SeqCst) {
                return Err(RoomError::Closed);
            }
            if peers.links.len() >= self.config.max_peers {
                return Err(RoomError::RoomFull);
            }
            link.send(protocol::sync_step1(self.doc.transact().state_vector()));
            if let Some(states) = self.awareness_snapshot() {
                link.send(states);
            }
            peers.links.insert(info.conn, link);
            peers.idle_since = None;
        }
        let origin = TxnOrigin::Client {
            conn: info.conn,
            sub: info.sub.clone(),
        };
        let actor = crate::history::actor::Actor::user(info.sub.clone(), info.name.clone());
        self.name_actor(&origin, &actor);
        crate::metrics::global().connections.inc();
        Ok((
            Peer {
                room: self.clone(),
                info,
                control,
            },
            rx,
        ))
    }

    fn leave(&self, conn: u64) {
        let removed = {
            let mut peers = self.lock_peers();
            let link = peers.links.remove(&conn);
            if peers.links.is_empty() {
                peers.idle_since = Some(self.now());
            }
            link
        };
        if let Some(link) = removed {
            self.forget_actor(&TxnOrigin::Client {
                conn,
                sub: link.sub.clone(),
            });
            crate::metrics::global().connections.dec();
            self.remove_awareness(link.awareness_ids.into_iter().collect());
        }
    }

    /// Sends a frame to every peer except `except`, closing peers whose queue is full.
    fn broadcast(&self, frame: &Bytes, except: Option<u64>) {
        let mut peers = self.lock_peers();
        peers
            .links
            .retain(|conn, link| Some(*conn) == except || link.send(frame.clone()));
    }

    /// Sends a frame to one peer.
    fn send_to(&self, conn: u64, frame: Bytes) {
        let mut peers = self.lock_peers();
        let keep = peers.links.get(&conn).map(|link| link.send(frame));
        if keep == Some(false) {
            peers.links.remove(&conn);
        }
    }

    /// Handles one inbound frame from a peer.
    async fn handle(&self, info: &PeerInfo, frame: &[u8]) -> Result<(), RoomError> {
        self.pending.wait_for_space().await;
        crate::metrics::global().bytes_in.inc_by(frame.len() as u64);
        match protocol::decode(frame)? {
            Message::Sync(SyncMessage::SyncStep1(sv)) => {
                // Behind every update already queued: nothing reaches a peer before it is durable.
                for frame in self.sync_step2_for(&sv) {
                    self.pending.push(Pending::Reply {
                        conn: info.conn,
                        frame,
                    });
                }
            }
            Message::Sync(SyncMessage::SyncStep2(update) | SyncMessage::Update(update)) => {
                if !info.can_write {
                    crate::metrics::global().drop_message("read_only_update");
                    self.send_to(
                        info.conn,
                        protocol::permission_denied("read-only: document updates are not accepted"),
                    );
                    return Ok(());
                }
                let origin = TxnOrigin::Client {
                    conn: info.conn,
                    sub: info.sub.clone(),
                };
                self.apply_peer_update(origin, &update)?;
                crate::metrics::global().updates_in.inc();
            }
            Message::Awareness(update) => {
                crate::metrics::global().awareness_in.inc();
                self.apply_peer_awareness(info.conn, update)?;
            }
            Message::AwarenessQuery => {
                if let Some(states) = self.awareness_snapshot() {
                    self.send_to(info.conn, states);
                }
            }
            // Clients do not send auth messages; y-websocket ignores them too.
            Message::Auth(_) => {}
            Message::Custom(tag, _) => return Err(ProtocolError::UnknownType(tag).into()),
        }
        Ok(())
    }
}

impl Room {
    /// Vets and applies a writer's v1 update exactly as a peer's (a REST write goes through
    /// here too): decoded and checked against the room ([`decode_peer_update`]: server-owned
    /// roots, nesting, hostile encodings), refused when it carries the server's own client id
    /// beyond what the room has or would take the document past `--max-doc-bytes`, then
    /// integrated with `origin`. Returns whether the document changed (an update that repeats
    /// what the room has changes nothing and emits nothing).
    pub(crate) fn apply_peer_update(
        &self,
        origin: TxnOrigin,
        update: &[u8],
    ) -> Result<bool, RoomError> {
        // Lock order: the document, then the index (the update observer, inside a write
        // transaction, takes the index too). The read transaction keeps the document as
        // the index and the state vector describe it until the update is vetted.
        let (decoded, server_end, room_state) = {
            let txn = self.doc.transact();
            let room_state = txn.state_vector();
            let mut index = self.roots.lock().unwrap_or_else(|p| p.into_inner());
            if !index.is_built() {
                let full = txn.encode_state_as_update_v1(&StateVector::default());
                if let Some(walked) = decode::walk_emitted(&full) {
                    walked.record_in(&mut index);
                }
                index.mark_built();
            }
            let (decoded, server_end) =
                decode_peer_update(update, &room_state, &index, self.config.client_id)?;
            (decoded, server_end, room_state)
        };
        // Only the server writes as its own client id: a peer's update may repeat
        // server blocks the room has, never add some (see `decode_peer_update`).
        let server = self.config.client_id;
        let known = room_state.get(&yrs::block::ClientID::new(server));
        if server_end > known {
            return Err(RoomError::BadUpdate(format!(
                "update carries blocks of the server's client id {server} up to clock {server_end}; the room has {known}"
            )));
        }
        // While the store's disk is full, an update that would change the document is refused
        // before it is applied (one that repeats what the room has, a reconnecting reader's
        // sync step 2, passes).
        if self.store.is_full() && adds_to(&decoded, &room_state, &self.doc) {
            return Err(RoomError::StoreFull);
        }
        // An update adds at most its own length to the encoding; near the cap, only what the
        // room lacks of it counts (a sync step 2 may repeat what the room has), and one that
        // adds no content (it only deletes) adds nothing: deleting is always possible.
        self.size.admit_refined(
            update.len() as u64,
            || self.measure(),
            || {
                let sv = yrs::updates::encoder::Encode::encode_v1(&room_state);
                crate::contain::contain(|| {
                    let diff = yrs::diff_updates_v1(update, &sv).ok()?;
                    let adds = <yrs::Update as yrs::updates::decoder::Decode>::decode_v1(&diff)
                        .ok()?
                        .state_vector();
                    Some(if adds.is_empty() {
                        0
                    } else {
                        diff.len() as u64
                    })
                })
                .ok()
                .flatten()
                .unwrap_or(update.len() as u64)
            },
        )?;
        self.apply_client_update(origin, decoded)
    }

    /// The exact size of the document's full-state encoding.
    fn measure(&self) -> u64 {
        let txn = self.doc.transact();
        txn.encode_state_as_update_v1(&StateVector::default()).len() as u64
    }

    /// Whether a server write that adds at most `bound` bytes keeps the document within
    /// `--max-doc-bytes` (a fairy's action, checked before its transaction; see [`size`] and,
    /// inside a transaction, [`Room::admit_in`]).
    pub fn admit_write(&self, bound: u64) -> Result<(), size::TooLarge> {
        self.size.admit(bound, || self.measure())
    }

    /// The answer to a sync step 1: the diff against the peer's state vector or, for a peer
    /// that knows nothing of this document (a cold load), the ready full-state answer of
    /// [`cold::ColdCache`], rebuilt from the document only when it was dropped.
    fn sync_step2_for(&self, sv: &StateVector) -> Vec<Bytes> {
        // Held throughout: no update can commit between reading the document and the answer.
        let txn = self.doc.transact();
        let knows_nothing = sv.is_empty() || {
            let ours = txn.state_vector();
            sv.iter()
                .all(|(client, clock)| *clock == 0 || ours.get(client) == 0)
        };
        if !knows_nothing {
            return vec![protocol::sync_step2(txn.encode_diff_v1(sv))];
        }
        // Only a base with no tail is answered as it is: a sync step 2 followed by an update
        // frame would let a client (y-websocket's `synced`) see the base alone as "synced"
        // before the tail arrives. With a tail, the answer is encoded afresh and installed.
        if let Some(frames) = self.cold.frames()
            && let [only] = frames.as_slice()
        {
            return vec![only.clone()];
        }
        let full = txn.encode_state_as_update_v1(&StateVector::default());
        self.size.measured(full.len() as u64);
        vec![self.cold.install(full, Vec::new()).0]
    }

    /// Replaces the cold-load answer by a full-state encoding of the document (compaction
    /// makes one anyway); returns that encoding.
    pub(crate) fn encode_and_install_cold(&self) -> Bytes {
        let txn = self.doc.transact();
        let full = txn.encode_state_as_update_v1(&StateVector::default());
        self.size.measured(full.len() as u64);
        self.cold.install(full, Vec::new()).1
    }

    /// Applies a peer's decoded update. yrs is not panic-free on hostile input; a panic while
    /// integrating is contained here, logged and answered like any invalid update.
    /// Returns whether the document changed.
    fn apply_client_update(&self, origin: TxnOrigin, update: Update) -> Result<bool, RoomError> {
        let applied = crate::contain::contain(std::panic::AssertUnwindSafe(|| {
            let mut txn = self.doc.transact_mut_with(origin);
            txn.apply_update(update).map(|()| txn.has_changes())
        }));
        match applied {
            Ok(Ok(changed)) => Ok(changed),
            Ok(Err(error)) => Err(RoomError::BadUpdate(error.to_string())),
            Err(panic) => {
                tracing::error!(room = %self.name, %panic, "yrs panicked while applying a peer's update");
                Err(RoomError::BadUpdate(
                    "update could not be integrated".into(),
                ))
            }
        }
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

/// A joined peer's handle; dropping it leaves the room (and removes its awareness states).
pub struct Peer {
    room: Arc<Room>,
    info: PeerInfo,
    control: Arc<PeerControl>,
}

impl Peer {
    /// Handles one inbound binary frame. An error means the connection must be closed.
    pub async fn handle(&self, frame: &[u8]) -> Result<(), RoomError> {
        self.room.handle(&self.info, frame).await
    }

    /// The switch the room uses to close this peer.
    pub fn control(&self) -> &Arc<PeerControl> {
        &self.control
    }

    /// The room joined.
    pub fn room(&self) -> &Arc<Room> {
        &self.room
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.room.leave(self.info.conn);
    }
}

/// Whether `update` would change a document whose state vector is `room_state`: blocks past
/// it, or deletions the document has not made (checked only while the store is full).
fn adds_to(update: &yrs::Update, room_state: &StateVector, doc: &Doc) -> bool {
    let theirs = update.state_vector();
    if theirs
        .iter()
        .any(|(client, clock)| *clock > room_state.get(client))
    {
        return true;
    }
    let deletes = update.delete_set();
    if deletes.is_empty() {
        return false;
    }
    let deleted = doc.transact().snapshot().delete_set;
    deletes.iter().any(|(client, ranges)| {
        let Some((_, made)) = deleted.iter().find(|(c, _)| *c == client) else {
            return true;
        };
        // The document's ranges are merged: a deletion it made lies within one of them.
        ranges.iter().any(|range| {
            !made
                .iter()
                .any(|done| done.start <= range.start && range.end <= done.end)
        })
    })
}

/// Milliseconds from `origin` to now on `clock`'s monotonic time (what awareness states' ages
/// are measured in).
fn monotonic_millis(clock: &dyn crate::clock::Clock, origin: std::time::Instant) -> u64 {
    u64::try_from(clock.now().saturating_duration_since(origin).as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::decode::tests::{FUZZ_FIND, json_updates};
    use super::*;
    use yrs::{Array, WriteTxn};

    /// Through the real apply path: the writer is refused, the room is untouched, the other
    /// peer hears nothing and stays joined, and the document still encodes and reloads.
    #[tokio::test]
    async fn refused_json_update_leaves_the_room_untouched() {
        let store: Arc<dyn Store> = Arc::new(crate::store::memory::MemoryStore::default());
        let config = RoomConfig::from_serve(&crate::config::ServeConfig::for_test());
        let rooms = Rooms::new(store, config, 4);
        let room = rooms
            .get(&RoomName::parse("json").expect("name"))
            .await
            .expect("room");
        let info = |conn, can_write| PeerInfo {
            conn,
            name: None,
            sub: format!("u{conn}"),
            can_write,
        };
        let (reader, mut reader_rx) = room.join(info(1, false)).expect("join");
        room.flushed().await;
        while reader_rx.try_recv().is_ok() {}
        let before = room
            .doc()
            .transact()
            .encode_state_as_update_v1(&StateVector::default());
        let mut frames: Vec<Vec<u8>> = vec![FUZZ_FIND.to_vec()];
        frames.extend(
            json_updates()
                .into_iter()
                .map(|(_, update)| protocol::update(update).to_vec()),
        );
        for (i, frame) in frames.iter().enumerate() {
            let (writer, _rx) = room.join(info(10 + i as u64, true)).expect("join");
            let error = writer.handle(frame).await.expect_err("refused");
            let (code, metric, reason) = crate::server::error::close_for(&error);
            assert_eq!((code, metric), (1007, "bad_update"), "frame {i}");
            assert!(reason.contains("ContentJSON"), "frame {i}: {reason}");
        }
        room.flushed().await;
        assert!(reader_rx.try_recv().is_err(), "the reader heard nothing");
        assert!(reader.control().reason().is_none(), "the reader stays");
        let after = room
            .doc()
            .transact()
            .encode_state_as_update_v1(&StateVector::default());
        assert_eq!(before, after, "the document is untouched");
        // A legitimate update still goes through and reaches the reader.
        let other = Doc::new();
        let mut txn = other.transact_mut();
        txn.get_or_insert_array("t").insert(&mut txn, 0, "ok");
        let good = protocol::update(txn.encode_update_v1());
        drop(txn);
        let (writer, _rx) = room.join(info(99, true)).expect("join");
        writer.handle(&good).await.expect("accepted");
        room.flushed().await;
        assert!(
            reader_rx.try_recv().is_ok(),
            "the reader got the good update"
        );
        drop((writer, reader));
        rooms.shutdown().await;
    }
}
