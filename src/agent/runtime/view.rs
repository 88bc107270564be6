//! What a fairy's runtime gathers for a prompt beside the shapes (docs/fairies.md "What a
//! fairy sees"): the pages, the task it works on, the viewport of the person who asked (from
//! the awareness state `{user: {id}, viewport: {x, y, w, h}}` of one of their own connections:
//! no other peer can publish it for them), the model's name, the room's
//! instructions (from the store, at every turn, so an admin's edit reaches the next turn), and
//! with `--llm-vision` a screenshot of the request bounds, read and rendered in the screenshot
//! pool ([`screenshot::shoot`]).
//!
//! Reads only: the document in one short transaction, awareness, the store's instructions.

use serde_json::Value;
use yrs::Transact;

use crate::agent::modes::Mode;
use crate::agent::prompt::parts::{PromptExtras, WorkingTask};
use crate::agent::prompt::screenshot;
use crate::agent::runtime::FairyRuntime;
use crate::agent::state::Request;
use crate::canvas::geometry::Bounds;
use crate::canvas::page::list_pages;

/// The `viewport` of the awareness state whose `user.id` is `sub`, if one is published and
/// finite (several tabs of one person: the first found).
pub fn user_viewport<'a>(states: impl IntoIterator<Item = &'a Value>, sub: &str) -> Option<Bounds> {
    states.into_iter().find_map(|state| {
        if state.get("user")?.get("id")?.as_str()? != sub {
            return None;
        }
        let v = state.get("viewport")?;
        let n = |k: &str| v.get(k)?.as_f64().filter(|n| n.is_finite());
        Some(Bounds::new(n("x")?, n("y")?, n("w")?, n("h")?))
    })
}

impl FairyRuntime {
    /// Everything [`PromptExtras`] holds, for `request` at the current bounds.
    pub(super) async fn prompt_extras(&self, request: &Request) -> PromptExtras {
        let pages = list_pages(&self.room.doc().transact());
        let working = matches!(
            self.modes.mode(),
            Mode::WorkingSolo | Mode::WorkingDrone | Mode::WorkingOrchestrator
        );
        let working_task = working
            .then(|| {
                let id = self.state.current_task.as_ref()?;
                let task = self.state.tasks.iter().find(|t| &t.id == id)?;
                Some(WorkingTask {
                    id: task.id.clone(),
                    title: task.title.clone(),
                    text: task.text.clone(),
                    bounds: task.bounds,
                })
            })
            .flatten();
        let user_viewport = request.from_user.as_deref().and_then(|sub| {
            let own = self.room.presence_of(sub);
            user_viewport(&own, sub)
        });
        let instructions = match self
            .room
            .store()
            .side()
            .load_instructions(self.room.name())
            .await
        {
            Ok(text) => text,
            Err(error) => {
                tracing::warn!(fairy = %self.entity.id, %error, "room instructions not read; this turn goes without them");
                None
            }
        };
        // Read and drawn in the screenshot pool, never waited for past the render budget.
        let (screenshot, screenshot_note) = if self.config.vision {
            // From the room's live view: the pool never walks the document under its lock.
            // Only what the screenshot can show is copied for the pool, in z-order.
            let page = self.state.page_id.clone();
            let all = self.shapes_now();
            let mut shapes: Vec<_> = crate::canvas::render::visible(&all, &page, &self.bounds)
                .into_iter()
                .cloned()
                .collect();
            shapes.sort_by(crate::canvas::shape::paint_order);
            match screenshot::shoot(shapes, page, self.bounds).await {
                Ok(shot) => (shot, None),
                Err(skipped) => (None, Some(skipped.note())),
            }
        } else {
            (None, None)
        };
        PromptExtras {
            pages,
            working_task,
            user_viewport,
            model_name: self.model.name(),
            instructions,
            screenshot,
            screenshot_note,
            review: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_askers_viewport_is_found_by_user_id() {
        let states = [
            json!({"fairy": {"id": "f"}}),
            json!({"user": {"id": "bob"}, "viewport": {"x": 1, "y": 2, "w": 3, "h": 4}}),
            json!({"user": {"id": "ann"}, "viewport": {"x": 10, "y": 20, "w": 300, "h": 200}}),
            json!({"user": {"id": "eve"}, "viewport": {"x": "no"}}),
        ];
        assert_eq!(
            user_viewport(&states, "ann"),
            Some(Bounds::new(10.0, 20.0, 300.0, 200.0))
        );
        assert_eq!(user_viewport(&states, "eve"), None);
        assert_eq!(user_viewport(&states, "zed"), None);
    }
}
