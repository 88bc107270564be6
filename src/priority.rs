//! Scheduling priority of the server's background threads: the fairies' workers and the
//! threads that build snapshots run below the threads that serve sockets, so that when both
//! want a core the operating system runs people's work first (docs/fairies.md "People and
//! fairies in one room").
//!
//! Two ways to lower them ([`BackgroundPriority`], `--background-priority`): the scheduler's
//! idle class (the server's default), where a background thread runs only on cycles no other
//! thread of the machine wants and a waking people's thread takes its core at once; or
//! niceness [`BACKGROUND_NICENESS`], where it still gets a tenth of a busy core. Beside 16
//! drawing fairies on 2 cores, the idle class took people's p99 from 10.9–14.2 to 7.4–8.2 ms
//! at the same fairy throughput (docs/benchmarks.md, 2026-11-26 sixth session). The price:
//! on a machine whose other work keeps every core busy, fairies and compactions wait for it
//! (people first); `nice` keeps them moving there. The choice is process-wide and applies to
//! the threads started after it ([`set_background`], called by the server at start-up); the
//! library's default before any server starts is `nice`.
//!
//! Owns the choice and the call that lowers the current thread's priority; knows nothing of
//! what the threads do.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::config::BackgroundPriority;

/// Whether background threads started from now on take the idle class.
static IDLE_CLASS: AtomicBool = AtomicBool::new(false);

/// Chooses how background threads started after this call are lowered (process-wide).
pub fn set_background(priority: BackgroundPriority) {
    IDLE_CLASS.store(priority == BackgroundPriority::Idle, Ordering::Relaxed);
}

/// The current choice.
pub fn background() -> BackgroundPriority {
    if IDLE_CLASS.load(Ordering::Relaxed) {
        BackgroundPriority::Idle
    } else {
        BackgroundPriority::Nice
    }
}

/// Niceness of background threads: 10 steps below the server's own (on Linux the scheduler
/// then gives a busy people's thread about ten times the CPU share of a busy background one).
pub const BACKGROUND_NICENESS: i32 = 10;

/// Lowers the calling thread's scheduling priority as [`background`] says (Linux: the idle
/// class, or per-thread niceness if the idle class is refused; elsewhere nothing). A thread
/// cannot raise it again without privileges: call it only on threads that do background work
/// for their whole life.
pub fn lower_current_thread() {
    lower_current_thread_as(background());
}

/// [`lower_current_thread`] with an explicit choice.
fn lower_current_thread_as(priority: BackgroundPriority) {
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = priority;
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if priority == BackgroundPriority::Idle && enter_idle_class() {
            return;
        }
        // SAFETY: `gettid` has no preconditions; `setpriority` on our own thread id with a
        // valid niceness only changes this thread's scheduling.
        let result = unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, BACKGROUND_NICENESS)
        };
        if result != 0 {
            tracing::debug!("could not lower the priority of a background thread");
        }
    }
}

/// Moves the calling thread to `SCHED_IDLE`; whether it did.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn enter_idle_class() -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `sched_setscheduler` on thread id 0 (the calling thread) with a valid policy and
    // a parameter that lives through the call only changes this thread's scheduling; an
    // unprivileged thread may always lower itself to the idle class.
    let result = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if result != 0 {
        tracing::debug!("the idle scheduling class was refused; using niceness instead");
    }
    result == 0
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// The calling thread's policy and niceness.
    fn scheduling() -> (i32, i32) {
        // SAFETY: both calls only read the calling thread's scheduling.
        unsafe {
            (
                libc::sched_getscheduler(0),
                libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t),
            )
        }
    }

    #[test]
    fn background_threads_take_the_chosen_class() {
        // The explicit form: the process-wide choice stays as the other tests' servers set it.
        let idle = std::thread::spawn(|| {
            lower_current_thread_as(BackgroundPriority::Idle);
            scheduling()
        })
        .join()
        .unwrap_or_else(|_| panic!("thread"));
        let niced = std::thread::spawn(|| {
            lower_current_thread_as(BackgroundPriority::Nice);
            scheduling()
        })
        .join()
        .unwrap_or_else(|_| panic!("thread"));
        assert_eq!(idle.0, libc::SCHED_IDLE);
        assert_eq!(niced.0, libc::SCHED_OTHER);
        assert_eq!(niced.1, BACKGROUND_NICENESS);
    }
}
