//! A reader that stops reading (issue 27): once a write to it has waited the write timeout
//! (10 s), the server closes it with 1013 where the socket still takes a close frame (it used
//! to drop it without one: the client saw 1006), and counts the drop in
//! `fairyring_connections_closed_total{reason="slow_reader"}`.

use crate::support;
use crate::support::server::TestServer;

use std::time::Duration;

use fairyring::config::ServeConfig;
use support::Client;
use yrs::{Text, WriteTxn};

fn slow_reader_closes(metrics: &str) -> u64 {
    metrics
        .lines()
        .find(|l| l.starts_with("fairyring_connections_closed_total{reason=\"slow_reader\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_reader_is_closed_with_1013_and_counted() {
    let server = TestServer::start(ServeConfig {
        idle_unload: 3600,
        // The writer sends 24 MB at once: not what the byte rate is about.
        rate_bytes_per_sec: u32::MAX,
        ..ServeConfig::for_test()
    })
    .await
    .handle;
    let (ws, http) = (
        format!("ws://{}", server.addr()),
        format!("http://{}", server.addr()),
    );
    let before = slow_reader_closes(&support::metrics_text(&http).await);
    let mut writer = Client::connect(&ws, "slow").await;
    let mut paused = Client::connect(&ws, "slow").await;
    paused.drain(Duration::from_millis(200)).await;
    // Far more than the socket buffers hold, in few frames (the outbound queue never fills).
    let chunk = "x".repeat(400_000);
    for _ in 0..60 {
        writer
            .edit(|txn| {
                let text = txn.get_or_insert_text("filler");
                let len = text.len(txn);
                text.insert(txn, len, &chunk);
            })
            .await;
    }
    // The paused reader is dropped once a write to it waited the write timeout.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while slow_reader_closes(&support::metrics_text(&http).await) == before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the paused reader was not dropped"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // It reads again: after what was queued, the close frame.
    assert_eq!(paused.until_closed().await, Some(1013));
    server.shutdown().await;
}
