//! `fairyring bench --cold-load N`: the server time of a cold load in a room of N shapes — from
//! a peer's sync step 1 with an empty state vector to the frames that carry the whole document
//! (sync step 2, then the update that follows it when the room changed since its snapshot) —
//! measured in process through the room API, with an in-memory store. Cases: the room just
//! reloaded from its store; the same room after a small edit; and, for reference, the whole-doc
//! `encode_state_as_update_v1` that every cold load cost before the room kept its answer ready.
//! Also used by `benches/cold_load.rs` (criterion). Touches no socket.

use std::sync::Arc;
use std::time::{Duration, Instant};

use yrs::sync::{Message, SyncMessage};
use yrs::updates::encoder::Encode;
use yrs::{Any, Map, MapPrelim, Out, ReadTxn, StateVector, Transact, WriteTxn};

use crate::config::ServeConfig;
use crate::ids::RoomName;
use crate::room::{PeerInfo, Room, RoomConfig, Rooms};
use crate::store::Store;

/// Rooms over `store` that stay loaded for the whole run.
pub fn rooms(store: Arc<dyn Store>) -> Rooms {
    let mut config = RoomConfig::from_serve(&ServeConfig::for_test());
    config.idle_unload = Duration::from_secs(3600);
    Rooms::new(store, config, 16)
}

/// Fills room `name` with `shapes` tldraw-like shapes (≈ 260 bytes each encoded) in batches of
/// 1,000, then moves and deletes a few, and unloads it (flushed and compacted).
pub async fn seed(store: Arc<dyn Store>, name: &RoomName, shapes: usize) -> anyhow::Result<()> {
    let rooms = rooms(store);
    let room = rooms.get(name).await?;
    for batch in (0..shapes).step_by(1000) {
        {
            let mut txn = room.doc().transact_mut();
            let root = txn.get_or_insert_map("shapes");
            for n in batch..(batch + 1000).min(shapes) {
                let id = format!("shape:{n:08}");
                root.insert(
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
        }
        room.flushed().await;
    }
    // A mix after the bulk: moves and deletions.
    for n in (0..shapes).step_by(997) {
        {
            let mut txn = room.doc().transact_mut();
            let root = txn.get_or_insert_map("shapes");
            let id = format!("shape:{n:08}");
            if n % 2 == 0 {
                root.remove(&mut txn, id.as_str());
            } else if let Some(Out::YMap(shape)) = root.get(&txn, id.as_str()) {
                shape.insert(&mut txn, "x", 1.0);
            }
        }
        room.flushed().await;
    }
    drop(room);
    rooms.shutdown().await;
    Ok(())
}

/// One cold load: joins a peer, sends sync step 1 with an empty state vector and times until
/// the answer was delivered to the peer's queue.
pub async fn cold_load_once(room: &Arc<Room>, conn: u64) -> anyhow::Result<Duration> {
    let (peer, mut rx) = room.join(PeerInfo {
        conn,
        sub: "bench".into(),
        name: None,
        can_write: false,
    })?;
    room.flushed().await;
    while rx.try_recv().is_ok() {}
    let step1 = Message::Sync(SyncMessage::SyncStep1(StateVector::default())).encode_v1();
    let started = Instant::now();
    peer.handle(&step1).await?;
    room.flushed().await;
    let elapsed = started.elapsed();
    let mut got_step2 = false;
    while let Ok(frame) = rx.try_recv() {
        got_step2 |= frame.starts_with(&[0, 1]);
    }
    anyhow::ensure!(got_step2, "the peer received no sync step 2");
    Ok(elapsed)
}

/// A small edit (one shape's `y`), committed.
pub async fn small_edit(room: &Arc<Room>, value: f64) {
    {
        let mut txn = room.doc().transact_mut();
        let root = txn.get_or_insert_map("shapes");
        if let Some(Out::YMap(shape)) = root.get(&txn, "shape:00000001") {
            shape.insert(&mut txn, "y", value);
        }
    }
    room.flushed().await;
}

/// The old path's cost: a full encoding of the document.
pub fn full_encode(room: &Room) -> (Duration, usize) {
    let started = Instant::now();
    let len = room
        .doc()
        .transact()
        .encode_state_as_update_v1(&StateVector::default())
        .len();
    (started.elapsed(), len)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// Runs the cold-load benchmark for a room of `shapes` shapes and prints its report.
pub async fn run(shapes: usize, json: bool) -> anyhow::Result<()> {
    const ROUNDS: usize = 10;
    let store: Arc<dyn Store> = Arc::new(crate::store::memory::MemoryStore::default());
    let name = RoomName::parse("cold")?;
    let started = Instant::now();
    seed(store.clone(), &name, shapes).await?;
    let seeded = started.elapsed();
    let rooms = rooms(store);
    let started = Instant::now();
    let room = rooms.get(&name).await?;
    let loaded = started.elapsed();
    // `after_reload[0]` is the first cold load of the reloaded room; later ones follow an edit
    // and a cold load (the answer's tail is merged then and kept until the next edit).
    let mut after_reload = Vec::new();
    let mut after_edit = Vec::new();
    let mut full = Vec::new();
    let mut bytes = 0;
    let mut conn = 0;
    for round in 0..ROUNDS {
        conn += 1;
        after_reload.push(cold_load_once(&room, conn).await?);
        let (took, len) = full_encode(&room);
        full.push(took);
        bytes = len;
        small_edit(&room, round as f64).await;
        conn += 1;
        after_edit.push(cold_load_once(&room, conn).await?);
    }
    drop(room);
    rooms.shutdown().await;
    let report = serde_json::json!({
        "shapes": shapes,
        "document_bytes": bytes,
        "seed_seconds": seeded.as_secs_f64(),
        "room_load_ms": ms(loaded),
        "rounds": ROUNDS,
        "cold_load_ms": {
            "first_after_reload": ms(after_reload[0]),
            "repeat_no_change_median": ms(median(after_reload[1..].to_vec())),
            "after_edit_median": ms(median(after_edit.clone())),
            "after_edit_max": ms(after_edit.iter().copied().max().unwrap_or_default()),
        },
        "full_encode_ms_median": ms(median(full)),
    });
    if json {
        println!("{report}");
    } else {
        let c = &report["cold_load_ms"];
        let f = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
        println!("fairyring bench --cold-load {shapes}: document {bytes} bytes");
        println!("  room load from store  {:.1} ms", ms(loaded));
        println!(
            "  cold load ms          first after reload {:.2}  repeated {:.2}  after an edit {:.2} (max {:.2})",
            f(&c["first_after_reload"]),
            f(&c["repeat_no_change_median"]),
            f(&c["after_edit_median"]),
            f(&c["after_edit_max"])
        );
        println!(
            "  full encode ms        {:.2} (what every cold load cost before)",
            f(&report["full_encode_ms_median"])
        );
    }
    Ok(())
}
