//! Limits: message rate, connections per room and in total, rooms loaded. The offender is
//! refused or closed with a clear code; everyone else carries on.

use crate::support;
use crate::support::server::TestServer;

use fairyring::config::ServeConfig;
use support::{Client, put_shape, shape_x};

async fn start(config: ServeConfig) -> (fairyring::server::ServerHandle, String) {
    let server = TestServer::start(config).await;
    (server.handle, server.ws)
}

fn refused_status(
    result: Result<impl std::fmt::Debug, tokio_tungstenite::tungstenite::Error>,
) -> (u16, serde_json::Value) {
    match result {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let body = serde_json::from_slice(response.body().as_deref().unwrap_or_default())
                .expect("json body");
            (response.status().as_u16(), body)
        }
        other => panic!("expected an HTTP refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn message_floods_close_with_1008_and_others_continue() {
    let mut config = ServeConfig::for_test();
    config.rate_per_sec = 20;
    config.rate_burst = 40;
    let (server, base) = start(config).await;
    let mut calm = Client::connect(&base, "flood").await;
    let mut flood = Client::connect(&base, "flood").await;
    for i in 0..200 {
        flood
            .edit(|txn| put_shape(txn, &format!("f{i}"), 1.0))
            .await;
    }
    assert_eq!(flood.until_closed().await, Some(1008));
    calm.edit(|txn| put_shape(txn, "calm", 2.0)).await;
    let mut watcher = Client::connect(&base, "flood").await;
    watcher
        .until("calm's shape", |c| shape_x(&c.doc, "calm") == Some(2.0))
        .await;
    assert!(calm.closed.is_none());
    server.shutdown().await;
}

#[tokio::test]
async fn connection_caps_answer_503_before_upgrade() {
    let mut config = ServeConfig::for_test();
    config.max_connections_per_room = 2;
    config.max_connections = 3;
    let (server, base) = start(config).await;
    let _a = Client::connect(&base, "cap").await;
    let mut b = Client::connect(&base, "cap").await;
    let (status, body) =
        refused_status(tokio_tungstenite::connect_async(format!("{base}/rooms/cap")).await);
    assert_eq!((status, body["error"].as_str()), (503, Some("room_full")));
    let _c = Client::connect(&base, "other").await;
    let (status, body) =
        refused_status(tokio_tungstenite::connect_async(format!("{base}/rooms/third")).await);
    assert_eq!(
        (status, body["error"].as_str()),
        (503, Some("too_many_connections"))
    );
    // The admitted peers are unaffected.
    b.edit(|txn| put_shape(txn, "still", 1.0)).await;
    b.drain(std::time::Duration::from_millis(50)).await;
    assert!(b.closed.is_none());
    server.shutdown().await;
}

#[tokio::test]
async fn rooms_loaded_are_capped() {
    let mut config = ServeConfig::for_test();
    config.max_rooms = 2;
    config.idle_unload = 3600;
    let (server, base) = start(config).await;
    let _a = Client::connect(&base, "r1").await;
    let _b = Client::connect(&base, "r2").await;
    let (status, body) =
        refused_status(tokio_tungstenite::connect_async(format!("{base}/rooms/r3")).await);
    assert_eq!(
        (status, body["error"].as_str()),
        (503, Some("too_many_rooms"))
    );
    // An already loaded room still admits peers.
    let _c = Client::connect(&base, "r1").await;
    server.shutdown().await;
}
