//! Interop with the official JavaScript clients: `yjs` + `y-websocket` (v3) + `y-protocols`
//! under Node, unchanged, against the real server (script: `tests/interop/interop.mjs`).
//! Installs the npm packages with `npm ci` when `tests/interop/node_modules` is missing.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use fairyring::config::ServeConfig;
use support::{Client, put_shape, shape_x};

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

/// Installs the pinned npm packages once (what `.ci/run` also does).
pub fn ensure_npm_packages(dir: &Path) {
    if dir.join("node_modules/y-websocket").exists() {
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .status()
        .expect("npm is required for the interop tests (install Node.js 20+)");
    assert!(status.success(), "npm ci failed in {}", dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_yjs_clients_work_unchanged() {
    let dir = interop_dir();
    ensure_npm_packages(&dir);
    let server = fairyring::server::start(ServeConfig::for_test())
        .await
        .expect("server");
    let base = format!("ws://{}", server.addr());
    let mut rust = Client::connect(&base, "interop").await;
    rust.edit(|txn| put_shape(txn, "rust1", 42.0)).await;
    rust.drain(Duration::from_millis(50)).await;

    let node = tokio::process::Command::new("node")
        .arg("interop.mjs")
        .arg(&base)
        .arg("interop")
        .current_dir(&dir)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), node)
        .await
        .expect("node interop script timed out")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("interop ok"),
        "node failed:\n{stdout}\n{stderr}"
    );

    // What the JS clients wrote reached the Rust client too, merged.
    rust.until("from-js", |c| shape_x(&c.doc, "from-js") == Some(7.0))
        .await;
    rust.until("js1 merged", |c| shape_x(&c.doc, "js1") == Some(11.0))
        .await;
    // Every JS peer's awareness is gone once they disconnected.
    rust.until("no JS presence left", |c| c.peers_present() == 0)
        .await;
    server.shutdown().await;
}
