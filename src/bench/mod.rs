//! `fairyring bench`: a load generator of real y-sync WebSocket clients spread over one or
//! more rooms.
//!
//! Each client owns one shape and moves it at a fixed rate, stamping every update with its
//! send time; every other client in the room finds the stamp in the frame it receives and
//! records send-to-receipt latency. The clients are cheap on purpose (they do not apply what
//! they receive unless `--apply`), run on every core of a multi-thread runtime, and the bench
//! measures its own CPU so that it can say when it, not the server, is the bottleneck.
//! Reports deliveries/s, latency percentiles, the server's RSS (empty, idle-connected, under
//! load, after the load, and after its rooms unloaded) and CPU seconds per 1,000 deliveries. Without `--url` it starts
//! `fairyring serve` itself (a child process, SQLite store by default) so that RSS and CPU are
//! the server's alone; with `--url` it measures any server that speaks y-sync or Hocuspocus's
//! framing (see `benches/compare/`). Several `--url`s spread each room's clients over the
//! nodes of a scale-out deployment (client `i` of a room on node `i mod N`, or with
//! `--room-nodes K` on K of them, rooms spread over the nodes), and the report adds the
//! latency of deliveries that crossed nodes beside those that did not and, per node, its CPU,
//! RSS, pub/sub traffic in and rooms held.
//!
//! # Layout
//! - [`cold`]: `--cold-load N`, the server time of a cold load in a room of N shapes.
//! - `client`: one client (socket, tiny document, send and receive loops).
//! - `wire`: framings (y-sync, Hocuspocus) and the send stamps found without decoding.
//! - `stats`: the latency histogram.
//! - `process`: RSS and CPU time from `/proc`.
//! - `procs`: `--client-procs N`, the clients in N processes of their own, and the side of
//!   such a process.
//! - `nodes`: which node each client is on, and what each node is sampled for.
//! - [`soak`]: `--soak MINUTES`, every load for a long time with the server sampled for leaks.
//! - [`weight`]: what a room's encoded document is made of (the fairies' rooms' `parts`).
//!
//! Owns nothing the server uses; talks to it only over loopback.

mod client;
pub mod cold;
pub mod exports;
pub mod fairies;
pub mod history;
mod nodes;
mod process;
mod procs;
pub mod soak;
mod stats;
pub mod weight;
mod wire;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use tokio_util::sync::CancellationToken;

use client::{Client, Shared, Signals};
use process::Target;
pub use wire::Protocol;

/// Flags of `fairyring bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Server to measure: `ws://HOST:PORT` (a fairyring server: rooms at `/rooms/{room}`), or a
    /// URL template holding `{room}` (e.g. `ws://127.0.0.1:1234/{room}`). Several (repeated or
    /// comma-separated): the nodes of one deployment, each room's clients spread over them.
    /// Without it, a fairyring server is started for the run.
    #[arg(long, env = "FAIRYRING_BENCH_URL", value_delimiter = ',')]
    pub url: Vec<String>,
    /// PID of the server given with `--url`, to report its RSS and CPU time; with several
    /// nodes, one PID per `--url` in the same order (comma-separated): the report then gives
    /// each node's CPU, RSS, pub/sub traffic in and rooms held, and the server totals are the
    /// sums over the nodes.
    #[arg(long, env = "FAIRYRING_BENCH_SERVER_PID", value_delimiter = ',')]
    pub server_pid: Vec<u32>,
    /// With several `--url` nodes: put each room's clients on this many of them (room `r` on
    /// nodes `r mod N` … `r+K-1 mod N`), so that each node holds only its share of the rooms.
    /// Default: every room on every node.
    #[arg(long, env = "FAIRYRING_BENCH_ROOM_NODES")]
    pub room_nodes: Option<usize>,
    /// Number of clients, spread over `--rooms` rooms.
    #[arg(long, default_value_t = 100)]
    pub clients: usize,
    /// Number of rooms the clients are spread over (round robin). With more than one, rooms
    /// are named `ROOM-0`, `ROOM-1`, …
    #[arg(long, env = "FAIRYRING_BENCH_ROOMS", default_value_t = 1)]
    pub rooms: usize,
    /// Updates per second each client sends.
    #[arg(long, default_value_t = 5.0)]
    pub rate: f64,
    /// Seconds of measurement (after a warm-up of 2 s).
    #[arg(long, default_value_t = 20)]
    pub duration: u64,
    /// Room name (or prefix, with several rooms).
    #[arg(long, default_value = "bench")]
    pub room: String,
    /// Token sent as `?token=` (and, with Hocuspocus framing, in its auth message).
    #[arg(long, env = "FAIRYRING_TOKEN")]
    pub token: Option<String>,
    /// Framing of the server under test: `y-sync` (fairyring, y-websocket) or `hocuspocus`.
    #[arg(long, env = "FAIRYRING_BENCH_PROTOCOL", value_enum, default_value_t = Protocol::YSync)]
    pub protocol: Protocol,
    /// Apply every received update to the client's document (as a real editor would). Off by
    /// default: the clients then only find the send stamps, which costs far less.
    #[arg(long, env = "FAIRYRING_BENCH_APPLY")]
    pub apply: bool,
    /// Store of the server the bench starts (not with `--url`); default: a fresh SQLite file
    /// in the temporary directory. `memory:` measures without durability.
    #[arg(long, env = "FAIRYRING_BENCH_STORE")]
    pub store: Option<String>,
    /// Instead of the sync load: measure a cold load (sync step 1 with an empty state vector
    /// to the whole document) in a room of this many shapes, in process.
    #[arg(long, env = "FAIRYRING_BENCH_COLD_LOAD")]
    pub cold_load: Option<usize>,
    /// Instead of the sync load: log this many updates of 100 people into SQLite stores, with
    /// and without history, and report the store bytes and how fast versions materialise.
    #[arg(long, env = "FAIRYRING_BENCH_HISTORY_UPDATES")]
    pub history_updates: Option<usize>,
    /// Compaction rule of `--history-updates` (as the server's `--compact-every`).
    #[arg(long, default_value_t = 500)]
    pub compact_every: u64,
    /// Checkpoint spacing of `--history-updates` (as the server's `--history-checkpoint-every`).
    #[arg(long, default_value_t = 2000)]
    pub history_checkpoint_every: u64,
    /// Seconds after the clients closed at which the server's RSS is sampled once more ("after
    /// unload"): a server the bench starts unloads its idle rooms after 1 s; give a server under
    /// `--url` its `--idle-unload` plus a few seconds. 0 skips the sample.
    #[arg(long, env = "FAIRYRING_BENCH_UNLOAD_WAIT", default_value_t = 5)]
    pub unload_wait: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Fairies drawing beside the people (see [`fairies`]).
    #[command(flatten)]
    pub fairy: fairies::FairyArgs,
    /// Exports of a large room beside the people (see [`exports`]).
    #[command(flatten)]
    pub export: exports::ExportArgs,
    /// A long run of every load with the server sampled for leaks (see [`soak`]).
    #[command(flatten)]
    pub soak: soak::SoakArgs,
    /// Run the clients in this many processes of their own (client `i` in process
    /// `i mod N`), which this one coordinates: a machine's cores are then shared between the
    /// server and several client processes, not one runtime's threads (pin them with
    /// `taskset`, the server through `--url` and `--server-pid`). 1: the clients run here.
    #[arg(long, env = "FAIRYRING_BENCH_CLIENT_PROCS", default_value_t = 1)]
    pub client_procs: usize,
    /// Internal: this process is client process K of `--client-procs` (started by the
    /// coordinating bench, which speaks to it on its standard input and output).
    #[arg(long, hide = true)]
    pub client_worker: Option<usize>,
    /// The `fairyring` binary started as the server (not with `--url`); default: this one.
    /// Two builds compared under one load generator: the same bench, each build's server.
    #[arg(long, env = "FAIRYRING_BENCH_SERVER_BIN")]
    pub server_bin: Option<std::path::PathBuf>,
    /// Internal: the coordinating bench's clock epoch, micros since the Unix epoch.
    #[arg(long, hide = true)]
    pub bench_epoch_micros: Option<u64>,
}

const WARMUP: Duration = Duration::from_secs(2);
/// Deliveries of updates sent in the window may arrive this long after it.
const GRACE: Duration = Duration::from_secs(2);
/// How long after the load stops the server's RSS is sampled again.
const SETTLE: Duration = Duration::from_secs(3);
/// How long stopped clients may take to close before they are abandoned.
const STOP_WAIT: Duration = Duration::from_secs(5);
/// WebSocket handshakes in flight at once while connecting.
const CONNECTING: usize = 64;
/// Share of its cores above which the bench says it may be the bottleneck.
const SATURATED: f64 = 0.85;

/// Runs the benchmark and prints its report.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    if let Some(index) = args.client_worker {
        return procs::run_worker(args, index).await;
    }
    if let Some(shapes) = args.cold_load {
        return cold::run(shapes, args.json).await;
    }
    if let Some(updates) = args.history_updates {
        let settings = history::HistoryBench {
            updates,
            compact_every: args.compact_every.max(1),
            checkpoint_every: args.history_checkpoint_every,
        };
        return history::run(settings, args.json).await;
    }
    if let Some(minutes) = args.soak.soak {
        return run_soak(args, minutes).await;
    }
    anyhow::ensure!(args.rooms >= 1, "--rooms must be at least 1");
    anyhow::ensure!(
        args.clients >= 2 * args.rooms,
        "at least 2 clients per room are needed to measure delivery"
    );
    anyhow::ensure!(args.rate > 0.0, "--rate must be positive");
    anyhow::ensure!(
        (1..=args.clients).contains(&args.client_procs),
        "--client-procs must be between 1 and --clients"
    );
    let mut child = None;
    let mut spawned_base = String::new();
    anyhow::ensure!(
        args.export.exports == 0 || args.url.is_empty(),
        "--exports needs a server the bench starts (its room is seeded in the store first)"
    );
    let exported = exports::room_of(&args.room)?;
    let (urls_of, pid, pids): (Vec<_>, _, _) = if args.url.is_empty() {
        let (store, scratch) = store_of(&args);
        if args.export.exports > 0 {
            exports::seed(&store, &exported, args.export.export_shapes)
                .await
                .context("seeding the exported room")?;
        }
        let (spawned, base) = spawn_server(&args, &store)?;
        let pid = spawned.id();
        child = Some(ServerChild {
            child: spawned,
            scratch,
        });
        spawned_base.clone_from(&base);
        (vec![url_template(&base)], Some(pid), vec![Some(pid)])
    } else {
        let templates: Vec<_> = args.url.iter().map(|url| url_template(url)).collect();
        let pids = nodes::server_pids(&args.server_pid, templates.len())?;
        (templates, None, pids)
    };
    let nodes = urls_of.len();
    let placement = nodes::Placement::new(nodes, args.rooms, args.room_nodes)?;
    let node_list: Vec<nodes::Node> = args
        .url
        .iter()
        .zip(&pids)
        .map(|(url, pid)| nodes::Node::new(url, *pid, args.token.clone()))
        .collect();
    let metrics_http = reqwest::Client::new();
    // Whose `/metrics` count the window's broadcasts and commits: every node given, or the
    // server started here.
    let counted: Vec<nodes::Node> = if args.url.is_empty() {
        vec![nodes::Node::new(&spawned_base, None, args.token.clone())]
    } else {
        node_list.clone()
    };
    // The server totals: the sums over the processes given (every one must answer).
    let server: Vec<Target> = pids.iter().flatten().map(|&p| Target::Pid(p)).collect();
    let measured = !server.is_empty();
    let sample_rss = |t: &[Target]| sum_samples(t, process::rss_kib);
    let sample_cpu = |t: &[Target]| sum_samples(t, process::cpu_seconds);
    let rss_before = sample_rss(&server);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let shared = Arc::new(Shared::new(threads * 8).on_nodes(placement));
    let quiet = CancellationToken::new();
    let stop = CancellationToken::new();
    let mut per_room = vec![0usize; args.rooms];
    for i in 0..args.clients {
        per_room[i % args.rooms] += 1;
    }
    let connect_started = Instant::now();
    // The clients: here, or in `--client-procs` processes of their own.
    let (mut local, mut workers) = if args.client_procs > 1 {
        let urls = if args.url.is_empty() {
            vec![spawned_base.clone()]
        } else {
            args.url.clone()
        };
        let workers = procs::Workers::start(&args, &urls, shared.epoch_unix_micros).await?;
        (None, Some(workers))
    } else {
        let mut clients = start_clients(&args, &urls_of, &shared, 0..args.clients, &quiet, &stop);
        clients.connected(&stop).await?;
        (Some(clients), None)
    };
    // The bench's own CPU: this process and its client processes.
    let bench_cpu = |workers: &Option<procs::Workers>| -> Option<f64> {
        let mine = process::cpu_seconds(Target::Myself)?;
        match workers {
            Some(workers) => Some(mine + sum_samples(&workers.targets(), process::cpu_seconds)?),
            None => Some(mine),
        }
    };
    let connect_secs = connect_started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_idle = sample_rss(&server);
    // Fairies start drawing with the warm-up, so that the window measures people beside them.
    let fairy_stop = CancellationToken::new();
    let mut fairy_load = if args.fairy.fairies > 0 {
        let first = args
            .url
            .first()
            .cloned()
            .unwrap_or_else(|| spawned_base.clone());
        let room_names: Vec<String> = (0..args.rooms).map(|r| room_name(&args, r)).collect();
        let mut load = fairies::FairyLoad::invite(
            &fairies::http_base(&first)?,
            args.token.clone(),
            &room_names,
            &args.fairy,
        )
        .await?;
        load.start(
            &args.fairy.fairy_prompt,
            Duration::from_millis(args.fairy.fairy_every),
            &fairy_stop,
        );
        Some(load)
    } else {
        None
    };
    // Exports run from the warm-up to the end of the window, like the fairies.
    let export_load = if args.export.exports > 0 {
        Some(exports::ExportLoad::start(
            &fairies::http_base(&spawned_base)?,
            args.token.as_deref(),
            &exported,
            &args.export,
            pid,
            Duration::ZERO,
            &fairy_stop,
        ))
    } else {
        None
    };

    // The window: updates sent from the end of the warm-up for `duration` seconds.
    let start = shared.now() + WARMUP.as_micros() as u64;
    let duration = Duration::from_secs(args.duration.max(1));
    let end = start + duration.as_micros() as u64;
    shared.window_end.store(end, Ordering::Relaxed);
    shared.window_start.store(start, Ordering::Relaxed);
    if let Some(workers) = &mut workers {
        workers.tell(&format!("window {start} {end}")).await?;
    }
    let until = |micros: u64| shared.epoch + Duration::from_micros(micros);
    tokio::time::sleep_until(until(start).into()).await;
    let fairies_0 = match &fairy_load {
        Some(load) => Some(load.counters().await?),
        None => None,
    };
    let (bench_cpu_0, server_cpu_0, wall_0) =
        (bench_cpu(&workers), sample_cpu(&server), Instant::now());
    let nodes_0 = nodes::sample_all(&node_list, &metrics_http).await;
    let counted_0 = nodes::sample_all(&counted, &metrics_http).await;
    tokio::time::sleep_until(until(end).into()).await;
    let (bench_cpu_1, server_cpu_1, wall) = (
        bench_cpu(&workers),
        sample_cpu(&server),
        wall_0.elapsed().as_secs_f64(),
    );
    let rss_load = sample_rss(&server);
    let nodes_1 = nodes::sample_all(&node_list, &metrics_http).await;
    let counted_1 = nodes::sample_all(&counted, &metrics_http).await;
    fairy_stop.cancel();
    // Why the fairies' rooms have no weight in the report, if they have none.
    let mut unweighed = None;
    let fairy_report = match (&mut fairy_load, fairies_0) {
        (Some(load), Some(before)) => {
            let after = load.counters().await?;
            let prompts = load.finish().await;
            let rooms = match load.rooms_weight().await {
                Ok(weight) => Some(weight),
                Err(error) => {
                    unweighed = Some(format!(
                        "the fairies' rooms could not be weighed: {error:#}"
                    ));
                    None
                }
            };
            Some(fairies::report(
                &args.fairy,
                prompts,
                &before.delta(&after),
                duration.as_secs_f64(),
                rooms.as_ref(),
            ))
        }
        _ => None,
    };
    let export_report = match export_load {
        Some(load) => Some(load.finish(&args.export).await),
        None => None,
    };
    tokio::time::sleep(GRACE).await;
    quiet.cancel();
    if let Some(workers) = &mut workers {
        workers.tell("quiet").await?;
    }
    tokio::time::sleep(SETTLE).await;
    let rss_after = sample_rss(&server);
    stop.cancel();
    let (sent, failed) = match (local.take(), workers.take()) {
        (Some(clients), _) => clients.finish().await,
        (None, Some(workers)) => workers.finish(&shared).await?,
        (None, None) => (0, Vec::new()),
    };
    let rss_unloaded = if args.unload_wait > 0 && measured {
        tokio::time::sleep(Duration::from_secs(args.unload_wait)).await;
        sample_rss(&server)
    } else {
        None
    };
    drop(child);

    let latencies = shared.latencies.merged();
    let cross = shared.cross_node.merged();
    let cross_ms = |q: f64| cross.quantile(q).map(|us| us as f64 / 1000.0);
    let same = shared.same_node.merged();
    let same_ms = |q: f64| same.quantile(q).map(|us| us as f64 / 1000.0);
    let seconds = duration.as_secs_f64();
    let expected: f64 = per_room
        .iter()
        .map(|&n| args.rate * n as f64 * n.saturating_sub(1) as f64)
        .sum();
    let ms = |q: f64| latencies.quantile(q).map(|us| us as f64 / 1000.0);
    let delivered = latencies.count();
    let bench_cores = cores_used(bench_cpu_0, bench_cpu_1, wall);
    let server_cores = cores_used(server_cpu_0, server_cpu_1, wall);
    let server_cpu_per_1000 = match (server_cpu_0, server_cpu_1) {
        (Some(a), Some(b)) if delivered > 0 => Some((b - a) / delivered as f64 * 1000.0),
        _ => None,
    };
    let server_cpu_per_million = server_cpu_per_1000.map(|s| s * 1000.0);
    // Broadcasts and commits in the window, summed over the servers counted.
    let window_delta = |of: fn(&nodes::NodeSample) -> Option<f64>| -> Option<f64> {
        counted_0
            .iter()
            .zip(&counted_1)
            .map(|(a, b)| Some(of(b)? - of(a)?))
            .sum()
    };
    let broadcasts = window_delta(|s| s.update_frames);
    let commits = window_delta(|s| s.commits);
    // With the server on the same machine (started here, or its PID given), the bench's fair
    // share is half the cores.
    let share = if measured {
        (threads as f64 / 2.0).max(1.0)
    } else {
        threads as f64
    };
    let mut warnings = Vec::new();
    if let Some(used) = bench_cores
        && used >= SATURATED * share
    {
        warnings.push(format!(
            "the bench itself used {used:.2} of its {share} core(s) ({threads} on this machine): \
             it may be the bottleneck, and the latencies include its own queueing"
        ));
    }
    let sent_in_window = shared.sent_in_window.load(Ordering::Relaxed);
    let wanted = args.rate * args.clients as f64 * seconds;
    if (sent_in_window as f64) < 0.97 * wanted {
        warnings.push(format!(
            "the clients sent {sent_in_window} updates in the window, {wanted:.0} were due: \
             the senders fell behind"
        ));
    }
    if (delivered as f64) < 0.99 * expected * seconds {
        warnings.push(format!(
            "{delivered} deliveries of the {:.0} expected arrived within {} s",
            expected * seconds,
            GRACE.as_secs()
        ));
    }
    warnings.extend(failed.into_iter().take(5));
    warnings.extend(unweighed);
    let mut clients_on = vec![0usize; nodes];
    for client in 0..args.clients {
        if let Some(n) = clients_on.get_mut(placement.node_of(client)) {
            *n += 1;
        }
    }
    // One line per `--url` node (none for the server the bench started).
    let node_lines: Vec<serde_json::Value> = node_list
        .iter()
        .zip(nodes_0.iter().zip(&nodes_1))
        .enumerate()
        .map(|(i, (node, (before, after)))| {
            nodes::report(
                node,
                before,
                after,
                wall,
                clients_on.get(i).copied().unwrap_or(0),
                placement.rooms_on(i, args.clients),
            )
        })
        .collect();
    let report = serde_json::json!({
        "clients": args.clients,
        "rooms": args.rooms,
        "rate_per_client": args.rate,
        "protocol": args.protocol,
        "apply": args.apply,
        "seconds_measured": seconds,
        "connect_seconds": connect_secs,
        "updates_sent": sent,
        "updates_sent_per_sec": sent_in_window as f64 / seconds,
        "deliveries_per_sec": delivered as f64 / seconds,
        "expected_deliveries_per_sec": expected,
        "delivered_ratio": if expected > 0.0 { delivered as f64 / (expected * seconds) } else { 0.0 },
        "latency_ms": { "p50": ms(0.50), "p90": ms(0.90), "p99": ms(0.99), "max": ms(1.0) },
        "room_nodes": args.room_nodes,
        "nodes": node_lines,
        "cross_node": (nodes > 1).then(|| serde_json::json!({
            "deliveries_per_sec": cross.count() as f64 / seconds,
            "latency_ms": { "p50": cross_ms(0.50), "p90": cross_ms(0.90), "p99": cross_ms(0.99), "max": cross_ms(1.0) },
        })),
        "same_node": (nodes > 1).then(|| serde_json::json!({
            "deliveries_per_sec": same.count() as f64 / seconds,
            "latency_ms": { "p50": same_ms(0.50), "p90": same_ms(0.90), "p99": same_ms(0.99), "max": same_ms(1.0) },
        })),
        "server_rss_kib": {
            "before": rss_before,
            "idle_connected": rss_idle,
            "under_load": rss_load,
            "after_load": rss_after,
            "after_unload": rss_unloaded,
            "unload_wait_seconds": args.unload_wait,
        },
        "rss_per_connection_kib": match (rss_before, rss_idle) {
            (Some(b), Some(i)) => Some(i.saturating_sub(b) as f64 / args.clients as f64),
            _ => None,
        },
        "server_cpu": {
            "cores_used": server_cores,
            "seconds_per_1000_deliveries": server_cpu_per_1000,
            "seconds_per_million_deliveries": server_cpu_per_million,
        },
        "server_work": {
            "broadcasts_per_sec": broadcasts.map(|b| b / wall),
            "commits_per_sec": commits.map(|c| c / wall),
            // Each update goes out in one broadcast: how many a frame carries, on average.
            "updates_per_frame": broadcasts
                .filter(|b| *b > 0.0)
                .map(|b| sent_in_window as f64 / b),
        },
        "bench_cpu": {
            "cores_used": bench_cores,
            "cores_available": threads,
            "client_procs": args.client_procs,
        },
        "fairies": fairy_report,
        "exports": export_report,
        "warnings": warnings,
    });
    if args.json {
        println!("{report}");
    } else {
        print_report(&report);
    }
    Ok(())
}

/// `--soak`: against the one `--url` (with its `--server-pid`) or a server started for it.
async fn run_soak(args: BenchArgs, minutes: f64) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.url.len() <= 1,
        "--soak measures one server: give one --url (and its --server-pid)"
    );
    let mut child = None;
    let server = match args.url.first() {
        Some(url) => soak::SoakServer {
            url: url.clone(),
            pid: *args
                .server_pid
                .first()
                .context("--soak with --url needs the server's --server-pid")?,
            sqlite: args
                .store
                .as_deref()
                .and_then(|s| s.strip_prefix("sqlite:"))
                .map(std::path::PathBuf::from),
        },
        None => {
            let (store, scratch) = store_of(&args);
            let (spawned, base) = spawn_server(&args, &store)?;
            let server = soak::SoakServer {
                url: base,
                pid: spawned.id(),
                sqlite: store.strip_prefix("sqlite:").map(std::path::PathBuf::from),
            };
            child = Some(ServerChild {
                child: spawned,
                scratch,
            });
            server
        }
    };
    let load = soak::Load {
        clients: args.clients,
        rooms: args.rooms,
        room: args.room.clone(),
        rate: args.rate,
        token: args.token.clone(),
        fairy: args.fairy.clone(),
        export: args.export.clone(),
        json: args.json,
    };
    let outcome = soak::run(server, load, &args.soak, minutes).await;
    drop(child);
    outcome
}

/// The name of room `index` of the run (`ROOM`, or `ROOM-i` with several rooms).
fn room_name(args: &BenchArgs, index: usize) -> String {
    if args.rooms == 1 {
        args.room.clone()
    } else {
        format!("{}-{index}", args.room)
    }
}

/// CPU cores used over `wall` seconds, from two CPU-time samples.
fn cores_used(before: Option<f64>, after: Option<f64>, wall: f64) -> Option<f64> {
    match (before, after) {
        (Some(a), Some(b)) if wall > 0.0 => Some((b - a) / wall),
        _ => None,
    }
}

/// Builds a room's URL: `{room}` in the template is replaced; a bare base gets `/rooms/{room}`.
fn url_template(url: &str) -> impl Fn(&str) -> String + use<> {
    let url = url.trim_end_matches('/').to_owned();
    move |room: &str| {
        if url.contains("{room}") {
            url.replace("{room}", room)
        } else {
            format!("{url}/rooms/{room}")
        }
    }
}

fn print_report(r: &serde_json::Value) {
    let f = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    println!(
        "fairyring bench: {} clients in {} room(s) x {} updates/s, {} framing{}, {:.0} s measured",
        r["clients"],
        r["rooms"],
        r["rate_per_client"],
        r["protocol"].as_str().unwrap_or("?"),
        if r["apply"].as_bool() == Some(true) {
            ", applying updates"
        } else {
            ""
        },
        f(&r["seconds_measured"])
    );
    println!(
        "  updates sent/s        {:.0}",
        f(&r["updates_sent_per_sec"])
    );
    println!(
        "  deliveries/s          {:.0} (expected {:.0}, {:.1} % delivered)",
        f(&r["deliveries_per_sec"]),
        f(&r["expected_deliveries_per_sec"]),
        f(&r["delivered_ratio"]) * 100.0
    );
    let l = &r["latency_ms"];
    println!(
        "  latency ms            p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
        f(&l["p50"]),
        f(&l["p90"]),
        f(&l["p99"]),
        f(&l["max"])
    );
    let nodes = r["nodes"].as_array().map_or(0, Vec::len);
    for (key, what) in [
        ("cross_node", format!("across {nodes} nodes")),
        ("same_node", "on the same node".to_owned()),
    ] {
        let split = &r[key];
        if split.is_null() {
            continue;
        }
        let l = &split["latency_ms"];
        println!(
            "  {what:<22}{:.0} deliveries/s, p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2} ms",
            f(&split["deliveries_per_sec"]),
            f(&l["p50"]),
            f(&l["p90"]),
            f(&l["p99"]),
            f(&l["max"])
        );
    }
    if nodes > 1 {
        print_nodes(r);
    }
    let rss = &r["server_rss_kib"];
    println!(
        "  server RSS KiB        before {}  idle connected {}  under load {}  after load {}  \
         {} s after the clients closed {}",
        rss["before"],
        rss["idle_connected"],
        rss["under_load"],
        rss["after_load"],
        rss["unload_wait_seconds"],
        rss["after_unload"]
    );
    println!(
        "  RSS per connection    {:.1} KiB",
        f(&r["rss_per_connection_kib"])
    );
    println!(
        "  server CPU            {:.2} cores, {:.3} s per million deliveries",
        f(&r["server_cpu"]["cores_used"]),
        f(&r["server_cpu"]["seconds_per_million_deliveries"])
    );
    let work = &r["server_work"];
    println!(
        "  server work           {:.0} commits/s, {:.0} update broadcasts/s, {:.2} updates per frame",
        f(&work["commits_per_sec"]),
        f(&work["broadcasts_per_sec"]),
        f(&work["updates_per_frame"])
    );
    println!(
        "  bench CPU             {:.2} of {} cores, {} client process(es)",
        f(&r["bench_cpu"]["cores_used"]),
        r["bench_cpu"]["cores_available"],
        r["bench_cpu"]["client_procs"]
    );
    let fairies = &r["fairies"];
    if !fairies.is_null() {
        println!(
            "  fairies               {} prompted every {} ms: {} prompts ({} failed), requests {}, \
             {:.2} turns/request, {:.0} canvas actions/s, {:.0} shapes changed/s",
            fairies["count"],
            fairies["every_ms"],
            fairies["prompts_accepted"],
            fairies["prompts_failed"],
            fairies["requests_by_reason"],
            f(&fairies["turns_per_request"]),
            f(&fairies["canvas_actions_per_sec"]),
            f(&fairies["shapes_changed_per_sec"])
        );
        let rooms = &fairies["rooms_after"];
        if !rooms.is_null() {
            println!(
                "  fairies' rooms after  {} B, {} shapes ({} the fairies'): {:.0} B/shape, \
                 {} deleted ranges ({:.2}/shape)",
                rooms["bytes"],
                rooms["shapes"],
                rooms["fairy_shapes"],
                f(&rooms["bytes_per_shape"]),
                rooms["deleted_ranges"],
                f(&rooms["deleted_ranges_per_shape"])
            );
        }
    }
    let exports = &r["exports"];
    if !exports.is_null() {
        let l = &exports["latency_ms"];
        println!(
            "  exports               {} clients, {} of {} shapes: {:.2}/s, answers {}, \
             p50 {:.0} ms  max {:.0} ms, server peak RSS {} KiB",
            exports["clients"],
            exports["format"].as_str().unwrap_or("?"),
            exports["shapes"],
            f(&exports["exports_per_sec"]),
            exports["answers_by_status"],
            f(&l["p50"]),
            f(&l["max"]),
            exports["server_peak_rss_kib"]
        );
    }
    if let Some(warnings) = r["warnings"].as_array() {
        for w in warnings {
            println!("  WARNING: {}", w.as_str().unwrap_or_default());
        }
    }
}

/// The per-node table of a run over several nodes.
fn print_nodes(r: &serde_json::Value) {
    let rooms = r["rooms"].as_f64().unwrap_or(0.0);
    let cell = |v: &serde_json::Value, scale: f64, digits: usize| match v.as_f64() {
        Some(x) => format!("{:.*}", digits, x / scale),
        None => "-".to_owned(),
    };
    println!(
        "  {:<4} {:>7} {:>6} {:>6} {:>8} {:>9} {:>10} {:>12}",
        "node", "clients", "share", "loaded", "CPU", "RSS MiB", "pubsub in/s", "KiB in/s"
    );
    for (i, node) in r["nodes"].as_array().into_iter().flatten().enumerate() {
        let placed = node["rooms_placed"].as_f64().unwrap_or(0.0);
        println!(
            "  {:<4} {:>7} {:>6} {:>6} {:>8} {:>9} {:>10} {:>12}",
            i,
            node["clients"].to_string(),
            format!(
                "{:.0}%",
                if rooms > 0.0 {
                    100.0 * placed / rooms
                } else {
                    0.0
                }
            ),
            cell(&node["rooms_loaded"], 1.0, 0),
            cell(&node["cpu_cores"], 1.0, 2),
            cell(&node["rss_kib_under_load"], 1024.0, 0),
            cell(&node["pubsub_messages_in_per_sec"], 1.0, 0),
            cell(&node["pubsub_bytes_in_per_sec"], 1024.0, 1),
        );
    }
}

/// The clients of a run started in this process.
struct Clients {
    /// Each client's index in the run, its "connected" signal and its task.
    started: Vec<(
        usize,
        tokio::sync::oneshot::Receiver<()>,
        tokio::task::JoinHandle<anyhow::Result<u64>>,
    )>,
}

/// Starts clients `ids` of the run in this process (room `i mod rooms`, node from the
/// placement of `shared`); they connect at most [`CONNECTING`] at a time.
fn start_clients<U: Fn(&str) -> String>(
    args: &BenchArgs,
    urls_of: &[U],
    shared: &Arc<Shared>,
    ids: impl Iterator<Item = usize>,
    quiet: &CancellationToken,
    stop: &CancellationToken,
) -> Clients {
    let connecting = Arc::new(tokio::sync::Semaphore::new(CONNECTING));
    let mut started = Vec::new();
    for i in ids {
        let room = room_name(args, i % args.rooms);
        let Some(url_of) = urls_of.get(shared.node_of(i)) else {
            continue;
        };
        let mut url = url_of(&room);
        if let Some(token) = &args.token {
            url.push_str(if url.contains('?') { "&" } else { "?" });
            url.push_str("token=");
            url.push_str(token);
        }
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let client = Client {
            id: i,
            url,
            wire: wire::Wire::new(args.protocol, &room),
            token: args.token.clone().unwrap_or_default(),
            rate: args.rate,
            apply: args.apply,
            shared: shared.clone(),
        };
        let signals = Signals {
            quiet: quiet.clone(),
            stop: stop.clone(),
            ready: ready_tx,
        };
        started.push((
            i,
            ready_rx,
            tokio::spawn(client.run(connecting.clone(), signals)),
        ));
    }
    Clients { started }
}

impl Clients {
    /// Waits until every client is connected; the first that failed ends the run (`stop`).
    async fn connected(&mut self, stop: &CancellationToken) -> anyhow::Result<()> {
        let mut failed = None;
        for (position, (_, ready, _)) in self.started.iter_mut().enumerate() {
            if ready.await.is_err() {
                failed = Some(position);
                break;
            }
        }
        let Some(position) = failed else {
            return Ok(());
        };
        stop.cancel();
        let (i, _, task) = self.started.swap_remove(position);
        let error = match task.await {
            Ok(Err(error)) => error,
            _ => anyhow::anyhow!("client {i} ended before it was connected"),
        };
        Err(error.context("a client failed to connect (for many clients, raise `ulimit -n`)"))
    }

    /// Waits for the stopped clients (at most [`STOP_WAIT`]): updates sent, and what failed.
    async fn finish(self) -> (u64, Vec<String>) {
        let mut sent = 0u64;
        let mut failed = Vec::new();
        // A client stuck writing to a server that stopped reading is abandoned, not waited for.
        let give_up = tokio::time::Instant::now() + STOP_WAIT;
        let mut stuck = 0usize;
        for (i, _, mut task) in self.started {
            match tokio::time::timeout_at(give_up, &mut task).await {
                Ok(Ok(Ok(n))) => sent += n,
                Ok(Ok(Err(error))) => failed.push(format!("client {i}: {error:#}")),
                Ok(Err(error)) => failed.push(format!("client {i}: {error}")),
                Err(_) => {
                    task.abort();
                    stuck += 1;
                }
            }
        }
        if stuck > 0 {
            failed.push(format!(
                "{stuck} client(s) still blocked writing to the server when the run ended"
            ));
        }
        (sent, failed)
    }
}

/// The sum of one sample over several processes; `None` with none, or if one did not answer.
fn sum_samples<T: std::iter::Sum<T>>(
    targets: &[Target],
    sample: impl Fn(Target) -> Option<T>,
) -> Option<T> {
    if targets.is_empty() {
        return None;
    }
    targets.iter().map(|&t| sample(t)).sum()
}

/// The server started for a run; killed when dropped.
struct ServerChild {
    child: Child,
    /// The SQLite file the bench made for the run (removed with its WAL files afterwards).
    scratch: Option<std::path::PathBuf>,
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(db) = &self.scratch {
            for suffix in ["", "-wal", "-shm"] {
                let mut path = db.clone().into_os_string();
                path.push(suffix);
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// The store of the server the bench starts, and the scratch file made for it (if any).
fn store_of(args: &BenchArgs) -> (String, Option<std::path::PathBuf>) {
    match &args.store {
        Some(store) => (store.clone(), None),
        None => {
            let db =
                std::env::temp_dir().join(format!("fairyring-bench-{}.db", std::process::id()));
            let _ = std::fs::remove_file(&db);
            (format!("sqlite:{}", db.display()), Some(db))
        }
    }
}

fn spawn_server(args: &BenchArgs, store: &str) -> anyhow::Result<(Child, String)> {
    let exe = match &args.server_bin {
        Some(exe) => exe.clone(),
        None => std::env::current_exe().context("locating the fairyring binary")?,
    };
    let connections = (args.clients + 100).to_string();
    let rooms = (args.rooms + 16).to_string();
    let per_room = args
        .fairy
        .fairies
        .div_ceil(args.rooms.max(1))
        .max(16)
        .to_string();
    let mut fairy_flags = vec![
        // The bench's prompts come from one client and its fairies draw all the time: no
        // per-client API limit and no hourly token budget.
        "--fairy-api-rate-per-min".to_owned(),
        "0".to_owned(),
        "--fairy-token-budget".to_owned(),
        "0".to_owned(),
        "--max-fairies-per-room".to_owned(),
        per_room,
    ];
    if let Some(writes) = args.fairy.fairy_writes_per_sec {
        fairy_flags.extend(["--fairy-writes-per-sec".to_owned(), writes.to_string()]);
    }
    let mut child = Command::new(exe)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            // A throwaway server on loopback, for this run only.
            "--insecure-no-auth",
            "--max-connections-per-room",
            "100000",
            "--max-connections",
            &connections,
            "--max-rooms",
            &rooms,
            "--store",
            store,
            // Rooms unload soon after the clients close, for the "after unload" RSS sample.
            "--idle-unload",
            "1",
        ])
        .args(fairy_flags)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .context("starting fairyring serve")?;
    let stdout = child.stdout.take().context("server stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .context("unexpected server output")?;
    Ok((child, format!("ws://{addr}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_from_a_base_or_a_template() {
        assert_eq!(
            url_template("ws://127.0.0.1:8080/")("bench-3"),
            "ws://127.0.0.1:8080/rooms/bench-3"
        );
        assert_eq!(
            url_template("ws://127.0.0.1:1234/{room}")("r"),
            "ws://127.0.0.1:1234/r"
        );
    }

    #[test]
    fn cores_used_needs_both_samples() {
        assert_eq!(cores_used(Some(1.0), Some(3.0), 2.0), Some(1.0));
        assert_eq!(cores_used(None, Some(3.0), 2.0), None);
        assert_eq!(cores_used(Some(1.0), Some(3.0), 0.0), None);
    }
}
