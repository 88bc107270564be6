//! Signed webhooks end to end (docs/webhooks.md): the real server on 127.0.0.1:0, real y-sync
//! clients, and a real HTTP receiver (axum on 127.0.0.1:0) that answers as each test scripts
//! it. Every wait awaits an event (or a store state); retries are made fast with the hidden
//! `--webhook-backoff-ms`.

use crate::support;
use crate::support::server::TestServer;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use fairyring::config::ServeConfig;
use fairyring::server;
use fairyring::store::Store;
use fairyring::store::outbox::OutboxEvent;
use fairyring::webhooks::signing;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;
use sha2::Sha256;
use support::Client;
use support::fairy_http::{invite, prompt};
use tokio::sync::mpsc;

const SECRET: &str = "whsec_test-secret";
/// Longest wait for one delivery.
const WAIT: Duration = Duration::from_secs(30);

/// One POST the receiver got.
#[derive(Debug)]
struct Received {
    id_header: String,
    signature: String,
    body: Bytes,
    json: Value,
    at: Instant,
}

/// The test's webhook receiver: answers each POST with the next scripted status (200 once
/// the script is used up) and hands every POST to the test.
struct Receiver {
    addr: SocketAddr,
    got: mpsc::UnboundedReceiver<Received>,
    answers: Arc<Mutex<VecDeque<u16>>>,
    stop: tokio_util::sync::CancellationToken,
}

#[derive(Clone)]
struct Hook {
    answers: Arc<Mutex<VecDeque<u16>>>,
    got: mpsc::UnboundedSender<Received>,
}

async fn hook(State(hook): State<Hook>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let received = Received {
        id_header: header(signing::EVENT_ID_HEADER),
        signature: header(signing::SIGNATURE_HEADER),
        json: serde_json::from_slice(&body).unwrap_or(Value::Null),
        body,
        at: Instant::now(),
    };
    let status = hook.answers.lock().unwrap().pop_front().unwrap_or(200);
    let _ = hook.got.send(received);
    StatusCode::from_u16(status).unwrap()
}

impl Receiver {
    /// A receiver on a free loopback port.
    async fn start(answers: &[u16]) -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::on(listener, answers)
    }

    /// A receiver on `listener`.
    fn on(listener: tokio::net::TcpListener, answers: &[u16]) -> Receiver {
        let addr = listener.local_addr().unwrap();
        let (tx, got) = mpsc::unbounded_channel();
        let answers = Arc::new(Mutex::new(answers.iter().copied().collect()));
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(hook))
            .with_state(Hook {
                answers: Arc::clone(&answers),
                got: tx,
            });
        let stop = tokio_util::sync::CancellationToken::new();
        let until = stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(until.cancelled_owned())
                .await
                .unwrap();
        });
        Receiver {
            addr,
            got,
            answers,
            stop,
        }
    }

    fn url(&self) -> String {
        url_at(self.addr)
    }

    /// The next POST.
    async fn next(&mut self) -> Received {
        tokio::time::timeout(WAIT, self.got.recv())
            .await
            .expect("a webhook in time")
            .expect("receiver running")
    }

    /// The next POST of event type `kind` (others are skipped).
    async fn next_of(&mut self, kind: &str) -> Received {
        loop {
            let received = self.next().await;
            if received.json["type"] == kind {
                return received;
            }
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn url_at(addr: SocketAddr) -> String {
    format!("http://{addr}/hook")
}

/// The test server's configuration with webhooks to `url`: fast retries.
fn config(url: &str, debounce_ms: u64) -> ServeConfig {
    let mut config = ServeConfig::for_test();
    config.webhook_url = Some(url.to_owned());
    config.webhook_secret = Some(SECRET.to_owned());
    config.webhook_debounce_ms = debounce_ms;
    config.webhook_backoff_ms = 20;
    config
}

/// Checks a signature the way a receiver would, without the server's code: HMAC-SHA256 of
/// `"{t}.{body}"` in hex.
fn assert_signed(received: &Received) {
    let (t, v1) = received.signature.split_once(',').expect("t=…,v1=…");
    let t = t.strip_prefix("t=").expect("t=");
    let v1 = v1.strip_prefix("v1=").expect("v1=");
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{t}.").as_bytes());
    mac.update(&received.body);
    assert_eq!(hex::encode(mac.finalize().into_bytes()), v1, "signature");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(now.abs_diff(t.parse().unwrap()) < 60, "a current timestamp");
    assert_eq!(
        signing::verify(
            SECRET.as_bytes(),
            &received.signature,
            &received.body,
            now,
            300
        ),
        Ok(())
    );
    assert_eq!(received.id_header, received.json["id"].as_str().unwrap());
}

/// One update: a shape `key` added.
async fn edit_once(client: &mut Client, key: &str) {
    client.edit(|txn| support::put_shape(txn, key, 1.0)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn room_updated_is_signed_and_names_its_writer() {
    let mut receiver = Receiver::start(&[]).await;
    let server = TestServer::start(config(&receiver.url(), 100)).await.handle;
    let mut client = Client::connect(&format!("ws://{}", server.addr()), "signed").await;
    edit_once(&mut client, "a").await;
    let got = receiver.next_of("room.updated").await;
    assert_signed(&got);
    let event = &got.json;
    assert_eq!(event["room"], "signed");
    assert!(event["id"].as_str().unwrap().starts_with("evt_"));
    assert!(event["at"].as_u64().unwrap() > 1_600_000_000_000);
    let (from, to) = (
        event["fromSeq"].as_u64().unwrap(),
        event["toSeq"].as_u64().unwrap(),
    );
    assert!(from >= 1 && to >= from, "{event}");
    let actors = event["actors"].as_array().unwrap();
    assert!(
        actors.iter().any(|a| a["kind"] == "user"),
        "the peer is named: {event}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_answering_500_twice_gets_the_event_a_third_time_with_the_same_id() {
    let mut receiver = Receiver::start(&[500, 500]).await;
    let server = TestServer::start(config(&receiver.url(), 50)).await.handle;
    let mut client = Client::connect(&format!("ws://{}", server.addr()), "retried").await;
    edit_once(&mut client, "a").await;
    let first = receiver.next().await;
    let second = receiver.next().await;
    let third = receiver.next().await;
    for attempt in [&first, &second, &third] {
        assert_signed(attempt);
        assert_eq!(attempt.body, first.body, "the same event, byte for byte");
    }
    assert_eq!(first.id_header, third.id_header);
    assert!(receiver.answers.lock().unwrap().is_empty());
    // Retried after a backoff: never at once.
    assert!(second.at.duration_since(first.at) >= Duration::from_millis(10));
    let metrics = support::metrics_text(&format!("http://{}", server.addr())).await;
    assert!(
        metrics.contains("fairyring_webhook_deliveries_total{reason=\"retry\"}")
            && metrics.contains("fairyring_webhook_deliveries_total{reason=\"ok\"}"),
        "{metrics}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debounce_coalesces_100_updates_into_one_event() {
    let mut receiver = Receiver::start(&[]).await;
    // Far longer than 100 updates take to send, even on a loaded machine.
    let server = TestServer::start(config(&receiver.url(), 1500))
        .await
        .handle;
    let ws = format!("ws://{}", server.addr());
    let mut writer = Client::connect(&ws, "busy").await;
    let mut watcher = Client::connect(&ws, "busy").await;
    for i in 0..100 {
        edit_once(&mut writer, &format!("k{i}")).await;
    }
    watcher
        .until("all 100 updates", |c| support::shape_count(c) == 100)
        .await;
    let event = receiver.next_of("room.updated").await.json;
    let (from, to) = (
        event["fromSeq"].as_u64().unwrap(),
        event["toSeq"].as_u64().unwrap(),
    );
    assert!(to - from + 1 >= 100, "one event covers all 100: {event}");
    // The next event starts right after it: there was no other one in between.
    edit_once(&mut writer, "after").await;
    let next = receiver.next_of("room.updated").await.json;
    assert_eq!(next["fromSeq"].as_u64().unwrap(), to + 1, "{next}");
    assert_eq!(next["toSeq"].as_u64().unwrap(), to + 1, "{next}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_down_across_a_restart_still_gets_the_event_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("outbox.db");
    let (addr, mut tries, down) = down_receiver().await;
    let mut config = config(&url_at(addr), 50);
    config.store = format!("sqlite:{}", db.display());
    let server = TestServer::start(config.clone()).await.handle;
    let mut client = Client::connect(&format!("ws://{}", server.addr()), "down").await;
    edit_once(&mut client, "a").await;
    for _ in 0..2 {
        tokio::time::timeout(WAIT, tries.recv())
            .await
            .expect("an attempt")
            .expect("the down receiver runs");
    }
    down.abort();
    let _ = down.await;
    client.close().await;
    server.shutdown().await;
    assert_eq!(pending_in(&db).await, 1, "kept across the restart");
    // The receiver comes up on that port; the restarted server delivers.
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let mut receiver = Receiver::on(listener, &[]);
    let server = TestServer::start(config).await.handle;
    let got = receiver.next_of("room.updated").await;
    assert_signed(&got);
    assert_eq!(got.json["room"], "down");
    server.shutdown().await;
    assert_eq!(pending_in(&db).await, 0, "delivered: gone");
}

/// A receiver that is down: it accepts and at once drops every connection (telling the test
/// that a server tried); aborting its task stops it listening at all.
async fn down_receiver() -> (
    SocketAddr,
    mpsc::UnboundedReceiver<()>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tried, tries) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            drop(socket);
            let _ = tried.send(());
        }
    });
    (addr, tries, task)
}

/// Events waiting in the outbox of the SQLite file `db` (no server running on it).
async fn pending_in(db: &std::path::Path) -> u64 {
    let store = fairyring::store::open(&format!("sqlite:{}", db.display()))
        .await
        .unwrap();
    let pending = store.outbox().pending().await.unwrap();
    store.close().await;
    pending
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_is_dead_lettered_after_its_last_attempt() {
    let mut receiver = Receiver::start(&[500; 20]).await;
    let mut config = config(&receiver.url(), 50);
    config.webhook_max_attempts = 3;
    let store = fairyring::store::open("memory:").await.unwrap();
    let server = TestServer::builder(config)
        .on(store.clone())
        .start()
        .await
        .handle;
    let mut client = Client::connect(&format!("ws://{}", server.addr()), "dead").await;
    edit_once(&mut client, "a").await;
    let first = receiver.next().await;
    for _ in 0..2 {
        assert_eq!(receiver.next().await.id_header, first.id_header);
    }
    wait_for("the dead letter", || async {
        !store.outbox().dead_letters(10).await.unwrap().is_empty()
    })
    .await;
    let dead = store.outbox().dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].id, first.id_header);
    assert_eq!(dead[0].attempts, 3);
    assert!(dead[0].error.contains("500"), "{:?}", dead[0].error);
    assert_eq!(store.outbox().pending().await.unwrap(), 0);
    let metrics = support::metrics_text(&format!("http://{}", server.addr())).await;
    assert!(
        metrics.contains("fairyring_webhook_deliveries_total{reason=\"dead\"}"),
        "{metrics}"
    );
    // No fourth attempt: the next POST the receiver sees is a later event's.
    edit_once(&mut client, "b").await;
    let later = receiver.next().await;
    assert_ne!(later.id_header, first.id_header);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offline_fairy_request_reports_its_end() {
    let mut receiver = Receiver::start(&[]).await;
    let server = TestServer::start(config(&receiver.url(), 100)).await.handle;
    let http = format!("http://{}", server.addr());
    let _watcher = Client::connect(&format!("ws://{}", server.addr()), "fairyhook").await;
    let id = invite(&http, "fairyhook", "Pip").await;
    prompt(&http, "fairyhook", &id, "draw a house").await;
    let got = receiver.next_of("fairy.request.ended").await;
    assert_signed(&got);
    let event = &got.json;
    assert_eq!(event["room"], "fairyhook");
    assert_eq!(event["fairyId"], id.as_str());
    assert_eq!(event["reason"], "done", "{event}");
    assert!(!event["requestId"].as_str().unwrap().is_empty());
    assert!(event["usage"]["calls"].as_u64().unwrap() >= 1, "{event}");
    assert!(event["usage"]["outputTokens"].is_u64(), "{event}");
    // What the fairy drew is reported too, as the fairy's.
    loop {
        let updated = receiver.next_of("room.updated").await.json;
        if updated["actors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["kind"] == "fairy" && a["id"] == id.as_str())
        {
            break;
        }
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disbanded_project_reports_its_end() {
    let mut receiver = Receiver::start(&[]).await;
    let server = TestServer::start(config(&receiver.url(), 100)).await.handle;
    let http = format!("http://{}", server.addr());
    let _watcher = Client::connect(&format!("ws://{}", server.addr()), "together").await;
    let one = invite(&http, "together", "Orla").await;
    let two = invite(&http, "together", "Dart").await;
    let (status, started) = support::fairy_http::post(
        &format!("{http}/rooms/together/group-prompt"),
        serde_json::json!({"message": "two boxes", "fairyIds": [one, two],
               "bounds": {"x": 0, "y": 0, "w": 800, "h": 400}}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let project = started["projectId"].as_str().expect("projectId").to_owned();
    // Disbanded (or, if the offline model got there first, ended by its orchestrator).
    let _ = reqwest::Client::new()
        .delete(format!("{http}/rooms/together/projects/{project}"))
        .send()
        .await
        .unwrap();
    let got = receiver.next_of("project.ended").await;
    assert_signed(&got);
    assert_eq!(got.json["projectId"], project.as_str(), "{}", got.json);
    assert_eq!(got.json["room"], "together");
    assert!(
        ["aborted", "done"].contains(&got.json["status"].as_str().unwrap()),
        "{}",
        got.json
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_webhook_nothing_is_recorded() {
    let store = fairyring::store::open("memory:").await.unwrap();
    let server = TestServer::builder(ServeConfig::for_test())
        .on(store.clone())
        .start()
        .await
        .handle;
    let ws = format!("ws://{}", server.addr());
    let mut writer = Client::connect(&ws, "quiet").await;
    let mut watcher = Client::connect(&ws, "quiet").await;
    edit_once(&mut writer, "a").await;
    watcher
        .until("the update", |c| support::shape_count(c) == 1)
        .await;
    server.shutdown().await;
    assert_eq!(store.outbox().pending().await.unwrap(), 0);
    assert!(store.outbox().dead_letters(1).await.unwrap().is_empty());
}

#[tokio::test]
async fn only_signed_http_webhooks_are_accepted() {
    for (url, secret) in [
        ("ftp://127.0.0.1/hook", Some(SECRET)),
        ("file:///etc/passwd", Some(SECRET)),
        ("not a url", Some(SECRET)),
        ("http://127.0.0.1:9/hook", None),
        ("http://127.0.0.1:9/hook", Some("")),
    ] {
        let mut config = ServeConfig::for_test();
        config.webhook_url = Some(url.to_owned());
        config.webhook_secret = secret.map(str::to_owned);
        let refused = server::start(config).await;
        assert!(refused.is_err(), "{url} {secret:?} must be refused");
    }
    let mut config = ServeConfig::for_test();
    config.webhook_url = Some("https://127.0.0.1:9/hook".to_owned());
    config.webhook_secret = Some(SECRET.to_owned());
    TestServer::start(config).await.handle.shutdown().await;
}

/// Scaled out: several nodes claim from one PostgreSQL outbox at once; each event is claimed
/// by exactly one of them while its lease runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_sharing_a_postgres_outbox_claim_each_event_once() {
    let Some(pg) = support::services::PgSchema::fresh("hooks").await else {
        return;
    };
    let one = fairyring::store::open_in(&pg.url, Some(&pg.schema))
        .await
        .unwrap();
    let two = fairyring::store::open_in(&pg.url, Some(&pg.schema))
        .await
        .unwrap();
    for i in 0..200u64 {
        one.outbox()
            .push(OutboxEvent {
                id: format!("evt_{i:04}"),
                body: Bytes::from_static(b"{}"),
                created_at: 1_000 + i,
            })
            .await
            .unwrap();
    }
    let claim_all = |store: Arc<dyn Store>| async move {
        let mut ids = Vec::new();
        loop {
            let claimed = store.outbox().claim(10_000, 70_000, 7).await.unwrap();
            if claimed.is_empty() {
                return ids;
            }
            ids.extend(claimed.into_iter().map(|c| c.id));
        }
    };
    let (a, b) = tokio::join!(
        tokio::spawn(claim_all(one.clone())),
        tokio::spawn(claim_all(two.clone()))
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let mut all: Vec<&String> = a.iter().chain(&b).collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 200, "every event claimed");
    assert_eq!(a.len() + b.len(), 200, "none claimed twice");
    // After the lease, an undelivered event is another node's to send.
    assert_eq!(
        two.outbox()
            .claim(70_000, 130_000, 500)
            .await
            .unwrap()
            .len(),
        200
    );
    one.close().await;
    two.close().await;
    drop_schema(&pg).await;
}

/// Scaled out: an event one node recorded (and failed to deliver) is delivered by another node
/// sharing the PostgreSQL outbox once the first is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_recorded_on_one_node_is_delivered_by_another() {
    let Some(pg) = support::services::PgSchema::fresh("hooks2").await else {
        return;
    };
    let (down_addr, mut tries, down) = down_receiver().await;
    let mut receiver = Receiver::start(&[]).await;
    let node = |url: String| {
        let mut config = config(&url, 50);
        config.store = pg.url.clone();
        config.store_schema = Some(pg.schema.clone());
        config
    };
    let a = TestServer::start(node(url_at(down_addr))).await.handle;
    let b = TestServer::start(node(receiver.url())).await.handle;
    let mut client = Client::connect(&format!("ws://{}", a.addr()), "shared").await;
    edit_once(&mut client, "a").await;
    tokio::time::timeout(WAIT, tries.recv())
        .await
        .expect("node a tried")
        .expect("the down receiver runs");
    client.close().await;
    a.shutdown().await;
    down.abort();
    let got = receiver.next_of("room.updated").await;
    assert_signed(&got);
    assert_eq!(got.json["room"], "shared");
    b.shutdown().await;
    drop_schema(&pg).await;
}

async fn drop_schema(pg: &support::services::PgSchema) {
    if let Ok(pool) = sqlx::PgPool::connect(&pg.url).await {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", pg.schema);
        let _ = sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&pool).await;
        pool.close().await;
    }
}

/// Awaits a condition that has no event of its own (a store row, a metric), looking every
/// 20 ms, failing after [`WAIT`].
async fn wait_for<F, Fut>(what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + WAIT;
    while !condition().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Delivery latency after the debounce: for each of 50 rooms, the time from the last update's
/// send to the event's receipt, minus the debounce. Run with
/// `cargo test --release --test http webhooks::webhook_latency -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check"]
async fn webhook_latency_after_the_debounce() {
    const DEBOUNCE_MS: u64 = 1000;
    const EVENTS: usize = 50;
    let mut receiver = Receiver::start(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(&receiver.url(), DEBOUNCE_MS);
    config.store = format!("sqlite:{}", dir.path().join("latency.db").display());
    let server = TestServer::start(config).await.handle;
    let ws = format!("ws://{}", server.addr());
    let mut latencies = Vec::with_capacity(EVENTS);
    for i in 0..EVENTS {
        let room = format!("latency-{i}");
        let mut client = Client::connect(&ws, &room).await;
        for k in 0..5 {
            edit_once(&mut client, &format!("k{k}")).await;
        }
        let sent = Instant::now();
        let got = loop {
            let got = receiver.next_of("room.updated").await;
            if got.json["room"] == room.as_str() {
                break got;
            }
        };
        let after = got.at.duration_since(sent).as_secs_f64() * 1000.0 - DEBOUNCE_MS as f64;
        latencies.push(after);
        client.close().await;
    }
    latencies.sort_by(f64::total_cmp);
    let pick = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "webhook latency after a {DEBOUNCE_MS} ms debounce over {EVENTS} events (sqlite): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        pick(0.5),
        pick(0.99),
        latencies[latencies.len() - 1]
    );
    server.shutdown().await;
}

/// `fairyring_webhook_deliveries_total{reason}` in this process (the metrics are global).
fn deliveries(reason: &str) -> f64 {
    let name = format!("fairyring_webhook_deliveries_total{{reason=\"{reason}\"}}");
    fairyring::metrics::global()
        .render()
        .lines()
        .find_map(|line| line.strip_prefix(name.as_str()))
        .and_then(|rest| rest.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Issue 46: the outbox writer is under the store's deadline (`--store-timeout-ms`). A node
/// reaches PostgreSQL through a relay that stalls (connections open, nothing flows) just after
/// a write was acknowledged: the writer's pushes of that write's `room.updated` fail at the
/// deadline and, after their retries, the event is counted `dropped` within about 5 s, instead
/// of waiting on the stalled connection (before: the pool's 5 s acquire timeout per attempt, or
/// for as long as TCP takes on a connection in use: over 20 s). When the relay resumes, the
/// next write's event is recorded and delivered without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_store_does_not_hang_the_outbox_writer() {
    use support::relay::{Relay, address_of, through};
    const DEADLINE_MS: u64 = 500;
    const DEBOUNCE_MS: u64 = 1000;
    let Some(pg) = support::services::PgSchema::fresh("hookstall").await else {
        return;
    };
    let mut receiver = Receiver::start(&[]).await;
    let relay = Relay::start(address_of(&pg.url, 5432)).await;
    let mut config = config(&receiver.url(), DEBOUNCE_MS);
    config.store = through(&pg.url, relay.addr());
    config.store_schema = Some(pg.schema.clone());
    config.store_timeout_ms = DEADLINE_MS;
    let node = TestServer::start(config).await.handle;
    let http = format!("http://{}", node.addr());
    let create = |id: &'static str| {
        let url = format!("{http}/rooms/stall/shapes");
        async move {
            reqwest::Client::new()
                .patch(url)
                .timeout(Duration::from_secs(10))
                .json(&serde_json::json!({"create": [{"id": id, "type": "rectangle", "x": 1, "y": 2, "w": 3, "h": 4}]}))
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0)
        }
    };
    assert_eq!(create("a").await, 200);
    let dropped_before = deliveries("dropped");
    relay.pause();
    let paused = Instant::now();
    // Due a debounce after the write; four pushes at the deadline and 2.6 s of retry delays.
    let bound =
        Duration::from_millis(DEBOUNCE_MS + 4 * DEADLINE_MS + 2_600) + Duration::from_secs(3);
    loop {
        if deliveries("dropped") > dropped_before {
            break;
        }
        assert!(
            paused.elapsed() < bound,
            "the outbox writer still waits on the stalled store after {:?}",
            paused.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let gave_up = paused.elapsed();
    relay.resume();
    let resumed = Instant::now();
    let status = loop {
        let status = create("b").await;
        if status == 200 || resumed.elapsed() > Duration::from_secs(20) {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status, 200, "writing resumed");
    let event = receiver.next_of("room.updated").await;
    let back = event.at.duration_since(resumed);
    eprintln!(
        "outbox writer gave up {gave_up:?} after the stall began; after resume, the next event \
         delivered in {back:?} (of which the {DEBOUNCE_MS} ms debounce)"
    );
    assert_eq!(event.json["room"], "stall");
    node.shutdown().await;
    drop_schema(&pg).await;
}
