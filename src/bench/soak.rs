//! `fairyring bench --soak MINUTES`: a long run of every kind of load against one server, with
//! the server sampled every `--soak-sample-secs` (10 s) for what leaks: RSS, open file
//! descriptors, threads, the store's size and people's p99. People (y-sync clients) reconnect
//! all the while (each connection lives `--soak-cycle-secs`, then closes and opens again),
//! fairies are prompted, a room is exported, history is read and shapes are written over REST.
//! At least 2 fairies and 1 export client run (more with `--fairies`, `--exports`).
//! When the time is up every load stops and the run fails (an error, so a non-zero exit) when
//! a check in [`verdict`] does not hold.
//!
//! Owns the soak's loads, samples and checks; reuses the bench's clients ([`super::client`]),
//! fairies, exports, histograms and `/proc` sampling, and touches nothing the server uses.

use std::sync::Arc;
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
    let points: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.t >= limits.warmup_secs)
        .filter_map(|s| Some((s.t, s.rss_kib? as f64)))
        .collect();
    checks.push(match slope(&points) {
        Some(per_sec) => {
            let per_10min = per_sec * 600.0;
            Check {
                name: "rss_slope",
                passed: per_10min < limits.rss_kib_per_10min,
                detail: format!(
                    "RSS after a {:.0} s warm-up grows {per_10min:.0} KiB per 10 minutes \
                     (least squares over {} samples; limit {:.0})",
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
                "{} RSS samples after the warm-up: at least 3 are needed (a longer soak)",
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
    url: String,
    room: String,
    load: Arc<(f64, Option<String>)>,
    shared: Arc<Shared>,
    cycle: Duration,
    stop: CancellationToken,
) -> Vec<String> {
    let connecting = Arc::new(tokio::sync::Semaphore::new(1));
    let mut failures = Vec::new();
    while !stop.is_cancelled() {
        let client = Client {
            id,
            url: url.clone(),
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
    room: String,
    token: Option<String>,
    stop: CancellationToken,
) -> std::collections::BTreeMap<String, u64> {
    let mut by_status = std::collections::BTreeMap::new();
    let mut k = 0u64;
    loop {
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
    room: String,
    token: Option<String>,
    stop: CancellationToken,
) -> std::collections::BTreeMap<String, u64> {
    let mut by_status = std::collections::BTreeMap::new();
    let doc = Doc::with_client_id(u64::from(rand::random::<u32>()));
    let mut k = 0u64;
    loop {
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
    let rooms: Vec<String> = (0..load.rooms)
        .map(|r| {
            if load.rooms == 1 {
                load.room.clone()
            } else {
                format!("{}-{r}", load.room)
            }
        })
        .collect();
    let baseline = (fds(pid), threads(pid));
    let shared = Arc::new(Shared::new(8));
    // Every delivery is measured; each sample takes the interval's histogram.
    shared
        .window_start
        .store(0, std::sync::atomic::Ordering::Relaxed);
    let stop = CancellationToken::new();
    let settings = Arc::new((load.rate, load.token.clone()));
    let people: Vec<_> = (0..load.clients)
        .map(|i| {
            let room = rooms[i % rooms.len()].clone();
            let url = room_url(&server.url, &room, load.token.as_deref());
            tokio::spawn(person(
                i,
                url,
                room,
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
    let mut fairy_load = if load.fairy.fairies > 0 {
        let mut f =
            fairies::FairyLoad::invite(&base, load.token.clone(), &rooms, &load.fairy).await?;
        f.start(
            &load.fairy.fairy_prompt,
            Duration::from_millis(load.fairy.fairy_every),
            &stop,
        );
        Some(f)
    } else {
        None
    };
    // The exports read the first people's room: it changes all the time.
    let exported = crate::ids::RoomName::parse(&rooms[0]).context("the room name")?;
    let export_load = (load.export.exports > 0).then(|| {
        exports::ExportLoad::start(
            &base,
            load.token.as_deref(),
            &exported,
            &load.export,
            Some(pid),
            EXPORT_EVERY,
            &stop,
        )
    });
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .context("HTTP client")?;
    let reads = tokio::spawn(history_reads(
        http.clone(),
        base.clone(),
        rooms[0].clone(),
        load.token.clone(),
        stop.clone(),
    ));
    let writes = tokio::spawn(rest_writes(
        http,
        base,
        rooms[0].clone(),
        load.token.clone(),
        stop.clone(),
    ));

    let started = Instant::now();
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
    let prompts = match &mut fairy_load {
        Some(f) => Some(f.finish().await),
        None => None,
    };
    let exported = match export_load {
        Some(e) => Some(e.finish(&load.export).await),
        None => None,
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
    };
    let mut checks = verdict(&samples, (&first, &last), baseline, after, limits);
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
        "fairy_prompts": prompts.map(|p| serde_json::json!({"accepted": p.accepted, "failed": p.failed})),
        "exports": exported,
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
    };

    fn check<'a>(checks: &'a [Check], name: &str) -> &'a Check {
        checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no check {name}"))
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
