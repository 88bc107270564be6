//! The TypeScript client package `@fairyring/client` (clients/js), run from `cargo test`: its
//! API types are those of the committed OpenAPI description (which tests/http/openapi.rs checks
//! against the server), it builds with tsc (ESM and `.d.ts`), and its tests pass under Node's
//! test runner — the schema round trips and refusals, and the room connection and every
//! operation of the HTTP API against this crate's real `fairyring` binary (started by the tests
//! on 127.0.0.1:0 with a temporary SQLite store and `--dev`).
//!
//! Needs Node and npm (`npm ci` runs once if `clients/js/node_modules` is missing); without Node
//! the test is skipped with a loud message, unless `FAIRYRING_REQUIRE_BROWSER=1` (CI), which
//! makes a missing Node a failure.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use support::npm;

fn package_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/js")
}

/// Runs a command in `clients/js/`, the server binary named for the package's tests.
async fn run(program: &str, args: &[&str], limit: Duration) {
    let bin = ("FAIRYRING_BIN", env!("CARGO_BIN_EXE_fairyring"));
    npm::run_in(&package_dir(), program, args, &[bin], limit).await
}

#[tokio::test]
async fn client_package_builds_and_its_tests_pass_against_the_server() {
    if !npm::node_present() {
        let msg = "node is missing: install Node 20+ and npm";
        assert!(
            !std::env::var("FAIRYRING_REQUIRE_BROWSER").is_ok_and(|v| v == "1"),
            "FAIRYRING_REQUIRE_BROWSER=1 but {msg}"
        );
        eprintln!("\n!!!!!!!!\n!!! SKIPPED the @fairyring/client tests: {msg}\n!!!!!!!!\n");
        return;
    }
    if !package_dir().join("node_modules").is_dir() {
        run(
            "npm",
            &["ci", "--no-audit", "--no-fund"],
            Duration::from_secs(300),
        )
        .await;
    }
    run("npm", &["run", "check-api-types"], Duration::from_secs(120)).await;
    run("npm", &["run", "build"], Duration::from_secs(180)).await;
    run("npm", &["test"], Duration::from_secs(300)).await;
}
