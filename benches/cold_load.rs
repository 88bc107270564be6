//! Cold load of a 50,000-shape room (≈ 13 MB) under criterion: the server time from a peer's
//! sync step 1 with an empty state vector to the frames that carry the whole document, right
//! after a reload and after a small edit, with the whole-document encoding every cold load
//! cost before as the reference. The same measurement without criterion:
//! `fairyring bench --cold-load 50000`.
//!
//! Run: `cargo bench --bench cold_load -- --warm-up-time 1 --measurement-time 5`.

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use fairyring::bench::cold;
use fairyring::ids::RoomName;
use fairyring::store::Store;

const SHAPES: usize = 50_000;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let store: Arc<dyn Store> = Arc::new(fairyring::store::memory::MemoryStore::default());
    let name = RoomName::parse("cold").expect("name");
    rt.block_on(cold::seed(store.clone(), &name, SHAPES))
        .expect("seed");
    let rooms = cold::rooms(store);
    let room = rt.block_on(rooms.get(&name)).expect("room");
    let mut group = c.benchmark_group("cold_load_50k");
    group.sample_size(10);
    let mut conn = 0u64;
    group.bench_function("after_reload", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                conn += 1;
                total += rt
                    .block_on(cold::cold_load_once(&room, conn))
                    .expect("cold load");
            }
            total
        })
    });
    group.bench_function("after_edit", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for i in 0..iters {
                rt.block_on(cold::small_edit(&room, i as f64));
                conn += 1;
                total += rt
                    .block_on(cold::cold_load_once(&room, conn))
                    .expect("cold load");
            }
            total
        })
    });
    group.bench_function("full_encode", |b| b.iter(|| cold::full_encode(&room).1));
    group.finish();
    drop(room);
    rt.block_on(rooms.shutdown());
}

criterion_group!(benches, bench);
criterion_main!(benches);
