//! Where renders run: on tokio's blocking pool, never on the async workers, at most a fixed
//! number at a time, each within a wall-clock budget.
//!
//! A render's slot is held by the blocking work itself, so it is given back only when the work
//! has actually stopped, not when its caller stopped waiting. The caller's future cancels the
//! render when it is dropped (the HTTP client went away, the fairy's request was aborted) and
//! answers [`PoolError::Render`]`(`[`RenderError::TimedOut`]`)` as soon as the budget is spent,
//! whether or not the work has reached its next check yet. [`RenderPool::close`] stops every
//! render of the pool, running or to come (shutdown).
//!
//! Owns scheduling only: what is drawn is the caller's closure.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::RenderError;
use super::budget::{Budget, CancelFlag};

/// Why a render did not give its result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PoolError {
    /// Every slot stayed taken for as long as the caller would wait.
    #[error("every render slot is taken")]
    Busy,
    /// The render itself failed, ran past its budget or was cancelled.
    #[error(transparent)]
    Render(#[from] RenderError),
}

/// How a caller waits for a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotWait {
    /// Up to this long, then [`PoolError::Busy`].
    Upto(Duration),
    /// Not at all: [`PoolError::Busy`] at once when every slot is taken (fairy screenshots,
    /// which a request never waits for).
    Never,
}

/// A bounded set of render slots with a time budget.
#[derive(Debug)]
pub struct RenderPool {
    slots: Arc<Semaphore>,
    timeout_ms: AtomicU64,
    closing: CancelFlag,
}

/// Sets its flag when dropped: the caller's future went away, so its render stops.
struct CancelOnDrop(CancelFlag);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

impl RenderPool {
    /// A pool of `slots` renders at once (at least one), each with `budget` of wall-clock time.
    pub fn new(slots: usize, budget: Duration) -> Self {
        RenderPool {
            slots: Arc::new(Semaphore::new(slots.max(1))),
            timeout_ms: AtomicU64::new(millis(budget)),
            closing: CancelFlag::new(),
        }
    }

    /// The budget of each render.
    pub fn budget(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(Ordering::Relaxed))
    }

    /// Changes the budget of the renders that start from now on.
    pub fn set_budget(&self, budget: Duration) {
        self.timeout_ms.store(millis(budget), Ordering::Relaxed);
    }

    /// Renders not running now (for tests and metrics).
    pub fn idle_slots(&self) -> usize {
        self.slots.available_permits()
    }

    /// Stops every render of the pool, those running and those to come.
    pub fn close(&self) {
        self.closing.cancel();
    }

    async fn slot(&self, wait: SlotWait) -> Result<OwnedSemaphorePermit, PoolError> {
        match wait {
            SlotWait::Never => self
                .slots
                .clone()
                .try_acquire_owned()
                .map_err(|_| PoolError::Busy),
            SlotWait::Upto(wait) => tokio::time::timeout(wait, self.slots.clone().acquire_owned())
                .await
                .ok()
                .and_then(Result::ok)
                .ok_or(PoolError::Busy),
        }
    }

    /// Takes a slot (waiting as `wait` says): the caller may prepare what the render needs
    /// (a store read) while holding it, then runs the render with [`RenderSlot::run`].
    pub async fn acquire(&self, wait: SlotWait) -> Result<RenderSlot<'_>, PoolError> {
        if self.closing.is_cancelled() {
            return Err(RenderError::Cancelled.into());
        }
        match self.slot(wait).await {
            Ok(permit) => Ok(RenderSlot { pool: self, permit }),
            Err(busy) => {
                crate::metrics::global().count_render(crate::metrics::RenderOutcome::Busy, 0.0);
                Err(busy)
            }
        }
    }

    /// Runs `work` on the blocking pool with a slot and a fresh budget, and gives its result;
    /// `work` must check the budget it is handed inside its loops.
    pub async fn run<T, F>(&self, wait: SlotWait, work: F) -> Result<T, PoolError>
    where
        T: Send + 'static,
        F: FnOnce(&Budget) -> Result<T, RenderError> + Send + 'static,
    {
        self.acquire(wait).await?.run(work).await
    }
}

/// A render slot taken, not used yet.
pub struct RenderSlot<'a> {
    pool: &'a RenderPool,
    permit: OwnedSemaphorePermit,
}

impl RenderSlot<'_> {
    /// Runs `work` on the blocking pool with a fresh budget, and gives its result; the slot
    /// is given back when the work has stopped. `work` must check the budget it is handed
    /// inside its loops.
    pub async fn run<T, F>(self, work: F) -> Result<T, PoolError>
    where
        T: Send + 'static,
        F: FnOnce(&Budget) -> Result<T, RenderError> + Send + 'static,
    {
        let RenderSlot { pool, permit } = self;
        if pool.closing.is_cancelled() {
            return Err(RenderError::Cancelled.into());
        }
        let budget_time = pool.budget();
        let flag = CancelFlag::new();
        let budget = Budget::within(budget_time)
            .with_flag(flag.clone())
            .with_flag(pool.closing.clone());
        let _cancel_on_drop = CancelOnDrop(flag.clone());
        let started = std::time::Instant::now();
        let task = tokio::task::spawn_blocking(move || {
            // Held by the work: the slot frees when the work has stopped.
            let _permit = permit;
            work(&budget)
        });
        let outcome = tokio::select! {
            joined = task => match joined {
                Ok(result) => result.map_err(PoolError::from),
                Err(error) => Err(RenderError::Raster(format!("the render task failed: {error}")).into()),
            },
            () = tokio::time::sleep(budget_time) => {
                flag.cancel();
                Err(RenderError::TimedOut.into())
            }
        };
        crate::metrics::global()
            .count_render(render_outcome(&outcome), started.elapsed().as_secs_f64());
        outcome
    }
}

/// The metrics label of a render's outcome.
fn render_outcome<T>(outcome: &Result<T, PoolError>) -> crate::metrics::RenderOutcome {
    use crate::metrics::RenderOutcome as O;
    match outcome {
        Ok(_) => O::Ok,
        Err(PoolError::Busy) => O::Busy,
        Err(PoolError::Render(RenderError::TimedOut)) => O::TimedOut,
        Err(PoolError::Render(RenderError::Cancelled)) => O::Cancelled,
        Err(PoolError::Render(_)) => O::Failed,
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// Work that spins, checking its budget, until stopped; says when it stopped.
    fn spin(stopped: Arc<AtomicBool>) -> impl FnOnce(&Budget) -> Result<(), RenderError> {
        move |budget: &Budget| loop {
            if let Err(e) = budget.check() {
                stopped.store(true, Ordering::SeqCst);
                return Err(e);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_render_past_its_budget_times_out_and_frees_its_slot_when_it_stops() {
        let pool = RenderPool::new(1, Duration::from_millis(50));
        let stopped = Arc::new(AtomicBool::new(false));
        let result = pool.run(SlotWait::Never, spin(stopped.clone())).await;
        assert_eq!(result, Err(PoolError::Render(RenderError::TimedOut)));
        // Busy while the work has not stopped; free once it has.
        while !stopped.load(Ordering::SeqCst) {
            tokio::task::yield_now().await;
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while pool.idle_slots() == 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(pool.idle_slots(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_caller_cancels_its_render_and_a_full_pool_is_busy() {
        let pool = Arc::new(RenderPool::new(1, Duration::from_secs(60)));
        let stopped = Arc::new(AtomicBool::new(false));
        let running = {
            let (pool, stopped) = (pool.clone(), stopped.clone());
            tokio::spawn(async move { pool.run(SlotWait::Never, spin(stopped)).await })
        };
        while pool.idle_slots() > 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            pool.run(SlotWait::Never, |_| Ok(())).await,
            Err(PoolError::Busy)
        );
        running.abort();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !stopped.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(
            stopped.load(Ordering::SeqCst),
            "the abandoned render stopped"
        );
        pool.close();
        assert_eq!(
            pool.run(SlotWait::Never, |_| Ok(())).await,
            Err(PoolError::Render(RenderError::Cancelled))
        );
    }
}
