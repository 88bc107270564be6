//! Time as seen by the failover: a [`Clock`] trait so cooldowns are tested without sleeping.
//!
//! Owns: [`SystemClock`] (tokio time) and [`ManualClock`] (tests: sleeping advances time at
//! once and is recorded). Must not hold any other state.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;

/// A source of "now" and of sleeps.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> Instant;
    /// Completes after `d` has passed on this clock.
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()>;
}

/// Real time (tokio's timer, so `tokio::time::pause()` also applies).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(d))
    }
}

/// A clock for tests: `sleep` returns at once after advancing the time, and every requested
/// sleep is recorded so tests can assert cooldown waits exactly.
#[derive(Debug, Clone)]
pub struct ManualClock {
    inner: Arc<Mutex<ManualState>>,
}

#[derive(Debug)]
struct ManualState {
    now: Instant,
    sleeps: Vec<Duration>,
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock {
            inner: Arc::new(Mutex::new(ManualState {
                now: Instant::now(),
                sleeps: Vec::new(),
            })),
        }
    }
}

impl ManualClock {
    /// A clock starting at the current instant.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ManualState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves time forward without a recorded sleep.
    pub fn advance(&self, d: Duration) {
        let mut s = self.state();
        s.now += d;
    }

    /// Every sleep requested so far, in order.
    pub fn sleeps(&self) -> Vec<Duration> {
        self.state().sleeps.clone()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.state().now
    }

    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        {
            let mut s = self.state();
            s.now += d;
            s.sleeps.push(d);
        }
        Box::pin(std::future::ready(()))
    }
}
