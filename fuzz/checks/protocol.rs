//! Fuzz check for the message decoder and the room apply path: arbitrary frames from a writer
//! and a read-only peer into a real in-memory room that already holds what the server writes
//! (a fairy with a chat, a project, a task: [`seed`]). Invariants: no panic; a refused frame
//! leaves the room usable; everything the room sends a peer is a valid y-protocols message; the
//! room's document always re-encodes to a state a fresh document accepts unchanged; nothing a
//! peer sends changes the server-owned roots (`fairies`, `projects`, `tasks`, `meta`).

use std::sync::{Arc, OnceLock};

use fairyring::ids::RoomName;
use fairyring::room::{PeerInfo, RoomConfig, Rooms};
use yrs::updates::decoder::Decode;
use yrs::{Doc, ReadTxn, StateVector, Transact, Update};

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    })
}

/// Splits the input into frames: each frame is prefixed by one length byte (0..=255) and one
/// byte choosing the sender (even: writer, odd: read-only peer).
fn frames(data: &[u8]) -> Vec<(bool, &[u8])> {
    let mut out = Vec::new();
    let mut rest = data;
    while let [len, who, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        out.push((who % 2 == 0, &tail[..n]));
        rest = &tail[n..];
    }
    out
}

pub fn check(data: &[u8]) {
    // The room contains yrs's panics on hostile updates (catch_unwind at the boundary);
    // libFuzzer's hook would abort on those caught panics, so replace it with a quiet one: a
    // panic that escapes the room still aborts the run through libfuzzer-sys's own catch. With
    // `FUZZ_VERBOSE` set, every panic (contained or not) is printed with its backtrace, to see
    // where a crash comes from.
    #[cfg(fuzzing)]
    {
        static QUIET: OnceLock<()> = OnceLock::new();
        QUIET.get_or_init(|| {
            let verbose = std::env::var_os("FUZZ_VERBOSE").is_some();
            std::panic::set_hook(Box::new(move |info| {
                if verbose {
                    eprintln!("{info}\n{}", std::backtrace::Backtrace::force_capture());
                }
            }))
        });
    }
    runtime().block_on(async {
        let store: Arc<dyn fairyring::store::Store> =
            Arc::new(fairyring::store::memory::MemoryStore::default());
        let config = RoomConfig::from_serve(&fairyring::config::ServeConfig::for_test());
        let rooms = Rooms::new(store, config, 4);
        let room = rooms
            .get(&RoomName::parse("fuzz").expect("name"))
            .await
            .expect("room");
        let writer_info = PeerInfo {
            conn: 1,
            name: None,
            sub: "w".into(),
            can_write: true,
        };
        let reader_info = PeerInfo {
            conn: 2,
            name: None,
            sub: "r".into(),
            can_write: false,
        };
        seed(room.doc());
        let owned_before = server_owned(room.doc());
        let (mut writer, _writer_rx) = room.join(writer_info.clone()).expect("join");
        let (reader, mut reader_rx) = room.join(reader_info).expect("join");
        let mut writer_open = true;
        let mut reader_open = true;
        for (from_writer, frame) in frames(data) {
            if from_writer && writer_open {
                if writer.handle(frame).await.is_err() {
                    // The edge would close this socket; a new connection takes its place.
                    writer_open = false;
                }
            } else if !from_writer && reader_open && reader.handle(frame).await.is_err() {
                reader_open = false;
            }
            if !writer_open {
                writer = room
                    .join(PeerInfo {
                        conn: 3,
                        ..writer_info.clone()
                    })
                    .expect("rejoin")
                    .0;
                writer_open = true;
            }
        }
        room.flushed().await;
        while let Ok(bytes) = reader_rx.try_recv() {
            fairyring::protocol::decode(&bytes).expect("room sent an invalid frame");
        }
        let state = room
            .doc()
            .transact()
            .encode_state_as_update_v1(&StateVector::default());
        let copy = Doc::new();
        copy.transact_mut()
            .apply_update(Update::decode_v1(&state).expect("room state decodes"))
            .expect("room state applies");
        assert_eq!(
            known_clocks(&copy.transact().state_vector()),
            known_clocks(&room.doc().transact().state_vector()),
            "room state does not round-trip"
        );
        assert_eq!(
            server_owned(room.doc()),
            owned_before,
            "a peer changed a server-owned root"
        );
        drop((writer, reader));
        rooms.shutdown().await;
    });
}

/// What the server writes into a room with fairies at work, at fixed ids and clocks (the
/// server's client id 1, after the schema): the fairy `f-a` with a one-item chat, the project
/// `p-a` and its task `p-a/t1`. Inputs can then name these items as parents and origins.
pub fn seed(doc: &Doc) {
    use yrs::{Any, Array, ArrayPrelim, Map, MapPrelim, WriteTxn};
    let mut txn = doc.transact_mut_with(fairyring::origin::TxnOrigin::System);
    let fairies = txn.get_or_insert_map("fairies");
    let fairy = fairies.insert(
        &mut txn,
        "f-a",
        MapPrelim::from([
            ("name", Any::from("Ash")),
            ("personality", Any::from("calm")),
            ("hat", Any::from("crown")),
            ("createdBy", Any::from("user:w")),
        ]),
    );
    let chat = fairy.insert(&mut txn, "chat", ArrayPrelim::default());
    chat.push_back(
        &mut txn,
        MapPrelim::from([("role", Any::from("user")), ("text", Any::from("hi"))]),
    );
    let projects = txn.get_or_insert_map("projects");
    projects.insert(
        &mut txn,
        "p-a",
        MapPrelim::from([
            ("title", Any::from("house")),
            ("orchestratorId", Any::from("f-a")),
            ("status", Any::from("active")),
        ]),
    );
    let tasks = txn.get_or_insert_map("tasks");
    tasks.insert(
        &mut txn,
        "p-a/t1",
        MapPrelim::from([("text", Any::from("a roof")), ("x", Any::from(0.0))]),
    );
}

/// The server-owned roots' content, as JSON (the seed is shallow; anything a peer nested there
/// would be a find anyway).
fn server_owned(doc: &Doc) -> Vec<serde_json::Value> {
    use yrs::types::ToJson;
    let txn = doc.transact();
    ["fairies", "projects", "tasks", "meta"]
        .into_iter()
        .map(|root| {
            let mut text = String::new();
            if let Some(map) = txn.get_map(root) {
                map.to_json(&txn).to_json(&mut text);
            }
            serde_json::from_str(&text).unwrap_or(serde_json::Value::Null)
        })
        .collect()
}

/// A state vector without its zero clocks. A client at clock 0 is one nothing was integrated
/// from, which is what an absent entry means too (`StateVector::get` answers 0 for both; peers
/// answer a step 1 the same either way): yrs lists such a client after applying an update whose
/// pending blocks or delete set named it, so a fresh document may list one the room does not.
fn known_clocks(sv: &StateVector) -> std::collections::BTreeMap<yrs::block::ClientID, u32> {
    sv.iter()
        .filter(|(_, clock)| **clock > 0)
        .map(|(client, clock)| (*client, *clock))
        .collect()
}
