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
use super::report::Emitter;
use super::steps::Step;
use crate::agent::modes::Mode;
use crate::agent::presence::Pose;
use crate::agent::presence::beacon::Beacon;
use crate::agent::runtime::events::{AgentEvent, EndReason};
use crate::agent::state::memory::HistoryItem;
use crate::agent::state::{DEFAULT_VIEW, Request};
use crate::canvas::geometry::Bounds;
use crate::ids::{FairyId, RequestId};

impl FairyRuntime {
    /// Names this fairy, at work on `request_id` for `prompted_by`, as the actor logged with
    /// its writes (docs/storage.md "History"); called at every turn, since its project task
    /// may change between turns.
    pub(super) fn name_actor(&self, request_id: &RequestId, prompted_by: Option<&str>) {
        let actor = crate::actor::Actor::Fairy {
            id: self.entity.id.to_string(),
            request_id: request_id.to_string(),
            prompted_by: super::prompted_by(&self.entity, prompted_by),
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
        self.feedback.clear();
        self.scheduled = None;
        let ctx = super::hook_ctx(&self.state, &self.projects);
        let out = self.modes.prompt_start(&ctx);
        self.enact_outcome(out);
        self.persist();
        self.out.emit(AgentEvent::RequestStarted {
            messages: first.messages.clone(),
            request_id: request_id.clone(),
        });
        let mut request = first;
        self.bounds = request
            .bounds
            .unwrap_or_else(|| default_bounds(&self.beacon));
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
            self.billing = super::turn::billing_of(&request, self.state.project.as_ref());
            self.compaction().when_over_budget().await;
            self.out.emit(AgentEvent::TurnStarted { turn });
            crate::metrics::global().fairy_turns.inc();
            if let Err(error) = self.run_turn(&request).await {
                self.landing.take_back_shown();
                let steps = failed(&self.out, &self.entity.id, &error);
                self.follow(steps);
                break EndReason::Error;
            }
            self.persist();
            if let Some(why) = self.feedback.take_bound() {
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
                None if self.feedback.has_corrections() => Some(Request::follow_up(
                    "Some of your actions were corrected or rejected: see `corrections`, then continue.",
                    None,
                )),
                None => {
                    let ctx = super::hook_ctx(&self.state, &self.projects);
                    let out = self.modes.prompt_end(&ctx);
                    self.enact_outcome(out);
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
        self.out.write_usage(self.request_ids.first());
        self.request_ids.clear();
        self.beacon.update(|p| {
            p.pose = Pose::Idle;
            p.thinking = None;
        });
        if reason == EndReason::Done {
            self.beacon.celebrate();
        }
        self.persist();
        self.out.emit(AgentEvent::RequestEnded { reason });
    }

    /// True while the request named `id` runs.
    pub fn is_running(&self, id: &RequestId) -> bool {
        self.request_ids.contains(id)
    }

    /// After the request future was dropped: reverts the incomplete action, runs
    /// `on_prompt_cancel` (except for an interrupt with new input, `interrupted`, which keeps
    /// the fairy's mode and task), and ends the request with `reason`.
    pub fn abort(&mut self, reason: EndReason) {
        self.landing.take_back_shown();
        self.landing.set_review(None);
        self.scheduled = None;
        if self.state.working {
            if reason != EndReason::Interrupted {
                let ctx = super::hook_ctx(&self.state, &self.projects);
                let out = self.modes.prompt_cancel(&ctx);
                self.enact_outcome(out);
            }
            self.finish(reason);
        }
    }

    /// The server is stopping mid-request, or the fairy's room closed under it (`stopped`: why,
    /// told to the observers as an `error` then `request-ended` with reason `error`): reverts the
    /// incomplete action but keeps the state marked as working, so that the fairy's next host
    /// says its work was interrupted.
    pub fn abort_for_shutdown(&mut self, stopped: Option<String>) {
        if let Some(message) = stopped {
            self.out.emit(AgentEvent::Error { message });
            self.out.emit(AgentEvent::RequestEnded {
                reason: EndReason::Error,
            });
        }
        self.landing.take_back_shown();
        self.landing.set_review(None);
        self.scheduled = None;
        if self.state.working {
            self.persist_now();
        } else {
            self.flush_state();
        }
    }
}

/// Model failure after retries (or after every context-overflow recovery level), or the
/// room's token budget spent (checked before each model call, so nothing of the refused turn
/// was applied; the runtime reverted what streamed): logged, counted, told to the observers
/// through `out`; the steps that tell the user and put the fairy to idle.
fn failed(out: &Emitter, fairy: &FairyId, error: &crate::llm::LlmError) -> Vec<Step> {
    tracing::warn!(fairy = %fairy, %error, "fairy request failed");
    crate::metrics::global().model_errors.inc();
    out.emit(AgentEvent::Error {
        message: error.to_string(),
    });
    let text = if let crate::llm::LlmError::BudgetExhausted { .. } = error {
        format!("I stopped: {error}.")
    } else if error.is_context_overflow() {
        format!(
            "Sorry, I could not finish: our conversation no longer fits the language model's context, even after I summarised and shortened my history ({error})."
        )
    } else {
        format!("Sorry, I could not finish: the language model failed ({error}).")
    };
    vec![Step::Say(text), Step::Switch(Mode::Idling)]
}

/// Where a request without bounds works: a default view around the fairy.
fn default_bounds(beacon: &Beacon) -> Bounds {
    let p = beacon.snapshot();
    Bounds::new(p.x - 100.0, p.y - 100.0, DEFAULT_VIEW.0, DEFAULT_VIEW.1)
}
