//! Decoding peers' and stored v1 updates, and refusing the ones yrs would mishandle before any
//! document sees them (see the parent module's "Hostile updates"). Owns no state; must not
//! touch a document.

use yrs::Update;
use yrs::updates::decoder::Decode;

use super::RoomError;

/// Decodes a peer's (or a stored) v1 update and vets its structure before any document sees
/// it. yrs 0.28's decoder can panic on hostile lengths (an `u32` clock + length overflow in
/// delete sets, for one); decoding touches no shared state, so the panic is caught and the
/// update refused. Release builds keep overflow checks on so such arithmetic panics instead of
/// wrapping into a corrupt range. Updates yrs decodes but mishandles (see
/// [`has_json_content`]) are refused here too, before they reach a document.
pub(crate) fn decode_update(bytes: &[u8]) -> Result<Update, RoomError> {
    let decoded = std::panic::catch_unwind(|| {
        let update = Update::decode_v1(bytes)?;
        Ok::<_, yrs::encoding::read::Error>((update, has_json_content(bytes)?))
    });
    match decoded {
        Ok(Ok((update, false))) => Ok(update),
        Ok(Ok((_, true))) => Err(RoomError::BadUpdate(
            "legacy JSON content (Yjs ContentJSON) is not supported".into(),
        )),
        Ok(Err(error)) => Err(RoomError::BadUpdate(error.to_string())),
        Err(_) => Err(RoomError::BadUpdate("malformed update".into())),
    }
}

/// Whether a v1 update carries a block of legacy JSON content (content ref 2, Yjs's
/// `ContentJSON`): such updates must not reach a document.
///
/// yrs 0.28.1 decodes that content off by one: `ItemContent::decode` (`src/block.rs`, the
/// `BLOCK_ITEM_JSON_REF_NUMBER` arm) reads `len + 1` strings (`while remaining >= 0`), where Yjs
/// and yrs's own encoder write `len` of them. The block is misread, and what yrs later encodes
/// from it does not decode again: a pending update holding it makes every
/// `encode_state_as_update_v1` (compaction, snapshots) panic on the `unwrap` in
/// `merge_pending_v1` (`src/transaction.rs`), and an integrated one makes the update the room
/// persists, and every later snapshot, unreadable. Yjs 13 writes `ContentAny` and only reads
/// `ContentJSON` for documents of older versions, so no current client sends it.
///
/// The walk mirrors `Update::decode` (`src/update.rs`) with yrs's own decoder and
/// `ItemContent::decode`, so it consumes exactly the bytes yrs does up to the first JSON
/// block. Returns the decoder's error when the bytes do not parse (the caller decoded them
/// successfully first, so that does not happen).
fn has_json_content(bytes: &[u8]) -> Result<bool, yrs::encoding::read::Error> {
    use yrs::block::{
        BLOCK_GC_REF_NUMBER, BLOCK_ITEM_JSON_REF_NUMBER, BLOCK_SKIP_REF_NUMBER, HAS_ORIGIN,
        HAS_PARENT_SUB, HAS_RIGHT_ORIGIN, ItemContent,
    };
    use yrs::encoding::read::Read;
    use yrs::updates::decoder::{Decoder, DecoderV1};

    let mut decoder = DecoderV1::from(bytes);
    let clients: u32 = decoder.read_var()?;
    for _ in 0..clients {
        let blocks: u32 = decoder.read_var()?;
        decoder.read_client()?;
        let _clock: u32 = decoder.read_var()?;
        for _ in 0..blocks {
            match decoder.read_info()? {
                BLOCK_SKIP_REF_NUMBER => {
                    decoder.read_var::<u32>()?;
                }
                BLOCK_GC_REF_NUMBER => {
                    decoder.read_len()?;
                }
                info => {
                    // `ItemContent::decode` dispatches on the low four bits.
                    if info & 0b1111 == BLOCK_ITEM_JSON_REF_NUMBER {
                        return Ok(true);
                    }
                    if info & HAS_ORIGIN != 0 {
                        decoder.read_left_id()?;
                    }
                    if info & HAS_RIGHT_ORIGIN != 0 {
                        decoder.read_right_id()?;
                    }
                    if info & (HAS_ORIGIN | HAS_RIGHT_ORIGIN) == 0 {
                        if decoder.read_parent_info()? {
                            decoder.read_string()?;
                        } else {
                            decoder.read_left_id()?;
                        }
                        if info & HAS_PARENT_SUB != 0 {
                            decoder.read_string()?;
                        }
                    }
                    ItemContent::decode(&mut decoder, info)?;
                }
            }
        }
    }
    Ok(false)
}

#[cfg(test)]
pub(super) mod tests {
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

    /// Updates with every content kind clients write (and GC, skip, deleted blocks, subdocs):
    /// the walk accepts them and stays in step with yrs's decoder.
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
            assert_eq!(has_json_content(bytes).ok(), Some(false), "update {i}");
            decode_update(bytes).unwrap_or_else(|e| panic!("update {i}: {e}"));
        }
    }
}
