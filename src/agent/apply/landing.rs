//! Where a turn's canvas actions land (docs/fairies.md "Tentative application", "Review
//! mode"): on the room's canvas through the fairy's [`Tentative`], or, in review mode, as
//! suggestions through the turn's [`Suggester`]. Both do the same three things, named once by
//! [`Land`]; the [`Landing`] holds the one and the other and hands out the one in use, so that
//! the turn never asks which.
//!
//! Owns the choice, not the writes (those are [`Tentative`]'s and [`Suggester`]'s).

use serde_json::Value;
use yrs::Origin;

use crate::agent::actions::{ActionCtx, ActionError, Registry, Sanitized};
use crate::agent::apply::suggest::Suggester;
use crate::agent::apply::tentative::Tentative;

/// What a turn does with a canvas action, wherever it lands.
pub trait Land {
    /// Shows an incomplete version (the previous one reverted first).
    fn show(
        &mut self,
        registry: &Registry,
        action: &Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError>;

    /// Applies the complete action for good; with the records it wrote beside the room's
    /// shapes (review mode's suggestions), which the room's fairy write budget counts too.
    fn land(
        &mut self,
        registry: &Registry,
        action: &Value,
        ctx: &mut ActionCtx,
    ) -> (Result<Sanitized, ActionError>, u32);

    /// Takes back the incomplete version shown, if any.
    fn take_back_shown(&mut self);
}

impl Land for Tentative {
    fn show(
        &mut self,
        registry: &Registry,
        action: &Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        self.apply_tentative(registry, action, ctx)
    }

    fn land(
        &mut self,
        registry: &Registry,
        action: &Value,
        ctx: &mut ActionCtx,
    ) -> (Result<Sanitized, ActionError>, u32) {
        (self.apply_complete(registry, action, ctx), 0)
    }

    fn take_back_shown(&mut self) {
        self.revert_tentative();
    }
}

/// Review mode: [`Tentative`]'s steps on the scratch copy, then the records they changed.
impl Land for Suggester {
    fn show(
        &mut self,
        registry: &Registry,
        action: &Value,
        ctx: &mut ActionCtx,
    ) -> Result<Sanitized, ActionError> {
        let shown = self.tentative.apply_tentative(registry, action, ctx);
        self.flush(true);
        shown
    }

    fn land(
        &mut self,
        registry: &Registry,
        action: &Value,
        ctx: &mut ActionCtx,
    ) -> (Result<Sanitized, ActionError>, u32) {
        let applied = self.tentative.apply_complete(registry, action, ctx);
        let written = self.flush(false);
        (applied, written)
    }

    /// Reverts the streamed version, and the records it made or changed.
    fn take_back_shown(&mut self) {
        self.tentative.revert_tentative();
        self.flush(false);
    }
}

/// The fairy's [`Tentative`] on the room's canvas, and the turn's [`Suggester`] while a turn
/// runs in review mode.
pub struct Landing {
    canvas: Tentative,
    review: Option<Suggester>,
}

impl Landing {
    /// Actions land on the canvas through `canvas` until a turn reviews.
    pub fn new(canvas: Tentative) -> Self {
        Landing {
            canvas,
            review: None,
        }
    }

    /// The origin the canvas's reverts write with (the fairy's own, for its change tracker).
    pub fn revert_origin(&self) -> Origin {
        self.canvas.revert_origin()
    }

    /// The turn's actions land in `review` (review mode) or, without one, on the canvas.
    pub fn set_review(&mut self, review: Option<Suggester>) {
        self.review = review;
    }

    /// Whether actions land as suggestions.
    pub fn reviewing(&self) -> bool {
        self.review.is_some()
    }

    /// Where the turn's actions land now.
    pub fn active(&mut self) -> &mut dyn Land {
        match &mut self.review {
            Some(review) => review,
            None => &mut self.canvas,
        }
    }

    /// Takes back the incomplete version shown, on the canvas and in the turn's suggestions.
    pub fn take_back_shown(&mut self) {
        self.canvas.take_back_shown();
        if let Some(review) = &mut self.review {
            review.take_back_shown();
        }
    }
}
