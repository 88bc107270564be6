//! `fairyring bench --client-procs N`: the clients of a run in N processes of their own, so
//! that the bench's clients are not one runtime competing with the server for its cores (pin
//! the processes with `taskset`), and the server is what saturates.
//!
//! The coordinating bench starts each client process as `fairyring bench --client-worker K`
//! with the run's flags and its clock epoch; the process runs the clients `i` with
//! `i mod N == K` and speaks line by line: it prints `ready` once they are all connected, obeys
//! `window START END` (micros on the shared clock), `quiet` and `stop` on its standard input,
//! and prints one JSON line after `stop`: updates sent, failures, and its latency histograms.
//! Every process stamps and measures on one clock: micros since the coordinator's epoch, read
//! through the machine's wall clock (the processes run on one machine).
//!
//! Owns only the processes and their line protocol; the clients are `client`'s, the report
//! the coordinator's.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::Context;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio_util::sync::CancellationToken;

use super::client::Shared;
use super::process::Target;
use super::stats::{Histogram, Shards};
use super::{BenchArgs, Protocol, nodes, start_clients, url_template};

/// How long a client process may take to report after `stop` (its clients close within the
/// bench's stop wait).
const REPORT_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// One client process, as the coordinator holds it.
struct Worker {
    index: usize,
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

/// The client processes of a run.
pub(super) struct Workers {
    workers: Vec<Worker>,
}

impl Workers {
    /// Starts `args.client_procs` client processes against `urls` and waits until each has
    /// connected its clients.
    pub async fn start(args: &BenchArgs, urls: &[String], epoch: u64) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("locating the fairyring binary")?;
        let procs = args.client_procs;
        let mut workers = Vec::with_capacity(procs);
        for index in 0..procs {
            let mut command = Command::new(&exe);
            command
                .arg("bench")
                .args(["--client-worker", &index.to_string()])
                .args(["--client-procs", &procs.to_string()])
                .args(["--bench-epoch-micros", &epoch.to_string()])
                .args(["--clients", &args.clients.to_string()])
                .args(["--rooms", &args.rooms.to_string()])
                .args(["--rate", &args.rate.to_string()])
                .args(["--room", &args.room])
                .args(["--protocol", protocol_name(args.protocol)])
                .args(["--url", &urls.join(",")]);
            if args.apply {
                command.arg("--apply");
            }
            if let Some(k) = args.room_nodes {
                command.args(["--room-nodes", &k.to_string()]);
            }
            if let Some(token) = &args.token {
                command.env("FAIRYRING_TOKEN", token);
            }
            let mut child = command
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .context("starting a client process")?;
            let stdin = child.stdin.take().context("client process stdin")?;
            let stdout = child.stdout.take().context("client process stdout")?;
            workers.push(Worker {
                index,
                child,
                stdin,
                lines: BufReader::new(stdout).lines(),
            });
        }
        for worker in &mut workers {
            match worker.lines.next_line().await? {
                Some(line) if line == "ready" => {}
                other => anyhow::bail!(
                    "client process {} did not connect its clients (said {other:?}; for many \
                     clients, raise `ulimit -n`)",
                    worker.index
                ),
            }
        }
        Ok(Workers { workers })
    }

    /// The processes, for their CPU time.
    pub fn targets(&self) -> Vec<Target> {
        self.workers
            .iter()
            .filter_map(|w| w.child.id())
            .map(Target::Pid)
            .collect()
    }

    /// Sends one command line to every process.
    pub async fn tell(&mut self, line: &str) -> anyhow::Result<()> {
        for worker in &mut self.workers {
            worker
                .stdin
                .write_all(format!("{line}\n").as_bytes())
                .await
                .with_context(|| format!("telling client process {}", worker.index))?;
        }
        Ok(())
    }

    /// Stops every process and gathers its report into `shared`'s histograms and counters:
    /// updates sent, and what failed.
    pub async fn finish(mut self, shared: &Shared) -> anyhow::Result<(u64, Vec<String>)> {
        self.tell("stop").await?;
        let mut sent = 0u64;
        let mut failed = Vec::new();
        for mut worker in self.workers {
            let line = tokio::time::timeout(REPORT_WAIT, worker.lines.next_line()).await;
            let report: serde_json::Value = match line {
                Ok(Ok(Some(line))) => serde_json::from_str(&line)
                    .with_context(|| format!("client process {}'s report", worker.index))?,
                _ => {
                    failed.push(format!("client process {} sent no report", worker.index));
                    continue;
                }
            };
            sent += report["sent"].as_u64().unwrap_or(0);
            shared.sent_in_window.fetch_add(
                report["sent_in_window"].as_u64().unwrap_or(0),
                Ordering::Relaxed,
            );
            for (key, into) in [
                ("latencies", &shared.latencies),
                ("cross_node", &shared.cross_node),
                ("same_node", &shared.same_node),
            ] {
                absorb(into, &report[key])
                    .with_context(|| format!("client process {}'s {key}", worker.index))?;
            }
            failed.extend(
                report["failed"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|f| f.as_str())
                    .map(|f| format!("client process {}: {f}", worker.index)),
            );
            let _ = worker.child.wait().await;
        }
        Ok((sent, failed))
    }
}

fn absorb(into: &Shards, value: &serde_json::Value) -> anyhow::Result<()> {
    let histogram = Histogram::from_json(value).context("not a histogram")?;
    into.absorb(&histogram);
    Ok(())
}

fn protocol_name(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::YSync => "y-sync",
        Protocol::Hocuspocus => "hocuspocus",
    }
}

/// The side of client process `index` (`--client-worker`): runs its share of the clients and
/// speaks the coordinator's line protocol (see the module's documentation).
pub(super) async fn run_worker(args: BenchArgs, index: usize) -> anyhow::Result<()> {
    let procs = args.client_procs.max(1);
    anyhow::ensure!(
        index < procs,
        "--client-worker must be below --client-procs"
    );
    let epoch = args
        .bench_epoch_micros
        .context("--client-worker needs --bench-epoch-micros")?;
    anyhow::ensure!(!args.url.is_empty(), "--client-worker needs --url");
    let templates: Vec<_> = args.url.iter().map(|url| url_template(url)).collect();
    let placement = nodes::Placement::new(templates.len(), args.rooms, args.room_nodes)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let shared = Arc::new(Shared::new(threads * 8).on_nodes(placement).joining(epoch));
    let quiet = CancellationToken::new();
    let stop = CancellationToken::new();
    let ids = (index..args.clients).step_by(procs);
    let mut clients = start_clients(&args, &templates, &shared, ids, &quiet, &stop);
    clients.connected(&stop).await?;
    println!("ready");
    let mut commands = BufReader::new(tokio::io::stdin()).lines();
    // Until `stop`, or until the coordinator is gone (its end of the pipe closed).
    while let Some(line) = commands.next_line().await? {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("window") => {
                let start: u64 = words.next().context("window start")?.parse()?;
                let end: u64 = words.next().context("window end")?.parse()?;
                shared.window_end.store(end, Ordering::Relaxed);
                shared.window_start.store(start, Ordering::Relaxed);
            }
            Some("quiet") => quiet.cancel(),
            Some("stop") => break,
            _ => {}
        }
    }
    quiet.cancel();
    stop.cancel();
    let (sent, failed) = clients.finish().await;
    let report = serde_json::json!({
        "sent": sent,
        "sent_in_window": shared.sent_in_window.load(Ordering::Relaxed),
        "failed": failed,
        "latencies": shared.latencies.merged().to_json(),
        "cross_node": shared.cross_node.merged().to_json(),
        "same_node": shared.same_node.merged().to_json(),
    });
    println!("{report}");
    Ok(())
}
