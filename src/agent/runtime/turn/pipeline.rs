//! The checking stage of a turn's action pipeline: every object the [`ActionStream`] parses
//! out of the answer is read once (its `_type` against the registry: a canvas action, a
//! runtime action, or nothing known) and checked (the mode's table of allowed actions, the
//! project task's bounds, the document's size cap, what review mode cannot do) before anything
//! is applied. The verdict is a [`Routed`]: the streaming loop hands it to the canvas end
//! ([`super::canvas`]) or the runtime actions ([`super::runtime_actions`]), or tells the model
//! why it was refused.
//!
//! The stage is a value, the [`Gate`]: what the checks read (the fairy's mode, the registry,
//! its task's bounds, the shapes it may name, the room's size cap, whether the turn reviews),
//! taken from the runtime once per streamed object ([`FairyRuntime::gate`]). Pure: writes
//! nothing.
//!
//! [`ActionStream`]: crate::partial_json::ActionStream

use serde_json::Value;

use super::TurnState;
use crate::agent::actions::{Registered, Registry};
use crate::agent::apply::changes::ChangeTracker;
use crate::agent::modes::Mode;
use crate::agent::projects::guard;
use crate::agent::runtime::FairyRuntime;
use crate::canvas::geometry::Bounds;
use crate::canvas::transform::PromptTransform;
use crate::partial_json::StreamedAction;
use crate::room::Room;

/// What becomes of one streamed object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Routed {
    /// Before the point a discarding retry streams again from: handled already.
    Handled,
    /// An incomplete version of a canvas action the mode allows, inside the task's bounds,
    /// with no id still streaming: shown tentatively.
    Preview,
    /// An incomplete version not shown (not a canvas action, not allowed, an id still
    /// streaming, outside the task's bounds): it waits for the complete action.
    Hidden,
    /// A complete canvas action that passed every check: applied.
    Canvas {
        /// The registered action's name.
        kind: &'static str,
    },
    /// A complete runtime action the mode allows: carried out.
    Runtime {
        /// Whether the history keeps it (`think` is not kept).
        saves: bool,
    },
    /// A complete action refused: nothing of it is applied and the model is told why.
    Refused {
        /// Its `_type` (`unknown` when it has none).
        kind: String,
        /// The correction.
        why: String,
    },
}

/// The checks of the turn's actions, and what they read.
pub(super) struct Gate<'a> {
    /// The fairy's mode: its table of allowed actions.
    mode: Mode,
    registry: &'a Registry,
    /// The bounds of the task it works on, while its mode keeps it inside them.
    task_bounds: Option<Bounds>,
    /// The shapes it sees (for the bounds of an action naming existing shapes).
    tracker: &'a ChangeTracker,
    /// The room, for its size cap.
    room: &'a Room,
    /// The turn's actions land as suggestions (review mode).
    reviewing: bool,
}

impl FairyRuntime {
    /// The gate of its actions as the fairy stands now.
    pub(super) fn gate(&self) -> Gate<'_> {
        Gate {
            mode: self.modes.mode(),
            registry: &self.registry,
            task_bounds: self
                .projects
                .task_bounds(self.modes.mode(), self.state.project.as_ref()),
            tracker: &self.tracker,
            room: &self.room,
            reviewing: self.landing.reviewing(),
        }
    }
}

impl Gate<'_> {
    /// The verdict on `a` (see [`Routed`]).
    pub fn route(&self, a: &StreamedAction, turn: &TurnState) -> Routed {
        if a.index < turn.skip_below {
            return Routed::Handled;
        }
        let kind = a
            .action
            .get("_type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mode = self.mode;
        let registered = self.registry.get(kind);
        let canvas = match registered {
            Some(Registered::Canvas(handler)) => Some(handler.name()),
            _ => None,
        };
        if !a.complete {
            // Incomplete events only come last in a push, so `id_streaming` describes this one.
            let shown = canvas.is_some()
                && mode.allows(kind)
                && !turn.id_streaming
                && self
                    .task_bounds_check(&a.action, &turn.ctx.transform)
                    .is_ok();
            return if shown {
                Routed::Preview
            } else {
                Routed::Hidden
            };
        }
        let refused = |kind: &str, why: String| Routed::Refused {
            kind: kind.to_owned(),
            why,
        };
        if kind.is_empty() {
            return refused("unknown", "the action has no '_type'".into());
        }
        if !mode.allows(kind) {
            let why = format!(
                "'{kind}' is not allowed in mode {}; allowed actions: {}",
                mode.name(),
                mode.allowed_actions().join(", ")
            );
            return refused(kind, why);
        }
        let Some(canvas) = canvas else {
            return Routed::Runtime {
                saves: registered.is_none_or(Registered::saves_to_history),
            };
        };
        if let Err(why) = self.task_bounds_check(&a.action, &turn.ctx.transform) {
            return refused(kind, why);
        }
        if let Err(why) = size_check(self.room, kind, &a.action) {
            return refused(kind, why);
        }
        if self.reviewing && kind == "create-page" {
            let why =
                "in review mode your changes are suggestions on shapes: pages cannot be created"
                    .to_owned();
            return refused(kind, why);
        }
        Routed::Canvas { kind: canvas }
    }

    /// `Err(correction)` if a canvas action would reach outside its task's bounds.
    fn task_bounds_check(&self, action: &Value, t: &PromptTransform) -> Result<(), String> {
        let Some(bounds) = self.task_bounds else {
            return Ok(());
        };
        guard::check(action, |id| self.tracker.shape(id), &bounds, t)
    }
}

/// `Err(correction)` if the action could take `room`'s document past its size cap (deleting
/// never can): the canvas end checks an incomplete version with it before showing it.
pub(super) fn size_check(room: &Room, kind: &str, action: &Value) -> Result<(), String> {
    if matches!(kind, "delete" | "clear") {
        return Ok(());
    }
    let json = serde_json::to_vec(action).map_or(0, |v| v.len());
    room.admit_write(crate::room::vet::size::json_write_bound(json))
        .map_err(|too_large| {
            format!(
                "{too_large}: the room's document is full; nothing can be added or grown until shapes are deleted"
            )
        })
}
