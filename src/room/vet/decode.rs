//! Decoding peers' and stored v1 updates, and refusing the ones yrs would mishandle (legacy
//! JSON content, clocks that overflow `u32`) before any document sees them (see the parent module's "Hostile updates"). Owns no state; must not
//! touch a document.

use yrs::updates::decoder::Decode;
use yrs::{StateVector, Update};

use crate::room::RoomError;

use super::roots::{DeleteRange, Id, Link, RootIndex, ServerRoot, Violation, WalkedItem};

/// Decodes a peer's (or a stored) v1 update and vets its structure before any document sees
/// it. yrs 0.28's decoder can panic on hostile lengths; decoding touches no shared state, so
/// such a panic is caught and the update refused. Updates yrs decodes but mishandles are
/// refused here too, before they reach a document: legacy JSON content (see [`vet`]) and
/// clock arithmetic that does not fit yrs's `u32` clocks (see [`Refusal::ClockOverflow`]),
/// which is checked explicitly rather than left to an overflow panic (release builds keep
/// overflow checks on, but a build without them would wrap into a corrupt document).
pub(crate) fn decode_update(bytes: &[u8]) -> Result<Update, RoomError> {
    decode(bytes, None).map(|(update, _)| update)
}

/// A fresh document holding a stored room (its snapshot, then its updates in order); an
/// update that does not decode or apply is skipped with a warning. CPU work: off the async
/// threads for a large room.
pub(crate) fn doc_from_stored(stored: &crate::store::StoredRoom) -> yrs::Doc {
    use yrs::Transact;
    let doc = yrs::Doc::new();
    {
        let mut txn = doc.transact_mut();
        for bytes in stored.snapshot.iter().chain(stored.updates.iter()) {
            let applied = decode_update(bytes)
                .map_err(|e| e.to_string())
                .and_then(|u| txn.apply_update(u).map_err(|e| e.to_string()));
            if let Err(error) = applied {
                tracing::warn!(%error, "read: skipping an unreadable stored update");
            }
        }
    }
    doc
}

/// The items and deletes of an update the room's document emitted (its own encoding, which
/// the walk reads like any other), for the room's [`RootIndex`].
pub(crate) fn walk_emitted(bytes: &[u8]) -> Option<Walked> {
    let walked = crate::contain::contain(|| walk(bytes, None, 0))
        .ok()?
        .ok()?;
    walked.refusal.is_none().then_some(walked.places)
}

/// [`decode_update`] for a peer's update, which must also not carry blocks of the room's own
/// client id (`server`, this node's [`super::RoomConfig::client_id`]) beyond what the room has:
/// returns the update and the end clock of its server-client blocks (0 when it has none), for
/// the room to compare with its state vector. Only the server writes as that client; a peer that does would collide with
/// the room's own clock, and yrs then keeps part of the peer's blocks pending in the room but
/// integrates them in a fresh document — the stored state would differ from what peers hold.
///
/// `known` is the room's state vector: a block that repeats clocks the room has must depend only
/// on what the room has (see [`Refusal::MissingDependency`]). `index` places the room's items:
/// an update that writes or deletes under a server-owned root is refused
/// ([`RoomError::ServerOwned`]), and so is one that nests shared types deeper than
/// [`super::roots::MAX_NESTING`] ([`Refusal::NestedTooDeep`]).
pub(crate) fn decode_peer_update(
    bytes: &[u8],
    known: &StateVector,
    index: &RootIndex,
    server: u64,
) -> Result<(Update, u32), RoomError> {
    decode(bytes, Some((known, index, server))).map(|(update, walk)| (update, walk.server_end))
}

fn decode(
    bytes: &[u8],
    room: Option<(&StateVector, &RootIndex, u64)>,
) -> Result<(Update, Walk), RoomError> {
    // The walk goes first: it allocates nothing from the counts it reads, so a count that the
    // bytes cannot back (a 10-byte update claiming 2^28 clients) fails there at the end of the
    // input, before yrs's decoder reserves a table of that size (hashbrown writes one control
    // byte per bucket: hundreds of MB touched per frame, then freed).
    let decoded = crate::contain::contain(|| {
        let walked = walk(
            bytes,
            room.map(|(known, _, _)| known),
            room.map_or(0, |(_, _, server)| server),
        )?;
        if let Some(refusal) = walked.refusal {
            return Ok(Err(RoomError::BadUpdate(refusal.to_string())));
        }
        if let Some((known, index, _)) = room {
            match index.check(&walked.places.items, &walked.places.deletes, known) {
                Some(Violation::ServerOwned(root)) => {
                    return Ok(Err(RoomError::ServerOwned(root)));
                }
                Some(Violation::TooDeep) => {
                    return Ok(Err(RoomError::BadUpdate(
                        Refusal::NestedTooDeep.to_string(),
                    )));
                }
                None => {}
            }
        }
        Ok::<_, yrs::encoding::read::Error>(Ok((Update::decode_v1(bytes)?, walked)))
    });
    match decoded {
        Ok(Ok(decoded)) => decoded,
        Ok(Err(error)) => Err(RoomError::BadUpdate(error.to_string())),
        Err(panic) => {
            tracing::debug!(%panic, "yrs's decoder panicked on an update");
            Err(RoomError::BadUpdate("malformed update".into()))
        }
    }
}

/// What [`walk`] found.
struct Walk {
    refusal: Option<Refusal>,
    /// End clock (first clock after) of the update's blocks of the server's client id.
    server_end: u32,
    /// The update's items and deletes, for [`RootIndex`] (empty when refused).
    places: Walked,
}

/// An update's items (with how each finds its parent) and delete-set ranges.
#[derive(Default)]
pub(crate) struct Walked {
    pub items: Vec<WalkedItem>,
    pub deletes: Vec<DeleteRange>,
}

impl Walked {
    /// Records them in the room's index (an update the document integrated).
    pub(crate) fn record_in(&self, index: &mut RootIndex) {
        index.record(&self.items, &self.deletes);
    }
}

/// Why a v1 update that yrs decodes must not reach a document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// A block of legacy JSON content (content ref 2, Yjs's `ContentJSON`).
    #[error("legacy JSON content (Yjs ContentJSON) is not supported")]
    JsonContent,
    /// A client's first clock plus the lengths of its blocks, or a delete-set range's clock
    /// plus its length, does not fit in `u32`: yrs adds them (`clock += block.len()` in
    /// `Update::decode`, `clock..clock + len` in `IdRange` decoding and wherever a block's end
    /// is computed), which panics with overflow checks and wraps without them — then what the
    /// document holds no longer round-trips through its own encoding.
    #[error("clock overflow: client {client}'s clocks run past 2^32")]
    ClockOverflow {
        /// The client whose clocks overflow.
        client: u64,
    },
    /// A client id of 2^53 or more (Yjs ids are 53-bit): yrs's `ClientID::new` asserts
    /// against it in debug builds and silently drops the high bits in release builds, where
    /// such a client would then be mistaken for another.
    #[error("client id {0} is over 53 bits")]
    ClientIdTooLarge(u64),
    /// One client's blocks in two groups of the update. Yjs and yrs write each client once;
    /// yrs's decoder appends a second group to the first, so clocks go backwards (blocks that
    /// overlap ones already listed), and the document keeps pending what a fresh document,
    /// given the room's own re-encoding, integrates.
    #[error("client {0} appears twice in the update's blocks")]
    DuplicateClient(u64),
    /// An `Any` value (a map or array property) nested deeper than [`MAX_ANY_DEPTH`]: yrs
    /// decodes nesting by recursion, and deep enough nesting overflows the stack, which aborts
    /// the process (found by reading `Any::decode` after the `protocol` target's allocation
    /// guard tripped on it).
    #[error("a value is nested deeper than {MAX_ANY_DEPTH} levels")]
    TooDeep,
    /// An `Any` map or array that claims more entries than the update has bytes: yrs reserves
    /// the claimed count before reading (hashbrown initialises a control byte per bucket, so a
    /// 30-byte update claiming 2^28 entries touched 256 MB; found by the `protocol` target's
    /// allocation guard).
    #[error("a value claims {0} entries, more than the update's bytes can hold")]
    CountTooLarge(u64),
    /// A client's block that starts past the room's clock for that client and past the client's
    /// blocks before it in the update (a skip leaves a gap): the clocks between
    /// are missing, so yrs would keep the blocks pending (or, for a GC block, integrate it at
    /// once, where Yjs waits: the room's state vector would jump over clocks it never had while
    /// a fresh document given the room's encoding keeps them pending; found by the `protocol`
    /// fuzz target, the two disagreeing on client 61 by 3,077,018,431 clocks). A client sends its
    /// blocks from the clock the room has, so it never starts with a gap.
    #[error(
        "client {client}'s block at clock {clock} starts past the room's {known} and the update's blocks before it"
    )]
    StartsAfterGap {
        /// The client.
        client: u64,
        /// Where the update's blocks of the client start.
        clock: u32,
        /// The room's clock for the client.
        known: u32,
    },
    /// A peer's block holding a subdocument (content ref 9, Yjs's `ContentDoc`). The canvas
    /// schema has none, and yrs 0.28.1 leaks every document that holds one: integrating it
    /// stores a strong handle of the parent document inside the parent's own item
    /// (`ItemContent::Doc(Some(parent), _)`, `Item::integrate_content` in `src/block.rs`), a
    /// reference cycle, so the room's whole document stays allocated after the room unloads
    /// (found by the `protocol` fuzz target's growing RSS; valgrind: the document's store
    /// "definitely lost" once per run). Stored updates are not refused (a room stored with one
    /// still loads; see `Room::new`).
    #[error("subdocuments (Yjs ContentDoc) are not supported")]
    Subdocument,
    /// Shared types (maps, arrays) nested deeper than [`super::roots::MAX_NESTING`] levels
    /// under a root: readers that walk nested types by recursion (yrs's `ToJson`, serde)
    /// overflow their stack on deep enough nesting (a 243 KB update of 20,000 nested maps
    /// aborted the server at the next prompt that read them).
    #[error("shared types nested deeper than {} levels", super::roots::MAX_NESTING)]
    NestedTooDeep,
    /// A block whose origin, right origin or parent is neither in the room nor earlier in the
    /// update. yrs keeps such a block pending, and pending blocks are where the room's document
    /// and a fresh document given its encoding part ways (three `protocol` fuzz finds: a pending
    /// block overlapping a later GC block of the same client came back integrated, 1 against 12
    /// clocks). A client's update depends only on what the room sent it and on itself, so the
    /// room never holds pending blocks.
    ///
    /// A block that repeats clocks the room already has must depend on the room alone (not on
    /// the update's other blocks): a repeat of what the room integrated depends only on what
    /// the room had then, so one with another dependency is a different item under an id
    /// already taken. yrs keeps it pending beside the room's item, the room's encoding carries
    /// the pending copy, and a fresh document given that encoding integrates it (a fourth
    /// `protocol` fuzz find: the room at clock 3 for a client, its re-encoding at 134).
    #[error(
        "client {client}'s block at clock {clock} depends on {dep_client}#{dep_clock}, which the room lacks"
    )]
    MissingDependency {
        /// The block's client.
        client: u64,
        /// The block's first clock.
        clock: u32,
        /// The missing item's client.
        dep_client: u64,
        /// The missing item's clock.
        dep_clock: u32,
    },
}

/// Largest client id plus one (Yjs client ids are 53-bit, safe JavaScript integers).
const CLIENT_ID_LIMIT: u64 = 1 << 53;

/// Walks a v1 update the way yrs decodes it and returns why it must be refused, if it must.
///
/// - Legacy JSON content: yrs 0.28.1 decodes it off by one: `ItemContent::decode`
///   (`src/block.rs`, the `BLOCK_ITEM_JSON_REF_NUMBER` arm) reads `len + 1` strings
///   (`while remaining >= 0`), where Yjs and yrs's own encoder write `len` of them. The block is
///   misread, and what yrs later encodes from it does not decode again: a pending update holding
///   it makes every `encode_state_as_update_v1` (compaction, snapshots) panic on the `unwrap` in
///   `merge_pending_v1` (`src/transaction.rs`), and an integrated one makes the update the room
///   persists, and every later snapshot, unreadable. Yjs 13 writes `ContentAny` and only reads
///   `ContentJSON` for documents of older versions, so no current client sends it.
/// - Clock arithmetic: each client's blocks start at the clock the update names and follow one
///   another; the end of the last (start + every length) must fit in `u32`, and so must the end
///   of every delete-set range.
///
/// The walk mirrors `Update::decode` (`src/update.rs`) and `IdSet::decode` (`src/id_set.rs`)
/// with yrs's own decoder and `ItemContent::decode`, so it consumes exactly the bytes yrs does
/// up to the first JSON block. Returns the decoder's error when the bytes do not parse (the
/// caller decoded them successfully first, so that does not happen).
#[cfg(test)]
fn vet(bytes: &[u8]) -> Result<Option<Refusal>, yrs::encoding::read::Error> {
    walk(bytes, None, 0).map(|w| w.refusal)
}

/// Deepest nesting of arrays and maps in one `Any` value (serde_json's limit for JSON).
const MAX_ANY_DEPTH: usize = 128;

/// Reads past one lib0 `Any` value the way `Any::decode` (yrs `src/any.rs`) reads it, without
/// building it: a nesting deeper than [`MAX_ANY_DEPTH`] or a count larger than the update's
/// `limit` bytes is refused. `Any::decode` recurses once per level (a 200 KB update of nested
/// one-element arrays overflows the stack and aborts the whole server) and reserves what a
/// count claims before reading a value (a map of 2^28 entries declared in 30 bytes makes
/// hashbrown allocate and initialise hundreds of MB).
fn skip_any(
    decoder: &mut yrs::updates::decoder::DecoderV1,
    limit: usize,
    depth: usize,
) -> Result<Option<Refusal>, yrs::encoding::read::Error> {
    use yrs::encoding::read::Read;
    if depth >= MAX_ANY_DEPTH {
        return Ok(Some(Refusal::TooDeep));
    }
    match decoder.read_u8()? {
        127 | 126 | 121 | 120 => {}
        125 => {
            decoder.read_var::<i64>()?;
        }
        124 => {
            decoder.read_f32()?;
        }
        123 => {
            decoder.read_f64()?;
        }
        122 => {
            decoder.read_i64()?;
        }
        119 => {
            decoder.read_string()?;
        }
        // A map (its entries keyed by a string) or an array.
        tag @ (118 | 117) => {
            let len: usize = decoder.read_var()?;
            if len > limit {
                return Ok(Some(Refusal::CountTooLarge(len as u64)));
            }
            for _ in 0..len {
                if tag == 118 {
                    decoder.read_string()?;
                }
                if let Some(refusal) = skip_any(decoder, limit, depth + 1)? {
                    return Ok(Some(refusal));
                }
            }
        }
        116 => {
            decoder.read_buf()?;
        }
        _ => return Err(yrs::encoding::read::Error::UnexpectedValue),
    }
    Ok(None)
}

fn refuse(refusal: Refusal) -> Walk {
    Walk {
        refusal: Some(refusal),
        server_end: 0,
        places: Walked::default(),
    }
}

/// The walk behind [`vet`], which also measures the server client's blocks.
/// `server`: the client id whose blocks' end clock is reported (`Walk::server_end`; 0: none).
fn walk(
    bytes: &[u8],
    known: Option<&StateVector>,
    server: u64,
) -> Result<Walk, yrs::encoding::read::Error> {
    use yrs::block::{
        BLOCK_GC_REF_NUMBER, BLOCK_ITEM_ANY_REF_NUMBER, BLOCK_ITEM_DOC_REF_NUMBER,
        BLOCK_ITEM_JSON_REF_NUMBER, BLOCK_SKIP_REF_NUMBER, HAS_ORIGIN, HAS_PARENT_SUB,
        HAS_RIGHT_ORIGIN, ItemContent,
    };
    use yrs::encoding::read::Read;
    use yrs::updates::decoder::{Decoder, DecoderV1};

    let mut decoder = DecoderV1::from(bytes);
    // v1 encodes a client id as a var u64 (read raw here: yrs's `read_client` would mask it)
    // and an id as client then clock (var u32).
    macro_rules! client {
        () => {{
            let client: u64 = decoder.read_var()?;
            if client >= CLIENT_ID_LIMIT {
                return Ok(refuse(Refusal::ClientIdTooLarge(client)));
            }
            client
        }};
    }
    // An id (client, clock) a block depends on; the room must have it when the block repeats
    // clocks the room has (`repeat` is set per block below).
    let has = |client: u64, clock: u32| {
        known.is_none_or(|sv| clock < sv.get(&yrs::block::ClientID::new(client)))
    };
    // Dependencies the room lacks (only with a room): (client, clock, dep client, dep clock).
    let mut deps: Vec<(u64, u32, u64, u32)> = Vec::new();
    macro_rules! id {
        ($repeat:expr, $client:expr, $clock:expr) => {{
            let dep_client = client!();
            let dep_clock = decoder.read_var::<u32>()?;
            let dep: Id = (dep_client, dep_clock);
            if !has(dep_client, dep_clock) {
                if $repeat || (dep_client == $client && dep_clock >= $clock) {
                    // A repeat depends on the room alone; and its own client's later clocks
                    // are never integrable.
                    return Ok(refuse(Refusal::MissingDependency {
                        client: $client,
                        clock: $clock,
                        dep_client,
                        dep_clock,
                    }));
                }
                // Maybe earlier in the update: checked once every client's end is known.
                deps.push(($client, $clock, dep_client, dep_clock));
            }
            dep
        }};
    }
    let mut items: Vec<WalkedItem> = Vec::new();
    let mut server_end = 0u32;
    let mut gap = None;
    // The clocks each client's blocks in this update cover, as ranges (first clock to one past
    // the last). A skip block covers nothing: it stands for clocks the update does not carry
    // (a fifth `protocol` fuzz find: an item whose parent was in a client's skip passed as
    // "earlier in the update" and stayed pending). A client appears once; one listed with no
    // blocks covers nothing.
    let mut ends: std::collections::HashMap<u64, Vec<(u32, u32)>> =
        std::collections::HashMap::new();
    let clients: u32 = decoder.read_var()?;
    for _ in 0..clients {
        let blocks: u32 = decoder.read_var()?;
        let client = client!();
        if ends.contains_key(&client) {
            return Ok(refuse(Refusal::DuplicateClient(client)));
        }
        let overflow = Refusal::ClockOverflow { client };
        let mut clock: u32 = decoder.read_var()?;
        let mut carried: Vec<(u32, u32)> = Vec::new();
        // With a room: how far the room and this update's blocks so far cover the client's
        // clocks. A block (not a skip) must start within it.
        let room_clock = known.map(|sv| sv.get(&yrs::block::ClientID::new(client)));
        let mut covered = room_clock;
        for _ in 0..blocks {
            let info = decoder.read_info()?;
            // A gap is reported after the walk, so that what the block holds (legacy JSON, a
            // clock overflow) is named first.
            if let (Some(room_clock), Some(reach)) = (room_clock, covered)
                && info != BLOCK_SKIP_REF_NUMBER
                && clock > reach
                && gap.is_none()
            {
                gap = Some(Refusal::StartsAfterGap {
                    client,
                    clock,
                    known: room_clock,
                });
            }
            // The block repeats clocks the room has (always false without a room).
            let repeat = room_clock.is_some_and(|room_clock| clock < room_clock);
            let len: u32 = match info {
                BLOCK_SKIP_REF_NUMBER => decoder.read_var::<u32>()?,
                BLOCK_GC_REF_NUMBER => decoder.read_len()?,
                info => {
                    // `ItemContent::decode` dispatches on the low four bits.
                    if info & 0b1111 == BLOCK_ITEM_JSON_REF_NUMBER {
                        return Ok(refuse(Refusal::JsonContent));
                    }
                    let left = if info & HAS_ORIGIN != 0 {
                        Some(id!(repeat, client, clock))
                    } else {
                        None
                    };
                    let right = if info & HAS_RIGHT_ORIGIN != 0 {
                        Some(id!(repeat, client, clock))
                    } else {
                        None
                    };
                    let link = if info & (HAS_ORIGIN | HAS_RIGHT_ORIGIN) == 0 {
                        let link = if decoder.read_parent_info()? {
                            Link::Root(ServerRoot::of(decoder.read_string()?))
                        } else {
                            Link::Parent(id!(repeat, client, clock))
                        };
                        if info & HAS_PARENT_SUB != 0 {
                            decoder.read_string()?;
                        }
                        link
                    } else {
                        Link::Origins(left, right)
                    };
                    // An empty item is dropped by yrs without advancing the clock (len 0).
                    let len = match info & 0b1111 {
                        // Content that holds `Any` values is walked here instead: yrs decodes
                        // them recursively and reserves what their counts claim.
                        BLOCK_ITEM_ANY_REF_NUMBER => {
                            let count: u32 = decoder.read_len()?;
                            for _ in 0..count {
                                if let Some(refusal) = skip_any(&mut decoder, bytes.len(), 0)? {
                                    return Ok(refuse(refusal));
                                }
                            }
                            count
                        }
                        BLOCK_ITEM_DOC_REF_NUMBER => {
                            if known.is_some() {
                                return Ok(refuse(Refusal::Subdocument));
                            }
                            decoder.read_string()?;
                            if let Some(refusal) = skip_any(&mut decoder, bytes.len(), 0)? {
                                return Ok(refuse(refusal));
                            }
                            1
                        }
                        _ => ItemContent::decode(&mut decoder, info)?.len_utf16(),
                    };
                    if let Some(end) = clock.checked_add(len)
                        && end > clock
                    {
                        items.push(WalkedItem {
                            client,
                            start: clock,
                            end,
                            link,
                        });
                    }
                    len
                }
            };
            match clock.checked_add(len) {
                Some(next) => {
                    if info != BLOCK_SKIP_REF_NUMBER {
                        covered = covered.map(|reach| reach.max(next));
                        match carried.last_mut() {
                            Some((_, end)) if *end == clock => *end = next,
                            _ if next > clock => carried.push((clock, next)),
                            _ => {}
                        }
                    }
                    if client == server && server != 0 && len > 0 && info != BLOCK_SKIP_REF_NUMBER {
                        server_end = server_end.max(next);
                    }
                    clock = next
                }
                None => return Ok(refuse(overflow)),
            }
        }
        ends.insert(client, carried);
    }
    if let Some(gap) = gap {
        return Ok(refuse(gap));
    }
    for (client, clock, dep_client, dep_clock) in deps {
        if !ends.get(&dep_client).is_some_and(|ranges| {
            ranges
                .iter()
                .any(|(start, end)| (*start..*end).contains(&dep_clock))
        }) {
            return Ok(refuse(Refusal::MissingDependency {
                client,
                clock,
                dep_client,
                dep_clock,
            }));
        }
    }
    // The delete set: per client, ranges of (clock, len); yrs builds `clock..clock + len`.
    let mut deletes = Vec::new();
    let clients: u32 = decoder.read_var()?;
    for _ in 0..clients {
        let client = client!();
        let ranges: u32 = decoder.read_var()?;
        for _ in 0..ranges {
            let clock = decoder.read_ds_clock()?;
            let len = decoder.read_ds_len()?;
            let Some(end) = clock.checked_add(len) else {
                return Ok(refuse(Refusal::ClockOverflow { client }));
            };
            deletes.push(DeleteRange {
                client,
                start: clock,
                end,
            });
        }
    }
    Ok(Walk {
        refusal: None,
        server_end,
        places: Walked { items, deletes },
    })
}

#[cfg(test)]
pub(in crate::room) mod tests {
    use super::*;
    use yrs::updates::encoder::Encode;
    use yrs::{
        Any, Array, ArrayPrelim, Doc, Map, MapPrelim, ReadTxn, StateVector, Text, TextPrelim,
        Transact, WriteTxn, Xml, XmlElementPrelim, XmlFragment, XmlTextPrelim,
    };

    /// The first (writer) frame of the 90-byte fuzz find: a JSON block under an unknown parent.
    pub(crate) const FUZZ_FIND: &[u8] = &[
        0x00, 0x02, 0x19, 0x01, 0x01, 0xbd, 0xf8, 0x01, 0x61, 0x02, 0x00, 0x00, 0xb7, 0xbe, 0xc7,
        0xa3, 0x01, 0x00, 0x01, 0x26, 0x01, 0x7d, 0x01, 0x65, 0x78, 0x74, 0x01, 0x77,
    ];

    /// v1 updates with a JSON block (content ref 2) that yrs 0.28.1 decodes without error.
    pub(crate) fn json_updates() -> Vec<(&'static str, Vec<u8>)> {
        vec![
            ("fuzz find", FUZZ_FIND[3..].to_vec()),
            // client 5 clock 0, info 2, named parent "t", len 0 + one string "x" (yrs reads
            // len + 1 strings), empty delete set.
            ("alone", vec![1, 1, 5, 0, 2, 1, 1, b't', 0, 1, b'x', 0]),
            // A string block "ab" first, then a JSON block with origin 5#1.
            (
                "after a string block",
                vec![
                    1, 2, 5, 0, 4, 1, 1, b't', 2, b'a', b'b', 0x82, 5, 1, 0, 1, b'x', 0,
                ],
            ),
            // The same in a second client's group.
            (
                "second client",
                vec![
                    2, 1, 5, 0, 4, 1, 1, b't', 2, b'a', b'b', 1, 6, 0, 2, 1, 1, b't', 0, 1, b'x', 0,
                ],
            ),
            // Bit 4 of the info byte is ignored by yrs's content dispatch (`ref & 0b1111`).
            (
                "info 0x12",
                vec![1, 1, 5, 0, 0x12, 1, 1, b't', 0, 1, b'x', 0],
            ),
        ]
    }

    #[test]
    fn refuses_json_content_anywhere_in_an_update() {
        for (what, bytes) in json_updates() {
            assert!(Update::decode_v1(&bytes).is_ok(), "{what}: yrs decodes it");
            match decode_update(&bytes) {
                Err(RoomError::BadUpdate(reason)) => {
                    assert!(reason.contains("ContentJSON"), "{what}: {reason}")
                }
                Err(other) => panic!("{what}: refused for {other}"),
                Ok(_) => panic!("{what}: accepted"),
            }
        }
    }

    /// What yrs does with such an update, for the record: re-encoded, it no longer decodes, so a
    /// pending one makes the document's full-state encoding panic.
    #[test]
    fn yrs_cannot_reread_json_content_it_decoded() {
        for (what, bytes) in json_updates() {
            let update = Update::decode_v1(&bytes).expect("decodes");
            let reencoded = update.encode_v1();
            let reread = Update::decode_v1(&reencoded).map(|again| again.encode_v1());
            assert!(
                reread.map_or(true, |again| again != reencoded),
                "{what}: yrs 0.28.1's JSON decoding fixed? revisit has_json_content"
            );
        }
        let doc = Doc::new();
        doc.transact_mut()
            .apply_update(Update::decode_v1(&FUZZ_FIND[3..]).expect("decodes"))
            .expect("applies (pending)");
        let encoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            doc.transact()
                .encode_state_as_update_v1(&StateVector::default())
        }));
        assert!(encoded.is_err(), "merge_pending_v1 no longer panics?");
    }

    const U32_MAX: [u8; 5] = [0xff, 0xff, 0xff, 0xff, 0x0f];

    fn update(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    #[test]
    fn refuses_clocks_that_overflow_u32() {
        let overflowing = [
            // client 5 at clock u32::MAX, a GC block of length 1.
            (
                "gc at the last clock",
                update(&[&[1, 1, 5], &U32_MAX, &[0, 1, 0]]),
                5,
            ),
            // A skip of u32::MAX, then a one-char string block under a named parent.
            (
                "skip then string",
                update(&[&[1, 2, 5, 0, 10], &U32_MAX, &[4, 1, 1, b't', 1, b'a', 0]]),
                5,
            ),
            // No blocks; a delete-set range of client 9 from u32::MAX, length 1.
            (
                "delete-set range",
                update(&[&[0, 1, 9, 1], &U32_MAX, &[1]]),
                9,
            ),
        ];
        for (what, bytes, client) in overflowing {
            assert_eq!(
                vet(&bytes).ok(),
                Some(Some(Refusal::ClockOverflow { client })),
                "{what}"
            );
            assert!(
                matches!(decode_update(&bytes), Err(RoomError::BadUpdate(_))),
                "{what}"
            );
        }
        // Ending exactly at u32::MAX is fine.
        let mut last = U32_MAX;
        last[0] = 0xfe;
        let fits = update(&[&[1, 1, 5], &last, &[0, 1, 0]]);
        assert_eq!(vet(&fits).ok(), Some(None));
        decode_update(&fits).expect("fits");
    }

    /// The update in the first (writer) frame of the fuzz find
    /// `fuzz/corpus/protocol/regression-yrs-clock-wrap-divide-by-zero-minimal`: a block whose
    /// length runs its client's clock past 2^32. Built without overflow checks, yrs wrapped the
    /// clock, and the wrapped block store later divided by zero in `BlockStore::find_index`
    /// (`src/block_store.rs:60`) inside a transaction's drop, which aborts.
    const CLOCK_WRAP_FIND: &[u8] = &[
        0x01, 0x03, 0xb7, 0xbe, 0xc7, 0xa3, 0x01, 0x00, 0x27, 0x01, 0x06, 0x73, 0x68, 0x00, 0x00,
        0x02, 0x0c, 0x01, 0x01, 0x05, 0x00, 0x02, 0x01, 0x01, 0x00, 0xfe, 0xff, 0xff, 0xff, 0xff,
        0x74, 0x01, 0x78, 0x01, 0xfd, 0x01, 0x68, 0x64, 0xbc, 0xcc, 0x28, 0x00, 0xb7, 0xbe, 0xc7,
        0xa3, 0xf8, 0xee, 0x6f, 0x01, 0x00, 0x01,
    ];

    #[test]
    fn refuses_the_clock_wrap_fuzz_find() {
        assert!(
            matches!(
                vet(CLOCK_WRAP_FIND),
                Ok(Some(Refusal::ClockOverflow { .. }))
            ),
            "{:?}",
            vet(CLOCK_WRAP_FIND)
        );
        assert!(matches!(
            decode_update(CLOCK_WRAP_FIND),
            Err(RoomError::BadUpdate(_))
        ));
    }

    #[test]
    fn measures_the_server_clients_blocks() {
        // Client 1 (the server's) from clock 3: a GC block of 5, then a skip of 10 (not counted).
        let server = [1, 2, 1, 3, 0, 5, 10, 10, 0];
        // The room has both clients up to clock 3 (a GC block after a gap would be refused).
        let mut known = StateVector::default();
        known.set_max(yrs::block::ClientID::new(1), 3);
        known.set_max(yrs::block::ClientID::new(7), 3);
        assert_eq!(
            decode_peer_update(
                &server,
                &known,
                &RootIndex::default(),
                crate::room::SERVER_CLIENT_ID
            )
            .map(|(_, end)| end)
            .ok(),
            Some(8)
        );
        // Another client's blocks do not count.
        let other = [1, 1, 7, 3, 0, 5, 0];
        assert_eq!(
            decode_peer_update(
                &other,
                &known,
                &RootIndex::default(),
                crate::room::SERVER_CLIENT_ID
            )
            .map(|(_, end)| end)
            .ok(),
            Some(0)
        );
    }

    #[test]
    fn refuses_a_client_listed_twice() {
        // Client 5: a GC block of 3 from clock 0, then again from clock 0 a GC block of 1.
        let twice = [2, 1, 5, 0, 0, 3, 1, 5, 0, 0, 1, 0];
        assert_eq!(vet(&twice).ok(), Some(Some(Refusal::DuplicateClient(5))));
        assert!(matches!(
            decode_update(&twice),
            Err(RoomError::BadUpdate(_))
        ));
    }

    #[test]
    fn refuses_client_ids_over_53_bits() {
        let big = [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10]; // 2^53
        let in_blocks = update(&[&[1, 1], &big, &[0, 0, 1, 0]]);
        let in_delete_set = update(&[&[0, 1], &big, &[1, 0, 1]]);
        for bytes in [in_blocks, in_delete_set] {
            assert_eq!(
                vet(&bytes).ok(),
                Some(Some(Refusal::ClientIdTooLarge(1 << 53)))
            );
            assert!(matches!(
                decode_update(&bytes),
                Err(RoomError::BadUpdate(_))
            ));
        }
    }

    /// Updates with every content kind clients write (and GC, skip, deleted blocks, subdocs):
    /// the walk without a room (a stored update) accepts them and stays in step with yrs's
    /// decoder. A peer's subdocument is refused (`a_peers_subdocument_is_refused`).
    #[test]
    fn accepts_every_content_kind_clients_send() {
        let doc = Doc::with_client_id(7);
        let mut updates = Vec::new();
        let mut edit = |f: &dyn Fn(&mut yrs::TransactionMut)| {
            let mut txn = doc.transact_mut();
            f(&mut txn);
            updates.push(txn.encode_update_v1());
        };
        edit(&|txn| {
            let text = txn.get_or_insert_text("text");
            text.insert(txn, 0, "hello world");
            text.format(txn, 0, 5, [("bold".into(), Any::Bool(true))].into());
            text.insert_embed(txn, 5, Any::from(vec![Any::from("embed")]));
            text.remove_range(txn, 6, 2);
        });
        edit(&|txn| {
            let map = txn.get_or_insert_map("map");
            map.insert(txn, "n", 1.5);
            map.insert(txn, "s", "str");
            map.insert(txn, "buf", Any::Buffer(vec![1u8, 2, 3].into()));
            map.insert(txn, "nested", MapPrelim::from([("k", Any::from(true))]));
            map.insert(txn, "list", ArrayPrelim::from([1, 2, 3]));
            map.insert(txn, "txt", TextPrelim::new("inner"));
            map.insert(txn, "sub", Doc::new());
            map.insert(txn, "n", Any::Null);
            map.remove(txn, "nested");
        });
        edit(&|txn| {
            let xml = txn.get_or_insert_xml_fragment("xml");
            let p = xml.insert(txn, 0, XmlElementPrelim::empty("p"));
            p.insert(txn, 0, XmlTextPrelim::new("para"));
            p.insert_attribute(txn, "class", "c");
            xml.remove_range(txn, 0, 1);
        });
        edit(&|txn| {
            let array = txn.get_or_insert_array("array");
            array.insert_range(txn, 0, [1, 2, 3, 4]);
            array.remove_range(txn, 1, 2);
        });
        let state = doc
            .transact()
            .encode_state_as_update_v1(&StateVector::default());
        // Merging non-adjacent updates of one client yields skip blocks.
        let skips =
            yrs::merge_updates_v1([updates[0].as_slice(), updates[2].as_slice()]).expect("merges");
        // ItemContent::Binary (ref 3), which yrs no longer writes but still reads.
        let binary = vec![1, 1, 5, 0, 3, 1, 1, b'b', 2, 0xab, 0xcd, 0];
        for (i, bytes) in updates.iter().chain([&state, &skips, &binary]).enumerate() {
            assert_eq!(vet(bytes).ok(), Some(None), "update {i}");
            decode_update(bytes).unwrap_or_else(|e| panic!("update {i}: {e}"));
        }
    }

    /// A peer's subdocument is refused (yrs 0.28.1 would leak the room's whole document through
    /// it); the same update from the store still decodes, so a room stored with one loads.
    #[test]
    fn a_peers_subdocument_is_refused() {
        let doc = Doc::with_client_id(7);
        let mut txn = doc.transact_mut();
        let map = txn.get_or_insert_map("map");
        map.insert(&mut txn, "n", 1);
        map.insert(&mut txn, "sub", Doc::new());
        let bytes = txn.encode_update_v1();
        drop(txn);
        assert!(matches!(
            decode_peer_update(&bytes, &StateVector::default(), &RootIndex::default(), crate::room::SERVER_CLIENT_ID),
            Err(RoomError::BadUpdate(why)) if why.contains("subdocuments")
        ));
        assert!(decode_update(&bytes).is_ok());
        // Without the subdocument the same edit passes.
        let plain = Doc::with_client_id(7);
        let mut txn = plain.transact_mut();
        txn.get_or_insert_map("map").insert(&mut txn, "n", 1);
        let bytes = txn.encode_update_v1();
        drop(txn);
        assert!(
            decode_peer_update(
                &bytes,
                &StateVector::default(),
                &RootIndex::default(),
                crate::room::SERVER_CLIENT_ID
            )
            .is_ok()
        );
    }

    /// The `protocol` fuzz find: a second update from the same client repeats clock 0 (its map
    /// under `shapes`) and then claims clocks 1..106 as a deleted item whose parent is 2#104,
    /// which the room lacks. Refused; a faithful repeat of the first update is not.
    #[test]
    fn a_repeat_that_depends_on_what_the_room_lacks_is_refused() {
        const FIRST: &[u8] = &[
            1, 3, 183, 190, 199, 163, 1, 0, 39, 1, 6, 115, 104, 97, 112, 101, 115, 1, 97, 1, 40, 0,
            183, 190, 199, 163, 1, 0, 1, 120, 1, 122, 125, 1, 1, 0, 0, 2, 0, 222, 4, 1, 0, 1, 0, 0,
            0, 0, 0, 1, 4, 0,
        ];
        const SECOND: &[u8] = &[
            1, 3, 183, 190, 199, 163, 1, 0, 7, 1, 6, 115, 104, 97, 112, 101, 115, 1, 1, 119, 2,
            104, 105, 0, 28, 0, 0, 2, 25, 1, 0, 0, 0, 32, 0, 0, 4, 0, 0, 0, 1, 0, 1, 0, 0, 4, 0, 1,
            0, 1, 200, 200,
        ];
        let doc = Doc::with_client_id(1);
        let (first, _) = decode_peer_update(
            FIRST,
            &StateVector::default(),
            &RootIndex::default(),
            crate::room::SERVER_CLIENT_ID,
        )
        .expect("first");
        doc.transact_mut().apply_update(first).expect("applies");
        let known = doc.transact().state_vector();
        assert!(matches!(
            decode_peer_update(SECOND, &known, &RootIndex::default(), crate::room::SERVER_CLIENT_ID),
            Err(RoomError::BadUpdate(why)) if why.contains("which the room lacks")
        ));
        // Without a room (a stored update) nothing is compared; a faithful repeat passes.
        assert!(decode_update(SECOND).is_ok());
        assert!(
            decode_peer_update(
                FIRST,
                &known,
                &RootIndex::default(),
                crate::room::SERVER_CLIENT_ID
            )
            .is_ok()
        );
    }

    /// An update of one `Any` item: `value` is the lib0 encoding of its one value.
    fn any_item(value: &[u8]) -> Vec<u8> {
        // clients 1, blocks 1, client 5, clock 0, info 8 (Any, parent follows), parent: the
        // root type "m", 1 value, the value, empty delete set.
        let mut update = vec![1, 1, 5, 0, 8, 1, 1, b'm', 1];
        update.extend_from_slice(value);
        update.push(0);
        update
    }

    /// yrs decodes nested arrays and maps by recursion: 100,000 levels (200 KB) overflow a
    /// 2 MB stack, which aborts the process. The walk refuses them before yrs sees them, on a
    /// thread with a server worker's stack.
    #[test]
    fn deeply_nested_values_are_refused_without_recursing() {
        let nested = |depth: usize| {
            let mut value = [117, 1].repeat(depth);
            value.push(126);
            any_item(&value)
        };
        let (deep, fine) = (nested(100_000), nested(MAX_ANY_DEPTH - 1));
        let results = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                (
                    decode_peer_update(
                        &deep,
                        &StateVector::default(),
                        &RootIndex::default(),
                        crate::room::SERVER_CLIENT_ID,
                    )
                    .map(|_| ()),
                    decode_update(&fine).map(|_| ()),
                )
            })
            .expect("thread")
            .join()
            .expect("no stack overflow");
        assert!(matches!(
            results.0,
            Err(RoomError::BadUpdate(why)) if why.contains("nested deeper")
        ));
        assert!(results.1.is_ok(), "{:?}", results.1);
    }

    /// A map that claims 2^28 entries in a few bytes is refused before yrs reserves them; so
    /// is an array, at any depth.
    #[test]
    fn counts_the_bytes_cannot_hold_are_refused() {
        // 118 (map), count 2^28 as a var uint (80 80 80 80 01), one entry.
        let map = any_item(&[118, 0x80, 0x80, 0x80, 0x80, 0x01, 1, b'k', 126]);
        let array = any_item(&[117, 1, 117, 0xff, 0xff, 0x03, 126]);
        for update in [map, array] {
            assert!(matches!(
                decode_update(&update),
                Err(RoomError::BadUpdate(why)) if why.contains("more than the update's bytes")
            ));
        }
        assert!(decode_update(&any_item(&[118, 1, 1, b'k', 117, 2, 125, 1, 119, 1, b's'])).is_ok());
    }

    /// The fifth `protocol` fuzz find (2026-11-24, `regression-skip-covers-nothing`): client
    /// 343007031's second block has its parent at 0#0, and the update's only block of client 0
    /// is a skip over clocks 0..=1859496786. A skip carries nothing, so the parent is missing;
    /// the walk used to count the skip as covering it, yrs kept the block pending, and a later
    /// update made the room's encoding unreadable (`InvalidParent` in a fresh document).
    #[test]
    fn a_dependency_inside_a_skip_is_missing() {
        const UPDATE: &[u8] = &[
            2, 3, 183, 190, 199, 163, 1, 0, 39, 1, 6, 119, 104, 97, 15, 0, 0, 4, 0, 0, 1, 3, 0, 7,
            0, 0, 0, 0, 3, 5, 1, 1, 1, 13, 1, 0, 0, 10, 194, 194, 194, 194, 194, 194, 194, 194,
            238, 198, 0, 0, 190, 32,
        ];
        assert!(matches!(
            decode_peer_update(UPDATE, &StateVector::default(), &RootIndex::default(), crate::room::SERVER_CLIENT_ID),
            Err(RoomError::BadUpdate(why)) if why.contains("depends on 0#0, which the room lacks")
        ));
    }

    /// The second `protocol` fuzz find: a GC block of client 61 at clock 3,071,162,232 when the
    /// room has nothing of 61. Refused for a room; the same blocks from clock 0 are not.
    #[test]
    fn a_gc_block_after_a_gap_is_refused() {
        // clients 1, blocks 1, client 61, clock 3071162232 (f8 ee b8 b8 0b), GC of 5856199,
        // empty delete set.
        let gap = [
            1, 1, 61, 0xf8, 0xee, 0xb8, 0xb8, 0x0b, 0, 0xc7, 0xb7, 0xe5, 0x02, 0,
        ];
        assert!(matches!(
            decode_peer_update(&gap, &StateVector::default(), &RootIndex::default(), crate::room::SERVER_CLIENT_ID),
            Err(RoomError::BadUpdate(why)) if why.contains("starts past the room's 0")
        ));
        assert!(
            decode_update(&gap).is_ok(),
            "a stored update is not compared"
        );
        let from_zero = [1, 1, 61, 0, 0, 0xc7, 0xb7, 0xe5, 0x02, 0];
        assert!(
            decode_peer_update(
                &from_zero,
                &StateVector::default(),
                &RootIndex::default(),
                crate::room::SERVER_CLIENT_ID
            )
            .is_ok()
        );
    }

    /// A block whose parent is in neither the room nor the update is refused (yrs would keep it
    /// pending); the same block with its parent earlier in the update, or in the room, is not.
    #[test]
    fn a_block_whose_parent_the_room_lacks_is_refused() {
        let a = Doc::with_client_id(7);
        {
            let mut txn = a.transact_mut();
            let shapes = txn.get_or_insert_map("shapes");
            shapes.insert(&mut txn, "a", MapPrelim::default());
        }
        let b = Doc::with_client_id(9);
        let a_state = a
            .transact()
            .encode_state_as_update_v1(&StateVector::default());
        b.transact_mut()
            .apply_update(Update::decode_v1(&a_state).expect("decodes"))
            .expect("applies");
        {
            let mut txn = b.transact_mut();
            let shapes = txn.get_or_insert_map("shapes");
            if let Some(yrs::Out::YMap(shape)) = shapes.get(&txn, "a") {
                shape.insert(&mut txn, "x", 1.0);
            }
        }
        let b_only = b
            .transact()
            .encode_state_as_update_v1(&a.transact().state_vector());
        let whole = b
            .transact()
            .encode_state_as_update_v1(&StateVector::default());
        assert!(matches!(
            decode_peer_update(&b_only, &StateVector::default(), &RootIndex::default(), crate::room::SERVER_CLIENT_ID),
            Err(RoomError::BadUpdate(why)) if why.contains("which the room lacks")
        ));
        assert!(
            decode_peer_update(
                &whole,
                &StateVector::default(),
                &RootIndex::default(),
                crate::room::SERVER_CLIENT_ID
            )
            .is_ok()
        );
        assert!(
            decode_peer_update(
                &b_only,
                &a.transact().state_vector(),
                &RootIndex::default(),
                crate::room::SERVER_CLIENT_ID
            )
            .is_ok()
        );
        assert!(
            decode_update(&b_only).is_ok(),
            "a stored update is not compared"
        );
    }
}
