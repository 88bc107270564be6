//! Giving freed heap back to the operating system after rooms unload, and after an export
//! decoded a room that is not loaded (`server::export::reads`).
//!
//! An unloaded room frees its document, its cold-load answer and its peers' queues, but glibc's
//! allocator keeps freed memory inside its arenas (only a free block at the very top of the main
//! heap is returned), so the server's resident size stays near its peak long after the load
//! stopped. `malloc_trim` returns the free pages of every arena. It is asked for once per burst
//! of unloads, a moment after the last of them, on a blocking thread.
//!
//! The `fairyring` binary allocates Rust's heap with jemalloc (src/main.rs), which returns freed
//! memory by itself; what is left to glibc there is the C libraries' heap (SQLite's caches).
//! Programs that embed the library with glibc's allocator get the rest of this module's help.
//!
//! Before the server starts, [`cap_arenas`] limits glibc to one arena per four cores (at least
//! two) instead of eight per core: a thread that builds a whole document for a moment (the
//! snapshot thread's compactions and history checkpoints) otherwise leaves that peak in an
//! arena of its own, and the server's resident size under fairy load kept the peaks of every
//! such arena (measured in docs/benchmarks.md: 16 fairies on the 2-core VM 240–415 MB → 188–193
//! MB; on 16 cores 253 → 200 MB, same throughput and people's latency; a single arena halved the
//! fairies' throughput on 16 cores). Owns nothing else; other allocators and systems have
//! nothing to trim or cap.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long after an unload the trim runs, so that a burst of unloads trims once.
const SETTLE: Duration = Duration::from_millis(500);

/// Set while a trim is scheduled.
static SCHEDULED: AtomicBool = AtomicBool::new(false);

/// Schedules a trim of the allocator's free memory (at most one pending at a time). Must be
/// called inside a Tokio runtime.
pub(crate) fn schedule() {
    if SCHEDULED.swap(true, Ordering::SeqCst) {
        return;
    }
    tokio::spawn(async {
        tokio::time::sleep(SETTLE).await;
        SCHEDULED.store(false, Ordering::SeqCst);
        if let Err(error) = tokio::task::spawn_blocking(trim).await {
            tracing::debug!(%error, "trimming the allocator failed");
        }
    });
}

/// Returns the allocator's free pages to the system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: `malloc_trim` takes no pointer and only walks glibc's own arenas under their
    // locks; any thread may call it at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Nothing to trim with other allocators.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

/// Cores per malloc arena (see the module docs).
const CORES_PER_ARENA: usize = 4;
/// Fewest arenas: one arena for every thread made the fairies' throughput fall by half on 16
/// cores (lock contention), two did not on 2 cores.
const MIN_ARENAS: usize = 2;

/// The arena cap for a machine of `cores` cores.
fn arenas_for(cores: usize) -> usize {
    (cores / CORES_PER_ARENA).max(MIN_ARENAS)
}

/// Caps glibc's malloc arenas (see the module docs), unless the operator set
/// `MALLOC_ARENA_MAX`, which glibc then applies itself. Call once, before the runtime's
/// threads start.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn cap_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let arenas = i32::try_from(arenas_for(cores)).unwrap_or(i32::MAX);
    // SAFETY: `mallopt` takes two integers and only sets glibc's own tuning parameter; it is
    // called before other threads allocate.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
}

/// Other allocators have no arenas to cap.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn cap_arenas() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_arena_per_four_cores_and_never_fewer_than_two() {
        assert_eq!(arenas_for(1), 2);
        assert_eq!(arenas_for(2), 2);
        assert_eq!(arenas_for(8), 2);
        assert_eq!(arenas_for(16), 4);
        assert_eq!(arenas_for(64), 16);
    }
}
