//! Giving freed heap back to the operating system after rooms unload, and after an export
//! decoded a room that is not loaded (`server::export::reads`).
//!
//! An unloaded room frees its document, its cold-load answer and its peers' queues, but glibc's
//! allocator keeps freed memory inside its arenas (only a free block at the very top of the main
//! heap is returned), so the server's resident size stays near its peak long after the load
//! stopped. `malloc_trim` returns the free pages of every arena. It is asked for once per burst
//! of unloads, a moment after the last of them, on a blocking thread. Owns nothing else; other
//! allocators and systems have nothing to trim.

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
