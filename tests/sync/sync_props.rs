//! Property: whatever the interleaving in which peers' updates reach a room, every peer and
//! the room converge to the same document (through the real room pipeline, in process).

use std::sync::Arc;

use fairyring::ids::RoomName;
use fairyring::room::{PeerInfo, RoomConfig, Rooms};
use proptest::prelude::*;
use yrs::sync::{Message, SyncMessage};
use yrs::types::ToJson;
use yrs::updates::decoder::Decode;
use yrs::{Doc, Map, MapPrelim, ReadTxn, Transact, Update, WriteTxn};

#[derive(Debug, Clone)]
enum Op {
    Create { id: u8, x: i32 },
    Move { id: u8, x: i32 },
    Recolor { id: u8, color: u8 },
    Delete { id: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..6, -1000i32..1000).prop_map(|(id, x)| Op::Create { id, x }),
        (0u8..6, -1000i32..1000).prop_map(|(id, x)| Op::Move { id, x }),
        (0u8..6, 0u8..4).prop_map(|(id, color)| Op::Recolor { id, color }),
        (0u8..6).prop_map(|id| Op::Delete { id }),
    ]
}

/// Applies an op locally and returns the update it produced (if any).
fn apply(doc: &Doc, op: &Op) -> Option<Vec<u8>> {
    let before = doc.transact().state_vector();
    {
        let mut txn = doc.transact_mut();
        let shapes = txn.get_or_insert_map("shapes");
        match op {
            Op::Create { id, x } => {
                shapes.insert(
                    &mut txn,
                    format!("s{id}"),
                    MapPrelim::from([("x", yrs::Any::from(f64::from(*x)))]),
                );
            }
            Op::Move { id, x } => {
                if let Some(yrs::Out::YMap(shape)) = shapes.get(&txn, &format!("s{id}")) {
                    shape.insert(&mut txn, "x", f64::from(*x));
                }
            }
            Op::Recolor { id, color } => {
                if let Some(yrs::Out::YMap(shape)) = shapes.get(&txn, &format!("s{id}")) {
                    let colors = ["red", "blue", "green", "black"];
                    shape.insert(&mut txn, "color", colors[usize::from(*color) % 4]);
                }
            }
            Op::Delete { id } => {
                shapes.remove(&mut txn, &format!("s{id}"));
            }
        }
    }
    let update = doc.transact().encode_diff_v1(&before);
    (update.len() > 2).then_some(update)
}

fn frame(update: Vec<u8>) -> Vec<u8> {
    use yrs::updates::encoder::Encode;
    Message::Sync(SyncMessage::Update(update)).encode_v1()
}

fn apply_frame(doc: &Doc, bytes: &[u8]) {
    if let Ok(Message::Sync(SyncMessage::SyncStep2(u) | SyncMessage::Update(u))) =
        Message::decode_v1(bytes)
    {
        let update = Update::decode_v1(&u).expect("room sends valid updates");
        doc.transact_mut().apply_update(update).expect("applies");
    }
}

/// The shapes as a JSON value (object key order does not matter).
fn shapes_json(doc: &Doc) -> serde_json::Value {
    let shapes = doc.get_or_insert_map("shapes");
    serde_json::to_value(shapes.to_json(&doc.transact())).expect("json")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_interleavings_converge(
        scripts in proptest::collection::vec(proptest::collection::vec(op(), 1..12), 2..5),
        order in proptest::collection::vec(0usize..4, 0..64),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let store: Arc<dyn fairyring::store::Store> = Arc::new(fairyring::store::memory::MemoryStore::default());
            let rooms = Rooms::new(store, RoomConfig::from_serve(&fairyring::config::ServeConfig::for_test()), 10);
            let room = rooms.get(&RoomName::parse("prop").expect("name")).await.expect("room");
            let mut peers = Vec::new();
            for (i, script) in scripts.iter().enumerate() {
                let doc = Doc::new();
                let updates: Vec<Vec<u8>> = script.iter().filter_map(|op| apply(&doc, op)).collect();
                let info = PeerInfo { conn: 1000 + i as u64, name: None, sub: format!("u{i}"), can_write: true };
                let (peer, rx) = room.join(info).expect("join");
                peers.push((doc, updates.into_iter(), peer, rx));
            }
            // Deliver peers' updates in the random order, then whatever is left.
            let n = peers.len();
            for pick in order.iter().map(|p| p % n).chain((0..n).flat_map(|i| std::iter::repeat_n(i, 12))) {
                let (_, updates, peer, _) = &mut peers[pick];
                if let Some(update) = updates.next() {
                    peer.handle(&frame(update)).await.expect("valid update accepted");
                }
            }
            room.flushed().await;
            for (doc, _, _, rx) in peers.iter_mut() {
                while let Ok(bytes) = rx.try_recv() {
                    apply_frame(doc, &bytes);
                }
            }
            let expected = shapes_json(room.doc());
            for (doc, ..) in &peers {
                prop_assert_eq!(&shapes_json(doc), &expected);
            }
            Ok(())
        })?;
    }
}
