//! The one clock of the server: a monotonic [`Instant`] for timeouts, cooldowns, budgets and
//! every other duration (awareness timeouts, idle unloads, session expiry once admitted), so a
//! step of the wall clock (NTP, an operator) changes none of them; wall-clock milliseconds for
//! timestamps that leave the process (logged updates' times, chat items), and sleeps. Rooms (commit, reconcile, idle unload, awareness timestamps), the
//! model failover, the agent's token budget and fairy timestamps read time through it, so that
//! expiry and cooldowns are tested by moving a [`ManualClock`] instead of sleeping.
//!
//! A leaf: it imports nothing of the crate. Owns only time; never what is timed.
//! [`SystemClock`] reads tokio's clock, so `tokio::time::pause()` applies to it as well.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::future::BoxFuture;

/// A source of "now" (monotonic and wall-clock) and of sleeps.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current monotonic instant.
    fn now(&self) -> Instant;
    /// Wall-clock time: milliseconds since the Unix epoch, with a fraction.
    fn unix_millis_f64(&self) -> f64;
    /// Completes after `d` has passed on this clock.
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()>;

    /// Wall-clock whole milliseconds since the Unix epoch (0 before 1970).
    fn unix_millis(&self) -> u64 {
        let ms = self.unix_millis_f64();
        if ms.is_finite() && ms > 0.0 {
            ms as u64
        } else {
            0
        }
    }

    /// Wall-clock whole seconds since the Unix epoch (0 before 1970).
    fn unix_secs(&self) -> u64 {
        self.unix_millis() / 1000
    }
}

/// A clock shared by the parts of the server that read time.
pub type SharedClock = Arc<dyn Clock>;

/// The system clock, shared.
pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}

/// Real time: tokio's timer for instants and sleeps (so `tokio::time::pause()` also applies;
/// outside a runtime tokio falls back to the standard clock), the system time for wall-clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    fn unix_millis_f64(&self) -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    }

    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(d))
    }
}

/// A clock for tests: time moves only when told ([`ManualClock::advance`]) or when something
/// sleeps on it — `sleep` returns at once after advancing the time, and every requested sleep
/// is recorded so tests can assert waits exactly. Monotonic and wall-clock time move together.
/// Clones share one time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    inner: Arc<Mutex<ManualState>>,
}

#[derive(Debug)]
struct ManualState {
    now: Instant,
    unix_millis: f64,
    sleeps: Vec<Duration>,
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::at_unix_millis(SystemClock.unix_millis())
    }
}

impl ManualClock {
    /// A clock starting at the current instant and wall-clock time.
    pub fn new() -> Self {
        Self::default()
    }

    /// A clock whose wall-clock time starts at `unix_millis` (its instant at the current one).
    pub fn at_unix_millis(unix_millis: u64) -> Self {
        ManualClock {
            inner: Arc::new(Mutex::new(ManualState {
                now: Instant::now(),
                unix_millis: unix_millis as f64,
                sleeps: Vec::new(),
            })),
        }
    }

    fn state(&self) -> MutexGuard<'_, ManualState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves time forward without a recorded sleep.
    pub fn advance(&self, d: Duration) {
        let mut s = self.state();
        s.now += d;
        s.unix_millis += d.as_secs_f64() * 1000.0;
    }

    /// Steps the wall clock alone by `millis` (negative: back), as NTP or an operator may step
    /// a node's clock: the monotonic instant does not move. What measures a duration must not
    /// notice.
    pub fn step_wall(&self, millis: i64) {
        let mut s = self.state();
        s.unix_millis = (s.unix_millis + millis as f64).max(0.0);
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

    fn unix_millis_f64(&self) -> f64 {
        self.state().unix_millis
    }

    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        {
            let mut s = self.state();
            s.now += d;
            s.unix_millis += d.as_secs_f64() * 1000.0;
            s.sleeps.push(d);
        }
        Box::pin(std::future::ready(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_manual_clock_moves_only_when_told_and_records_sleeps() {
        let clock = ManualClock::at_unix_millis(1_000_000);
        let t0 = clock.now();
        assert_eq!(clock.unix_millis(), 1_000_000);
        assert_eq!(clock.now(), t0, "time does not pass by itself");
        clock.advance(Duration::from_millis(1500));
        assert_eq!(clock.now() - t0, Duration::from_millis(1500));
        assert_eq!(clock.unix_millis(), 1_001_500);
        assert_eq!(clock.unix_secs(), 1_001);
        clock.sleep(Duration::from_secs(2)).await;
        assert_eq!(clock.now() - t0, Duration::from_millis(3500));
        assert_eq!(clock.unix_millis(), 1_003_500);
        assert_eq!(clock.sleeps(), [Duration::from_secs(2)]);
        // Clones share the time.
        let shared: SharedClock = Arc::new(clock.clone());
        clock.advance(Duration::from_secs(1));
        assert_eq!(shared.unix_millis(), 1_004_500);
        // A step of the wall clock leaves the monotonic instant where it was.
        let before = clock.now();
        clock.step_wall(-4_000);
        assert_eq!(clock.now(), before);
        assert_eq!(clock.unix_millis(), 1_000_500);
    }

    #[test]
    fn the_system_clock_is_monotonic_and_wall_clock_is_real_time() {
        let clock = SystemClock;
        let t0 = clock.now();
        assert!(clock.now() >= t0);
        assert!(clock.unix_millis() > 1_600_000_000_000);
        assert_eq!(clock.unix_secs(), clock.unix_millis() / 1000);
    }
}
