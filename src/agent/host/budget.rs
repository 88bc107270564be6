//! The per-room hourly budget of model tokens (`--fairy-token-budget`): how many tokens the
//! fairies of one room may have the model process per hour, and the [`BudgetedModel`] wrapper
//! that enforces it around every model call a fairy makes (turns and history summaries alike).
//!
//! The budget is a bucket of `per_hour` tokens per room that refills continuously over the
//! hour. A call is made only if the room's bucket is not empty when the call starts (checked
//! before each model call, so a request ends between turns, never in the middle of applying
//! one); what the call used is taken out as the provider reports it (the bucket may go below
//! zero by the last call's cost, which delays the next call accordingly). Counted: input,
//! output and cache-write tokens; cache reads are not (a cached prefix re-read each turn costs
//! a tenth of fresh input). A failed attempt that reported usage is counted too.
//!
//! Owns the buckets (one short critical section, never held across `.await`). Must not touch
//! documents or the fairy's state: ending the request and telling the user is the runtime's
//! job, on [`LlmError::BudgetExhausted`].

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::Stream;

use crate::clock::SharedClock;
use crate::ids::RoomName;
use crate::llm::{LlmError, Model, ModelEvent, ModelRequest, ModelStream, Usage};

/// How long the bucket takes to refill from empty.
const WINDOW: Duration = Duration::from_secs(3600);
/// Buckets kept before full ones are forgotten.
const PRUNE_ABOVE: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Tokens left; negative after a call that cost more than was left.
    available: f64,
    updated: Instant,
}

/// The token buckets of every room.
pub struct TokenBudget {
    per_hour: u64,
    rooms: Mutex<HashMap<RoomName, Bucket>>,
    clock: SharedClock,
}

impl std::fmt::Debug for TokenBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenBudget")
            .field("per_hour", &self.per_hour)
            .finish_non_exhaustive()
    }
}

impl TokenBudget {
    /// A budget of `per_hour` tokens per room on the system clock; 0 means no limit.
    pub fn new(per_hour: u64) -> Arc<Self> {
        Self::with_clock(per_hour, crate::clock::system())
    }

    /// A budget of `per_hour` tokens per room whose buckets refill on `clock`.
    pub fn with_clock(per_hour: u64, clock: SharedClock) -> Arc<Self> {
        Arc::new(TokenBudget {
            per_hour,
            rooms: Mutex::new(HashMap::new()),
            clock,
        })
    }

    /// Tokens per room per hour (0: unlimited).
    pub fn per_hour(&self) -> u64 {
        self.per_hour
    }

    fn with_bucket<T>(&self, room: &RoomName, now: Instant, f: impl FnOnce(&mut Bucket) -> T) -> T {
        let full = self.per_hour as f64;
        let mut rooms = self.rooms.lock().unwrap_or_else(|p| p.into_inner());
        if rooms.len() > PRUNE_ABOVE {
            let rate = full / WINDOW.as_secs_f64();
            rooms.retain(|_, b| {
                b.available + now.saturating_duration_since(b.updated).as_secs_f64() * rate < full
            });
        }
        let bucket = rooms.entry(room.clone()).or_insert(Bucket {
            available: full,
            updated: now,
        });
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.available = (bucket.available + elapsed * full / WINDOW.as_secs_f64()).min(full);
        bucket.updated = now;
        f(bucket)
    }

    /// Whether `room` may start a model call at `now`; the error says when it may.
    fn check_at(&self, room: &RoomName, now: Instant) -> Result<(), LlmError> {
        if self.per_hour == 0 {
            return Ok(());
        }
        let available = self.with_bucket(room, now, |b| b.available);
        if available > 0.0 {
            return Ok(());
        }
        // Time for the bucket to hold at least one token again.
        let per_sec = self.per_hour as f64 / WINDOW.as_secs_f64();
        let wait = ((1.0 - available) / per_sec).ceil();
        Err(LlmError::BudgetExhausted {
            per_hour: self.per_hour,
            retry_in_secs: if wait.is_finite() {
                wait as u64
            } else {
                u64::MAX
            },
        })
    }

    /// Whether `room` may start a model call now; the error says when it may.
    pub fn check(&self, room: &RoomName) -> Result<(), LlmError> {
        self.check_at(room, self.clock.now())
    }

    /// Takes `tokens` out of `room`'s bucket at `now`.
    fn spend_at(&self, room: &RoomName, tokens: u64, now: Instant) {
        if self.per_hour == 0 || tokens == 0 {
            return;
        }
        self.with_bucket(room, now, |b| b.available -= tokens as f64);
    }

    /// Takes `tokens` out of `room`'s bucket now.
    pub fn spend(&self, room: &RoomName, tokens: u64) {
        self.spend_at(room, tokens, self.clock.now());
    }
}

/// The tokens of a usage report that count against the budget.
fn counted(usage: &Usage) -> u64 {
    usage
        .input_tokens
        .saturating_add(usage.output_tokens)
        .saturating_add(usage.cache_creation_input_tokens)
}

/// A fairy's model, metered against its room's budget.
pub struct BudgetedModel {
    inner: Arc<dyn Model>,
    budget: Arc<TokenBudget>,
    room: RoomName,
}

impl BudgetedModel {
    /// Wraps `inner` for the fairies of `room`.
    pub fn new(inner: Arc<dyn Model>, budget: Arc<TokenBudget>, room: RoomName) -> Self {
        BudgetedModel {
            inner,
            budget,
            room,
        }
    }
}

impl Model for BudgetedModel {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        if let Err(error) = self.budget.check(&self.room) {
            return Box::pin(futures_util::stream::once(async move { Err(error) }));
        }
        Box::pin(Metered {
            inner: self.inner.stream(request),
            budget: self.budget.clone(),
            room: self.room.clone(),
            attempt: Usage::default(),
        })
    }
}

/// A model stream that takes each attempt's usage out of the budget: at a retry, at the end,
/// or when the stream is dropped (a cancelled request pays for what it used).
struct Metered {
    inner: ModelStream,
    budget: Arc<TokenBudget>,
    room: RoomName,
    /// The current attempt's cumulative usage so far.
    attempt: Usage,
}

impl Metered {
    fn settle(&mut self) {
        let used = std::mem::take(&mut self.attempt);
        self.budget.spend(&self.room, counted(&used));
    }
}

impl Stream for Metered {
    type Item = Result<ModelEvent, LlmError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = self.inner.as_mut().poll_next(cx);
        match &next {
            Poll::Ready(Some(Ok(ModelEvent::Usage(usage)))) => self.attempt = *usage,
            Poll::Ready(Some(Ok(ModelEvent::Retry { .. } | ModelEvent::Done { .. })))
            | Poll::Ready(Some(Err(_)) | None) => self.settle(),
            _ => {}
        }
        next
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        self.settle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn room() -> RoomName {
        RoomName::parse("budget").expect("name")
    }

    #[test]
    fn a_spent_bucket_refuses_until_it_refills() {
        let clock = ManualClock::new();
        let budget = TokenBudget::with_clock(3600, Arc::new(clock.clone()));
        assert!(budget.check(&room()).is_ok());
        budget.spend(&room(), 4000);
        match budget.check(&room()) {
            Err(LlmError::BudgetExhausted {
                per_hour,
                retry_in_secs,
            }) => {
                assert_eq!(per_hour, 3600);
                // 400 tokens of debt plus one, at one token per second.
                assert_eq!(retry_in_secs, 401);
            }
            other => panic!("{other:?}"),
        }
        clock.advance(Duration::from_secs(400));
        assert!(budget.check(&room()).is_err());
        clock.advance(Duration::from_secs(2));
        assert!(budget.check(&room()).is_ok());
        // Another room has its own bucket.
        let other = RoomName::parse("other").expect("name");
        assert!(budget.check(&other).is_ok());
    }

    #[test]
    fn refills_never_exceed_the_hourly_size() {
        let clock = ManualClock::new();
        let budget = TokenBudget::with_clock(100, Arc::new(clock.clone()));
        budget.spend(&room(), 50);
        clock.advance(Duration::from_secs(10 * 3600));
        budget.spend(&room(), 0);
        budget.spend(&room(), 100);
        assert!(budget.check(&room()).is_err());
    }

    #[test]
    fn zero_is_unlimited() {
        let budget = TokenBudget::new(0);
        budget.spend(&room(), u64::MAX);
        assert!(budget.check(&room()).is_ok());
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
        let model = BudgetedModel::new(Arc::new(crate::llm::OfflineModel), budget.clone(), room());
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
