//! One model turn of a fairy's request: build the prompt, stream the answer through
//! [`ActionStream`], apply canvas actions tentatively while they stream and for good when they
//! complete, carry out the runtime actions (message, think, review, todo, fly-to-bounds, solo
//! tasks), and collect what the model must be told next turn (rejected actions, sanitizer
//! notes, broken JSON).
//!
//! A failover retry that discards delivered text reverts the incomplete action and skips the
//! actions already completed when the answer streams again, so the document ends as if only
//! the completed actions had been applied once.

use std::time::Instant;

use futures_util::StreamExt;
use serde_json::Value;
use yrs::Transact;

use super::actions::{ActionCtx, Registered};
use super::events::AgentEvent;
use super::memory::HistoryItem;
use super::presence::Pose;
use super::prompt::{PromptInput, build_request};
use super::runtime::{FairyRuntime, Request};
use super::throttle::StreamThrottle;
use crate::canvas::geometry::Bounds;
use crate::canvas::shape::list_shapes;
use crate::canvas::transform::PromptTransform;
use crate::llm::{LlmError, ModelEvent};
use crate::partial_json::{ActionStream, StreamedAction};

/// Longest text kept from a `message` or `think` action.
const MAX_SAY_CHARS: usize = 4000;

pub(super) fn text_of(action: &Value, key: &str) -> String {
    action
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .chars()
        .take(MAX_SAY_CHARS)
        .collect()
}

fn num(action: &Value, key: &str) -> Option<f64> {
    match action.get(key)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|n: &f64| n.is_finite())
}

/// Model-space bounds `{x, y, w, h}` of an action, in page coordinates.
pub(super) fn bounds_of(action: &Value, t: &PromptTransform) -> Option<Bounds> {
    let (x, y) = t.point_from_model(num(action, "x")?, num(action, "y")?);
    Some(Bounds::new(
        x,
        y,
        num(action, "w").unwrap_or(0.0),
        num(action, "h").unwrap_or(0.0),
    ))
}

/// Adds a turn's token usage (failed attempts plus the last one) to the metrics.
fn record_usage(spent: &crate::llm::Usage, last: &crate::llm::Usage) {
    let m = crate::metrics::global();
    let input = spent.input_tokens + last.input_tokens;
    let output = spent.output_tokens + last.output_tokens;
    crate::metrics::Metrics::count(&m.model_tokens, "input", input);
    crate::metrics::Metrics::count(&m.model_tokens, "output", output);
}

/// Where the turn is while streaming.
struct TurnState {
    ctx: ActionCtx,
    throttle: StreamThrottle,
    /// Actions with a lower index were handled before a discarding retry.
    skip_below: usize,
    /// Complete actions handled so far.
    handled: usize,
}

impl FairyRuntime {
    /// Runs one model turn; `Err` only for a model failure after its retries.
    pub(super) async fn run_turn(&mut self, request: &Request) -> Result<(), LlmError> {
        let origin = self
            .state
            .chat_origin
            .unwrap_or((self.bounds.x, self.bounds.y));
        let mut transform = PromptTransform::new(origin.0, origin.1);
        let changes = self.tracker.report(&mut transform);
        self.tracker.start_request();
        let shapes = list_shapes(&self.room.doc().transact());
        let corrections = std::mem::take(&mut self.corrections);
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
        let page_id = self.state.page_id.clone();
        let input = PromptInput {
            fairy: &self.entity,
            mode: self.modes.mode(),
            history: &self.state.history,
            messages: &request.messages,
            bounds: self.bounds,
            page_id: &page_id,
            shapes: &shapes,
            selected: &request.selected,
            changes: &changes,
            todo: &self.state.todo,
            tasks: &tasks,
            other_fairies,
            corrections: &corrections,
            time: format!("{} ms since the Unix epoch", super::fairy::now_millis()),
            history_budget: self.config.history_budget,
        };
        let model_request = build_request(&input, &self.registry, &mut transform);
        let mut ctx = ActionCtx::new(self.entity.id.as_str());
        ctx.transform = transform;
        ctx.page_id = page_id;
        let mut turn = TurnState {
            ctx,
            throttle: StreamThrottle::new(self.config.throttle),
            skip_below: 0,
            handled: 0,
        };
        let mut stream = self.model.stream(model_request);
        let mut actions = ActionStream::new();
        let mut usage = crate::llm::Usage::default();
        let mut spent = crate::llm::Usage::default();
        while let Some(event) = stream.next().await {
            let event = match event {
                Ok(event) => event,
                Err(error) => {
                    record_usage(&spent, &usage);
                    return Err(error);
                }
            };
            match event {
                ModelEvent::TextDelta(text) => {
                    for a in actions.push(&text) {
                        self.on_streamed(a, &mut turn);
                    }
                }
                ModelEvent::Usage(u) => usage = u,
                ModelEvent::Retry { discard: true, .. } => {
                    spent.input_tokens += usage.input_tokens;
                    spent.output_tokens += usage.output_tokens;
                    usage = crate::llm::Usage::default();
                    self.tentative.revert_tentative();
                    actions = ActionStream::new();
                    turn.skip_below = turn.handled;
                    turn.throttle.reset();
                }
                ModelEvent::Retry { .. } => {}
                ModelEvent::Done { .. } => break,
            }
        }
        record_usage(&spent, &usage);
        for a in actions.finish() {
            self.on_streamed(a, &mut turn);
        }
        // An action still open when the answer ended never completes.
        self.tentative.revert_tentative();
        if let Some(error) = actions.error() {
            self.corrections.push(format!(
                "Your JSON was invalid ({error}); the actions after that point were ignored."
            ));
        }
        self.state.page_id = turn.ctx.page_id.clone();
        Ok(())
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
            received_at: super::fairy::now_millis_precise(),
        });
        let mode = self.modes.mode();
        let canvas = matches!(self.registry.get(&kind), Some(Registered::Canvas(_)));
        if !a.complete {
            if canvas && mode.allows(&kind) && turn.throttle.should_apply(Instant::now(), &a.action)
            {
                self.beacon.update(|p| p.pose = Pose::Working);
                // An incomplete version that cannot be applied yet is simply not shown.
                let _ = self
                    .tentative
                    .apply_tentative(&self.registry, &a.action, &mut turn.ctx);
            }
            return;
        }
        turn.handled = a.index + 1;
        turn.throttle.reset();
        let level = mode.memory_level();
        if kind.is_empty() {
            self.tentative.revert_tentative();
            self.reject(
                &a.action,
                "unknown",
                "the action has no '_type'".into(),
                level,
            );
            return;
        }
        if !mode.allows(&kind) {
            self.tentative.revert_tentative();
            let why = format!(
                "'{kind}' is not allowed in mode {}; allowed actions: {}",
                mode.name(),
                mode.allowed_actions().join(", ")
            );
            self.reject(&a.action, &kind, why, level);
            return;
        }
        if canvas {
            match self
                .tentative
                .apply_complete(&self.registry, &a.action, &mut turn.ctx)
            {
                Ok(notes) => {
                    self.corrections.extend(notes.notes.iter().cloned());
                    self.accept(&a.action, notes.notes.join(" "), level);
                }
                Err(error) => self.reject(&a.action, &kind, error.to_string(), level),
            }
            return;
        }
        self.tentative.revert_tentative();
        self.apply_runtime(&kind, &a.action, &turn.ctx.transform);
        let saves = self
            .registry
            .get(&kind)
            .is_none_or(Registered::saves_to_history);
        if saves {
            self.accept(&a.action, String::new(), level);
        }
    }

    fn accept(&mut self, action: &Value, note: String, level: super::modes::MemoryLevel) {
        let metrics = crate::metrics::global();
        crate::metrics::Metrics::count(&metrics.fairy_actions, "accepted", 1);
        self.state.history.push(HistoryItem::Action {
            action: action.clone(),
            acceptance: "accepted".into(),
            note: (!note.is_empty()).then_some(note),
            memory_level: level,
        });
    }

    fn reject(
        &mut self,
        action: &Value,
        kind: &str,
        why: String,
        level: super::modes::MemoryLevel,
    ) {
        let metrics = crate::metrics::global();
        crate::metrics::Metrics::count(&metrics.fairy_actions, "rejected", 1);
        self.emit(AgentEvent::ActionRejected {
            action_type: kind.into(),
            reason: why.clone(),
        });
        self.corrections.push(format!("Rejected '{kind}': {why}"));
        self.state.history.push(HistoryItem::Action {
            action: action.clone(),
            acceptance: "rejected".into(),
            note: Some(why),
            memory_level: level,
        });
    }
}
