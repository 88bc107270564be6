//! A node whose wall clock steps (NTP, an operator), forward or back: what measures a duration
//! — awareness timeouts, idle unloads — runs on the monotonic clock and does not notice
//! (docs/operations.md "What happens when the clock steps"). Tested with the injectable clock
//! (`fairyring::clock::ManualClock::step_wall`), without sleeping through the timeouts.

use crate::support;
use crate::support::server::TestServer;

use std::sync::Arc;
use std::time::Duration;

use fairyring::clock::ManualClock;
use fairyring::config::ServeConfig;
use fairyring::room::RoomConfig;
use fairyring::server;
use support::Client;

async fn start(clock: &ManualClock) -> (server::ServerHandle, String) {
    let room_clock = clock.clone();
    let store = fairyring::store::open("memory:").await.expect("store");
    let server = TestServer::builder(ServeConfig::for_test())
        .on(store)
        .rooms(move |config| RoomConfig {
            sweep_every: Duration::from_millis(20),
            clock: Arc::new(room_clock.clone()),
            ..RoomConfig::from_serve(config)
        })
        .start()
        .await
        .handle;
    let base = format!("ws://{}", server.addr());
    (server, base)
}

#[tokio::test]
async fn a_wall_clock_step_forward_drops_no_live_presence() {
    let clock = ManualClock::at_unix_millis(1_000_000_000);
    let (server, base) = start(&clock).await;
    let mut person = Client::connect(&base, "forward").await;
    let mut watcher = Client::connect(&base, "forward").await;
    person
        .set_awareness(serde_json::json!({"user": {"id": "p"}}))
        .await;
    watcher
        .until("the person's presence", |c| c.peers_present() == 1)
        .await;
    // An hour forward in a blink: the state was renewed a moment ago, it stays.
    clock.step_wall(3_600_000);
    clock.advance(Duration::from_secs(1));
    watcher.drain(Duration::from_millis(200)).await;
    assert_eq!(watcher.peers_present(), 1, "still present after the step");
    server.shutdown().await;
}

#[tokio::test]
async fn a_wall_clock_step_back_still_times_out_silent_presence() {
    let clock = ManualClock::at_unix_millis(1_000_000_000);
    let (server, base) = start(&clock).await;
    let mut silent = Client::connect(&base, "back").await;
    let mut watcher = Client::connect(&base, "back").await;
    silent
        .set_awareness(serde_json::json!({"user": {"id": "s"}}))
        .await;
    watcher
        .until("silent's presence", |c| c.peers_present() == 1)
        .await;
    // An hour back, then the 30 s timeout passes: the silent state goes all the same.
    clock.step_wall(-3_600_000);
    clock.advance(Duration::from_secs(29));
    watcher.drain(Duration::from_millis(150)).await;
    assert_eq!(watcher.peers_present(), 1, "still present before 30 s");
    clock.advance(Duration::from_millis(1_500));
    watcher
        .until("silent timed out", |c| c.peers_present() == 0)
        .await;
    server.shutdown().await;
}
