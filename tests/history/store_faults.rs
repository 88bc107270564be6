//! Real faults between a node and its PostgreSQL (docs/operations.md "What happens when …"):
//! the node reaches PostgreSQL through a test-owned TCP relay (`support::relay`) that stalls
//! without closing, or cuts every connection; and the node's backends are terminated
//! (`pg_terminate_backend`) while people write. Writers are answered within the store's
//! deadline (`--store-timeout-ms`), sockets close with the documented retryable `1011`,
//! writing resumes by itself when the fault ends, and every acknowledged write is kept.

use crate::support;
use crate::support::server::TestServer;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use fairyring::config::ServeConfig;
use serde_json::{Value, json};
use support::relay::{Relay, address_of, through};
use support::services::PgSchema;
use support::{Client, put_shape, shape_count};

/// The store deadline the tests run with.
const DEADLINE: Duration = Duration::from_millis(1000);
/// What a writer may wait beyond the deadline (the HTTP round trip, a busy test machine).
const SLACK: Duration = Duration::from_secs(2);
/// The goal for service to come back once a fault ends (issue 46).
const RECOVERY_GOAL: Duration = Duration::from_secs(5);

/// A node on `schema`'s PostgreSQL through a relay.
async fn node_through_relay(
    pg: &PgSchema,
) -> (fairyring::server::ServerHandle, Relay, String, String) {
    let relay = Relay::start(address_of(&pg.url, 5432)).await;
    let config = ServeConfig {
        store: through(&pg.url, relay.addr()),
        store_schema: Some(pg.schema.clone()),
        store_timeout_ms: DEADLINE.as_millis() as u64,
        ..ServeConfig::for_test()
    };
    let server = TestServer::start(config).await;
    (server.handle, relay, server.http, server.ws)
}

/// `PATCH /rooms/{room}/shapes` creating shape `id`: status, body and how long it took.
async fn create_shape(http: &str, room: &str, id: &str) -> (u16, Value, Duration) {
    let started = Instant::now();
    let response = reqwest::Client::new()
        .patch(format!("{http}/rooms/{room}/shapes"))
        .timeout(Duration::from_secs(40))
        .json(&json!({"create": [{
            "id": id, "type": "rectangle", "x": 1, "y": 2, "w": 30, "h": 40, "color": "blue"
        }]}))
        .send()
        .await;
    let elapsed = started.elapsed();
    match response {
        Ok(response) => {
            let status = response.status().as_u16();
            (
                status,
                response.json().await.unwrap_or(Value::Null),
                elapsed,
            )
        }
        // No answer at all (the client's own timeout): what a hanging server looks like.
        Err(error) => (0, json!({ "transport": error.to_string() }), elapsed),
    }
}

/// The room's shapes as `GET /rooms/{room}/doc` answers them.
async fn stored_shapes(http: &str, room: &str) -> serde_json::Map<String, Value> {
    let doc: Value = reqwest::get(format!("{http}/rooms/{room}/doc"))
        .await
        .expect("doc")
        .json()
        .await
        .expect("doc json");
    doc["doc"]["shapes"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// Writes until one is acknowledged; how long that took.
async fn until_a_write_succeeds(http: &str, room: &str, id: &str) -> Duration {
    let started = Instant::now();
    loop {
        let (status, body, _) = create_shape(http, room, id).await;
        if status == 200 {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "writing did not resume: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every acknowledged shape is in the room, and every shape a REST write created is whole
/// (never half-applied); `from_sockets` names the shapes peers wrote (an `x` alone).
async fn assert_kept(http: &str, room: &str, acked: &BTreeSet<String>, from_sockets: &[&str]) {
    let shapes = stored_shapes(http, room).await;
    let missing: Vec<&String> = acked
        .iter()
        .filter(|id| !shapes.contains_key(*id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged writes lost: {missing:?}",
        missing.len(),
        acked.len()
    );
    for (id, shape) in shapes
        .iter()
        .filter(|(id, _)| !from_sockets.contains(&id.as_str()))
    {
        assert_eq!(shape["w"], 30.0, "{id} is whole: {shape}");
        assert_eq!(shape["color"], "blue", "{id} is whole: {shape}");
    }
    eprintln!(
        "{} acknowledged writes, 0 lost; {} shapes stored",
        acked.len(),
        shapes.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_postgres_fails_writers_within_the_deadline_and_loses_nothing() {
    let Some(pg) = PgSchema::fresh("stall").await else {
        return;
    };
    let (server, relay, http, ws) = node_through_relay(&pg).await;
    let room = "stalled";
    let mut acked = BTreeSet::new();
    for i in 0..5 {
        let id = format!("before-{i}");
        let (status, body, _) = create_shape(&http, room, &id).await;
        assert_eq!(status, 200, "{body}");
        acked.insert(id);
    }
    let mut writer = Client::connect(&ws, room).await;
    let mut watcher = Client::connect(&ws, room).await;
    watcher.until("the room", |c| shape_count(c) == 5).await;

    // The network to PostgreSQL stalls: connections stay open, nothing goes through.
    relay.pause();
    let stalled = Instant::now();
    writer.edit(|txn| put_shape(txn, "from-socket", 9.0)).await;
    assert_eq!(
        writer.until_closed().await,
        Some(1011),
        "the writer's close"
    );
    assert_eq!(watcher.until_closed().await, Some(1011), "the room closed");
    let closed_after = stalled.elapsed();
    assert!(
        closed_after < DEADLINE + SLACK,
        "sockets closed {closed_after:?} after the stall"
    );
    assert_eq!(shape_count(&watcher), 5, "nothing undurable was shown");

    let (status, body, took) = create_shape(&http, room, "during").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"], "store_unavailable", "{body}");
    assert!(
        took < DEADLINE + SLACK,
        "a REST write answered after {took:?}"
    );
    let (status, health, _) = {
        let started = Instant::now();
        let response = reqwest::get(format!("{http}/healthz"))
            .await
            .expect("healthz");
        let status = response.status().as_u16();
        (
            status,
            response.json::<Value>().await.expect("json"),
            started.elapsed(),
        )
    };
    assert_eq!(status, 503, "{health}");
    assert_eq!(health["store"], "unreachable");

    // The network comes back: writing resumes by itself.
    relay.resume();
    let recovery = until_a_write_succeeds(&http, room, "after-resume").await;
    acked.insert("after-resume".into());
    eprintln!(
        "stall: sockets closed {closed_after:?} after it began, a REST write answered in \
         {took:?}, writing resumed {recovery:?} after the network came back"
    );
    assert!(recovery < RECOVERY_GOAL, "recovery took {recovery:?}");
    for i in 0..5 {
        let id = format!("after-{i}");
        let (status, body, _) = create_shape(&http, room, &id).await;
        assert_eq!(status, 200, "{body}");
        acked.insert(id);
    }
    assert_kept(&http, room, &acked, &["from-socket"]).await;
    // A client that reconnects converges on everything acknowledged.
    let mut again = Client::connect(&ws, room).await;
    again
        .until("every acknowledged shape", |c| {
            let ids: BTreeSet<String> = support::shape_ids(c).into_iter().collect();
            acked.is_subset(&ids)
        })
        .await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_network_to_postgres_recovers_by_itself() {
    let Some(pg) = PgSchema::fresh("cut").await else {
        return;
    };
    let (server, relay, http, _ws) = node_through_relay(&pg).await;
    let room = "cut";
    let mut acked = BTreeSet::new();
    let (status, body, _) = create_shape(&http, room, "before").await;
    assert_eq!(status, 200, "{body}");
    acked.insert("before".to_owned());

    relay.cut();
    let (status, body, took) = create_shape(&http, room, "during").await;
    assert!(
        status == 503,
        "a write while PostgreSQL is unreachable: {status} {body}"
    );
    assert!(took < DEADLINE + SLACK, "answered after {took:?}");

    relay.resume();
    let recovery = until_a_write_succeeds(&http, room, "after").await;
    acked.insert("after".into());
    eprintln!("cut: refused in {took:?}; writing resumed {recovery:?} after the network came back");
    assert!(recovery < RECOVERY_GOAL, "recovery took {recovery:?}");
    assert_kept(&http, room, &acked, &[]).await;
    server.shutdown().await;
}

/// `pg_terminate_backend` of this node's connections (found by the relay's ports, so other
/// tests' connections are untouched) while a writer keeps writing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_backends_under_load_lose_no_acknowledged_write() {
    let Some(pg) = PgSchema::fresh("terminate").await else {
        return;
    };
    let (server, relay, http, _ws) = node_through_relay(&pg).await;
    let room = "terminated";
    let admin = sqlx::PgPool::connect(&pg.url).await.expect("admin pool");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let load = tokio::spawn({
        let http = http.clone();
        async move {
            let mut acked = BTreeSet::new();
            let mut refused = 0u32;
            let mut i = 0u32;
            while !*stop_rx.borrow() {
                let id = format!("load-{i}");
                i += 1;
                let (status, body, took) = create_shape(&http, room, &id).await;
                match status {
                    200 => {
                        acked.insert(id.clone());
                    }
                    503 => refused += 1,
                    other => panic!("write {id}: {other} {body} after {took:?}"),
                }
                assert!(
                    took < DEADLINE + SLACK,
                    "write {id} answered after {took:?}"
                );
            }
            (acked, refused)
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut terminated = 0i64;
    for _ in 0..3 {
        let ports: Vec<i32> = relay.upstream_ports().into_iter().map(i32::from).collect();
        let killed: Vec<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE client_port = ANY($1) AND pid <> pg_backend_pid()",
        )
        .bind(&ports)
        .fetch_all(&admin)
        .await
        .expect("terminate");
        terminated += killed.iter().filter(|k| **k).count() as i64;
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    assert!(terminated > 0, "the node's backends were terminated");
    let ended = Instant::now();
    let recovery = until_a_write_succeeds(&http, room, "after-terminate").await;
    stop_tx.send(true).expect("stop");
    let (mut acked, refused) = load.await.expect("load");
    acked.insert("after-terminate".into());
    eprintln!(
        "terminate_backend: {terminated} backends killed, {} writes acknowledged, {refused} \
         refused with 503, writing back {recovery:?} after the last kill ({:?} since)",
        acked.len(),
        ended.elapsed()
    );
    assert!(recovery < RECOVERY_GOAL, "recovery took {recovery:?}");
    assert_kept(&http, room, &acked, &[]).await;
    admin.close().await;
    server.shutdown().await;
}

/// A socket peer writing a shape every few milliseconds through a PostgreSQL restart: when
/// the server closes it, it records the close code, reconnects (retrying while the room cannot
/// load) and sends its whole document again, as y-websocket does. Returns its document's
/// state, the shapes it wrote and the close codes it saw.
async fn restarting_peer(
    ws: String,
    room: &'static str,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> (Vec<u8>, BTreeSet<String>, Vec<Option<u16>>) {
    let mut peer = Client::connect(&ws, room).await;
    let mut written = BTreeSet::new();
    let mut closes = Vec::new();
    let mut i = 0u32;
    while !*stop.borrow_and_update() {
        if peer.closed.is_some() {
            closes.push(peer.closed.clone().flatten().map(|f| u16::from(f.code)));
            let state = peer.state();
            let started = Instant::now();
            let mut again = loop {
                if let Some(client) = Client::try_connect(&ws, room).await {
                    break client;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "the peer could not reconnect"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            again
                .edit(|txn| {
                    use yrs::updates::decoder::Decode;
                    let update = yrs::Update::decode_v1(&state).expect("state");
                    txn.apply_update(update).expect("apply");
                })
                .await;
            peer = again;
        }
        let id = format!("sock-{i}");
        i += 1;
        peer.edit(|txn| put_shape(txn, &id, 9.0)).await;
        written.insert(id);
        peer.drain(Duration::from_millis(30)).await;
    }
    // Everything it wrote reaches the server before it leaves.
    peer.drain(Duration::from_millis(300)).await;
    let state = peer.state();
    peer.close().await;
    (state, written, closes)
}

/// Issue 46: `pg_ctl restart -m fast` (what `pg_ctlcluster … restart` runs) of a PostgreSQL
/// cluster of the test's own (`support::pg_cluster`: the machine's shared PostgreSQL is left
/// alone) while a REST writer and a socket peer write. The node reconnects by itself; a write
/// the restart fails is refused with a retryable answer (`503 store_unavailable`, close
/// `1011`), never half-applied; the peer reconnects and converges; every acknowledged write is
/// kept; writing is back within the 5 s goal after the cluster accepts connections again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_restart_under_load_loses_no_acknowledged_write() {
    use support::pg_cluster::PgCluster;
    let Some(cluster) = tokio::task::spawn_blocking(PgCluster::start)
        .await
        .expect("cluster")
    else {
        return;
    };
    let config = ServeConfig {
        store: cluster.url(),
        store_schema: Some("restart".into()),
        store_timeout_ms: DEADLINE.as_millis() as u64,
        ..ServeConfig::for_test()
    };
    let server = TestServer::start(config).await.handle;
    let http = format!("http://{}", server.addr());
    let ws = format!("ws://{}", server.addr());
    let room = "restarted";
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let rest = tokio::spawn({
        let http = http.clone();
        let stop_rx = stop_rx.clone();
        async move {
            let mut acked = BTreeSet::new();
            let mut refused = Vec::new();
            let mut i = 0u32;
            while !*stop_rx.borrow() {
                let id = format!("load-{i}");
                i += 1;
                let (status, body, took) = create_shape(&http, room, &id).await;
                match status {
                    200 => {
                        acked.insert(id.clone());
                    }
                    503 => refused.push(body["error"].as_str().unwrap_or_default().to_owned()),
                    other => panic!("write {id}: {other} {body} after {took:?}"),
                }
                assert!(
                    took < DEADLINE * 4 + SLACK,
                    "write {id} answered after {took:?}"
                );
            }
            (acked, refused)
        }
    });
    let peer = tokio::spawn(restarting_peer(ws.clone(), room, stop_rx));
    tokio::time::sleep(Duration::from_millis(700)).await;

    let restart = Instant::now();
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.restart();
        cluster
    })
    .await
    .expect("restart");
    let restarted = restart.elapsed();
    let back = Instant::now();
    let recovery = until_a_write_succeeds(&http, room, "after-restart").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop_tx.send(true).expect("stop");
    let (mut acked, refused) = rest.await.expect("rest writer");
    let (_peer_state, peer_wrote, closes) = peer.await.expect("peer");
    acked.insert("after-restart".into());
    eprintln!(
        "pg restart: took {restarted:?}; {} REST writes acknowledged, {} refused {:?}; the peer \
         wrote {} shapes, closed {closes:?}; writing back {recovery:?} after the cluster \
         accepted connections again ({:?} since)",
        acked.len(),
        refused.len(),
        refused,
        peer_wrote.len(),
        back.elapsed()
    );
    assert!(
        refused.iter().all(|e| e == "store_unavailable"),
        "refusals: {refused:?}"
    );
    assert!(
        closes.iter().all(|c| *c == Some(1011)),
        "the peer's closes: {closes:?}"
    );
    assert!(recovery < RECOVERY_GOAL, "recovery took {recovery:?}");
    let peer_ids: Vec<&str> = peer_wrote.iter().map(String::as_str).collect();
    assert_kept(&http, room, &acked, &peer_ids).await;
    // The peer's shapes reached the room (it sent them again after each close), and a client
    // that connects now converges on everything.
    let mut everything = acked.clone();
    everything.extend(peer_wrote.iter().cloned());
    let mut fresh = Client::connect(&ws, room).await;
    fresh
        .until("every acknowledged and every peer's shape", |c| {
            let ids: BTreeSet<String> = support::shape_ids(c).into_iter().collect();
            everything.is_subset(&ids)
        })
        .await;
    fresh.close().await;
    server.shutdown().await;
    drop(cluster);
}
