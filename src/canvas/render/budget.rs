//! The budget of one render: a wall-clock deadline and a cancellation flag, checked inside the
//! drawing loops (per shape, per text line, per batch of points, per rasterized chunk) so that
//! a render whose time is up, whose client went away or whose server is shutting down stops
//! within one step, whatever it draws.
//!
//! Owns the checks only; who sets the flag (the pool, when the caller is dropped or the time
//! is up) is [`super::pool`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::RenderError;

/// Why a render stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The deadline passed.
    TimedOut,
    /// The caller went away (or the server is shutting down).
    Cancelled,
}

/// A flag that stops every render holding it: set by its owner, read by [`Budget::check`].
#[derive(Debug, Clone, Default)]
pub struct CancelFlag(Arc<AtomicBool>);

impl CancelFlag {
    /// A flag not set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the flag: the renders holding it stop at their next check.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether the flag is set.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A render's deadline and the flags that stop it.
#[derive(Debug, Clone)]
pub struct Budget {
    deadline: Option<Instant>,
    flags: Vec<CancelFlag>,
}

impl Budget {
    /// No deadline and no flag: for callers that bound the work themselves (tests, benches).
    /// The per-shape caps still apply.
    pub fn unlimited() -> Self {
        Budget {
            deadline: None,
            flags: Vec::new(),
        }
    }

    /// A budget of `time` from now.
    pub fn within(time: Duration) -> Self {
        Budget {
            deadline: Instant::now().checked_add(time),
            flags: Vec::new(),
        }
    }

    /// The same budget, also stopped by `flag`.
    pub fn with_flag(mut self, flag: CancelFlag) -> Self {
        self.flags.push(flag);
        self
    }

    /// Why the render must stop now, if it must.
    pub fn stop(&self) -> Option<Stop> {
        if self.flags.iter().any(CancelFlag::is_cancelled) {
            return Some(Stop::Cancelled);
        }
        match self.deadline {
            Some(deadline) if Instant::now() >= deadline => Some(Stop::TimedOut),
            _ => None,
        }
    }

    /// `Err` when the render must stop (the loops' `?`).
    pub fn check(&self) -> Result<(), RenderError> {
        match self.stop() {
            None => Ok(()),
            Some(Stop::TimedOut) => Err(RenderError::TimedOut),
            Some(Stop::Cancelled) => Err(RenderError::Cancelled),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_stops_at_its_deadline_or_its_flag() {
        assert_eq!(Budget::unlimited().check(), Ok(()));
        assert_eq!(
            Budget::within(Duration::ZERO).check(),
            Err(RenderError::TimedOut)
        );
        let flag = CancelFlag::new();
        let budget = Budget::within(Duration::from_secs(60)).with_flag(flag.clone());
        assert_eq!(budget.check(), Ok(()));
        flag.cancel();
        assert_eq!(budget.check(), Err(RenderError::Cancelled));
    }
}
