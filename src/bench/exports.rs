//! `fairyring bench --exports N`: N clients exporting one large room again and again while the
//! people load the measured rooms, so that the report shows what exports cost people in other
//! rooms (docs/benchmarks.md, "Exports beside people"). The exported room
//! (`ROOM-exported`, `--export-shapes` shapes) is seeded into the server's store before the
//! server starts, so the run measures exports, not the seeding; each client sends its next
//! `GET /rooms/ROOM-exported/export.FORMAT` (the whole page) as soon as the last one answered.
//! The report gives the answers by status, their latency, and the server's peak RSS, sampled
//! every [`RSS_EVERY`] while the exports run.
//!
//! Owns the export side of the load only; the people's clients are [`super::client`]'s.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::process::{self, Target};
use super::stats::Histogram;
use crate::ids::RoomName;

/// How often the server's RSS is sampled for the peak.
pub const RSS_EVERY: Duration = Duration::from_millis(100);

/// Longest wait for one export answer (a render has its own budget; this only bounds a hang).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Flags of the export load.
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// Clients exporting the seeded room concurrently (needs a server the bench starts); 0:
    /// none.
    #[arg(long, env = "FAIRYRING_BENCH_EXPORTS", default_value_t = 0)]
    pub exports: usize,
    /// Shapes in the exported room.
    #[arg(long, env = "FAIRYRING_BENCH_EXPORT_SHAPES", default_value_t = 50_000)]
    pub export_shapes: usize,
    /// What the clients ask for.
    #[arg(long, env = "FAIRYRING_BENCH_EXPORT_FORMAT", value_enum, default_value_t = ExportFormat::Png)]
    pub export_format: ExportFormat,
}

/// An export format of `GET /rooms/{room}/export.{format}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// `export.png`.
    Png,
    /// `export.jpg`.
    Jpg,
    /// `export.svg`.
    Svg,
}

impl ExportFormat {
    fn extension(self) -> &'static str {
        match self {
            ExportFormat::Png => "png",
            ExportFormat::Jpg => "jpg",
            ExportFormat::Svg => "svg",
        }
    }
}

/// The name of the exported room of a run whose rooms are named after `room`.
pub fn room_of(room: &str) -> anyhow::Result<RoomName> {
    Ok(RoomName::parse(&format!("{room}-exported"))?)
}

/// Writes the exported room into the store at `store_url` (before the server opens it).
pub async fn seed(store_url: &str, room: &RoomName, shapes: usize) -> anyhow::Result<()> {
    let store = crate::store::open(store_url).await?;
    let seeded = super::cold::seed(store.clone(), room, shapes).await;
    store.close().await;
    seeded
}

/// What one client saw.
#[derive(Default)]
struct Answers {
    /// Answers by `STATUS` or `STATUS error` (the JSON error code of a refusal).
    by_status: BTreeMap<String, u64>,
    /// Milliseconds from request to the whole body, successful answers only.
    took: Histogram,
}

/// The export clients of a run and the RSS sampler.
pub struct ExportLoad {
    clients: Vec<tokio::task::JoinHandle<Answers>>,
    peak_rss: tokio::task::JoinHandle<Option<u64>>,
    started: Instant,
}

impl ExportLoad {
    /// Starts `args.exports` clients against `http_base` (`http://HOST:PORT`), each waiting
    /// `pause` between two exports (zero: back to back), and the sampler of `server`'s RSS;
    /// both run until `stop`.
    pub fn start(
        http_base: &str,
        token: Option<&str>,
        room: &RoomName,
        args: &ExportArgs,
        server: Option<u32>,
        pause: Duration,
        stop: &CancellationToken,
    ) -> Self {
        let mut url = format!(
            "{http_base}/rooms/{room}/export.{}",
            args.export_format.extension()
        );
        if let Some(token) = token {
            url.push_str("?token=");
            url.push_str(token);
        }
        let http = reqwest::Client::new();
        let clients = (0..args.exports)
            .map(|_| tokio::spawn(export_loop(http.clone(), url.clone(), pause, stop.clone())))
            .collect();
        let stop = stop.clone();
        let peak_rss = tokio::spawn(async move {
            let mut peak = None;
            let mut tick = tokio::time::interval(RSS_EVERY);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return peak,
                    _ = tick.tick() => {
                        if let Some(kib) = server.map(Target::Pid).and_then(process::rss_kib) {
                            peak = peak.max(Some(kib));
                        }
                    }
                }
            }
        });
        ExportLoad {
            clients,
            peak_rss,
            started: Instant::now(),
        }
    }

    /// Waits for the clients (after `stop`) and reports what they saw.
    pub async fn finish(self, args: &ExportArgs) -> Value {
        let seconds = self.started.elapsed().as_secs_f64();
        let mut by_status: BTreeMap<String, u64> = BTreeMap::new();
        let mut took = Histogram::default();
        for client in self.clients {
            if let Ok(answers) = client.await {
                for (status, n) in answers.by_status {
                    *by_status.entry(status).or_default() += n;
                }
                took.merge(&answers.took);
            }
        }
        let peak = self.peak_rss.await.ok().flatten();
        let ms = |q: f64| took.quantile(q).map(|us| us as f64 / 1000.0);
        json!({
            "clients": args.exports,
            "shapes": args.export_shapes,
            "format": args.export_format.extension(),
            "seconds": seconds,
            "answers_by_status": by_status,
            "exports_per_sec": took.count() as f64 / seconds.max(f64::EPSILON),
            "latency_ms": { "p50": ms(0.50), "max": ms(1.0) },
            "server_peak_rss_kib": peak,
        })
    }
}

async fn export_loop(
    http: reqwest::Client,
    url: String,
    pause: Duration,
    stop: CancellationToken,
) -> Answers {
    let mut answers = Answers::default();
    loop {
        let sent = Instant::now();
        let answer = tokio::select! {
            _ = stop.cancelled() => return answers,
            answer = tokio::time::timeout(CALL_TIMEOUT, export_once(&http, &url)) => answer,
        };
        let ok = matches!(answer, Ok(Ok((200, _))));
        let key = match answer {
            Ok(Ok((200, _))) => {
                answers.took.record(sent.elapsed().as_micros() as u64);
                "200".to_owned()
            }
            Ok(Ok((status, body))) => {
                let code = serde_json::from_slice::<Value>(&body)
                    .ok()
                    .and_then(|v| v["error"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                format!("{status} {code}")
            }
            Ok(Err(_)) => "failed".to_owned(),
            Err(_) => "timed out".to_owned(),
        };
        *answers.by_status.entry(key).or_default() += 1;
        if !ok {
            // A refusal (`503 busy`) answers at once: do not spin on it.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if !pause.is_zero() {
            tokio::select! {
                _ = stop.cancelled() => return answers,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }
}

async fn export_once(http: &reqwest::Client, url: &str) -> reqwest::Result<(u16, bytes::Bytes)> {
    let response = http.get(url).send().await?;
    let status = response.status().as_u16();
    Ok((status, response.bytes().await?))
}
