//! Hosting fairies: one task per fairy per loaded room instance, driven by its [`Inbox`]
//! (interrupts — a prompt is an interrupt with input, a cancel one without — and dismissal,
//! never refused while the fairy is hosted; rejections of its requests, which interrupt it and
//! take a request back, answered on a channel), with a broadcast of its [`AgentEvent`]s. The hub
//! brings a room's fairies to life when the room loads (the hub listens to the room registry,
//! [`Rooms::when_loaded`]), and again when a fairy route is called (a hosting that failed is
//! retried then) — restoring their private state from the store — and lets an idle fairy's task
//! end when its room unloads (after its last state is written).
//!
//! Owns the map of hosted fairies (a short critical section, never held across `.await`) and
//! the per-room limits on them: how many a room may hold ([`HubLimits::max_per_room`]) and the
//! room's hourly model-token budget, applied by wrapping each fairy's model in a
//! [`BudgetedModel`]. A fairy's runtime is built in its own task, outside that lock; an
//! invitation waits until it runs, and fails (`HubError::NotStarted`, the fairy removed
//! again) if it could not be built.
//!
//! Scaled out (`--pubsub`), a fairy is hosted only by the node holding its lease
//! ([`lease`], docs/scaling.md "Fairies across nodes"); without it, every fairy of a loaded
//! room is hosted here, as always.

pub mod ask;
pub mod group;
mod known;
mod lease;
mod remote;

pub use lease::Placement;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::agent::actions::Registry;
use crate::agent::actions::runtime::full_registry;
use crate::agent::apply::ledger::RevertOutcome;
use crate::agent::host::budget::{BudgetLimits, BudgetedModel, Metering, Payers, TokenBudget};
use crate::agent::host::inbox::{Inbox, RevertJob, RevertRefused, Signal};
use crate::agent::host::usage::{RoomUsage, UsageBook};
use crate::agent::projects::book::ProjectBooks;
use crate::agent::projects::waits::{Deliver, Peers, Report, WaitRegistry};
use crate::agent::runtime::events::{AgentEvent, EVENT_BUFFER, EndReason};
use crate::agent::runtime::revert::RevertError;
use crate::agent::runtime::{FairyRuntime, Hosting};
use crate::agent::state::Interrupt;
use crate::agent::state::fairy::{
    FairyEntity, FairyError, insert_fairy, list_fairies, remove_fairy,
};
use crate::agent::state::store as state_store;
use crate::agent::state::store::{StateSaver, StateSync};
use crate::agent::state::{FairyState, RuntimeConfig};
use crate::ids::FairyId;
use crate::ids::RequestId;
use crate::ids::RoomName;
use crate::llm::Model;
use crate::room::{Room, RoomError, Rooms};
use crate::store::StoreError;

/// How often an idle fairy checks whether its room unloaded.
const ROOM_CHECK: Duration = Duration::from_secs(2);
/// Longest wait for a dismissed fairy to clean up.
const DISMISS_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for a fairy's pending state to be stored before the history route reads it.
const STATE_SYNC_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait of an invitation for the fairy's runtime (its undo manager waits at most
/// [`crate::agent::apply::tentative::QUIET_PATIENCE`] for a quiet document).
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for a fairy to take a request back (it may still be starting).
const REVERT_TIMEOUT: Duration = Duration::from_secs(15);

/// Why a fairy operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The room could not be loaded.
    #[error(transparent)]
    Room(#[from] RoomError),
    /// The fairy is unknown or its input invalid.
    #[error(transparent)]
    Fairy(#[from] FairyError),
    /// The store failed to read or write a fairy's private state.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The server is shutting down.
    #[error("shutting down")]
    ShuttingDown,
    /// The fairy's runtime could not be built (its room's document never got quiet).
    #[error("the fairy could not start: {0}")]
    NotStarted(String),
    /// The room already holds the most fairies allowed.
    #[error("this room already has {0} fairies, the most allowed")]
    TooManyFairies(usize),
    /// The request could not be taken back.
    #[error(transparent)]
    Revert(#[from] RevertError),
    /// The fairy did not get to a rejection in time, or too many wait.
    #[error("the fairy is busy: {0}")]
    Busy(String),
    /// A fairy is in a live project (or a group prompt names fewer than two).
    #[error("{0}")]
    FairyInProject(String),
    /// No such project in the room.
    #[error("no project '{0}' in this room")]
    ProjectNotFound(String),
    /// A group prompt that cannot be carried out as given.
    #[error("{0}")]
    InvalidGroup(String),
    /// Scaled out: no node hosts the fairy at the moment (its lease is moving).
    #[error("the fairy is moving to another node; retry shortly")]
    Moving,
    /// Scaled out: the fairy leases could not be read (Redis).
    #[error("fairy leases unavailable: {0}")]
    Leases(#[from] crate::pubsub::PubSubError),
    /// A model-token budget the prompt would draw on is spent.
    #[error("{detail}")]
    BudgetExhausted {
        /// Whose budget.
        budget: crate::llm::error::BudgetScope,
        /// Seconds until it holds a token again.
        retry_after: u64,
        /// What to tell the person.
        detail: String,
    },
}

/// A request taken back: what happened to its changes of the canvas, and (review mode) the
/// pending suggestions rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reverted {
    /// Shapes taken back and kept.
    pub outcome: RevertOutcome,
    /// Its suggestions that were pending and are now rejected.
    pub rejected_suggestions: Vec<crate::ids::SuggestionId>,
}

/// Bounds on the fairies of a room, and what their model calls cost.
#[derive(Debug, Clone)]
pub struct HubLimits {
    /// Most fairies in one room (`--max-fairies-per-room`).
    pub max_per_room: usize,
    /// Model tokens per room per hour (`--fairy-token-budget`); 0: unlimited.
    pub token_budget: u64,
    /// Model tokens per person per day (`--fairy-token-budget-person`); 0: unlimited.
    pub person_budget: u64,
    /// Model tokens per project per day (`--fairy-token-budget-project`); 0: unlimited.
    pub project_budget: u64,
    /// Prices per model (`--llm-prices`).
    pub prices: crate::llm::prices::Prices,
    /// Cache writes go to Anthropic's 1-hour cache (`--llm-cache-ttl 1h`).
    pub one_hour_cache: bool,
}

impl Default for HubLimits {
    fn default() -> Self {
        HubLimits {
            max_per_room: 16,
            token_budget: 1_000_000,
            person_budget: 0,
            project_budget: 0,
            prices: crate::llm::prices::Prices::defaults(),
            one_hour_cache: false,
        }
    }
}

/// Where a hosting's runtime stands.
#[derive(Debug, Clone, PartialEq)]
enum Readiness {
    /// Its task is building it.
    Starting,
    /// It runs.
    Ready,
    /// It could not be built; why.
    Failed(String),
}

#[derive(Clone)]
struct Hosted {
    room: Arc<Room>,
    inbox: Arc<Inbox>,
    events: broadcast::Sender<AgentEvent>,
    state: StateSync,
    ready: watch::Receiver<Readiness>,
}

/// A fairy as listed by the API.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FairyView {
    /// The entity.
    #[serde(flatten)]
    pub entity: FairyEntity,
    /// Its awareness client id, when hosted.
    pub client_id: Option<u64>,
    /// Scaled out: the HTTP address of the node hosting it, when one does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// Hosted fairies by room and id, with their awareness client id (which tells two hostings of
/// one fairy apart).
type HostedMap = HashMap<(RoomName, FairyId), (Hosted, u64)>;

struct Inner {
    rooms: Rooms,
    model: Arc<dyn Model>,
    registry: Arc<Registry>,
    config: RuntimeConfig,
    max_per_room: usize,
    metering: Arc<Metering>,
    hosted: Mutex<HostedMap>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    /// How long a fairy's task waits for a quiet document to build its runtime.
    quiet_patience: Duration,
    /// Project leaders waiting for tasks.
    waits: Arc<WaitRegistry>,
    /// The projects of the rooms whose fairies it hosts.
    projects: ProjectBooks,
    /// Scaled out: this node's fairy leases (`None`: a single node hosts every fairy).
    leases: Option<Arc<crate::pubsub::lease::RedisLeases>>,
    /// Scaled out: the fairies a lease keeper of this node works on, by keeper id.
    keepers: Mutex<HashMap<(RoomName, FairyId), u64>>,
    /// Scaled out: the messages to fairies hosted by other nodes ([`remote`]).
    remote: std::sync::OnceLock<remote::Remote>,
}

/// The hub's interrupt delivery for runtimes (weak: a runtime never keeps the hub alive).
struct HubDeliver(Weak<Inner>);

impl Deliver for HubDeliver {
    fn interrupt(&self, room: &RoomName, fairy: &FairyId, interrupt: Interrupt) -> bool {
        let Some(inner) = self.0.upgrade() else {
            return false;
        };
        let hub = FairyHub { inner };
        let inbox = hub
            .lock()
            .get(&(room.clone(), fairy.clone()))
            .map(|(h, _)| h.inbox.clone());
        match inbox {
            Some(inbox) => inbox.interrupt(interrupt).is_ok(),
            // Scaled out, it may be hosted by another node.
            None => hub.interrupt_elsewhere(room, fairy, interrupt),
        }
    }

    fn hosts(&self, room: &RoomName, fairy: &FairyId) -> bool {
        let Some(inner) = self.0.upgrade() else {
            return false;
        };
        let hub = FairyHub { inner };
        hub.inner.leases.is_none() || hub.hosts_here(room, fairy)
    }

    fn report(&self, room: &RoomName, leader: &FairyId, report: Report) {
        if let Some(inner) = self.0.upgrade() {
            FairyHub { inner }.report_elsewhere(room, leader, report);
        }
    }
}

/// Every hosted fairy of the process.
#[derive(Clone)]
pub struct FairyHub {
    inner: Arc<Inner>,
}

impl FairyHub {
    /// Refuses a prompt of `person` in `room` when a model-token budget its first call would
    /// draw on (the room's, the person's) is spent: nothing of it is applied or written.
    pub fn check_budget(&self, room: &RoomName, person: &str) -> Result<(), HubError> {
        let payers = Payers {
            person: Some(person),
            project: None,
        };
        match self.inner.metering.budget.check(room, payers) {
            Err(error) => {
                let crate::llm::LlmError::BudgetExhausted {
                    budget,
                    retry_in_secs,
                    ..
                } = error
                else {
                    return Ok(());
                };
                Err(HubError::BudgetExhausted {
                    budget,
                    retry_after: retry_in_secs,
                    detail: error.to_string(),
                })
            }
            Ok(()) => Ok(()),
        }
    }

    /// The sizes of the model-token budgets.
    pub fn budget_limits(&self) -> BudgetLimits {
        self.inner.metering.budget.limits()
    }

    /// What the fairies of `room` used and cost on this node over the last hour and day, per
    /// fairy, person and project.
    pub fn usage(&self, room: &RoomName) -> RoomUsage {
        let now = self.inner.rooms.clock().unix_millis();
        self.inner.metering.book.room(room, now)
    }

    /// A hub over the room registry, thinking with `model`, within `limits`.
    pub fn new(
        rooms: Rooms,
        model: Arc<dyn Model>,
        config: RuntimeConfig,
        limits: HubLimits,
    ) -> Self {
        Self::with_leases(rooms, model, config, limits, None)
    }

    /// [`FairyHub::new`], scaled out when `leases` is given: a fairy is hosted here only
    /// while this node holds its lease.
    pub fn with_leases(
        rooms: Rooms,
        model: Arc<dyn Model>,
        config: RuntimeConfig,
        limits: HubLimits,
        leases: Option<crate::pubsub::lease::RedisLeases>,
    ) -> Self {
        let patience = crate::agent::apply::tentative::QUIET_PATIENCE;
        Self::build(rooms, model, config, limits, leases, patience)
    }

    /// The hub, its fairies' tasks waiting up to `quiet_patience` for a quiet document. It
    /// hosts the fairies of every room the registry loads from now on (a weak listener: the
    /// registry never keeps the hub alive).
    fn build(
        rooms: Rooms,
        model: Arc<dyn Model>,
        config: RuntimeConfig,
        limits: HubLimits,
        leases: Option<crate::pubsub::lease::RedisLeases>,
        quiet_patience: Duration,
    ) -> Self {
        let scaled = leases.is_some();
        // One clock for the rooms, the budget and the fairies: the rooms' (crate::clock).
        let budget = TokenBudget::with_clock(
            BudgetLimits {
                room_per_hour: limits.token_budget,
                person_per_day: limits.person_budget,
                project_per_day: limits.project_budget,
            },
            rooms.clock().clone(),
        );
        let metering = Arc::new(Metering {
            budget,
            book: Arc::new(UsageBook::default()),
            prices: limits.prices.clone(),
            one_hour_cache: limits.one_hour_cache,
        });
        let projects =
            ProjectBooks::new(rooms.store().clone()).with_webhooks(rooms.webhooks().cloned());
        let hub = FairyHub {
            inner: Arc::new(Inner {
                rooms,
                model,
                registry: Arc::new(full_registry()),
                config,
                max_per_room: limits.max_per_room,
                metering,
                hosted: Mutex::new(HashMap::new()),
                shutdown: CancellationToken::new(),
                tracker: TaskTracker::new(),
                quiet_patience,
                waits: Arc::new(WaitRegistry::default()),
                projects,
                leases: leases.map(Arc::new),
                keepers: Mutex::new(HashMap::new()),
                remote: std::sync::OnceLock::new(),
            }),
        };
        if scaled {
            hub.spawn_lease_sweeper();
        }
        let weak = Arc::downgrade(&hub.inner);
        hub.inner.rooms.when_loaded(move |room| {
            if let Some(inner) = weak.upgrade() {
                let hub = FairyHub { inner };
                hub.ensure_hosted(room);
                hub.forget_after_unload(room);
            }
        });
        hub
    }

    /// Once `room` has unloaded, forgets what the hub keeps of it beside its fairies: its
    /// projects' book, unless a runtime still holds it (then [`FairyHub::bury`] forgets it
    /// after dropping the runtime). Rooms come and go for hours (a soak moves to fresh ones
    /// every two minutes); the books of those gone used to stay for good.
    fn forget_after_unload(&self, room: &Arc<Room>) {
        let closed = room.closing_signal();
        let name = room.name().clone();
        let rooms = self.inner.rooms.clone();
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            closed.cancelled().await;
            rooms.wait_unloaded(&name).await;
            // Loaded again meanwhile: that instance's own unload forgets it.
            if let Some(inner) = weak.upgrade()
                && rooms.get_loaded(&name).is_none()
            {
                inner.projects.forget(&name);
            }
        });
    }

    fn lock(&self) -> MutexGuard<'_, HostedMap> {
        self.inner.hosted.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The loaded room (its fairies hosted).
    pub(super) async fn loaded_room(&self, name: &RoomName) -> Result<Arc<Room>, HubError> {
        self.room(name).await
    }

    async fn room(&self, name: &RoomName) -> Result<Arc<Room>, HubError> {
        if self.inner.shutdown.is_cancelled() {
            return Err(HubError::ShuttingDown);
        }
        let room = self.inner.rooms.get(name).await?;
        self.ensure_hosted(&room);
        Ok(room)
    }

    /// Hosts every fairy of this room instance that is not hosted yet (after a load or a
    /// reload) and republishes the presence of the others.
    pub fn ensure_hosted(&self, room: &Arc<Room>) {
        if self.inner.shutdown.is_cancelled() {
            return;
        }
        // Only fairies the store knows have entries (peers cannot write `fairies`, and the load
        // hook removes entries the store does not know); the cap holds for hosting too.
        let mut entities = list_fairies(room.doc());
        entities.truncate(self.inner.max_per_room);
        if self.inner.leases.is_some() {
            return self.keep_leases(room, entities);
        }
        // Checked and hosted under one lock, so two peers joining at once cannot host a fairy
        // twice. Lock order: the hub's map, then the room's locks (the registry calls the hub
        // only from a load, holding none of its locks).
        let mut map = self.lock();
        for entity in entities {
            let key = (room.name().clone(), entity.id.clone());
            match map.get(&key) {
                Some((h, _)) if Arc::ptr_eq(&h.room, room) => {}
                _ => self.host(&mut map, room, entity, self.inner.shutdown.clone(), None),
            }
        }
    }

    /// Records the fairy as hosted (under the map lock: at most once) and spawns its task,
    /// which builds the runtime outside the lock: creating its undo manager waits for a quiet
    /// moment of the document, which must not hold up the socket or HTTP task that triggered
    /// the hosting, nor every other room's hosting behind the hub's lock.
    /// Its task stops (as at shutdown) when `stop` is cancelled; `client_id` is its awareness
    /// client id when already drawn (for its lease).
    fn host(
        &self,
        map: &mut HostedMap,
        room: &Arc<Room>,
        entity: FairyEntity,
        stop: CancellationToken,
        client_id: Option<u64>,
    ) {
        let inbox = Arc::new(Inbox::new());
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let (ready_tx, ready) = watch::channel(Readiness::Starting);
        let key = (room.name().clone(), entity.id.clone());
        let span = tracing::info_span!("fairy", room = %room.name(), fairy = %entity.id);
        let mut hosting = Hosting {
            quiet_patience: self.inner.quiet_patience,
            clock: self.inner.rooms.clock().clone(),
            ..Hosting::new(events.clone())
        };
        if let Some(id) = client_id {
            hosting.client_id = id;
        }
        let client_id = hosting.client_id;
        let model: Arc<dyn Model> = Arc::new(BudgetedModel::new(
            self.inner.model.clone(),
            self.inner.metering.clone(),
            room.name().clone(),
            entity.id.clone(),
        ));
        let saver = StateSaver::spawn_fenced(
            room.store().clone(),
            room.name().clone(),
            entity.id.clone(),
            room.fence_of(entity.id.as_str()),
        )
        .with_layout(self.inner.config.state_layout);
        let hosted = Hosted {
            room: room.clone(),
            inbox: inbox.clone(),
            events: events.clone(),
            state: saver.sync(),
            ready,
        };
        map.insert(key.clone(), (hosted, client_id));
        let hub = self.clone();
        let shutdown = stop;
        let room = room.clone();
        // On the fairy runtime, below the people's work (docs/fairies.md "People and fairies
        // in one room").
        crate::agent::host::executor::spawn(
            &self.inner.tracker,
            async move {
                let built = FairyRuntime::new(
                    room,
                    entity,
                    model,
                    hub.inner.registry.clone(),
                    hub.inner.config,
                    hosting,
                    saver,
                )
                .await;
                let failed = |error: String| {
                    tracing::error!(%error, "fairy could not be hosted");
                    let _ = events.send(AgentEvent::Error {
                        message: format!("the fairy could not start: {error}"),
                    });
                    inbox.close();
                    hub.unlist(&key, client_id);
                    ready_tx.send_replace(Readiness::Failed(error));
                };
                let mut runtime = match built {
                    Ok(runtime) => runtime,
                    Err(error) => return failed(error.to_string()),
                };
                // The room's projects, from the store (before its state: a restored member
                // resumes from them).
                let projects = match hub.projects_for_hosting(&key.0, &key.1).await {
                    Ok(projects) => projects,
                    Err(error) => {
                        failed(format!("its room's projects could not be loaded: {error}"));
                        hub.bury(key.0.clone(), runtime);
                        return;
                    }
                };
                runtime.set_peers(Peers {
                    waits: hub.inner.waits.clone(),
                    deliver: Arc::new(HubDeliver(Arc::downgrade(&hub.inner))),
                    projects,
                });
                // Restoring may write (what an interrupted request left half-drawn is removed,
                // and the chat says so): not while the store's disk is full, where that write
                // would fail the room again and close its readers. It waits for space, as long
                // as the room instance lasts.
                let room = runtime.room().clone();
                if !writable(&room, &shutdown).await {
                    failed("its room closed while its store was full".into());
                    hub.bury(key.0.clone(), runtime);
                    return;
                }
                if let Err(error) = runtime.restore().await {
                    // Not hosted with a blank state that would overwrite the stored one;
                    // the next use of the room tries again.
                    failed(format!("its state could not be loaded: {error}"));
                    hub.bury(key.0.clone(), runtime);
                    return;
                }
                ready_tx.send_replace(Readiness::Ready);
                if let Some(resume) = runtime.resume_project() {
                    // Its part of a live project goes on where the restart stopped it.
                    let _ = inbox.interrupt(Interrupt {
                        input: Some(resume),
                        mode: None,
                    });
                }
                let mut runtime = run_host(runtime, &inbox, shutdown).await;
                runtime.close_state().await;
                inbox.close();
                hub.unlist(&key, client_id);
                hub.bury(key.0, runtime);
            }
            .instrument(span),
        );
    }

    /// Removes the map entry of the hosting with awareness id `client_id` (not a later one).
    fn unlist(&self, key: &(RoomName, FairyId), client_id: u64) {
        let mut map = self.lock();
        if map.get(key).is_some_and(|(_, id)| *id == client_id) {
            map.remove(key);
        }
    }

    /// Waits until the hosting of fairy `id` in `room` has its runtime (or failed).
    async fn started(&self, room: &Arc<Room>, id: &FairyId) -> Result<(), HubError> {
        let key = (room.name().clone(), id.clone());
        let ready = self.lock().get(&key).map(|(h, _)| h.ready.clone());
        let Some(mut ready) = ready else {
            return Err(HubError::NotStarted("the fairy is not hosted".into()));
        };
        // A hosting waiting for the store's disk to have space again (see `writable`): the
        // caller is answered at once that the store is full.
        if room.store().is_full() && matches!(*ready.borrow(), Readiness::Starting) {
            return Err(HubError::Store(StoreError::Full));
        }
        let outcome = tokio::time::timeout(START_TIMEOUT, async {
            match ready.wait_for(|r| !matches!(r, Readiness::Starting)).await {
                Ok(r) => r.clone(),
                Err(_) => Readiness::Failed("its task ended".into()),
            }
        })
        .await
        .unwrap_or_else(|_| Readiness::Failed("it took too long to start".into()));
        match outcome {
            Readiness::Failed(why) => Err(HubError::NotStarted(why)),
            _ => Ok(()),
        }
    }

    /// Invites a new fairy into the room, unless it holds [`HubLimits::max_per_room`] already;
    /// its sprite first appears at `position` (page coordinates; the state's default when
    /// `None`).
    #[allow(clippy::too_many_arguments)]
    pub async fn invite(
        &self,
        room: &RoomName,
        name: Option<&str>,
        personality: Option<&str>,
        hat: Option<&str>,
        sub: &str,
        apply: crate::review::ApplyMode,
        position: Option<(f64, f64)>,
    ) -> Result<FairyView, HubError> {
        let mut entity = FairyEntity::invite(name, personality, hat, sub)?;
        entity.apply = apply;
        let room = self.room(room).await?;
        let max = self.inner.max_per_room;
        if list_fairies(room.doc()).len() >= max {
            return Err(HubError::TooManyFairies(max));
        }
        // It appears where the invitation says, else around the centre of its inviter's view
        // (from their own connections' awareness: no other peer can publish it for them),
        // spread from the room's other fairies (docs/fairies.md "Inviting").
        let default = FairyState::default();
        let position = position.unwrap_or_else(|| {
            let view = crate::agent::runtime::viewport::user_viewport(&room.presence_of(sub), sub)
                .filter(|v| v.w > 0.0 && v.h > 0.0);
            crate::agent::presence::spawn_point(
                view.map_or(default.position, |v| (v.center_x(), v.center_y())),
                view.map(|v| (v.w, v.h)),
                list_fairies(room.doc()).len(),
            )
        });
        let state = FairyState {
            position,
            ..default
        };
        // Stored before the entity appears, so that every fairy has a stored state and a
        // `runtime` key a client writes into its map is never taken for a legacy one.
        state_store::save(room.store().as_ref(), room.name(), &entity.id, &state).await?;
        let admitted = {
            // Counted again and inserted under the map's lock, so concurrent invitations
            // cannot overshoot the cap (lock order: the hub's map, then the room's document).
            let _map = self.lock();
            let admitted = list_fairies(room.doc()).len() < max;
            if admitted {
                insert_fairy(room.doc(), &entity);
            }
            admitted
        };
        if !admitted {
            // A concurrent invitation took the last place: no state of this one stays.
            room.store()
                .side()
                .delete_fairy_state(room.name(), entity.id.as_str())
                .await?;
            return Err(HubError::TooManyFairies(max));
        }
        self.ensure_hosted(&room);
        if self.inner.leases.is_some() {
            return self.invited_leased(&room, entity).await;
        }
        if let Err(error) = self.started(&room, &entity.id).await {
            // Nothing of it stays: the invitation fails as a whole.
            remove_fairy(room.doc(), &entity.id);
            return Err(error);
        }
        // Answered once the entry is durable and sent to every peer and node: the server's
        // own writes otherwise wait for the room's tick.
        room.flushed().await;
        Ok(self.view(&room, entity))
    }

    fn view(&self, room: &Arc<Room>, entity: FairyEntity) -> FairyView {
        let key = (room.name().clone(), entity.id.clone());
        let client_id = self.lock().get(&key).map(|(_, id)| *id);
        FairyView {
            entity,
            client_id,
            host: None,
        }
    }

    /// The room's fairies.
    pub async fn list(&self, room: &RoomName) -> Result<Vec<FairyView>, HubError> {
        let room = self.room(room).await?;
        let mut views = Vec::new();
        for entity in list_fairies(room.doc()) {
            let view = self.view(&room, entity);
            views.push(self.view_anywhere(&room, view).await);
        }
        Ok(views)
    }

    async fn hosted(&self, room: &RoomName, id: &FairyId) -> Result<(Arc<Room>, Hosted), HubError> {
        let r = self.room(room).await?;
        let hosted = self
            .lock()
            .get(&(room.clone(), id.clone()))
            .map(|(h, _)| h.clone())
            .ok_or_else(|| FairyError::NotFound(id.to_string()))?;
        Ok((r, hosted))
    }

    /// Interrupts the fairy (docs/fairies.md `interrupt({input, mode})`): its current request is
    /// cancelled, it switches to `mode` if given, then runs `input` if given. Never refused
    /// while the fairy is hosted: an interrupt not handled yet merges with this one. Reached from
    /// outside through [`FairyHub::prompt`] and [`FairyHub::cancel`] ([`ask`]).
    async fn interrupt(
        &self,
        room: &RoomName,
        id: &FairyId,
        interrupt: Interrupt,
    ) -> Result<(), HubError> {
        let (_, hosted) = self.hosted(room, id).await?;
        hosted
            .inbox
            .interrupt(interrupt)
            .map_err(|_| HubError::ShuttingDown)
    }

    /// Takes back what the fairy changed in request `request` (docs/fairies.md "Overrule"):
    /// a running request of the fairy is interrupted first; then
    /// [`FairyRuntime::reject_request`] runs in the fairy's task.
    pub async fn revert(
        &self,
        room: &RoomName,
        id: &FairyId,
        request: RequestId,
        by: &crate::review::service::Person,
    ) -> Result<Reverted, HubError> {
        let (loaded, hosted) = self.hosted(room, id).await?;
        // A take-back is a write: refused at once while the store's disk is full, rather than
        // queued for the fairy to carry out whenever space returns.
        loaded.admit_store_write()?;
        let (reply, answer) = tokio::sync::oneshot::channel();
        hosted
            .inbox
            .revert(RevertJob {
                request: request.clone(),
                reply,
            })
            .map_err(|refused| match refused {
                RevertRefused::Closed(_) => HubError::ShuttingDown,
                RevertRefused::Full => HubError::Busy(refused.to_string()),
            })?;
        let outcome = match tokio::time::timeout(REVERT_TIMEOUT, answer).await {
            Ok(Ok(outcome)) => outcome?,
            // Dismissed (or its task ended) before it got to it.
            Ok(Err(_)) => return Err(FairyError::NotFound(id.to_string()).into()),
            Err(_) => {
                return Err(HubError::Busy(format!(
                    "no answer within {} s",
                    REVERT_TIMEOUT.as_secs()
                )));
            }
        };
        // A review-mode request: its pending suggestions are rejected (the request stopped
        // above, so none is being written any more).
        let rejected_suggestions =
            crate::review::service::reject_request(&loaded, id, &request, by).await?;
        Ok(Reverted {
            outcome,
            rejected_suggestions,
        })
    }

    /// Sets how the fairy's canvas actions land unless a prompt says otherwise (its entity's
    /// `apply`, README "Review mode"); its next request follows it. Unknown fairy:
    /// `Fairy(NotFound)`.
    pub async fn set_apply(
        &self,
        room: &RoomName,
        id: &FairyId,
        apply: crate::review::ApplyMode,
    ) -> Result<FairyView, HubError> {
        let loaded = self.loaded_room(room).await?;
        let entity = crate::agent::state::fairy::set_apply(loaded.doc(), id, apply)?;
        loaded.flushed().await;
        Ok(self.view(&loaded, entity))
    }

    /// Dismisses the fairy: its request is cancelled, its awareness state removed for
    /// everyone, its private state deleted from the store and its entity removed from the
    /// document.
    pub async fn dismiss(&self, room: &RoomName, id: &FairyId) -> Result<(), HubError> {
        let (r, hosted) = self.hosted(room, id).await?;
        // Its removal from the document and the store are writes: none is started while the
        // store's disk is full (`507 store_full`; the fairy stays as it is).
        r.admit_store_write()?;
        hosted.inbox.dismiss().map_err(|_| HubError::ShuttingDown)?;
        let _ = tokio::time::timeout(DISMISS_TIMEOUT, hosted.inbox.ended()).await;
        remove_fairy(r.doc(), id);
        Ok(())
    }

    /// The fairy's events from now on.
    pub async fn subscribe(
        &self,
        room: &RoomName,
        id: &FairyId,
    ) -> Result<broadcast::Receiver<AgentEvent>, HubError> {
        let (_, hosted) = self.hosted(room, id).await?;
        Ok(hosted.events.subscribe())
    }

    /// The fairy's private state (mode, history, todo, tasks) as stored, once what it handed
    /// to the store before this call is written.
    pub async fn state(&self, room: &RoomName, id: &FairyId) -> Result<FairyState, HubError> {
        let (r, hosted) = self.hosted(room, id).await?;
        if tokio::time::timeout(STATE_SYNC_TIMEOUT, hosted.state.caught_up())
            .await
            .is_err()
        {
            tracing::warn!(room = %room, fairy = %id, "reading a fairy state not fully written");
        }
        let stored = state_store::load(r.store().as_ref(), room, id).await?;
        Ok(stored.unwrap_or_default())
    }

    /// Drops a finished runtime once its room has unloaded. yrs 0.28's undo manager
    /// unregisters its document observers with `try_transact_mut().unwrap()` when dropped: a
    /// panic if any other thread is in a transaction then, which would leave the document
    /// calling into freed memory. After the unload nothing else uses the document. Not tracked
    /// by the shutdown tracker (rooms unload after fairies stop); at process exit the runtime
    /// is dropped with the task, when rooms are gone too.
    fn bury(&self, room: RoomName, runtime: FairyRuntime) {
        runtime.beacon().remove();
        let rooms = self.inner.rooms.clone();
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            rooms.wait_unloaded(&room).await;
            drop(runtime);
            // The runtime held the room's projects' book: nobody may now.
            if let Some(inner) = weak.upgrade()
                && rooms.get_loaded(&room).is_none()
            {
                inner.projects.forget(&room);
            }
        });
    }

    /// Stops every fairy (requests are aborted and reverted) and waits for them.
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        self.inner.tracker.close();
        self.inner.tracker.wait().await;
        self.inner.projects.flush().await;
    }

    /// The projects of a room (from the store the first time).
    pub(super) async fn projects_of(
        &self,
        room: &RoomName,
    ) -> Result<Arc<crate::agent::projects::book::RoomProjects>, HubError> {
        Ok(self.inner.projects.of(room).await?)
    }
}

/// One fairy's task: runs requests, and on a signal while a request runs, drops the request
/// (aborting the model stream) before carrying the signal out (the runtime reverts and runs
/// the cancel hook).
async fn run_host(
    mut rt: FairyRuntime,
    inbox: &Inbox,
    shutdown: CancellationToken,
) -> FairyRuntime {
    let mut next: Option<crate::agent::state::Request> = None;
    // The room instance's end (a failed commit, an unload, the shutdown): noticed at once,
    // mid-request too, not at the idle loop's next look.
    let room_closed = rt.room().closing_signal();
    loop {
        if next.is_none() {
            // Idle from here: what the last request changed is stored now, not at the next one.
            rt.flush_state();
        }
        let signal = if let Some(request) = next.take() {
            let stopped = {
                let run = rt.run_request(request);
                tokio::pin!(run);
                tokio::select! {
                    _ = &mut run => None,
                    signal = inbox.recv() => Some(Stopped::Signal(signal)),
                    _ = room_closed.cancelled() => Some(Stopped::RoomClosed),
                    _ = shutdown.cancelled() => Some(Stopped::Shutdown),
                }
            };
            match stopped {
                None => None,
                Some(Stopped::Signal(signal)) => Some(signal),
                Some(Stopped::RoomClosed) if !shutdown.is_cancelled() => {
                    stop_in_closed_room(&mut rt);
                    return rt;
                }
                Some(Stopped::RoomClosed | Stopped::Shutdown) => {
                    rt.abort_for_shutdown(None);
                    return rt;
                }
            }
        } else {
            tokio::select! {
                signal = inbox.recv() => Some(signal),
                _ = shutdown.cancelled() => {
                    rt.flush_state();
                    rt.beacon().remove();
                    return rt;
                }
                _ = room_closed.cancelled() => return rt,
                _ = tokio::time::sleep(ROOM_CHECK) => {
                    if rt.room().is_closing() {
                        return rt;
                    }
                    // A waiting member shows the other members' progress on its tasks.
                    rt.publish_project();
                    // Reads the room's changes so that the room keeps little for it.
                    rt.catch_up();
                    None
                }
            }
        };
        match signal {
            None => {}
            Some(Signal::Interrupt(interrupt)) => next = rt.interrupt(interrupt),
            Some(Signal::Revert(RevertJob { request, reply })) => {
                // Whatever ran was stopped to get here (and does not resume).
                let reason = if rt.is_running(&request) {
                    EndReason::Rejected
                } else {
                    EndReason::Cancelled
                };
                rt.abort(reason);
                // The caller may have given up waiting: nothing to do then.
                let _ = reply.send(rt.reject_request(&request));
            }
            Some(Signal::Dismiss) => {
                rt.abort(EndReason::Cancelled);
                rt.forget_state();
                remove_fairy(rt.room().doc(), &rt.entity.id);
                rt.beacon().remove();
                return rt;
            }
        }
    }
}

/// How often a hosting waiting for the store's disk to have space looks again (the store
/// itself looks at its filesystem every 250 ms).
const WRITABLE_CHECK: Duration = Duration::from_millis(250);

/// Waits until `room`'s store is not known to be full; false when the room instance closes
/// or the hosting stops first.
async fn writable(room: &Arc<Room>, stop: &CancellationToken) -> bool {
    let closed = room.closing_signal();
    while room.store().is_full() {
        tokio::select! {
            () = closed.cancelled() => return false,
            () = stop.cancelled() => return false,
            () = tokio::time::sleep(WRITABLE_CHECK) => {}
        }
    }
    true
}

/// What stopped a running request in [`run_host`].
enum Stopped {
    Signal(Signal),
    RoomClosed,
    Shutdown,
}

/// The room instance closed under a running request: its commit failed (the store's disk
/// full, the store failing, a stale fence; an idle unload cannot happen while the request
/// holds its lease). Nothing written into its document from now on is stored, so the request
/// stops here: its event stream is told why, and the runtime stops as at a shutdown — the
/// incomplete action reverted in this instance, the state handed to the store still marked
/// working — so that the fairy's next host (the room reloaded from the store, once it can be
/// written again) removes what it had only started drawing (its locked shapes) and says in the
/// chat that the work was interrupted (docs/operations.md "What happens when … the disk fills
/// up").
fn stop_in_closed_room(rt: &mut FairyRuntime) {
    let why = match rt.room().failure().error() {
        Some(RoomError::StoreFull) => "the server's storage is full",
        Some(RoomError::Fenced) => "the fairy moved to another server",
        Some(_) => "the server could not store the room",
        None => "the room closed",
    };
    tracing::warn!(fairy = %rt.entity.id, why, "fairy request stopped: its room closed");
    rt.abort_for_shutdown(Some(format!(
        "the request stopped: {why}; what was not finished is taken back once the room can be written again"
    )));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::state::fairy::insert_fairy;
    use crate::room::RoomConfig;

    /// Rooms with fairies come and go (a soak moves to fresh rooms every two minutes): once a
    /// room unloaded and its fairies' runtimes are gone, the hub keeps nothing of it (the
    /// projects' book of every such room used to stay for good).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rooms_that_unload_leave_no_project_book_behind() {
        let store = Arc::new(crate::store::memory::MemoryStore::default());
        let mut config = RoomConfig::from_serve(&crate::config::ServeConfig::for_test());
        // Not zero: a room nobody joined keeps its grace for the first peer (5 s).
        config.idle_unload = Duration::from_millis(200);
        config.sweep_every = Duration::from_millis(5);
        let rooms = Rooms::new(store, config, 16);
        let hub = FairyHub::build(
            rooms.clone(),
            Arc::new(crate::llm::OfflineModel),
            RuntimeConfig::default(),
            HubLimits::default(),
            None,
            Duration::from_secs(2),
        );
        for i in 0..4 {
            let name = RoomName::parse(&format!("gen-{i}")).unwrap_or_else(|e| panic!("{e}"));
            let wait = Duration::from_secs(20);
            let room = tokio::time::timeout(wait, rooms.get(&name))
                .await
                .unwrap_or_else(|_| panic!("room {i}: the load took too long"))
                .unwrap_or_else(|e| panic!("{e}"));
            let entity = FairyEntity::invite(Some("Pip"), None, None, "tester")
                .unwrap_or_else(|e| panic!("{e}"));
            insert_fairy(room.doc(), &entity);
            hub.ensure_hosted(&room);
            let started = tokio::time::timeout(wait, hub.started(&room, &entity.id)).await;
            assert!(
                started
                    .unwrap_or_else(|_| panic!("room {i}: the hosting took too long"))
                    .is_ok()
            );
            assert_eq!(
                hub.inner.projects.held(),
                1,
                "the hosted fairy's room has a book"
            );
            // A person comes and goes: the room unloads, its fairy's task ends.
            let visit = crate::room::PeerInfo {
                conn: 1,
                name: None,
                sub: "tester".into(),
                can_write: true,
            };
            let (peer, _rx) = room.join(visit).unwrap_or_else(|e| panic!("{e}"));
            drop(peer);
            drop(room);
            tokio::time::timeout(wait, rooms.wait_unloaded(&name))
                .await
                .unwrap_or_else(|_| panic!("room {i}: the unload took too long"));
            // Its buried runtime is dropped after the unload, then the book is forgotten.
            let until = std::time::Instant::now() + Duration::from_secs(10);
            while hub.inner.projects.held() > 0 && std::time::Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(hub.inner.projects.held(), 0, "room {i}'s book is forgotten");
        }
        assert!(hub.lock().is_empty());
        let wait = Duration::from_secs(20);
        tokio::time::timeout(wait, hub.shutdown())
            .await
            .unwrap_or_else(|_| panic!("the hub's shutdown took too long"));
        tokio::time::timeout(wait, rooms.shutdown())
            .await
            .unwrap_or_else(|_| panic!("the rooms' shutdown took too long"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fairy_whose_document_never_gets_quiet_fails_cleanly_then_starts_when_it_does() {
        let store = Arc::new(crate::store::memory::MemoryStore::default());
        let config = RoomConfig::from_serve(&crate::config::ServeConfig::for_test());
        let rooms = Rooms::new(store, config, 4);
        let hub = FairyHub::build(
            rooms.clone(),
            Arc::new(crate::llm::OfflineModel),
            RuntimeConfig::default(),
            HubLimits::default(),
            None,
            Duration::from_millis(200),
        );
        let name = RoomName::parse("busy").unwrap_or_else(|e| panic!("{e}"));
        let room = rooms.get(&name).await.unwrap_or_else(|e| panic!("{e}"));
        let entity = FairyEntity::invite(Some("Pip"), None, None, "tester")
            .unwrap_or_else(|e| panic!("{e}"));
        insert_fairy(room.doc(), &entity);
        // Another thread reads the document for longer than the fairy's patience: no write
        // transaction (so no undo manager) can be had meanwhile.
        let doc = room.doc().clone();
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let _reading = yrs::Transact::transact(&doc);
            let _ = held_tx.send(());
            let _ = release_rx.recv_timeout(Duration::from_secs(10));
        });
        let _ = held_rx.recv();
        let asked = std::time::Instant::now();
        hub.ensure_hosted(&room);
        assert!(
            asked.elapsed() < Duration::from_millis(100),
            "hosting does not wait for the runtime"
        );
        let mut events = hub
            .subscribe(&name, &entity.id)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let started = hub.started(&room, &entity.id).await;
        assert!(
            matches!(started, Err(HubError::NotStarted(_))),
            "{started:?}"
        );
        assert!(matches!(events.recv().await, Ok(AgentEvent::Error { .. })));
        assert!(hub.lock().is_empty(), "the failed hosting is unlisted");
        let _ = release_tx.send(());
        let _ = holder.join();
        // Quiet again: the next use hosts it.
        hub.ensure_hosted(&room);
        assert!(hub.started(&room, &entity.id).await.is_ok());
        assert_eq!(hub.lock().len(), 1);
        hub.shutdown().await;
    }
}
