//! Bounded reads through the real server (issue 27): hostile shapes answer within the render
//! budget and degrade rather than fail, abandoned renders stop, exports of a missing page do
//! not hold up another room, a read of a room never written creates and writes nothing, and
//! unknown routes and `--metrics-listen` answer as documented. Abandoned renders are in
//! `export_abandoned.rs` (it measures the process's CPU time: alone in a process of its own),
//! SIGTERM during a render in `export_shutdown.rs` (it needs the binary).

use crate::support;
use crate::support::server::TestServer;

use std::time::{Duration, Instant};

use crate::support::export::{BUDGET, SLACK, config, error_code, get, shape, start_with, write};
use fairyring::canvas::shape::{Shape, ShapeProps};
use fairyring::config::ServeConfig;
use fairyring::ids::RoomName;
use fairyring::store::Store;
use serde_json::{Value, json};
use support::Client;
use yrs::updates::decoder::Decode;
use yrs::{Map, ReadTxn, Transact};

/// A 950 KB text without spaces at fontSize 2000 (it used to burn a core for minutes).
fn long_text() -> Shape {
    let mut s = shape(
        json!({"_type": "text", "shapeId": "long", "x": 0, "y": 0, "text": "x", "fontSize": 24}),
        0,
    );
    s.props = ShapeProps::Text {
        text: "W".repeat(950_000),
        font_size: 2000.0,
        max_width: None,
        text_align: "middle".into(),
    };
    s
}

/// A 60,000-point pen stroke (it used to take 83 s).
fn long_stroke() -> Shape {
    let points: Vec<Value> = (0..60_000)
        .map(|k| json!({"x": (k % 600) as f64 * 3.0, "y": ((k * 37) % 1000) as f64}))
        .collect();
    shape(
        json!({"_type": "pen", "shapeId": "stroke", "x": 0, "y": 0, "points": points}),
        1,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_shapes_answer_within_the_budget() {
    let (server, _store, http) = start_with(config()).await;
    write(&server, "text", &[long_text()], &[]).await;
    write(&server, "stroke", &[long_stroke()], &[]).await;
    for room in ["text", "stroke"] {
        for query in [
            "export.png",
            "export.jpg",
            "export.svg",
            "export.png?x=-2000&y=-2000&w=4000&h=4000",
            "export.png?x=500000000&y=0&w=3000&h=2000",
        ] {
            let (status, body, took) = get(&format!("{http}/rooms/{room}/{query}")).await;
            assert!(
                status == 200 || (status == 503 && error_code(&body) == "render_timeout"),
                "{room} {query}: {status} {}",
                String::from_utf8_lossy(&body[..body.len().min(300)])
            );
            assert!(took < BUDGET + SLACK, "{room} {query} took {took:?}");
        }
        // The whole page, the default, is drawn (degraded, not refused).
        let (status, body, _) = get(&format!("{http}/rooms/{room}/export.png")).await;
        assert_eq!(status, 200, "{room}: {}", error_code(&body));
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_degrade_on_hostile_shapes() {
    let (server, _store, http) = start_with(config()).await;
    // Many lines: 20,000 of them used to pass the SVG parser's node limit (500 render_failed).
    let mut lines = shape(
        json!({"_type": "text", "shapeId": "lines", "x": 0, "y": 0, "text": "x", "fontSize": 4}),
        0,
    );
    lines.props = ShapeProps::Text {
        text: "a\n".repeat(200_000),
        font_size: 4.0,
        max_width: None,
        text_align: "start".into(),
    };
    let box_at = |id: &str, i| {
        shape(
            json!({"_type": "rectangle", "shapeId": id, "x": 0, "y": 0, "w": 100, "h": 50}),
            i,
        )
    };
    let shapes = [
        lines,
        box_at("far", 1),
        box_at("neg", 2),
        box_at("nan", 3),
        box_at("ok", 4),
    ];
    write(
        &server,
        "hostile",
        &shapes,
        &[
            // Bounds past f64: from -1e308 to 2e308, an infinite extent.
            ("far", "x", yrs::Any::from(1e308)),
            ("far", "w", yrs::Any::from(1e308)),
            ("neg", "x", yrs::Any::from(-1e308)),
            // Read as the default (a NaN is no number), drawn where that puts it.
            ("nan", "y", yrs::Any::from(f64::NAN)),
        ],
    )
    .await;
    for format in ["png", "jpg", "svg"] {
        let (status, body, _) = get(&format!("{http}/rooms/hostile/export.{format}")).await;
        assert_eq!(
            status,
            200,
            "{format}: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        );
    }
    server.shutdown().await;
}

/// A room of `n` shapes written in one update.
fn grid(n: usize) -> Vec<Shape> {
    (0..n)
        .map(|i| {
            let (x, y) = ((i % 200) as f64 * 150.0, (i / 200) as f64 * 150.0);
            shape(
                json!({"_type": "rectangle", "shapeId": format!("g{i}"), "x": x, "y": y, "w": 100, "h": 60, "text": "label"}),
                i,
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_of_a_missing_page_do_not_delay_another_room() {
    let (server, _store, http) = start_with(config()).await;
    write(&server, "big", &grid(20_000), &[]).await;
    let base = format!("ws://{}", server.addr());
    let mut a = Client::connect(&base, "other").await;
    let mut b = Client::connect(&base, "other").await;
    a.edit(|txn| support::put_shape(txn, "warm", 0.0)).await;
    b.until("warm-up", |c| support::shape_x(&c.doc, "warm").is_some())
        .await;
    let exports: Vec<_> = (0..20)
        .map(|_| {
            let url = format!("{http}/rooms/big/export.svg?page=page:nope");
            tokio::spawn(async move { get(&url).await })
        })
        .collect();
    let mut worst = Duration::ZERO;
    for i in 0..20 {
        let started = Instant::now();
        a.edit(|txn| support::put_shape(txn, "moving", i as f64))
            .await;
        b.until("the update", |c| {
            support::shape_x(&c.doc, "moving") == Some(i as f64)
        })
        .await;
        worst = worst.max(started.elapsed());
    }
    for export in exports {
        let (status, body, _) = export.await.expect("export task");
        assert!(
            status == 404 && error_code(&body) == "page_not_found"
                || status == 503 && error_code(&body) == "busy",
            "{status} {}",
            error_code(&body)
        );
    }
    assert!(
        worst < Duration::from_millis(250),
        "an update in another room took {worst:?} while exports ran"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_of_an_unknown_room_creates_and_writes_nothing() {
    let (server, store, http) = start_with(ServeConfig {
        max_rooms: 1,
        ..config()
    })
    .await;
    for i in 0..5 {
        let (status, body, _) = get(&format!("{http}/rooms/nobody{i}/export.png")).await;
        assert_eq!(
            (status, error_code(&body).as_str()),
            (404, "room_not_found")
        );
        let name = RoomName::parse(&format!("nobody{i}")).expect("name");
        assert!(server.rooms().get_loaded(&name).is_none(), "no room loaded");
        let stored = store.load(&name).await.expect("load");
        assert!(
            stored.snapshot.is_none() && stored.updates.is_empty(),
            "nothing stored for a read"
        );
    }
    // The reads took no place under --max-rooms 1: a real room still loads.
    let mut c = Client::connect(&format!("ws://{}", server.addr()), "real").await;
    c.edit(|txn| support::put_shape(txn, "s", 1.0)).await;
    let (status, body, _) = get(&format!("{http}/rooms/real/export.svg?x=0&y=0&w=10&h=10")).await;
    assert_eq!(status, 200, "{}", error_code(&body));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_of_an_unknown_room_stores_nothing_and_sees_the_same_schema_again() {
    let has_page = |c: &Client| {
        let txn = c.doc.transact();
        txn.get_map("pages")
            .is_some_and(|pages| pages.get(&txn, "page:main").is_some())
    };
    let name = RoomName::parse("visitor").expect("name");
    let (server, store, _http) = start_with(config()).await;
    let mut first = Client::connect(&format!("ws://{}", server.addr()), "visitor").await;
    first.until("the schema's page", has_page).await;
    let seen = first.state();
    first.close().await;
    server.shutdown().await;
    let stored = store.load(&name).await.expect("load");
    assert!(
        stored.snapshot.is_none() && stored.updates.is_empty(),
        "a join that wrote nothing stored {} updates",
        stored.updates.len()
    );

    // Loaded again, the room builds the very same schema (a returning peer's copy matches it),
    // and the first write stores it ahead of the write.
    let again = TestServer::builder(config())
        .on(store.clone())
        .start()
        .await
        .handle;
    let mut second = Client::connect(&format!("ws://{}", again.addr()), "visitor").await;
    second.until("the schema's page", has_page).await;
    assert_eq!(second.state(), seen, "the schema differs between two loads");
    second.edit(|txn| support::put_shape(txn, "s", 1.0)).await;
    second.close().await;
    again.shutdown().await;
    let stored = store.load(&name).await.expect("load");
    let doc = yrs::Doc::new();
    {
        let mut txn = doc.transact_mut();
        for u in stored.snapshot.iter().chain(stored.updates.iter()) {
            txn.apply_update(yrs::Update::decode_v1(u).expect("stored update"))
                .expect("apply");
        }
    }
    let txn = doc.transact();
    assert!(
        txn.get_map("pages")
            .is_some_and(|p| p.get(&txn, "page:main").is_some())
    );
    assert!(
        txn.get_map("shapes")
            .is_some_and(|s| s.get(&txn, "s").is_some())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_are_json_and_metrics_can_listen_apart() {
    let (server, _store, http) = start_with(config()).await;
    let (status, body, _) = get(&format!("{http}/no/such/route")).await;
    assert_eq!((status, error_code(&body).as_str()), (404, "not_found"));
    let (status, _, _) = get(&format!("{http}/metrics")).await;
    assert_eq!(
        status, 200,
        "without --metrics-listen, /metrics is on the main listener"
    );
    server.shutdown().await;

    let (server, _store, http) = start_with(ServeConfig {
        metrics_listen: Some(([127, 0, 0, 1], 0).into()),
        ..config()
    })
    .await;
    let (status, body, _) = get(&format!("{http}/metrics")).await;
    assert_eq!((status, error_code(&body).as_str()), (404, "not_found"));
    let metrics = server.metrics_addr().expect("metrics address");
    let (status, body, _) = get(&format!("http://{metrics}/metrics")).await;
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&body).contains("fairyring_connections"));
    server.shutdown().await;
}
