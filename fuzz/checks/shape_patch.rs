//! Fuzz check for `shape_patch` (shared by the cargo-fuzz target and `tests/sync/fuzz_corpus.rs`):
//! a JSON shape patch (the body of `PATCH /rooms/{room}/shapes`) is parsed, validated against
//! a small room ([`fairyring::canvas::patch::plan`]) and applied in one transaction, as the
//! server does. Must never panic, and:
//! 1. a refused patch changes nothing (the document encodes exactly as before);
//! 2. an applied one leaves every created and updated shape readable, every deleted one gone,
//!    no arrow or line bound to a missing shape, and only finite numbers;
//! 3. what it wrote is no larger than the plan's bound (what `--max-doc-bytes` is checked
//!    against), and the document still round-trips through its own encoding.

use fairyring::canvas::patch::{ShapePatch, apply, plan};
use fairyring::canvas::shape::{list_shapes, read_shape};
use fairyring::canvas::{ShapeProps, init_schema};
use serde_json::json;
use yrs::updates::decoder::Decode;
use yrs::{Doc, ReadTxn, StateVector, Transact, Update};

/// A room with a few shapes of every family, one arrow bound to two of them.
fn room() -> Doc {
    let doc = Doc::with_client_id(1);
    init_schema(&doc, "fuzz");
    let seed: ShapePatch = serde_json::from_value(json!({"create": [
        {"id": "a", "type": "rectangle", "x": 0, "y": 0, "w": 100, "h": 50, "text": "box"},
        {"id": "b", "type": "ellipse", "x": 200, "y": 0},
        {"id": "t", "type": "text", "text": "hello", "maxWidth": 300},
        {"id": "n", "type": "note", "text": "sticky"},
        {"id": "ar", "type": "arrow", "x1": 100, "y1": 25, "x2": 200, "y2": 25, "fromId": "a", "toId": "b"},
        {"id": "p", "type": "draw", "x": 5, "y": 5, "points": [0, 0, 10, 10, 20, 5]}
    ]}))
    .expect("seed patch");
    let mut txn = doc.transact_mut();
    let seeded = plan(&txn, &seed, "user:seed").expect("seed patch is valid");
    apply(&mut txn, &seeded);
    drop(txn);
    doc
}

fn encode(doc: &Doc) -> Vec<u8> {
    doc.transact()
        .encode_state_as_update_v1(&StateVector::default())
}

pub fn check(data: &[u8]) {
    let Ok(patch) = serde_json::from_slice::<ShapePatch>(data) else {
        return;
    };
    let doc = room();
    let before = encode(&doc);
    let mut txn = doc.transact_mut();
    let planned = plan(&txn, &patch, "user:fuzz");
    let Ok(planned) = planned else {
        drop(txn);
        assert_eq!(encode(&doc), before, "a refused patch changed the document");
        return;
    };
    apply(&mut txn, &planned);
    let written = txn.encode_update_v1();
    drop(txn);
    assert!(
        written.len() as u64 <= planned.bound(),
        "the patch wrote {} bytes, more than its bound {}",
        written.len(),
        planned.bound()
    );
    let txn = doc.transact();
    let applied = planned.applied();
    for id in applied.created.iter().chain(&applied.updated) {
        assert!(
            matches!(read_shape(&txn, id), Ok(Some(_))),
            "shape {id} is not readable after the patch"
        );
    }
    for id in &applied.deleted {
        assert_eq!(read_shape(&txn, id), Ok(None), "shape {id} was not deleted");
    }
    let shapes = list_shapes(&txn);
    let exists = |id: &str| shapes.iter().any(|s| s.id == id);
    for shape in &shapes {
        assert!(
            [shape.x, shape.y, shape.rotation]
                .iter()
                .all(|n| n.is_finite()),
            "{shape:?}"
        );
        if let ShapeProps::Connector(c) = &shape.props {
            for bound in [&c.from_id, &c.to_id].into_iter().flatten() {
                assert!(exists(bound), "{} is bound to missing {bound}", shape.id);
            }
        }
    }
    // The document round-trips through its own encoding.
    let state = txn.encode_state_as_update_v1(&StateVector::default());
    drop(txn);
    let copy = Doc::new();
    copy.transact_mut()
        .apply_update(Update::decode_v1(&state).expect("own encoding decodes"))
        .expect("own encoding applies");
    assert_eq!(
        copy.transact()
            .encode_state_as_update_v1(&StateVector::default()),
        state,
        "the document does not round-trip"
    );
}
