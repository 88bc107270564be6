//! A hostile frame's counts cannot make the server allocate what its bytes do not back: a
//! 10-byte update that claims 2^28 clients, and a state vector or an awareness update that
//! claims 2^28 entries, are refused without the room reserving a table of that size. It measures the process's
//! allocations with a counting global allocator (installed for the whole `sync` test binary,
//! counting only once armed), so it runs alone in a process of its own (`support::alone`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use fairyring::ids::RoomName;
use fairyring::room::{PeerInfo, RoomConfig, Rooms};

/// The system allocator, recording the largest single allocation asked for.
struct Largest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

/// Set in the process running this test alone: the other tests of the binary do not pay for the
/// count.
static ARMED: AtomicBool = AtomicBool::new(false);

unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) {
            LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) {
            LARGEST.fetch_max(new_size, Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Largest = Largest;

/// A y-sync `update` message carrying `update`.
fn update_message(update: &[u8]) -> Vec<u8> {
    let mut frame = vec![0, 2];
    let mut n = update.len();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            frame.push(byte);
            break;
        }
        frame.push(byte | 0x80);
    }
    frame.extend_from_slice(update);
    frame
}

#[tokio::test]
async fn counts_the_bytes_cannot_back_are_refused_before_any_allocation_of_their_size() {
    if !crate::support::alone::in_own_process(
        module_path!(),
        "counts_the_bytes_cannot_back_are_refused_before_any_allocation_of_their_size",
    ) {
        return;
    }
    ARMED.store(true, Ordering::Relaxed);
    let store: Arc<dyn fairyring::store::Store> =
        Arc::new(fairyring::store::memory::MemoryStore::default());
    let config = RoomConfig::from_serve(&fairyring::config::ServeConfig::for_test());
    let rooms = Rooms::new(store, config, 4);
    let room = rooms
        .get(&RoomName::parse("hostile").expect("name"))
        .await
        .expect("room");
    let (writer, _rx) = room
        .join(PeerInfo {
            conn: 1,
            name: None,
            sub: "w".into(),
            can_write: true,
        })
        .expect("join");
    // 2^28 clients (var u32 0x80 0x80 0x80 0x80 0x01), then one client's header, then nothing.
    let hostile = [0x80, 0x80, 0x80, 0x80, 0x01, 0x01, 0x05, 0x00, 0x00, 0x00];
    LARGEST.store(0, Ordering::Relaxed);
    let refused = writer.handle(&update_message(&hostile)).await;
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(refused.is_err(), "a truncated update is refused");
    assert!(
        largest < 1 << 20,
        "the room allocated {largest} bytes at once for a 10-byte update"
    );
    // The same count in a sync step 1's state vector and in an awareness update.
    let count = [0x80, 0x80, 0x80, 0x80, 0x01];
    for (what, head) in [("state vector", vec![0u8, 0]), ("awareness", vec![1u8])] {
        let mut frame = head;
        frame.push(count.len() as u8);
        frame.extend_from_slice(&count);
        let (peer, _rx) = room
            .join(PeerInfo {
                conn: 3,
                name: None,
                sub: "w".into(),
                can_write: true,
            })
            .expect("join");
        LARGEST.store(0, Ordering::Relaxed);
        let refused = peer.handle(&frame).await;
        let largest = LARGEST.load(Ordering::Relaxed);
        assert!(refused.is_err(), "{what}: a truncated message is refused");
        assert!(
            largest < 1 << 20,
            "{what}: the room allocated {largest} bytes at once for a {}-byte frame",
            frame.len()
        );
    }
    // The room is still usable by a new connection.
    let (_again, _rx) = room
        .join(PeerInfo {
            conn: 2,
            name: None,
            sub: "w".into(),
            can_write: true,
        })
        .expect("join after the refusal");
    drop(writer);
    rooms.shutdown().await;
}
