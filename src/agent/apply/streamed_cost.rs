//! What a fairy's streamed drawing leaves in the room's document, on the path a turn takes: the
//! offline model's answer to `fairyring bench --fairies`'s prompt (a 12-step flowchart, 23
//! creations), read in its 16-character deltas 30 ms apart (its pace under `--dev`, which the
//! bench's server runs), parsed by the [`ActionStream`], shown through the [`StreamThrottle`]
//! and the fairy's [`Tentative`], completed as the turn completes them — in simulated time, so
//! the figures are the same on every run. `--nocapture` prints them with the parts of each
//! document ([`crate::bench::weight::Breakdown`]; docs/benchmarks.md, "2026-11-28 —
//! s54-size").
//!
//! Owns nothing but these tests.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::Value;
use yrs::{Doc, ReadTxn, StateVector, Transact};

use crate::agent::actions::{ActionCtx, Registry};
use crate::agent::apply::tentative::Tentative;
use crate::agent::apply::throttle::{Decision, StreamThrottle, ThrottleConfig};
use crate::bench::weight::Breakdown;
use crate::llm::OfflineModel;
use crate::llm::types::{ChatMessage, Model, ModelEvent, ModelRequest};
use crate::partial_json::ActionStream;

/// The time between two deltas of the offline model under `--dev` (`--llm-pace-ms` 30).
const PACE: Duration = Duration::from_millis(30);

/// How the turn shows and completes the streamed creations.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Path {
    /// Nothing shown: each action applied once complete (the floor).
    CompleteOnly,
    /// As before issue 49 (main 7a81d19): shown at once, the shown version reverted and the
    /// complete action applied anew.
    Reverted,
    /// As stop 53 left it: shown at once, completed by writing over the shown shape.
    WrittenOver,
    /// Now: a new shape without its position waits up to one interval for it, then as
    /// [`Path::WrittenOver`].
    HoldUnplaced,
}

/// What one path cost.
#[derive(Debug)]
struct Cost {
    /// The document's encoded size at the end.
    encoded: usize,
    /// Versions shown.
    shown: usize,
    /// Document updates while completing, and their bytes.
    updates: usize,
    update_bytes: usize,
    /// Every document update of the stream (each a durable log entry and a broadcast to every
    /// peer), previews and their reverts included, and their bytes.
    all_updates: usize,
    all_bytes: usize,
    parts: Breakdown,
}

/// The offline model's answer to the bench's prompt, as its text deltas.
async fn offline_deltas() -> Vec<String> {
    let request = ModelRequest {
        messages: vec![ChatMessage::user(crate::bench::fairies::DEFAULT_PROMPT)],
        ..ModelRequest::default()
    };
    OfflineModel
        .stream(request)
        .filter_map(|event| async move {
            match event {
                Ok(ModelEvent::TextDelta(text)) => Some(text),
                _ => None,
            }
        })
        .collect()
        .await
}

fn run(deltas: &[String], path: Path) -> Cost {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use std::sync::{Arc, Mutex};
    let doc = Doc::with_client_id(crate::room::SERVER_CLIENT_ID);
    crate::canvas::init_schema(&doc, "system");
    let registry = Registry::canvas();
    let mut ctx = ActionCtx::new("f1");
    let mut tentative = Tentative::new(&doc, "f1");
    let counting = Arc::new(Mutex::new(false));
    let counters: Arc<[AtomicUsize; 4]> = Arc::new(Default::default());
    let (on, c) = (counting.clone(), counters.clone());
    let observed = doc.observe_update_v1("cost", move |_, e| {
        if *on.lock().unwrap_or_else(|p| p.into_inner()) {
            c[0].fetch_add(1, Relaxed);
            c[1].fetch_add(e.update.len(), Relaxed);
        }
        c[2].fetch_add(1, Relaxed);
        c[3].fetch_add(e.update.len(), Relaxed);
    });
    assert!(observed.is_ok());
    let config = ThrottleConfig {
        hold_unplaced: path == Path::HoldUnplaced,
        ..ThrottleConfig::default()
    };
    let mut throttle = StreamThrottle::new(config);
    let mut held: Option<(Value, Instant)> = None;
    // From here: the stream's updates (the schema's are not its).
    for counter in counters.iter() {
        counter.store(0, Relaxed);
    }
    let mut actions = ActionStream::new();
    let mut now = Instant::now();
    let mut shown = 0;
    let mut show = |tentative: &mut Tentative,
                    ctx: &mut ActionCtx,
                    throttle: &mut StreamThrottle,
                    version: &Value,
                    at: Instant| {
        if tentative.apply_tentative(&registry, version, ctx).is_ok() {
            throttle.applied(at, version);
            shown += 1;
        }
    };
    for delta in deltas {
        now += PACE;
        // The throttle's trailing edge, as the turn's timer applies it.
        if let Some((version, until)) = held.take() {
            if until <= now {
                show(&mut tentative, &mut ctx, &mut throttle, &version, until);
            } else {
                held = Some((version, until));
            }
        }
        let events = actions.push(delta);
        let id_streaming = actions
            .streaming_string_key()
            .is_some_and(|k| k == "id" || k.ends_with("Id") || k.ends_with("Ids"));
        for event in events {
            if event.action.get("_type").and_then(Value::as_str) != Some("create") {
                continue;
            }
            if event.complete {
                held = None;
                throttle.reset();
                *counting.lock().unwrap_or_else(|p| p.into_inner()) = true;
                if path == Path::Reverted {
                    tentative.revert_tentative();
                }
                let done = tentative.apply_complete(&registry, &event.action, &mut ctx);
                assert!(done.is_ok(), "{}: {done:?}", event.action);
                *counting.lock().unwrap_or_else(|p| p.into_inner()) = false;
                continue;
            }
            if path == Path::CompleteOnly || id_streaming {
                continue;
            }
            match throttle.decide(now, &event.action) {
                Decision::Apply => {
                    held = None;
                    show(&mut tentative, &mut ctx, &mut throttle, &event.action, now);
                }
                Decision::Hold { until } => held = Some((event.action, until)),
            }
        }
    }
    let state = doc
        .transact()
        .encode_state_as_update_v1(&StateVector::default());
    let parts = Breakdown::of_update(&state);
    assert!(parts.is_ok(), "{parts:?}");
    Cost {
        encoded: state.len(),
        shown,
        updates: counters[0].load(Relaxed),
        update_bytes: counters[1].load(Relaxed),
        all_updates: counters[2].load(Relaxed),
        all_bytes: counters[3].load(Relaxed),
        parts: parts.unwrap_or_default(),
    }
}

/// Holding a new shape's preview until its position arrives (the offline model writes the
/// coordinates last, within an interval of the shape's id) leaves the document as light as
/// applying complete actions only, where showing it at once left the values it wrote at the
/// default place, written over, in the document for good.
#[tokio::test]
async fn a_streamed_flowchart_leaves_no_preview_behind() {
    let deltas = offline_deltas().await;
    assert!(deltas.len() > 100, "{} deltas", deltas.len());
    let mut costs = Vec::new();
    for path in [
        Path::CompleteOnly,
        Path::Reverted,
        Path::WrittenOver,
        Path::HoldUnplaced,
    ] {
        let cost = run(&deltas, path);
        eprintln!(
            "--- {path:?}: {} B encoded, {} versions shown; completing: {} updates, {} B; the whole stream: {} updates, {} B\n{}",
            cost.encoded,
            cost.shown,
            cost.updates,
            cost.update_bytes,
            cost.all_updates,
            cost.all_bytes,
            cost.parts.table()
        );
        assert_eq!(cost.parts.fairy_shapes, 23, "{path:?}");
        costs.push(cost);
    }
    let [floor, reverted, written_over, held] = [0, 1, 2, 3].map(|i| &costs[i]);
    assert!(
        reverted.shown >= 23 && written_over.shown >= 23,
        "{costs:?}"
    );
    assert!(floor.encoded < reverted.encoded && reverted.encoded < written_over.encoded);
    // Now: lighter than before issue 49, and less than a quarter of what showing at once left
    // above complete-only applying; one update per completion, fewer updates and bytes in all.
    assert!(held.encoded < reverted.encoded, "{costs:?}");
    assert!(
        (held.encoded - floor.encoded) * 4 < written_over.encoded - floor.encoded,
        "{costs:?}"
    );
    assert_eq!(held.updates, 23);
    assert!(held.all_updates < written_over.all_updates && held.all_bytes < written_over.all_bytes);
}
