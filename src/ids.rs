//! Plain validated identifiers shared across modules: a leaf (it imports nothing of the crate),
//! so that the store, the rooms, the agent and the HTTP edge can all name a room without
//! depending on each other. Owns only parsing and printing ids; never what they identify.
//! The old paths (`crate::room::RoomName`, `crate::room::InvalidRoomName`) are re-exports.

use std::fmt;

/// Longest room name accepted.
pub const MAX_ROOM_NAME: usize = 128;

/// A room name: 1–128 characters of `[A-Za-z0-9._-]` (docs/protocol.md). Constructing one is the only
/// way a name reaches the room registry or the store.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RoomName(String);

/// A refused room name.
#[derive(Debug, thiserror::Error)]
#[error("room names are 1-128 characters of A-Z a-z 0-9 . _ -")]
pub struct InvalidRoomName;

impl RoomName {
    /// Validates a room name.
    pub fn parse(name: &str) -> Result<Self, InvalidRoomName> {
        let ok = !name.is_empty()
            && name.len() <= MAX_ROOM_NAME
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if ok {
            Ok(RoomName(name.to_owned()))
        } else {
            Err(InvalidRoomName)
        }
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RoomName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_the_spec_alphabet() {
        for ok in ["a", "team-1", "A.b_c-9", &"x".repeat(128)] {
            assert!(RoomName::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a b", "a/b", "é", "..%2f", &"x".repeat(129), "a\0"] {
            assert!(RoomName::parse(bad).is_err(), "{bad:?}");
        }
    }
}
