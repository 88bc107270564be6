//! Hosting fairies: one task per fairy per loaded room instance, driven by its [`Inbox`]
//! (interrupts — a prompt is an interrupt with input, a cancel one without — and dismissal,
//! never refused while the fairy is hosted), with a broadcast of its [`AgentEvent`]s. The hub
//! brings a room's fairies to life when the room is used (a peer joins, or a fairy route is
//! called) — restoring their state after a restart — and lets an idle fairy's task end when
//! its room unloads.
//!
//! Owns the map of hosted fairies (a short critical section, never held across `.await`) and
//! the per-room limits on them: how many a room may hold ([`HubLimits::max_per_room`]) and the
//! room's hourly model-token budget, applied by wrapping each fairy's model in a
//! [`BudgetedModel`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::actions::Registry;
use super::budget::{BudgetedModel, TokenBudget};
use super::events::{AgentEvent, EVENT_BUFFER};
use super::fairy::{FairyEntity, FairyError, FairyId, insert_fairy, list_fairies, remove_fairy};
use super::inbox::{Inbox, Signal};
use super::interrupt::Interrupt;
use super::runtime::{FairyRuntime, RuntimeConfig};
use super::runtime_actions::full_registry;
use crate::llm::Model;
use crate::room::{Room, RoomError, RoomName, Rooms};

/// How often an idle fairy checks whether its room unloaded.
const ROOM_CHECK: Duration = Duration::from_secs(2);
/// Longest wait for a dismissed fairy to clean up.
const DISMISS_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a fairy operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The room could not be loaded.
    #[error(transparent)]
    Room(#[from] RoomError),
    /// The fairy is unknown or its input invalid.
    #[error(transparent)]
    Fairy(#[from] FairyError),
    /// The server is shutting down.
    #[error("shutting down")]
    ShuttingDown,
    /// The room already holds the most fairies allowed.
    #[error("this room already has {0} fairies, the most allowed")]
    TooManyFairies(usize),
}

/// Bounds on the fairies of a room.
#[derive(Debug, Clone, Copy)]
pub struct HubLimits {
    /// Most fairies in one room (`--max-fairies-per-room`).
    pub max_per_room: usize,
    /// Model tokens per room per hour (`--fairy-token-budget`); 0: unlimited.
    pub token_budget: u64,
}

impl Default for HubLimits {
    fn default() -> Self {
        HubLimits {
            max_per_room: 16,
            token_budget: 1_000_000,
        }
    }
}

#[derive(Clone)]
struct Hosted {
    room: Arc<Room>,
    inbox: Arc<Inbox>,
    events: broadcast::Sender<AgentEvent>,
}

/// A fairy as listed by the API.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FairyView {
    /// The entity.
    #[serde(flatten)]
    pub entity: FairyEntity,
    /// Its awareness client id, when hosted.
    pub client_id: Option<u64>,
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
    budget: Arc<TokenBudget>,
    hosted: Mutex<HostedMap>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
}

/// Every hosted fairy of the process.
#[derive(Clone)]
pub struct FairyHub {
    inner: Arc<Inner>,
}

impl FairyHub {
    /// A hub over the room registry, thinking with `model`, within `limits`.
    pub fn new(
        rooms: Rooms,
        model: Arc<dyn Model>,
        config: RuntimeConfig,
        limits: HubLimits,
    ) -> Self {
        FairyHub {
            inner: Arc::new(Inner {
                rooms,
                model,
                registry: Arc::new(full_registry()),
                config,
                max_per_room: limits.max_per_room,
                budget: TokenBudget::new(limits.token_budget),
                hosted: Mutex::new(HashMap::new()),
                shutdown: CancellationToken::new(),
                tracker: TaskTracker::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HostedMap> {
        self.inner.hosted.lock().unwrap_or_else(|p| p.into_inner())
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
        let entities = list_fairies(room.doc());
        // Checked and hosted under one lock, so two peers joining at once cannot host a fairy
        // twice. Lock order: the hub's map, then the room's locks (rooms never call the hub).
        let mut map = self.lock();
        for entity in entities {
            let key = (room.name().clone(), entity.id.clone());
            match map.get(&key) {
                Some((h, _)) if Arc::ptr_eq(&h.room, room) => {}
                _ => self.host(&mut map, room, entity),
            }
        }
    }

    fn host(&self, map: &mut HostedMap, room: &Arc<Room>, entity: FairyEntity) {
        let inbox = Arc::new(Inbox::new());
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let key = (room.name().clone(), entity.id.clone());
        let span = tracing::info_span!("fairy", room = %room.name(), fairy = %entity.id);
        let model = Arc::new(BudgetedModel::new(
            self.inner.model.clone(),
            self.inner.budget.clone(),
            room.name().clone(),
        ));
        let runtime = FairyRuntime::new(
            room.clone(),
            entity,
            model,
            self.inner.registry.clone(),
            self.inner.config,
            events.clone(),
        );
        let client_id = runtime.beacon().client_id();
        let hosted = Hosted {
            room: room.clone(),
            inbox: inbox.clone(),
            events,
        };
        map.insert(key.clone(), (hosted, client_id));
        let hub = self.clone();
        let shutdown = self.inner.shutdown.clone();
        self.inner.tracker.spawn(
            async move {
                let runtime = run_host(runtime, &inbox, shutdown).await;
                inbox.close();
                {
                    let mut map = hub.lock();
                    if map.get(&key).is_some_and(|(_, id)| *id == client_id) {
                        map.remove(&key);
                    }
                }
                hub.bury(key.0, runtime);
            }
            .instrument(span),
        );
    }

    /// Invites a new fairy into the room, unless it holds [`HubLimits::max_per_room`] already.
    pub async fn invite(
        &self,
        room: &RoomName,
        name: Option<&str>,
        personality: Option<&str>,
        hat: Option<&str>,
        sub: &str,
    ) -> Result<FairyView, HubError> {
        let entity = FairyEntity::invite(name, personality, hat, sub)?;
        let room = self.room(room).await?;
        {
            // Counted and inserted under the map's lock, so concurrent invitations cannot
            // overshoot the cap (lock order: the hub's map, then the room's document).
            let _map = self.lock();
            if list_fairies(room.doc()).len() >= self.inner.max_per_room {
                return Err(HubError::TooManyFairies(self.inner.max_per_room));
            }
            insert_fairy(room.doc(), &entity);
        }
        self.ensure_hosted(&room);
        Ok(self.view(&room, entity))
    }

    fn view(&self, room: &Arc<Room>, entity: FairyEntity) -> FairyView {
        let key = (room.name().clone(), entity.id.clone());
        let client_id = self.lock().get(&key).map(|(_, id)| *id);
        FairyView { entity, client_id }
    }

    /// The room's fairies.
    pub async fn list(&self, room: &RoomName) -> Result<Vec<FairyView>, HubError> {
        let room = self.room(room).await?;
        Ok(list_fairies(room.doc())
            .into_iter()
            .map(|e| self.view(&room, e))
            .collect())
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

    /// Interrupts the fairy (SPEC §5 `interrupt({input, mode})`): its current request is
    /// cancelled, it switches to `mode` if given, then runs `input` if given. Never refused
    /// while the fairy is hosted: an interrupt not handled yet merges with this one.
    pub async fn interrupt(
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

    /// Dismisses the fairy: its request is cancelled, its awareness state removed for
    /// everyone and its entity removed from the document.
    pub async fn dismiss(&self, room: &RoomName, id: &FairyId) -> Result<(), HubError> {
        let (r, hosted) = self.hosted(room, id).await?;
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

    /// The fairy's stored runtime state (mode, history, todo, tasks).
    pub async fn state(
        &self,
        room: &RoomName,
        id: &FairyId,
    ) -> Result<serde_json::Value, HubError> {
        let (r, _) = self.hosted(room, id).await?;
        Ok(super::fairy::read_runtime(r.doc(), id).unwrap_or_else(|| serde_json::json!({})))
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
        tokio::spawn(async move {
            rooms.wait_unloaded(&room).await;
            drop(runtime);
        });
    }

    /// Stops every fairy (requests are aborted and reverted) and waits for them.
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        self.inner.tracker.close();
        self.inner.tracker.wait().await;
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
    let mut next: Option<super::runtime::Request> = None;
    loop {
        let signal = if let Some(request) = next.take() {
            let stopped = {
                let run = rt.run_request(request);
                tokio::pin!(run);
                tokio::select! {
                    _ = &mut run => None,
                    signal = inbox.recv() => Some(Some(signal)),
                    _ = shutdown.cancelled() => Some(None),
                }
            };
            match stopped {
                None => None,
                Some(Some(signal)) => Some(signal),
                Some(None) => {
                    rt.abort_for_shutdown();
                    return rt;
                }
            }
        } else {
            tokio::select! {
                signal = inbox.recv() => Some(signal),
                _ = shutdown.cancelled() => {
                    rt.beacon().remove();
                    return rt;
                }
                _ = tokio::time::sleep(ROOM_CHECK) => {
                    if rt.room().is_closing() {
                        return rt;
                    }
                    None
                }
            }
        };
        match signal {
            None => {}
            Some(Signal::Interrupt(interrupt)) => next = rt.interrupt(interrupt),
            Some(Signal::Dismiss) => {
                rt.abort("cancelled");
                remove_fairy(rt.room().doc(), &rt.entity.id);
                rt.beacon().remove();
                return rt;
            }
        }
    }
}
