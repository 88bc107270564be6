//! Cold load of a large room: the server time from a peer's sync step 1 with an empty state
//! vector to the frames that carry the whole document (sync step 2, and the update that
//! follows it when the room changed since its last snapshot).
//!
//! The room holds 50,000 shapes (≈ 13 MB encoded, like the room of issue 16). Cases:
//! - `after_reload`: the room was just loaded from its store (a snapshot and a log);
//! - `after_edit`: the loaded room then took one small update;
//! - `full_encode`: the old path for reference, `encode_state_as_update_v1` of the whole doc.
//!
//! Run: `cargo bench --bench cold_load -- --warm-up-time 1 --measurement-time 5`.
//! Owns nothing the server uses; drives a room through its public API only.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use fairyring::config::ServeConfig;
use fairyring::room::{PeerInfo, RoomConfig, RoomName, Rooms};
use fairyring::store::Store;
use tokio::runtime::Runtime;
use yrs::sync::{Message, SyncMessage};
use yrs::updates::encoder::Encode;
use yrs::{Any, Map, MapPrelim, ReadTxn, StateVector, Transact, WriteTxn};

const SHAPES: usize = 50_000;

fn rooms(store: Arc<dyn Store>) -> Rooms {
    let mut config = RoomConfig::from_serve(&ServeConfig::for_test());
    config.idle_unload = Duration::from_secs(3600);
    Rooms::new(store, config, 16)
}

/// Fills a room with `SHAPES` shapes in batches, then unloads it (flushed and compacted).
fn seed(rt: &Runtime, store: Arc<dyn Store>, name: &RoomName) {
    rt.block_on(async {
        let rooms = rooms(store);
        let room = rooms.get(name).await.expect("room");
        for batch in 0..(SHAPES / 1000) {
            let mut txn = room.doc().transact_mut();
            let shapes = txn.get_or_insert_map("shapes");
            for i in 0..1000 {
                let n = batch * 1000 + i;
                let id = format!("shape:{n:08}");
                shapes.insert(
                    &mut txn,
                    id.as_str(),
                    MapPrelim::from([
                        ("id", Any::from(id.as_str())),
                        ("type", Any::from("rectangle")),
                        ("parentId", Any::from("page:main")),
                        ("index", Any::from(format!("a{n:06}"))),
                        ("x", Any::from((n % 500) as f64 * 37.5)),
                        ("y", Any::from((n / 500) as f64 * 41.25)),
                        ("w", Any::from(120.0)),
                        ("h", Any::from(80.0)),
                        ("rotation", Any::from(0.0)),
                        ("color", Any::from("blue")),
                        ("fill", Any::from("semi")),
                        ("locked", Any::from(false)),
                        ("text", Any::from(format!("shape number {n}, a note"))),
                    ]),
                );
            }
            drop(txn);
            room.flushed().await;
        }
        // A mix after the bulk: moves and deletions land in the log after the last snapshot.
        for n in (0..SHAPES).step_by(997) {
            let mut txn = room.doc().transact_mut();
            let shapes = txn.get_or_insert_map("shapes");
            let id = format!("shape:{n:08}");
            if n % 2 == 0 {
                shapes.remove(&mut txn, id.as_str());
            } else if let Some(yrs::Out::YMap(shape)) = shapes.get(&txn, id.as_str()) {
                shape.insert(&mut txn, "x", 1.0);
            }
        }
        drop(room);
        rooms.shutdown().await;
    });
}

/// Joins a peer, sends an empty sync step 1 and times until the whole document was received.
async fn cold_load(room: &Arc<fairyring::room::Room>, conn: u64) -> Duration {
    let (peer, mut rx) = room
        .join(PeerInfo {
            conn,
            sub: "bench".into(),
            can_write: false,
        })
        .expect("join");
    room.flushed().await;
    while rx.try_recv().is_ok() {}
    let step1 = Message::Sync(SyncMessage::SyncStep1(StateVector::default())).encode_v1();
    let started = Instant::now();
    peer.handle(&step1).await.expect("step 1");
    room.flushed().await;
    let elapsed = started.elapsed();
    let mut got_step2 = false;
    while let Ok(frame) = rx.try_recv() {
        got_step2 |= frame.starts_with(&[0, 1]);
    }
    assert!(got_step2, "the peer received sync step 2");
    drop(peer);
    elapsed
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let store: Arc<dyn Store> = Arc::new(fairyring::store::memory::MemoryStore::default());
    let name = RoomName::parse("cold").expect("name");
    let seeded = Instant::now();
    seed(&rt, store.clone(), &name);
    let rooms = rooms(store);
    let loaded = Instant::now();
    let room = rt.block_on(rooms.get(&name)).expect("room");
    let encoded = room
        .doc()
        .transact()
        .encode_state_as_update_v1(&StateVector::default());
    eprintln!(
        "cold_load: {SHAPES} shapes seeded in {:.1} s; room loaded in {:.0} ms; document {} bytes",
        (loaded - seeded).as_secs_f64(),
        loaded.elapsed().as_secs_f64() * 1000.0,
        encoded.len()
    );
    let mut group = c.benchmark_group("cold_load_50k");
    group.sample_size(10);
    let mut conn = 0u64;
    group.bench_function("after_reload", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                conn += 1;
                total += rt.block_on(cold_load(&room, conn));
            }
            total
        })
    });
    group.bench_function("after_edit", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for i in 0..iters {
                {
                    let mut txn = room.doc().transact_mut();
                    let shapes = txn.get_or_insert_map("shapes");
                    if let Some(yrs::Out::YMap(shape)) = shapes.get(&txn, "shape:00000001") {
                        shape.insert(&mut txn, "y", i as f64);
                    }
                }
                rt.block_on(room.flushed());
                conn += 1;
                total += rt.block_on(cold_load(&room, conn));
            }
            total
        })
    });
    group.bench_function("full_encode", |b| {
        b.iter(|| {
            room.doc()
                .transact()
                .encode_state_as_update_v1(&StateVector::default())
                .len()
        })
    });
    group.finish();
    drop(room);
    rt.block_on(rooms.shutdown());
}

criterion_group!(benches, bench);
criterion_main!(benches);
