//! The binary form of what nodes tell each other over pub/sub (docs/scaling.md, "Messages").
//!
//! Owns only the encoding: a version byte, a kind byte and the sending node's id, then the
//! kind's fields (big-endian integers, length-prefixed byte strings). It does not know about
//! Redis, rooms or documents; a message it cannot read is an error, never a panic.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The version byte every message starts with.
const VERSION: u8 = 1;

/// A node's random id, drawn at start-up (a restarted node is a new node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u64);

impl NodeId {
    /// A fresh random id.
    pub fn random() -> Self {
        NodeId(rand::random())
    }
}

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// One message between nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Envelope {
    /// Document updates a node made durable in one append: sequence numbers `first..=last`
    /// of the room's log, one update each.
    Update {
        node: NodeId,
        first_seq: u64,
        last_seq: u64,
        updates: Vec<Bytes>,
    },
    /// An awareness update (y-protocols encoding) of states the node's own peers own.
    Awareness { node: NodeId, update: Bytes },
    /// A node that just (re)subscribed asks the others for their peers' awareness states.
    AwarenessQuery { node: NodeId },
    /// The node is alive (sent on the nodes channel every heartbeat interval).
    Heartbeat { node: NodeId },
    /// The node is shutting down: its peers' states can go at once.
    Leaving { node: NodeId },
}

/// A message that could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    /// The message ended early.
    #[error("message truncated")]
    Truncated,
    /// Another version of the format.
    #[error("unsupported message version {0}")]
    Version(u8),
    /// An unknown kind byte.
    #[error("unknown message kind {0}")]
    Kind(u8),
    /// A sequence range whose count disagrees with its updates.
    #[error("update range {first}..={last} does not match {count} updates")]
    Range { first: u64, last: u64, count: usize },
}

impl Envelope {
    /// The node that sent the message.
    pub fn node(&self) -> NodeId {
        match self {
            Envelope::Update { node, .. }
            | Envelope::Awareness { node, .. }
            | Envelope::AwarenessQuery { node }
            | Envelope::Heartbeat { node }
            | Envelope::Leaving { node } => *node,
        }
    }

    /// Encodes the message.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(32);
        out.put_u8(VERSION);
        match self {
            Envelope::Update {
                node,
                first_seq,
                last_seq,
                updates,
            } => {
                out.put_u8(0);
                out.put_u64(node.0);
                out.put_u64(*first_seq);
                out.put_u64(*last_seq);
                out.put_u32(u32::try_from(updates.len()).unwrap_or(u32::MAX));
                for update in updates {
                    out.put_u32(u32::try_from(update.len()).unwrap_or(u32::MAX));
                    out.put_slice(update);
                }
            }
            Envelope::Awareness { node, update } => {
                out.put_u8(1);
                out.put_u64(node.0);
                out.put_slice(update);
            }
            Envelope::AwarenessQuery { node } => {
                out.put_u8(2);
                out.put_u64(node.0);
            }
            Envelope::Heartbeat { node } => {
                out.put_u8(3);
                out.put_u64(node.0);
            }
            Envelope::Leaving { node } => {
                out.put_u8(4);
                out.put_u64(node.0);
            }
        }
        out.freeze()
    }

    /// Decodes a message.
    pub fn decode(mut bytes: Bytes) -> Result<Self, WireError> {
        let version = take_u8(&mut bytes)?;
        if version != VERSION {
            return Err(WireError::Version(version));
        }
        let kind = take_u8(&mut bytes)?;
        let node = NodeId(take_u64(&mut bytes)?);
        Ok(match kind {
            0 => {
                let first_seq = take_u64(&mut bytes)?;
                let last_seq = take_u64(&mut bytes)?;
                let count = take_u32(&mut bytes)? as usize;
                let span = last_seq.checked_sub(first_seq).map(|d| d.saturating_add(1));
                if first_seq == 0 || span != Some(count as u64) {
                    return Err(WireError::Range {
                        first: first_seq,
                        last: last_seq,
                        count,
                    });
                }
                let mut updates = Vec::with_capacity(count.min(1024));
                for _ in 0..count {
                    let len = take_u32(&mut bytes)? as usize;
                    if bytes.remaining() < len {
                        return Err(WireError::Truncated);
                    }
                    updates.push(bytes.split_to(len));
                }
                Envelope::Update {
                    node,
                    first_seq,
                    last_seq,
                    updates,
                }
            }
            1 => Envelope::Awareness {
                node,
                update: bytes,
            },
            2 => Envelope::AwarenessQuery { node },
            3 => Envelope::Heartbeat { node },
            4 => Envelope::Leaving { node },
            other => return Err(WireError::Kind(other)),
        })
    }
}

fn take_u8(bytes: &mut Bytes) -> Result<u8, WireError> {
    if bytes.remaining() < 1 {
        return Err(WireError::Truncated);
    }
    Ok(bytes.get_u8())
}

fn take_u32(bytes: &mut Bytes) -> Result<u32, WireError> {
    if bytes.remaining() < 4 {
        return Err(WireError::Truncated);
    }
    Ok(bytes.get_u32())
}

fn take_u64(bytes: &mut Bytes) -> Result<u64, WireError> {
    if bytes.remaining() < 8 {
        return Err(WireError::Truncated);
    }
    Ok(bytes.get_u64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips() {
        let node = NodeId(0xfeed);
        for envelope in [
            Envelope::Update {
                node,
                first_seq: 7,
                last_seq: 9,
                updates: vec![
                    Bytes::from_static(b"a"),
                    Bytes::new(),
                    Bytes::from_static(b"ccc"),
                ],
            },
            Envelope::Awareness {
                node,
                update: Bytes::from_static(b"\x01\x02"),
            },
            Envelope::AwarenessQuery { node },
            Envelope::Heartbeat { node },
            Envelope::Leaving { node },
        ] {
            assert_eq!(Envelope::decode(envelope.encode()), Ok(envelope.clone()));
            assert_eq!(envelope.node(), node);
        }
    }

    #[test]
    fn bad_messages_are_errors() {
        let good = Envelope::Update {
            node: NodeId(1),
            first_seq: 1,
            last_seq: 2,
            updates: vec![Bytes::from_static(b"x"), Bytes::from_static(b"y")],
        }
        .encode();
        for cut in 0..good.len() {
            assert!(Envelope::decode(good.slice(..cut)).is_err(), "cut at {cut}");
        }
        assert_eq!(
            Envelope::decode(Bytes::from_static(&[2, 0])),
            Err(WireError::Version(2))
        );
        let mut kind = good.to_vec();
        kind[1] = 9;
        assert_eq!(Envelope::decode(Bytes::from(kind)), Err(WireError::Kind(9)));
        let range = Envelope::Update {
            node: NodeId(1),
            first_seq: 5,
            last_seq: 4,
            updates: vec![],
        }
        .encode();
        assert!(matches!(
            Envelope::decode(range),
            Err(WireError::Range { .. })
        ));
    }
}
