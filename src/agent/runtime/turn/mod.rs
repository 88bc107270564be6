//! One model turn of a fairy's request: build the prompt, stream the answer through
//! [`ActionStream`], apply canvas actions tentatively while they stream and for good when they
//! complete, carry out the runtime actions (message, think, review, todo, fly-to-bounds, solo
//! tasks), and collect what the model must be told next turn (rejected actions, sanitizer
//! notes, broken JSON).
//!
//! Incomplete versions go through the [`StreamThrottle`]; the newest one it held back is
//! applied when its interval ends even if no new text arrives (a timer in the stream loop).
//! The model stream is dropped as soon as the actions broke, or soon after the actions array
//! closed (a few characters or a second, for the provider's usage report). A context
//! overflow is recovered by [`compact`] and the call made again with the same inputs.
//!
//! A failover retry that discards delivered text reverts the incomplete action and skips the
//! actions already completed when the answer streams again, so the document ends as if only
//! the completed actions had been applied once.
//!
//! # The turn's pipeline (parent → child only; the hand-offs are typed)
//! Each stage is a value holding what it uses, borrowed from the runtime for one call: the
//! runtime hands what one stage gives to the next.
//! - [`inputs`]: the prompt's inputs (`TurnInputs`). What the prompt is built from is gathered
//!   once per turn (`Gathered`), then built into a `TurnPrompt` (the model request and its
//!   transform), again for each context-overflow recovery level; review mode's `Suggester`
//!   for the turn is gathered there too.
//! - this file: the streaming loop (`stream_turn`: model events, retries, the throttle's
//!   timer, the tail after the actions) and the dispatch of each streamed object
//!   (`on_streamed`), with the verdicts kept through the runtime's `Feedback`.
//! - [`pipeline`]: the checks (`Gate`). Each streamed object is read once and judged
//!   (`Routed`: preview, hidden, canvas, runtime, refused) before anything is applied.
//! - [`canvas`]: applying canvas actions (`CanvasStage`: tentative versions through the
//!   throttle and the write budget, complete actions for good or as suggestions, a `Landed`).
//! - [`runtime_actions`]: carrying out runtime actions (`SoloWork`: message, think, review,
//!   todo, solo tasks; project actions go on to [`crate::agent::runtime::project_work`]); both hand
//!   back `Step`s for the runtime.
//! - [`compact`]: keeping the history in budget, and recovering from a context overflow
//!   (`Compaction`).

mod canvas;
mod compact;
mod inputs;
mod pipeline;
mod runtime_actions;

use futures_util::StreamExt;
use serde_json::Value;

use compact::OverflowRecovery;

pub(super) use inputs::HistoryMarks;
use inputs::TurnPrompt;
pub(super) use inputs::billing_of;
use pipeline::Routed;

use crate::agent::actions::ActionCtx;
use crate::agent::apply::throttle::StreamThrottle;
use crate::agent::runtime::events::{AgentEvent, UsagePurpose};
use crate::llm::{LlmError, ModelEvent, Usage};
use crate::partial_json::{ActionStream, StreamedAction};

use super::FairyRuntime;
use crate::agent::state::Request;

/// Characters read after the actions array closed before the model stream is dropped: enough
/// for a closing fence and the provider's final events, not for a rambling model.
const TAIL_CHARS: usize = 256;
/// How long a streamed version held back by a spent write budget waits before it is tried
/// again.
const BUDGET_RETRY: std::time::Duration = std::time::Duration::from_millis(50);
/// Longest wait for the end of the stream after the actions array closed.
const TAIL_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// An incomplete version the throttle held back, applied when its interval ends unless a
/// newer version is applied first (the throttle's trailing edge).
struct Held {
    index: usize,
    action: Value,
    until: tokio::time::Instant,
}

/// Where the turn is while streaming.
struct TurnState {
    ctx: ActionCtx,
    throttle: StreamThrottle,
    /// Actions with a lower index were handled before a discarding retry.
    skip_below: usize,
    /// Complete actions handled so far.
    handled: usize,
    /// The newest version held back by the throttle, if any.
    held: Option<Held>,
    /// The open action's snapshot ends inside an id still streaming (a prefix of it, which may
    /// name another shape or a shape that will not exist): not applicable yet.
    id_streaming: bool,
}

/// Whether a key holds shape or page ids (`shapeId`, `fromId`, `pageId`, `shapeIds`, `id`).
fn is_id_key(key: &str) -> bool {
    key == "id" || key.ends_with("Id") || key.ends_with("Ids")
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl FairyRuntime {
    /// Runs one model turn; `Err` only for a model failure after its retries and, for a
    /// context overflow, after the recovery levels of [`compact`].
    pub(super) async fn run_turn(&mut self, request: &Request) -> Result<(), LlmError> {
        let (request_id, apply) = (self.request_ids.first().cloned(), self.apply);
        let review = self
            .inputs()
            .suggester(request, (request_id.as_ref(), apply));
        self.landing.set_review(review);
        let outcome = self.run_turn_here(request).await;
        // A turn dropped midway keeps it: the abort reverts what it streamed, then drops it.
        self.landing.set_review(None);
        outcome
    }

    async fn run_turn_here(&mut self, request: &Request) -> Result<(), LlmError> {
        let told = self.feedback.take_for_prompt();
        let gathered = self.inputs().gather(request, told).await;
        let mut recovery = OverflowRecovery::default();
        loop {
            let messages = recovery.messages(&request.messages);
            let budget = recovery.history_budget(self.config.history_budget);
            let prompt = self.inputs().build(request, &gathered, (&messages, budget));
            self.history_marks.mark(self.state.history.len());
            match self.stream_turn(prompt).await {
                Err(error) if error.is_context_overflow() => {
                    self.landing.take_back_shown();
                    if !self.compaction().recover_overflow(&mut recovery).await {
                        return Err(error);
                    }
                }
                other => return other,
            }
        }
    }

    /// Streams one model call and applies what it says. The stream is dropped (the HTTP
    /// request aborted) as soon as the actions JSON broke beyond repair, and once the actions
    /// array closed as soon as more than [`TAIL_CHARS`] characters follow or [`TAIL_WAIT`]
    /// passes without the end (which carries the provider's usage report): nothing after the
    /// actions would be used, so it is neither waited for nor billed.
    async fn stream_turn(&mut self, prompt: TurnPrompt) -> Result<(), LlmError> {
        let TurnPrompt {
            request: model_request,
            transform,
        } = prompt;
        let mut ctx = ActionCtx::new(self.entity.id.as_str());
        ctx.transform = transform;
        ctx.page_id = self.state.page_id.clone();
        let mut turn = TurnState {
            ctx,
            throttle: StreamThrottle::new(self.config.throttle),
            skip_below: 0,
            handled: 0,
            held: None,
            id_streaming: false,
        };
        let prompt_chars = model_request.text_chars();
        let mut stream = self.model.stream(model_request);
        let mut actions = ActionStream::new();
        let mut usage = Usage::default();
        let mut spent = Usage::default();
        let mut attempts = 1u32;
        // Characters read since the actions array closed, and when to stop waiting for the end.
        let mut tail: Option<(usize, tokio::time::Instant)> = None;
        // True when an action's correction interrupted the answer: nothing after it is applied.
        let mut cut = false;
        // Characters of answer text this attempt, and whether its stream ended by itself (with
        // the provider's final usage report) rather than being dropped here.
        let mut answer_chars = 0usize;
        let mut ended = false;
        // The end of the turn's time (`--fairy-turn-max-secs`), set at the model's first event.
        let mut deadline: Option<tokio::time::Instant> = None;
        let outcome = loop {
            let wake = turn.held.as_ref().map(|h| h.until);
            let save = self.state_save_due().map(tokio::time::Instant::from_std);
            let event = tokio::select! {
                biased;
                () = sleep_until(deadline) => {
                    let secs = self.config.turn_max_time.unwrap_or_default().as_secs();
                    tracing::info!(fairy = %self.entity.id, secs, "turn time cap: model stream dropped");
                    self.feedback.bound(format!("one answer streamed for longer than the {secs} s a turn may take"));
                    cut = true;
                    break Ok(());
                }
                event = stream.next() => event,
                () = sleep_until(wake) => {
                    self.canvas().apply_held(&mut turn);
                    continue;
                }
                // What the last actions changed is stored even while the model is silent.
                () = sleep_until(save) => {
                    self.flush_state();
                    continue;
                }
                () = sleep_until(tail.map(|(_, until)| until)) => {
                    tracing::debug!(fairy = %self.entity.id, "no end after the actions: model stream dropped");
                    break Ok(());
                }
            };
            if deadline.is_none() {
                deadline = self
                    .config
                    .turn_max_time
                    .map(|d| tokio::time::Instant::now() + d);
            }
            let event = match event {
                None => {
                    ended = true;
                    break Ok(());
                }
                Some(Err(error)) => break Err(error),
                Some(Ok(event)) => event,
            };
            match event {
                ModelEvent::TextDelta(text) => {
                    let delta_chars = text.chars().count();
                    answer_chars += delta_chars;
                    if let Some((chars, _)) = &mut tail {
                        *chars += delta_chars;
                        if *chars > TAIL_CHARS {
                            tracing::debug!(fairy = %self.entity.id, "text after the actions: model stream dropped");
                            break Ok(());
                        }
                        continue;
                    }
                    let events = actions.push(&text);
                    turn.id_streaming = actions.streaming_string_key().is_some_and(is_id_key);
                    for a in events {
                        let cap = self.config.turn_max_actions;
                        if self.feedback.past_action_cap(cap, &self.entity.id, &a) {
                            break;
                        }
                        self.canvas().admit(&a).await;
                        self.on_streamed(a, &mut turn);
                        if self.feedback.answer_cut() {
                            break;
                        }
                    }
                    if self.feedback.take_cut() {
                        tracing::debug!(fairy = %self.entity.id, "a correction interrupts the answer: model stream dropped");
                        cut = true;
                        break Ok(());
                    }
                    if actions.error().is_some() {
                        tracing::debug!(fairy = %self.entity.id, "actions broke: model stream dropped");
                        break Ok(());
                    }
                    if actions.is_done() {
                        tail = Some((0, tokio::time::Instant::now() + TAIL_WAIT));
                    }
                }
                ModelEvent::Usage(u) => usage = u,
                ModelEvent::Retry {
                    attempt,
                    error,
                    discard,
                    wait,
                } => {
                    attempts = attempt;
                    self.out
                        .emit(AgentEvent::retry(attempt, &error, discard, wait));
                    spent = spent.with_attempt(&usage);
                    usage = Usage::default();
                    answer_chars = 0;
                    if discard {
                        self.landing.take_back_shown();
                        actions = ActionStream::new();
                        turn.skip_below = turn.handled;
                        turn.throttle.reset();
                        turn.held = None;
                    }
                }
                ModelEvent::Done { .. } => {
                    ended = true;
                    break Ok(());
                }
            }
        };
        drop(stream);
        let mut estimated = false;
        if !ended && outcome.is_ok() {
            // Dropped here before the provider's final usage report (a slow model's comes well
            // after the actions close): counted from what was sent and received instead, as the
            // budgets and `/usage` count it (agent::host::budget). A failed stream's report stands.
            let estimate = usage.counted_after_drop(prompt_chars, answer_chars);
            if estimate != usage {
                tracing::info!(fairy = %self.entity.id, reported = ?usage, estimated = ?estimate, "model stream cut before its usage report: usage estimated");
                usage = estimate;
                estimated = true;
            }
        }
        let total = spent.with_attempt(&usage);
        crate::metrics::global().count_model_tokens(total.input_tokens, total.output_tokens);
        crate::metrics::global().count_cache_tokens(
            total.cache_read_input_tokens,
            total.cache_creation_input_tokens,
        );
        let cost = self.model.cost(&total);
        self.out.emit(
            AgentEvent::usage(UsagePurpose::Turn, &total, attempts, cost).estimated(estimated),
        );
        outcome?;
        if !cut {
            for a in actions.finish() {
                let cap = self.config.turn_max_actions;
                if self.feedback.past_action_cap(cap, &self.entity.id, &a) {
                    break;
                }
                self.canvas().admit(&a).await;
                self.on_streamed(a, &mut turn);
                if self.feedback.answer_cut() {
                    break;
                }
            }
        }
        // A correction that interrupted this answer has done its work: the next turn starts
        // without it (a refusal among the final actions must not cut the next answer short).
        self.feedback.cut_answer(false);
        // An action still open when the answer ended never completes.
        self.landing.take_back_shown();
        if let Some(error) = actions.error() {
            self.feedback.correct(format!(
                "Your JSON was invalid ({error}); the actions after that point were ignored."
            ));
        }
        self.state.page_id = turn.ctx.page_id.clone();
        Ok(())
    }

    /// One streamed object through the pipeline: told to observers, checked
    /// ([`pipeline::Gate::route`]), then shown, applied, carried out or refused.
    fn on_streamed(&mut self, a: StreamedAction, turn: &mut TurnState) {
        let routed = self.gate().route(&a, turn);
        if routed == Routed::Handled {
            return;
        }
        self.out.emit(AgentEvent::Action {
            index: a.index,
            action: a.action.clone(),
            complete: a.complete,
            received_at: self.clock.unix_millis_f64(),
        });
        if a.complete {
            turn.handled = a.index + 1;
            turn.throttle.reset();
            turn.held = None;
        }
        let level = self.modes.mode().memory_level();
        match routed {
            Routed::Handled | Routed::Hidden => {}
            Routed::Preview => self.canvas().preview(a.index, a.action, turn),
            Routed::Refused { kind, why } => {
                self.landing.take_back_shown();
                let told = (&mut self.state.history, &self.out);
                self.feedback.reject(told, (&a.action, &kind), why, level);
            }
            Routed::Canvas { kind } => {
                let landed = self.canvas().land(&a.action, turn);
                // What the request changed survives a crash within half a second (its ledger
                // is stored).
                self.persist();
                match landed.applied {
                    Ok(notes) => {
                        if let Some(area) = landed.area {
                            self.beacon.fly_toward(area);
                        }
                        crate::metrics::global().fairy_canvas_actions.inc();
                        self.feedback.note(notes.notes.iter().cloned());
                        let note = notes.notes.join(" ");
                        self.feedback
                            .accept(&mut self.state.history, &a.action, note, level);
                    }
                    Err(error) => {
                        let told = (&mut self.state.history, &self.out);
                        let why = error.to_string();
                        self.feedback.reject(told, (&a.action, kind), why, level);
                    }
                }
            }
            Routed::Runtime { saves } => {
                self.landing.take_back_shown();
                self.carry_out(&a.action, &turn.ctx.transform);
                if saves {
                    let history = &mut self.state.history;
                    self.feedback
                        .accept(history, &a.action, String::new(), level);
                }
            }
        }
    }
}
