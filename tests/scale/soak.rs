//! `fairyring bench --soak`: a short soak against a server the bench starts (the debug binary)
//! runs every load, samples the server every second, sees its file descriptors and threads come
//! back when the clients leave, and exits non-zero with the failed check named when a limit is
//! not met. The checks' arithmetic (RSS slope, baselines, p99 ratio) is unit-tested beside it in
//! `src/bench/soak.rs`; a run of seconds says nothing of a slope, so this run lifts the RSS and
//! p99 limits and keeps the fd, thread and connection checks as they are.

use std::process::Command;

fn soak(extra: &[&str]) -> (std::process::ExitStatus, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fairyring"))
        .args([
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
        ])
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

#[test]
fn a_short_soak_samples_every_load_and_the_server_comes_back_to_its_baseline() {
    let (status, stdout, stderr) = soak(&[
        "--soak",
        "0.25",
        "--soak-sample-secs",
        "1",
        "--soak-rss-limit-kib",
        "1000000000",
        "--soak-p99-ratio",
        "1000",
    ]);
    assert!(status.success(), "the soak failed: {stdout}\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON report");
    assert_eq!(report["passed"], true, "{report}");
    let samples = report["samples"].as_array().expect("samples");
    assert!(
        samples.len() >= 12,
        "one sample a second for 15 s: {}",
        samples.len()
    );
    for s in samples {
        for key in ["rss_kib", "fds", "tasks", "store_bytes"] {
            assert!(s[key].as_u64().is_some_and(|v| v > 0), "{key} in {s}");
        }
    }
    let delivered: u64 = samples
        .iter()
        .filter_map(|s| s["deliveries"].as_u64())
        .sum();
    assert!(
        delivered > 100,
        "people's deliveries were sampled: {delivered}"
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
    assert!(
        count(&report["rest_writes_by_status"], "200") > 10,
        "{report}"
    );
    assert!(
        count(&report["history_reads_by_status"], "200") > 5,
        "{report}"
    );
    assert!(
        report["fairy_prompts"]["accepted"].as_u64().unwrap_or(0) > 0,
        "{report}"
    );
    assert!(
        report["exports"]["answers_by_status"]["200"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{report}"
    );
}

#[test]
fn a_soak_that_misses_a_limit_exits_non_zero_and_names_the_check() {
    // No RSS can shrink faster than this: the slope check must fail.
    let (status, stdout, stderr) = soak(&[
        "--soak",
        "0.1",
        "--soak-sample-secs",
        "0.5",
        "--soak-rss-limit-kib=-1000000000",
        "--soak-p99-ratio",
        "1000",
    ]);
    assert!(!status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("the soak failed: rss_slope"), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON report");
    assert_eq!(report["passed"], false);
}
