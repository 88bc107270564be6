//! `fairyring bench --soak MINUTES`: a long run of every kind of load against one server, with
//! the server sampled every `--soak-sample-secs` (10 s) for what leaks: RSS, open file
//! descriptors, threads, the store's size and people's p99. People (y-sync clients) reconnect
//! all the while (each connection lives `--soak-cycle-secs`, then closes and opens again),
//! fairies are prompted, a room is exported, history is read and shapes are written over REST.
//! At least 2 fairies and 1 export client run (more with `--fairies`, `--exports`).
//! Every `--soak-room-secs` (120 s) the load moves to fresh rooms (`ROOM-g1`, `ROOM-g2`, …):
//! people at their next connection, the fairies invited anew there (the old ones dismissed),
//! the exports, reads and writes at once; the old rooms unload. So the rooms stay of a bounded
//! size — a document only grows (tombstones stay), and fairies drawing all the while grew one
//! room to 50,000 shapes in 50 minutes — and what the RSS keeps growing by is what the server
//! keeps across rooms, which is what a soak looks for. After the load the run waits for the
//! rooms to unload and reports the settled RSS (the least of several samples).
//! When the time is up every load stops and the run fails (an error, so a non-zero exit) when
//! a check in [`verdict`] does not hold.
//!
//! Owns the soak's loads, samples and checks; reuses the bench's clients ([`super::client`]),
//! fairies, exports, histograms and `/proc` sampling, and touches nothing the server uses.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use yrs::{Doc, Map, MapPrelim, ReadTxn, Transact, WriteTxn};

use super::client::{Client, Shared, Signals};
use super::process::{self, Target};
use super::stats::Histogram;
use super::{exports, fairies, wire};

/// Flags of the soak (with `--clients`, `--rooms`, `--rate`, `--url`, `--server-pid`,
/// `--fairies`, `--exports` of the bench).
#[derive(Debug, Clone, Args)]
pub struct SoakArgs {
    /// Run a soak of this many minutes instead of the sync benchmark (see docs/operations.md
    /// "Soak"): exits non-zero when RSS, file descriptors, threads or people's p99 grow
    /// without bound.
    #[arg(long, env = "FAIRYRING_BENCH_SOAK")]
    pub soak: Option<f64>,
    /// Seconds between samples of the server.
    #[arg(long, default_value_t = 10.0, hide = true)]
    pub soak_sample_secs: f64,
    /// Seconds each person stays connected before closing and reconnecting.
    #[arg(long, default_value_t = 20.0)]
    pub soak_cycle_secs: f64,
    /// Largest RSS slope after the warm-up, in KiB per 10 minutes (1 MiB). Tests raise it for
    /// runs of seconds, where a slope says nothing.
    #[arg(long, default_value_t = 1024.0, hide = true)]
    pub soak_rss_limit_kib: f64,
    /// Largest ratio of people's p99 in the last part of the run to the first.
    #[arg(long, default_value_t = 1.2, hide = true)]
    pub soak_p99_ratio: f64,
    /// Seconds the load stays in one set of rooms before it moves to fresh ones (the old ones
    /// unload), so that no room grows for the whole run; 0: the same rooms all along.
    #[arg(long, env = "FAIRYRING_BENCH_SOAK_ROOM_SECS", default_value_t = 120.0)]
    pub soak_room_secs: f64,
}

/// Open file descriptors may end this many above their baseline (sockets in their last close).
const FD_SLACK: u64 = 4;
/// Threads may end this many above their baseline.
const TASK_SLACK: u64 = 2;
/// How long after the clients left the fds and threads may take to come back.
const RETURN_WAIT: Duration = Duration::from_secs(30);
/// The warm-up is this share of the run (at most [`WARMUP_MAX`]).
const WARMUP_SHARE: f64 = 0.2;
const WARMUP_MAX: f64 = 600.0;
/// The first and last parts whose p99 are compared: this share of the run after the warm-up,
/// at most ten minutes.
const PART_SHARE: f64 = 0.25;
const PART_MAX: f64 = 600.0;
/// Pause between two history reads / two REST writes of one loop.
const READ_EVERY: Duration = Duration::from_millis(500);
const WRITE_EVERY: Duration = Duration::from_millis(250);
/// Pause of each export client between two exports (a soak is not a saturation test).
const EXPORT_EVERY: Duration = Duration::from_secs(1);
/// After the load: how long the run waits for the server's rooms to unload, and how many
/// RSS samples a second apart it takes then (the least is reported: the allocator hands freed
/// pages back about a second after they are freed, later on a loaded machine).
const UNLOAD_WAIT: Duration = Duration::from_secs(60);
const SETTLED_SAMPLES: usize = 8;

/// The name of room `base` in generation `generation` of the run (see `--soak-room-secs`).
pub fn generation_room(base: &str, generation: u64) -> String {
    if generation == 0 {
        base.to_owned()
    } else {
        format!("{base}-g{generation}")
    }
}

/// The soak's rooms now: the base names and the generation the load is in.
#[derive(Clone)]
struct Rooms {
    bases: Arc<Vec<String>>,
    generation: Arc<AtomicU64>,
}

impl Rooms {
    /// Room `index`'s name in the current generation.
    fn now(&self, index: usize) -> String {
        generation_room(
            &self.bases[index % self.bases.len()],
            self.generation.load(Ordering::SeqCst),
        )
    }

    fn all(&self) -> Vec<String> {
        (0..self.bases.len()).map(|i| self.now(i)).collect()
    }
}

/// The server under soak: where it listens, its PID and the SQLite file whose size is sampled.
pub struct SoakServer {
    /// `ws://HOST:PORT` or a `{room}` template.
    pub url: String,
    /// The server's PID (needed: every check samples it).
    pub pid: u32,
    /// The SQLite database file, if the store is one the bench can see.
    pub sqlite: Option<std::path::PathBuf>,
}

/// What the people, fairies and exports share with [`super::BenchArgs`].
pub struct Load {
    pub clients: usize,
    pub rooms: usize,
    pub room: String,
    pub rate: f64,
    pub token: Option<String>,
    pub fairy: fairies::FairyArgs,
    pub export: exports::ExportArgs,
    pub json: bool,
}

/// One sample of the server.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Sample {
    /// Seconds since the load started.
    pub t: f64,
    pub rss_kib: Option<u64>,
    pub fds: Option<u64>,
    pub tasks: Option<u64>,
    pub store_bytes: Option<u64>,
    /// People's p99 over the sample's interval.
    pub p99_ms: Option<f64>,
    pub deliveries: u64,
}

/// The outcome of one check.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Check {
    pub name: &'static str,
    pub passed: bool,
    pub detail: String,
}

/// What the soak's checks need besides the samples.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub warmup_secs: f64,
    pub part_secs: f64,
    pub rss_kib_per_10min: f64,
    pub p99_ratio: f64,
    /// `--soak-room-secs` when the load moves to fresh rooms (see [`rss_points`]).
    pub generation_secs: Option<f64>,
}

/// The points the RSS slope is fitted to: every sample after the warm-up; or, when the load
/// moves to fresh rooms every `generation_secs`, one point per whole generation after the
/// warm-up, its samples' mean time and RSS. A room's RSS rises while it is used and drops when
/// it unloads: a line through every sample of such a sawtooth rises by itself (of amplitude
/// A over N whole periods of P seconds, about A / (N² P); 0.8 MiB per 10 minutes for 130 MiB
/// over 25 two-minute generations), while a generation's mean has the same share of every
/// phase, so the means rise only with what stays from one generation to the next. Fewer than
/// three whole generations after the warm-up: every sample after it, as without moving rooms.
pub fn rss_points(samples: &[Sample], limits: &Limits) -> Vec<(f64, f64)> {
    generation_points(samples, limits).unwrap_or_else(|| {
        samples
            .iter()
            .filter(|s| s.t >= limits.warmup_secs)
            .filter_map(|s| Some((s.t, s.rss_kib? as f64)))
            .collect()
    })
}

/// One point per whole generation after the warm-up ([`rss_points`]), or `None` when the rooms
/// do not move or fewer than three generations ran whole (the CI soak: 30 s and 2.5 min of
/// rooms that move every 2 minutes has no sawtooth to fit: its samples are fitted instead).
fn generation_points(samples: &[Sample], limits: &Limits) -> Option<Vec<(f64, f64)>> {
    let every = limits.generation_secs.filter(|g| *g > 0.0)?;
    let end = samples.last().map_or(0.0, |s| s.t);
    let mut generations = std::collections::BTreeMap::<u64, (f64, f64, f64)>::new();
    for s in samples.iter().filter(|s| s.t >= limits.warmup_secs) {
        let Some(rss) = s.rss_kib else { continue };
        let k = (s.t / every).floor();
        // Whole generations only: begun after the warm-up, ended by the last sample.
        if k * every + 1e-6 < limits.warmup_secs || (k + 1.0) * every > end + 1.0 {
            continue;
        }
        let sums = generations.entry(k as u64).or_insert((0.0, 0.0, 0.0));
        *sums = (sums.0 + s.t, sums.1 + rss as f64, sums.2 + 1.0);
    }
    (generations.len() >= 3).then(|| {
        generations
            .values()
            .map(|(t, rss, n)| (t / n, rss / n))
            .collect()
    })
}

/// The least-squares slope of `points` (x, y), or `None` with fewer than 3 distinct x.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    if points.len() < 3 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    Some(sxy / sxx)
}

/// The checks of a soak: RSS slope after the warm-up, fds and threads back to baseline,
/// people's p99 of the last part against the first.
pub fn verdict(
    samples: &[Sample],
    parts: (&Histogram, &Histogram),
    baseline: (Option<u64>, Option<u64>),
    after: (Option<u64>, Option<u64>),
    limits: Limits,
) -> Vec<Check> {
    let mut checks = Vec::new();
    let by_generation = generation_points(samples, &limits);
    let over = if by_generation.is_some() {
        "generations' mean RSS"
    } else {
        "samples"
    };
    let points = by_generation.unwrap_or_else(|| rss_points(samples, &limits));
    checks.push(match slope(&points) {
        Some(per_sec) => {
            let per_10min = per_sec * 600.0;
            Check {
                name: "rss_slope",
                passed: per_10min < limits.rss_kib_per_10min,
                detail: format!(
                    "RSS after a {:.0} s warm-up grows {per_10min:.0} KiB per 10 minutes \
                     (least squares over {} {over}; limit {:.0})",
                    limits.warmup_secs,
                    points.len(),
                    limits.rss_kib_per_10min
                ),
            }
        }
        None => Check {
            name: "rss_slope",
            passed: false,
            detail: format!(
                "{} {over} after the warm-up: at least 3 are needed (a longer soak)",
                points.len()
            ),
        },
    });
    for (name, what, before, end, slack) in [
        (
            "fds_returned",
            "open file descriptors",
            baseline.0,
            after.0,
            FD_SLACK,
        ),
        ("tasks_returned", "threads", baseline.1, after.1, TASK_SLACK),
    ] {
        checks.push(match (before, end) {
            (Some(b), Some(e)) => Check {
                name,
                passed: e <= b + slack,
                detail: format!(
                    "{what}: {b} before the load, {e} after the clients left (slack {slack})"
                ),
            },
            _ => Check {
                name,
                passed: false,
                detail: format!("{what} could not be read from /proc"),
            },
        });
    }
    let (first, last) = parts;
    let ms = |h: &Histogram| h.quantile(0.99).map(|us| us as f64 / 1000.0);
    checks.push(match (ms(first), ms(last)) {
        (Some(a), Some(b)) => Check {
            name: "p99_steady",
            passed: b <= a * limits.p99_ratio,
            detail: format!(
                "people's p99 {a:.2} ms in the first {:.0} s after the warm-up, {b:.2} ms in the \
                 last (limit {:.2}x)",
                limits.part_secs, limits.p99_ratio
            ),
        },
        _ => Check {
            name: "p99_steady",
            passed: false,
            detail: "no deliveries in the first or the last part of the run".to_owned(),
        },
    });
    checks
}

/// Open file descriptors of `pid`.
fn fds(pid: u32) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}

/// Threads of `pid` (the tokio workers and blocking threads; tasks themselves are not visible
/// from outside).
fn threads(pid: u32) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.count() as u64)
}

/// Bytes of a SQLite database with its WAL and shared-memory files.
fn sqlite_bytes(db: &std::path::Path) -> Option<u64> {
    let mut total = 0;
    for suffix in ["", "-wal", "-shm"] {
        let mut path = db.as_os_str().to_owned();
        path.push(suffix);
        if let Ok(meta) = std::fs::metadata(&path) {
            total += meta.len();
        } else if suffix.is_empty() {
            return None;
        }
    }
    Some(total)
}

fn room_url(template: &str, room: &str, token: Option<&str>) -> String {
    let base = template.trim_end_matches('/');
    let mut url = if base.contains("{room}") {
        base.replace("{room}", room)
    } else {
        format!("{base}/rooms/{room}")
    };
    if let Some(token) = token {
        url.push_str(if url.contains('?') { "&" } else { "?" });
        url.push_str("token=");
        url.push_str(token);
    }
    url
}

/// One person: connects, sends for `cycle`, closes, and again until `stop`; returns the
/// cycles that failed.
async fn person(
    id: usize,
    template: String,
    rooms: Rooms,
    load: Arc<(f64, Option<String>)>,
    shared: Arc<Shared>,
    cycle: Duration,
    stop: CancellationToken,
) -> Vec<String> {
    let connecting = Arc::new(tokio::sync::Semaphore::new(1));
    let mut failures = Vec::new();
    while !stop.is_cancelled() {
        // Each connection goes to the room of the generation of now.
        let room = rooms.now(id);
        let client = Client {
            id,
            url: room_url(&template, &room, load.1.as_deref()),
            wire: wire::Wire::new(wire::Protocol::YSync, &room),
            token: load.1.clone().unwrap_or_default(),
            rate: load.0,
            apply: false,
            shared: shared.clone(),
        };
        let leave = stop.child_token();
        let (ready, _) = tokio::sync::oneshot::channel();
        let signals = Signals {
            quiet: leave.clone(),
            stop: leave.clone(),
            ready,
        };
        let timer = {
            let leave = leave.clone();
            tokio::spawn(async move {
                tokio::time::sleep(cycle).await;
                leave.cancel();
            })
        };
        if let Err(error) = client.run(connecting.clone(), signals).await
            && !stop.is_cancelled()
        {
            failures.push(format!("person {id}: {error:#}"));
            // Not a tight loop against a server that refuses.
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        timer.abort();
    }
    failures
}

/// Reads a room's history and its version of now, again and again; returns answers by status.
async fn history_reads(
    http: reqwest::Client,
    base: String,
    rooms: Rooms,
    token: Option<String>,
    stop: CancellationToken,
) -> std::collections::BTreeMap<String, u64> {
    let mut by_status = std::collections::BTreeMap::new();
    let mut k = 0u64;
    loop {
        let room = rooms.now(0);
        let url = if k.is_multiple_of(2) {
            format!("{base}/rooms/{room}/history?limit=50")
        } else {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            format!("{base}/rooms/{room}/versions?at={now}")
        };
        k += 1;
        let mut request = http.get(url);
        if let Some(token) = &token {
            request = request.bearer_auth(token);
        }
        let status = tokio::select! {
            () = stop.cancelled() => return by_status,
            answer = request.send() => match answer {
                Ok(a) => { let s = a.status().as_u16().to_string(); let _ = a.bytes().await; s }
                Err(_) => "error".to_owned(),
            },
        };
        *by_status.entry(status).or_insert(0) += 1;
        tokio::select! {
            () = stop.cancelled() => return by_status,
            () = tokio::time::sleep(READ_EVERY) => {}
        }
    }
}

/// Writes Yjs updates over REST (`POST /rooms/{room}/update`), moving one shape; returns
/// answers by status.
async fn rest_writes(
    http: reqwest::Client,
    base: String,
    rooms: Rooms,
    token: Option<String>,
    stop: CancellationToken,
) -> std::collections::BTreeMap<String, u64> {
    let mut by_status = std::collections::BTreeMap::new();
    let mut doc = Doc::with_client_id(u64::from(rand::random::<u32>()));
    let mut room = rooms.now(0);
    let mut k = 0u64;
    loop {
        let now = rooms.now(0);
        if now != room {
            // A fresh room: a fresh document, whose first update does not build on shapes
            // the new room never saw.
            doc = Doc::with_client_id(u64::from(rand::random::<u32>()));
            room = now;
        }
        let update = {
            let mut txn = doc.transact_mut();
            let before = txn.state_vector();
            let shapes = txn.get_or_insert_map("shapes");
            shapes.insert(
                &mut txn,
                "soak-rest",
                MapPrelim::from([
                    ("id", yrs::Any::from("soak-rest")),
                    ("type", yrs::Any::from("rectangle")),
                    ("x", yrs::Any::from((k % 1000) as f64)),
                ]),
            );
            txn.encode_diff_v1(&before)
        };
        k += 1;
        let mut request = http
            .post(format!("{base}/rooms/{room}/update"))
            .header("content-type", "application/octet-stream")
            .body(update);
        if let Some(token) = &token {
            request = request.bearer_auth(token);
        }
        let status = tokio::select! {
            () = stop.cancelled() => return by_status,
            answer = request.send() => match answer {
                Ok(a) => a.status().as_u16().to_string(),
                Err(_) => "error".to_owned(),
            },
        };
        *by_status.entry(status).or_insert(0) += 1;
        tokio::select! {
            () = stop.cancelled() => return by_status,
            () = tokio::time::sleep(WRITE_EVERY) => {}
        }
    }
}

/// Runs the soak against `server` for `minutes` and prints the samples and the checks; an
/// error when a check failed.
pub async fn run(
    server: SoakServer,
    load: Load,
    soak: &SoakArgs,
    minutes: f64,
) -> anyhow::Result<()> {
    anyhow::ensure!(minutes > 0.0, "--soak needs a positive number of minutes");
    anyhow::ensure!(
        load.rooms >= 1 && load.clients >= 2 * load.rooms,
        "at least 2 clients per room are needed"
    );
    anyhow::ensure!(load.rate > 0.0, "--rate must be positive");
    let total = Duration::from_secs_f64(minutes * 60.0);
    let every = Duration::from_secs_f64(soak.soak_sample_secs.max(0.1));
    let cycle = Duration::from_secs_f64(soak.soak_cycle_secs.max(0.5));
    let pid = server.pid;
    let base = fairies::http_base(&server.url)?;
    let bases: Vec<String> = (0..load.rooms)
        .map(|r| {
            if load.rooms == 1 {
                load.room.clone()
            } else {
                format!("{}-{r}", load.room)
            }
        })
        .collect();
    let rooms = Rooms {
        bases: Arc::new(bases),
        generation: Arc::new(AtomicU64::new(0)),
    };
    let room_every =
        (soak.soak_room_secs > 0.0).then(|| Duration::from_secs_f64(soak.soak_room_secs.max(1.0)));
    let baseline = (fds(pid), threads(pid));
    let rss_before = process::rss_kib(Target::Pid(pid));
    let shared = Arc::new(Shared::new(8));
    // Every delivery is measured; each sample takes the interval's histogram.
    shared
        .window_start
        .store(0, std::sync::atomic::Ordering::Relaxed);
    let stop = CancellationToken::new();
    let settings = Arc::new((load.rate, load.token.clone()));
    let people: Vec<_> = (0..load.clients)
        .map(|i| {
            tokio::spawn(person(
                i,
                server.url.clone(),
                rooms.clone(),
                settings.clone(),
                shared.clone(),
                cycle,
                stop.clone(),
            ))
        })
        .collect();
    // Every kind of load runs: at least 2 fairies and 1 export client.
    let mut load = load;
    load.fairy.fairies = load.fairy.fairies.max(2);
    load.export.exports = load.export.exports.max(1);
    let started = Instant::now();
    let fairy_load =
        fairies::FairyLoad::invite(&base, load.token.clone(), &rooms.all(), &load.fairy).await?;
    let rotating = tokio::spawn(rotate(
        Rotation {
            base: base.clone(),
            token: load.token.clone(),
            rooms: rooms.clone(),
            fairy: load.fairy.clone(),
            export: load.export.clone(),
            pid,
            every: room_every,
            started,
        },
        fairy_load,
        stop.clone(),
    ));
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .context("HTTP client")?;
    let reads = tokio::spawn(history_reads(
        http.clone(),
        base.clone(),
        rooms.clone(),
        load.token.clone(),
        stop.clone(),
    ));
    let writes = tokio::spawn(rest_writes(
        http.clone(),
        base.clone(),
        rooms.clone(),
        load.token.clone(),
        stop.clone(),
    ));

    let mut samples = Vec::new();
    let mut histograms = Vec::new();
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    while started.elapsed() < total {
        tick.tick().await;
        let interval = shared.latencies.take();
        let sample = Sample {
            t: started.elapsed().as_secs_f64(),
            rss_kib: process::rss_kib(Target::Pid(pid)),
            fds: fds(pid),
            tasks: threads(pid),
            store_bytes: server.sqlite.as_deref().and_then(sqlite_bytes),
            p99_ms: interval.quantile(0.99).map(|us| us as f64 / 1000.0),
            deliveries: interval.count(),
        };
        if !load.json {
            println!(
                "  t {:>7.0} s  RSS {:>8} KiB  fds {:>5}  threads {:>3}  store {:>10} B  p99 {:>7} ms  deliveries {}",
                sample.t,
                show(sample.rss_kib),
                show(sample.fds),
                show(sample.tasks),
                show(sample.store_bytes),
                sample.p99_ms.map_or("-".to_owned(), |v| format!("{v:.2}")),
                sample.deliveries
            );
        }
        histograms.push((sample.t, interval));
        samples.push(sample);
    }
    stop.cancel();
    let mut failures = Vec::new();
    for task in people {
        match task.await {
            Ok(f) => failures.extend(f),
            Err(error) => failures.push(format!("a person's task: {error}")),
        }
    }
    let rotated = match rotating.await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(error)) => Err(format!("{error:#}")),
        Err(error) => Err(format!("the fairies' and exports' task: {error}")),
    };
    let reads = reads.await.unwrap_or_default();
    let writes = writes.await.unwrap_or_default();
    // The clients left: the fds and threads may take a moment to come back (sockets closing,
    // idle rooms unloading, blocking threads expiring).
    let waited = Instant::now();
    let mut after = (fds(pid), threads(pid));
    while waited.elapsed() < RETURN_WAIT {
        let back = |now: Option<u64>, base: Option<u64>, slack| match (now, base) {
            (Some(n), Some(b)) => n <= b + slack,
            _ => true,
        };
        if back(after.0, baseline.0, FD_SLACK) && back(after.1, baseline.1, TASK_SLACK) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        after = (fds(pid), threads(pid));
    }
    // The rooms unload (a second after their last client with the bench's server), then the
    // RSS settles: what is left is what the server keeps, or leaked.
    let rooms_loaded = rooms_unloaded(&http, &base, load.token.as_deref()).await;
    let mut rss_after = process::rss_kib(Target::Pid(pid));
    for _ in 1..SETTLED_SAMPLES {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = process::rss_kib(Target::Pid(pid));
        if now.is_some() && (rss_after.is_none() || now < rss_after) {
            rss_after = now;
        }
    }
    let secs = total.as_secs_f64();
    let warmup_secs = (secs * WARMUP_SHARE).min(WARMUP_MAX);
    let part_secs = ((secs - warmup_secs) * PART_SHARE).min(PART_MAX);
    let mut first = Histogram::default();
    let mut last = Histogram::default();
    let end = samples.last().map_or(0.0, |s| s.t);
    for (t, h) in &histograms {
        if *t > warmup_secs && *t <= warmup_secs + part_secs + every.as_secs_f64() / 2.0 {
            first.merge(h);
        }
        if *t > end - part_secs - every.as_secs_f64() / 2.0 {
            last.merge(h);
        }
    }
    let limits = Limits {
        warmup_secs,
        part_secs,
        rss_kib_per_10min: soak.soak_rss_limit_kib,
        p99_ratio: soak.soak_p99_ratio,
        generation_secs: room_every.map(|d| d.as_secs_f64()),
    };
    let mut checks = verdict(&samples, (&first, &last), baseline, after, limits);
    checks.push(Check {
        name: "loads_ran",
        passed: rotated.is_ok(),
        detail: match &rotated {
            Ok(r) => format!(
                "fairies and exports ran in {} generation(s) of rooms",
                r.exports.len()
            ),
            Err(error) => format!("moving the fairies and exports to fresh rooms failed: {error}"),
        },
    });
    checks.push(Check {
        name: "people_connected",
        passed: failures.is_empty(),
        detail: match failures.first() {
            None => "every connection cycle of every person ran to its end".to_owned(),
            Some(f) => format!("{} connection cycle(s) failed, first: {f}", failures.len()),
        },
    });
    let passed = checks.iter().all(|c| c.passed);
    let report = serde_json::json!({
        "soak_minutes": minutes,
        "clients": load.clients,
        "rooms": load.rooms,
        "rate_per_client": load.rate,
        "cycle_seconds": cycle.as_secs_f64(),
        "sample_seconds": every.as_secs_f64(),
        "warmup_seconds": warmup_secs,
        "baseline": { "fds": baseline.0, "tasks": baseline.1 },
        "after_clients_left": { "fds": after.0, "tasks": after.1 },
        "samples": samples,
        "room_seconds": room_every.map(|d| d.as_secs_f64()),
        "room_generations": rooms.generation.load(Ordering::SeqCst) + 1,
        "rss_kib": {
            "before_load": rss_before,
            "after_unload": rss_after,
            "rooms_loaded_after": rooms_loaded,
        },
        "fairy_prompts": rotated.as_ref().ok().map(|r| serde_json::json!({
            "accepted": r.prompts.accepted,
            "failed": r.prompts.failed,
            "dismissals_failed": r.dismissals_failed,
        })),
        "exports": rotated.as_ref().ok().map(|r| exports_summary(&r.exports)),
        "history_reads_by_status": reads,
        "rest_writes_by_status": writes,
        "checks": checks,
        "passed": passed,
    });
    if load.json {
        println!("{report}");
    } else {
        for c in &checks {
            println!(
                "  {} {:<17} {}",
                if c.passed { "ok  " } else { "FAIL" },
                c.name,
                c.detail
            );
        }
        println!(
            "  history reads {}  REST writes {}",
            report["history_reads_by_status"], report["rest_writes_by_status"]
        );
        println!(
            "  RSS {} KiB before the load, {} KiB once the rooms unloaded ({} loaded)",
            show(rss_before),
            show(rss_after),
            show(rooms_loaded)
        );
    }
    if !passed {
        let failed: Vec<&str> = checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.name)
            .collect();
        anyhow::bail!("the soak failed: {}", failed.join(", "));
    }
    Ok(())
}

/// What moves with the rooms: the fairies (invited anew, the old ones dismissed) and the
/// exports.
struct Rotation {
    base: String,
    token: Option<String>,
    rooms: Rooms,
    fairy: fairies::FairyArgs,
    export: exports::ExportArgs,
    pid: u32,
    /// `--soak-room-secs`, or none: one generation.
    every: Option<Duration>,
    started: Instant,
}

/// What the fairies and exports did over every generation.
struct Rotated {
    prompts: fairies::PromptCounts,
    dismissals_failed: u64,
    /// One export report per generation.
    exports: Vec<serde_json::Value>,
}

/// Runs the fairies (`fairy`, invited into generation 0's rooms) and the exports until `stop`;
/// at each generation's end moves the load to the next generation's rooms.
async fn rotate(
    r: Rotation,
    mut fairy: fairies::FairyLoad,
    stop: CancellationToken,
) -> anyhow::Result<Rotated> {
    let mut out = Rotated {
        prompts: fairies::PromptCounts::default(),
        dismissals_failed: 0,
        exports: Vec::new(),
    };
    let mut generation = 0u64;
    loop {
        let this = stop.child_token();
        fairy.start(
            &r.fairy.fairy_prompt,
            Duration::from_millis(r.fairy.fairy_every),
            &this,
        );
        // The exports read the first people's room: it changes all the time.
        let exported = crate::ids::RoomName::parse(&r.rooms.now(0)).context("the room name")?;
        let export = exports::ExportLoad::start(
            &r.base,
            r.token.as_deref(),
            &exported,
            &r.export,
            Some(r.pid),
            EXPORT_EVERY,
            &this,
        );
        let next = r.every.and_then(|every| {
            let n = u32::try_from(generation + 1).ok()?;
            Some(tokio::time::Instant::from_std(
                r.started + every.checked_mul(n)?,
            ))
        });
        match next {
            Some(at) => tokio::select! {
                () = stop.cancelled() => {}
                () = tokio::time::sleep_until(at) => {}
            },
            None => stop.cancelled().await,
        }
        let last = stop.is_cancelled();
        if !last {
            // People, reads and writes go to the new rooms from now on.
            generation += 1;
            r.rooms.generation.store(generation, Ordering::SeqCst);
        }
        this.cancel();
        let counts = fairy.finish().await;
        out.prompts.accepted += counts.accepted;
        out.prompts.failed += counts.failed;
        out.exports.push(export.finish(&r.export).await);
        if last {
            return Ok(out);
        }
        out.dismissals_failed += fairy.dismiss().await;
        fairy = fairies::FairyLoad::invite(&r.base, r.token.clone(), &r.rooms.all(), &r.fairy)
            .await
            .with_context(|| format!("inviting the fairies of room generation {generation}"))?;
    }
}

/// The exports of every generation in one: answers by status summed, the peak RSS.
fn exports_summary(reports: &[serde_json::Value]) -> serde_json::Value {
    let mut by_status = std::collections::BTreeMap::<String, u64>::new();
    let mut peak: Option<u64> = None;
    for report in reports {
        if let Some(answers) = report["answers_by_status"].as_object() {
            for (status, n) in answers {
                *by_status.entry(status.clone()).or_default() += n.as_u64().unwrap_or(0);
            }
        }
        peak = peak.max(report["server_peak_rss_kib"].as_u64());
    }
    serde_json::json!({
        "generations": reports.len(),
        "answers_by_status": by_status,
        "server_peak_rss_kib": peak,
    })
}

/// Waits (at most [`UNLOAD_WAIT`]) until the server has no room loaded; the rooms still
/// loaded then (from `/metrics`; none when it cannot be read).
async fn rooms_unloaded(http: &reqwest::Client, base: &str, token: Option<&str>) -> Option<u64> {
    let waited = Instant::now();
    loop {
        let mut request = http.get(format!("{base}/metrics"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let loaded = match request.send().await {
            Ok(answer) => answer.text().await.ok().and_then(|text| {
                text.lines()
                    .find_map(|l| l.strip_prefix("fairyring_rooms_loaded "))
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .map(|v| v as u64)
            }),
            Err(_) => None,
        };
        if loaded.is_none_or(|n| n == 0) || waited.elapsed() >= UNLOAD_WAIT {
            return loaded;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn show(v: Option<u64>) -> String {
    v.map_or("-".to_owned(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, rss: u64) -> Sample {
        Sample {
            t,
            rss_kib: Some(rss),
            fds: Some(10),
            tasks: Some(5),
            store_bytes: None,
            p99_ms: None,
            deliveries: 0,
        }
    }

    fn hist(values: &[u64]) -> Histogram {
        let mut h = Histogram::default();
        for v in values {
            h.record(*v);
        }
        h
    }

    const LIMITS: Limits = Limits {
        warmup_secs: 60.0,
        part_secs: 60.0,
        rss_kib_per_10min: 1024.0,
        p99_ratio: 1.2,
        generation_secs: None,
    };

    fn check<'a>(checks: &'a [Check], name: &str) -> &'a Check {
        checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no check {name}"))
    }

    #[test]
    fn each_generation_has_rooms_of_its_own_and_the_exports_add_up() {
        assert_eq!(generation_room("soak", 0), "soak");
        assert_eq!(generation_room("soak-1", 3), "soak-1-g3");
        let rooms = Rooms {
            bases: Arc::new(vec!["r-0".into(), "r-1".into()]),
            generation: Arc::new(AtomicU64::new(0)),
        };
        assert_eq!(rooms.now(3), "r-1");
        rooms.generation.store(2, Ordering::SeqCst);
        assert_eq!(rooms.all(), ["r-0-g2", "r-1-g2"]);
        let summary = exports_summary(&[
            serde_json::json!({"answers_by_status": {"200": 3, "503": 1}, "server_peak_rss_kib": 10}),
            serde_json::json!({"answers_by_status": {"200": 2}, "server_peak_rss_kib": 30}),
        ]);
        assert_eq!(summary["answers_by_status"]["200"], 5);
        assert_eq!(summary["answers_by_status"]["503"], 1);
        assert_eq!(summary["server_peak_rss_kib"], 30);
        assert_eq!(summary["generations"], 2);
    }

    #[test]
    fn the_slope_is_a_least_squares_fit() {
        let line: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 3.0 * i as f64 + 7.0)).collect();
        assert!((slope(&line).unwrap_or(f64::NAN) - 3.0).abs() < 1e-9);
        assert_eq!(slope(&line[..2]), None);
        assert_eq!(slope(&[(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)]), None);
    }

    #[test]
    fn rss_growth_after_the_warm_up_fails_and_a_warm_up_jump_does_not() {
        let p = hist(&[1000; 100]);
        // A jump of 50 MiB during the warm-up, then flat with noise: passes.
        let flat: Vec<Sample> = (0..60)
            .map(|i| {
                let t = i as f64 * 10.0;
                sample(
                    t,
                    if t < 60.0 {
                        10_000
                    } else {
                        60_000 + (i % 3) * 100
                    },
                )
            })
            .collect();
        let checks = verdict(
            &flat,
            (&p, &p),
            (Some(10), Some(5)),
            (Some(10), Some(5)),
            LIMITS,
        );
        assert!(check(&checks, "rss_slope").passed, "{checks:?}");
        // 20 KiB per 10 s after the warm-up: 1,200 KiB per 10 minutes: fails.
        let leak: Vec<Sample> = (0..60)
            .map(|i| sample(i as f64 * 10.0, 60_000 + i * 20))
            .collect();
        let checks = verdict(
            &leak,
            (&p, &p),
            (Some(10), Some(5)),
            (Some(10), Some(5)),
            LIMITS,
        );
        assert!(!check(&checks, "rss_slope").passed, "{checks:?}");
        // 15 KiB per 10 s: 900 per 10 minutes, under the limit.
        let slow: Vec<Sample> = (0..60)
            .map(|i| sample(i as f64 * 10.0, 60_000 + i * 15))
            .collect();
        let checks = verdict(
            &slow,
            (&p, &p),
            (Some(10), Some(5)),
            (Some(10), Some(5)),
            LIMITS,
        );
        assert!(check(&checks, "rss_slope").passed, "{checks:?}");
    }

    #[test]
    fn a_run_shorter_than_three_generations_is_fitted_by_sample() {
        let limits = Limits {
            warmup_secs: 6.0,
            generation_secs: Some(120.0),
            ..LIMITS
        };
        let short: Vec<Sample> = (1..=6)
            .map(|i| sample(i as f64 * 5.0, 50_000 + i * 10))
            .collect();
        assert_eq!(
            rss_points(&short, &limits).len(),
            5,
            "the samples after 6 s"
        );
        let p = hist(&[1000; 100]);
        let checks = verdict(
            &short,
            (&p, &p),
            (Some(10), Some(5)),
            (Some(10), Some(5)),
            limits,
        );
        let slope = check(&checks, "rss_slope");
        assert!(slope.detail.contains("over 5 samples"), "{slope:?}");
    }

    #[test]
    fn a_sawtooth_of_rooms_is_fitted_by_generation() {
        let p = hist(&[1000; 100]);
        let limits = Limits {
            warmup_secs: 600.0,
            generation_secs: Some(120.0),
            ..LIMITS
        };
        // An hour sampled every 10 s; each 2-minute generation's room grows 200 MiB, then
        // unloads: no leak.
        let run = |leak_kib_per_10min: f64| -> Vec<Sample> {
            (1..=360u64)
                .map(|i| {
                    let t = i as f64 * 10.0 + 0.01;
                    let room = 200_000.0 * (t % 120.0) / 120.0;
                    sample(t, (80_000.0 + room + t * leak_kib_per_10min / 600.0) as u64)
                })
                .collect()
        };
        let rss = |samples: &[Sample], limits: Limits| {
            let checks = verdict(
                samples,
                (&p, &p),
                (Some(10), Some(5)),
                (Some(10), Some(5)),
                limits,
            );
            check(&checks, "rss_slope").clone()
        };
        let flat = run(0.0);
        assert_eq!(rss_points(&flat, &limits).len(), 25, "generations 5 to 29");
        let by_generation = rss(&flat, limits);
        assert!(by_generation.passed, "{by_generation:?}");
        let fitted = slope(&rss_points(&flat, &limits)).unwrap_or(f64::NAN) * 600.0;
        assert!(fitted.abs() < 1.0, "{fitted} KiB per 10 minutes");
        // Every sample: the sawtooth alone reads as growth.
        let by_sample = rss(
            &flat,
            Limits {
                generation_secs: None,
                ..limits
            },
        );
        assert!(!by_sample.passed, "{by_sample:?}");
        // A leak of 2 MiB per 10 minutes under the sawtooth fails.
        let leak = rss(&run(2048.0), limits);
        assert!(
            !leak.passed && leak.detail.contains("grows 2048 KiB"),
            "{leak:?}"
        );
    }

    #[test]
    fn fds_and_threads_must_come_back() {
        let p = hist(&[1000; 100]);
        let s: Vec<Sample> = (0..20).map(|i| sample(i as f64 * 10.0, 1000)).collect();
        let ok = verdict(
            &s,
            (&p, &p),
            (Some(20), Some(9)),
            (Some(20 + FD_SLACK), Some(9 + TASK_SLACK)),
            LIMITS,
        );
        assert!(check(&ok, "fds_returned").passed && check(&ok, "tasks_returned").passed);
        let leaked = verdict(
            &s,
            (&p, &p),
            (Some(20), Some(9)),
            (Some(21 + FD_SLACK), Some(10 + TASK_SLACK)),
            LIMITS,
        );
        assert!(!check(&leaked, "fds_returned").passed);
        assert!(!check(&leaked, "tasks_returned").passed);
        let unread = verdict(&s, (&p, &p), (None, Some(9)), (Some(20), None), LIMITS);
        assert!(!check(&unread, "fds_returned").passed && !check(&unread, "tasks_returned").passed);
    }

    #[test]
    fn p99_of_the_last_part_within_the_ratio_of_the_first() {
        let s: Vec<Sample> = (0..20).map(|i| sample(i as f64 * 10.0, 1000)).collect();
        let first = hist(&[10_000; 100]);
        let same = verdict(
            &s,
            (&first, &hist(&[11_900; 100])),
            (Some(1), Some(1)),
            (Some(1), Some(1)),
            LIMITS,
        );
        assert!(check(&same, "p99_steady").passed, "{same:?}");
        let worse = verdict(
            &s,
            (&first, &hist(&[13_000; 100])),
            (Some(1), Some(1)),
            (Some(1), Some(1)),
            LIMITS,
        );
        assert!(!check(&worse, "p99_steady").passed, "{worse:?}");
        let none = verdict(
            &s,
            (&first, &Histogram::default()),
            (Some(1), Some(1)),
            (Some(1), Some(1)),
            LIMITS,
        );
        assert!(!check(&none, "p99_steady").passed);
    }
}
