//! Where fairies run: a runtime of their own, beside the one that serves people, with its
//! worker threads at a lower scheduling priority (docs/fairies.md "People and fairies in one
//! room"). A fairy's turn is CPU work (reading the canvas, building the prompt, parsing and
//! applying streamed actions); on the people's workers it delayed every socket of the server
//! behind it. On its own threads, the operating system runs people's work first whenever both
//! want a core, and fairies get every cycle people leave.
//!
//! Owns the fairy runtime (built once per process, on first use, never torn down: tasks still
//! on it when the process exits simply end with it) and the spawning of fairy tasks onto it.
//! Knows nothing of what the tasks do.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle, Runtime};
use tokio_util::task::TaskTracker;

static RUNTIME: OnceLock<Option<Runtime>> = OnceLock::new();

/// Worker threads of the fairy runtime: half the cores, at least one.
fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

fn build() -> Option<Runtime> {
    let built = Builder::new_multi_thread()
        .worker_threads(workers())
        .thread_name("fairy-worker")
        .on_thread_start(crate::priority::lower_current_thread)
        .enable_all()
        .build();
    match built {
        Ok(runtime) => Some(runtime),
        Err(error) => {
            tracing::warn!(%error, "no fairy runtime: fairies share the server's workers");
            None
        }
    }
}

/// The fairy runtime's handle; the caller's runtime if it could not be built.
pub fn handle() -> Handle {
    match RUNTIME.get_or_init(build) {
        Some(runtime) => runtime.handle().clone(),
        None => Handle::current(),
    }
}

/// Spawns a fairy task on the fairy runtime, tracked by `tracker`.
pub fn spawn<F>(tracker: &TaskTracker, task: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    tracker.spawn_on(task, &handle())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fairy_tasks_run_on_their_own_threads() {
        let tracker = TaskTracker::new();
        let name = spawn(&tracker, async {
            std::thread::current().name().map(str::to_owned)
        })
        .await
        .ok()
        .flatten();
        assert_eq!(name.as_deref(), Some("fairy-worker"));
        tracker.close();
        tracker.wait().await;
    }
}
