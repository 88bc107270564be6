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

mod apply;
mod compact;

use futures_util::StreamExt;
use serde_json::Value;

use compact::OverflowRecovery;

use crate::agent::actions::{ActionCtx, Registered};
use crate::agent::apply::suggest::{Author, Suggester};
use crate::agent::apply::throttle::{Decision, StreamThrottle};
use crate::agent::host::events::{AgentEvent, UsagePurpose};
use crate::agent::presence::Pose;
use crate::agent::prompt::parts::{PromptExtras, ReviewPart};
use crate::agent::prompt::{PromptInput, build_request};
use crate::agent::state::memory::{ActionJson, HistoryItem};
use crate::canvas::transform::PromptTransform;
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
        self.suggest = self.suggester(request);
        let outcome = self.run_turn_here(request).await;
        // A turn dropped midway keeps it: the abort reverts what it streamed, then drops it.
        self.suggest = None;
        outcome
    }

    /// Its pending suggestions (in review mode) and people's decisions on its suggestions not
    /// told yet, for the prompt; marks those decisions told.
    fn review_part(&mut self) -> Option<ReviewPart> {
        use crate::review::record::{self, Status};
        let suggesting = self.suggest.is_some();
        let mine: Vec<record::Suggestion> = {
            let txn = yrs::Transact::transact(self.room.doc());
            let any = yrs::ReadTxn::get_map(&txn, crate::canvas::schema::SUGGESTIONS)
                .is_some_and(|root| yrs::Map::len(&root, &txn) > 0);
            if !any {
                Vec::new()
            } else {
                record::list(&txn)
                    .into_iter()
                    .filter(|s| s.fairy_id == self.entity.id)
                    .collect()
            }
        };
        let mut part = ReviewPart {
            suggesting,
            ..ReviewPart::default()
        };
        for s in mine {
            match s.status {
                Status::Pending if suggesting => part.pending.push(s),
                Status::Pending => {}
                _ if s.decided_at.unwrap_or(0.0) > self.state.decisions_told => {
                    part.decided.push(s)
                }
                _ => {}
            }
        }
        part.pending.sort_by(|a, b| a.at.total_cmp(&b.at));
        part.decided.sort_by(|a, b| {
            a.decided_at
                .unwrap_or(0.0)
                .total_cmp(&b.decided_at.unwrap_or(0.0))
        });
        if let Some(newest) = part.decided.last().and_then(|s| s.decided_at) {
            self.state.decisions_told = newest;
        }
        (!part.is_empty()).then_some(part)
    }

    /// In review mode, the turn's [`Suggester`] over the room's shapes now.
    fn suggester(&self, request: &Request) -> Option<Suggester> {
        if self.apply_mode() != crate::review::ApplyMode::Suggest {
            return None;
        }
        let request_id = self.request_ids.first()?.clone();
        let author = Author {
            fairy: self.entity.id.clone(),
            request: request_id,
            prompted_by: self.prompted_by(request.from_user.as_deref()),
            model: self.model.name(),
        };
        Some(Suggester::new(
            self.room.clone(),
            self.shapes_now(),
            author,
            self.clock.clone(),
        ))
    }

    async fn run_turn_here(&mut self, request: &Request) -> Result<(), LlmError> {
        let origin = self
            .state
            .chat_origin
            .unwrap_or((self.bounds.x, self.bounds.y));
        let mut transform = PromptTransform::new(origin.0, origin.1);
        let changes = self.scope_changes(self.tracker.report(&mut transform));
        self.tracker.start_request();
        let mut corrections = std::mem::take(&mut self.corrections);
        corrections.append(&mut self.notes);
        let mut extras = self.prompt_extras(request).await;
        extras.review = self.review_part();
        let mut recovery = OverflowRecovery::default();
        loop {
            let mut transform = transform.clone();
            let model_request = self.build_prompt(
                request,
                (&changes, &corrections, &extras),
                &recovery,
                &mut transform,
            );
            match self.stream_turn(model_request, transform).await {
                Err(error) if error.is_context_overflow() => {
                    self.revert_streamed();
                    if !self.recover_overflow(&mut recovery).await {
                        return Err(error);
                    }
                }
                other => return other,
            }
        }
    }

    fn build_prompt(
        &self,
        request: &Request,
        (changes, corrections, extras): (
            &crate::agent::apply::changes::ChangeReport,
            &[String],
            &PromptExtras,
        ),
        recovery: &OverflowRecovery,
        transform: &mut PromptTransform,
    ) -> crate::llm::ModelRequest {
        let shapes = self.shapes_now();
        let me = self.beacon.client_id();
        let other_fairies: Vec<Value> = self
            .room
            .presence()
            .into_iter()
            .filter(|(id, _)| *id != me)
            .filter_map(|(_, s)| {
                let f = s.get("fairy")?;
                Some(serde_json::json!({"id": f["id"], "name": f["name"], "x": f["x"], "y": f["y"], "mode": f["mode"]}))
            })
            .collect();
        let tasks: Vec<_> = self.beacon.snapshot().tasks;
        let messages = recovery.messages(&request.messages);
        let input = PromptInput {
            fairy: &self.entity,
            mode: self.modes.mode(),
            history: &self.state.history,
            messages: &messages,
            bounds: self.bounds,
            page_id: &self.state.page_id,
            shapes: &shapes,
            selected: &request.selected,
            changes,
            todo: &self.state.todo,
            tasks: &tasks,
            other_fairies,
            corrections,
            time: crate::agent::prompt::parts::readable_time(self.clock.unix_millis()),
            history_budget: recovery.history_budget(self.config.history_budget),
            project: self.project_part(),
            extras,
        };
        build_request(&input, &self.registry, transform)
    }

    /// Streams one model call and applies what it says. The stream is dropped (the HTTP
    /// request aborted) as soon as the actions JSON broke beyond repair, and once the actions
    /// array closed as soon as more than [`TAIL_CHARS`] characters follow or [`TAIL_WAIT`]
    /// passes without the end (which carries the provider's usage report): nothing after the
    /// actions would be used, so it is neither waited for nor billed.
    async fn stream_turn(
        &mut self,
        model_request: crate::llm::ModelRequest,
        transform: PromptTransform,
    ) -> Result<(), LlmError> {
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
        let mut stream = self.model.stream(model_request);
        let mut actions = ActionStream::new();
        let mut usage = Usage::default();
        let mut spent = Usage::default();
        let mut attempts = 1u32;
        // Characters read since the actions array closed, and when to stop waiting for the end.
        let mut tail: Option<(usize, tokio::time::Instant)> = None;
        // True when an action's correction interrupted the answer: nothing after it is applied.
        let mut cut = false;
        let outcome = loop {
            let wake = turn.held.as_ref().map(|h| h.until);
            let save = self.state_save_due().map(tokio::time::Instant::from_std);
            let event = tokio::select! {
                biased;
                event = stream.next() => event,
                () = sleep_until(wake) => {
                    self.apply_held(&mut turn);
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
            let event = match event {
                None => break Ok(()),
                Some(Err(error)) => break Err(error),
                Some(Ok(event)) => event,
            };
            match event {
                ModelEvent::TextDelta(text) => {
                    if let Some((chars, _)) = &mut tail {
                        *chars += text.chars().count();
                        if *chars > TAIL_CHARS {
                            tracing::debug!(fairy = %self.entity.id, "text after the actions: model stream dropped");
                            break Ok(());
                        }
                        continue;
                    }
                    let events = actions.push(&text);
                    turn.id_streaming = actions.streaming_string_key().is_some_and(is_id_key);
                    for a in events {
                        self.admit(&a).await;
                        self.on_streamed(a, &mut turn);
                        if self.cut_answer {
                            break;
                        }
                    }
                    if std::mem::take(&mut self.cut_answer) {
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
                    self.emit(AgentEvent::retry(attempt, &error, discard, wait));
                    spent = spent.with_attempt(&usage);
                    usage = Usage::default();
                    if discard {
                        self.revert_streamed();
                        actions = ActionStream::new();
                        turn.skip_below = turn.handled;
                        turn.throttle.reset();
                        turn.held = None;
                    }
                }
                ModelEvent::Done { .. } => break Ok(()),
            }
        };
        drop(stream);
        let total = spent.with_attempt(&usage);
        crate::metrics::global().count_model_tokens(total.input_tokens, total.output_tokens);
        self.emit(AgentEvent::usage(UsagePurpose::Turn, &total, attempts));
        outcome?;
        if !cut {
            for a in actions.finish() {
                self.admit(&a).await;
                self.on_streamed(a, &mut turn);
                if self.cut_answer {
                    break;
                }
            }
        }
        // A correction that interrupted this answer has done its work: the next turn starts
        // without it (a refusal among the final actions must not cut the next answer short).
        self.cut_answer = false;
        // An action still open when the answer ended never completes.
        self.revert_streamed();
        if let Some(error) = actions.error() {
            self.corrections.push(format!(
                "Your JSON was invalid ({error}); the actions after that point were ignored."
            ));
        }
        self.state.page_id = turn.ctx.page_id.clone();
        Ok(())
    }

    /// The room's fairy write budget (docs/fairies.md "People and fairies in one room"): a
    /// complete canvas action waits until the room's fairies may write again. Nothing else
    /// waits: a streamed version is skipped instead (see [`FairyRuntime::show`]).
    async fn admit(&self, a: &StreamedAction) {
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

    /// `Err(correction)` when a canvas action could take the room's document past
    /// `--max-doc-bytes` (docs/protocol.md "Document size"): it is bounded by its JSON
    /// ([`crate::room::size::json_write_bound`]). Deleting is always allowed: it is how a room
    /// at its cap makes room.
    fn size_check(&self, kind: &str, action: &Value) -> Result<(), String> {
        if matches!(kind, "delete" | "clear") {
            return Ok(());
        }
        let json = serde_json::to_vec(action).map_or(0, |v| v.len());
        self.room
            .admit_write(crate::room::size::json_write_bound(json))
            .map_err(|too_large| {
                format!(
                    "{too_large}: the room's document is full; nothing can be added or grown until shapes are deleted"
                )
            })
    }

    /// Charges the room's fairy write budget with the shapes the complete action just changed
    /// (streamed versions before it are previews: they wait while the budget is spent, but
    /// cost nothing).
    fn charge_writes(&self) {
        let changed = self.tracker.take_own_writes();
        crate::metrics::global()
            .fairy_shape_writes
            .inc_by(u64::from(changed));
        self.room.fairy_writes().charge(changed);
    }

    /// The throttle's trailing edge: applies the version it held back.
    fn apply_held(&mut self, turn: &mut TurnState) {
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
        if self.size_check(kind, &action).is_err() {
            return;
        }
        self.beacon.update_if_changed(|p| p.pose = Pose::Working);
        // An incomplete version that cannot be applied yet is simply not shown.
        let shown = match &mut self.suggest {
            Some(suggest) => suggest.apply_tentative(&self.registry, &action, &mut turn.ctx),
            None => self
                .tentative
                .apply_tentative(&self.registry, &action, &mut turn.ctx),
        };
        if shown.is_ok() {
            turn.throttle.applied(self.clock.now(), &action);
        }
    }

    fn on_streamed(&mut self, a: StreamedAction, turn: &mut TurnState) {
        if a.index < turn.skip_below {
            return;
        }
        let kind = a
            .action
            .get("_type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        self.emit(AgentEvent::Action {
            index: a.index,
            action: a.action.clone(),
            complete: a.complete,
            received_at: self.clock.unix_millis_f64(),
        });
        let mode = self.modes.mode();
        let canvas = matches!(self.registry.get(&kind), Some(Registered::Canvas(_)));
        if !a.complete {
            // Incomplete events only come last in a push, so `id_streaming` describes this one.
            if canvas
                && mode.allows(&kind)
                && !turn.id_streaming
                && self
                    .task_bounds_check(&a.action, &turn.ctx.transform)
                    .is_ok()
            {
                match turn.throttle.decide(self.clock.now(), &a.action) {
                    Decision::Apply => {
                        turn.held = None;
                        self.show(a.index, a.action, turn);
                    }
                    Decision::Hold { until } => {
                        turn.held = Some(Held {
                            index: a.index,
                            action: a.action,
                            until: tokio::time::Instant::from_std(until),
                        });
                    }
                }
            }
            return;
        }
        turn.handled = a.index + 1;
        turn.throttle.reset();
        turn.held = None;
        let level = mode.memory_level();
        if kind.is_empty() {
            self.revert_streamed();
            self.reject(
                &a.action,
                "unknown",
                "the action has no '_type'".into(),
                level,
            );
            return;
        }
        if !mode.allows(&kind) {
            self.revert_streamed();
            let why = format!(
                "'{kind}' is not allowed in mode {}; allowed actions: {}",
                mode.name(),
                mode.allowed_actions().join(", ")
            );
            self.reject(&a.action, &kind, why, level);
            return;
        }
        if canvas && let Err(why) = self.task_bounds_check(&a.action, &turn.ctx.transform) {
            self.revert_streamed();
            self.reject(&a.action, &kind, why, level);
            return;
        }
        if canvas && let Err(why) = self.size_check(&kind, &a.action) {
            self.revert_streamed();
            self.reject(&a.action, &kind, why, level);
            return;
        }
        if canvas && self.suggest.is_some() && kind == "create-page" {
            self.revert_streamed();
            let why =
                "in review mode your changes are suggestions on shapes: pages cannot be created"
                    .to_owned();
            self.reject(&a.action, &kind, why, level);
            return;
        }
        if canvas {
            // What the streamed versions wrote is not the action's.
            self.tracker.take_own_writes();
            let applied = match &mut self.suggest {
                Some(suggest) => {
                    let (applied, records) =
                        suggest.apply_complete(&self.registry, &a.action, &mut turn.ctx);
                    self.room.fairy_writes().charge(records);
                    applied
                }
                None => {
                    let applied =
                        self.tentative
                            .apply_complete(&self.registry, &a.action, &mut turn.ctx);
                    self.charge_writes();
                    applied
                }
            };
            // What the request changed survives a crash within half a second (its ledger
            // is stored).
            self.persist();
            match applied {
                Ok(notes) => {
                    crate::metrics::global().fairy_canvas_actions.inc();
                    self.notes.extend(notes.notes.iter().cloned());
                    self.accept(&a.action, notes.notes.join(" "), level);
                }
                Err(error) => self.reject(&a.action, &kind, error.to_string(), level),
            }
            return;
        }
        self.revert_streamed();
        self.apply_runtime(&a.action, &turn.ctx.transform);
        let saves = self
            .registry
            .get(&kind)
            .is_none_or(Registered::saves_to_history);
        if saves {
            self.accept(&a.action, String::new(), level);
        }
    }

    fn accept(&mut self, action: &Value, note: String, level: crate::agent::modes::MemoryLevel) {
        let metrics = crate::metrics::global();
        crate::metrics::Metrics::count(
            &metrics.fairy_actions,
            crate::agent::state::memory::Acceptance::Accepted.as_str(),
            1,
        );
        self.state.history.push(HistoryItem::Action {
            action: ActionJson::new(action),
            acceptance: crate::agent::state::memory::Acceptance::Accepted,
            note: (!note.is_empty()).then_some(note),
            memory_level: level,
        });
    }

    fn reject(
        &mut self,
        action: &Value,
        kind: &str,
        why: String,
        level: crate::agent::modes::MemoryLevel,
    ) {
        let metrics = crate::metrics::global();
        crate::metrics::Metrics::count(
            &metrics.fairy_actions,
            crate::agent::state::memory::Acceptance::Rejected.as_str(),
            1,
        );
        self.emit(AgentEvent::ActionRejected {
            action_type: kind.into(),
            reason: why.clone(),
        });
        self.corrections.push(format!("Rejected '{kind}': {why}"));
        self.state.history.push(HistoryItem::Action {
            action: ActionJson::new(action),
            acceptance: crate::agent::state::memory::Acceptance::Rejected,
            note: Some(why),
            memory_level: level,
        });
    }
}
