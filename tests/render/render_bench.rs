//! Render timings and image sizes (ignored by default; numbers only mean something in a release
//! build): `cargo test --release --test render render_bench:: -- --ignored --nocapture`.
//!
//! A 10,000-shape room (every kind, 100 × 100 grid, 200 px apart) exported whole to SVG and PNG
//! (the caps lower the scale), and the screenshots a fairy sends: its default 1200 × 800 view
//! in that room, and the fixture room's content.

use crate::support;

use std::time::Instant;

use fairyring::agent::prompt::screenshot;
use fairyring::canvas::format::{ShapeBase, from_simple};
use fairyring::canvas::geometry::Bounds;
use fairyring::canvas::render::{Budget, Caps, PngEffort, View, raster, render_png, render_svg};
use fairyring::canvas::schema::{GEO_KINDS, MAIN_PAGE};
use fairyring::canvas::shape::Shape;
use serde_json::json;

fn dense_room(n: usize) -> Vec<Shape> {
    let side = (n as f64).sqrt().ceil() as usize;
    (0..n)
        .map(|i| {
            let (x, y) = ((i % side) as f64 * 200.0, (i / side) as f64 * 200.0);
            let fill = ["none", "semi", "solid", "pattern"][i % 4];
            let v = match i % 6 {
                0 => json!({"_type": "text", "shapeId": format!("s{i}"), "x": x, "y": y, "text": format!("text {i}"), "fontSize": 24}),
                1 => json!({"_type": "note", "shapeId": format!("s{i}"), "x": x, "y": y, "text": "a note", "color": "yellow"}),
                2 => json!({"_type": "arrow", "shapeId": format!("s{i}"), "x1": x, "y1": y, "x2": x + 150.0, "y2": y + 100.0, "bend": 20, "text": "go"}),
                3 => json!({"_type": "pen", "shapeId": format!("s{i}"), "points": (0..20).map(|k| json!({"x": x + k as f64 * 8.0, "y": y + ((k * 37) % 50) as f64})).collect::<Vec<_>>()}),
                _ => json!({"_type": GEO_KINDS[i % GEO_KINDS.len()], "shapeId": format!("s{i}"), "x": x, "y": y, "w": 150, "h": 100, "color": "blue", "fill": fill, "text": "label"}),
            };
            let base = ShapeBase {
                index: format!("a{i:06}"),
                ..ShapeBase::default()
            };
            from_simple(&v, &base).unwrap_or_else(|e| panic!("{v}: {e}"))
        })
        .collect()
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

#[test]
#[ignore = "a measurement: run in release with --ignored --nocapture"]
fn render_times_and_image_sizes() {
    let shapes = dense_room(10_000);
    let view = View::content(&shapes, MAIN_PAGE, 1.0, Caps::default()).expect("view");
    println!(
        "10,000 shapes over {:.0}x{:.0} page px -> {}x{} px at scale {:.3}",
        view.area.w, view.area.h, view.width, view.height, view.scale
    );
    for run in 0..3 {
        let t = Instant::now();
        let svg = render_svg(&shapes, MAIN_PAGE, &view);
        let svg_ms = ms(t);
        let t = Instant::now();
        let png = render_png(&shapes, MAIN_PAGE, &view).expect("png");
        let png_ms = ms(t);
        println!(
            "run {run}: SVG {svg_ms:.0} ms ({} KB); SVG+PNG {png_ms:.0} ms ({} KB)",
            svg.len() / 1024,
            png.len() / 1024
        );
    }
    // Where the time goes: rasterizing, then encoding.
    let visible = fairyring::canvas::render::visible(&shapes, MAIN_PAGE, &view.area);
    let t = Instant::now();
    let pixmap = raster::pixmap(&visible, &view, &Budget::unlimited()).expect("pixmap");
    let raster_ms = ms(t);
    for effort in [PngEffort::Fast, PngEffort::Small] {
        let t = Instant::now();
        let png = raster::encode_png(&pixmap, effort).expect("png");
        println!(
            "rasterize {raster_ms:.0} ms; encode {effort:?} {:.0} ms ({} KB)",
            ms(t),
            png.len() / 1024
        );
    }
    let area =
        View::fit(Bounds::new(0.0, 0.0, 4000.0, 3000.0), 1.0, Caps::default()).expect("view");
    let t = Instant::now();
    let png = render_png(&shapes, MAIN_PAGE, &area).expect("png");
    println!(
        "4000x3000 area of it at 1:1: {:.0} ms, {} KB",
        ms(t),
        png.len() / 1024
    );

    // Hostile single shapes (issue 27), whole page to PNG, no time budget: what the caps cost.
    let mut text = dense_room(1).remove(0);
    text.props = fairyring::canvas::shape::ShapeProps::Text {
        text: "W".repeat(950_000),
        font_size: 2000.0,
        max_width: None,
        text_align: "middle".into(),
    };
    let mut stroke = dense_room(4).remove(3);
    stroke.props = fairyring::canvas::shape::ShapeProps::Draw {
        points: (0..60_000)
            .map(|k| ((k % 600) as f64 * 3.0, ((k * 37) % 1000) as f64))
            .collect(),
    };
    for (what, shape) in [
        ("950 KB text at fontSize 2000", text),
        ("60,000-point stroke", stroke),
    ] {
        let one = [shape];
        let view = View::content(&one, MAIN_PAGE, 1.0, Caps::default()).expect("view");
        let t = Instant::now();
        let png = render_png(&one, MAIN_PAGE, &view).expect("png");
        println!(
            "{what}: whole page to PNG {:.0} ms, {} KB",
            ms(t),
            png.len() / 1024
        );
    }

    let default_view = Bounds::new(1000.0, 1000.0, 1200.0, 800.0);
    let t = Instant::now();
    let shot = screenshot::take(&shapes, MAIN_PAGE, &default_view).expect("shot");
    println!(
        "screenshot of a 1200x800 view in it: {:.0} ms, {}x{} px, {} KB PNG, {} KB base64",
        ms(t),
        shot.width,
        shot.height,
        shot.bytes / 1024,
        shot.base64.len() / 1024
    );
    let fixture = support::render::shapes();
    let content = View::content(&fixture, MAIN_PAGE, 1.0, Caps::default())
        .expect("view")
        .area;
    let t = Instant::now();
    let shot = screenshot::take(&fixture, MAIN_PAGE, &content).expect("shot");
    println!(
        "screenshot of the fixture room ({:.0}x{:.0}): {:.0} ms, {}x{} px, {} KB PNG",
        content.w,
        content.h,
        ms(t),
        shot.width,
        shot.height,
        shot.bytes / 1024
    );
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// Where the time and memory of one whole-page export of a 50,000-shape stored room go (the
/// room of `fairyring bench --exports`): read from the store, decoded into a document, the
/// shapes listed, drawn to PNG.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run in release with --ignored --nocapture"]
async fn a_50000_shape_export_step_by_step() {
    use fairyring::ids::RoomName;
    use fairyring::store::Store;
    use yrs::updates::decoder::Decode;
    use yrs::{Transact, Update};
    let store: std::sync::Arc<dyn Store> =
        std::sync::Arc::new(fairyring::store::memory::MemoryStore::default());
    let room = RoomName::parse("big").expect("name");
    fairyring::bench::cold::seed(store.clone(), &room, 50_000)
        .await
        .expect("seed");
    let step =
        |what: &str, t: Instant| println!("{what}: {:.0} ms, RSS {:.0} MiB", ms(t), rss_mib());
    // The seeding's freed heap back to the system, so that each step's growth shows.
    // SAFETY: `malloc_trim` takes no pointer; any thread may call it.
    unsafe {
        libc::malloc_trim(0);
    }
    println!("seeded: RSS {:.0} MiB", rss_mib());
    let t = Instant::now();
    let stored = store.load(&room).await.expect("load");
    let stored = fairyring::store::StoredRoom {
        snapshot: stored.snapshot.map(|b| bytes::Bytes::from(b.to_vec())),
        updates: stored
            .updates
            .iter()
            .map(|b| bytes::Bytes::from(b.to_vec()))
            .collect(),
        last_seq: stored.last_seq,
    };
    step("read from the store (copied, as a database read does)", t);
    let t = Instant::now();
    let doc = yrs::Doc::new();
    {
        let mut txn = doc.transact_mut();
        for u in stored.snapshot.iter().chain(stored.updates.iter()) {
            txn.apply_update(Update::decode_v1(u).expect("update"))
                .expect("apply");
        }
    }
    drop(stored);
    step("decoded into a document", t);
    let t = Instant::now();
    let shapes = fairyring::canvas::shape::list_shapes(&doc.transact());
    step(&format!("{} shapes listed", shapes.len()), t);
    let t = Instant::now();
    let view = View::content(&shapes, MAIN_PAGE, 1.0, Caps::default()).expect("view");
    let svg = render_svg(&shapes, MAIN_PAGE, &view);
    step(
        &format!(
            "SVG {} KB ({}x{} px at {:.3})",
            svg.len() / 1024,
            view.width,
            view.height,
            view.scale
        ),
        t,
    );
    drop(svg);
    let t = Instant::now();
    let png = render_png(&shapes, MAIN_PAGE, &view).expect("png");
    step(&format!("PNG {} KB", png.len() / 1024), t);
}
