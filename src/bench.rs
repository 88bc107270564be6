//! `fairyring bench`: a load generator of real y-sync WebSocket clients in one room.
//!
//! Each client owns one shape (a nested Y.Map in `shapes`) and moves it at a fixed rate,
//! stamping every update with its send time; every other client observes the change and
//! records send-to-receipt latency. Reports p50/p90/p99/max latency, updates/s sent and
//! delivered, and the server's RSS (idle per connection and under load). Without `--url` it
//! starts `fairyring serve` itself (a child process with a temporary SQLite store) so that RSS
//! is the server's alone. Owns nothing the server uses; talks to it only over loopback.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use yrs::sync::{Message, SyncMessage};
use yrs::types::Event;
use yrs::updates::decoder::Decode;
use yrs::updates::encoder::Encode;
use yrs::{DeepObservable, Doc, Map, MapPrelim, Out, ReadTxn, Transact, Update, WriteTxn};

/// Flags of `fairyring bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Server base URL (`ws://HOST:PORT`). Without it, a server is started for the run.
    #[arg(long)]
    pub url: Option<String>,
    /// PID of the server given with `--url`, to report its RSS.
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// Number of clients, all in one room.
    #[arg(long, default_value_t = 100)]
    pub clients: usize,
    /// Updates per second each client sends.
    #[arg(long, default_value_t = 5.0)]
    pub rate: f64,
    /// Seconds of measurement (after a warm-up of 2 s).
    #[arg(long, default_value_t = 20)]
    pub duration: u64,
    /// Room name.
    #[arg(long, default_value = "bench")]
    pub room: String,
    /// Token sent as `?token=` (when the server requires auth).
    #[arg(long, env = "FAIRYRING_TOKEN")]
    pub token: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

const WARMUP: Duration = Duration::from_secs(2);

/// Latencies in microseconds, shared by every client's observer.
type Samples = Arc<Mutex<Vec<u64>>>;

/// Runs the benchmark and prints its report.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.clients >= 2,
        "at least 2 clients are needed to measure delivery"
    );
    anyhow::ensure!(args.rate > 0.0, "--rate must be positive");
    let mut child = None;
    let (base, pid) = match &args.url {
        Some(url) => (url.trim_end_matches('/').to_owned(), args.server_pid),
        None => {
            let (spawned, base) = spawn_server()?;
            let pid = spawned.id();
            child = Some(spawned);
            (base, Some(pid))
        }
    };
    let rss_before = pid.and_then(rss_kib);
    let epoch = Instant::now();
    let samples: Samples = Arc::new(Mutex::new(Vec::new()));
    let stop = tokio_util::sync::CancellationToken::new();
    let mut ready = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..args.clients {
        let url = match &args.token {
            Some(token) => format!("{base}/rooms/{}?token={token}", args.room),
            None => format!("{base}/rooms/{}", args.room),
        };
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        ready.push(ready_rx);
        let client = BenchClient {
            id: i,
            url,
            rate: args.rate,
            epoch,
            samples: samples.clone(),
        };
        tasks.push(tokio::spawn(client.run(stop.clone(), ready_tx)));
    }
    for r in ready {
        r.await.context("a client failed to connect")?;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_idle = pid.and_then(rss_kib);
    let go = Instant::now();
    tokio::time::sleep(WARMUP).await;
    samples.lock().unwrap_or_else(|p| p.into_inner()).clear();
    let measured_from = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.duration)).await;
    let rss_load = pid.and_then(rss_kib);
    let measured = measured_from.elapsed();
    let mut latencies = std::mem::take(&mut *samples.lock().unwrap_or_else(|p| p.into_inner()));
    stop.cancel();
    let mut sent = 0u64;
    for task in tasks {
        sent += task.await.unwrap_or(Ok(0)).unwrap_or(0);
    }
    if let Some(mut child) = child {
        let _ = child.kill();
        let _ = child.wait();
    }
    latencies.sort_unstable();
    let pct = |p: f64| -> f64 {
        if latencies.is_empty() {
            return f64::NAN;
        }
        let idx = ((latencies.len() as f64 - 1.0) * p).round() as usize;
        latencies.get(idx).copied().unwrap_or(0) as f64 / 1000.0
    };
    let total_run = go.elapsed().as_secs_f64();
    let report = serde_json::json!({
        "clients": args.clients,
        "rate_per_client": args.rate,
        "seconds_measured": measured.as_secs_f64(),
        "updates_sent_per_sec": sent as f64 / total_run,
        "deliveries_per_sec": latencies.len() as f64 / measured.as_secs_f64(),
        "expected_deliveries_per_sec": args.rate * args.clients as f64 * (args.clients as f64 - 1.0),
        "latency_ms": { "p50": pct(0.50), "p90": pct(0.90), "p99": pct(0.99), "max": pct(1.0) },
        "server_rss_kib": { "before": rss_before, "idle_connected": rss_idle, "under_load": rss_load },
        "rss_per_idle_connection_kib": match (rss_before, rss_idle) {
            (Some(b), Some(i)) => Some((i.saturating_sub(b)) as f64 / args.clients as f64),
            _ => None,
        },
    });
    if args.json {
        println!("{report}");
    } else {
        print_report(&report);
    }
    Ok(())
}

fn print_report(r: &serde_json::Value) {
    println!(
        "fairyring bench: {} clients x {} updates/s, {:.1} s measured",
        r["clients"],
        r["rate_per_client"],
        r["seconds_measured"].as_f64().unwrap_or(0.0)
    );
    println!(
        "  updates sent/s        {:.0}",
        r["updates_sent_per_sec"].as_f64().unwrap_or(0.0)
    );
    println!(
        "  deliveries/s          {:.0} (expected {:.0})",
        r["deliveries_per_sec"].as_f64().unwrap_or(0.0),
        r["expected_deliveries_per_sec"].as_f64().unwrap_or(0.0)
    );
    let l = &r["latency_ms"];
    println!(
        "  latency ms            p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
        l["p50"].as_f64().unwrap_or(f64::NAN),
        l["p90"].as_f64().unwrap_or(f64::NAN),
        l["p99"].as_f64().unwrap_or(f64::NAN),
        l["max"].as_f64().unwrap_or(f64::NAN)
    );
    println!("  server RSS KiB        {}", r["server_rss_kib"]);
    println!(
        "  RSS per idle conn KiB {}",
        r["rss_per_idle_connection_kib"]
    );
}

fn spawn_server() -> anyhow::Result<(Child, String)> {
    let exe = std::env::current_exe().context("locating the fairyring binary")?;
    let db = std::env::temp_dir().join(format!("fairyring-bench-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&db);
    let mut child = Command::new(exe)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            // A throwaway server on loopback, for this run only.
            "--insecure-no-auth",
            "--max-connections-per-room",
            "100000",
        ])
        .arg("--store")
        .arg(format!("sqlite:{}", db.display()))
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

/// Resident set size of a process in KiB (Linux `/proc`).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

struct BenchClient {
    id: usize,
    url: String,
    rate: f64,
    epoch: Instant,
    samples: Samples,
}

impl BenchClient {
    fn micros(&self) -> f64 {
        self.epoch.elapsed().as_micros() as f64
    }

    /// Connects, syncs, then sends at the configured rate until stopped; returns updates sent.
    async fn run(
        self,
        stop: tokio_util::sync::CancellationToken,
        ready: tokio::sync::oneshot::Sender<()>,
    ) -> anyhow::Result<u64> {
        let (ws, _) = tokio_tungstenite::connect_async(&self.url)
            .await
            .context("connect")?;
        let (mut sink, mut stream) = ws.split();
        let doc = Doc::new();
        let own = format!("bench-{}", self.id);
        let epoch = self.epoch;
        let samples = self.samples.clone();
        let shapes = doc.get_or_insert_map("shapes");
        let own_key = own.clone();
        shapes.observe_deep("bench", move |txn, events| {
            let now = epoch.elapsed().as_micros() as f64;
            for event in events.iter() {
                if let Event::Map(e) = event {
                    let target = e.target();
                    if target
                        .get(txn, "id")
                        .is_some_and(|id| id.to_string(txn) == own_key)
                    {
                        continue;
                    }
                    if let Some(Out::Any(yrs::Any::Number(n))) = target.get(txn, "sentAt")
                        && let Some(sent) = n.as_f64()
                    {
                        samples
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push((now - sent).max(0.0) as u64);
                    }
                }
            }
        });
        let step1 =
            Message::Sync(SyncMessage::SyncStep1(doc.transact().state_vector())).encode_v1();
        sink.send(WsMessage::Binary(step1.into())).await?;
        let before = doc.transact().state_vector();
        {
            let mut txn = doc.transact_mut();
            let shapes = txn.get_or_insert_map("shapes");
            shapes.insert(
                &mut txn,
                own.as_str(),
                MapPrelim::from([
                    ("id", yrs::Any::from(own.as_str())),
                    ("type", yrs::Any::from("rectangle")),
                ]),
            );
        }
        let create = doc.transact().encode_diff_v1(&before);
        sink.send(WsMessage::Binary(
            Message::Sync(SyncMessage::Update(create))
                .encode_v1()
                .into(),
        ))
        .await?;
        let _ = ready.send(());
        let period = Duration::from_secs_f64(1.0 / self.rate);
        // Spread clients over the period so they do not all send at once.
        let offset = period.mul_f64(self.id as f64 / 97.0 % 1.0);
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + offset, period);
        let mut sent = 0u64;
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {
                    let before = doc.transact().state_vector();
                    {
                        let mut txn = doc.transact_mut();
                        let shapes = txn.get_or_insert_map("shapes");
                        if let Some(Out::YMap(shape)) = shapes.get(&txn, own.as_str()) {
                            shape.insert(&mut txn, "x", (sent % 1000) as f64);
                            shape.insert(&mut txn, "sentAt", self.micros());
                        }
                    }
                    let update = doc.transact().encode_diff_v1(&before);
                    let frame = Message::Sync(SyncMessage::Update(update)).encode_v1();
                    sink.send(WsMessage::Binary(frame.into())).await?;
                    sent += 1;
                }
                frame = stream.next() => {
                    let Some(Ok(WsMessage::Binary(bytes))) = frame else {
                        if matches!(frame, None | Some(Err(_)) | Some(Ok(WsMessage::Close(_)))) {
                            anyhow::bail!("client {} disconnected: {frame:?}", self.id);
                        }
                        continue;
                    };
                    match Message::decode_v1(&bytes) {
                        Ok(Message::Sync(SyncMessage::SyncStep1(sv))) => {
                            let diff = doc.transact().encode_diff_v1(&sv);
                            let reply = Message::Sync(SyncMessage::SyncStep2(diff)).encode_v1();
                            sink.send(WsMessage::Binary(reply.into())).await?;
                        }
                        Ok(Message::Sync(SyncMessage::SyncStep2(u) | SyncMessage::Update(u))) => {
                            if let Ok(update) = Update::decode_v1(&u) {
                                let _ = doc.transact_mut().apply_update(update);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        let _ = sink.send(WsMessage::Close(None)).await;
        Ok(sent)
    }
}
