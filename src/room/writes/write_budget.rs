//! The room's budget of fairy writes (`--fairy-writes-per-sec`, docs/fairies.md "People and
//! fairies in one room"): how many shapes all the fairies of a room may change per second with
//! complete actions. Every fairy write is a durable log entry and a broadcast to every peer of
//! the room, so the budget is what keeps a crowd of fairies from filling the room's pipeline
//! ahead of the people in it. People's updates never pass through it.
//!
//! A token bucket holding a tenth of a second of writes (at least one), refilled continuously.
//! A write is admitted while the balance is positive and charged afterwards by the shapes it
//! changed (a fairy cannot know them before applying its action), so the balance can go
//! negative: the next writes wait until it is paid back. Nothing is dropped: a complete action
//! waits ([`WriteBudget::ready`]); a still-streaming version, which is only a preview, is held
//! back while the budget is spent ([`WriteBudget::try_ready`]) and costs nothing.
//!
//! Owns the bucket only; knows nothing of fairies, documents or clocks other than tokio's.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Share of a second of writes the bucket holds (its burst).
const BURST_SECONDS: f64 = 0.1;

/// One room's fairy write budget.
#[derive(Debug)]
pub struct WriteBudget {
    /// Shape changes per second; 0: no limit.
    per_sec: u32,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Shape changes that may still be made; negative while in debt.
    balance: f64,
    /// When `balance` was last refilled.
    at: Instant,
}

impl WriteBudget {
    /// A budget of `per_sec` shape changes a second (0: no limit), full.
    pub fn new(per_sec: u32) -> Self {
        let budget = WriteBudget {
            per_sec,
            bucket: Mutex::new(Bucket {
                balance: 0.0,
                at: Instant::now(),
            }),
        };
        budget.lock().balance = budget.capacity();
        budget
    }

    fn capacity(&self) -> f64 {
        (f64::from(self.per_sec) * BURST_SECONDS).max(1.0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Bucket> {
        // The bucket is two numbers, consistent after any panic.
        self.bucket.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Refills for the time passed; the wait until the balance is positive (zero if it is).
    fn refill(&self, now: Instant) -> Duration {
        let mut bucket = self.lock();
        let rate = f64::from(self.per_sec);
        let passed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.balance = (bucket.balance + passed * rate).min(self.capacity());
        bucket.at = now;
        if bucket.balance > 0.0 {
            Duration::ZERO
        } else {
            // Until the debt is paid and a fraction of a write is available.
            Duration::from_secs_f64((-bucket.balance + 0.01) / rate)
        }
    }

    /// Whether a write may start now.
    pub fn try_ready(&self) -> bool {
        self.per_sec == 0 || self.refill(Instant::now()).is_zero()
    }

    /// Waits until a write may start.
    pub async fn ready(&self) {
        if self.per_sec == 0 {
            return;
        }
        loop {
            let wait = self.refill(Instant::now());
            if wait.is_zero() {
                return;
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// Charges `changes` shape changes (the balance may go negative).
    pub fn charge(&self, changes: u32) {
        if self.per_sec == 0 || changes == 0 {
            return;
        }
        self.lock().balance -= f64::from(changes);
    }

    /// The configured rate (0: no limit).
    pub fn per_sec(&self) -> u32 {
        self.per_sec
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn paces_writes_at_the_rate_after_a_small_burst() {
        let budget = WriteBudget::new(50);
        let start = Instant::now();
        for _ in 0..23 {
            budget.ready().await;
            budget.charge(1);
        }
        let took = start.elapsed();
        // 5 at once (a tenth of a second), the other 18 at 50 a second.
        assert!(
            took >= Duration::from_millis(340) && took <= Duration::from_millis(400),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_large_write_is_paid_back_before_the_next() {
        let budget = WriteBudget::new(100);
        budget.ready().await;
        budget.charge(50);
        assert!(!budget.try_ready());
        let start = Instant::now();
        budget.ready().await;
        assert!(start.elapsed() >= Duration::from_millis(400));
    }

    #[tokio::test(start_paused = true)]
    async fn zero_is_no_limit() {
        let budget = WriteBudget::new(0);
        for _ in 0..10_000 {
            assert!(budget.try_ready());
            budget.charge(10);
        }
        budget.ready().await;
    }
}
