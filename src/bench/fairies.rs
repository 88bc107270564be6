//! `fairyring bench --fairies N`: fairies drawing in the rooms the people load, so that the
//! report shows what fairy work costs the people (docs/fairies.md "People and fairies in one room").
//!
//! Each fairy is invited over the fairy API into room `k mod --rooms`, gets its own
//! [`AREA`]-pixel square of the canvas (beside the other fairies of its room) and is prompted
//! with `--fairy-prompt` every `--fairy-every` milliseconds, phases spread so that the prompts
//! of a room do not all land at once. A prompt that finds its fairy still working interrupts
//! it, as a person's would. What the fairies did is read from the server's `/metrics` before
//! and after the measured window: requests by end reason, model turns, canvas actions and shape
//! writes committed. The server must run the offline model or another cheap one; the bench never
//! talks to a model.
//!
//! Owns the fairy side of the load only; the people's clients are [`super::client`]'s.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::weight::Breakdown;

/// The prompt of the issue that measured fairies beside people: a 12-step flowchart (23 shapes).
pub const DEFAULT_PROMPT: &str =
    "flowchart S0 -> S1 -> S2 -> S3 -> S4 -> S5 -> S6 -> S7 -> S8 -> S9 -> S10 -> S11";

/// Side of each fairy's square of the canvas, in page pixels.
pub const AREA: f64 = 2800.0;

/// Longest wait for one fairy API call.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Flags of the fairy load.
#[derive(Debug, Clone, Args)]
pub struct FairyArgs {
    /// Offline-model fairies drawing in the measured rooms (spread over `--rooms`); 0: people
    /// only.
    #[arg(long, env = "FAIRYRING_BENCH_FAIRIES", default_value_t = 0)]
    pub fairies: usize,
    /// What each fairy is asked, again and again.
    #[arg(long, env = "FAIRYRING_BENCH_FAIRY_PROMPT", default_value = DEFAULT_PROMPT)]
    pub fairy_prompt: String,
    /// Milliseconds between two prompts to the same fairy.
    #[arg(long, env = "FAIRYRING_BENCH_FAIRY_EVERY", default_value_t = 3000)]
    pub fairy_every: u64,
    /// `--fairy-writes-per-sec` of the server the bench starts (not with `--url`); default:
    /// the server's own default.
    #[arg(long, env = "FAIRYRING_BENCH_FAIRY_WRITES_PER_SEC")]
    pub fairy_writes_per_sec: Option<u32>,
}

/// One invited fairy.
struct Fairy {
    room: String,
    id: String,
    /// Its square: `{x, y, w, h}` in page pixels.
    bounds: Value,
}

/// The fairies of a run and their prompting tasks.
pub struct FairyLoad {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    fairies: Vec<Fairy>,
    tasks: Vec<tokio::task::JoinHandle<PromptCounts>>,
}

/// Prompts one fairy's task sent.
#[derive(Debug, Default, Clone, Copy)]
pub struct PromptCounts {
    /// Accepted (`202`).
    pub accepted: u64,
    /// Refused or failed.
    pub failed: u64,
}

/// The fairy counters of the server's `/metrics`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FairyCounters {
    /// `fairyring_fairy_requests_total` by reason.
    pub requests: BTreeMap<String, f64>,
    /// `fairyring_fairy_turns_total`.
    pub turns: f64,
    /// `fairyring_fairy_shape_writes_total`.
    pub shape_writes: f64,
    /// `fairyring_fairy_canvas_actions_total`.
    pub canvas_actions: f64,
}

impl FairyCounters {
    /// What happened between `self` (earlier) and `later`.
    pub fn delta(&self, later: &FairyCounters) -> FairyCounters {
        let requests = later
            .requests
            .iter()
            .map(|(reason, n)| {
                let before = self.requests.get(reason).copied().unwrap_or(0.0);
                (reason.clone(), n - before)
            })
            .filter(|(_, n)| *n > 0.0)
            .collect();
        FairyCounters {
            requests,
            turns: later.turns - self.turns,
            shape_writes: later.shape_writes - self.shape_writes,
            canvas_actions: later.canvas_actions - self.canvas_actions,
        }
    }

    /// Reads the counters out of Prometheus text.
    pub fn parse(text: &str) -> FairyCounters {
        let mut out = FairyCounters::default();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((name, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            if let Some(labels) = name.strip_prefix("fairyring_fairy_requests_total{") {
                if let Some(reason) = labels
                    .strip_prefix("reason=\"")
                    .and_then(|r| r.strip_suffix("\"}"))
                {
                    out.requests.insert(reason.to_owned(), value);
                }
            } else if name == "fairyring_fairy_turns_total" {
                out.turns = value;
            } else if name == "fairyring_fairy_shape_writes_total" {
                out.shape_writes = value;
            } else if name == "fairyring_fairy_canvas_actions_total" {
                out.canvas_actions = value;
            }
        }
        out
    }
}

/// What rooms weigh: encoded bytes, shapes, and the deleted ranges their documents keep.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct RoomsWeight {
    /// The documents' encoded size (one Yjs v1 update each), in bytes.
    pub bytes: usize,
    /// Shapes in them.
    pub shapes: usize,
    /// Of which the fairies' (`createdBy` `fairy:…`).
    pub fairy_shapes: usize,
    /// Disjoint ranges of deleted items (each a tombstone the document keeps for good).
    pub deleted_ranges: usize,
    /// Where the bytes are ([`Breakdown`]).
    pub parts: Breakdown,
}

impl RoomsWeight {
    /// The weight of one document, from its whole state as a Yjs v1 update.
    pub fn of_update(update: &[u8]) -> anyhow::Result<RoomsWeight> {
        use yrs::updates::decoder::Decode;
        use yrs::{Map, Out, ReadTxn, Transact};
        let doc = yrs::Doc::new();
        {
            let update = yrs::Update::decode_v1(update).context("decoding the room")?;
            doc.transact_mut()
                .apply_update(update)
                .context("applying the room")?;
        }
        let txn = doc.transact();
        let mut weight = RoomsWeight {
            bytes: update.len(),
            parts: Breakdown::of_update(update).context("weighing the room's parts")?,
            deleted_ranges: txn
                .snapshot()
                .delete_set
                .iter()
                .map(|(_, ranges)| ranges.len())
                .sum(),
            ..RoomsWeight::default()
        };
        if let Some(shapes) = txn.get_map(crate::canvas::schema::SHAPES) {
            for (_, shape) in shapes.iter(&txn) {
                let Out::YMap(shape) = shape else { continue };
                weight.shapes += 1;
                let by = shape.get(&txn, "createdBy").map(|v| v.to_string(&txn));
                if by.is_some_and(|by| by.starts_with("fairy:")) {
                    weight.fairy_shapes += 1;
                }
            }
        }
        Ok(weight)
    }

    fn add(&mut self, other: &RoomsWeight) {
        self.bytes += other.bytes;
        self.shapes += other.shapes;
        self.fairy_shapes += other.fairy_shapes;
        self.deleted_ranges += other.deleted_ranges;
        self.parts.add(&other.parts);
    }

    /// The report's `rooms_after` part: the figures, and per shape; `fairy_bytes_per_fairy_shape`
    /// counts what the fairies' work left (their shapes with what was written over in them,
    /// the deleted copies under their keys, garbage-collected ranges, the delete set's ranges
    /// of those, and the server-written roots: fairies, tasks, projects, suggestions), without
    /// the people's shapes and their edits, which the per-shape figure includes.
    pub fn report(&self) -> Value {
        let per_shape = |n: usize| (self.shapes > 0).then(|| n as f64 / self.shapes as f64);
        let fairy_bytes = self.parts.fairy_bytes();
        json!({
            "bytes": self.bytes,
            "shapes": self.shapes,
            "fairy_shapes": self.fairy_shapes,
            "deleted_ranges": self.deleted_ranges,
            "bytes_per_shape": per_shape(self.bytes),
            "deleted_ranges_per_shape": per_shape(self.deleted_ranges),
            "fairy_bytes": fairy_bytes,
            "fairy_bytes_per_fairy_shape": (self.fairy_shapes > 0)
                .then(|| fairy_bytes as f64 / self.fairy_shapes as f64),
            "parts": self.parts.report(),
        })
    }
}

/// The HTTP base of a WebSocket URL (`ws://HOST:PORT…` → `http://HOST:PORT`).
pub fn http_base(ws_url: &str) -> anyhow::Result<String> {
    let (scheme, rest) = ws_url
        .split_once("://")
        .context("a URL with a scheme is needed for the fairy API")?;
    let scheme = match scheme {
        "ws" => "http",
        "wss" => "https",
        other => other,
    };
    let host = rest.split('/').next().unwrap_or(rest);
    Ok(format!("{scheme}://{host}"))
}

impl FairyLoad {
    /// Invites `args.fairies` fairies into `rooms` (round robin) on the server at `base`.
    pub async fn invite(
        base: &str,
        token: Option<String>,
        rooms: &[String],
        args: &FairyArgs,
    ) -> anyhow::Result<FairyLoad> {
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .build()
            .context("HTTP client")?;
        let mut load = FairyLoad {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token,
            fairies: Vec::new(),
            tasks: Vec::new(),
        };
        let mut in_room = vec![0usize; rooms.len()];
        for k in 0..args.fairies {
            let r = k % rooms.len();
            let room = rooms[r].clone();
            let slot = in_room[r];
            in_room[r] += 1;
            let url = format!("{}/rooms/{room}/fairies", load.base);
            let body = json!({"name": format!("Bench fairy {k}")});
            let answer: Value = load
                .authorized(load.http.post(&url))
                .json(&body)
                .send()
                .await
                .and_then(reqwest::Response::error_for_status)
                .with_context(|| format!("inviting fairy {k} into {room}"))?
                .json()
                .await
                .context("the invitation's answer")?;
            let id = answer["id"]
                .as_str()
                .context("the invitation's answer has no id")?
                .to_owned();
            let x = slot as f64 * AREA;
            load.fairies.push(Fairy {
                room,
                id,
                bounds: json!({"x": x, "y": 0.0, "w": AREA, "h": AREA}),
            });
        }
        Ok(load)
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Starts prompting every fairy every `every`, phases spread over the interval, until
    /// `stop`.
    pub fn start(&mut self, prompt: &str, every: Duration, stop: &CancellationToken) {
        let n = self.fairies.len().max(1) as u32;
        for (k, fairy) in self.fairies.iter().enumerate() {
            let url = format!(
                "{}/rooms/{}/fairies/{}/prompt",
                self.base, fairy.room, fairy.id
            );
            let request = self
                .authorized(self.http.post(url))
                .json(&json!({"message": prompt, "bounds": fairy.bounds}));
            let phase = every / n * k as u32;
            let stop = stop.clone();
            self.tasks.push(tokio::spawn(async move {
                let mut counts = PromptCounts::default();
                let start = tokio::time::Instant::now() + phase;
                let mut ticks =
                    tokio::time::interval_at(start, every.max(Duration::from_millis(1)));
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        () = stop.cancelled() => break,
                        _ = ticks.tick() => {}
                    }
                    let Some(request) = request.try_clone() else {
                        break;
                    };
                    let sent = request
                        .send()
                        .await
                        .and_then(reqwest::Response::error_for_status);
                    match sent {
                        Ok(_) => counts.accepted += 1,
                        Err(error) => {
                            counts.failed += 1;
                            tracing::debug!(%error, "bench prompt failed");
                        }
                    }
                }
                counts
            }));
        }
    }

    /// Waits for the prompting tasks (after `stop`) and sums what they sent.
    pub async fn finish(&mut self) -> PromptCounts {
        let mut total = PromptCounts::default();
        for task in self.tasks.drain(..) {
            if let Ok(c) = task.await {
                total.accepted += c.accepted;
                total.failed += c.failed;
            }
        }
        total
    }

    /// Dismisses every fairy of the load (`DELETE /rooms/{room}/fairies/{id}`), after
    /// [`FairyLoad::finish`]; returns how many dismissals were refused or failed.
    pub async fn dismiss(&self) -> u64 {
        let mut failed = 0;
        for fairy in &self.fairies {
            let url = format!("{}/rooms/{}/fairies/{}", self.base, fairy.room, fairy.id);
            let answer = self
                .authorized(self.http.delete(url))
                .send()
                .await
                .and_then(reqwest::Response::error_for_status);
            if let Err(error) = answer {
                failed += 1;
                tracing::debug!(%error, "bench dismissal failed");
            }
        }
        failed
    }

    /// What the fairies' rooms weigh now: each room's whole document as one Yjs update
    /// (`GET /rooms/{room}/doc?format=yjs`), its shapes (the fairies' among them) and the
    /// deleted ranges it keeps (what reverted versions leave behind), summed over the rooms.
    pub async fn rooms_weight(&self) -> anyhow::Result<RoomsWeight> {
        let mut rooms: Vec<&str> = self.fairies.iter().map(|f| f.room.as_str()).collect();
        rooms.sort_unstable();
        rooms.dedup();
        let mut total = RoomsWeight::default();
        for room in rooms {
            let url = format!("{}/rooms/{room}/doc?format=yjs", self.base);
            let bytes = self
                .authorized(self.http.get(url))
                .send()
                .await
                .and_then(reqwest::Response::error_for_status)
                .with_context(|| format!("reading room {room}"))?
                .bytes()
                .await
                .with_context(|| format!("reading room {room}"))?;
            total.add(&RoomsWeight::of_update(&bytes)?);
        }
        Ok(total)
    }

    /// The server's fairy counters now.
    pub async fn counters(&self) -> anyhow::Result<FairyCounters> {
        let text = self
            .authorized(self.http.get(format!("{}/metrics", self.base)))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .context("reading /metrics")?
            .text()
            .await
            .context("reading /metrics")?;
        Ok(FairyCounters::parse(&text))
    }
}

/// The report's `fairies` part; `rooms` is what the fairies' rooms weighed at the end of the
/// window.
pub fn report(
    args: &FairyArgs,
    prompts: PromptCounts,
    delta: &FairyCounters,
    seconds: f64,
    rooms: Option<&RoomsWeight>,
) -> Value {
    let requests: f64 = delta.requests.values().sum();
    json!({
        "rooms_after": rooms.map(RoomsWeight::report),
        "count": args.fairies,
        "every_ms": args.fairy_every,
        "prompt": args.fairy_prompt,
        "prompts_accepted": prompts.accepted,
        "prompts_failed": prompts.failed,
        "requests_by_reason": delta.requests,
        "turns_per_request": (requests > 0.0).then(|| delta.turns / requests),
        "canvas_actions_per_sec": delta.canvas_actions / seconds.max(f64::EPSILON),
        "shapes_changed_per_sec": delta.shape_writes / seconds.max(f64::EPSILON),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_from_prometheus_text() {
        let text = "# HELP x\nfairyring_fairy_requests_total{reason=\"done\"} 3\n\
            fairyring_fairy_requests_total{reason=\"interrupted\"} 2\n\
            fairyring_fairy_turns_total 7\nfairyring_fairy_shape_writes_total 46\n\
            fairyring_rooms_loaded 1\n";
        let c = FairyCounters::parse(text);
        assert_eq!(c.requests.get("done"), Some(&3.0));
        assert_eq!(c.turns, 7.0);
        assert_eq!(c.shape_writes, 46.0);
        let before = FairyCounters {
            requests: BTreeMap::from([("done".to_owned(), 1.0)]),
            turns: 2.0,
            shape_writes: 6.0,
            canvas_actions: 0.0,
        };
        let d = before.delta(&c);
        assert_eq!(d.requests.get("done"), Some(&2.0));
        assert_eq!(d.requests.get("interrupted"), Some(&2.0));
        assert_eq!(d.turns, 5.0);
        assert_eq!(d.shape_writes, 40.0);
    }

    #[test]
    fn a_rooms_weight_counts_its_shapes_and_what_was_deleted() {
        use yrs::{Map, MapPrelim, ReadTxn, Transact, WriteTxn};
        let doc = yrs::Doc::with_client_id(1);
        {
            let mut txn = doc.transact_mut();
            let shapes = txn.get_or_insert_map("shapes");
            for (id, by) in [("a", "fairy:f-1"), ("b", "user:ann"), ("c", "fairy:f-1")] {
                let shape = MapPrelim::from([("id", yrs::Any::from(id)), ("createdBy", by.into())]);
                shapes.insert(&mut txn, id, shape);
            }
            shapes.remove(&mut txn, "c");
        }
        let update = doc
            .transact()
            .encode_state_as_update_v1(&yrs::StateVector::default());
        let weight = RoomsWeight::of_update(&update).unwrap_or_default();
        assert_eq!(
            (weight.bytes, weight.shapes, weight.fairy_shapes),
            (update.len(), 2, 1)
        );
        assert_eq!(weight.deleted_ranges, 1);
        let report = weight.report();
        assert_eq!(report["bytes_per_shape"], json!(update.len() as f64 / 2.0));
        assert!(RoomsWeight::of_update(b"not a document").is_err());
    }

    #[test]
    fn http_base_of_ws_urls() {
        assert_eq!(
            http_base("ws://127.0.0.1:8080/rooms/{room}").ok(),
            Some("http://127.0.0.1:8080".into())
        );
        assert_eq!(
            http_base("wss://example.org").ok(),
            Some("https://example.org".into())
        );
        assert!(http_base("nope").is_err());
    }
}
