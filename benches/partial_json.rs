//! Streaming-parse cost of a realistic `{"actions": [...]}` model response (100 KB and 1 MB)
//! fed in 16-byte chunks: `PartialJson` push-only, `ActionStream` with all its snapshots, one
//! `serde_json::from_str` of the whole text (the floor), and the re-close-and-reparse-per-chunk
//! algorithm other agents use (the baseline: quadratic, so measured at 100 KB only).
//!
//! Run: `cargo bench --bench partial_json -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use fairyring::partial_json::{ActionStream, PartialJson};
use serde_json::{Value, json};

const CHUNK: usize = 16;

/// A deterministic response of at least `size` bytes mixing the action kinds fairies emit:
/// long prose with escapes and unicode, shapes with nested fields, number-heavy pen strokes.
fn response(size: usize) -> String {
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move |m: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % m
    };
    let mut actions = Vec::new();
    let mut len = 20;
    let mut i = 0;
    while len < size {
        let id = format!("shape-{i}");
        let action = match next(6) {
            0 => json!({"_type": "think", "text": format!(
                "I should place box {i} next to the \"header\" at C:\\canvas — it's {} px wide; ok ✓ 😀. {}",
                next(900), "Then align the rest of the row neatly. ".repeat(1 + next(4) as usize))}),
            1 => {
                json!({"_type": "message", "text": format!("Done with step {i}!\nNext: label the diagram.")})
            }
            2 => json!({"_type": "create", "intent": "add a labelled box", "shape": {
                "_type": "rectangle", "shapeId": id, "x": next(2000), "y": next(2000) as f64 / 4.0,
                "w": 120 + next(200), "h": 80, "color": "blue", "fill": "solid",
                "text": format!("Box {i}"), "note": ""}}),
            3 => json!({"_type": "move", "intent": "tidy up", "shapeId": id,
                "x": -(next(500) as i64), "y": next(500)}),
            4 => json!({"_type": "pen", "shapeId": id, "color": "red", "closed": false,
                "points": (0..8 + next(16)).map(|_| json!({"x": next(1000), "y": next(1000) as f64 / 8.0})).collect::<Vec<_>>()}),
            _ => {
                json!({"_type": "align", "alignment": "top", "shapeIds": [id, format!("shape-{}", i / 2)], "gap": null})
            }
        };
        len += action.to_string().len() + 1;
        actions.push(action);
        i += 1;
    }
    json!({"actions": actions}).to_string()
}

fn chunks(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + CHUNK).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

/// The baseline: append the chunk, scan the whole buffer for open strings and brackets, append
/// the closers and parse everything again (O(n) per chunk, O(n²) per response).
fn reclose_and_reparse(buffer: &str) -> Option<Value> {
    let mut closers = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for b in buffer.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' => closers.push(b'}'),
            b'[' => closers.push(b']'),
            b'}' | b']' => {
                closers.pop();
            }
            _ => {}
        }
    }
    let mut closed = String::with_capacity(buffer.len() + closers.len() + 2);
    closed.push_str(buffer);
    if escaped {
        closed.pop();
    }
    if in_string {
        closed.push('"');
    }
    closed.extend(closers.iter().rev().map(|&b| b as char));
    serde_json::from_str(&closed).ok()
}

fn bench(c: &mut Criterion) {
    for (label, size) in [("100KB", 100_000), ("1MB", 1_000_000)] {
        let text = response(size);
        let parts = chunks(&text);
        let mut group = c.benchmark_group(format!("partial_json/{label}"));
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.sample_size(10);
        group.bench_function("serde_json_from_str", |b| {
            b.iter(|| serde_json::from_str::<Value>(black_box(&text)).ok())
        });
        group.bench_function("partial_json_push", |b| {
            b.iter(|| {
                let mut parser = PartialJson::new();
                for part in &parts {
                    parser.push(black_box(part));
                }
                parser.is_complete()
            })
        });
        group.bench_function("action_stream", |b| {
            b.iter(|| {
                let mut stream = ActionStream::new();
                let mut events = 0;
                for part in &parts {
                    events += black_box(stream.push(part)).len();
                }
                events
            })
        });
        if size <= 100_000 {
            group.sampling_mode(SamplingMode::Flat);
            group.bench_function(BenchmarkId::new("baseline_reparse", label), |b| {
                b.iter(|| {
                    let mut buffer = String::new();
                    let mut last = None;
                    for part in &parts {
                        buffer.push_str(part);
                        last = reclose_and_reparse(black_box(&buffer)).or(last);
                    }
                    last
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
