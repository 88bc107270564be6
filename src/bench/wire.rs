//! What the bench's clients put on the wire and read back, without a document: the framing of
//! the server under test (plain y-sync, or Hocuspocus's, which prefixes every message with the
//! document name), the sync message kinds the clients react to, and the send timestamps the
//! clients embed in their updates and find again in received frames by scanning bytes instead
//! of applying the update. Pure functions over bytes; no sockets.

use std::fmt::Write as _;

/// y-protocols top-level message type: sync.
const MSG_SYNC: u64 = 0;
/// y-protocols top-level message type: auth (Hocuspocus: a token message before anything else).
const MSG_AUTH: u64 = 2;
/// Hocuspocus's "sync reply" (a sync message that must not trigger another step 1).
const MSG_HOCUSPOCUS_SYNC_REPLY: u64 = 4;
/// Hocuspocus auth submessage: a token.
const AUTH_TOKEN: u64 = 0;

/// Sync submessage kinds.
const SYNC_STEP1: u64 = 0;
const SYNC_STEP2: u64 = 1;
const SYNC_UPDATE: u64 = 2;

/// The framing spoken by the server under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// y-websocket's: one y-protocols message per frame (fairyring, `@y/websocket-server`).
    #[default]
    YSync,
    /// Hocuspocus's: the document name as a varstring, then the y-protocols message; the first
    /// message of a document is an auth message with a token.
    Hocuspocus,
}

/// A sync message received, borrowed from its frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Inbound<'a> {
    /// Sync step 1 with the encoded state vector.
    Step1(&'a [u8]),
    /// Sync step 2 with the encoded update.
    Step2(&'a [u8]),
    /// An update.
    Update(&'a [u8]),
    /// Anything else (awareness, auth, Hocuspocus's sync status…), ignored.
    Other,
}

/// Encodes and decodes frames for one document under one protocol.
#[derive(Debug, Clone)]
pub struct Wire {
    protocol: Protocol,
    document: String,
}

impl Wire {
    /// The wire of `document` spoken with `protocol`.
    pub fn new(protocol: Protocol, document: &str) -> Self {
        Wire {
            protocol,
            document: document.to_owned(),
        }
    }

    /// Frames to send right after connecting (Hocuspocus: the auth message with `token`).
    pub fn hello(&self, token: &str) -> Vec<Vec<u8>> {
        match self.protocol {
            Protocol::YSync => Vec::new(),
            Protocol::Hocuspocus => {
                let mut frame = self.prefix();
                write_var(&mut frame, MSG_AUTH);
                write_var(&mut frame, AUTH_TOKEN);
                write_bytes(&mut frame, token.as_bytes());
                vec![frame]
            }
        }
    }

    /// A sync message of kind `kind` (step 1, step 2 or update) carrying `payload`.
    fn sync(&self, kind: u64, payload: &[u8]) -> Vec<u8> {
        let mut frame = self.prefix();
        frame.reserve(payload.len() + 8);
        write_var(&mut frame, MSG_SYNC);
        write_var(&mut frame, kind);
        write_bytes(&mut frame, payload);
        frame
    }

    /// Sync step 1 with an encoded state vector.
    pub fn step1(&self, state_vector: &[u8]) -> Vec<u8> {
        self.sync(SYNC_STEP1, state_vector)
    }

    /// Sync step 2 with an encoded update.
    pub fn step2(&self, update: &[u8]) -> Vec<u8> {
        self.sync(SYNC_STEP2, update)
    }

    /// An update message.
    pub fn update(&self, update: &[u8]) -> Vec<u8> {
        self.sync(SYNC_UPDATE, update)
    }

    fn prefix(&self) -> Vec<u8> {
        let mut frame = Vec::new();
        if self.protocol == Protocol::Hocuspocus {
            write_bytes(&mut frame, self.document.as_bytes());
        }
        frame
    }

    /// Reads the sync message of a received frame; anything malformed is [`Inbound::Other`].
    pub fn inbound<'a>(&self, frame: &'a [u8]) -> Inbound<'a> {
        let mut reader = Reader { rest: frame };
        if self.protocol == Protocol::Hocuspocus && reader.bytes().is_none() {
            return Inbound::Other;
        }
        match reader.var() {
            Some(MSG_SYNC) => {}
            Some(MSG_HOCUSPOCUS_SYNC_REPLY) if self.protocol == Protocol::Hocuspocus => {}
            _ => return Inbound::Other,
        }
        let (Some(kind), Some(payload)) = (reader.var(), reader.bytes()) else {
            return Inbound::Other;
        };
        match kind {
            SYNC_STEP1 => Inbound::Step1(payload),
            SYNC_STEP2 => Inbound::Step2(payload),
            SYNC_UPDATE => Inbound::Update(payload),
            _ => Inbound::Other,
        }
    }
}

fn write_var(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn write_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    write_var(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A lib0 reader over a byte slice.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn var(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.rest.split_first()?;
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.var()?).ok()?;
        if len > self.rest.len() {
            return None;
        }
        let (bytes, rest) = self.rest.split_at(len);
        self.rest = rest;
        Some(bytes)
    }
}

/// The marker that opens a send timestamp inside an update.
const STAMP: &[u8] = b"fbts:";

/// The string a client stores in its shape to stamp an update: `fbts:CLIENT:MICROS;`. Strings
/// in Yjs v1 updates are raw UTF-8, so the stamp can be found in the bytes without decoding.
pub fn stamp(client: usize, sent_micros: u64) -> String {
    let mut text = String::with_capacity(24);
    let _ = write!(text, "fbts:{client}:{sent_micros};");
    text
}

/// Every `(client, sent_micros)` stamp in an update's bytes (a merged update holds several).
pub fn stamps(update: &[u8]) -> impl Iterator<Item = (usize, u64)> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        while let Some(found) = find(update.get(at..)?, STAMP) {
            let start = at + found + STAMP.len();
            at = start;
            let rest = update.get(start..)?;
            let Some((client, rest)) = digits(rest, b':') else {
                continue;
            };
            let Some((micros, _)) = digits(rest, b';') else {
                continue;
            };
            return Some((usize::try_from(client).ok()?, micros));
        }
        None
    })
}

/// A decimal number followed by `end`, and what follows `end`.
fn digits(bytes: &[u8], end: u8) -> Option<(u64, &[u8])> {
    let len = bytes.iter().position(|b| !b.is_ascii_digit())?;
    if len == 0 || len > 19 || bytes.get(len) != Some(&end) {
        return None;
    }
    let text = std::str::from_utf8(&bytes[..len]).ok()?;
    Some((text.parse().ok()?, &bytes[len + 1..]))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use yrs::updates::encoder::Encode;
    use yrs::{Doc, Map, MapPrelim, Transact, WriteTxn};

    fn stamped_update(client: usize, sent: u64) -> Vec<u8> {
        let doc = Doc::with_client_id(client as u64 + 1);
        let mut txn = doc.transact_mut();
        let shapes = txn.get_or_insert_map("shapes");
        let shape = shapes.insert(
            &mut txn,
            format!("bench-{client}"),
            MapPrelim::from([("id", yrs::Any::from("x"))]),
        );
        shape.insert(&mut txn, "sentAt", stamp(client, sent));
        txn.encode_update_v1()
    }

    #[test]
    fn stamps_are_found_in_single_and_merged_updates() {
        let one = stamped_update(7, 123_456);
        assert_eq!(stamps(&one).collect::<Vec<_>>(), vec![(7, 123_456)]);
        let merged = yrs::merge_updates_v1([one, stamped_update(12, 99), stamped_update(3, 1)])
            .expect("merge");
        let mut found: Vec<_> = stamps(&merged).collect();
        found.sort_unstable();
        assert_eq!(found, vec![(3, 1), (7, 123_456), (12, 99)]);
    }

    #[test]
    fn broken_stamps_are_skipped() {
        let bytes = b"fbts:fbts:1:2fbts:3:;fbts::4;fbts:99999999999999999999999:1;fbts:5:6;fbts:7";
        assert_eq!(stamps(bytes).collect::<Vec<_>>(), vec![(5, 6)]);
        assert_eq!(stamps(b"").count(), 0);
    }

    #[test]
    fn y_sync_frames_round_trip() {
        let wire = Wire::new(Protocol::YSync, "room");
        assert!(wire.hello("t").is_empty());
        let frame = wire.update(b"abc");
        // Byte for byte what yrs encodes.
        let yrs_frame =
            yrs::sync::Message::Sync(yrs::sync::SyncMessage::Update(b"abc".to_vec())).encode_v1();
        assert_eq!(frame, yrs_frame);
        assert_eq!(wire.inbound(&frame), Inbound::Update(b"abc"));
        assert_eq!(wire.inbound(&wire.step1(b"sv")), Inbound::Step1(b"sv"));
        assert_eq!(wire.inbound(&wire.step2(b"u")), Inbound::Step2(b"u"));
        // Awareness, truncated and empty frames are ignored.
        assert_eq!(wire.inbound(&[1, 2, 0, 0]), Inbound::Other);
        assert_eq!(wire.inbound(&[0, 2, 9, 1]), Inbound::Other);
        assert_eq!(wire.inbound(&[]), Inbound::Other);
    }

    #[test]
    fn hocuspocus_frames_carry_the_document_name_first() {
        let wire = Wire::new(Protocol::Hocuspocus, "doc-1");
        let hello = wire.hello("secret");
        assert_eq!(
            hello,
            vec![b"\x05doc-1\x02\x00\x06secret".to_vec()],
            "varstring name, auth, token submessage, varstring token"
        );
        let frame = wire.update(b"abc");
        assert_eq!(&frame, b"\x05doc-1\x00\x02\x03abc");
        assert_eq!(wire.inbound(&frame), Inbound::Update(b"abc"));
        // Hocuspocus answers a step 1 with a "sync reply" (type 4) holding step 2.
        assert_eq!(
            wire.inbound(b"\x05doc-1\x04\x01\x02uu"),
            Inbound::Step2(b"uu")
        );
        // Sync status (8) and authenticated (2) messages are not sync messages.
        assert_eq!(wire.inbound(b"\x05doc-1\x08\x01"), Inbound::Other);
        assert_eq!(wire.inbound(b"\x05doc-1\x02\x02\x00"), Inbound::Other);
        assert_eq!(wire.inbound(b"\x09doc"), Inbound::Other);
        // A name longer than 127 bytes takes a two-byte length.
        let long = "d".repeat(200);
        let wire = Wire::new(Protocol::Hocuspocus, &long);
        assert_eq!(wire.inbound(&wire.step1(b"s")), Inbound::Step1(b"s"));
        assert_eq!(&wire.step1(b"s")[..2], &[200, 1]);
    }
}
