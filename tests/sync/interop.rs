//! Interop with the official JavaScript clients: `yjs` + `y-websocket` (v3) + `y-protocols`
//! under Node, unchanged, against the real server (script: `tests/interop/interop.mjs`).
//! Installs the npm packages with `npm ci` when `tests/interop/node_modules` is missing.

use crate::support;
use crate::support::server::TestServer;

use std::path::{Path, PathBuf};
use std::time::Duration;

use fairyring::config::ServeConfig;
use support::{Client, ensure_npm_packages, put_shape, shape_x};

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_yjs_clients_work_unchanged() {
    official_clients_against(ServeConfig::for_test()).await;
}

/// The same suite with the PostgreSQL store (its own schema).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_yjs_clients_work_unchanged_with_postgres() {
    let Some(pg) = support::services::PgSchema::fresh("interop").await else {
        return;
    };
    let mut config = ServeConfig::for_test();
    config.store = pg.url.clone();
    config.store_schema = Some(pg.schema.clone());
    official_clients_against(config).await;
}

async fn official_clients_against(config: ServeConfig) {
    let dir = interop_dir();
    ensure_npm_packages(&dir);
    let server = TestServer::start(config).await.handle;
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

/// Runs `close_codes.mjs` (Node's `ws` client) and returns the close code of each run.
async fn node_close_codes(url: &str, scenario: &str, runs: usize) -> Vec<i64> {
    let dir = interop_dir();
    ensure_npm_packages(&dir);
    let node = tokio::process::Command::new("node")
        .arg("close_codes.mjs")
        .arg(url)
        .arg(scenario)
        .arg(runs.to_string())
        .current_dir(&dir)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(90), node)
        .await
        .expect("node close-code script timed out")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "node failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let codes: Vec<i64> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("close "))
        .map(|c| c.trim().parse().expect("a close code"))
        .collect();
    assert_eq!(codes.len(), runs, "{stdout}");
    codes
}

/// A browser-like client (Node's `ws`) sees the close code the server sends, not 1006: the
/// server reads and discards what the peer still sends after its close frame, so the
/// connection is not reset under the close frame.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_ws_client_sees_1009_1008_and_4401() {
    let mut config = ServeConfig::for_test();
    config.max_message_bytes = 65_536;
    config.rate_per_sec = 20;
    config.rate_burst = 40;
    let server = TestServer::start(config).await.handle;
    let url = format!("ws://{}/rooms/close-codes", server.addr());
    // A 200 KB frame is over the hard cap (twice the limit): refused from its header, with
    // its payload still unread on the connection. Every run must see 1009.
    assert_eq!(node_close_codes(&url, "big", 5).await, vec![1009; 5]);
    assert_eq!(node_close_codes(&url, "flood", 2).await, vec![1008; 2]);
    server.shutdown().await;

    let secret = "close-codes-secret-0123456789abcdef";
    let mut config = ServeConfig::for_test();
    config.jwt_secret = Some(secret.into());
    config.jwt_leeway = 0;
    let server = TestServer::start(config).await.handle;
    let now = fairyring::auth::unix_now();
    let claims = serde_json::json!({
        "sub": "node", "exp": now + 2, "rooms": ["close-codes"], "scope": "read write"
    });
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
    )
    .expect("token");
    let url = format!("ws://{}/rooms/close-codes?token={token}", server.addr());
    assert_eq!(node_close_codes(&url, "idle", 1).await, vec![4401]);
    server.shutdown().await;
}
