//! A fairy's awareness peer in one loaded room: holds its [`Presence`] under a short lock,
//! publishes it under the fairy's own awareness client id after every change, and runs its
//! flights (a task ticking at [`FLIGHT_HZ`] per second), and renews it every [`RENEW_EVERY`]
//! so that clients do not time it out. Dropping the beacon stops both tasks;
//! [`Beacon::remove`] announces the removal to everyone.

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use rand::Rng;

use crate::agent::presence::{FLIGHT_HZ, Flight, Presence};
use crate::room::Room;

/// How long the fairy shows the celebrating pose after finishing a request.
pub const CELEBRATION: Duration = Duration::from_millis(1500);

/// How often an unchanged state is published again. y-protocols clients drop remote states
/// not renewed for 30 s (and so do their servers), so a quiet fairy renews like a browser does.
pub const RENEW_EVERY: Duration = Duration::from_secs(15);

/// A fairy's awareness peer.
pub struct Beacon {
    room: Arc<Room>,
    client_id: u64,
    presence: Mutex<Presence>,
    flight: Mutex<Option<tokio::task::AbortHandle>>,
    /// Where the latest flight goes (or went).
    target: Mutex<Option<(f64, f64)>>,
    renewal: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Beacon {
    /// A beacon for a fairy with a fresh awareness client id (never 0 or the server's own);
    /// nothing is published until the first [`Beacon::update`].
    pub fn new(room: Arc<Room>, presence: Presence) -> Arc<Self> {
        Self::with_client_id(room, presence, Self::draw_client_id())
    }

    /// A fresh fairy awareness client id. Yjs draws 32-bit ids; this draws from the upper half
    /// of the 53-bit safe range instead, so a fairy never collides with a browser (which could
    /// then not set its own state).
    pub fn draw_client_id() -> u64 {
        rand::rng().random_range((1u64 << 40)..(1u64 << 52))
    }

    /// [`Beacon::new`] with an id drawn beforehand by [`Beacon::draw_client_id`] (the hub
    /// records it before the fairy's task builds its runtime).
    pub fn with_client_id(room: Arc<Room>, presence: Presence, client_id: u64) -> Arc<Self> {
        let beacon = Arc::new(Beacon {
            room,
            client_id,
            presence: Mutex::new(presence),
            flight: Mutex::new(None),
            target: Mutex::new(None),
            renewal: Mutex::new(None),
        });
        let weak = Arc::downgrade(&beacon);
        let renewal = tokio::spawn(async move {
            let mut tick = tokio::time::interval(RENEW_EVERY);
            tick.tick().await;
            loop {
                tick.tick().await;
                match weak.upgrade() {
                    Some(beacon) => beacon.publish(),
                    None => return,
                }
            }
        });
        *beacon.renewal.lock().unwrap_or_else(|p| p.into_inner()) = Some(renewal.abort_handle());
        beacon
    }

    fn lock(&self) -> MutexGuard<'_, Presence> {
        self.presence.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The awareness client id.
    pub fn client_id(&self) -> u64 {
        self.client_id
    }

    /// The room it is published in.
    pub fn room(&self) -> &Arc<Room> {
        &self.room
    }

    /// A copy of the current state.
    pub fn snapshot(&self) -> Presence {
        self.lock().clone()
    }

    /// Changes the state and publishes it.
    pub fn update(&self, change: impl FnOnce(&mut Presence)) {
        let state = {
            let mut p = self.lock();
            change(&mut p);
            p.to_state()
        };
        self.send(&state);
    }

    fn send(&self, state: &serde_json::Value) {
        if let Err(error) = self.room.set_presence(self.client_id, Some(state)) {
            tracing::warn!(room = %self.room.name(), %error, "fairy presence refused");
        }
    }

    /// Changes the state and publishes it only if it changed (for changes repeated at every
    /// streamed version, such as the working pose); true if it published.
    pub fn update_if_changed(&self, change: impl FnOnce(&mut Presence)) -> bool {
        let state = {
            let mut p = self.lock();
            let before = p.clone();
            change(&mut p);
            if *p == before {
                return false;
            }
            p.to_state()
        };
        self.send(&state);
        true
    }

    /// Publishes the current state again (after the room was reloaded, for example).
    pub fn publish(&self) {
        self.update(|_| {});
    }

    /// Removes the fairy's awareness state for everyone.
    pub fn remove(&self) {
        self.stop_flight();
        self.stop_renewal();
        let _ = self.room.set_presence(self.client_id, None);
    }

    fn stop_renewal(&self) {
        let mut renewal = self.renewal.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(handle) = renewal.take() {
            handle.abort();
        }
    }

    fn stop_flight(&self) {
        let mut flight = self.flight.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(handle) = flight.take() {
            handle.abort();
        }
    }

    /// Shows the celebrating pose for [`CELEBRATION`], then idles (unless the pose changed).
    pub fn celebrate(self: &Arc<Self>) {
        self.update(|p| p.pose = crate::agent::presence::Pose::Celebrating);
        let weak: Weak<Beacon> = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(CELEBRATION).await;
            if let Some(beacon) = weak.upgrade()
                && beacon.snapshot().pose == crate::agent::presence::Pose::Celebrating
            {
                beacon.update(|p| p.pose = crate::agent::presence::Pose::Idle);
            }
        });
    }

    /// Flies to `to` unless the latest flight already goes there (within a pixel): called at
    /// every streamed version of an action, it starts one flight per place, not one per version.
    pub fn fly_toward(self: &Arc<Self>, to: (f64, f64)) {
        let same = self
            .target
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|t| (t.0 - to.0).abs() < 1.0 && (t.1 - to.1).abs() < 1.0);
        if !same {
            self.fly_to(to);
        }
    }

    /// Flies smoothly to `to` (replacing any flight under way).
    pub fn fly_to(self: &Arc<Self>, to: (f64, f64)) {
        self.stop_flight();
        *self.target.lock().unwrap_or_else(|p| p.into_inner()) = Some(to);
        let from = {
            let p = self.lock();
            (p.x, p.y)
        };
        let mut flight = Flight::new(from, to);
        let flip = flight.flips();
        let weak: Weak<Beacon> = Arc::downgrade(self);
        let task = tokio::spawn(async move {
            let mut tick =
                tokio::time::interval(Duration::from_millis(1000 / u64::from(FLIGHT_HZ)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while let Some((x, y)) = flight.next_position() {
                tick.tick().await;
                let Some(beacon) = weak.upgrade() else { return };
                beacon.update(|p| {
                    p.x = x;
                    p.y = y;
                    p.flip = flip;
                });
            }
        });
        let mut slot = self.flight.lock().unwrap_or_else(|p| p.into_inner());
        *slot = Some(task.abort_handle());
    }
}

impl Drop for Beacon {
    fn drop(&mut self) {
        self.stop_flight();
        self.stop_renewal();
    }
}
