//! Replays every committed fuzz corpus (`fuzz/corpus/TARGET/*`) through the same check the
//! cargo-fuzz target runs (`fuzz/checks/TARGET.rs`), so crashes found once stay fixed, on stable.

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("corpus entry").path();
        if path.is_file() {
            let data = std::fs::read(&path).expect("corpus file");
            check(&data);
            n += 1;
        }
    }
    assert!(n > 0, "corpus {target} is empty");
}

#[path = "../../fuzz/checks/protocol.rs"]
mod protocol;

#[test]
fn protocol_corpus_replays() {
    replay("protocol", protocol::check);
}

#[path = "../../fuzz/checks/token.rs"]
mod token;

#[test]
fn token_corpus_replays() {
    replay("token", token::check);
}

#[path = "../../fuzz/checks/partial_json.rs"]
mod partial_json;

#[test]
fn partial_json_corpus_replays() {
    replay("partial_json", partial_json::check);
}

#[path = "../../fuzz/checks/action_stream.rs"]
mod action_stream;

#[test]
fn action_stream_corpus_replays() {
    replay("action_stream", action_stream::check);
}

#[path = "../../fuzz/checks/merge.rs"]
pub(crate) mod merge;

#[test]
fn merge_corpus_replays() {
    replay("merge", merge::check);
}

#[path = "../../fuzz/checks/render.rs"]
mod render;

#[test]
fn render_corpus_replays() {
    replay("render", render::check);
}

#[path = "../../fuzz/checks/shape_patch.rs"]
mod shape_patch;

#[test]
fn shape_patch_corpus_replays() {
    replay("shape_patch", shape_patch::check);
}
