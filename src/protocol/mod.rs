//! Sans-IO y-protocols framing: turns inbound WebSocket binary frames into typed messages and
//! typed messages into outbound frames, with the checks a hostile peer requires (a decoder
//! panic on a hostile frame is contained and the frame refused as malformed).
//!
//! Encoding and decoding are yrs's own (`yrs::sync`), byte for byte what `y-websocket` and
//! `y-protocols` speak: sync (0) with step 1 (0), step 2 (1), update (2); awareness (1);
//! auth (2); query-awareness (3). One message per frame, as `y-websocket` sends them. This module
//! knows nothing about rooms, documents or sockets.

use bytes::Bytes;
use yrs::StateVector;
use yrs::sync::{AwarenessUpdate, Message, SyncMessage};
use yrs::updates::decoder::Decode;
use yrs::updates::encoder::Encode;

/// Why an inbound frame was refused. Each maps to a WebSocket close code at the edge.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The frame is not a well-formed y-protocols message (truncated varint, bad length, …).
    #[error("malformed message: {0}")]
    Malformed(String),
    /// A top-level message type this server does not speak.
    #[error("unknown message type {0}")]
    UnknownType(u8),
    /// Bytes left over after one whole message.
    #[error("trailing bytes after message")]
    Trailing,
    /// An empty binary frame.
    #[error("empty frame")]
    Empty,
}

/// Decodes one inbound frame into exactly one message.
pub fn decode(frame: &[u8]) -> Result<Message, ProtocolError> {
    if frame.is_empty() {
        return Err(ProtocolError::Empty);
    }
    // yrs's decoders are not panic-free on hostile input: a client id over 53 bits (in a state
    // vector, an update or an awareness message) trips the `debug_assert!` in `ClientID::new`
    // in builds with debug assertions (release builds truncate it to 53 bits, which is no worse
    // than naming that client). Decoding touches no shared state, so a panic is contained here
    // and the frame refused like any other malformed one.
    vet_counts(frame)?;
    let message = match crate::contain::contain(|| Message::decode_v1(frame)) {
        Ok(decoded) => decoded.map_err(|e| ProtocolError::Malformed(e.to_string()))?,
        Err(_) => return Err(ProtocolError::Malformed("undecodable message".into())),
    };
    if let Message::Custom(tag, _) = message {
        return Err(ProtocolError::UnknownType(tag));
    }
    // lib0 writes minimal varints, so a well-formed frame re-encodes to exactly its own length;
    // anything else carried trailing bytes (or padded lengths, which official clients never send).
    if encoded_len(&message) != frame.len() {
        return Err(ProtocolError::Trailing);
    }
    Ok(message)
}

/// Refuses a state vector (sync step 1) or an awareness update whose entry count its bytes
/// cannot back, before yrs reads it: yrs reserves a hash table of the declared size first, and
/// hashbrown writes one control byte per bucket, so five bytes declaring 2^28 entries would
/// touch hundreds of MB per frame. Each state-vector entry takes at least 2 bytes (client and
/// clock varints), each awareness entry at least 3 (client, clock, state string length).
fn vet_counts(frame: &[u8]) -> Result<(), ProtocolError> {
    use yrs::encoding::read::{Cursor, Read};

    const MSG_SYNC: u32 = 0;
    const MSG_AWARENESS: u32 = 1;
    const SYNC_STEP1: u32 = 0;
    let mut cursor = Cursor::new(frame);
    // A frame too short to say is left to the decoder, which refuses it with its own message.
    let Ok(kind) = cursor.read_var::<u32>() else {
        return Ok(());
    };
    let min_entry = match kind {
        MSG_SYNC if cursor.read_var::<u32>().ok() == Some(SYNC_STEP1) => 2,
        MSG_AWARENESS => 3,
        _ => return Ok(()),
    };
    let Ok(payload) = cursor.read_buf() else {
        return Ok(());
    };
    let mut inner = Cursor::new(payload);
    let Ok(count) = inner.read_var::<u64>() else {
        return Ok(());
    };
    let room = (payload.len() - inner.next) as u64 / min_entry;
    if count > room {
        return Err(ProtocolError::Malformed(format!(
            "{count} entries declared in {} bytes",
            payload.len()
        )));
    }
    Ok(())
}

fn encoded_len(message: &Message) -> usize {
    message.encode_v1().len()
}

/// Encodes a message as one outbound frame.
pub fn encode(message: &Message) -> Bytes {
    Bytes::from(message.encode_v1())
}

/// Sync step 1 carrying a state vector.
pub fn sync_step1(sv: StateVector) -> Bytes {
    encode(&Message::Sync(SyncMessage::SyncStep1(sv)))
}

/// Sync step 2 carrying the updates the other side lacks.
pub fn sync_step2(update: Vec<u8>) -> Bytes {
    encode(&Message::Sync(SyncMessage::SyncStep2(update)))
}

/// A document update.
pub fn update(update: Vec<u8>) -> Bytes {
    encode(&Message::Sync(SyncMessage::Update(update)))
}

/// An awareness update.
pub fn awareness(update: AwarenessUpdate) -> Bytes {
    encode(&Message::Awareness(update))
}

/// The y-protocols auth message "permission denied" with a reason.
pub fn permission_denied(reason: &str) -> Bytes {
    encode(&Message::Auth(Some(reason.to_owned())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use yrs::{Doc, GetString, ReadTxn, Text, Transact};

    #[test]
    fn round_trips_official_message_kinds() {
        let doc = Doc::new();
        let text = doc.get_or_insert_text("t");
        text.insert(&mut doc.transact_mut(), 0, "hi");
        let sv = doc.transact().state_vector();
        let upd = doc
            .transact()
            .encode_state_as_update_v1(&StateVector::default());
        for frame in [
            sync_step1(sv),
            sync_step2(upd.clone()),
            update(upd),
            permission_denied("no"),
        ] {
            let decoded = decode(&frame).unwrap();
            assert_eq!(encode(&decoded), frame);
        }
        let other = Doc::new();
        let Message::Sync(SyncMessage::Update(u)) = decode(&update(
            doc.transact()
                .encode_state_as_update_v1(&StateVector::default()),
        ))
        .unwrap() else {
            panic!("not an update")
        };
        other
            .transact_mut()
            .apply_update(yrs::Update::decode_v1(&u).unwrap())
            .unwrap();
        assert_eq!(
            other.get_or_insert_text("t").get_string(&other.transact()),
            "hi"
        );
    }

    #[test]
    fn matches_y_protocols_bytes() {
        // y-protocols: writeVarUint(messageSync=0), writeVarUint(messageYjsUpdate=2), writeVarUint8Array.
        assert_eq!(&update(vec![1, 2, 3])[..], &[0, 2, 3, 1, 2, 3]);
        // messageAuth=2, permission denied=0, string "x".
        assert_eq!(&permission_denied("x")[..], &[2, 0, 1, b'x']);
        assert!(matches!(decode(&[3]), Ok(Message::AwarenessQuery)));
    }

    #[test]
    fn client_ids_over_53_bits_do_not_panic() {
        // Sync step 1 with a state vector naming client 2^53 (found by fuzzing `protocol`).
        let frame = [
            0, 0, 10, 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10, 0,
        ];
        let decoded = decode(&frame);
        if cfg!(debug_assertions) {
            assert!(matches!(decoded, Err(ProtocolError::Malformed(_))));
        }
    }

    #[test]
    fn refuses_hostile_frames() {
        assert!(matches!(decode(&[]), Err(ProtocolError::Empty)));
        assert!(matches!(decode(&[0x80]), Err(ProtocolError::Malformed(_))));
        assert!(matches!(
            decode(&[0, 2, 10, 1]),
            Err(ProtocolError::Malformed(_))
        ));
        assert!(matches!(
            decode(&[0, 7, 0]),
            Err(ProtocolError::Malformed(_))
        ));
        assert!(matches!(
            decode(&[9, 0]),
            Err(ProtocolError::UnknownType(9))
        ));
        assert!(matches!(
            decode(&[0, 2, 1, 0, 0xff]),
            Err(ProtocolError::Trailing)
        ));
        assert!(
            decode(&[
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01
            ])
            .is_err()
        );
    }
}
