//! The request loop of a fairy (docs/fairies.md "requests"): a request runs turns while a
//! follow-up is scheduled, corrections are pending or the mode's `on_prompt_end` asks for
//! more, up to [`crate::agent::state::RuntimeConfig::max_iterations`]; then it ends (`done`,
//! `max-iterations`, `error`), or it is aborted (cancelled, interrupted, the server stopping:
//! the incomplete tentative action reverted first). Each turn is [`super::turn`]'s.
//!
//! Owns the request's start and end (events, presence, metrics, the ledger's record, the actor
//! its writes are logged under); the turns' work is the children's of `turn/`.

use yrs::Transact;

use super::FairyRuntime;
use crate::agent::modes::Mode;
use crate::agent::presence::Pose;
use crate::agent::runtime::events::{AgentEvent, EndReason};
use crate::agent::state::Request;
use crate::agent::state::memory::HistoryItem;
use crate::ids::RequestId;

impl FairyRuntime {
    /// Names this fairy, at work on `request_id` for `prompted_by`, as the actor logged with
    /// its writes (docs/storage.md "History"); called at every turn, since its project task
    /// may change between turns.
    pub(super) fn name_actor(&self, request_id: &RequestId, prompted_by: Option<&str>) {
        let actor = crate::actor::Actor::Fairy {
            id: self.entity.id.to_string(),
            request_id: request_id.to_string(),
            prompted_by: self.prompted_by(prompted_by),
            model: self.model.name(),
            project_id: self
                .state
                .project
                .as_ref()
                .map(|m| m.project_id.to_string()),
            task_id: self.state.project.as_ref().and_then(|m| m.task_id.clone()),
            accepted_by: None,
        };
        self.room.name_actor(
            crate::origin::TxnOrigin::fairy(self.entity.id.as_str()),
            &actor,
        );
        // Its tentative versions are taken back by their undo manager, under its own origin.
        self.room.name_actor(self.landing.revert_origin(), &actor);
    }

    /// Runs a request to its end (see the module docs). Cancellation is dropping the future
    /// and then calling [`FairyRuntime::abort`].
    pub async fn run_request(&mut self, first: Request) {
        let lease = self.room.lease();
        let mut ids = first.ids.clone();
        if ids.is_empty() {
            ids.push(RequestId::random());
        }
        self.tracker.open_request(&ids, &first.messages.join(" "));
        let request_id = ids[0].clone();
        self.request_ids = ids;
        // The fairy's default as its entity says now (a person may have changed it since it
        // was hosted; the root is the server's).
        let default = {
            let txn = self.room.doc().transact();
            crate::agent::state::fairy::read_fairy(&txn, &self.entity.id)
                .map_or(self.entity.apply, |e| e.apply)
        };
        self.apply = first.apply.unwrap_or(default);
        self.state.working = true;
        self.corrections.clear();
        self.notes.clear();
        self.scheduled = None;
        let ctx = self.hook_ctx();
        let out = self.modes.prompt_start(&ctx);
        self.apply_outcome(out);
        self.persist();
        self.emit(AgentEvent::RequestStarted {
            messages: first.messages.clone(),
            request_id: request_id.clone(),
        });
        let mut request = first;
        self.bounds = request.bounds.unwrap_or_else(|| self.default_bounds());
        if self.state.chat_origin.is_none() {
            self.state.chat_origin = Some((self.bounds.x, self.bounds.y));
        }
        self.beacon
            .fly_to((self.bounds.center_x(), self.bounds.center_y()));
        let mut turn = 0;
        let reason = loop {
            turn += 1;
            if turn > self.config.max_iterations {
                break EndReason::MaxIterations;
            }
            self.state.history.push(HistoryItem::Prompt {
                source: request.source.clone(),
                agent_facing_message: request.messages.join("\n\n"),
                memory_level: self.modes.mode().memory_level(),
                request_id: Some(request_id.clone()),
                acceptance: None,
            });
            self.beacon.update(|p| p.pose = Pose::Thinking);
            self.name_actor(&request_id, request.from_user.as_deref());
            self.billing = self.billing_of(&request);
            self.compaction().when_over_budget().await;
            self.emit(AgentEvent::TurnStarted { turn });
            crate::metrics::global().fairy_turns.inc();
            if let Err(error) = self.run_turn(&request).await {
                self.revert_streamed();
                self.fail(&error);
                break EndReason::Error;
            }
            self.persist();
            if let Some(why) = self.turn_bound.take() {
                self.say(&format!("I stopped: {why}."));
                self.switch_mode(Mode::Idling);
                break EndReason::MaxIterations;
            }
            // A mode that does not work on requests (waiting, standing by, idle after a
            // project ended) ends the request unless something was scheduled.
            if !self.modes.mode().is_active() && self.scheduled.is_none() {
                break EndReason::Done;
            }
            let next = match self.scheduled.take() {
                Some(next) => Some(next),
                None if !self.corrections.is_empty() => Some(Request::follow_up(
                    "Some of your actions were corrected or rejected: see `corrections`, then continue.",
                    None,
                )),
                None => {
                    let ctx = self.hook_ctx();
                    let out = self.modes.prompt_end(&ctx);
                    self.apply_outcome(out);
                    self.scheduled.take()
                }
            };
            match next {
                Some(mut next) => {
                    if let Some(b) = next.bounds {
                        self.bounds = b;
                    }
                    next.from_user = next.from_user.or(request.from_user.take());
                    request = next;
                }
                None => break EndReason::Done,
            }
        };
        if reason == EndReason::MaxIterations {
            self.say("I stopped: this request took more turns than I am allowed.");
            self.switch_mode(Mode::Idling);
        }
        self.finish(reason);
        drop(lease);
    }

    pub(super) fn finish(&mut self, reason: EndReason) {
        let metrics = crate::metrics::global();
        crate::metrics::Metrics::count(&metrics.fairy_requests, reason.name(), 1);
        self.state.working = false;
        self.tracker.close_request();
        self.write_usage();
        self.request_ids.clear();
        self.beacon.update(|p| {
            p.pose = Pose::Idle;
            p.thinking = None;
        });
        if reason == EndReason::Done {
            self.beacon.celebrate();
        }
        self.persist();
        self.emit(AgentEvent::RequestEnded { reason });
    }

    /// Puts what the request's model calls used on its last chat item (`usage`), for every
    /// browser's chat; a request that made no call says nothing.
    fn write_usage(&self) {
        let usage = self.out.usage_so_far();
        let Some(request) = self.request_ids.first() else {
            return;
        };
        if usage.calls == 0 {
            return;
        }
        if let Err(error) = crate::agent::state::fairy::set_request_usage(
            self.room.doc(),
            &self.entity.id,
            request,
            usage,
        ) {
            tracing::warn!(fairy = %self.entity.id, %error, "request usage not written to chat");
        }
    }

    /// True while the request named `id` runs.
    pub fn is_running(&self, id: &RequestId) -> bool {
        self.request_ids.contains(id)
    }

    /// After the request future was dropped: reverts the incomplete action, runs
    /// `on_prompt_cancel`, and ends the request with `reason`.
    pub fn abort(&mut self, reason: EndReason) {
        self.abort_with(reason, true);
    }

    /// [`FairyRuntime::abort`]; `on_prompt_cancel` runs only if `cancel_hook` (a plain cancel,
    /// not an interrupt with new input, which keeps the fairy's mode and task).
    pub(super) fn abort_with(&mut self, reason: EndReason, cancel_hook: bool) {
        self.revert_streamed();
        self.landing.set_review(None);
        self.scheduled = None;
        if self.state.working {
            if cancel_hook {
                let ctx = self.hook_ctx();
                let out = self.modes.prompt_cancel(&ctx);
                self.apply_outcome(out);
            }
            self.finish(reason);
        }
    }

    /// The server is stopping mid-request: reverts the incomplete action but keeps the state
    /// marked as working, so that the restarted fairy says its work was interrupted.
    pub fn abort_for_shutdown(&mut self) {
        self.revert_streamed();
        self.landing.set_review(None);
        self.scheduled = None;
        if self.state.working {
            self.persist_now();
        } else {
            self.flush_state();
        }
    }

    /// Model failure after retries (or after every context-overflow recovery level), or the
    /// room's token budget spent (checked before each model call, so nothing of the refused
    /// turn was applied): revert, tell the user, go idle.
    pub(super) fn fail(&mut self, error: &crate::llm::LlmError) {
        tracing::warn!(fairy = %self.entity.id, %error, "fairy request failed");
        crate::metrics::global().model_errors.inc();
        self.emit(AgentEvent::Error {
            message: error.to_string(),
        });
        if let crate::llm::LlmError::BudgetExhausted { .. } = error {
            self.say(&format!("I stopped: {error}."));
        } else if error.is_context_overflow() {
            self.say(&format!(
                "Sorry, I could not finish: our conversation no longer fits the language model's context, even after I summarised and shortened my history ({error})."
            ));
        } else {
            self.say(&format!(
                "Sorry, I could not finish: the language model failed ({error})."
            ));
        }
        self.switch_mode(Mode::Idling);
    }
}
