//! `fairyring bench --soak` in CI: 3 minutes of soak of the debug binary against a server this
//! test starts (a 30 s soak, then a 2.5-minute one), with every load (people reconnecting every
//! 3 s, fairies, exports, history reads, REST writes), sampled every 5 s; and a run whose limit
//! cannot be met, which must exit non-zero with the check named. The checks' arithmetic (RSS slope, baselines, p99 ratio) is
//! unit-tested beside it in `src/bench/soak.rs`; the 60-minute verdict is a measured run
//! (docs/operations.md "… the server runs for hours", docs/benchmarks.md).
//!
//! Which checks hold over 3 minutes, and why:
//! - `fds_returned`, `tasks_returned`, `people_connected` (the bench's own, as they are), after
//!   each soak: ~240 connection cycles, ~360 fairy requests, ~180 exports and ~1,000 REST calls
//!   are enough for a descriptor, thread or refused connection that leaks per request to show.
//! - The RSS left once the room unloaded must not grow from the short soak to the long one (this
//!   test's check): what a 3-minute run can say about memory. The room's document grows all the
//!   run (the fairies draw new shapes at every prompt) and a debug server's caches and allocator
//!   fill for minutes, so a slope fitted over 2.4 minutes measures that growth, not a leak
//!   (52-137 MiB per 10 minutes in the first runs); once the room has unloaded its document is
//!   in the store, and what stays in memory is what the server keeps per server (in both
//!   figures: the short soak warmed it) or what it leaked (in proportion to the load: five times
//!   more in the long soak). Measured: +3.4 MiB (41,872 KiB after the short soak, 45,384 KiB
//!   after the long one); the RSS before any load is no baseline (it holds none of what the
//!   first load initialises), and an RSS read at the moment of the unload still holds pages the
//!   allocator has not handed back (95 MiB against 33 MiB before the load, in a first version).
//! - Lifted with hidden flags: `rss_slope` (above) and `p99_steady`: people's p99 over the 36 s
//!   first and last parts of a debug build sharing 2 cores with its own clients, fairies and
//!   exports swings 28-450 ms from one sample to the next, so a 1.2x ratio would fail at random.
//!   Both are checked by the 60-minute run.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The two soaks CI runs against one server, in minutes (3 in all).
const SHORT_MINUTES: &str = "0.5";
const LONG_MINUTES: &str = "2.5";
/// The most the RSS left once the room unloaded may grow from the short soak to the long one
/// (five times its load). Measured +3.4 MiB (docs/operations.md "… the server runs for hours").
const RSS_GROWTH_SLACK_KIB: u64 = 16 * 1024;
/// How long the room may take to unload after the clients left (`--idle-unload 1`).
const UNLOAD_WAIT: Duration = Duration::from_secs(30);
/// Seconds of RSS samples after the unload, the least of which is taken.
const SETTLE_SAMPLES: usize = 5;

/// A server of the test's own, started as `fairyring bench` starts one (a throwaway SQLite
/// store, rooms unloading 1 s after their last client, no fairy API limits), killed on drop.
struct Server {
    child: Child,
    addr: String,
    store: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let store = tempfile::tempdir().expect("a temporary directory");
        let mut child = Command::new(env!("CARGO_BIN_EXE_fairyring"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--insecure-no-auth",
                "--store",
                &format!("sqlite:{}", store.path().join("soak.db").display()),
                "--idle-unload",
                "1",
                "--fairy-api-rate-per-min",
                "0",
                "--fairy-token-budget",
                "0",
            ])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting fairyring serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("the server's stdout"))
            .read_line(&mut line)
            .expect("the server's first line");
        let addr = line
            .trim()
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| panic!("unexpected server output: {line}"))
            .to_owned();
        Server { child, addr, store }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn db(&self) -> String {
        format!("sqlite:{}", self.store.path().join("soak.db").display())
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("the server's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .expect("VmRSS")
    }

    /// `fairyring_rooms_loaded` from the server's `/metrics`.
    async fn rooms_loaded(&self) -> Option<f64> {
        let text = reqwest::get(format!("http://{}/metrics", self.addr))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("fairyring_rooms_loaded "))
            .and_then(|v| v.trim().parse().ok())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn soak(server: Option<&Server>, extra: &[&str]) -> (std::process::ExitStatus, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fairyring"));
    command.args([
        "bench",
        "--clients",
        "4",
        "--rate",
        "5",
        "--room",
        "soak",
        "--fairy-every",
        "1000",
        "--export-format",
        "svg",
        "--soak-cycle-secs",
        "3",
        "--json",
    ]);
    if let Some(server) = server {
        command.args([
            "--url",
            &format!("ws://{}", server.addr),
            "--server-pid",
            &server.pid().to_string(),
            "--store",
            &server.db(),
        ]);
    }
    let out = command
        .args(extra)
        .env("RUST_LOG", "warn")
        .output()
        .expect("running fairyring bench");
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn count(map: &serde_json::Value, status: &str) -> u64 {
    map[status].as_u64().unwrap_or(0)
}

/// Waits for the room to unload, then for the RSS to settle (jemalloc hands freed pages back
/// about a second after they were freed); returns the settled RSS.
async fn rss_after_unload(server: &Server) -> u64 {
    let waited = Instant::now();
    while server.rooms_loaded().await != Some(0.0) {
        assert!(
            waited.elapsed() < UNLOAD_WAIT,
            "the room did not unload within {UNLOAD_WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut rss = server.rss_kib();
    for _ in 0..SETTLE_SAMPLES {
        tokio::time::sleep(Duration::from_secs(1)).await;
        rss = rss.min(server.rss_kib());
    }
    rss
}

/// Runs a soak of `minutes` against `server` (RSS slope and p99 lifted, see the module doc),
/// checks what holds over any length and returns the report.
fn checked_soak(server: &Server, minutes: &str, samples_at_least: usize) -> serde_json::Value {
    let (status, stdout, stderr) = soak(
        Some(server),
        &[
            "--soak",
            minutes,
            "--soak-sample-secs",
            "5",
            "--soak-rss-limit-kib",
            "1000000000",
            "--soak-p99-ratio",
            "1000",
        ],
    );
    assert!(status.success(), "the soak failed: {stdout}\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON report");
    assert_eq!(report["passed"], true, "{report}");
    let samples = report["samples"].as_array().expect("samples");
    assert!(
        samples.len() >= samples_at_least,
        "one sample every 5 s for {minutes} minutes: {}",
        samples.len()
    );
    for s in samples {
        for key in ["rss_kib", "fds", "tasks", "store_bytes"] {
            assert!(s[key].as_u64().is_some_and(|v| v > 0), "{key} in {s}");
        }
    }
    // People's deliveries were measured all the run, not only at its start.
    let delivering = samples
        .iter()
        .filter(|s| s["deliveries"].as_u64().is_some_and(|d| d > 0))
        .count();
    assert!(
        delivering * 10 >= samples.len() * 9,
        "{delivering} of {} samples saw deliveries",
        samples.len()
    );
    for name in [
        "fds_returned",
        "tasks_returned",
        "people_connected",
        "rss_slope",
        "p99_steady",
    ] {
        let check = report["checks"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == name))
            .unwrap_or_else(|| panic!("no check {name} in {report}"));
        assert_eq!(check["passed"], true, "{check}");
    }
    for (what, count_of) in [
        (
            "rest_writes_by_status",
            count(&report["rest_writes_by_status"], "200"),
        ),
        (
            "history_reads_by_status",
            count(&report["history_reads_by_status"], "200"),
        ),
        (
            "fairy prompts",
            report["fairy_prompts"]["accepted"].as_u64().unwrap_or(0),
        ),
        (
            "exports",
            count(&report["exports"]["answers_by_status"], "200"),
        ),
    ] {
        assert!(count_of > 0, "no {what} answered: {report}");
    }
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_minute_soak_runs_every_load_and_the_server_comes_back_to_its_baseline() {
    let server = Server::start();
    // A short soak first: what the server keeps once it has served every kind of load
    // (SQLite connections and their caches, the export fonts, blocking threads) is in the
    // baseline; then the long one.
    let short = tokio::task::block_in_place(|| checked_soak(&server, SHORT_MINUTES, 5));
    let baseline = rss_after_unload(&server).await;
    let long = tokio::task::block_in_place(|| checked_soak(&server, LONG_MINUTES, 30));
    let after = rss_after_unload(&server).await;
    let peak = |r: &serde_json::Value| {
        r["samples"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["rss_kib"].as_u64())
            .max()
            .unwrap_or(0)
    };
    eprintln!(
        "server RSS after the room unloaded: {baseline} KiB after the {SHORT_MINUTES}-minute \
         soak (peak {} KiB under it), {after} KiB after the {LONG_MINUTES}-minute one (peak {} \
         KiB)",
        peak(&short),
        peak(&long)
    );
    assert!(
        after <= baseline + RSS_GROWTH_SLACK_KIB,
        "the RSS left once the room unloaded grew with the load: {baseline} KiB after \
         {SHORT_MINUTES} minutes, {after} KiB after {LONG_MINUTES} more (slack \
         {RSS_GROWTH_SLACK_KIB} KiB)"
    );
}

#[test]
fn a_soak_that_misses_a_limit_exits_non_zero_and_names_the_check() {
    // No RSS can shrink faster than this: the slope check must fail.
    let (status, stdout, stderr) = soak(
        None,
        &[
            "--soak",
            "0.1",
            "--soak-sample-secs",
            "0.5",
            "--soak-rss-limit-kib=-1000000000",
            "--soak-p99-ratio",
            "1000",
        ],
    );
    assert!(!status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("the soak failed: rss_slope"), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON report");
    assert_eq!(report["passed"], false);
}
