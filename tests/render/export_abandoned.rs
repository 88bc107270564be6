//! Abandoned renders stop (issue 27): four exports whose clients hang up leave the process
//! idle within a second (the renders used to run on, each to its end). Alone in a process of
//! its own (`support::alone`): it measures the CPU time of the whole process, where the server
//! runs.

use crate::support;

use std::time::Duration;

use crate::support::export::{config, heavy_room, start_with, write};
use fairyring::config::ServeConfig;

/// CPU time of this process (the server runs in it), from /proc.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The fields after the command name (which may hold spaces) start after its ')'.
    let after = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis(ticks * 1000 / hz)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_renders_stop_within_a_second() {
    if !support::alone::in_own_process(module_path!(), "abandoned_renders_stop_within_a_second") {
        return;
    }
    let (server, _store, http) = start_with(ServeConfig {
        render_timeout_ms: 120_000,
        ..config()
    })
    .await;
    write(&server, "heavy", &heavy_room(), &[]).await;
    let url = format!("{http}/rooms/heavy/export.png?scale=8");
    // Four exports, each abandoned by its client once it is rendering.
    let client = reqwest::Client::new();
    for _ in 0..4 {
        let sent = client
            .get(&url)
            .timeout(Duration::from_millis(400))
            .send()
            .await;
        assert!(sent.is_err(), "the export answered before it was abandoned");
    }
    // Within a second of the last one, the renders have stopped: the process is idle.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = cpu_time();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let burnt = cpu_time().saturating_sub(before);
    assert!(
        burnt < Duration::from_millis(150),
        "{burnt:?} of CPU in 500 ms after the clients went away"
    );
    server.shutdown().await;
}
