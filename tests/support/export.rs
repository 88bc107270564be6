//! Helpers of the export tests (issue 27): servers with a short render budget over a memory
//! store, shapes written as a hostile peer can, requests timed.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use fairyring::canvas::format::{ShapeBase, from_simple};
use fairyring::canvas::shape::{Shape, write_shape};
use fairyring::config::ServeConfig;
use fairyring::server::ServerHandle;
use fairyring::store::memory::MemoryStore;
use serde_json::{Value, json};
use yrs::{Map, WriteTxn};

use crate::support::server::TestServer;
use crate::support::{self, Client};

/// The render budget of these servers.
pub const BUDGET: Duration = Duration::from_millis(1000);
/// What an answer may take past the budget (the request, the response, a loaded test box).
pub const SLACK: Duration = Duration::from_millis(1500);

pub fn config() -> ServeConfig {
    ServeConfig {
        render_timeout_ms: BUDGET.as_millis() as u64,
        max_message_bytes: 16 * 1024 * 1024,
        idle_unload: 3600,
        ..ServeConfig::for_test()
    }
}

pub async fn start_with(config: ServeConfig) -> (ServerHandle, Arc<MemoryStore>, String) {
    let store = Arc::new(MemoryStore::default());
    let server = TestServer::builder(config).on(store.clone()).start().await;
    (server.handle, store, server.http)
}

pub fn shape(v: Value, i: usize) -> Shape {
    let base = ShapeBase {
        index: format!("a{i:06}"),
        ..ShapeBase::default()
    };
    from_simple(&v, &base).unwrap_or_else(|e| panic!("{v}: {e}"))
}

/// Writes `shapes`, then `raw` key/values straight into shape maps (what a hostile peer can
/// write, past the clamps of `write_shape`), and waits until a second client sees them all.
pub async fn write(
    server: &ServerHandle,
    room: &str,
    shapes: &[Shape],
    raw: &[(&str, &str, yrs::Any)],
) {
    let base = format!("ws://{}", server.addr());
    let mut writer = Client::connect(&base, room).await;
    writer
        .edit(|txn| {
            for s in shapes {
                write_shape(txn, s);
            }
            let root = txn.get_or_insert_map("shapes");
            for (id, key, value) in raw {
                if let Some(yrs::Out::YMap(map)) = root.get(txn, id) {
                    map.insert(txn, *key, value.clone());
                }
            }
        })
        .await;
    let mut reader = Client::connect(&base, room).await;
    let n = shapes.len() as u32;
    reader
        .until("every shape at a second client", |c| {
            support::shape_count(c) == n
        })
        .await;
}

pub async fn get(url: &str) -> (u16, Vec<u8>, Duration) {
    let started = Instant::now();
    let r = reqwest::get(url).await.expect("request");
    let status = r.status().as_u16();
    let body = r.bytes().await.expect("body").to_vec();
    (status, body, started.elapsed())
}

pub fn error_code(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    v["error"].as_str().unwrap_or("<not json>").to_owned()
}

/// A room whose whole-page PNG takes long to draw: many shapes with long labels at a scale
/// that keeps every glyph.
pub fn heavy_room() -> Vec<Shape> {
    (0..3000)
        .map(|i| {
            let (x, y) = ((i % 60) as f64 * 130.0, (i / 60) as f64 * 130.0);
            shape(
                json!({"_type": "text", "shapeId": format!("t{i}"), "x": x, "y": y,
                       "text": "lorem ipsum dolor sit amet ".repeat(40), "fontSize": 3, "maxWidth": 120}),
                i,
            )
        })
        .collect()
}
