//! Scheduling priority of the server's background threads: the fairies' workers and the
//! threads that build snapshots run below the threads that serve sockets, so that when both
//! want a core the operating system runs people's work first (docs/fairies.md "People and
//! fairies in one room").
//!
//! Owns the niceness and the call that lowers the current thread's priority; knows nothing of
//! what the threads do.

/// Niceness of background threads: 10 steps below the server's own (on Linux the scheduler
/// then gives a busy people's thread about ten times the CPU share of a busy background one).
pub const BACKGROUND_NICENESS: i32 = 10;

/// Lowers the calling thread's scheduling priority (Linux: per-thread niceness; elsewhere
/// nothing). A thread cannot raise it again without privileges: call it only on threads that
/// do background work for their whole life.
pub fn lower_current_thread() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
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
