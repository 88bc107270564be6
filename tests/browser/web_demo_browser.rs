//! The web demo's checks, run from `cargo test`: the TypeScript type-check (with the sources of
//! `@fairyring/client`, clients/js, which the page is built on) and unit tests, the
//! committed `web-demo/dist` being up to date with the sources, and the Playwright tests that
//! drive Debian's Chromium against the real `fairyring` binary (started by each script on a
//! free loopback port with a temporary SQLite store and `--dev`): `e2e/browser.mjs` (the
//! features) and `e2e/firstminutes.mjs` (a newcomer's first minutes: restart, room names,
//! small screens, keyboard, exports, zoom).
//!
//! Needs Node and npm (`npm ci` runs once if `web-demo/node_modules` is missing). When Chromium
//! is missing the browser test fails if `FAIRYRING_REQUIRE_BROWSER=1` (CI sets it) and is
//! otherwise skipped with a loud message. Screenshots land in `target/web-demo-artifacts/`.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use support::npm;

/// The demo's npm steps share `node_modules` and the machine's two cores: one at a time (an
/// async mutex, made to be held across the awaits of the step it guards).
static NPM: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const CHROMIUM: &str = "/usr/bin/chromium";

fn demo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("web-demo")
}

fn artifacts_dir() -> PathBuf {
    // CARGO_TARGET_TMPDIR is `<target>/tmp`; the artifacts go beside it in `<target>/`.
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().unwrap_or(tmp).join("web-demo-artifacts")
}

fn require_browser() -> bool {
    std::env::var("FAIRYRING_REQUIRE_BROWSER").is_ok_and(|v| v == "1")
}

/// Runs a command in `web-demo/`.
async fn run(program: &str, args: &[&str], envs: &[(&str, &str)], limit: Duration) {
    npm::run_in(&demo_dir(), program, args, envs, limit).await
}

/// Installs the locked npm dependencies once, if they are missing.
async fn ensure_node_modules() {
    if !demo_dir().join("node_modules").is_dir() {
        run(
            "npm",
            &["ci", "--no-audit", "--no-fund"],
            &[],
            Duration::from_secs(300),
        )
        .await;
    }
}

#[tokio::test]
async fn web_demo_typechecks_and_its_unit_tests_pass() {
    let _one = NPM.lock().await;
    ensure_node_modules().await;
    // The page compiles against @fairyring/client's sources (clients/js), whose API types are
    // those of the committed description: tests/browser/client_js.rs checks them, tests/http/openapi.rs the
    // description against the server.
    run("npm", &["run", "typecheck"], &[], Duration::from_secs(180)).await;
    run("npm", &["test"], &[], Duration::from_secs(180)).await;
}

#[tokio::test]
async fn committed_dist_matches_a_fresh_build() {
    let _one = NPM.lock().await;
    ensure_node_modules().await;
    run("npm", &["run", "check-dist"], &[], Duration::from_secs(180)).await;
}

/// Whether Chromium is there; when it is missing, fails under `FAIRYRING_REQUIRE_BROWSER=1` and
/// otherwise says loudly that `what` is skipped.
fn chromium_present(what: &str) -> bool {
    if Path::new(CHROMIUM).exists() {
        return true;
    }
    let msg = format!(
        "{CHROMIUM} is missing: install it with `apt-get install -y chromium` \
         (never `npx playwright install`)"
    );
    assert!(!require_browser(), "FAIRYRING_REQUIRE_BROWSER=1 but {msg}");
    eprintln!("\n!!!!!!!!\n!!! SKIPPED {what}: {msg}\n!!!!!!!!\n");
    false
}

/// Runs one of the Playwright scripts in `web-demo/e2e/` against this build's binary.
async fn run_browser_script(script: &str, limit: Duration) {
    ensure_node_modules().await;
    let artifacts = artifacts_dir();
    let artifacts = artifacts.to_string_lossy();
    run(
        "node",
        &[script],
        &[
            ("FAIRYRING_BIN", env!("CARGO_BIN_EXE_fairyring")),
            ("FAIRYRING_ARTIFACTS", &artifacts),
            ("CHROMIUM", CHROMIUM),
            // Chromium and the test harness keep the cores busy: idle-class fairies would
            // wait for them (src/priority.rs).
            ("FAIRYRING_BACKGROUND_PRIORITY", "nice"),
        ],
        limit,
    )
    .await;
}

#[tokio::test]
async fn two_browsers_share_a_room_in_chromium() {
    let _one = NPM.lock().await;
    if !chromium_present("the web demo browser test") {
        return;
    }
    run_browser_script("e2e/browser.mjs", Duration::from_secs(300)).await;
}

/// A newcomer's first minutes (issue 47), one server and one browser: a `--dev` restart under an
/// open page (it reconnects with a new dev token, no click), no token in any console message, an
/// invalid room name opening its slug (in the URL, not `demo`), the 800 × 600 layout (sidebar
/// collapsed, canvas ≥ 70 % of the width, History open too), keyboard-only invite, select,
/// prompt and shape focus, the PNG / SVG export buttons and the zoom label.
#[tokio::test]
async fn a_newcomers_first_minutes_in_chromium() {
    let _one = NPM.lock().await;
    if !chromium_present("the web demo's first-minutes test") {
        return;
    }
    run_browser_script("e2e/firstminutes.mjs", Duration::from_secs(180)).await;
}
