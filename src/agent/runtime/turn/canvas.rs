//! The canvas end of a turn's action pipeline: applying what [`super::pipeline`] let through.
//! An incomplete version is shown tentatively (through the [`StreamThrottle`]'s interval, held
//! back while the room's fairy write budget is spent, never past the document's size cap); a
//! complete action is applied for good (directly, or as suggestions in review mode), charged
//! to the room's write budget and kept in the fairy's ledger. Waiting for the write budget
//! before a complete action ([`CanvasStage::admit`]) is the only wait: streamed versions are
//! skipped instead.
//!
//! The fairy flies to where each action works as it is shown and applied (its awareness
//! position; the request's start only flies it to the request's bounds).
//!
//! The stage is a value, the [`CanvasStage`]: what it uses (the fairy's landing, the registry,
//! the room and its write budget, the live view of the shapes, its awareness peer, its clock),
//! borrowed from the runtime for one call ([`FairyRuntime::canvas`]). What a complete action
//! did comes back as a [`Landed`], which the runtime keeps in the history.
//!
//! Writes the document only through the fairy's [`crate::agent::apply::landing::Landing`]
//! (its tentative canvas, or its turn's [`crate::agent::apply::suggest::Suggester`]).

use std::sync::Arc;

use serde_json::Value;

use super::{BUDGET_RETRY, Held, TurnState};
use crate::agent::actions::{ActionError, Registered, Registry, Sanitized};
use crate::agent::apply::changes::ChangeTracker;
use crate::agent::apply::landing::Landing;
use crate::agent::apply::throttle::{Decision, creates_unsized};
use crate::agent::presence::Pose;
use crate::agent::presence::beacon::Beacon;
use crate::agent::runtime::FairyRuntime;
use crate::clock::SharedClock;
use crate::partial_json::StreamedAction;
use crate::room::Room;

/// The canvas end of the pipeline, and what it uses.
pub(super) struct CanvasStage<'a> {
    /// Where the actions land: the canvas, or the turn's suggestions.
    landing: &'a mut Landing,
    registry: &'a Registry,
    /// The room: its fairy write budget and size cap.
    room: &'a Room,
    /// The live view of the room's shapes, and the fairy's own writes.
    tracker: &'a ChangeTracker,
    /// Its awareness peer: its pose and where it flies.
    beacon: &'a Arc<Beacon>,
    clock: &'a SharedClock,
}

/// What a complete canvas action did.
pub(super) struct Landed {
    /// Applied (with the sanitizer's notes), or refused with the handler's correction.
    pub applied: Result<Sanitized, ActionError>,
    /// The centre of where it works, read before it was applied: the fairy flies there.
    pub area: Option<(f64, f64)>,
}

impl FairyRuntime {
    /// The canvas stage as the fairy stands now.
    pub(super) fn canvas(&mut self) -> CanvasStage<'_> {
        CanvasStage {
            landing: &mut self.landing,
            registry: &self.registry,
            room: &self.room,
            tracker: &self.tracker,
            beacon: &self.beacon,
            clock: &self.clock,
        }
    }
}

impl CanvasStage<'_> {
    /// The room's fairy write budget (docs/fairies.md "People and fairies in one room"): a
    /// complete canvas action waits until the room's fairies may write again. Nothing else
    /// waits: a streamed version is skipped instead (see [`CanvasStage::show`]).
    pub async fn admit(&self, a: &StreamedAction) {
        let canvas = a.complete
            && a.action
                .get("_type")
                .and_then(Value::as_str)
                .is_some_and(|kind| matches!(self.registry.get(kind), Some(Registered::Canvas(_))));
        if canvas {
            self.room.fairy_writes().ready().await;
            // One action at a time: the other fairies of the runtime get their turn between
            // two actions, even when a model's answer is all there at once.
            tokio::task::yield_now().await;
        }
    }

    /// Charges the room's fairy write budget with the shapes the complete action just changed
    /// and the `records` it wrote beside them (streamed versions before it are previews: they
    /// wait while the budget is spent, but cost nothing).
    fn charge_writes(&self, records: u32) {
        let changed = self.tracker.take_own_writes();
        crate::metrics::global()
            .fairy_shape_writes
            .inc_by(u64::from(changed));
        self.room
            .fairy_writes()
            .charge(changed.saturating_add(records));
    }

    /// The throttle's trailing edge: applies the version it held back.
    pub fn apply_held(&mut self, turn: &mut TurnState) {
        let Some(held) = turn.held.take() else {
            return;
        };
        if held.index == turn.handled {
            self.show(held.index, held.action, turn);
        }
    }

    /// Applies an incomplete version tentatively; only a version that could be applied
    /// starts the throttle's interval. While the room's fairy write budget is spent the
    /// version is held back instead, and tried again a budget's tick later unless a newer one
    /// comes first.
    fn show(&mut self, index: usize, action: Value, turn: &mut TurnState) {
        if !self.room.fairy_writes().try_ready() {
            turn.held = Some(Held {
                index,
                action,
                until: tokio::time::Instant::now() + BUDGET_RETRY,
            });
            return;
        }
        // Nor is one that could take the document past its size cap (the complete action is
        // refused with a correction).
        let kind = action
            .get("_type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if super::pipeline::size_check(self.room, kind, &action).is_err() {
            return;
        }
        self.beacon.update_if_changed(|p| p.pose = Pose::Working);
        // An incomplete version that cannot be applied yet is simply not shown.
        let shown = self
            .landing
            .active()
            .show(self.registry, &action, &mut turn.ctx);
        if shown.is_ok() {
            turn.throttle.applied(self.clock.now(), &action);
            // Not to a new geo shape's corner before its size is there: it would fly on to the
            // centre a moment later (one flight per place).
            if !creates_unsized(&action)
                && let Some(area) = self.work_area(&action, turn)
            {
                self.beacon.fly_toward(area);
            }
        }
    }

    /// The centre of where `action` works (page space; see
    /// [`crate::agent::projects::guard::action_area`]): the fairy flies there as it draws,
    /// whatever the model.
    fn work_area(&self, action: &Value, turn: &TurnState) -> Option<(f64, f64)> {
        crate::agent::projects::guard::action_area(
            action,
            |id| self.tracker.shape(id),
            &turn.ctx.transform,
        )
        .map(|b| (b.center_x(), b.center_y()))
    }

    /// An incomplete version the pipeline lets through: shown now, or held back until the
    /// throttle's interval ends (its trailing edge applies the newest one held).
    pub fn preview(&mut self, index: usize, action: Value, turn: &mut TurnState) {
        match turn.throttle.decide(self.clock.now(), &action) {
            Decision::Apply => {
                turn.held = None;
                self.show(index, action, turn);
            }
            Decision::Hold { until } => {
                turn.held = Some(Held {
                    index,
                    action,
                    until: tokio::time::Instant::from_std(until),
                });
            }
        }
    }

    /// A complete canvas action the pipeline let through: applied for good (as suggestions in
    /// review mode) and charged to the room's write budget.
    pub fn land(&mut self, action: &Value, turn: &mut TurnState) -> Landed {
        // What the streamed versions wrote is not the action's.
        self.tracker.take_own_writes();
        // Read before applying: a deleted shape is gone afterwards.
        let area = self.work_area(action, turn);
        let (applied, records) = self
            .landing
            .active()
            .land(self.registry, action, &mut turn.ctx);
        // Its shapes on the canvas, and its records beside them (review mode's suggestions).
        self.charge_writes(records);
        Landed { applied, area }
    }
}
