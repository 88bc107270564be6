//! A stalled Redis (docs/operations.md "What happens when Redis stalls"): two nodes share
//! PostgreSQL and Redis, one of them reaches Redis through a test-owned relay that stops
//! forwarding without closing. Rooms degrade to catching up from the store: people on both
//! nodes still see each other's writes, people in a room of the stalled node that no other
//! node serves see no added latency, and the fast path comes back when the relay does.

use crate::support;
use crate::support::server::TestServer;

use std::time::{Duration, Instant};

use fairyring::config::ServeConfig;
use support::relay::{Relay, address_of, through};
use support::services::{PgSchema, redis_prefix, redis_url};
use support::{Client, put_shape, shape_x};

async fn node(
    pg: &PgSchema,
    redis: String,
    prefix: &str,
) -> (fairyring::server::ServerHandle, String) {
    let config = ServeConfig {
        store: pg.url.clone(),
        store_schema: Some(pg.schema.clone()),
        pubsub: Some(redis),
        pubsub_prefix: Some(prefix.to_owned()),
        // Calls to a stalled Redis fail after this (`--pubsub-timeout-ms`).
        pubsub_timeout_ms: 300,
        ..ServeConfig::for_test()
    };
    let server = TestServer::start(config).await;
    (server.handle, server.ws)
}

/// Edits shape `id` on `from` and waits until `to` sees it; how long that took.
async fn delivery(from: &mut Client, to: &mut Client, id: &str, x: f64) -> Duration {
    let started = Instant::now();
    from.edit(|txn| put_shape(txn, id, x)).await;
    to.until(id, |c| shape_x(&c.doc, id) == Some(x)).await;
    started.elapsed()
}

fn p99(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[(samples.len() * 99 / 100).min(samples.len() - 1)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_redis_degrades_to_store_catch_up() {
    let Some(pg) = PgSchema::fresh("redis_stall").await else {
        return;
    };
    let Some(prefix) = redis_prefix("stall").await else {
        return;
    };
    let relay = Relay::start(address_of(&redis_url(), 6379)).await;
    let (a, ws_a) = node(&pg, redis_url(), &prefix).await;
    let (b, ws_b) = node(&pg, through(&redis_url(), relay.addr()), &prefix).await;

    let mut on_a = Client::connect(&ws_a, "shared").await;
    let mut on_b = Client::connect(&ws_b, "shared").await;
    // A room only node B serves: its people never need Redis.
    let mut alone_1 = Client::connect(&ws_b, "alone").await;
    let mut alone_2 = Client::connect(&ws_b, "alone").await;
    let warm = delivery(&mut on_a, &mut on_b, "warm", 1.0).await;
    let mut before = Vec::new();
    for i in 0..40 {
        before.push(delivery(&mut alone_1, &mut alone_2, &format!("b{i}"), i as f64).await);
    }

    relay.pause();
    let a_to_b = delivery(&mut on_a, &mut on_b, "a-during", 2.0).await;
    let b_to_a = delivery(&mut on_b, &mut on_a, "b-during", 3.0).await;
    let mut during = Vec::new();
    for i in 0..40 {
        during.push(delivery(&mut alone_1, &mut alone_2, &format!("d{i}"), i as f64).await);
    }
    relay.resume();
    // The fast path comes back: a delivery well under the store's reconcile period.
    let resumed = Instant::now();
    let mut back = Duration::MAX;
    for i in 0..100 {
        let took = delivery(&mut on_a, &mut on_b, &format!("after-{i}"), 4.0).await;
        if took < Duration::from_millis(500) {
            back = resumed.elapsed();
            break;
        }
    }
    eprintln!(
        "redis stall: warm delivery {warm:?}; during the stall A->B {a_to_b:?}, B->A {b_to_a:?} \
         (store catch-up); a room of the stalled node alone: p99 {:?} before, {:?} during; \
         fast path back {back:?} after the relay resumed",
        p99(before.clone()),
        p99(during.clone())
    );
    assert!(
        a_to_b < Duration::from_secs(6),
        "A->B during the stall: {a_to_b:?}"
    );
    assert!(
        b_to_a < Duration::from_secs(6),
        "B->A during the stall: {b_to_a:?}"
    );
    assert!(
        p99(during) <= p99(before) + Duration::from_millis(100),
        "a room the stall does not concern saw added latency"
    );
    assert!(
        back < Duration::from_secs(5),
        "fast path back after {back:?}"
    );
    a.shutdown().await;
    b.shutdown().await;
}
