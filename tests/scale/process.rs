//! What the shipped binary sets up for itself (issue 25, docs/fairies.md "People and fairies in
//! one room"): jemalloc with its background thread, which returns freed memory to the system
//! (src/main.rs: the options reach the allocator only through an exported symbol, so a rename
//! would drop them silently), and the fairies' workers in the idle scheduling class by
//! default (`--background-priority`). Runs the real binary; reads its threads from `/proc`.
#![cfg(target_os = "linux")]

use crate::support;

use std::time::{Duration, Instant};

use support::fairy_http::{invite, prompt};
use support::services::Node;

/// `SCHED_IDLE` in `/proc/…/stat`'s policy field.
const SCHED_IDLE: u32 = 5;

/// The process's threads: name and scheduling policy.
fn threads(pid: u32) -> Vec<(String, u32)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| {
            let name = std::fs::read_to_string(task.path().join("comm")).ok()?;
            let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
            // Fields after the name, which ends at the last ')': state is field 3, policy 41.
            let rest = &stat[stat.rfind(')')? + 2..];
            let policy = rest.split(' ').nth(41 - 3)?.parse().ok()?;
            Some((name.trim().to_owned(), policy))
        })
        .collect()
}

/// Waits (bounded) until the process has a thread named `name`; its policy.
async fn thread_policy(pid: u32, name: &str) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some((_, policy)) = threads(pid).into_iter().find(|(n, _)| n == name) {
            return policy;
        }
        assert!(
            Instant::now() < deadline,
            "no thread {name}: {:?}",
            threads(pid)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts the binary on a memory store with `priority` (`None`: the flag's default).
fn serve(priority: Option<&str>) -> Node {
    let args = ["--store".to_owned(), "memory:".to_owned()];
    Node::spawn_with(&args, |command| match priority {
        Some(priority) => {
            command.env("FAIRYRING_BACKGROUND_PRIORITY", priority);
        }
        None => {
            command.env_remove("FAIRYRING_BACKGROUND_PRIORITY");
        }
    })
}

/// Prompts a fairy, which starts the fairies' runtime.
async fn start_a_fairy(node: &Node) {
    let http = node.http();
    let id = invite(&http, "threads", "Ivy").await;
    prompt(&http, "threads", &id, "draw a rectangle").await;
}

#[tokio::test]
async fn the_allocator_runs_its_background_thread() {
    let node = serve(Some("nice"));
    thread_policy(node.child.id(), "jemalloc_bg_thd").await;
}

#[tokio::test]
async fn fairy_workers_take_the_idle_class_by_default_and_niceness_when_asked() {
    let idle = serve(None);
    start_a_fairy(&idle).await;
    assert_eq!(
        thread_policy(idle.child.id(), "fairy-worker").await,
        SCHED_IDLE
    );

    let niced = serve(Some("nice"));
    start_a_fairy(&niced).await;
    let policy = thread_policy(niced.child.id(), "fairy-worker").await;
    assert_ne!(policy, SCHED_IDLE);
}
