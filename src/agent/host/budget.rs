//! The model-token budgets of fairies (docs/fairies.md "Requests and interrupts"): per room per
//! hour (`--fairy-token-budget`), per person per day (`--fairy-token-budget-person`, the token
//! `sub` of whoever asked) and per project per day (`--fairy-token-budget-project`); and the
//! [`BudgetedModel`] wrapper that enforces them around every model call a fairy makes (turns
//! and history summaries alike), records what each call used and cost in the
//! [`UsageBook`](crate::agent::host::usage::UsageBook), and prices calls.
//!
//! Each budget is a bucket that refills continuously over its window. A call is made only if
//! none of its buckets (its room's; its person's and project's when it has them) is empty when
//! it starts (checked before each model call, so a request ends between turns, never in the
//! middle of applying one); what the call used is taken out of each as the provider reports it
//! (a bucket may go below zero by the last call's cost, which delays the next call
//! accordingly). Counted: input, output and cache-write tokens; cache reads are not (a cached
//! prefix re-read each turn costs a tenth of fresh input). A failed attempt that reported usage
//! is counted too. An attempt the caller drops after it began answering but before its stream
//! ended (a turn cut at its tail, its caps or a correction; a cancelled request) is counted
//! by estimate ([`Usage::counted_after_drop`]), as the fairy's `usage` event counts it: the
//! provider's final report (OpenAI-compatible: all of it) never arrives, and a budget must not
//! read a cut stream as free.
//!
//! Owns the buckets (one short critical section, never held across `.await`). Must not touch
//! documents or the fairy's state: ending the request and telling the user is the runtime's
//! job, on [`LlmError::BudgetExhausted`]; refusing a prompt is the hub's.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::Stream;

use crate::agent::host::usage::{Recorded, UsageBook, UsageKey};
use crate::clock::SharedClock;
use crate::ids::{FairyId, RoomName};
use crate::llm::error::BudgetScope;
use crate::llm::prices::Prices;
use crate::llm::{LlmError, Model, ModelEvent, ModelRequest, ModelStream, Usage};

/// The room budget's window.
const HOUR: Duration = Duration::from_secs(3600);
/// The person and project budgets' window.
const DAY: Duration = Duration::from_secs(24 * 3600);
/// Buckets kept before full ones are forgotten.
const PRUNE_ABOVE: usize = 4096;

/// The sizes of the budgets; 0: no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BudgetLimits {
    /// Tokens per room per hour (`--fairy-token-budget`).
    pub room_per_hour: u64,
    /// Tokens per person per day (`--fairy-token-budget-person`).
    pub person_per_day: u64,
    /// Tokens per project per day (`--fairy-token-budget-project`).
    pub project_per_day: u64,
}

impl BudgetLimits {
    /// A room budget alone.
    pub fn room(per_hour: u64) -> Self {
        BudgetLimits {
            room_per_hour: per_hour,
            ..BudgetLimits::default()
        }
    }

    fn of(&self, scope: BudgetScope) -> (u64, Duration) {
        match scope {
            BudgetScope::Room => (self.room_per_hour, HOUR),
            BudgetScope::Person => (self.person_per_day, DAY),
            BudgetScope::Project => (self.project_per_day, DAY),
        }
    }
}

/// Who pays for a call beside its room: the person who asked and the project it serves.
#[derive(Debug, Clone, Copy, Default)]
pub struct Payers<'a> {
    /// The token `sub` of the person whose request it is.
    pub person: Option<&'a str>,
    /// The project the fairy works in.
    pub project: Option<&'a str>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Tokens left; negative after a call that cost more than was left.
    available: f64,
    updated: Instant,
}

/// The token buckets of every room, person and project.
pub struct TokenBudget {
    limits: BudgetLimits,
    buckets: Mutex<HashMap<(BudgetScope, String), Bucket>>,
    clock: SharedClock,
}

impl std::fmt::Debug for TokenBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenBudget")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl TokenBudget {
    /// A budget of `per_hour` tokens per room (no person or project budget) on the system
    /// clock; 0 means no limit.
    pub fn new(per_hour: u64) -> Arc<Self> {
        Self::with_clock(BudgetLimits::room(per_hour), crate::clock::system())
    }

    /// Budgets of `limits` whose buckets refill on `clock`.
    pub fn with_clock(limits: BudgetLimits, clock: SharedClock) -> Arc<Self> {
        Arc::new(TokenBudget {
            limits,
            buckets: Mutex::new(HashMap::new()),
            clock,
        })
    }

    /// The sizes of the budgets.
    pub fn limits(&self) -> BudgetLimits {
        self.limits
    }

    /// Tokens per room per hour (0: unlimited).
    pub fn per_hour(&self) -> u64 {
        self.limits.room_per_hour
    }

    fn with_bucket<T>(
        &self,
        key: (BudgetScope, &str),
        now: Instant,
        f: impl FnOnce(&mut Bucket) -> T,
    ) -> T {
        let limits = self.limits;
        let (size, window) = limits.of(key.0);
        let full = size as f64;
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() > PRUNE_ABOVE {
            buckets.retain(|(scope, _), b| {
                let (size, window) = limits.of(*scope);
                let rate = size as f64 / window.as_secs_f64();
                b.available + now.saturating_duration_since(b.updated).as_secs_f64() * rate
                    < size as f64
            });
        }
        let bucket = buckets.entry((key.0, key.1.to_owned())).or_insert(Bucket {
            available: full,
            updated: now,
        });
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.available = (bucket.available + elapsed * full / window.as_secs_f64()).min(full);
        bucket.updated = now;
        f(bucket)
    }

    /// The budgets a call in `room` for `payers` draws on, with their keys.
    fn scopes<'a>(room: &'a RoomName, payers: Payers<'a>) -> [(BudgetScope, Option<&'a str>); 3] {
        [
            (BudgetScope::Room, Some(room.as_str())),
            (BudgetScope::Person, payers.person),
            (BudgetScope::Project, payers.project),
        ]
    }

    /// Whether a call may start at `now`; the error names the first budget spent and when it
    /// holds a token again.
    fn check_at(&self, room: &RoomName, payers: Payers<'_>, now: Instant) -> Result<(), LlmError> {
        for (scope, key) in Self::scopes(room, payers) {
            let (size, window) = self.limits.of(scope);
            let Some(key) = key.filter(|_| size > 0) else {
                continue;
            };
            let available = self.with_bucket((scope, key), now, |b| b.available);
            if available > 0.0 {
                continue;
            }
            // Time for the bucket to hold at least one token again.
            let per_sec = size as f64 / window.as_secs_f64();
            let wait = ((1.0 - available) / per_sec).ceil();
            return Err(LlmError::BudgetExhausted {
                budget: scope,
                limit: size,
                retry_in_secs: if wait.is_finite() {
                    wait as u64
                } else {
                    u64::MAX
                },
            });
        }
        Ok(())
    }

    /// Whether a call in `room` for `payers` may start now; the error says which budget is
    /// spent and when it may.
    pub fn check(&self, room: &RoomName, payers: Payers<'_>) -> Result<(), LlmError> {
        self.check_at(room, payers, self.clock.now())
    }

    /// Takes `tokens` out of each budget of `room` and `payers` at `now`.
    fn spend_at(&self, room: &RoomName, payers: Payers<'_>, tokens: u64, now: Instant) {
        if tokens == 0 {
            return;
        }
        for (scope, key) in Self::scopes(room, payers) {
            if let Some(key) = key.filter(|_| self.limits.of(scope).0 > 0) {
                self.with_bucket((scope, key), now, |b| b.available -= tokens as f64);
            }
        }
    }

    /// Takes `tokens` out of each budget of `room` and `payers` now.
    pub fn spend(&self, room: &RoomName, payers: Payers<'_>, tokens: u64) {
        self.spend_at(room, payers, tokens, self.clock.now());
    }
}

/// The tokens of a usage report that count against the budget.
fn counted(usage: &Usage) -> u64 {
    usage
        .input_tokens
        .saturating_add(usage.output_tokens)
        .saturating_add(usage.cache_creation_input_tokens)
}

/// What every fairy's model is metered and priced with: the budgets, the usage book and the
/// prices.
#[derive(Debug)]
pub struct Metering {
    /// The budgets.
    pub budget: Arc<TokenBudget>,
    /// What was used, for `GET /rooms/{room}/usage`.
    pub book: Arc<UsageBook>,
    /// Prices per model (`--llm-prices`).
    pub prices: Prices,
    /// Cache writes go to the 1-hour cache (`--llm-cache-ttl 1h`).
    pub one_hour_cache: bool,
}

impl Metering {
    /// Budgets alone, the built-in prices, an empty book.
    pub fn new(budget: Arc<TokenBudget>) -> Arc<Self> {
        Arc::new(Metering {
            budget,
            book: Arc::new(UsageBook::default()),
            prices: Prices::defaults(),
            one_hour_cache: false,
        })
    }
}

/// A fairy's model, metered against its budgets.
pub struct BudgetedModel {
    inner: Arc<dyn Model>,
    metering: Arc<Metering>,
    room: RoomName,
    fairy: FairyId,
}

impl BudgetedModel {
    /// Wraps `inner` for the fairy `fairy` of `room`.
    pub fn new(
        inner: Arc<dyn Model>,
        metering: Arc<Metering>,
        room: RoomName,
        fairy: FairyId,
    ) -> Self {
        BudgetedModel {
            inner,
            metering,
            room,
            fairy,
        }
    }
}

impl Model for BudgetedModel {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn cost(&self, usage: &Usage) -> Option<f64> {
        self.metering
            .prices
            .cost(&self.inner.name(), usage, self.metering.one_hour_cache)
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let payers = Payers {
            person: request.billing.person.as_deref(),
            project: request.billing.project.as_deref(),
        };
        if let Err(error) = self.metering.budget.check(&self.room, payers) {
            return Box::pin(futures_util::stream::once(async move { Err(error) }));
        }
        let key = UsageKey {
            fairy: self.fairy.clone(),
            person: request.billing.person.clone(),
            project: request.billing.project.clone(),
        };
        let prompt_chars = request.text_chars();
        Box::pin(Metered {
            inner: self.inner.stream(request),
            metering: self.metering.clone(),
            model: self.inner.name(),
            room: self.room.clone(),
            key,
            attempt: Usage::default(),
            prompt_chars,
            answer_chars: 0,
            open: true,
        })
    }
}

/// A model stream that takes each attempt's usage out of the budgets and into the book: at a
/// retry, at the end, or when the stream is dropped (a cancelled request pays for what it
/// used; by estimate when the attempt was answering).
struct Metered {
    inner: ModelStream,
    metering: Arc<Metering>,
    model: String,
    room: RoomName,
    key: UsageKey,
    /// The current attempt's cumulative usage so far, as reported.
    attempt: Usage,
    /// Characters of the prompt's text ([`ModelRequest::text_chars`]).
    prompt_chars: usize,
    /// Characters of answer text the current attempt delivered.
    answer_chars: usize,
    /// Whether the stream has not ended (with its end, a failure, or nothing more).
    open: bool,
}

impl Metered {
    /// Takes the current attempt out of the budgets and into the book. `dropped`: the caller
    /// dropped the stream while the attempt was open, so an attempt that began answering is
    /// counted by estimate.
    fn settle(&mut self, dropped: bool) {
        let reported = std::mem::take(&mut self.attempt);
        let answer_chars = std::mem::take(&mut self.answer_chars);
        let used = if dropped {
            reported.counted_after_drop(self.prompt_chars, answer_chars)
        } else {
            reported
        };
        if used == Usage::default() {
            return;
        }
        let payers = Payers {
            person: self.key.person.as_deref(),
            project: self.key.project.as_deref(),
        };
        self.metering
            .budget
            .spend(&self.room, payers, counted(&used));
        let cost = self
            .metering
            .prices
            .cost(&self.model, &used, self.metering.one_hour_cache);
        let now = self.metering.budget.clock.unix_millis();
        let call = Recorded {
            usage: used,
            cost,
            estimated: used != reported,
        };
        self.metering.book.record(&self.room, &self.key, call, now);
    }
}

impl Stream for Metered {
    type Item = Result<ModelEvent, LlmError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = self.inner.as_mut().poll_next(cx);
        match &next {
            Poll::Ready(Some(Ok(ModelEvent::Usage(usage)))) => self.attempt = *usage,
            Poll::Ready(Some(Ok(ModelEvent::TextDelta(text)))) => {
                self.answer_chars += text.chars().count();
            }
            Poll::Ready(Some(Ok(ModelEvent::Retry { .. }))) => self.settle(false),
            Poll::Ready(Some(Ok(ModelEvent::Done { .. })) | Some(Err(_)) | None) => {
                self.open = false;
                self.settle(false);
            }
            Poll::Pending => {}
        }
        next
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        let open = self.open;
        self.settle(open);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn room() -> RoomName {
        RoomName::parse("budget").expect("name")
    }

    fn alone() -> Payers<'static> {
        Payers::default()
    }

    #[test]
    fn a_spent_bucket_refuses_until_it_refills() {
        let clock = ManualClock::new();
        let budget = TokenBudget::with_clock(BudgetLimits::room(3600), Arc::new(clock.clone()));
        assert!(budget.check(&room(), alone()).is_ok());
        budget.spend(&room(), alone(), 4000);
        match budget.check(&room(), alone()) {
            Err(LlmError::BudgetExhausted {
                budget: BudgetScope::Room,
                limit,
                retry_in_secs,
            }) => {
                assert_eq!(limit, 3600);
                // 400 tokens of debt plus one, at one token per second.
                assert_eq!(retry_in_secs, 401);
            }
            other => panic!("{other:?}"),
        }
        clock.advance(Duration::from_secs(400));
        assert!(budget.check(&room(), alone()).is_err());
        clock.advance(Duration::from_secs(2));
        assert!(budget.check(&room(), alone()).is_ok());
        // Another room has its own bucket.
        let other = RoomName::parse("other").expect("name");
        assert!(budget.check(&other, alone()).is_ok());
    }

    #[test]
    fn refills_never_exceed_the_hourly_size() {
        let clock = ManualClock::new();
        let budget = TokenBudget::with_clock(BudgetLimits::room(100), Arc::new(clock.clone()));
        budget.spend(&room(), alone(), 50);
        clock.advance(Duration::from_secs(10 * 3600));
        budget.spend(&room(), alone(), 0);
        budget.spend(&room(), alone(), 100);
        assert!(budget.check(&room(), alone()).is_err());
    }

    #[test]
    fn zero_is_unlimited() {
        let budget = TokenBudget::new(0);
        budget.spend(&room(), alone(), u64::MAX);
        assert!(budget.check(&room(), alone()).is_ok());
    }

    #[test]
    fn a_person_and_a_project_have_daily_buckets_across_rooms() {
        let clock = ManualClock::new();
        let limits = BudgetLimits {
            room_per_hour: 0,
            person_per_day: 86_400,
            project_per_day: 172_800,
        };
        let budget = TokenBudget::with_clock(limits, Arc::new(clock.clone()));
        let ann = Payers {
            person: Some("ann"),
            project: None,
        };
        budget.spend(&room(), ann, 86_401);
        // Ann is refused in every room; Bob is not.
        let other = RoomName::parse("other").expect("name");
        match budget.check(&other, ann) {
            Err(LlmError::BudgetExhausted {
                budget: BudgetScope::Person,
                limit: 86_400,
                retry_in_secs: 2,
            }) => {}
            other => panic!("{other:?}"),
        }
        let bob = Payers {
            person: Some("bob"),
            project: Some("p-1"),
        };
        assert!(budget.check(&room(), bob).is_ok());
        budget.spend(&room(), bob, 172_800);
        assert!(matches!(
            budget.check(
                &room(),
                Payers {
                    person: Some("carl"),
                    project: Some("p-1")
                }
            ),
            Err(LlmError::BudgetExhausted {
                budget: BudgetScope::Project,
                ..
            })
        ));
        // A day's refill: one token a second for Ann.
        clock.advance(Duration::from_secs(2));
        assert!(budget.check(&room(), ann).is_ok());
    }

    #[test]
    fn cache_reads_are_not_counted() {
        let usage = Usage {
            input_tokens: 10,
            output_tokens: 5,
            cache_read_input_tokens: 1000,
            cache_creation_input_tokens: 2,
        };
        assert_eq!(counted(&usage), 17);
    }

    #[tokio::test]
    async fn the_wrapper_meters_every_call_and_refuses_when_spent() {
        use futures_util::StreamExt;
        let budget = TokenBudget::new(100);
        let model = BudgetedModel::new(
            Arc::new(crate::llm::OfflineModel),
            Metering::new(budget.clone()),
            room(),
            FairyId::random(),
        );
        let request = || ModelRequest {
            system: "s".repeat(1000),
            messages: vec![crate::llm::ChatMessage::user("draw a box")],
            ..ModelRequest::default()
        };
        let events: Vec<_> = model.stream(request()).collect().await;
        assert!(events.iter().all(Result::is_ok), "{events:?}");
        // The offline model reports ~250 input tokens for a 1000-char system prompt.
        let refused: Vec<_> = model.stream(request()).collect().await;
        assert!(
            matches!(refused.as_slice(), [Err(LlmError::BudgetExhausted { .. })]),
            "{refused:?}"
        );
    }
}
