//! `fairyring bench --history-updates N`: what history costs and how fast a version
//! materialises (docs/benchmarks.md "History"), in process, on SQLite files in the temporary
//! directory. The workload is the sync bench's: 100 people, each moving its own shape (`x` and
//! a `sentAt` stamp per update), logged in commits of 8 as the committer logs a busy room, with
//! the committer's compaction rule (every `--compact-every` updates once they weigh a quarter of
//! the snapshot) and a checkpoint every `--history-checkpoint-every` updates.
//!
//! Reports (1) the store's bytes with history (every update with its time and actor,
//! checkpoints) against the same log with neither (no actor, no time, no checkpoint: the log
//! as it was written before history, none of it deleted), and (2) the time to materialise a
//! version through [`crate::history::service::History`] (store read, replay, the JSON of
//! every root) for random sequence numbers, and for the worst case: the update just before a
//! checkpoint. Touches no socket.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::json;
use yrs::{Any, Map, MapPrelim, Out, ReadTxn, StateVector, Transact, WriteTxn};

use super::stats::Histogram;
use crate::actor::Actor;
use crate::history::service::History;
use crate::ids::RoomName;
use crate::store::{Logged, Store};

/// People writing in the room.
const PEOPLE: usize = 100;
/// Updates per commit.
const COMMIT: usize = 8;
/// Versions materialised at random.
const SAMPLES: usize = 60;

/// Settings of the run.
pub struct HistoryBench {
    /// Updates logged.
    pub updates: usize,
    /// Compaction rule (`--compact-every`).
    pub compact_every: u64,
    /// Checkpoint spacing (`--history-checkpoint-every`).
    pub checkpoint_every: u64,
}

/// Logs the workload into a fresh SQLite store at `path`; with `attributed`, every update with
/// its actor and time and checkpoints kept (taken as a room's committer takes them), else
/// neither. Returns the store, still open, and the time spent taking checkpoints.
async fn fill(
    path: &std::path::Path,
    room: &RoomName,
    settings: &HistoryBench,
    attributed: bool,
) -> anyhow::Result<(Arc<dyn Store>, Duration)> {
    let mut checkpointing = Duration::ZERO;
    let mut checkpoint_from = 0;
    let store = crate::store::open(&format!("sqlite:{}", path.display())).await?;
    let server = yrs::Doc::with_client_id(1);
    let people: Vec<yrs::Doc> = (0..PEOPLE)
        .map(|i| yrs::Doc::with_client_id(1000 + i as u64))
        .collect();
    let actors: Vec<Arc<str>> = (0..PEOPLE)
        .map(|i| Actor::user(format!("user-{i}"), Some(format!("Person {i}"))).to_json())
        .collect();
    let (mut since, mut bytes_since, mut snapshot_bytes) = (0u64, 0u64, 0u64);
    let mut batch = Vec::with_capacity(COMMIT);
    let started = crate::store::now_millis();
    for n in 0..settings.updates {
        let who = n % PEOPLE;
        let doc = &people[who];
        let id = format!("shape-{who}");
        let update = {
            let mut txn = doc.transact_mut();
            let shapes = txn.get_or_insert_map("shapes");
            let shape = match shapes.get(&txn, &id) {
                Some(Out::YMap(shape)) => shape,
                _ => shapes.insert(
                    &mut txn,
                    id.as_str(),
                    MapPrelim::from([
                        ("id", Any::from(id.as_str())),
                        ("type", Any::from("rectangle")),
                        ("y", Any::from(who as f64 * 50.0)),
                    ]),
                ),
            };
            shape.insert(&mut txn, "x", (n % 1000) as f64);
            shape.insert(&mut txn, "sentAt", format!("{who}:{n}"));
            txn.encode_update_v1()
        };
        {
            let mut txn = server.transact_mut();
            if let Ok(decoded) = <yrs::Update as yrs::updates::decoder::Decode>::decode_v1(&update)
            {
                txn.apply_update(decoded)?;
            }
        }
        bytes_since += update.len() as u64;
        since += 1;
        batch.push(Logged {
            update: Bytes::from(update),
            actor: attributed.then(|| actors[who].clone()),
            at: started + n as u64,
        });
        if batch.len() == COMMIT || n + 1 == settings.updates {
            let last = store
                .append_logged(room, std::mem::take(&mut batch))
                .await?;
            let every = settings.checkpoint_every;
            if attributed && every > 0 && last >= checkpoint_from + every {
                let started = Instant::now();
                checkpoint_from = crate::history::checkpoint::take(&store, room, last, every).await;
                checkpointing += started.elapsed();
            }
            if crate::room::compaction_rule(
                since,
                bytes_since,
                snapshot_bytes,
                settings.compact_every,
            ) {
                let snapshot = server
                    .transact()
                    .encode_state_as_update_v1(&StateVector::default());
                snapshot_bytes = snapshot.len() as u64;
                store.compact(room, snapshot.into(), last).await?;
                (since, bytes_since) = (0, 0);
            }
        }
    }
    Ok((store, checkpointing))
}

/// Bytes of a SQLite database (its file and any write-ahead log left).
fn file_bytes(path: &std::path::Path) -> u64 {
    let wal = path.with_extension("db-wal");
    [path.to_path_buf(), wal]
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

/// A small deterministic generator for the sequence numbers sampled.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Runs the measurement and prints its report.
pub async fn run(settings: HistoryBench, json_out: bool) -> anyhow::Result<()> {
    anyhow::ensure!(
        settings.updates >= 100,
        "--history-updates must be at least 100"
    );
    let dir = std::env::temp_dir().join(format!("fairyring-history-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let outcome = measure(settings, &dir, json_out).await;
    if std::env::var_os("FAIRYRING_BENCH_KEEP").is_some() {
        eprintln!("kept {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    outcome
}

async fn measure(
    settings: HistoryBench,
    dir: &std::path::Path,
    json_out: bool,
) -> anyhow::Result<()> {
    let room = RoomName::parse("history-bench")?;
    let plain_path = dir.join("plain.db");
    let (plain, _) = fill(&plain_path, &room, &settings, false).await?;
    plain.close().await;
    drop(plain);
    let path = dir.join("history.db");
    let (store, checkpointing) = fill(&path, &room, &settings, true).await?;
    let history = History::new(store.clone());
    let last = settings.updates as u64;
    let mut samples = Histogram::default();
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut json_bytes = 0usize;
    // Where a version's time goes: the store read, the replay, the JSON (summed over samples).
    let (mut read, mut replayed, mut converted) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for _ in 0..SAMPLES {
        let seq = 1 + next_random(&mut rng) % last;
        let started = Instant::now();
        let replay = history.version(&room, seq).await?;
        let doc = replay.replay.to_json();
        samples.record(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
        json_bytes = json_bytes.max(serde_json::to_vec(&doc).map_or(0, |v| v.len()));
        let t0 = Instant::now();
        let stored = store
            .load_version(&room, seq)
            .await?
            .ok_or_else(|| anyhow::anyhow!("version {seq} not kept"))?;
        let t1 = Instant::now();
        let replay = crate::history::service::version_of(&stored)?;
        let t2 = Instant::now();
        let _ = replay.to_json();
        read += t1 - t0;
        replayed += t2 - t1;
        converted += t2.elapsed();
    }
    // The worst case: just before a checkpoint, the farthest from the one before it.
    let mut worst = Duration::ZERO;
    let mut worst_seq = 0;
    let every = settings.checkpoint_every.max(1);
    let mut seq = every.saturating_sub(1).max(1);
    while seq <= last {
        let started = Instant::now();
        let replay = history.version(&room, seq).await?;
        let _ = replay.replay.to_json();
        let took = started.elapsed();
        if took > worst {
            (worst, worst_seq) = (took, seq);
        }
        seq += every;
    }
    store.close().await;
    drop(history);
    drop(store);
    let (with, without) = (file_bytes(&path), file_bytes(&plain_path));
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let q = |q: f64| samples.quantile(q).unwrap_or(0) as f64 / 1000.0;
    let max = q(1.0);
    let report = json!({
        "updates": settings.updates,
        "people": PEOPLE,
        "compact_every": settings.compact_every,
        "checkpoint_every": settings.checkpoint_every,
        "store_bytes_with_history": with,
        "store_bytes_log_only": without,
        "history_overhead": (with as f64 / without.max(1) as f64) - 1.0,
        "version_ms": {
            "samples": samples.count(),
            "p50": q(0.5),
            "p99": q(0.99),
            "max": max,
        },
        "worst_version": {"seq": worst_seq, "ms": ms(worst)},
        "version_json_bytes": json_bytes,
        "checkpoints_ms_total": ms(checkpointing),
        "version_parts_ms_mean": {
            "store_read": ms(read) / SAMPLES as f64,
            "replay": ms(replayed) / SAMPLES as f64,
            "json": ms(converted) / SAMPLES as f64,
        },
    });
    if json_out {
        println!("{report}");
    } else {
        println!(
            "history: {} updates by {PEOPLE} people, compact every {}, checkpoint every {}\n  \
             store: {:.1} MiB with history, {:.1} MiB log only (+{:.1} %)\n  \
             version (store read + replay + JSON): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; \
             worst (update {worst_seq}, before a checkpoint) {:.1} ms\n  \
             mean parts: store read {:.1} ms, replay {:.1} ms, JSON {:.1} ms\n  \
             taking checkpoints: {:.0} ms in all",
            settings.updates,
            settings.compact_every,
            settings.checkpoint_every,
            with as f64 / 1_048_576.0,
            without as f64 / 1_048_576.0,
            ((with as f64 / without.max(1) as f64) - 1.0) * 100.0,
            q(0.5),
            q(0.99),
            max,
            ms(worst),
            ms(read) / SAMPLES as f64,
            ms(replayed) / SAMPLES as f64,
            ms(converted) / SAMPLES as f64,
            ms(checkpointing),
        );
    }
    Ok(())
}
