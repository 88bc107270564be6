//! SIGTERM while an export renders (issue 27): the process exits within its shutdown deadline,
//! the render does not hold it (it used to be killed after 10 s). Runs the real binary.

use crate::support;

use std::process::Command;
use std::time::{Duration, Instant};

use fairyring::canvas::shape::write_shape;
use support::Client;
use support::services::Node;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_render_exits_in_time() {
    let mut server = Node::spawn(&[
        "--render-timeout-ms".into(),
        "120000".into(),
        "--max-message-bytes".into(),
        "16777216".into(),
    ]);
    let shapes = support::export::heavy_room();
    let mut writer = Client::connect(&server.ws(), "heavy").await;
    writer
        .edit(|txn| {
            for s in &shapes {
                write_shape(txn, s);
            }
        })
        .await;
    let mut reader = Client::connect(&server.ws(), "heavy").await;
    reader
        .until("every shape", |c| {
            support::shape_count(c) as usize == shapes.len()
        })
        .await;
    drop((writer, reader));
    // An export that renders for long; the request is not awaited.
    let url = format!("{}/rooms/heavy/export.png?scale=8", server.http());
    let export = tokio::spawn(async move { reqwest::get(url).await.map(|r| r.status()) });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!export.is_finished(), "the export was still rendering");
    let started = Instant::now();
    Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("kill -TERM");
    let deadline = started + Duration::from_secs(5);
    loop {
        if let Some(status) = server.child.try_wait().expect("wait") {
            assert!(status.success(), "exit status {status:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still running {:?} after SIGTERM",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    export.abort();
}
